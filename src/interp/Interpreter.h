// The reference interpreter: the definition of what every Lite program means.
//
// Runs a bound kernel (no constexpr left) over its whole grid, program instances in
// row-major order of (z, y, x)... sequentially, on host tensors. Exact: narrow floats are
// rounded after every op, integers wrap around. Errors (out-of-bounds gather/scatter, division
// by zero, a Raw op) throw TesseraError naming the op's location and the offending index.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ir/IR.h"
#include "ir/Struct.h"
#include "runtime/Tensor.h"

namespace tessera {

struct InterpOptions {
  // A `while` that runs longer than this is reported as an error instead of hanging; the
  // default is every backend's limit (kMaxWhileIterations, src/ir/Struct.h), smaller values are
  // for tests.
  int64_t max_while_iterations = kMaxWhileIterations;
};

void run_interp(const Kernel& bound_kernel, std::vector<KernelArg>& args,
                const InterpOptions& opts = {});

// The sizes of the kernel's grid for these arguments (1 for an axis the grid does not yield):
// how many programs run_interp would run; the grid block's own errors are thrown as there.
std::array<int64_t, 3> interp_grid(const Kernel& bound_kernel, std::vector<KernelArg>& args);

}  // namespace tessera
