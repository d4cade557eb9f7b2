// The segmented top-k's kernels (topk's stages: segments, candidate levels, the merge) on the
// GPU against the reference, exact, at ragged sizes, on random rows and on rows of a few values
// (ties, NaN, infinities and zeros of both signs across every segment), printed three ways: by
// the planning emitter (the default), by the layout emitter (its block scans from registers,
// session 33), and by the layout emitter with TESSERA_CUDA_ONE_BARRIER_SCANS=1 (every scan's
// chunks in one tsr::block_exclusive_sums). tests/kernels/TopkStagesTest.cpp runs the same
// stages on the interpreter and the cpu backend.
#include <cstdlib>

#include "../common/TopkStages.h"
#include "GpuTestUtil.h"
#include "check/Compare.h"
#include "kernels/Kernels.h"
#include "kernels/Library.h"

namespace tessera::gputest {
namespace {

TEST(TopkStagesGpu, MatchTheReferenceInEveryEmitter) {
  REQUIRE_GPU();
  const LibraryKernel* lk = find_library_kernel("topk");
  struct Case {
    ScalarKind dt;
    int64_t M, N, K;
    bool few_values;
  };
  const Case cases[] = {{ScalarKind::F32, 3, 100001, 1000, false},
                        {ScalarKind::BF16, 2, 70001, 64, true},
                        {ScalarKind::F32, 4, 40000, 64, true},
                        {ScalarKind::F32, 1, 1 << 20, 1024, false}};
  uint64_t seed = 7;
  for (const Case& c : cases)
    for (const char* how : {"planning", "layouts", "layouts, one-barrier scans"}) {
      SCOPED_TRACE(std::string(how) + " " + std::string(scalar_name(c.dt)) + " M=" + std::to_string(c.M) +
                   " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K));
      CudaOptions o = test_options();
      o.target.from_layouts = std::string(how) != "planning";
      const bool one_barrier = std::string(how).find("one-barrier") != std::string::npos;
      if (one_barrier) ::setenv("TESSERA_CUDA_ONE_BARRIER_SCANS", "1", 1);
      const Sizes sizes{{"M", c.M}, {"N", c.N}, {"K", c.K}};
      LibraryStages st = lk->stages(c.dt, "cuda:" + cuda_target_for(o).str(), sizes, {});
      ASSERT_GE(st.stages.size(), 2u) << "the rule picked the whole-row kernel";
      auto op = bind_constexprs(*lk->build(c.dt), {{"K", c.K}});
      std::vector<Tensor> got = make_random_tensors(*op, sizes, seed++);
      if (c.few_values) testutil::fill_few_values(got[0], seed);
      std::vector<Tensor> want = got;
      std::vector<KernelArg> ga = make_args(*op, got, sizes), wa = make_args(*op, want, sizes);
      testutil::run_topk_stages(st, c.dt, ga, [&](const Kernel& bound, std::vector<KernelArg>& a) {
        compile_cuda(bound, o)->run_host(a);
      });
      if (one_barrier) ::unsetenv("TESSERA_CUDA_ONE_BARRIER_SCANS");
      lk->reference(wa, sizes);
      Comparison cmp = compare_outputs(*op, got, want);
      EXPECT_TRUE(cmp.ok()) << cmp.mismatches << "/" << cmp.elements << " first: " << cmp.first_mismatch;
    }
}

}  // namespace
}  // namespace tessera::gputest
