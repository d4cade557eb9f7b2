// Every library kernel, bound and run on the interpreter with random inputs, against its
// reference loop: at tile multiples and ragged sizes, in f32 and bf16 (and f16 once).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "interp/Interpreter.h"
#include "ir/Verifier.h"
#include "kernels/Library.h"
#include "kernels/Tolerance.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

struct Case {
  std::string kernel;
  ScalarKind dtype;
  Sizes sizes;
  ConstexprConfig config;  // small tiles keep the interpreter quick and force multi-tile loops
};

std::string case_name(const Case& c) {
  std::string s = c.kernel + "_" + std::string(scalar_name(c.dtype));
  for (const auto& [k, v] : c.sizes) s += "_" + k + std::to_string(v);
  for (const auto& [k, v] : c.config) s += "_" + k + std::to_string(v);
  return s;
}

// make_args with the library kernel's own scalar values (make_args would give every float
// scalar 0.5, and 0.5 * 0.5 cannot tell one scale from the other).
std::vector<KernelArg> library_args(const LibraryKernel& lk, const Kernel& k, std::vector<Tensor>& ts,
                                    const Sizes& sizes) {
  std::vector<KernelArg> args = make_args(k, ts, sizes);
  for (size_t i = 0; i < k.params.size(); ++i) {
    auto it = lk.scalars.find(k.params[i]->name);
    if (it != lk.scalars.end() && !k.params[i]->type.is_view()) args[i].scalar = it->second;
  }
  return args;
}

// Runs the kernel and the reference on the same random inputs; returns the number of output
// elements outside the dtype's tolerance (and the worst error, for the failure message).
void check(const Case& c, uint64_t seed) {
  const LibraryKernel* lk = find_library_kernel(c.kernel);
  ASSERT_NE(lk, nullptr) << c.kernel;
  std::unique_ptr<Kernel> k = lk->build(c.dtype);
  std::unique_ptr<Kernel> bound = bind_constexprs(*k, c.config);
  verify_or_throw(*bound, VerifyOptions{true, ""});

  std::vector<Tensor> got = make_random_tensors(*bound, c.sizes, seed);
  std::vector<Tensor> want = got;
  std::vector<Tensor> before = got;
  auto got_args = library_args(*lk, *bound, got, c.sizes);
  auto want_args = library_args(*lk, *bound, want, c.sizes);
  run_interp(*bound, got_args);
  lk->reference(want_args, c.sizes);

  Tolerance tol = tolerance_for(c.dtype);
  int64_t bad = 0, changed = 0;
  double worst = 0;
  std::string first;
  for (size_t t = 0; t < got.size(); ++t) {
    for (int64_t i = 0; i < got[t].numel(); ++i) {
      double g = got[t].get(i), w = want[t].get(i);
      if (w != before[t].get(i)) ++changed;
      double err = std::fabs(g - w);
      worst = std::max(worst, err);
      if (!(err <= tol.atol + tol.rtol * std::fabs(w))) {
        if (bad++ == 0)
          first = "tensor " + std::to_string(t) + " element " + std::to_string(i) +
                  ": got " + std::to_string(g) + " want " + std::to_string(w);
      }
    }
  }
  EXPECT_GT(changed, 0) << "the reference wrote nothing: the test could not fail";
  EXPECT_EQ(bad, 0) << case_name(c) << ": " << first << " (max abs err " << worst << ")";
}

void PrintTo(const Case& c, std::ostream* os) { *os << case_name(c); }

class LibraryKernels : public ::testing::TestWithParam<Case> {};

TEST_P(LibraryKernels, MatchesReference) { check(GetParam(), 7); }

