// The comparison behind `tessera run --check` (src/check/Compare.h), tested directly.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "check/Compare.h"
#include "text/Text.h"

namespace {

using tessera::ScalarKind;
using tessera::Tensor;
using tessera::compare_outputs;

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

// A per-element bound widens what one element may differ by, and the message shows it.
TEST(Check, BoundWidensEachElementAndIsNamed) {
  auto k = two_views(ScalarKind::F32);
  auto want = random_pair(ScalarKind::F32, 50, 5);
  auto got = want;
  got[1].set(7, want[1].get(7) + 0.01);
  tessera::ErrorBounds bounds{{}, std::vector<double>(50, 0.0)};
  bounds[1][7] = 0.02;
  EXPECT_TRUE(compare_outputs(*k, got, want, bounds).ok());
  bounds[1][7] = 0.005;
  auto c = compare_outputs(*k, got, want, bounds);
  EXPECT_EQ(c.mismatches, 1);
  EXPECT_GT(c.worst_fraction, 1);
  EXPECT_NE(c.first_mismatch.find("y[7]: got "), std::string::npos) << c.first_mismatch;
  EXPECT_NE(c.first_mismatch.find(" bound=0.005)"), std::string::npos) << c.first_mismatch;
  bounds[1].pop_back();
  EXPECT_THROW(compare_outputs(*k, got, want, bounds), tessera::TesseraError);
}

std::unique_ptr<tessera::Module> corpus_module(const std::string& rel) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/" + rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return tessera::parse_module(ss.str(), rel);
}

// The rule for a .tile file against the interpreter: 2 * gamma_L * max |want| per float
// tensor for a kernel with a rounded reduction (matmul.tile: a dot into f32 over K), L its
// largest view dim; nothing for one without (gelu.tile).
TEST(Check, TileBoundsScaleWithTheLongestDim) {
  auto mm = corpus_module("tests/text/data/matmul.tile");
  tessera::Sizes sizes{{"M", 64}, {"N", 128}, {"K", 4000}};
  auto want = tessera::make_random_tensors(*mm->kernels[0], sizes, 3);
  double mag = 0;
  for (int64_t i = 0; i < want[2].numel(); ++i) mag = std::max(mag, std::fabs(want[2].get(i)));
  tessera::ErrorBounds b = tessera::tile_error_bounds(*mm->kernels[0], sizes, want);
  ASSERT_EQ(b.size(), 3u);
  ASSERT_EQ(b[2].size(), 1u);  // one value for every element
  EXPECT_DOUBLE_EQ(b[2][0], 2 * tessera::gamma_n(4000) * mag);
  EXPECT_DOUBLE_EQ(tessera::error_bound_at(b[2], 5), b[2][0]);
  sizes["K"] = 8000;
  EXPECT_NEAR(tessera::tile_error_bounds(*mm->kernels[0], sizes, want)[2][0], 2 * b[2][0], 1e-3 * b[2][0]);

  auto gelu = corpus_module("tests/cli/data/gelu.tile");
  auto g = tessera::make_random_tensors(*gelu->kernels[0], {{"N", 5000}}, 3);
  EXPECT_TRUE(tessera::tile_error_bounds(*gelu->kernels[0], {{"N", 5000}}, g).empty());
}

}  // namespace
