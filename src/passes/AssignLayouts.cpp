// assign-layouts (GPU lowering): every tile value gets a layout encoding, and every place where a
// value meets an op that needs it in another layout gets an explicit convert_layout. The choice
// is deliberately local, as Triton's first step is: loads, elementwise and shape ops take the
// default blocked layout of their shape; a dot's result takes a tensor-core accumulator layout
// (mma v3 for 16-bit and f8 dots on sm_90a when the tile allows wgmma, else v2 where mma.sync
// applies, else blocked for an FMA dot) and its operands the dot's operand layout (for wgmma,
// shared memory for B, and for A where it is loaded: SS; else A stays in registers: RS; for
// mma.sync, shared memory for a loaded 16-bit operand, which the dot reads with ldmatrix; for an
// FMA dot, shared memory for both, read per k); sort
// and topk results take the blocked layout; a reduction's result is its operand's layout sliced
// along the axis; carried values keep their initial value's layout. remove-layout-conversions then removes
// what it can, so what the pair leaves is what the kernel really exchanges.
//
// A `while` carries its values in their initial values' layouts, as a `for` does. Kernels with
// Struct pipes or warp roles, or layouts written by hand, are left as they are (stat
// assign-layouts.skipped).
#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <unordered_map>

#include "ir/IR.h"
#include "passes/BlockEdit.h"
#include "passes/Passes.h"
#include "support/Env.h"

