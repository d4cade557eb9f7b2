// The sm_90a TMA + wgmma matmul path on the GPU against the interpreter: several block shapes,
// ragged M, N and K that TMA can still describe (partial boxes are zero-filled), operands it
// cannot describe (the runtime then launches the mma.sync compilation), and a long K loop
// against the double-precision reference.
#include <cstdlib>
#include <cstring>

#include "GpuTestUtil.h"
#include "cuda/Driver.h"
#include "cuda/RuntimeInternal.h"
#include "text/Text.h"
#include "../common/NtMatmulText.h"

namespace tessera::gputest {
namespace {

bool hopper(std::string* why) {
  auto k = bind_constexprs(*find_library_kernel("vector_add")->build(ScalarKind::F32), {});
  CudaTarget t = compile_cuda(*k, planning_options())->target;
  if (t.sm == 90 && t.arch_specific) return true;
  *why = "not an sm_90a device (" + t.str() + ")";
  return false;
}

#define REQUIRE_HOPPER()                       \
  do {                                         \
    REQUIRE_GPU();                             \
    std::string w_;                            \
    if (!hopper(&w_)) GTEST_SKIP() << w_;      \
  } while (0)

std::unique_ptr<Kernel> matmul(ScalarKind dt, int64_t bm, int64_t bn, int64_t bk) {
  return bind_constexprs(*find_library_kernel("matmul")->build(dt),
                         {{"BLOCK_M", bm}, {"BLOCK_N", bn}, {"BLOCK_K", bk}});
}

CudaOptions no_split_options() {
  CudaOptions o = planning_options();
  o.split_k = 1;
  return o;
}

// Split 3 ways whatever the K loop's length: these tests' K loops are shorter than the runtime's
// rule splits (cuda::kMinSplitKSlice), and the split compilation must still match.
CudaOptions forced_split_options() {
  CudaOptions o = planning_options();
  o.split_k = 3;
  return o;
}

// Runs `ck` (a compilation of k) at `s` and compares with the interpreter.
void run_compiled_and_compare(CudaKernel& ck, const Kernel& k, const Sizes& s, uint64_t seed) {
  std::vector<Tensor> want = make_random_tensors(k, s, seed), got = want;
  auto wa = args_for(k, want), ga = args_for(k, got);
  run_interp(k, wa);
  ck.run_host(ga);
  testutil::expect_tensors_match(want, got, k.name + " [" + sizes_str(s) + "]", "gpu");
}

// Runs k at `s` and compares with the interpreter; returns the launches that fell back.
int64_t run_and_compare(const Kernel& k, const Sizes& s, uint64_t seed, const CudaOptions& o = planning_options()) {
  auto ck = compile_cuda(k, o);
  run_compiled_and_compare(*ck, k, s, seed);
  return ck->launches_without_tma;
}

TEST(WgmmaGpu, BlockShapesAndRaggedSizesMatchTheInterpreter) {
  REQUIRE_HOPPER();
  struct Cfg {
    int64_t m, n, k;
  };
  for (ScalarKind dt : {ScalarKind::BF16, ScalarKind::F16})
    for (Cfg c : {Cfg{128, 256, 64}, Cfg{128, 128, 64}, Cfg{64, 64, 64}, Cfg{64, 256, 64}, Cfg{128, 64, 64}}) {
      auto k = matmul(dt, c.m, c.n, c.k);
      SCOPED_TRACE(std::string(scalar_name(dt)) + " " + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
                   std::to_string(c.k));
      // Tile multiples; then partial tiles in M, N and K with rows still multiples of 16 bytes
      // (TMA), K shorter than one block, and one row.
      // These grids are small: split over K (forced: their K loops are short), and one CTA per
      // program (what the runtime's rule runs them as).
      for (Sizes s : {Sizes{{"M", 256}, {"N", 512}, {"K", 192}}, Sizes{{"M", 200}, {"N", 264}, {"K", 136}},
                      Sizes{{"M", 72}, {"N", 88}, {"K", 24}}, Sizes{{"M", 1}, {"N", 8}, {"K", 8}}}) {
        EXPECT_EQ(run_and_compare(*k, s, 7, forced_split_options()), 0) << "the TMA path should have run at " << sizes_str(s);
        EXPECT_EQ(run_and_compare(*k, s, 8, no_split_options()), 0) << sizes_str(s);
      }
    }
}

// Tiles of 192 rows (three consumer warpgroups) or 192 columns (three TMA boxes, wgmma n192),
// which the tuner's space has for the wave fit: small grids (split over K, forced, and not), and
// grids of more programs than SMs (persistent CTAs running several each).
TEST(WgmmaGpu, TilesOf192MatchTheInterpreter) {
  REQUIRE_HOPPER();
  struct Cfg {
    int64_t m, n;
  };
  for (Cfg c : {Cfg{64, 192}, Cfg{128, 192}, Cfg{192, 128}, Cfg{192, 192}, Cfg{192, 64}}) {
    auto k = matmul(ScalarKind::BF16, c.m, c.n, 64);
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n));
    for (Sizes s : {Sizes{{"M", 200}, {"N", 264}, {"K", 136}}, Sizes{{"M", 1}, {"N", 8}, {"K", 8}},
                    Sizes{{"M", 2000}, {"N", 3000}, {"K", 200}}}) {
      const bool small = s.at("M") < 1000;
      EXPECT_EQ(run_and_compare(*k, s, 9, small ? forced_split_options() : planning_options()), 0)
          << "the TMA path should have run at " << sizes_str(s);
      EXPECT_EQ(run_and_compare(*k, s, 10, no_split_options()), 0) << sizes_str(s);
    }
  }
}

