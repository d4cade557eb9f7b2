// Hopper (sm_90a) matmul loops: a `pipeline` loop whose body loads the two operands of one
// fragment-carried 16-bit dot from 2-D views becomes a warp-specialized TMA + mbarrier ring
// feeding wgmma.
//
//   threads:   BM / 64 consumer warpgroups (warps 0 .. BM/16-1; warpgroup w owns rows 64w..64w+63
//              of the BM x BN accumulator, BN / 2 f32 registers per thread) and one producer
//              warpgroup after them, of which one thread issues the copies.
//   ring:      S stages, each A [BM x BK] as BK / 64 TMA boxes of BM rows x 128 bytes and B
//              [BK x BN] as BN / 64 boxes of BK rows x 128 bytes, 128-byte swizzled (BN = 96:
//              three boxes of BK rows x 64 bytes, 64-byte swizzled), 1024-byte aligned; per
//              stage a "full" mbarrier (1 arrival + the stage's bytes) and an "empty" one (one
//              arrival per consumer warp).
//   producer:  for iteration i: wait empty[i % S] (parity of round i / S, minus one), expect the
//              stage's bytes on full[i % S], re-emit the body's index arithmetic for iteration i,
//              issue the TMA boxes.
//   consumers: for iteration i: wait full[i % S]; BK / 16 wgmma (A K-major, B MN-major, both
//              from shared memory); commit; wait until at most one group is in flight, so that
//              iteration i - 1's stage is no longer read, and release it.
//   after:     all groups complete; a CTA barrier (the fragments are then ordinary registers
//              and the ring's shared memory may be reused).
//   persistent: one CTA per SM loops over the programs (the ring's phases carry on) and, by
//              default, the producer and consumers run their own program loops: a consumer
//              packs each finished block into registers and stores it box by box (staged in
//              shared memory, TMA store) during the next program's first iterations
//              (emit_role_loops, knob epilogue_overlap).
//
// TMA zero-fills out-of-bounds boxes, which is load_tile's padding for pad = 0, so ragged M, N
// and K need no masks. The tensor maps are encoded at launch (CudaRuntime.cpp); a base or row
// stride TMA cannot describe makes the runtime use the mma.sync compilation instead.
#include <algorithm>

#include "cuda/EmitterInternal.h"
#include "passes/Passes.h"

