// The pipelined tensor-core matmul path: which loops get a cp.async ring with ldmatrix fragment
// loads, the runtime fallback for unaligned operands, and the loops that must keep the plain path.
#include <gtest/gtest.h>

#include <regex>

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
using codegentest::planning_target;

// A matmul loop in the text format; `pad` is the operands' padding, `attrs` the for's attributes,
// `bn` the width of b's and c's tiles.
std::unique_ptr<Kernel> text_matmul(const std::string& pad, const std::string& attrs, int bn = 64) {
  const std::string N = std::to_string(bn);
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
      "  %acc0 = splat %f0 : tile<f32, [64, " + N + "]>\n"
      "  %acc = for %zero, %k, %bk, %acc0" + attrs + " : tile<f32, [64, " + N + "]> {\n"
      "    ^(%kk: i32, %accc: tile<f32, [64, " + N + "]>):\n"
      "    %kt = div %kk, %bk : i32\n"
      "    %ta = load_tile %a, %pm, %kt" + pad + " : tile<bf16, [64, 32]>\n"
      "    %tb = load_tile %b, %kt, %pn" + pad + " : tile<bf16, [32, " + N + "]>\n"
      "    %accn = dot %ta, %tb, %accc : tile<f32, [64, " + N + "]>\n"
      "    yield %accn\n"
      "  }\n"
      "  %out = cast %acc : tile<bf16, [64, " + N + "]>\n"
      "  store_tile %c, %out, %pm, %pn\n"
      "}\n";
  auto m = parse_module(t, "pipe.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

const ConstexprConfig k128x128x32 = {{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"BLOCK_K", 32}};
const ConstexprConfig k128x256x32 = {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 32}};
const ConstexprConfig k128x256x64 = {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}};

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// The generated text of the pipelined main loop: from its `for` to the wait after it.
std::string main_loop(const std::string& src) {
  size_t from = src.find("for (int64_t it"), to = src.find("tsr::cp_async_wait<0>();");
  return from == std::string::npos || to == std::string::npos ? "" : src.substr(from, to - from);
}

TEST(CudaPipeline, Bf16LibraryMatmulUsesACpAsyncRingAndLdmatrix) {
  CudaEmission em = emit(*lib_matmul(ScalarKind::BF16, k128x128x32));
  EXPECT_EQ(em.stats["dot.mma_pipelined"], 1) << em.source;
  EXPECT_EQ(em.stats["dot.mma"], 0);
  EXPECT_EQ(em.stats["pipeline-stages"], 4);
  EXPECT_NE(em.source.find("tsr::cp_tile_async<128, 4, 256>"), std::string::npos) << em.source;  // A: 128 x 32
  EXPECT_NE(em.source.find("tsr::cp_tile_async<32, 16, 256>"), std::string::npos);                // B: 32 x 128
  EXPECT_NE(em.source.find("tsr::cp_async_wait<2>()"), std::string::npos);
  // 8 warps in a 2 x 4 grid, each 4 x 4 mma tiles (64 x 32), fragments of one k16 step at a time
  // (two CTAs per SM: 128 registers leave no room for a second set).
  EXPECT_NE(em.source.find("tsr::ldsm_frags<32, 4, 4, 16>("), std::string::npos);
  EXPECT_NE(em.source.find("[1][4][4], fb"), std::string::npos);
  EXPECT_NE(em.source.find("tsr::mma_tiles<true>(frag"), std::string::npos);
  EXPECT_EQ(count_of(main_loop(em.source), "__syncthreads();"), 1u) << em.source;
  EXPECT_EQ(em.info.block_threads, 256);
  // The ring (4 stages of 16 KiB) is all the shared memory: the accumulator starts as a splat and
  // goes straight from the fragments to memory, so nothing is exchanged through shared memory.
  EXPECT_EQ(em.info.dynamic_smem_bytes, 4 * 16384);
  EXPECT_EQ(em.stats["layout-conversions"], 0) << em.source;
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    NvrtcResult r = nvrtc_compile(emit(*lib_matmul(ScalarKind::BF16, k128x128x32), arch).source, planning_target(arch), "mm.cu");
    EXPECT_NE(r.ptx.find("cp.async.cg.shared.global"), std::string::npos) << arch;
    EXPECT_NE(r.ptx.find("ldmatrix.sync.aligned.m8n8.x4.shared.b16"), std::string::npos) << arch;
    EXPECT_NE(r.ptx.find("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), std::string::npos) << arch;
    EXPECT_NE(r.ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), std::string::npos) << arch;
  }
}

