// The segmented top-k's kernels (topk's stages: segments, candidate levels, the merge) on the
// GPU against the reference, exact, at ragged sizes, on random rows and on rows of a few values
// (ties, NaN, infinities and zeros of both signs across every segment), printed four ways: by
// the planning emitter and the layout emitter (the default's choice since session 48) (its block scans from registers,
// session 33), each also with TESSERA_CUDA_ONE_BARRIER_SCANS=1 (every scan's chunks in one
// tsr::block_exclusive_sums). Then the block scans' own cases that topk does not reach: padding
// slots (a tile that does not fill the threads' chunks), threads holding copies, f32 and i64,
// the same bits with the switch as without. tests/kernels/TopkStagesTest.cpp runs the stages
// on the interpreter and the cpu backend.
#include <cctype>
#include <cstdlib>
#include <optional>

#include "../common/ScopedEnv.h"
#include "../common/TopkStages.h"
#include "GpuTestUtil.h"
#include "check/Compare.h"
#include "kernels/Kernels.h"
#include "kernels/Library.h"

namespace tessera::gputest {
namespace {

struct Way {
  const char* name;
  bool layouts, one_barrier;
};
constexpr Way kWays[] = {{"planning", false, false},
                         {"planning, one-barrier scans", false, true},
                         {"layouts", true, false},
                         {"layouts, one-barrier scans", true, true}};

// Compiles `k` the way `w` says, checking that it was printed so (the layout emitter, the
// one-barrier scans) rather than passing by a fallback. `odd_tiles`: the kernel has a tile
// whose extent is no multiple of a blocked layout's cover (K = 1000), which assign-layouts
// replicates; past 256 elements a thread (kMaxSlots, session 34) the planning emitter makes it,
// with a note saying so, and only that fallback is accepted. Padded blocked layouts would let
// the layout emitter print these too.
std::shared_ptr<CudaKernel> compile_as(const Kernel& k, const Way& w, bool odd_tiles = false) {
  CudaOptions o = test_options();
  o.target.emitter = w.layouts ? CudaTarget::Emitter::Layouts : CudaTarget::Emitter::Planning;
  auto c = compile_cuda(k, o);
  const std::string& src = c->source();
  EXPECT_EQ(src.find("tsr::block_exclusive_sums<") != std::string::npos, w.one_barrier) << k.name;
  if (w.layouts) {
    const CudaEmission em = emit_cuda_with_info(k, cuda_target_for(o));
    bool printed = false, too_many_slots = false;
    for (const std::string& n : em.notes) {
      printed |= n.find("printed from the GPU lowering") != std::string::npos;
      too_many_slots |= n.find("elements a thread (more than") != std::string::npos;
    }
    EXPECT_TRUE(printed || (odd_tiles && too_many_slots)) << k.name << ": " << em.notes.back();
  }
  return c;
}

struct Case {
  ScalarKind dt;
  int64_t M, N, K;
  bool few_values;
};

// topk's stages at c's sizes (the rule's, under the environment as it is), compiled the way `w`
// says, against the reference, exact: `stages` kernels (0: at least two).
void expect_stages_match(const Way& w, const Case& c, uint64_t seed, size_t stages = 0) {
  SCOPED_TRACE(std::string(w.name) + " " + std::string(scalar_name(c.dt)) + " M=" + std::to_string(c.M) +
               " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K));
  const LibraryKernel* lk = find_library_kernel("topk");
  std::optional<testutil::ScopedEnv> one_barrier;
  if (w.one_barrier) one_barrier.emplace("TESSERA_CUDA_ONE_BARRIER_SCANS", "1");
  CudaOptions o = test_options();
  o.target.emitter = w.layouts ? CudaTarget::Emitter::Layouts : CudaTarget::Emitter::Planning;
  const Sizes sizes{{"M", c.M}, {"N", c.N}, {"K", c.K}};
  LibraryStages st = lk->stages(c.dt, "cuda:" + cuda_target_for(o).str(), sizes, {});
  if (stages) ASSERT_EQ(st.stages.size(), stages);
  else ASSERT_GE(st.stages.size(), 2u) << "the rule picked the whole-row kernel";
  auto op = bind_constexprs(*lk->build(c.dt), {{"K", c.K}});
  std::vector<Tensor> got = make_random_tensors(*op, sizes, seed);
  if (c.few_values) testutil::fill_few_values(got[0], seed + 1);
  std::vector<Tensor> want = got;
  std::vector<KernelArg> ga = make_args(*op, got, sizes), wa = make_args(*op, want, sizes);
  testutil::run_topk_stages(st, c.dt, ga, [&](const Kernel& bound, std::vector<KernelArg>& a) {
    compile_as(bound, w, c.K % 64 != 0)->run_host(a);
  });
  lk->reference(wa, sizes);
  Comparison cmp = compare_outputs(*op, got, want);
  EXPECT_TRUE(cmp.ok()) << cmp.mismatches << "/" << cmp.elements << " first: " << cmp.first_mismatch;
}

// One test per way, so that ctest runs them side by side: the four in one test took 150 s on
// the H200 (NVRTC compiles every stage kernel each way) and passed ctest's limit under -j8.
class TopkStagesEveryWay : public ::testing::TestWithParam<Way> {};

TEST_P(TopkStagesEveryWay, MatchTheReference) {
  REQUIRE_GPU();
  // The plain segments (the bucket threshold, the default, has its own test below). (Two cases:
  // each compiles its two or three kernels, about 20 s of NVRTC a case.)
  const testutil::ScopedEnv plain("TESSERA_TOPK_BUCKET_THRESHOLD", "0");
  const Case cases[] = {{ScalarKind::F32, 3, 100001, 1000, false}, {ScalarKind::BF16, 2, 70001, 64, true}};
  uint64_t seed = 7;
  for (const Case& c : cases) expect_stages_match(GetParam(), c, seed++);
}

INSTANTIATE_TEST_SUITE_P(TopkStagesGpu, TopkStagesEveryWay, ::testing::ValuesIn(kWays),
                         [](const ::testing::TestParamInfo<Way>& i) {
                           std::string n;
                           for (char ch : std::string(i.param.name))
                             if (std::isalnum(static_cast<unsigned char>(ch))) n += ch;
                           return n;
                         });

// The bucket threshold's stages (the default; each bucket's best, the
// row's threshold, segments that keep only what is at or above it, the merge) on both
// emitters, random f32 rows and bf16 rows of a few values (ties at the threshold: segments
// select from scratch), exact.
TEST(TopkStagesGpu, BucketThresholdMatchesTheReference) {
  REQUIRE_GPU();
  const testutil::ScopedEnv bucket("TESSERA_TOPK_BUCKET_THRESHOLD", "1");
  const Case cases[] = {{ScalarKind::F32, 3, 140001, 64, false}, {ScalarKind::BF16, 2, 70001, 64, true}};
  uint64_t seed = 31;
  for (const Way& w : {kWays[0], kWays[2]})
    for (const Case& c : cases) expect_stages_match(w, c, seed++, 4);
}

// A sum scan of one line per program on 16 warps: f32 [1000] (the planning emitter's chunks
// with padding slots past 1000; the layout emitter replicates it and leaves it to the planning
// one, compile_as) and i64 [256] (in the layout emitter most threads hold copies). Integers exactly as the interpreter's; floats within
// the tolerance of a sum (the interpreter adds in order, the GPU by blocks); with the switch
// bit for bit as without it.
TEST(TopkStagesGpu, BlockScansOfPaddedAndCopiedTiles) {
  REQUIRE_GPU();
  for (const auto& [type, n] : {std::pair<const char*, int>{"f32", 1000}, {"i64", 256}}) {
      const std::string t = type, N = std::to_string(n);
      auto m = parse_module("kernel @scan(%x: view<" + t + ", [R, " + N + "]>, %y: view<" + t + ", [R, " + N +
                                "]>) {\n  constexpr num_warps = 16 in [16]\n  grid {\n    %r = dim %x {axis = 0} : i32\n"
                                "    yield %r\n  }\n  %p = program_id {axis = 0} : i32\n"
                                "  %z = const {value = 0} : i32\n  %t = load_tile %x, %p, %z : tile<" + t + ", [1, " +
                                N + "]>\n  %s = scan %t {axis = 1, kind = \"sum\"} : tile<" + t + ", [1, " + N +
                                "]>\n  store_tile %y, %s, %p, %z\n}\n",
                            "scan.tile");
      auto k = bind_constexprs(*m->kernels.at(0), {});
      const Sizes sizes{{"R", 5}};
      for (bool layouts : {false, true}) {
        SCOPED_TRACE(t + " [" + N + "] " + (layouts ? "layouts" : "planning"));
        std::vector<Tensor> outs[2];
        for (bool one : {false, true}) {
          std::optional<testutil::ScopedEnv> env;
          if (one) env.emplace("TESSERA_CUDA_ONE_BARRIER_SCANS", "1");
          std::vector<Tensor> want = make_random_tensors(*k, sizes, 19), got = want;
          auto wa = args_for(*k, want), ga = args_for(*k, got);
          run_interp(*k, wa);
          compile_as(*k, Way{"scan", layouts, one}, n % 64 != 0)->run_host(ga);
          EXPECT_GT(testutil::expect_tensors_match(want, got, "scan", "gpu", {}, tile_error_bounds(*k, sizes, want)), 0);
          outs[one] = got;
        }
        EXPECT_TRUE(outs[0][1].data == outs[1][1].data) << "the one-barrier scan's bits differ";
      }
    }
}

}  // namespace
}  // namespace tessera::gputest
