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
//  - Knob struct_cp_async = 1 (a kernel constexpr; absent or 0: the plain copies above):
//    async_copy becomes real asynchronous copies on sm_80+: a barrier (other threads may still
//    be reading the slot: write-after-read), then each thread issues cp.async for its 16-byte
//    chunks of the tile (the slot's rows, which must be whole chunks, so that every chunk is
//    16-byte aligned in shared memory: regions are 128-byte aligned), one commit group, and no
//    barrier after; async_wait becomes cp.async.wait_group 0 (this thread's copies are done)
//    and __syncthreads() (so everyone's are, and visible to every thread). This is right for
//    every program the interpreter accepts: reading, writing or copying into a slot element
//    while a copy into it is in flight is an interpreter error (docs/semantics.md, "Struct"),
//    so a valid program touches the slot only after the async_wait that ends the copy, and
//    that wait is the barrier the plain copy had after it. Chunks that are partly out of
//    bounds read only their in-bounds bytes (src-size; the hardware zero-fills the rest), so
//    this holds only for pad 0 (+0.0): another pad, rows that are not whole 16-byte chunks or
//    an element size that does not divide 16 keep the plain copy for that op. Chunks wholly
//    out of bounds, or whose global address is not 16-byte aligned (a runtime check), are
//    written with plain stores (tsr::struct_copy_chunk), published by the same barrier. The
//    commit groups do not disturb the other cp.async users: program prefetch is off in
//    kernels with Struct ops, and the matmul ring's wait_group counts only ever wait for
//    more (an older group of ours) than they need; none of its loops holds an async_copy.
//  - Knob struct_tma = 1 (a kernel constexpr; absent or 0: the copies above) on sm_90a with TMA
//    (CudaTarget::tma): an async_copy is one TMA box (cp.async.bulk.tensor.2d) when
//    struct_tma_why_not accepts it: a 2-D tile of a 2-D view (a kernel parameter), pad 0 (+0.0:
//    TMA zero-fills what lies outside the view), elements of 1, 2, 4 or 8 bytes, at most 256 rows
//    and 256 columns, rows a multiple of 16 bytes, slots that all start 128-byte aligned (a
//    buffer of one slot, or slots of a multiple of 128 bytes), and a view the kernel does not
//    write (no store, scatter or atomic into it, no raw ops: the threads' stores are not ordered
//    with the TMA's async-proxy reads by the copy's barrier). Any other async_copy keeps the
//    lowering it had (cp.async with struct_cp_async = 1 where that applies, else the plain copy)
//    and `tessera compile --stats` prints a note saying why. The slot is written unswizzled,
//    row-major, as buffer_read reads it (a buffer's `layout` is a hint every backend ignores).
//    Each copy's view, box and swizzle (none) is a tensor map, a kernel parameter the runtime
//    encodes at launch; where it cannot (base not 16-byte aligned, rows not a multiple of 16
//    bytes) the runtime launches the compilation with tma = false, which has no TMA copies. One
//    mbarrier (first in the struct storage, whose base is rounded up to 128 bytes at run time)
//    takes them all: the copy is a proxy fence and a barrier (write-after-read, as for
//    cp.async), then thread 0 announces the box's bytes (mbarrier.expect_tx, no arrival) and
//    issues the box; async_wait is the barrier's one arrival (thread 0), every thread's wait on
//    the phase's parity, the parity flipped, then __syncthreads() (so that no thread arrives
//    for the next phase before all have waited on this one). So a phase holds any number of
//    copies and ends at exactly one async_wait, whatever the loops and branches (every thread
//    runs every async_wait: scalars are uniform), and a loop that copies into the same slot
//    again and again waits on a new phase each time. A tile wholly outside the view (its origin
//    is a multiple of its shape, so one starting below 0 lies wholly below 0) is zeros stored by
//    the threads instead, which async_wait's barrier publishes. At the kernel's end thread 0
//    waits for copies no async_wait ended, so that none lands after the CTA has exited.
//  - A pipe is a ring of STAGES slots with a head and a count that every thread keeps alike
//    (scalars are uniform); a push onto a full ring or a pop from an empty one traps, as does
//    a slot index out of range: the interpreter reports these as located errors.
//  - warp_role regions are run by all threads, in program order: the documented fallback. A
//    warp-specialized lowering (producer warps ahead of the consumers by up to STAGES slots)
//    is the Hopper path's job; it may rely on the rule the interpreter checks, that pushes and
//    pops in program order never overflow or underflow a pipe.
#include "cuda/EmitterInternal.h"
#include "ir/Struct.h"
#include "support/Env.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace tessera::cudagen {

