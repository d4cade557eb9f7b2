// The Struct knob struct_tma = 1 (async_copy as one TMA box on sm_90a, async_wait as an mbarrier
// wait and a barrier; src/cuda/EmitStruct.cpp) on the GPU against the interpreter, at sizes that
// leave partial tiles in both dims (zero-filled by the TMA), tiles wholly outside the view
// (zeros written by the threads), long loops (hundreds of phases of the barrier) and copies still
// in flight when the program ends: tests/cuda_codegen/data/struct_tma.tile (tma_pair: bf16 and
// f32 tiles, two copies a phase; tma_shift: i32, a 3-slot ring two tiles ahead) and struct.tile's
// double_buffered_rows ([1, BLOCK] f32 slots; BLOCK = 16 keeps the plain copy). Rows whose bytes
// are not a multiple of 16 cannot be described by a tensor map: the runtime then launches the
// compilation without TMA, which must give the same results. Inputs are uniform in (-1, 1)
// (i32: random integers), outputs start random.
#include "GpuTestUtil.h"
#include "cuda/CudaEmitter.h"

namespace tessera::gputest {
namespace {

// Whether every tensor map of `em` can describe its view at `s` (rows of a multiple of 16
// bytes, no empty dim): the launch then runs the TMA compilation.
bool maps_describable(const Kernel& k, const CudaEmission& em, const Sizes& s) {
  for (const CudaParam& p : em.info.params) {
    if (p.kind != CudaParam::Kind::TensorMap) continue;
    const Shape& sh = k.params.at(static_cast<size_t>(p.param_index))->type.shape;
    auto dim = [&](size_t d) { return sh[d].is_static() ? sh[d].value : s.at(sh[d].symbol); };
    if (dim(0) < 1 || dim(1) < 1 || dim(1) * scalar_bytes(p.elem) % 16 != 0) return false;
  }
  return true;
}

TEST(StructTmaGpu, MatchesInterpreterAtRaggedSizes) {
  REQUIRE_GPU();
  const char* tma_file = "tests/cuda_codegen/data/struct_tma.tile";
  std::vector<std::unique_ptr<Kernel>> ks;
  for (int64_t bm : {8, 16, 64})
    for (int64_t bn : {32, 64}) ks.push_back(knob_kernel(tma_file, "tma_pair", {{"BM", bm}, {"BN", bn}}, "struct_tma"));
  for (int64_t bm : {8, 32})
    for (int64_t bn : {16, 32}) ks.push_back(knob_kernel(tma_file, "tma_shift", {{"BM", bm}, {"BN", bn}}, "struct_tma"));
  for (int64_t block : {16, 32, 64})
    ks.push_back(knob_kernel("tests/text/data/struct.tile", "double_buffered_rows", {{"BLOCK", block}}, "struct_tma"));
  // N = 1000: partial tiles in N, rows of 2000 / 4000 bytes (TMA); M ragged against every BM.
  // N = 8: one tile narrower than the box. N = 1024, M = 64: whole tiles. N = 8000: 125 to 500
  // loop iterations, each a phase of the barrier. N = 150: bf16 rows of 300 bytes, f32 / i32
  // rows of 600: not describable, the compilation without TMA runs. N = 996: f32 / i32 rows
  // describable, bf16 rows (1992 bytes) not.
  const std::vector<Sizes> sizes = {{{"M", 37}, {"N", 1000}}, {{"M", 3}, {"N", 8}},    {{"M", 64}, {"N", 1024}},
                                    {{"M", 5}, {"N", 8000}},  {{"M", 19}, {"N", 150}}, {{"M", 45}, {"N", 996}}};
  uint64_t seed = 71;
  int tma_launches = 0;
  bool sm90a = false;
  for (const auto& k : ks) {
    SCOPED_TRACE(k->name + " " + std::to_string(k->find_constexpr(k->name == "double_buffered_rows" ? "BLOCK" : "BM")->value));
    auto ck = compile_cuda(*k, test_options());
    const CudaEmission em = emit_cuda_with_info(*k, ck->target);
    const bool tma = em.stats.count("struct-tma-copies") > 0;
    sm90a |= ck->target.sm == 90 && ck->target.arch_specific;
    for (const Sizes& s : sizes) {
      SCOPED_TRACE(sizes_str(s));
      std::vector<Tensor> want = make_random_tensors(*k, s, seed), got = make_random_tensors(*k, s, seed + 1000);
      // The same inputs; the outputs start different, so an element the GPU leaves unwritten shows.
      for (size_t i = 0; i + 1 < want.size(); ++i) got[i] = want[i];
      ++seed;
      auto wa = args_for(*k, want), ga = args_for(*k, got);
      run_interp(*k, wa);
      const int64_t before = ck->launches_without_tma;
      ck->run_host(ga);
      EXPECT_GT(testutil::expect_tensors_match(want, got, k->name + " [" + sizes_str(s) + "]", "gpu"), 0);
      const bool describable = maps_describable(*k, em, s);
      EXPECT_EQ(ck->launches_without_tma - before, tma && !describable ? 1 : 0);
      tma_launches += tma && describable;
    }
  }
  // On an sm_90a device most of the launches above ran TMA copies.
  if (sm90a) EXPECT_GE(tma_launches, 40);
}

}  // namespace
}  // namespace tessera::gputest
