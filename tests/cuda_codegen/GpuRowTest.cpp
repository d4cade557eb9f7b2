// Row kernels and warp reductions run on a GPU against the interpreter (skips without a
// device): the whole-row single-tile branch at the bench's tile sizes, the multi-tile branch,
// and reductions with partial chunks and several rows per tile.
#include <gtest/gtest.h>

#include <cmath>

#include "../gpu/GpuTestUtil.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera::gputest {
namespace {

TEST(CudaCodegenGpu, RowKernelsMatchInterpreterAtEveryBranch) {
  REQUIRE_GPU();
  struct Case {
    int64_t m, n, block_n;
  };
  // N = BLOCK_N (one tile, no padding), N < BLOCK_N (one ragged tile), N > BLOCK_N (loops).
  for (Case c : {Case{3, 4096, 4096}, Case{2, 32768, 32768}, Case{5, 3000, 4096}, Case{4, 999, 256},
                 Case{3, 8192, 2048}})
    for (const char* name : {"softmax", "layernorm", "rmsnorm"}) {
      SCOPED_TRACE(std::string(name) + " M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) +
                   " BLOCK_N=" + std::to_string(c.block_n));
      auto k = bind_constexprs(*find_library_kernel(name)->build(ScalarKind::BF16), {{"BLOCK_N", c.block_n}});
      try {
        expect_gpu_matches_interp(*k, {{"M", c.m}, {"N", c.n}}, 13);
      } catch (const TesseraError& e) {
        ADD_FAILURE() << e.what();
      }
    }
}

// Block reductions with 6 warps (partials folded in order), 8 and 16 warps (folded by lane
// shuffles), and the loops' reductions that alternate between two copies of shared words.
TEST(CudaCodegenGpu, RowKernelsMatchInterpreterAtOtherWarpCounts) {
  REQUIRE_GPU();
  for (int64_t warps : {6, 8, 16})
    for (const char* name : {"softmax", "layernorm", "rmsnorm"})
      for (int64_t n : {4000, 8192 + 77}) {
        SCOPED_TRACE(std::string(name) + " num_warps=" + std::to_string(warps) + " N=" + std::to_string(n));
        auto k = bind_constexprs(*find_library_kernel(name)->build(ScalarKind::BF16), {{"BLOCK_N", 4096}});
        k->constexprs.push_back({"num_warps", warps, {warps}, k->loc});
        try {
          expect_gpu_matches_interp(*k, {{"M", 7}, {"N", n}}, 17);
        } catch (const TesseraError& e) {
          ADD_FAILURE() << e.what();
        }
      }
}

// f16 row kernels: their x, w and b loads are kept packed (two halves per register) and
// converted at each use, at one ragged tile and in the loops.
TEST(CudaCodegenGpu, F16RowKernelsMatchInterpreter) {
  REQUIRE_GPU();
  for (const char* name : {"softmax", "layernorm", "rmsnorm"})
    for (int64_t n : {3000, 4096 * 2 + 40}) {
      SCOPED_TRACE(std::string(name) + " f16 N=" + std::to_string(n));
      auto k = bind_constexprs(*find_library_kernel(name)->build(ScalarKind::F16), {{"BLOCK_N", 4096}});
      try {
        expect_gpu_matches_interp(*k, {{"M", 5}, {"N", n}}, 29);
      } catch (const TesseraError& e) {
        ADD_FAILURE() << e.what();
      }
    }
}

// Loads prefetched one iteration ahead in the reduction loops (and stores with the evict-first
// hint): two to eight iterations, ragged last tiles, the last prefetch skipped by the bound.
TEST(CudaCodegenGpu, PrefetchedRowLoopsMatchInterpreter) {
  REQUIRE_GPU();
  for (const char* name : {"softmax", "layernorm", "rmsnorm"})
    for (auto [n, block_n] : {std::pair<int64_t, int64_t>{3000, 1024}, {4096 * 3 + 5, 4096}, {32768, 8192}, {777, 512}}) {
      SCOPED_TRACE(std::string(name) + " N=" + std::to_string(n) + " BLOCK_N=" + std::to_string(block_n));
      auto k = bind_constexprs(*find_library_kernel(name)->build(ScalarKind::BF16), {{"BLOCK_N", block_n}});
      k->constexprs.push_back({"prefetch_loads", 1, {0, 1}, k->loc});
      k->constexprs.push_back({"stream_stores", 1, {0, 1}, k->loc});  // evict-first stores too
      try {
        expect_gpu_matches_interp(*k, {{"M", 6}, {"N", n}}, 31);
      } catch (const TesseraError& e) {
        ADD_FAILURE() << e.what();
      }
    }
}

TEST(CudaCodegenGpu, WarpReductionsMatchInterpreter) {
  REQUIRE_GPU();
  // [1, 100]: vector width 1 with a partial chunk (threads without elements use the identity);
  // [4, 1024]: one chunk per row (several outputs); [2, 2, 64] over the middle axis: the
  // shared-memory fallback; i32 max/min and f32 prod.
  auto m = parse_module(R"(kernel @red(%x: view<f32, [M, N]>, %y: view<f32, [M, N]>, %z: view<i32, [M, N]>) {
  grid {
    %c1 = const {value = 1} : i32
    yield %c1
  }
  %c0 = const {value = 0} : i32
  %a = load_tile %x, %c0, %c0 : tile<f32, [1, 100]>
  %amax = reduce %a {axis = 1, kind = "max"} : tile<f32, [1]>
  %asum = reduce %a {axis = 1, kind = "sum"} : tile<f32, [1]>
  %b = load_tile %x, %c0, %c0 : tile<f32, [4, 1024]>
  %bs = reduce %b {axis = 1, kind = "sum"} : tile<f32, [4]>
  %bm = reduce %b {axis = 1, kind = "min"} : tile<f32, [4]>
  %k = const {value = 1000.0} : f32
  %kt = splat %k : tile<f32, [4, 1024]>
  %bk = mul %b, %kt : tile<f32, [4, 1024]>
  %bi = cast %bk : tile<i32, [4, 1024]>
  %bim = reduce %bi {axis = 1, kind = "max"} : tile<i32, [4]>
  %bin = reduce %bi {axis = 1, kind = "min"} : tile<i32, [4]>
  %sm = load_tile %x, %c0, %c0 : tile<f32, [1, 40]>
  %sc = mul %sm, %sm : tile<f32, [1, 40]>
  %sp = reduce %sc {axis = 1, kind = "prod"} : tile<f32, [1]>
  %q = reshape %b : tile<f32, [2, 32, 64]>
  %qs = reduce %q {axis = 1, kind = "sum"} : tile<f32, [2, 64]>
  %qr = reshape %qs : tile<f32, [1, 128]>
  %ab1 = broadcast %amax : tile<f32, [128]>
  %ab = reshape %ab1 : tile<f32, [1, 128]>
  %as1 = broadcast %asum : tile<f32, [128]>
  %as = reshape %as1 : tile<f32, [1, 128]>
  %ps1 = broadcast %sp : tile<f32, [128]>
  %ps = reshape %ps1 : tile<f32, [1, 128]>
  %o1 = add %qr, %ab : tile<f32, [1, 128]>
  %o2 = add %o1, %as : tile<f32, [1, 128]>
  %o3 = add %o2, %ps : tile<f32, [1, 128]>
  store_tile %y, %o3, %c0, %c0
  %r4 = sub %bs, %bm : tile<f32, [4]>
  %r4e = expand_dims %r4 {axis = 0} : tile<f32, [1, 4]>
  %one = const {value = 1} : i32
  store_tile %y, %r4e, %one, %c0
  %ii = sub %bim, %bin : tile<i32, [4]>
  %iie = expand_dims %ii {axis = 0} : tile<i32, [1, 4]>
  store_tile %z, %iie, %c0, %c0
}
)",
                        "warp_reductions.tile");
  auto k = bind_constexprs(*m->kernels.at(0), {});
  try {
    expect_gpu_matches_interp(*k, {{"M", 8}, {"N", 1024}}, 5);
  } catch (const TesseraError& e) {
    ADD_FAILURE() << e.what();
  }
}

