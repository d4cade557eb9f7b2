// The sort/topk kernel the cpu (tests/cpu/sort_test.cpp) and cuda compile
// (tests/cuda/sort_compile_test.cpp) tests share, and the inputs with ties and NaN they run on.
#pragma once

#include <cmath>
#include <random>
#include <regex>
#include <string>

#include "runtime/Tensor.h"

namespace tessera::testutil {

// [4, 12] tiles of x [M, N] (the 12 of a row pad to 16 in cuda's network; pad NaN, so padding
// takes part, after every real element; integers pad with 7): ascending sort with positions along axis 1; a
// descending sort along axis 0 moving an index tile loaded from %ix; a top-5 along axis 1
// (largest); a bottom-3 along axis 0 with the index tile; a values-only sort along axis 1.
inline const char* kSortKernel = R"(kernel @sorts(%x: view<T, [M, N]>, %ix: view<i32, [M, N]>, %a: view<T, [M, N]>, %ai: view<i32, [M, N]>, %d: view<T, [M, N]>, %di: view<i32, [M, N]>, %t: view<T, [M, N]>, %ti: view<i32, [M, N]>, %b: view<T, [M, N]>, %bi: view<i32, [M, N]>, %v: view<T, [M, N]>) {
  grid {
    %m = dim %x {axis = 0} : i32
    %n = dim %x {axis = 1} : i32
    %c4 = const {value = 4} : i32
    %c12 = const {value = 12} : i32
    %gm = cdiv %m, %c4 : i32
    %gn = cdiv %n, %c12 : i32
    yield %gm, %gn
  }
  %i = program_id {axis = 0} : i32
  %j = program_id {axis = 1} : i32
  %x0 = load_tile %x, %i, %j {pad = nan} : tile<T, [4, 12]>
  %idx = load_tile %ix, %i, %j : tile<i32, [4, 12]>
  %av, %ap = sort %x0 {axis = 1} : tile<T, [4, 12]>, tile<i32, [4, 12]>
  store_tile %a, %av, %i, %j
  store_tile %ai, %ap, %i, %j
  %dv, %dp = sort %x0, %idx {axis = 0, descending = true} : tile<T, [4, 12]>, tile<i32, [4, 12]>
  store_tile %d, %dv, %i, %j
  store_tile %di, %dp, %i, %j
  %tv, %tp = topk %x0 {axis = 1} : tile<T, [4, 5]>, tile<i32, [4, 5]>
  store_tile %t, %tv, %i, %j
  store_tile %ti, %tp, %i, %j
  %bv, %bp = topk %x0, %idx {axis = 0, largest = false} : tile<T, [3, 12]>, tile<i32, [3, 12]>
  store_tile %b, %bv, %i, %j
  store_tile %bi, %bp, %i, %j
  %vv = sort %x0 {axis = 1, descending = false} : tile<T, [4, 12]>
  store_tile %v, %vv, %i, %j
}
)";

// kSortKernel for element type `t`; integers pad with 7, one of fill_sort_keys' tie values.
inline std::string sort_kernel(const std::string& t) {
  std::string s = std::regex_replace(kSortKernel, std::regex(R"(\bT\b)"), t);
  if (t[0] != 'f' && t != "bf16") s = std::regex_replace(s, std::regex("pad = nan"), "pad = 7");
  return s;
}

// Keys with many ties: a handful of values (both zeros, infinities and NaN for floats; the
// extremes for integers) and random ones.
inline void fill_sort_keys(Tensor& x, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const bool f = is_float(x.dtype);
  const std::vector<double> few = f ? std::vector<double>{-1.5, -0.0, 0.0, 0.5, 2, INFINITY, -INFINITY, NAN}
                                    : std::vector<double>{-3, -1, 0, 1, 2, 7};
  for (int64_t i = 0; i < x.numel(); ++i) {
    uint64_t r = rng();
    if (r % 3 != 0) {
      double v = few[(r >> 8) % few.size()];
      if (!f && is_unsigned_int(x.dtype)) v = std::fabs(v);
      if (f) x.set(i, v);
      else x.set_int(i, static_cast<int64_t>(v));
    } else if (f) {
      x.set(i, static_cast<double>(static_cast<int64_t>(r >> 16) % 2001 - 1000) / 64.0);
    } else {
      int64_t v = static_cast<int64_t>((r >> 16) % 100);
      if (is_signed_int(x.dtype)) v -= 50;
      if (x.dtype == ScalarKind::I64 || x.dtype == ScalarKind::U64) v = static_cast<int64_t>(r);  // the full range
      x.set_int(i, v);
    }
  }
}

// Elements equal as sort results: the same integer, or the same float with the same sign (a
// zero's sign is part of the order), any NaN equal to any NaN.
inline bool same_element(const Tensor& a, const Tensor& b, int64_t i) {
  if (!is_float(a.dtype)) return a.get_int(i) == b.get_int(i);
  double x = a.get(i), y = b.get(i);
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  return x == y && std::signbit(x) == std::signbit(y);
}

}  // namespace tessera::testutil
