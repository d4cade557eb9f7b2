// The interpreter against values computed by hand from docs/semantics.md, on the edge cases of
// each rule: narrow float reductions and scans accumulating in f32, shifts by >= the width and
// by negative amounts, INT_MIN / -1, casts at and beyond every range, NaN and signed zeros in
// min / max / arg-reductions, single rounding of f64 -> bf16 and i64 -> f32, scatter duplicates,
// atomics and atomic_cas.
#include <cmath>
#include <cstdint>
#include <limits>

#include "Helpers.h"

using namespace tessera;
using namespace tessera::test;

namespace {

const std::string kGrid = "  grid {\n    %one = const {value = 1} : i32\n    yield %one\n  }\n  %c0 = const {value = 0} : i32\n";

// z = OP(x[, y]) over [n] tiles: `body` computes %r from %a (and %b).
Tensor run1(const std::string& from, const std::string& to, const std::vector<double>& xs,
            const std::string& body, const std::vector<double>& ys = {}) {
  std::string n = std::to_string(xs.size());
  std::string text = "kernel @k(%x: view<" + from + ", [" + n + "]>, %y: view<" + from + ", [" + n + "]>, %z: view<" +
                     to + ", [" + n + "]>) {\n" + kGrid + "  %a = load_tile %x, %c0 : tile<" + from + ", [" + n +
                     "]>\n  %b = load_tile %y, %c0 : tile<" + from + ", [" + n + "]>\n" + body +
                     "\n  store_tile %z, %r, %c0\n}\n";
  auto p = parse(text);
  ScalarKind fk = *scalar_from_name(from), tk = *scalar_from_name(to);
  int64_t len = static_cast<int64_t>(xs.size());
  Tensor x(fk, {len}), y(fk, {len}), z(tk, {len});
  for (int64_t i = 0; i < len; ++i) {
    x.set(i, xs[i]);
    y.set(i, ys.empty() ? 1.0 : ys[i]);
  }
  auto args = args_of({&x, &y, &z});
  run_interp(p.k(), args);
  return z;
}

std::string tile(const std::string& t, size_t n) { return "tile<" + t + ", [" + std::to_string(n) + "]>"; }

void expect_floats(const Tensor& z, const std::vector<double>& want, const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i) {
    double g = z.get(static_cast<int64_t>(i));
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(g)) << what << " element " << i << ": " << g;
    else EXPECT_TRUE(g == want[i] && std::signbit(g) == std::signbit(want[i]))
        << what << " element " << i << ": got " << g << ", want " << want[i];
  }
}

void expect_ints(const Tensor& z, const std::vector<int64_t>& want, const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(z.get_int(static_cast<int64_t>(i)), want[i]) << what << " element " << i;
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

}  // namespace

// "f16, bf16 and f8 accumulate in f32 and round the result once": in f16 arithmetic 2048 + 1
// stays 2048 (a tie to even); in f32 the sum reaches 2063, which rounds to 2064.
TEST(Conformance, NarrowFloatSumsAccumulateInF32) {
  struct Case { const char* t; double big; double sum; };
  for (Case c : {Case{"f16", 2048, 2064}, Case{"bf16", 256, 272}, Case{"f8e4m3", 16, 32}, Case{"f8e5m2", 16, 32}}) {
    std::vector<double> xs(16, 1.0);
    xs[0] = c.big;
    std::string t = c.t;
    Tensor z = run1(t, t, xs, "  %s = reduce %a {axis = 0, kind = \"sum\"} : " + t + "\n  %r = splat %s : " + tile(t, 16));
    expect_floats(z, std::vector<double>(16, round_to_float(*scalar_from_name(t), c.big + 15)), std::string("sum ") + t);
    EXPECT_EQ(z.get(0), c.sum) << t;
    Tensor s = run1(t, t, xs, "  %r = scan %a {axis = 0, kind = \"sum\"} : " + tile(t, 16));
    std::vector<double> want;
    for (int i = 0; i < 16; ++i) want.push_back(round_to_float(*scalar_from_name(t), c.big + i));
    expect_floats(s, want, std::string("scan ") + t);
  }
}

