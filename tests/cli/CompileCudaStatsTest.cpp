// `tessera compile --stats` for a cuda target: the emitter's statistics (dot paths, conversions)
// follow the passes' statistics on stderr, for any --emit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Outcome {
  int status = -1;
  std::string out, err;
};

Outcome compile_env(const std::string& env, const std::string& args);
Outcome compile(const std::string& args) { return compile_env("", args); }

// `env` (NAME=VALUE ... with a trailing space) set for the command.
Outcome compile_env(const std::string& env, const std::string& args) {
  static int n = 0;
  std::string err_path = testing::TempDir() + "/tessera_stats_err_" + std::to_string(::getpid()) + "_" + std::to_string(n++);
  std::string cmd = std::string("cd '") + TESSERA_SOURCE_DIR + "' && " + env + "'" + TESSERA_BINARY_DIR + "/bin/tessera' compile " +
                    args + " 2>'" + err_path + "'";
  Outcome r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, got);
  int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  std::ifstream in(err_path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::filesystem::remove(err_path);
  return r;
}

// Without --stats, a dot that could have taken the sm_90a wgmma path and did not still says why
// on stderr (the library matmul is f32 unless --dtype says otherwise); stdout stays the code.
TEST(CliCompileStats, Sm90aDotOffTheWgmmaPathSaysWhy) {
  Outcome f32 = compile("matmul --target cuda:sm_90a --emit cuda");
  ASSERT_EQ(f32.status, 0) << f32.err;
  EXPECT_THAT(f32.err, HasSubstr(": not wgmma: wgmma here takes bf16, f16 or f8 operands"));
  EXPECT_THAT(f32.err, HasSubstr("(--stats: every choice)\n"));
  EXPECT_THAT(f32.out, Not(HasSubstr("not wgmma")));
  Outcome bf16 = compile("matmul --dtype bf16 --target cuda:sm_90a --emit cuda");
  ASSERT_EQ(bf16.status, 0) << bf16.err;
  EXPECT_THAT(bf16.out, HasSubstr("tsr::wgmma_m64n256k16_bf16<1>"));
  EXPECT_EQ(bf16.err, "");
  // sm_80 has no wgmma path to miss.
  EXPECT_EQ(compile("matmul --target cuda:sm_80 --emit cuda").err, "");
}

