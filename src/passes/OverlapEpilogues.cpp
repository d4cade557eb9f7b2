// overlap-epilogues (GPU lowering, sm_90a, after pingpong-consumers): a program's TMA-stored
// result goes out during the next program's K loop.
//
// A store with store-epilogues-by-tma's `tma_store = 1` gets `overlap = 1`. The layout emitter
// then has each compute warpgroup pack its finished block into 16-bit pairs that stay in
// registers, and store box c of it (64 x 64, through the staging buffers, by TMA) during
// iteration c of the CTA's next program's K loop, after that iteration's wgmma group is issued:
// the tensor cores run the next program's first groups instead of waiting for the epilogue.
// Boxes the next loop has too few iterations for follow it, and the CTA's last program's boxes
// follow its program loop. The planning emitter does the same (knob epilogue_overlap): on the
// H200 +2% at 4096^3 and +3% at 4096 x 14336 x 4096 (bench/RESULTS.md, session 10); the layout
// emitter without it was 3-6% behind the planning emitter there (H100, session 39).
//
// Taken where the kernel's K loop keeps a wgmma group in flight (pipeline-loops' `in_flight =
// 1`: the boxes go out after each iteration's group is issued) and the registers fit: each compute thread keeps its accumulator slots (f32) and the
// packed pairs (half as many registers) beside about 40 for the loop, in what it has (255 with
// one compute warpgroup; with more, what setmaxnreg gives the compute warps once the producer
// keeps 40, at most 240 as the layout emitter moves them): a 128 x 256 tile split over two
// warpgroups fits (128 + 64 + 40 = 232). Not under ping-pong consumers (pingpong-consumers'
// `consumers = 2`), whose other consumer's K loop already runs beside each one's epilogue.
//
// Knob epilogue_overlap = 0 keeps the store after the loop; a written `overlap` stays unless it
// is 1 on a store that does not qualify (set to 0 with a note).
#include <algorithm>

#include "ir/IR.h"
#include "passes/Passes.h"
#include "support/Diagnostic.h"

namespace tessera {

namespace {

// Why `store` cannot overlap the next program's loop ("" when it can).
std::string why_not(const Kernel& k, const Op& store) {
  if (!store.has_attr("tma_store") || store.attr_int("tma_store") != 1) return "the store is not tma_store = 1";
  // The compute warps: the accumulator layout's warps, times two ping-pong consumers.
  bool pingpong = false, in_flight = false;
  walk(*k.body, [&](Op& op) {
    pingpong |= op.kind == OpKind::For && op.has_attr("consumers") && op.attr_int("consumers") > 1;
    in_flight |= op.kind == OpKind::Dot && op.has_attr("in_flight") && op.attr_int("in_flight") == 1;
  });
  if (pingpong) return "ping-pong consumers: the other consumer's K loop runs beside each one's epilogue already";
  // The boxes go out beside the next program's wgmma groups in flight; without one the block
  // would only wait in registers across the loop.
  if (!in_flight) return "no wgmma dot in flight (pipeline-loops' in_flight = 1) to store the boxes beside";
  // The compute warps: the accumulator layout's.
  const Type& t = store.operand(1)->type;
  int64_t warps = 1;
  for (int64_t w : t.layout.warps) warps *= w;
  const int64_t threads = 32 * warps, compute_warps = warps;
  const int64_t acc = shape_numel(t.shape) / threads, packed = acc / 2;
  const int64_t room = compute_warps > 4 ? std::min<int64_t>(240, (65536 - 128 * 40) / (compute_warps * 32) / 8 * 8) : 255;
  if (acc + packed + 40 > room)
    return std::to_string(acc) + " accumulator and " + std::to_string(packed) +
           " packed registers per thread do not fit beside the loop's in " + std::to_string(room);
  return "";
}

}  // namespace

void overlap_epilogues(Kernel& k, PassStats& stats) {
  const ConstexprDecl* knob = k.find_constexpr("epilogue_overlap");
  if (knob && knob->value != 0 && knob->value != 1)
    throw TesseraError(knob->loc, "knob epilogue_overlap = " + std::to_string(knob->value) +
                                      ": 0 (each program stores its result before the next) or 1 (the default: during "
                                      "the next program's first iterations)");
  const bool off = knob && knob->value == 0;
  walk(*k.body, [&](Op& op) {
    if (op.kind != OpKind::StoreTile) return;
    const bool written = op.has_attr("overlap");
    if (written && op.attr_int("overlap") == 0) return;
    if (!written && (off || !op.has_attr("tma_store") || op.attr_int("tma_store") != 1)) return;
    const std::string why = why_not(k, op);
    if (why.empty()) {
      if (!written) {
        op.set_attr("overlap", int64_t{1});
        ++stats["overlap-epilogues.stores"];
      }
    } else if (written) {
      op.set_attr("overlap", int64_t{0});
      stats.notes.push_back("store_tile at " + op.loc.str() + ": overlap = 1 not taken: " + why);
    } else {
      ++stats["overlap-epilogues.declined"];
    }
  });
}

}  // namespace tessera
