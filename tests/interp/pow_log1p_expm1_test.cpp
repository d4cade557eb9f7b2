// pow, log1p and expm1 against the C library over several programs of a ragged size (the last
// tile is partly out of bounds), for every float width the interpreter computes in double and
// rounds: the result must be std::op of the (rounded) inputs, rounded once to the element type.
#include <cmath>
#include <limits>

#include "Helpers.h"

using namespace tessera;
using namespace tessera::test;

namespace {

// A 1-D kernel over N elements in tiles of 16: z = OP(x) or z = OP(x, y).
std::string kernel_text(const std::string& op, const std::string& dt, bool binary) {
  std::string t = "tile<" + dt + ", [16]>";
  return "kernel @m(%x: view<" + dt + ", [N]>, %y: view<" + dt + ", [N]>, %z: view<" + dt +
         ", [N]>) {\n  grid {\n    %n = dim %x {axis = 0} : i32\n"
         "    %b = const {value = 16} : i32\n    %b1 = const {value = 15} : i32\n"
         "    %t = add %n, %b1 : i32\n    %g = div %t, %b : i32\n    yield %g\n  }\n"
         "  %pid = program_id {axis = 0} : i32\n"
         "  %a = load_tile %x, %pid {pad = 0.5} : " + t + "\n"
         "  %b = load_tile %y, %pid {pad = 2.0} : " + t + "\n"
         "  %r = " + op + " %a" + (binary ? ", %b" : "") + " : " + t + "\n"
         "  store_tile %z, %r, %pid\n}\n";
}

bool same(double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  return got == want && std::signbit(got) == std::signbit(want);
}

double reference(const std::string& op, double a, double b) {
  if (op == "pow") return std::pow(a, b);
  if (op == "log1p") return std::log1p(a);
  return std::expm1(a);
}

// Fills x and y for `op` from the random values in [-1, 1): bases of both signs (negative ones
// get integer exponents, so the result is mostly not NaN), logs above -1, exps up to +-8.
void shape_inputs(const std::string& op, Tensor& x, Tensor& y) {
  for (int64_t i = 0; i < x.numel(); ++i) {
    double a = x.get(i), b = y.get(i);
    if (op == "pow") {
      if (i % 3 == 0) x.set(i, -4 * a), y.set(i, std::round(6 * b));  // (-4, 4) ^ {-6..6}
      else x.set(i, 4 * std::fabs(a) + 0.01), y.set(i, 5 * b);      // (0, 4) ^ (-5, 5)
    } else if (op == "log1p") {
      x.set(i, i % 4 == 0 ? 1e-3 * a : 3 * std::fabs(a) - 0.99);  // near 0 and in (-0.99, 2)
    } else {
      x.set(i, i % 4 == 0 ? 1e-3 * a : 8 * a);
    }
  }
}

void check_against_libm(const std::string& op, const char* dt, int64_t n, uint64_t seed) {
  ScalarKind k = *scalar_from_name(dt);
  bool binary = op == "pow";
  auto p = parse(kernel_text(op, dt, binary));
  Tensor x = random_tensor(k, {n}, seed), y = random_tensor(k, {n}, seed + 1), z(k, {n});
  shape_inputs(op, x, y);
  auto args = args_of({&x, &y, &z});
  run_interp(p.k(), args);
  int bad = 0;
  for (int64_t i = 0; i < n && bad < 5; ++i) {
    double a = x.get(i), b = y.get(i);  // already rounded to dt by set()
    double want = round_to_float(k, reference(op, a, b));
    if (!same(z.get(i), want)) {
      ++bad;
      ADD_FAILURE() << op << " " << dt << " n=" << n << " element " << i << ": " << a
                    << (binary ? ", " + std::to_string(b) : "") << " gave " << z.get(i)
                    << ", want " << want;
    }
  }
}

TEST(MathPowLog1pExpm1, MatchTheCLibraryForEveryFloatWidthAndRaggedSizes) {
  uint64_t seed = 100;
  for (const char* op : {"pow", "log1p", "expm1"})
    for (const char* dt : {"f32", "bf16", "f16", "f64"})
      for (int64_t n : {1, 15, 17, 50, 129}) check_against_libm(op, dt, n, seed++);
}

TEST(MathPowLog1pExpm1, SmallArgumentsKeepTheirPrecision) {
  // 1 + 1e-10 is 1 in f64, so log(1 + x) and exp(x) - 1 would give 0; log1p and expm1 keep x.
  auto lp = parse(kernel_text("log1p", "f64", false));
  auto em = parse(kernel_text("expm1", "f64", false));
  Tensor x(ScalarKind::F64, {3}), y(ScalarKind::F64, {3}), z(ScalarKind::F64, {3});
  x.set(0, 1e-10), x.set(1, -3e-12), x.set(2, 2.5e-17);
  for (auto* p : {&lp, &em}) {
    auto args = args_of({&x, &y, &z});
    run_interp(p->k(), args);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(z.get(i) / x.get(i), 1.0, 1e-9) << i;
  }
}

TEST(MathPowLog1pExpm1, SpecialCasesFollowCPow) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  struct Case { double a, b, want; };
  const Case cases[] = {
      {nan, 0.0, 1.0},   {1.0, nan, 1.0},   {-2.0, 0.5, nan}, {0.0, -1.0, inf},
      {-0.0, -3.0, -inf}, {-0.0, -2.0, inf}, {-1.0, inf, 1.0}, {-2.0, 3.0, -8.0},
      {0.5, -inf, inf},  {2.0, -inf, 0.0},  {-inf, 3.0, -inf}, {3.0, 2.0, 9.0},
  };
  const int n = sizeof(cases) / sizeof(cases[0]);
  for (const char* dt : {"f32", "f16", "f64"}) {
    ScalarKind k = *scalar_from_name(dt);
    auto p = parse(kernel_text("pow", dt, true));
    Tensor x(k, {n}), y(k, {n}), z(k, {n});
    for (int i = 0; i < n; ++i) x.set(i, cases[i].a), y.set(i, cases[i].b);
    auto args = args_of({&x, &y, &z});
    run_interp(p.k(), args);
    for (int i = 0; i < n; ++i)
      EXPECT_TRUE(same(z.get(i), cases[i].want))
          << dt << " pow(" << cases[i].a << ", " << cases[i].b << ") gave " << z.get(i);
  }
}

TEST(MathPowLog1pExpm1, Log1pEdgesAreInfAndNan) {
  auto p = parse(kernel_text("log1p", "f32", false));
  Tensor x(ScalarKind::F32, {3}), y(ScalarKind::F32, {3}), z(ScalarKind::F32, {3});
  x.set(0, -1.0), x.set(1, -1.5), x.set(2, -0.0);
  auto args = args_of({&x, &y, &z});
  run_interp(p.k(), args);
  EXPECT_EQ(z.get(0), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(z.get(1)));
  EXPECT_TRUE(same(z.get(2), -0.0));
}

}  // namespace
