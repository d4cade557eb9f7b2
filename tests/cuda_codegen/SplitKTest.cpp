// Split-K on sm_90a: which kernels may be split (CudaKernelInfo::split_k_capable), what the
// split-K compilation (CudaTarget::split_k) emits, that NVRTC accepts it, and the runtime's rule
// for how many CTAs share a program (split_k_factor). The GPU tests run it against the
// interpreter (tests/gpu/wgmma_gpu_test.cpp).
#include <gtest/gtest.h>

#include "CodegenTestUtil.h"
#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"
#include "cuda/RuntimeInternal.h"
#include "text/Text.h"

namespace tessera {
namespace {

using codegentest::emit;
using codegentest::lib_matmul;
using codegentest::planning_target;

CudaTarget split_target() {
  CudaTarget t = planning_target("sm_90a");
  t.split_k = true;
  return t;
}

TEST(CudaSplitK, LibraryMatmulIsCapableAndItsSplitCompilationCombinesSlots) {
  auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}});
  CudaEmission plain = emit(*k);
  EXPECT_TRUE(plain.info.split_k_capable);
  EXPECT_FALSE(plain.info.split_k);
  EXPECT_EQ(plain.source.find("tsr_ws"), std::string::npos);

  CudaEmission em = emit_cuda_with_info(*k, split_target());
  EXPECT_TRUE(em.info.split_k);
  EXPECT_FALSE(em.info.persistent);  // one program per CTA: blockIdx.x, .y and the split in .z
  EXPECT_EQ(em.stats["split-k"], 1);
  EXPECT_EQ(em.stats["tma-store-epilogues"], 0);
  EXPECT_EQ(em.stats["mma-direct-epilogues"], 1);
  // The workspace pointer is the last parameter; a slot is the two consumer warpgroups' 64 x 256
  // f32 accumulators.
  ASSERT_FALSE(em.info.params.empty());
  EXPECT_EQ(em.info.params.back().kind, CudaParam::Kind::SplitWorkspace);
  EXPECT_EQ(em.info.split_slot_bytes, 128 * 256 * 4);
  EXPECT_EQ(em.info.split_workspace_bytes(3, 4), 256 + 3 * 4 * 128 * 256 * 4);
  // Each CTA runs its slice of the K loop, leaves its partial sums, and the last to arrive sums
  // the slots in split order; warps whose rows lie past M (the store's view) skip their slot.
  EXPECT_NE(em.source.find("first_ = int64_t(blockIdx.z) * chunk_"), std::string::npos) << em.source;
  EXPECT_NE(em.source.find("tsr::frags_to_slot("), std::string::npos);
  EXPECT_NE(em.source.find("atomicAdd(cnt_ + prog_, 1u) == gridDim.z - 1u"), std::string::npos);
  EXPECT_NE(em.source.find("if (!tsr_last_) return;"), std::string::npos);
  EXPECT_NE(em.source.find("tsr::frags_sum_slots<2>("), std::string::npos);
  EXPECT_NE(em.source.find("cnt_[prog_] = 0u"), std::string::npos);
  // Launched as one cluster per program (the runtime's choice, up to kMaxSplitKCluster CTAs),
  // the CTAs after the first leave their sums in their idle rings (128 KiB of the 4 stages'
  // 192) and the first adds them over distributed shared memory between two cluster barriers;
  // the workspace's path is the other branch of the same kernel.
  EXPECT_TRUE(em.info.split_cluster);
  const size_t cl = em.source.find("if (tsr::cluster_ctas() == gridDim.z) {");
  ASSERT_NE(cl, std::string::npos) << em.source;
  const size_t to = em.source.find("if (blockIdx.z != 0 && mine_) tsr::frags_to_smem(", cl),
               add = em.source.find("if (blockIdx.z == 0 && mine_) tsr::frags_add_cluster<2>(", cl),
               bar1 = em.source.find("tsr::cluster_sync();", cl);
  ASSERT_NE(to, std::string::npos);
  ASSERT_NE(add, std::string::npos);
  EXPECT_LT(to, bar1);
  EXPECT_LT(bar1, add);
  EXPECT_NE(em.source.find("tsr::cluster_sync();", add), std::string::npos);
  EXPECT_LT(add, em.source.find("tsr::frags_to_slot("));
  // The tensor maps are fetched while the barriers are set up.
  EXPECT_NE(em.source.find("tsr::prefetch_tensormap(&tsr_tma0);"), std::string::npos);
  EXPECT_NE(em.source.find("* 128 + m0_ < int64_t("), std::string::npos) << em.source;
  // The epilogue comes after the fixup.
  EXPECT_LT(em.source.find("tsr::frags_sum_slots<2>("), em.source.find("tsr::store_frags("));
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  NvrtcResult r = nvrtc_compile(em.source, split_target(), "split.cu", em.line_op);
  EXPECT_FALSE(r.cubin.empty());
  EXPECT_EQ(r.log.find("serialized"), std::string::npos) << r.log;
}

