// Program prefetch (src/cuda/EmitProgramPrefetch.cpp; for the layout emitter the pass
// prefetch-programs) on a GPU against the interpreter, on both emitters (skips without a device). Every CTA runs several programs: the row kernels at 32768 columns (one
// 1024-thread CTA per SM, 270 rows), and kernels of short rows with prefetch asked for and more
// rows than CTAs fit on the device. Rows of odd length make every other row's start unaligned
// (those vectors are read from global memory, not copied), and the branch kernel's loads run
// for some programs only (a program whose branch the CTA's previous program did not take finds
// no copy of its tile).
#include <gtest/gtest.h>

#include "GpuTestUtil.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"
#include "../common/PrefetchGrid2dText.h"

namespace tessera::gputest {
namespace {

// The planning emitter, then the layout emitter (from prefetch-programs' marks).
std::vector<std::pair<std::string, CudaOptions>> emitters() {
  CudaOptions planning = test_options(), layouts = test_options();
  planning.target.emitter = CudaTarget::Emitter::Planning;
  layouts.target.emitter = CudaTarget::Emitter::Layouts;
  return {{"planning", planning}, {"layouts", layouts}};
}

// The stats of `k` compiled for sm_80 by the emitter of `o`; for the layout emitter, that it
// printed the kernel.
std::map<std::string, int64_t> sm80_stats(const Kernel& k, const CudaOptions& o) {
  CudaTarget t = CudaTarget::parse("sm_80");
  t.emitter = o.target.emitter;
  CudaEmission em = emit_cuda_with_info(k, t);
  if (t.emitter == CudaTarget::Emitter::Layouts) {
    bool printed = false;
    for (const std::string& n : em.notes) printed |= n.find("printed from") != std::string::npos;
    EXPECT_TRUE(printed) << "the layout emitter did not print @" << k.name;
  }
  return {em.stats.begin(), em.stats.end()};
}

TEST(ProgramPrefetchGpu, LongRowKernelsMatchInterpreter) {
  REQUIRE_GPU();
  for (const auto& [emitter, o] : emitters())
  for (const char* name : {"softmax", "layernorm", "rmsnorm"})
    for (int64_t n : {32768, 32767, 20000}) {
      SCOPED_TRACE(emitter + " " + name + " N=" + std::to_string(n));
      auto k = bind_constexprs(*find_library_kernel(name)->build(ScalarKind::BF16), {{"BLOCK_N", 32768}});
      ASSERT_EQ(sm80_stats(*k, o).count("prefetched-program-loads"), 1u);
      try {
        expect_gpu_matches_interp(*k, {{"M", 270}, {"N", n}}, 53, {}, o);
      } catch (const TesseraError& e) {
        ADD_FAILURE() << e.what();
      }
    }
}

TEST(ProgramPrefetchGpu, ShortRowsAskedForMatchInterpreter) {
  REQUIRE_GPU();
  // The layout emitter with both buffer counts (two: the copies right after the load).
  for (const auto& [emitter, o] : emitters())
  for (const char* name : {"softmax", "layernorm", "rmsnorm"})
    for (ScalarKind dt : {ScalarKind::BF16, ScalarKind::F32})
      for (int64_t n : {1024, 1001, 3000}) {  // 3000: the kernels' loop branch (nothing prefetched runs)
        const int64_t buffers = emitter == "layouts" && dt == ScalarKind::F32 ? 2 : 1;
        SCOPED_TRACE(emitter + " " + name + " " + std::string(scalar_name(dt)) + " N=" + std::to_string(n) + " buffers " +
                     std::to_string(buffers));
        auto k = bind_constexprs(*find_library_kernel(name)->build(dt), {{"BLOCK_N", 1024}});
        k->set_constexpr("prefetch_programs", 1);
        k->set_constexpr("prefetch_buffers", buffers);
        ASSERT_GE(sm80_stats(*k, o)["prefetched-program-loads"], 1);
        try {
          expect_gpu_matches_interp(*k, {{"M", 5000}, {"N", n}}, 59, {}, o);
        } catch (const TesseraError& e) {
          ADD_FAILURE() << e.what();
        }
      }
}

TEST(ProgramPrefetchGpu, LoadsInBranchesMatchInterpreter) {
  REQUIRE_GPU();
  auto m = parse_module(R"(kernel @k(%x: view<f32, [M, N]>, %z: view<f32, [M, N]>, %y: view<f32, [M, N]>) {
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %p = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %c2 = const {value = 2} : i32
  %c5 = const {value = 5} : i32
  %q = div %p, %c5 : i32
  %r = rem %q, %c2 : i32
  %even = cmp %r, %c0 {pred = "eq"} : i1
  if %even {
    %t = load_tile %x, %p, %c0 : tile<f32, [1, 1024]>
    %s = mul %t, %t : tile<f32, [1, 1024]>
    store_tile %y, %s, %p, %c0
    yield
  } else {
    %u = load_tile %z, %p, %c0 : tile<f32, [1, 1024]>
    %v = exp %u : tile<f32, [1, 1024]>
    store_tile %y, %v, %p, %c0
    yield
  }
}
)",
                        "branches.tile");
  auto k = bind_constexprs(*m->kernels.at(0), {});
  k->set_constexpr("prefetch_programs", 1);
  for (const auto& [emitter, o] : emitters())
  for (int64_t n : {1024, 999}) {
    SCOPED_TRACE(emitter + " N=" + std::to_string(n));
    ASSERT_EQ(sm80_stats(*k, o)["prefetched-program-loads"], 2);
    try {
      expect_gpu_matches_interp(*k, {{"M", 6000}, {"N", n}}, 61, {}, o);
    } catch (const TesseraError& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// A 2-D grid of 64 KiB tiles (prefetched by default): the programs' ids come from one counter,
// x fastest, and the next program's tile may lie in another row of tiles. Sizes not multiples of
// the tile. (Added in session 6 after the last GPU run: first run in the next gpu-check.)
TEST(ProgramPrefetchGpu, TwoDimensionalGridMatchesInterpreter) {
  REQUIRE_GPU();
  auto m = parse_module(testutil::kPrefetchGrid2dText,
                        "grid2d.tile");
  auto k = bind_constexprs(*m->kernels.at(0), {});
  for (const auto& [emitter, o] : emitters())
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{2000, 3000}, {1601, 1025}}) {
    SCOPED_TRACE(emitter + " M=" + std::to_string(rows) + " N=" + std::to_string(cols));
    ASSERT_EQ(sm80_stats(*k, o)["prefetched-program-loads"], 1);
    try {
      expect_gpu_matches_interp(*k, {{"M", rows}, {"N", cols}}, 67, {}, o);
    } catch (const TesseraError& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

}  // namespace
}  // namespace tessera::gputest