// 128 x 256 tiles: 8 warps of 64 x 64 (4 x 8 mma tiles, 32 mma per 8 ldmatrix.x4 per k16 step),
// one CTA per SM, fragments double-buffered across k16 steps, one barrier per stage.
// A 2-D grid of pipelined mma.sync matmul programs renumbers its CTAs into the persistent
// kernel's grouped order (8 rows of program axis 0 per column of axis 1), for L2 reuse; kernels
// without such a loop keep blockIdx as their program ids.
TEST(CudaPipeline, MmaSyncMatmulProgramsRunInGroupedOrder) {
  CudaEmission em = emit(*lib_matmul(ScalarKind::BF16), "sm_80");
  EXPECT_EQ(em.stats["grouped-order"], 1);
  EXPECT_NE(em.source.find("const int64_t tsr_t = int64_t(blockIdx.y) * gridDim.x + blockIdx.x"), std::string::npos)
      << em.source;
  EXPECT_NE(em.source.find("= tsr_pid0;"), std::string::npos);
  EXPECT_NE(em.source.find("= tsr_pid1;"), std::string::npos);
  EXPECT_FALSE(em.info.persistent);
  auto sm = bind_constexprs(*find_library_kernel("softmax")->build(ScalarKind::BF16), {});
  CudaEmission row = emit(*sm, "sm_80");
  EXPECT_EQ(row.stats.count("grouped-order"), 0u);
  EXPECT_EQ(row.source.find("tsr_pid0"), std::string::npos);
  // The wgmma kernel is persistent (its own grouped loop), not renumbered twice.
  CudaEmission w = emit(*lib_matmul(ScalarKind::BF16));
  EXPECT_EQ(w.stats.count("grouped-order"), 0u);
  EXPECT_TRUE(w.info.persistent);
}

