// The cpu measurement harness on vector_add at a small size: timings over rounds, --check,
// timeouts; and the child processes it runs candidates in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "cuda/CubinInfo.h"
#include "cuda/CudaBackend.h"
#include "kernels/Library.h"
#include "tune/Measure.h"

namespace tessera::tune {
namespace {

using ::testing::HasSubstr;

TEST(Measure, ChildrenAnswerTimeOutAndCrashApart) {
  auto r = run_in_children(4, 2, 2.0, [](int i) -> std::string {
    if (i == 1) std::abort();
    if (i == 2) ::sleep(30);
    return "ok " + std::to_string(i);
  });
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0], "ok 0");
  EXPECT_EQ(r[1], "crash: killed by signal 6");
  EXPECT_EQ(r[2], "timeout");
  EXPECT_EQ(r[3], "ok 3");
}

struct VectorAdd {
  std::unique_ptr<Kernel> k = find_library_kernel("vector_add")->build(ScalarKind::F32);
  Problem p;
  VectorAdd() {
    p.kernel = k.get();
    p.sizes = {{"N", 3001}};
    p.inputs = make_random_tensors(*k, p.sizes, 7);
    p.want = p.inputs;
    std::vector<KernelArg> a = make_args(*k, p.want);
    find_library_kernel("vector_add")->reference(a, p.sizes);
    p.make_args = [](const Kernel& b, std::vector<Tensor>& t) { return make_args(b, t); };
  }
};

TEST(Measure, TimesPassingCandidatesOverRoundsAndRejectsWrongOnes) {
  VectorAdd v;
  MeasureOptions o;
  o.rounds = 2;
  o.round_ms = 2;
  auto m = make_cpu_measurer(v.p, o);
  auto got = m->measure({{{"BLOCK", 256}}, {{"BLOCK", 1024}}, {{"BLOCK", 999}}});
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(got[i].status, "ok") << got[i].message;
    EXPECT_EQ(got[i].round_ms.size(), 2u);
    EXPECT_GT(got[i].ms, 0);
    EXPECT_EQ(got[i].bound_hash.size(), 32u);
  }
  EXPECT_NE(got[0].bound_hash, got[1].bound_hash);
  EXPECT_EQ(got[2].status, "bind-error");  // not a candidate of BLOCK
  EXPECT_THAT(got[2].message, HasSubstr("not one of its candidates"));
  // A reference that disagrees: the candidate fails its check and is not timed.
  v.p.want[2].set(5, v.p.want[2].get(5) + 1);
  auto bad = make_cpu_measurer(v.p, o)->measure({{{"BLOCK", 256}}});
  EXPECT_EQ(bad[0].status, "check-failed");
  EXPECT_THAT(bad[0].message, HasSubstr("1/9003 mismatches, first: z[5]"));
  EXPECT_TRUE(bad[0].round_ms.empty());
  EXPECT_THAT(m->device(), HasSubstr(" x"));
}

TEST(Measure, ACompileOverTheTimeoutIsRecordedAndSkipped) {
  // A fresh cache: the compile cannot finish in 10 ms.
  std::string dir = testing::TempDir() + "/tune_cache_" + std::to_string(::getpid());
  ::setenv("TESSERA_CACHE_DIR", dir.c_str(), 1);
  VectorAdd v;
  MeasureOptions o;
  o.timeout_s = 0.01;
  auto got = make_cpu_measurer(v.p, o)->measure({{{"BLOCK", 512}}});
  ::unsetenv("TESSERA_CACHE_DIR");
  EXPECT_EQ(got[0].status, "timeout");
  EXPECT_THAT(got[0].message, HasSubstr("compiling took over"));
}

