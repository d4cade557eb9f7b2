// Properties of the emitted CUDA for the memory-bound row kernels (softmax, layernorm, rmsnorm):
// reductions through warp shuffles with one shared exchange, 16-byte bf16 accesses, a whole
// row in one tile, and block sizes that keep the row in registers.
#include <gtest/gtest.h>

#include "CodegenTestUtil.h"
#include "cuda/CudaEmitter.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

using codegentest::planning_target;

CudaEmission emit_row(const std::string& name, int64_t block_n, const char* arch = "sm_90a") {
  auto k = bind_constexprs(*find_library_kernel(name)->build(ScalarKind::BF16), {{"BLOCK_N", block_n}});
  return emit_cuda_with_info(*k, planning_target(arch));
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// The text of the single-tile branch (`if (tiles == 1)`): from the kernel's first `if (` to
// its `} else {`.
std::string single_tile_branch(const std::string& src) {
  size_t a = src.find("\n  if (");
  size_t b = src.find("\n  } else {", a);
  EXPECT_NE(a, std::string::npos);
  EXPECT_NE(b, std::string::npos);
  return src.substr(a, b - a);
}

TEST(CudaRowKernels, RowReductionsUseWarpShufflesAndOneBarrier) {
  for (const char* name : {"softmax", "layernorm", "rmsnorm"}) {
    CudaEmission em = emit_row(name, 4096);
    std::string one = single_tile_branch(em.source);
    int reductions = count(one, "reduce ");
    ASSERT_GE(reductions, 1) << name;
    // A butterfly of 5 shuffles per reduction, then one exchange across warps after one
    // barrier (each reduction writes shared words of its own); no staging of the row.
    EXPECT_EQ(count(one, "tsr::shfl_xor("), 5 * reductions) << name;
    EXPECT_EQ(count(one, "__syncthreads();"), reductions) << name << "\n" << one;
    EXPECT_EQ(em.stats["block-exchanges"], count(em.source, "reduce ")) << name;
    EXPECT_EQ(em.stats["layout-conversions"], 0) << name;
    // One f32 per warp and reduction in static shared memory (two copies in the loops), no
    // dynamic scratch.
    EXPECT_EQ(em.info.dynamic_smem_bytes, 0) << name;
    EXPECT_GT(em.info.static_smem_bytes, 0) << name;
    EXPECT_LE(em.info.static_smem_bytes, 32 * count(em.source, "reduce ")) << name;
  }
}

// A reduction that runs again in the next iteration of a loop alternates between two copies of
// its shared words (the barrier of the run in between orders the reads of one copy before its
// next writes); one outside loops runs once and has one copy.
TEST(CudaRowKernels, LoopReductionsAlternateBetweenTwoCopies) {
  for (const char* name : {"softmax", "layernorm", "rmsnorm"}) {
    CudaEmission em = emit_row(name, 2048);
    std::string one = single_tile_branch(em.source);
    std::string loops = em.source.substr(em.source.find("\n  } else {"));
    int looped = count(loops, "reduce ");
    ASSERT_GE(looped, 1) << name;
    EXPECT_EQ(count(loops, "_at ^= 4;"), looped) << name << "\n" << loops;
    EXPECT_EQ(count(one, "_at ^="), 0) << name;
    // The copy in use is kernel-scope state, declared before the first statement of the body.
    EXPECT_LT(em.source.find("_at = 0;"), em.source.find("program_id")) << name;
  }
}

// With 8 or more warps each lane reads one warp's partial and a butterfly folds them.
TEST(CudaRowKernels, ManyWarpsFoldTheirPartialsWithShuffles) {
  CudaEmission em = emit_row("rmsnorm", 8192);  // 256 threads: 8 warps
  ASSERT_EQ(em.info.block_threads, 256);
  std::string one = single_tile_branch(em.source);
  EXPECT_EQ(count(one, "tsr::shfl_xor("), 5 + 3) << one;
  EXPECT_NE(one.find("[(tsr_tid & 7) * 1 + 0]"), std::string::npos) << one;
}

// About 32 elements per thread, up to 1024 threads; a whole row of 32768 that loads three such
// tiles in one block (layernorm's x, w and b) gets 512 threads instead (128 registers each).
TEST(CudaRowKernels, ThreadsPerRowTile) {
  EXPECT_EQ(emit_row("softmax", 32768).info.block_threads, 1024);
  EXPECT_EQ(emit_row("rmsnorm", 32768).info.block_threads, 1024);  // x and w
  EXPECT_EQ(emit_row("layernorm", 32768).info.block_threads, 512);
  EXPECT_EQ(emit_row("layernorm", 16384).info.block_threads, 512);
  EXPECT_EQ(emit_row("layernorm", 4096).info.block_threads, 128);
}

// bf16 loads whose only uses are casts to f32 stay two elements per register; the casts become
// views that convert at each use. A kernel constexpr pack_narrow_loads = 0 turns this off.
TEST(CudaRowKernels, NarrowLoadsCastToF32StayPacked) {
  CudaEmission em = emit_row("rmsnorm", 4096);
  std::string one = single_tile_branch(em.source);
  EXPECT_EQ(count(one, "tsr::Packed16<true, 32> "), 2) << one;  // x and w
  EXPECT_EQ(count(one, "// converts at each use"), 2) << one;
  EXPECT_EQ(count(one, "reinterpret_cast<const uint32_t*>("), 2) << one;
  EXPECT_EQ(em.stats["packed-loads"], 5);  // and x twice, w once in the loops
  auto k = bind_constexprs(*find_library_kernel("rmsnorm")->build(ScalarKind::BF16), {{"BLOCK_N", 4096}});
  k->constexprs.push_back({"pack_narrow_loads", 0, {0, 1}, k->loc});
  CudaEmission off = emit_cuda_with_info(*k, planning_target("sm_90a"));
  EXPECT_EQ(off.source.find("Packed16"), std::string::npos);
  EXPECT_EQ(off.stats["packed-loads"], 0);
}

// A narrow load with a use other than a cast to f32 (here a store of the bf16 tile itself) is
// not packed.
TEST(CudaRowKernels, NarrowLoadsWithOtherUsesAreNotPacked) {
  auto m = parse_module(R"(kernel @k(%x: view<bf16, [N]>, %y: view<bf16, [N]>, %z: view<f32, [N]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    yield %n
  }
  %p = program_id {axis = 0} : i32
  %t = load_tile %x, %p : tile<bf16, [1024]>
  store_tile %y, %t, %p
  %f = cast %t : tile<f32, [1024]>
  store_tile %z, %f, %p
  %u = load_tile %x, %p : tile<bf16, [1024]>
  %g = cast %u : tile<f32, [1024]>
  %h = add %f, %g : tile<f32, [1024]>
  store_tile %z, %h, %p
}
)",
                        "packed.tile");
  CudaEmission em = emit_cuda_with_info(*bind_constexprs(*m->kernels.at(0), {}), planning_target("sm_80"));
  EXPECT_EQ(em.stats["packed-loads"], 1) << em.source;
  EXPECT_EQ(count(em.source, "tsr::Packed16<true, 8> "), 1) << em.source;
}

