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
// The ring loads of pipelined loops (nested ones included) that the layout emitter copies by
// cp.async (all but a TMA ring's: tma_ring_boxes) get `l2_prefetch = N` where the kernel sets
// the knob mma_l2_prefetch = N (64, 128 or 256; 0,
// the default, asks for nothing): each 16-byte copy asks L2 to fetch N bytes around it from
// memory at once (cp.async's .L2::NB qualifier, sm_80+), as the planning emitter's mma.sync
// matmul does with the same knob. A tuning knob: no rule sets it (the default is no prefetch).
// A written `l2_prefetch` stays; where no load takes the knob (TMA rings only), a note says so.
//
// Where the kernel sets the knob stream_stores = 1 (any target; 0, the default, asks for
// nothing), every `store_tile` gets `l2_hint = "evict_first"`: its vector stores carry the
// streaming hint (st.global.cs), so that a kernel's output does not push out of L2 what it
// reads again (a row kernel's second pass over a long row), as the planning emitter's row
// stores do with the same knob. (A TMA store, which store-epilogues-by-tma may choose later,
// ignores it; a store that pass gives back to registers keeps it.) A note where no store_tile
// takes it.
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

std::vector<std::pair<const Op*, std::vector<int64_t>>> tma_ring_boxes(const Kernel& k, const Op& loop) {
  std::vector<std::pair<const Op*, std::vector<int64_t>>> maps;
  // Loops of the kernel's top level only: their barriers are initialised once (a loop inside
  // another, reached again, keeps its cp.async ring).
  if (loop.kind != OpKind::For || !loop.has_attr("pipeline") || loop.attr_int("pipeline") < 2 || loop.parent != k.body.get())
    return maps;
  for (const Op* l : ring_loads(loop, nullptr)) {
    const Value *t = l->result(), *view = l->operand(0);
    const Layout& L = t->type.layout;
    const int R = t->type.rank();
    const int bits = scalar_bits(t->type.elem);
    if (L.swizzle != 128 || (bits != 16 && bits != 8) || (l->has_attr("pad") && l->attr_number("pad") != 0.0) ||
        std::find(k.params.begin(), k.params.end(), view) == k.params.end() || R < 2 || R > 3 || view->type.rank() != R)
      return {};
    for (int i = 0; i < static_cast<int>(L.order.size()); ++i)
      if (L.order[i] != R - 1 - i) return {};  // row-major, as the TMA writes a box
    const std::vector<int64_t> S = static_shape(t->type.shape);
    const int64_t A = 1024 / bits;  // elements of a 128-byte row
    if (S[R - 1] % A != 0) return {};
    std::vector<int64_t> box = {A};  // one 128-byte swizzle atom wide, a copy per A columns
    for (int d = R - 2; d >= 0; --d) {
      if (S[d] > 256) return {};
      box.push_back(S[d]);
    }
    maps.push_back({l, box});
  }
  return maps;
}

void hint_l2_policy(Kernel& k, const GpuLoweringOptions& o, PassStats& stats) {
  const ConstexprDecl* pf = k.find_constexpr("mma_l2_prefetch");
  const int64_t prefetch = pf ? pf->value : 0;
  if (prefetch != 0 && prefetch != 64 && prefetch != 128 && prefetch != 256)
    throw TesseraError(pf->loc, "knob mma_l2_prefetch = " + std::to_string(prefetch) +
                                    ": 0 (no prefetch), 64, 128 or 256 bytes that L2 fetches around each copy");
  const ConstexprDecl* ss = k.find_constexpr("stream_stores");
  const int64_t stream = ss ? ss->value : 0;
  if (stream != 0 && stream != 1)
    throw TesseraError(ss->loc, "knob stream_stores = " + std::to_string(stream) +
                                    ": 0 (no hint) or 1 (stores stream past L2: evict-first)");
  if (stream) {
    int64_t taken = 0;
    walk(*k.body, [&](Op& st) {
      if (st.kind != OpKind::StoreTile) return;
      if (!st.has_attr("l2_hint")) st.set_attr("l2_hint", std::string("evict_first"));
      ++taken;
    });
    stats["hint-l2-policy.streamed-stores"] += taken;
    if (taken == 0) stats.notes.push_back("knob stream_stores = 1 taken by no store: the kernel has no store_tile");
  }
  if (!k.grid) return;
  // TMA copies are the wgmma lowering's, of kernels with a wgmma dot (a kernel lowered for
  // mma.sync copies its swizzled tiles, swizzle-mma-operands', by cp.async).
  const bool tma = o.wgmma && has_mma_dot(*k.body, 3);
  if (prefetch) {
    // Every pipelined loop's ring loads but a TMA ring's (nested loops' rings included: they
    // are cp.async rings).
    int64_t taken = 0;
    walk(*k.body, [&](Op& loop) {
      if (loop.kind != OpKind::For || !loop.has_attr("pipeline") || loop.attr_int("pipeline") < 2) return;
      if (tma && !tma_ring_boxes(k, loop).empty()) return;
      for (const Op* l : ring_loads(loop, nullptr)) {
        Op& load = const_cast<Op&>(*l);
        if (!load.has_attr("l2_prefetch")) load.set_attr("l2_prefetch", prefetch);
        ++taken;
      }
    });
    stats["hint-l2-policy.l2-prefetch"] += taken;
    if (taken == 0)
      stats.notes.push_back("knob mma_l2_prefetch = " + std::to_string(prefetch) +
                            " taken by no load: the kernel has no ring copied by cp.async (TMA rings take no prefetch size)");
  }
  if (!tma) return;
  const Op* y = k.grid->terminator();
  const int64_t grid_axes = y ? static_cast<int64_t>(y->operands.size()) : 0;
  for (const auto& loop : k.body->ops) {
    if (loop->kind != OpKind::For || !loop->has_attr("pipeline") || loop->attr_int("pipeline") < 2) continue;
    for (const Op* l : ring_loads(*loop, nullptr)) {
      Op& load = const_cast<Op&>(*l);
      const Value* view = load.operand(0);
      // The tiles the layout emitter copies by TMA: 128-byte swizzled, of 16- or 8-bit elements.
      const Type& t = load.result()->type;
      if (load.has_attr("l2_hint") || view->type.rank() != 2 || t.layout.swizzle != 128 ||
          (scalar_bits(t.elem) != 16 && scalar_bits(t.elem) != 8) ||
          std::find(k.params.begin(), k.params.end(), view) == k.params.end())
        continue;
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
