// stage-epilogue-stores (GPU lowering, mma.sync): a result tile goes out through shared memory
// in 16-byte rows.
//
// A top-level `store_tile` of an mma.sync accumulator layout (mma version 2) to a 2-D parameter
// view whose rows are whole 16-byte chunks gets `staged = 1`. The layout emitter then has every
// thread write its slots (converted to the view's type) into a shared tile with rows padded by
// 16 bytes, and the tile go out in 16-byte row chunks, consecutive threads on consecutive
// chunks: whole 128-byte lines a warp, where the accumulator's own layout stores 4-byte pieces of
// 8 rows an instruction (64 such stores a thread for a 128 x 256 tile of 8 warps, whose queue
// stalls the warps: Nsight Compute's lg_throttle). The tile reuses the shared memory of the
// kernel's rings, which are done by then; barriers before, between and after. On the H100 the
// mma.sync matmul at 4096^3 ran 0.355 -> 0.342 ms with it, and the planning emitter's own
// staged epilogue, stored directly instead, 0.300 -> 0.319 (bench/RESULTS.md, session 41).
//
// Not where the kernel is persistent or warp-specialized (its next program's copies or a
// producer's may be using that shared memory), where threads hold copies of the tile (it does
// not cover its warp grid), or where a value the layout emitter holds in shared memory (a
// shared tile, a dot operand) is made before the store and read after it. The emitter checks
// the last against what it actually holds and stores from registers where it must (stat
// `staged-stores-declined`), or where the shared memory the kernel already has is too small for
// the tile (`staged-stores-without-room`).
//
// Knob mma_smem_epilogue (the planning emitter's of the same meaning): 0 leaves every store
// from registers; 1, or no such constexpr, stages the stores that qualify.
//
// A written `staged` stays; a written 1 that does not qualify is set to 0 with a note.
#include <algorithm>
#include <set>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

// Why `store` cannot be staged ("" when it can).
std::string why_not(const Kernel& k, const Op& store) {
  const Op* y = k.grid ? k.grid->terminator() : nullptr;
  if (y && y->has_attr("persistent") && y->attr_int("persistent") == 1) return "the kernel is persistent";
  if (store.parent != k.body.get()) return "the store is not at the kernel's top level";
  if (store.has_attr("tma_store") && store.attr_int("tma_store") == 1) return "it goes out by TMA";
  const Value *view = store.operand(0), *tile = store.operand(1);
  if (std::find(k.params.begin(), k.params.end(), view) == k.params.end() || view->type.rank() != 2)
    return "the view is not a 2-D parameter of the kernel";
  const Layout& L = tile->type.layout;
  if (L.kind != Layout::Kind::Mma || L.version != 2 || tile->type.rank() != 2)
    return "the tile is not in an mma.sync accumulator layout";
  const std::vector<int64_t> S = static_shape(tile->type.shape);
  if ((S[1] * scalar_bytes(view->type.elem)) % 16 != 0) return "its rows are not whole 16-byte chunks";
  if (L.warps.size() != 2 || S[0] % (16 * L.warps[0]) != 0 || S[1] % (8 * L.warps[1]) != 0)
    return "the tile does not cover its warp grid (threads hold copies)";
  // Values in shared memory (a shared tile, or a dot operand, which the layout emitter leaves in
  // shared memory for its fragment loads) made before the store at the top level and read after
  // it: the staged tile would overwrite them.
  std::set<const Value*> before;
  bool ws = false, after = false, held_after = false;
  auto in_shared = [](const Value* v) {
    return v->type.space == "shared" || v->type.layout.kind == Layout::Kind::Shared ||
           v->type.layout.kind == Layout::Kind::DotOperand;
  };
  auto visit = [&](Op& o) {
    if (o.kind == OpKind::For && o.has_attr("warp_specialize") && o.attr_int("warp_specialize") == 1) ws = true;
    if (!after) return;
    for (const Value* v : o.operands) held_after |= before.count(v) != 0 && in_shared(v);
  };
  for (const auto& op : k.body->ops) {
    visit(*op);
    for (const auto& r : op->regions) walk(*r, visit);
    if (!after)
      for (const Value* r : op->results) before.insert(r);
    if (op.get() == &store) after = true;
  }
  if (ws) return "the kernel has a warp-specialized loop";
  if (held_after) return "a value held in shared memory is read after it";
  return "";
}

}  // namespace

void stage_epilogue_stores(Kernel& k, PassStats& stats) {
  const ConstexprDecl* knob = k.find_constexpr("mma_smem_epilogue");
  if (knob && knob->value != 0 && knob->value != 1)
    throw TesseraError(knob->loc, "knob mma_smem_epilogue = " + std::to_string(knob->value) +
                                      ": 0 (an mma.sync result stored from registers) or 1 (through shared memory)");
  const bool off = knob && knob->value == 0;
  std::vector<Op*> stores;  // nested ones too: a written 1 there is taken back
  walk(*k.body, [&](Op& op) {
    if (op.kind == OpKind::StoreTile) stores.push_back(&op);
  });
  for (Op* op : stores) {
    const bool written = op->has_attr("staged");
    if (written && op->attr_int("staged") == 0) continue;
    const std::string why = why_not(k, *op);
    if (why.empty()) {
      if (!written && !off) {
        op->set_attr("staged", int64_t{1});
        ++stats["stage-epilogue-stores.stores"];
      }
    } else if (written) {
      op->set_attr("staged", int64_t{0});
      stats.notes.push_back("store_tile at " + op->loc.str() + ": staged = 1 not taken: " + why);
    }
  }
}

}  // namespace tessera