namespace tessera {

namespace {

int64_t pow2_floor(int64_t x) {
  int64_t p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}

// The largest power of two <= `limit` that divides `n` (1 at least).
int64_t pow2_dividing(int64_t n, int64_t limit) {
  int64_t p = 1;
  while (p * 2 <= limit && n % (p * 2) == 0) p *= 2;
  return p;
}

}  // namespace

int default_num_warps(const Kernel& k, int cluster) {
  if (const ConstexprDecl* d = k.find_constexpr("num_warps"); d && d->value >= 1 && d->value <= kMaxWarps)
    return static_cast<int>(d->value);
  int64_t biggest = 0;
  bool big_dot = false, any_dot = false;
  walk(const_cast<Block&>(*k.body), [&](Op& op) {
    for (const Value* r : op.results)
      if (r->type.is_tile() && shape_is_static(r->type.shape)) biggest = std::max(biggest, shape_numel(r->type.shape));
    any_dot |= op.kind == OpKind::Dot;
    if (op.kind == OpKind::Dot && op.result()->type.rank() == 2 && shape_is_static(op.result()->type.shape)) {
      auto S = static_shape(op.result()->type.shape);
      big_dot |= S[0] >= 128 && S[1] >= 128;
    }
  });
  if (big_dot) return 8;
  if (any_dot) return biggest >= 8192 ? 8 : 4;
  // Large tiles without dots (whole rows of memory-bound kernels): about 32 elements per thread,
  // so a row stays in registers (32768 elements: 32 warps, 64 registers each; on a cluster of 8
  // CTAs, 4 warps each).
  biggest /= std::max(1, cluster);
  int warps = 4;
  while (warps < kMaxWarps && biggest > int64_t(warps) * 32 * 32) warps *= 2;
  // A kernel that loads three or more such tiles in one block (layernorm's x, w and b) would
  // hold 48 of a 32-warp CTA's 64 registers per thread in them and spill: 16 warps, 64
  // elements and 128 registers each. H200, layernorm 4096x32768 bf16: 3522 -> 3655 GB/s.
  if (warps == kMaxWarps && cluster == 1) {
    auto big_loads = [&](const Block& b) {
      int n = 0;
      for (const auto& o : b.ops)
        n += o->kind == OpKind::LoadTile && shape_is_static(o->result()->type.shape) &&
             shape_numel(o->result()->type.shape) == biggest;
      return n;
    };
    int most = big_loads(*k.body);
    walk(const_cast<Block&>(*k.body), [&](Op& op) {
      for (const auto& r : op.regions) most = std::max(most, big_loads(*r));
    });
    if (most >= 3) warps = kMaxWarps / 2;
  }
  return warps;
}

Layout default_blocked_layout(const std::vector<int64_t>& shape, int elem_bytes, int num_warps, int run_bytes) {
  const size_t r = shape.size();
  std::vector<int64_t> pt(r, 1), th(r, 1), wp(r, 1), order(r);
  for (size_t i = 0; i < r; ++i) order[i] = static_cast<int64_t>(r - 1 - i);
  // 16 bytes per thread along the fastest dim, but no more elements than the tile has per
  // thread of the program (Triton's coalesce rule): a [1024] i32 tile on 512 threads takes 2
  // each, not 4 each on half of them with every value held twice (twice the registers: topk's
  // segments kernel spilled under its 64-register bound). Then the warp's threads fastest dim
  // first, then the warps slowest dim first; what is left over replicates along dim 0 / the
  // last dim.
  int64_t numel = 1;
  for (int64_t e : shape) numel *= e;
  const int64_t per_program = std::max<int64_t>(1, numel / (32 * std::max(1, num_warps)));
  pt[r - 1] = pow2_dividing(shape[r - 1], std::min<int64_t>(std::max(1, run_bytes / std::max(1, elem_bytes)), pow2_floor(per_program)));
  int64_t threads = 32;
  for (size_t i = r; i-- > 0 && threads > 1;) {
    th[i] = pow2_dividing(shape[i] / pt[i], threads);
    threads /= th[i];
  }
  th[r - 1] *= threads;
  int64_t warps = pow2_floor(std::max(1, num_warps));
  for (size_t i = 0; i < r && warps > 1; ++i) {
    wp[i] = pow2_dividing(std::max<int64_t>(1, shape[i] / (pt[i] * th[i])), warps);
    warps /= wp[i];
  }
  wp[0] *= warps;
  Layout l = Layout::blocked(pt, th, wp, order);
  return layout_misfit(l, shape).empty() ? l : Layout::replicated();
}

namespace {

std::vector<int64_t> dims(const Type& t) { return static_shape(t.shape); }

class Assign {
 public:
  Assign(Kernel& k, const GpuLoweringOptions& o) : k_(k), o_(o), warps_(launch_warps(k)) {
    std::set<const Value*> from_dot;  // values computed from a dot's result
    walk(*k_.body, [&](Op& op) {
      has_reductions_ |= op.info().cls == OpClass::Reduce || op.info().cls == OpClass::Scan;
      if (op.info().cls == OpClass::Scan && !op.operands.empty() && op.operand(0)->type.is_tile() &&
          shape_is_static(op.operand(0)->type.shape) && non_unit(dims(op.operand(0)->type)).size() == 1)
        scan_lengths_.insert(non_unit(dims(op.operand(0)->type)));
      // Values computed from a dot's result (program order: what a dot in the same block or
      // an enclosing one computed before), and whether a dot reads one as an operand.
      bool derived = op.kind == OpKind::Dot;
      for (size_t i = 0; i < op.operands.size(); ++i)
        if (from_dot.count(op.operands[i])) {
          derived = true;
          if (op.kind == OpKind::Dot && i < 2) dot_reads_dot_ = true;
        }
      if (derived) from_dot.insert(op.results.begin(), op.results.end());
      // A loop or if yields what its body computed: its results (read after it) follow.
      if (const Op* owner = op.parent ? op.parent->parent : nullptr;
          op.kind == OpKind::Yield && owner && owner->kind != OpKind::ReduceWith)
        for (size_t i = 0; i < op.operands.size() && i < owner->results.size(); ++i)
          if (from_dot.count(op.operands[i])) from_dot.insert(owner->results[i]);
      if (op.kind != OpKind::LoadTile && op.kind != OpKind::StoreTile) return;
      const Value* tile = op.kind == OpKind::LoadTile ? op.result() : op.operand(1);
      if (!tile->type.is_tile() || !shape_is_static(tile->type.shape)) return;
      auto it = access_bytes_.emplace(dims(tile->type), 4).first;
      it->second = std::min(it->second, scalar_bytes(op.operand(0)->type.elem));
    });
    // A reshape that only adds or drops unit dims ([1, N] <-> [N]) moves no element between
    // threads when both shapes have the same run: the narrower access width goes to both (topk
    // bf16 loads a [1, 8192] row of 8-element runs and works on it as [8192], which took 4-element
    // runs, the default of a shape only computed on: an exchange through shared memory).
    for (bool changed = true; changed;) {
      changed = false;
      walk(*k_.body, [&](Op& op) {
        if (op.kind != OpKind::Reshape || !op.operand(0)->type.is_tile() || !shape_is_static(op.operand(0)->type.shape) ||
            !shape_is_static(op.result()->type.shape))
          return;
        // (The last dims equal and not 1: [N, 1] <-> [N] moves every element's run, whatever the
        // widths, and is an exchange either way.)
        const std::vector<int64_t> a = dims(op.operand(0)->type), b = dims(op.result()->type);
        if (non_unit(a) != non_unit(b) || a.empty() || b.empty() || a.back() != b.back() || a.back() == 1) return;
        const auto ia = access_bytes_.find(a), ib = access_bytes_.find(b);
        const int wa = ia == access_bytes_.end() ? 4 : ia->second, wb = ib == access_bytes_.end() ? 4 : ib->second;
        if (wa == wb) return;
        access_bytes_[a] = access_bytes_[b] = std::min(wa, wb);
        changed = true;
      });
    }
  }