namespace tessera::cudagen {

namespace {

constexpr int64_t kMaxSmem = 227 * 1024;

}  // namespace

Emitter::WgmmaPlan Emitter::plan_wgmma() const {
  WgmmaPlan w;
  if (tg_.sm != 90 || !tg_.arch_specific) return w;
  // The first pipelined loop that carries a dot accumulator.
  const Op* loop = nullptr;
  walk(const_cast<Block&>(*k_.body), [&](Op& o) {
    if (!loop && o.kind == OpKind::For && o.has_attr("pipeline") && o.operands.size() == 4 && carried_dot(o, 0))
      loop = &o;
  });
  if (!loop) return w;
  w.loop = loop;
  w.dot = carried_dot(*loop, 0);  // (named by the note when the plan fails)
  auto no = [&](const std::string& why) {
    w.why = why;
    return w;
  };
  if (!tg_.tma) return no("TMA is disabled for this compilation (operands a tensor map cannot describe)");
  const Op* dot = carried_dot(*loop, 0);
  Block& body = loop->region(0);
  const Value *a = dot->operand(0), *b = dot->operand(1), *r = dot->result();
  if (!shape_is_static(a->type.shape) || !shape_is_static(b->type.shape)) return no("the dot's tile shapes are not static");
  ScalarKind in = a->type.elem;
  if (!tensor_core_type(in) || b->type.elem != in || r->type.elem != ScalarKind::F32)
    return no("wgmma here takes bf16, f16 or f8 operands (both the same) into an f32 accumulator, not " +
              std::string(scalar_name(in)) + " x " + std::string(scalar_name(b->type.elem)) + " into " +
              std::string(scalar_name(r->type.elem)));
  const int eb = scalar_bytes(in);
  auto AS = static_shape(a->type.shape), BS = static_shape(b->type.shape);
  int64_t BM = AS[0], BK = AS[1], BN = BS[1];
  // Knob swap_operands = 1: a dot whose M tile is under wgmma's 64 rows runs as the swapped
  // product (WgmmaPlan::swapped); from here on BM and BN are the instruction's.
  const int64_t swap = knob("swap_operands", 0);
  if (swap != 0 && swap != 1)
    fail(*dot, "knob swap_operands = " + std::to_string(swap) +
                   ": 0 (the default: a dot's M tile on wgmma's 64-row blocks) or 1 (M tiles of 8, 16 or 32 on "
                   "wgmma's n, the product computed transposed)");
  const bool swapped = swap == 1 && BM < 64;
  if (swapped) {
    if (!wgmma_swap_m(BM))
      return no("BLOCK_M = " + std::to_string(BM) + " (the swapped product puts it on wgmma's n: 8, 16 or 32)");
    if (!wgmma_swap_n(BN))
      return no("BLOCK_N = " + std::to_string(BN) +
                " (the swapped product puts it on wgmma's 64-row blocks: 64, 128, 192 or 256)");
    std::swap(BM, BN);
  } else {
    if (wgmma_swap_m(BM) && wgmma_swap_n(BN))
      return no("BLOCK_M = " + std::to_string(BM) +
                " (wgmma needs 64, 128 or 192; swap_operands = 1 would put it on wgmma's n, the product computed "
                "transposed)");
    if (BM % 64 || BM > 192) return no("BLOCK_M = " + std::to_string(BM) + " (wgmma needs 64, 128 or 192)");
    // (96: B as 32-column boxes under 64-byte swizzle when MN-major; wgmma.cuh has no n160 or n224.)
    if ((BN % 64 && BN != 96) || BN > 256)
      return no("BLOCK_N = " + std::to_string(BN) + " (wgmma + TMA needs 64, 96, 128, 192 or 256)");
  }
  // Registers: ptxas compiles the kernel within 65536 / threads a thread (its launch bound;
  // setmaxnreg's larger share for the consumers, which plan_epilogue_overlap budgets, is granted
  // at run time): one consumer warpgroup per 64 rows and the producer's, so 192 x 256 (512
  // threads, 128 registers) cannot hold its 128 accumulators ("Insufficient registers").
  {
    const int64_t threads = (BM / 16 + 4) * 32, cap = std::min<int64_t>(255, 65536 / threads / 8 * 8);
    if (BN / 2 + 32 > cap)
      return no("BLOCK_M = " + std::to_string(BM) + ", BLOCK_N = " + std::to_string(BN) + ": " + std::to_string(BN / 2) +
                " accumulator registers per thread do not fit the " + std::to_string(cap) + " that " +
                std::to_string(threads) + " threads leave");
  }
  // Rows of the operand tiles are whole 128-byte swizzle atoms (one or two).
  if ((BK * eb) % 128 || BK * eb > 256)
    return no("BLOCK_K = " + std::to_string(BK) + " (wgmma + TMA needs " + std::to_string(128 / eb) + " or " +
              std::to_string(256 / eb) + " for " + std::string(scalar_name(in)) + ")");
  const Op* la = ring_operand_load(body, a, in);
  // B: a load of [K, N] (MN-major), or the transpose of a load of [N, K] (K-major).
  const Op* lb = nullptr;
  const Op* perm = nullptr;
  if (const Op* t = b->def; t && t->kind == OpKind::Permute && t->parent == &body && uses_in(body, b) == 1 &&
                            t->attr_ints("dims") == std::vector<int64_t>{1, 0}) {
    perm = t;
    lb = ring_operand_load(body, t->operand(0), in);
  } else {
    lb = ring_operand_load(body, b, in);
  }
  if (!la || !lb || la == lb)
    return no("the dot's operands are not a load_tile (pad 0) of a 2-D " + std::string(scalar_name(in)) +
              " view and a load (or the transpose of one) in the loop body");
  if (!perm && eb != 2)
    return no("wgmma reads f8 operands K-major only: give b as [N, K] and transpose its tile in the dot");
  if (swapped) {
    // The fragments hold C^T: only an epilogue that stores them (transposed) may read them, and
    // they must start as a splat (no tile to exchange into them).
    const Op* init = loop->operand(3)->def;
    if (frag_store_chain(*loop, 0).empty() || !init || init->kind != OpKind::Splat ||
        !init->operand(0)->type.is_scalar())
      return no("the swapped product needs an accumulator that starts as a splat and is only stored after the loop "
                "(through scalar arithmetic and a cast)");
  }
  for (const auto& o : body.ops)
    if (o.get() != dot && o.get() != la && o.get() != lb && o.get() != perm && o->kind != OpKind::Yield &&
        !pure_scalar(*o))
      return no("the loop body does more than index arithmetic, two loads and the dot");
  if (int64_t bufs = knob("epilogue_buffers", 2); bufs == 2 || bufs == 4)
    w.epilogue_buffers = static_cast<int>(bufs);
  else
    fail(*dot, "knob epilogue_buffers = " + std::to_string(bufs) + ": 2 (the default) or 4");
  w.BM = BM, w.BN = BN, w.BK = BK, w.eb = eb;  // (the plan stays !ok until the end)
  w.swapped = swapped;                          // (before staging_bytes: the swap has none)
  const int64_t stage = w.stage_bytes(), staging = w.staging_bytes();
  int64_t S = std::min<int64_t>(std::get<int64_t>(*loop->find_attr("pipeline")), 8);
  // A split-K compilation runs for grids too small to fill the GPU: each CTA streams its slice
  // of K with nothing else on its SM to hide the memory latency, so its ring is as deep as
  // shared memory allows (up to 8 stages) rather than what the annotation chose for full grids.
  // The ring_stages knob: a ring of that many stages (as many as fit, at least 2), for launches
  // whose few CTAs each stream a long slice of the weights (decode shapes) and want more bytes
  // in flight than the loop's annotation gives; 0 keeps the annotation. (Not the split-K
  // compilation's, which keeps its 8.)
  if (const int64_t rs = knob("ring_stages", 0); rs != 0) {
    if (rs < 2 || rs > 16) fail(*dot, "knob ring_stages = " + std::to_string(rs) + ": 0 (the loop's pipeline) or 2..16");
    S = rs;
  }
  if (tg_.split_k) S = 8;
  while (S > 2 && S * (stage + 16) + 1024 + staging > kMaxSmem) --S;
  if (S < 2 || S * (stage + 16) + 1024 + staging > kMaxSmem)
    return no("two stages of " + std::to_string(stage) + " bytes do not fit in shared memory");
  w.type = tensor_core_type(in);
  w.b_kmajor = perm != nullptr;
  // An MN-major B of N = 32 (mod 64) columns: 32-column boxes, 64-byte swizzle.
  if (!w.b_kmajor && !swapped && BN % 64) w.b_swizzle = 64;
  w.perm_b = perm;
  w.ok = true;
  w.loop = loop, w.dot = dot, w.load_a = la, w.load_b = lb;
  if (swapped) {
    w.load_a = lb, w.load_b = la;  // the weights on wgmma's A, the batch on its B
    w.a_kmajor = perm != nullptr, w.b_kmajor = true;
  }
  w.stages = static_cast<int>(S);
  w.bf16 = in == ScalarKind::BF16;  // (mma plan only)
  w.consumer_warps = static_cast<int>(BM / 16);
  MmaPlan& p = w.mma;
  p.ok = true;
  p.M = BM, p.N = BN, p.K = BK;
  p.wm = BM / 16, p.wn = 1, p.mt = 1, p.nt = BN / 8;
  p.lda = BK + 8, p.ldc = BN + 4;  // only for exchanges through shared memory (frags_from/to_tile)
  p.bf16 = w.bf16;
  return w;
}

bool Emitter::can_be_persistent() {
  if (!wg_.ok || !k_.grid) return false;
  const Op* y = k_.grid->terminator();
  if (!y || y->operands.size() > 2) return false;  // a 1-D or 2-D grid
  const Op* loop = wg_.loop;
  if (loop->parent != k_.body.get()) return false;
  const std::vector<const Op*>& chain = frag_store_chain(*loop, 0);
  if (chain.empty()) return false;
  const Op* init = loop->operand(3)->def;
  if (!init || init->kind != OpKind::Splat || !init->operand(0)->type.is_scalar()) return false;
  // Besides the chain: index arithmetic, and splats of scalars (the accumulator's start and
  // the chain's scalar operands, which the epilogue reads as scalars).
  const Op* store = chain.back();
  for (const auto& o : k_.body->ops) {
    const Op* p = o.get();
    if (p == loop || std::find(chain.begin(), chain.end(), p) != chain.end()) continue;
    if (pure_scalar(*p) || p->info().cls == OpClass::Index) continue;
    if (p->kind == OpKind::Splat && p->operand(0)->type.is_scalar()) continue;
    return false;
  }
  wg_.store = store;
  return true;
}

namespace {

// Whether the value varies with program_id axis 0 (through the index arithmetic that computes
// it; block arguments such as the loop's induction variable and kernel parameters do not).
bool varies_with_axis0(const Value* v) {
  const Op* d = v->def;
  if (!d) return false;
  if (d->kind == OpKind::ProgramId) return d->attr_int("axis") == 0;
  for (const Value* o : d->operands)
    if (varies_with_axis0(o)) return true;
  return false;
}

}  // namespace

int Emitter::plan_wgmma_cluster() {
  const int64_t c = knob("cluster_m", 1);
  if (c != 1 && c != 2)
    fail(*wg_.dot, "knob cluster_m = " + std::to_string(c) +
                       ": 1 (one CTA per program, the default) or 2 (CTA pairs along axis 0 sharing B tiles)");
  if (c == 1 || tg_.split_k) return 1;  // (the split-K compilation is never persistent)
  auto no = [&](const std::string& why) {
    notes_.push_back("dot at " + wg_.dot->loc.str() + ": cluster_m = 2 not taken: " + why);
    return 1;
  };
  if (!persistent_) return no("the kernel is not persistent");
  if (stream_k_asked()) return no("stream-K compilations run one CTA per program part");
  if (cluster_ > 1) return no("the kernel already runs each program on a cluster (cluster_size)");
  if (wg_.swapped) return no("the operands are swapped (B is the batch's few rows: nothing to share)");
  // The pair's two programs must copy the same B tile at every iteration, and run the same
  // number of iterations (each CTA's producer fills half of both rings).
  const Op& lb = *wg_.load_b;
  for (size_t i = 1; i < lb.operands.size(); ++i)
    if (varies_with_axis0(lb.operand(i))) return no("B's tile index depends on program_id axis 0");
  for (int i = 0; i < 3; ++i)
    if (varies_with_axis0(wg_.loop->operand(i))) return no("the loop's bounds depend on program_id axis 0");
  count("tma-multicast");
  notes_.push_back("dot at " + wg_.dot->loc.str() +
                   ": clusters of 2 CTAs take programs (2q, n) and (2q + 1, n); each copies half of every B tile "
                   "into both rings with TMA multicast");
  return 2;
}

// On by default wherever it can be had: on the H200 it measured +2% at 4096^3 and +3% at
// 4096x14336x4096, level at 8192^3 and 128x14336x4096 (bench/RESULTS.md, session 10).
void Emitter::plan_epilogue_overlap() {
  // (Any declared value is checked: a negative one is an error, not the default.)
  const bool asked = k_.find_constexpr("epilogue_overlap") != nullptr;
  const int64_t o = knob("epilogue_overlap", 1);
  if (o != 0 && o != 1)
    fail(*wg_.dot, "knob epilogue_overlap = " + std::to_string(o) +
                       ": 0 (the consumers store each block before the next program) or 1 (the default: during "
                       "the next program's first iterations)");
  if (o == 0 || tg_.split_k) return;  // (the split-K compilation is never persistent)
  // Why not, in a note when the knob asked for it (by default it is simply not taken).
  auto no = [&](const std::string& why) {
    if (asked) notes_.push_back("dot at " + wg_.dot->loc.str() + ": epilogue_overlap = 1 not taken: " + why);
  };
  if (!persistent_) return no("the kernel is not persistent");
  if (!wg_.tma_store)
    return no("the epilogue is not staged through shared memory and TMA stores (a 2-D bf16 or f16 output, "
              "an N tile of whole 64-column boxes, tma_store_epilogue = 1)");
  // Registers: one CTA per SM has 65536. With more than one consumer warpgroup ptxas caps
  // every thread at 65536 / threads (168 at 384); setmaxnreg gives the producer warpgroup's
  // share (it needs few: one thread issues copies) to the consumers, 232 each at 384 threads
  // (CUTLASS's split). One consumer warpgroup (256 threads) has 255 already.
  const int CW = wg_.consumer_warps;
  int prod = 0, cons = 0;
  if (CW > 4) prod = 40, cons = std::min(240, (65536 - 128 * prod) / (CW * 32) / 8 * 8);
  const int64_t acc = wg_.BN / 2, packed = wg_.BN / 4, room = cons ? cons : 255;
  // Besides the two blocks: descriptors, addresses, loop and program state (about 40).
  if (acc + packed + 40 > room)
    return no(std::to_string(acc) + " accumulator and " + std::to_string(packed) +
              " packed registers per consumer thread do not fit beside the loop's in " + std::to_string(room));
  wg_.overlap = true;
  wg_.producer_regs = prod, wg_.consumer_regs = cons;
  count("epilogue-overlap");
  notes_.push_back("dot at " + wg_.dot->loc.str() +
                   ": epilogue overlapped: the producer and consumer warpgroups run their own program loops" +
                   (cons ? " (setmaxnreg " + std::to_string(prod) + " / " + std::to_string(cons) + ")" : std::string()) +
                   "; the consumers store box c of each block during iteration c of the next program's loop");
}

void Emitter::emit_role_loops(const std::function<void()>& program_loop) {
  const WgmmaPlan& w = wg_;
  auto n = [](int64_t v) { return std::to_string(v); };
  const std::string CT = n(int64_t(w.consumer_warps) * 32);
  open("if (tsr_tid >= " + CT + ") {  // the producer warpgroup: one thread issues the copies");
  if (w.producer_regs) line("tsr::setmaxnreg_dec<" + n(w.producer_regs) + ">();");
  open("if (tsr_tid == " + CT + ") {");
  // Both loops emit the same ops: --stats and the notes count each op once, whichever side
  // (or both) emitted it.
  const std::map<std::string, int64_t> before = stats_;
  const size_t first_note = notes_.size();
  role_ = Role::Producer;
  program_loop();
  const std::map<std::string, int64_t> producer_stats = stats_;
  stats_ = before;
  close();
  --ind_;
  line("} else {  // the consumer warpgroups");
  ++ind_;
  if (w.consumer_regs) line("tsr::setmaxnreg_inc<" + n(w.consumer_regs) + ">();");
  // The previous program's block, packed, with its origin: stored during this program's loop.
  line("uint32_t pk_[" + n(w.BN / 4) + "];");
  line("int prow_ = 0, pcol_ = 0;");
  line("bool pend_ = false;");
  line("const uint32_t epi_buf_ = ring_ + " + n(w.ring_bytes()) + "u + uint32_t(tsr_tid / 128) * " +
       n(8192 * w.epilogue_buffers) + "u;");
  role_ = Role::Consumer;
  program_loop();
  open("if (pend_) {  // the last program's block");
  for (int64_t c = 0; c < w.BN / 64; ++c) line(pending_box(c));
  close();
  role_ = Role::Both;
  close();
  for (const auto& [stat, v] : producer_stats) stats_[stat] = std::max(stats_[stat], v);
  for (size_t i = notes_.size(); i-- > first_note;)
    if (std::find(notes_.begin() + static_cast<std::ptrdiff_t>(first_note), notes_.begin() + static_cast<std::ptrdiff_t>(i),
                  notes_[i]) != notes_.begin() + static_cast<std::ptrdiff_t>(i))
      notes_.erase(notes_.begin() + static_cast<std::ptrdiff_t>(i));
}

std::string Emitter::pending_box(int64_t c) const {
  const WgmmaPlan& w = wg_;
  auto n = [](int64_t v) { return std::to_string(v); };
  return "tsr::epilogue_box_sw128<" + n(c) + ", " + n(w.epilogue_in_flight()) + ">(&" + w.tma_c + ", epi_buf_ + " +
         n((c % w.epilogue_buffers) * 8192) + "u, pk_, pcol_, prow_);";
}

void Emitter::emit_wgmma_setup() {
  const WgmmaPlan& w = wg_;
  const int S = w.stages, CW = w.consumer_warps;
  const int64_t stage = w.stage_bytes();
  auto n = [](int64_t v) { return std::to_string(v); };
  // The ring starts at the first 1024-byte boundary of the dynamic shared memory; the epilogue's
  // staging buffers follow it, then the barriers.
  smem_ptr("unsigned char", 0, 1024 + S * stage + w.staging_bytes() + 16 * S);
  line("const uint32_t ring_ = (tsr::smem_u32(tsr_smem) + 1023u) & ~1023u;");
  line("const uint32_t full_ = ring_ + " + n(S * stage + w.staging_bytes()) + "u, empty_ = full_ + " + n(8 * S) + "u;");
  // Iterations issued (producer) and consumed (consumers) so far: stage and phase of the next.
  line("int64_t ring_it_ = 0;");
  // Earlier ordinary shared-memory accesses (exchanges before the loop) come before the TMA's.
  line("tsr::fence_proxy_async();");
  open("if (tsr_tid == 0) {");
  // The descriptors travel to the TMA unit while the barriers are set up.
  for (const std::string* m : {&w.tma_a, &w.tma_b, &w.tma_c})
    if (!m->empty()) line("tsr::prefetch_tensormap(&" + *m + ");");
  open("for (int s_ = 0; s_ < " + n(S) + "; ++s_) {");
  line("tsr::mbar_init(full_ + 8u * s_, 1);");
  // A stage is free for a new copy once every consumer warp that reads it (those of both CTAs
  // of a multicast pair) has released it.
  line("tsr::mbar_init(empty_ + 8u * s_, " + n(CW * w.cluster_m) + ");");
  close();
  line("tsr::mbar_init_fence();");
  close();
  // The pair's barriers are initialised before either CTA multicasts into the other or arrives
  // on its barriers.
  if (w.cluster_m > 1) line("tsr::cluster_sync();");
  else barrier();
}

void Emitter::emit_wgmma_loop(const Op& f, const std::string& frag) {
  const WgmmaPlan& w = wg_;
  const int S = w.stages, CW = w.consumer_warps;
  auto n = [](int64_t v) { return std::to_string(v); };
  std::string lo = nm(f.operand(0)), hi = nm(f.operand(1)), step = nm(f.operand(2));
  count("dot.wgmma_tma");
  count("warp-specialized");
  count("pipeline-stages", S);
  uses_mma_ = true;
  const std::string kk = w.eb == 2 ? "16" : "32";
  if (w.swapped) count("wgmma-swapped-operands");
  notes_.push_back("dot at " + w.dot->loc.str() + ": wgmma m64n" + n(w.BN) + "k" + kk + " " + w.type +
                   (w.swapped ? std::string(" on swapped operands (C^T = B^T A^T: the dot's ") + n(w.BM) +
                                    " columns on wgmma's rows, its " + n(w.BN) + " rows on n; A " +
                                    (w.a_kmajor ? "K" : "MN") + "-major, B K-major)"
                              : std::string(" (B ") + (w.b_kmajor ? "K" : "MN") + "-major)") +
                   " fed by a " + n(S) + "-stage TMA + mbarrier ring; " + n(CW / 4) +
                   " consumer warpgroup(s) and one producer warpgroup" +
                   (w.eb == 1 ? "; fp8 wgmma adds into the f32 accumulators with the tensor cores' reduced internal "
                                "precision (like cuBLASLt's fast accumulation), not an exact f32 sum"
                              : ""));
  open("{");
  if (!persistent_) emit_wgmma_setup();
  warp_coords(*this, w.mma);
  std::string trip = fresh("trip");
  std::string all = split_k_ || stream_k_ ? fresh("trip_all") : trip;
  line("const int64_t " + all + " = " + step + " > 0 && int64_t(" + hi + ") > int64_t(" + lo + ") ? (int64_t(" + hi +
       ") - int64_t(" + lo + ") + " + step + " - 1) / " + step + " : 0;");
  // Split-K: CTA z of the program runs iterations [first_, first_ + trip) of the loop's `all`.
  std::string first = "0";
  if (split_k_) {
    line("const int64_t chunk_ = (" + all + " + int64_t(gridDim.z) - 1) / int64_t(gridDim.z), first_ = int64_t(blockIdx.z) * chunk_;");
    line("const int64_t " + trip + " = first_ < " + all + " ? (" + all + " - first_ < chunk_ ? " + all +
         " - first_ : chunk_) : 0;");
    first = "first_";
  } else if (stream_k_) {
    // Units [tsr_pb, tsr_pe) of the tile's tsr_G: the same rounding in every CTA, so that the
    // parts of a tile cover its iterations exactly once.
    line("const int64_t first_ = " + all + " * tsr_pb / tsr_G, " + trip + " = " + all + " * tsr_pe / tsr_G - first_;");
    first = "first_";
  }
  // Producer: one thread of the last warpgroup; consumers: the warpgroups before it. Under
  // epilogue_overlap each runs in its own branch (emit_role_loops), which decides the role.
  const bool both = role_ == Role::Both;
  if (both) {
    open("if (warp_ >= " + n(CW) + ") {");
    open("if (tsr_tid == " + n(CW * 32) + ") {");
  }
  if (role_ != Role::Consumer) emit_wgmma_producer(f, trip, first);
  if (both) {
    close();
    --ind_;
    line("} else {");
    ++ind_;
  }
  if (role_ != Role::Producer) emit_wgmma_consumer(frag, trip);
  if (both) close();
  line("ring_it_ += " + trip + ";");
  // A persistent kernel's epilogue needs no shared memory, so the producer may run ahead into
  // the next program; otherwise the ring's memory may be reused after the loop.
  if (!persistent_) barrier();
  if (split_k_) emit_split_k_fixup(frag);
  if (stream_k_) emit_stream_k_fixup(frag);
  close();
}

// The ring's stage and phase of a loop's iterations, counted as they go: `ring_base` (before
// the loop) splits the count of earlier iterations once, `ring_slot` (at the top of iteration
// i_) takes the stage s_ and phase ph_ and steps them on, wrapping at S; with `last`, ps_ is the
// previous iteration's stage and ls_ (after the loop) the last one's. Computing them from the
// count in every iteration instead (it % S and it / S, even in 32 bits) ran rings of 5, 6 or 7
// stages 10-20% slower than rings of 4 or 8 on the H200, 13 at 64 x 64 x 64 too
// (bench/RESULTS.md, session 29).
static std::string ring_base(int S, bool last) {
  const std::string n = std::to_string(S);
  return "uint32_t cs_ = uint32_t(ring_it_ % " + n + "), cp_ = uint32_t(ring_it_ / " + n + ") & 1u" +
         (last ? ", ls_ = 0;" : ";");
}
static std::string ring_slot(int S, bool last) {
  return std::string("const uint32_t s_ = cs_, ph_ = cp_") + (last ? ", ps_ = ls_; ls_ = s_;" : ";") + " if (++cs_ == " +
         std::to_string(S) + "u) cs_ = 0, cp_ ^= 1u;";
}

void Emitter::emit_wgmma_producer(const Op& f, const std::string& trip, const std::string& first) {
  const WgmmaPlan& w = wg_;
  const Block& body = f.region(0);
  const int S = w.stages;
  const int64_t a_bytes = w.BM * w.BK * w.eb, stage = w.stage_bytes();
  const int64_t atom = 128 / w.eb;  // elements in one 128-byte swizzled row
  auto n = [](int64_t v) { return std::to_string(v); };
  std::string lo = nm(f.operand(0)), step = nm(f.operand(2));
  // The L2 policy of the A and B copies. A tile that at most two programs read (B's when the
  // grid has at most two rows of tiles, A's when at most two columns) is copied with the
  // evict_first hint: it then replaces lines of its own kind rather than lines that other
  // programs will read again or dirty lines that must first be written back (bench/RESULTS.md,
  // session 8: +10% at 16x4096x4096 and 128x14336x4096 when L2 starts full of another
  // kernel's writes, as under do_bench). Other tiles take the unhinted copy: with an explicit
  // evict_normal policy for them a gpu-check measured every wgmma tile 8-20% slower (not A/B
  // tested in one run; bench/RESULTS.md, session 8). Decided at run time from the dims.
  // The knobs tma_hint_a / tma_hint_b fix it: 1 evict_first, 2 evict_last, 3 never a hint
  // (0 or none: the rule above; any other value is an error).
  auto tiles = [&](const std::string& extent, int64_t block) {
    return "(" + extent + " + " + n(block - 1) + ") / " + n(block);
  };
  const Op &la = *w.load_a, &lb = *w.load_b;
  const ViewInfo &va = view_of(la, la.operand(0)), &vb = view_of(lb, lb.operand(0));
  // Per operand: "" (plain copies), a policy variable (always hinted), or "?name" (hinted with
  // evict_first when the run-time flag `name` holds).
  bool need_first = false, need_last = false;
  auto hint_of = [&](const char* operand, const std::string& readers) {
    int64_t h = knob(std::string("tma_hint_") + operand);
    if (h < 0 || h > 3)
      fail(*w.dot, "knob tma_hint_" + std::string(operand) + " = " + std::to_string(h) +
                       ": 0 (automatic), 1 (evict_first), 2 (evict_last) or 3 (no hint)");
    if (h == 3) return std::string();
    if (h == 1 || h == 2) {
      (h == 1 ? need_first : need_last) = true;
      return std::string(h == 1 ? "pol_first_" : "pol_last_");
    }
    std::string flag = std::string("stream_") + operand + "_";
    line("const bool " + flag + " = " + readers + " <= 2;");
    count("tma-l2-policy-auto");
    need_first = true;
    return "?" + flag;
  };
  // A's tiles are read by the programs along B's M or N extent, and the other way round. (The
  // knobs name the dot's operands: under the swap, wgmma's A is the dot's b.)
  const std::string hint_a = hint_of(w.swapped ? "b" : "a", tiles(w.b_kmajor ? vb.dims[0] : vb.dims[1], w.BN));
  const std::string hint_b = hint_of(w.swapped ? "a" : "b", tiles(w.a_kmajor ? va.dims[0] : va.dims[1], w.BM));
  if (need_first) line("const uint64_t pol_first_ = tsr::l2_policy_evict_first();");
  if (need_last) line("const uint64_t pol_last_ = tsr::l2_policy_evict_last();");
  // One box copy: dst, tensor map, c0, c1 (as C++ expressions) under the operand's hint.
  // `multicast`: into both CTAs of the pair (mask 0b11; cluster_m = 2).
  auto copy = [&](const std::string& hint, const std::string& args, bool multicast = false) {
    const std::string fn = multicast ? "tsr::tma_load_2d_multicast" : "tsr::tma_load_2d";
    const std::string bar = multicast ? ", bar_, 3" : ", bar_";
    std::string plain = fn + "(" + args + bar + ");";
    if (hint.empty()) return line(plain);
    if (hint[0] != '?') return line(fn + "_hint(" + args + bar + ", " + hint + ");");
    line("if (" + hint.substr(1) + ") " + fn + "_hint(" + args + bar + ", pol_first_); else " + plain);
  };
  // cluster_m = 2: this CTA copies rows [rank * h, rank * h + h) of every B box (h = half the
  // box's rows; the tensor map's box is that high) into both rings.
  const bool mc = w.cluster_m > 1;
  const int64_t b_rows = w.b_kmajor ? w.BN : w.BK;
  if (mc) line("const uint32_t mc_rank_ = tsr::cluster_rank();");
  auto b_half = [&](const std::string& row) {
    return mc ? std::make_pair(" + mc_rank_ * " + n(b_rows / 2 * w.b_swizzle) + "u",
                               "int(" + row + " + int64_t(mc_rank_) * " + n(b_rows / 2) + ")")
              : std::make_pair(std::string(), "int(" + row + ")");
  };
  line(ring_base(S, false));
  open("for (int64_t i_ = 0; i_ < " + trip + "; ++i_) {");
  line(ring_slot(S, false));
  line("tsr::mbar_wait(empty_ + 8u * s_, ph_ ^ 1u);");
  line("tsr::mbar_arrive_expect_tx(full_ + 8u * s_, " + n(stage) + "u);");
  std::string ivn = fresh("ivp");
  line("const int32_t " + ivn + " = int32_t(int64_t(" + lo + ") + (" + first + " + i_) * int64_t(" + step + "));");
  name_[body.args[0]] = ivn;
  for (const auto& o : body.ops)
    if (o.get() != w.dot && o.get() != w.load_a && o.get() != w.load_b && o.get() != w.perm_b && o->kind != OpKind::Yield)
      emit_op(*o);
  line("const uint32_t sa_ = ring_ + s_ * " + n(stage) + "u, bar_ = full_ + 8u * s_;");
  // A K-major: BK / atom boxes of BM rows x 128 bytes; MN-major (the swapped product's weights
  // from a [K, N] view): BM / 64 boxes of BK rows x 128 bytes. B MN-major: BN / 64 boxes of BK
  // rows x 128 bytes (BN / 32 boxes of BK rows x 64 bytes under b_swizzle = 64); B K-major
  // ([N, K] view, or the swapped product's batch): BK / atom boxes of BN rows x 128 bytes.
  // One operand's boxes: `l` loads tile (op 1, op 2) of its view, `mn` is the operand's M or N
  // extent, `off` its place in the stage, `half` B's multicast half (cluster_m = 2).
  auto copy_operand = [&](const Op& l, bool kmajor, int64_t mn, int64_t off, const std::string& hint,
                          const std::string& map, bool half) {
    const std::string i0 = nm(l.operand(1)), i1 = nm(l.operand(2));
    if (kmajor) {
      const auto [moff, row] = half ? b_half("int64_t(" + i0 + ") * " + n(mn))
                                    : std::make_pair(std::string(), "int(int64_t(" + i0 + ") * " + n(mn) + ")");
      std::string col = "int64_t(" + i1 + ") * " + n(w.BK);
      for (int64_t c = 0; c < w.BK / atom; ++c)
        copy(hint, "sa_ + " + n(off + c * mn * 128) + "u" + moff + ", &" + map + ", int(" + col + " + " + n(atom * c) +
                       "), " + row, half && mc);
    } else {
      const auto [moff, row] = half ? b_half("int64_t(" + i0 + ") * " + n(w.BK))
                                    : std::make_pair(std::string(), "int(int64_t(" + i0 + ") * " + n(w.BK) + ")");
      // (Boxes of `sw` bytes a row: 128, or 64 for B under b_swizzle = 64.)
      const int64_t sw = &l == w.load_b ? w.b_swizzle : 128, cols = sw / w.eb;
      std::string col = "int64_t(" + i1 + ") * " + n(mn);
      for (int64_t j = 0; j < mn / cols; ++j)
        copy(hint, "sa_ + " + n(off + j * w.BK * sw) + "u" + moff + ", &" + map + ", int(" + col + " + " + n(cols * j) +
                       "), " + row, half && mc);
    }
  };
  copy_operand(la, w.a_kmajor, w.BM, 0, hint_a, w.tma_a, false);
  copy_operand(lb, w.b_kmajor, w.BN, a_bytes, hint_b, w.tma_b, true);
  close();
}

void Emitter::emit_wgmma_consumer(const std::string& frag, const std::string& trip) {
  const WgmmaPlan& w = wg_;
  const int S = w.stages;
  const int64_t a_bytes = w.BM * w.BK * w.eb, stage = w.stage_bytes();
  const int64_t ksteps = w.BK * w.eb / 32;  // wgmma instructions per stage (32 bytes of K each)
  const bool mc = w.cluster_m > 1;
  auto n = [](int64_t v) { return std::to_string(v); };
  const std::string kk = w.eb == 2 ? "16" : "32";
  line("const uint32_t wg_ = uint32_t(warp_) / 4u;");
  if (mc) line("const uint32_t mc_peer_ = tsr::cluster_rank() ^ 1u;");
  line("tsr::wgmma_fence_regs(" + frag + ");");
  line(ring_base(S, true));
  open("for (int64_t i_ = 0; i_ < " + trip + "; ++i_) {");
  line(ring_slot(S, true));
  line("tsr::mbar_wait(full_ + 8u * s_, ph_);");
  // Warpgroup wg_'s 64 rows of A: rows 64 wg_.. of every K-major box, or MN-major box wg_.
  line("const uint32_t sa_ = ring_ + s_ * " + n(stage) + "u + wg_ * " + n(w.a_kmajor ? 64 * 128 : w.BK * 128) +
       "u, sb_ = ring_ + s_ * " + n(stage) + "u + " + n(a_bytes) + "u;");
  line("tsr::wgmma_fence();");
  std::string fn = "tsr::wgmma_m64n" + n(w.BN) + "k" + kk + "_" + w.type +
                   (w.eb == 2 ? std::string(w.b_kmajor ? "<0" : "<1") + (w.a_kmajor ? ">" : ", 1>") : "");
  for (int64_t k = 0; k < ksteps; ++k) {
    // K-major tiles (A, and B from an [N, K] view): 8-row groups 1024 bytes apart; a k-step is
    // 32 bytes inside the swizzled 128-byte row (the hardware applies the swizzle to the final
    // address), the next atom after 4 steps. MN-major B: 64-column boxes BK * 128 bytes apart
    // (leading offset), 8-row groups 1024 bytes apart; a k16 step is 16 rows.
    // (MN-major A, the swapped product's weights: one 64-column box per warpgroup, a k16 step
    // 16 of its rows, as for MN-major B.)
    std::string da = w.a_kmajor
                         ? "tsr::wgmma_desc_sw128(sa_ + " + n((k / 4) * w.BM * 128 + (k % 4) * 32) + "u, 16u, 1024u)"
                         : "tsr::wgmma_desc_sw128(sa_ + " + n(k * 16 * 128) + "u, " + n(w.BK * 128) + "u, 1024u)";
    // (MN-major B under 64-byte swizzle: 32-column boxes BK * 64 bytes apart, 8-row groups of
    // 512 bytes, a k16 step 1024 bytes: the 128-byte form with every size halved.)
    const int64_t sw = w.b_swizzle;
    std::string db = w.b_kmajor
                         ? "tsr::wgmma_desc_sw128(sb_ + " + n((k / 4) * w.BN * 128 + (k % 4) * 32) + "u, 16u, 1024u)"
                         : "tsr::wgmma_desc_sw" + n(sw) + "(sb_ + " + n(k * 16 * sw) + "u, " + n(w.BK * sw) + "u, " +
                               n(8 * sw) + "u)";
    line(fn + "(" + frag + ", " + da + ", " + db + ");");
  }
  line("tsr::wgmma_commit();");
  if (w.overlap) {
    // The previous program's block leaves box by box while this program's first groups run.
    open("if (pend_) {");
    for (int64_t c = 0; c < w.BN / 64; ++c) line(std::string(c ? "else " : "") + "if (i_ == " + n(c) + ") " + pending_box(c));
    close();
  }
  // At most one group in flight: the previous iteration's stage is no longer read.
  line("tsr::wgmma_wait<1>();");
  // (cluster_m = 2: to both CTAs' producers, since each fills half of both rings.)
  auto release = [&](const std::string& bar) {
    return mc ? "{ tsr::mbar_arrive(" + bar + "); tsr::mbar_arrive_cluster(" + bar + ", mc_peer_); }"
              : "tsr::mbar_arrive(" + bar + ");";
  };
  line("if (i_ > 0 && lane_ == 0) " + release("empty_ + 8u * ps_"));
  close();
  line("tsr::wgmma_wait<0>();");
  line("tsr::wgmma_fence_regs(" + frag + ");");
  // The last stage is released too: a persistent kernel's producer reuses it for the next program.
  line("if (" + trip + " > 0 && lane_ == 0) " +
       release("empty_ + 8u * ls_"));
  if (w.overlap) {
    open("if (pend_) {  // boxes the loop had too few iterations for");
    for (int64_t c = 0; c < w.BN / 64; ++c) line("if (" + trip + " <= " + n(c) + ") " + pending_box(c));
    close();
  }
}

int64_t Emitter::stream_k_batch() const {
  const WgmmaPlan& w = wg_;
  const int64_t nt = w.BN / 8;
  // Per consumer thread: setmaxnreg's share under epilogue_overlap, else ptxas's cap for the
  // block (255 for one consumer warpgroup and the producer's, 65536 / threads beyond). The
  // packed pending block is not live here (its boxes left during the loop). ptxas (13.0)
  // spills nothing at 128 x 256 with 16 columns a batch under overlap.
  const int64_t threads = int64_t(w.consumer_warps + 4) * 32;
  const int64_t cap = w.consumer_regs ? w.consumer_regs : std::min<int64_t>(255, 65536 / threads / 8 * 8);
  const int64_t spare = cap - w.BN / 2 - 40;
  int64_t b = 1;
  while (2 * b <= std::min<int64_t>(nt, 16) && nt % (2 * b) == 0 && 4 * 2 * b <= spare) b *= 2;
  return b;
}

void Emitter::emit_stream_k_fixup(const std::string& frag) {
  const WgmmaPlan& w = wg_;
  // Under epilogue_overlap the producer's own program loop has no fragments: it goes on to the
  // next item's copies (a part that leaves its sum has no store to skip: only the consumers store).
  if (role_ == Role::Producer) return;
  auto n = [](int64_t v) { return std::to_string(v); };
  const std::string CW = n(w.consumer_warps), CT = n(int64_t(w.consumer_warps) * 32);
  // Workspace (CudaKernelInfo::stream_k): a flag per CTA, then a slot per CTA. A CTA leaves a
  // slot at most once per launch: only its part that ends inside a tile (the last of its units,
  // which it runs first) does.
  line("unsigned* const skflag_ = reinterpret_cast<unsigned*>(tsr_ws);");
  line("float* const skslot_ = reinterpret_cast<float*>(tsr_ws + (tsr_G * 4 + 255) / 256 * 256);");
  line("const int64_t skslot_n_ = " + n(int64_t(w.consumer_warps) * 32 * w.BN / 2) + ";");
  // Warps whose rows all lie past the output's end neither leave nor add their part of a slot
  // (a decode shape's 1 or 16 rows of a 64-row tile: a quarter of the traffic).
  line("const bool skmine_ = " + fixup_rows_in_output() + ";");
  open("if (tsr_pe < tsr_G) {");
  line("// stream-K, a part that ends inside the tile: leave the partial sum for the CTA that ends it.");
  open("if (warp_ < " + CW + ") {");
  line("if (skmine_) tsr::frags_to_slot(" + frag + ", skslot_ + int64_t(blockIdx.x) * skslot_n_, tsr_tid, " + CT + ");");
  line("__threadfence();");
  line("tsr::named_barrier(8u, " + CT + "u);");
  line("if (tsr_tid == 0) tsr::flag_release(skflag_ + blockIdx.x);");
  close();
  // The pending block (epilogue_overlap) left during this part's loop; nothing is pending now.
  if (w.overlap) line("pend_ = false;");
  line("continue;");
  close();
  open("if (tsr_pb > 0) {");
  line("// stream-K, the tile's last part: add the earlier parts, CTA by CTA (K order). They ran");
  line("// first in their CTAs, so they are (nearly) always there already.");
  open("if (warp_ < " + CW + ") {");
  open("for (int32_t c_ = tsr_tu / tsr_L; c_ < int32_t(blockIdx.x); ++c_) {");
  line("if (tsr_tid == 0) tsr::flag_poll(skflag_ + c_);");
  line("tsr::named_barrier(8u, " + CT + "u);");
  line("(void)tsr::flag_acquire(skflag_ + c_);  // set: orders this thread's slot reads after it");
  line("if (skmine_)");
  line("  tsr::frags_add_slot_batched<" + n(stream_k_batch()) + ">(" + frag + ", skslot_ + int64_t(c_) * skslot_n_, tsr_tid, " +
       CT + ");");
  close();
  // Every thread has seen the flags: zero them for the next launch (stream order).
  line("tsr::named_barrier(8u, " + CT + "u);");
  line("if (tsr_tid == 0)");
  line("  for (int32_t c_ = tsr_tu / tsr_L; c_ < int32_t(blockIdx.x); ++c_) skflag_[c_] = 0u;");
  close();
  close();
}

std::string Emitter::fixup_rows_in_output() const {
  const WgmmaPlan& w = wg_;
  // Rows past the output's end need not travel: a warp whose 16 rows all lie beyond it skips
  // its slot (the epilogue masks those rows anyway). Known only when the store's row index is
  // computed before the loop; otherwise every consumer warp takes part.
  std::string mine = "warp_ < " + std::to_string(w.consumer_warps);
  const Op& st = *w.store;
  // (Swapped: the fragments' rows are the output's columns.)
  const Value* index = st.operand(w.swapped ? 3 : 2);
  const Op* rdef = index->def;
  bool before = rdef == nullptr;
  for (const auto& o : k_.body->ops) {
    if (o.get() == w.loop) break;
    before |= o.get() == rdef;
  }
  if (before)
    mine += " && int64_t(" + nm(index) + ") * " + std::to_string(w.BM) + " + m0_ < int64_t(" +
            view_of(st, st.operand(0)).dims[w.swapped ? 1 : 0] + ")";
  return mine;
}

void Emitter::emit_split_k_fixup(const std::string& frag) {
  const WgmmaPlan& w = wg_;
  auto n = [](int64_t v) { return std::to_string(v); };
  const int64_t CT = int64_t(w.consumer_warps) * 32;
  const std::string mine = fixup_rows_in_output();
  // Columns loaded per batch: as many as registers allow without spills (ptxas, sm_90a: one
  // consumer warpgroup has 255 registers per thread beside BN / 2 accumulators; two or three
  // share 168 or 128).
  const int64_t nt = w.BN / 8;
  // A batch divides the block's BN / 8 column groups (BN = 192: 24, so 8 rather than 16).
  int64_t batch = std::min<int64_t>(nt, w.consumer_warps == 4 ? 16 : w.BN >= 256 ? 2 : 4);
  while (nt % batch != 0) batch /= 2;
  open("if (gridDim.z > 1) {");
  line("const bool mine_ = " + mine + ";");
  // The runtime launches the split's CTAs as one cluster where it can (CudaKernelInfo::
  // split_cluster): the partial sums then meet in the idle rings' shared memory.
  if (cluster_fixup_fits()) {
    open("if (tsr::cluster_ctas() == gridDim.z) {");
    line("// split-K in a cluster: CTAs 1.. leave their slice of the sum in their ring; CTA 0 adds them");
    line("// over distributed shared memory in split order and runs the epilogue.");
    line("if (blockIdx.z != 0 && mine_) tsr::frags_to_smem(" + frag + ", ring_, tsr_tid, " + n(CT) + ");");
    line("tsr::cluster_sync();");
    line("if (blockIdx.z == 0 && mine_) tsr::frags_add_cluster<" + n(batch) + ">(" + frag + ", ring_, gridDim.z, tsr_tid, " +
         n(CT) + ");");
    line("tsr::cluster_sync();  // (no CTA leaves while CTA 0 may still read its shared memory)");
    line("if (blockIdx.z != 0) return;");
    close();
    open("else {");
  } else {
    open("{");
  }
  line("// split-K: this CTA's slice of the sum goes to its slot of the workspace; the last of the");
  line("// program's gridDim.z CTAs to arrive adds every slot in split order and runs the epilogue.");
  line("__shared__ int tsr_last_;");
  line("const int64_t prog_ = int64_t(blockIdx.y) * gridDim.x + blockIdx.x, progs_ = int64_t(gridDim.x) * gridDim.y;");
  line("unsigned* const cnt_ = reinterpret_cast<unsigned*>(tsr_ws);");
  line("float* const slots_ = reinterpret_cast<float*>(tsr_ws + (progs_ * 4 + 255) / 256 * 256);");
  line("const int64_t slot_ = " + n(w.partial_sum_bytes() / 4) + ";");
  line("if (mine_) tsr::frags_to_slot(" + frag + ", slots_ + (int64_t(blockIdx.z) * progs_ + prog_) * slot_, tsr_tid, " +
       n(CT) + ");");
  line("__threadfence();");
  barrier();
  line("if (tsr_tid == 0) tsr_last_ = atomicAdd(cnt_ + prog_, 1u) == gridDim.z - 1u;");
  barrier();
  line("if (!tsr_last_) return;");
  line("__threadfence();");
  // Zero again for the next launch, which stream order places after this one.
  line("if (tsr_tid == 0) cnt_[prog_] = 0u;");
  line("if (mine_) tsr::frags_sum_slots<" + n(batch) + ">(" + frag + ", slots_ + prog_ * slot_, progs_ * slot_, int(gridDim.z), tsr_tid, " +
       n(CT) + ");");
  close();
  close();
}

bool Emitter::cluster_fixup_fits() const {
  // One CTA's fragments (CudaKernelInfo::split_slot_bytes) must fit in its ring and the epilogue
  // staging after it, which the split compilation (never persistent) does not use.
  return wg_.partial_sum_bytes() <= wg_.ring_bytes() + wg_.staging_bytes();
}

bool Emitter::accumulator_starts_at_zero() const {
  // (a split or stream-K part's partial sum would otherwise count the start once per part)
  return starts_as_zero_splat(wg_.loop->operand(3));
}

void Emitter::emit_wgmma_tma_store(const Op& st, const FragTile& ft) {
  const WgmmaPlan& w = wg_;
  auto n = [](int64_t v) { return std::to_string(v); };
  ScalarKind vt = st.operand(0)->type.elem;
  count("tma-store-epilogues");
  if (w.overlap) {
    // Packed now; box c leaves during iteration c of the next program's loop (or after it).
    open("{");
    line("auto cv_ = [=](float x_) -> uint32_t { return uint32_t(" + frag_store_conv(ft, vt) + "); };");
    line("#pragma unroll");
    open("for (int j_ = 0; j_ < " + n(w.BN / 8) + "; ++j_) {");
    line("pk_[2 * j_] = cv_(" + ft.frag + "[0][j_][0]) | (cv_(" + ft.frag + "[0][j_][1]) << 16);");
    line("pk_[2 * j_ + 1] = cv_(" + ft.frag + "[0][j_][2]) | (cv_(" + ft.frag + "[0][j_][3]) << 16);");
    close();
    line("prow_ = int(int64_t(" + nm(st.operand(2)) + ") * " + n(w.BM) + ") + (tsr_tid / 128) * 64;");
    line("pcol_ = int(int64_t(" + nm(st.operand(3)) + ") * " + n(w.BN) + ");");
    line("pend_ = true;");
    close();
    return;
  }
  open("{");
  warp_coords(*this, ft.p);
  open("if (warp_ < " + n(w.consumer_warps) + ") {");
  line("const uint32_t wg_ = uint32_t(warp_) / 4u, v_ = uint32_t(warp_) % 4u;");
  const int64_t bufs = w.epilogue_buffers, boxes = w.BN / 64, in_flight = w.epilogue_in_flight();
  line("const uint32_t stg_ = ring_ + " + n(w.ring_bytes()) + "u + wg_ * " + n(8192 * bufs) + "u;");
  line("const bool lead_ = tsr_tid % 128 == 0;");
  line("const int row0_ = int(int64_t(" + nm(st.operand(2)) + ") * " + n(w.BM) + ") + int(wg_) * 64;");
  line("const int col0_ = int(int64_t(" + nm(st.operand(3)) + ") * " + n(w.BN) + ");");
  line("#pragma unroll");
  open("for (int c_ = 0; c_ < " + n(boxes) + "; ++c_) {");
  // The buffer this box uses is free once at most `in_flight` stores still read (see above).
  line("if (lead_) tsr::bulk_wait_read<" + n(in_flight) + ">();");
  line("tsr::named_barrier(1u + wg_, 128u);");
  line("const uint32_t buf_ = stg_ + uint32_t(c_ & " + n(bufs - 1) + ") * 8192u;");
  line("#pragma unroll");
  open("for (int j_ = 0; j_ < 8; ++j_) {");
  line("#pragma unroll");
  open("for (int h_ = 0; h_ < 2; ++h_) {");
  // Row r of the box is 128 bytes; its 16-byte chunk q lives at chunk q ^ (r % 8) (the 128-byte
  // swizzle the tensor map names). Columns 8j + 2t, +1 are bytes 16j + 4t .. +3.
  line("const uint32_t r_ = 16u * v_ + uint32_t(g_) + 8u * uint32_t(h_);");
  line("auto cv_ = [=](float x_) -> uint32_t { return uint32_t(" + frag_store_conv(ft, vt) + "); };");
  line("const uint32_t packed_ = cv_(" + ft.frag + "[0][8 * c_ + j_][2 * h_]) | (cv_(" + ft.frag +
       "[0][8 * c_ + j_][2 * h_ + 1]) << 16);");
  line("tsr::st_shared_u32(buf_ + r_ * 128u + ((uint32_t(j_) ^ (r_ & 7u)) << 4) + 4u * uint32_t(t_), packed_);");
  close();
  close();
  // The copy engine reads what ordinary stores wrote: each writer fences, then the barrier.
  line("tsr::fence_proxy_async();");
  line("tsr::named_barrier(1u + wg_, 128u);");
  open("if (lead_) {");
  line("tsr::tma_store_2d(&" + w.tma_c + ", buf_, col0_ + 64 * c_, row0_);");
  line("tsr::bulk_commit();");
  close();
  close();
  close();
  close();
}

}  // namespace tessera::cudagen
