// The cpu measurement harness on vector_add at a small size: timings over rounds, --check,
// timeouts; and the child processes it runs candidates in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "cuda/CubinInfo.h"
#include "cuda/CudaBackend.h"
#include "kernels/Library.h"
#include "support/Diagnostic.h"
#include "text/Text.h"
#include "tune/Measure.h"

namespace tessera::tune {
namespace {

using ::testing::HasSubstr;

// The database's kernel key leaves the space out: a candidate added or a default changed keeps
// the key (and so every measured row); a change to what the kernel computes does not.
TEST(Measure, TheKernelKeyIgnoresTheSpaceButNotTheProgram) {
  auto k = find_library_kernel("matmul")->build(ScalarKind::BF16);
  const std::string key = kernel_identity_hash(*k);
  auto grown = k->clone();
  for (ConstexprDecl& c : grown->constexprs) {
    c.candidates.push_back(512);
    c.value = 32;
  }
  EXPECT_NE(kernel_ir_hash(*grown), kernel_ir_hash(*k));  // the printed IR differs
  EXPECT_EQ(kernel_identity_hash(*grown), key);
  EXPECT_NE(kernel_identity_hash(*find_library_kernel("matmul")->build(ScalarKind::F16)), key);
  EXPECT_NE(kernel_identity_hash(*find_library_kernel("vector_add")->build(ScalarKind::BF16)), key);
  // The unbound kernel itself is left as it was.
  EXPECT_EQ(kernel_ir_hash(*k), kernel_ir_hash(*find_library_kernel("matmul")->build(ScalarKind::BF16)));
}

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
  EXPECT_THAT(bad[0].message, HasSubstr("1/3001 mismatches, first: z[5]"));  // z only: x and y are not written
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
  // The cuda harness downloads only the sampled rows: the same verdicts on outputs cut to them.
  std::vector<Tensor> cut = {no_rows(), no_rows(), take_rows(got[2], p.rows)};
  EXPECT_EQ(check_rows_against_reference(p, *bound, cut), "");
  cut[2].set(1 * 23 + 7, cut[2].get(1 * 23 + 7) + 100);  // row p.rows[1]
  EXPECT_THAT(check_rows_against_reference(p, *bound, cut), HasSubstr("1/"));
  got[2].set(p.rows[1] * 23 + 7, got[2].get(p.rows[1] * 23 + 7) + 100);
  EXPECT_THAT(check_against_reference(p, *bound, got), HasSubstr("1/"));
  EXPECT_THAT(check_against_reference(p, *bound, got), HasSubstr("mismatches (on " + std::to_string(p.rows.size()) + " sampled rows of M)"));
}

// The cuda compile side keeps each config's answer (registers, shared memory, threads) for the
// process: the second time a config is met, at this shape or another, no child compiles it.
TEST(Measure, ACudaConfigMetAgainStartsNoCompileChild) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  auto k = find_library_kernel("vector_add")->build(ScalarKind::F32);
  Problem p;
  p.kernel = k.get();
  p.target = "cuda:sm_90a";
  p.sizes = {{"N", 3001}};
  MeasureOptions o;
  const std::vector<Config> configs = {{{"BLOCK", 256}}, {{"BLOCK", 512}}};
  auto first = cuda_compile_candidates(p, o, configs);
  p.sizes = {{"N", 5000}};
  auto again = cuda_compile_candidates(p, o, configs);
  ASSERT_EQ(again.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(first[i].status, "ok") << first[i].message;
    EXPECT_GT(first[i].compile_s, 0);  // a child's (a cache hit or NVRTC)
    EXPECT_EQ(again[i].status, "ok");
    EXPECT_EQ(again[i].compile_s, 0);  // no child
    EXPECT_EQ(again[i].registers, first[i].registers);
    EXPECT_EQ(again[i].smem_bytes, first[i].smem_bytes);
    EXPECT_GT(again[i].registers, 0);
  }
}

