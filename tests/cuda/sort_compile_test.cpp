// sort and topk on the cuda backend: the shared test kernel (tests/common/SortKernel.h) emits a
// bitonic network per op and NVRTC compiles it, for a 32-bit and a 64-bit key type (no GPU
// needed; tests/cpu/sort_test.cpp checks the values, the GPU tests run them).
#include "CudaTestUtil.h"
#include "../common/ScopedEnv.h"
#include "../common/SortKernel.h"
#include "kernels/Kernels.h"

namespace tessera::cudatest {
namespace {

TEST(CudaSort, EmitsANetworkPerOpAndCompiles) {
  std::string why;
  bool nvrtc = nvrtc_available(&why);
  for (const char* type : {"bf16", "i64"}) {
    SCOPED_TRACE(type);
    auto m = parse_module(testutil::sort_kernel(type), "t.tile");
    auto k = bind_constexprs(*m->kernels.at(0), {});
    CudaTarget t = CudaTarget::parse("sm_90a");
    CudaEmission em = emit_cuda_with_info(*k, t);
    EXPECT_EQ(em.stats["sorts"], 5);
    EXPECT_NE(em.source.find("tsr::sort_key("), std::string::npos);
    if (nvrtc) expect_nvrtc_accepts(em, t);
  }
  if (!nvrtc) GTEST_SKIP() << "emitted text checked; not compiled: " << why;
}

// histogram: shared-memory counts (tsr::hist_add) for a blocked and a replicated operand; the
// sum scan of one whole tile in registers (tsr::block_exclusive_sum); tests/text/data/
// histogram.tile, whose values the cpu corpus test checks against the interpreter.
TEST(CudaSort, HistogramAndBlockScanCompile) {
  std::string why;
  bool nvrtc = nvrtc_available(&why);
  auto m = parse_file(std::string(TESSERA_SOURCE_DIR) + "/tests/text/data/histogram.tile");
  auto k = bind_constexprs(*m->kernels.at(0), {});
  CudaTarget t = CudaTarget::parse("sm_80");
  CudaEmission em = emit_cuda_with_info(*k, t);
  EXPECT_EQ(em.stats["histograms"], 2);
  EXPECT_EQ(em.stats["block-scans"], 1);
  if (nvrtc) expect_nvrtc_accepts(em, t);
  else GTEST_SKIP() << "emitted text checked; not compiled: " << why;
}

// The library topk (a radix select): one histogram, in the loop over the digit passes (one copy
// per pass, three for f32, with TESSERA_TOPK_UNROLLED_PASSES=1), and the load of the k results
// it scattered comes after a barrier (other threads wrote them).
TEST(CudaSort, LibraryTopkReadsItsScatteredResultsAfterABarrier) {
  auto k = bind_constexprs(*find_library_kernel("topk")->build(ScalarKind::F32), {{"K", 100}});
  CudaEmission em = emit_cuda_with_info(*k, CudaTarget::parse("sm_90a"));
  EXPECT_EQ(em.stats["histograms"], 1);
  EXPECT_EQ(em.stats["write-read-barriers"], 1);
  EXPECT_EQ(em.stats["sorts"], 1);
}

// The segmented top-k's kernels (at 1 x 2^24, k = 1024: the segment form over x, over
// candidates, and the merge) emit and NVRTC compiles them: f32 for sm_90a from the row
// threshold (its two histogram kernels too) with the default tiles (each segment, candidate
// segment and merge row one tile, read once), bf16 for sm_80 without it, with smaller tiles
// (the ring over a segment's tiles, the candidate forms' tile loops). A histogram each, a sort
// only in the merge (the segments' candidates stay in column order),
// whose read of its scattered results follows a barrier; two CTAs per SM asked for the f32
// segment kernel only.
TEST(CudaSort, SegmentedTopkStagesCompile) {
  std::string why;
  bool nvrtc = nvrtc_available(&why);
  struct Plan {
    ScalarKind dt;
    const char* target;
    std::map<std::string, int64_t> given;
    int64_t candidate_tile;
    bool row_threshold;
    // The stages compiled: the row threshold's two histogram kernels (where it has them), the
    // selects' first level, a candidate level, the merge.
    std::vector<size_t> compiled;
    const char* names;
  };
  for (const Plan& p :
       {Plan{ScalarKind::F32, "sm_90a", {}, 8192, true, {1, 2, 3, 4, 7},
             "topk_histogram_high topk_histogram_low topk_thr_segments_tile "
             "topk_thr_candidates_tile topk_thr_merge_tile"},
        Plan{ScalarKind::BF16, "sm_80", {{"BLOCK_N", 4096}}, 2048, false, {0, 1, 4},
             "topk_segments topk_segments_candidates topk_merge"}}) {
    LibraryStages st =
        kernels::topk_stages(p.dt, 1, int64_t{1} << 24, 1024, 8192, 16384, p.given, p.candidate_tile,
                             p.row_threshold ? kernels::TopkThreshold::RowHistograms : kernels::TopkThreshold::None);
    const size_t selects = p.row_threshold ? 3 : 0;  // the stages before the selects
    ASSERT_EQ(st.stages.size(), 5u + selects);
    std::string names;
    for (size_t i : p.compiled) {
      auto k = bind_constexprs(*st.stages[i].build(p.dt), st.stages[i].config);
      names += (names.empty() ? "" : " ") + k->name;
      SCOPED_TRACE(k->name + " " + p.target);
      CudaTarget t = CudaTarget::parse(p.target);
      CudaEmission em = emit_cuda_with_info(*k, t);
      const bool merge = i == st.stages.size() - 1;
      // A histogram kernel counts once; a select's passes are one loop (the merge from the row
      // threshold has one pass left for f32).
      EXPECT_EQ(em.stats["histograms"], 1);
      EXPECT_EQ(em.stats["sorts"], merge ? 1 : 0);
      // The f32 segment kernel asks for two CTAs per SM (topk_stages' min_blocks); no other does.
      const bool two = i == selects && p.dt == ScalarKind::F32;
      EXPECT_EQ(em.source.find("__launch_bounds__(512, 2)") != std::string::npos, two) << em.source.substr(0, 400);
      // The merge reads back what its scatters wrote: one barrier between (the count of kept
      // elements comes from the tile's counts before the scatters, so no reduction's barrier
      // orders them any more).
      EXPECT_EQ(em.stats["write-read-barriers"], merge ? 1 : 0);
      if (nvrtc) expect_nvrtc_accepts(em, t);
    }
    EXPECT_EQ(names, p.names);
  }
  if (!nvrtc) GTEST_SKIP() << "emitted text checked; not compiled: " << why;
}

// TESSERA_CUDA_ONE_BARRIER_SCANS=1 (an A/B switch, bench/session33_gpu.sh): a block scan of
// several chunks (repeats) a thread is one tsr::block_exclusive_sums, one barrier, in both
// emitters; the segmented top-k's kernels (f32, sm_90a, from the bucket threshold) and the
// whole-row one (sm_80) print it and NVRTC compiles them. Off, the former code (the golden files hold it).
TEST(CudaSort, OneBarrierScansCompile) {
  std::string why;
  const bool nvrtc = nvrtc_available(&why);
  const testutil::ScopedEnv one_barrier("TESSERA_CUDA_ONE_BARRIER_SCANS", "1");
  const LibraryKernel* lk = find_library_kernel("topk");
  std::vector<std::pair<std::unique_ptr<Kernel>, std::string>> kernels;
  for (const LibraryStage& st : lk->stages(ScalarKind::F32, "cuda:sm_90a", {{"M", 64}, {"N", 131072}, {"K", 64}}, {}).stages)
    kernels.emplace_back(bind_constexprs(*st.build(ScalarKind::F32), st.config), "sm_90a");
  kernels.emplace_back(bind_constexprs(*lk->build(ScalarKind::F32), library_config(*lk, ScalarKind::F32, "cuda:sm_80")), "sm_80");
  for (const auto& [k, target] : kernels)
    for (bool layouts : {false, true}) {
      SCOPED_TRACE(k->name + " " + target + (layouts ? " layouts" : " planning"));
      CudaTarget t = CudaTarget::parse(target);
      t.emitter = layouts ? CudaTarget::Emitter::Layouts : CudaTarget::Emitter::Planning;
      CudaEmission em = emit_cuda_with_info(*run_pipeline(*k, {}), t);
      const bool printed = std::any_of(em.notes.begin(), em.notes.end(), [](const std::string& n) {
        return n.find("printed from the GPU lowering") != std::string::npos;
      });
      if (layouts && !printed) continue;  // (the whole-row kernel falls back: its ring is Struct ops)
      if (k->name != "topk_bucket_best")    // (the bucket bests: a `min`, no scan)
        EXPECT_NE(em.source.find("tsr::block_exclusive_sums<16, "), std::string::npos);
      EXPECT_EQ(em.source.find("tsr::block_exclusive_sum<"), std::string::npos);
      if (nvrtc) expect_nvrtc_accepts(em, t);
    }
  if (!nvrtc) GTEST_SKIP() << "emitted text checked; not compiled: " << why;
}

// The bucket threshold's stages at 64 x 131072, k = 64 (buckets of 128): each bucket's best,
// the select that writes only the row's threshold (no sort, no scatter), the segments from it
// and the merge; both emitters print each one (the layout emitter without falling back) and
// NVRTC compiles them, f32 and bf16 for sm_90a; and the bests from samples of 32 (BUCKET_SAMPLE:
// a gather), whose kernel alone differs.
TEST(CudaSort, BucketThresholdStagesCompile) {
  std::string why;
  const bool nvrtc = nvrtc_available(&why);
  for (ScalarKind dt : {ScalarKind::F32, ScalarKind::BF16})
  for (int64_t sample : {0, 32}) {
    std::map<std::string, int64_t> given;
    if (sample) given["BUCKET_SAMPLE"] = sample;
    LibraryStages st = kernels::topk_stages(dt, 64, 131072, 64, 8192, 8192, given, 8192, kernels::TopkThreshold::BucketBest);
    EXPECT_EQ(st.stages.at(0).config.count("SAMPLE"), sample ? 1u : 0u);
    std::string names;
    for (const LibraryStage& s : st.stages) {
      auto k = run_pipeline(*s.build(dt), PipelineOptions{s.config, "", nullptr, {}});
      names += (names.empty() ? "" : " ") + k->name;
      if (sample && k->name != "topk_bucket_best") continue;
      for (bool layouts : {false, true}) {
        SCOPED_TRACE(k->name + (layouts ? " layouts" : " planning"));
        CudaTarget t = CudaTarget::parse("sm_90a");
        t.emitter = layouts ? CudaTarget::Emitter::Layouts : CudaTarget::Emitter::Planning;
        CudaEmission em = emit_cuda_with_info(*k, t);
        if (layouts) {
          EXPECT_TRUE(std::any_of(em.notes.begin(), em.notes.end(), [](const std::string& n) {
            return n.find("printed from the GPU lowering") != std::string::npos;
          })) << em.notes.back();
        }
        const bool select = k->name == "topk_bucket_select_tile";
        EXPECT_EQ(em.stats["sorts"], k->name == "topk_merge_tile" ? 1 : 0);
        if (select) {
          EXPECT_EQ(em.source.find("tsr_p2"), std::string::npos) << "the select writes only thr";
        }
        if (nvrtc) expect_nvrtc_accepts(em, t);
      }
    }
    EXPECT_EQ(names, "topk_bucket_best topk_bucket_select_tile topk_bkt_segments_tile topk_merge_tile");
  }
  if (!nvrtc) GTEST_SKIP() << "emitted text checked; not compiled: " << why;
}

}  // namespace
}  // namespace tessera::cudatest