// Tiles of 96 columns (cuBLAS's at 1024x1536x7168): an MN-major B tile as three 32-column boxes
// under 64-byte swizzle, or K-major from an [N, K] view; stored from the fragments (no TMA-store
// epilogue). Small grids (split over K, forced, and not), persistent grids, CTA pairs (half of
// each B box multicast) and stream-K.
TEST(WgmmaGpu, TilesOf96MatchTheInterpreter) {
  REQUIRE_HOPPER();
  uint64_t seed = 91;
  for (int64_t bm : {128, 64}) {
    auto k = matmul(ScalarKind::BF16, bm, 96, 64);
    SCOPED_TRACE(std::to_string(bm) + "x96");
    for (Sizes s : {Sizes{{"M", 200}, {"N", 264}, {"K", 136}}, Sizes{{"M", 1}, {"N", 8}, {"K", 8}},
                    Sizes{{"M", 2000}, {"N", 3000}, {"K", 200}}}) {
      const bool small = s.at("M") < 1000;
      EXPECT_EQ(run_and_compare(*k, s, seed++, small ? forced_split_options() : planning_options()), 0)
          << "the TMA path should have run at " << sizes_str(s);
      EXPECT_EQ(run_and_compare(*k, s, seed++, no_split_options()), 0) << sizes_str(s);
    }
    auto pair = k->clone();
    pair->set_constexpr("cluster_m", 2);
    EXPECT_EQ(run_and_compare(*pair, {{"M", bm * 13 - 40}, {"N", 96 * 23 - 8}, {"K", 264}}, seed++, no_split_options()), 0);
    auto sk = k->clone();
    sk->set_constexpr("stream_k", 1);
    ASSERT_EQ(emit_cuda_with_info(*sk, CudaTarget::parse("sm_90a")).stats["stream-k"], 1);
    EXPECT_EQ(run_and_compare(*sk, {{"M", 300}, {"N", 504}, {"K", 2048}}, seed++, no_split_options()), 0);
  }
  auto nt = testutil::nt_matmul("bf16", "bf16", 128, 96, 64);
  for (Sizes s : {Sizes{{"M", 200}, {"N", 264}, {"K", 272}}, Sizes{{"M", 2000}, {"N", 3000}, {"K", 200}}})
    EXPECT_EQ(run_and_compare(*nt, s, seed++, no_split_options()), 0) << "NT at " << sizes_str(s);
}

// B as [N, K] (K-major in shared memory) in 16-bit and fp8, with the scale multiply folded into
// the TMA-store epilogue; the interpreter computes the same products and sums in f32.
TEST(WgmmaGpu, TransposedBAndFp8MatchTheInterpreter) {
  REQUIRE_HOPPER();
  struct Cfg {
    std::string in;
    int bm, bn, bk;
  };
  for (Cfg c : {Cfg{"bf16", 128, 256, 64}, Cfg{"f16", 64, 128, 128}, Cfg{"f8e4m3", 128, 256, 128},
                Cfg{"f8e4m3", 128, 128, 256}, Cfg{"f8e5m2", 64, 64, 128}}) {
    auto k = testutil::nt_matmul(c.in, "bf16", c.bm, c.bn, c.bk);
    SCOPED_TRACE(c.in + " " + std::to_string(c.bm) + "x" + std::to_string(c.bn) + "x" + std::to_string(c.bk));
    // Tile multiples; partial tiles everywhere with rows still multiples of 16 bytes; one row.
    // Split over K (forced: the K loops are short) and not.
    for (Sizes s : {Sizes{{"M", 256}, {"N", 256}, {"K", 256}}, Sizes{{"M", 200}, {"N", 264}, {"K", 272}},
                    Sizes{{"M", 1}, {"N", 16}, {"K", 16}}}) {
      EXPECT_EQ(run_and_compare(*k, s, 9, forced_split_options()), 0) << "the TMA path should have run at " << sizes_str(s);
      EXPECT_EQ(run_and_compare(*k, s, 11, no_split_options()), 0) << sizes_str(s);
    }
    // K = 40 fp8 / 20 16-bit: rows of 40 bytes, which TMA cannot describe: the compilation
    // without TMA runs (the mma.sync ring, fp8 included: m16n8k32 with element-wise copies).
    Sizes odd{{"M", 70}, {"N", 72}, {"K", c.in[1] == '8' ? 40 : 20}};
    EXPECT_EQ(run_and_compare(*k, odd, 10), 1);
  }
}

TEST(WgmmaGpu, OperandsTmaCannotDescribeRunTheMmaSyncCompilation) {
  REQUIRE_HOPPER();
  auto k = matmul(ScalarKind::BF16, 128, 256, 64);
  // K = 77: a's rows are 154 bytes, not a multiple of 16; N = 99: b's are 198.
  EXPECT_EQ(run_and_compare(*k, {{"M", 130}, {"N", 96}, {"K", 77}}, 3), 1);
  EXPECT_EQ(run_and_compare(*k, {{"M", 130}, {"N", 99}, {"K", 64}}, 4), 1);
}