  int64_t run() {
    block(*k_.body);
    return inserted_;
  }

  // One line per dot that the target's wgmma could have taken and did not, saying why
  // ("dot at LOC: not wgmma: ..."; the cuda emitter repeats it without --stats), and per
  // 16- or 8-bit float dot that takes no tensor cores at all ("...: FMA dot (no tensor cores): ...").
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  Kernel& k_;
  const GpuLoweringOptions& o_;
  int warps_;
  int64_t inserted_ = 0;
  // For each tile shape the kernel loads or stores, the narrowest element of those accesses
  // in memory (4 at most).
  std::map<std::vector<int64_t>, int> access_bytes_;
  // The non-unit dims of the 1-D tiles block scans read.
  std::set<std::vector<int64_t>> scan_lengths_;
  bool has_reductions_ = false;  // any reduce or scan in the kernel
  std::vector<std::string> notes_;
  bool dot_reads_dot_ = false;   // a dot's operand computed from another dot's result

  // One default per shape, whatever the element type, so that a bf16 load, its f32 cast and an
  // i1 mask of the same shape agree: 16 bytes of the narrowest element the kernel loads or
  // stores in that shape per thread along the fastest dim (eight of a bf16 row kernel's
  // elements, one 16-byte vector access; four for a shape it only computes in f32), but no more
  // than the shape's elements per thread of the program (default_blocked_layout), and the
  // memory ops' vectors are as wide as that run.
  // A 1-D tile (unit dims aside) of a length a block scan reads takes 32-byte runs: each run is
  // one block-wide step of the scan (a warp scan, a barrier), so topk's [8192] i32 scans on 512
  // threads print 2 steps instead of 4 (and the f32 segments kernel spills 12 bytes, not 32,
  // under its 64-register bound). Measured on the H100 against 16-byte runs: bf16 top-k 2.5%
  // faster, f32 2.5% slower (bench/RESULTS.md, session 43): kept for bf16.
  Layout blocked(const Type& t) const {
    auto it = access_bytes_.find(dims(t));
    // (TESSERA_SCAN_RUN_BYTES=16: the runs of other tiles, an A/B switch for the GPU.)
    static const int scan_run = env_int("TESSERA_SCAN_RUN_BYTES").value_or(32) == 16 ? 16 : 32;
    const int run = scan_lengths_.count(non_unit(dims(t))) ? scan_run : 16;
    return default_blocked_layout(dims(t), it == access_bytes_.end() ? 4 : it->second, warps_, run);
  }
  static std::vector<int64_t> non_unit(std::vector<int64_t> d) {
    std::erase(d, int64_t{1});
    return d;
  }