std::vector<Case> cases() {
  std::vector<Case> out;
  for (ScalarKind dt : {ScalarKind::F32, ScalarKind::BF16}) {
    out.push_back({"vector_add", dt, {{"N", 4096}}, {{"BLOCK", 1024}}});
    out.push_back({"vector_add", dt, {{"N", 3001}}, {{"BLOCK", 256}}});
    for (const char* row_kernel : {"softmax", "layernorm", "rmsnorm"}) {
      out.push_back({row_kernel, dt, {{"M", 8}, {"N", 1024}}, {{"BLOCK_N", 256}}});
      out.push_back({row_kernel, dt, {{"M", 37}, {"N", 999}}, {{"BLOCK_N", 256}}});
      out.push_back({row_kernel, dt, {{"M", 5}, {"N", 77}}, {{"BLOCK_N", 1024}}});
    }
    out.push_back({"matmul", dt, {{"M", 64}, {"N", 64}, {"K", 64}},
                   {{"BLOCK_M", 32}, {"BLOCK_N", 32}, {"BLOCK_K", 16}}});
    out.push_back({"matmul", dt, {{"M", 100}, {"N", 99}, {"K", 77}},
                   {{"BLOCK_M", 32}, {"BLOCK_N", 32}, {"BLOCK_K", 16}}});
  }
  // fp8 inputs, c in each of its dtypes; K = 77 leaves a partial K tile. The last case runs the
  // default 128x128x64 tiles over several programs with ragged edges in every dim.
  for (ScalarKind dt : {ScalarKind::BF16, ScalarKind::F16, ScalarKind::F32}) {
    out.push_back({"matmul_fp8", dt, {{"M", 64}, {"N", 64}, {"K", 64}},
                   {{"BLOCK_M", 32}, {"BLOCK_N", 32}, {"BLOCK_K", 16}}});
    out.push_back({"matmul_fp8", dt, {{"M", 100}, {"N", 99}, {"K", 77}},
                   {{"BLOCK_M", 32}, {"BLOCK_N", 32}, {"BLOCK_K", 16}}});
  }
  out.push_back({"matmul_fp8", ScalarKind::BF16, {{"M", 1}, {"N", 1}, {"K", 1}}, {}});
  out.push_back({"matmul_fp8", ScalarKind::BF16, {{"M", 1000}, {"N", 999}, {"K", 77}}, {}});
  // The Struct matmul: every stage count, ragged sizes, one K tile, and size 1.
  for (int64_t stages : {1, 2, 4})
    out.push_back({"matmul_struct", stages == 2 ? ScalarKind::BF16 : ScalarKind::F32,
                   {{"M", 100}, {"N", 99}, {"K", 77}},
                   {{"BLOCK_M", 32}, {"BLOCK_N", 16}, {"BLOCK_K", 16}, {"STAGES", stages}}});
  out.push_back({"matmul_struct", ScalarKind::F16, {{"M", 33}, {"N", 17}, {"K", 16}},
                 {{"BLOCK_M", 16}, {"BLOCK_N", 16}, {"BLOCK_K", 16}, {"STAGES", 1}}});
  out.push_back({"matmul_struct", ScalarKind::F32, {{"M", 1}, {"N", 1}, {"K", 1}}, {}});
  out.push_back({"softmax", ScalarKind::F16, {{"M", 7}, {"N", 300}}, {{"BLOCK_N", 256}}});
  // layernorm with several rows per program: M not a multiple of BLOCK_M (the last program's
  // extra rows are padding), one ragged tile and the loops.
  for (int64_t bm : {2, 4}) {
    out.push_back({"layernorm", ScalarKind::BF16, {{"M", 37}, {"N", 999}}, {{"BLOCK_N", 256}, {"BLOCK_M", bm}}});
    out.push_back({"layernorm", ScalarKind::F32, {{"M", 9}, {"N", 77}}, {{"BLOCK_N", 1024}, {"BLOCK_M", bm}}});
  }
  out.push_back({"matmul", ScalarKind::F16, {{"M", 33}, {"N", 17}, {"K", 40}},
                 {{"BLOCK_M", 16}, {"BLOCK_N", 16}, {"BLOCK_K", 16}}});
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, LibraryKernels, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return case_name(info.param); });

// layernorm on rows far from 0: x = 1000 + u, u in [-1, 1). A one-pass E[x^2] - E[x]^2 in f32
// would lose the variance (1/3) to rounding of 10^6-sized sums (a guard for any future one-pass
// form); the variance around the mean keeps the output within 2e-3, on the whole-row branch
// (BLOCK_N >= N) and the loop branch alike.
TEST(Library, LayerNormStaysAccurateOnRowsFarFromZero) {
  const LibraryKernel* lk = find_library_kernel("layernorm");
  for (int64_t block_n : {1024, 256}) {
    SCOPED_TRACE("BLOCK_N=" + std::to_string(block_n));
    auto k = bind_constexprs(*lk->build(ScalarKind::F32), {{"BLOCK_N", block_n}});
    Sizes sizes{{"M", 6}, {"N", 1000}};
    std::vector<Tensor> got = make_random_tensors(*k, sizes, 11);
    for (int64_t i = 0; i < got[0].numel(); ++i) got[0].set(i, 1000.0 + got[0].get(i));
    std::vector<Tensor> want = got;
    auto ga = library_args(*lk, *k, got, sizes), wa = library_args(*lk, *k, want, sizes);
    run_interp(*k, ga);
    lk->reference(wa, sizes);
    double worst = 0;
    for (int64_t i = 0; i < got[3].numel(); ++i) worst = std::max(worst, std::fabs(got[3].get(i) - want[3].get(i)));
    EXPECT_LT(worst, 2e-3);  // outputs are O(1); a lost variance gives errors of O(1)
    EXPECT_GT(worst, 0.0);   // (not a copy of the reference)
  }
}

