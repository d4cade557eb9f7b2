// The cpu measurement harness on vector_add at a small size: timings over rounds, --check,
// timeouts; and the child processes it runs candidates in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

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

}  // namespace
}  // namespace tessera::tune