TEST(Conformance, ShiftsByTheWidthOrMoreAndNegativeAmounts) {
  // i8: x = -100 and 100 by 0, 3, 7, 8, 9, 100, -1.
  std::vector<double> xs = {-100, -100, -100, -100, -100, -100, -100, 100, 100, 100, 100, 100};
  std::vector<double> am = {0, 3, 7, 8, 9, 100, -1, 7, 8, -1, -128, 1};
  expect_ints(run1("i8", "i8", xs, "  %r = shl %a, %b : " + tile("i8", 12), am),
              {-100, -32, 0, 0, 0, 0, 0, 0, 0, 0, 0, -56}, "shl i8");
  expect_ints(run1("i8", "i8", xs, "  %r = shr %a, %b : " + tile("i8", 12), am),
              {-100, -13, -1, -1, -1, -1, -1, 0, 0, 0, 0, 50}, "shr i8");
  // u16 and i64 at the width.
  expect_ints(run1("u16", "u16", {65535, 65535, 65535, 1}, "  %r = shr %a, %b : " + tile("u16", 4), {15, 16, 65535, 0}),
              {1, 0, 0, 1}, "shr u16");
  expect_ints(run1("i64", "i64", {1, 1, -1, -1}, "  %r = shl %a, %b : " + tile("i64", 4), {63, 64, 63, -64}),
              {INT64_MIN, 0, INT64_MIN, 0}, "shl i64");
}

TEST(Conformance, DivRemTruncateAndMinByMinusOneWraps) {
  std::vector<double> xs = {-2147483648.0, -2147483648.0, -7, 7, -7, 2147483647};
  std::vector<double> ys = {-1, 1, 2, -2, -2, -1};
  expect_ints(run1("i32", "i32", xs, "  %r = div %a, %b : " + tile("i32", 6), ys),
              {INT32_MIN, INT32_MIN, -3, -3, 3, -2147483647}, "div");
  expect_ints(run1("i32", "i32", xs, "  %r = rem %a, %b : " + tile("i32", 6), ys), {0, 0, -1, 1, -1, 0}, "rem");
  // cdiv is (a + b - 1) / b with the sum wrapping: ceil for a >= 0, b > 0 (the grid's use).
  expect_ints(run1("i32", "i32", {75, 64, 0, -7, 7, 2147483647}, "  %r = cdiv %a, %b : " + tile("i32", 6),
                   {16, 16, 16, 2, -2, 2}),
              {5, 4, 0, -3, -2, -1073741824}, "cdiv");
  expect_ints(run1("i8", "i8", {-128, -128}, "  %r = neg %a : " + tile("i8", 2)), {-128, -128}, "neg i8");
  expect_ints(run1("i8", "i8", {-128, 127}, "  %r = add %a, %b : " + tile("i8", 2), {-1, 1}), {127, -128}, "add wraps");
}

TEST(Conformance, FloatToIntTruncatesSaturatesAndMapsNanToZero) {
  std::vector<double> xs = {kNaN, kInf, -kInf, 300.5, -300.5, 127.9, -128.9, -0.0, 0.7, -0.7, 1e300, -1e300};
  auto cast = [&](const char* from, const char* to) {
    return run1(from, to, xs, std::string("  %r = cast %a : ") + tile(to, xs.size()));
  };
  for (const char* f : {"f32", "f64"}) {
    expect_ints(cast(f, "i8"), {0, 127, -128, 127, -128, 127, -128, 0, 0, 0, 127, -128}, std::string(f) + " -> i8");
    expect_ints(cast(f, "u8"), {0, 255, 0, 255, 0, 127, 0, 0, 0, 0, 255, 0}, std::string(f) + " -> u8");
    expect_ints(cast(f, "i32"), {0, INT32_MAX, INT32_MIN, 300, -300, 127, -128, 0, 0, 0, INT32_MAX, INT32_MIN},
                std::string(f) + " -> i32");
    expect_ints(cast(f, "i64"), {0, INT64_MAX, INT64_MIN, 300, -300, 127, -128, 0, 0, 0, INT64_MAX, INT64_MIN},
                std::string(f) + " -> i64");
    expect_ints(cast(f, "u64"), {0, -1, 0, 300, 0, 127, 0, 0, 0, 0, -1, 0}, std::string(f) + " -> u64 (bits)");
    expect_ints(cast(f, "i1"), {1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1}, std::string(f) + " -> i1 (x != 0)");
  }
  // The first value out of range: 2^31 and -2^31 - 1 (exact in f64).
  expect_ints(run1("f64", "i32", {2147483648.0, 2147483647.99, -2147483648.99, -2147483649.0},
                   "  %r = cast %a : " + tile("i32", 4)),
              {INT32_MAX, INT32_MAX, INT32_MIN, INT32_MIN}, "f64 -> i32 at the range");
}