// Codegen knobs: set_constexpr changes a kernel's own declaration (layernorm declares
// whole_tile_checks) and adds one where there is none, never a second of the same name.
TEST(Library, SetConstexprSetsTheKernelsOwnOrAddsOne) {
  auto ln = find_library_kernel("layernorm")->build(ScalarKind::BF16);
  size_t n = ln->constexprs.size();
  ln->set_constexpr("whole_tile_checks", 0);
  EXPECT_EQ(ln->constexprs.size(), n);
  EXPECT_EQ(ln->find_constexpr("whole_tile_checks")->value, 0);
  auto sm = find_library_kernel("softmax")->build(ScalarKind::BF16);
  ASSERT_EQ(sm->find_constexpr("whole_tile_checks"), nullptr);
  sm->set_constexpr("whole_tile_checks", 1);
  sm->set_constexpr("whole_tile_checks", 0);
  ASSERT_NE(sm->find_constexpr("whole_tile_checks"), nullptr);
  EXPECT_EQ(sm->find_constexpr("whole_tile_checks")->value, 0);
  EXPECT_EQ(std::count_if(sm->constexprs.begin(), sm->constexprs.end(),
                          [](const ConstexprDecl& c) { return c.name == "whole_tile_checks"; }),
            1);
}

TEST(Library, ListsTheV0Kernels) {
  std::vector<std::string> names;
  for (const auto& k : library()) names.push_back(k.name);
  EXPECT_EQ(names, (std::vector<std::string>{"vector_add", "softmax", "layernorm", "rmsnorm",
                                             "matmul", "matmul_fp8", "matmul_struct"}));
  EXPECT_EQ(find_library_kernel("nope"), nullptr);
}

TEST(Library, EveryKernelBuildsAndVerifiesInEveryDtype) {
  for (const auto& lk : library()) {
    ASSERT_FALSE(lk.dtypes.empty());
    for (ScalarKind dt : lk.dtypes) {
      auto k = lk.build(dt);
      EXPECT_TRUE(verify(*k).empty()) << lk.name;
      // Defaults bind and every default size names a view dim.
      auto bound = bind_constexprs(*k, {});
      EXPECT_TRUE(verify(*bound, VerifyOptions{true, ""}).empty()) << lk.name;
      EXPECT_GT(lk.bytes(lk.default_sizes, dt), 0) << lk.name;
      EXPECT_GT(lk.flops(lk.default_sizes, dt), 0) << lk.name;
    }
  }
}

TEST(Library, TextRoundTrips) {
  for (const auto& lk : library()) {
    auto k = lk.build(lk.dtypes.front());
    std::string text = print_kernel(*k);
    auto m = parse_module(text, lk.name + ".tile");
    ASSERT_EQ(m->kernels.size(), 1u);
    EXPECT_EQ(print_kernel(*m->kernels[0]), text) << lk.name;
  }
}

TEST(Library, MatmulLoopIsPipelined) {
  auto k = find_library_kernel("matmul")->build(ScalarKind::BF16);
  int pipelined = 0;
  walk(*k, [&](Op& op) {
    if (op.kind == OpKind::For && op.has_attr("pipeline")) pipelined += op.attr_int("pipeline") > 1;
  });
  EXPECT_EQ(pipelined, 1);
}

// The fp8 inputs the checks run on: e4m3 values (a cast of uniform [-1, 1)), varied and
// almost never zero, so that the dot has something to get wrong.
TEST(Library, MatmulFp8RandomInputsAreVariedE4m3) {
  auto k = bind_constexprs(*find_library_kernel("matmul_fp8")->build(ScalarKind::BF16), {});
  std::vector<Tensor> ts = make_random_tensors(*k, {{"M", 64}, {"N", 64}, {"K", 64}}, 3);
  ASSERT_EQ(ts.size(), 3u);
  for (int t = 0; t < 2; ++t) {
    ASSERT_EQ(ts[t].dtype, ScalarKind::F8E4M3);
    std::set<double> distinct;
    int64_t zeros = 0;
    for (int64_t i = 0; i < ts[t].numel(); ++i) {
      double v = ts[t].get(i);
      EXPECT_LE(std::fabs(v), 1.0);
      distinct.insert(v);
      zeros += v == 0;
    }
    EXPECT_GT(distinct.size(), 100u);  // of the 110 nonzero e4m3 values in (-1, 1), and -1
    EXPECT_LT(zeros, ts[t].numel() / 100);
  }
}

TEST(Library, ToleranceIsTighterForWiderTypes) {
  EXPECT_LT(tolerance_for(ScalarKind::F32).rtol, tolerance_for(ScalarKind::F16).rtol);
  EXPECT_LT(tolerance_for(ScalarKind::F16).rtol, tolerance_for(ScalarKind::BF16).rtol);
  EXPECT_EQ(tolerance_for(ScalarKind::I32).atol, 0);
}

}  // namespace
}  // namespace tessera
