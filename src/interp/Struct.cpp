// The Struct layer's sequential meaning (docs/semantics.md, "Struct"): buffers are arrays, an
// async copy lands at once but counts as in flight until the next async_wait, a pipe is a FIFO
// holding at most STAGES tiles, and warp_role regions run where they stand, in program order.
// So a Struct program computes what the Lite program with plain loads computes, and every
// misuse that would race or deadlock on hardware is a located error here.
#include "interp/Exec.h"
#include "ir/Struct.h"

namespace tessera::interp {

namespace {

[[noreturn]] void fail(const Op& op, const std::string& msg) { throw TesseraError(op.loc, msg); }
[[noreturn]] void fault(const Op& op, StructFault f) { fail(op, struct_fault_message(op, f)); }

std::string at(const Op* op) {
  if (!op || !op->loc.known()) return "";
  return " (at " + std::to_string(op->loc.line) + ":" + std::to_string(op->loc.col) + ")";
}

BufferState& buffer(Machine& m, const Op& op) {
  auto& bs = m.structs().buffers;
  auto it = bs.find(op.operand(0));
  if (it == bs.end()) fail(op, std::string(op.name()) + " uses a buffer that no 'alloc' of this program made");
  return it->second;
}

PipeState& pipe(Machine& m, const Op& op) {
  auto& ps = m.structs().pipes;
  auto it = ps.find(op.operand(0));
  if (it == ps.end()) fail(op, std::string(op.name()) + " uses a pipe that no 'pipe' op of this program made");
  return it->second;
}

std::vector<int64_t> static_dims(const Op& op, const Shape& s) {
  for (const Dim& d : s)
    if (!d.is_static()) fail(op, std::string(op.name()) + " has the unbound dim '" + d.symbol + "'");
  return static_shape(s);
}

// The elements of one buffer slot: flat offset of its first element and its element count.
struct Slot {
  int64_t offset = 0, numel = 1;
  std::vector<int64_t> index;
};

// Slot (indices at operands first...) of the buffer for tiles of rank `tile_rank`.
Slot slot_of(const Machine& m, const Op& op, size_t first, int tile_rank) {
  const Type& bt = op.operand(0)->type;
  std::vector<int64_t> dims = static_dims(op, bt.shape);
  size_t nslots = dims.size() - static_cast<size_t>(tile_rank);
  if (op.operands.size() < first + nslots) fail(op, std::string(op.name()) + " needs one index per slot dim");
  Slot s;
  for (size_t d = nslots; d < dims.size(); ++d) s.numel *= dims[d];
  int64_t flat = 0;
  bool in = true;
  for (size_t d = 0; d < nslots; ++d) {
    const RValue& iv = m.val(op, op.operand(first + d));
    if (iv.floats() || iv.numel() != 1) fail(op, std::string(op.name()) + " slot indices must be integer scalars");
    int64_t i = iv.i[0];
    s.index.push_back(i);
    in &= i >= 0 && i < dims[d];
    flat = flat * dims[d] + i;
  }
  if (!in) fault(op, StructFault::SlotRange);
  s.offset = flat * s.numel;
  return s;
}

void copy_elems(RValue& dst, int64_t doff, const RValue& src, int64_t soff, int64_t n) {
  if (dst.floats()) std::copy_n(src.f.begin() + soff, n, dst.f.begin() + doff);
  else std::copy_n(src.i.begin() + soff, n, dst.i.begin() + doff);
}

// An element of `s` still being filled by an async_copy: the copy, else null.
const Op* pending_in(const BufferState& b, const Slot& s) {
  for (int64_t e = s.offset; e < s.offset + s.numel; ++e)
    if (b.pending[e]) return b.pending[e];
  return nullptr;
}

std::string slot_desc(const Op& op, const Slot& s) {
  return "slot " + coords_str(s.index) + " of buffer " + struct_value_desc(op.operand(0));
}

void in_flight(const Op& op, const Slot& s, const Op* copy) {
  fail(op, "'" + std::string(op.name()) + "' " + (op.kind == OpKind::BufferRead ? "of " : "into ") + slot_desc(op, s) +
               " while the async_copy" + at(copy) + " into it is in flight: wait for it (async_wait) first");
}

}  // namespace

void exec_struct(Machine& m, const Op& op) {
  StructState& st = m.structs();
  switch (op.kind) {
    case OpKind::Alloc: {
      const Type& t = op.result()->type;
      BufferState b;
      b.data = RValue::make(t.elem, false, static_dims(op, t.shape));
      b.written.assign(static_cast<size_t>(b.data.numel()), 0);
      b.pending.assign(static_cast<size_t>(b.data.numel()), nullptr);
      st.buffers[op.result()] = std::move(b);
      return;
    }
    case OpKind::AsyncCopy: {
      BufferState& b = buffer(m, op);
      int rank = op.operand(1)->type.rank();
      size_t nslots = static_cast<size_t>(op.operand(0)->type.rank() - rank);
      Slot s = slot_of(m, op, 2, rank);
      if (const Op* c = pending_in(b, s)) in_flight(op, s, c);
      Shape tshape = struct_slot_shape(op.operand(0)->type, rank);
      RValue t = load_view_tile(m, op, 1, 2 + nslots, static_dims(op, tshape));
      copy_elems(b.data, s.offset, t, 0, s.numel);
      for (int64_t e = s.offset; e < s.offset + s.numel; ++e) {
        b.written[e] = 1;
        b.pending[e] = &op;
      }
      return;
    }
    case OpKind::AsyncWait:
      for (auto& [v, b] : st.buffers) std::fill(b.pending.begin(), b.pending.end(), nullptr);
      return;
    case OpKind::BufferRead: {
      BufferState& b = buffer(m, op);
      const Type& rt = op.result()->type;
      Slot s = slot_of(m, op, 1, rt.rank());
      if (const Op* c = pending_in(b, s)) in_flight(op, s, c);
      for (int64_t e = s.offset; e < s.offset + s.numel; ++e)
        if (!b.written[e])
          fail(op, "'buffer_read' of " + slot_desc(op, s) + ", which nothing has written (element " +
                       index_str(b.data.shape, e) + ")");
      RValue r = RValue::make(rt.elem, false, static_dims(op, rt.shape));
      copy_elems(r, 0, b.data, s.offset, s.numel);
      m.set(op.result(), std::move(r));
      return;
    }
    case OpKind::BufferWrite: {
      BufferState& b = buffer(m, op);
      const RValue& v = m.val(op, op.operand(1));
      Slot s = slot_of(m, op, 2, op.operand(1)->type.rank());
      if (const Op* c = pending_in(b, s)) in_flight(op, s, c);
      if (v.numel() != s.numel || v.elem != b.data.elem) fail(op, "buffer_write value does not match the slot");
      copy_elems(b.data, s.offset, v, 0, s.numel);
      std::fill(b.written.begin() + s.offset, b.written.begin() + s.offset + s.numel, 1);
      return;
    }
    case OpKind::Pipe: {
      PipeState p;
      p.op = &op;
      p.stages = static_dims(op, op.result()->type.shape).at(0);
      st.pipes[op.result()] = std::move(p);
      return;
    }
    case OpKind::PipePush: {
      PipeState& p = pipe(m, op);
      if (static_cast<int64_t>(p.tiles.size()) >= p.stages) fault(op, StructFault::PipeFull);
      const Type& pt = op.operand(0)->type;
      if (op.operand(1)->type.is_view()) {
        p.tiles.push_back(load_view_tile(m, op, 1, 2, static_dims(op, struct_slot_shape(pt, 0))));
      } else {
        RValue v = m.val(op, op.operand(1));
        v.scalar = false;
        p.tiles.push_back(std::move(v));
      }
      return;
    }
    case OpKind::PipePop: {
      PipeState& p = pipe(m, op);
      if (p.tiles.empty()) fault(op, StructFault::PipeEmpty);
      RValue t = std::move(p.tiles.front());
      p.tiles.pop_front();
      t.shape = static_dims(op, op.result()->type.shape);
      m.set(op.result(), std::move(t));
      return;
    }
    case OpKind::WarpRole: {
      // Sequential meaning: the region runs here, by the whole program (docs/semantics.md).
      std::vector<RValue> out = m.run_region(op.region(0), {});
      if (out.size() != op.results.size())
        fail(op, "warp_role region yields " + std::to_string(out.size()) + " values for " +
                     std::to_string(op.results.size()) + " results");
      for (size_t i = 0; i < out.size(); ++i) m.set(op.results[i], std::move(out[i]));
      return;
    }
    default: fail(op, "interpreter: unexpected op " + std::string(op.name()));
  }
}

void end_program_struct(Machine& m) {
  StructState& st = m.structs();
  // Report the first pipe in program order (the map's order is arbitrary).
  const PipeState* left = nullptr;
  for (const auto& [v, p] : st.pipes)
    if (!p.tiles.empty() && (!left || p.op->loc.line < left->op->loc.line ||
                             (p.op->loc.line == left->op->loc.line && p.op->loc.col < left->op->loc.col)))
      left = &p;
  if (left) fault(*left->op, StructFault::PipeNotEmpty);
  st.buffers.clear();
  st.pipes.clear();
}

}  // namespace tessera::interp