// The norms' single-tile branch issues the loads of w (and b) with x's, before the first
// reduction, so that their L2 round trip overlaps x's; all of them stay packed until used, and
// layernorm keeps no centred f32 copy of the row across its second reduction.
TEST(CudaRowKernels, NormsLoadWeightsBeforeTheirReductions) {
  for (const char* name : {"layernorm", "rmsnorm"}) {
    CudaEmission em = emit_row(name, 4096);
    std::string one = single_tile_branch(em.source);
    size_t first_reduce = one.find("= reduce ");
    ASSERT_NE(first_reduce, std::string::npos) << name;
    EXPECT_LT(one.find("load_tile %w"), first_reduce) << name;
    if (std::string(name) == "layernorm") EXPECT_LT(one.find("load_tile %b"), first_reduce) << name;
    EXPECT_EQ(count(one, "tsr::Packed16<true, 32> "), count(one, "load_tile ")) << name;
  }
}

// A kernel constexpr min_blocks becomes __launch_bounds__'s second argument (a register cap for
// that many CTAs per SM); without it there is none.
TEST(CudaRowKernels, MinBlocksConstexprCapsRegisters) {
  auto k = bind_constexprs(*find_library_kernel("layernorm")->build(ScalarKind::BF16), {{"BLOCK_N", 4096}});
  EXPECT_NE(emit_cuda_with_info(*k, planning_target("sm_90a")).source.find("__launch_bounds__(128) "), std::string::npos);
  k->constexprs.push_back({"min_blocks", 8, {6, 8}, k->loc});
  CudaEmission em = emit_cuda_with_info(*k, planning_target("sm_90a"));
  EXPECT_NE(em.source.find("__launch_bounds__(128, 8) "), std::string::npos);
  EXPECT_EQ(em.stats["min-blocks-per-sm"], 8);
}