// Two programs would split over K, even more so when asked to; but the split compilation reads
// its operands through tensor maps too, so operands TMA cannot describe run the compilation
// without TMA unsplit, and the kernel launched counts it.
TEST(WgmmaGpu, SplitKWithOperandsTmaCannotDescribeRunsTheMmaSyncCompilationUnsplit) {
  REQUIRE_HOPPER();
  auto k = matmul(ScalarKind::BF16, 128, 256, 64);
  for (int split : {0, 4}) {
    SCOPED_TRACE("split_k " + std::to_string(split));
    CudaOptions o = planning_options();
    o.split_k = split;
    auto ck = compile_cuda(*k, o);
    run_compiled_and_compare(*ck, *k, {{"M", 130}, {"N", 96}, {"K", 77}}, 12);
    EXPECT_EQ(ck->launches_without_tma, 1);
    EXPECT_EQ(ck->launches_split_k, 0);
    EXPECT_EQ(ck->last_splits, 1);
  }
}

// Against the double-precision reference: a long K loop, and more programs than SMs (the
// persistent loop runs several programs per CTA, carrying the ring's phases across them).
void expect_matches_reference(const Sizes& s, int64_t bm, int64_t bn, int64_t bk, bool stream_k = false,
                              bool layouts = false) {
  const LibraryKernel& lk = *find_library_kernel("matmul");
  auto k = matmul(ScalarKind::BF16, bm, bn, bk);
  std::vector<Tensor> got = make_random_tensors(*k, s, 5), want = got;
  auto ga = args_for(*k, got), wa = args_for(*k, want);
  CudaOptions o = planning_options();
  o.target.stream_k = stream_k;
  if (layouts) o.target.emitter = CudaTarget::Emitter::Layouts;
  auto ck = compile_cuda(*k, o);
  // (The layout emitter's stream-K fixup, not a fallback's.)
  if (layouts && stream_k) EXPECT_NE(ck->source().find("tsr::floats_add_slot_batched<"), std::string::npos);
  ck->run_host(ga);
  EXPECT_EQ(ck->launches_without_tma, 0);
  lk.reference(wa, s);
  Tolerance tol = tolerance_for(ScalarKind::BF16);
  int bad = 0;
  for (int64_t i = 0; i < got.back().numel() && bad < 5; ++i) {
    double w = want.back().get(i), g = got.back().get(i);
    if (std::fabs(w - g) > tol.atol * std::sqrt(double(s.at("K"))) + tol.rtol * std::fabs(w)) {
      ++bad;
      ADD_FAILURE() << "element " << i << " (row " << i / s.at("N") << ", col " << i % s.at("N") << "): gpu " << g
                    << " reference " << w;
    }
  }
}

// Few programs: the runtime launches the split-K compilation, whose CTAs meet in a workspace.
// The same compiled kernel runs three times with new inputs: the arrival counters must be zero
// again after each launch, or no CTA would run the epilogue the next time. Includes a ragged K
// and M far below the tile (rows skip their slots); a K loop too short for the rule runs unsplit,
// and forced 4 ways over its 2 steps it has empty slices.
TEST(WgmmaGpu, SplitKMatchesTheInterpreterLaunchAfterLaunch) {
  REQUIRE_HOPPER();
  struct Cfg {
    int64_t m, n, k;
  };
  for (Cfg c : {Cfg{128, 256, 64}, Cfg{64, 64, 64}, Cfg{64, 128, 64}}) {
    auto k = matmul(ScalarKind::BF16, c.m, c.n, c.k);
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k));
    auto ck = compile_cuda(*k, planning_options());
    int64_t launches = 0;
    for (Sizes s : {Sizes{{"M", 16}, {"N", 1000}, {"K", 2000}}, Sizes{{"M", 5}, {"N", 264}, {"K", 2000}},
                    Sizes{{"M", 130}, {"N", 520}, {"K", 1400}}, Sizes{{"M", 16}, {"N", 1000}, {"K", 2000}}}) {
      run_compiled_and_compare(*ck, *k, s, 11 + uint64_t(launches));
      EXPECT_EQ(ck->launches_split_k, ++launches) << sizes_str(s);
      EXPECT_GE(ck->last_splits, 2);
      // (at most kAutoSplitK ways of few programs: one cluster per program, sums over distributed
      // shared memory)
      if (!std::getenv("TESSERA_CUDA_SPLIT_K_WORKSPACE")) EXPECT_EQ(ck->launches_split_cluster, launches);
    }
    EXPECT_EQ(ck->cluster_launches_refused, 0);
    // A K loop too short to pay for the fixup (cuda::kMinSplitKSlice) runs unsplit.
    run_compiled_and_compare(*ck, *k, {{"M", 130}, {"N", 520}, {"K", 72}}, 17);
    EXPECT_EQ(ck->launches_split_k, launches);
    EXPECT_EQ(ck->last_splits, 1);
    EXPECT_EQ(ck->launches_without_tma, 0);
    // Forced 4 ways, in clusters and through the workspace.
    for (bool cluster : {true, false}) {
      CudaOptions forced = planning_options();
      forced.split_k = 4;
      forced.split_k_cluster = cluster;
      auto fk = compile_cuda(*k, forced);
      for (int round = 0; round < 2; ++round) run_compiled_and_compare(*fk, *k, {{"M", 130}, {"N", 520}, {"K", 72}}, 19);
      EXPECT_EQ(fk->launches_split_k, 2);
      const int64_t ctas = (130 + c.m - 1) / c.m * ((520 + c.n - 1) / c.n) * 4;
      if (!std::getenv("TESSERA_CUDA_SPLIT_K_WORKSPACE"))
        EXPECT_EQ(fk->launches_split_cluster, cluster && cuda::split_in_clusters(ctas, 4, cuda::device().num_sms) ? 2 : 0);
      EXPECT_EQ(fk->last_splits, 4);
    }
  }
}

