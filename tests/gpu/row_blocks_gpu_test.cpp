// layernorm with several rows per program (BLOCK_M), paired 16-bit stores and the vector
// accesses' whole-tile test (whole_tile_checks = 1), on a GPU against the interpreter (skips without a device): M not a
// multiple of BLOCK_M, rows of odd length (every other row's start unaligned, so whole-tile
// tests fail there and the chunk-by-chunk path runs), one ragged tile and the loops.
#include <gtest/gtest.h>

#include "GpuTestUtil.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera::gputest {
namespace {

struct RowCase {
  int64_t n, block_n;
};
// N = BLOCK_N (one full tile), N odd and N < BLOCK_N (one ragged tile), N > BLOCK_N (loops).
constexpr RowCase kRowCases[] = {{4096, 4096}, {4095, 4096}, {1000, 1024}, {2048 * 3 + 77, 2048}};

TEST(RowBlocksGpu, LayerNormBlockMMatchesInterpreter) {
  REQUIRE_GPU();
  for (ScalarKind dt : {ScalarKind::BF16, ScalarKind::F16})
    for (int64_t bm : {2, 4})
      for (RowCase c : kRowCases)
        for (int64_t warps : {0, 4}) {
          // (whole_tile_checks = 0 by default here, 1 at num_warps = 4: both paths at several
          // rows per tile)
          SCOPED_TRACE("layernorm " + std::string(scalar_name(dt)) + " BLOCK_M=" + std::to_string(bm) + " N=" +
                       std::to_string(c.n) + " BLOCK_N=" + std::to_string(c.block_n) + " num_warps=" + std::to_string(warps));
          auto k = bind_constexprs(*find_library_kernel("layernorm")->build(dt), {{"BLOCK_N", c.block_n}, {"BLOCK_M", bm}});
          k->set_constexpr("whole_tile_checks", warps ? 1 : 0);
          if (warps) k->set_constexpr("num_warps", warps);
          try {
            expect_gpu_matches_interp(*k, {{"M", 37}, {"N", c.n}}, 41);
          } catch (const TesseraError& e) {
            ADD_FAILURE() << e.what();
          }
        }
}

// The switches (whole_tile_checks flipped from the kernel's default, pair_stores = 0) give the
// same results, and so does a register cap (min_blocks = 8) on every row kernel.
TEST(RowBlocksGpu, RowKernelsMatchInterpreterWithEachSwitch) {
  REQUIRE_GPU();
  for (const char* name : {"softmax", "layernorm", "rmsnorm"})
    for (RowCase c : kRowCases)
      for (const char* knob : {"whole_tile_checks", "pair_stores", "min_blocks"}) {
        SCOPED_TRACE(std::string(name) + " " + knob + " N=" + std::to_string(c.n));
        auto k = bind_constexprs(*find_library_kernel(name)->build(ScalarKind::BF16), {{"BLOCK_N", c.block_n}});
        const ConstexprDecl* own = k->find_constexpr(knob);
        int64_t v = std::string(knob) == "min_blocks" ? 8 : std::string(knob) == "whole_tile_checks" ? !(own && own->value) : 0;
        k->set_constexpr(knob, v);
        try {
          expect_gpu_matches_interp(*k, {{"M", 11}, {"N", c.n}}, 43);
        } catch (const TesseraError& e) {
          ADD_FAILURE() << e.what();
        }
      }
}

// Two sums folded into one exchange (and a max on its own), over a ragged row and several
// warps: the same values as the interpreter. The sums are of positive terms (x^2 and e^x), so
// the order of the additions moves them by a few f32 roundings only.
TEST(RowBlocksGpu, FoldedReductionsMatchInterpreter) {
  REQUIRE_GPU();
  auto m = parse_module(R"(kernel @k(%x: view<f32, [M, N]>, %y: view<f32, [M, 3]>) {
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %p = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %c2 = const {value = 2} : i32
  %t = load_tile %x, %p, %c0 : tile<f32, [1, 4096]>
  %u = mul %t, %t : tile<f32, [1, 4096]>
  %e = exp %t : tile<f32, [1, 4096]>
  %a = reduce %u {axis = 1, kind = "sum"} : tile<f32, [1]>
  %b = reduce %e {axis = 1, kind = "sum"} : tile<f32, [1]>
  %c = reduce %t {axis = 1, kind = "max"} : tile<f32, [1]>
  %a2 = expand_dims %a {axis = 1} : tile<f32, [1, 1]>
  %b2 = expand_dims %b {axis = 1} : tile<f32, [1, 1]>
  %c2t = expand_dims %c {axis = 1} : tile<f32, [1, 1]>
  store_tile %y, %a2, %p, %c0
  store_tile %y, %b2, %p, %c1
  store_tile %y, %c2t, %p, %c2
}
)",
                        "fold.tile");
  auto k = bind_constexprs(*m->kernels.at(0), {});
  for (int64_t n : {4096, 3001}) {
    SCOPED_TRACE("N=" + std::to_string(n));
    try {
      expect_gpu_matches_interp(*k, {{"M", 9}, {"N", n}}, 47);
    } catch (const TesseraError& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

}  // namespace
}  // namespace tessera::gputest
