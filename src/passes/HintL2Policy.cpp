// hint-l2-policy (GPU lowering, sm_90a, after pipeline-loops): the L2 cache policy of a
// pipelined loop's TMA copies.
//
// A ring load (ring_loads) of a 2-D kernel view into a 128-byte swizzled tile of 16- or 8-bit elements
// (what the layout emitter copies by TMA) in a pipelined loop at the kernel's top level gets
// `l2_hint`:
//   "few_readers", readers = [axes]: the grid axes whose programs all read the same tiles of
//       this load (those its indices do not depend on); the copy takes the evict_first policy
//       when those programs number at most 2, decided at run time from the grid. Its lines are
//       then replaced before any other, so streaming a tile that few programs read does not
//       push out what others read again, or dirty lines that would first have to be written
//       back (the planning emitter's rule: +10% at 16x4096x4096 and 128x14336x4096 on the H200
//       when L2 starts full of another kernel's writes, bench/RESULTS.md session 8). Where
//       the indices depend on every axis, each tile has one reader: "evict_first".
//   "evict_first" / "evict_last": that policy always, from the knobs tma_hint_a / tma_hint_b
//       (the planning emitter's: 1 evict_first, 2 evict_last, 3 no hint, 0 the rule above) of
//       the dot operand the load feeds.
// Other copies stay unhinted: an explicit evict_normal coincided with 8-20% slower wgmma tiles
// (session 8). The layout emitter prints the hint on 2-D TMA copies; cp.async rings ignore it.
// A written `l2_hint` stays.
//
// The ring loads a pipelined top-level loop copies by cp.async (every target's but those above)
// get `l2_prefetch = N` where the kernel sets the knob mma_l2_prefetch = N (64, 128 or 256; 0,
// the default, asks for nothing): each 16-byte copy asks L2 to fetch N bytes around it from
// memory at once (cp.async's .L2::NB qualifier, sm_80+), as the planning emitter's mma.sync
// matmul does with the same knob. A tuning knob: no rule sets it (the default is no prefetch).
// A written `l2_prefetch` stays.
#include <set>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

// The grid axes whose program ids `v` is computed from.
void axes_of(const Value* v, std::set<int64_t>& axes, std::set<const Value*>& seen) {
  if (!v || !seen.insert(v).second || !v->def) return;
  if (v->def->kind == OpKind::ProgramId) {
    axes.insert(v->def->attr_int("axis"));
    return;
  }
  for (const Value* o : v->def->operands) axes_of(o, axes, seen);
}

// The knob of the dot operand (a or b) that `load`'s tile feeds in `body`, directly or through
// single-operand ops (a permute, a convert_layout); 0 where none.
int64_t operand_knob(const Kernel& k, const Block& body, const Op& load) {
  for (const auto& op : body.ops) {
    if (op->kind != OpKind::Dot) continue;
    for (int j = 0; j < 2; ++j) {
      const Value* v = op->operand(j);
      while (v && v->def && v->def != &load && v->def->operands.size() == 1) v = v->def->operand(0);
      if (!v || v->def != &load) continue;
      const std::string name = std::string("tma_hint_") + (j == 0 ? "a" : "b");
      const ConstexprDecl* d = k.find_constexpr(name);
      const int64_t h = d ? d->value : 0;
      if (h < 0 || h > 3)
        throw TesseraError(op->loc, "knob " + name + " = " + std::to_string(h) +
                                        ": 0 (automatic), 1 (evict_first), 2 (evict_last) or 3 (no hint)");
      return h;
    }
  }
  return 0;
}

}  // namespace

void hint_l2_policy(Kernel& k, const GpuLoweringOptions& o, PassStats& stats) {
  if (!k.grid) return;
  const ConstexprDecl* pf = k.find_constexpr("mma_l2_prefetch");
  const int64_t prefetch = pf ? pf->value : 0;
  if (prefetch != 0 && prefetch != 64 && prefetch != 128 && prefetch != 256)
    throw TesseraError(pf->loc, "knob mma_l2_prefetch = " + std::to_string(prefetch) +
                                    ": 0 (no prefetch), 64, 128 or 256 bytes that L2 fetches around each copy");
  // TMA copies are the wgmma lowering's, of kernels with a wgmma dot (a kernel lowered for
  // mma.sync copies its swizzled tiles, swizzle-mma-operands', by cp.async).
  const bool tma = o.wgmma && has_mma_dot(*k.body, 3);
  const Op* y = k.grid->terminator();
  const int64_t grid_axes = y ? static_cast<int64_t>(y->operands.size()) : 0;
  for (const auto& loop : k.body->ops) {
    if (loop->kind != OpKind::For || !loop->has_attr("pipeline") || loop->attr_int("pipeline") < 2) continue;
    for (const Op* l : ring_loads(*loop, nullptr)) {
      Op& load = const_cast<Op&>(*l);
      const Value* view = load.operand(0);
      // The tiles the layout emitter copies by TMA: 128-byte swizzled, of 16- or 8-bit elements.
      const Type& t = load.result()->type;
      if (!tma || view->type.rank() != 2 || t.layout.swizzle != 128 || (scalar_bits(t.elem) != 16 && scalar_bits(t.elem) != 8) ||
          std::find(k.params.begin(), k.params.end(), view) == k.params.end()) {
        if (prefetch && !load.has_attr("l2_prefetch")) {  // a cp.async copy
          load.set_attr("l2_prefetch", prefetch);
          ++stats["hint-l2-policy.l2-prefetch"];
        }
        continue;
      }
      if (load.has_attr("l2_hint")) continue;
      const int64_t knob = operand_knob(k, loop->region(0), load);
      if (knob == 3) continue;
      if (knob == 1 || knob == 2) {
        load.set_attr("l2_hint", std::string(knob == 1 ? "evict_first" : "evict_last"));
        ++stats["hint-l2-policy.knobs"];
        continue;
      }
      std::set<int64_t> used;
      std::set<const Value*> seen;
      for (size_t i = 1; i < load.operands.size(); ++i) axes_of(load.operand(i), used, seen);
      std::vector<int64_t> readers;
      for (int64_t a = 0; a < grid_axes; ++a)
        if (!used.count(a)) readers.push_back(a);
      if (readers.empty()) {
        load.set_attr("l2_hint", std::string("evict_first"));
      } else {
        load.set_attr("l2_hint", std::string("few_readers"));
        load.set_attr("readers", readers);
      }
      ++stats["hint-l2-policy.hinted"];
    }
  }
}

}  // namespace tessera
