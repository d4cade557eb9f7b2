// Row kernels with several rows per program (layernorm's BLOCK_M), paired 16-bit stores and the
// vector accesses' opt-in whole-tile test, without a GPU: emitted text and statistics, and
// NVRTC compiling every new configuration for sm_80 and sm_90a.
#include <gtest/gtest.h>

#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"
#include "CodegenTestUtil.h"
#include "kernels/Library.h"
#include "passes/Passes.h"

namespace tessera {
namespace {

using codegentest::expect_compiles;
using codegentest::planning_target;

std::unique_ptr<Kernel> layernorm(int64_t block_n, int64_t block_m, ScalarKind dt = ScalarKind::BF16) {
  // Through the pipeline, as compile_cuda does (canonicalize drops BLOCK_M = 1's identity broadcasts).
  return run_pipeline(*find_library_kernel("layernorm")->build(dt), {.config = {{"BLOCK_N", block_n}, {"BLOCK_M", block_m}}});
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// w and b ([BLOCK_N]) meet the [BLOCK_M, BLOCK_N] rows in each thread's own registers, and the
// rows' means and scales ([BLOCK_M, 1]) are picked by compile-time slot: no shared memory but
// the reductions' own words, no select loops.
TEST(CudaRowBlocks, LayerNormRowBlocksBroadcastInRegisters) {
  for (int64_t bm : {2, 4}) {
    auto k = layernorm(4096, bm);
    k->set_constexpr("prefetch_programs", 0);  // (its buffers would be dynamic shared memory; BLOCK_M = 4 has 32 KiB tiles)
    CudaEmission em = emit_cuda_with_info(*k, planning_target("sm_90a"));
    EXPECT_EQ(em.stats["layout-conversions"], 0) << bm;
    EXPECT_EQ(em.info.dynamic_smem_bytes, 0) << bm;
    // One-tile branch: the mask, w and b; the loops: two masks, w and b.
    EXPECT_EQ(em.stats["register-broadcasts"], 3 + 3) << bm;
    EXPECT_EQ(count(em.source, "for (int q_ = 1;"), 0) << em.source;
    EXPECT_EQ(em.stats["packed-loads"], 3 + 5) << bm;  // w and b stay packed through the broadcast
  }
  // BLOCK_M = 1 has nothing to broadcast along rows.
  CudaEmission one = emit_cuda_with_info(*layernorm(4096, 1), planning_target("sm_90a"));
  EXPECT_EQ(one.stats["register-broadcasts"], 0);
  EXPECT_EQ(one.stats["layout-conversions"], 0);
}

TEST(CudaRowBlocks, LayerNormRowBlocksCompile) {
  for (int64_t bm : {2, 4}) {
    expect_compiles(*layernorm(4096, bm), "layernorm BLOCK_M=" + std::to_string(bm));
    auto k = layernorm(1024, bm, ScalarKind::F16);
    k->constexprs.push_back({"num_warps", 4, {4}, k->loc});
    expect_compiles(*k, "layernorm f16 num_warps=4 BLOCK_N=1024 BLOCK_M=" + std::to_string(bm));
  }
}

// 16-bit stores of a cast from f32 round the f32 values two at a time (the cast's rounded copy
// is then dead code, which NVVM drops); pair_stores = 0 turns that off. whole_tile_checks = 1
// tests bounds and alignment once per tile, then every chunk goes without a test, with the
// chunk-by-chunk path for tiles at ragged or unaligned edges.
TEST(CudaRowBlocks, PairedStoresAndWholeTileTests) {
  // layernorm declares whole_tile_checks (default 1); 0 leaves only the chunk-by-chunk path.
  auto off = bind_constexprs(*find_library_kernel("layernorm")->build(ScalarKind::BF16),
                             {{"BLOCK_N", 4096}, {"whole_tile_checks", 0}});
  CudaEmission em = emit_cuda_with_info(*off, planning_target("sm_90a"));
  EXPECT_EQ(em.stats["stores-from-f32"], 2);
  EXPECT_NE(em.source.find("tsr::f2bf2("), std::string::npos);
  EXPECT_EQ(count(em.source, "const bool whole"), 0);
  auto k = bind_constexprs(*find_library_kernel("layernorm")->build(ScalarKind::BF16), {{"BLOCK_N", 4096}});
  k->constexprs.push_back({"pair_stores", 0, {0, 1}, k->loc});
  CudaEmission o = emit_cuda_with_info(*k, planning_target("sm_90a"));
  // x, w, b and y in the one-tile branch and in the loops.
  EXPECT_EQ(count(o.source, "const bool whole"), 4 + 1 + 1 + 4) << o.source;
  EXPECT_EQ(o.source.find("tsr::f2bf2("), std::string::npos);
  EXPECT_EQ(o.stats["stores-from-f32"], 0);
  expect_compiles(*k, "layernorm whole_tile_checks=1 pair_stores=0");
  expect_compiles(*layernorm(4096, 2), "layernorm BLOCK_M=2 whole_tile_checks=1");
  // f16 pairs too.
  auto h = bind_constexprs(*find_library_kernel("softmax")->build(ScalarKind::F16), {{"BLOCK_N", 4096}});
  EXPECT_NE(emit_cuda(*h, planning_target("sm_80")).find("tsr::f2h2("), std::string::npos);
  expect_compiles(*h, "softmax f16");
}

}  // namespace
}  // namespace tessera
