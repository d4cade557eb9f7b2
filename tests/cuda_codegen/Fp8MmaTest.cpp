// fp8 dots on mma.sync m16n8k32 (sm_89+): which path each fp8 dot takes and why (the pipelined
// cp.async ring with K-major B, operands staged per dot for [K, N] B, the exact FMA dot before
// sm_89 and for shapes the instruction cannot tile), what the generated code looks like, and
// that NVRTC accepts it for sm_89, sm_90 and sm_90a.
#include <gtest/gtest.h>

#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"
#include "CodegenTestUtil.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"
#include "../common/NtMatmulText.h"

namespace tessera {
namespace {

using codegentest::emit;
using codegentest::planning_target;

using codegentest::notes;

std::unique_ptr<Kernel> fp8_matmul(int64_t bm, int64_t bn, int64_t bk, ScalarKind out = ScalarKind::BF16) {
  return bind_constexprs(*find_library_kernel("matmul_fp8")->build(out), {{"BLOCK_M", bm}, {"BLOCK_N", bn}, {"BLOCK_K", bk}});
}

// `in` x `in` -> f32, scaled, cast to bf16; B as [N, K] (K-major) or, with b_kn, [K, N].
std::unique_ptr<Kernel> text_matmul(const std::string& in, int bm, int bn, int bk, bool b_kn = false) {
  return testutil::nt_matmul(in, "bf16", bm, bn, bk, 4, b_kn);
}

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = 0; (at = s.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

// The library's fp8 matmul at BLOCK_K = 64 (one 64-byte row of K per stage, below wgmma's
// 128-byte atom): the pipelined ring with fp8 fragments on every target from sm_89.
TEST(CudaFp8Mma, LibraryMatmulBlockK64TakesThePipelinedRing) {
  for (const char* arch : {"sm_89", "sm_90", "sm_90a"}) {
    SCOPED_TRACE(arch);
    CudaEmission em = emit(*fp8_matmul(128, 128, 64), arch);
    EXPECT_EQ(em.stats["dot.mma_pipelined"], 1) << notes(em);
    EXPECT_EQ(em.stats["mma-fp8-dots"], 1);
    EXPECT_EQ(em.stats["dot.fma"], 0);
    EXPECT_EQ(em.stats["dot.wgmma_tma"], 0);
    // Byte rings: 16 fp8 per 16-byte chunk, so 4 chunks per 64-byte row of A and of B^T (B is
    // copied as loaded, BN rows of K), and the alignment test is on 16 elements.
    EXPECT_NE(em.source.find("uint8_t* const ring"), std::string::npos) << em.source;
    EXPECT_EQ(count_of(em.source, "tsr::cp_tile_async<128, 4, 256>("), 4u) << em.source;  // prologue + refill, A and B
    EXPECT_NE(em.source.find("tsr::aligned_vec<uint8_t, 16>(tsr_p1) && tsr_p1_s0 % 16 == 0"), std::string::npos);
    // Two k32 steps per stage, e4m3 instructions, fp8 ldmatrix fragments.
    EXPECT_EQ(count_of(em.source, "tsr::ldsm_frags_f8<64, 4, 4>("), 2u) << em.source;
    EXPECT_EQ(count_of(em.source, "tsr::mma_tiles_f8<1>("), 2u);
    EXPECT_EQ(em.source.find("tsr::mma_tiles<"), std::string::npos);
    EXPECT_NE(notes(em).find("mma.sync m16n8k32 e4m3 (B K-major) fed by a 4-stage cp.async ring"), std::string::npos)
        << notes(em);
    EXPECT_NE(notes(em).find("below f32 precision"), std::string::npos);
  }
  // On sm_90a the note also says why the dot is not on wgmma.
  CudaEmission em = emit(*fp8_matmul(128, 128, 64), "sm_90a");
  EXPECT_NE(notes(em).find("not wgmma: BLOCK_K = 64"), std::string::npos) << notes(em);
}

// One CTA per SM (128 x 256: 64 x 64 warp blocks): fragments double-buffered across k32 steps.
// BLOCK_K = 32: one k32 step per stage, loaded right before its mma. e5m2 picks its instruction.
TEST(CudaFp8Mma, StepsAreK32AndE5m2HasItsInstruction) {
  CudaEmission em = emit(*fp8_matmul(128, 256, 128), "sm_90");
  EXPECT_EQ(em.stats["dot.mma_pipelined"], 1) << notes(em);
  EXPECT_NE(em.source.find("// k32 step 3 of 4"), std::string::npos) << em.source;
  EXPECT_EQ(em.source.find("// k32 step 4"), std::string::npos);
  EXPECT_NE(em.source.find("uint32_t fa"), std::string::npos);
  EXPECT_NE(em.source.find("[2][4][4], fb"), std::string::npos) << em.source;  // double buffers
  em = emit(*fp8_matmul(64, 64, 32), "sm_89");
  EXPECT_EQ(em.stats["dot.mma_pipelined"], 1) << notes(em);
  EXPECT_EQ(count_of(em.source, "tsr::ldsm_frags_f8<32, "), 1u) << em.source;
  em = emit(*text_matmul("f8e5m2", 128, 128, 64), "sm_90");
  EXPECT_EQ(em.stats["dot.mma_pipelined"], 1) << notes(em);
  EXPECT_EQ(count_of(em.source, "tsr::mma_tiles_f8<2>("), 2u) << em.source;
  EXPECT_NE(notes(em).find("m16n8k32 e5m2"), std::string::npos) << notes(em);
}

// B as [K, N] (MN-major): ldmatrix cannot transpose bytes, so the dot stays on mma.sync with its
// operands staged through shared memory each iteration, and the note says why.
TEST(CudaFp8Mma, MnMajorBIsStagedPerIterationWithAReason) {
  CudaEmission em = emit(*text_matmul("f8e4m3", 128, 128, 64, /*b_kn=*/true), "sm_90");
  EXPECT_EQ(em.stats["dot.mma_pipelined"], 0) << notes(em);
  EXPECT_EQ(em.stats["dot.mma"], 1);
  EXPECT_EQ(em.stats["mma-fp8-dots"], 1);
  EXPECT_EQ(em.stats["dot.fma"], 0);
  EXPECT_NE(em.source.find("tsr::warp_mma_block_f8<1, 64, "), std::string::npos) << em.source;
  EXPECT_NE(notes(em).find("operands staged through shared memory at each dot (not the cp.async ring: b is a [K, N] "
                           "(MN-major) fp8 tile"),
            std::string::npos)
      << notes(em);
}

// Before sm_89 and for shapes m16n8k32 cannot tile: the exact FMA dot, with the reason.
TEST(CudaFp8Mma, Sm80AndUntileableShapesKeepTheFmaDot) {
  CudaEmission em = emit(*fp8_matmul(128, 128, 64), "sm_80");
  EXPECT_EQ(em.stats["dot.fma"], 1);
  EXPECT_EQ(em.stats["mma-fp8-dots"], 0);
  EXPECT_NE(notes(em).find("exact FMA dot (no tensor cores): fp8 mma.sync (m16n8k32) needs sm_89 or newer, the "
                           "target is sm_80"),
            std::string::npos)
      << notes(em);
  em = emit(*fp8_matmul(64, 64, 16), "sm_90");
  EXPECT_EQ(em.stats["dot.fma"], 1);
  EXPECT_NE(notes(em).find("K % 32 == 0, the dot is 64 x 64 x 16"), std::string::npos) << notes(em);
  // 16-bit dots say nothing new.
  em = emit(*codegentest::lib_matmul(ScalarKind::BF16, {{"BLOCK_K", 32}}), "sm_90");
  EXPECT_EQ(notes(em).find("m16n8k32"), std::string::npos) << notes(em);
  EXPECT_EQ(em.stats["mma-fp8-dots"], 0);
}

// NVRTC accepts every fp8 path on sm_89, sm_90 and sm_90a, and the PTX has the fp8 instruction.
TEST(CudaFp8Mma, NvrtcCompilesEveryPathWithTheFp8Instruction) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  struct Case {
    std::string what;
    std::unique_ptr<Kernel> k;
    const char* instr;
  };
  std::vector<Case> cases;
  const char* e4 = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32";
  const char* e5 = "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32";
  cases.push_back({"lib 128x128x64", fp8_matmul(128, 128, 64), e4});
  cases.push_back({"lib 128x256x64", fp8_matmul(128, 256, 64), e4});
  cases.push_back({"lib 64x64x32 f32", fp8_matmul(64, 64, 32, ScalarKind::F32), e4});
  cases.push_back({"e5m2 128x128x32", text_matmul("f8e5m2", 128, 128, 32), e5});
  cases.push_back({"e4m3 [K, N] b", text_matmul("f8e4m3", 64, 128, 64, true), e4});
  for (const char* arch : {"sm_89", "sm_90", "sm_90a"})
    for (const Case& c : cases) {
      SCOPED_TRACE(c.what + " " + arch);
      CudaTarget t = planning_target(arch);
      CudaEmission em = emit_cuda_with_info(*c.k, t);
      ASSERT_EQ(em.stats["mma-fp8-dots"], 1) << notes(em);
      NvrtcResult r = nvrtc_compile(em.source, t, "fp8.cu", em.line_op);
      EXPECT_FALSE(r.cubin.empty());
      EXPECT_NE(r.ptx.find(c.instr), std::string::npos);
      if (em.stats["dot.mma_pipelined"]) EXPECT_NE(r.ptx.find("ldmatrix.sync.aligned.m8n8.x4.shared.b16"), std::string::npos);
    }
  // The compilation the runtime launches on sm_90a when TMA cannot describe the operands of an
  // fp8 wgmma matmul: now the fp8 mma.sync ring instead of the FMA dot.
  CudaTarget no_tma = planning_target("sm_90a");
  no_tma.tma = false;
  CudaEmission em = emit_cuda_with_info(*fp8_matmul(128, 256, 128), no_tma);
  EXPECT_EQ(em.stats["dot.mma_pipelined"], 1) << notes(em);
  EXPECT_EQ(em.stats["mma-fp8-dots"], 1);
  EXPECT_FALSE(nvrtc_compile(em.source, no_tma, "fp8_no_tma.cu", em.line_op).cubin.empty());
}

}  // namespace
}  // namespace tessera