TEST(Conformance, NarrowFloatOverflowNanAndSingleRounding) {
  std::vector<double> xs = {65519.0, 65520.0, 1e6, kInf, -kInf, kNaN, 464.0, 1000.0, -1e6};
  auto cast = [&](const char* to) { return run1("f64", to, xs, std::string("  %r = cast %a : ") + tile(to, xs.size())); };
  expect_floats(cast("f16"), {65504, kInf, kInf, kInf, -kInf, kNaN, 464, 1000, -kInf}, "f64 -> f16");
  expect_floats(cast("f8e4m3"), {448, 448, 448, 448, -448, kNaN, 448, 448, -448}, "f64 -> f8e4m3");
  expect_floats(cast("f8e5m2"), {57344, 57344, 57344, kInf, -kInf, kNaN, 448, 1024, -57344}, "f64 -> f8e5m2");
  // f64 -> bf16 rounds once: 1 + 2^-8 + 2^-30 is above the tie, so it rounds up (through f32
  // it would be the exact tie 1 + 2^-8 and round to even, 1).
  double v = 1 + std::ldexp(1, -8) + std::ldexp(1, -30);
  expect_floats(run1("f64", "bf16", {v, -v}, "  %r = cast %a : " + tile("bf16", 2)),
                {1 + std::ldexp(1, -7), -1 - std::ldexp(1, -7)}, "f64 -> bf16");
  // i64 -> f32 rounds once: 2^62 + 2^38 + 1 is above the f32 tie.
  std::string text = "kernel @k(%x: view<i64, [2]>, %z: view<f32, [2]>) {\n" + kGrid +
                     "  %a = load_tile %x, %c0 : tile<i64, [2]>\n  %r = cast %a : tile<f32, [2]>\n  store_tile %z, %r, %c0\n}\n";
  auto p = parse(text);
  Tensor x(ScalarKind::I64, {2}), z(ScalarKind::F32, {2});
  x.set_int(0, (int64_t{1} << 62) + (int64_t{1} << 38) + 1);
  x.set_int(1, -((int64_t{1} << 62) + (int64_t{1} << 38)));
  auto args = args_of({&x, &z});
  run_interp(p.k(), args);
  expect_floats(z, {std::ldexp(1, 62) + std::ldexp(1, 39), -std::ldexp(1, 62)}, "i64 -> f32");
}

TEST(Conformance, MinMaxNanAndSignedZeros) {
  std::vector<double> xs = {kNaN, 1, -0.0, 0.0, -kInf, 2};
  std::vector<double> ys = {1, kNaN, 0.0, -0.0, kInf, -3};
  for (const char* t : {"f32", "bf16", "f64"}) {
    expect_floats(run1(t, t, xs, std::string("  %r = min %a, %b : ") + tile(t, 6), ys),
                  {kNaN, kNaN, -0.0, -0.0, -kInf, -3}, std::string("min ") + t);
    expect_floats(run1(t, t, xs, std::string("  %r = max %a, %b : ") + tile(t, 6), ys),
                  {kNaN, kNaN, 0.0, 0.0, kInf, 2}, std::string("max ") + t);
    // cmp: NaN makes only ne true; -0 == +0.
    expect_ints(run1(t, "i1", xs, std::string("  %r = cmp %a, %b {pred = \"ne\"} : ") + tile("i1", 6), ys),
                {1, 1, 0, 0, 1, 1}, std::string("cmp ne ") + t);
    expect_ints(run1(t, "i1", xs, std::string("  %r = cmp %a, %b {pred = \"le\"} : ") + tile("i1", 6), ys),
                {0, 0, 1, 1, 1, 0}, std::string("cmp le ") + t);
  }
}