TEST(CudaSplitK, NvrtcCompilesTheSplitCompilationOfEveryPlannedShape) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  for (ScalarKind dt : {ScalarKind::BF16, ScalarKind::F16})
    for (auto [m, n] : {std::pair<int64_t, int64_t>{64, 64}, {64, 256}, {128, 128}, {64, 128}, {64, 192}, {128, 192},
                        {192, 64}, {192, 128}, {192, 192}}) {
      // (64 x 192: the slots are added 8 column groups at a time, not 16, which do not divide 24.)
      if (dt == ScalarKind::F16 && (m == 192 || n == 192)) continue;
      SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n));
      CudaEmission em = emit_cuda_with_info(*lib_matmul(dt, {{"BLOCK_M", m}, {"BLOCK_N", n}, {"BLOCK_K", 64}}), split_target());
      ASSERT_TRUE(em.info.split_k);
      EXPECT_FALSE(nvrtc_compile(em.source, split_target(), "split.cu", em.line_op).cubin.empty());
    }
}

// A split compilation runs where the grid leaves SMs idle: its ring is as deep as shared memory
// allows (up to 8 stages), not the 4 the library matmul asks for.
TEST(CudaSplitK, SplitCompilationUsesADeeperRing) {
  auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 64}, {"BLOCK_N", 128}, {"BLOCK_K", 64}});
  EXPECT_EQ(emit(*k).stats["pipeline-stages"], 4);
  EXPECT_EQ(emit_cuda_with_info(*k, split_target()).stats["pipeline-stages"], 8);
  auto big = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}});
  EXPECT_EQ(emit_cuda_with_info(*big, split_target()).stats["pipeline-stages"], 4);  // 48 KiB stages
}

// Kernels that could not be persistent are not split either (other work at the top level may
// need every program's full sum), and without TMA there is no wgmma loop to split.
TEST(CudaSplitK, OnlyWgmmaKernelsThatCouldBePersistentAreSplit) {
  auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"BLOCK_K", 32}});  // mma.sync
  EXPECT_FALSE(emit(*k).info.split_k_capable);
  CudaEmission em = emit_cuda_with_info(*k, split_target());
  EXPECT_FALSE(em.info.split_k);
  EXPECT_EQ(em.source.find("tsr_ws"), std::string::npos);
  CudaTarget no_tma = split_target();
  no_tma.tma = false;
  auto w = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}});
  EXPECT_FALSE(emit_cuda_with_info(*w, no_tma).info.split_k);
  EXPECT_FALSE(emit(*k, "sm_80").info.split_k_capable);
}

TEST(CudaSplitK, FactorFillsTheDeviceOnlyWhenProgramsLeaveMostOfItIdle) {
  using cuda::split_k_factor;
  EXPECT_EQ(split_k_factor(64, 264), 4);    // 16x4096x4096 at 64x64 tiles, 2 CTAs per SM
  EXPECT_EQ(split_k_factor(16, 132), 4);    // 16x4096x4096 at 128x256: 4 ways measured best
  EXPECT_EQ(split_k_factor(44, 264), 4);
  EXPECT_EQ(split_k_factor(33, 132), 4);
  EXPECT_EQ(split_k_factor(36, 132), 3);    // 1x4608x3584 at 64x128: 3 ways measured best
  EXPECT_EQ(split_k_factor(44, 132), 3);
  EXPECT_EQ(split_k_factor(45, 132), 1);    // more than a third of the device: no split
  EXPECT_EQ(split_k_factor(56, 132), 1);    // 128x14336x4096 at 128x256 (measured slower split)
  EXPECT_EQ(split_k_factor(1024, 132), 1);  // large problems: never
  EXPECT_EQ(split_k_factor(1, 132), cuda::kAutoSplitK);
  EXPECT_EQ(split_k_factor(0, 132), 1);
}

// Parts of a K loop add their partial sums: an accumulator that starts at anything but 0 would
// be counted once per part, so such a kernel is neither split nor cut into stream-K parts.
TEST(CudaSplitK, AnAccumulatorThatDoesNotStartAtZeroIsNotSplit) {
  auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 64}, {"BLOCK_N", 128}, {"BLOCK_K", 64}});
  Op* start = nullptr;
  walk(*k, [&](Op& op) {
    if (op.kind == OpKind::For && op.operands.size() > 3 && op.operand(3)->def && op.operand(3)->def->kind == OpKind::Splat)
      start = op.operand(3)->def->operand(0)->def;
  });
  ASSERT_TRUE(start && start->kind == OpKind::Const);
  EXPECT_TRUE(emit(*k).info.split_k_capable);
  start->set_attr("value", 1.0);
  CudaEmission em = emit(*k);
  EXPECT_TRUE(em.info.persistent);
  EXPECT_FALSE(em.info.split_k_capable);
  EXPECT_FALSE(emit_cuda_with_info(*k, split_target()).info.split_k);
  CudaTarget sk = planning_target("sm_90a");
  sk.stream_k = true;
  CudaEmission sem = emit_cuda_with_info(*k, sk);
  EXPECT_FALSE(sem.info.stream_k);
  EXPECT_NE(codegentest::notes(sem).find("stream-K not taken"), std::string::npos);
}

