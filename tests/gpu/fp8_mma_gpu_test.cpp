// fp8 dots on mma.sync m16n8k32 (sm_89+) on the GPU against the interpreter: the library's
// matmul_fp8 and e4m3 / e5m2 matmuls in the text format at BLOCK_K = 64 and 32 (below wgmma's
// 128-byte rows), on the pipelined cp.async ring (B as [N, K]) and with operands staged per
// iteration (B as [K, N]), at whole tiles, ragged sizes, rows not 16-byte aligned (element-wise
// copies into the ring) and K loops that wrap the ring. On Hopper the kernels are compiled for
// plain sm_90 (no wgmma), and once more for the device's own target (sm_90a: these tiles are
// not wgmma shapes, so the same ring). fp8 tensor-core sums may round below f32 precision (as
// fp8 wgmma's do): results are held to the bf16 bound, as the library test holds fp8 wgmma; a
// fragment or index bug is off by whole products and still fails.
#include "GpuTestUtil.h"
#include "cuda/Driver.h"
#include "text/Text.h"
#include "../common/NtMatmulText.h"

namespace tessera::gputest {
namespace {

#define REQUIRE_FP8_MMA()                                                                  \
  do {                                                                                     \
    REQUIRE_GPU();                                                                         \
    if (cuda::device().sm < 89) GTEST_SKIP() << "fp8 mma.sync needs sm_89 or newer";       \
  } while (0)

// The device's own architecture without the arch-specific variant (sm_90, not sm_90a).
CudaOptions mma_sync_options() {
  CudaOptions o = planning_options();
  o.target_from_device = false;
  o.target = CudaTarget{cuda::device().sm, false};
  o.target.emitter = CudaTarget::Emitter::Planning;
  return o;
}

const Tolerance kFloor = tolerance_for(ScalarKind::BF16);

std::unique_ptr<Kernel> fp8_matmul(ScalarKind out, int64_t bm, int64_t bn, int64_t bk) {
  return bind_constexprs(*find_library_kernel("matmul_fp8")->build(out), {{"BLOCK_M", bm}, {"BLOCK_N", bn}, {"BLOCK_K", bk}});
}

std::unique_ptr<Kernel> text_matmul(const std::string& in, int bm, int bn, int bk, bool b_kn) {
  return testutil::nt_matmul(in, "f32", bm, bn, bk, 4, b_kn);
}

const std::vector<Sizes> kSizes = {
    {{"M", 256}, {"N", 256}, {"K", 256}},   // whole tiles: every copy takes the bounds-free path
    {{"M", 200}, {"N", 264}, {"K", 144}},   // partial tiles in M and N, K ragged against BLOCK_K 64
    {{"M", 131}, {"N", 300}, {"K", 1000}},  // the ring wraps many times, K ragged
    {{"M", 130}, {"N", 99}, {"K", 77}},     // rows not 16-byte aligned: element-wise copies
    {{"M", 1}, {"N", 8}, {"K", 8}}};

// `k` compiled with `o` (its source must have `marker`) against the interpreter at each size.
void expect_matches_interp(const Kernel& k, const CudaOptions& o, const std::string& marker, uint64_t& seed) {
  auto ck = compile_cuda(k, o);
  ASSERT_NE(ck->source().find(marker), std::string::npos) << "not the expected fp8 mma.sync path";
  for (const Sizes& s : kSizes) {
    SCOPED_TRACE(sizes_str(s));
    EXPECT_GT(expect_gpu_matches_interp(k, s, seed++, kFloor, o), 0);
  }
}

struct Tile {
  int64_t m, n, k;
};

// The library kernel (e4m3, B [N, K]) on the ring: two-CTA tiles (128x128x64, 64x64x32, one and
// two k32 steps per stage) and one-CTA tiles with double-buffered fragments (128x256x64,
// 128x256x128), each output dtype at one tile.
TEST(Fp8MmaGpu, LibraryMatmulOnTheRingMatchesTheInterpreter) {
  REQUIRE_FP8_MMA();
  uint64_t seed = 300;
  for (const Tile& t : {Tile{128, 128, 64}, Tile{128, 128, 32}, Tile{64, 64, 32}, Tile{128, 256, 64}, Tile{128, 256, 128}}) {
    SCOPED_TRACE(std::to_string(t.m) + "x" + std::to_string(t.n) + "x" + std::to_string(t.k));
    expect_matches_interp(*fp8_matmul(ScalarKind::BF16, t.m, t.n, t.k), mma_sync_options(), "tsr::ldsm_frags_f8<", seed);
  }
  for (ScalarKind out : {ScalarKind::F16, ScalarKind::F32}) {
    SCOPED_TRACE(scalar_name(out));
    expect_matches_interp(*fp8_matmul(out, 128, 128, 64), mma_sync_options(), "tsr::ldsm_frags_f8<", seed);
  }
}

// The device's own target (sm_90a on Hopper, where BLOCK_K = 64 and 32 are not wgmma shapes).
TEST(Fp8MmaGpu, DeviceTargetBlockK64And32MatchTheInterpreter) {
  REQUIRE_FP8_MMA();
  uint64_t seed = 400;
  for (int64_t bk : {64, 32}) {
    SCOPED_TRACE("BLOCK_K = " + std::to_string(bk));
    expect_matches_interp(*fp8_matmul(ScalarKind::BF16, 128, 256, bk), planning_options(), "tsr::mma_tiles_f8<1>(", seed);
  }
}

// e4m3 and e5m2 (f32 output: no rounding of the result hides an error), B as [N, K] on the ring
// and as [K, N] staged per iteration.
TEST(Fp8MmaGpu, E4m3AndE5m2BothBLayoutsMatchTheInterpreter) {
  REQUIRE_FP8_MMA();
  uint64_t seed = 500;
  for (const char* in : {"f8e4m3", "f8e5m2"})
    for (const Tile& t : {Tile{128, 128, 64}, Tile{64, 128, 32}}) {
      std::string what = std::string(in) + " " + std::to_string(t.m) + "x" + std::to_string(t.n) + "x" + std::to_string(t.k);
      const std::string instr = std::string("tsr::mma_tiles_f8<") + (in[3] == '4' ? "1" : "2") + ">(";
      {
        SCOPED_TRACE(what + " B [N, K]");
        expect_matches_interp(*text_matmul(in, t.m, t.n, t.k, false), mma_sync_options(), instr, seed);
      }
      {
        SCOPED_TRACE(what + " B [K, N]");
        expect_matches_interp(*text_matmul(in, t.m, t.n, t.k, true), mma_sync_options(), "tsr::warp_mma_block_f8<", seed);
      }
    }
}

}  // namespace
}  // namespace tessera::gputest
