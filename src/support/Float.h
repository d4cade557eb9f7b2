// Exact conversions between double and the narrow float formats.
//
// Rules (the same on every backend):
//  - f16, bf16: IEEE round-to-nearest-even; overflow gives +-inf; NaN stays NaN.
//  - f8e4m3 (OCP e4m3fn: no infinities, max 448) and f8e5m2 (max 57344): round-to-nearest-even,
//    saturating: finite values beyond the max become +-max, as PTX cvt.rn.satfinite does;
//    +-inf becomes +-max for e4m3 and stays +-inf for e5m2; NaN stays NaN.
//  - f32: IEEE round-to-nearest-even.
#pragma once

#include <cstdint>

#include "ir/Type.h"

namespace tessera {

// The bit pattern of `v` rounded to float kind `k`, in the low bits of the result.
uint64_t float_to_bits(ScalarKind k, double v);
// The value of bit pattern `bits` of float kind `k`.
double float_from_bits(ScalarKind k, uint64_t bits);
// The bits of `v`, a value of float kind `k`, as `bitcast` defines them (docs/semantics.md): a
// NaN gives k's positive canonical quiet NaN, since no backend keeps a NaN's payload or sign
// through loads, arithmetic and stores (x86's invalid-operation NaN is negative, PTX's cvt
// drops the sign).
uint64_t float_bits_canonical(ScalarKind k, double v);
// `bitcast` of one element: `v` (a float of kind `from`) or `i` (an integer of kind `from`,
// held wrapped) reinterpreted as kind `to` of the same width; the result in `*f` or `*i_out`.
void bitcast_scalar(ScalarKind from, ScalarKind to, double v, int64_t i, double* f, int64_t* i_out);
// `v` rounded to float kind `k` (float_from_bits(k, float_to_bits(k, v))).
double round_to_float(ScalarKind k, double v);
// `v` wrapped (two's complement) to integer kind `k` (i1: v & 1).
int64_t wrap_int(ScalarKind k, int64_t v);
// A float converted to integer kind `k`: truncated toward zero, saturated to k's range, NaN -> 0.
// For i1 it is `v != 0` (so NaN -> 1), as a cast to i1 means.
int64_t float_to_int(ScalarKind k, double v);
// An integer (u64 held as its bit pattern when `is_unsigned`) rounded to float kind `k` with one
// round-to-nearest-even, also for magnitudes beyond 2^53.
double int_to_float(ScalarKind k, int64_t v, bool is_unsigned);

}  // namespace tessera