TEST(CudaPipeline, OneCtaTilesDoubleBufferFragmentsAcrossK16Steps) {
  for (ScalarKind dt : {ScalarKind::BF16, ScalarKind::F16}) {
    CudaEmission em = emit(*lib_matmul(dt, k128x256x32), "sm_80");
    EXPECT_EQ(em.stats["dot.mma_pipelined"], 1) << em.source;
    EXPECT_EQ(em.stats["pipeline-stages"], 4);
    EXPECT_EQ(em.info.dynamic_smem_bytes, 4 * 24576);
    EXPECT_NE(em.source.find("[2][4][4], fb"), std::string::npos) << em.source;
    EXPECT_NE(em.source.find("[2][8][2];"), std::string::npos);
    std::string loop = main_loop(em.source);
    // Step 0 loads step 1's fragments into buffer 1 and multiplies buffer 0; step 1 waits for the
    // next stage, loads its step 0 into buffer 0 and multiplies buffer 1.
    EXPECT_EQ(count_of(loop, "tsr::ldsm_frags<32, 4, 8, 32>("), 2u) << loop;
    EXPECT_EQ(count_of(loop, "__syncthreads();"), 1u);
    EXPECT_EQ(count_of(loop, "tsr::cp_async_wait<2>();"), 1u);
    EXPECT_EQ(count_of(loop, "tsr::cp_async_commit();"), 1u);
    EXPECT_EQ(count_of(loop, dt == ScalarKind::BF16 ? "tsr::mma_tiles<true>(" : "tsr::mma_tiles<false>("), 2u);
    // The loop's events in order: fragment loads as L<buffer><step>, mma as M<buffer>, barrier B.
    std::string events;
    std::regex ev(R"(ldsm_frags<[^>]*>\(fa\d+\[(\d)\].*, (\d), m0_, n0_, lane_\);|mma_tiles<\w+>\(frag\d+, fa\d+\[(\d)\]|__syncthreads\(\);)");
    for (std::sregex_iterator m(loop.begin(), loop.end(), ev), e; m != e; ++m)
      events += (*m)[1].matched ? "L" + (*m)[1].str() + (*m)[2].str() + " " : (*m)[3].matched ? "M" + (*m)[3].str() + " " : "B ";
    EXPECT_EQ(events, "L11 M0 B L00 M1 ") << loop;
    // Registers, not shared memory, decide occupancy: no two-CTA cap.
    EXPECT_NE(em.source.find("__launch_bounds__(256) tessera_matmul("), std::string::npos);
    EXPECT_EQ(em.stats.count("min-blocks-per-sm"), 0u);
  }
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    NvrtcResult r = nvrtc_compile(emit(*lib_matmul(ScalarKind::BF16, k128x256x32), arch).source, planning_target(arch), "mm.cu");
    EXPECT_FALSE(r.cubin.empty()) << arch;
    // The loop body: 2 k16 steps of 32 mma and 8 ldmatrix.x4 (4 for A, 4 transposed for B).
    EXPECT_EQ(count_of(r.ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), 64u) << arch;
    EXPECT_EQ(count_of(r.ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"), 12u) << arch;
    EXPECT_EQ(count_of(r.ptx, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), 12u) << arch;
  }
}

// One CTA per SM: the ring may fill shared memory (less 16 KiB), so 128 x 256 x 64 keeps 3 stages
// of 48 KiB on sm_80 and its 4 on sm_90; a stage of an odd number of k16 steps (BLOCK_K = 16)
// loads its fragments step by step.
TEST(CudaPipeline, RingDepthAndFragmentBuffersFollowTheTile) {
  CudaEmission a80 = emit(*lib_matmul(ScalarKind::BF16, k128x256x64), "sm_80");
  EXPECT_EQ(a80.stats["pipeline-stages"], 3) << a80.source;
  EXPECT_EQ(a80.info.dynamic_smem_bytes, 3 * 49152);
  EXPECT_EQ(count_of(main_loop(a80.source), "tsr::ldsm_frags<64, 4, 8, 32>("), 4u);
  EXPECT_EQ(count_of(main_loop(a80.source), "__syncthreads();"), 1u);
  CudaEmission a90 = emit(*lib_matmul(ScalarKind::BF16, k128x256x64), "sm_90");
  EXPECT_EQ(a90.stats["dot.mma_pipelined"], 1) << a90.source;
  EXPECT_EQ(a90.stats["pipeline-stages"], 4);
  EXPECT_EQ(a90.info.dynamic_smem_bytes, 4 * 49152);
  CudaEmission k16 = emit(*lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 16}}), "sm_80");
  EXPECT_EQ(k16.stats["dot.mma_pipelined"], 1);
  EXPECT_NE(k16.source.find("[1][4][4], fb"), std::string::npos) << k16.source;
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  EXPECT_FALSE(nvrtc_compile(a80.source, planning_target("sm_80"), "mm.cu").cubin.empty());
  EXPECT_FALSE(nvrtc_compile(a90.source, planning_target("sm_90"), "mm.cu").cubin.empty());
  EXPECT_FALSE(nvrtc_compile(k16.source, planning_target("sm_80"), "mm.cu").cubin.empty());
}