// The fixup within a cluster adds the same partial sums in the same order as the workspace's:
// the two launches' outputs are the same bits, at 1-3 consumer warpgroups, bf16, f16 and fp8
// operands (K-major B; 5 ways over 8 k steps, so one slice is empty), and up to 8 ways (the
// portable cluster size). The 16-bit ones are also checked against the interpreter.
// swap_operands = 1 (C^T = B^T A^T, M tiles of 8-32 rows on wgmma's n): bf16 and f16 with the
// weights MN-major, fp8 with them K-major; ragged M, N and K, one row, a K loop the runtime
// splits and one it does not; both split-K fixups (cluster and workspace) and no split.
TEST(WgmmaGpu, SwappedOperandsMatchTheInterpreter) {
  REQUIRE_HOPPER();
  struct Cfg {
    const char* kernel;
    ScalarKind dt;
    int64_t bm, bn, bk;
  };
  for (Cfg c : {Cfg{"matmul", ScalarKind::BF16, 16, 128, 64}, Cfg{"matmul", ScalarKind::BF16, 16, 64, 128},
                Cfg{"matmul", ScalarKind::BF16, 32, 192, 128}, Cfg{"matmul", ScalarKind::F16, 16, 64, 64},
                Cfg{"matmul", ScalarKind::BF16, 16, 256, 128}, Cfg{"matmul_fp8", ScalarKind::BF16, 16, 128, 128},
                Cfg{"matmul_fp8", ScalarKind::BF16, 32, 64, 128}, Cfg{"matmul_fp8", ScalarKind::BF16, 16, 256, 128}}) {
    SCOPED_TRACE(std::string(c.kernel) + " " + std::string(scalar_name(c.dt)) + " " + std::to_string(c.bm) + "x" +
                 std::to_string(c.bn) + "x" + std::to_string(c.bk));
    auto k = bind_constexprs(*find_library_kernel(c.kernel)->build(c.dt),
                             {{"BLOCK_M", c.bm}, {"BLOCK_N", c.bn}, {"BLOCK_K", c.bk}});
    k->set_constexpr("swap_operands", 1);
    // The planning emitter swaps every config, and so does the layout emitter (swap-dot-operands:
    // f8 too since session 53). The runs
    // below take the planning emitter (planning_options() and those made from it) and then the
    // layout emitter, unsplit and split.
    CudaTarget planning = CudaTarget::parse("sm_90a");
    planning.emitter = CudaTarget::Emitter::Planning;
    ASSERT_EQ(emit_cuda_with_info(*k, planning).stats["wgmma-swapped-operands"], 1);
    CudaTarget layouts = CudaTarget::parse("sm_90a");
    layouts.emitter = CudaTarget::Emitter::Layouts;
    const CudaEmission lem = emit_cuda_with_info(*run_pipeline(*k, {}), layouts);
    ASSERT_NE(lem.lowered, nullptr);
    std::vector<int64_t> dot_shape;
    walk(*lem.lowered->body, [&](Op& op) {
      if (op.kind == OpKind::Dot) dot_shape = static_shape(op.result()->type.shape);
    });
    ASSERT_EQ(dot_shape, (std::vector<int64_t>{c.bn, c.bm})) << "not swapped by the layout emitter";
    CudaOptions layouts_unsplit = no_split_options(), layouts_split = forced_split_options();
    layouts_unsplit.target.emitter = layouts_split.target.emitter = CudaTarget::Emitter::Layouts;
    // (fp8: a shorter K, within the f32 tolerance that wgmma's fast accumulation keeps to, and
    // rows of whole 16 bytes, which TMA needs)
    const bool f8 = std::string(c.kernel) == "matmul_fp8";
    for (Sizes s : {Sizes{{"M", 1}, {"N", 1000}, {"K", f8 ? 384 : 2048}}, Sizes{{"M", 37}, {"N", 200}, {"K", f8 ? 144 : 136}},
                    Sizes{{"M", 16}, {"N", 384}, {"K", 512}}, Sizes{{"M", 5}, {"N", 8}, {"K", 16}}}) {
      SCOPED_TRACE(sizes_str(s));
      CudaOptions workspace = forced_split_options();
      workspace.split_k_cluster = false;
      for (const CudaOptions& o : {forced_split_options(), workspace, no_split_options(), planning_options(), layouts_unsplit,
                                   layouts_split})
        EXPECT_EQ(run_and_compare(*k, s, 12, o), 0) << "the TMA path should have run";
    }
    // Stream-K (the runtime's split off): the few tiles cut into shares of K over the CTAs.
    auto sk = k->clone();
    sk->set_constexpr("stream_k", 1);
    ASSERT_EQ(emit_cuda_with_info(*sk, CudaTarget::parse("sm_90a")).stats["stream-k"], 1);
    EXPECT_EQ(run_and_compare(*sk, {{"M", 37}, {"N", 200}, {"K", f8 ? 512 : 2048}}, 13, no_split_options()), 0);
  }
}

