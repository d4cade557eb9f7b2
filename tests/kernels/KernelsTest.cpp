// Every library kernel, bound and run on the interpreter with random inputs, against its
// reference loop: at tile multiples and ragged sizes, in f32 and bf16 (and f16 once).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "check/Compare.h"
#include "interp/Interpreter.h"
#include "ir/Verifier.h"
#include "kernels/Kernels.h"
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

// Runs the kernel and the reference on the same random inputs and compares them within the
// dtype's tolerance plus the reference's error bounds.
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

  int64_t changed = 0;
  for (size_t t = 0; t < got.size(); ++t)
    for (int64_t i = 0; i < got[t].numel(); ++i) changed += want[t].get(i) != before[t].get(i);
  EXPECT_GT(changed, 0) << "the reference wrote nothing: the test could not fail";
  ErrorBounds bounds = lk->error_bounds ? lk->error_bounds(want_args, c.sizes) : ErrorBounds{};
  Comparison cmp = compare_outputs(*bound, got, want, bounds);
  EXPECT_TRUE(cmp.ok()) << case_name(c) << ": " << cmp.mismatches << " mismatches, first " << cmp.first_mismatch
                        << " (max abs err " << cmp.max_abs_err << ")";
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
  // top-k: one tile, several with a ragged last one, k = BLOCK_N, k = 1, and bf16's many ties
  // (random values in [-1, 1) rounded to 8 bits: ties by smaller column decide the indices).
  for (ScalarKind dt : {ScalarKind::F32, ScalarKind::BF16}) {
    out.push_back({"topk", dt, {{"M", 3}, {"N", 200}, {"K", 10}}, {{"K", 10}, {"BLOCK_N", 256}}});
    out.push_back({"topk", dt, {{"M", 4}, {"N", 1000}, {"K", 37}}, {{"K", 37}, {"BLOCK_N", 256}}});
    out.push_back({"sort", dt, {{"M", 5}, {"N", 300}}, {{"BLOCK_N", 512}}});
  }
  out.push_back({"topk", ScalarKind::BF16, {{"M", 2}, {"N", 777}, {"K", 256}}, {{"K", 256}, {"BLOCK_N", 256}}});
  out.push_back({"topk", ScalarKind::F32, {{"M", 3}, {"N", 333}, {"K", 1}}, {{"K", 1}, {"BLOCK_N", 256}}});
  out.push_back({"topk", ScalarKind::F32, {{"M", 2}, {"N", 300}, {"K", 300}}, {{"K", 300}, {"BLOCK_N", 256}}});  // k = N
  out.push_back({"sort", ScalarKind::F32, {{"M", 2}, {"N", 32}}, {{"BLOCK_N", 32}}});
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

// top-k and sort on rows with NaN, infinities, both zeros and many ties (values from a handful),
// across several column tiles: the interpreter's indices and values equal the reference's
// exactly (compare_outputs takes NaN as equal to NaN; the indices decide the ties).
TEST(Library, TopkAndSortOrderNaNAndTiesAsTheReference) {
  const double few[] = {-1.5, -0.0, 0.0, 2, INFINITY, -INFINITY, NAN};
  for (const char* name : {"topk", "sort"}) {
    SCOPED_TRACE(name);
    const LibraryKernel* lk = find_library_kernel(name);
    Sizes sizes = std::string(name) == "topk" ? Sizes{{"M", 3}, {"N", 700}, {"K", 40}} : Sizes{{"M", 3}, {"N", 200}};
    ConstexprConfig cfg = std::string(name) == "topk" ? ConstexprConfig{{"K", 40}, {"BLOCK_N", 256}} : ConstexprConfig{{"BLOCK_N", 256}};
    auto k = bind_constexprs(*lk->build(ScalarKind::F32), cfg);
    std::vector<Tensor> got = make_random_tensors(*k, sizes, 5);
    std::mt19937 rng(9);
    for (int64_t i = 0; i < got[0].numel(); ++i) got[0].set(i, few[rng() % 7]);
    std::vector<Tensor> want = got;
    auto ga = library_args(*lk, *k, got, sizes), wa = library_args(*lk, *k, want, sizes);
    run_interp(*k, ga);
    lk->reference(wa, sizes);
    Comparison c = compare_outputs(*k, got, want);
    EXPECT_TRUE(c.ok()) << c.first_mismatch;
    EXPECT_TRUE(std::isnan(got[1].get(0)) == (std::string(name) == "topk")) << "NaN is the largest";
  }
}

