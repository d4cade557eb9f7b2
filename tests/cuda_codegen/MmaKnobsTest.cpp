// The mma.sync matmul path's codegen knobs (kernel constexprs, off by default; cuda_bench times
// them): what each changes in the emitted text, and that NVRTC compiles every value for sm_80 and
// plain sm_90 (the targets of that path). The GPU tests (tests/gpu/mma_sync_gpu_test.cpp) run
// them against the interpreter.
#include <gtest/gtest.h>

#include <array>
#include <regex>
#include <string>
#include <vector>

#include "CodegenTestUtil.h"
#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

using codegentest::emit;
using codegentest::lib_matmul;
using codegentest::planning_target;

struct Knob {
  const char* name;
  int64_t value;
};

// The library bf16 matmul at a tile with the knobs declared and set.
std::unique_ptr<Kernel> knobbed(int64_t bm, int64_t bn, int64_t bk, const std::vector<Knob>& knobs) {
  auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", bm}, {"BLOCK_N", bn}, {"BLOCK_K", bk}});
  for (const Knob& x : knobs) k->constexprs.push_back({x.name, x.value, {x.value}, k->loc});
  return k;
}

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// `src` without the lines that declare the knobs' constexprs (the rest is what they change).
std::string without_knob_decls(const std::string& src) {
  std::string out;
  size_t at = 0;
  while (at < src.size()) {
    size_t end = src.find('\n', at);
    end = end == std::string::npos ? src.size() : end + 1;
    std::string l = src.substr(at, end - at);
    bool knob = false;
    for (const char* n : {"mma_l2_prefetch", "mma_spread_copies", "mma_smem_epilogue", "mma_early_last_step"})
      knob |= l.find("constexpr int64_t " + std::string(n) + " =") != std::string::npos;
    if (!knob) out += l;
    at = end;
  }
  return out;
}

std::string main_loop(const std::string& src) {
  size_t from = src.find("for (int64_t it"), to = src.find("tsr::cp_async_wait<0>();");
  return from == std::string::npos || to == std::string::npos ? "" : src.substr(from, to - from);
}

// PTX of `k` for `arch`, or a test failure naming the knobs (empty when NVRTC is missing).
std::string ptx_of(const Kernel& k, const char* arch, const std::string& what) {
  std::string why;
  if (!nvrtc_available(&why)) return "";
  CudaEmission em = emit(k, arch);
  try {
    return nvrtc_compile(em.source, planning_target(arch), "mm.cu").ptx;
  } catch (const TesseraError& e) {
    ADD_FAILURE() << what << " " << arch << ":\n" << e.what() << "\n--- source ---\n" << em.source;
    return "";
  }
}

TEST(CudaMmaKnobs, L2PrefetchQualifiesEveryRingCopy) {
  for (int64_t pf : {64, 128, 256}) {
    auto k = knobbed(128, 256, 64, {{"mma_l2_prefetch", pf}});
    CudaEmission em = emit(*k, "sm_80");
    const std::string P = std::to_string(pf);
    EXPECT_EQ(em.stats["mma-l2-prefetch"], pf);
    // Prologue and main loop, A and B.
    EXPECT_EQ(count_of(em.source, "tsr::cp_tile_async<128, 8, 256, " + P + ">("), 2u) << em.source;
    EXPECT_EQ(count_of(em.source, "tsr::cp_tile_async<64, 32, 256, " + P + ">("), 2u);
    for (const char* arch : {"sm_80", "sm_90"}) {
      std::string ptx = ptx_of(*k, arch, "mma_l2_prefetch=" + P);
      if (ptx.empty()) continue;
      EXPECT_NE(ptx.find("cp.async.cg.shared.global.L2::" + P + "B"), std::string::npos) << arch;
      EXPECT_EQ(ptx.find("cp.async.cg.shared.global ["), std::string::npos) << arch << ": a copy without the hint";
    }
  }
  // Off (0, or a size PTX has no qualifier for): the default text.
  for (int64_t off : {0, 32}) {
    CudaEmission em = emit(*knobbed(128, 256, 64, {{"mma_l2_prefetch", off}}), "sm_80");
    EXPECT_EQ(without_knob_decls(em.source), emit(*lib_matmul(ScalarKind::BF16), "sm_80").source) << off;
  }
}

