// pair-programs (GPU lowering, sm_90a, the knob cluster_m = 2): CTA pairs of a thread-block
// cluster take programs (2q + 0, n) and (2q + 1, n) together, and each copies half of every ring
// tile the two programs share into both CTAs' rings by TMA multicast.
//
// In a persistent matmul (persist-programs) the programs of one value of axis 1 read the same
// B tile at every K step. Two CTAs of a cluster that run programs (2q, n) and (2q + 1, n) in
// step each copy half of that tile's rows, multicast into both shared memories: B crosses from
// L2 once per pair instead of twice. Opt-in: on the H200 the planning emitter's pairs gained
// nothing at 4096^3, 4096 x 14336 x 4096 and 8192^3 (bench/RESULTS.md, sessions 9 and 10), but
// the tuner picks them at some shapes of 128 rows (128 x 4096 x 14336, 128 x 3584 x 3584).
//
// With the knob cluster_m = 2 (bound), a kernel whose grid block's yield has `persistent = 1`
// and whose top-level loop has a producer warpgroup (specialize-warps' `warp_specialize = 1`)
// gets
//  - `program_pairs = 1` on the grid's yield: the layout emitter launches clusters of two CTAs
//    along x, numbers the programs in pairs of axis 0 (group_rows / 2 pairs a group; with an odd
//    axis 0 the last pair's second program lies past the grid: it keeps its partner's copies and
//    barriers but stores nothing), sets each ring stage's release barrier to count both CTAs'
//    compute warps (a consumer releases a stage in both CTAs: each producer fills half of both
//    rings), and passes a cluster barrier after setting up the barriers and before leaving;
//  - `multicast = 1` on each of the loop's ring loads whose indices do not depend on program_id
//    axis 0 (nor do the loop's bounds): 2-D TMA ring tiles whose half is whole 8-row swizzle
//    atoms (rows a multiple of 16). Each CTA copies rows [rank h, rank h + h) of every box (h
//    half the tile's rows; its tensor map's box is h rows high).
// Declined, with a note naming why: a split-K compilation (never persistent), a kernel that is
// not persistent or whose top-level loop has no producer, ping-pong consumers (each consumer
// takes programs 2j + c of its own CTA), program prefetch, stream-K (stream-k-programs), a cluster_size knob other than 1, the
// swapped decode product (swap-dot-operands took the dot: the batch's few rows are one program row, so the
// pair's second program would lie past the grid), a loop whose bounds depend on axis 0, a
// kernel that writes memory other than by top-level store_tile (the program past the grid
// skips those only), or no ring tile the pair shares. Other values of the knob: a located error.
#include <map>
#include <string>

#include "ir/IR.h"
#include "passes/BlockEdit.h"
#include "passes/Passes.h"
#include "support/Diagnostic.h"

