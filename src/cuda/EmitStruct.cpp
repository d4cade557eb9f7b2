// Struct ops on the cuda backend: the generic lowering, which keeps the sequential meaning of
// docs/semantics.md ("Struct") on every target.
//
//  - Buffers and pipe rings are arrays of the storage type in dynamic shared memory, after the
//    scratch the other ops use (at tsr_struct_base, known when the body is emitted), one region
//    per `alloc` / `pipe` (both stand at the top of the kernel, so each runs once per CTA).
//  - async_copy and pipe_push from a view are plain cooperative copies: thread t copies
//    elements t, t + T, ... with the load_tile bounds check and pad. Every write into a buffer
//    or a ring is bracketed by __syncthreads(), so async_wait has nothing left to wait for
//    (it stays a barrier) and a read never needs one of its own.
//  - A pipe is a ring of STAGES slots with a head and a count that every thread keeps alike
//    (scalars are uniform); a push onto a full ring or a pop from an empty one traps, as does
//    a slot index out of range: the interpreter reports these as located errors.
//  - warp_role regions are run by all threads, in program order: the documented fallback. A
//    warp-specialized lowering (producer warps ahead of the consumers by up to STAGES slots)
//    is the Hopper path's job; it may rely on the rule the interpreter checks, that pushes and
//    pops in program order never overflow or underflow a pipe.
#include "cuda/EmitterInternal.h"
#include "ir/Struct.h"

