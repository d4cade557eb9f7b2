// The pipelined tensor-core matmul path: which loops get a cp.async ring with ldmatrix fragment
// loads, the runtime fallback for unaligned operands, and the loops that must keep the plain path.
#include <gtest/gtest.h>

#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"
#include "CodegenTestUtil.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

using codegentest::emit;
using codegentest::lib_matmul;

// A matmul loop in the text format; `pad` is the operands' padding, `attrs` the for's attributes.
std::unique_ptr<Kernel> text_matmul(const std::string& pad, const std::string& attrs) {
  std::string t =
      "kernel @mm(%a: view<bf16, [M, K]>, %b: view<bf16, [K, N]>, %c: view<bf16, [M, N]>) {\n"
      "  grid {\n"
      "    %m = dim %a {axis = 0} : i32\n"
      "    %n = dim %b {axis = 1} : i32\n"
      "    yield %m, %n\n"
      "  }\n"
      "  %pm = program_id {axis = 0} : i32\n"
      "  %pn = program_id {axis = 1} : i32\n"
      "  %k = dim %a {axis = 1} : i32\n"
      "  %bk = const {value = 32} : i32\n"
      "  %zero = const {value = 0} : i32\n"
      "  %f0 = const {value = 0.0} : f32\n"
      "  %acc0 = splat %f0 : tile<f32, [64, 64]>\n"
      "  %acc = for %zero, %k, %bk, %acc0" + attrs + " : tile<f32, [64, 64]> {\n"
      "    ^(%kk: i32, %accc: tile<f32, [64, 64]>):\n"
      "    %kt = div %kk, %bk : i32\n"
      "    %ta = load_tile %a, %pm, %kt" + pad + " : tile<bf16, [64, 32]>\n"
      "    %tb = load_tile %b, %kt, %pn" + pad + " : tile<bf16, [32, 64]>\n"
      "    %accn = dot %ta, %tb, %accc : tile<f32, [64, 64]>\n"
      "    yield %accn\n"
      "  }\n"
      "  %out = cast %acc : tile<bf16, [64, 64]>\n"
      "  store_tile %c, %out, %pm, %pn\n"
      "}\n";
  auto m = parse_module(t, "pipe.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

TEST(CudaPipeline, Bf16LibraryMatmulUsesACpAsyncRingAndLdmatrix) {
  CudaEmission em = emit(*lib_matmul(ScalarKind::BF16));
  EXPECT_EQ(em.stats["dot.mma_pipelined"], 1) << em.source;
  EXPECT_EQ(em.stats["dot.mma"], 0);
  EXPECT_EQ(em.stats["pipeline-stages"], 4);
  EXPECT_NE(em.source.find("tsr::cp_tile_async<128, 4, 256>"), std::string::npos) << em.source;  // A: 128 x 32
  EXPECT_NE(em.source.find("tsr::cp_tile_async<32, 16, 256>"), std::string::npos);                // B: 32 x 128
  EXPECT_NE(em.source.find("tsr::cp_async_wait<2>()"), std::string::npos);
  // 8 warps in a 2 x 4 grid, each 4 x 4 mma tiles (64 x 32).
  EXPECT_NE(em.source.find("tsr::warp_mma_swz<true, 32, 4, 4, 16>"), std::string::npos);
  EXPECT_EQ(em.info.block_threads, 256);
  // The ring (4 stages of 16 KiB) is all the shared memory: the accumulator starts as a splat and
  // goes straight from the fragments to memory, so nothing is exchanged through shared memory.
  EXPECT_EQ(em.info.dynamic_smem_bytes, 4 * 16384);
  EXPECT_EQ(em.stats["layout-conversions"], 0) << em.source;
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    NvrtcResult r = nvrtc_compile(emit(*lib_matmul(ScalarKind::BF16), arch).source, CudaTarget::parse(arch), "mm.cu");
    EXPECT_NE(r.ptx.find("cp.async.cg.shared.global"), std::string::npos) << arch;
    EXPECT_NE(r.ptx.find("ldmatrix.sync.aligned.m8n8.x4.shared.b16"), std::string::npos) << arch;
    EXPECT_NE(r.ptx.find("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), std::string::npos) << arch;
    EXPECT_NE(r.ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), std::string::npos) << arch;
  }
}

TEST(CudaPipeline, UnalignedOperandsAreReadElementByElementIntoTheSameRing) {
  // K or N not a multiple of 8 (rows not 16-byte aligned), or a misaligned base: a uniform flag per
  // operand makes cp_tile_async read its chunks element by element into the ring. There is no
  // second, ordinary loop (it cost ~30 registers per thread, and two CTAs per SM with them).
  CudaEmission em = emit(*lib_matmul(ScalarKind::F16));
  EXPECT_NE(em.source.find("tsr::aligned_vec<uint16_t, 8>(tsr_p0) && tsr_p0_s0 % 8 == 0"), std::string::npos) << em.source;
  EXPECT_NE(em.source.find("tsr::aligned_vec<uint16_t, 8>(tsr_p1) && tsr_p1_s0 % 8 == 0"), std::string::npos);
  EXPECT_NE(em.source.find("tsr_p0_s0, tsr_tid, vec_a"), std::string::npos);
  EXPECT_NE(em.source.find("tsr_p1_s0, tsr_tid, vec_b"), std::string::npos);
  EXPECT_NE(em.source.find("tsr::warp_mma_swz<false"), std::string::npos);
  EXPECT_EQ(em.source.find("tsr::warp_mma_block"), std::string::npos);
  EXPECT_EQ(em.source.find("} else {"), std::string::npos);
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  NvrtcResult r = nvrtc_compile(em.source, CudaTarget::parse("sm_80"), "mm.cu");
  EXPECT_NE(r.ptx.find("st.shared.v4.b32"), std::string::npos);
  EXPECT_NE(r.ptx.find("cp.async.cg.shared.global"), std::string::npos);
}

TEST(CudaPipeline, IndexArithmeticInTheBodyIsReemittedPerPrefetch) {
  CudaEmission em = emit(*text_matmul("", " {pipeline = 3}"));
  EXPECT_EQ(em.stats["dot.mma_pipelined"], 1) << em.source;
  EXPECT_EQ(em.stats["pipeline-stages"], 3);
  // The body's `div %kk, %bk` feeds both tile indices: once in the prologue, once in the loop.
  int divs = 0;
  for (size_t p = em.source.find("tsr::idiv<int32_t>"); p != std::string::npos; p = em.source.find("tsr::idiv<int32_t>", p + 1)) ++divs;
  EXPECT_EQ(divs, 2) << em.source;
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  NvrtcResult r = nvrtc_compile(em.source, CudaTarget::parse("sm_80"), "mm.cu");
  EXPECT_FALSE(r.cubin.empty());
}

TEST(CudaPipeline, LoopsThatCannotBePipelinedKeepThePlainPath) {
  // No pipeline hint.
  CudaEmission plain = emit(*text_matmul("", ""));
  EXPECT_EQ(plain.stats["dot.mma_pipelined"], 0);
  EXPECT_EQ(plain.stats["dot.mma"], 1);
  EXPECT_EQ(plain.source.find("cp_tile_async"), std::string::npos);
  // Nonzero padding: cp.async can only zero-fill.
  CudaEmission padded = emit(*text_matmul(" {pad = 1.0}", " {pipeline = 3}"));
  EXPECT_EQ(padded.stats["dot.mma_pipelined"], 0);
  EXPECT_EQ(padded.source.find("cp_tile_async"), std::string::npos);
  // f32 has no tensor-core path.
  CudaEmission f32 = emit(*lib_matmul(ScalarKind::F32));
  EXPECT_EQ(f32.stats["dot.fma"], 1);
  EXPECT_EQ(f32.source.find("cp_tile_async"), std::string::npos);
  // An odd number of 8-wide n tiles per warp (ldmatrix.x4.trans loads them in pairs).
  CudaEmission odd = emit(*lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 16}, {"BLOCK_N", 16}, {"BLOCK_K", 16}}));
  EXPECT_EQ(odd.stats["dot.mma_pipelined"], 0) << odd.source;
  EXPECT_EQ(odd.stats["dot.mma"], 1);
}

}  // namespace
}  // namespace tessera
