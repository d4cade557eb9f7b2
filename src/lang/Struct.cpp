// The Struct layer in the language: shared buffers, async copies, pipes and warp roles
// (docs/language.md, "Struct"). Calls that the verifier would reject for their types or their
// place fail here at the user's call site; the kernel-wide rules (a pipe used inside and
// outside roles, unbalanced pushes and pops) are reported by finish() at the offending call.
#include "ir/Struct.h"
#include "lang/Internal.h"

namespace tessera::lang {

using detail::fail;
using detail::kb;

namespace {

void require_top_level(KernelBuilder& b, const char* what, const SrcLoc& loc) {
  if (!b.at_top_level())
    fail(loc, std::string(what) + " must be called at the top level of the kernel body (not inside "
                                  "for_range, if_, while_ or warp_role): its storage lives for the whole program");
}

void check_shape(const Shape& s, const std::string& what, const SrcLoc& loc) {
  if (s.empty()) fail(loc, what + " needs at least one dim");
  for (const Dim& d : s)
    if (d.is_static() && d.value <= 0) fail(loc, what + " dims must be positive, got " + shape_str(s));
}

// Slot indices of buffer `buf` for a tile of rank `tile_rank`.
std::vector<Val> slot_indices(const Value* buf, const std::vector<Operand>& slot, int tile_rank, const char* what,
                              const SrcLoc& loc) {
  int want = buf->type.rank() - tile_rank;
  if (static_cast<int>(slot.size()) != want)
    fail(loc, std::string(what) + " of " + buf->type.str() + " with a rank-" + std::to_string(tile_rank) + " tile needs " +
                  std::to_string(want) + (want == 1 ? " slot index, got " : " slot indices, got ") +
                  std::to_string(slot.size()));
  std::vector<Val> out;
  for (const Operand& o : slot) out.push_back(detail::index_value(o, std::string(what) + " slot index", loc));
  return out;
}

}  // namespace

Buffer alloc_shared(ScalarKind dt, Shape shape, const Layout& layout, SrcLoc loc) {
  KernelBuilder& b = kb(loc);
  require_top_level(b, "alloc_shared", loc);
  check_shape(shape, "alloc_shared", loc);
  Type t = Type::buffer(dt, std::move(shape));
  t.layout = layout;
  return Buffer(b.emit(OpKind::Alloc, {}, t, {}, loc).ir());
}

void Buffer::copy(const std::vector<Operand>& slot, const TiledView& src, const std::vector<Operand>& index,
                  std::optional<double> pad, SrcLoc loc) const {
  KernelBuilder& b = kb(loc);
  const Value* view = src.view();
  if (view->type.elem != v_->type.elem)
    fail(loc, "copy of view '" + view->name + "' of " + std::string(scalar_name(view->type.elem)) + " into " +
                  v_->type.str() + " (the element types must match)");
  int r = view->type.rank();
  if (r > v_->type.rank() || struct_slot_shape(v_->type, r) != src.shape())
    fail(loc, "copy of tiles of shape " + shape_str(src.shape()) + " into " + v_->type.str() +
                  ": a slot holds the buffer's trailing dims " +
                  (r > v_->type.rank() ? std::string("(the view has a higher rank)")
                                       : shape_str(struct_slot_shape(v_->type, r))));
  std::vector<Val> ops = {Val(v_), Val(const_cast<Value*>(view))};
  for (Val& s : slot_indices(v_, slot, r, "copy", loc)) ops.push_back(s);
  for (Val& i : detail::tile_indices(view, index, "copy", loc)) ops.push_back(i);
  b.emit_void(OpKind::AsyncCopy, ops, detail::pad_attr(view->type.elem, pad, loc), loc);
}

Val Buffer::read(const std::vector<Operand>& slot, SrcLoc loc) const {
  KernelBuilder& b = kb(loc);
  int r = v_->type.rank() - static_cast<int>(slot.size());
  if (r < 1)
    fail(loc, "read of " + v_->type.str() + " with " + std::to_string(slot.size()) +
                  " slot indices leaves no tile (give fewer indices than the buffer's rank)");
  std::vector<Val> ops = {Val(v_)};
  for (Val& s : slot_indices(v_, slot, r, "read", loc)) ops.push_back(s);
  return b.emit(OpKind::BufferRead, ops, Type::tile(v_->type.elem, struct_slot_shape(v_->type, r)), {}, loc);
}

void Buffer::write(const std::vector<Operand>& slot, const Operand& value, SrcLoc loc) const {
  KernelBuilder& b = kb(loc);
  int r = v_->type.rank() - static_cast<int>(slot.size());
  if (r < 1)
    fail(loc, "write to " + v_->type.str() + " with " + std::to_string(slot.size()) +
                  " slot indices leaves no tile (give fewer indices than the buffer's rank)");
  Shape want = struct_slot_shape(v_->type, r);
  Val x = detail::value_of(value, v_->type.elem, loc);
  if (x.dtype() != v_->type.elem)
    fail(loc, "write of a " + x.type().str() + " into " + v_->type.str() + " (convert with .to())");
  x = detail::broadcast_value(x, want, "write", loc);
  std::vector<Val> ops = {Val(v_), x};
  for (Val& s : slot_indices(v_, slot, r, "write", loc)) ops.push_back(s);
  b.emit_void(OpKind::BufferWrite, ops, {}, loc);
}

void async_wait(SrcLoc loc) { kb(loc).emit_void(OpKind::AsyncWait, {}, {}, loc); }

Pipe pipe(ScalarKind dt, Shape slot_shape, Dim stages, SrcLoc loc) {
  KernelBuilder& b = kb(loc);
  require_top_level(b, "pipe", loc);
  check_shape(slot_shape, "pipe slot shape", loc);
  if (stages.is_static() && stages.value <= 0) fail(loc, "pipe needs at least one stage, got " + stages.str());
  for (const std::string& n : dim_names(stages))
    if (!b.kernel().find_constexpr(n)) fail(loc, "pipe stages '" + stages.symbol + "' names '" + n + "', which is not a constexpr of this kernel");
  Shape s = {stages};
  s.insert(s.end(), slot_shape.begin(), slot_shape.end());
  return Pipe(b.emit(OpKind::Pipe, {}, Type::pipe(dt, std::move(s)), {}, loc).ir());
}

namespace {

void check_push_role(KernelBuilder& b, const SrcLoc& loc) {
  if (b.role() == "consumer") fail(loc, "push inside warp_role(consumer): only producers push pipes");
}

}  // namespace

void Pipe::push(const TiledView& src, const std::vector<Operand>& index, std::optional<double> pad,
                SrcLoc loc) const {
  KernelBuilder& b = kb(loc);
  check_push_role(b, loc);
  const Value* view = src.view();
  if (view->type.elem != v_->type.elem || src.shape() != slot_shape())
    fail(loc, "push of tiles " + Type::tile(view->type.elem, src.shape()).str() + " of view '" + view->name +
                  "' into " + v_->type.str() + " (a slot holds " + Type::tile(v_->type.elem, slot_shape()).str() + ")");
  std::vector<Val> ops = {Val(v_), Val(const_cast<Value*>(view))};
  for (Val& i : detail::tile_indices(view, index, "push", loc)) ops.push_back(i);
  b.emit_void(OpKind::PipePush, ops, detail::pad_attr(view->type.elem, pad, loc), loc);
}

void Pipe::push(const Operand& tile, SrcLoc loc) const {
  KernelBuilder& b = kb(loc);
  check_push_role(b, loc);
  Val x = detail::value_of(tile, v_->type.elem, loc);
  if (x.dtype() != v_->type.elem)
    fail(loc, "push of a " + x.type().str() + " into " + v_->type.str() + " (convert with .to())");
  x = detail::broadcast_value(x, slot_shape(), "push", loc);
  b.emit_void(OpKind::PipePush, {Val(v_), x}, {}, loc);
}

Val Pipe::pop(SrcLoc loc) const {
  KernelBuilder& b = kb(loc);
  if (b.role() == "producer") fail(loc, "pop inside warp_role(producer): only consumers pop pipes");
  return b.emit(OpKind::PipePop, {Val(v_)}, Type::tile(v_->type.elem, slot_shape()), {}, loc);
}

void warp_role(Role role, const std::function<void()>& body, SrcLoc loc) {
  kb(loc).warp_role_region(role == Role::producer ? "producer" : "consumer", body, loc);
}

void warp_role(const std::string& role, const std::function<void()>& body, SrcLoc loc) {
  kb(loc).warp_role_region(role, body, loc);
}

}  // namespace tessera::lang
