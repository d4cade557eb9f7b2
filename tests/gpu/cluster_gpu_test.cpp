// Cluster-split programs against the interpreter (needs a GPU with clusters, sm_90+; skips
// elsewhere): the row kernels on clusters of 2, 4 and 8 CTAs at whole, ragged and looped rows,
// and a kernel of integer reductions over a 2-D grid that stores its one-element results (done
// by the cluster's first CTA only). The emission itself: tests/cuda_codegen/ClusterTest.cpp.
#include <gtest/gtest.h>

#include "GpuTestUtil.h"
#include "cuda/Driver.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera::gputest {
namespace {

bool device_has_clusters() { return cuda::device().sm >= 90; }

TEST(ClusterGpu, RowKernelsOnClustersMatchInterpreter) {
  REQUIRE_GPU();
  if (!device_has_clusters()) GTEST_SKIP() << "thread-block clusters need sm_90";
  struct Case {
    int64_t m, n, block_n, cluster;
  };
  // Whole rows (exact and ragged) and the loop branch (reductions alternate their slots).
  for (Case c : {Case{5, 32768, 32768, 8}, Case{3, 30001, 32768, 8}, Case{4, 16384, 16384, 4}, Case{6, 20000, 8192, 4},
                 Case{7, 8192 * 3 + 5, 8192, 2}, Case{2, 1000, 8192, 2}})
    for (const char* name : {"softmax", "layernorm", "rmsnorm"}) {
      SCOPED_TRACE(std::string(name) + " M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) +
                   " BLOCK_N=" + std::to_string(c.block_n) + " cluster_size=" + std::to_string(c.cluster));
      auto k = bind_constexprs(*find_library_kernel(name)->build(ScalarKind::BF16), {{"BLOCK_N", c.block_n}});
      k->constexprs.push_back({"cluster_size", c.cluster, {c.cluster}, k->loc});
      try {
        EXPECT_GT(compile_cuda(*k, test_options())->cluster, 1);
        expect_gpu_matches_interp(*k, {{"M", c.m}, {"N", c.n}}, 41);
      } catch (const TesseraError& e) {
        ADD_FAILURE() << e.what();
      }
    }
}

// Sum, max and min of i32 column blocks (exact: any wrong element or order shows), program
// (row, block) on a 2-D grid split along x only, each result stored as a [1, 1] tile; y = x - max
// as f32 over the block.
constexpr const char* kBlockStats = R"(
kernel @block_stats(%x: view<i32, [M, N]>, %out: view<i32, [M, Q]>, %y: view<f32, [M, N]>) {
  constexpr BLOCK_N = 4096
  constexpr cluster_size = 4
  grid {
    %m = dim %x {axis = 0} : i32
    %n = dim %x {axis = 1} : i32
    %bn = const {value = 4096} : i32
    %one = const {value = 1} : i32
    %a = add %n, %bn : i32
    %b = sub %a, %one : i32
    %nb = div %b, %bn : i32
    yield %m, %nb
  }
  %row = program_id {axis = 0} : i32
  %blk = program_id {axis = 1} : i32
  %c3 = const {value = 3} : i32
  %c1 = const {value = 1} : i32
  %c2 = const {value = 2} : i32
  %t = load_tile %x, %row, %blk : tile<i32, [1, BLOCK_N]>
  %s = reduce %t {axis = 1, kind = "sum"} : tile<i32, [1]>
  %mx = reduce %t {axis = 1, kind = "max"} : tile<i32, [1]>
  %mn = reduce %t {axis = 1, kind = "min"} : tile<i32, [1]>
  %s2 = expand_dims %s {axis = 1} : tile<i32, [1, 1]>
  %mx2 = expand_dims %mx {axis = 1} : tile<i32, [1, 1]>
  %mn2 = expand_dims %mn {axis = 1} : tile<i32, [1, 1]>
  %q0 = mul %blk, %c3 : i32
  %q1 = add %q0, %c1 : i32
  %q2 = add %q0, %c2 : i32
  store_tile %out, %s2, %row, %q0
  store_tile %out, %mx2, %row, %q1
  store_tile %out, %mn2, %row, %q2
  %mxb = broadcast %mx2 : tile<i32, [1, BLOCK_N]>
  %d = sub %t, %mxb : tile<i32, [1, BLOCK_N]>
  %f = cast %d : tile<f32, [1, BLOCK_N]>
  store_tile %y, %f, %row, %blk
}
)";

TEST(ClusterGpu, IntegerReductionsOnA2DGridMatchInterpreter) {
  REQUIRE_GPU();
  if (!device_has_clusters()) GTEST_SKIP() << "thread-block clusters need sm_90";
  auto m = parse_module(kBlockStats, "block_stats.tile");
  auto k = bind_constexprs(*m->kernels.at(0), {});
  EXPECT_EQ(compile_cuda(*k, test_options())->cluster, 4);
  // 4 column blocks, the last ragged (padding reads 0, which the interpreter counts too).
  for (int64_t n : {4096 * 3 + 100, 4096}) {
    int64_t blocks = (n + 4095) / 4096;
    SCOPED_TRACE("N=" + std::to_string(n));
    try {
      expect_gpu_matches_interp(*k, {{"M", 5}, {"N", n}, {"Q", 3 * blocks}}, 43);
    } catch (const TesseraError& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

}  // namespace
}  // namespace tessera::gputest
