// NVRTC's cold compile stays near-linear in the kernel's size (issue 18). NVVM's time grows as
// the square of the shared-memory loads in one unrolled block (bench/RESULTS.md, session 17):
// the planning emitter's FMA dot once loaded both operands for every product (2048 loads for
// the library's f32 matmul, 5 s; 15-19 s for the flash-attention corpus kernels). These tests
// hold the property that removed it (loads per product) and a compile-time budget with a wide
// margin, in process CPU time (NVRTC and its ptxas thread), which a loaded machine hardly
// changes. No GPU needed.
#include <gtest/gtest.h>

#include <algorithm>

#include "CudaTestUtil.h"
#include "cuda/CubinInfo.h"

namespace tessera::cudatest {
namespace {

struct Compiled {
  CudaEmission em;
  NvrtcResult r;
};

// A kernel through the pass pipeline (as `tessera compile`), emitted by `emitter` (the tests
// below that count the FMA dot's plans hold the planning emitter's) and compiled for `arch`.
Compiled compile(const Kernel& k, const ConstexprConfig& config, const char* arch,
                 CudaTarget::Emitter emitter = CudaTarget::Emitter::Planning) {
  PipelineOptions po;
  po.config = config;
  auto bound = run_pipeline(k, po);
  CudaTarget t = CudaTarget::parse(arch);
  t.emitter = emitter;
  Compiled c;
  c.em = emit_cuda_with_info(*bound, t);
  c.r = nvrtc_compile(c.em.source, t, "kernel.cu", c.em.line_op);
  return c;
}

int64_t count_lines_with(const std::string& text, const std::string& what) {
  int64_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

std::unique_ptr<Module> corpus(const std::string& file) {
  return parse_file(std::string(TESSERA_SOURCE_DIR) + "/tests/corpus/" + file);
}

// Each k step of the FMA dot loads the thread's values of B's row k and one value of A per
// chunk of its accumulator, not both operands per product: the PTX has far fewer shared loads
// than FMAs (0.09 per FMA for the library f32 matmul; 2 before), at every tile size.
TEST(CompileTime, FmaDotLoadsEachOperandOncePerStep) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  const LibraryKernel* mm = find_library_kernel("matmul");
  ASSERT_NE(mm, nullptr);
  auto k = mm->build(ScalarKind::F32);
  for (int64_t b : {32, 64, 128}) {
    Compiled c = compile(*k, {{"BLOCK_M", b}, {"BLOCK_N", b}, {"BLOCK_K", 32}}, "sm_80");
    EXPECT_EQ(c.em.stats["fma-dots-k-outer"], 1) << b;
    int64_t fmas = count_lines_with(c.r.ptx, "fma.rn.f32"), loads = count_lines_with(c.r.ptx, "ld.shared");
    EXPECT_GT(fmas, 0) << b;
    EXPECT_LE(loads * 2, fmas) << "tile " << b << ": " << loads << " shared loads for " << fmas << " FMAs";
  }
}

// Kernels that took 5-19 s of NVRTC before (matmul f32, the FMA-dot attention kernels of the
// corpus on the planning emitter) compile within 3 s of CPU time: 4x or more the 0.2-0.7 s they
// take now on the 2-core development machine, on either emitter.
TEST(CompileTime, FmaDotKernelsCompileWithinBudget) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  constexpr double kBudgetSeconds = 3.0;
  auto mm = find_library_kernel("matmul")->build(ScalarKind::F32);
  auto fa = corpus("flash_attention_fwd.tile"), three = corpus("attention_three_loops.tile");
  ASSERT_FALSE(fa->kernels.empty());
  ASSERT_FALSE(three->kernels.empty());
  const std::vector<std::pair<std::string, const Kernel*>> cases = {
      {"matmul f32", mm.get()}, {"flash_attention_fwd", fa->kernels[0].get()}, {"attention_three_loops", three->kernels[0].get()}};
  for (const auto& [what, k] : cases)
    for (const char* arch : {"sm_80", "sm_90a"})
      for (CudaTarget::Emitter e : {CudaTarget::Emitter::Planning, CudaTarget::Emitter::Auto}) {
        const std::string in = what + " " + arch + (e == CudaTarget::Emitter::Auto ? " (default emitter)" : " (planning)");
        Compiled c = compile(*k, {}, arch, e);
        // (All three are f32: FMA dots.) The planning emitter's k-outer FMA dot; the layout
        // emitter's, reading its operands from shared tiles per k.
        if (e == CudaTarget::Emitter::Planning) {
          EXPECT_GE(c.em.stats["fma-dots-k-outer"], 1) << in;
        } else {
          EXPECT_GE(c.em.stats["fma-dots"], 1) << in;
          EXPECT_EQ(c.em.stats["fma-dots-from-shared"], c.em.stats["fma-dots"]) << in;
        }
        EXPECT_LT(c.r.cpu_seconds, kBudgetSeconds) << in << ": NVRTC took " << c.r.cpu_seconds << " s of CPU";
        EXPECT_EQ(cubin_resources(c.r.cubin, c.em.info.symbol).frame_bytes, 0) << in << ": spills";
      }
}

// The layout emitter's FMA dots (TESSERA_CUDA_FROM_LAYOUTS=1): assign-layouts puts their
// operands in shared memory and the dot reads them per k (`fma-dots-from-shared`), so ptxas
// needs no stack and the PTX has few shared loads per FMA. NVRTC takes 0.3-0.95 s of CPU for
// these on the 2-core development machine; with the operands in registers for all of K (the
// former lowering, TESSERA_FMA_DOT_IN_REGISTERS=1) 1.2-3.9 s and 3.1-8.5 KB of stack.
TEST(CompileTime, LayoutEmitterFmaDotReadsSharedMemoryPerK) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  constexpr double kBudgetSeconds = 2.0;
  auto mm = find_library_kernel("matmul")->build(ScalarKind::F32);
  auto mms = find_library_kernel("matmul_struct")->build(ScalarKind::F32);
  auto fa = corpus("flash_attention_fwd.tile"), three = corpus("attention_three_loops.tile");
  ASSERT_FALSE(fa->kernels.empty());
  ASSERT_FALSE(three->kernels.empty());
  const std::vector<std::pair<std::string, const Kernel*>> cases = {{"matmul f32", mm.get()},
                                                                    {"matmul_struct f32", mms.get()},
                                                                    {"flash_attention_fwd", fa->kernels[0].get()},
                                                                    {"attention_three_loops", three->kernels[0].get()}};
  for (const auto& [what, k] : cases)
    for (const char* arch : {"sm_80", "sm_90a"}) {
      SCOPED_TRACE(what + " " + arch);
      CudaTarget t = CudaTarget::parse(arch);
      t.emitter = CudaTarget::Emitter::Layouts;
      CudaEmission em = emit_cuda_with_info(*run_pipeline(*k, {}), t);
      ASSERT_NE(std::find(em.notes.begin(), em.notes.end(), "printed from the GPU lowering's layouts (the layout emitter)"),
                em.notes.end())
          << em.notes.back();
      EXPECT_GE(em.stats["fma-dots-from-shared"], 1);
      EXPECT_EQ(em.stats["fma-dots-from-shared"], em.stats["fma-dots"]);
      NvrtcResult r = nvrtc_compile(em.source, t, "kernel.cu", em.line_op);
      const int64_t fmas = count_lines_with(r.ptx, "fma.rn.f32"), loads = count_lines_with(r.ptx, "ld.shared");
      EXPECT_GT(fmas, 0);
      EXPECT_LE(loads * 4, fmas) << loads << " shared loads for " << fmas << " FMAs";
      EXPECT_LT(r.cpu_seconds, kBudgetSeconds) << "NVRTC took " << r.cpu_seconds << " s of CPU";
      EXPECT_EQ(cubin_resources(r.cubin, em.info.symbol).frame_bytes, 0) << "spills";
    }
}