TEST(CudaMmaKnobs, SpreadCopiesIssueTheNextStageInPiecesBeforeTheWait) {
  // BLOCK_K = 64: 4 k16 steps, the copies in 3 pieces after steps 0, 1 and 2; one commit, before
  // the wait of step 3 (which counts this iteration's group).
  auto k = knobbed(128, 256, 64, {{"mma_spread_copies", 1}});
  CudaEmission em = emit(*k, "sm_80");
  EXPECT_EQ(em.stats["mma-copy-pieces"], 3);
  std::string loop = main_loop(em.source);
  for (int part = 0; part < 3; ++part) {
    std::string tail = ", 0, " + std::to_string(part) + ", 3>(";
    EXPECT_EQ(count_of(loop, "tsr::cp_tile_async<128, 8, 256" + tail), 1u) << loop;
    EXPECT_EQ(count_of(loop, "tsr::cp_tile_async<64, 32, 256" + tail), 1u) << loop;
  }
  EXPECT_EQ(count_of(loop, "tsr::cp_async_commit();"), 1u);
  EXPECT_EQ(count_of(loop, "__syncthreads();"), 1u);
  EXPECT_LT(loop.find(", 2, 3>("), loop.find("tsr::cp_async_commit();"));
  EXPECT_LT(loop.find("tsr::cp_async_commit();"), loop.find("tsr::cp_async_wait<"));
  // The prologue still issues whole stages.
  EXPECT_NE(em.source.find("tsr::cp_tile_async<128, 8, 256>("), std::string::npos);
  for (const char* arch : {"sm_80", "sm_90"}) ptx_of(*k, arch, "mma_spread_copies=1");
  // With the prefetch hint too.
  auto both = knobbed(128, 256, 64, {{"mma_spread_copies", 1}, {"mma_l2_prefetch", 128}});
  EXPECT_NE(main_loop(emit(*both, "sm_80").source).find("tsr::cp_tile_async<128, 8, 256, 128, 1, 3>("), std::string::npos);
  ptx_of(*both, "sm_90", "mma_spread_copies=1 mma_l2_prefetch=128");
  // Two k16 steps per stage (BLOCK_K = 32) leave one piece: the default schedule. So does the
  // two-CTA schedule (128x128x32: fragments not double-buffered).
  for (auto [bm, bn, bk] : {std::array<int64_t, 3>{128, 256, 32}, std::array<int64_t, 3>{128, 128, 32}}) {
    CudaEmission one = emit(*knobbed(bm, bn, bk, {{"mma_spread_copies", 1}}), "sm_80");
    EXPECT_EQ(one.stats.count("mma-copy-pieces"), 0u);
    EXPECT_EQ(without_knob_decls(one.source), emit(*lib_matmul(ScalarKind::BF16, {{"BLOCK_M", bm}, {"BLOCK_N", bn}, {"BLOCK_K", bk}}), "sm_80").source);
  }
}

TEST(CudaMmaKnobs, EarlyLastStepRunsItsMmaBeforeTheBarrier) {
  for (int64_t bk : {32, 64}) {
    auto k = knobbed(128, 256, bk, {{"mma_early_last_step", 1}});
    CudaEmission em = emit(*k, "sm_80");
    EXPECT_EQ(em.stats["mma-early-last-step"], 1);
    std::string loop = main_loop(em.source);
    // The loop's events: fragment loads L<buffer><step>, mma M<buffer>, barrier B.
    std::string events;
    std::regex ev(R"(ldsm_frags<[^>]*>\(fa\d+\[(\d)\].*, (\d), m0_, n0_, lane_\);|mma_tiles<\w+>\(frag\d+, fa\d+\[(\d)\]|__syncthreads\(\);)");
    for (std::sregex_iterator m(loop.begin(), loop.end(), ev), e; m != e; ++m)
      events += (*m)[1].matched ? "L" + (*m)[1].str() + (*m)[2].str() + " " : (*m)[3].matched ? "M" + (*m)[3].str() + " " : "B ";
    EXPECT_EQ(events, bk == 32 ? "L11 M0 M1 B L00 " : "L11 M0 L02 M1 L13 M0 M1 B L00 ") << loop;
    for (const char* arch : {"sm_80", "sm_90"}) ptx_of(*k, arch, "mma_early_last_step=1");
  }
  // The two-CTA schedule (one fragment set) has no such step: unchanged.
  CudaEmission two = emit(*knobbed(128, 128, 32, {{"mma_early_last_step", 1}}), "sm_80");
  EXPECT_EQ(two.stats.count("mma-early-last-step"), 0u);
}

