// Software pipelining of tensor-core matmul loops: the loads that feed a fragment-carried mma dot
// in a `pipeline` loop become 16-byte cp.async copies into a ring of S shared-memory stages,
// issued S-1 iterations ahead, and the dot reads its fragments from the stage with ldmatrix.
//
//   prologue:  stages 0..S-2 <- iterations 0..S-2 (one commit group each, empty past the end)
//   iteration i over stage i%S, in k16 steps ks = 0 .. KS-1 (KS = BK/16; fp8 below), either
//   - two CTAs per SM (128 registers): wait until group i is complete; barrier (stage i%S
//     visible to all, and every warp done with stage (i-1)%S); issue iteration i+S-1 into
//     stage (i-1)%S; commit; each step loads its fragments, then runs its mma; or
//   - one CTA per SM (PipePlan::double_buffer, KS even): fragments double-buffered, each step
//     loading the next step's while its own mma run. Before the loop: wait for group 0;
//     barrier; load step 0 of stage 0. Then
//       ks = 0:     load step 1, mma step 0; issue iteration i+S-1 into stage (i-1)%S; commit
//       ks = KS-1:  wait until group i+1 is complete; barrier (stage (i+1)%S visible to all,
//                   every warp done reading stage i%S); load step 0 of stage (i+1)%S; mma
//                   step KS-1
//   after:     wait for all groups; barrier (the ring may be reused)
// Either way one barrier per iteration: stage (i-1)%S was last read before the barrier that
// precedes its refill. Knobs (kernel constexprs, PipePlan): mma_spread_copies = 1 splits the
// refill of the double-buffered schedule into KS - 1 pieces, one after each of steps 0 .. KS-2's
// mma, committed after the last (still before the wait at KS-1 that counts it);
// mma_l2_prefetch adds an L2 prefetch size to every copy; min_blocks >= 2 bounds the ring;
// mma_early_last_step = 1 runs step KS-1's mma before the wait and barrier, then loads the next
// stage's step 0 (rather than wait, barrier, load, mma).
//
// cp.async needs 16-byte aligned sources: when an operand view's base pointer is not 16-byte
// aligned or its rows are not multiples of 8 elements (a uniform runtime flag), its chunks are
// read element by element into the same ring instead. One loop serves both cases: a second,
// ordinary loop beside it cost ~30 registers per thread (ptxas allocates for the union of both
// paths), the difference between one and two CTAs per SM. Out-of-bounds chunks are zero-filled
// (cp.async src-size 0), which matches load_tile's padding only for pad = 0.
//
// fp8 dots (mma.sync m16n8k32, sm_89+) run the same schedule in k32 steps (KS = BK/32) over
// stages of bytes: A [BM x BK] as for 16-bit, and B as loaded from an [N, K] view, [BN x BK]
// (the dot reads its transpose, K-major), both read with ldmatrix without .trans, a pair of fp8
// being one 16-bit element (mma.cuh, ldsm_frags_f8). A [K, N] fp8 B would need .trans on bytes,
// which ldmatrix lacks: such a loop keeps the dot on mma.sync with its operands staged through
// shared memory each iteration (emit_dot), and the note says why.
#include "cuda/EmitterInternal.h"
#include "passes/Passes.h"