// 1-byte operands too: an i8 dot with K = 512 on the layout emitter held its operands in
// registers for all of K (the dot_operand layouts) until session 35, 43,000 PTX lines, 14 KB
// of stack and 78 s of NVRTC; from shared tiles of 1-byte elements it is 2,000 lines and 0.4 s.
TEST(CompileTime, LayoutEmitterInt8DotReadsSharedMemoryPerK) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  auto m = corpus("int8_matmul.tile");
  ASSERT_FALSE(m->kernels.empty());
  PipelineOptions po;
  po.config = {{"BK", 512}};
  auto bound = run_pipeline(*m->kernels[0], po);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    SCOPED_TRACE(arch);
    CudaTarget t = CudaTarget::parse(arch);
    t.emitter = CudaTarget::Emitter::Layouts;
    CudaEmission em = emit_cuda_with_info(*bound, t);
    ASSERT_NE(std::find(em.notes.begin(), em.notes.end(), "printed from the GPU lowering's layouts (the layout emitter)"),
              em.notes.end())
        << em.notes.back();
    EXPECT_EQ(em.stats["fma-dots-from-shared"], 1);
    NvrtcResult r = nvrtc_compile(em.source, t, "kernel.cu", em.line_op);
    EXPECT_LT(r.cpu_seconds, 3.0) << "NVRTC took " << r.cpu_seconds << " s of CPU";
    EXPECT_EQ(cubin_resources(r.cubin, em.info.symbol).frame_bytes, 0) << "spills";
  }
}

