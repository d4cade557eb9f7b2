// The Struct knob struct_cp_async = 1 (async_copy as cp.async, async_wait as a wait and a
// barrier; cuda/EmitStruct.cpp) on the GPU against the interpreter, at sizes that leave partial
// tiles and partial 16-byte chunks, with rows whose global addresses are 16-byte aligned and rows
// that are not (the plain-store fallback per chunk): struct.tile's double_buffered_rows (f32,
// [1, BLOCK] slots) and tests/cuda_codegen/data/struct_cp_async.tile (bf16 [BM, 64] slots whose
// row sums make any chunk left unwritten show at ragged N). Inputs are uniform in (-1, 1).
#include "GpuTestUtil.h"
#include "cuda/CudaEmitter.h"

namespace tessera::gputest {
namespace {

std::unique_ptr<Kernel> cp_async_kernel(const std::string& rel, const std::string& name, const ConstexprConfig& cfg) {
  return knob_kernel(rel, name, cfg, "struct_cp_async");
}

TEST(StructCpAsyncGpu, MatchesInterpreterAtRaggedSizes) {
  REQUIRE_GPU();
  std::vector<std::unique_ptr<Kernel>> ks;
  for (int64_t block : {16, 32, 64})
    ks.push_back(cp_async_kernel("tests/text/data/struct.tile", "double_buffered_rows", {{"BLOCK", block}}));
  for (int64_t bm : {8, 16})
    ks.push_back(cp_async_kernel("tests/cuda_codegen/data/struct_cp_async.tile", "double_buffered_tiles", {{"BM", bm}}));
  // N = 150 and 1001: partial chunks, every other row (150 f32) or most rows (1001 bf16)
  // unaligned; 996: bf16 rows of 1992 bytes, every other one aligned, partial chunks; 1024:
  // whole tiles and chunks, every row aligned; M ragged against every BM.
  const std::vector<Sizes> sizes = {{{"M", 37}, {"N", 150}},
                                    {{"M", 19}, {"N", 1001}},
                                    {{"M", 45}, {"N", 996}},
                                    {{"M", 64}, {"N", 1024}},
                                    {{"M", 3}, {"N", 5}}};
  uint64_t seed = 41;
  for (const auto& k : ks) {
    SCOPED_TRACE(k->name);
    for (const Sizes& s : sizes) {
      SCOPED_TRACE(sizes_str(s));
      EXPECT_GT(expect_gpu_matches_interp(*k, s, seed++), 0);
    }
  }
}

// The generated source has the cp.async copies this test means to run.
TEST(StructCpAsyncGpu, KernelsUseCpAsync) {
  auto k = cp_async_kernel("tests/cuda_codegen/data/struct_cp_async.tile", "double_buffered_tiles", {});
  EXPECT_EQ(emit_cuda_with_info(*k, CudaTarget::parse("sm_80")).stats.at("struct-cp-async-copies"), 2);
}

}  // namespace
}  // namespace tessera::gputest