// prefetch_loads = 1: the loops that only read (the row kernels' reduction passes) issue the
// next column tile's load before this one's reductions; loops that store are left alone.
TEST(CudaRowKernels, ReadOnlyLoopsPrefetchTheNextTile) {
  for (auto [name, read_loops] : {std::pair{"softmax", 1}, {"layernorm", 2}, {"rmsnorm", 1}}) {
    auto k = bind_constexprs(*find_library_kernel(name)->build(ScalarKind::BF16), {{"BLOCK_N", 2048}});
    EXPECT_EQ(emit_cuda_with_info(*k, planning_target("sm_90a")).stats["prefetched-loads"], 0) << name;
    k->constexprs.push_back({"prefetch_loads", 1, {0, 1}, k->loc});
    CudaEmission em = emit_cuda_with_info(*k, planning_target("sm_90a"));
    EXPECT_EQ(em.stats["prefetched-loads"], read_loops) << name;
    EXPECT_EQ(count(em.source, "tsr::Packed16<true, 16> pre"), read_loops) << name;
    // Each prefetched loop: the first tile before it, the next one at the top of its body,
    // guarded by the loop's bound.
    size_t pre = em.source.find("tsr::Packed16<true, 16> pre");
    size_t loop = em.source.find("for (int64_t iv", pre);
    size_t next = em.source.find("if (ivn", loop);
    ASSERT_NE(next, std::string::npos) << name;
    EXPECT_LT(next, em.source.find("__syncthreads();", loop)) << name;
  }
}

// A [1, N] row tile's coordinates need no division: its row is 0 and its column the element
// index (coordinates only matter for elements of the tile).
TEST(CudaRowKernels, RowTileAddressesNeedNoDivision) {
  for (const char* name : {"softmax", "layernorm", "rmsnorm"}) {
    std::string src = emit_row(name, 4096).source;
    EXPECT_EQ(count(src, " / 4096)"), 0) << name;
    EXPECT_EQ(count(src, " % 4096)"), 0) << name;
  }
}

TEST(CudaRowKernels, FloatMaxReductionsTakeOneInstructionPerStep) {
  std::string one = single_tile_branch(emit_row("softmax", 4096).source);
  EXPECT_GT(count(one, "tsr::max_nan_f32("), 0) << one;
  EXPECT_EQ(count(one, "tsr::fmax_nan<"), 0) << one;
}

TEST(CudaRowKernels, SingleTileBranchReadsTheRowOnceWith16ByteVectors) {
  for (const char* name : {"softmax", "layernorm", "rmsnorm"}) {
    std::string one = single_tile_branch(emit_row(name, 4096).source);
    // x is parameter 0: one load of it (16-byte vectors of 8 bf16, kept packed as 4 words), one
    // store of y (8 values rounded two at a time into 4 words); layernorm (whole_tile_checks = 1)
    // has each in a whole-tile path and a chunk-by-chunk one.
    const int paths = name == std::string("layernorm") ? 2 : 1;
    EXPECT_EQ(count(one, "reinterpret_cast<const uint32_t*>("), paths * count(one, "load_tile ")) << name;
    EXPECT_EQ(count(one, "tsr::copy_vec<uint32_t, 4>(reinterpret_cast<uint32_t*>(tsr_p"), paths) << name;
    EXPECT_EQ(count(one, "load_tile %x"), 1) << name;
    EXPECT_EQ(count(one, "store_tile %y"), 1) << name;
    EXPECT_NE(one.find("tsr::aligned_vec<uint16_t, 8>(tsr_p0"), std::string::npos) << name;
  }
}