TEST(WgmmaGpu, SplitKInClustersGivesTheWorkspacesBits) {
  REQUIRE_HOPPER();
  if (std::getenv("TESSERA_CUDA_SPLIT_K_WORKSPACE")) GTEST_SKIP() << "TESSERA_CUDA_SPLIT_K_WORKSPACE is set";
  struct Case {
    const char* kernel;
    ScalarKind dt;
    int64_t bm, bn, bk, m, n, k;
    int ways;
  };
  for (Case c : {Case{"matmul", ScalarKind::BF16, 64, 256, 64, 16, 520, 3000, 4},
                 Case{"matmul", ScalarKind::BF16, 128, 128, 64, 130, 256, 4096, 8},
                 Case{"matmul", ScalarKind::BF16, 192, 128, 64, 100, 256, 2000, 3},
                 Case{"matmul", ScalarKind::F16, 64, 128, 64, 40, 304, 2000, 2},
                 Case{"matmul_fp8", ScalarKind::BF16, 128, 128, 128, 64, 384, 1024, 5}}) {
    SCOPED_TRACE(std::string(c.kernel) + " " + std::to_string(c.bm) + "x" + std::to_string(c.bn) + ", " +
                 std::to_string(c.ways) + " ways");
    auto k = bind_constexprs(*find_library_kernel(c.kernel)->build(c.dt),
                             {{"BLOCK_M", c.bm}, {"BLOCK_N", c.bn}, {"BLOCK_K", c.bk}});
    const Sizes s{{"M", c.m}, {"N", c.n}, {"K", c.k}};
    std::vector<std::vector<Tensor>> outs;
    for (bool cluster : {true, false}) {
      CudaOptions o = planning_options();
      o.split_k = c.ways;
      o.split_k_cluster = cluster;
      auto ck = compile_cuda(*k, o);
      std::vector<Tensor> want = make_random_tensors(*k, s, 51), got = want;
      auto wa = args_for(*k, want), ga = args_for(*k, got);
      run_interp(*k, wa);
      ck->run_host(ga);
      // (fp8: wgmma's reduced-precision accumulation drifts past the f32 tolerance over long K
      // loops on both paths alike; TransposedBAndFp8MatchTheInterpreter checks it at short K)
      if (std::string(c.kernel) != "matmul_fp8")
        testutil::expect_tensors_match(want, got, std::string(c.kernel) + " [" + sizes_str(s) + "]", "gpu");
      EXPECT_EQ(ck->last_splits, c.ways);
      EXPECT_EQ(ck->launches_split_cluster, cluster ? 1 : 0);
      EXPECT_EQ(ck->cluster_launches_refused, 0);
      outs.push_back(std::move(got));
    }
    ASSERT_EQ(outs[0].back().data.size(), outs[1].back().data.size());
    EXPECT_EQ(std::memcmp(outs[0].back().data.data(), outs[1].back().data.data(), outs[0].back().data.size()), 0);
  }
}

// The split_k knob (a kernel constexpr the runtime reads at launch, which the tuner varies)
// fixes the split: 3 ways where the runtime's own rule would pick 4 for these 8 programs, and
// 2 where the rule would pick 3 (36 programs of 64 x 128), at a K the rule splits (3000).
TEST(WgmmaGpu, TheSplitKKnobFixesTheSplit) {
  REQUIRE_HOPPER();
  struct Case {
    int64_t split, n;
  };
  for (Case c : {Case{3, 1000}, Case{2, 4608}}) {
    SCOPED_TRACE("split_k " + std::to_string(c.split) + ", N " + std::to_string(c.n));
    auto k = matmul(ScalarKind::BF16, 64, 128, 64);
    k->set_constexpr(kSplitKKnob, c.split);
    auto ck = compile_cuda(*k, planning_options());
    run_compiled_and_compare(*ck, *k, {{"M", 16}, {"N", c.n}, {"K", 3000}}, 41);
    EXPECT_EQ(ck->launches_split_k, 1);
    EXPECT_EQ(ck->last_splits, c.split);
  }
}

// Launches with the same device buffers, shapes and stream reuse the prepared parameters (tensor
// maps, workspace, grid): each launch must still read what the buffers hold now.
TEST(WgmmaGpu, RepeatedLaunchesOnTheSameBuffersReadTheirNewContents) {
  REQUIRE_HOPPER();
  for (bool split : {true, false}) {
    auto k = matmul(ScalarKind::BF16, 64, 128, 64);
    Sizes s{{"M", 16}, {"N", 520}, {"K", 2000}};
    CudaOptions o = split ? planning_options() : no_split_options();
    auto ck = compile_cuda(*k, o);
    std::vector<Tensor> first = make_random_tensors(*k, s, 31);
    std::vector<cuda::DeviceBuffer> bufs;
    std::vector<uint64_t> ptrs;
    for (const Tensor& t : first) {
      bufs.emplace_back(t.data.size());
      ptrs.push_back(bufs.back().get());
    }
    for (uint64_t round = 0; round < 3; ++round) {
      SCOPED_TRACE("split " + std::to_string(split) + ", round " + std::to_string(round));
      std::vector<Tensor> want = make_random_tensors(*k, s, 31 + round), got = want;
      for (size_t i = 0; i < want.size(); ++i) bufs[i].upload(want[i].data.data(), want[i].data.size());
      ck->launch(args_for(*k, got), ptrs, nullptr);
      bufs.back().download(got.back().data.data(), got.back().data.size());
      auto wa = args_for(*k, want);
      run_interp(*k, wa);
      testutil::expect_tensors_match(want, got, "matmul [" + sizes_str(s) + "]", "gpu");
    }
    EXPECT_EQ(ck->launches_split_k, split ? 3 : 0);
  }
}

TEST(WgmmaGpu, LongKLoopMatchesTheReference) {
  REQUIRE_HOPPER();
  // 6 programs: split over K (16 CTAs each); the 16 x 4096 shape of the benchmark, 16 programs.
  expect_matches_reference({{"M", 384}, {"N", 512}, {"K", 4096}}, 128, 256, 64);
  expect_matches_reference({{"M", 16}, {"N", 4096}, {"K", 4096}}, 128, 256, 64);
}