// The views a kernel writes are the ones the tuner compares: matmul's c, not a or b; a view
// written by scatter or atomic counts as written.
TEST(Measure, OnlyTheViewsAKernelWritesAreCompared) {
  auto mm = bind_config(*find_library_kernel("matmul")->build(ScalarKind::F32), {});
  EXPECT_FALSE(is_written_view(*mm, 0));
  EXPECT_FALSE(is_written_view(*mm, 1));
  EXPECT_TRUE(is_written_view(*mm, 2));
  EXPECT_FALSE(is_written_view(*mm, 3));  // no such view
  auto va = bind_config(*find_library_kernel("vector_add")->build(ScalarKind::F32), {});
  VectorAdd v;
  std::vector<Tensor> got = v.p.want;
  EXPECT_EQ(check_against_reference(v.p, *va, got), "");
  // An input that differs (the harness never downloads it) is not compared; the output is.
  got[0].set(3, got[0].get(3) + 1);
  EXPECT_EQ(check_against_reference(v.p, *va, got), "");
  got[2].set(4, got[2].get(4) + 1);
  EXPECT_THAT(check_against_reference(v.p, *va, got), HasSubstr("1/3001 mismatches, first: z[4]"));
  // As `tessera tune` makes the problem: nothing of the inputs kept.
  v.p.want[0] = no_rows();
  v.p.want[1] = no_rows();
  EXPECT_THAT(check_against_reference(v.p, *va, got), HasSubstr("1/3001 mismatches"));
  got[2] = v.p.want[2];
  EXPECT_EQ(check_against_reference(v.p, *va, got), "");
}

TEST(Measure, ScatterAndAtomicTargetsAreWrittenViews) {
  const char* text = R"(kernel @k(%x: view<f32, [N]>, %h: view<f32, [N]>, %y: view<f32, [N]>) {
  grid {
    %one = const {value = 1} : i32
    yield %one
  }
  %ar = arange {start = 0} : tile<i32, [64]>
  %t = gather %x, %ar : tile<f32, [64]>
  scatter %y, %t, %ar
  %old = atomic %h, %t, %ar {kind = "add"} : tile<f32, [64]>
}
)";
  auto m = parse_module(text, "k.tile");
  const auto& ks = m->kernels;
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_FALSE(is_written_view(*ks[0], 0));
  EXPECT_TRUE(is_written_view(*ks[0], 1));
  EXPECT_TRUE(is_written_view(*ks[0], 2));
}

// The tuner's inputs: the same for a seed however many cores draw them, different for another
// seed, each chunk of 2^20 elements its own stream, in [-1, 1), rounded to the dtype.
TEST(Measure, RandomInputsAreDrawnInParallelChunksDeterministically) {
  auto k = bind_config(*find_library_kernel("matmul")->build(ScalarKind::BF16), {});
  const Sizes s = {{"M", 3}, {"N", 1000}, {"K", 1100}};  // b: 1.1 million elements, two chunks
  std::vector<Tensor> a = random_inputs(*k, s, 4), b = random_inputs(*k, s, 4), c = random_inputs(*k, s, 5);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[1].shape, (std::vector<int64_t>{1100, 1000}));
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(a[i].data, b[i].data);
  EXPECT_NE(a[1].data, c[1].data);
  EXPECT_NE(a[0].data, a[2].data);  // each view its own stream
  const int64_t chunk = int64_t{1} << 20;
  bool same = true;
  for (int64_t i = 0; i < 64; ++i) same &= a[1].get(i) == a[1].get(chunk + i);
  EXPECT_FALSE(same);
  double lo = 1, hi = -1;
  for (int64_t i = 0; i < a[1].numel(); i += 997) lo = std::min(lo, a[1].get(i)), hi = std::max(hi, a[1].get(i));
  EXPECT_GE(lo, -1.0);
  EXPECT_LE(hi, 1.0);
  EXPECT_LT(lo, -0.9);
  EXPECT_GT(hi, 0.9);
}

TEST(Measure, ParallelForRunsEachIndexOnceAndRethrows) {
  std::vector<int> hits(1000, 0);
  parallel_for(1000, 4, [&](int64_t i) { hits[static_cast<size_t>(i)] += 1; });
  EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), 1000);
  EXPECT_THROW(parallel_for(10, 3, [](int64_t i) {
    if (i == 7) throw TesseraError("seven");
  }), TesseraError);
}

// The cuda harness's watchdog: it fires once when armed past its timeout, never when disarmed
// in time, and can be armed again.
TEST(Measure, TheWatchdogFiresOnlyWhenArmedPastItsTimeout) {
  std::mutex mu;
  std::vector<std::string> fired;
  Watchdog dog([&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    fired.push_back(what);
  });
  dog.arm(5.0, "slow");
  dog.disarm();
  dog.arm(0.05, "hung");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  dog.disarm();
  dog.arm(0.05, "again");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(fired, (std::vector<std::string>{"hung", "again"}));
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
