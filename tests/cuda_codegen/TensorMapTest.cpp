// Tensor-map parameters (CudaParam::Kind::TensorMap): one per view, box and swizzle, so that two
// TMA copies of one view with different boxes each get a map describing their own box.
#include <gtest/gtest.h>

#include "cuda/CudaBackend.h"
#include "CodegenTestUtil.h"
#include "cuda/CudaEmitter.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

using codegentest::planning_target;

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// The library's bf16 matmul with B read from a's view too (a @ a): on sm_90a both wgmma operands
// are TMA copies of view 0, A's box 64 x BLOCK_M rows and B's 64 x BLOCK_K rows. Each needs its
// own map: with one map for the view, B's copies would write BLOCK_M rows into a BLOCK_K-row stage.
TEST(CudaTensorMaps, TwoBoxesOfOneViewAreTwoMaps) {
  auto lib = bind_constexprs(*find_library_kernel("matmul")->build(ScalarKind::BF16), {});
  std::string text = print_kernel(*lib);
  auto replace = [&](const std::string& from, const std::string& to) {
    size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  replace("%b: view<bf16, [K, N]>, ", "");
  replace("dim %b {axis = 1}", "dim %a {axis = 1}");
  replace("load_tile %b, ", "load_tile %a, ");
  auto k = bind_constexprs(*parse_module(text, "a_times_a.tile")->kernels.at(0), {});
  const CudaTarget t = planning_target("sm_90a");
  CudaEmission em = emit_cuda_with_info(*k, t);
  ASSERT_EQ(em.stats.count("dot.wgmma_tma"), 1u) << em.source;
  std::vector<const CudaParam*> maps;
  for (const CudaParam& p : em.info.params)
    if (p.kind == CudaParam::Kind::TensorMap) maps.push_back(&p);
  ASSERT_EQ(maps.size(), 3u);  // A, B (both of view 0), the TMA-store epilogue's C
  EXPECT_EQ(maps[0]->param_index, 0);
  EXPECT_EQ(maps[1]->param_index, 0);
  EXPECT_EQ(maps[0]->box[1], 128);  // BLOCK_M rows
  EXPECT_EQ(maps[1]->box[1], 64);   // BLOCK_K rows
  EXPECT_EQ(maps[0]->box[0], maps[1]->box[0]);
  EXPECT_EQ(maps[0]->swizzle, 128);
  EXPECT_EQ(maps[1]->swizzle, 128);
  // A's copies use tsr_tma0, B's tsr_tma0_1.
  EXPECT_NE(em.source.find("const __grid_constant__ tsr::TmaDesc tsr_tma0, const __grid_constant__ tsr::TmaDesc tsr_tma0_1"),
            std::string::npos);
  EXPECT_GE(count(em.source, ", &tsr_tma0, "), 1);
  EXPECT_GE(count(em.source, ", &tsr_tma0_1, "), 1);
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  EXPECT_FALSE(nvrtc_compile(em.source, t, "a_times_a.cu").cubin.empty());
}

}  // namespace
}  // namespace tessera