TEST(Conformance, ArgReductionsFirstIndexAndNan) {
  auto arg = [](const char* kind, const std::vector<double>& xs) {
    return run1("f32", "i32", xs, std::string("  %s = reduce %a {axis = 0, kind = \"") + kind + "\"} : i32\n  %r = splat %s : " +
                                      tile("i32", xs.size()))
        .get_int(0);
  };
  EXPECT_EQ(arg("argmax", {1, 5, 5, 2}), 1);
  EXPECT_EQ(arg("argmin", {3, -1, 4, -1}), 1);
  EXPECT_EQ(arg("argmax", {1, kNaN, 5, kNaN}), 1);  // NaN is the largest; the first one wins
  EXPECT_EQ(arg("argmin", {3, 1, kNaN, kNaN}), 2);  // and the smallest for argmin
  EXPECT_EQ(arg("argmax", {-kInf, -kInf, -kInf}), 0);
}

TEST(Conformance, ScatterLastDuplicateWinsAndAtomicsReturnOldValues) {
  std::string text = "kernel @k(%v: view<i32, [4]>, %i: view<i32, [6]>, %m: view<i1, [6]>, %w: view<i32, [4]>, "
                     "%o: view<i32, [6]>) {\n" + kGrid +
                     "  %idx = load_tile %i, %c0 : tile<i32, [6]>\n  %mk = load_tile %m, %c0 : tile<i1, [6]>\n"
                     "  %val = arange {start = 10} : tile<i32, [6]>\n  scatter %v, %val, %idx, %mk\n"
                     "  %old = atomic %w, %val, %idx, %mk {kind = \"add\"} : tile<i32, [6]>\n  store_tile %o, %old, %c0\n}\n";
  auto p = parse(text);
  Tensor v(ScalarKind::I32, {4}), i(ScalarKind::I32, {6}), m(ScalarKind::I1, {6}), w(ScalarKind::I32, {4}),
      o(ScalarKind::I32, {6});
  int64_t idx[6] = {2, 0, 2, 2, 1, 0}, mk[6] = {1, 1, 1, 0, 1, 1};
  for (int j = 0; j < 6; ++j) i.set_int(j, idx[j]), m.set_int(j, mk[j]), o.set_int(j, 99);
  for (int j = 0; j < 4; ++j) v.set_int(j, -1), w.set_int(j, 100 * j);
  auto args = args_of({&v, &i, &m, &w, &o});
  run_interp(p.k(), args);
  expect_ints(v, {15, 14, 12, -1}, "scatter: the last masked-on duplicate wins");
  // Lanes in order: 2 (old 200), 0 (old 0), 2 (old 210), masked off (0), 1 (old 100), 0 (old 11).
  expect_ints(o, {200, 0, 210, 0, 100, 11}, "atomic add old values");
  expect_ints(w, {0 + 11 + 15, 100 + 14, 200 + 10 + 12, 300}, "atomic add results");
}

TEST(Conformance, AtomicCasComparesBitPatterns) {
  std::string text = "kernel @k(%w: view<f32, [4]>, %c: view<f32, [4]>, %o: view<f32, [4]>) {\n" + kGrid +
                     "  %idx = arange {start = 0} : tile<i32, [4]>\n  %cm = load_tile %c, %c0 : tile<f32, [4]>\n"
                     "  %seven = const {value = 7.0} : f32\n  %v = splat %seven : tile<f32, [4]>\n"
                     "  %old = atomic_cas %w, %cm, %v, %idx : tile<f32, [4]>\n  store_tile %o, %old, %c0\n}\n";
  auto p = parse(text);
  Tensor w(ScalarKind::F32, {4}), c(ScalarKind::F32, {4}), o(ScalarKind::F32, {4});
  double ws[4] = {-0.0, kNaN, 2.5, 0.0}, cs[4] = {0.0, kNaN, 2.5, 0.0};
  for (int j = 0; j < 4; ++j) w.set(j, ws[j]), c.set(j, cs[j]);
  auto args = args_of({&w, &c, &o});
  run_interp(p.k(), args);
  expect_floats(w, {-0.0, 7, 7, 7}, "atomic_cas stores");
  expect_floats(o, {-0.0, kNaN, 2.5, 0.0}, "atomic_cas old values");
}