// Stream-K: grids whose last wave holds at least half the SMs spread it over all of them (a
// tile's K loop in two or three parts, the CTA that ends it adding the earlier ones); a
// smaller last wave goes with the full wave before it (parts of up to three tiles per CTA, the
// middle one whole); fewer programs than half the SMs are all shared out (on at most four CTAs
// per program). Sizes are picked from the device's SM count: fewer programs than SMs (three
// quarters, a third, a fifth), more (a full wave first), a last wave of about a quarter and of
// a few programs after one and two full waves, K loops shorter than the parts (empty parts),
// ragged edges. The same compiled kernel runs
// launch after launch: the flags must be zero again each time. Then against the reference,
// stream-K and whole tiles.
TEST(WgmmaGpu, StreamKMatchesTheInterpreterLaunchAfterLaunch) {
  REQUIRE_HOPPER();
  const int64_t sms = cuda::device().num_sms;
  auto k = matmul(ScalarKind::BF16, 64, 64, 64);
  for (const auto emitter : {CudaTarget::Emitter::Planning, CudaTarget::Emitter::Layouts}) {
    const bool layouts = emitter == CudaTarget::Emitter::Layouts;
    SCOPED_TRACE(layouts ? "layouts" : "planning");
    CudaOptions o = no_split_options();
    o.target.stream_k = true;
    o.target.emitter = emitter;
    auto ck = compile_cuda(*k, o);
    if (layouts) EXPECT_NE(ck->source().find("tsr::floats_add_slot_batched<"), std::string::npos);
    // rows x cols programs of 64 x 64 (cols rounded up: the programs are a multiple of 4).
    auto sizes = [&](int64_t programs, int64_t kdim) {
      const int64_t rows = 4, cols = (programs + rows - 1) / rows;
      return Sizes{{"M", rows * 64 - 24}, {"N", cols * 64 - 8}, {"K", kdim}};
    };
    uint64_t seed = 41;
    for (Sizes s : {sizes(sms * 3 / 4 + 1, 520), sizes(sms + sms * 3 / 4, 264), sizes(sms * 3 / 4 + 1, 40),
                    sizes(sms + sms / 4, 392), sizes(2 * sms + 3, 200), sizes(sms + 1, 24), sizes(sms / 3, 456),
                    sizes(sms / 5, 40), sizes(sms / 5, 584), sizes(sms * 3 / 4 + 1, 520)}) {
      SCOPED_TRACE(sizes_str(s));
      const int64_t programs = ((s.at("M") + 63) / 64) * ((s.at("N") + 63) / 64);
      ASSERT_GT(cuda::stream_k_tiles(programs, cuda::stream_k_ctas(programs, sms)), 0)
          << "the sizes should leave a partial wave to share out";
      run_compiled_and_compare(*ck, *k, s, seed++);
    }
    EXPECT_EQ(ck->launches_without_tma, 0);
    EXPECT_EQ(ck->launches_split_k, 0);
  }
}

TEST(WgmmaGpu, StreamKMatchesTheReference) {
  REQUIRE_HOPPER();
  const int64_t sms = cuda::device().num_sms;
  // 128 x 256 tiles (two consumer warpgroups): about 0.85 and 1.85 waves of programs. K is
  // short: the host reference is slow.
  const int64_t p1 = sms * 85 / 100, p2 = sms + sms * 85 / 100, p3 = sms + sms / 8;
  for (bool layouts : {false, true}) {
    SCOPED_TRACE(layouts ? "layouts" : "planning");
    expect_matches_reference({{"M", 128 * 8 - 40}, {"N", 256 * ((p1 + 7) / 8)}, {"K", 200}}, 128, 256, 64, true, layouts);
    expect_matches_reference({{"M", 128 * 8}, {"N", 256 * ((p2 + 7) / 8) - 16}, {"K", 136}}, 128, 256, 64, true, layouts);
    // A last wave of about an eighth, shared out with the full wave before it.
    expect_matches_reference({{"M", 128 * 8 - 8}, {"N", 256 * ((p3 + 7) / 8) - 40}, {"K", 264}}, 128, 256, 64, true,
                             layouts);
    // 48 programs (1024x1536 in 128 x 256 tiles), fewer than half the CTAs: all shared out.
    expect_matches_reference({{"M", 128 * 8 - 40}, {"N", 256 * 6 - 24}, {"K", 456}}, 128, 256, 64, true, layouts);
  }
}

TEST(WgmmaGpu, ManyProgramsPerCtaMatchTheReference) {
  REQUIRE_HOPPER();
  // 16 x 17 = 272 programs of 64 x 64 (about two per SM), then 16 x 9 = 144 of 128 x 256.
  expect_matches_reference({{"M", 1000}, {"N", 1032}, {"K", 200}}, 64, 64, 64);
  expect_matches_reference({{"M", 2040}, {"N", 2056}, {"K", 328}}, 128, 256, 64);
}