// topk of rows of negatives only, k near N, N not a multiple of BLOCK_N and an odd number of
// column tiles: the last tile's columns past N (copied as zeros, above every negative) must
// never be kept.
TEST(Library, TopkOfNegativeRowsKeepsNoPadding) {
  const LibraryKernel* lk = find_library_kernel("topk");
  for (int64_t k : {699, 700}) {
    Sizes sizes{{"M", 2}, {"N", 700}, {"K", k}};
    auto kern = bind_constexprs(*lk->build(ScalarKind::F32), {{"K", k}, {"BLOCK_N", 256}});
    std::vector<Tensor> got = make_random_tensors(*kern, sizes, 3);
    for (int64_t i = 0; i < got[0].numel(); ++i) got[0].set(i, -1.0 - static_cast<double>((i * 37) % 50) / 8);
    std::vector<Tensor> want = got;
    auto ga = library_args(*lk, *kern, got, sizes), wa = library_args(*lk, *kern, want, sizes);
    run_interp(*kern, ga);
    lk->reference(wa, sizes);
    Comparison c = compare_outputs(*kern, got, want);
    EXPECT_TRUE(c.ok()) << "k = " << k << ": " << c.first_mismatch;
  }
}

TEST(Library, ListsTheV0Kernels) {
  std::vector<std::string> names;
  for (const auto& k : library()) names.push_back(k.name);
  EXPECT_EQ(names, (std::vector<std::string>{"vector_add", "softmax", "layernorm", "rmsnorm",
                                             "matmul", "matmul_fp8", "matmul_struct", "topk", "sort"}));
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

// ----- error bounds that scale with the reduction (Tolerance.h, docs/checking.md) -----

// Library kernel `name` in f32 on the interpreter (unless `run` is false) and its reference,
// from the same inputs.
struct RefRun {
  std::unique_ptr<Kernel> k;
  std::vector<Tensor> inputs, got, want;
  ErrorBounds bounds;
};

RefRun run_with_reference(const std::string& name, const Sizes& sizes, const ConstexprConfig& config = {},
                          bool run = true) {
  const LibraryKernel* lk = find_library_kernel(name);
  RefRun r;
  r.k = bind_constexprs(*lk->build(ScalarKind::F32), config);
  r.inputs = make_random_tensors(*r.k, sizes, 1);
  r.got = r.want = r.inputs;
  auto ga = library_args(*lk, *r.k, r.got, sizes), wa = library_args(*lk, *r.k, r.want, sizes);
  if (run) run_interp(*r.k, ga);
  lk->reference(wa, sizes);
  r.bounds = lk->error_bounds(wa, sizes);
  return r;
}

// Issue 17: an f32 matmul at K = 1000 or 4000 rounds its sums by more than atol = rtol = 1e-5
// (K = 4000: over a hundred elements), and stays well inside gamma_K * (|a| @ |b|).
TEST(ErrorBounds, MatmulAtLongKPassesWithinItsBound) {
  for (int64_t K : {1000, 4000}) {
    SCOPED_TRACE("K=" + std::to_string(K));
    RefRun r = run_with_reference("matmul", {{"M", 64}, {"N", 128}, {"K", K}});
    Comparison with = compare_outputs(*r.k, r.got, r.want, r.bounds);
    EXPECT_TRUE(with.ok()) << with.first_mismatch;
    EXPECT_GT(with.max_abs_err, 1e-5);        // the rounding the dtype's tolerance alone misses
    EXPECT_LT(with.worst_fraction, 0.05);     // the bound is worst case: a correct sum stays far inside
    Comparison without = compare_outputs(*r.k, r.got, r.want);
    if (K == 4000) {
      EXPECT_GT(without.mismatches, 50);
    }
  }
}

// A matmul that drops one term (k = K - 1, the last of a partial K tile) for every element
// differs by |a[i, K-1] * b[K-1, j]|, which many elements exceed the bound by.
TEST(ErrorBounds, MatmulThatDropsOneTermFails) {
  for (int64_t K : {1000, 4000}) {
    SCOPED_TRACE("K=" + std::to_string(K));
    Sizes sizes{{"M", 64}, {"N", 128}, {"K", K}};
    RefRun r = run_with_reference("matmul", sizes, {}, /*run=*/false);
    Tensor a = r.inputs[0];
    for (int64_t i = 0; i < 64; ++i) a.set(i * K + K - 1, 0.0);
    std::vector<Tensor> wrong = r.inputs;
    kernels::matmul_reference(a, r.inputs[1], wrong[2], sizes);
    Comparison c = compare_outputs(*r.k, wrong, r.want, r.bounds);
    EXPECT_FALSE(c.ok());
    EXPECT_GT(c.mismatches, 64 * 128 / 20) << c.first_mismatch;
  }
}

// One output element moved by 1.5 times what it is allowed fails, naming the element; by half
// of it, passes: for the matmul's dot and each row kernel's sums.
TEST(ErrorBounds, ElementPerturbedBeyondItsBoundFails) {
  struct C {
    std::string name;
    Sizes sizes;
    ConstexprConfig config;
  };
  for (const C& c : {C{"matmul", {{"M", 16}, {"N", 32}, {"K", 1000}}, {}},
                     C{"softmax", {{"M", 3}, {"N", 3000}}, {{"BLOCK_N", 1024}}},
                     C{"layernorm", {{"M", 3}, {"N", 3000}}, {{"BLOCK_N", 1024}}},
                     C{"rmsnorm", {{"M", 3}, {"N", 3000}}, {{"BLOCK_N", 4096}}}}) {
    SCOPED_TRACE(c.name);
    RefRun r = run_with_reference(c.name, c.sizes, c.config);
    size_t out = r.got.size() - 1;
    ASSERT_EQ(r.bounds.size(), r.got.size());
    ASSERT_EQ(static_cast<int64_t>(r.bounds[out].size()), r.got[out].numel());
    int64_t e = r.got[out].numel() / 2 + 1;
    double want = r.want[out].get(e), bound = r.bounds[out][static_cast<size_t>(e)];
    EXPECT_GT(bound, 0);
    double allowed = 1e-5 + 1e-5 * std::fabs(want) + bound;
    ASSERT_TRUE(compare_outputs(*r.k, r.got, r.want, r.bounds).ok());
    r.got[out].set(e, want + 0.5 * allowed);
    EXPECT_TRUE(compare_outputs(*r.k, r.got, r.want, r.bounds).ok());
    r.got[out].set(e, want - 1.5 * allowed);
    Comparison bad = compare_outputs(*r.k, r.got, r.want, r.bounds);
    EXPECT_EQ(bad.mismatches, 1);
    EXPECT_NE(bad.first_mismatch.find("bound="), std::string::npos) << bad.first_mismatch;
  }
}

// The bounds as written: gamma_K * (|a| @ |b|) for matmul, times |scale_a * scale_b| with two
// more roundings for matmul_fp8, gamma_2N * y for softmax.
TEST(ErrorBounds, FormulasByHand) {
  Sizes s{{"M", 1}, {"N", 1}, {"K", 3}};
  Tensor a(ScalarKind::F32, {1, 3}), b(ScalarKind::F32, {3, 1}), c(ScalarKind::F32, {1, 1});
  for (int i = 0; i < 3; ++i) a.set(i, i == 1 ? -2.0 : i + 1.0), b.set(i, i == 2 ? -0.5 : 1.0);
  std::vector<Tensor> ts{a, b, c};
  auto mm = make_args(*find_library_kernel("matmul")->build(ScalarKind::F32), ts);
  ErrorBounds m = find_library_kernel("matmul")->error_bounds(mm, s);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_TRUE(m[0].empty() && m[1].empty());
  EXPECT_DOUBLE_EQ(m[2].at(0), gamma_n(3) * 4.5);  // 1 + 2 + 1.5
  EXPECT_DOUBLE_EQ(gamma_n(3), 3 * std::ldexp(1.0, -24) / (1 - 3 * std::ldexp(1.0, -24)));
  EXPECT_EQ(gamma_n(int64_t{1} << 24), INFINITY);

  const LibraryKernel* fp8 = find_library_kernel("matmul_fp8");
  Tensor bt(ScalarKind::F32, {1, 3});
  for (int i = 0; i < 3; ++i) bt.set(i, b.get(i));
  std::vector<Tensor> fs{a, bt, c};
  auto fa = make_args(*fp8->build(ScalarKind::F32), fs);
  fa[2].scalar = 0.37, fa[3].scalar = -1.9;
  double scale = static_cast<double>(0.37f) * static_cast<double>(-1.9f);
  EXPECT_DOUBLE_EQ(fp8->error_bounds(fa, s)[2].at(0), gamma_n(5) * -scale * 4.5);

  Tensor x(ScalarKind::F32, {1, 2}), y(ScalarKind::F32, {1, 2});
  x.set(0, 0.5), x.set(1, 0.5 + std::log(3.0));
  std::vector<Tensor> xs{x, y};
  auto sa = make_args(*find_library_kernel("softmax")->build(ScalarKind::F32), xs);
  ErrorBounds sb = find_library_kernel("softmax")->error_bounds(sa, {{"M", 1}, {"N", 2}});
  EXPECT_NEAR(sb[1].at(0), gamma_n(4) * 0.25, 1e-6 * gamma_n(4));
  EXPECT_NEAR(sb[1].at(1), gamma_n(4) * 0.75, 1e-6 * gamma_n(4));
}

}  // namespace
}  // namespace tessera