// The default (the layout emitter) and the planning emitter (TESSERA_CUDA_FROM_LAYOUTS=0) each
// report their own statistics.
TEST(CliCompileStats, CudaTargetPrintsTheEmittersStatistics) {
  Outcome r = compile("matmul --dtype bf16 --target cuda:sm_80 --emit cuda --stats");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tsr::ldsm_x4_trans("));
  EXPECT_THAT(r.out, HasSubstr("tsr::mma_bf16_16816("));
  EXPECT_THAT(r.err, HasSubstr("// ----- statistics for matmul -----\n"));
  EXPECT_THAT(r.err, HasSubstr("// ----- cuda emitter statistics for matmul (cuda:sm_80) -----\n"));
  EXPECT_THAT(r.err, HasSubstr("\nmma-dots = 1\n"));
  EXPECT_THAT(r.err, HasSubstr("\nstaged-stores = 1\n"));  // the default 128x256 tile
  EXPECT_THAT(r.err, HasSubstr("\nthreads = 256\n"));
  EXPECT_THAT(r.err, HasSubstr("note: printed from the GPU lowering's layouts (the layout emitter)\n"));
  Outcome p = compile_env("TESSERA_CUDA_FROM_LAYOUTS=0 ", "matmul --dtype bf16 --target cuda:sm_80 --emit cuda --stats");
  ASSERT_EQ(p.status, 0) << p.err;
  EXPECT_THAT(p.out, HasSubstr("tsr::ldsm_frags<"));
  EXPECT_THAT(p.out, HasSubstr("tsr::mma_tiles<true>("));
  EXPECT_THAT(p.err, HasSubstr("\ndot.mma_pipelined = 1\n"));
  EXPECT_THAT(p.err, HasSubstr("\nmma-staged-epilogues = 1\n"));
  EXPECT_THAT(p.err, Not(HasSubstr("(the layout emitter)")));
  // The GPU lowering's counts are still shown, said to be of what did not run.
  EXPECT_THAT(p.err, HasSubstr("note: the planning emitter printed this kernel: the GPU lowering's statistics"));
  EXPECT_THAT(r.err, Not(HasSubstr("the planning emitter printed this kernel")));
  // --emit ir with a cuda target still reports what the emitter would choose.
  Outcome ir = compile("matmul --dtype f32 --target cuda:sm_80 --stats");
  ASSERT_EQ(ir.status, 0) << ir.err;
  EXPECT_THAT(ir.out, HasSubstr("kernel @matmul("));
  EXPECT_THAT(ir.err, HasSubstr("\nfma-dots = 1\n"));
}

// "128x256x64": BLOCK_M x BLOCK_N x BLOCK_K as `--emit ir` prints the bound constexprs
// ("constexpr BLOCK_N = 256 in [...]").
std::string bound_tile(const std::string& ir) {
  std::string out;
  for (const char* name : {"BLOCK_M", "BLOCK_N", "BLOCK_K"}) {
    std::smatch m;
    std::string v = std::regex_search(ir, m, std::regex(std::string("constexpr ") + name + " = ([0-9]+)")) ? m[1].str() : "?";
    out += (out.empty() ? "" : "x") + v;
  }
  return out;
}

// The library's per-target configs (LibraryKernel::target_configs): a 16-bit matmul for
// sm_90a gets the 128x256x64 tile the TMA + wgmma path takes; sm_80, f32 and the cpu keep the
// kernel's own defaults; --config always wins, constexpr by constexpr.
TEST(CliCompileStats, Sm90aMatmulDefaultsToTheWgmmaTile) {
  for (const char* dt : {"bf16", "f16"}) {
    Outcome r = compile(std::string("matmul --dtype ") + dt + " --target cuda:sm_90a --stats");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr("\nwgmma-dots = 1\n")) << dt;
    EXPECT_THAT(r.err, HasSubstr("\ntma-ring-loops = 1\n")) << dt;
    EXPECT_THAT(r.err, Not(HasSubstr("\nmma-dots"))) << dt;
    EXPECT_EQ(bound_tile(r.out), "128x256x64") << dt;
  }
  Outcome r = compile("matmul --dtype bf16 --target cuda:sm_90a --emit cuda");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tsr::wgmma_m64n256k16_bf16"));
}

// The PTX of the sm_90a matmul shows the Hopper instructions (NVRTC is on the CI machine; the
// test skips where libnvrtc is absent), bf16 and fp8 alike.
TEST(CliCompileStats, Sm90aMatmulPtxHasWgmmaAndTensorCopies) {
  for (const char* k : {"matmul --dtype bf16", "matmul_fp8"}) {
    Outcome r = compile(std::string(k) + " --target cuda:sm_90a --emit ptx");
    if (r.status != 0 && r.err.find("NVRTC") != std::string::npos && r.err.find("not available") != std::string::npos)
      GTEST_SKIP() << r.err;
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("wgmma.mma_async")) << k;
    EXPECT_THAT(r.out, HasSubstr("cp.async.bulk.tensor.2d.shared::cluster.global")) << k;  // TMA loads
    EXPECT_THAT(r.out, HasSubstr("cp.async.bulk.tensor.2d.global.shared::cta")) << k;       // TMA stores
    EXPECT_THAT(r.out, HasSubstr("mbarrier.try_wait.parity")) << k;
  }
}

TEST(CliCompileStats, OtherTargetsAndF32KeepTheKernelsDefaults) {
  struct Want {
    const char* args;
    const char* stat;
    const char* tile;
  };
  for (Want w : {Want{"--dtype bf16 --target cuda:sm_80 --stats", "\nmma-dots = 1\n", "128x256x64"},
                 Want{"--dtype f32 --target cuda:sm_90a --stats", "\nfma-dots = 1\n", "64x64x32"},
                 Want{"--dtype bf16 --stats", "", "128x256x128"}}) {  // cpu: BLOCK_K 128
    Outcome r = compile(std::string("matmul ") + w.args);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr(w.stat)) << w.args;
    EXPECT_THAT(r.err, Not(HasSubstr("wgmma-dots"))) << w.args;
    EXPECT_EQ(bound_tile(r.out), w.tile) << w.args;
  }
}