  // `v` as op `user`'s operand `i` in layout `want` (and space): the value itself, or a new
  // convert_layout in front of `user`.
  void require(Op& user, size_t i, const Layout& want, const std::string& space = "") {
    Value* v = user.operands[i];
    if (!v->type.is_tile() || (v->type.layout == want && v->type.space == space)) return;
    Type t = v->type;
    t.layout = want;
    t.space = space;
    Op* c = k_.create_op(*user.parent, OpKind::ConvertLayout, {v}, {t}, {}, user.loc, 0, &user);
    user.operands[i] = c->result();
    ++inserted_;
  }

  static void set(Value* v, const Layout& l, const std::string& space = "") {
    v->type.layout = l;
    v->type.space = space;
  }

  // The dot's accumulator layout, and the operand layouts that go with it (with their space).
  struct DotLayouts {
    Layout result, a, b;
    std::string b_space, a_space;
  };
  DotLayouts dot_layouts(const Op& dot) {
    const Type& a = dot.operand(0)->type;
    const std::vector<int64_t> c = dims(dot.result()->type), ad = dims(a);
    const int64_t M = c[0], N = c[1], K = ad[1];
    const bool narrow = tensor_core_float(a.elem);
    const int64_t kw = std::max<int64_t>(1, 32 / scalar_bits(a.elem));
    // Each warpgroup takes whole 64-row blocks (a smaller M leaves it to mma.sync).
    const int64_t wgs = std::max(1, warps_ / 4);
    // (A note only for float dots: integer ones have no wgmma form here to miss.)
    if (o_.wgmma) {
      std::string why;
      Layout acc = Layout::mma(3, {4 * wgs, 1}, {64, std::min<int64_t>(N, 256)});
      if (!narrow)
        why = "wgmma here takes bf16, f16 or f8 operands, not " + std::string(scalar_name(a.elem));
      else if (warps_ < 4)
        why = "the program has " + std::to_string(warps_) + " warps, fewer than a warpgroup";
      else if (M % (64 * wgs) != 0)
        why = "M = " + std::to_string(M) + " is not a multiple of " + std::to_string(64 * wgs) + " (64 rows a warpgroup x " +
              std::to_string(wgs) + ")";
      else if (N % 8 != 0)
        why = "N = " + std::to_string(N) + " is not a multiple of 8";
      else
        why = layout_misfit(acc, c);
      if (why.empty()) {
        // B from shared memory always (SS or RS); A too where it comes from memory, else from
        // the registers that computed it (RS: FlashAttention's P needs no round trip).
        Layout s = Layout::shared(128, 0);
        if (!loaded(dot.operand(0)) && scalar_bits(a.elem) == 16 && K % 16 == 0) return {acc, Layout::dot_operand(acc, 0, kw), s, "shared", ""};
        return {acc, s, s, "shared", "shared"};
      }
      if (is_float(a.elem)) notes_.push_back("dot at " + dot.loc.str() + kNotWgmmaMarker + why);
    }
    // mma.sync: 16-bit floats from sm_80 on (k16 steps), f8 from sm_89 on (k32 steps); an f8
    // dot on sm_80 is an FMA dot (below), as the planning emitter's is.
    const bool f8 = scalar_bits(a.elem) == 8;
    std::string no_mma;  // why a 16- or 8-bit float dot takes no tensor cores (a note)
    if (narrow && o_.sm < (f8 ? 89 : 80))
      no_mma = f8 ? "fp8 mma.sync (m16n8k32) needs sm_89 or newer" : "mma.sync (m16n8k16) needs sm_80 or newer";
    else if (narrow && !(M % 16 == 0 && N % 8 == 0 && K % (f8 ? 32 : 16) == 0))
      no_mma = "M x N x K = " + std::to_string(M) + " x " + std::to_string(N) + " x " + std::to_string(K) +
               " is not a multiple of mma.sync's 16 x 8 x " + (f8 ? "32" : "16");
    if (narrow && no_mma.empty()) {
      // The warps along M as far as they go: a row's accumulators then stay in one warp, so
      // row reductions over them (attention's softmax) are shuffles and the accumulator is
      // the next dot's A fragment (P @ V) in registers. In a kernel with neither, the
      // squarest warp block instead (fewest fragment loads per mma, as the planning emitter's
      // plan_mma picks): a 128 x 256 tile on 8 warps is 2 x 4 warps of 64 x 64, where 8 x 1
      // warps of 16 x 256 each read all of B for every k step.
      // (B is read from shared memory, a load's tile or staged by stage-mma-operands, in whole
      // ldmatrix.x4 loads of two n8 tiles: its warps need an even number of them.)
      const int64_t nb = 16;
      int64_t wm = pow2_dividing(M / 16, warps_), wn = std::max<int64_t>(1, warps_ / wm);
      if (!has_reductions_ && !dot_reads_dot_)
        for (int64_t cm = 1; cm <= warps_; cm *= 2) {
          const int64_t cn = warps_ / cm;
          if (warps_ % cm || M % (16 * cm) || N % (nb * cn)) continue;
          auto skew = [&](int64_t m, int64_t n) { return std::abs(M / m - N / n); };
          if (skew(cm, cn) < skew(wm, wn)) wm = cm, wn = cn;
        }
      // A tile smaller than the warp grid (the tuner's 16 x 16 and 16 x 32 blocks on 4 warps):
      // fewer warps along N, each with whole pairs of n8 tiles, and the warps left over hold
      // copies of the accumulator (DistLayout), as the planning emitter's plan_mma leaves them
      // idle.
      while (wn > 1 && N % (nb * wn) != 0) wn /= 2;
      Layout acc = Layout::mma(2, {wm, wn}, {16, 8});
      no_mma = layout_misfit(acc, c);
      if (no_mma.empty()) {
        // A 16-bit operand that comes from memory is read from a shared tile (rows padded by
        // 16 bytes, so that the eight rows an ldmatrix phase reads fall in different banks),
        // the dot loading its fragments with ldmatrix as it goes: the load then writes the tile
        // itself (cp.async), as for wgmma's SS form. One computed in registers keeps the
        // operand layout (FlashAttention's P: the accumulator is the A fragment;
        // stage-mma-operands stages the others). An f8 operand likewise where its load is
        // K-major (ldmatrix has no 8-bit transpose: A as loaded, B [N, K] through a permute),
        // rows padded by 16 bytes.
        auto operand = [&](int i) -> std::pair<Layout, std::string> {
          if (scalar_bits(a.elem) == 16 && loaded(dot.operand(i))) return {Layout::shared(0, 8), "shared"};
          if (f8 && k_major_load(dot.operand(i), i == 0 ? 1 : 0)) return {Layout::shared(0, 16), "shared"};
          // (Not K-major, B [K, N] as loaded, say: a shared tile whose fastest dim is K, which the
          // conversion from the load's registers writes transposed, K = dim 1 of A, dim 0 of B.)
          if (f8) return {Layout::shared(0, 16, i == 0 ? std::vector<int64_t>{1, 0} : std::vector<int64_t>{0, 1}), "shared"};
          return {Layout::dot_operand(acc, i, kw), ""};
        };
        auto [la, sa] = operand(0);
        auto [lb, sb] = operand(1);
        return {acc, la, lb, sb, sa};
      }
    }
    // An FMA dot: both operands in shared memory (rows padded by 16 bytes), which the dot
    // reads per k, each thread the values of A's rows and B's columns its accumulator slots
    // need (the planning emitter's k-outer FMA dot). In registers instead, each thread would
    // hold its rows and columns for all of K (the dot_operand layouts: 3 KB of stack for the
    // library's f32 matmul; an i8 dot with K = 512 took NVRTC 78 s and 14 KB of stack).
    if (narrow) notes_.push_back("dot at " + dot.loc.str() + ": FMA dot (no tensor cores): " + no_mma);
    Layout acc = blocked(dot.result()->type);
    if (const int eb = scalar_bytes(a.elem); o_.fma_operands_in_shared && (eb == 1 || eb == 2 || eb == 4 || eb == 8)) {
      Layout s = Layout::shared(0, 16 / eb);
      return {acc, s, s, "shared", "shared"};
    }
    return {acc, Layout::dot_operand(acc, 0, 1), Layout::dot_operand(acc, 1, 1), "", ""};
  }