// ptxas -v on the PTX of the mma.sync tiles: no spills, and the register cap each runs under
// (two CTAs per SM: 128; one: 255). Skips where the toolkit's ptxas is not installed.
TEST(CudaPipeline, MmaSyncTilesCompileWithoutSpills) {
  struct Case {
    ConstexprConfig cfg;
    const char* arch;
    int max_regs;
  };
  for (const Case& c : {Case{k128x128x32, "sm_80", 128}, Case{k128x256x32, "sm_80", 255}, Case{k128x256x64, "sm_80", 255},
                        Case{k128x256x32, "sm_90a", 255}, Case{k128x256x64, "sm_90", 255}}) {
    std::string what = std::to_string(c.cfg.at("BLOCK_M")) + "x" + std::to_string(c.cfg.at("BLOCK_N")) + "x" +
                       std::to_string(c.cfg.at("BLOCK_K")) + " " + c.arch;
    CudaEmission em = emit(*lib_matmul(ScalarKind::BF16, c.cfg), c.arch);
    ASSERT_EQ(em.stats["dot.mma_pipelined"], 1) << what;
    codegentest::PtxasReport r = codegentest::ptxas_report(em.source, c.arch);
    if (!r.skip.empty()) GTEST_SKIP() << r.skip;
    ASSERT_GT(r.registers(), 0) << what << "\n" << r.out;
    EXPECT_LE(r.registers(), c.max_regs) << what;
    EXPECT_FALSE(r.spills()) << what << "\n" << r.out;
  }
}

TEST(CudaPipeline, UnalignedOperandsAreReadElementByElementIntoTheSameRing) {
  // K or N not a multiple of 8 (rows not 16-byte aligned), or a misaligned base: a uniform flag per
  // operand makes cp_tile_async read its chunks element by element into the ring. There is no
  // second, ordinary loop (it cost ~30 registers per thread, and two CTAs per SM with them).
  CudaEmission em = emit(*lib_matmul(ScalarKind::F16), "sm_80");
  EXPECT_NE(em.source.find("tsr::aligned_vec<uint16_t, 8>(tsr_p0) && tsr_p0_s0 % 8 == 0"), std::string::npos) << em.source;
  EXPECT_NE(em.source.find("tsr::aligned_vec<uint16_t, 8>(tsr_p1) && tsr_p1_s0 % 8 == 0"), std::string::npos);
  EXPECT_NE(em.source.find("tsr_p0_s0, tsr_tid, vec_a"), std::string::npos);
  EXPECT_NE(em.source.find("tsr_p1_s0, tsr_tid, vec_b"), std::string::npos);
  EXPECT_NE(em.source.find("tsr::mma_tiles<false>("), std::string::npos);
  EXPECT_EQ(em.source.find("tsr::warp_mma_block"), std::string::npos);
  EXPECT_EQ(em.source.find("} else {"), std::string::npos);
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  NvrtcResult r = nvrtc_compile(em.source, planning_target("sm_80"), "mm.cu");
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
  NvrtcResult r = nvrtc_compile(em.source, planning_target("sm_80"), "mm.cu");
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
  // Rows of 12 chunks (b's 96 columns): a 128-byte line of the swizzled stage would straddle two
  // rows with different keys. 16 chunks are whole lines.
  CudaEmission straddle = emit(*text_matmul("", " {pipeline = 3}", 96));
  EXPECT_EQ(straddle.stats["dot.mma_pipelined"], 0) << straddle.source;
  EXPECT_EQ(straddle.stats["dot.mma"], 1);
  EXPECT_EQ(emit(*text_matmul("", " {pipeline = 3}", 128)).stats["dot.mma_pipelined"], 1);
  // An odd number of 8-wide n tiles per warp (ldmatrix.x4.trans loads them in pairs).
  CudaEmission odd = emit(*lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 16}, {"BLOCK_N", 16}, {"BLOCK_K", 16}}));
  EXPECT_EQ(odd.stats["dot.mma_pipelined"], 0) << odd.source;
  EXPECT_EQ(odd.stats["dot.mma"], 1);
}

}  // namespace
}  // namespace tessera