namespace tessera {

namespace {

// Whether `v` is computed from program_id axis 0. Block arguments (the loop's induction
// variable among them) are not: the values the producer computes (producer_slice) are the top
// level's pure scalar ops and the induction variable, never a carried value. `seen` memoizes
// (the operands form a DAG).
bool varies_with_axis0(const Value* v, std::map<const Value*, bool>& seen) {
  const Op* d = v ? v->def : nullptr;
  if (!d) return false;
  if (auto it = seen.find(v); it != seen.end()) return it->second;
  bool varies = d->kind == OpKind::ProgramId && d->attr_int("axis") == 0;
  for (const Value* o : d->operands) varies = varies || varies_with_axis0(o, seen);
  return seen[v] = varies;
}

// Whether a ring tile of this shape can be copied in two halves of whole 128-byte swizzle atoms
// (8 rows each), one per CTA of the pair.
bool halves_fit(const std::vector<int64_t>& box) { return box.size() == 2 && box[1] % 16 == 0; }

// Whether swap-dot-operands swapped `loop`'s dot (not the knob, which asks: the pass declines
// dots it cannot swap, and those run as they are): the dot reads a^T, a permute of the batch's
// tile, as its B, and the loop's transposed accumulator is permuted back after it. (A product
// merely stored transposed has neither permuted operand.)
bool swapped_product(const Kernel& k, const Op& loop) {
  bool reads_a_transposed = false;
  walk(const_cast<Op&>(loop).region(0), [&](Op& o) {
    reads_a_transposed = reads_a_transposed ||
                         (o.kind == OpKind::Dot && o.operand(1)->def && o.operand(1)->def->kind == OpKind::Permute);
  });
  if (!reads_a_transposed) return false;
  for (const auto& op : k.body->ops)
    if (op->kind == OpKind::Permute && op->operand(0) == loop.result()) return true;
  return false;
}

// The first op of `k` that writes memory other than a top-level store_tile (null: none).
const Op* other_write(const Kernel& k) {
  const Op* found = nullptr;
  walk(*k.body, [&](Op& op) {
    if (found) return;
    const bool top_store = op.kind == OpKind::StoreTile && op.parent == k.body.get();
    if (may_write_memory(op) && !top_store) found = &op;
  });
  return found;
}

}  // namespace

void pair_programs(Kernel& k, const GpuLoweringOptions& o, PassStats& stats) {
  const ConstexprDecl* knob = k.find_constexpr("cluster_m");
  if (!knob || knob->value == 1) return;
  if (knob->value != 2)
    throw TesseraError(knob->loc, "knob cluster_m = " + std::to_string(knob->value) +
                                      ": 1 (one CTA per program, the default) or 2 (CTA pairs along axis 0 sharing "
                                      "ring tiles by TMA multicast)");
  if (o.split_k) return;  // (the split-K compilation is never persistent)
  Op* yield = k.grid ? k.grid->terminator() : nullptr;
  Op* loop = nullptr;
  for (const auto& op : k.body->ops)
    if (op->kind == OpKind::For && op->has_attr("warp_specialize") && op->attr_int("warp_specialize") == 1) loop = op.get();
  std::string why;
  std::map<const Value*, bool> seen;
  auto varies_with_axis0 = [&](const Value* v) { return tessera::varies_with_axis0(v, seen); };
  std::vector<std::pair<const Op*, std::vector<int64_t>>> boxes;
  if (!yield || !yield->has_attr("persistent") || yield->attr_int("persistent") != 1)
    why = "the kernel is not persistent";
  else if (!loop)
    why = "no top-level loop has a producer warpgroup";
  else if (loop->has_attr("consumers") && loop->attr_int("consumers") == 2)
    why = "the ping-pong consumers take programs 2j + c of their own CTA";
  else if (yield->has_attr("prefetch_buffers"))
    why = "the programs prefetch their tiles (prefetch-programs)";
  else if (yield->has_attr("stream_k") && yield->attr_int("stream_k") == 1)
    why = "stream-K shares the last wave's K loops out (stream-k-programs): a pair's parts would not run in step";
  else if (const ConstexprDecl* c = k.find_constexpr("cluster_size"); c && c->value != 1)
    why = "the kernel already runs each program on a cluster (cluster_size)";
  else if (swapped_product(k, *loop))
    why = "its dot is swapped (swap-dot-operands: the batch's few rows are one program row, so the pair's second "
          "program would lie past the grid)";
  else if (const Op* w = other_write(k))
    why = "the " + std::string(w->name()) + " at " + w->loc.str() +
          " writes memory (the program past an odd grid skips only top-level store_tile ops)";
  else if (varies_with_axis0(loop->operand(0)) || varies_with_axis0(loop->operand(1)) || varies_with_axis0(loop->operand(2)))
    why = "the loop's bounds depend on program_id axis 0 (the pair's two loops must run in step)";
  else
    boxes = tma_ring_boxes(k, *loop);
  std::vector<Op*> shared;
  for (const auto& [l, box] : boxes) {
    bool per_program = false;
    for (size_t i = 1; i < l->operands.size(); ++i) per_program |= varies_with_axis0(l->operand(i));
    if (!per_program && halves_fit(box)) shared.push_back(const_cast<Op*>(l));
  }
  if (why.empty() && shared.empty())
    why = boxes.empty() ? "the loop's ring is not copied by TMA"
                        : "no ring tile is the same for both programs of a pair (2-D, of rows a multiple of 16, at indices "
                          "that do not depend on program_id axis 0)";
  if (!why.empty()) {
    stats.notes.push_back((loop ? "for at " + loop->loc.str() : std::string("kernel")) + ": cluster_m = 2 not taken: " + why);
    ++stats["pair-programs.declined"];
    return;
  }
  yield->set_attr("program_pairs", int64_t{1});
  for (Op* l : shared) l->set_attr("multicast", int64_t{1});
  ++stats["pair-programs.pairs"];
  stats["pair-programs.multicast-loads"] += static_cast<int64_t>(shared.size());
}

}  // namespace tessera