namespace {

std::string i64(int64_t v) { return std::to_string(v) + "LL"; }

}  // namespace

void Emitter::place_struct_storage(size_t at) {
  if (struct_smem_ == 0) return;
  // After the scratch, 128-byte aligned (what vector and async-copy paths assume of a base).
  int64_t base = (smem_ + 127) / 128 * 128;
  std::string decl = "constexpr int64_t tsr_struct_base = " + i64(base) + ";  // buffers and pipe rings, after the scratch";
  if (!struct_tma_.empty()) {
    // TMA boxes land at 128-byte aligned shared addresses, and the dynamic shared memory is
    // only 16-byte aligned (static arrays may precede it): the base is rounded up at run time,
    // within 128 bytes reserved for that.
    decl = "const int64_t tsr_struct_base = " + i64(base) + " + int64_t((0u - tsr::smem_u32(tsr_smem + " + i64(base) +
           ")) & 127u);  // the TMA barrier, buffers and pipe rings, after the scratch, 128-byte aligned in shared memory";
    base += 128;
  }
  lines_.insert(lines_.begin() + static_cast<std::ptrdiff_t>(at), std::string(static_cast<size_t>(ind_ + 1) * 2, ' ') + decl);
  line_op_.insert(line_op_.begin() + static_cast<std::ptrdiff_t>(at), nullptr);
  smem_ = base + struct_smem_;
  stats_["struct-smem-bytes"] = struct_smem_;
}

std::string Emitter::struct_tma_why_not(const Op& copy) const {
  if (tg_.sm != 90 || !tg_.arch_specific) return "TMA copies need sm_90a (this is " + tg_.str() + ")";
  if (!tg_.tma) return "TMA is disabled for this compilation (a view a tensor map cannot describe)";
  const Value *buf = copy.operand(0), *view = copy.operand(1);
  const int R = view->type.rank();
  if (R != 2) return "the view is " + std::to_string(R) + "-D (a TMA copy here is a 2-D box)";
  if (!views_.count(view)) return "the view is not a kernel parameter";
  const double pad = copy.has_attr("pad") ? copy.attr_number("pad") : 0.0;
  if (pad != 0.0 || std::signbit(pad))
    return "pad " + attr_str(*copy.find_attr("pad")) + " (TMA fills out-of-bounds elements with +0)";
  if (!shape_is_static(buf->type.shape)) return "the buffer's shape is not static";
  const std::vector<int64_t> S = static_shape(struct_slot_shape(buf->type, R));
  const int64_t eb = scalar_bytes(view->type.elem), row = S[1] * eb, slot = S[0] * row;
  if (eb != 1 && eb != 2 && eb != 4 && eb != 8) return "elements of " + std::to_string(eb) + " bytes";
  if (S[0] > 256 || S[1] > 256)
    return "the tile is " + std::to_string(S[0]) + " x " + std::to_string(S[1]) + " (a box has at most 256 rows and columns)";
  if (row % 16 != 0) return "a tile row is " + std::to_string(row) + " bytes (TMA boxes need a multiple of 16)";
  if (slot % 128 != 0 && shape_numel(buf->type.shape) * eb != slot)
    return "slots of " + std::to_string(slot) + " bytes do not all start 128-byte aligned";
  // The box is read through the async proxy, which the threads' ordinary stores to the view
  // are not ordered with (the barrier before the copy orders them for the generic proxy only).
  bool written = false, raw = false;
  walk(const_cast<Block&>(*k_.body), [&](Op& o) {
    const OpClass c = o.info().cls;
    raw |= c == OpClass::Raw;
    written |= c == OpClass::Memory && o.kind != OpKind::LoadTile && o.kind != OpKind::Gather && !o.operands.empty() &&
               o.operand(0) == view;
  });
  if (written) return "the kernel also writes the view (the TMA would read it through the async proxy, unordered)";
  if (raw) return "the kernel has raw ops, which may write the view (the TMA would read it through the async proxy)";
  return "";
}