// The persistent kernel's codegen knobs against the interpreter, with several programs per CTA
// (so that epilogue buffers and the ring's phases carry from tile to tile): four epilogue
// buffers per consumer warpgroup (a ring stage less), the copies' L2 hints forced each way
// and never, the direct (not TMA-store) epilogue, and the TMA-store epilogue after each
// program's loop instead of under the next one (epilogue_overlap = 0), and stream-K with those
// two epilogues (every CTA's warps take the fixup's paths). Then the automatic hint's streamed
// case (B read by one row of tiles) and tiles whose boxes do not rotate through the buffers.
TEST(WgmmaGpu, PersistentKnobsMatchTheInterpreter) {
  REQUIRE_HOPPER();
  const Sizes many{{"M", 128 * 12 - 24}, {"N", 256 * 12 - 8}, {"K", 136}};  // 144 programs
  uint64_t seed = 61;
  for (ConstexprConfig knobs : {ConstexprConfig{{"epilogue_buffers", 4}}, ConstexprConfig{{"tma_hint_a", 1}, {"tma_hint_b", 2}},
                                ConstexprConfig{{"tma_hint_a", 3}, {"tma_hint_b", 3}},
                                ConstexprConfig{{"tma_store_epilogue", 0}},
                                ConstexprConfig{{"epilogue_overlap", 0}},
                                ConstexprConfig{{"epilogue_overlap", 0}, {"epilogue_buffers", 4}},
                                // Stream-K (144 programs: a short last wave shared out with the
                                // full wave before it) with the plain epilogues.
                                ConstexprConfig{{"stream_k", 1}, {"epilogue_overlap", 0}},
                                ConstexprConfig{{"stream_k", 1}, {"tma_store_epilogue", 0}}}) {
    auto k = matmul(ScalarKind::BF16, 128, 256, 64);
    std::string what;
    for (const auto& [name, v] : knobs) {
      k->set_constexpr(name, v);
      what += name + "=" + std::to_string(v) + " ";
    }
    SCOPED_TRACE(what);
    EXPECT_EQ(run_and_compare(*k, many, seed++, no_split_options()), 0);
  }
  auto k = matmul(ScalarKind::BF16, 64, 256, 64);
  EXPECT_EQ(run_and_compare(*k, {{"M", 100}, {"N", 256 * 40 - 8}, {"K", 264}}, seed++, no_split_options()), 0);
  // One 64-column box a tile (BLOCK_N = 64), and two on four buffers: each box waits for every
  // earlier store (before session 8 the next tile's box could overwrite a buffer still being
  // stored). 288 programs: two or three tiles per CTA, back to back.
  for (int64_t bufs : {2, 4}) {
    SCOPED_TRACE("epilogue_buffers " + std::to_string(bufs));
    auto narrow = matmul(ScalarKind::BF16, 128, bufs == 2 ? 64 : 128, 64);
    narrow->set_constexpr("epilogue_buffers", bufs);
    const int64_t bn = bufs == 2 ? 64 : 128;
    EXPECT_EQ(run_and_compare(*narrow, {{"M", 128 * 12 - 24}, {"N", bn * 24 - 8}, {"K", 136}}, seed++, no_split_options()),
              0);
  }
}

// epilogue_overlap = 1: each block is packed into registers and stored box by box during the
// next program's first loop iterations. More programs than CTAs (blocks carried from program
// to program), K loops shorter than a block's boxes (1 and 3 iterations: the rest after the
// loop) and longer, ragged M, N and K, one box per block (BLOCK_N = 64, each box waiting for
// every earlier store), one consumer warpgroup (no setmaxnreg), three, B as [N, K], and fp8
// with its scale applied as the block is packed.
TEST(WgmmaGpu, EpilogueOverlapMatchesTheInterpreter) {
  REQUIRE_HOPPER();
  uint64_t seed = 81;
  struct Case {
    int64_t bm, bn;
    Sizes s;
  };
  for (const Case& c : {Case{128, 256, {{"M", 128 * 12 - 24}, {"N", 256 * 12 - 8}, {"K", 136}}},
                        Case{128, 256, {{"M", 128 * 13 - 40}, {"N", 256 * 11 - 8}, {"K", 264}}},
                        Case{128, 256, {{"M", 128 * 20 - 3}, {"N", 256 * 14 - 8}, {"K", 40}}},
                        Case{128, 64, {{"M", 128 * 15 - 8}, {"N", 64 * 21 - 8}, {"K", 72}}},
                        Case{64, 256, {{"M", 100}, {"N", 256 * 40 - 8}, {"K", 264}}}}) {
    auto k = matmul(ScalarKind::BF16, c.bm, c.bn, 64);
    k->set_constexpr("epilogue_overlap", 1);
    SCOPED_TRACE(std::to_string(c.bm) + "x" + std::to_string(c.bn) + " at " + sizes_str(c.s));
    EXPECT_EQ(run_and_compare(*k, c.s, seed++, no_split_options()), 0);
  }
  // B as [N, K]; three consumer warpgroups (192 rows: 512 threads, setmaxnreg 40 / 152,
  // barriers 1..3), and three boxes a block (192 columns: each waits for every earlier store),
  // with K loops of 1 and 3 iterations and more programs than CTAs.
  struct Nt {
    int64_t bm, bn;
    Sizes s;
  };
  for (const Nt& c : {Nt{192, 128, {{"M", 192 * 9 - 5}, {"N", 128 * 17 - 8}, {"K", 48}}},
                      Nt{192, 128, {{"M", 192 * 5 + 7}, {"N", 128 * 30 - 8}, {"K", 176}}},
                      Nt{128, 192, {{"M", 128 * 13 - 9}, {"N", 192 * 12 - 8}, {"K", 136}}},
                      Nt{128, 192, {{"M", 100}, {"N", 192 * 3 + 8}, {"K", 40}}}}) {
    auto k = testutil::nt_matmul("bf16", "bf16", c.bm, c.bn, 64);
    SCOPED_TRACE("NT " + std::to_string(c.bm) + "x" + std::to_string(c.bn) + " at " + sizes_str(c.s));
    EXPECT_EQ(run_and_compare(*k, c.s, seed++, no_split_options()), 0);
  }
  for (std::string in : {"bf16", "f8e4m3"}) {
    auto k = testutil::nt_matmul(in, "bf16", 128, 256, in == "bf16" ? 64 : 128);
    k->set_constexpr("epilogue_overlap", 1);
    SCOPED_TRACE(in + " NT");
    EXPECT_EQ(run_and_compare(*k, {{"M", 128 * 11 - 8}, {"N", 256 * 13 - 16}, {"K", 272}}, seed++, no_split_options()), 0);
  }
}

