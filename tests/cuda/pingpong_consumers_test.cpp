// pingpong-consumers in the layout emitter, without a GPU: matmul + bias + GELU
// (tests/corpus/matmul_bias_gelu.tile) with `consumers = 2` written on its K loop, at 128 x 128
// tiles, printed with two consumer warpgroups that each own a whole program, NVRTC and ptxas
// compiling it without spills. bench/pingpong_gpu.sh runs it against the interpreter.
#include <fstream>
#include <regex>

#include "CudaTestUtil.h"
#include "cuda/CubinInfo.h"

namespace tessera::cudatest {
namespace {

size_t count_of(const std::string& s, const std::string& what, size_t from = 0) {
  size_t n = 0;
  for (size_t p = s.find(what, from); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

std::string corpus_text() {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/tests/corpus/matmul_bias_gelu.tile");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The corpus kernel with `consumers = 2` written on its loop (`written`), its epilogue cut to
// `epilogue` (the value stored: %g GELU, %x bias only, %acc none).
std::string kernel_text(bool written, const std::string& epilogue = "%g") {
  std::string t = corpus_text();
  if (written)
    t = std::regex_replace(t, std::regex("%acc = for %c0, %ktiles, %c1, %acc0 :"),
                           "%acc = for %c0, %ktiles, %c1, %acc0 {consumers = 2} :");
  return std::regex_replace(t, std::regex("%gh = cast %g :"), "%gh = cast " + epilogue + " :");
}

CudaEmission emit(const std::string& text, int64_t bn) {
  auto m = parse_module(text, "matmul_bias_gelu.tile");
  auto k = run_pipeline(*bind_constexprs(*m->find("matmul_bias_gelu"), {{"BM", 128}, {"BN", bn}, {"BK", 64}}), {});
  CudaTarget t = CudaTarget::parse("sm_90a");
  t.emitter = CudaTarget::Emitter::Layouts;
  return emit_cuda_with_info(*k, t);
}

// Two consumers of one warpgroup each (384 threads with the producer), the layouts' thread ids
// relative to the consumer's warpgroup, consumer c's programs 2j + c with its share of the
// ring at (2j + c) * trips, the order barriers around each K loop, a stage released by the four
// warps of one consumer, and each consumer's 128-row tile stored by TMA as two 64-row blocks.
TEST(PingPongConsumers, TwoConsumersEachOwnAProgram) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  CudaEmission em = emit(kernel_text(true), 128);
  ASSERT_TRUE(em.lowered);
  const std::string ir = print_kernel(*em.lowered);
  EXPECT_NE(ir.find("{pipeline = 4, warp_specialize = 1, consumers = 2}"), std::string::npos) << ir;
  EXPECT_NE(ir.find("mma<version = 3, warps = [4, 1], instr = [64, 128]>"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("warps = [8, 1]"), std::string::npos) << ir;
  EXPECT_EQ(em.stats["pingpong-consumers"], 1);
  EXPECT_EQ(em.stats["pingpong-order-barriers"], 1);
  EXPECT_EQ(em.stats["producer-warpgroups"], 1);
  EXPECT_EQ(em.stats["tma-stores"], 1);
  EXPECT_EQ(em.info.block_threads, 384);
  const std::string& s = em.source;
  EXPECT_NE(s.find("__launch_bounds__(384, 1)"), std::string::npos);
  const size_t compute = s.find("the compute warps");
  ASSERT_NE(compute, std::string::npos);
  // The producer: warps 8.. , thread 256 issues; its program loop is the plain one.
  EXPECT_NE(s.find("if (tsr_warp >= 8) {"), std::string::npos);
  EXPECT_LT(s.find("if (tsr_tid == 256) {"), compute);
  EXPECT_LT(s.find("for (uint32_t tsr_t = blockIdx.x; tsr_t < tsr_programs; tsr_t += gridDim.x) {"), compute);
  // The ring's empty barriers count one consumer's 4 warps; two order barriers of 4 arrivals.
  EXPECT_NE(s.find(" + 8u * (4u + s_), 4);"), std::string::npos);
  EXPECT_NE(s.find("for (uint32_t o_ = 0; o_ < 2u; ++o_) tsr::mbar_init("), std::string::npos);
  EXPECT_NE(s.find("const int tsr_cons = tsr_tid / 128, tsr_ctid = tsr_tid;", compute), std::string::npos);
  EXPECT_NE(s.find("const int tsr_tid = tsr_ctid - 128 * tsr_cons;", compute), std::string::npos);
  EXPECT_NE(s.find("for (uint32_t tsr_j = 0, tsr_t = blockIdx.x + uint32_t(tsr_cons) * gridDim.x; "
                   "tsr_t < tsr_programs; ++tsr_j, tsr_t += 2u * gridDim.x) {",
                   compute),
            std::string::npos);
  const size_t share = s.find("= uint32_t(2 * tsr_j + tsr_cons) * ", compute);
  ASSERT_NE(share, std::string::npos);
  const size_t wait1 = s.find("if (tsr_cons == 1) tsr::mbar_wait(", share);
  const size_t wait0 = s.find("else if (tsr_j > 0) tsr::mbar_wait(", share);
  const size_t loop = s.find("this iteration's copies are in", share);
  const size_t last = s.find("tsr::wgmma_wait<0>();  // the last group", share);
  const size_t arrive = s.find("+ 8u * uint32_t(tsr_cons));  // this program's dots are issued", share);
  ASSERT_NE(wait1, std::string::npos);
  ASSERT_NE(wait0, std::string::npos);
  ASSERT_NE(arrive, std::string::npos);
  EXPECT_LT(wait0, loop);
  // The other consumer may begin once the last group is issued: the arrival comes after the
  // loop and before the wait for that group, so the tensor cores do not drain between programs.
  EXPECT_LT(loop, arrive);
  EXPECT_LT(arrive, last);
  EXPECT_EQ(count_of(s, "this program's dots are issued", compute), 1u);
  // The wgmma issues both 64-row blocks of the consumer's tile from its one warpgroup.
  EXPECT_EQ(count_of(s, "tsr::wgmma_m64n128k16_f16", compute), 8u);  // 2 blocks x 4 k16 steps
  // The TMA store: two 64-row blocks of two boxes each, buffers in turn.
  EXPECT_EQ(count_of(s, "tsr::epilogue_box_sw128<0, 1>(", compute), 2u);
  EXPECT_EQ(count_of(s, "tsr::epilogue_box_sw128<1, 1>(", compute), 2u);
  EXPECT_NE(s.find("(tsr_tid / 128) * 64 + 64);", compute), std::string::npos);
  EXPECT_EQ(s.find("named_barrier(8u", compute), std::string::npos);
  EXPECT_EQ(s.find("__syncthreads", compute), std::string::npos);

  CudaTarget t = CudaTarget::parse("sm_90a");
  const NvrtcResult r = nvrtc_compile(em.source, t, "pingpong.cu", em.line_op);
  EXPECT_NE(r.ptx.find("setmaxnreg.inc.sync.aligned.u32 232"), std::string::npos);
  EXPECT_NE(r.ptx.find("setmaxnreg.dec.sync.aligned.u32 40"), std::string::npos);
  EXPECT_NE(r.ptx.find("wgmma.mma_async"), std::string::npos);
  EXPECT_EQ(cubin_resources(r.cubin, em.info.symbol).frame_bytes, 0) << "spills";
}

// The bias-only and plain forms compile without spills too; without `consumers = 2` written
// (and without TESSERA_PINGPONG_CONSUMERS) the kernel stays cooperative.
TEST(PingPongConsumers, OtherEpiloguesAndTheDefault) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  CudaTarget t = CudaTarget::parse("sm_90a");
  for (const char* epi : {"%x", "%acc"}) {
    CudaEmission em = emit(kernel_text(true, epi), 128);
    EXPECT_EQ(em.stats["pingpong-consumers"], 1) << epi;
    const NvrtcResult r = nvrtc_compile(em.source, t, "pingpong.cu", em.line_op);
    EXPECT_EQ(cubin_resources(r.cubin, em.info.symbol).frame_bytes, 0) << epi << ": spills";
  }
  if (std::getenv("TESSERA_PINGPONG_CONSUMERS")) return;
  CudaEmission coop = emit(kernel_text(false), 128);
  EXPECT_EQ(coop.stats["pingpong-consumers"], 0);
  EXPECT_EQ(coop.info.block_threads, 384);
  EXPECT_EQ(coop.source.find("tsr_cons"), std::string::npos);
  ASSERT_TRUE(coop.lowered);
  EXPECT_NE(print_kernel(*coop.lowered).find("warps = [8, 1]"), std::string::npos);
}

// A written `consumers = 2` that does not qualify (a 128 x 256 accumulator would take 256
// registers per thread in one warpgroup) is taken back: the IR says consumers = 1, the kernel
// is printed cooperative.
TEST(PingPongConsumers, WideTileStaysCooperative) {
  CudaEmission em = emit(kernel_text(true), 256);
  ASSERT_TRUE(em.lowered);
  const std::string ir = print_kernel(*em.lowered);
  EXPECT_NE(ir.find("consumers = 1"), std::string::npos) << ir;
  EXPECT_NE(ir.find("warps = [8, 1]"), std::string::npos) << ir;
  EXPECT_EQ(em.stats["pingpong-consumers"], 0);
  EXPECT_EQ(em.stats["producer-warpgroups"], 1);
  EXPECT_EQ(em.source.find("tsr_cons"), std::string::npos);
}

// The same GELU through sigmoid (x * sigmoid(2 a), no tanh) at the cooperative 128 x 256: the
// sigmoid's division is the approximate one (tsr::fsigmoid), whose IEEE form's slow path was a
// subroutine call per value and left the 128-value epilogue with a 328-byte stack frame (and
// 1.5x the kernel's time on the H200).
TEST(CudaSigmoid, AWgmmaEpilogueThroughSigmoidHasNoStackFrame) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  std::string t = std::regex_replace(kernel_text(false), std::regex("  %th = tanh %arg[^\n]*\n  %onep = add[^\n]*\n"),
                                     "  %arg2 = add %arg, %arg : tile<f32, [BM, BN]>\n  %sg = sigmoid %arg2 : tile<f32, [BM, BN]>\n");
  t = std::regex_replace(t, std::regex("  %g = mul %hx, %onep :"), "  %g = mul %x, %sg :");
  ASSERT_NE(t.find("sigmoid %arg2"), std::string::npos);
  ASSERT_NE(t.find("%g = mul %x, %sg"), std::string::npos);
  CudaEmission em = emit(t, 256);
  EXPECT_NE(em.source.find("tsr::fsigmoid("), std::string::npos);
  const NvrtcResult r = nvrtc_compile(em.source, CudaTarget::parse("sm_90a"), "sigmoid.cu", em.line_op);
  EXPECT_EQ(r.ptx.find("rcp.rn.f32"), std::string::npos);
  EXPECT_EQ(r.ptx.find("div.rn.f32"), std::string::npos);
  EXPECT_EQ(cubin_resources(r.cubin, em.info.symbol).frame_bytes, 0) << "spills";
}

}  // namespace
}  // namespace tessera::cudatest