TEST(CliCompileStats, ConfigOverridesTheTargetsDefault) {
  // BLOCK_K = 32 is outside the wgmma shapes: the mma.sync path, with the other two constexprs
  // still at the sm_90a default.
  Outcome r = compile("matmul --dtype bf16 --target cuda:sm_90a --stats --config BLOCK_K=32");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("\nmma-dots = 1\n"));
  EXPECT_THAT(r.err, HasSubstr("note: not on wgmma (a 128-byte swizzled tile whose fastest dim is not a multiple of"));
  EXPECT_THAT(r.err, Not(HasSubstr("wgmma-dots")));
  EXPECT_EQ(bound_tile(r.out), "128x256x32");
  // A wgmma shape of the user's own.
  r = compile("matmul --dtype bf16 --target cuda:sm_90a --stats --config BLOCK_M=64,BLOCK_N=128");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("\nwgmma-dots = 1\n"));
  EXPECT_EQ(bound_tile(r.out), "64x128x64");
  r = compile("matmul --dtype bf16 --target cuda:sm_90a --emit cuda --config BLOCK_M=64,BLOCK_N=128");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tsr::wgmma_m64n128k16_bf16"));
  // The planning emitter says the same in its own words.
  r = compile_env("TESSERA_CUDA_FROM_LAYOUTS=0 ", "matmul --dtype bf16 --target cuda:sm_90a --stats --config BLOCK_M=64,BLOCK_N=128");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("\ndot.wgmma_tma = 1\n"));
  EXPECT_THAT(r.err, HasSubstr("wgmma m64n128k16"));
}

// fp8 below wgmma's tiles: m16n8k32 on sm_89 (the Ada target) and sm_90a at BLOCK_K = 64, the
// FMA dot on sm_80; a note names the path either way, on either emitter.
TEST(CliCompileStats, Fp8MatmulNotesItsMmaSyncPath) {
  for (const char* t : {"sm_89", "sm_90a"}) {
    Outcome r = compile(std::string("matmul_fp8 --target cuda:") + t + " --stats --config BLOCK_K=64");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr("\nmma-dots = 1\n")) << t;
    r = compile(std::string("matmul_fp8 --target cuda:") + t + " --emit cuda --config BLOCK_K=64");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("tsr::mma_f8_16832")) << t;
    r = compile_env("TESSERA_CUDA_FROM_LAYOUTS=0 ", std::string("matmul_fp8 --target cuda:") + t + " --stats --config BLOCK_K=64");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr("\ndot.mma_pipelined = 1\n")) << t;
    EXPECT_THAT(r.err, HasSubstr("\nmma-fp8-dots = 1\n")) << t;
    EXPECT_THAT(r.err, HasSubstr(": mma.sync m16n8k32 e4m3 (B K-major) fed by a ")) << t;
  }
  Outcome r = compile("matmul_fp8 --target cuda:sm_80 --stats");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("\nfma-dots = 1\n"));
  EXPECT_THAT(r.err, HasSubstr(": FMA dot (no tensor cores): fp8 mma.sync (m16n8k32) needs sm_89 or newer"));
  r = compile_env("TESSERA_CUDA_FROM_LAYOUTS=0 ", "matmul_fp8 --target cuda:sm_80 --stats");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("\ndot.fma = 1\n"));
  EXPECT_THAT(r.err, HasSubstr("exact FMA dot (no tensor cores): fp8 mma.sync (m16n8k32) needs sm_89 or newer"));
}

// A dump of the GPU lowering does not need the CUDA output: a config whose CUDA the emitter
// refuses (more shared memory than sm_80 has) still dumps; the CUDA output still says why not.
TEST(CliCompileStats, LoweringDumpsDoNotNeedTheCudaOutput) {
  const std::string a = "matmul --dtype f32 --target cuda:sm_80 --config BLOCK_M=192,BLOCK_N=256,BLOCK_K=128";
  Outcome dump = compile(a + " --dump-after assign-layouts");
  EXPECT_EQ(dump.status, 0) << dump.err;
  EXPECT_THAT(dump.err, HasSubstr("// ----- IR after assign-layouts -----"));
  Outcome cuda = compile(a + " --emit cuda");
  EXPECT_NE(cuda.status, 0);
  EXPECT_THAT(cuda.err, HasSubstr("shared"));
}