void Emitter::plan_struct_tma(std::vector<std::string>& sig, CudaKernelInfo& info) {
  if (knob("struct_tma") != 1) return;  // a value other than 0 or 1 is an error at the copies
  std::vector<std::string> maps;  // in order of first use
  std::function<void(const Block&)> visit = [&](const Block& b) {
    for (const auto& o : b.ops) {
      if (o->kind == OpKind::AsyncCopy && struct_tma_why_not(*o).empty()) {
        std::vector<int64_t> S = static_shape(struct_slot_shape(o->operand(0)->type, 2));
        std::string m = add_tensor_map(sig, info, o->operand(1), S[1], S[0], 0);
        struct_tma_[o.get()] = m;
        if (std::find(maps.begin(), maps.end(), m) == maps.end()) maps.push_back(m);
      }
      for (const auto& r : o->regions) visit(*r);
    }
  };
  visit(*k_.body);
  if (maps.empty()) return;
  // The barrier first in the struct storage (128 bytes, so that the buffers stay aligned). One
  // arrival a phase, async_wait's: the copies before it only add bytes (mbar_expect_tx), so any
  // number of them, in any control flow, complete in the phase that the next async_wait ends.
  // Every thread executes every async_wait (scalars are uniform), so each keeps the parity.
  struct_smem_ = 128;
  prologue_.push_back("const uint32_t tsr_tma_bar = tsr::smem_u32(tsr_smem + tsr_struct_base);  // Struct TMA copies complete here");
  prologue_.push_back("uint32_t tsr_tma_phase = 0u;  // the parity of its phase (one phase per async_wait)");
  prologue_.push_back("if (tsr_tid == 0) {");
  for (const std::string& m : maps) prologue_.push_back("  tsr::prefetch_tensormap(&" + m + ");");
  prologue_.push_back("  tsr::mbar_init(tsr_tma_bar, 1);");
  prologue_.push_back("  tsr::mbar_init_fence();");
  prologue_.push_back("}");
  prologue_.push_back("__syncthreads();");
}