// A large problem is checked on sampled rows: the reference runs on those rows only, and a
// wrong element is found there and only there.
TEST(Measure, ASampledCheckComparesTheSampledRowsOnly) {
  const LibraryKernel* lib = find_library_kernel("matmul");
  ASSERT_EQ(lib->row_dim, "M");
  auto k = lib->build(ScalarKind::F32);
  auto bound = bind_config(*k, {});
  const Sizes full = {{"M", 37}, {"N", 23}, {"K", 19}};
  Problem p;
  p.kernel = k.get();
  p.sizes = full;
  p.inputs = make_random_tensors(*bound, full, 5);
  p.row_dim = "M";
  p.rows = sample_rows(37, 4, 9);
  ASSERT_GE(p.rows.size(), 3u);
  EXPECT_EQ(p.rows.front(), 0);
  EXPECT_EQ(p.rows.back(), 36);
  EXPECT_TRUE(std::is_sorted(p.rows.begin(), p.rows.end()));
  // The reference on the sampled rows (a and c by rows, b whole), as `tessera tune` makes it.
  p.want = {take_rows(p.inputs[0], p.rows), p.inputs[1], take_rows(p.inputs[2], p.rows)};
  EXPECT_TRUE(is_row_view(p, *bound, 0));
  EXPECT_FALSE(is_row_view(p, *bound, 1));  // b [K, N]: an input
  Sizes few = full;
  few["M"] = static_cast<int64_t>(p.rows.size());
  std::vector<KernelArg> ra = make_args(*bound, p.want);
  lib->reference(ra, few);
  p.bounds = lib->error_bounds(ra, few);
  p.want[1] = no_rows();  // not compared, as `tessera tune` leaves it
  if (p.bounds.size() > 1) p.bounds[1].clear();
  // A kernel's outputs: the reference over all rows.
  std::vector<Tensor> got = p.inputs;
  std::vector<KernelArg> ga = make_args(*bound, got);
  lib->reference(ga, full);
  EXPECT_EQ(check_against_reference(p, *bound, got), "");
  int64_t unsampled = 1;
  while (std::count(p.rows.begin(), p.rows.end(), unsampled)) ++unsampled;
  got[2].set(unsampled * 23 + 5, got[2].get(unsampled * 23 + 5) + 100);
  EXPECT_EQ(check_against_reference(p, *bound, got), "");  // not a sampled row
  got[2].set(p.rows[1] * 23 + 7, got[2].get(p.rows[1] * 23 + 7) + 100);
  EXPECT_THAT(check_against_reference(p, *bound, got), HasSubstr("1/"));
  EXPECT_THAT(check_against_reference(p, *bound, got), HasSubstr("mismatches (on " + std::to_string(p.rows.size()) + " sampled rows of M)"));
}

// ptxas's report from a cubin (no device needed), and the limits the cuda harness prunes on.
TEST(Measure, CubinResourcesAndTheirLimits) {
  EXPECT_EQ(cubin_resources(std::vector<char>(100, 'x'), "k").registers, -1);
  EXPECT_EQ(cuda_resources_reject(255, 512, 0, "cuda:sm_90a"), "ptxas: 255 registers x 512 threads > 65536 per multiprocessor");
  EXPECT_EQ(cuda_resources_reject(128, 512, 232448, "cuda:sm_90a"), "");
  EXPECT_EQ(cuda_resources_reject(32, 128, 232449, "cuda:sm_90a"),
            "232449 bytes of shared memory per CTA > 232448 on cuda:sm_90a");
  EXPECT_EQ(cuda_resources_reject(32, 128, 170000, "cuda:sm_80"),
            "170000 bytes of shared memory per CTA > 166912 on cuda:sm_80");
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  auto k = find_library_kernel("vector_add")->build(ScalarKind::F32);
  CudaOptions o;
  o.target = CudaTarget::parse("cuda:sm_90a");
  o.target_from_device = false;
  auto c = compile_cuda(*bind_config(*k, {}), o);
  CubinResources r = cubin_resources(c->cubin(), c->symbol);
  EXPECT_GT(r.registers, 0);
  EXPECT_LE(r.registers, 255);
  EXPECT_EQ(r.static_smem, 0);  // vector_add stages nothing in shared memory
  EXPECT_EQ(r.frame_bytes, 0);
  EXPECT_EQ(cubin_resources(c->cubin(), "no_such_kernel").registers, -1);
}

}  // namespace
}  // namespace tessera::tune