// A split runs in clusters (sums over distributed shared memory) only where that measured
// faster: at most kMaxSplitKCluster ways and CTAs filling at most 55% of the SMs.
TEST(CudaSplitK, ClustersOnlyForSplitsThatLeaveMostSmsFree) {
  EXPECT_TRUE(cuda::split_in_clusters(12 * 4, 4, 132));
  EXPECT_TRUE(cuda::split_in_clusters(18 * 4, 4, 132));
  EXPECT_FALSE(cuda::split_in_clusters(24 * 4, 4, 132));
  EXPECT_FALSE(cuda::split_in_clusters(56 * 2, 2, 132));
  EXPECT_FALSE(cuda::split_in_clusters(5, 1, 132));
  EXPECT_TRUE(cuda::split_in_clusters(8, 8, 132));
  EXPECT_FALSE(cuda::split_in_clusters(9, 9, 132));  // past the portable cluster size
}

// The K a slice gets bounds the split (kMinSplitKSlice, measured in session 26): 36 programs of
// 64 x 128 at K = 3584 split 3 ways as before, at K = 1024 and 512 not at all; -1 (the loop's
// length not known) leaves the rule as it was.
TEST(CudaSplitK, FactorGivesEachSliceAtLeastTheMinimumK) {
  using cuda::split_k_factor;
  EXPECT_EQ(split_k_factor(36, 132, 3584), 3);
  EXPECT_EQ(split_k_factor(36, 132, 2048), 3);
  EXPECT_EQ(split_k_factor(36, 132, 1024), 1);
  EXPECT_EQ(split_k_factor(36, 132, 512), 1);
  EXPECT_EQ(split_k_factor(12, 132, 7168), 4);
  EXPECT_EQ(split_k_factor(12, 132, 1600), 2);
  EXPECT_EQ(split_k_factor(12, 132, 0), 1);
  EXPECT_EQ(split_k_factor(36, 132, -1), 3);
  EXPECT_EQ(split_k_factor(45, 132, 100000), 1);  // a third of the device still bounds it
}

// The host reads the split loop's length from the sizes: the library matmul's loop runs
// cdiv(K, BLOCK_K) steps of BLOCK_K; a loop bound that is a scalar parameter needs that argument; one read
// from the program id is not known before the programs run.
TEST(CudaSplitK, SplitLoopLengthIsEvaluatedOnTheHost) {
  auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 64}, {"BLOCK_N", 128}, {"BLOCK_K", 64}});
  EXPECT_EQ(cuda_split_loop_k(*k, {{"M", 1}, {"N", 4608}, {"K", 3584}}), 3584);
  EXPECT_EQ(cuda_split_loop_k(*k, {{"M", 1}, {"N", 4608}, {"K", 100}}), 128);
  EXPECT_EQ(cuda_split_loop_k(*k, {{"M", 1}, {"N", 4608}}), -1);  // K has no size

  // A loop without a dot first (not the split loop), then the dot loop, up to `bound` in steps of 2.
  auto loops = [](const std::string& bound) {
    std::string t = R"(kernel @loops(%a: view<f32, [M, K]>, %b: view<f32, [K, N]>, %c: view<f32, [M, N]>, %n: i32) {
  grid {
    %one = const {value = 1} : i32
    yield %one
  }
  %p = program_id {axis = 0} : i32
  %zero = const {value = 0} : i32
  %one = const {value = 1} : i32
  %f0 = const {value = 0.0} : f32
  %acc0 = splat %f0 : tile<f32, [16, 16]>
  %x = for %zero, %p, %one, %acc0 : tile<f32, [16, 16]> {
    ^(%i: i32, %s: tile<f32, [16, 16]>):
    %t = add %s, %s : tile<f32, [16, 16]>
    yield %t
  }
  %two = const {value = 2} : i32
  %acc = for %zero, BOUND, %two, %x : tile<f32, [16, 16]> {
    ^(%kk: i32, %accc: tile<f32, [16, 16]>):
    %ta = load_tile %a, %zero, %kk : tile<f32, [16, 16]>
    %tb = load_tile %b, %kk, %zero : tile<f32, [16, 16]>
    %accn = dot %ta, %tb, %accc : tile<f32, [16, 16]>
    yield %accn
  }
  store_tile %c, %acc, %zero, %zero
}
)";
    t.replace(t.find("BOUND"), 5, bound);
    return parse_module(t, "loops.tile");
  };
  const Sizes s{{"M", 16}, {"N", 16}, {"K", 16}};
  std::vector<KernelArg> args(4);
  args[3].scalar = int64_t{7};
  auto by_param = loops("%n");
  EXPECT_EQ(cuda_split_loop_k(*by_param->kernels.at(0), s, args), 4 * 16);  // 4 steps of 16
  EXPECT_EQ(cuda_split_loop_k(*by_param->kernels.at(0), s), -1);           // %n not given
  auto by_program = loops("%p");
  EXPECT_EQ(cuda_split_loop_k(*by_program->kernels.at(0), s, args), -1);
}

}  // namespace
}  // namespace tessera
