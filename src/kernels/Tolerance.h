// How closely a kernel's outputs must match its reference: the one place that tests and
// `tessera run --check` read. An element passes when
//   |got - want| <= atol + rtol * |want| + bound
// (NaN matches NaN, an infinity the same infinity). atol and rtol are per element type
// (tolerance_for); `bound` is per element and covers the reductions (docs/checking.md).
//
// atol and rtol: the reference computes in double and rounds once to the output type; kernels
// compute in f32, so these allow about one unit in the last place of the output type plus the
// rounding of a few elementwise ops, and are still tight enough to catch a wrong element.
// The type is the output's: matmul_fp8 (f8e4m3 inputs, f32 accumulation, scaled in f32, c in
// bf16) is held to the bf16 row plus its dot's bound.
//
// bound: a sum or dot of n terms rounded in f32 (in any order, blocked, pairwise or
// sequential, with or without FMA) lies within gamma_n * sum |term| of the exact sum, where
// gamma_n = n u / (1 - n u) and u is the accumulator's unit roundoff (Higham, Accuracy and
// Stability of Numerical Algorithms, 2nd ed., section 3.1). A library kernel's reference
// reports that bound for each output element (LibraryKernel::error_bounds: for matmul gamma_K
// * (|a| @ |b|)); a .tile file checked against the interpreter gets the rule of
// tile_error_bounds (check/Compare.h), which estimates the magnitude from the outputs.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "ir/Type.h"

namespace tessera {

struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

inline Tolerance tolerance_for(ScalarKind k) {
  switch (k) {
    case ScalarKind::F64: return {1e-12, 1e-12};
    case ScalarKind::F32: return {1e-5, 1e-5};
    case ScalarKind::F16: return {1e-3, 2e-3};
    case ScalarKind::BF16: return {1e-2, 1.6e-2};
    case ScalarKind::F8E4M3: return {0.0625, 0.125};
    case ScalarKind::F8E5M2: return {0.125, 0.25};
    default: return {0, 0};  // integers are exact
  }
}

// gamma_n = n u / (1 - n u) for n roundings in the accumulator type `acc` (f32 for every
// library kernel: narrow inputs accumulate in f32). Infinite when n u >= 1: no bound holds then
// (an f16 accumulator over 2048 terms may be wrong in every digit), and a check says so by
// accepting any value rather than pretending.
inline double gamma_n(int64_t n, ScalarKind acc = ScalarKind::F32) {
  double nu = static_cast<double>(n < 0 ? 0 : n) * unit_roundoff(acc);
  return nu < 1 ? nu / (1 - nu) : INFINITY;
}

// Per-element bounds for a kernel's view tensors, in the order of Kernel::view_params(): an
// empty vector for a tensor with no bound (inputs, outputs without reductions), else one
// bound per element, or one value for every element (tile_error_bounds': a vector of
// doubles the size of every float view was twice an f32 run's tensors under --check), added to
// the dtype's atol + rtol * |want|.
using ErrorBounds = std::vector<std::vector<double>>;
// ErrorBounds for `views` tensors with one tensor's bounds, at `index` (moved in: a braced
// list would copy the vector twice).
inline ErrorBounds bounds_of_one(size_t views, size_t index, std::vector<double> bounds) {
  ErrorBounds b(views);
  b[index] = std::move(bounds);
  return b;
}
// Element i's bound in one tensor's entry of ErrorBounds (0 where it has none).
inline double error_bound_at(const std::vector<double>& b, int64_t i) {
  return b.empty() ? 0 : b.at(b.size() == 1 ? 0 : static_cast<size_t>(i));
}

}  // namespace tessera
