// assign-launch-shape (GPU lowering, first): the warps of every program, decided once and
// written in the IR.
//
// On a cluster (`num_ctas = C` on the yield, cluster-programs) `num_warps` counts the
// program's warps over its C CTAs: C times what the rule gives one CTA holding 1/C of the
// tiles (or C times the kernel's `num_warps` constexpr, which counts a CTA's warps).
//
// The grid block's yield gets `num_warps = N` (default_num_warps: the kernel's `num_warps`
// constexpr when it gives one, else the rule on tile sizes both CUDA emitters follow), and every
// later pass of the list and the layout emitter read it from there (launch_warps), rather than
// each working it out again from IR that the passes before it have changed. A `num_warps`
// written on the yield stays (the verifier holds it to 1..32). A count that is not a power of
// two (written, or the kernel's constexpr: 6, say) is rounded down to one, with a note
// (stat assign-launch-shape.rounded-down): layouts place elements by the bits of the warp
// number. A kernel without a grid block runs one program and keeps the rule.
//
// On sm_90a one exception to the rule: a kernel whose dots all take 16-bit or f8 float operands
// into accumulators of an odd number of 64-row blocks (matmul's BLOCK_M = 64, which the tuner
// picks for a 128-row GEMM; 192 rows, the swapped decode product of a 192-column tile) of at
// most 128 f32 registers a thread on one warpgroup gets 4 warps where the rule says 8. A wgmma warpgroup takes whole 64-row blocks, so at 8 warps (two
// warpgroups, each half the rows) assign-layouts would leave such a dot to mma.sync; at 4 its one
// warpgroup runs wgmma and the layout emitter adds the producer warpgroup, the planning
// emitter's 256 threads (H100, bf16 128 x 14336 x 4096: 0.158 ms on mma.sync against the
// planning emitter's 0.050).
#include <bit>

#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

namespace {

// The rule's warps, or 4 where every dot of the kernel is an odd number of 64-row wgmma blocks
// (above).
int warps_for(const Kernel& k, const GpuLoweringOptions& o) {
  // A program on a cluster (cluster-programs): each CTA's warps, by the rule over its part of
  // the tiles (or the kernel's num_warps), times its CTAs.
  if (const int ctas = launch_ctas(k); ctas > 1) return default_num_warps(k, ctas) * ctas;
  const int warps = default_num_warps(k);
  const ConstexprDecl* d = k.find_constexpr("num_warps");
  if (!o.wgmma || warps != 8 || (d && d->value >= 1)) return warps;
  bool any = false, all_odd_blocks = true;
  walk(const_cast<Block&>(*k.body), [&](Op& op) {
    if (op.kind != OpKind::Dot) return;
    any = true;
    const Type &a = op.operand(0)->type, &r = op.result()->type;
    // (At most 128 accumulator registers a thread: 64 x 256, 192 x 32; a 192 x 128 tile stays.)
    all_odd_blocks &= tensor_core_float(a.elem) && r.rank() == 2 && shape_is_static(r.shape) &&
                     static_shape(r.shape)[0] % 64 == 0 && static_shape(r.shape)[0] % 128 != 0 &&
                     static_shape(r.shape)[0] * static_shape(r.shape)[1] <= 128 * 128;
  });
  return any && all_odd_blocks ? 4 : warps;
}

}  // namespace

int launch_warps(const Kernel& k) {
  if (k.grid)
    if (const Op* y = k.grid->terminator(); y && y->has_attr("num_warps")) return static_cast<int>(y->attr_int("num_warps"));
  return default_num_warps(k);
}

void assign_launch_shape(Kernel& k, const GpuLoweringOptions& o, PassStats& stats) {
  if (!k.grid) return;
  Op* yield = k.grid->terminator();
  if (!yield) return;
  const bool written = yield->has_attr("num_warps");
  int warps = written ? static_cast<int>(yield->attr_int("num_warps")) : warps_for(k, o);
  // Layouts place a tile's elements by the bits of the lane and warp numbers, so a program's
  // warps are a power of two: a `num_warps` of 6 (the kernel's constexpr or a written one) runs
  // 4, with a note; the results are the same.
  if (warps > 0 && !std::has_single_bit(unsigned(warps))) {
    const int pow2 = static_cast<int>(std::bit_floor(unsigned(warps)));
    stats.notes.push_back("assign-launch-shape: num_warps = " + std::to_string(warps) + " is not a power of two: the program runs " +
                          std::to_string(pow2) + " warps (layouts spread tiles over the bits of the warp number)");
    ++stats["assign-launch-shape.rounded-down"];
    warps = pow2;
    yield->set_attr("num_warps", int64_t{warps});
  }
  if (written) return;
  yield->set_attr("num_warps", int64_t{warps});
  ++stats["assign-launch-shape.assigned"];
}

}  // namespace tessera