TEST(CudaMmaKnobs, StagedEpilogueGoesThroughSharedMemory) {
  for (ScalarKind dt : {ScalarKind::BF16, ScalarKind::F16}) {
    auto k = lib_matmul(dt, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}});
    k->constexprs.push_back({"mma_smem_epilogue", 1, {1}, k->loc});
    CudaEmission em = emit(*k, "sm_80");
    EXPECT_EQ(em.stats["mma-staged-epilogues"], 1) << em.source;
    EXPECT_EQ(em.stats.count("mma-direct-epilogues"), 0u);
    EXPECT_NE(em.source.find("tsr::store_frags_staged<uint16_t, 128, 256, 256>("), std::string::npos) << em.source;
    EXPECT_NE(em.source.find("tsr::aligned_vec<uint16_t, 8>(tsr_p2) && tsr_p2_s0 % 8 == 0"), std::string::npos);
    // It reuses the ring's shared memory (128 x 264 x 2 bytes < 3 stages of 48 KiB).
    EXPECT_EQ(em.info.dynamic_smem_bytes, 3 * 49152);
    for (const char* arch : {"sm_80", "sm_90"}) ptx_of(*k, arch, "mma_smem_epilogue=1");
  }
  // At the other tiles and beside the other knobs.
  for (auto [bm, bn, bk] : {std::array<int64_t, 3>{128, 128, 32}, std::array<int64_t, 3>{64, 256, 64},
                            std::array<int64_t, 3>{128, 256, 32}, std::array<int64_t, 3>{64, 64, 32}}) {
    auto k = knobbed(bm, bn, bk, {{"mma_smem_epilogue", 1}, {"mma_spread_copies", 1}, {"mma_l2_prefetch", 256}});
    EXPECT_EQ(emit(*k, "sm_90").stats["mma-staged-epilogues"], 1);
    ptx_of(*k, "sm_90", "staged + spread + prefetch at " + std::to_string(bm) + "x" + std::to_string(bn));
  }
}

