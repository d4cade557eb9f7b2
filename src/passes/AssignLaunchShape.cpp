// assign-launch-shape (GPU lowering, first): the warps of every program, decided once and
// written in the IR.
//
// The grid block's yield gets `num_warps = N` (default_num_warps: the kernel's `num_warps`
// constexpr when it gives one, else the rule on tile sizes both CUDA emitters follow), and every
// later pass of the list and the layout emitter read it from there (launch_warps), rather than
// each working it out again from IR that the passes before it have changed. A `num_warps`
// written on the yield stays (the verifier holds it to 1..32). A kernel without a grid block
// runs one program and keeps the rule.
#include "ir/IR.h"
#include "passes/Passes.h"

namespace tessera {

int launch_warps(const Kernel& k) {
  if (k.grid)
    if (const Op* y = k.grid->terminator(); y && y->has_attr("num_warps")) return static_cast<int>(y->attr_int("num_warps"));
  return default_num_warps(k);
}

void assign_launch_shape(Kernel& k, PassStats& stats) {
  if (!k.grid) return;
  Op* yield = k.grid->terminator();
  if (!yield || yield->has_attr("num_warps")) return;
  yield->set_attr("num_warps", int64_t{default_num_warps(k)});
  ++stats["assign-launch-shape.assigned"];
}

}  // namespace tessera
