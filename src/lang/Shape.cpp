// Shape ops (broadcast, expand_dims, reshape, permute, sub-tiles) and dot.
#include <algorithm>

#include "lang/Internal.h"

namespace tessera::lang {

using detail::fail;
using detail::kb;

namespace {
Val tile_of(const Operand& x, const char* what, const SrcLoc& loc) {
  Val v = detail::value_of(x, std::nullopt, loc);
  if (!v.is_tile()) fail(loc, std::string(what) + " needs a tile, got " + v.type().str());
  return v;
}
}  // namespace

Val broadcast_to(const Operand& x, Shape shape, SrcLoc loc) {
  Val v = detail::value_of(x, std::nullopt, loc);
  return detail::broadcast_value(v, shape, "broadcast_to", loc);
}

Val expand_dims(const Operand& x, int axis, SrcLoc loc) {
  Val v = tile_of(x, "expand_dims", loc);
  int a = axis < 0 ? axis + v.rank() + 1 : axis;
  if (a < 0 || a > v.rank())
    fail(loc, "expand_dims: axis " + std::to_string(axis) + " is out of range for rank " +
                  std::to_string(v.rank()));
  Shape s = v.shape();
  s.insert(s.begin() + a, Dim(1));
  return kb(loc).emit(OpKind::ExpandDims, {v}, Type::tile(v.dtype(), s), {{"axis", int64_t{a}}}, loc);
}

Val reshape(const Operand& x, Shape shape, SrcLoc loc) {
  Val v = tile_of(x, "reshape", loc);
  if (shape.empty()) fail(loc, "reshape needs a non-empty shape" + detail::scalar_hint(v.type()));
  if (shape_is_static(shape) && shape_is_static(v.shape()) &&
      shape_numel(shape) != shape_numel(v.shape()))
    fail(loc, "reshape of " + v.type().str() + " to " + shape_str(shape) +
                  " changes the number of elements");
  auto has_expr = [](const Shape& s) { return std::any_of(s.begin(), s.end(), [](const Dim& d) { return d.is_expr(); }); };
  if ((!shape_is_static(shape) || !shape_is_static(v.shape())) && !has_expr(shape) && !has_expr(v.shape())) {
    // Symbolic dims (shape expressions are checked once the constexprs bind): the multisets of symbols must agree and the static parts must match.
    auto split = [](const Shape& s, std::vector<std::string>& syms) {
      int64_t n = 1;
      for (const Dim& d : s) d.is_static() ? void(n *= d.value) : syms.push_back(d.symbol);
      std::sort(syms.begin(), syms.end());
      return n;
    };
    std::vector<std::string> a, b;
    if (split(shape, a) != split(v.shape(), b) || a != b)
      fail(loc, "reshape of " + v.type().str() + " to " + shape_str(shape) +
                    " changes the number of elements");
  }
  return kb(loc).emit(OpKind::Reshape, {v}, Type::tile(v.dtype(), shape), {}, loc);
}

Val permute(const Operand& x, std::vector<int64_t> dims, SrcLoc loc) {
  Val v = tile_of(x, "permute", loc);
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  bool ok = static_cast<int>(dims.size()) == v.rank();
  for (size_t i = 0; ok && i < sorted.size(); ++i) ok = sorted[i] == static_cast<int64_t>(i);
  if (!ok)
    fail(loc, "permute dims " + attr_str(dims) + " are not a permutation of 0.." +
                  std::to_string(v.rank() - 1));
  Shape s;
  for (int64_t d : dims) s.push_back(v.shape()[static_cast<size_t>(d)]);
  return kb(loc).emit(OpKind::Permute, {v}, Type::tile(v.dtype(), s), {{"dims", dims}}, loc);
}

Val transpose(const Operand& x, SrcLoc loc) {
  Val v = tile_of(x, "transpose", loc);
  if (v.rank() != 2) fail(loc, "transpose needs a 2-D tile, got " + v.type().str());
  return permute(v, {1, 0}, loc);
}

Val Val::T(SrcLoc loc) const { return transpose(*this, loc); }

Val extract_tile(const Operand& x, Shape sub_shape, const std::vector<Operand>& index, SrcLoc loc) {
  Val v = tile_of(x, "extract_tile", loc);
  if (static_cast<int>(sub_shape.size()) != v.rank() || static_cast<int>(index.size()) != v.rank())
    fail(loc, "extract_tile from " + v.type().str() + " needs a rank-" + std::to_string(v.rank()) +
                  " sub-shape and " + std::to_string(v.rank()) + " indices");
  for (size_t i = 0; i < sub_shape.size(); ++i) {
    const Dim &s = sub_shape[i], &d = v.shape()[i];
    if (s.is_static() && d.is_static() && (s.value <= 0 || d.value % s.value != 0))
      fail(loc, "extract_tile: sub-tile " + shape_str(sub_shape) + " does not divide " + v.type().str());
  }
  std::vector<Val> ops = {v};
  for (const Operand& o : index) ops.push_back(detail::index_value(o, "extract_tile index", loc));
  return kb(loc).emit(OpKind::ExtractTile, ops, Type::tile(v.dtype(), sub_shape), {}, loc);
}

Val insert_tile(const Operand& x, const Operand& sub, const std::vector<Operand>& index, SrcLoc loc) {
  Val v = tile_of(x, "insert_tile", loc);
  Val s = detail::value_of(sub, v.dtype(), loc);
  if (!s.is_tile() || s.rank() != v.rank() || s.dtype() != v.dtype())
    fail(loc, "insert_tile of " + s.type().str() + " into " + v.type().str() +
                  " needs a sub-tile of the same rank and element type");
  if (static_cast<int>(index.size()) != v.rank())
    fail(loc, "insert_tile needs " + std::to_string(v.rank()) + " indices, got " +
                  std::to_string(index.size()));
  std::vector<Val> ops = {v, s};
  for (const Operand& o : index) ops.push_back(detail::index_value(o, "insert_tile index", loc));
  return kb(loc).emit(OpKind::InsertTile, ops, v.type(), {}, loc);
}

namespace {
std::optional<ScalarKind> default_acc(ScalarKind in) {
  switch (in) {
    case ScalarKind::F8E4M3: case ScalarKind::F8E5M2: case ScalarKind::F16:
    case ScalarKind::BF16: case ScalarKind::F32: return ScalarKind::F32;
    case ScalarKind::F64: return ScalarKind::F64;
    case ScalarKind::I8: case ScalarKind::U8: return ScalarKind::I32;
    default: return std::nullopt;
  }
}
bool acc_allowed(ScalarKind in, ScalarKind acc) {
  if (default_acc(in) == acc) return true;
  return (in == ScalarKind::F16 && acc == ScalarKind::F16) ||
         (in == ScalarKind::U8 && acc == ScalarKind::U32);
}
}  // namespace

Val dot(const Operand& a, const Operand& b, std::optional<Operand> acc, SrcLoc loc) {
  Val x = tile_of(a, "dot", loc), y = tile_of(b, "dot", loc);
  if (x.rank() != 2 || y.rank() != 2)
    fail(loc, "dot needs 2-D tiles, got " + x.type().str() + " and " + y.type().str());
  if (x.dtype() != y.dtype())
    fail(loc, "dot operands have different element types " + x.type().str() + " and " + y.type().str());
  if (!(x.shape()[1] == y.shape()[0]))
    fail(loc, "dot: inner dims differ: a is " + shape_str(x.shape()) + ", b is " + shape_str(y.shape()));
  auto def = default_acc(x.dtype());
  if (!def) fail(loc, "dot does not support " + std::string(scalar_name(x.dtype())) + " inputs");
  Shape out = {x.shape()[0], y.shape()[1]};
  Val c = acc ? detail::value_of(*acc, *def, loc) : zeros(out, *def, loc);
  if (!acc_allowed(x.dtype(), c.dtype()))
    fail(loc, "dot of " + std::string(scalar_name(x.dtype())) + " inputs cannot accumulate in " +
                  std::string(scalar_name(c.dtype())));
  if (c.is_tile() && c.shape() != out)
    fail(loc, "dot: accumulator " + c.type().str() + " does not match the result shape " + shape_str(out));
  c = detail::broadcast_value(c, out, "dot", loc);
  return kb(loc).emit(OpKind::Dot, {x, y, c}, c.type(), {}, loc);
}

}  // namespace tessera::lang
