// sort and topk on the cuda backend: the shared test kernel (tests/common/SortKernel.h) emits a
// bitonic network per op and NVRTC compiles it, for a 32-bit and a 64-bit key type (no GPU
// needed; tests/cpu/sort_test.cpp checks the values, the GPU tests run them).
#include "CudaTestUtil.h"
#include "../common/SortKernel.h"

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

}  // namespace
}  // namespace tessera::cudatest