// An f32 output scaled by a kernel scalar (the scale folds into the conversion lambda), the knobs
// declared in the text format.
std::unique_ptr<Kernel> scaled_f32_matmul() {
  std::string t =
      "kernel @mm(%a: view<bf16, [M, K]>, %b: view<bf16, [K, N]>, %c: view<f32, [M, N]>, %s: f32) {\n"
      "  constexpr mma_smem_epilogue = 1 in [0, 1]\n"
      "  constexpr mma_spread_copies = 1 in [0, 1]\n"
      "  grid {\n"
      "    %m = dim %a {axis = 0} : i32\n"
      "    %n = dim %b {axis = 1} : i32\n"
      "    yield %m, %n\n"
      "  }\n"
      "  %pm = program_id {axis = 0} : i32\n"
      "  %pn = program_id {axis = 1} : i32\n"
      "  %k = dim %a {axis = 1} : i32\n"
      "  %bk = const {value = 64} : i32\n"
      "  %zero = const {value = 0} : i32\n"
      "  %f0 = const {value = 0.0} : f32\n"
      "  %acc0 = splat %f0 : tile<f32, [128, 128]>\n"
      "  %acc = for %zero, %k, %bk, %acc0 {pipeline = 4} : tile<f32, [128, 128]> {\n"
      "    ^(%kk: i32, %accc: tile<f32, [128, 128]>):\n"
      "    %kt = div %kk, %bk : i32\n"
      "    %ta = load_tile %a, %pm, %kt : tile<bf16, [128, 64]>\n"
      "    %tb = load_tile %b, %kt, %pn : tile<bf16, [64, 128]>\n"
      "    %accn = dot %ta, %tb, %accc : tile<f32, [128, 128]>\n"
      "    yield %accn\n"
      "  }\n"
      "  %ss = splat %s : tile<f32, [128, 128]>\n"
      "  %out = mul %acc, %ss : tile<f32, [128, 128]>\n"
      "  store_tile %c, %out, %pm, %pn\n"
      "}\n";
  auto m = parse_module(t, "knobs.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

TEST(CudaMmaKnobs, StagedEpilogueKeepsTheFusedScale) {
  auto k = scaled_f32_matmul();
  CudaEmission em = emit(*k, "sm_80");
  ASSERT_EQ(em.stats["dot.mma_pipelined"], 1) << em.source;
  EXPECT_EQ(em.stats["mma-fused-epilogue-ops"], 1);
  EXPECT_EQ(em.stats["mma-staged-epilogues"], 1) << em.source;
  EXPECT_NE(em.source.find("tsr::store_frags_staged<float, 128, 128, 256>("), std::string::npos) << em.source;
  EXPECT_NE(em.source.find("tsr::aligned_vec<float, 4>("), std::string::npos);
  EXPECT_EQ(em.stats["mma-copy-pieces"], 3);
  for (const char* arch : {"sm_80", "sm_90"}) ptx_of(*k, arch, "f32 scaled staged");
}

TEST(CudaMmaKnobs, TwoCtasPerSmSizeTheRingForBoth) {
  // 128x128x64 alone runs one CTA (4 stages of 32 KiB); min_blocks = 2 caps registers at 128 and
  // the ring at half of shared memory (3 stages on sm_90, 2 on sm_80).
  CudaEmission one = emit(*knobbed(128, 128, 64, {}), "sm_90");
  EXPECT_EQ(one.stats["pipeline-stages"], 4);
  CudaEmission two = emit(*knobbed(128, 128, 64, {{"min_blocks", 2}}), "sm_90");
  EXPECT_EQ(two.stats["pipeline-stages"], 3);
  EXPECT_LE(2 * two.info.dynamic_smem_bytes, 227 * 1024);
  EXPECT_NE(two.source.find("__launch_bounds__(256, 2)"), std::string::npos);
  CudaEmission two80 = emit(*knobbed(128, 128, 64, {{"min_blocks", 2}}), "sm_80");
  EXPECT_EQ(two80.stats["pipeline-stages"], 2);
  EXPECT_LE(2 * two80.info.dynamic_smem_bytes, 163 * 1024);
  for (const char* arch : {"sm_80", "sm_90"}) ptx_of(*knobbed(128, 128, 64, {{"min_blocks", 2}}), arch, "min_blocks=2");
  // 16 warps at 128x256: 64 x 32 warp tiles, 512 threads.
  for (int64_t bk : {32, 64}) {
    auto k = knobbed(128, 256, bk, {{"num_warps", 16}});
    CudaEmission em = emit(*k, "sm_90");
    EXPECT_EQ(em.info.block_threads, 512);
    EXPECT_NE(em.source.find("tsr::ldsm_frags<" + std::to_string(bk) + ", 4, 4, 32>("), std::string::npos) << em.source;
    ptx_of(*k, "sm_90", "num_warps=16");
  }
}

// The sm_90a wgmma path ignores the knobs.
TEST(CudaMmaKnobs, TheWgmmaPathIgnoresThem) {
  auto k = knobbed(128, 256, 64,
                   {{"mma_l2_prefetch", 128}, {"mma_spread_copies", 1}, {"mma_smem_epilogue", 1}, {"mma_early_last_step", 1}});
  EXPECT_EQ(without_knob_decls(emit(*k, "sm_90a").source), emit(*lib_matmul(ScalarKind::BF16), "sm_90a").source);
}

}  // namespace
}  // namespace tessera
