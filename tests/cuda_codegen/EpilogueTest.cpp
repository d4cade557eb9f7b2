// The tensor-core matmul epilogue: a loop result kept in mma fragments that is only stored
// (directly or through one float cast) goes from the fragments straight to memory; every other
// use keeps the exchange through shared memory. Also the register cap that the direct path
// makes possible (two 256-thread CTAs per SM).
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
using codegentest::planning_target;

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// A 64 x 64 bf16 matmul loop; `out` is the element type of %c, `init` defines %acc0 (f32 tile)
// and `tail` uses the loop result %acc.
std::unique_ptr<Kernel> text_kernel(const std::string& out, const std::string& init, const std::string& tail,
                                    const std::string& attrs = " {pipeline = 3}") {
  std::string t =
      "kernel @mm(%a: view<bf16, [M, K]>, %b: view<bf16, [K, N]>, %c: view<" + out + ", [M, N]>, %d: view<f32, [M, N]>) {\n"
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
      "  %f0 = const {value = 0.0} : f32\n" +
      init +
      "  %acc = for %zero, %k, %bk, %acc0" + attrs + " : tile<f32, [64, 64]> {\n"
      "    ^(%kk: i32, %accc: tile<f32, [64, 64]>):\n"
      "    %kt = div %kk, %bk : i32\n"
      "    %ta = load_tile %a, %pm, %kt : tile<bf16, [64, 32]>\n"
      "    %tb = load_tile %b, %kt, %pn : tile<bf16, [32, 64]>\n"
      "    %accn = dot %ta, %tb, %accc : tile<f32, [64, 64]>\n"
      "    yield %accn\n"
      "  }\n" +
      tail + "}\n";
  auto m = parse_module(t, "epilogue.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

const std::string kSplat = "  %acc0 = splat %f0 : tile<f32, [64, 64]>\n";
const std::string kCastStore = "  %out = cast %acc : tile<bf16, [64, 64]>\n  store_tile %c, %out, %pm, %pn\n";

void expect_compiles(const std::string& source) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    NvrtcResult r = nvrtc_compile(source, planning_target(arch), "epilogue.cu");
    EXPECT_FALSE(r.cubin.empty()) << arch;
    EXPECT_NE(r.ptx.find("mma.sync.aligned.m16n8k16"), std::string::npos) << arch;
  }
}

// The library matmul's default tile (128 x 256) on the mma.sync path stores through shared
// memory in 16-byte row chunks; narrower tiles, and any with mma_smem_epilogue = 0, store the
// fragments directly.
TEST(CudaEpilogue, LibraryMatmulStagesWideTilesAndStoresNarrowOnesDirectly) {
  for (ScalarKind dt : {ScalarKind::BF16, ScalarKind::F16}) {
    CudaEmission wide = emit(*lib_matmul(dt), "sm_80");  // (sm_90a's wgmma path stores through TMA)
    EXPECT_EQ(wide.stats["mma-staged-epilogues"], 1) << wide.source;
    EXPECT_EQ(wide.stats.count("mma-direct-epilogues"), 0u);
    EXPECT_EQ(count_of(wide.source, "tsr::store_frags_staged<uint16_t, 128, 256, 256>("), 1u);
    EXPECT_EQ(emit(*lib_matmul(dt, {{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"BLOCK_K", 64}}), "sm_80")
                  .stats["mma-direct-epilogues"],
              1);
    auto k = lib_matmul(dt);
    k->constexprs.push_back({"mma_smem_epilogue", 0, {0, 1}, k->loc});
    CudaEmission em = emit(*k, "sm_80");
    EXPECT_EQ(em.stats["mma-direct-epilogues"], 1) << em.source;
    EXPECT_EQ(em.stats["layout-conversions"], 0);
    EXPECT_EQ(count_of(em.source, "tsr::store_frags("), 1u);
    // One rounding to the stored type, from the f32 accumulator.
    std::string conv = dt == ScalarKind::BF16 ? "[=](float x_) -> uint16_t { return tsr::f2bf(x_); }"
                                              : "[=](float x_) -> uint16_t { return tsr::f2h(x_); }";
    EXPECT_NE(em.source.find(conv), std::string::npos) << em.source;
    // Pairs of columns are stored together only where the base and the row stride allow it.
    EXPECT_NE(em.source.find("tsr::aligned_vec<uint16_t, 2>(tsr_p2) && tsr_p2_s0 % 2 == 0"), std::string::npos);
    // The cast and the blocked store are gone: no scalar-path store into %c remains.
    EXPECT_EQ(em.source.find("tsr_p2[off"), std::string::npos);
    EXPECT_EQ(em.source.find("tsr::copy_vec<uint16_t, 8>(tsr_p2"), std::string::npos);
  }
}

