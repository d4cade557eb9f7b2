// Stream-K on sm_90a (CudaTarget::stream_k, opt-in): a persistent wgmma kernel cuts a
// last partial wave (with the full wave before it when it is under half its CTAs) into equal
// shares of K work; what it emits, and
// that NVRTC accepts it for every planned tile. The GPU tests run it against the interpreter
// and the double-precision reference (tests/gpu/wgmma_gpu_test.cpp).
#include <gtest/gtest.h>

#include "CodegenTestUtil.h"
#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"

namespace tessera {
namespace {

using codegentest::emit;
using codegentest::lib_matmul;
using codegentest::planning_target;

CudaTarget stream_k_target() {
  CudaTarget t = planning_target("sm_90a");
  t.stream_k = true;
  return t;
}

TEST(CudaStreamK, PersistentMatmulSharesItsLastWaveOverEveryCta) {
  auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}});
  CudaEmission em = emit_cuda_with_info(*k, stream_k_target());
  ASSERT_TRUE(em.info.persistent);
  EXPECT_TRUE(em.info.stream_k);
  EXPECT_FALSE(em.info.split_k);
  EXPECT_EQ(em.stats["stream-k"], 1);
  // A slot is the two consumer warpgroups' 64 x 256 f32 accumulators; the workspace holds a flag
  // and a slot per CTA.
  EXPECT_EQ(em.info.split_slot_bytes, 128 * 256 * 4);
  EXPECT_EQ(em.info.split_workspace_bytes(132, 1), 768 + 132 * 128 * 256 * 4);
  int workspaces = 0;
  for (const CudaParam& p : em.info.params) workspaces += p.kind == CudaParam::Kind::SplitWorkspace;
  EXPECT_EQ(workspaces, 1);
  const std::string& src = em.source;
  // Every tile is shared out when they are fewer than the CTAs; else the last wave when it
  // holds at least half the CTAs, a smaller one with the full wave before it (cuda::stream_k_tiles).
  EXPECT_NE(src.find("const int32_t tsr_L = tsr_rem == 0 ? 0 : 2 * tsr_rem >= tsr_G || tsr_programs < tsr_G ? tsr_rem : "
                     "tsr_rem + tsr_G;"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("const int32_t tsr_u0 = int32_t(blockIdx.x) * tsr_L, tsr_u1 = tsr_u0 + tsr_L;"), std::string::npos);
  // The item's part of the K loop, rounded the same way in every CTA.
  EXPECT_NE(src.find("* tsr_pb / tsr_G, trip"), std::string::npos);
  EXPECT_NE(src.find("* tsr_pe / tsr_G - first_;"), std::string::npos);
  // A CTA runs its parts last tile first (each starts its stream-K work at or near K = 0). Parts that
  // end inside a tile leave their sums and raise a flag, then skip the epilogue; the tile's
  // last part waits for each earlier CTA's flag in K order, adds the slot, and zeroes the flags
  // for the next launch.
  EXPECT_NE(src.find("tsr_dp + (tsr_u1 - 1) / tsr_G - (tsr_i - tsr_ndp)"), std::string::npos);
  EXPECT_NE(src.find("if (tsr_pe < tsr_G) {"), std::string::npos);
  EXPECT_NE(src.find("for (int32_t c_ = tsr_tu / tsr_L; c_ < int32_t(blockIdx.x); ++c_) {"), std::string::npos);
  EXPECT_NE(src.find("tsr::frags_to_slot(frag"), std::string::npos);
  EXPECT_NE(src.find("tsr::flag_release(skflag_ + blockIdx.x);"), std::string::npos);
  EXPECT_NE(src.find("continue;"), std::string::npos);
  EXPECT_NE(src.find("if (tsr_tid == 0) tsr::flag_poll(skflag_ + c_);"), std::string::npos);
  EXPECT_NE(src.find("(void)tsr::flag_acquire(skflag_ + c_);"), std::string::npos);
  // The slot's 32 columns in two batches of 16 loads (the consumers' 232 registers under
  // epilogue_overlap hold them beside the 128 accumulators).
  EXPECT_NE(src.find("tsr::frags_add_slot_batched<16>(frag"), std::string::npos);
  EXPECT_NE(src.find("skflag_[c_] = 0u;"), std::string::npos);
  // The epilogue is overlapped with the next item's loop as in the whole-tile kernel: the
  // fixup comes before the block is packed, and a later part leaves nothing pending.
  EXPECT_EQ(em.stats["epilogue-overlap"], 1) << codegentest::notes(em);
  EXPECT_LT(src.find("tsr::frags_add_slot_batched<"), src.find("pend_ = true;"));
  const size_t release = src.find("tsr::flag_release(skflag_ + blockIdx.x);");
  EXPECT_LT(src.find("pend_ = false;", release), src.find("continue;", release));
  EXPECT_NE(codegentest::notes(em).find("stream-K"), std::string::npos);
}

TEST(CudaStreamK, WholeTilesByDefaultAndNoneInSplitCompilations) {
  auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 64}, {"BLOCK_N", 128}, {"BLOCK_K", 64}});
  CudaEmission whole = emit(*k);
  EXPECT_TRUE(whole.info.persistent);
  EXPECT_FALSE(whole.info.stream_k);
  EXPECT_EQ(whole.stats["stream-k"], 0);
  EXPECT_NE(whole.source.find("for (int64_t tsr_t = blockIdx.x; tsr_t < tsr_programs; tsr_t += gridDim.x)"),
            std::string::npos);
  EXPECT_EQ(whole.source.find("tsr_ws"), std::string::npos);
  CudaTarget split = stream_k_target();
  split.split_k = true;
  CudaEmission sk = emit_cuda_with_info(*k, split);
  EXPECT_TRUE(sk.info.split_k);
  EXPECT_FALSE(sk.info.stream_k);
  EXPECT_EQ(sk.source.find("tsr_pb"), std::string::npos);
  // The mma.sync path (sm_90 without wgmma) is not persistent: no stream-K.
  CudaTarget mma = planning_target("sm_90");
  mma.stream_k = true;
  EXPECT_FALSE(emit_cuda_with_info(*k, mma).info.stream_k);
}

TEST(CudaStreamK, NvrtcCompilesEveryPlannedShape) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  const CudaTarget t = stream_k_target();
  for (ScalarKind dt : {ScalarKind::BF16, ScalarKind::F16})
    for (auto [m, n] : {std::pair<int64_t, int64_t>{64, 64}, {64, 256}, {128, 128}, {128, 256}, {64, 192}, {192, 128}}) {
      if (dt == ScalarKind::F16 && (m == 192 || n == 192)) continue;
      SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n));
      CudaEmission em = emit_cuda_with_info(*lib_matmul(dt, {{"BLOCK_M", m}, {"BLOCK_N", n}, {"BLOCK_K", 64}}), t);
      ASSERT_TRUE(em.info.stream_k);
      NvrtcResult r = nvrtc_compile(em.source, t, "stream_k.cu", em.line_op);
      EXPECT_FALSE(r.cubin.empty());
    }
}

}  // namespace
}  // namespace tessera
