// Comparing a kernel's outputs with a reference's, elementwise, within a tolerance: what
// `tessera run --check` and `--check-passes` report (docs/checking.md).
#pragma once

#include <string>
#include <vector>

#include "ir/IR.h"
#include "kernels/Tolerance.h"
#include "runtime/Tensor.h"

namespace tessera {

struct Comparison {
  double max_abs_err = 0;
  double max_rel_err = 0;  // over elements whose expected value is nonzero
  int64_t mismatches = 0;  // elements outside atol + rtol * |expected| + bound
  int64_t elements = 0;
  // The largest |got - want| / (atol + rtol * |want| + bound) over finite elements: how much
  // of what is allowed the worst element used (above 1: a mismatch).
  double worst_fraction = 0;
  std::string first_mismatch;  // "y[3, 17]: got 0.51 want 0.25 (atol=.. rtol=.. bound=..)"

  bool ok() const { return mismatches == 0; }
};

// Compare every view tensor of `k` (outputs, and inputs a kernel must leave alone) in `got`
// against `want`, with the tolerance of each tensor's dtype (kernels/Tolerance.h) plus
// `bounds` where it has an entry for the tensor. NaN matches NaN; an infinity matches the same
// infinity.
Comparison compare_outputs(const Kernel& k, const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                           const ErrorBounds& bounds = {});

// The bounds for two runs of `k` that may round its reductions differently and have no
// reference to give magnitudes (a .tile file on a backend against the interpreter, a pass's
// output against its input): when `k` has a rounded reduction (a float dot, reduce or scan of
// kind sum or prod, reduce_with, scan_with, an atomic add), every float view tensor t gets
// 2 * gamma_L * max |want_t| (one value for all its elements), L being the largest view dim of
// `k` at `sizes` (the longest a reduction over one dim can be) and gamma's unit roundoff the
// coarsest of those reductions' accumulators. Kernels without one get none. docs/checking.md says why.
ErrorBounds tile_error_bounds(const Kernel& k, const Sizes& sizes, const std::vector<Tensor>& want);

}  // namespace tessera
