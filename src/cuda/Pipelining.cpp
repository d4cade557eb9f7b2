// Software pipelining of tensor-core matmul loops: the loads that feed a fragment-carried mma dot
// in a `pipeline` loop become 16-byte cp.async copies into a ring of S shared-memory stages,
// issued S-1 iterations ahead, and the dot reads its fragments from the stage with ldmatrix.
//
//   prologue:  stages 0..S-2 <- iterations 0..S-2 (one commit group each, empty past the end)
//   iteration i: wait until group i is complete; barrier (stage i%S visible to all, and every
//              warp is done with stage (i-1)%S); issue iteration i+S-1 into stage (i-1)%S;
//              commit; mma over stage i%S
//   after:     wait for all groups; barrier (the ring may be reused)
//
// cp.async needs 16-byte aligned sources: when an operand view's base pointer is not 16-byte
// aligned or its rows are not multiples of 8 elements (a uniform runtime flag), its chunks are
// read element by element into the same ring instead. One loop serves both cases: a second,
// ordinary loop beside it cost ~30 registers per thread (ptxas allocates for the union of both
// paths), the difference between one and two CTAs per SM. Out-of-bounds chunks are zero-filled
// (cp.async src-size 0), which matches load_tile's padding only for pad = 0.
#include "cuda/EmitterInternal.h"

