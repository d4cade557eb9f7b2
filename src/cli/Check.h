// Comparing a backend's outputs with the reference's, elementwise, within a tolerance.
#pragma once

#include <string>
#include <vector>

#include "ir/IR.h"
#include "runtime/Tensor.h"

namespace tessera::cli {

struct Comparison {
  double max_abs_err = 0;
  double max_rel_err = 0;  // over elements whose expected value is nonzero
  int64_t mismatches = 0;  // elements outside atol + rtol * |expected|
  int64_t elements = 0;
  std::string first_mismatch;  // "y[3, 17]: got 0.51 want 0.25 (atol=.. rtol=..)"

  bool ok() const { return mismatches == 0; }
};

// Compare every view tensor of `k` (outputs, and inputs a kernel must leave alone) in `got`
// against `want`, with the tolerance of each tensor's dtype (kernels/Tolerance.h). NaN
// matches NaN; an infinity matches the same infinity.
Comparison compare_outputs(const Kernel& k, const std::vector<Tensor>& got,
                           const std::vector<Tensor>& want);

}  // namespace tessera::cli