void Emitter::drain_struct_tma() {
  open("if (tsr_tid == 0) {  // Struct TMA copies that no async_wait ended land before the CTA exits");
  line("tsr::mbar_arrive(tsr_tma_bar);");
  line("tsr::mbar_wait(tsr_tma_bar, tsr_tma_phase);");
  close();
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
  // Constant `v` of kind t as the storage type holds it.
  auto stored = [&](ScalarKind t, double v) { return stype(t) + "(" + store_conv(t, lit(t, v)) + ")"; };
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
  // The view coordinates of tile (operands first...)'s first element, one int64 per dim of S.
  auto tile_origin = [&](size_t first, const std::vector<int64_t>& S) {
    std::vector<std::string> o(S.size());
    for (size_t d = 0; d < S.size(); ++d) {
      o[d] = fresh("o");
      line("const int64_t " + o[d] + " = int64_t(" + nm(op.operand(first + d)) + ") * " + i64(S[d]) + ";");
    }
    return o;
  };
  // Thread t copies elements t, t + T, ... of tile (operands first...) of view operand
  // `view_i` into `dst` (storage type), padding as load_tile does; barriers on both sides.
  auto copy_from_view = [&](size_t view_i, size_t first, const std::vector<int64_t>& S, const std::string& dst) {
    const Value* view = op.operand(view_i);
    const ViewInfo& vi = view_of(op, view);
    ScalarKind t = view->type.elem;
    int R = view->type.rank();
    std::string pad = stored(t, op.has_attr("pad") ? op.attr_number("pad") : 0.0);
    int64_t n = 1;
    for (int64_t d : S) n *= d;
    barrier();
    open("{");
    const std::vector<std::string> o = tile_origin(first, S);
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
  // Knob struct_cp_async (the file comment): async_copy as cp.async, async_wait as a wait.
  const int64_t cp_async_knob = knob("struct_cp_async");
  if ((op.kind == OpKind::AsyncCopy || op.kind == OpKind::AsyncWait) && cp_async_knob != 0 && cp_async_knob != 1)
    fail(op, "struct_cp_async is " + std::to_string(cp_async_knob) + "; it takes 0 (plain copies) or 1 (cp.async)");
  const bool cp_async = cp_async_knob == 1 && tg_.sm >= 80;
  // The cp.async form of copy_from_view, or false (nothing emitted) where it does not apply:
  // a thread copies 16-byte chunks q = t, t + T, ... of the slot (row r = q / CPR, element
  // q * E of the slot), then commits; no barrier after.
  auto cp_async_from_view = [&](size_t view_i, size_t first, const std::vector<int64_t>& S, const std::string& dst) {
    const Value* view = op.operand(view_i);
    const ViewInfo& vi = view_of(op, view);
    const int64_t sz = scalar_bytes(view->type.elem);
    const double pad = op.has_attr("pad") ? op.attr_number("pad") : 0.0;
    const int R = view->type.rank();
    if (R < 1 || static_cast<int>(S.size()) != R || sz < 1 || 16 % sz != 0 || pad != 0.0 || std::signbit(pad))
      return false;
    const int64_t E = 16 / sz, W = S[R - 1];
    if (W % E != 0) return false;
    int64_t rows = 1;
    for (int d = 0; d + 1 < R; ++d) rows *= S[d];
    const int64_t cpr = W / E;
    barrier();  // write-after-read: other threads may still be reading the slot
    open("{  // cp.async, " + std::to_string(cpr) + " chunks of 16 bytes a row; async_wait ends it");
    const std::vector<std::string> o = tile_origin(first, S);
    std::string q = fresh("q");
    // Rolled, as NVVM left it before the chunk's edge cases went out of line (a smaller body it
    // would unroll, for more code and compile time).
    const bool inline_edges = env_flag("TESSERA_CUDA_INLINE_EDGES");
    if (!inline_edges) line("#pragma unroll 1");
    open("for (int64_t " + q + " = tsr_tid; " + q + " < " + i64(rows * cpr) + "; " + q + " += tsr_nthreads) {");
    std::string ok = "true", off;
    if (R > 1) {
      std::string r = fresh("r");
      std::vector<std::string> c = coords(r, std::vector<int64_t>(S.begin(), S.end() - 1));
      if (rows > 1) line("const int64_t " + r + " = " + q + " / " + i64(cpr) + ";  // the chunk's row of the slot");
      for (int d = 0; d + 1 < R; ++d) {
        std::string g = "(" + o[d] + " + " + c[d] + ")";
        ok += " && " + g + " >= 0 && " + g + " < " + vi.dims[d];
        off += g + " * " + vi.strides[d] + " + ";
      }
    }
    // The chunk's first column is a multiple of E (so is the tile's), so a chunk that starts
    // below 0 lies wholly below 0.
    std::string gc = fresh("gc"), nv = fresh("nv");
    line("const int64_t " + gc + " = " + o[R - 1] + " + (" + q + " % " + i64(cpr) + ") * " + i64(E) + ";");
    line("const int64_t " + nv + " = (" + ok + " && " + gc + " >= 0) ? " + vi.dims[R - 1] + " - " + gc +
         " : 0LL;  // elements in bounds (<= 0: none)");
    const std::string& st = vi.strides[R - 1];
    line("tsr::struct_copy_chunk(" + dst + " + " + q + " * " + i64(E) + ", " + nv + " > 0 ? " + vi.ptr + " + (" + off +
         gc + " * " + st + ") : " + vi.ptr + ", " + nv + ", " + st + ");");
    close();
    close();
    line("tsr::cp_async_commit();  // no barrier: the slot is in flight until async_wait");
    count("struct-cp-async-copies");
    return true;
  };
  // Knob struct_tma (the file comment): async_copy as one TMA box, async_wait as an mbarrier wait.
  const int64_t tma_knob = knob("struct_tma");
  if ((op.kind == OpKind::AsyncCopy || op.kind == OpKind::AsyncWait) && tma_knob != 0 && tma_knob != 1)
    fail(op, "struct_tma is " + std::to_string(tma_knob) + "; it takes 0 (no TMA) or 1 (TMA copies on sm_90a)");
  // The TMA form of copy_from_view for tile (operands first...) of view operand 1, with tensor
  // map `map` (plan_struct_tma took the op): a barrier, then thread 0 announces the box's bytes
  // on tsr_tma_bar and issues the copy; no barrier after. A tile wholly outside the view (its
  // origin is a multiple of its shape, so one starting below 0 lies wholly below 0) is zeros,
  // written by every thread, which async_wait's barrier publishes as it does the box.
  auto tma_from_view = [&](size_t first, const std::vector<int64_t>& S, const std::string& dst, const std::string& map) {
    const Value* view = op.operand(1);
    const ViewInfo& vi = view_of(op, view);
    const ScalarKind t = view->type.elem;
    // This thread's earlier accesses of the slot (reads, buffer_write's stores, zeros) come
    // before the TMA's writes; the barrier then orders everyone's (write-after-read).
    line("tsr::fence_proxy_async();");
    barrier();
    open("{  // TMA: one " + std::to_string(S[0]) + " x " + std::to_string(S[1]) + " box; async_wait ends it");
    const std::vector<std::string> o = tile_origin(first, S);
    open("if (" + o[0] + " < 0 || " + o[0] + " >= " + vi.dims[0] + " || " + o[1] + " < 0 || " + o[1] + " >= " +
         vi.dims[1] + ") {  // wholly outside the view: zeros");
    std::string e = fresh("e");
    line("for (int64_t " + e + " = tsr_tid; " + e + " < " + i64(S[0] * S[1]) + "; " + e + " += tsr_nthreads) " + dst + "[" +
         e + "] = " + stored(t, 0.0) + ";");
    --ind_;
    open("} else if (tsr_tid == 0) {");
    line("tsr::mbar_expect_tx(tsr_tma_bar, " + std::to_string(S[0] * S[1] * scalar_bytes(t)) + "u);");
    line("tsr::tma_load_2d(tsr::smem_u32(" + dst + "), &" + map + ", int(" + o[1] + "), int(" + o[0] + "), tsr_tma_bar);");
    close();
    close();
    count("struct-tma-copies");
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
    // A blocked tile whose every chunk is whole, in a slot of whole 16-byte pieces: each
    // thread's VEC contiguous elements of a chunk are one vector read (aligned: regions are
    // 128-byte aligned, slots and the thread's run are multiples of the piece), not VEC scalar
    // reads that VEC threads' runs put on one bank.
    Layout L = layout_of(r);
    const int64_t sb = scalar_bytes(t), piece = std::min<int64_t>(16, L.vec * sb);
    // `runs` reads of V elements each, run c's first element at offset(c): one vector read each.
    auto vector_reads = [&](int64_t runs, int64_t V, const std::function<std::string(const std::string&)>& offset) {
      const std::string Vs = std::to_string(V), St = stype(t), c = fresh("c");
      line("#pragma unroll");
      open("for (int " + c + " = 0; " + c + " < " + std::to_string(runs) + "; ++" + c + ") {");
      line(St + " v_[" + Vs + "];");
      line("tsr::copy_vec<" + St + ", " + Vs + ">(v_, " + src + " + " + offset(c) + ");");
      line("#pragma unroll");
      line("for (int l_ = 0; l_ < " + Vs + "; ++l_) " + n + "[" + c + " * " + Vs + " + l_] = " + load_conv(t, "v_[l_]") + ";");
      close();
      count("vector-buffer-reads");
    };
    if (!lowered_ && cluster_ == 1 && !L.replicated && !L.dist && L.vec >= 2 && L.part % (int64_t(L.vec) * T_) == 0 &&
        (L.part * sb) % 16 == 0 && (L.vec * sb) % piece == 0 && piece >= 4) {
      const std::string V = std::to_string(L.vec);
      return vector_reads(L.chunks, L.vec, [&](const std::string& c) {
        return c + " * " + std::to_string(int64_t(T_) * L.vec) + " + tsr_tid * " + V;
      });
    }
    // The layout emitter's: each thread's runs along the last dim (lowered_vector_width), one
    // vector read each (aligned: a run starts at a multiple of its width in a row of whole
    // runs), not V scalar reads that put V threads' runs on one bank (found by review: topk's
    // f32 rows took 16 scalar reads of eight-float runs a thread).
    if (lowered_ && L.dist && !packed_in_layouts(r)) {
      const int64_t V = lowered_vector_width(r);
      if (V >= 2 && V * sb >= 4 && static_shape(r->type.shape).back() % V == 0 && L.slots % V == 0)
        return vector_reads(L.slots / V, V, [&](const std::string& c) { return L.dist->flat_expr(c + " * " + std::to_string(V)); });
    }
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
      if (cp_async) line("tsr::cp_async_wait<0>();  // this thread's copies; the barrier: everyone's, visible");
      if (!struct_tma_.empty()) {
        // The one arrival ends the phase once every byte announced in it has landed; the
        // barrier after keeps a thread from arriving for the next phase before all have waited.
        line("if (tsr_tid == 0) tsr::mbar_arrive(tsr_tma_bar);");
        line("tsr::mbar_wait(tsr_tma_bar, tsr_tma_phase);  // the TMA copies since the last async_wait");
        line("tsr_tma_phase ^= 1u;");
      }
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
      std::vector<int64_t> S = static_shape(struct_slot_shape(buf->type, rank));
      if (auto it = struct_tma_.find(&op); it != struct_tma_.end()) {
        tma_from_view(2 + nslots, S, dst, it->second);
      } else {
        const bool as_cp_async = cp_async && cp_async_from_view(1, 2 + nslots, S, dst);
        if (!as_cp_async) copy_from_view(1, 2 + nslots, S, dst);
        if (tma_knob == 1)
          notes_.push_back("async_copy at " + op.loc.str() + ": not TMA: " + struct_tma_why_not(op) + "; " +
                           (as_cp_async ? "cp.async copies" : "a plain copy"));
      }
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
