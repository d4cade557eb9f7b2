// The portable tensor-core matmul path (mma.sync fed by a cp.async ring, src/cuda/Pipelining.cpp)
// on the GPU against the interpreter, at the tiles it takes: 64 x 64 warp blocks with
// double-buffered fragments (128x256, one CTA per SM), 64 x 32 blocks under the two-CTA cap
// (128x128x32), and stages of an odd number of k16 steps (BLOCK_K = 16). On Hopper the kernels
// are compiled for plain sm_90, so that no tile takes the sm_90a TMA + wgmma path.
#include "GpuTestUtil.h"
#include "cuda/Driver.h"

namespace tessera::gputest {
namespace {

// The device's own architecture without the arch-specific variant (sm_90, not sm_90a).
CudaOptions mma_sync_options() {
  CudaOptions o = planning_options();
  o.target_from_device = false;
  o.target = CudaTarget{cuda::device().sm, false};
  o.target.emitter = CudaTarget::Emitter::Planning;
  return o;
}

std::unique_ptr<Kernel> matmul(ScalarKind dt, int64_t bm, int64_t bn, int64_t bk) {
  return bind_constexprs(*find_library_kernel("matmul")->build(dt), {{"BLOCK_M", bm}, {"BLOCK_N", bn}, {"BLOCK_K", bk}});
}

struct Tile {
  int64_t m, n, k;
};

const Tile kTiles[] = {{128, 256, 64}, {128, 256, 32}, {128, 128, 32}, {64, 256, 64}, {128, 256, 16}, {64, 64, 32}};

// `k` compiled for the mma.sync path (it must take the pipelined ring) against the interpreter
// at each of `sizes`, one seed each from `seed` on.
void expect_ring_matches_interp(const Kernel& k, const std::vector<Sizes>& sizes, uint64_t& seed) {
  auto ck = compile_cuda(k, mma_sync_options());
  ASSERT_NE(ck->source().find("tsr::ldsm_frags<"), std::string::npos) << "not the pipelined mma.sync path";
  for (const Sizes& s : sizes) {
    SCOPED_TRACE(sizes_str(s));
    EXPECT_GT(expect_gpu_matches_interp(k, s, seed++, {}, mma_sync_options()), 0);
  }
}

TEST(MmaSyncGpu, MatmulTilesMatchTheInterpreter) {
  REQUIRE_GPU();
  const std::vector<Sizes> sizes = {
      {{"M", 256}, {"N", 512}, {"K", 256}},   // whole tiles: every copy takes the bounds-free path
      {{"M", 200}, {"N", 264}, {"K", 136}},   // partial tiles in every dim
      {{"M", 131}, {"N", 300}, {"K", 1000}},  // the ring wraps several times, K ragged
      {{"M", 130}, {"N", 99}, {"K", 77}},     // rows not 16-byte aligned: element-wise copies
      {{"M", 1}, {"N", 8}, {"K", 8}}};
  uint64_t seed = 40;
  for (ScalarKind dt : {ScalarKind::BF16, ScalarKind::F16})
    for (const Tile& t : kTiles) {
      if (dt == ScalarKind::F16 && t.n != 256) continue;  // f16 differs in the instruction only
      auto k = matmul(dt, t.m, t.n, t.k);
      std::string what = std::string(scalar_name(dt)) + " " + std::to_string(t.m) + "x" + std::to_string(t.n) + "x" +
                         std::to_string(t.k);
      SCOPED_TRACE(what);
      expect_ring_matches_interp(*k, sizes, seed);
    }
}

// K loops of 32 to 128 iterations: many trips around the ring with the one-barrier schedule.
TEST(MmaSyncGpu, MatmulLongKLoopsMatchTheInterpreter) {
  REQUIRE_GPU();
  for (const Tile& t : {Tile{128, 256, 64}, Tile{128, 256, 32}, Tile{128, 128, 32}}) {
    SCOPED_TRACE(std::to_string(t.m) + "x" + std::to_string(t.n) + "x" + std::to_string(t.k));
    EXPECT_GT(expect_gpu_matches_interp(*matmul(ScalarKind::BF16, t.m, t.n, t.k), {{"M", 136}, {"N", 264}, {"K", 4000}}, 7,
                                        {}, mma_sync_options()),
              0);
  }
}

// The codegen knobs cuda_bench times (src/cuda/EmitterInternal.h, PipePlan; EmitDot.cpp): each
// value alone and the combinations the bench runs, at the tiles it runs them, on ragged shapes
// (partial tiles, rows not 16-byte aligned, a K loop that wraps the ring).
TEST(MmaSyncGpu, KnobsMatchTheInterpreter) {
  REQUIRE_GPU();
  struct Case {
    Tile t;
    std::vector<std::pair<const char*, int64_t>> knobs;
  };
  const std::vector<Case> cases = {
      {{128, 256, 64}, {{"mma_l2_prefetch", 64}}},
      {{128, 256, 64}, {{"mma_l2_prefetch", 128}}},
      {{128, 256, 64}, {{"mma_l2_prefetch", 256}}},
      {{128, 256, 64}, {{"mma_spread_copies", 1}}},
      {{128, 256, 64}, {{"mma_smem_epilogue", 1}}},
      {{128, 256, 64}, {{"mma_spread_copies", 1}, {"mma_smem_epilogue", 1}, {"mma_l2_prefetch", 128}}},
      {{128, 256, 64}, {{"mma_early_last_step", 1}}},
      {{128, 256, 32}, {{"mma_early_last_step", 1}}},
      {{128, 256, 64}, {{"mma_early_last_step", 1}, {"mma_spread_copies", 1}, {"mma_smem_epilogue", 1}}},
      {{128, 256, 64}, {{"num_warps", 16}}},
      {{128, 256, 64}, {{"num_warps", 16}, {"mma_spread_copies", 1}, {"mma_smem_epilogue", 1}}},
      {{128, 256, 32}, {{"num_warps", 16}, {"mma_smem_epilogue", 1}, {"mma_l2_prefetch", 128}}},
      {{128, 128, 64}, {{"min_blocks", 2}}},
      {{128, 128, 64}, {{"min_blocks", 2}, {"mma_smem_epilogue", 1}, {"mma_l2_prefetch", 128}}},
      {{128, 128, 64}, {{"mma_spread_copies", 1}, {"mma_smem_epilogue", 1}}},
      {{128, 128, 32}, {{"mma_smem_epilogue", 1}, {"mma_l2_prefetch", 128}}},
      {{64, 256, 64}, {{"mma_spread_copies", 1}, {"mma_smem_epilogue", 1}}},
      {{64, 64, 32}, {{"mma_smem_epilogue", 1}}},
  };
  const std::vector<Sizes> sizes = {
      {{"M", 256}, {"N", 512}, {"K", 256}},   // whole tiles
      {{"M", 200}, {"N", 264}, {"K", 136}},   // partial tiles in every dim
      {{"M", 131}, {"N", 300}, {"K", 1000}},  // the ring wraps, K ragged
      {{"M", 130}, {"N", 99}, {"K", 77}}};    // rows not 16-byte aligned: element-wise copies and stores
  uint64_t seed = 90;
  for (const Case& c : cases) {
    auto k = matmul(ScalarKind::BF16, c.t.m, c.t.n, c.t.k);
    std::string what = std::to_string(c.t.m) + "x" + std::to_string(c.t.n) + "x" + std::to_string(c.t.k);
    for (const auto& [name, value] : c.knobs) {
      k->constexprs.push_back({name, value, {value}, k->loc});
      what += std::string(" ") + name + "=" + std::to_string(value);
    }
    SCOPED_TRACE(what);
    expect_ring_matches_interp(*k, sizes, seed);
  }
  // f16, the staged epilogue's other 16-bit type.
  auto k = matmul(ScalarKind::F16, 128, 256, 64);
  k->constexprs.push_back({"mma_smem_epilogue", 1, {1}, k->loc});
  k->constexprs.push_back({"mma_spread_copies", 1, {1}, k->loc});
  EXPECT_GT(expect_gpu_matches_interp(*k, {{"M", 200}, {"N", 264}, {"K", 136}}, seed++, {}, mma_sync_options()), 0);
}

}  // namespace
}  // namespace tessera::gputest
