// The layout emitter: prints a kernel that the GPU lowering passes have given layouts
// (CudaTarget::emitter). Each tile value is a register array whose slot s holds the
// element its layout places there (DistLayout.h), so elementwise ops, splats, casts and control
// flow print slot by slot as in the planning emitter; the ops below are the ones whose code
// depends on the layouts. Nothing here plans: a conversion the passes left is an exchange
// (through registers when every thread already holds what it needs, else through shared
// memory), a reduction shuffles along the lanes and exchanges along the warps its layout
// spreads the axis over, and a dot is mma.sync over its operands' fragments.
#include <algorithm>
#include <optional>

#include "cuda/EmitterInternal.h"
#include "support/Env.h"
#include "passes/BlockEdit.h"
#include "passes/Passes.h"

namespace tessera::cudagen {

namespace {

std::string num(int64_t v) { return std::to_string(v); }

// The shared-window address of a generic pointer: tsr::smem_u32 (inline asm, one cvta per call).
// tsr::smem_addr, the compiler's own conversion, which NVVM folds (smem_addr(base + i) is
// smem_addr(base) + i), gives fewer PTX instructions (the mma.sync matmul's K loop 259 -> 229,
// matmul_fp8 on sm_80 163 -> 127 registers) but a slower kernel: H100, mma.sync matmul 4096^3
// 0.357 -> 0.389 ms (bench/RESULTS.md, session 41); wgmma matmul and matmul_fp8 level.
// TESSERA_CUDA_SMEM_ADDR=1 prints smem_addr (an A/B switch).
std::string smem_fn() { return env_flag("TESSERA_CUDA_SMEM_ADDR") ? "tsr::smem_addr(" : "tsr::smem_u32("; }

// An mma.sync accumulator's tiles per warp: MT 16-row by NT 8-column (at least one each).
std::pair<int64_t, int64_t> mma_sync_tiles(const Value* r) {
  const std::vector<int64_t> SR = static_shape(r->type.shape);
  const tessera::Layout& L = r->type.layout;
  return {std::max<int64_t>(1, SR[0] / (16 * L.warps[0])), std::max<int64_t>(1, SR[1] / (8 * L.warps[1]))};
}

// A TMA-stored wgmma tile of shape S: G warpgroups split its rows, each holding MT 64-row
// blocks (one, where the warpgroups split the tile; M / 64 where one holds it all, as
// pingpong-consumers' does), of S[1] / 64 boxes of 64 x 64 each.
struct TmaStoreBlocks {
  int64_t G, MT, boxes;
};
TmaStoreBlocks tma_store_blocks(const Value* tile, const std::vector<int64_t>& S) {
  const int64_t G = tile->type.layout.warps[0] / 4;
  return {G, S[0] / (64 * G), S[1] / 64};
}

bool is_tile_op(const Op& op) {
  for (const Value* v : op.operands)
    if (v->type.is_tile()) return true;
  for (const Value* v : op.results)
    if (v->type.is_tile()) return true;
  return false;
}

// Every op of `b` (nested regions included) that reads `v`.
void readers(const Block& b, const Value* v, std::vector<std::pair<const Op*, size_t>>& out) {
  for (const auto& op : b.ops) {
    for (size_t i = 0; i < op->operands.size(); ++i)
      if (op->operands[i] == v) out.push_back({op.get(), i});
    for (const auto& r : op->regions)
      if (r) readers(*r, v, out);
  }
}

// How many of a thread's consecutive slots hold consecutive elements along `dim` (the layout's
// fastest digit), capped at 16 bytes of `elem_bytes` elements: the width of a vector access.
int64_t vector_width(const Dist& d, int dim, int elem_bytes) {
  if (d.digits.empty() || d.digits[0].dim != dim || d.digits[0].coef != 1) return 1;
  int64_t v = 1;
  while (d.digits[0].radix % (v * 2) == 0 && v * 2 * elem_bytes <= 16) v *= 2;
  return v;
}

// The index, among the 2^wa.size() warps that hold different parts of a reduction, of this
// thread's warp (the warp bits listed in `wa`, in order).
std::string warp_part_index(const std::vector<size_t>& wa) {
  std::string widx;
  for (size_t j = 0; j < wa.size(); ++j)
    widx += (j ? " + " : "") + std::string("(((tsr_warp >> ") + num(int64_t(wa[j])) + ") & 1) << " + num(int64_t(j)) + ")";
  return widx;
}

// Whether a reduction of `kind` into `t` rounds once at the end (a narrow float's sum or
// product, folded in f32), or keeps an i1 to its bit; and the expression that does it.
bool rounds_at_end(const std::string& kind, ScalarKind t) {
  return (is_float(t) && is_narrow(t) && (kind == "sum" || kind == "prod")) ||
         (t == ScalarKind::I1 && kind != "max" && kind != "min");
}

// An operand layout of an mma.sync dot (which may read its fragments from a staged shared tile
// with ldmatrix; a wgmma RS operand is registers only).
bool mma_sync_operand(const tessera::Layout& l) {
  return l.kind == tessera::Layout::Kind::DotOperand && l.parent && l.parent->kind == tessera::Layout::Kind::Mma &&
         l.parent->version == 2;
}

// Whether every reader of `v` in `b` is a dot that takes it as operand A or B (and there is one).
bool read_only_by_dots(const Block& b, const Value* v) {
  std::vector<std::pair<const Op*, size_t>> rs;
  readers(b, v, rs);
  return !rs.empty() && std::all_of(rs.begin(), rs.end(), [](const auto& u) { return u.first->kind == OpKind::Dot && u.second < 2; });
}

}  // namespace

const Dist& Emitter::dist_of(const Value* v) const {
  auto it = dists_.find(v);
  if (it != dists_.end()) return it->second;
  if (!v->type.is_tile() || !v->type.layout.is_distributed())
    throw NotLowerable{"a tile without a register layout (" + v->type.str() + ")"};
  if (!shape_is_static(v->type.shape)) throw NotLowerable{"a tile without a static shape"};
  return dists_.emplace(v, make_dist(v->type.layout, static_shape(v->type.shape), warps_ * cluster_)).first->second;
}

std::string Emitter::shared_index(const SharedView& sv, const std::vector<std::string>& c) {
  if (sv.rows == 0) {
    std::string at;
    for (size_t d = 0; d < c.size(); ++d) at += (d ? " + " : "") + std::string("(") + c[d] + ") * " + num(sv.strides[d]);
    return at;
  }
  // (tsr::sw128_index and sw64_index count 16-bit columns: 64 or 32 to a swizzled row; an 8-bit
  // swizzled tile is read by wgmma only.)
  if (sv.atom != 64 && sv.atom != 32) throw NotLowerable{"an element of a swizzled tile of other than 16-bit elements"};
  std::string row, col;
  for (size_t d = 0; d < c.size(); ++d) {
    if (sv.strides[d] == 1) col = c[d];
    else if (sv.strides[d] != 0) row += (row.empty() ? "" : " + ") + std::string("(") + c[d] + ") * " + num(sv.strides[d] / sv.atom);
  }
  return std::string(sv.atom == 64 ? "tsr::sw128_index(int(" : "tsr::sw64_index(int(") + (row.empty() ? "0" : row) + "), int(" +
         col + "), " + num(sv.rows) + ")";
}

bool Emitter::emit_lowered(const Op& op) {
  // On a cluster (cluster-programs) what moves data between threads is a register renaming or
  // a reduction (lowered_reduce: the CTAs' values meet through distributed shared memory); an
  // op that needs more is printed by lowering the kernel again without clusters.
  if (cluster_ > 1) {
    if (const std::string why = unclusterable_op(op); !why.empty()) needs_no_cluster(op, why);
    if ((op.kind == OpKind::LoadTile || op.kind == OpKind::ConvertLayout) &&
        op.result()->type.layout.kind == tessera::Layout::Kind::Shared)
      needs_no_cluster(op, "a tile in shared memory");
  }
  switch (op.kind) {
    case OpKind::ConvertLayout: lowered_convert(op); return true;
    case OpKind::LoadTile: lowered_load_store(op); return true;
    case OpKind::StoreTile: {
      // The last pair's second program past an odd grid keeps its partner's copies and
      // barriers, but its tile is not the kernel's to store.
      const bool past_grid_guard = program_pairs_ && ws_consumers_ && op.parent == k_.body.get();
      if (past_grid_guard) open("if (tsr_pid0 < int32_t(tsr_grid0)) {  // not the program past an odd grid of CTA pairs");
      lowered_load_store(op);
      if (past_grid_guard) close();
      return true;
    }
    case OpKind::Reshape:
    case OpKind::Permute:
    case OpKind::ExpandDims:
    case OpKind::Broadcast: lowered_shape(op); return true;
    case OpKind::Reduce: lowered_reduce(op); return true;
    case OpKind::Scan: lowered_scan(op); return true;
    case OpKind::ScanWith:
    case OpKind::ReduceWith: lowered_fold_lines_through_shared(op); return true;
    case OpKind::InsertTile: lowered_insert(op); return true;
    case OpKind::ExtractTile: lowered_extract(op); return true;
    case OpKind::Dot:
      if (op.result()->type.layout.kind == tessera::Layout::Kind::Blocked ||
          op.result()->type.layout.kind == tessera::Layout::Kind::Replicated)
        lowered_fma_dot(op);
      else if (op.result()->type.layout.kind == tessera::Layout::Kind::Mma && op.result()->type.layout.version == 3)
        lowered_wgmma(op);
      else
        lowered_dot(op);
      return true;
    case OpKind::Arange: {
      const Value* r = op.result();
      const Dist& d = dist_of(r);
      int64_t start = op.has_attr("start") ? op.attr_int("start") : 0;
      std::string n = declare(op, r);
      slots(layout_of(r), [&](const std::string& s) {
        line(n + "[" + s + "] = int32_t(" + num(start) + " + " + d.const_expr(0, s) + " + " + d.thread_expr(0) + ");");
      });
      return true;
    }
    default: break;
  }
  if (!is_tile_op(op)) return false;
  switch (op.info().cls) {
    case OpClass::Create:
    case OpClass::Unary:
    case OpClass::Binary:
    case OpClass::Compare:
    case OpClass::Ternary:
    case OpClass::Cast:
      // Slot by slot: every tile operand must be in the result's layout.
      for (const Value* v : op.operands)
        if (v->type.is_tile() && v->type.layout != op.result()->type.layout)
          throw NotLowerable{"an elementwise op at " + op.loc.str() + " over tiles of different layouts"};
      return false;
    case OpClass::Control:
      return false;
    case OpClass::Sort:
      // sort, topk, histogram: a network over the operands staged in shared memory by their
      // layouts, the results gathered into theirs (the shared code of both emitters).
      return false;
    case OpClass::Raw:
      // Inline native code: its tiles staged into shared memory as flat arrays by their
      // layouts, its tile results gathered into theirs (the shared code of both emitters).
      return false;
    case OpClass::Struct:
      // A buffer slot read into a tile's registers, or a tile written into one, element by
      // element in its layout (the shared code of both emitters: gather_into, owner tests).
      if (op.kind == OpKind::BufferRead || op.kind == OpKind::BufferWrite) return false;
      break;
    case OpClass::Memory: {
      if (op.kind != OpKind::Gather && op.kind != OpKind::Scatter && op.kind != OpKind::Atomic &&
          op.kind != OpKind::AtomicCas)
        break;
      // Element by element, slot by slot (the shared code of both emitters): indices, masks,
      // values and the result in one layout (assign-layouts).
      const Value* first = nullptr;
      for (const std::vector<Value*>* vs : {&op.operands, &op.results})
        for (const Value* v : *vs) {
          if (!v->type.is_tile()) continue;
          if (!first) first = v;
          if (v->type.layout != first->type.layout)
            throw NotLowerable{"a " + std::string(op.name()) + " at " + op.loc.str() + " over tiles of different layouts"};
        }
      return false;
    }
    default: break;
  }
  throw NotLowerable{"the op " + std::string(op.name()) + " at " + op.loc.str()};
}

void Emitter::lowered_exchange(const Op& op, const Value* x, const Value* r,
                               const std::function<std::string(const std::string&)>& src_flat) {
  // (A CTA of a cluster holds only its part of each tile.)
  needs_no_cluster(op, "an exchange of tile data through shared memory");
  const int64_t numel = shape_numel(x->type.shape), eb = std::max(4, scalar_bytes(x->type.elem));
  count("layout-exchanges");
  if (numel * eb <= kExchangeBytes) {
    const std::string ptr = smem_ptr(ctype(x->type.elem), 0, numel * eb);
    stage(x, ptr);  // (a barrier first: the last exchange's readers are done)
    barrier();
    const std::string n = declare(op, r);
    gather_into(r, n, [&](const std::string& e) { return ptr + "[" + src_flat(e) + "]"; });
    return;
  }
  // A large tile goes through in parts of kExchangeBytes (elements [lo, lo + part) of x's flat
  // index each): what shared memory the exchange holds is then not what a kernel's other
  // buffers (a FlashAttention's rings) cannot spare.
  const int64_t part = kExchangeBytes / eb;
  const std::string ptr = smem_ptr(ctype(x->type.elem), 0, part * eb);
  const Dist &X = dist_of(x), &Y = dist_of(r);
  const std::string n = declare(op, r), own = X.owner_expr();
  for (int64_t lo = 0; lo < numel; lo += part) {
    const std::string L = num(lo), H = num(lo + part);
    barrier();  // the last part's (or exchange's) readers are done
    slots(layout_of(x), [&](const std::string& sl) {
      const std::string e = fresh("e");
      line("{ const int " + e + " = " + X.flat_expr(sl) + "; if (" + (own == "true" ? "" : own + " && ") + e + " >= " + L +
           " && " + e + " < " + H + ") " + ptr + "[" + e + " - " + L + "] = " + nm(x) + "[" + sl + "]; }");
    });
    barrier();
    slots(layout_of(r), [&](const std::string& sl) {
      const std::string f = fresh("f");
      line("{ const int " + f + " = " + src_flat(Y.flat_expr(sl)) + "; if (" + f + " >= " + L + " && " + f + " < " + H +
           ") " + n + "[" + sl + "] = " + ptr + "[" + f + " - " + L + "]; }");
    });
  }
}

void Emitter::lowered_convert(const Op& op) {
  const Value *x = op.operand(0), *r = op.result();
  const bool to_shared = r->type.layout.kind == tessera::Layout::Kind::Shared;
  if (to_shared && x->type.layout.kind == tessera::Layout::Kind::Shared)
    throw NotLowerable{"a conversion between shared layouts"};
  if (to_shared) {  // registers -> a shared tile
    SharedView sv = alloc_shared(r, r->type.layout.order);
    store_to_shared(x, sv);
    shared_[r] = sv;
    count("stores-to-shared");
    // (Its first dim fastest: an f8 mma operand B [K, N] stored K-major, since session 56.)
    if (const std::vector<int64_t>& o = r->type.layout.order; !o.empty() && o.front() != int64_t(o.size()) - 1)
      count("transposed-stores-to-shared");
    return;
  }
  if (auto it = shared_.find(x); it != shared_.end()) {  // a shared tile -> registers
    if (mma_sync_operand(r->type.layout) && read_only_by_dots(*k_.body, r)) {
      staged_[r] = staged_from(op, it->second);  // the dots load their fragments (ldmatrix)
      name_[r] = it->second.ptr;
      return;
    }
    const SharedView sv = it->second;
    const std::vector<int64_t> S = static_shape(r->type.shape);
    const std::string n = declare(op, r);
    gather_into(r, n, [&](const std::string& e) {
      return load_conv(r->type.elem, sv.ptr + "[" + shared_index(sv, coords(e, S)) + "]");
    });
    count("loads-from-shared");
    return;
  }
  const Dist &from = dist_of(x), &to = dist_of(r);
  std::vector<int64_t> m = same_thread_slots(from, to, program_threads(), [](const std::vector<int64_t>& c) { return c; });
  if (!m.empty()) {
    const std::string n = declare(op, r);
    for (size_t s = 0; s < m.size(); ++s) line(n + "[" + num(int64_t(s)) + "] = " + nm(x) + "[" + num(m[s]) + "];");
    count("register-conversions");
    return;
  }
  // An mma operand that only dots read stays in shared memory; the dots load its fragments.
  if (mma_sync_operand(r->type.layout) && scalar_bits(r->type.elem) == 16) {
    if (read_only_by_dots(*k_.body, r)) {
      // Stored with the source's contiguous dim fastest, so that each thread's run lands side
      // by side.
      const bool dim0 = x->type.layout.kind == tessera::Layout::Kind::Blocked && !x->type.layout.order.empty() &&
                        x->type.layout.order[0] == 0;
      SharedView sv = alloc_shared(r, dim0 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{});
      store_to_shared(x, sv);
      staged_[r] = staged_from(op, sv);
      name_[r] = sv.ptr;
      count("staged-operands");
      return;
    }
  }
  lowered_exchange(op, x, r, [](const std::string& e) { return e; });
}

bool Emitter::only_stored(const Value* v) const {
  bool stored = false, other = false;
  walk(const_cast<Block&>(*k_.body), [&](Op& op) {
    for (size_t i = 0; i < op.operands.size(); ++i)
      if (op.operand(i) == v) (op.kind == OpKind::StoreTile && i == 1 ? stored : other) = true;
  });
  return stored && !other;
}

std::string Emitter::lowered_base() const {
  const std::string b = std::string("tsr_smem + ") + kLoweredBase;
  return lowered_wgmma_ ? "tsr::align_smem_1024(" + b + ")" : "(" + b + ")";
}

Emitter::SharedView Emitter::alloc_shared(const Value* v, const std::vector<int64_t>& order_in, int64_t stages,
                                          int64_t* stage_elems) {
  if (cluster_ > 1) throw NotClusterable{"a tile in shared memory (" + v->type.str() + ")"};
  const std::vector<int64_t> S = static_shape(v->type.shape);
  const int R = static_cast<int>(S.size());
  std::vector<int64_t> order = order_in;
  if (order.empty())
    for (int d = R - 1; d >= 0; --d) order.push_back(d);
  const int64_t eb = scalar_bytes(v->type.elem);
  if (eb != 1 && eb != 2 && eb != 4 && eb != 8) throw NotLowerable{"a shared tile of other than 1-, 2-, 4- or 8-byte elements"};
  const std::string st = stype(v->type.elem);
  SharedView sv;
  sv.strides.assign(R, 0);
  sv.ptr = fresh("sh");
  const tessera::Layout& L = v->type.layout;
  if (L.kind == tessera::Layout::Kind::Shared && L.swizzle != 0) {
    // 128-byte rows; or 64-byte ones of 16-bit elements for mma.sync (swizzle-mma-operands).
    const bool sw64 = L.swizzle == 64 && eb == 2 && !lowered_wgmma_;
    if ((L.swizzle != 128 && !sw64) || L.pad != 0) throw NotLowerable{"a shared tile swizzled other than in 128-byte rows (or 64-byte ones of 16-bit mma.sync operands)"};
    // 16-bit elements (64 to a 128-byte row) or 8-bit ones (fp8 wgmma operands, 128 to a row).
    if (eb != 2 && eb != 1) throw NotLowerable{"a 128-byte swizzled tile of other than 8- or 16-bit elements"};
    const int64_t F = order[0], A = L.swizzle / eb;
    if (S[F] % A != 0)
      throw NotLowerable{"a " + num(L.swizzle) + "-byte swizzled tile whose fastest dim is not a multiple of " + num(A) +
                         " elements"};
    sv.strides[F] = 1;
    sv.atom = A;
    int64_t stride = A;
    for (size_t i = 1; i < order.size(); ++i) {
      sv.strides[order[i]] = S[order[i]] == 1 ? 0 : stride;
      stride *= S[order[i]];
    }
    sv.rows = stride / A;
    if (sv.rows % 8 != 0) throw NotLowerable{"a swizzled tile of other than whole 8-row atoms"};
    // With wgmma (and the TMA), 1024-byte aligned (the swizzle pattern is of the address bits):
    // the buffer's offset from the lowered base is, and so is that base (lowered_base).
    // Without, the tile is an mma.sync operand (swizzle-mma-operands) whose every address the
    // emitter computes from indices (tsr::sw128_index): 128-byte aligned, so that a 128-byte
    // row is one line of the banks and a 32-byte piece of global memory two chunks of one
    // 32-byte piece of shared memory.
    if (!lowered_wgmma_ && eb != 2) throw NotLowerable{"a 128-byte swizzled tile of other than 16-bit elements without wgmma"};
    const int64_t align = lowered_wgmma_ ? 1024 : 128;
    const int64_t off = (lowered_smem_ + align - 1) / align * align, bytes = sv.rows * S[F] * eb;
    lowered_smem_ = off + stages * bytes;
    if (stage_elems) *stage_elems = bytes / eb;
    const std::string word = eb == 2 ? "uint16_t" : "uint8_t";
    line(word + "* const " + sv.ptr + " = reinterpret_cast<" + word + "*>(" + lowered_base() + " + " + num(off) + ");");
    return sv;
  }
  int64_t stride = 1;
  const int64_t E = 16 / eb;  // elements of a 16-byte chunk
  for (size_t i = 0; i < order.size(); ++i) {
    sv.strides[order[i]] = stride;
    // Rows of whole 16-byte chunks, padded by one more (vector stores and ldmatrix rows stay
    // aligned; eight rows of an ldmatrix phase fall in different banks).
    stride *= i == 0 ? (S[order[i]] + E - 1) / E * E + E : S[order[i]];
  }
  const int64_t off = lowered_smem_, bytes = align16(stride * eb);
  lowered_smem_ += stages * bytes;
  if (stage_elems) *stage_elems = bytes / eb;
  line(st + "* const " + sv.ptr + " = reinterpret_cast<" + st + "*>(" + lowered_base() + " + " + num(off) + ");");
  return sv;
}

void Emitter::store_to_shared(const Value* x, const SharedView& sv) {
  const Dist& d = dist_of(x);
  const std::string own = d.owner_expr();
  auto at = [&](const std::string& s) {
    std::vector<std::string> c;
    for (int q = 0; q < d.rank(); ++q) c.push_back(d.const_expr(q, s) + " + " + d.thread_expr(q));
    return shared_index(sv, c);
  };
  int fastest = 0;
  for (int q = 0; q < d.rank(); ++q)
    if (sv.strides[q] == 1) fastest = q;
  // A thread's run along the stored rows is one shared store of up to 16 bytes (rows of a
  // multiple of 8 elements keep every run aligned).
  const std::string st = stype(x->type.elem);
  const int64_t V = vector_width(d, fastest, scalar_bytes(x->type.elem));
  barrier();  // the readers of the last contents are done
  const std::string c = fresh("c"), s0 = c + " * " + num(V), w = fresh("w");
  line("#pragma unroll");
  open("for (int " + c + " = 0; " + c + " < " + num(d.slots() / V) + "; ++" + c + ") {");
  line(st + " " + w + "[" + num(V) + "];");
  for (int64_t v = 0; v < V; ++v)
    line(w + "[" + num(v) + "] = " + store_conv(x->type.elem, nm(x) + "[" + s0 + " + " + num(v) + "]") + ";");
  line((own == "true" ? "" : "if (" + own + ") ") + "tsr::copy_vec<" + st + ", " + num(V) + ">(" + sv.ptr + " + " + at(s0) +
       ", " + w + ");");
  close();
  if (lowered_wgmma_) line("tsr::fence_proxy_async();  // wgmma reads what ordinary stores wrote");
  barrier();
}

Emitter::StagedOperand Emitter::staged_from(const Op& op, const SharedView& sv) const {
  if (sv.strides.size() != 2) fail(op, "internal: an mma operand view of rank other than 2");
  if (sv.rows != 0 && sv.atom != 64 && sv.atom != 32)
    throw NotLowerable{"an mma.sync operand in a swizzled shared tile of other than 16-bit elements"};
  if (sv.strides[1] == 1) return {smem_fn() + sv.ptr + ")", sv.strides[0], false, sv.rows, sv.atom};
  if (sv.strides[0] == 1) return {smem_fn() + sv.ptr + ")", sv.strides[1], true, sv.rows, sv.atom};
  throw NotLowerable{"an mma operand in shared memory with neither dim contiguous"};
}

void Emitter::issue_shared_copies(const Op& op, const SharedView& dst_view) {
  const Value* view = op.operand(0);
  const ViewInfo& vi = view_of(op, view);
  const Value* tile = op.result();
  const int R = view->type.rank();
  const std::vector<int64_t> S = shape_of(op, tile);
  const ScalarKind t = view->type.elem;
  open("{");
  std::vector<std::string> o(R);
  for (int q = 0; q < R; ++q) {
    o[q] = fresh("o");
    line("const int64_t " + o[q] + " = int64_t(" + nm(op.operand(1 + q)) + ") * " + num(S[q]) + ";");
  }
  // Chunk q of E elements, 16 bytes (row-major over the tile), is copied by thread q % T.
  const int64_t eb = scalar_bytes(t), E = 16 / eb;
  // hint-l2-policy's `l2_prefetch`: the bytes L2 fetches around each copy (cp.async's .L2::NB).
  const std::string cp_async = op.has_attr("l2_prefetch") ? "tsr::cp_async_16<" + num(op.attr_int("l2_prefetch")) + ">("
                                                          : "tsr::cp_async_16(";
  const int64_t chunks = shape_numel(tile->type.shape) / E, all_rounds = (chunks + T_ - 1) / T_;
  // This piece's rounds (copy_part_; all of them unless a ring's refill is spread).
  const int64_t first = all_rounds * copy_part_.first / copy_part_.second,
                last = all_rounds * (copy_part_.first + 1) / copy_part_.second, rounds = last - first;
  if (rounds <= 0) {
    close();
    return;
  }
  const std::string from = num(first);
  // Opens the loop over this thread's chunks; `c` gets the chunk's coordinates in the tile, `g`
  // in the view, `at_g` its offset in the view, `at_s` its shared-memory address.
  std::vector<std::string> c, g(R);
  std::string rows_ok, at_g, at_s;
  auto open_chunks = [&](const std::string& unroll) {
    const std::string i = fresh("i"), q = fresh("q");
    line(unroll);
    open("for (int " + i + " = " + from + "; " + i + " < " + num(last) + "; ++" + i + ") {");
    line("const int " + q + " = " + i + " * " + num(T_) + " + tsr_tid;");
    if (chunks % T_ != 0) line("if (" + q + " >= " + num(chunks) + ") break;");
    c = coords(q + " * " + num(E), S);
    rows_ok = "true";
    at_g.clear();
    for (int d = 0; d < R; ++d) {
      g[d] = "(" + o[d] + " + " + c[d] + ")";
      if (d < R - 1) rows_ok += " && " + g[d] + " < " + vi.dims[d];
      at_g += (d ? " + " : "") + g[d] + " * " + vi.strides[d];
    }
    at_s = shared_index(dst_view, c);
  };
  // One test that the whole tile is in the view, its first chunk aligned and every row stride a
  // multiple of a chunk; then each chunk is one cp.async with no test of its own (the per-chunk
  // bounds, sizes and alignment were most of a mma.sync matmul's main loop: 13,700 PTX lines
  // against the planning emitter's 3,200). A tile at a ragged or unaligned edge takes the
  // chunk-by-chunk path below. Off where the kernel sets whole_tile_checks = 0.
  const ConstexprDecl* wt = k_.find_constexpr("whole_tile_checks");
  const bool whole_tile = !wt || wt->value == 1;
  if (whole_tile) {
    std::string whole, origin;
    for (int d = 0; d < R; ++d) {
      whole += (d ? " && " : "") + o[d] + " >= 0 && " + o[d] + " + " + num(S[d]) + " <= " + vi.dims[d];
      if (d < R - 1 && S[d] > 1) whole += " && " + vi.strides[d] + " % " + num(E) + " == 0";
      origin += (d ? " + " : "") + o[d] + " * " + vi.strides[d];
    }
    whole += " && tsr::aligned_vec<" + stype(t) + ", " + num(E) + ">(" + vi.ptr + " + " + origin + ")";
    open("if (" + whole + ") {");
    // The tile's shared address as one 32-bit value, each chunk's an offset from it, as the
    // planning emitter's cp_tile_async does: a generic address converted per chunk took about
    // 13 PTX instructions a cp.async in the mma.sync matmul's ring, against 5 (H100, session 38:
    // 4096^3 285 / 278 -> 298 TFLOP/s at 128x256x64, the A/B switch it was).
    const std::string base = fresh("sb");
    line("const uint32_t " + base + " = " + smem_fn() + dst_view.ptr + ");");
    const int64_t rows_per_round = R == 2 && (T_ * E) % S[1] == 0 ? T_ * E / S[1] : 0;
    if (rows_per_round > 0) {
      // Each round is whole rows (rows_per_round of them) below the round before: the thread's
      // first chunk addressed once, every later one a constant step from it (a stride times the
      // round in global memory; in shared memory a constant unless swizzled), as cp_tile_async
      // does. Per-chunk addresses, loop-invariant in part, were hoisted out of a ring's loop and
      // kept live across it (the mma.sync matmul's ring: 25 registers more, 226 against 250).
      const std::string r0 = fresh("r"), c0 = fresh("k"), g0 = fresh("g"), d0 = fresh("d");
      line("const int " + r0 + " = tsr_tid / " + num(S[1] / E) + ", " + c0 + " = tsr_tid % " + num(S[1] / E) + " * " + num(E) +
           ";");
      line("const " + stype(t) + "* const " + g0 + " = " + vi.ptr + " + (" + o[0] + " + " + r0 + ") * " + vi.strides[0] + " + (" +
           o[1] + " + " + c0 + ") * " + vi.strides[1] + ";");
      const bool plain = dst_view.rows == 0;
      if (plain) line("const uint32_t " + d0 + " = " + base + " + uint32_t(" + shared_index(dst_view, {r0, c0}) + ") * " + num(eb) + "u;");
      const std::string i = fresh("i");
      line(rounds > 16 ? "#pragma unroll 4" : "#pragma unroll");
      open("for (int " + i + " = " + from + "; " + i + " < " + num(last) + "; ++" + i + ") {");
      if (chunks % T_ != 0) line("if (" + i + " * " + num(T_) + " + tsr_tid >= " + num(chunks) + ") break;");
      const std::string row = r0 + " + " + i + " * " + num(rows_per_round);
      const std::string dst = plain ? d0 + " + uint32_t(" + i + ") * " + num(rows_per_round * dst_view.strides[0] * eb) + "u"
                                    : base + " + uint32_t(" + shared_index(dst_view, {row, c0}) + ") * " + num(eb) + "u";
      line(cp_async + dst + ", " + g0 + " + int64_t(" + i + ") * " + num(rows_per_round) + " * " + vi.strides[0] + ");");
      close();
      count("stepped-tile-copies");
    } else {
      // Up to 16 rounds unrolled in full (every library and corpus kernel's loads), more four
      // at a time: a [2048, 64] u8 operand's 64 rounds a thread unrolled in full were 15,000
      // PTX lines (1 s of ptxas).
      open_chunks(rounds > 16 ? "#pragma unroll 4" : "#pragma unroll");
      line(cp_async + base + " + uint32_t(" + at_s + ") * " + num(eb) + "u, " + vi.ptr + " + " + at_g + ");");
      close();
    }
    --ind_;
    open("} else {");
    count("whole-tile-copies");
  }
  // The chunk-by-chunk path (ragged or unaligned tiles, or whole_tile_checks = 0), rolled: each
  // round's copy is a cp.async of the chunk's bytes in the view (none past its end) that
  // zero-fills the rest, or element by element where the view is not 16-byte aligned. Unrolled,
  // its per-chunk values were hoisted out of a ring's loop and kept live across it (the mma.sync
  // matmul's ring spilled 48 bytes at 255 registers), as cp_tile_async_edge keeps its loop
  // rolled for the same reason; the alignment is tested once for the view (its base and row
  // strides), as a per-chunk test in the rolled loop made ptxas spill the f32 matmul's ring.
  std::string aligned = "tsr::aligned_vec<" + stype(t) + ", " + num(E) + ">(" + vi.ptr + ")";
  for (int d = 0; d < R - 1; ++d) aligned += " && " + vi.strides[d] + " % " + num(E) + " == 0";
  const std::string unroll = whole_tile ? "#pragma unroll 1" : rounds > 16 ? "#pragma unroll 4" : "#pragma unroll";
  for (const bool vec : {true, false}) {
    if (vec) {
      open("if (" + aligned + ") {");
    } else {
      --ind_;
      open("} else {");
    }
    open_chunks(unroll);
    const std::string n = fresh("n"), src = fresh("src"), dst = fresh("dst");
    const std::string left = "(" + vi.dims[R - 1] + " - " + g[R - 1] + ")";
    const std::string E_ = num(E);
    line("const int64_t " + n + " = !(" + rows_ok + ") || " + left + " <= 0 ? 0 : " + left + " < " + E_ + " ? " + left +
         " : " + E_ + ";");
    line("const " + stype(t) + "* " + src + " = " + vi.ptr + " + (" + n + " > 0 ? " + at_g + " : 0);");
    if (vec) {
      line(cp_async + smem_fn() + dst_view.ptr + ") + uint32_t(" + at_s + ") * " + num(eb) + "u, " + src + ", int(" +
           n + ") * " + num(eb) + ");");
    } else {
      line(stype(t) + "* const " + dst + " = " + dst_view.ptr + " + " + at_s + ";");
      line("for (int v_ = 0; v_ < " + E_ + "; ++v_) " + dst + "[v_] = v_ < " + n + " ? " + src + "[v_] : " + stype(t) + "(0);");
    }
    close();
  }
  close();
  if (whole_tile) close();
  close();
}

void Emitter::lowered_load_shared(const Op& op) {
  const Value* tile = op.result();
  if (auto it = rings_.find(&op); it != rings_.end()) {  // this iteration's stage of its ring
    const Ring& ring = it->second;
    shared_[tile] = {"(" + ring.view.ptr + " + " + ring.stage + " * " + num(ring.stage_elems) + ")", ring.view.strides,
                     ring.view.rows, ring.view.atom};
    stage_u32_[shared_[tile].ptr] = "(" + smem_fn() + ring.view.ptr + ") + uint32_t(" + ring.stage + ") * " +
                                    num(ring.stage_elems * scalar_bytes(tile->type.elem)) + "u)";
    name_[tile] = shared_[tile].ptr;
    return;
  }
  const std::vector<int64_t> S = shape_of(op, tile);
  if (!whole_chunk_rows(tile->type.elem, S.back()))
    throw NotLowerable{"a load into shared memory of other than rows of whole 16-byte chunks of 1-, 2-, 4- or 8-byte elements"};
  const SharedView sv = alloc_shared(tile, tile->type.layout.order);
  if (sv.strides.back() != 1) throw NotLowerable{"a load into a shared tile that is not row-major"};
  shared_[tile] = sv;
  name_[tile] = sv.ptr;
  barrier();  // the readers of the last contents are done
  issue_shared_copies(op, sv);
  line("tsr::cp_async_commit();");
  line("tsr::cp_async_wait<0>();");
  if (lowered_wgmma_) line("tsr::fence_proxy_async();  // for wgmma's reads");
  barrier();
  count("loads-into-shared");
}

void Emitter::alloc_rings(const std::vector<const Op*>& loads, int64_t S) {
  const std::string stage = fresh("rs");
  for (const Op* l : loads) {
    const std::vector<int64_t> shape = static_shape(l->result()->type.shape);
    if (!whole_chunk_rows(l->result()->type.elem, shape.back()))
      throw NotLowerable{"a ring load of other than rows of whole 16-byte chunks of 1-, 2-, 4- or 8-byte elements"};
    Ring ring;
    ring.view = alloc_shared(l->result(), l->result()->type.layout.order, S, &ring.stage_elems);
    if (ring.view.strides.back() != 1) throw NotLowerable{"a ring load into a shared tile that is not row-major"};
    ring.stage = stage;
    rings_[l] = ring;
  }
}

bool Emitter::emit_ring_loop(const Op& op, const std::vector<const Value*>& vals, const std::vector<std::string>& carried) {
  const int64_t S = op.has_attr("pipeline") ? op.attr_int("pipeline") : 1;
  std::vector<const Op*> chain;
  const std::vector<const Op*> loads = S >= 2 ? ring_loads(op, &chain) : std::vector<const Op*>{};
  if (loads.empty()) return false;
  const Block& body = op.region(0);
  if (&op != ws_loop_) alloc_rings(loads, S);  // a producer's ring is made before its branch
  const std::string stage = rings_.at(loads[0]).stage;
  if (std::all_of(loads.begin(), loads.end(), [&](const Op* l) { return tma_loads_.count(l) != 0; })) {
    emit_tma_ring_loop(op, vals, carried, loads, chain, S);
    return true;
  }
  const std::string lb = nm(op.operand(0)), ub = nm(op.operand(1)), step = nm(op.operand(2));
  // The copies of the iteration whose induction value is `iv` into stage `st`, when it runs:
  // piece `part` of `parts` (ring_refill_), committed with the last.
  auto issue = [&](const std::string& iv, const std::string& st, int part = 0, int parts = 1) {
    copy_part_ = {part, parts};
    open("if (" + iv + " < int64_t(" + ub + ")) {");
    const std::string nv = fresh("nx");
    line("const int32_t " + nv + " = int32_t(" + iv + ");");
    auto saved = name_;
    name_[body.args[0]] = nv;
    for (const Op* c : chain) emit_op(*c);
    for (const Op* l : loads) {
      const Ring& ring = rings_.at(l);
      SharedView dst = ring.view;
      dst.ptr = "(" + ring.view.ptr + " + (" + st + ") * " + num(ring.stage_elems) + ")";
      issue_shared_copies(*l, dst);
    }
    name_ = saved;
    close();
    copy_part_ = {0, 1};
    if (part + 1 == parts) line("tsr::cp_async_commit();");
  };
  line("int " + stage + " = 0;");
  // The first S - 1 stages' copies: a loop, not unrolled (each issue is a whole tile's copies, its
  // edge path included: unrolled, the prologue was most of a ring kernel's code and NVRTC time).
  const std::string p = fresh("pro");
  line("#pragma unroll 1");
  open("for (int " + p + " = 0; " + p + " < " + num(S - 1) + "; ++" + p + ") {");
  issue("(int64_t(" + lb + ") + int64_t(" + p + ") * int64_t(" + step + "))", p);
  close();
  // One barrier an iteration: after it, this iteration's stage is in for every thread, and every
  // thread is done reading the stage of the iteration before, which the copies of iteration
  // + S - 1 then refill (the copies issued before the wait, as the ring did first, needed a
  // second barrier at the end of each iteration).
  // (The stage arithmetic is unsigned: a signed % S of a value the compiler cannot prove
  // non-negative costs a sign fix-up.)
  const std::string next_stage = "int((unsigned(" + stage + ") + " + num(S - 1) + "u) % " + num(S) + "u)";
  // The refill goes at the top of the iteration (after its barrier; with fragments_ahead the
  // barrier is before the last k step of the iteration before), or where pipeline-loops
  // wrote `refill_in_dot = 1` in the first k step of the body's mma.sync dot, before that step's
  // mma instructions (pipeline-loops says when and why). Either way it writes the stage no
  // thread reads after this iteration's barrier, and one commit group an iteration keeps
  // wait<S - 2>'s count. TESSERA_CUDA_REFILL_IN_DOT=1 (or =0) overrides the attribute for every
  // loop (an A/B switch).
  const char* in_dot_env = std::getenv("TESSERA_CUDA_REFILL_IN_DOT");
  const bool in_dot = in_dot_env && *in_dot_env ? env_flag("TESSERA_CUDA_REFILL_IN_DOT")
                                                : op.has_attr("refill_in_dot") && op.attr_int("refill_in_dot") == 1;
  bool refill_in_dot = false;
  if (in_dot)
    for (const auto& o : body.ops)
      refill_in_dot |= o->kind == OpKind::Dot && o->result()->type.layout.kind == tessera::Layout::Kind::Mma &&
                       o->result()->type.layout.version == 2;
  auto saved_refill = std::move(ring_refill_);
  ring_refill_ = nullptr;  // (a moved-from std::function's state is unspecified)
  const Op* saved_loop = ring_refill_loop_;
  const FragmentsAhead saved_ahead = frags_ahead_;
  frags_ahead_ = {};
  // pipeline-loops' `fragments_ahead = 1`: the body's mma.sync dot loads the next iteration's
  // first fragments before its last k step, where the ring's wait and barrier move (on the
  // H100, mma.sync matmul 4096^3 bf16: 0.441 -> 0.375 ms; bench/RESULTS.md, session 39).
  const Op* ahead_dot = lowered_wgmma_ ? nullptr : tessera::fragments_ahead_dot(op, loads, chain);
  if (ahead_dot && (!ahead_dot->has_attr("fragments_ahead") || ahead_dot->attr_int("fragments_ahead") != 1)) ahead_dot = nullptr;
  // (TESSERA_CUDA_SINGLE_FRAGMENTS=1, each step loading its own fragments, is the A/B switch
  // against any loading ahead: it prints the ring without them.)
  if (env_flag("TESSERA_CUDA_SINGLE_FRAGMENTS")) ahead_dot = nullptr;
  if (const Op* dot = ahead_dot) {
    const auto [MT, NT] = mma_sync_tiles(dot->result());
    frags_ahead_ = {dot, fresh("fa"), fresh("fb"), "", S};
    line("uint32_t " + frags_ahead_.fa + "[2][" + num(MT) + "][4], " + frags_ahead_.fb + "[2][" + num(NT) + "][2];");
    // The first iteration's stage: its copies in, for every thread.
    line("tsr::cp_async_wait<" + num(S - 2) + ">();");
    barrier();
    count("mma-fragments-ahead");
  }
  emit_loop(op, vals, carried,
            [&](const std::string& iv) {
              if (frags_ahead_.dot) {
                frags_ahead_.first = "(" + iv + "_ == int64_t(" + lb + "))";
              } else {
                line("tsr::cp_async_wait<" + num(S - 2) + ">();  // this iteration's copies are in");
                if (lowered_wgmma_) line("tsr::fence_proxy_async();  // for wgmma's reads");
                barrier();
              }
              const std::string at = "(" + iv + "_ + " + num(S - 1) + " * int64_t(" + step + "))";
              if (refill_in_dot) {
                ring_refill_ = [&issue, at, next_stage](int part, int parts) { issue(at, next_stage, part, parts); };
                ring_refill_loop_ = &op;
              } else {
                issue(at, next_stage);
              }
            },
            [&] {
              if (ring_refill_) {
                auto refill = std::move(ring_refill_);
                ring_refill_ = nullptr;
                refill(0, 1);
              }
              line(stage + " = int((unsigned(" + stage + ") + 1u) % " + num(S) + "u);");
            });
  ring_refill_ = std::move(saved_refill);
  ring_refill_loop_ = saved_loop;
  frags_ahead_ = saved_ahead;
  line("tsr::cp_async_wait<0>();");
  // A ring loop entered again (inside another loop) refills its first stages in its prologue,
  // which the last iteration's slower warps may still be reading: the end-of-iteration barrier
  // the ring no longer has, once after the loop (found by review: linear_cross_entropy with an
  // odd number of K tiles).
  if (runs_repeatedly(op)) barrier();
  count("ring-loops");
  return true;
}

void Emitter::plan_tma_rings(std::vector<std::string>& sig, CudaKernelInfo& info) {
  // (Only with wgmma: a 128-byte swizzled tile of an mma.sync kernel, swizzle-mma-operands',
  // is laid out by indices on a 128-byte boundary, not by the address bits the TMA swizzles.)
  if (!tg_.arch_specific || !tg_.tma || tg_.sm < 90 || !lowered_wgmma_) return;
  const Op* y = k_.grid ? k_.grid->terminator() : nullptr;
  program_pairs_ = y && y->has_attr("program_pairs") && y->attr_int("program_pairs") == 1;
  for (const auto& loop : k_.body->ops)
    for (auto [l, box] : tma_ring_boxes(k_, *loop)) {
      // A shared tile's box is half its rows: each CTA of the pair copies one half.
      if (multicast_load(*l)) box[1] /= 2;
      tma_loads_[l] = add_tensor_map(sig, info, l->operand(0), box, 128);
    }
}

std::string Emitter::init_ring_barriers(int64_t S, int64_t order, int64_t order_count, bool pairs) {
  const std::string SS = num(S) + "u";
  const int64_t off = (lowered_smem_ + 7) / 8 * 8;
  lowered_smem_ = off + 16 * S + 8 * order;
  const std::string bars = fresh("mb");
  line("const uint32_t " + bars + " = " + smem_fn() + lowered_base() + " + " + num(off) + ");");
  open("if (tsr_tid == 0) {");
  line("for (uint32_t s_ = 0; s_ < " + SS + "; ++s_) {");
  line("  tsr::mbar_init(" + bars + " + 8u * s_, 1);");
  line("  tsr::mbar_init(" + bars + " + 8u * (" + SS + " + s_), " + num(pairs ? 2 * warps_ : warps_) + ");");
  line("}");
  if (order > 0)
    line("for (uint32_t o_ = 0; o_ < " + num(order) + "u; ++o_) tsr::mbar_init(" + bars + " + 8u * (2u * " + SS +
         " + o_), " + num(order_count) + ");");
  line("tsr::mbar_init_fence();");
  close();
  // A pair's barriers are set up before either CTA copies into the other's ring or arrives on
  // its barriers. (__syncwarp: the .aligned cluster barrier wants thread 0's warp together.)
  if (pairs) line("__syncwarp();"), line("tsr::cluster_sync();");
  else barrier();
  return bars;
}

void Emitter::issue_tma_stage(const Op& loop, const std::vector<const Op*>& loads, const std::vector<const Op*>& chain,
                              const std::string& bars, int64_t S, const std::string& iv, const std::string& it,
                              bool one_thread) {
  const Block& body = loop.region(0);
  const std::string SS = num(S) + "u", ub = nm(loop.operand(1));
  int64_t bytes = 0;
  for (const Op* l : loads) bytes += rings_.at(l).stage_elems * scalar_bytes(l->result()->type.elem);
  open(std::string(one_thread ? "if (tsr_tid == 0 && " : "if (") + iv + " < int64_t(" + ub + ")) {");
  const std::string nv = fresh("nx"), st = fresh("st");
  line("const int32_t " + nv + " = int32_t(" + iv + ");");
  line("const uint32_t " + st + " = (" + it + ") % " + SS + ";");
  line("if ((" + it + ") >= " + SS + ") tsr::mbar_wait(" + bars + " + 8u * (" + SS + " + " + st + "), ((" + it + ") / " +
       SS + " - 1u) & 1u);");
  line("tsr::mbar_arrive_expect_tx(" + bars + " + 8u * " + st + ", " + num(bytes) + "u);");
  auto saved = name_;
  name_[body.args[0]] = nv;
  for (const Op* c : chain) emit_op(*c);
  for (const Op* l : loads) {
    const Ring& ring = rings_.at(l);
    const std::vector<int64_t> Sh = static_shape(l->result()->type.shape);
    const int R = static_cast<int>(Sh.size());
    std::vector<std::string> o(R);
    for (int d = 0; d < R; ++d) o[d] = "int(" + nm(l->operand(1 + d)) + ") * " + num(Sh[d]);
    const int64_t A = ring.view.atom, eb = 128 / A;  // a box per 128-byte column block
    // A pair's shared tile (2-D, pair-programs): this CTA copies rows [rank h, rank h + h) of
    // every box (h half the tile's rows, whole 8-row swizzle atoms) into both CTAs' rings.
    const bool mc = multicast_load(*l);
    const int64_t h = Sh[0] / 2;
    const std::string mc_at = mc ? " + tsr_mc_rank * " + num(h * 128) + "u" : "";
    if (mc) o[0] += " + int(tsr_mc_rank) * " + num(h);
    const std::string fn = "tsr::tma_load_" + num(R) + "d" + (mc ? "_multicast" : "");
    for (int64_t b = 0; b < Sh[R - 1] / A; ++b) {
      std::string at = smem_fn() + ring.view.ptr + ") + " + st + " * " + num(ring.stage_elems * eb) + "u + " +
                       num(b * ring.view.rows * 128) + "u" + mc_at;
      std::string coords = o[R - 1] + " + " + num(A * b);
      for (int d = R - 2; d >= 0; --d) coords += ", " + o[d];
      // (The multicast's CTA mask: both of the pair.)
      const std::string args = at + ", &" + tma_loads_.at(l) + ", " + coords + ", " + bars + " + 8u * " + st + (mc ? ", 3" : "");
      const std::string hint = R == 2 && l->has_attr("l2_hint") ? l->attr_string("l2_hint") : "";
      const std::string plain = fn + "(" + args + ");";
      if (hint.empty()) {
        line(plain);
      } else if (hint == "few_readers") {  // hint-l2-policy: evict_first where at most 2 programs read it
        std::string readers;
        for (int64_t a : l->attr_ints("readers"))
          readers += (readers.empty() ? "" : " * ") + std::string(ws_persistent_ ? "int64_t(tsr_grid" + num(a) + ")"
                                                                                  : std::string("int64_t(gridDim.") + "xyz"[a] + ")");
        line("if (" + readers + " <= 2) " + fn + "_hint(" + args + ", tsr::l2_policy_evict_first()); else " + plain);
        count("tma-l2-hints");
      } else {
        line(fn + "_hint(" + args + ", tsr::l2_policy_" + hint + "());");
        count("tma-l2-hints");
      }
    }
  }
  name_ = saved;
  close();
}

void Emitter::emit_tma_ring_loop(const Op& op, const std::vector<const Value*>& vals,
                                 const std::vector<std::string>& carried, const std::vector<const Op*>& loads,
                                 const std::vector<const Op*>& chain, int64_t S) {
  const std::string stage = rings_.at(loads[0]).stage, SS = num(S) + "u";
  // Under a producer warpgroup the barriers exist already and the producer issues every copy.
  const bool producer = &op == ws_loop_;
  // Under a persistent producer the count of iterations begun runs on over the CTA's programs
  // (it names the stage and its phase), and `rn0` is where this program's loop began.
  const bool persistent = producer && ws_persistent_;
  const std::string bars = producer ? ws_bars_ : init_ring_barriers(S), rn = persistent ? ws_rn_ : fresh("rn");
  const std::string lb = nm(op.operand(0)), step = nm(op.operand(2));
  auto issue = [&](const std::string& iv, const std::string& it) {
    if (!producer) issue_tma_stage(op, loads, chain, bars, S, iv, it, true);
  };
  std::string rn0 = "0";
  const bool pingpong = persistent && consumers_ == 2;
  // A stage's release: in both CTAs of a pair (each CTA's producer fills half of both rings).
  auto release = [&](const std::string& bar) {
    return producer && program_pairs_ ? "{ tsr::mbar_arrive(" + bar + "); tsr::mbar_arrive_cluster(" + bar + ", tsr_mc_peer); }"
                                      : "tsr::mbar_arrive(" + bar + ");";
  };
  if (pingpong) {
    // Every program's loop has the same trip count (pingpong-consumers checked that its bounds
    // do not depend on program ids), and the producer issues the programs in order: the
    // 2 tsr_j + tsr_cons programs before this one took the ring's iterations below
    // (2 tsr_j + tsr_cons) * trips.
    const std::string trips = fresh("trips"), ub = nm(op.operand(1));
    line("const uint32_t " + trips + " = " + step + " > 0 && " + ub + " > " + lb + " ? uint32_t((int64_t(" + ub + ") - " +
         lb + " + " + step + " - 1) / " + step + ") : 0u;");
    line(rn + " = uint32_t(2 * tsr_j + tsr_cons) * " + trips + ";  // this consumer's share of the ring");
    // The order barrier: program p's loop begins after program p - 1's (the other consumer's)
    // has issued its last dot. Consumer 1's j-th waits for phase j of consumer 0's barrier,
    // consumer 0's j-th (j > 0) for phase j - 1 of consumer 1's. Each wait is within one phase of
    // the barrier's: consumer 1 at its j-th program saw consumer 0's phase j - 1 complete (its
    // own (j - 1)-th waited for it), and consumer 0 cannot complete phase j + 1 before consumer
    // 1's j-th is done (likewise for consumer 0's waits), so the parity names the right phase.
    // The program before always exists (program 2j + c > 0 exists, so does 2j + c - 1), and a
    // consumer without programs neither waits nor arrives. This loop's full-barrier waits are
    // within one phase too: every earlier iteration's copies were waited for by its consumer
    // before this loop could begin, and the copies of iteration rn + S wait for rn's release,
    // this consumer's own; the other consumer's last stage may still be in use (its last group
    // in flight) but is a different stage, released before the producer refills it.
    line("if (tsr_cons == 1) tsr::mbar_wait(" + ws_order_ + ", uint32_t(tsr_j) & 1u);  // consumer 0's j-th loop is issued");
    line("else if (tsr_j > 0) tsr::mbar_wait(" + ws_order_ + " + 8u, uint32_t(tsr_j - 1) & 1u);  // consumer 1's (j - 1)-th");
  }
  if (persistent) {
    rn0 = fresh("rn");
    line("int " + stage + " = int(" + rn + " % " + SS + ");");
    line("const uint32_t " + rn0 + " = " + rn + ";  // this program's first iteration");
  } else {
    line("int " + stage + " = 0;");
    line("uint32_t " + rn + " = 0;  // iterations begun");
  }
  for (int64_t p = 0; p + 1 < S; ++p) issue("(int64_t(" + lb + ") + " + num(p) + " * int64_t(" + step + "))", num(p) + "u");
  // A wgmma dot in flight (pipeline-loops' `in_flight = 1`) accumulates into the carried
  // array itself; its group of iteration i is waited for in iteration i + 1, so a stage is
  // released, and refilled, one iteration later than the copies of a synchronous body allow.
  const Op* async = in_flight_dot(const_cast<Op&>(op));
  if (!async || !lowered_wgmma_ || !async->has_attr("in_flight") || async->attr_int("in_flight") != 1) async = nullptr;
  async_dot_ = async;
  if (async) wgmma_fence_acc(async->result(), nm(async->operand(2)));
  // A block the program before left (overlap-epilogues): box c during iteration c, after the
  // wgmma group is issued (lowered_wgmma).
  const bool store_boxes = !overlap_.pk.empty() && persistent && ws_consumers_ && async;
  if (store_boxes) overlap_.iter = "(" + rn + " - " + rn0 + ")";
  if (&op == stream_loop_) loop_bounds_[&op] = stream_k_bounds(op);
  std::string iv_name;
  emit_loop(op, vals, carried,
            [&](const std::string& iv) {
              iv_name = iv;
              if (!async) issue("(" + iv + "_ + " + num(S - 1) + " * int64_t(" + step + "))", rn + " + " + num(S - 1) + "u");
              line("tsr::mbar_wait(" + bars + " + 8u * (" + rn + " % " + SS + "), (" + rn + " / " + SS +
                   ") & 1u);  // this iteration's copies are in");
            },
            [&] {
              line("__syncwarp();");
              if (async) {
                // The group of the iteration before has finished (the dot waited for all but its
                // own): that stage is free for the copies S - 1 iterations ahead.
                line("if (" + rn + " > " + rn0 + " && tsr_lane == 0) " +
                     release(bars + " + 8u * (" + SS + " + (" + rn + " - 1u) % " + SS + ")"));
                issue("(" + iv_name + "_ + " + num(S - 1) + " * int64_t(" + step + "))", rn + " + " + num(S - 1) + "u");
              } else {
                // The warp's reads of the stage are done (the dots waited for their groups).
                line("if (tsr_lane == 0) " + release(bars + " + 8u * (" + SS + " + " + rn + " % " + SS + ")"));
              }
              line("++" + rn + ";");
              line(stage + " = (" + stage + " + 1) % " + num(S) + ";");
            });
  // The order barrier (ping-pong): the other consumer's next loop may begin once this one has
  // issued its last dot. With a dot in flight that is before the wait for its last group, so
  // the other consumer's first groups queue behind it and the tensor cores do not drain between
  // programs (the ring's barriers, not this one, keep the two consumers' stages apart). One
  // arrival per warp of this warpgroup.
  auto order_arrive = [&] {
    line("__syncwarp();");
    line("if (tsr_lane == 0) tsr::mbar_arrive(" + ws_order_ + " + 8u * uint32_t(tsr_cons));  // this program's dots are issued");
    count("pingpong-order-barriers");
  };
  if (pingpong && async) order_arrive();
  if (async) {
    line("tsr::wgmma_wait<0>();  // the last group");
    wgmma_fence_acc(async->result(), nm(async->operand(2)));
    // The last stage is read: the producer may refill it for the CTA's next program.
    if (persistent)
      line("if (" + rn + " > " + rn0 + " && tsr_lane == 0) " +
           release(bars + " + 8u * (" + SS + " + (" + rn + " - 1u) % " + SS + ")"));
    async_dot_ = nullptr;
    count("wgmma-dots-in-flight");
  }
  if (store_boxes) {
    open("if (" + overlap_.pend + ") {  // boxes the loop had too few iterations for");
    for (int64_t b = 0; b < overlap_.MT * overlap_.boxes; ++b)
      line("if (" + overlap_.iter + " <= " + num(b) + "u) " + overlap_box(b));
    line(overlap_.pend + " = false;");
    close();
    overlap_.iter.clear();
  }
  if (pingpong && !async) order_arrive();  // a synchronous body has waited for every group
  count("tma-ring-loops");
  if (producer) count("producer-warpgroups");
}

void Emitter::plan_warp_specialization(std::vector<std::string>& sig, CudaKernelInfo& info) {
  for (const auto& o : k_.body->ops) {
    if (o->kind != OpKind::For || !o->has_attr("warp_specialize") || o->attr_int("warp_specialize") != 1) continue;
    std::string why;
    ws_slice_ = producer_slice(k_, *o, &why);
    if (why.empty() && !lowered_wgmma_) why = "the kernel's dots are not on wgmma (its ring is not copied by TMA)";
    if (why.empty())
      for (const Op* l : ring_loads(*o, nullptr))
        if (!tma_loads_.count(l)) why = "its load at " + l->loc.str() + " is not a TMA copy";
    const int64_t C = o->has_attr("consumers") && o->attr_int("consumers") == 2 ? 2 : 1;
    const Op* yp = k_.grid ? k_.grid->terminator() : nullptr;
    if (why.empty() && C == 2 && (!yp || !yp->has_attr("persistent") || yp->attr_int("persistent") != 1))
      why = "consumers = 2 needs persistent CTAs";
    if (why.empty() && C * T_ + 128 > 1024)
      why = "its " + num(C * T_) + " compute threads and a producer warpgroup would be over 1024 threads";
    if (!why.empty()) {
      notes_.push_back("for at " + o->loc.str() + ": no producer warpgroup: " + why);
      continue;
    }
    ws_loop_ = o.get();
    consumers_ = static_cast<int>(C);
    info.block_threads = static_cast<int>(C * T_ + 128);
    if (C == 2) count("pingpong-consumers");
    const Op* y = k_.grid ? k_.grid->terminator() : nullptr;
    if (y && y->has_attr("persistent") && y->attr_int("persistent") == 1) {
      ws_persistent_ = true;
      info.persistent = true;
      add_grid_size_params(sig, info, 3);
      count("persistent-programs");
      notes_.push_back("persistent: one CTA per SM loops over the programs, " + num(group_rows()) +
                       " values of axis 0 at a time; its producer runs on into the next program's copies");
      if (program_pairs_) {
        info.persistent_cluster = 2;
        count("program-pairs");
        for (const Op* l : ring_loads(*o, nullptr))
          if (multicast_load(*l)) count("tma-multicast-loads");
        notes_.push_back("program pairs: clusters of 2 CTAs take programs (2q, n) and (2q + 1, n); each copies half of "
                         "every shared ring tile into both rings with TMA multicast");
      }
      for (const auto& s : k_.body->ops)
        if (s->kind == OpKind::StoreTile && s->has_attr("tma_store") && s->attr_int("tma_store") == 1) {
          tma_store_op_ = s.get();
          tma_store_map_ = add_tensor_map(sig, info, s->operand(0), 64, 64, 128);
          count("tma-stores");
          break;
        }
      if (y->has_attr("stream_k") && y->attr_int("stream_k") == 1 && o->has_attr("stream_k") && o->attr_int("stream_k") == 1) {
        // What stream-k-programs checked, again: marks written by hand (its pass left out)
        // that would add a start once a part, or run parts out of step, are not printed.
        std::string not_taken;
        if (splittable_k_loop(k_, &not_taken) != o.get())
          not_taken = not_taken.empty() ? "another loop is the one a split would cut" : not_taken;
        else if (C != 1) not_taken = "the ping-pong consumers take programs of their own";
        else if (y->has_attr("prefetch_buffers") || program_pairs_) not_taken = "the programs prefetch or run in CTA pairs";
        if (!not_taken.empty()) {
          notes_.push_back("for at " + o->loc.str() + ": stream_k = 1 not printed (whole tiles): " + not_taken);
        } else {
          // The workspace (last, as the split's): a flag per CTA, then a slot per CTA (every
          // compute thread's registers of the accumulator, slot-major).
          stream_loop_ = o.get();
          sig.push_back("unsigned char* __restrict__ tsr_ws");
          info.params.push_back({CudaParam::Kind::SplitWorkspace, ScalarKind::U8, 8, "split_workspace", -1});
          info.stream_k = true;
          info.split_slot_bytes = dist_of(o->result()).slots() * T_ * 4;
          count("stream-k");
          notes_.push_back("stream-K (stream-k-programs): the tiles when they are fewer than the CTAs, else a last partial "
                           "wave (of at least half the CTAs, else with the full wave before it), are cut into equal "
                           "shares of K work, one per CTA, each run last tile first; the CTA that ends a tile adds the "
                           "earlier parts in K order");
        }
      }
    }
    return;
  }
}

void Emitter::plan_lowered_split_k(std::vector<std::string>& sig, CudaKernelInfo& info) {
  for (const auto& o : k_.body->ops)
    if (o->kind == OpKind::For && o->has_attr("split_k") && o->attr_int("split_k") == 1) split_loop_ = o.get();
  if (!split_loop_) {
    // The runtime may launch this kernel's split-K compilation where split-k-loops would split
    // it (a wgmma K loop; the runtime's TMA checks and sizes decide the rest).
    std::string why;
    info.split_k_capable = lowered_wgmma_ && splittable_k_loop(k_, &why) != nullptr;
    // A kernel that asks for a split (split_k >= 2) which the runtime cannot launch runs
    // unsplit: say why rather than ignore the knob.
    if (const ConstexprDecl* d = k_.find_constexpr(kSplitKKnob); d && d->value >= 2 && !info.split_k_capable)
      notes_.push_back("knob " + std::string(kSplitKKnob) + " = " + std::to_string(d->value) +
                       ": the kernel runs unsplit: " + (lowered_wgmma_ ? why : std::string("its dot is not on wgmma")));
    return;
  }
  sig.push_back("unsigned char* __restrict__ tsr_ws");
  info.params.push_back({CudaParam::Kind::SplitWorkspace, ScalarKind::U8, 8, "split_workspace", -1});
  info.split_k = true;
  // A CTA's slot: every compute thread's slots of the accumulator, slot-major (the threads'
  // stores of one slot are consecutive words).
  const int64_t slots = dist_of(split_loop_->result()).slots();
  info.split_slot_bytes = slots * T_ * 4;
  // Within a cluster, where the runtime launches one (cuda::split_in_clusters): the partial sums
  // of CTAs 1.. wait in their largest ring, idle after the loop, for CTA 0 to read them over
  // distributed shared memory, in fours of registers.
  const int64_t S = split_loop_->has_attr("pipeline") ? split_loop_->attr_int("pipeline") : 1;
  int64_t most = 0;
  // (Swizzled rings only, TMA's: stage_bytes is then exactly what alloc_rings lays out.)
  for (const Op* l : S >= 2 ? ring_loads(*split_loop_, nullptr) : std::vector<const Op*>{})
    if (const int64_t bytes = S * stage_bytes(*l); bytes > most && l->result()->type.layout.swizzle == 128)
      most = bytes, split_cluster_ring_ = l;
  if (slots % 4 != 0 || most < info.split_slot_bytes) split_cluster_ring_ = nullptr;
  info.split_cluster = split_cluster_ring_ != nullptr;
  count("split-k");
  notes_.push_back(std::string("split-K: gridDim.z CTAs share each program's K loop (split-k-loops); ") +
                   (info.split_cluster ? "launched as one cluster (up to " + num(kMaxSplitKCluster) +
                                             " CTAs), the first adds its peers' partial sums over distributed shared "
                                             "memory; otherwise their partial sums"
                                       : "their partial sums") +
                   " meet in a workspace and the last CTA to arrive adds them in split order");
}

std::string Emitter::skipped_rows_guard(const Op& loop) {
  // split_skip_rows (split-k-loops, stream-k-programs): a warp whose rows of the accumulator all
  // lie past the dot's A view neither leaves nor adds partial sums (nothing reads those rows:
  // the stores drop them).
  if (!loop.has_attr("split_skip_rows") || loop.attr_int("split_skip_rows") != 1) return "";
  const Op* a = split_rows_load(loop);
  if (!a) return "";
  std::string first = "int64_t(" + nm(a->operand(1)) + ") * " + num(static_shape(a->result()->type.shape)[0]);
  const Dist& d = dist_of(loop.result());
  for (size_t b = 0; b < d.warp_bits.size(); ++b)
    if (d.warp_bits[b].dim == 0 && d.warp_bits[b].coef != 0)
      first += " + ((tsr_warp >> " + num(static_cast<int64_t>(b)) + ") & 1) * " + num(d.warp_bits[b].coef);
  count("split-rows-skipped");
  // (Written out at each use: a flag held from here took the 128 x 256 tile's split to a
  // spill, beside its 128 accumulators a thread.)
  return "(" + first + " < " + view_of(*a, a->operand(0)).dims[0] + ")";
}

// After the loop of a split-K launch's CTA (gridDim.z > 1): its partial sum goes to its slot
// of the workspace, and the last of the program's CTAs to arrive (an arrival counter per
// program, which it sets back to 0 for the next launch) adds every slot in split order, so that
// the sum does not depend on which CTA came last, and runs the rest of the program; the others
// end here. Where the runtime launched the program's CTAs as one cluster (split_cluster_ring_),
// CTAs 1.. leave their sums in their idle ring instead and CTA 0 adds them over distributed
// shared memory, in the same order.
void Emitter::lowered_split_k_fixup(const Op& loop) {
  const std::string acc = nm(loop.result());
  const int64_t slots = dist_of(loop.result()).slots();
  const std::string T = num(T_), slot = num(slots * T_);
  // The last-arrival flag: a word of the shared memory the emitter accounts for.
  const int64_t flag = (lowered_smem_ + 15) / 16 * 16;
  lowered_smem_ = flag + 16;
  const std::string mine = skipped_rows_guard(loop);
  const std::string if_mine = mine.empty() ? "" : "if (" + mine + ") ";
  open("if (gridDim.z > 1) {  // split-K: the program's CTAs add their partial sums");
  if (split_cluster_ring_) {
    // (The producer warpgroup passes the same two cluster barriers: emit_warp_specialized_body.)
    open("if (tsr::cluster_ctas() == gridDim.z) {");
    line("// in a cluster: CTAs 1.. leave their partial sums in their idle ring; CTA 0 adds them over");
    line("// distributed shared memory in split order and runs the rest.");
    // Every compute warp's last wgmma groups are done reading the ring first (each warpgroup
    // waited only for its own).
    barrier();
    line("const uint32_t buf_ = " + smem_fn() + rings_.at(split_cluster_ring_).view.ptr + ");");
    line("if (blockIdx.z != 0" + (mine.empty() ? "" : " && " + mine) + ") tsr::floats_to_smem(" + acc + ", buf_, tsr_tid, " + T + ");");
    line("tsr::cluster_sync();");
    line("if (blockIdx.z == 0" + (mine.empty() ? "" : " && " + mine) + ")");
    line("  for (unsigned z_ = 1; z_ < gridDim.z; ++z_) tsr::floats_add_cluster(" + acc + ", buf_, z_, tsr_tid, " + T + ");");
    line("tsr::cluster_sync();  // (no CTA leaves while CTA 0 may still read its shared memory)");
    line("if (blockIdx.z != 0) return;");
    close();
    open("else {");
  }
  // (A wgmma f32 accumulator, as split-k-loops requires: whole quads of registers a thread.)
  if (slots < 4 || slots % 4 != 0) fail(loop, "internal: a split-K accumulator of " + num(slots) + " registers a thread");
  const int64_t batch = fixup_batch(slots);
  line("volatile int& tsr_last_ = *reinterpret_cast<int*>(" + lowered_base() + " + " + num(flag) + ");");
  line("const int64_t prog_ = int64_t(blockIdx.y) * gridDim.x + blockIdx.x, progs_ = int64_t(gridDim.x) * gridDim.y;");
  line("unsigned* const cnt_ = reinterpret_cast<unsigned*>(tsr_ws);");
  line("float* const slots_ = reinterpret_cast<float*>(tsr_ws + (progs_ * 4 + 255) / 256 * 256);");
  line(if_mine + "tsr::floats_to_slot(" + acc + ", slots_ + (int64_t(blockIdx.z) * progs_ + prog_) * " + slot + ", tsr_tid, " + T + ");");
  line("__threadfence();");
  barrier();
  line("if (tsr_tid == 0) tsr_last_ = atomicAdd(cnt_ + prog_, 1u) == gridDim.z - 1u;");
  barrier();
  line("if (!tsr_last_) return;");
  line("__threadfence();");
  line("if (tsr_tid == 0) cnt_[prog_] = 0u;");
  // (Through L2, .cg: the slots were written by other multiprocessors.)
  line(if_mine + "tsr::floats_sum_slots<" + num(batch) + ">(" + acc + ", slots_ + prog_ * " + slot + ", progs_ * " + slot +
       ", int(gridDim.z), tsr_tid, " + T + ");");
  if (split_cluster_ring_) close();
  close();
}

int64_t Emitter::fixup_batch(int64_t slots) const {
  // As the planning emitter's batches: one compute warpgroup 16, more 2 for 128 accumulators a
  // thread, else 4; whole batches of the quads.
  int64_t batch = std::max<int64_t>(1, std::min<int64_t>(slots / 4, warps_ * consumers_ == 4 ? 16 : slots >= 128 ? 2 : 4));
  while ((slots / 4) % batch != 0) batch /= 2;
  return batch;
}

int64_t Emitter::compute_thread_registers() const {
  // As in the planning emitter's warp-specialized matmul: 40 for the producer warpgroup (a few
  // scalars), the rest of the 64 Ki shared among the compute threads (232 for two warpgroups,
  // at most 240) where setmaxnreg moves them; with one compute warpgroup, ptxas's cap for the
  // block (the 255 a thread can address).
  const int64_t CT = T_ * consumers_;
  return CT > 128 ? std::min<int64_t>(240, (65536 - 128 * 40) / CT / 8 * 8) : std::min<int64_t>(255, 65536 / (CT + 128) / 8 * 8);
}

int64_t Emitter::stream_k_batch(int64_t slots) const {
  // What registers allow beside the accumulators (the planning emitter's stream_k_batch); the
  // fixup's pointers and indices take about 40. Up to 16 quads a batch, whole batches.
  const int64_t quads = slots / 4;
  const int64_t spare = compute_thread_registers() - slots - 40;
  int64_t b = 1;
  while (2 * b <= std::min<int64_t>(quads, 16) && quads % (2 * b) == 0 && 4 * 2 * b <= spare) b *= 2;
  return b;
}

std::pair<std::string, std::string> Emitter::stream_k_bounds(const Op& loop) {
  const std::string lb = nm(loop.operand(0)), ub = nm(loop.operand(1)), step = nm(loop.operand(2));
  const std::string all = fresh("skall"), lo = fresh("sklo"), hi = fresh("skhi");
  line("const int64_t " + all + " = " + step + " > 0 && " + ub + " > " + lb + " ? (int64_t(" + ub + ") - " + lb + " + " + step +
       " - 1) / " + step + " : 0;  // the loop's iterations, of which this part runs units [tsr_pb, tsr_pe) of tsr_G");
  line("const int64_t " + lo + " = int64_t(" + lb + ") + " + all + " * tsr_pb / tsr_G * " + step + ", " + hi + " = int64_t(" + lb +
       ") + " + all + " * tsr_pe / tsr_G * " + step + ";");
  return {lo, hi};
}

// After a stream-K part's loop (compute warps): a part that ends inside its tile leaves its
// partial sum in its CTA's slot, raises its CTA's flag and skips the rest of the program (a CTA
// leaves a slot at most once a launch: only its last units, which it runs first, can end inside
// a tile); the tile's last part waits for each earlier part's flag, CTA by CTA (K order), adds
// its slot, and zeroes the flags for the next launch (stream order) before the rest runs.
void Emitter::lowered_stream_k_fixup(const Op& loop) {
  const std::string acc = nm(loop.result());
  const int64_t slots = dist_of(loop.result()).slots();
  if (slots < 4 || slots % 4 != 0) fail(loop, "internal: a stream-K accumulator of " + num(slots) + " registers a thread");
  const std::string T = num(T_), slot = num(slots * T_);
  const std::string mine = skipped_rows_guard(loop), if_mine = mine.empty() ? "" : "if (" + mine + ") ";
  open("{  // stream-K: the tile's parts add their partial sums");
  line("unsigned* const skflag_ = reinterpret_cast<unsigned*>(tsr_ws);");
  line("float* const skslot_ = reinterpret_cast<float*>(tsr_ws + (int64_t(tsr_G) * 4 + 255) / 256 * 256);");
  open("if (tsr_pe < tsr_G) {");
  line("// a part that ends inside the tile: its partial sum for the CTA that ends it");
  line(if_mine + "tsr::floats_to_slot(" + acc + ", skslot_ + int64_t(blockIdx.x) * " + slot + ", tsr_tid, " + T + ");");
  line("__threadfence();");
  barrier();
  line("if (tsr_tid == 0) tsr::flag_release(skflag_ + blockIdx.x);");
  line("continue;");
  close();
  open("if (tsr_pb > 0) {");
  line("// the tile's last part: the earlier parts' sums, CTA by CTA (K order); they ran first in their");
  line("// CTAs, so they are (nearly) always there already");
  open("for (int32_t c_ = tsr_tu / tsr_L; c_ < int32_t(blockIdx.x); ++c_) {");
  line("if (tsr_tid == 0) tsr::flag_poll(skflag_ + c_);");
  barrier();
  line("(void)tsr::flag_acquire(skflag_ + c_);  // set: orders this thread's slot reads after it");
  line(if_mine + "tsr::floats_add_slot_batched<" + num(stream_k_batch(slots)) + ">(" + acc + ", skslot_ + int64_t(c_) * " +
       slot + ", tsr_tid, " + T + ");");
  close();
  line("// every thread has seen the flags: zero them for the next launch");
  barrier();
  line("if (tsr_tid == 0)");
  line("  for (int32_t c_ = tsr_tu / tsr_L; c_ < int32_t(blockIdx.x); ++c_) skflag_[c_] = 0u;");
  close();
  close();
}

void Emitter::open_program_loop(bool pingpong) {
  std::string G = num(group_rows());
  // Program numbers in 32 bits: the runtime launches no persistent kernel of more than 2^31 - 1
  // programs (CudaRuntime.cpp), so a CTA's next number (+ gridDim.x, or twice that, at most a
  // few SMs' worth) does not wrap. 64-bit divisions are a software routine: the grouped order's
  // four or five of them, before a program's first copy, cost a few-program kernel (one program
  // a CTA) about as much as a microsecond. A group past 2^32 programs is taken as 2^32 - 1: no
  // program number reaches it either way.
  const bool planes = !k_.grid || k_.grid->terminator()->operands.size() > 2;
  // CTA pairs (program_pairs_) number pairs of axis-0 programs: tsr_grid0p = ceil(tsr_grid0 / 2)
  // rows of them, group_rows / 2 a group; both CTAs of a cluster take the same pair, rank r its
  // program 2q + r (past an odd grid for the last pair's rank 1: emit_lowered skips its stores).
  const std::string G0 = program_pairs_ ? "tsr_grid0p" : "uint32_t(tsr_grid0)";
  if (program_pairs_) {
    G = num(std::max<int64_t>(1, group_rows() / 2));
    line("const uint32_t tsr_grid0p = (uint32_t(tsr_grid0) + 1u) / 2u;");
  }
  line("const uint32_t tsr_plane = " + G0 + " * uint32_t(tsr_grid1), tsr_programs = tsr_plane * uint32_t(tsr_grid2);");
  line("const uint32_t tsr_in_group = uint32_t(" + G + "LL * tsr_grid1 < 4294967295LL ? " + G +
       "LL * tsr_grid1 : 4294967295LL);");
  if (stream_loop_) {
    // Stream-K (stream-k-programs; pairs, ping-pong and planes it declines): whole tiles
    // tsr_t = blockIdx.x, + gridDim.x, ... below tsr_dp; the last tsr_L tiles
    // (cuda::stream_k_tiles: all of them when they are fewer than gridDim.x, else a last partial
    // wave of at least half of gridDim.x, a smaller one with the full wave before it) as
    // tsr_L * gridDim.x units of K work, gridDim.x a tile, of which CTA c takes units
    // [c tsr_L, (c + 1) tsr_L): parts of at most three tiles (tsr_L < 2 gridDim.x), of which only
    // the last can end inside a tile. A CTA runs them last tile first: the parts that end inside
    // a tile, which the tile's last part waits for, run first, and the parts running at once
    // read nearby K panels (as a wave of whole tiles does, for L2). [tsr_pb, tsr_pe) is the
    // item's part of its tile, in units.
    line("const int32_t tsr_G = int32_t(gridDim.x), tsr_rem = int32_t(tsr_programs % uint32_t(tsr_G));");
    line("const int32_t tsr_L = tsr_rem == 0 ? 0 : 2 * tsr_rem >= tsr_G || tsr_programs < uint32_t(tsr_G) ? tsr_rem : tsr_rem + tsr_G;");
    line("const uint32_t tsr_dp = tsr_programs - uint32_t(tsr_L);");
    line("const int32_t tsr_u0 = int32_t(blockIdx.x) * tsr_L, tsr_u1 = tsr_u0 + tsr_L;");
    line("const int32_t tsr_ndp = blockIdx.x < tsr_dp ? int32_t((tsr_dp - 1u - blockIdx.x) / uint32_t(tsr_G)) + 1 : 0;");
    line("const int32_t tsr_nsk = tsr_L > 0 ? (tsr_u1 - 1) / tsr_G - tsr_u0 / tsr_G + 1 : 0;");
    open("for (int32_t tsr_i = 0; tsr_i < tsr_ndp + tsr_nsk; ++tsr_i) {");
    line("const bool tsr_sk = tsr_i >= tsr_ndp;");
    line("const uint32_t tsr_t = tsr_sk ? tsr_dp + uint32_t((tsr_u1 - 1) / tsr_G - (tsr_i - tsr_ndp)) : blockIdx.x + uint32_t(tsr_i) * "
         "uint32_t(tsr_G);");
    line("const int32_t tsr_tu = tsr_sk ? int32_t(tsr_t - tsr_dp) * tsr_G : 0;  // the tile's first unit (stream-K tiles)");
    line("const int32_t tsr_pb = tsr_sk && tsr_u0 > tsr_tu ? tsr_u0 - tsr_tu : 0;");
    line("const int32_t tsr_pe = tsr_sk && tsr_u1 < tsr_tu + tsr_G ? tsr_u1 - tsr_tu : tsr_G;");
    line("(void)tsr_pb; (void)tsr_pe; (void)tsr_tu;");
  } else if (program_pairs_)
    open("for (uint32_t tsr_t = blockIdx.x / 2u; tsr_t < tsr_programs; tsr_t += gridDim.x / 2u) {");
  else if (pingpong)
    open("for (uint32_t tsr_j = 0, tsr_t = blockIdx.x + uint32_t(tsr_cons) * gridDim.x; tsr_t < tsr_programs; "
         "++tsr_j, tsr_t += 2u * gridDim.x) {");
  else
    open("for (uint32_t tsr_t = blockIdx.x; tsr_t < tsr_programs; tsr_t += gridDim.x) {");
  // Within a plane of axis 2: groups of G values of axis 0, each taken for every value of axis 1
  // in turn, axis 0 fastest (the planning emitter's grouped order). (A grid of two axes has one
  // plane.)
  line(planes ? "const uint32_t tsr_u = tsr_t % tsr_plane;" : "const uint32_t tsr_u = tsr_t;");
  emit_grouped_ids("tsr_u", G, G0, program_pairs_, "uint32_t");
  line(planes ? "const int32_t tsr_pid2 = int32_t(tsr_t / tsr_plane);" : "const int32_t tsr_pid2 = 0;");
  line("(void)tsr_pid0; (void)tsr_pid1; (void)tsr_pid2;");
}

void Emitter::emit_warp_specialized_body() {
  const Op& loop = *ws_loop_;
  const int64_t S = loop.attr_int("pipeline");
  std::vector<const Op*> chain;
  const std::vector<const Op*> loads = ring_loads(loop, &chain);
  const std::vector<const Op*>& slice = ws_slice_;
  // The ring and its barriers, before the branches (both use them).
  alloc_rings(loads, S);
  // The compute warps: consumers_ warpgroups (ping-pong) or warps_ warps that split each tile.
  const int64_t CW = warps_ * consumers_, CT = T_ * consumers_;
  if (tma_store_op_) {
    // Two (or tma_buffers) 64 x 64 boxes of 16-bit elements per compute warpgroup, 1024-byte
    // aligned (the swizzle). Printed before the consumers' branch: tsr_tid / 128 is the
    // warpgroup, and so the consumer.
    const int64_t off = (lowered_smem_ + 1023) / 1024 * 1024, per = 8192 * tma_store_buffers();
    lowered_smem_ = off + (CW / 4) * per;
    tma_store_buf_ = fresh("epi");
    line("const uint32_t " + tma_store_buf_ + " = " + smem_fn() + lowered_base() + " + " + num(off) +
         ") + uint32_t(tsr_tid / 128) * " + num(per) + "u;");
  }
  // Ping-pong: an empty barrier counts one consumer's warps (one warpgroup releases a stage),
  // and two order barriers follow the ring's, one per consumer, each for its warps' arrivals.
  ws_bars_ = init_ring_barriers(S, consumers_ == 2 ? 2 : 0, warps_, program_pairs_);
  if (consumers_ == 2) ws_order_ = "(" + ws_bars_ + " + " + num(16 * S) + "u)";
  const std::string W = num(CW);
  // Registers move from the producer to the compute warps (compute_thread_registers) where
  // there is more than one compute warpgroup.
  const bool realloc = CW > 4;
  const int64_t consumer_regs = compute_thread_registers();
  open("if (tsr_warp >= " + W + ") {  // the producer warpgroup: one thread issues every stage's copies");
  if (realloc) line("tsr::setmaxnreg_dec<40>();");
  open("if (tsr_tid == " + num(CT) + ") {");
  const auto saved_names = name_;
  const auto saved_stats = stats_;
  // The stages issued: over all the CTA's programs when it is persistent (the ring's phases
  // run on).
  const std::string it = fresh("pi");
  line("uint32_t " + it + " = 0;");
  if (program_pairs_) line("const uint32_t tsr_mc_rank = tsr::cluster_rank();  // which half of the pair's shared tiles");
  if (ws_persistent_) open_program_loop();
  for (const auto& o : k_.body->ops) {
    if (std::find(slice.begin(), slice.end(), o.get()) != slice.end()) {
      emit_op(*o);
    } else if (o.get() == &loop) {
      std::string lb = nm(loop.operand(0)), ub = nm(loop.operand(1));
      const std::string step = nm(loop.operand(2));
      if (&loop == stream_loop_) std::tie(lb, ub) = stream_k_bounds(loop);
      const std::string iv = fresh("pv");
      open("for (int64_t " + iv + " = " + lb + "; " + step + " > 0 && " + iv + " < " + ub + "; " + iv + " += " + step +
           ", ++" + it + ") {");
      issue_tma_stage(loop, loads, chain, ws_bars_, S, iv, it, false);
      close();
    }
  }
  if (ws_persistent_) close();
  name_ = saved_names;
  stats_ = saved_stats;
  close();
  if (split_cluster_ring_ && split_loop_ == &loop) {
    // (.aligned: the warp together again after its one thread's loop.)
    line("__syncwarp();");
    line("if (gridDim.z > 1 && tsr::cluster_ctas() == gridDim.z) tsr::cluster_sync(), tsr::cluster_sync();  // the "
         "split's two cluster barriers");
  }
  --ind_;
  line("} else {  // the compute warps");
  ++ind_;
  if (realloc) line("tsr::setmaxnreg_inc<" + num(consumer_regs) + ">();");
  if (program_pairs_) line("const uint32_t tsr_mc_peer = tsr::cluster_rank() ^ 1u;  // the pair's other CTA");
  const size_t first = lines_.size();
  const bool pingpong = consumers_ == 2;
  if (pingpong) {
    // Ping-pong (pingpong-consumers): warpgroup c is consumer c, a whole program's tile on its
    // own, and the layouts' thread ids are relative to it.
    line("const int tsr_cons = tsr_tid / " + num(T_) + ", tsr_ctid = tsr_tid;  // which consumer warpgroup");
    open("{");
    line("const int tsr_tid = tsr_ctid - " + num(T_) + " * tsr_cons;  // within the consumer's warpgroup");
    line("const int tsr_lane = tsr_tid & 31, tsr_warp = tsr_tid >> 5;  (void)tsr_lane; (void)tsr_warp;");
  }
  ws_consumers_ = true;
  const bool overlap = tma_store_op_ && tma_store_op_->has_attr("overlap") && tma_store_op_->attr_int("overlap") == 1;
  if (overlap) {
    // The block a program leaves for the next one's loop to store (overlap-epilogues).
    const Value* tile = tma_store_op_->operand(1);
    const std::vector<int64_t> S = shape_of(*tma_store_op_, tile);
    const TmaStoreBlocks blocks = tma_store_blocks(tile, S);
    overlap_ = {fresh("epk"), fresh("erow"), fresh("ecol"), fresh("epend"), "", blocks.MT, blocks.boxes, blocks.G, 1};
    overlap_.in_flight = epilogue_box_in_flight(overlap_.MT * overlap_.boxes, tma_store_buffers());
    line("uint32_t " + overlap_.pk + "[" + num(overlap_.MT) + "][" + num(S[1] / 4) + "];");
    line("int " + overlap_.row + " = 0, " + overlap_.col + " = 0;");
    line("bool " + overlap_.pend + " = false;");
    count("overlapped-epilogues");
  }
  if (ws_persistent_) {
    ws_rn_ = fresh("rn");
    line("uint32_t " + ws_rn_ + " = 0;  // iterations begun, over the CTA's programs");
    open_program_loop(pingpong);
  }
  emit_block(*k_.body);
  if (ws_persistent_) close();
  if (overlap) {
    open("if (" + overlap_.pend + ") {  // the CTA's last program's block");
    for (int64_t b = 0; b < overlap_.MT * overlap_.boxes; ++b) line(overlap_box(b));
    close();
    overlap_ = {};
  }
  // The TMA stores read their buffers until they complete: the program's shared memory stays.
  if (tma_store_op_) line("if (tsr_tid % 128 == 0) tsr::bulk_wait_all();");
  ws_consumers_ = false;
  if (pingpong) close();
  for (size_t i = first; i < lines_.size(); ++i) {
    if (lines_[i].find("__syncthreads()") != std::string::npos)
      throw NotWarpSpecializable{"the compute warps' code has a whole-program barrier"};
    // One named barrier for both consumers, each counting its own threads, would mix them.
    if (pingpong && lines_[i].find("tsr::named_barrier(" + num(kComputeBarrier) + "u") != std::string::npos)
      throw NotWarpSpecializable{"the ping-pong consumers' code has a barrier over the compute warps"};
  }
  close();
  // Neither CTA of a pair leaves while the other may still copy into its ring or arrive on its
  // barriers.
  if (program_pairs_) line("__syncwarp();  // (the producer's warp after its one thread's loop)"), line("tsr::cluster_sync();");
}

void Emitter::emit_tma_store(const Op& op) {
  const Value* tile = op.operand(1);
  const std::vector<int64_t> S = shape_of(op, tile);
  const int64_t N = S[1];
  const ScalarKind t = op.operand(0)->type.elem;
  // Block mt of warpgroup wg is rows 64 (mt G + wg).
  const auto [G, MT, boxes] = tma_store_blocks(tile, S);
  const std::string r = nm(tile);
  open("{  // by TMA from shared memory, a 64 x 64 box at a time (store-epilogues-by-tma)");
  // The accumulator's slots mt N / 2 + 4j .. + 3 are columns 8j + 2t, +1 of rows g and g + 8 of
  // block mt: the pairs epilogue_box_sw128 takes.
  // Both halves of a word in one conversion (cvt.rn.bf16x2 / f16x2; the TMA store takes 16-bit
  // floats only).
  const std::string pair = t == ScalarKind::BF16 ? "tsr::f2bf2(" : "tsr::f2h2(";
  auto two = [&](const std::string& lo, const std::string& hi) {
    return pair + r + "[" + lo + "], " + r + "[" + hi + "])";
  };
  std::vector<std::string> pk;
  for (int64_t mt = 0; mt < MT; ++mt) {
    pk.push_back(fresh("pk"));
    const std::string base = mt ? num(mt * N / 2) + " + " : "";
    line("uint32_t " + pk[mt] + "[" + num(N / 4) + "];");
    line("#pragma unroll");
    open("for (int j_ = 0; j_ < " + num(N / 8) + "; ++j_) {");
    line(pk[mt] + "[2 * j_] = " + two(base + "4 * j_", base + "4 * j_ + 1") + ";");
    line(pk[mt] + "[2 * j_ + 1] = " + two(base + "4 * j_ + 2", base + "4 * j_ + 3") + ";");
    close();
  }
  const std::string col = "int(int64_t(" + nm(op.operand(3)) + ") * " + num(N) + ")";
  if (!overlap_.pk.empty()) {
    // A block no loop stored (the program's loop had no wgmma group in flight to store it
    // beside): stored before this one takes its registers.
    open("if (" + overlap_.pend + ") {");
    for (int64_t b = 0; b < overlap_.MT * overlap_.boxes; ++b) line(overlap_box(b));
    close();
    // Left for the next program's loop (overlap_box): the packed pairs, and where they go.
    for (int64_t mt = 0; mt < MT; ++mt) {
      line("#pragma unroll");
      open("for (int j_ = 0; j_ < " + num(N / 4) + "; ++j_) {");
      line(overlap_.pk + "[" + num(mt) + "][j_] = " + pk[mt] + "[j_];");
      close();
    }
    line(overlap_.row + " = int(int64_t(" + nm(op.operand(2)) + ") * " + num(S[0]) + ") + (tsr_tid / 128) * 64;");
    line(overlap_.col + " = " + col + ";");
    line(overlap_.pend + " = true;");
    close();
    return;
  }
  // Two buffers (or tma_buffers), taken in turn over the blocks' boxes: with a number of boxes
  // that is no multiple of them, the next program's first box may write the buffer of one of
  // this program's last, so every store must be done reading.
  const int64_t B = tma_store_buffers();
  const std::string in_flight = num(epilogue_box_in_flight(MT * boxes, B));
  for (int64_t mt = 0; mt < MT; ++mt) {
    const std::string row = "int(int64_t(" + nm(op.operand(2)) + ") * " + num(S[0]) + ") + (tsr_tid / 128) * 64" +
                            (mt ? " + " + num(64 * mt * G) : "");
    for (int64_t c = 0; c < boxes; ++c)
      line("tsr::epilogue_box_sw128<" + num(c) + ", " + in_flight + ">(&" + tma_store_map_ + ", " + tma_store_buf_ + " + " +
           num(((mt * boxes + c) % B) * 8192) + "u, " + pk[mt] + ", " + col + ", " + row + ");");
  }
  close();
}

std::string Emitter::shared_addr(const SharedView& sv) const {
  auto it = stage_u32_.find(sv.ptr);
  return it != stage_u32_.end() ? it->second : smem_fn() + sv.ptr + ")";
}

int64_t Emitter::tma_store_buffers() const {
  return tma_store_op_ && tma_store_op_->has_attr("tma_buffers") ? tma_store_op_->attr_int("tma_buffers") : 2;
}

std::string Emitter::overlap_box(int64_t b) const {
  const int64_t mt = b / overlap_.boxes, c = b % overlap_.boxes;
  return "tsr::epilogue_box_sw128<" + num(c) + ", " + num(overlap_.in_flight) + ">(&" + tma_store_map_ + ", " +
         tma_store_buf_ + " + " + num((b % tma_store_buffers()) * 8192) + "u, " + overlap_.pk + "[" + num(mt) + "], " + overlap_.col + ", " +
         overlap_.row + (mt ? " + " + num(64 * mt * overlap_.G) : "") + ");";
}

int64_t Emitter::lowered_vector_width(const Value* v) const {
  return vector_width(dist_of(v), v->type.rank() - 1, scalar_bytes(v->type.elem));
}

// A store's vector store to global memory: with the streaming hint where hint-l2-policy gave
// it `l2_hint = "evict_first"` (the knob stream_stores), st.global.cs.
std::string Emitter::store_vec_fn(const Op& store) {
  const bool stream = store.has_attr("l2_hint") && store.attr_string("l2_hint") == "evict_first";
  return stream ? "tsr::store_vec_cs<" : "tsr::copy_vec<";
}

bool Emitter::lowered_store_staged(const Op& op) {
  if (cluster_ > 1) return false;  // (a CTA of a cluster holds its part of the tile: stored from registers)
  const Value *view = op.operand(0), *tile = op.operand(1);
  const ViewInfo& vi = view_of(op, view);
  const std::vector<int64_t> S = shape_of(op, tile);
  const Dist& d = dist_of(tile);
  const ScalarKind t = view->type.elem;
  const int64_t eb = scalar_bytes(t), E = 16 / eb, V = lowered_vector_width(tile);
  // What the pass cannot see, checked here (each declines to the store from registers): a tile
  // some threads hold copies of; shared memory the emitter holds for a value read after the
  // store (a shared tile, or a dot operand left in shared memory for its fragments, as
  // lowered_convert does for a register operand); a kernel whose shared memory other warps or
  // the next program may be using.
  if (op.parent != k_.body.get() || S.size() != 2 || (S[1] * eb) % 16 != 0 || d.owner_expr() != "true" || ws_consumers_ ||
      lowered_wgmma_ || prog_persistent_) {
    count("staged-stores-declined");
    return false;
  }
  bool after = false, held_after = false;
  auto reads_held = [&](Op& o) {
    for (const Value* v : o.operands) held_after |= shared_.count(v) != 0 || staged_.count(v) != 0;
  };
  for (const auto& top : k_.body->ops) {
    if (after) {
      reads_held(*top);
      for (const auto& r : top->regions) walk(*r, reads_held);
    }
    after |= top.get() == &op;
  }
  if (held_after) {
    count("staged-stores-declined");
    return false;
  }
  // Rows padded by 16 bytes: the 8 rows of an mma.sync tile a warp writes at once fall in
  // different banks. The tile takes the start of the kernel's shared tiles, none of which is
  // read after the store (above); where they are smaller than the tile it is stored from
  // registers.
  const int64_t LD = S[1] + E, bytes = S[0] * LD * eb;
  if (bytes > lowered_smem_) {
    count("staged-stores-without-room");
    return false;
  }
  const std::string St = stype(t), st = fresh("st"), lr = fresh("lr"), lc = fresh("lc"), c = fresh("c");
  open("{  // through shared memory in 16-byte rows (stage-epilogue-stores)");
  barrier();  // every thread is done with the shared tiles
  line(St + "* const " + st + " = reinterpret_cast<" + St + "*>" + lowered_base() + ";");
  line("const int " + lr + " = " + d.thread_expr(0) + ", " + lc + " = " + d.thread_expr(1) + ";");
  line("#pragma unroll");
  open("for (int " + c + " = 0; " + c + " < " + num(d.slots() / V) + "; ++" + c + ") {");
  const std::string s0 = c + " * " + num(V), buf = fresh("vb");
  line(St + " " + buf + "[" + num(V) + "];");
  for (int64_t v = 0; v < V; ++v)
    line(buf + "[" + num(v) + "] = " + store_conv(t, nm(tile) + "[" + s0 + " + " + num(v) + "]") + ";");
  line("tsr::copy_vec<" + St + ", " + num(V) + ">(" + st + " + (" + lr + " + " + d.const_expr(0, s0) + ") * " + num(LD) +
       " + " + lc + " + " + d.const_expr(1, s0) + ", " + buf + ");");
  close();
  barrier();
  // Chunk q of the tile (row q / CPR, 16-byte chunk q % CPR) by thread q % T, consecutive
  // threads on consecutive chunks of a row.
  const int64_t CPR = S[1] / E, chunks = S[0] * CPR;
  const std::string o0 = fresh("o"), o1 = fresh("o"), q = fresh("q"), r = fresh("r"), k = fresh("k");
  line("const int64_t " + o0 + " = int64_t(" + nm(op.operand(2)) + ") * " + num(S[0]) + ", " + o1 + " = int64_t(" +
       nm(op.operand(3)) + ") * " + num(S[1]) + ";");
  const std::string whole = o0 + " >= 0 && " + o0 + " + " + num(S[0]) + " <= " + vi.dims[0] + " && " + o1 + " >= 0 && " + o1 +
                            " + " + num(S[1]) + " <= " + vi.dims[1] + " && " + vi.strides[1] + " == 1 && " + vi.strides[0] +
                            " % " + num(E) + " == 0 && tsr::aligned_vec<" + St + ", " + num(E) + ">(" + vi.ptr + " + " + o0 +
                            " * " + vi.strides[0] + " + " + o1 + ")";
  auto chunk_loop = [&](const std::string& unroll) {
    line(unroll);
    open("for (int " + q + " = tsr_tid; " + q + " < " + num(chunks) + "; " + q + " += " + num(T_) + ") {");
    line("const int " + r + " = " + q + " / " + num(CPR) + ", " + k + " = " + q + " % " + num(CPR) + " * " + num(E) + ";");
  };
  open("if (" + whole + ") {");
  chunk_loop("#pragma unroll 4");
  line(store_vec_fn(op) + St + ", " + num(E) + ">(" + vi.ptr + " + (" + o0 + " + " + r + ") * " + vi.strides[0] + " + " + o1 +
       " + " + k + ", " + st + " + " + r + " * " + num(LD) + " + " + k + ");");
  close();
  --ind_;
  open("} else {");  // a ragged or unaligned edge: element by element, inside the view
  chunk_loop("#pragma unroll 1");
  open("for (int e_ = 0; e_ < " + num(E) + "; ++e_) {");
  line("if (" + o0 + " + " + r + " < " + vi.dims[0] + " && " + o1 + " + " + k + " + e_ < " + vi.dims[1] + ") " + vi.ptr + "[(" +
       o0 + " + " + r + ") * " + vi.strides[0] + " + (" + o1 + " + " + k + " + e_) * " + vi.strides[1] + "] = " + st + "[" + r +
       " * " + num(LD) + " + " + k + " + e_];");
  close();
  close();
  close();
  barrier();  // the tile's shared memory is free again
  close();
  count("staged-stores");
  return true;
}

void Emitter::lowered_load_store(const Op& op) {
  if (&op == tma_store_op_ && ws_consumers_) return emit_tma_store(op);
  const bool load = op.kind == OpKind::LoadTile;
  if (!load && op.has_attr("staged") && op.attr_int("staged") == 1 && lowered_store_staged(op)) return;
  if (load && op.result()->type.layout.kind == tessera::Layout::Kind::Shared) return lowered_load_shared(op);
  const Value* view = op.operand(0);
  const ViewInfo& vi = view_of(op, view);
  const Value* tile = load ? op.result() : op.operand(1);
  const size_t first = load ? 1 : 2;
  const int R = view->type.rank();
  if (tile->type.rank() != R || op.operands.size() != first + static_cast<size_t>(R))
    fail(op, "needs a tile of the view's rank and one index per view dim");
  const std::vector<int64_t> S = shape_of(op, tile);
  const Dist& d = dist_of(tile);
  const ScalarKind t = view->type.elem;
  // Program prefetch (prefetch-programs, EmitProgramPrefetch.cpp): `issue` prints the next
  // program's cp.async copies of this load's in-bounds aligned runs instead of the load; else a
  // load with a prefetch reads those runs from shared memory when its buffer holds this
  // program's tile. Run c of thread tid is at slot c * T + tid of the tile's part of the buffer.
  const bool issue = pf_mode_ == PfMode::Issue;
  const ProgramPrefetch* pf = load && prog_persistent_ ? program_prefetch_of(op) : nullptr;
  if (issue && !pf) fail(op, "internal: program prefetch of a load without a plan");
  // A 16-bit float tile that only casts to f32 read slot by slot use (packs_load) is held as
  // packed words, half the registers, and its casts convert at each use (alias_packed_cast),
  // as in the planning emitter.
  const bool packed = load && !issue && packs_load(op);
  const std::string r = issue  ? std::string()
                        : !load ? nm(tile)
                        : packed ? bind_new(tile)
                                 : declare(op, tile);
  if (packed) {
    line(packed_type(tile) + " " + r + ";");
    count("packed-loads");
  }
  const std::string pad = lit(t, op.has_attr("pad") ? op.attr_number("pad") : 0.0);
  const std::string own = d.owner_expr();
  open("{");
  std::vector<std::string> o(R);
  for (int q = 0; q < R; ++q) {
    o[q] = fresh("o");
    line("const int64_t " + o[q] + " = int64_t(" + nm(op.operand(first + q)) + ") * " + num(S[q]) + " + " +
         d.thread_expr(q) + ";");
  }
  // The element of slot s + v (v along the last dim) in the view: in bounds, and its offset.
  auto element = [&](const std::string& s, int64_t v, std::string& ok, std::string& at) {
    ok.clear(), at.clear();
    for (int q = 0; q < R; ++q) {
      std::string g = "(" + o[q] + " + " + d.const_expr(q, s) + (q == R - 1 && v ? " + " + num(v) : "") + ")";
      // Unsigned: a negative coordinate (a tile index below 0) is outside too, in one compare.
      ok += (q ? " && " : "") + std::string("uint64_t") + g + " < uint64_t(" + vi.dims[q] + ")";
      at += (q ? " + " : "") + g + " * " + vi.strides[q];
    }
  };
  auto scalar_access = [&](const std::string& s, int64_t v) {
    std::string ok, at;
    element(s, v, ok, at);
    const std::string addr = vi.ptr + "[" + at + "]", slot = r + "[" + s + (v ? " + " + num(v) : "") + "]";
    if (load) line(slot + " = (" + ok + ") ? " + load_conv(t, addr) + " : " + pad + ";");
    else line("if (" + (own == "true" ? "" : own + " && ") + ok + ") " + addr + " = " + store_conv(t, slot) + ";");
  };
  // A thread's run of V elements along the last dim (the layout's fastest slots) is one vector
  // access of up to 16 bytes where it is in bounds and aligned.
  const int64_t V = lowered_vector_width(tile);
  const std::string St = stype(t);
  if (pf && V * scalar_bytes(t) != 16) fail(op, "internal: program prefetch of a tile without 16-byte runs");
  std::string hit;  // this program's tile is in the prefetch buffer
  if (pf && !issue) {
    hit = fresh("hit");
    // (a tile that is the same for every program stays valid once copied)
    line("const bool " + hit + " = " + pf->tag + (pf->invariant ? " >= 0;" : " == tsr_t;"));
  }
  auto pf_slot = [&](const std::string& buf, const std::string& c) {
    return buf + " + " + num(pf->offset) + " + (" + c + " * " + num(T_) + " + tsr_tid) * 16";
  };
  // Run `c` (first slot s0) from the storage-type pointer expression `from`: into the packed
  // words, or into `buf` and converted slot by slot.
  auto load_run_from = [&](const std::string& s0, const std::string& from, const std::string& buf) {
    if (packed) {
      line("tsr::copy_vec<uint32_t, " + num(V / 2) + ">(" + r + ".w + (" + s0 + ") / 2, reinterpret_cast<const uint32_t*>(" +
           from + "));");
      return;
    }
    line("tsr::copy_vec<" + St + ", " + num(V) + ">(" + buf + ", " + from + ");");
    for (int64_t v = 0; v < V; ++v) line(r + "[" + s0 + " + " + num(v) + "] = " + load_conv(t, buf + "[" + num(v) + "]") + ";");
  };
  // A load's run in bounds and aligned at element offset `at`: from the prefetch buffer on a
  // hit, else from global memory; in `issue` mode the next program's copy of it instead.
  auto load_run = [&](const std::string& c, const std::string& s0, const std::string& at, const std::string& buf) {
    if (issue) {
      line("tsr::cp_async_16(" + smem_fn() + pf_slot("tsr_pf_nxt", c) + "), " + vi.ptr + " + " + at + ");");
      return;
    }
    if (!hit.empty()) {
      open("if (" + hit + ") {");
      load_run_from(s0, "reinterpret_cast<const " + St + "*>(" + pf_slot("tsr_pf_cur", c) + ")", buf);
      --ind_;
      open("} else {");
      load_run_from(s0, vi.ptr + " + " + at, buf);
      close();
      return;
    }
    load_run_from(s0, vi.ptr + " + " + at, buf);
  };
  // A 16-bit float run is stored as words, both halves of each rounded in one conversion
  // (cvt.rn.bf16x2 / f16x2) instead of one cvt a slot, as the planning emitter's row stores are
  // (EmitMemory.cpp); the kernel's knob pair_stores = 0 turns it off (for comparisons).
  const ConstexprDecl* ps = k_.find_constexpr("pair_stores");
  const bool pair_store = !load && (t == ScalarKind::BF16 || t == ScalarKind::F16) && V % 2 == 0 && !(ps && ps->value == 0);
  auto run_buffer = [&](const std::string& buf) {
    return pair_store ? "uint32_t " + buf + "[" + num(V / 2) + "];" : St + " " + buf + "[" + num(V) + "];";
  };
  // A run in bounds and aligned at offset `at`: one vector access through the storage-type
  // buffer `buf` (declared by the caller: under pair_store, V / 2 words), converted slot by slot.
  auto vector_run = [&](const std::string& c, const std::string& s0, const std::string& at, const std::string& buf) {
    if (load) {
      load_run(c, s0, at, buf);
    } else if (pair_store) {
      const std::string pair = t == ScalarKind::BF16 ? "tsr::f2bf2(" : "tsr::f2h2(";
      for (int64_t v = 0; v < V; v += 2)
        line(buf + "[" + num(v / 2) + "] = " + pair + r + "[" + s0 + " + " + num(v) + "], " + r + "[" + s0 + " + " +
             num(v + 1) + "]);");
      line((own == "true" ? "" : "if (" + own + ") ") + store_vec_fn(op) + "uint32_t, " + num(V / 2) +
           ">(reinterpret_cast<uint32_t*>(" + vi.ptr + " + " + at + "), " + buf + ");");
    } else {
      for (int64_t v = 0; v < V; ++v) line(buf + "[" + num(v) + "] = " + store_conv(t, r + "[" + s0 + " + " + num(v) + "]") + ";");
      line((own == "true" ? "" : "if (" + own + ") ") + store_vec_fn(op) + St + ", " + num(V) + ">(" + vi.ptr + " + " + at +
           ", " + buf + ");");
    }
  };
  // Words of a packed tile from a run's storage-type buffer.
  auto pack_words = [&](const std::string& s0, const std::string& buf) {
    for (int64_t v = 0; v < V; v += 2)
      line(r + ".w[(" + s0 + ") / 2 + " + num(v / 2) + "] = uint32_t(" + buf + "[" + num(v) + "]) | (uint32_t(" + buf + "[" +
           num(v + 1) + "]) << 16);");
  };
  if (V == 1) {
    slots(layout_of(tile), [&](const std::string& s) { scalar_access(s, 0); });
    close();
    return;
  }
  // One test that the whole tile is in bounds, its first element aligned to the vector and
  // every row stride a multiple of it; then every run is a vector access with no test of its
  // own. A tile at a ragged or unaligned edge takes the run-by-run path below. On unless the
  // kernel sets whole_tile_checks = 0 (the planning emitter's knob, off there by default: see
  // EmitMemory.cpp). H100, bf16 4096-wide rows: layernorm (which sets it) 1066 -> 2477 GB/s
  // with 16-byte runs; softmax and rmsnorm per run 2537 and 2029 GB/s.
  const ConstexprDecl* wt = k_.find_constexpr("whole_tile_checks");
  const bool whole_tile = (!wt || wt->value == 1) && d.slots() / V > 1;
  if (whole_tile) {
    std::string whole, origin;
    for (int q = 0; q < R; ++q) {
      const std::string at = "int64_t(" + nm(op.operand(first + q)) + ") * " + num(S[q]);
      whole += (q ? " && " : "") + at + " >= 0 && " + at + " + " + num(S[q]) + " <= " + vi.dims[q];
      if (q < R - 1 && S[q] > 1) whole += " && " + vi.strides[q] + " % " + num(V) + " == 0";
      origin += (q ? " + " : "") + at + " * " + vi.strides[q];
    }
    whole += " && tsr::aligned_vec<" + St + ", " + num(V) + ">(" + vi.ptr + " + " + origin + ")";
    const std::string wv = fresh("whole"), c = fresh("c"), s0 = c + " * " + num(V), buf = fresh("vb");
    line("const bool " + wv + " = " + whole + ";");
    open("if (" + wv + ") {");
    line("#pragma unroll");
    open("for (int " + c + " = 0; " + c + " < " + num(d.slots() / V) + "; ++" + c + ") {");
    std::string ok, at;
    element(s0, 0, ok, at);
    if (!packed && !issue) line(run_buffer(buf));
    vector_run(c, s0, at, buf);
    close();
    if (!issue) count("whole-tile-accesses");
    --ind_;
    open("} else {");
  }
  const std::string c = fresh("c");
  line("#pragma unroll");
  open("for (int " + c + " = 0; " + c + " < " + num(d.slots() / V) + "; ++" + c + ") {");
  const std::string s0 = c + " * " + num(V);
  std::string ok, at, last_ok;
  element(s0, V - 1, last_ok, at);
  element(s0, 0, ok, at);
  const std::string buf = fresh("vb");
  if (issue) {
    // Only the runs the load reads as vectors (ragged and unaligned ones come from global).
    line("if (" + last_ok + " && tsr::aligned_vec<" + St + ", " + num(V) + ">(" + vi.ptr + " + " + at + ")) " +
         "tsr::cp_async_16(" + smem_fn() + pf_slot("tsr_pf_nxt", c) + "), " + vi.ptr + " + " + at + ");");
    close();
    if (whole_tile) close();
    close();
    return;
  }
  line(run_buffer(buf));
  open("if (" + last_ok + " && tsr::aligned_vec<" + St + ", " + num(V) + ">(" + vi.ptr + " + " + at + ")) {");
  if (packed) {
    // Both paths fill the storage-type buffer and the words are made after the join.
    if (!hit.empty()) {
      open("if (" + hit + ") {");
      line("tsr::copy_vec<" + St + ", " + num(V) + ">(" + buf + ", reinterpret_cast<const " + St + "*>(" +
           pf_slot("tsr_pf_cur", c) + "));");
      --ind_;
      open("} else {");
      line("tsr::copy_vec<" + St + ", " + num(V) + ">(" + buf + ", " + vi.ptr + " + " + at + ");");
      close();
    } else {
      line("tsr::copy_vec<" + St + ", " + num(V) + ">(" + buf + ", " + vi.ptr + " + " + at + ");");
    }
    --ind_;
    open("} else {");
    for (int64_t v = 0; v < V; ++v) {
      std::string eok, eat;
      element(s0, v, eok, eat);
      line(buf + "[" + num(v) + "] = (" + eok + ") ? " + vi.ptr + "[" + eat + "] : " + St + "(" + store_conv(t, pad) + ");");
    }
    close();
    pack_words(s0, buf);
    close();
    if (whole_tile) close();
    count("vector-accesses");
    close();
    after_prefetched_load(pf);
    return;
  }
  vector_run(c, s0, at, buf);
  --ind_;
  open("} else {");
  for (int64_t v = 0; v < V; ++v) scalar_access(s0, v);
  close();
  close();
  if (whole_tile) close();
  count("vector-accesses");
  close();
  after_prefetched_load(pf);
}

void Emitter::after_prefetched_load(const ProgramPrefetch* pf) {
  if (!pf) return;
  // Two buffers: the next program's copies go into the other one now. One: after a barrier
  // (the first that follows in this block, or one at its end), when no thread reads it.
  if (pf_buffers_ == 2) issue_program_prefetch(*pf);
  else pending_pf_.push_back(pf);
}

void Emitter::lowered_shape(const Op& op) {
  const Value *x = op.operand(0), *r = op.result();
  const std::vector<int64_t> SX = static_shape(x->type.shape), SR = static_shape(r->type.shape);
  if (auto it = shared_.find(x); it != shared_.end()) {
    // A view of the same bytes: a permute reorders the strides; a reshape that adds or drops
    // unit dims keeps the others'.
    SharedView sv;
    sv.ptr = it->second.ptr;
    sv.rows = it->second.rows;
    sv.atom = it->second.atom;
    if (op.kind == OpKind::Permute) {
      for (int64_t d : op.attr_ints("dims")) sv.strides.push_back(it->second.strides[d]);
    } else if (op.kind == OpKind::Reshape) {
      std::vector<int64_t> kept;
      for (size_t d = 0; d < SX.size(); ++d)
        if (SX[d] != 1) kept.push_back(it->second.strides[d]);
      size_t j = 0;
      for (int64_t e : SR) sv.strides.push_back(e == 1 ? 0 : j < kept.size() ? kept[j++] : -1);
      if (j != kept.size() || std::count(sv.strides.begin(), sv.strides.end(), -1))
        throw NotLowerable{"a reshape of a shared tile other than of unit dims"};
    } else {
      throw NotLowerable{"a " + std::string(op.name()) + " of a shared tile"};
    }
    shared_[r] = sv;
    name_[r] = sv.ptr;
    return;
  }
  // The operand coordinate of a result coordinate.
  std::function<std::vector<int64_t>(const std::vector<int64_t>&)> src;
  std::vector<int64_t> dims;
  int64_t axis = 0;
  switch (op.kind) {
    case OpKind::Reshape:
      src = [&](const std::vector<int64_t>& c) {
        int64_t f = 0;
        for (size_t i = 0; i < c.size(); ++i) f = f * SR[i] + c[i];
        std::vector<int64_t> out(SX.size());
        for (size_t i = SX.size(); i-- > 0;) out[i] = f % SX[i], f /= SX[i];
        return out;
      };
      break;
    case OpKind::Broadcast:
      src = [&](const std::vector<int64_t>& c) {
        std::vector<int64_t> out = c;
        for (size_t i = 0; i < out.size(); ++i)
          if (SX[i] == 1) out[i] = 0;
        return out;
      };
      break;
    case OpKind::ExpandDims:
      axis = op.attr_int("axis");
      src = [&](const std::vector<int64_t>& c) {
        std::vector<int64_t> out = c;
        out.erase(out.begin() + axis);
        return out;
      };
      break;
    default:  // permute: result dim i is operand dim dims[i]
      for (const auto& v : op.attr_ints("dims")) dims.push_back(v);
      src = [&](const std::vector<int64_t>& c) {
        std::vector<int64_t> out(c.size());
        for (size_t i = 0; i < c.size(); ++i) out[dims[i]] = c[i];
        return out;
      };
  }
  std::vector<int64_t> m = same_thread_slots(dist_of(x), dist_of(r), program_threads(), src);
  if (!m.empty()) {
    const std::string n = declare(op, r);
    for (size_t s = 0; s < m.size(); ++s) line(n + "[" + num(int64_t(s)) + "] = " + nm(x) + "[" + num(m[s]) + "];");
    return;
  }
  lowered_exchange(op, x, r, [&](const std::string& e) {
    if (op.kind == OpKind::Reshape) return e;
    std::vector<std::string> c = coords(e, SR), out;
    if (op.kind == OpKind::Broadcast) {
      out = c;
      for (size_t i = 0; i < out.size(); ++i)
        if (SX[i] == 1) out[i] = "0";
    } else if (op.kind == OpKind::ExpandDims) {
      out = c;
      out.erase(out.begin() + axis);
    } else {
      out.assign(c.size(), "0");
      for (size_t i = 0; i < c.size(); ++i) out[dims[i]] = c[i];
    }
    return flat(out, SX);
  });
}

// Each element of `v` its owner holds into ptr[index(its flat index)], where that is in
// [0, bound) (every index when bound is 0): a part of a tile staged through the scratch.
void Emitter::stage_at(const Value* v, const std::string& ptr, const std::function<std::string(const std::string&)>& index,
                       int64_t bound) {
  const Dist& X = dist_of(v);
  const std::string own = X.owner_expr();
  slots(layout_of(v), [&](const std::string& sl) {
    const std::string i = fresh("i");
    std::string when = own == "true" ? "" : own;
    if (bound > 0) when += (when.empty() ? "" : " && ") + i + " >= 0 && " + i + " < " + num(bound);
    line("{ const int " + i + " = " + index(X.flat_expr(sl)) + "; " + (when.empty() ? "" : "if (" + when + ") ") + ptr + "[" + i + "] = " +
         nm(v) + "[" + sl + "]; }");
  });
}

// insert_tile %t, %sub, i...: the result is in %t's layout (assign-layouts), so a slot keeps
// %t's element or, inside the sub-tile's block (at indices known only at run time), takes the
// sub-tile's, which goes through shared memory once; a sub-tile larger than the exchanges'
// scratch goes through in parts of its flat index (a loop: each slot takes its element in the
// part that holds it).
void Emitter::lowered_insert(const Op& op) {
  const Value *x = op.operand(0), *sub = op.operand(1), *r = op.result();
  if (x->type.layout != r->type.layout) throw NotLowerable{"an insert_tile at " + op.loc.str() + " into another layout"};
  const std::vector<int64_t> SS = static_shape(sub->type.shape);
  const int64_t numel = shape_numel(sub->type.shape), eb = std::max(4, scalar_bytes(sub->type.elem));
  const int64_t part = std::min(numel, kExchangeBytes / eb), parts = (numel + part - 1) / part;
  const std::string ptr = smem_ptr(ctype(sub->type.elem), 0, part * eb);
  count("layout-exchanges");
  const Dist& R = dist_of(r);
  std::string n;
  if (parts == 1) {
    stage(sub, ptr);  // (a barrier first: the last exchange's readers are done)
  } else {
    count("insert-parts");
    n = declare(op, r);
    slots(layout_of(r), [&](const std::string& s) { line(n + "[" + s + "] = " + nm(x) + "[" + s + "];"); });
    open("for (int pt_ = 0; pt_ < " + num(parts) + "; ++pt_) {");
    ++loop_callbacks_;  // (no program prefetch copies from these barriers, which run every part)
    barrier();  // the last part's (or exchange's) readers are done
    stage_at(sub, ptr, [&](const std::string& e) { return e + " - pt_ * " + num(part); }, part);
  }
  barrier();
  if (parts == 1) n = declare(op, r);
  slots(layout_of(r), [&](const std::string& s) {
    std::string in;
    std::vector<std::string> q(SS.size());
    for (size_t d = 0; d < SS.size(); ++d) {
      q[d] = fresh("q");
      line("const int64_t " + q[d] + " = " + R.const_expr(int(d), s) + " + " + R.thread_expr(int(d)) + " - int64_t(" +
           nm(op.operand(2 + d)) + ") * " + num(SS[d]) + ";");
      in += (d ? " && " : "") + q[d] + " >= 0 && " + q[d] + " < " + num(SS[d]);
    }
    if (parts == 1) {
      line(n + "[" + s + "] = (" + in + ") ? " + ptr + "[" + flat(q, SS) + "] : " + nm(x) + "[" + s + "];");
      return;
    }
    const std::string f = fresh("f");
    line("{ const int64_t " + f + " = (" + in + ") ? " + flat(q, SS) + " - pt_ * " + num(part) + " : -1; if (" + f + " >= 0 && " + f + " < " +
         num(part) + ") " + n + "[" + s + "] = " + ptr + "[" + f + "]; }");
  });
  if (parts > 1) {
    --loop_callbacks_;
    close();
  }
}

// extract_tile %t, i...: the sub-tile at indices known at run time, gathered through shared
// memory.
void Emitter::lowered_extract(const Op& op) {
  const Value *x = op.operand(0), *r = op.result();
  const std::vector<int64_t> SX = static_shape(x->type.shape), SR = static_shape(r->type.shape);
  lowered_exchange(op, x, r, [&](const std::string& e) {
    std::vector<std::string> c = coords(e, SR);
    for (size_t d = 0; d < c.size(); ++d) c[d] = "(" + c[d] + " + int(" + nm(op.operand(1 + d)) + ") * " + num(SR[d]) + ")";
    return flat(c, SX);
  });
}

void Emitter::shuffle_fold(const std::string& acc, ScalarKind t, size_t lane_bit,
                           const std::function<std::string(const std::string&, const std::string&)>& fold) {
  const bool narrow_int = !is_float(t) && scalar_bits(t) < 32;  // shuffled as int
  const std::string T = ctype(t), o = fresh("sh"), v = narrow_int ? "int(" + acc + ")" : acc;
  const std::string sh = "__shfl_xor_sync(0xffffffffu, " + v + ", " + num(int64_t{1} << lane_bit) + ")";
  line("const " + T + " " + o + " = " + (narrow_int ? T + "(" + sh + ")" : sh) + ";");
  line(acc + " = " + fold(acc, o) + ";");
}

void Emitter::fold_slots(const std::string& acc, const std::string& T, const std::vector<std::string>& elems,
                         const std::function<std::string(const std::string&, const std::string&)>& fold) {
  // A thread's many elements fold into eight partials and then a tree (as the planning
  // emitter's reductions do): eight chains of additions in flight instead of one. Sums,
  // products, max and min (NaN-propagating) only: a user's combiner folds in order, through
  // shared memory (lowered_fold_lines_through_shared).
  const size_t P = elems.size() >= 16 ? 8 : elems.size() >= 8 ? 4 : 1;
  if (P == 1) {
    line(acc + " = " + elems[0] + ";");
    for (size_t i = 1; i < elems.size(); ++i) line(acc + " = " + fold(acc, elems[i]) + ";");
    return;
  }
  const std::string p = fresh("part");
  line(T + " " + p + "[" + num(int64_t(P)) + "];");
  for (size_t i = 0; i < P; ++i) line(p + "[" + num(int64_t(i)) + "] = " + elems[i] + ";");
  for (size_t i = P; i < elems.size(); ++i) {
    const std::string pi = p + "[" + num(int64_t(i % P)) + "]";
    line(pi + " = " + fold(pi, elems[i]) + ";");
  }
  for (size_t h = P / 2; h >= 1; h /= 2)
    for (size_t i = 0; i < h; ++i) {
      const std::string pi = p + "[" + num(int64_t(i)) + "]";
      line(pi + " = " + fold(pi, p + "[" + num(int64_t(i + h)) + "]") + ";");
    }
  line(acc + " = " + p + "[0];");
}

// A reduction of a whole tile to a scalar: every thread folds its slots (eight partials and a
// tree, fold_slots), the lanes and then the warps that hold different elements meet (shuffles;
// then each warp's value through shared memory, which each lane reads one of and a butterfly
// of shuffles folds, as the planning emitter's: G dependent folds of shared loads took a
// thread of topk's segments kernel 16 of each per reduction), and every thread ends with the
// value.
void Emitter::lowered_reduce_to_scalar(const Op& op) {
  const Value *x = op.operand(0), *r = op.result();
  const Dist& X = dist_of(x);
  const ScalarKind t = r->type.elem;
  const std::string kind = op.attr_string("kind"), T = ctype(t);
  std::function<std::string(const std::string&, const std::string&)> fold = reduce_fold(kind, t);
  if (!fold) throw NotLowerable{"a reduction of kind " + kind};
  const std::string n = bind_new(r);
  line(T + " " + n + ";");
  std::vector<std::string> elems;
  for (int64_t s = 0; s < X.slots(); ++s) elems.push_back(nm(x) + "[" + num(s) + "]");
  fold_slots(n, T, elems, fold);
  for (size_t b = 0; b < X.lane_bits.size(); ++b) {
    if (X.lane_bits[b].dim < 0) continue;  // lanes holding copies
    shuffle_fold(n, t, b, fold);
    count("reduction-shuffles");
  }
  std::vector<size_t> wa;  // (on a cluster a CTA's warps: the lower warp bits, as lowered_reduce)
  for (size_t b = 0; b < X.warp_bits.size() && !cta_warp_bit(b); ++b)
    if (X.warp_bits[b].dim >= 0) wa.push_back(b);
  const bool cluster_axis = crosses_ctas(op, X, 0, nullptr);
  if (!wa.empty()) {
    const int64_t G = int64_t{1} << wa.size();
    std::string ptr = own_exchange(op, T, G, G * std::max(4, scalar_bytes(t)));
    if (ptr.empty()) {
      ptr = smem_ptr(T, 0, G * std::max(4, scalar_bytes(t)));
      barrier();
    }
    line("if (tsr_lane == 0) " + ptr + "[" + warp_part_index(wa) + "] = " + n + ";");
    barrier();
    // Lane l takes warp l % G's value; log2 G shuffles fold them, every lane ending with all.
    line(n + " = " + ptr + "[tsr_lane & " + num(G - 1) + "];");
    for (size_t b = 0; b < wa.size(); ++b) shuffle_fold(n, t, b, fold);
    lane_zeros_agree(n, t, kind);
    count("reduction-warp-exchanges");
  }
  if (cluster_axis) exchange_cluster_value(op, T, n, kind, fold);
  if (rounds_at_end(kind, t)) line(n + " = " + (is_float(t) ? fround(t, n) : "uint8_t((" + n + ") & 1)") + ";");
}

bool Emitter::crosses_ctas(const Op& op, const Dist& X, int64_t axis, const Value* r) const {
  if (cluster_ == 1) return false;
  int on_axis = 0, cta_bits = 0;
  for (size_t b = 0; b < X.warp_bits.size(); ++b)
    if (cta_warp_bit(b)) ++cta_bits, on_axis += X.warp_bits[b].dim == axis;
  if (on_axis == 0) return false;
  // The exchange folds every CTA's one value: each must hold a different part of the axis, and
  // the result be one element.
  if (on_axis != cta_bits) needs_no_cluster(op, "a reduction whose axis is split over some of the cluster's CTAs");
  if (r && (shape_numel(r->type.shape) != 1 || dist_of(r).slots() != 1))
    needs_no_cluster(op, "a reduction across the cluster's CTAs to more than one element");
  return true;
}

void Emitter::exchange_cluster_value(const Op& op, const std::string& T, const std::string& acc, const std::string& kind,
                                     const std::function<std::string(const std::string&, const std::string&)>& fold) {
  exchange_cluster_partials(op, T, acc, fold);
  // (Lane 0's value is the same in every warp of every CTA: each folds rank 0's value first,
  // then the same ranks.)
  lane_zeros_agree(acc, op.result()->type.elem, kind);
}

void Emitter::lane_zeros_agree(const std::string& acc, ScalarKind t, const std::string& kind) {
  // A float max or min of +0 and -0 keeps the first argument's (fmax_nan): lanes that folded
  // in other orders could hold different zeros; every lane takes lane 0's (found by review).
  if (is_float(t) && (kind == "max" || kind == "min")) line(acc + " = __shfl_sync(0xffffffffu, " + acc + ", 0);");
}

// A scan: a block scan from registers where it takes the form, else through shared memory.
void Emitter::lowered_scan(const Op& op) {
  if (!lowered_block_scan(op)) lowered_fold_lines_through_shared(op);
}

// A sum scan along the one axis of a tile that is a single line (every other dim 1), whose
// layout gives each thread runs of `run` consecutive elements, the threads' runs in thread
// order, then again (a repeat) past all of them: element (slot s, thread t) at
//     s % run + run * t' + run * owners * (s / run)
// where t' counts the owning threads before t (lane and warp bits of no dim make copies). The
// blocked layouts assign-layouts gives such tiles (topk's histograms and keep flags) are of this
// form; the check evaluates every slot of every thread. Per repeat: each thread's inclusive sums
// over its run, then tsr::block_exclusive_sum of the runs' totals (owners only), the repeats
// chained by the running total: the planning emitter's block scan. Other scans: false. Copies then take the owners'
// values through shared memory. Sums of integers wrap (in the unsigned type), f32 / f64 add in
// order within a run (not the interpreter's order across runs: scans of floats are within the
// tolerance of reductions, docs/checking.md).
bool Emitter::lowered_block_scan(const Op& op) {
  const Value *x = op.operand(0), *r = op.result();
  // tsr::block_exclusive_sum waits for the whole CTA (__syncthreads) and numbers warps from
  // threadIdx.x: not in a warp-specialized kernel's compute warps, which the producer warpgroup
  // never joins there.
  if (ws_consumers_) throw NotWarpSpecializable{"the compute warps' code has a block scan (a whole-program barrier)"};
  const ScalarKind t = x->type.elem;
  const int64_t axis = op.attr_int("axis");
  if (op.kind != OpKind::Scan || op.attr_string("kind") != "sum") return false;
  if (!(t == ScalarKind::F32 || t == ScalarKind::F64 || (is_int(t) && !is_bool(t)))) return false;
  const std::vector<int64_t> S = static_shape(x->type.shape);
  for (size_t d = 0; d < S.size(); ++d)
    if (int64_t(d) != axis && S[d] != 1) return false;
  const Dist& X = dist_of(x);
  if (dist_of(r).digits.size() != X.digits.size() || r->type.layout != x->type.layout) return false;
  // Owners in thread order, and the run length (the fastest digit when it counts along the axis by 1).
  const int threads = T_, lanes = 32;
  auto owner = [&](int tid) {
    const int lane = tid % lanes, warp = tid / lanes;
    for (size_t b = 0; b < X.lane_bits.size(); ++b)
      if (X.lane_bits[b].dim < 0 && ((lane >> b) & 1)) return false;
    for (size_t b = 0; b < X.warp_bits.size(); ++b)
      if (X.warp_bits[b].dim < 0 && ((warp >> b) & 1)) return false;
    return true;
  };
  std::vector<int> rank(threads, -1);
  int owners = 0;
  for (int tid = 0; tid < threads; ++tid)
    if (owner(tid)) rank[tid] = owners++;
  const int64_t slots = X.slots();
  int64_t run = 1;  // (the first digit's radix divides the slots)
  if (!X.digits.empty() && X.digits[0].dim == axis && X.digits[0].coef == 1) run = X.digits[0].radix;
  // Each repeat costs a block_exclusive_sum (two barriers): as many as the planning emitter's
  // block scan takes (16 chunks).
  if (slots / run > 16) return false;
  for (int tid = 0; tid < threads; ++tid) {
    if (rank[tid] < 0) continue;
    for (int64_t s = 0; s < slots; ++s) {
      const int64_t want = s % run + run * rank[tid] + run * owners * (s / run);
      if (X.coord(s, tid % lanes, tid / lanes)[static_cast<size_t>(axis)] != want) return false;
    }
  }
  // The copies take their owners' sums through the exchanges' scratch, which the kernel's rings
  // may not spare more of.
  const int64_t copy_bytes = shape_numel(r->type.shape) * std::max(4, scalar_bytes(t));
  if (owners < threads && copy_bytes > kExchangeBytes) return false;
  const std::string C = ctype(t), U = is_float(t) ? C : scalar_bits(t) > 32 ? "uint64_t" : "uint32_t";
  const std::string own = X.owner_expr(), res = declare(op, r);
  if (env_flag("TESSERA_CUDA_ONE_BARRIER_SCANS")) {
    // An A/B switch (bench/session33_gpu.sh): every repeat's runs first, then one
    // tsr::block_exclusive_sums for all of them: two barriers (the one below, one inside)
    // where R repeats took 2R.
    const int64_t R = slots / run;
    const std::string part = smem_ptr(U, 0, (T_ / 32) * R * 8), accs = fresh("accs"), offs = fresh("offs");
    line(U + " " + accs + "[" + num(R) + "], " + offs + "[" + num(R) + "];");
    for (int64_t c = 0; c < R; ++c) {
      const std::string a = accs + "[" + num(c) + "]";
      line(a + " = " + U + "(0);");
      for (int64_t l = 0; l < run; ++l) {
        const std::string sl = num(c * run + l);
        line(a + " += " + U + "(" + nm(x) + "[" + sl + "]); " + res + "[" + sl + "] = " + C + "(" + a + ");");
      }
      if (own != "true") line("if (!" + own + ") " + a + " = " + U + "(0);");
    }
    add_block_offsets(res, C, U, accs, offs, part, R, run);
  } else {
    const std::string part = smem_ptr(U, 0, (T_ / 32) * 8);
    const std::string total = fresh("run"), acc = fresh("acc"), off = fresh("off"), tot = fresh("tot");
    line(U + " " + total + " = " + U + "(0);");
    for (int64_t c = 0; c < slots / run; ++c) {
      const std::string a = acc + "_" + num(c);
      line(U + " " + a + " = " + U + "(0);");
      for (int64_t l = 0; l < run; ++l) {
        const std::string sl = num(c * run + l);
        line(a + " += " + U + "(" + nm(x) + "[" + sl + "]); " + res + "[" + sl + "] = " + C + "(" + a + ");");
      }
      barrier();  // the runs' totals: the previous readers of `part` are done
      line(U + " " + tot + "_" + num(c) + ";");
      line("const " + U + " " + off + "_" + num(c) + " = " + total + " + tsr::block_exclusive_sum<" + num(T_ / 32) + ">(" +
           (own == "true" ? a : "(" + own + " ? " + a + " : " + U + "(0))") + ", " + part + ", " + tot + "_" + num(c) + ");");
      for (int64_t l = 0; l < run; ++l) {
        const std::string sl = num(c * run + l);
        line(res + "[" + sl + "] = " + C + "(" + U + "(" + res + "[" + sl + "]) + " + off + "_" + num(c) + ");");
      }
      line(total + " += " + tot + "_" + num(c) + ";");
    }
  }
  if (owners < threads) {  // the copies take their owners' sums
    const std::string ptr = smem_ptr(C, 0, copy_bytes);
    stage(r, ptr);
    barrier();
    gather_into(r, res, [&](const std::string& e) { return ptr + "[" + e + "]"; });
  }
  count("block-scans");
  return true;
}

// Any other scan (a max, min or product; of bf16, f16 or i1; of several lines; over any layouts),
// a scan_with and a reduce_with (whose combiners run left to right, docs/semantics.md) through
// shared memory, as the planning emitter's serial folds: thread p folds line p in order, as the
// interpreter does (narrow floats in f32, each output rounded; integers wrap). A tile of more
// than the exchanges' scratch goes through in parts of G lines by Lc elements along the axis, in
// a loop: each part is staged from x's slots, its lines folded on from the carry the previous
// part along them left, then a scan's read back into r's slots; a reduction's line values,
// after a line's last part, go through the scratch into r's slots (or to every thread).
void Emitter::lowered_fold_lines_through_shared(const Op& op) {
  const Value *x = op.operand(0), *r = op.result();
  const bool scan = op.kind == OpKind::Scan || op.kind == OpKind::ScanWith, with = op.kind != OpKind::Scan;
  const std::vector<int64_t> S = static_shape(x->type.shape);
  const int64_t axis = op.attr_int("axis");
  const AxisSplit sp = split_at_axis(S, axis);
  const int64_t L = sp.len, I = sp.inner, lines = sp.outer * sp.inner;
  const ScalarKind t = x->type.elem;
  const std::string C = ctype(t), kind = with ? "" : op.attr_string("kind");
  const bool f = is_float(t);
  // acc_ combined with v_: the reductions' fold (a combiner's region is printed in the loop).
  std::string step;
  if (!with) {
    const auto fold = reduce_fold(kind, t);
    if (!fold) throw NotLowerable{"a scan at " + op.loc.str() + " of kind " + kind};
    step = fold("acc_", "v_");
  }
  if (t == ScalarKind::I1 && (kind == "sum" || kind == "prod")) step = "uint8_t((" + step + ") & 1)";
  // Parts: G lines (at most one a thread) by Lc elements along the axis, within the exchanges'
  // scratch (which the kernel's rings and prefetch buffers leave room for: 48 KiB parts pushed
  // a kernel with program prefetch past sm_89's shared memory; the parts' barriers cost a
  // 64 x 128 f32 column scan 3x the planning emitter's time on the H100, bench/RESULTS.md
  // session 56); a line's elements W apart, W odd where several lines are folded (the threads'
  // reads of step l_ then fall in different banks, not in one as with a stride of 32 k).
  const int64_t eb = std::max(4, scalar_bytes(t)), fit = kExchangeBytes / eb;
  const int64_t G = std::min<int64_t>({lines, T_, fit / 2});
  int64_t Lc = std::min(L, G > 1 ? fit / G - 1 : fit), W = G > 1 ? Lc + 1 : Lc;
  if (G > 1 && W % 2 == 0) {
    if (W + 1 <= fit / G) ++W;
    else if (Lc > 1) W = Lc--;
    count("folds-odd-stride");  // (not yet run on a GPU: unrun_layout_paths)
  }
  const int64_t NG = (lines + G - 1) / G, NC = (L + Lc - 1) / Lc;
  const bool parts = NG * NC > 1;
  const std::string ptr = smem_ptr(C, 0, G * W * eb), res = declare(op, r), acc = fresh("acc");
  count(scan ? "shared-scans" : "shared-reductions");
  // Where flat element e of x lies in the part (g_, c_): its line less the part's first, its
  // place along the axis less the part's first; -1 outside the part.
  auto at = [&](const std::string& e) {
    const std::string l = "(" + e + " / " + num(I) + ") % " + num(L), p = "(" + e + " / " + num(L * I) + ") * " + num(I) + " + " + e + " % " + num(I);
    if (!parts) return "(" + p + ") * " + num(W) + " + " + l;
    return "tsr_fold_at(" + p + " - g_ * " + num(G) + ", " + l + " - c_ * " + num(Lc) + ")";
  };
  line(C + " " + acc + " = " + C + "(0);");
  open("{");
  if (parts) {
    line("auto tsr_fold_at = [](int p, int l) { return p >= 0 && p < " + num(G) + " && l >= 0 && l < " + num(Lc) + " ? p * " + num(W) +
         " + l : -1; };");
    open("for (int g_ = 0; g_ < " + num(NG) + "; ++g_) {");
    open("for (int c_ = 0; c_ < " + num(NC) + "; ++c_) {");
    ++loop_callbacks_;  // (no program prefetch copies from these barriers, which run every part)
  }
  barrier();  // the last exchange's (or part's) readers are done
  stage_at(x, ptr, at, parts ? G * W : 0);
  barrier();
  const std::string first = parts ? "g_ * " + num(G) + " + " : "", begin = parts ? "c_ * " + num(Lc) + " + " : "";
  open("if (tsr_tid < " + num(G) + " && " + first + "tsr_tid < " + num(lines) + ") {");
  line(C + " acc_ = " + acc + ";");
  open("for (int l_ = 0; l_ < " + num(Lc) + " && " + begin + "l_ < " + num(L) + "; ++l_) {");
  line("const " + C + " v_ = " + ptr + "[tsr_tid * " + num(W) + " + l_];");
  open("if (" + begin + "l_ == 0) {");
  line("acc_ = v_;");
  --ind_;
  open("} else {");
  if (with) {
    const std::string a = fresh("a"), b = fresh("b");
    line("const " + C + " " + a + " = acc_;");
    line("const " + C + " " + b + " = v_;");
    step = combine(op, a, b);
    cur_ = &op;
  }
  line("acc_ = " + C + "(" + step + ");");
  close();
  if (scan) line(ptr + "[tsr_tid * " + num(W) + " + l_] = " + (f ? fround(t, "acc_") : std::string("acc_")) + ";");
  close();
  line(acc + " = acc_;");
  close();
  barrier();
  if (scan) {
    const Dist& R = dist_of(r);
    slots(layout_of(r), [&](const std::string& sl) {
      const std::string i = fresh("i");
      line("{ const int " + i + " = " + at(R.flat_expr(sl)) + "; " + (parts ? "if (" + i + " >= 0) " : "") + res + "[" + sl + "] = " + ptr +
           "[" + i + "]; }");
    });
  } else {
    // After a line's last part: its value at ptr[line - the group's first], then into r's slots
    // (r's flat index is the line's: the axis dropped), or a scalar to every thread.
    if (parts) open("if (c_ == " + num(NC - 1) + ") {");
    line("if (tsr_tid < " + num(G) + ") " + ptr + "[tsr_tid] = " + (f ? fround(t, acc) : acc) + ";");
    barrier();
    if (!r->type.is_tile()) {
      line(res + " = " + ptr + "[0];");
    } else {
      const Dist& R = dist_of(r);
      slots(layout_of(r), [&](const std::string& sl) {
        const std::string i = fresh("i");
        line("{ const int " + i + " = " + R.flat_expr(sl) + (parts ? " - g_ * " + num(G) : "") + "; " +
             (parts ? "if (" + i + " >= 0 && " + i + " < " + num(G) + ") " : "") + res + "[" + sl + "] = " + ptr + "[" + i + "]; }");
      });
    }
    if (parts) close();
  }
  if (parts) {
    --loop_callbacks_;
    close();
    close();
  }
  close();
}

// An argmax or argmin: the fold of a reduction over (value, index) pairs, the index the
// element's coordinate along the axis. The pairs' order is total (arg_better: ties to the
// smaller index), so the fold may take them in any order: a thread's slots, then the lanes and
// the warps that spread the axis, as the other reductions. A 1-D tile reduces to a scalar.
void Emitter::lowered_arg_reduce(const Op& op) {
  const Value *x = op.operand(0), *r = op.result();
  const int64_t axis = op.attr_int("axis");
  const std::string kind = op.attr_string("kind");
  const Dist& X = dist_of(x);
  const bool scalar = !r->type.is_tile();
  if (op.results.size() != 1 || (scalar && x->type.rank() != 1)) throw NotLowerable{"an arg reduction to two results"};
  std::vector<int64_t> into(X.slots(), 0);
  if (!scalar) {
    into = same_thread_slots(dist_of(r), X, program_threads(), [&](const std::vector<int64_t>& c) {
      std::vector<int64_t> out = c;
      out.erase(out.begin() + axis);
      return out;
    });
    if (into.empty()) throw NotLowerable{"a reduction at " + op.loc.str() + " whose result is not its operand's layout sliced"};
  }
  const int64_t ny = scalar ? 1 : dist_of(r).slots(), numel = scalar ? 1 : shape_numel(r->type.shape);
  const ScalarKind t = x->type.elem;
  const std::string T = ctype(t), v = fresh("av"), i = fresh("ai");
  line(T + " " + v + "[" + num(ny) + "];");
  line("int32_t " + i + "[" + num(ny) + "];");
  // (v[y], i[y]) takes (ev, ei) where that is better.
  auto take = [&](int64_t y, const std::string& ev, const std::string& ei) {
    const std::string V = v + "[" + num(y) + "]", I = i + "[" + num(y) + "]";
    line("if (" + arg_better(kind, ev, ei, V, I) + ") { " + V + " = " + ev + "; " + I + " = " + ei + "; }");
  };
  std::vector<bool> seen(ny, false);
  for (int64_t s = 0; s < X.slots(); ++s) {
    const int64_t y = into[s];
    const std::string e = nm(x) + "[" + num(s) + "]", at = "int32_t(" + X.const_expr(int(axis), num(s)) + " + " +
                                                              X.thread_expr(int(axis)) + ")";
    if (seen[y]) take(y, e, at);
    else line(v + "[" + num(y) + "] = " + e + "; " + i + "[" + num(y) + "] = " + at + ";");
    seen[y] = true;
  }
  const bool narrow_int = !is_float(t) && scalar_bits(t) < 32;  // shuffled as int
  for (size_t b = 0; b < X.lane_bits.size(); ++b) {
    if (X.lane_bits[b].dim != axis) continue;
    for (int64_t y = 0; y < ny; ++y) {
      const std::string V = v + "[" + num(y) + "]", ov = fresh("sv"), oi = fresh("si"), m = num(int64_t{1} << b);
      const std::string sh = "__shfl_xor_sync(0xffffffffu, " + (narrow_int ? "int(" + V + ")" : V) + ", " + m + ")";
      line("const " + T + " " + ov + " = " + (narrow_int ? T + "(" + sh + ")" : sh) + ";");
      line("const int32_t " + oi + " = __shfl_xor_sync(0xffffffffu, " + i + "[" + num(y) + "], " + m + ");");
      take(y, ov, oi);
    }
    count("reduction-shuffles");
  }
  std::vector<size_t> wa;
  for (size_t b = 0; b < X.warp_bits.size(); ++b)
    if (X.warp_bits[b].dim == axis) wa.push_back(b);
  const std::string n = scalar ? bind_new(r) : declare(op, r);
  auto flat = [&](int64_t y) { return scalar ? std::string("0") : dist_of(r).flat_expr(num(y)); };
  if (!wa.empty()) {
    const int64_t G = int64_t{1} << wa.size();
    const std::string pv = smem_ptr(T, 0, G * numel * 8), pi = smem_ptr("int32_t", G * numel * 8, G * numel * 4);
    const std::string widx = warp_part_index(wa);
    int64_t lm = 0;
    for (size_t b = 0; b < X.lane_bits.size(); ++b)
      if (X.lane_bits[b].dim == axis) lm |= int64_t{1} << b;
    barrier();
    for (int64_t y = 0; y < ny; ++y) {
      const std::string at = "(" + widx + ") * " + num(numel) + " + " + flat(y);
      line("if ((tsr_lane & " + num(lm) + ") == 0) { " + pv + "[" + at + "] = " + v + "[" + num(y) + "]; " + pi + "[" + at +
           "] = " + i + "[" + num(y) + "]; }");
    }
    barrier();
    for (int64_t y = 0; y < ny; ++y) {
      const std::string at = flat(y);
      line(v + "[" + num(y) + "] = " + pv + "[" + at + "]; " + i + "[" + num(y) + "] = " + pi + "[" + at + "];");
      for (int64_t q = 1; q < G; ++q) {
        const std::string o = num(q * numel) + " + " + at;
        take(y, pv + "[" + o + "]", pi + "[" + o + "]");
      }
    }
    count("reduction-warp-exchanges");
  }
  if (scalar) line("const int32_t " + n + " = " + i + "[0];");
  else
    for (int64_t y = 0; y < ny; ++y) line(n + "[" + num(y) + "] = " + i + "[" + num(y) + "];");
}

std::string Emitter::own_exchange(const Op& op, const std::string& T, int64_t words, int64_t bytes) {
  const bool looped = runs_repeatedly(op);
  const int64_t need = align16(bytes * (looped ? 2 : 1));
  // (Two ping-pong consumers would share the words; pingpong-consumers declines reductions.)
  // TESSERA_CUDA_SCRATCH_EXCHANGES=1: every exchange through the scratch (an A/B switch).
  const bool scratch_only = env_flag("TESSERA_CUDA_SCRATCH_EXCHANGES");
  if (scratch_only || bytes > kReductionHalf || red_smem_ + need > kOwnExchangeBytes || consumers_ == 2) return "";
  count("reduction-barriers-saved");
  return exchange_words(op, T, words, bytes);
}

void Emitter::lowered_reduce(const Op& op) {
  const Value *x = op.operand(0), *r = op.result();
  // (A reduction of an mma.sync accumulator whose warp grid leaves copy warps: attention at
  // 16 rows a block on 4 warps, say.)
  if (has_copy_warps(x->type.layout)) count("reductions-over-copy-warps");
  if (op.attr_string("kind") == "argmax" || op.attr_string("kind") == "argmin") return lowered_arg_reduce(op);
  if (op.results.size() == 1 && !r->type.is_tile() && x->type.rank() == 1)
    return lowered_reduce_to_scalar(op);
  if (op.results.size() != 1 || !r->type.is_tile()) throw NotLowerable{"a reduction to a scalar or to two results"};
  const int64_t axis = op.attr_int("axis");
  const Dist &X = dist_of(x), &Y = dist_of(r);
  // For each operand slot, the result slot of the same thread its element folds into.
  std::vector<int64_t> into = same_thread_slots(Y, X, program_threads(), [&](const std::vector<int64_t>& c) {
    std::vector<int64_t> out = c;
    out.erase(out.begin() + axis);
    return out;
  });
  if (into.empty()) throw NotLowerable{"a reduction at " + op.loc.str() + " whose result is not its operand's layout sliced"};
  // The fold, in the compute type (a narrow float's sum is rounded once, at the end), as the
  // planning emitter's reductions do.
  const ScalarKind t = r->type.elem;
  const bool f = is_float(t);
  const std::string kind = op.attr_string("kind");
  const std::string T = ctype(t);
  const std::function<std::string(const std::string&, const std::string&)> fold = reduce_fold(kind, t);
  if (!fold) throw NotLowerable{"a reduction of kind " + kind};
  const std::string n = declare(op, r);
  std::vector<std::vector<int64_t>> folded(Y.slots());
  for (int64_t s = 0; s < X.slots(); ++s) folded[into[s]].push_back(s);
  for (int64_t y = 0; y < Y.slots(); ++y) {
    const std::vector<int64_t>& from = folded[y];
    if (from.empty()) continue;
    std::vector<std::string> elems;
    for (int64_t i : from) elems.push_back(nm(x) + "[" + num(i) + "]");
    fold_slots(n + "[" + num(y) + "]", T, elems, fold);
  }
  // Along the lanes the axis is spread over: a butterfly of shuffles.
  for (size_t b = 0; b < X.lane_bits.size(); ++b) {
    if (X.lane_bits[b].dim != axis) continue;
    for (int64_t y = 0; y < Y.slots(); ++y) shuffle_fold(n + "[" + num(y) + "]", t, b, fold);
    count("reduction-shuffles");
  }
  // Along the warps: each warp's value through shared memory, folded in warp order. On a
  // cluster only a CTA's warps (the lower warp bits); the CTAs' values then meet through
  // distributed shared memory (cluster_axis).
  std::vector<size_t> wa;
  const bool cluster_axis = crosses_ctas(op, X, axis, r);
  for (size_t b = 0; b < X.warp_bits.size() && !cta_warp_bit(b); ++b)
    if (X.warp_bits[b].dim == axis) wa.push_back(b);
  // A narrow float's sum or product rounded once; an i1 one kept to its bit.
  auto finish = [&] {
    if (cluster_axis) exchange_cluster_value(op, T, n + "[0]", kind, fold);
    if (rounds_at_end(kind, t))
      slots(layout_of(r), [&](const std::string& s) {
        const std::string acc = n + "[" + s + "]";
        line(acc + " = " + (f ? fround(t, acc) : "uint8_t((" + acc + ") & 1)") + ";");
      });
  };
  if (wa.empty()) return finish();
  const int64_t G = int64_t{1} << wa.size(), numel = shape_numel(r->type.shape);
  const int64_t bytes = G * numel * std::max(4, scalar_bytes(r->type.elem));
  std::string ptr = own_exchange(op, T, G * numel, bytes);
  if (ptr.empty()) {
    // Two reductions in a row (softmax's max and sum, layernorm's mean and variance) alternate
    // halves of the scratch, and the second needs no barrier before its writes (LastReduction).
    const bool follows = bytes <= kReductionHalf && last_reduction_.block == op.parent &&
                         last_reduction_.uses == scratch_uses_;
    const int64_t off = follows && last_reduction_.off == 0 ? kReductionHalf : 0;
    ptr = smem_ptr(T, off, bytes);
    last_reduction_ = {bytes <= kReductionHalf ? op.parent : nullptr, scratch_uses_, off};
    if (follows) count("reduction-barriers-saved");
    else barrier();
  }
  const std::string widx = warp_part_index(wa);
  int64_t lm = 0;
  for (size_t b = 0; b < X.lane_bits.size(); ++b)
    if (X.lane_bits[b].dim == axis) lm |= int64_t{1} << b;
  slots(layout_of(r), [&](const std::string& s) {
    line("if ((tsr_lane & " + num(lm) + ") == 0) " + ptr + "[(" + widx + ") * " + num(numel) + " + " + Y.flat_expr(s) +
         "] = " + n + "[" + s + "];");
  });
  barrier();
  slots(layout_of(r), [&](const std::string& s) {
    const std::string at = Y.flat_expr(s), acc = n + "[" + s + "]";
    line(acc + " = " + ptr + "[" + at + "];");
    for (int64_t q = 1; q < G; ++q) line(acc + " = " + fold(acc, ptr + "[" + num(q * numel) + " + " + at + "]") + ";");
  });
  count("reduction-warp-exchanges");
  finish();
}

void Emitter::lowered_dot(const Op& op) {
  const Value *a = op.operand(0), *b = op.operand(1), *c = op.operand(2), *r = op.result();
  const tessera::Layout& L = r->type.layout;
  if (L.kind != tessera::Layout::Kind::Mma || L.version != 2) throw NotLowerable{"a dot without an mma.sync accumulator"};
  const ScalarKind ab = a->type.elem;
  // f8 (m16n8k32 e4m3 / e5m2, sm_89+): a k step is 32 elements, the same 32 bytes as a 16-bit
  // k16 step, so the fragments are the same ldmatrix loads counted in bytes.
  const bool f8 = is_f8(ab);
  if (!tensor_core_type(ab) || b->type.elem != ab || r->type.elem != ScalarKind::F32 || c->type.layout != L)
    throw NotLowerable{"a dot at " + op.loc.str() + " other than 16-bit or f8 operands into an f32 mma accumulator"};
  if (f8 && tg_.sm < 89) throw NotLowerable{"an f8 mma.sync dot below sm_89"};
  const int64_t eb = scalar_bytes(ab), KS = 32 / eb;  // elements of a k step
  const std::vector<int64_t> SR = static_shape(r->type.shape), SA = static_shape(a->type.shape);
  const int64_t wm = L.warps[0], wn = L.warps[1];
  const auto [MT, NT] = mma_sync_tiles(r);
  const int64_t KT = SA[1] / KS;
  if (SA[1] % KS != 0) throw NotLowerable{"an mma.sync dot whose K is not a multiple of its k step"};
  if (SR[0] % (16 * wm) != 0 || SR[1] % (8 * wn) != 0) throw NotLowerable{"an mma tile smaller than its warp grid"};
  // An operand staged by a conversion that prints nothing (staged_), or a shared tile the dot
  // takes as it is (assign-layouts: a loaded operand): either way the dot loads its fragments.
  auto staged = [&](const Value* v) -> std::optional<StagedOperand> {
    if (auto it = staged_.find(v); it != staged_.end()) return it->second;
    if (auto it = shared_.find(v); it != shared_.end()) return staged_from(op, it->second);
    return std::nullopt;
  };
  const std::optional<StagedOperand> stA = staged(a), stB = staged(b);
  const bool sa = stA.has_value(), sb = stB.has_value();
  if (sb && NT % 2 != 0) throw NotLowerable{"a B operand in shared memory with an odd number of n8 tiles"};
  // ldmatrix has no 8-bit transpose: both f8 operands K-major in shared memory.
  if (f8 && (!sa || !sb || stA->dim0_fastest || !stB->dim0_fastest))
    throw NotLowerable{"an f8 mma.sync operand not K-major in shared memory"};
  (void)dist_of(c);
  const std::string n = declare(op, r);
  copy_value(r, n, nm(c));
  const std::string pack = ab == ScalarKind::BF16 ? "tsr::f2bf2(" : "tsr::f2h2(";
  const std::string mma = ab == ScalarKind::BF16   ? "tsr::mma_bf16_16816("
                          : ab == ScalarKind::F16  ? "tsr::mma_f16_16816("
                          : ab == ScalarKind::F8E4M3 ? "tsr::mma_f8_16832<1>("
                                                     : "tsr::mma_f8_16832<2>(";
  open("{");
  const bool copies = has_copy_warps(L);
  line("const int wm_ = tsr_warp / " + num(wn) + (copies ? " % " + num(wm) : "") + ", wn_ = tsr_warp % " + num(wn) + ";");
  if (copies) count("mma-copy-warps");
  line("(void)wm_; (void)wn_;");
  // The fragments of k step `kx` into buffer `f` (fa[f], fb[f]); the ks loop loads step ks + 1's
  // while step ks's mma instructions run (two buffers, as the planning emitter's ldsm_frags):
  // the ldmatrix and mma asm statements keep their order, so without this each step's mma
  // instructions waited for its own loads (the mma.sync matmul at 1.5x the planning emitter's
  // time on the H100, session 37).
  // One ldmatrix.x4 (.trans: the stored rows are the fragment's columns) into r0..r3 from a
  // staged operand, lane address at (row, col) of its rows of st.ld elements.
  // A 128-byte swizzled stage (swizzle-mma-operands): each address is the lane's part (rows
  // `row_l`, columns `col_l`: every row here is a multiple of 8 plus (tsr_lane & 7), which is
  // then the swizzle's key) with the fragment's constant part (`row_c`, a multiple of 8 rows;
  // `col_c`, whole 16-byte chunks whose bits within a 128-byte row are clear in the lane's
  // chunk) applied as an XOR of the chunk bits and an add: the lane's part is then one value
  // for all its fragments. (Each fragment's whole index, computed apart, took the mma.sync
  // matmul from 234 to 255 registers and spilled.) Padded rows: row * ld + col.
  // (The split needs warp grids of powers of two, which are all DistLayout makes.)
  const bool pow2_warps = ((wm & (wm - 1)) | (wn & (wn - 1))) == 0;
  // (`row` and `col`: the whole row and column, as printed for padded rows.)
  auto ldsm = [&](bool trans, const std::string& regs, const StagedOperand& st, const std::string& row_c,
                  const std::string& row_l, const std::string& col_c, const std::string& col_l, std::string row = "",
                  std::string col = "") {
    if (row.empty()) row = row_c + " + " + row_l;
    if (col.empty()) col = col_c + " + " + col_l;
    std::string at;
    // (64-byte rows: the key is row / 2 % 4, of the same lane bits.)
    const bool sw64 = st.atom == 32;
    const std::string fn = sw64 ? "tsr::sw64_index_key(int(" : "tsr::sw128_index_key(int(",
                      key = sw64 ? "(tsr_lane >> 1) & 3" : "tsr_lane & 7";
    const int64_t row_bytes = 2 * st.atom, cpr = st.atom / 8;  // bytes and 16-byte chunks of a swizzled row
    if (st.rows == 0) {
      at = st.base + " + uint32_t((" + row + ") * " + num(st.ld) + " + " + col + ")" + (eb == 2 ? " * 2u" : "");
    } else {
      if (!pow2_warps) throw NotLowerable{"a swizzled mma.sync operand with a warp grid of other than powers of two"};
      at = st.base + " + ((uint32_t(" + fn + row_l + "), int(" + col_l + "), " + num(st.rows) + ", " + key +
           ")) * 2u ^ uint32_t((" + col_c + ") / 8 % " + num(cpr) + " * 16)) + uint32_t((" + row_c + ") * " + num(row_bytes) +
           " + (" + col_c + ") / " + num(st.atom) + " * " + num(st.rows * row_bytes) + "))";
    }
    line(std::string(trans ? "tsr::ldsm_x4_trans(" : "tsr::ldsm_x4(") + regs + ", " + at + ");");
  };
  // Fragment registers from a register operand: `frag`[t][q] packs slots `per_step` * (kx +
  // KT * t) + 2q and + 1 (the slot order of DistLayout.h).
  auto from_registers = [&](const std::string& frag, const std::string& kx, const Value* v, int64_t tiles, int regs,
                            int64_t per_step) {
    (void)dist_of(v);
    for (int64_t t = 0; t < tiles; ++t)
      for (int q = 0; q < regs; ++q) {
        const std::string s0 = num(per_step) + " * (" + kx + " + " + num(KT) + " * " + num(t) + ") + " + num(2 * q);
        line(frag + "[" + num(t) + "][" + num(q) + "] = " + pack + nm(v) + "[" + s0 + "], " + nm(v) + "[" + s0 + " + 1]);");
      }
  };
  const bool ahead = frags_ahead_.dot == &op;
  const std::string FA = ahead ? frags_ahead_.fa : "fa", FB = ahead ? frags_ahead_.fb : "fb";
  // From stages `A` and `B` where they are staged (else registers).
  auto load_fragments_from = [&](const std::string& kx, const std::string& f, const std::optional<StagedOperand>& A,
                                 const std::optional<StagedOperand>& B) {
    // (k16: the step's first column; half: the second 16 bytes of it, 8 or 16 elements.)
    const std::string fa = FA + "[" + f + "]", fb = FB + "[" + f + "]", k16 = num(KS) + " * (" + kx + ")",
                      half = num(KS / 2) + " * (tsr_lane >> 4)";
    if (sa) {
      const StagedOperand& st = *A;
      for (int64_t i = 0; i < MT; ++i) {
        const std::string m0 = num(16 * wm * i), I = fa + "[" + num(i) + "]";
        const std::string regs = I + "[0], " + I + "[1], " + I + "[2], " + I + "[3]";
        if (!st.dim0_fastest) ldsm(false, regs, st, m0, "16 * wm_ + (tsr_lane & 15)", k16, half);
        else ldsm(true, regs, st, k16, "(tsr_lane & 7) + 8 * (tsr_lane >> 4)", m0, "16 * wm_ + 8 * ((tsr_lane >> 3) & 1)");
      }
    } else {
      from_registers(fa, kx, a, MT, 4, 8);
    }
    if (sb) {
      const StagedOperand& st = *B;
      for (int64_t j = 0; j < NT; j += 2) {
        const std::string J = fb + "[" + num(j) + "]", J1 = fb + "[" + num(j + 1) + "]", n0 = num(8 * wn) + " * (" + num(j);
        if (!st.dim0_fastest)  // [K][N]: rows k
          ldsm(true, J + "[0], " + J + "[1], " + J1 + "[0], " + J1 + "[1]", st, k16, "(tsr_lane & 15)", num(8 * wn * j),
               num(8 * wn) + " * (tsr_lane >> 4) + 8 * wn_", "", n0 + " + (tsr_lane >> 4)) + 8 * wn_");
        else  // [N][K]: rows n
          ldsm(false, J + "[0], " + J1 + "[0], " + J + "[1], " + J1 + "[1]", st, num(8 * wn * j),
               num(8 * wn) + " * ((tsr_lane >> 3) & 1) + 8 * wn_ + (tsr_lane & 7)", k16, half,
               n0 + " + ((tsr_lane >> 3) & 1)) + 8 * wn_ + (tsr_lane & 7)");
      }
    } else {
      from_registers(fb, kx, b, NT, 2, 4);
    }
  };
  auto load_fragments = [&](const std::string& kx, const std::string& f) { load_fragments_from(kx, f, stA, stB); };
  // TESSERA_CUDA_SINGLE_FRAGMENTS=1: each step loads its own fragments first (an A/B switch).
  const bool single = env_flag("TESSERA_CUDA_SINGLE_FRAGMENTS");
  if (!ahead) line("uint32_t fa[2][" + num(MT) + "][4], fb[2][" + num(NT) + "][2];");
  if (ahead) {
    // The first iteration loads its own first step's fragments; later ones have them from the
    // iteration before.
    open("if (" + frags_ahead_.first + ") {");
    load_fragments("0", "0");
    close();
  } else if (!single) {
    load_fragments("0", "0");
  }
  // pipeline-loops' `early_last_step = 1` (the knob mma_early_last_step): the last step's
  // wait, barrier and next fragments after its mma instructions instead of before them.
  const bool early_last = ahead && op.has_attr("early_last_step") && op.attr_int("early_last_step") == 1;
  // Before the last step's mma instructions (KT is even: the next iteration's first step reads
  // buffer 0), or after them with early_last_step: the ring's wait and barrier (the next stage
  // in for every thread; every thread done reading this stage, whose last fragments are in
  // registers), then the next iteration's first fragments from the next stage. After the
  // loop's last iteration that stage holds nothing of use: read, never used.
  auto next_iteration_fragments = [&] {
    line("tsr::cp_async_wait<" + num(frags_ahead_.stages - 2) + ">();");
    ++loop_callbacks_;  // (no program prefetch copies from a barrier in a loop's body)
    barrier();
    --loop_callbacks_;
    auto next_stage = [&](const Value* v) -> std::optional<StagedOperand> {
      // (Through a permute of the stage, fragments_ahead_dot's other form: its strides reordered.)
      const Op* perm = v->def->kind == OpKind::Permute ? v->def : nullptr;
      const Ring& ring = rings_.at(perm ? perm->operand(0)->def : v->def);
      SharedView sv = ring.view;
      sv.ptr = "(" + ring.view.ptr + " + int((unsigned(" + ring.stage + ") + 1u) % " + num(frags_ahead_.stages) +
               "u) * " + num(ring.stage_elems) + ")";
      if (perm) {
        sv.strides.clear();
        for (int64_t d : perm->attr_ints("dims")) sv.strides.push_back(ring.view.strides[d]);
      }
      return staged_from(op, sv);
    };
    load_fragments_from("0", "0", next_stage(a), next_stage(b));
  };
  line("#pragma unroll");
  open("for (int ks = 0; ks < " + num(KT) + "; ++ks) {");
  if (single) load_fragments("ks", "ks & 1");
  if (KT > 1 && !single) {
    open("if (ks + 1 < " + num(KT) + ") {");
    load_fragments("ks + 1", "(ks + 1) & 1");
    if (ahead && !early_last) {
      --ind_;
      open("} else {");
      next_iteration_fragments();
    }
    close();
  }
  // The ring's refill, left by emit_ring_loop where TESSERA_CUDA_REFILL_IN_DOT=1, in the first k
  // step, before its mma instructions:
  // the copies' address registers are free again by the time the next step's ldmatrix
  // addresses want registers (printed after them, ptxas reused those registers at once and the
  // loads waited for the copies to issue: Nsight Compute, session 39). H100, mma.sync matmul
  // 4096^3: 0.370 -> 0.355 ms (bench/RESULTS.md, session 40). TESSERA_CUDA_REFILL_AFTER_MMA=1
  // prints it after them (an A/B switch).
  // The loop's `refill_parts = P` (pipeline-loops, the knob mma_spread_copies): piece p in step
  // p, the first P of the dot's k steps (fewer than KT: all pieces are committed before the last
  // step's wait counts them).
  const bool refill_here = ring_refill_ && op.parent && op.parent->parent == ring_refill_loop_;
  const bool refill_first = refill_here && !env_flag("TESSERA_CUDA_REFILL_AFTER_MMA");
  const int parts = refill_here && ring_refill_loop_->has_attr("refill_parts")
                        ? static_cast<int>(std::clamp<int64_t>(ring_refill_loop_->attr_int("refill_parts"), 1, KT > 1 ? KT - 1 : 1))
                        : 1;
  auto print_refill = [&](const char* when) {
    auto refill = std::move(ring_refill_);
    ring_refill_ = nullptr;
    for (int part = 0; part < parts; ++part) {
      open("if (ks == " + num(part) + ") {  // the ring's refill, " +
           (parts > 1 ? "piece " + num(part + 1) + " of " + num(parts) + ", " + (refill_first ? "before" : "after") +
                            " the step's mma instructions"
                      : std::string(when)));
      refill(part, parts);
      close();
    }
    count("ring-refills-in-dots");
    if (parts > 1) count("ring-refill-pieces", parts);
  };
  if (refill_first) print_refill("before the first k step's mma instructions");
  for (int64_t i = 0; i < MT; ++i)
    for (int64_t j = 0; j < NT; ++j)
      line(mma + "&" + n + "[" + num(4 * (j + NT * i)) + "], " + FA + "[ks & 1][" + num(i) + "], " + FB + "[ks & 1][" +
           num(j) + "]);");
  if (refill_here && !refill_first) print_refill("while the first k step's mma instructions run");
  if (early_last && KT > 1 && !single) {
    open("if (ks + 1 == " + num(KT) + ") {  // after the last step's mma instructions (early_last_step)");
    next_iteration_fragments();
    close();
    count("mma-early-last-steps");
  }
  close();
  close();
  count("mma-dots");
}

// A dot with a blocked (or replicated) accumulator: FMAs. Operands in shared memory (what
// assign-layouts gives an FMA dot's operands of 1, 2, 4 or 8 bytes) are read per k: lowered_fma_dot_shared.
// Operands in registers have layouts (dot_operand of that accumulator) that give each thread the
// rows of A and the columns of B its accumulator slots need, every k, so the dot reads nothing
// from other threads: for each k, each slot folds in A's and B's slots of the same thread
// (found by evaluating every thread's coordinates), in k order as the interpreter does.
void Emitter::lowered_fma_dot(const Op& op) {
  const Value *a = op.operand(0), *b = op.operand(1), *c = op.operand(2), *r = op.result();
  if (fma_dot_step(r->type.elem, "x", "y", "s").empty() || c->type.layout != r->type.layout || a->type.rank() != 2)
    throw NotLowerable{"an FMA dot at " + op.loc.str() + " into " + r->type.str()};
  if (const bool sa = shared_.count(a) != 0, sb = shared_.count(b) != 0; sa || sb) {
    if (!sa || !sb) throw NotLowerable{"an FMA dot at " + op.loc.str() + " with one operand in shared memory and one in registers"};
    return lowered_fma_dot_shared(op);
  }
  const Dist &R = dist_of(r), &A = dist_of(a), &B = dist_of(b);
  const int64_t K = static_shape(a->type.shape)[1];
  // [M, N, K]: the result's slots with k the fastest digit; slot k + K s is (m, n) of s at k.
  Dist mnk = R;
  mnk.shape.push_back(K);
  mnk.digits.insert(mnk.digits.begin(), Dist::Digit{K, 2, 1});
  const std::vector<int64_t> ia = same_thread_slots(A, mnk, program_threads(), [](const std::vector<int64_t>& x) {
    return std::vector<int64_t>{x[0], x[2]};
  });
  const std::vector<int64_t> ib = same_thread_slots(B, mnk, program_threads(), [](const std::vector<int64_t>& x) {
    return std::vector<int64_t>{x[2], x[1]};
  });
  if (ia.empty() || ib.empty()) throw NotLowerable{"an FMA dot at " + op.loc.str() + " whose operands other threads hold"};
  // Slot s's operands at k are ia[K s] + k da, ib[K s] + k db when the strides are the same for
  // every slot (the operand layouts above make them so): a loop over k.
  auto stride = [&](const std::vector<int64_t>& i) {
    const int64_t d = K > 1 ? i[1] - i[0] : 0;
    for (int64_t s = 0; s < R.slots(); ++s)
      for (int64_t k = 0; k < K; ++k)
        if (i[K * s + k] != i[K * s] + k * d) return int64_t{-1};
    return d;
  };
  const int64_t da = stride(ia), db = stride(ib);
  if (da < 0 || db < 0) throw NotLowerable{"an FMA dot at " + op.loc.str() + " whose operand slots are not strided in k"};
  const std::string n = declare(op, r);
  copy_value(r, n, nm(c));
  auto at = [&](const Value* v, int64_t base, int64_t d) {
    return nm(v) + "[" + num(base) + (d ? " + k_ * " + num(d) : "") + "]";
  };
  line("#pragma unroll");
  open("for (int k_ = 0; k_ < " + num(K) + "; ++k_) {");
  for (int64_t s = 0; s < R.slots(); ++s) {
    const std::string acc = n + "[" + num(s) + "]";
    line(acc + " = " + fma_dot_step(r->type.elem, at(a, ia[K * s], da), at(b, ib[K * s], db), acc) + ";");
  }
  close();
  count("fma-dots");
}

// The accumulator array `n` of the wgmma result `r`: block (mt, nb) as the instruction's
// fragment array, and a register fence over all of them (they are defined once the group is
// waited for).
std::string Emitter::wgmma_acc_block(const Value* r, const std::string& n, int64_t mt, int64_t nb) {
  const int64_t N = static_shape(r->type.shape)[1], IN = r->type.layout.instr[1];
  return "*reinterpret_cast<float(*)[1][" + num(IN / 8) + "][4]>(&" + n + "[" + num(mt * N / 2 + nb * IN / 2) + "])";
}

void Emitter::wgmma_fence_acc(const Value* r, const std::string& n) {
  const std::vector<int64_t> SR = static_shape(r->type.shape);
  const tessera::Layout& L = r->type.layout;
  const int64_t MT = SR[0] / (64 * (L.warps[0] / 4)), NB = SR[1] / L.instr[1];
  for (int64_t mt = 0; mt < MT; ++mt)
    for (int64_t nb = 0; nb < NB; ++nb) line("tsr::wgmma_fence_regs(" + wgmma_acc_block(r, n, mt, nb) + ");");
}

// An FMA dot whose operands are shared tiles: k outside the slots. Per k, each thread loads
// the values of A's column k at the rows its accumulator slots hold (one per distinct row) and
// of B's row k at their columns (one per distinct column), then updates every slot: each slot
// adds its products in k order (the interpreter's bits), and the block NVVM sees holds few
// shared loads (its time grows as their square: docs/cuda-backend.md, Compile time). The
// planning emitter's k-outer FMA dot (EmitDot.cpp) is the same loop for its row-major layouts.
void Emitter::lowered_fma_dot_shared(const Op& op) {
  const Value *a = op.operand(0), *b = op.operand(1), *c = op.operand(2), *r = op.result();
  const SharedView &SA = shared_.at(a), &SB = shared_.at(b);
  if (SA.rows != 0 || SB.rows != 0) throw NotLowerable{"an FMA dot at " + op.loc.str() + " over a swizzled shared tile"};
  const Dist& R = dist_of(r);
  const int64_t K = static_shape(a->type.shape)[1];
  const ScalarKind in = a->type.elem;
  // The slot part of each slot's row and column (a thread adds its lane's and warp's part), and
  // the distinct ones, in slot order.
  std::vector<int64_t> rows, cols;
  std::vector<size_t> row_of, col_of;
  auto index_in = [](std::vector<int64_t>& xs, int64_t x) {
    const auto it = std::find(xs.begin(), xs.end(), x);
    if (it != xs.end()) return static_cast<size_t>(it - xs.begin());
    xs.push_back(x);
    return xs.size() - 1;
  };
  for (int64_t s = 0; s < R.slots(); ++s) {
    const std::vector<int64_t> at = R.coord(s, 0, 0);
    row_of.push_back(index_in(rows, at[0]));
    col_of.push_back(index_in(cols, at[1]));
  }
  const std::string n = declare(op, r);
  copy_value(r, n, nm(c));
  open("{");
  line("const int tm_ = " + R.thread_expr(0) + ", tn_ = " + R.thread_expr(1) + ";");
  // Four k steps unrolled: the straight-line block NVVM gets stays small.
  line("#pragma unroll 4");
  open("for (int k_ = 0; k_ < " + num(K) + "; ++k_) {");
  for (size_t i = 0; i < rows.size(); ++i)
    line("const auto a" + num(int64_t(i)) + "_ = " +
         load_conv(in, SA.ptr + "[" + shared_index(SA, {"tm_ + " + num(rows[i]), "k_"}) + "]") + ";");
  for (size_t j = 0; j < cols.size(); ++j)
    line("const auto b" + num(int64_t(j)) + "_ = " +
         load_conv(in, SB.ptr + "[" + shared_index(SB, {"k_", "tn_ + " + num(cols[j])}) + "]") + ";");
  for (int64_t s = 0; s < R.slots(); ++s) {
    const std::string acc = n + "[" + num(s) + "]";
    line(acc + " = " +
         fma_dot_step(r->type.elem, "a" + num(int64_t(row_of[s])) + "_", "b" + num(int64_t(col_of[s])) + "_", acc) + ";");
  }
  close();
  close();
  count("fma-dots");
  count("fma-dots-from-shared");
}

// A dot with a wgmma accumulator (mma v3, sm_90a): each warpgroup issues m64nNk16 (16-bit
// operands) or m64nNk32 (f8e4m3 / f8e5m2, SS with both tiles K-major only) over its 64-row
// blocks, B (and A in the SS form) read from 128-byte swizzled shared tiles through matrix
// descriptors, A in the RS form from the registers that computed it. The accumulator
// slots of a 64-row block are the instruction's fragment array as it is (DistLayout.cpp: the
// n8 blocks' quads in order); the group is waited for at once.
void Emitter::lowered_wgmma(const Op& op) {
  const Value *a = op.operand(0), *b = op.operand(1), *c = op.operand(2), *r = op.result();
  const tessera::Layout& L = r->type.layout;
  const ScalarKind ab = a->type.elem;
  const bool fp8 = is_f8(ab);
  if (!tensor_core_type(ab) || b->type.elem != ab || r->type.elem != ScalarKind::F32 || c->type.layout != L)
    throw NotLowerable{"a wgmma dot at " + op.loc.str() + " other than 16-bit or f8 operands into an f32 accumulator"};
  // A k step is 32 bytes of a 128-byte swizzled row: 16 elements of 16 bits, 32 of 8.
  const int64_t eb = scalar_bytes(ab), KI = 32 / eb, A = 128 / eb;
  const std::vector<int64_t> SR = static_shape(r->type.shape), SA = static_shape(a->type.shape);
  const int64_t M = SR[0], N = SR[1], K = SA[1], W = L.warps[0], G = W / 4, IN = L.instr[1];
  if (W % 4 != 0 || M % (64 * G) != 0 || N % IN != 0 || K % KI != 0)
    throw NotLowerable{"a wgmma tile that its warpgroups do not divide"};
  // The widths device/wgmma.cuh has (tools/gen-wgmma.py).
  if (IN != 8 && IN != 16 && IN != 32 && IN != 64 && IN != 96 && IN != 128 && IN != 192 && IN != 256)
    throw NotLowerable{"a wgmma instruction of N = " + num(IN) + " (the device library has 8, 16, 32, 64, 96, 128, "
                       "192 and 256)"};
  const int64_t MT = M / (64 * G), NB = N / IN, KT = K / KI;
  auto swizzled = [&](const Value* v, const char* what) -> const SharedView& {
    auto it = shared_.find(v);
    if (it == shared_.end() || it->second.rows == 0 || it->second.strides.size() != 2)
      throw NotLowerable{std::string("a wgmma ") + what + " operand not in a 128-byte swizzled shared tile"};
    return it->second;
  };
  // B [K, N]: K-major (K contiguous: rows are n) or MN-major (N contiguous: rows are k).
  const SharedView& sb = swizzled(b, "B");
  const bool b_kmajor = sb.strides[0] == 1;
  if (sb.atom != A || sb.strides[b_kmajor ? 1 : 0] != A || (!b_kmajor && NB > 1 && IN % A != 0))
    throw NotLowerable{"a wgmma B operand view of other than one row per index"};
  if (fp8 && !b_kmajor) throw NotLowerable{"an f8 wgmma B operand not K-major (f8 wgmma reads both K-major)"};
  if (staged_.count(a)) throw NotLowerable{"a wgmma A operand staged for ldmatrix"};
  const bool ss = shared_.count(a) != 0;
  if (fp8 && !ss) throw NotLowerable{"an f8 wgmma A operand in registers (the layout emitter prints f8 wgmma SS only)"};
  // A [M, K] in shared memory: K-major (a tile loaded as it is), or MN-major (16-bit only: a
  // permute of a [K, M] tile, the swapped product's weights), each warpgroup's 64 rows then one
  // 128-byte column block of it, read with the A-transpose immediate.
  bool a_kmajor = true;
  if (ss) {
    const SharedView& sa = swizzled(a, "A");
    a_kmajor = sa.strides[1] == 1;
    if (a_kmajor ? sa.atom != A || sa.strides[0] != A : sa.atom != A || sa.strides[0] != 1 || sa.strides[1] != A || fp8)
      throw NotLowerable{std::string("a wgmma A operand in shared memory neither K-major nor ") +
                         (fp8 ? "16-bit MN-major (f8 wgmma reads both K-major)" : "MN-major by 128-byte rows")};
    if (!a_kmajor) count("wgmma-mn-major-a");
  } else {
    const tessera::Layout& la = a->type.layout;
    if (la.kind != tessera::Layout::Kind::DotOperand || la.operand != 0 || !la.parent || la.parent->kind != L.kind ||
        la.parent->version != 3 || la.parent->warps != L.warps)
      throw NotLowerable{"a wgmma A operand in registers of another layout"};
    (void)dist_of(a);
  }
  (void)dist_of(c);
  // In flight (emit_tma_ring_loop): the group writes the carried array, waited for later.
  const bool async = &op == async_dot_;
  std::string n;
  if (async) {
    n = nm(c);
    name_[r] = n;
  } else {
    n = declare(op, r);
    copy_value(r, n, nm(c));
  }
  const std::string ty = tensor_core_type(ab);
  // (The f8 forms have no transpose immediates: both operands K-major, checked above.)
  const std::string fn = "tsr::wgmma_m64n" + num(IN) + "k" + num(KI) + "_" + ty + (ss ? "" : "_rs") +
                         (fp8 ? "" : std::string(b_kmajor ? "<0" : "<1") + (a_kmajor ? ">" : ", 1>"));
  auto acc = [&](int64_t mt, int64_t nb) { return wgmma_acc_block(r, n, mt, nb); };
  open("{");
  line("const uint32_t wg_ = uint32_t(tsr_warp) / 4u;");
  line("(void)wg_;");
  if (!ss) {
    // The RS fragments: slots 8 * (ks + KT * mt) .. + 7 of the A layout, packed in pairs.
    const std::string pack = ab == ScalarKind::BF16 ? "tsr::f2bf2(" : "tsr::f2h2(";
    line("uint32_t fa_[" + num(MT) + "][" + num(KT) + "][4];");
    for (int64_t mt = 0; mt < MT; ++mt)
      for (int64_t ks = 0; ks < KT; ++ks)
        for (int q = 0; q < 4; ++q) {
          const int64_t s0 = 8 * (ks + KT * mt) + 2 * q;
          line("fa_[" + num(mt) + "][" + num(ks) + "][" + num(q) + "] = " + pack + nm(a) + "[" + num(s0) + "], " + nm(a) +
               "[" + num(s0 + 1) + "]);");
        }
  } else {
    line("const uint32_t sa_ = " + shared_addr(shared_.at(a)) + ";");
  }
  line("const uint32_t sb_ = " + shared_addr(sb) + ";");
  const int64_t ra = ss ? shared_.at(a).rows : 0, rb = sb.rows;
  line("tsr::wgmma_fence();");
  for (int64_t mt = 0; mt < MT; ++mt)
    for (int64_t nb = 0; nb < NB; ++nb)
      for (int64_t ks = 0; ks < KT; ++ks) {
        // K-major tiles: a k step is 32 bytes inside a 128-byte row, the next 128-byte column
        // block (A elements) after four; 8-row groups 1024 bytes apart. MN-major B (16-bit
        // only): a k16 step is 16 rows, the 64-column blocks rows * 128 bytes apart (the
        // leading offset).
        const int64_t kel = KI * ks;
        std::string fa;
        if (ss && a_kmajor)
          fa = "tsr::wgmma_desc_sw128(sa_ + " + num((kel / A) * ra * 128 + (kel % A) * eb + 64 * mt * G * 128) +
               "u + wg_ * " + num(64 * 128) + "u, 16u, 1024u)";
        else if (ss)  // MN-major: the 64-row block's column block of the [K, M] tile, k16 steps 16 rows down
          fa = "tsr::wgmma_desc_sw128(sa_ + " + num(mt * G * ra * 128 + kel * 128) + "u + wg_ * " + num(ra * 128) +
               "u, " + num(ra * 128) + "u, 1024u)";
        else
          fa = "fa_[" + num(mt) + "][" + num(ks) + "]";
        const std::string db =
            b_kmajor ? "tsr::wgmma_desc_sw128(sb_ + " + num((kel / A) * rb * 128 + nb * IN * 128 + (kel % A) * eb) +
                           "u, 16u, 1024u)"
                     : "tsr::wgmma_desc_sw128(sb_ + " + num((nb * IN / 64) * rb * 128 + kel * 128) + "u, " +
                           num(rb * 128) + "u, 1024u)";
        line(fn + "(" + acc(mt, nb) + ", " + fa + ", " + db + ");");
      }
  line("tsr::wgmma_commit();");
  if (async && !overlap_.iter.empty()) {
    // While the group runs: box `iter` of the block the program before left (overlap-epilogues).
    open("if (" + overlap_.pend + ") {");
    for (int64_t b = 0; b < overlap_.MT * overlap_.boxes; ++b)
      line(std::string(b ? "else " : "") + "if (" + overlap_.iter + " == " + num(b) + "u) " + overlap_box(b));
    close();
  }
  if (async) {
    line("tsr::wgmma_wait<1>();  // the iteration before's group");
  } else {
    line("tsr::wgmma_wait<0>();");
    wgmma_fence_acc(r, n);
  }
  if (!ss)
    for (int64_t mt = 0; mt < MT; ++mt)
      for (int64_t ks = 0; ks < KT; ++ks) line("tsr::wgmma_fence_a(fa_[" + num(mt) + "][" + num(ks) + "]);");
  close();
  count("wgmma-dots");
}

}  // namespace tessera::cudagen
