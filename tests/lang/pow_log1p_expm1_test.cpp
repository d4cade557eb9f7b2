// pow / log1p / expm1 in the C++ language: pow broadcasts and promotes literals like the other
// binary ops, all three reject integers, and a built kernel computes what the C library does.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "interp/Interpreter.h"
#include "ir/Verifier.h"
#include "lang/Lang.h"
#include "passes/Passes.h"
#include "runtime/Tensor.h"

namespace tessera {
namespace {

using namespace lang;

TEST(BuilderMath, PowPromotesLiteralsAndBroadcasts) {
  KernelBuilder k("powb");
  auto x = k.view("x", bf16, {"N"});
  k.grid({1});
  auto t = x.tile({8}).load({0});
  auto sq = pow(t, 2);  // an integer literal becomes a bf16 constant
  ASSERT_EQ(sq.ir()->def->kind, OpKind::Pow);
  EXPECT_EQ(sq.type(), Type::tile(ScalarKind::BF16, {8}));
  const Op* splat = sq.ir()->def->operands[1]->def;
  ASSERT_EQ(splat->kind, OpKind::Splat);
  EXPECT_EQ(splat->operands[0]->type, Type::scalar(ScalarKind::BF16));
  EXPECT_EQ(splat->operands[0]->def->attr_number("value"), 2.0);
  auto left = pow(0.5, t);  // literal on the left
  EXPECT_EQ(left.ir()->def->operands[1], t.ir());

  auto col = zeros({4, 1}, f32), row = zeros({8}, f32);
  auto p = pow(col, row);
  EXPECT_EQ(p.type(), Type::tile(ScalarKind::F32, {4, 8}));
  EXPECT_EQ(p.ir()->def->kind, OpKind::Pow);
  EXPECT_EQ(log1p(t).ir()->def->kind, OpKind::Log1p);
  EXPECT_EQ(expm1(t).ir()->def->kind, OpKind::Expm1);
  x.tile({8}).store({0}, sq + left);
  auto kernel = k.finish();
  EXPECT_TRUE(verify(*kernel).empty());
}

TEST(BuilderMath, IntegersAreRejectedAtTheCallSite) {
  KernelBuilder k("ints");
  auto n = k.view("n", i32, {"N"});
  k.grid({1});
  auto t = n.tile({16}).load({0});
  auto message = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const TesseraError& e) {
      EXPECT_NE(std::string(e.what()).find(__FILE__), std::string::npos) << e.what();
      return e.message();
    }
    return "<no error>";
  };
  EXPECT_EQ(message([&] { pow(t, t); }), "pow needs float operands, got tile<i32, [16]>");
  EXPECT_EQ(message([&] { pow(t, 2); }), "pow needs float operands, got tile<i32, [16]>");
  EXPECT_EQ(message([&] { log1p(t); }), "log1p needs float operands, got tile<i32, [16]>");
  EXPECT_EQ(message([&] { expm1(t); }), "expm1 needs float operands, got tile<i32, [16]>");
}

TEST(BuilderMath, BuiltKernelMatchesTheCLibrary) {
  // y = pow(|x| + 0.25, 1.5) + log1p(x) + expm1(x) over a ragged N, in f64 so the sum is exact
  // enough to compare to a few ulps.
  KernelBuilder k("mathk");
  auto x = k.view("x", f64, {"N"}), y = k.view("y", f64, {"N"});
  auto B = k.constexpr_("BLOCK", {32});
  k.grid({cdiv(x.dim(0), B)});
  auto pid = program_id(0);
  auto t = x.tile({B}).load({pid});
  y.tile({B}).store({pid}, pow(abs(t) + 0.25, 1.5) + log1p(t) + expm1(t));
  auto kernel = bind_constexprs(*k.finish(), {});
  const int64_t n = 75;
  Tensor xs(ScalarKind::F64, {n}), ys(ScalarKind::F64, {n});
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> uni(-0.9, 3.0);
  for (int64_t i = 0; i < n; ++i) xs.set(i, uni(rng));
  std::vector<KernelArg> args(2);
  args[0].tensor = &xs;
  args[1].tensor = &ys;
  run_interp(*kernel, args);
  for (int64_t i = 0; i < n; ++i) {
    double v = xs.get(i);
    double want = std::pow(std::fabs(v) + 0.25, 1.5) + std::log1p(v) + std::expm1(v);
    EXPECT_NEAR(ys.get(i), want, 1e-12 * std::fabs(want) + 1e-15) << i << " " << v;
  }
}

}  // namespace
}  // namespace tessera
