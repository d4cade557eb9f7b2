// persist-programs (GPU lowering, sm_90a): persistent CTAs for a kernel with a producer
// warpgroup.
//
// A kernel whose top-level loop has a producer warpgroup (specialize-warps' `warp_specialize =
// 1`) gets `persistent = 1, group_rows = 8` on its grid block's yield: the cuda backend then
// launches one CTA per SM (no more than there are programs), and each CTA loops over the
// programs t = blockIdx.x, + gridDim.x, ..., taking them in groups of 8 values of program axis 0
// for every value of axis 1 in turn (axis 2 slowest), as the planning emitter's persistent
// matmul does. What that buys, against one CTA per program:
//  - the producer runs on into the next program's copies while the compute warps finish this
//    one's epilogue, so the next loop starts with a full ring instead of waiting for its first
//    stage;
//  - a CTA's setup (the ring's barriers, the registers moved between warpgroups) is paid once
//    per SM, not once per program;
//  - the programs running at once share rows of A and columns of B, which then stay in L2.
// Programs are independent by the language's rules, so any order and any number per CTA give
// the same results.
//
// Only where the producer's loop is the kernel's one pipelined top-level loop: another loop's
// ring would have its barriers set up again for every program (stat
// persist-programs.other-rings). No cost model decides yet: on the H200 the plain matmul gains
// 3% and matmul + bias + GELU loses 2.5% (bench/RESULTS.md, session 20).
//
// A written `persistent` stays (0 keeps one CTA per program); a written 1 that does not qualify
// is set to 0 with a note, unless the yield also has prefetch-programs' `prefetch_buffers` (and a written `group_rows` goes with it). A written `group_rows` on
// a persistent kernel stays.
//
// A kernel without a producer warpgroup whose top level has a pipelined loop carrying one value
// through one dot (a GEMM's K loop on the mma.sync path) and a grid of two axes keeps one CTA per program but gets `group_rows = 8`
// alone: the programs are renumbered into the same grouped order, so that the CTAs running at
// once share rows of A and columns of B in L2 (the planning emitter's grouped order; stat
// persist-programs.grouped).
#include <vector>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

void take_back_persistence(Op& yield) {
  yield.set_attr("persistent", int64_t{0});
  std::erase_if(yield.attrs, [](const NamedAttr& a) { 
    return a.name == "group_rows" || a.name == "program_pairs" || a.name == "stream_k";
  });
}

void persist_programs(Kernel& k, PassStats& stats) {
  if (!k.grid) return;
  Op* yield = k.grid->terminator();
  if (!yield || yield->operands.empty()) return;
  const bool written = yield->has_attr("persistent");
  if (written && yield->attr_int("persistent") == 0) return;
  // Persistent for program prefetch (prefetch-programs' marks, written by hand or by an earlier
  // run): the prefetched loads need it, and the verifier rejects them without it.
  if (written && yield->has_attr("prefetch_buffers")) return;
  const Op *producer = nullptr, *other_ring = nullptr;
  for (const auto& op : k.body->ops) {
    if (op->kind != OpKind::For) continue;
    if (op->has_attr("warp_specialize") && op->attr_int("warp_specialize") == 1) producer = op.get();
    else if (op->has_attr("pipeline") && op->attr_int("pipeline") >= 2) other_ring = op.get();
  }
  std::string why;
  if (!producer && !written && !yield->has_attr("group_rows") && yield->operands.size() == 2)
    for (const auto& op : k.body->ops) {
      // A GEMM's K loop: one carried value, one dot (an attention's loop over K/V tiles carries
      // more: its programs share a head's K and V in launch order already).
      if (op->kind != OpKind::For || !op->has_attr("pipeline") || op->attr_int("pipeline") < 2 || op->operands.size() != 4)
        continue;
      int dots = 0;
      walk(op->region(0), [&](Op& o) { dots += o.kind == OpKind::Dot; });
      if (dots != 1) continue;
      yield->set_attr("group_rows", int64_t{8});
      ++stats["persist-programs.grouped"];
      break;
    }
  if (!producer) why = "no loop of the kernel has a producer warpgroup";
  // Another ring loop's barriers would be set up again by every program, while the compute
  // warps may still wait on them for the last one.
  else if (other_ring) why = "the pipelined loop at " + other_ring->loc.str() + " has a ring of its own";
  if (!why.empty()) {
    if (written) {
      take_back_persistence(*yield);
      stats.notes.push_back("grid at " + yield->loc.str() + ": persistent = 1 not taken: " + why);
    } else if (producer) {
      ++stats["persist-programs.other-rings"];
    }
    return;
  }
  if (!written) {
    yield->set_attr("persistent", int64_t{1});
    ++stats["persist-programs.persistent"];
  }
  if (!yield->has_attr("group_rows")) yield->set_attr("group_rows", int64_t{8});
}

}  // namespace tessera
