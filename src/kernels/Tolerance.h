// How closely a kernel's outputs must match its reference, per element type: the one place
// that tests and `tessera run --check` read. An element passes when
// |got - want| <= atol + rtol * |want| (NaN matches NaN, an infinity the same infinity).
//
// The reference computes in double and rounds once to the output type; kernels compute in f32
// and may sum in another order, so the bounds allow about one unit in the last place of the
// output type plus f32 accumulation error, and are still tight enough to catch a wrong element.
// The type is the output's: matmul_fp8 (f8e4m3 inputs, f32 accumulation, scaled in f32, c in
// bf16) is held to the bf16 row: beyond the final rounding it only has f32 roundings (of a sum
// of exact products, of the product of the scales, of the scaling): far below a bf16 ulp
// except where a sum cancels, which atol covers.
#pragma once

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

}  // namespace tessera
