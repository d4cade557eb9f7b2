// The pipeline as a whole, bind-constexprs errors and --dump-after handling.
#include <gtest/gtest.h>

#include <random>

#include "ir/Verifier.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

const char* kSoftmax = R"(kernel @softmax(%x: view<f32, [M, N]>, %y: view<f32, [M, N]>) {
  constexpr BLOCK_N = 1024 in [256, 512, 1024, 2048]
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %row = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %bn = param {name = "BLOCK_N"} : i32
  %two = const {value = 2} : i32
  %half = div %bn, %two : i32
  %t = load_tile %x, %row, %c0 {pad = -inf} : tile<f32, [1, BLOCK_N]>
  %mx = reduce %t {axis = 1, kind = "max"} : tile<f32, [1]>
  %mx2 = expand_dims %mx {axis = 1} : tile<f32, [1, 1]>
  %mxb = broadcast %mx2 : tile<f32, [1, BLOCK_N]>
  %d = sub %t, %mxb : tile<f32, [1, BLOCK_N]>
  %e = exp %d : tile<f32, [1, BLOCK_N]>
  %e2 = exp %d : tile<f32, [1, BLOCK_N]>
  %s = reduce %e2 {axis = 1, kind = "sum"} : tile<f32, [1]>
  %s2 = expand_dims %s {axis = 1} : tile<f32, [1, 1]>
  %sb = broadcast %s2 : tile<f32, [1, BLOCK_N]>
  %o = div %e, %sb : tile<f32, [1, BLOCK_N]>
  store_tile %y, %o, %row, %c0
}
)";

std::unique_ptr<Kernel> softmax() {
  auto m = parse_module(kSoftmax, "softmax.tile");
  return std::move(m->kernels[0]);
}

TEST(Pipeline, PassNamesInOrder) {
  EXPECT_EQ(pipeline_pass_names(),
            (std::vector<std::string>{"verify", "bind-constexprs", "pipes-to-loads", "canonicalize", "tanh-sums-to-sigmoid", "cse", "licm", "chunk-reductions", "repair-reductions", "dce", "relax-exp-precision", "verify-bound"}));
}

TEST(Pipeline, SoftmaxBindsFoldsAndCleansUp) {
  auto k = softmax();
  PipelineOptions opts;
  opts.config = {{"BLOCK_N", 512}};
  PassStats stats;
  auto out = run_pipeline(*k, opts, &stats);
  EXPECT_EQ(stats["canonicalize.folded"], 1);  // %half = 512 / 2
  EXPECT_EQ(stats["cse.removed"], 1);          // %e2
  EXPECT_EQ(stats["dce.removed"], 3);          // %bn, %two, %half (unused once folded)
  std::string text = print_kernel(*out);
  EXPECT_NE(text.find("%t = load_tile %x, %row, %c0 {pad = -inf} : tile<f32, [1, 512]>"), std::string::npos) << text;
  EXPECT_EQ(text.find("BLOCK_N]"), std::string::npos) << text;
  EXPECT_EQ(text.find(" = exp "), text.rfind(" = exp ")) << text;
  EXPECT_EQ(text.find("param"), std::string::npos) << text;
  VerifyOptions bound;
  bound.require_bound = true;
  EXPECT_TRUE(verify(*out, bound).empty());
  // The input is left alone.
  EXPECT_EQ(print_kernel(*k), print_kernel(*softmax()));
}

TEST(Pipeline, RandomCandidatesBindEverywhere) {
  std::mt19937 rng(1234);
  const int64_t cands[] = {256, 512, 1024, 2048};
  for (int trial = 0; trial < 4; ++trial) {
    int64_t v = cands[rng() % 4];
    auto out = run_pipeline(*softmax(), PipelineOptions{{{"BLOCK_N", v}}, "", nullptr, {}});
    EXPECT_EQ(out->find_constexpr("BLOCK_N")->value, v);
    std::string text = print_kernel(*out);
    EXPECT_NE(text.find("tile<f32, [1, " + std::to_string(v) + "]>"), std::string::npos) << text;
  }
}

