// store-epilogues-by-tma (GPU lowering, sm_90a): a persistent kernel's result tile goes out by
// TMA from shared memory.
//
// In a kernel that persist-programs made persistent, a top-level `store_tile` of a wgmma
// accumulator (an mma layout of version 3, one 64-row block per warpgroup, N a multiple of 64)
// to a 2-D view of 16-bit elements gets `tma_store = 1`. The layout emitter then has each
// compute warpgroup write its 64-row block into shared memory in 64 x 64 boxes (two 8 KiB
// buffers in turn, 128-byte swizzled) and one of its threads store each box with TMA, without
// waiting for the writes: the compute warps go on to the next program's loop while the copies
// run. Stored from registers, every thread writes 4-byte pieces of 8 rows per instruction, and
// the tensor cores wait for all of them: on the H200 that epilogue was the whole gap between the
// layout emitter's matmul and the planning emitter's (bf16 4096^3: 0.202 against 0.176 ms; the
// planning emitter's own consumers storing from registers: 0.201; bench/RESULTS.md, session 20).
// The TMA store leaves out what lies past the view's end, as the plain store does.
//
// The staging buffers take 16 KiB per compute warpgroup: where the kernel's shared memory then
// does not fit, the layout emitter sets `tma_store = 0` and stores from registers, with a note.
//
// Knob tma_store_epilogue = 0 (the planning emitter's switch of the same name) leaves every
// store from registers; 1, the default, lets the pass decide. Knob epilogue_buffers = 4 (the
// planning emitter's; 2 is the default) gives the chosen store `tma_buffers = 4`: four 8 KiB
// boxes per warpgroup instead of two, so that no box waits for an earlier box's store to finish
// reading its buffer (at the cost of 16 KiB more shared memory per warpgroup, which the ring
// may then miss).
//
// A written `tma_store` stays; a written 1 that does not qualify is set to 0 with a note.
#include <algorithm>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

// Why `store` cannot go out by TMA ("" when it can).
std::string why_not(const Kernel& k, const Op& store) {
  const Op* y = k.grid ? k.grid->terminator() : nullptr;
  if (!y || !y->has_attr("persistent") || y->attr_int("persistent") != 1) return "the kernel is not persistent";
  if (store.parent != k.body.get()) return "the store is not at the kernel's top level";
  const Value *view = store.operand(0), *tile = store.operand(1);
  if (std::find(k.params.begin(), k.params.end(), view) == k.params.end() || view->type.rank() != 2)
    return "the view is not a 2-D parameter of the kernel";
  if (view->type.elem != ScalarKind::BF16 && view->type.elem != ScalarKind::F16) return "the view is not of 16-bit floats";
  const Layout& L = tile->type.layout;
  if (L.kind != Layout::Kind::Mma || L.version != 3 || tile->type.rank() != 2) return "the tile is not a wgmma accumulator";
  const std::vector<int64_t> S = static_shape(tile->type.shape);
  if (L.warps.size() != 2 || L.warps[1] != 1 || (L.warps[0] != 4 && L.warps[0] != 8) || S[0] != 16 * L.warps[0] ||
      L.instr.size() != 2 || L.instr[1] != S[1] || S[1] % 64 != 0)
    return "the tile is not one 64-row block per warpgroup of a width of 64s";
  return "";
}

}  // namespace

void store_epilogues_by_tma(Kernel& k, PassStats& stats) {
  const ConstexprDecl* knob = k.find_constexpr("tma_store_epilogue");
  if (knob && knob->value != 0 && knob->value != 1)
    throw TesseraError(knob->loc, "knob tma_store_epilogue = " + std::to_string(knob->value) +
                                      ": 0 (the result stored from registers) or 1 (the default: by TMA where it can)");
  const bool off = knob && knob->value == 0;
  const ConstexprDecl* bufs = k.find_constexpr("epilogue_buffers");
  if (bufs && bufs->value != 2 && bufs->value != 4)
    throw TesseraError(bufs->loc, "knob epilogue_buffers = " + std::to_string(bufs->value) + ": 2 (the default) or 4");
  const Op* chosen = nullptr;
  std::vector<Op*> stores;  // nested ones too: a written 1 there is taken back
  walk(*k.body, [&](Op& op) {
    if (op.kind == OpKind::StoreTile) stores.push_back(&op);
  });
  for (Op* op : stores) {
    const bool written = op->has_attr("tma_store");
    if (written && op->attr_int("tma_store") == 0) continue;
    std::string why = why_not(k, *op);
    if (why.empty() && off && !written) continue;  // (the knob: stores from registers)
    if (why.empty() && chosen) why = "the kernel's staging buffers serve the store at " + chosen->loc.str();
    if (why.empty()) {
      chosen = op;
      if (!written) {
        op->set_attr("tma_store", int64_t{1});
        ++stats["store-epilogues-by-tma.stores"];
      }
      if (bufs && bufs->value == 4 && !op->has_attr("tma_buffers")) op->set_attr("tma_buffers", int64_t{4});
    } else if (written) {
      op->set_attr("tma_store", int64_t{0});
      std::erase_if(op->attrs, [](const NamedAttr& a) { return a.name == "tma_buffers"; });
      stats.notes.push_back("store_tile at " + op->loc.str() + ": tma_store = 1 not taken: " + why);
    }
  }
}

}  // namespace tessera
