// pingpong-consumers (GPU lowering, sm_90a): two consumer warpgroups that take alternate
// programs of a persistent CTA (CUTLASS's ping-pong schedule), opt-in.
//
// Without it, the compute warpgroups of a warp-specialized kernel split one program's tile (an
// mma layout of warps = [8, 1]: each warpgroup 64 of its 128 rows), so both finish the K loop
// together and both then run the epilogue while the tensor cores idle: on the H200 matmul +
// bias + tanh-GELU in bf16 at 4096^3 took 0.207 ms against 0.185 without the GELU
// (bench/RESULTS.md, session 20). With `consumers = 2` on the warp-specialized loop, each
// warpgroup owns a whole program (its layouts become warps = [4, 1]: the same tile on one
// warpgroup, 128 threads, twice the registers per thread) and consumer c takes the CTA's
// programs 2j + c: while one runs its epilogue, the other runs its K loop. The producer is
// unchanged (it issues every program's stages in order into the one ring); the layout emitter
// prints the consumers' order barrier and their share of the ring's count
// (emit_warp_specialized_body).
//
// Applies to a `warp_specialize = 1` loop of a persistent kernel (persist-programs) when
//  - the loop's bounds do not depend on program ids: every program's loop has the same trip
//    count, so consumer c's j-th program's iterations are the ring's (2j + c) * trips onwards;
//  - every register tile is on the loop's wgmma accumulator layout with warps = [8, 1] (or a
//    slice of it), or replicated, and the only shared tiles are the ring's stages: the ops
//    are elementwise, broadcasts, loads and stores, with no exchange (no convert_layout, no
//    reduction, no other loop or if), so nothing synchronises more than one warpgroup;
//  - the accumulator fits one warpgroup: at most 128 f32 registers per thread (a 128 x 128
//    or 64 x 256 tile; a 128 x 256 tile stays cooperative).
// Otherwise it declines, with a stat (pingpong-consumers.declined) and, for a written
// `consumers = 2`, a note and `consumers = 1`.
//
// Opt-in: not yet measured on the GPU (bench/pingpong_gpu.sh measures it), so it applies where
// `consumers = 2` is written on the loop or the environment sets TESSERA_PINGPONG_CONSUMERS=1;
// elsewhere a loop that would qualify is counted (pingpong-consumers.eligible). A written
// `consumers = 1` stays.
#include <set>

#include "ir/IR.h"
#include "passes/Passes.h"
#include "support/Env.h"