  // Is the 2-D `v` a load through permutes only, its dim `k` the load's contiguous (last) one?
  static bool k_major_load(const Value* v, int64_t k) {
    if (v->type.rank() != 2) return false;
    while (v->def && v->def->kind == OpKind::Permute) {
      k = v->def->attr_ints("dims")[k];  // result dim i is operand dim dims[i]
      v = v->def->operand(0);
    }
    return v->def && v->def->kind == OpKind::LoadTile && k == v->type.rank() - 1;
  }

  // Is `v` a load, through shape ops that move no data between memory and registers?
  static bool loaded(const Value* v) {
    while (v->def && (v->def->kind == OpKind::Reshape || v->def->kind == OpKind::Permute)) v = v->def->operand(0);
    return v->def && v->def->kind == OpKind::LoadTile;
  }

  void op(Op& op) {
    switch (op.info().cls) {
      case OpClass::Dot: {
        DotLayouts d = dot_layouts(op);
        require(op, 0, d.a, d.a_space);
        require(op, 1, d.b, d.b_space);
        require(op, 2, d.result);
        set(op.result(), d.result);
        // Everything else starts blocked: the accumulator goes back at once (the exchange
        // remove-layout-conversions takes away where the users can take the accumulator's
        // layout).
        if (Layout l = blocked(op.result()->type); l != d.result) {
          Block& b = *op.parent;
          const Op* next = next_op(op);
          Type t = op.result()->type;
          t.layout = l;
          Op* c = k_.create_op(b, OpKind::ConvertLayout, {op.result()}, {t}, {}, op.loc, 0, next);
          replace_all_uses(k_, op.result(), c->result());
          c->operands[0] = op.result();
          ++inserted_;
        }
        return;
      }
      case OpClass::Reduce:
      case OpClass::Scan: {
        const Type& t = op.operand(0)->type;
        if (!op.result()->type.is_tile()) return;
        if (op.info().cls == OpClass::Scan) return set(op.result(), t.layout);
        return set(op.result(), Layout::slice(t.layout, op.attr_int("axis")));
      }
      case OpClass::Unary:
      case OpClass::Binary:
      case OpClass::Compare:
      case OpClass::Ternary:
      case OpClass::Cast: {
        if (!op.result()->type.is_tile() || op.kind == OpKind::ConvertLayout) return;
        // The first tile operand's layout flows on (a cast from f32 to bf16 keeps it), so that
        // the operands' producers decide.
        Layout l = blocked(op.result()->type);
        for (const Value* v : op.operands)
          if (v->type.is_tile() && !v->type.layout.empty()) {
            l = v->type.layout;
            break;
          }
        for (size_t i = 0; i < op.operands.size(); ++i) require(op, i, l);
        return set(op.result(), l);
      }
      case OpClass::Shape:
        return shape_op(op);
      case OpClass::Memory:
        if (op.kind == OpKind::Gather || op.kind == OpKind::Scatter || op.kind == OpKind::Atomic ||
            op.kind == OpKind::AtomicCas)
          if (element_by_element(op)) return;
        [[fallthrough]];
      case OpClass::Create:
      // sort / topk read their operands through shared memory in whatever layout they have
      // (so they require none) and write blocked results.
      case OpClass::Sort:
      // A raw op's tiles go through shared memory as flat arrays (the code indexes them so):
      // operands in any layout, results blocked.
      case OpClass::Raw:
        for (Value* r : op.results)
          if (r->type.is_tile()) set(r, blocked(r->type));
        return;
      // A Struct buffer's slot read into registers (buffer_read) comes out blocked, as a load
      // does; buffer_write stores a tile of any register layout (each thread its elements).
      case OpClass::Struct:
        if (op.kind == OpKind::BufferRead) set(op.result(), blocked(op.result()->type));
        return;
      default:
        return;
    }
  }