TEST(CudaEpilogue, TwoCtasPerSmWhenRegistersAndSharedMemoryAllow) {
  // 128 x 128 x 32: 64 accumulators and 32 copied elements per thread.
  CudaEmission em = emit(*lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"BLOCK_K", 32}}));
  EXPECT_NE(em.source.find("__launch_bounds__(256, 2) tessera_matmul("), std::string::npos) << em.source;
  EXPECT_EQ(em.stats["min-blocks-per-sm"], 2);
  // 128 x 128 x 64 on the mma.sync path (sm_90a takes wgmma there): 64 elements per thread per
  // stage spill under a 128-register cap.
  CudaEmission k64 = emit(*lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"BLOCK_K", 64}}), "sm_80");
  EXPECT_NE(k64.source.find("__launch_bounds__(256) tessera_matmul("), std::string::npos);
  EXPECT_EQ(k64.stats.count("min-blocks-per-sm"), 0u);
  EXPECT_EQ(k64.stats["mma-direct-epilogues"], 1);
  // No pipelined dot (f32 runs on the fma path): no cap.
  CudaEmission f32 = emit(*lib_matmul(ScalarKind::F32));
  EXPECT_EQ(f32.stats.count("min-blocks-per-sm"), 0u);
  EXPECT_EQ(f32.stats["mma-direct-epilogues"], 0);
  EXPECT_EQ(f32.source.find("__launch_bounds__(128, "), std::string::npos);
  expect_compiles(em.source);
}

TEST(CudaEpilogue, AnF32AccumulatorStoredWithoutACast) {
  CudaEmission em = emit(*text_kernel("f32", kSplat, "  store_tile %d, %acc, %pm, %pn\n"));
  EXPECT_EQ(em.stats["mma-direct-epilogues"], 1) << em.source;
  EXPECT_NE(em.source.find("tsr::store_frags(frag"), std::string::npos);
  EXPECT_NE(em.source.find("[=](float x_) -> float { return x_; }"), std::string::npos) << em.source;
  EXPECT_NE(em.source.find("tsr::aligned_vec<float, 2>(tsr_p3)"), std::string::npos);
  expect_compiles(em.source);
}

TEST(CudaEpilogue, TheOrdinaryLoopAlsoStoresDirectly) {
  // No pipeline hint: the accumulator is still carried in fragments, and still only stored.
  CudaEmission em = emit(*text_kernel("bf16", kSplat, kCastStore, ""));
  EXPECT_EQ(em.stats["dot.mma_pipelined"], 0);
  EXPECT_EQ(em.stats["mma-direct-epilogues"], 1) << em.source;
  expect_compiles(em.source);
}

TEST(CudaEpilogue, AnAccumulatorLoadedFromMemoryIsExchangedOnceBeforeTheLoop) {
  std::string init = "  %acc0 = load_tile %d, %pm, %pn : tile<f32, [64, 64]>\n";
  CudaEmission em = emit(*text_kernel("bf16", init, kCastStore));
  EXPECT_EQ(em.stats["layout-conversions"], 1) << em.source;  // into the fragments only
  EXPECT_EQ(em.stats["mma-direct-epilogues"], 1);
  expect_compiles(em.source);
}

TEST(CudaEpilogue, OtherUsesKeepTheExchangeThroughSharedMemory) {
  // The loop result is stored twice: the general path (fragments -> shared -> blocked tile).
  CudaEmission twice = emit(*text_kernel("bf16", kSplat, kCastStore + "  store_tile %d, %acc, %pm, %pn\n"));
  EXPECT_EQ(twice.stats["mma-direct-epilogues"], 0) << twice.source;
  EXPECT_EQ(twice.source.find("tsr::store_frags("), std::string::npos);
  EXPECT_GE(twice.stats["layout-conversions"], 1);
  // The cast result is used by arithmetic before the store.
  CudaEmission math = emit(*text_kernel("f32", kSplat,
                                        "  %sq = mul %acc, %acc : tile<f32, [64, 64]>\n"
                                        "  store_tile %d, %sq, %pm, %pn\n"));
  EXPECT_EQ(math.stats["mma-direct-epilogues"], 0) << math.source;
  // A cast to an integer type saturates: not folded into the store.
  CudaEmission ints = emit(*text_kernel("f32", kSplat,
                                        "  %i = cast %acc : tile<i32, [64, 64]>\n"
                                        "  %g = cast %i : tile<f32, [64, 64]>\n"
                                        "  store_tile %d, %g, %pm, %pn\n"));
  EXPECT_EQ(ints.stats["mma-direct-epilogues"], 0) << ints.source;
  expect_compiles(twice.source);
}

}  // namespace
}  // namespace tessera