TEST(Pipeline, DumpAfterOneAndAll) {
  std::vector<std::string> seen;
  PipelineOptions opts;
  opts.dump = [&](const std::string& pass, const std::string& ir) {
    seen.push_back(pass);
    EXPECT_EQ(ir.rfind("kernel @softmax(", 0), 0u);
  };
  opts.dump_after = "cse";
  run_pipeline(*softmax(), opts);
  EXPECT_EQ(seen, std::vector<std::string>{"cse"});
  seen.clear();
  opts.dump_after = "all";
  run_pipeline(*softmax(), opts);
  EXPECT_EQ(seen, pipeline_pass_names());
}

TEST(Pipeline, UnknownDumpAfterNameListsValidNames) {
  PipelineOptions opts;
  opts.dump_after = "fold";
  try {
    run_pipeline(*softmax(), opts);
    FAIL() << "no error";
  } catch (const TesseraError& e) {
    EXPECT_EQ(e.message(),
              "unknown pass 'fold' for --dump-after (valid: verify, bind-constexprs, pipes-to-loads, canonicalize, tanh-sums-to-sigmoid, cse, licm, chunk-reductions, repair-reductions, dce, relax-exp-precision, "
              "verify-bound, all)");
  }
}

// --disable-pass: an optional pass is left out (no statistics of it); verify and
// bind-constexprs are not optional.
TEST(Pipeline, DisabledPassDoesNotRun) {
  PipelineOptions opts;
  opts.config = {{"BLOCK_N", 512}};
  opts.disabled = {"dce"};
  PassStats stats;
  run_pipeline(*softmax(), opts, &stats);
  EXPECT_EQ(stats.count("dce.removed"), 0u);
  EXPECT_EQ(stats.count("cse.removed"), 1u);
  for (const char* name : {"verify", "bind-constexprs", "fold"}) {
    opts.disabled = {name};
    try {
      run_pipeline(*softmax(), opts);
      FAIL() << "no error for " << name;
    } catch (const TesseraError& e) {
      EXPECT_NE(e.message().find("--disable-pass " + std::string(name) + ": not a pass that can be left out"),
                std::string::npos)
          << e.message();
    }
  }
}

TEST(Pipeline, InvalidInputIsRejectedByTheFirstVerify) {
  auto m = parse_module(R"(kernel @k(%x: view<f32, [N]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    yield %n
  }
  %a = const {value = 1.5} : i32
}
)", "bad.tile");
  try {
    run_pipeline(*m->kernels[0], {});
    FAIL() << "no error";
  } catch (const TesseraError& e) {
    EXPECT_STREQ(e.what(), "bad.tile:6:3: error: 'const' value 1.5 is a float but the result type is i32");
  }
}

TEST(BindConstexprs, UnknownName) {
  try {
    bind_constexprs(*softmax(), {{"BLOCK_M", 64}});
    FAIL() << "no error";
  } catch (const TesseraError& e) {
    EXPECT_STREQ(e.what(), "softmax.tile:1:1: error: unknown constexpr 'BLOCK_M' for kernel 'softmax' (it has: BLOCK_N)");
  }
}

TEST(BindConstexprs, UnknownNameInKernelWithoutConstexprs) {
  Kernel k;
  k.name = "plain";
  try {
    bind_constexprs(k, {{"A", 1}});
    FAIL() << "no error";
  } catch (const TesseraError& e) {
    EXPECT_EQ(e.message(), "unknown constexpr 'A' for kernel 'plain' (it has: none)");
  }
}

TEST(BindConstexprs, ValueNotACandidate) {
  try {
    bind_constexprs(*softmax(), {{"BLOCK_N", 3}});
    FAIL() << "no error";
  } catch (const TesseraError& e) {
    EXPECT_STREQ(e.what(),
                 "softmax.tile:2:3: error: constexpr BLOCK_N = 3 is not one of its candidates [256, 512, 1024, 2048]");
  }
}

TEST(BindConstexprs, LeavesTheInputUnchanged) {
  auto k = softmax();
  std::string before = print_kernel(*k);
  auto bound = bind_constexprs(*k, {{"BLOCK_N", 2048}});
  EXPECT_EQ(print_kernel(*k), before);
  EXPECT_EQ(bound->find_constexpr("BLOCK_N")->value, 2048);
}

}  // namespace
}  // namespace tessera