namespace tessera::cudagen {

bool pure_scalar(const Op& o) { return pure_scalar_op(o); }


const Op* Emitter::ring_operand_load(Block& body, const Value* v, ScalarKind in) const {
  const Op* l = v->def;
  if (!l || l->kind != OpKind::LoadTile || l->parent != &body || l->operands.size() != 3) return nullptr;
  const Value* view = l->operand(0);
  if (!views_.count(view) || view->type.rank() != 2 || view->type.elem != in || v->type.elem != in) return nullptr;
  if (l->has_attr("pad") && l->attr_number("pad") != 0.0) return nullptr;
  if (uses_in(body, v) != 1) return nullptr;
  return l;
}

bool Emitter::has_pipelined_mma_loop() const {
  if (!k_.grid) return false;
  const Op* y = k_.grid->terminator();
  if (!y || y->operands.size() != 2) return false;
  for (const auto& o : k_.body->ops)
    if (o->kind == OpKind::For && o->has_attr("pipeline") && plan_pipeline(*o, frag_carried(*o)).ok) return true;
  return false;
}

Emitter::PipePlan Emitter::plan_pipeline(const Op& f, const std::vector<std::pair<size_t, const Op*>>& frags) const {
  PipePlan pp;
  const Attr* a = f.find_attr("pipeline");
  if (!a || !std::holds_alternative<int64_t>(*a) || std::get<int64_t>(*a) < 2) return pp;
  if (f.operands.size() != 4 || frags.size() != 1 || frags[0].first != 0) return pp;
  const Op* dot = frags[0].second;
  Block& body = f.region(0);
  MmaPlan p = plan_mma(*dot);
  auto no = [&](const std::string& why) {
    pp.why = why;
    return pp;
  };
  if (!p.ok) return pp;
  if (p.nt % 2 != 0) return no("a warp's block has an odd number of 8-column mma tiles");
  // The swizzle keeps a chunk in its 128-byte line only for rows of fewer than 8 chunks or of
  // whole lines (mma.cuh, swz). Chunks are 16 bytes: 8 16-bit elements, 16 fp8.
  // (fp8 B is K-major: its rows are K wide, as A's.)
  const int64_t E = 16 / p.operand_bytes();
  for (int64_t cpr : {p.K / E, p.f8 ? p.K / E : p.N / E})
    if (cpr > 8 && cpr % 8 != 0) return no("operand rows of " + std::to_string(cpr) + " 16-byte chunks (the swizzle takes fewer than 8 or whole 128-byte lines)");
  ScalarKind in = dot->operand(0)->type.elem;
  const Op *la = ring_operand_load(body, dot->operand(0), in), *lb = ring_operand_load(body, dot->operand(1), in);
  // fp8 B is read K-major: the transpose of a load of an [N, K] view, held in the ring as loaded.
  const Op* perm = nullptr;
  if (const Op* t = dot->operand(1)->def; p.f8 && !lb && t && t->kind == OpKind::Permute && t->parent == &body &&
                                          uses_in(body, dot->operand(1)) == 1 && t->attr_ints("dims") == std::vector<int64_t>{1, 0}) {
    perm = t;
    lb = ring_operand_load(body, t->operand(0), in);
  } else if (p.f8 && lb) {
    return no("b is a [K, N] (MN-major) fp8 tile, which ldmatrix cannot transpose (it moves 16-bit elements); give b as "
              "[N, K] and transpose its tile in the dot");
  }
  if (!la || !lb || la == lb)
    return no("the dot's operands are not loads (pad 0, used once) of 2-D views in the loop body");
  for (const auto& o : body.ops)
    if (o.get() != dot && o.get() != la && o.get() != lb && o.get() != perm && o->kind != OpKind::Yield && !pure_scalar(*o))
      return no("the loop body does more than index arithmetic, two loads and the dot");
  // Two CTAs per SM: deeper rings than ~96 KiB only cost occupancy. One CTA per SM (registers
  // decide that): the ring may take the SM's shared memory, less 16 KiB for other scratch
  // (128 x 256 x 64: 3 stages of 48 KiB on sm_80, 4 on sm_90).
  int64_t stage_bytes = (p.M * p.K + p.K * p.N) * p.operand_bytes();
  // Double buffers alternate within a stage, so a stage needs an even number of k16 steps (k32
  // for fp8: 32 bytes of K each way).
  const int64_t ksteps = p.K * p.operand_bytes() / 32;
  pp.double_buffer = !pipe_fits_two_ctas(p.mt * p.nt * 4, stage_bytes / 2 / T_) && ksteps % 2 == 0;
  int64_t budget = pp.double_buffer ? smem_limit(tg_) - 16 * 1024 : 96 * 1024;
  if (int64_t blocks = knob("min_blocks", 1); blocks >= 2 && blocks <= 32)
    budget = std::min(budget, smem_limit(tg_) / blocks - 1024);
  int64_t S = std::min<int64_t>(std::get<int64_t>(*a), 8);
  while (S > 2 && S * stage_bytes > budget) --S;
  pp.ok = true;
  pp.stages = static_cast<int>(S);
  if (int64_t pf = knob("mma_l2_prefetch"); pf == 64 || pf == 128 || pf == 256) pp.l2_prefetch = static_cast<int>(pf);
  // One piece per k16 step but the last (whose wait needs this iteration's group committed).
  if (knob("mma_spread_copies") == 1 && pp.double_buffer && ksteps >= 3) pp.copy_parts = static_cast<int>(ksteps - 1);
  pp.mma_before_wait = knob("mma_early_last_step") == 1 && pp.double_buffer;
  pp.dot = dot, pp.load_a = la, pp.load_b = lb, pp.perm_b = perm;
  pp.mma = p;
  return pp;
}

void Emitter::emit_pipelined(const Op& f, const PipePlan& pp, const std::string& frag) {
  const Block& body = f.region(0);
  const MmaPlan& p = pp.mma;
  const int S = pp.stages;
  const ViewInfo &va = views_.at(pp.load_a->operand(0)), &vb = views_.at(pp.load_b->operand(0));
  std::string BM = std::to_string(p.M), BN = std::to_string(p.N), BK = std::to_string(p.K);
  std::string SE = std::to_string(p.M * p.K + p.K * p.N), AE = std::to_string(p.M * p.K), T = std::to_string(T_);
  std::string lo = nm(f.operand(0)), hi = nm(f.operand(1)), step = nm(f.operand(2));
  count("dot.mma_pipelined");
  count("mma-dots");
  uses_mma_ = true;
  // Elements here are those of the operands (bytes for fp8); pipe_stage_elems_ counts 16-bit ones.
  const int64_t eb = p.operand_bytes(), E = 16 / eb;  // bytes per element, elements per 16-byte chunk
  const std::string et = p.f8 ? "uint8_t" : "uint16_t", Es = std::to_string(E);
  pipe_frag_regs_ = std::max(pipe_frag_regs_, p.mt * p.nt * 4);
  pipe_stage_elems_ = std::max(pipe_stage_elems_, (p.M * p.K + p.K * p.N) * eb / 2 / T_);
  count("pipeline-stages", S);
  if (pp.l2_prefetch) count("mma-l2-prefetch", pp.l2_prefetch);
  if (pp.copy_parts > 1) count("mma-copy-pieces", pp.copy_parts);
  if (pp.mma_before_wait) count("mma-early-last-step");
  if (p.f8) {
    count("mma-fp8-dots");
    notes_.push_back(fp8_mma_note(*pp.dot, p, "(B K-major) fed by a " + std::to_string(S) +
                                                  "-stage cp.async ring with ldmatrix fragment loads"));
  }

  std::string oka = fresh("vec_a"), okb = fresh("vec_b"), ring = fresh("ring");
  open("{");
  line("const bool " + oka + " = tsr::aligned_vec<" + et + ", " + Es + ">(" + va.ptr + ") && " + va.strides[0] + " % " + Es + " == 0;");
  line("const bool " + okb + " = tsr::aligned_vec<" + et + ", " + Es + ">(" + vb.ptr + ") && " + vb.strides[0] + " % " + Es + " == 0;");
  line(et + "* const " + ring + " = " + smem_ptr(et, 0, S * (p.M * p.K + p.K * p.N) * eb) + ";");
  warp_coords(*this, p);
  // The fragments were just filled from shared memory that the ring overlaps.
  barrier();
  // Copies of iteration `iv` (an int64 expression) into stage `st`: the body's index arithmetic
  // is emitted again for that iteration.
  // `part` of `parts`: that share of every thread's chunks (cp_tile_async).
  auto issue = [&](const std::string& iv, const std::string& st, int part = 0, int parts = 1) {
    open("{");
    std::string ivn = fresh("ivp");
    line("const int32_t " + ivn + " = int32_t(" + iv + ");");
    name_[body.args[0]] = ivn;
    for (const auto& o : body.ops)
      if (o.get() != pp.dot && o.get() != pp.load_a && o.get() != pp.load_b && o.get() != pp.perm_b && o->kind != OpKind::Yield)
        emit_op(*o);
    const Op &la = *pp.load_a, &lb = *pp.load_b;
    // Template arguments after NTHREADS, only where a knob is on (the default text is unchanged).
    std::string tail;
    if (pp.l2_prefetch || parts > 1) tail = ", " + std::to_string(pp.l2_prefetch);
    if (parts > 1) tail += ", " + std::to_string(part) + ", " + std::to_string(parts);
    // B's tile as loaded: BK x BN, or BN x BK for K-major fp8 (B^T).
    const std::string &rb = pp.perm_b ? BN : BK, &cb = pp.perm_b ? BK : BN;
    const int64_t cb_n = pp.perm_b ? p.K : p.N;
    line("tsr::cp_tile_async<" + BM + ", " + std::to_string(p.K / E) + ", " + T + tail + ">(" + ring + " + " + st + " * " + SE +
         ", " + va.ptr + ", int64_t(" + nm(la.operand(1)) + ") * " + BM + ", int64_t(" + nm(la.operand(2)) + ") * " + BK +
         ", " + va.dims[0] + ", " + va.dims[1] + ", " + va.strides[0] + ", tsr_tid, " + oka + ");");
    line("tsr::cp_tile_async<" + rb + ", " + std::to_string(cb_n / E) + ", " + T + tail + ">(" + ring + " + " + st + " * " + SE +
         " + " + AE + ", " + vb.ptr + ", int64_t(" + nm(lb.operand(1)) + ") * " + rb + ", int64_t(" + nm(lb.operand(2)) +
         ") * " + cb + ", " + vb.dims[0] + ", " + vb.dims[1] + ", " + vb.strides[0] + ", tsr_tid, " + okb + ");");
    close();
  };

  std::string s = fresh("st"), pv = fresh("pv");
  open("for (int " + s + " = 0; " + s + " < " + std::to_string(S - 1) + "; ++" + s + ") {");
  line("const int64_t " + pv + " = int64_t(" + lo + ") + int64_t(" + s + ") * int64_t(" + step + ");");
  open("if (" + step + " > 0 && " + pv + " < " + hi + ") {");
  issue(pv, s);
  close();
  line("tsr::cp_async_commit();");
  close();

  const int KS = static_cast<int>(p.K * eb / 32);  // k16 steps (k32 for fp8) per stage
  const std::string kstep = p.f8 ? "k32" : "k16";
  std::string it = fresh("it"), cur = fresh("cur"), nxt = fresh("nxt"), pv2 = fresh("pv"), rs = fresh("ring_s");
  std::string fa = fresh("fa"), fb = fresh("fb");
  std::string SEB = std::to_string((p.M * p.K + p.K * p.N) * eb), AEB = std::to_string(p.M * p.K * eb);
  std::string mt = std::to_string(p.mt), nt = std::to_string(p.nt);
  const bool idle_warps = p.wm * p.wn != T_ / 32;
  std::string guard = idle_warps ? "if (warp_ < " + std::to_string(p.wm * p.wn) + ") {" : "{";
  auto load_frags = [&](int buf, int ks, const std::string& stage) {
    std::string base = stage == "0" ? rs : rs + " + uint32_t(" + stage + ") * " + SEB + "u";
    const std::string frags = p.f8 ? "tsr::ldsm_frags_f8<" + BK + ", " + mt + ", " + nt
                                   : "tsr::ldsm_frags<" + BK + ", " + mt + ", " + nt + ", " + std::to_string(p.N / 8);
    line(frags + ">(" + fa + "[" +
         std::to_string(buf) + "], " + fb + "[" + std::to_string(buf) + "], " + base + ", " + base + " + " + AEB + "u, " +
         std::to_string(ks) + ", m0_, n0_, lane_);");
  };
  // Piece `part` of `parts` of iteration it + S - 1's copies into stage (cur - 1) % S; the group
  // is committed after the last piece.
  auto issue_next = [&](int part = 0, int parts = 1) {
    if (part == 0) {
      line("const int64_t " + pv2 + " = " + it + " + int64_t(" + std::to_string(S - 1) + ") * int64_t(" + step + ");");
      line("const int " + nxt + " = " + cur + " == 0 ? " + std::to_string(S - 1) + " : " + cur + " - 1;");
    }
    open("if (" + pv2 + " < " + hi + ") {");
    issue(pv2, nxt, part, parts);
    close();
    if (part == parts - 1) line("tsr::cp_async_commit();");
  };
  auto mma = [&](int buf) {
    const std::string tiles = p.f8 ? "tsr::mma_tiles_f8<" + std::to_string(p.f8) : std::string("tsr::mma_tiles<") + (p.bf16 ? "true" : "false");
    line(tiles + ">(" + frag + ", " + fa + "[" +
         std::to_string(buf) + "], " + fb + "[" + std::to_string(buf) + "]);");
  };
  auto advance = [&]() { line(cur + " = " + cur + " + 1 == " + std::to_string(S) + " ? 0 : " + cur + " + 1;"); };
  line("const uint32_t " + rs + " = tsr::smem_u32(" + ring + ");");
  line("uint32_t " + fa + "[" + std::string(pp.double_buffer ? "2" : "1") + "][" + mt + "][4], " + fb + "[" +
       (pp.double_buffer ? "2" : "1") + "][" + nt + "][2];");
  line("int " + cur + " = 0;");
  if (!pp.double_buffer) {
    // Two CTAs per SM, 128 registers: one fragment set, loaded right before its mma. Iteration i
    // waits for stage i%S and refills stage (i-1)%S, read before this barrier.
    open("for (int64_t " + it + " = " + lo + "; " + step + " > 0 && " + it + " < " + hi + "; " + it + " += " + step + ") {");
    line("tsr::cp_async_wait<" + std::to_string(S - 2) + ">();");
    barrier();
    issue_next();
    for (int ks = 0; ks < KS; ++ks) {
      open(guard);
      load_frags(0, ks, cur);
      mma(0);
      close();
    }
    advance();
    close();
  } else {
    // Fragments double-buffered across k16 steps: step ks loads the fragments of step ks + 1
    // while its mma run, and the last step of a stage waits for the next stage and loads its
    // first step's fragments. Every read of a stage thus happens before the barrier at its last
    // step, which is what lets the next iteration refill it after that one barrier.
    line("tsr::cp_async_wait<" + std::to_string(S - 2) + ">();");
    barrier();
    open(guard);
    load_frags(0, 0, "0");
    close();
    open("for (int64_t " + it + " = " + lo + "; " + step + " > 0 && " + it + " < " + hi + "; " + it + " += " + step + ") {");
    for (int ks = 0; ks < KS; ++ks) {
      line("// " + kstep + " step " + std::to_string(ks) + " of " + std::to_string(KS));
      if (ks == KS - 1 && pp.mma_before_wait) {
        // The last step's mma first (its fragments are in registers): warps reach the barrier
        // with two steps of mma queued; the next stage's first fragments load after it.
        open(guard);
        mma(ks % 2);
        close();
        line("tsr::cp_async_wait<" + std::to_string(S - 2) + ">();");
        barrier();
        advance();
        open(guard);
        load_frags((ks + 1) % 2, 0, cur);
        close();
        continue;
      }
      if (ks == KS - 1) {
        line("tsr::cp_async_wait<" + std::to_string(S - 2) + ">();");
        barrier();
        advance();
      }
      open(guard);
      load_frags((ks + 1) % 2, (ks + 1) % KS, cur);
      mma(ks % 2);
      close();
      // The refill goes out after the first step's mma, so the tensor cores start first (KS >= 2:
      // it is committed before the wait at the last step that counts it); spread (copy_parts =
      // KS - 1), a piece after each step's mma but the last's.
      if (ks < pp.copy_parts) issue_next(ks, pp.copy_parts);
    }
    close();
  }
  line("tsr::cp_async_wait<0>();");
  barrier();
  close();
}

}  // namespace tessera::cudagen