  // A gather, scatter or atomic over tiles of indices: element by element, like an elementwise
  // op. The first tile operand's layout (the indices', as a rule) flows on; values, masks and
  // the result take it too. False when no operand is a tile (scalar indices).
  bool element_by_element(Op& op) {
    const Value* first = nullptr;
    for (size_t i = 1; i < op.operands.size() && !first; ++i)
      if (op.operands[i]->type.is_tile()) first = op.operands[i];
    if (!first) return false;
    const Layout l = first->type.layout.is_distributed() ? first->type.layout : blocked(first->type);
    for (size_t i = 1; i < op.operands.size(); ++i) require(op, i, l);
    for (Value* r : op.results)
      if (r->type.is_tile()) set(r, l);
    return true;
  }

  void shape_op(Op& op) {
    Value* r = op.result();
    const Type& a = op.operand(0)->type;
    const Layout l = blocked(r->type);
    if (op.kind == OpKind::ExpandDims) {
      // The inverse of a reduction: a slice along the new axis expands to its parent.
      const int64_t axis = op.attr_int("axis");
      Layout want = Layout::slice(l, axis);
      if (a.layout.kind == Layout::Kind::Slice && a.layout.dim == axis && layout_misfit(*a.layout.parent, dims(r->type)).empty())
        return set(r, *a.layout.parent);
      // A tile of one element that every thread holds (a row's statistic reduced along another
      // axis) expands into any layout that holds it everywhere too: the slice's parent.
      if (a.is_tile() && a.layout.kind == Layout::Kind::Slice && held_everywhere(a, a.layout) &&
          held_everywhere(r->type, *a.layout.parent))
        return set(r, *a.layout.parent);
      require(op, 0, want);
      return set(r, l);
    }
    if (op.kind == OpKind::Broadcast) {
      // The result's layout holds the smaller operand too (its size-1 dims divide the coverage).
      if (a.is_tile()) require(op, 0, l);
      return set(r, l);
    }
    if (op.kind == OpKind::Permute && a.layout.kind == Layout::Kind::Blocked) {
      const auto& p = op.attr_ints("dims");
      Layout out = a.layout;
      std::vector<int64_t> inverse(p.size());
      for (size_t i = 0; i < p.size(); ++i) {
        out.per_thread[i] = a.layout.per_thread[p[i]];
        out.threads[i] = a.layout.threads[p[i]];
        out.warps[i] = a.layout.warps[p[i]];
        inverse[p[i]] = static_cast<int64_t>(i);
      }
      for (size_t i = 0; i < p.size(); ++i) out.order[i] = inverse[a.layout.order[i]];
      if (layout_misfit(out, dims(r->type)).empty()) return set(r, out);
    }
    // Reshape, extract and insert (and a permute of anything else): the operands in the
    // default layout of their shapes, an exchange where they are not.
    for (size_t i = 0; i < op.operands.size(); ++i)
      if (op.operands[i]->type.is_tile()) require(op, i, blocked(op.operands[i]->type));
    set(r, l);
  }

