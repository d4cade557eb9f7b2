// The comparison behind `tessera run --check`, tested directly: it lives in the CLI binary, so
// its one source file is compiled into this test too.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cli/Check.cpp"  // NOLINT: the CLI is an executable, not a library
#include "text/Text.h"

namespace {

using tessera::ScalarKind;
using tessera::Tensor;
using tessera::cli::compare_outputs;

// A kernel whose only role here is to name its views (x, y) for the messages.
std::unique_ptr<tessera::Kernel> two_views(ScalarKind dt) {
  auto k = std::make_unique<tessera::Kernel>();
  k->name = "k";
  k->add_param(tessera::Type::view(dt, {"N"}), "x");
  k->add_param(tessera::Type::view(dt, {"N"}), "y");
  return k;
}

std::vector<Tensor> random_pair(ScalarKind dt, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<Tensor> t{Tensor(dt, {n}), Tensor(dt, {n})};
  for (auto& x : t)
    for (int64_t i = 0; i < n; ++i) x.set(i, u(rng) + (u(rng) > 0 ? 0.5 : -0.5));
  return t;
}

TEST(Check, IdenticalTensorsPassWithZeroError) {
  auto k = two_views(ScalarKind::F32);
  auto a = random_pair(ScalarKind::F32, 257, 1);
  auto c = compare_outputs(*k, a, a);
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(c.max_abs_err, 0);
  EXPECT_EQ(c.elements, 514);
}

TEST(Check, OneWrongElementFailsAndIsNamed) {
  auto k = two_views(ScalarKind::F32);
  auto want = random_pair(ScalarKind::F32, 100, 2);
  auto got = want;
  got[1].set(42, want[1].get(42) + 0.25);
  auto c = compare_outputs(*k, got, want);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.mismatches, 1);
  EXPECT_NEAR(c.max_abs_err, 0.25, 1e-6);
  EXPECT_EQ(c.first_mismatch.rfind("y[42]: got ", 0), 0u) << c.first_mismatch;
}

TEST(Check, Bf16ToleratesRoundingButNotAWrongValue) {
  auto k = two_views(ScalarKind::BF16);
  auto want = random_pair(ScalarKind::BF16, 64, 3);
  auto got = want;
  // One bf16 ulp near 1.0 is 2^-7: a different rounding, not a bug.
  got[0].set(5, want[0].get(5) * (1 + 1.0 / 128));
  EXPECT_TRUE(compare_outputs(*k, got, want).ok());
  got[0].set(5, want[0].get(5) * 1.25);
  EXPECT_FALSE(compare_outputs(*k, got, want).ok());
}

TEST(Check, NanMatchesOnlyNan) {
  auto k = two_views(ScalarKind::F32);
  auto want = random_pair(ScalarKind::F32, 8, 4);
  want[1].set(3, NAN);
  auto got = want;
  EXPECT_TRUE(compare_outputs(*k, got, want).ok());
  got[1].set(3, 1.0);
  EXPECT_FALSE(compare_outputs(*k, got, want).ok());
  got[1].set(3, INFINITY);
  want[1].set(3, INFINITY);
  EXPECT_TRUE(compare_outputs(*k, got, want).ok());
  got[1].set(3, -INFINITY);
  EXPECT_FALSE(compare_outputs(*k, got, want).ok());
}

TEST(Check, IntegersAreExact) {
  auto k = two_views(ScalarKind::I32);
  std::vector<Tensor> want{Tensor(ScalarKind::I32, {2, 3}), Tensor(ScalarKind::I32, {2, 3})};
  for (int i = 0; i < 6; ++i) want[0].set_int(i, 1000 + 7 * i), want[1].set_int(i, -3 * i - 1);
  auto got = want;
  EXPECT_TRUE(compare_outputs(*k, got, want).ok());
  got[0].set_int(4, 1000 + 7 * 4 + 1);
  auto c = compare_outputs(*k, got, want);
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.first_mismatch.rfind("x[1, 1]: got 1029 want 1028", 0), 0u) << c.first_mismatch;
}

}  // namespace