TEST(CudaRowKernels, SoftmaxSingleTileTakesOneExpPerElement) {
  std::string one = single_tile_branch(emit_row("softmax", 4096).source);
  EXPECT_EQ(count(one, "= exp "), 1) << one;
  EXPECT_EQ(count(one, "tsr::fexp("), 1);
}

TEST(CudaRowKernels, LargeRowsGetEnoughThreadsForAboutThirtyTwoElementsEach) {
  EXPECT_EQ(emit_row("softmax", 1024).info.block_threads, 128);
  EXPECT_EQ(emit_row("softmax", 4096).info.block_threads, 128);
  EXPECT_EQ(emit_row("rmsnorm", 8192).info.block_threads, 256);
  EXPECT_EQ(emit_row("layernorm", 16384).info.block_threads, 512);
  EXPECT_EQ(emit_row("softmax", 32768).info.block_threads, 1024);
  EXPECT_EQ(emit_row("softmax", 32768).info.cluster, 1);  // clusters only when asked (ClusterTest.cpp)
  EXPECT_EQ(emit_row("softmax", 32768, "sm_80").info.block_threads, 1024);
}

TEST(CudaRowKernels, SmallTileReductionsStayInRegisters) {
  auto m = parse_module(R"(kernel @k(%x: view<f32, [N]>, %y: view<i32, [N]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    yield %n
  }
  %p = program_id {axis = 0} : i32
  %t = load_tile %x, %p : tile<f32, [16]>
  %r = reshape %t : tile<f32, [4, 4]>
  %s = reduce %r {axis = 1, kind = "sum"} : tile<f32, [4]>
  %a = reduce %r {axis = 0, kind = "argmax"} : tile<i32, [4]>
  %b = cast %s : tile<i32, [4]>
  %c = add %a, %b : tile<i32, [4]>
  store_tile %y, %c, %p
}
)",
                        "golden.tile");
  auto k = bind_constexprs(*m->kernels.at(0), {});
  CudaEmission em = emit_cuda_with_info(*k, planning_target("sm_80"));
  EXPECT_EQ(em.stats["register-reductions"], 2) << em.source;
  EXPECT_EQ(em.source.find("__syncthreads"), std::string::npos) << em.source;
}

// Two independent reductions in a row of the same kind and shape fold into one exchange (one
// barrier); a reduction of the other's result, or of another kind, keeps its own.
TEST(CudaRowKernels, IndependentReductionsInARowShareOneExchange) {
  auto m = parse_module(R"(kernel @k(%x: view<f32, [M, N]>, %y: view<f32, [M, 4]>) {
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %p = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %t = load_tile %x, %p, %c0 : tile<f32, [1, 4096]>
  %u = mul %t, %t : tile<f32, [1, 4096]>
  %a = reduce %t {axis = 1, kind = "sum"} : tile<f32, [1]>
  %b = reduce %u {axis = 1, kind = "sum"} : tile<f32, [1]>
  %c = reduce %t {axis = 1, kind = "max"} : tile<f32, [1]>
  %ab = add %a, %b : tile<f32, [1]>
  %s = add %ab, %c : tile<f32, [1]>
  %s2 = expand_dims %s {axis = 1} : tile<f32, [1, 1]>
  store_tile %y, %s2, %p, %c0
}
)",
                        "fold.tile");
  auto k = bind_constexprs(*m->kernels.at(0), {});
  CudaEmission em = emit_cuda_with_info(*k, planning_target("sm_90a"));
  EXPECT_EQ(em.stats["reductions"], 3);
  EXPECT_EQ(em.stats["folded-reductions"], 1);  // %a and %b; %c (max) on its own
  EXPECT_EQ(em.stats["block-exchanges"], 2);
  EXPECT_EQ(count(em.source, "__syncthreads();"), 2) << em.source;
  EXPECT_NE(em.source.find("(folded with the reduction above in one exchange)"), std::string::npos);
  std::string why;
  if (nvrtc_available(&why)) EXPECT_FALSE(nvrtc_compile(em.source, planning_target("sm_90a"), "fold.cu", em.line_op).cubin.empty());
}

}  // namespace
}  // namespace tessera