// Float max/min reductions propagate NaN (max.NaN / min.NaN): a row of softmax with one NaN is
// NaN throughout on both backends, the other rows are unaffected, at 4 warps (partials read in
// order) and 8 warps (lane fold).
TEST(CudaCodegenGpu, FloatMaxReductionsPropagateNaN) {
  REQUIRE_GPU();
  for (int64_t warps : {4, 8})
    for (int64_t nan_at : {0, 1234, 4094}) {
      SCOPED_TRACE("num_warps=" + std::to_string(warps) + " NaN at " + std::to_string(nan_at));
      auto k = bind_constexprs(*find_library_kernel("softmax")->build(ScalarKind::F32), {{"BLOCK_N", 4096}});
      k->constexprs.push_back({"num_warps", warps, {warps}, k->loc});
      Sizes sizes{{"M", 3}, {"N", 4000 + 95}};
      std::vector<Tensor> want = make_random_tensors(*k, sizes, 23);
      want[0].set(1 * sizes["N"] + nan_at, std::nan(""));
      std::vector<Tensor> got = want;
      auto wa = args_for(*k, want), ga = args_for(*k, got);
      run_interp(*k, wa);
      compile_cuda(*k, test_options())->run_host(ga);
      testutil::expect_tensors_match(want, got, "softmax with a NaN", "gpu");
      EXPECT_TRUE(std::isnan(got[1].get(sizes["N"] + 7)));
      EXPECT_FALSE(std::isnan(got[1].get(7)));
    }
}

}  // namespace
}  // namespace tessera::gputest