// The planning emitter's options, and the layout emitter's (pair-programs), each unsplit.
std::vector<std::pair<std::string, CudaOptions>> both_emitters_unsplit() {
  CudaOptions layouts = no_split_options();
  layouts.target.emitter = CudaTarget::Emitter::Layouts;
  return {{"planning", no_split_options()}, {"layouts", layouts}};
}

// That the layout emitter prints `k` with CTA pairs (so that a test of its pairs cannot pass on
// the planning emitter's fallback or on one CTA per program).
void expect_layout_pairs(const Kernel& k, const CudaOptions& o) {
  if (o.target.emitter != CudaTarget::Emitter::Layouts) return;
  CudaEmission em = emit_cuda_with_info(*run_pipeline(k, {}), cuda_target_for(o));
  EXPECT_NE(em.lowered, nullptr) << "the layout emitter did not print it";
  EXPECT_EQ(em.info.persistent_cluster, 2) << "no CTA pairs";
}

// cluster_m = 2: CTA pairs take programs (2q, n) and (2q + 1, n) and multicast half of each B
// tile into both rings. An even and an odd number of program rows (the last pair's second
// program lies past the grid), more pairs than clusters (the rings' phases and the epilogue
// buffers carry from tile to tile), ragged M, N and K, a 64-column tile (one epilogue box),
// the streamed-B hint (one row of tiles), and B as [N, K] (K-major, fp8 too). Both emitters
// (the layout emitter's pairs: pair-programs).
TEST(WgmmaGpu, ClusterPairsMatchTheInterpreter) {
  REQUIRE_HOPPER();
  uint64_t seed = 71;
  struct Case {
    int64_t bm, bn;
    Sizes s;
  };
  for (const auto& [emitter, opts] : both_emitters_unsplit()) {
    SCOPED_TRACE(emitter);
    for (const Case& c : {Case{128, 256, {{"M", 128 * 12 - 24}, {"N", 256 * 12 - 8}, {"K", 136}}},
                          Case{128, 256, {{"M", 128 * 13 - 40}, {"N", 256 * 11 - 8}, {"K", 264}}},
                          Case{128, 64, {{"M", 128 * 15 - 8}, {"N", 64 * 21 - 8}, {"K", 72}}},
                          Case{64, 256, {{"M", 100}, {"N", 256 * 40 - 8}, {"K", 264}}}}) {
      auto k = matmul(ScalarKind::BF16, c.bm, c.bn, 64);
      k->set_constexpr("cluster_m", 2);
      SCOPED_TRACE(std::to_string(c.bm) + "x" + std::to_string(c.bn) + " at " + sizes_str(c.s));
      expect_layout_pairs(*k, opts);
      EXPECT_EQ(run_and_compare(*k, c.s, seed++, opts), 0);
    }
    for (std::string in : {"bf16", "f8e4m3"}) {
      auto k = testutil::nt_matmul(in, "bf16", 128, 256, in == "bf16" ? 64 : 128);
      k->set_constexpr("cluster_m", 2);
      SCOPED_TRACE(in + " NT");
      expect_layout_pairs(*k, opts);
      EXPECT_EQ(run_and_compare(*k, {{"M", 128 * 11 - 8}, {"N", 256 * 13 - 16}, {"K", 272}}, seed++, opts), 0);
    }
  }
}

// cluster_m = 2 with an odd number of program rows in a grid that covers only whole tiles
// (floor(M / 128) rows: the interpreter leaves the output's last 64 rows as they were): the last
// pair's second CTA, past the grid, must not store its tile into those rows, with either epilogue.
TEST(WgmmaGpu, ClusterPairsProgramPastAnOddGridStoresNothing) {
  REQUIRE_HOPPER();
  std::string t = testutil::nt_matmul_text("bf16", "bf16", 128, 256, 64);
  const std::string ceil_rows = "%gm = div %mr, %bm : i32";
  ASSERT_NE(t.find(ceil_rows), std::string::npos);
  t.replace(t.find(ceil_rows), ceil_rows.size(), "%gm = div %m, %bm : i32");
  uint64_t seed = 91;
  for (const auto& [emitter, opts] : both_emitters_unsplit())
    for (int64_t tma_store : {1, 0}) {
      SCOPED_TRACE(emitter + ", tma_store_epilogue = " + std::to_string(tma_store));
      auto k = bind_constexprs(*parse_module(t, "floor_rows.tile")->kernels.at(0), {});
      k->set_constexpr("cluster_m", 2);
      k->set_constexpr("tma_store_epilogue", tma_store);
      expect_layout_pairs(*k, opts);
      EXPECT_EQ(run_and_compare(*k, {{"M", 128 * 13 + 64}, {"N", 256 * 5 - 8}, {"K", 136}}, seed++, opts), 0);
    }
}

}  // namespace
}  // namespace tessera::gputest
