// sort and topk on the interpreter (the oracle) against hand-written expectations: the order of
// NaN, infinities and both zeros, ties by smaller position in both directions, the index
// operand moved with its keys, and unsigned keys compared as unsigned; histogram's counts.
#include <cmath>

#include "Helpers.h"

namespace tessera::test {
namespace {

const char* kRow = R"(kernel @k(%x: view<T, [8]>, %ix: view<i32, [8]>, %a: view<T, [8]>, %ai: view<i32, [8]>, %d: view<T, [8]>, %di: view<i32, [8]>, %t: view<T, [3]>, %ti: view<i32, [3]>) {
  grid {
    %one = const {value = 1} : i32
    yield %one
  }
  %c0 = const {value = 0} : i32
  %x0 = load_tile %x, %c0 : tile<T, [8]>
  %i0 = load_tile %ix, %c0 : tile<i32, [8]>
  %av, %ap = sort %x0 {axis = 0} : tile<T, [8]>, tile<i32, [8]>
  store_tile %a, %av, %c0
  store_tile %ai, %ap, %c0
  %dv, %dp = sort %x0, %i0 {axis = 0, descending = true} : tile<T, [8]>, tile<i32, [8]>
  store_tile %d, %dv, %c0
  store_tile %di, %dp, %c0
  %tv, %tp = topk %x0 {axis = 0} : tile<T, [3]>, tile<i32, [3]>
  store_tile %t, %tv, %c0
  store_tile %ti, %tp, %c0
}
)";

std::string row_kernel(const std::string& t) {
  std::string s = kRow;
  for (size_t p; (p = s.find("<T,")) != std::string::npos;) s.replace(p + 1, 1, t);
  return s;
}

struct RowRun {
  Tensor x, ix, a, ai, d, di, t, ti;
};

RowRun run_row(ScalarKind dt, const std::vector<double>& xs) {
  auto p = parse(row_kernel(std::string(scalar_name(dt))));
  RowRun r{Tensor(dt, {8}), Tensor(ScalarKind::I32, {8}), Tensor(dt, {8}), Tensor(ScalarKind::I32, {8}), Tensor(dt, {8}),
        Tensor(ScalarKind::I32, {8}), Tensor(dt, {3}), Tensor(ScalarKind::I32, {3})};
  for (int i = 0; i < 8; ++i) {
    if (is_float(dt)) r.x.set(i, xs[static_cast<size_t>(i)]);
    else r.x.set_int(i, static_cast<int64_t>(xs[static_cast<size_t>(i)]));
    r.ix.set_int(i, 100 + i);
  }
  auto args = args_of({&r.x, &r.ix, &r.a, &r.ai, &r.d, &r.di, &r.t, &r.ti});
  run_interp(p.k(), args);
  return r;
}

// "v/p" for each element: the value (with a zero's sign, NaN as nan) and its index.
std::string listing(const Tensor& v, const Tensor& p) {
  std::string s;
  for (int64_t i = 0; i < v.numel(); ++i) {
    double x = is_float(v.dtype) ? v.get(i) : static_cast<double>(v.get_int(i));
    std::string xs = std::isnan(x) ? "nan" : (x == 0 && std::signbit(x)) ? "-0" : std::to_string(static_cast<int64_t>(x));
    if (std::isinf(x)) xs = x > 0 ? "inf" : "-inf";
    s += (i ? " " : "") + xs + "/" + std::to_string(p.get_int(i));
  }
  return s;
}

TEST(InterpSort, FloatsOrderNaNAboveInfAndNegativeZeroBelowZero) {
  RowRun r = run_row(ScalarKind::F32, {1, NAN, -0.0, -INFINITY, 0.0, 1, INFINITY, NAN});
  EXPECT_EQ(listing(r.a, r.ai), "-inf/3 -0/2 0/4 1/0 1/5 inf/6 nan/1 nan/7");
  // Descending: NaN first; ties still keep the smaller position first; indices from %ix.
  EXPECT_EQ(listing(r.d, r.di), "nan/101 nan/107 inf/106 1/100 1/105 0/104 -0/102 -inf/103");
  EXPECT_EQ(listing(r.t, r.ti), "nan/1 nan/7 inf/6");
}

TEST(InterpSort, TiesKeepTheSmallerPositionFirst) {
  RowRun r = run_row(ScalarKind::I32, {5, -2, 5, 7, -2, 5, 0, 7});
  EXPECT_EQ(listing(r.a, r.ai), "-2/1 -2/4 0/6 5/0 5/2 5/5 7/3 7/7");
  EXPECT_EQ(listing(r.d, r.di), "7/103 7/107 5/100 5/102 5/105 0/106 -2/101 -2/104");
  EXPECT_EQ(listing(r.t, r.ti), "7/3 7/7 5/0");
}

TEST(InterpSort, UnsignedKeysCompareAsUnsigned) {
  // -1 and -2 wrap to 2^64 - 1 and 2^64 - 2: above every small value as u64.
  RowRun r = run_row(ScalarKind::U64, {3, -1, 0, -2, 3, 1, 2, 0});
  EXPECT_EQ(r.a.get_int(7), -1) << "u64 max must sort last";
  EXPECT_EQ(r.ai.get_int(6), 3);
  EXPECT_EQ(listing(r.t, r.ti).substr(0, 5), "-1/1 ");
}

// histogram: counts of the values in [0, B); values outside (negative, >= B, an unsigned value
// past 2^63) are not counted, in any shape.
TEST(InterpHistogram, CountsValuesInRangeOnly) {
  auto p = parse(R"(kernel @k(%x: view<i32, [2, 4]>, %u: view<u64, [3]>, %h: view<i32, [8]>, %g: view<i32, [4]>) {
  grid {
    %one = const {value = 1} : i32
    yield %one
  }
  %c0 = const {value = 0} : i32
  %t = load_tile %x, %c0, %c0 : tile<i32, [2, 4]>
  %c = histogram %t : tile<i32, [8]>
  store_tile %h, %c, %c0
  %v = load_tile %u, %c0 : tile<u64, [3]>
  %d = histogram %v : tile<i32, [4]>
  store_tile %g, %d, %c0
}
)");
  Tensor x(ScalarKind::I32, {2, 4}), u(ScalarKind::U64, {3}), h(ScalarKind::I32, {8}), g(ScalarKind::I32, {4});
  const int64_t xs[] = {3, -1, 0, 3, 7, 2, 3, 9};
  for (int i = 0; i < 8; ++i) x.set_int(i, xs[i]);
  u.set_int(0, 1);
  u.set_int(1, -1);  // 2^64 - 1
  u.set_int(2, 1);
  auto args = args_of({&x, &u, &h, &g});
  run_interp(p.k(), args);
  const int64_t want_h[] = {1, 0, 1, 3, 0, 0, 0, 1}, want_g[] = {0, 2, 0, 0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(h.get_int(i), want_h[i]) << "bin " << i;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(g.get_int(i), want_g[i]) << "bin " << i;
}

}  // namespace
}  // namespace tessera::test