// A load into shared memory of many 16-byte chunks a thread (a [2048, 64] u8 operand: 64) is a
// loop of four rounds at a time, not 64 cp.async copies and their fallbacks in a row (15,000
// PTX lines and 2.2 s of NVRTC; now 1,400 and 0.3 s).
TEST(CompileTime, LayoutEmitterLongSharedLoadsStayLoops) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  auto m = parse_module(
      "kernel @long_load(%a: view<u8, [M, K]>, %b: view<u8, [K, N]>, %c: view<i32, [M, N]>) {\n"
      "  constexpr num_warps = 4\n"
      "  grid {\n"
      "    %one = const {value = 1} : i32\n"
      "    yield %one\n"
      "  }\n"
      "  %z = const {value = 0} : i32\n"
      "  %x = load_tile %a, %z, %z : tile<u8, [1, 2048]>\n"
      "  %y = load_tile %b, %z, %z : tile<u8, [2048, 64]>\n"
      "  %acc = splat %z : tile<i32, [1, 64]>\n"
      "  %d = dot %x, %y, %acc : tile<i32, [1, 64]>\n"
      "  store_tile %c, %d, %z, %z\n"
      "}\n",
      "long_load.tile");
  CudaTarget t = CudaTarget::parse("sm_80");
  t.emitter = CudaTarget::Emitter::Layouts;
  CudaEmission em = emit_cuda_with_info(*run_pipeline(*m->kernels[0], {}), t);
  EXPECT_EQ(em.stats["fma-dots-from-shared"], 1);
  NvrtcResult r = nvrtc_compile(em.source, t, "kernel.cu", em.line_op);
  EXPECT_LE(count_lines_with(r.ptx, "cp.async.c"), 16);
  EXPECT_LT(r.cpu_seconds, 3.0) << "NVRTC took " << r.cpu_seconds << " s of CPU";
}

// The k-outer form is taken only where every chunk of a thread's slots is columns of one row:
// a replicated accumulator (every thread holds the whole [4, 4] tile) keeps the per-element
// loop, which NVRTC still accepts.
TEST(CompileTime, FmaDotKeepsThePerElementLoopElsewhere) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  auto m = parse_module(
      "kernel @small_dot(%a: view<f32, [M, K]>, %b: view<f32, [K, N]>, %c: view<f32, [M, N]>) {\n"
      "  grid {\n"
      "    %one = const {value = 1} : i32\n"
      "    yield %one\n"
      "  }\n"
      "  %z = const {value = 0} : i32\n"
      "  %f0 = const {value = 0.0} : f32\n"
      "  %ta = load_tile %a, %z, %z : tile<f32, [4, 8]>\n"
      "  %tb = load_tile %b, %z, %z : tile<f32, [8, 4]>\n"
      "  %acc = splat %f0 : tile<f32, [4, 4]>\n"
      "  %d = dot %ta, %tb, %acc : tile<f32, [4, 4]>\n"
      "  store_tile %c, %d, %z, %z\n"
      "}\n",
      "small_dot.tile");
  Compiled c = compile(*m->kernels[0], {}, "sm_80");
  EXPECT_EQ(c.em.stats["dot.fma"], 1);
  EXPECT_EQ(c.em.stats["fma-dots-k-outer"], 0);
  EXPECT_FALSE(c.r.cubin.empty());
}