  // Does every thread of the program hold the one element of a tile of type `t` in layout
  // `l`? Then shape ops on it need no exchange.
  bool held_everywhere(const Type& t, const Layout& l) const {
    return shape_is_static(t.shape) && shape_numel(t.shape) == 1 &&
           layouts_place_alike(l, Layout::replicated(), dims(t), warps_);
  }

  // Carried values take their initial value's layout; a yield converts to it.
  void control(Op& op) {
    if (op.kind == OpKind::For) {
      Block& body = op.region(0);
      for (size_t i = 0; i + 3 < op.operands.size(); ++i) {
        const Type& init = op.operand(3 + i)->type;
        set(body.args[1 + i], init.layout, init.space);
        set(op.results[i], init.layout, init.space);
      }
      block(body);
      yields_to(body, op.results);
      return;
    }
    if (op.kind == OpKind::While) {  // carried values keep their initial value's, as a for's
      Block &cond = op.region(0), &body = op.region(1);
      for (size_t i = 0; i < op.operands.size() && i < op.results.size(); ++i) {
        const Type& init = op.operand(i)->type;
        set(cond.args[i], init.layout, init.space);
        set(body.args[i], init.layout, init.space);
        set(op.results[i], init.layout, init.space);
      }
      block(cond);
      block(body);
      yields_to(body, op.results);
      return;
    }
    // if: the then branch decides, the else branch converts.
    for (auto& r : op.regions) block(*r);
    if (const Op* y = op.region(0).terminator())
      for (size_t i = 0; i < op.results.size() && i < y->operands.size(); ++i)
        set(op.results[i], y->operand(i)->type.layout, y->operand(i)->type.space);
    for (auto& r : op.regions) yields_to(*r, op.results);
  }