TEST(CliCompileStats, CpuTargetHasNoEmitterSection) {
  Outcome r = compile("matmul --dtype f32 --stats");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("// ----- statistics for matmul -----\n"));
  EXPECT_THAT(r.err, Not(HasSubstr("cuda emitter statistics")));
}

// --time compiles each kernel as the runtime does and prints one line of NVRTC's phase times on
// stderr (tools/nvrtc-times reads it); stdout stays what --emit asks for. Not for cpu targets.
TEST(CliCompileStats, TimePrintsNvrtcPhasesPerKernel) {
  Outcome r = compile("vector_add --target cuda:sm_80 --emit cuda --time");
  if (r.status != 0 && r.err.find("not available") != std::string::npos) GTEST_SKIP() << r.err;
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tessera_vector_add"));
  EXPECT_THAT(r.out, Not(HasSubstr("nvrtc")));
  std::regex line(R"(time vector_add sm_80 layouts: nvrtc [0-9.]+ s, cpu [0-9.]+ s \(front end [0-9.]+, nvvm [0-9.]+, )"
                  R"(ptxas [0-9.]+\), cuda [0-9]+ lines, ptx [0-9]+ lines, [0-9]+ registers, 0 B stack\n)");
  EXPECT_TRUE(std::regex_search(r.err, line)) << r.err;
  // The phases are NVRTC's own report, so none is left at -1.
  EXPECT_THAT(r.err, Not(HasSubstr("-1")));
  Outcome cpu = compile("vector_add --target cpu --time");
  EXPECT_NE(cpu.status, 0);
  EXPECT_THAT(cpu.err, HasSubstr("--time times NVRTC: it needs a cuda target"));
}

// --size: a library op that runs as several kernels at those sizes (topk's segmented form on
// cuda) compiles each of them at its config, in launch order, and says so; at sizes where it
// is one kernel, that kernel with a note, its size rules applied. A .tile file takes no --size.
TEST(CliCompileStats, SizesPickTheKernelsALibraryOpRuns) {
  Outcome r = compile("topk --size M=64,N=131072,K=64 --target cuda:sm_90a --emit cuda");
  ASSERT_EQ(r.status, 0) << r.err;
  // From the bucket threshold: the bests, the threshold's select, the segments, the merge.
  EXPECT_THAT(r.err, HasSubstr("note: topk runs as 4 kernels at M=64,N=131072,K=64"));
  const size_t best = r.out.find("tessera_topk_bucket_best("), seg = r.out.find("tessera_topk_bkt_segments_tile("),
               merge = r.out.find("tessera_topk_merge_tile(");
  ASSERT_NE(seg, std::string::npos) << r.out.substr(0, 2000);
  ASSERT_NE(merge, std::string::npos);
  EXPECT_LT(best, seg);
  EXPECT_LT(seg, merge);
  // The f32 segment kernel asks for two CTAs per SM (topk_stages' min_blocks).
  EXPECT_THAT(r.out, HasSubstr("__launch_bounds__(512, 2) tessera_topk_bkt_segments_tile("));
  Outcome one = compile("topk --size M=64,N=4096,K=64 --target cuda:sm_90a --emit cuda");
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_THAT(one.err, HasSubstr("note: topk runs as one kernel at M=64,N=4096,K=64"));
  EXPECT_THAT(one.out, HasSubstr("tessera_topk("));
  EXPECT_THAT(r.out, Not(HasSubstr("note:")));  // notes go to stderr
  // --config reaches the stages, codegen knobs included: min_blocks = 0 asks for nothing.
  Outcome zero = compile("topk --size M=64,N=131072,K=64 --target cuda:sm_90a --emit cuda --config min_blocks=0");
  ASSERT_EQ(zero.status, 0) << zero.err;
  EXPECT_THAT(zero.out, HasSubstr("__launch_bounds__(512) tessera_topk_bkt_segments_tile("));
  // Segments longer than a tile (k = 2048: the ring form, 136 KiB of shared memory, one CTA per
  // SM whatever the registers) ask for nothing either.
  Outcome ring = compile("topk --size M=64,N=131072,K=2048 --target cuda:sm_90a --emit cuda");
  ASSERT_EQ(ring.status, 0) << ring.err;
  EXPECT_THAT(ring.out, HasSubstr("__launch_bounds__(512) tessera_topk_bkt_segments("));
  // The op's size rules apply, as for `run --size`: topk's K follows the size K.
  Outcome k100 = compile("topk --size M=64,N=4096,K=100");
  ASSERT_EQ(k100.status, 0) << k100.err;
  EXPECT_THAT(k100.out, HasSubstr("constexpr K = 100"));
  Outcome file = compile("tests/corpus/layernorm.tile --size M=4");
  EXPECT_NE(file.status, 0);
  EXPECT_THAT(file.err, HasSubstr("a .tile file compiles with symbolic sizes"));
}