namespace tessera {

namespace {

bool pingpong_env() {
  static const bool on = env_flag("TESSERA_PINGPONG_CONSUMERS");
  return on;
}

// The loop's wgmma accumulator layout split over two warpgroups along M.
bool cooperative_acc(const Layout& l) {
  return l.kind == Layout::Kind::Mma && l.version == 3 && l.warps == std::vector<int64_t>{8, 1};
}

// `l` with every cooperative wgmma accumulator layout in it (itself or a parent) on one warpgroup.
Layout on_one_warpgroup(const Layout& l) {
  Layout out = l;
  if (cooperative_acc(l)) out.warps = {4, 1};
  if (l.parent) out.parent = std::make_shared<const Layout>(on_one_warpgroup(*l.parent));
  return out;
}

bool fits(const Layout& l) {
  if (l.kind == Layout::Kind::None || l.kind == Layout::Kind::Replicated) return true;
  if (l.kind == Layout::Kind::Slice) return l.parent && cooperative_acc(*l.parent);
  return cooperative_acc(l);
}

// Why `loop` cannot have two ping-pong consumers ("" when it can).
std::string why_not(const Kernel& k, const Op& loop) {
  const Op* y = k.grid ? k.grid->terminator() : nullptr;
  if (!y || !y->has_attr("persistent") || y->attr_int("persistent") != 1) return "the kernel is not persistent";
  // The bounds: computed from what every program shares.
  std::vector<const Value*> need = {loop.operands[0], loop.operands[1], loop.operands[2]};
  std::set<const Value*> seen;
  while (!need.empty()) {
    const Value* v = need.back();
    need.pop_back();
    if (!seen.insert(v).second || !v->def) continue;
    if (v->def->kind == OpKind::ProgramId)
      return "the loop's bounds depend on the program id at " + v->def->loc.str() +
             " (the consumers' shares of the ring need one trip count for every program)";
    need.insert(need.end(), v->def->operands.begin(), v->def->operands.end());
  }
  std::set<const Op*> ring;
  for (const Op* l : ring_loads(loop, nullptr)) ring.insert(l);
  std::string why;
  walk(*k.body, [&](Op& op) {
    if (!why.empty()) return;
    const OpClass c = op.info().cls;
    const std::string at = std::string(op.info().name) + " at " + op.loc.str();
    if (op.kind == OpKind::ConvertLayout || c == OpClass::Reduce || c == OpClass::Scan || c == OpClass::Sort ||
        c == OpClass::Raw || c == OpClass::Struct || (c == OpClass::Control && &op != &loop) ||
        (c == OpClass::Dot && op.parent != &loop.region(0)) ||
        (c == OpClass::Shape && op.kind != OpKind::Broadcast && op.kind != OpKind::ExpandDims)) {
      why = "the kernel has " + at + ", whose code may exchange values between or synchronise warpgroups";
      return;
    }
    for (const Value* r : op.results) {
      const Layout& l = r->type.layout;
      if (l.kind == Layout::Kind::Shared && ring.count(&op)) continue;
      if (!fits(l)) {
        why = "the tile of " + at + " is not on the loop's wgmma accumulator layout of warps = [8, 1] (" + l.str() + ")";
        return;
      }
      if (cooperative_acc(l) && r->type.is_tile()) {
        const std::vector<int64_t> s = static_shape(r->type.shape);
        if (s.size() == 2 && s[0] * s[1] / 128 > 128)
          why = "the " + std::to_string(s[0]) + " x " + std::to_string(s[1]) + " tile of " + at + " would take " +
                std::to_string(s[0] * s[1] / 128) + " registers per thread in one warpgroup (at most 128)";
      }
    }
  });
  return why;
}

void set_layout(Value* v) {
  if (v->type.is_tile()) v->type.layout = on_one_warpgroup(v->type.layout);
}

}  // namespace

void pingpong_consumers(Kernel& k, PassStats& stats) {
  for (const auto& op : k.body->ops) {
    if (op->kind != OpKind::For || !op->has_attr("consumers")) continue;
    if (op->attr_int("consumers") == 2 && (!op->has_attr("warp_specialize") || op->attr_int("warp_specialize") != 1)) {
      op->set_attr("consumers", int64_t{1});
      stats.notes.push_back("for at " + op->loc.str() + ": consumers = 2 not taken: the loop has no producer warpgroup");
      ++stats["pingpong-consumers.declined"];
    }
  }
  Op* loop = nullptr;
  for (const auto& op : k.body->ops)
    if (op->kind == OpKind::For && op->has_attr("warp_specialize") && op->attr_int("warp_specialize") == 1) loop = op.get();
  if (!loop) return;
  const bool written = loop->has_attr("consumers");
  if (written && loop->attr_int("consumers") != 2) return;
  const std::string why = why_not(k, *loop);
  if (!written && !pingpong_env()) {
    if (why.empty()) ++stats["pingpong-consumers.eligible"];
    return;
  }
  if (!why.empty()) {
    if (written) {
      loop->set_attr("consumers", int64_t{1});
      stats.notes.push_back("for at " + loop->loc.str() + ": consumers = 2 not taken: " + why);
    }
    ++stats["pingpong-consumers.declined"];
    return;
  }
  loop->set_attr("consumers", int64_t{2});
  walk(*k.body, [](Op& op) {
    for (Value* r : op.results) set_layout(r);
    for (auto& region : op.regions)
      for (Value* a : region->args) set_layout(a);
  });
  ++stats["pingpong-consumers.loops"];
}

}  // namespace tessera