namespace tessera::cudagen {

namespace {

std::string i64(int64_t v) { return std::to_string(v) + "LL"; }

}  // namespace

void Emitter::place_struct_storage(size_t at) {
  if (struct_smem_ == 0) return;
  // After the scratch, 128-byte aligned (what vector and async-copy paths assume of a base).
  int64_t base = (smem_ + 127) / 128 * 128;
  lines_.insert(lines_.begin() + static_cast<std::ptrdiff_t>(at),
                std::string(static_cast<size_t>(ind_ + 1) * 2, ' ') + "constexpr int64_t tsr_struct_base = " +
                    i64(base) + ";  // buffers and pipe rings, after the scratch");
  line_op_.insert(line_op_.begin() + static_cast<std::ptrdiff_t>(at), nullptr);
  smem_ = base + struct_smem_;
  stats_["struct-smem-bytes"] = struct_smem_;
}

void Emitter::emit_struct(const Op& op) {
  auto storage = [&](const Value* v) {
    if (!shape_is_static(v->type.shape)) fail(op, v->type.str() + " is not static; bind the constexprs first");
    return static_shape(v->type.shape);
  };
  // The region of a new buffer or ring: a typed pointer into the struct part of shared memory.
  auto place = [&](const Value* r, const std::string& hint) {
    int64_t bytes = shape_numel(r->type.shape) * scalar_bytes(r->type.elem);
    std::string n = bind_new(r, hint);
    line(stype(r->type.elem) + "* const " + n + " = reinterpret_cast<" + stype(r->type.elem) +
         "*>(tsr_smem + tsr_struct_base + " + i64(struct_smem_) + ");");
    struct_smem_ += (bytes + 127) / 128 * 128;
    return n;
  };
  auto trap_unless = [&](const std::string& cond, const char* why) {
    line("if (!(" + cond + ")) __trap();  // " + why);
  };
  // Slot (operands first...) of buffer operand 0 for tiles of rank `tile_rank`: its element
  // offset (range-checked).
  auto slot_offset = [&](size_t first, int tile_rank) {
    std::vector<int64_t> dims = storage(op.operand(0));
    size_t nslots = dims.size() - static_cast<size_t>(tile_rank);
    int64_t slot = 1;
    for (size_t d = nslots; d < dims.size(); ++d) slot *= dims[d];
    std::string flat = "0LL", ok = "true";
    for (size_t d = 0; d < nslots; ++d) {
      std::string i = "int64_t(" + nm(op.operand(first + d)) + ")";
      ok += " && " + i + " >= 0 && " + i + " < " + i64(dims[d]);
      flat = "(" + flat + ") * " + i64(dims[d]) + " + " + i;
    }
    if (nslots) trap_unless(ok, "slot index out of range");
    return "(" + flat + ") * " + i64(slot);
  };
  // Thread t copies elements t, t + T, ... of tile (operands first...) of view operand
  // `view_i` into `dst` (storage type), padding as load_tile does; barriers on both sides.
  auto copy_from_view = [&](size_t view_i, size_t first, const std::vector<int64_t>& S, const std::string& dst) {
    const Value* view = op.operand(view_i);
    const ViewInfo& vi = view_of(op, view);
    ScalarKind t = view->type.elem;
    int R = view->type.rank();
    std::string pad = stype(t) + "(" + store_conv(t, lit(t, op.has_attr("pad") ? op.attr_number("pad") : 0.0)) + ")";
    int64_t n = 1;
    for (int64_t d : S) n *= d;
    barrier();
    open("{");
    std::vector<std::string> o(R);
    for (int d = 0; d < R; ++d) {
      o[d] = fresh("o");
      line("const int64_t " + o[d] + " = int64_t(" + nm(op.operand(first + d)) + ") * " + i64(S[d]) + ";");
    }
    std::string e = fresh("e");
    open("for (int64_t " + e + " = tsr_tid; " + e + " < " + i64(n) + "; " + e + " += tsr_nthreads) {");
    std::vector<std::string> c = coords(e, S);
    std::string ok, off;
    for (int d = 0; d < R; ++d) {
      std::string g = "(" + o[d] + " + " + c[d] + ")";
      ok += (d ? " && " : "") + g + " >= 0 && " + g + " < " + vi.dims[d];
      off += (d ? " + " : "") + g + " * " + vi.strides[d];
    }
    line(dst + "[" + e + "] = (" + ok + ") ? " + vi.ptr + "[" + off + "] : " + pad + ";");
    close();
    close();
    barrier();
  };
  // Every thread writes the elements of register tile `v` it owns into `dst`; barriers on both
  // sides.
  auto copy_from_tile = [&](const Value* v, const std::string& dst) {
    ScalarKind t = v->type.elem;
    Layout L = layout_of(v);
    barrier();
    slots(L, [&](const std::string& s) {
      line("if (" + owner_expr(L, s) + ") " + dst + "[" + elem_expr(L, s) + "] = " + store_conv(t, nm(v) + "[" + s + "]") + ";");
    });
    barrier();
  };
  // A register tile result read from `src` (storage type); the writes before it ended with a barrier.
  auto read_into = [&](const Value* r, const std::string& src) {
    std::string n = declare(op, r);
    ScalarKind t = r->type.elem;
    gather_into(r, n, [&](const std::string& e) { return load_conv(t, src + "[" + e + "]"); });
  };

  switch (op.kind) {
    case OpKind::Alloc:
      storage(op.result());
      place(op.result(), "buf");
      return;
    case OpKind::Pipe: {
      auto S = storage(op.result());
      std::string n = place(op.result(), "pipe");
      line("int64_t " + n + "_head = 0, " + n + "_count = 0;  // " + std::to_string(S[0]) + " stages");
      return;
    }
    case OpKind::AsyncWait:
      barrier();
      return;
    case OpKind::AsyncCopy: {
      const Value* buf = op.operand(0);
      int rank = op.operand(1)->type.rank();
      size_t nslots = static_cast<size_t>(buf->type.rank() - rank);
      std::string off = slot_offset(2, rank);
      open("{");
      std::string dst = fresh("dst");
      line(stype(buf->type.elem) + "* const " + dst + " = " + nm(buf) + " + " + off + ";");
      copy_from_view(1, 2 + nslots, static_shape(struct_slot_shape(buf->type, rank)), dst);
      close();
      return;
    }
    case OpKind::BufferRead: {
      const Value* r = op.result();
      std::string off = slot_offset(1, r->type.rank());
      std::string src = fresh("src");
      line("const " + stype(r->type.elem) + "* const " + src + " = " + nm(op.operand(0)) + " + " + off + ";");
      read_into(r, src);
      return;
    }
    case OpKind::BufferWrite: {
      const Value* v = op.operand(1);
      std::string off = slot_offset(2, v->type.rank());
      open("{");
      std::string dst = fresh("dst");
      line(stype(v->type.elem) + "* const " + dst + " = " + nm(op.operand(0)) + " + " + off + ";");
      copy_from_tile(v, dst);
      close();
      return;
    }
    case OpKind::PipePush:
    case OpKind::PipePop: {
      const Value* p = op.operand(0);
      auto S = storage(p);
      int64_t slot = shape_numel(p->type.shape) / S[0];
      std::string n = nm(p), st = i64(S[0]), sl = i64(slot);
      if (op.kind == OpKind::PipePop) {
        trap_unless(n + "_count > 0", "pipe_pop from an empty pipe");
        read_into(op.result(), "(" + n + " + " + n + "_head * " + sl + ")");
        line(n + "_head = (" + n + "_head + 1) % " + st + ";");
        line("--" + n + "_count;");
        return;
      }
      trap_unless(n + "_count < " + st, "pipe_push onto a full pipe");
      open("{");
      std::string dst = fresh("dst");
      line(stype(p->type.elem) + "* const " + dst + " = " + n + " + ((" + n + "_head + " + n + "_count) % " + st + ") * " +
           sl + ";");
      const Value* src = op.operand(1);
      if (src->type.is_view()) copy_from_view(1, 2, static_shape(struct_slot_shape(p->type, 0)), dst);
      else copy_from_tile(src, dst);
      close();
      line("++" + n + "_count;");
      return;
    }
    case OpKind::WarpRole: {
      std::vector<std::string> res;
      for (const Value* r : op.results) res.push_back(declare(op, r));
      open("{  // warp_role " + op.attr_string("role") + ": run by every thread, in program order");
      emit_region_into(op, 0, res);
      close();
      count("warp-roles-in-sequence");
      return;
    }
    default: fail(op, "not a Struct op");
  }
}

}  // namespace tessera::cudagen