// With the layout emitter on, sm_90a's --stats and --dump-after show the lowering the emitter
// printed: matmul_struct's 64 x 64 tiles it prints from its lowering for mma.sync (the wgmma
// lowering's it cannot), whose operand tiles swizzle-mma-operands swizzles.
TEST(CliCompileStats, Sm90aShowsTheLoweringTheLayoutEmitterPrinted) {
  Outcome on = compile_env("TESSERA_CUDA_FROM_LAYOUTS=0 ", "matmul_struct --dtype bf16 --target cuda:sm_90a --emit cuda --stats");
  Outcome r = compile_env("TESSERA_CUDA_FROM_LAYOUTS=1 ", "matmul_struct --dtype bf16 --target cuda:sm_90a --emit cuda --stats");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tsr::ldsm_x4"));  // printed for mma.sync
  EXPECT_THAT(r.err, HasSubstr("swizzle-mma-operands.swizzled = 1"));
  // The planning emitter prints from the kernel, not a lowering: the wgmma lowering is shown.
  ASSERT_EQ(on.status, 0) << on.err;
  EXPECT_THAT(on.err, Not(HasSubstr("swizzle-mma-operands.swizzled")));
}

// --disable-pass reaches the GPU lowering the layout emitter prints: without
// swizzle-mma-operands the matmul's mma.sync operands stay in padded rows (no swizzled
// addresses printed, no stat); the passes it cannot do without are refused by name.
TEST(CliCompileStats, DisablePassReachesTheGpuLowering) {
  const std::string a = "matmul --dtype bf16 --target cuda:sm_80 --emit cuda --stats";
  Outcome on = compile_env("TESSERA_CUDA_FROM_LAYOUTS=1 ", a);
  Outcome off = compile_env("TESSERA_CUDA_FROM_LAYOUTS=1 ", a + " --disable-pass swizzle-mma-operands");
  ASSERT_EQ(on.status, 0) << on.err;
  ASSERT_EQ(off.status, 0) << off.err;
  EXPECT_THAT(on.out, HasSubstr("tsr::sw128_index"));
  EXPECT_THAT(on.err, HasSubstr("swizzle-mma-operands.swizzled = 2"));
  EXPECT_THAT(off.out, Not(HasSubstr("tsr::sw128_index")));
  EXPECT_THAT(off.out, HasSubstr("tsr::ldsm_x4"));  // still the layout emitter's mma.sync
  EXPECT_THAT(off.err, Not(HasSubstr("swizzle-mma-operands.")));
  // The planning emitter does not run the GPU lowering: it says so, and prints what it would.
  Outcome planning = compile_env("TESSERA_CUDA_FROM_LAYOUTS=0 ", a + " --disable-pass swizzle-mma-operands");
  Outcome planning_on = compile_env("TESSERA_CUDA_FROM_LAYOUTS=0 ", a);
  ASSERT_EQ(planning.status, 0) << planning.err;
  EXPECT_THAT(planning.err, HasSubstr("note: --disable-pass swizzle-mma-operands: the GPU lowering's, which only the layout emitter"));
  EXPECT_EQ(planning.out, planning_on.out);
  EXPECT_THAT(on.err, Not(HasSubstr("note: --disable-pass")));
  Outcome bad = compile_env("TESSERA_CUDA_FROM_LAYOUTS=1 ", a + " --disable-pass assign-layouts");
  EXPECT_NE(bad.status, 0);
  EXPECT_THAT(bad.err, HasSubstr("--disable-pass assign-layouts: not a pass that can be left out"));
  EXPECT_THAT(bad.err, HasSubstr("of the GPU lowering"));
}

}  // namespace