namespace tessera::cudagen {

bool pure_scalar(const Op& o) {
  if (!o.regions.empty()) return false;
  for (const Value* r : o.results)
    if (!r->type.is_scalar()) return false;
  switch (o.info().cls) {
    case OpClass::Constant:
    case OpClass::Index:
    case OpClass::Unary:
    case OpClass::Binary:
    case OpClass::Compare:
    case OpClass::Cast:
    case OpClass::Ternary: return true;
    default: return false;
  }
}

int uses_in(Block& b, const Value* v) {
  int n = 0;
  walk(b, [&](Op& o) {
    for (const Value* x : o.operands) n += x == v;
  });
  return n;
}

const Op* Emitter::ring_operand_load(Block& body, const Value* v, ScalarKind in) const {
  const Op* l = v->def;
  if (!l || l->kind != OpKind::LoadTile || l->parent != &body || l->operands.size() != 3) return nullptr;
  const Value* view = l->operand(0);
  if (!views_.count(view) || view->type.rank() != 2 || view->type.elem != in || v->type.elem != in) return nullptr;
  if (l->has_attr("pad") && l->attr_number("pad") != 0.0) return nullptr;
  if (uses_in(body, v) != 1) return nullptr;
  return l;
}

Emitter::PipePlan Emitter::plan_pipeline(const Op& f, const std::vector<std::pair<size_t, const Op*>>& frags) const {
  PipePlan pp;
  const Attr* a = f.find_attr("pipeline");
  if (!a || !std::holds_alternative<int64_t>(*a) || std::get<int64_t>(*a) < 2) return pp;
  if (f.operands.size() != 4 || frags.size() != 1 || frags[0].first != 0) return pp;
  const Op* dot = frags[0].second;
  Block& body = f.region(0);
  MmaPlan p = plan_mma(*dot);
  if (!p.ok || p.nt % 2 != 0) return pp;
  ScalarKind in = dot->operand(0)->type.elem;
  const Op *la = ring_operand_load(body, dot->operand(0), in), *lb = ring_operand_load(body, dot->operand(1), in);
  if (!la || !lb || la == lb) return pp;
  for (const auto& o : body.ops)
    if (o.get() != dot && o.get() != la && o.get() != lb && o->kind != OpKind::Yield && !pure_scalar(*o)) return pp;
  // Deeper rings than ~96 KiB only cost occupancy.
  int64_t stage_bytes = (p.M * p.K + p.K * p.N) * 2;
  int64_t S = std::min<int64_t>(std::get<int64_t>(*a), 8);
  while (S > 2 && S * stage_bytes > 96 * 1024) --S;
  pp.ok = true;
  pp.stages = static_cast<int>(S);
  pp.dot = dot, pp.load_a = la, pp.load_b = lb;
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
  pipe_frag_regs_ = std::max(pipe_frag_regs_, p.mt * p.nt * 4);
  pipe_stage_elems_ = std::max(pipe_stage_elems_, (p.M * p.K + p.K * p.N) / T_);
  count("pipeline-stages", S);

  std::string oka = fresh("vec_a"), okb = fresh("vec_b"), ring = fresh("ring");
  open("{");
  line("const bool " + oka + " = tsr::aligned_vec<uint16_t, 8>(" + va.ptr + ") && " + va.strides[0] + " % 8 == 0;");
  line("const bool " + okb + " = tsr::aligned_vec<uint16_t, 8>(" + vb.ptr + ") && " + vb.strides[0] + " % 8 == 0;");
  line("uint16_t* const " + ring + " = " + smem_ptr("uint16_t", 0, S * (p.M * p.K + p.K * p.N) * 2) + ";");
  warp_coords(*this, p);
  // The fragments were just filled from shared memory that the ring overlaps.
  barrier();
  // Copies of iteration `iv` (an int64 expression) into stage `st`: the body's index arithmetic
  // is emitted again for that iteration.
  auto issue = [&](const std::string& iv, const std::string& st) {
    open("{");
    std::string ivn = fresh("ivp");
    line("const int32_t " + ivn + " = int32_t(" + iv + ");");
    name_[body.args[0]] = ivn;
    for (const auto& o : body.ops)
      if (o.get() != pp.dot && o.get() != pp.load_a && o.get() != pp.load_b && o->kind != OpKind::Yield) emit_op(*o);
    const Op &la = *pp.load_a, &lb = *pp.load_b;
    line("tsr::cp_tile_async<" + BM + ", " + std::to_string(p.K / 8) + ", " + T + ">(" + ring + " + " + st + " * " + SE +
         ", " + va.ptr + ", int64_t(" + nm(la.operand(1)) + ") * " + BM + ", int64_t(" + nm(la.operand(2)) + ") * " + BK +
         ", " + va.dims[0] + ", " + va.dims[1] + ", " + va.strides[0] + ", tsr_tid, " + oka + ");");
    line("tsr::cp_tile_async<" + BK + ", " + std::to_string(p.N / 8) + ", " + T + ">(" + ring + " + " + st + " * " + SE +
         " + " + AE + ", " + vb.ptr + ", int64_t(" + nm(lb.operand(1)) + ") * " + BK + ", int64_t(" + nm(lb.operand(2)) +
         ") * " + BN + ", " + vb.dims[0] + ", " + vb.dims[1] + ", " + vb.strides[0] + ", tsr_tid, " + okb + ");");
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

  std::string it = fresh("it"), cur = fresh("cur"), nxt = fresh("nxt"), pv2 = fresh("pv");
  line("int " + cur + " = 0;");
  open("for (int64_t " + it + " = " + lo + "; " + step + " > 0 && " + it + " < " + hi + "; " + it + " += " + step + ") {");
  line("tsr::cp_async_wait<" + std::to_string(S - 2) + ">();");
  barrier();
  line("const int64_t " + pv2 + " = " + it + " + int64_t(" + std::to_string(S - 1) + ") * int64_t(" + step + ");");
  line("const int " + nxt + " = " + cur + " == 0 ? " + std::to_string(S - 1) + " : " + cur + " - 1;");
  open("if (" + pv2 + " < " + hi + ") {");
  issue(pv2, nxt);
  close();
  line("tsr::cp_async_commit();");
  open(p.wm * p.wn == T_ / 32 ? "{" : "if (warp_ < " + std::to_string(p.wm * p.wn) + ") {");
  line(std::string("tsr::warp_mma_swz<") + (p.bf16 ? "true" : "false") + ", " + BK + ", " + std::to_string(p.mt) + ", " +
       std::to_string(p.nt) + ", " + std::to_string(p.N / 8) + ">(" + frag + ", " + ring + " + " + cur + " * " + SE + ", " +
       ring + " + " + cur + " * " + SE + " + " + AE + ", m0_, n0_, lane_);");
  close();
  line(cur + " = " + cur + " + 1 == " + std::to_string(S) + " ? 0 : " + cur + " + 1;");
  close();
  line("tsr::cp_async_wait<0>();");
  barrier();
  close();
}

}  // namespace tessera::cudagen