  void yields_to(Block& b, const std::vector<Value*>& want) {
    Op* y = b.terminator();
    if (!y) return;
    for (size_t i = 0; i < y->operands.size() && i < want.size(); ++i)
      require(*y, i, want[i]->type.layout, want[i]->type.space);
  }

  void block(Block& b) {
    for (size_t i = 0; i < b.ops.size(); ++i) {
      Op* cur = b.ops[i].get();
      if (cur->kind == OpKind::For || cur->kind == OpKind::If || cur->kind == OpKind::While) {
        control(*cur);
      } else {
        op(*cur);
      }
      // Converts inserted in front of `cur` moved it: step to it again.
      while (b.ops[i].get() != cur) ++i;
    }
  }
};

// Kernels whose tiles have storage of their own are not assigned layouts: why, or "".
std::string unassignable(Kernel& k) {
  std::string why;
  walk(*k.body, [&](Op& op) {
    if (!why.empty()) return;
    // (Struct buffers, their async copies and reads are lowered: the layout emitter prints
    // them as the planning emitter does, each thread its elements; pipes and warp roles not.)
    if (op.info().cls == OpClass::Struct && op.kind != OpKind::Alloc && op.kind != OpKind::AsyncCopy &&
        op.kind != OpKind::AsyncWait && op.kind != OpKind::BufferRead && op.kind != OpKind::BufferWrite)
      why = "Struct ops (" + std::string(op.name()) + ")";
    for (const Value* r : op.results)
      if (r->type.is_tile() && !r->type.layout.empty()) why = "layouts written by hand";
  });
  return why;
}

}  // namespace

void assign_layouts(Kernel& k, const GpuLoweringOptions& o, PassStats& stats) {
  if (!unassignable(k).empty()) {
    stats["assign-layouts.skipped"] += 1;
    return;
  }
  Assign assign(k, o);
  stats["assign-layouts.conversions"] += assign.run();
  for (const std::string& n : assign.notes()) stats.notes.push_back("assign-layouts: " + n);
}

}  // namespace tessera
