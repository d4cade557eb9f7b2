// Column reductions (reduce over axis 0 of a [rows, I] tile with I > 1) summed into a
// loop-carried tile. gcc 12 at -O3 with 512-bit vectors (-march=native on an AVX-512 CPU such
// as Zen 4) miscompiled the emitter's old form (an array of I accumulators, rows outside,
// columns inside): the carried sum saw only part of the rows (tests/corpus/moe_count.tile).
#include "CpuTestUtil.h"

namespace tessera::cputest {
namespace {

std::unique_ptr<Kernel> bound(const std::string& text) {
  auto m = parse_module(text, "t.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

// Column sums of x [N, 8] (i32) over 64-row tiles, carried across the tiles.
const char* kColumnSums = R"(kernel @colsum(%x: view<i32, [N, 8]>, %y: view<i32, [8]>) {
  grid {
    %g1 = const {value = 1} : i32
    yield %g1
  }
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %n = dim %x {axis = 0} : i32
  %c63 = const {value = 63} : i32
  %c64 = const {value = 64} : i32
  %nr = add %n, %c63 : i32
  %tiles = div %nr, %c64 : i32
  %acc0 = splat %c0 : tile<i32, [8]>
  %acc = for %c0, %tiles, %c1, %acc0 : tile<i32, [8]> {
    ^(%j: i32, %a: tile<i32, [8]>):
    %t = load_tile %x, %j, %c0 {pad = 0} : tile<i32, [64, 8]>
    %s = reduce %t {axis = 0, kind = "sum"} : tile<i32, [8]>
    %na = add %a, %s : tile<i32, [8]>
    yield %na
  }
  store_tile %y, %acc, %c0
}
)";

// The moe_count pattern: ids [N] compared with 8 experts ([64, 8] of i1), cast to i32 and
// counted over the ids.
const char* kCountMatches = R"(kernel @count(%ids: view<i32, [N]>, %y: view<i32, [8]>) {
  grid {
    %g1 = const {value = 1} : i32
    yield %g1
  }
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %n = dim %ids {axis = 0} : i32
  %c63 = const {value = 63} : i32
  %c64 = const {value = 64} : i32
  %nr = add %n, %c63 : i32
  %tiles = div %nr, %c64 : i32
  %lanes = arange : tile<i32, [8]>
  %l2 = expand_dims %lanes {axis = 0} : tile<i32, [1, 8]>
  %lb = broadcast %l2 : tile<i32, [64, 8]>
  %acc0 = splat %c0 : tile<i32, [8]>
  %acc = for %c0, %tiles, %c1, %acc0 : tile<i32, [8]> {
    ^(%j: i32, %a: tile<i32, [8]>):
    %e = load_tile %ids, %j {pad = -1} : tile<i32, [64]>
    %sev = const {value = 7} : i32
    %sevs = splat %sev : tile<i32, [64]>
    %em = and %e, %sevs : tile<i32, [64]>
    %e2 = expand_dims %em {axis = 1} : tile<i32, [64, 1]>
    %eb = broadcast %e2 : tile<i32, [64, 8]>
    %hit = cmp %eb, %lb {pred = "eq"} : tile<i1, [64, 8]>
    %hiti = cast %hit : tile<i32, [64, 8]>
    %s = reduce %hiti {axis = 0, kind = "sum"} : tile<i32, [8]>
    %na = add %a, %s : tile<i32, [8]>
    yield %na
  }
  store_tile %y, %acc, %c0
}
)";

TEST(CpuReduceColumns, ColumnSumsCarried) {
  auto k = bound(kColumnSums);
  auto c = compile_cpu(*k, test_options());
  for (uint64_t seed : {1, 2, 3})
    for (int64_t n : {64, 300, 1000}) EXPECT_GT(expect_same_as_interp(*k, {{"N", n}}, seed, c), 0);
}

TEST(CpuReduceColumns, CountMatchesCarried) {
  auto k = bound(kCountMatches);
  auto c = compile_cpu(*k, test_options());
  for (uint64_t seed : {1, 2, 3})
    for (int64_t n : {64, 300, 1000}) EXPECT_GT(expect_same_as_interp(*k, {{"N", n}}, seed, c), 0);
}

}  // namespace
}  // namespace tessera::cputest