// The per-element loop over K is unrolled four steps, and the rest is left a loop in the PTX
// (`.pragma "nounroll"`): without the pragma NVVM unrolled each slot's loop 16 times and ptxas
// unrolled the 16 loops fully again, a [4, 1024] x [1024, 4] f16 dot at num_warps = 32 (64
// registers a thread) took 65 s of NVRTC, 64 of them in ptxas, with 22 KB of spills; now 0.2 s.
TEST(CompileTime, PerElementFmaDotLeavesPtxasLoops) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  auto m = parse_module(
      "kernel @long_dot(%a: view<f16, [M, K]>, %b: view<f16, [K, N]>, %c: view<f32, [M, N]>) {\n"
      "  constexpr num_warps = 32\n"
      "  grid {\n"
      "    %one = const {value = 1} : i32\n"
      "    yield %one\n"
      "  }\n"
      "  %z = const {value = 0} : i32\n"
      "  %f0 = const {value = 0.0} : f32\n"
      "  %ta = load_tile %a, %z, %z : tile<f16, [4, 1024]>\n"
      "  %tb = load_tile %b, %z, %z : tile<f16, [1024, 4]>\n"
      "  %acc = splat %f0 : tile<f32, [4, 4]>\n"
      "  %d = dot %ta, %tb, %acc : tile<f32, [4, 4]>\n"
      "  store_tile %c, %d, %z, %z\n"
      "}\n",
      "long_dot.tile");
  Compiled c = compile(*m->kernels[0], {}, "sm_80");
  EXPECT_EQ(c.em.stats["dot.fma"], 1);
  EXPECT_EQ(c.em.stats["fma-dots-k-outer"], 0);
  EXPECT_EQ(count_lines_with(c.r.ptx, ".pragma \"nounroll\""), 16);
  EXPECT_LT(c.r.cpu_seconds, 3.0) << "NVRTC took " << c.r.cpu_seconds << " s of CPU";
  EXPECT_EQ(cubin_resources(c.r.cubin, c.em.info.symbol).frame_bytes, 0) << "spills";
}

// NVRTC's --minimal front end (no texture / surface functions, device-runtime calls or device
// launches) gives the kernels the same PTX as the full one, for less front-end time: every
// library kernel's PTX with and without it, both targets (bench/RESULTS.md, session 20).
TEST(CompileTime, MinimalFrontEndGivesTheSamePtx) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  auto ptx = [](const Kernel& k, const char* arch, bool full) {
    if (full) ::setenv("TESSERA_NVRTC_FULL_FRONT_END", "1", 1);
    Compiled c = compile(k, {}, arch);
    ::unsetenv("TESSERA_NVRTC_FULL_FRONT_END");
    return c.r.ptx;
  };
  for (const char* name : {"topk", "matmul"})
    for (ScalarKind dt : {ScalarKind::F32, ScalarKind::BF16})
      for (const char* arch : {"sm_80", "sm_90a"}) {
        auto k = find_library_kernel(name)->build(dt);
        std::string minimal = ptx(*k, arch, false), full = ptx(*k, arch, true);
        EXPECT_FALSE(minimal.empty());
        EXPECT_EQ(minimal, full) << name << " " << scalar_name(dt) << " " << arch;
      }
}

// The f8 conversions of core.cuh expand to a few instructions per element: no libdevice ldexpf
// (range checks and branches) and no rintf, which NVVM does not fold, so the constant pad value
// of each padded f8 load folds away. matmul_fp8 on sm_80 (FMA dot, 64 conversions per thread per
// k tile): 4038 PTX lines, 11597 with ldexpf and rintf.
TEST(CompileTime, F8ConversionsStaySmall) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  const LibraryKernel* mm = find_library_kernel("matmul_fp8");
  ASSERT_NE(mm, nullptr);
  Compiled c = compile(*mm->build(ScalarKind::F32), {}, "sm_80");
  EXPECT_EQ(count_lines_with(c.r.ptx, "cvt.rni"), 0);
  EXPECT_LT(count_lines_with(c.r.ptx, "\n"), 6000);
}

}  // namespace
}  // namespace tessera::cudatest
