// Indices, tile creation, views (load/store), gather/scatter/atomics and raw code.
#include <cmath>

#include "lang/Internal.h"

namespace tessera::lang {

using detail::fail;
using detail::kb;

Val program_id(int axis, SrcLoc loc) {
  if (axis < 0 || axis > 2) fail(loc, "program_id axis must be 0, 1 or 2, got " + std::to_string(axis));
  return kb(loc).emit(OpKind::ProgramId, {}, Type::scalar(ScalarKind::I32), {{"axis", int64_t{axis}}}, loc);
}

Val num_programs(int axis, SrcLoc loc) {
  if (axis < 0 || axis > 2)
    fail(loc, "num_programs axis must be 0, 1 or 2, got " + std::to_string(axis));
  return kb(loc).emit(OpKind::NumPrograms, {}, Type::scalar(ScalarKind::I32), {{"axis", int64_t{axis}}}, loc);
}

Val arange(Dim n, int64_t start, SrcLoc loc) {
  if (n.is_static() && n.value <= 0) fail(loc, "arange needs a positive size, got " + n.str());
  std::vector<NamedAttr> attrs;
  if (start != 0) attrs.push_back({"start", start});
  return kb(loc).emit(OpKind::Arange, {}, Type::tile(ScalarKind::I32, {n}), std::move(attrs), loc);
}

Val full(Shape shape, double value, ScalarKind dt, SrcLoc loc) {
  KernelBuilder& b = kb(loc);
  if (is_int(dt) && !detail::is_integral_value(value))
    fail(loc, "full: " + attr_str(value) + " is not a value of integer type " + std::string(scalar_name(dt)));
  for (const Dim& d : shape)
    if (d.is_static() && d.value <= 0) fail(loc, "full: tile dims must be positive, got " + shape_str(shape));
  Val c = is_int(dt) ? b.constant_int(dt, static_cast<int64_t>(value), loc) : b.constant(dt, value, loc);
  if (shape.empty()) return c;
  return b.emit(OpKind::Splat, {c}, Type::tile(dt, std::move(shape)), {}, loc);
}

Val zeros(Shape shape, ScalarKind dt, SrcLoc loc) { return full(std::move(shape), 0.0, dt, loc); }

Val splat(const Operand& scalar, Shape shape, SrcLoc loc) {
  Val v = detail::value_of(scalar, std::nullopt, loc);
  if (!v.type().is_scalar()) fail(loc, "splat needs a scalar, got " + v.type().str());
  return detail::broadcast_value(v, shape, "splat", loc);
}

namespace detail {

std::vector<Val> tile_indices(const Value* view, const std::vector<Operand>& index, const char* what,
                              const SrcLoc& loc) {
  int rank = view->type.rank();
  if (static_cast<int>(index.size()) != rank)
    fail(loc, std::string(what) + " of view '" + view->name + "' (rank " + std::to_string(rank) +
                  ") needs " + std::to_string(rank) + " tile indices, got " +
                  std::to_string(index.size()));
  std::vector<Val> out;
  for (const Operand& o : index) out.push_back(detail::index_value(o, std::string(what) + " index", loc));
  return out;
}

std::vector<NamedAttr> pad_attr(ScalarKind elem, std::optional<double> pad, const SrcLoc& loc) {
  if (!pad) return {};
  if (is_float(elem)) return {{"pad", *pad}};
  if (!detail::is_integral_value(*pad))
    fail(loc, "pad " + attr_str(*pad) + " is not a value of integer type " + std::string(scalar_name(elem)));
  return {{"pad", static_cast<int64_t>(*pad)}};
}

}  // namespace detail

using detail::pad_attr;
using detail::tile_indices;

namespace {

// Element indices of gather/scatter/atomics: all i32 scalars, or i32 tiles broadcast to one
// shape; returns that shape (empty for scalars).
Shape element_indices(const Value* view, const std::vector<Operand>& index, const char* what,
                      std::vector<Val>& out, const SrcLoc& loc) {
  int rank = view->type.rank();
  if (static_cast<int>(index.size()) != rank)
    fail(loc, std::string(what) + " on view '" + view->name + "' (rank " + std::to_string(rank) +
                  ") needs " + std::to_string(rank) + " indices, got " + std::to_string(index.size()));
  Shape shape;
  for (const Operand& o : index) {
    Val v = detail::value_of(o, ScalarKind::I32, loc);
    if (v.dtype() != ScalarKind::I32)
      fail(loc, std::string(what) + " indices must be i32, got " + v.type().str());
    auto s = detail::broadcast_shapes(shape, v.shape());
    if (!s) fail(loc, std::string(what) + " indices cannot be broadcast together: " + shape_str(shape) +
                          " and " + shape_str(v.shape()));
    shape = *s;
    out.push_back(v);
  }
  for (Val& v : out) v = detail::broadcast_value(v, shape, what, loc);
  return shape;
}

Val mask_value(const std::optional<Operand>& mask, const Shape& shape, const char* what,
               const SrcLoc& loc) {
  Val m = detail::value_of(*mask, ScalarKind::I1, loc);
  if (m.dtype() != ScalarKind::I1) fail(loc, std::string(what) + " mask must be i1, got " + m.type().str());
  return detail::broadcast_value(m, shape, std::string(what) + " mask", loc);
}

Val value_for(const View& v, const Operand& value, const Shape& shape, const char* what,
              const SrcLoc& loc) {
  Val x = detail::value_of(value, v.dtype(), loc);
  if (x.dtype() != v.dtype())
    fail(loc, std::string(what) + " of a " + x.type().str() + " into view '" + v.name() + "' of " +
                  std::string(scalar_name(v.dtype())) + " (convert with .to())");
  return detail::broadcast_value(x, shape, what, loc);
}

Val atomic(const char* kind, const View& v, const Operand& value, const std::vector<Operand>& index,
           const std::optional<Operand>& mask, const SrcLoc& loc) {
  std::string what = std::string("atomic_") + kind;
  std::vector<Val> idx;
  Shape shape = element_indices(v.ir(), index, what.c_str(), idx, loc);
  Val x = detail::value_of(value, v.dtype(), loc);
  if (x.dtype() != v.dtype())
    fail(loc, what + " of a " + x.type().str() + " into view '" + v.name() + "' of " +
                  std::string(scalar_name(v.dtype())) + " (convert with .to())");
  if (shape.empty() && x.is_tile()) {
    auto s = detail::broadcast_shapes(shape, x.shape());
    shape = *s;
    for (Val& i : idx) i = detail::broadcast_value(i, shape, what, loc);
  }
  x = detail::broadcast_value(x, shape, what, loc);
  std::vector<Val> ops = {Val(v.ir()), x};
  ops.insert(ops.end(), idx.begin(), idx.end());
  if (mask) ops.push_back(mask_value(mask, shape, what.c_str(), loc));
  return kb(loc).emit(OpKind::Atomic, ops, x.type(), {{"kind", std::string(kind)}}, loc);
}

}  // namespace

Val TiledView::load(const std::vector<Operand>& index, std::optional<double> pad, SrcLoc loc) const {
  KernelBuilder& b = kb(loc);
  std::vector<Val> ops = {Val(view_)};
  for (Val& i : tile_indices(view_, index, "load", loc)) ops.push_back(i);
  return b.emit(OpKind::LoadTile, ops, Type::tile(view_->type.elem, shape_),
                pad_attr(view_->type.elem, pad, loc), loc);
}

void TiledView::store(const std::vector<Operand>& index, const Operand& value, SrcLoc loc) const {
  KernelBuilder& b = kb(loc);
  auto idx = tile_indices(view_, index, "store", loc);
  Val x = detail::value_of(value, view_->type.elem, loc);
  if (x.dtype() != view_->type.elem)
    fail(loc, "store of a " + x.type().str() + " into view '" + view_->name + "' of " +
                  std::string(scalar_name(view_->type.elem)) + " (convert with .to())");
  if (x.is_tile() && x.rank() == static_cast<int>(shape_.size()) && x.shape() != shape_ &&
      detail::broadcast_shapes(x.shape(), shape_) != shape_)
    fail(loc, "store of a " + x.type().str() + " into tiles of shape " + shape_str(shape_));
  x = detail::broadcast_value(x, shape_, "store", loc);
  std::vector<Val> ops = {Val(view_), x};
  ops.insert(ops.end(), idx.begin(), idx.end());
  b.emit_void(OpKind::StoreTile, ops, {}, loc);
}

Val gather(const View& v, const std::vector<Operand>& index, std::optional<Operand> mask,
           std::optional<double> pad, SrcLoc loc) {
  std::vector<Val> idx;
  Shape shape = element_indices(v.ir(), index, "gather", idx, loc);
  std::vector<Val> ops = {Val(v.ir())};
  ops.insert(ops.end(), idx.begin(), idx.end());
  if (mask) {
    if (shape.empty()) {
      Val m = detail::value_of(*mask, ScalarKind::I1, loc);
      if (m.is_tile()) fail(loc, "gather with scalar indices needs a scalar mask, got " + m.type().str());
    }
    ops.push_back(mask_value(mask, shape, "gather", loc));
  }
  Type t = shape.empty() ? Type::scalar(v.dtype()) : Type::tile(v.dtype(), shape);
  return kb(loc).emit(OpKind::Gather, ops, t, pad_attr(v.dtype(), pad, loc), loc);
}

void scatter(const View& v, const Operand& value, const std::vector<Operand>& index,
             std::optional<Operand> mask, SrcLoc loc) {
  std::vector<Val> idx;
  Shape shape = element_indices(v.ir(), index, "scatter", idx, loc);
  Val x = value_for(v, value, shape, "scatter", loc);
  std::vector<Val> ops = {Val(v.ir()), x};
  ops.insert(ops.end(), idx.begin(), idx.end());
  if (mask) ops.push_back(mask_value(mask, shape, "scatter", loc));
  kb(loc).emit_void(OpKind::Scatter, ops, {}, loc);
}

Val atomic_add(const View& v, const Operand& value, const std::vector<Operand>& index,
               std::optional<Operand> mask, SrcLoc loc) {
  return atomic("add", v, value, index, mask, loc);
}
Val atomic_max(const View& v, const Operand& value, const std::vector<Operand>& index,
               std::optional<Operand> mask, SrcLoc loc) {
  return atomic("max", v, value, index, mask, loc);
}
Val atomic_min(const View& v, const Operand& value, const std::vector<Operand>& index,
               std::optional<Operand> mask, SrcLoc loc) {
  return atomic("min", v, value, index, mask, loc);
}

Val atomic_cas(const View& v, const Operand& cmp, const Operand& value,
               const std::vector<Operand>& index, SrcLoc loc) {
  std::vector<Val> idx;
  Shape shape = element_indices(v.ir(), index, "atomic_cas", idx, loc);
  Val c = value_for(v, cmp, shape, "atomic_cas", loc);
  Val x = value_for(v, value, shape, "atomic_cas", loc);
  std::vector<Val> ops = {Val(v.ir()), c, x};
  ops.insert(ops.end(), idx.begin(), idx.end());
  return kb(loc).emit(OpKind::AtomicCas, ops, x.type(), {}, loc);
}

std::vector<Val> raw(const std::string& name, const std::vector<Operand>& operands,
                     const std::vector<Type>& result_types, const std::vector<RawBody>& bodies,
                     SrcLoc loc) {
  KernelBuilder& b = kb(loc);
  std::vector<Val> ops;
  for (const Operand& o : operands) {
    Val v = detail::value_of(o, std::nullopt, loc);
    if (!v.type().is_value()) fail(loc, "raw op '" + name + "' operands must be scalars or tiles");
    ops.push_back(v);
  }
  for (const Type& t : result_types)
    if (!t.is_value()) fail(loc, "raw op '" + name + "' results must be scalars or tiles, got " + t.str());
  std::vector<NamedAttr> attrs = {{"name", name}};
  for (const char* backend : {"cpp", "cuda"}) {  // the op table's attribute order
    for (const RawBody& body : bodies)
      if (body.backend == backend) attrs.push_back({backend, body.code});
  }
  for (const RawBody& body : bodies)
    if (body.backend != "cpp" && body.backend != "cuda")
      fail(loc, "raw op '" + name + "': unknown backend '" + body.backend + "' (use cpp or cuda)");
  return b.emit_multi(OpKind::Raw, ops, result_types, std::move(attrs), loc);
}

}  // namespace tessera::lang
