// Tiles partly outside their view (issue 19): each row inside the view copies its columns
// inside as one contiguous run ([lo, hi)) and pads the rest; a row outside is all padding; a
// store writes the same run. Tiles hang off every side here (one before the first row and
// column, one past the last, tiles wider than the view), in f32, bf16, f16, both f8s, integer
// types and rank 3, against the interpreter (bf16 rows read in place: speed_paths_test's
// ragged rows). A loaded row partly inside is tsr::load_row, out of line, converting as it
// copies.
#include "CpuTestUtil.h"

namespace tessera::cputest {
namespace {

std::unique_ptr<Kernel> bound(const std::string& text) {
  auto m = parse_module(text, "t.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

// Program (i, j) loads tile (i - 1, j - 1) of x with a pad, stores it doubled at the same place
// in y (dropped outside) and, pad included, at tile (i, j) of z (large enough for every tile).
std::string edges(const std::string& t, int64_t bm, int64_t bn) {
  const std::string tile = "tile<" + t + ", [" + std::to_string(bm) + ", " + std::to_string(bn) + "]>";
  return R"(kernel @edges(%x: view<)" + t + R"(, [M, N]>, %y: view<)" + t + R"(, [M, N]>, %z: view<)" + t +
         R"(, [P, Q]>) {
  grid {
    %m = dim %x {axis = 0} : i32
    %n = dim %x {axis = 1} : i32
    %bm = const {value = )" + std::to_string(bm) + R"(} : i32
    %bn = const {value = )" + std::to_string(bn) + R"(} : i32
    %gm = cdiv %m, %bm : i32
    %gn = cdiv %n, %bn : i32
    %two = const {value = 2} : i32
    %gm2 = add %gm, %two : i32
    %gn2 = add %gn, %two : i32
    yield %gm2, %gn2
  }
  %i = program_id {axis = 0} : i32
  %j = program_id {axis = 1} : i32
  %one = const {value = 1} : i32
  %im = sub %i, %one : i32
  %jm = sub %j, %one : i32
  %t = load_tile %x, %im, %jm {pad = 3} : )" + tile + R"(
  %u = add %t, %t : )" + tile + R"(
  store_tile %y, %u, %im, %jm
  store_tile %z, %t, %i, %j
}
)";
}

Sizes sizes(int64_t m, int64_t n, int64_t bm, int64_t bn) {
  return {{"M", m}, {"N", n}, {"P", ((m + bm - 1) / bm + 2) * bm}, {"Q", ((n + bn - 1) / bn + 2) * bn}};
}

TEST(CpuEdgeTiles, RowsCopyTheirColumnsInsideAndPadTheRest) {
  for (const char* t : {"f32", "bf16", "i32", "f16", "f8e4m3", "f8e5m2", "i8"})
    for (auto [bm, bn] : {std::pair<int64_t, int64_t>{4, 32}, {1, 64}, {3, 5}}) {
      SCOPED_TRACE(std::string(t) + " " + std::to_string(bm) + "x" + std::to_string(bn));
      auto k = bound(edges(t, bm, bn));
      const std::string src = emit_cpp(*k);
      EXPECT_NE(src.find("partly outside: each row copies its columns inside"), std::string::npos) << src;
      EXPECT_NE(src.find("tsr::load_row<"), std::string::npos) << src;
      for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 1}, {7, 37}, {9, 20}, {13, 130}})
        expect_same_as_interp(*k, sizes(m, n, bm, bn), static_cast<uint64_t>(m * 131 + n));
    }
}

// Rank 3: the two outer dims decide whether a row is inside.
TEST(CpuEdgeTiles, Rank3TilesHangOffEverySide) {
  auto k = bound(R"(kernel @edges3(%x: view<f32, [B, M, N]>, %y: view<f32, [B, M, N]>) {
  grid {
    %b = dim %x {axis = 0} : i32
    %m = dim %x {axis = 1} : i32
    %n = dim %x {axis = 2} : i32
    %c2 = const {value = 2} : i32
    %c16 = const {value = 16} : i32
    %gb = add %b, %c2 : i32
    %gm0 = cdiv %m, %c2 : i32
    %gm = add %gm0, %c2 : i32
    %gn0 = cdiv %n, %c16 : i32
    %gn = add %gn0, %c2 : i32
    yield %gb, %gm, %gn
  }
  %i = program_id {axis = 0} : i32
  %j = program_id {axis = 1} : i32
  %l = program_id {axis = 2} : i32
  %one = const {value = 1} : i32
  %im = sub %i, %one : i32
  %jm = sub %j, %one : i32
  %lm = sub %l, %one : i32
  %t = load_tile %x, %im, %jm, %lm {pad = -2} : tile<f32, [1, 2, 16]>
  %s = reduce %t {axis = 2, kind = "sum"} : tile<f32, [1, 2]>
  %r = reshape %s : tile<f32, [1, 2, 1]>
  %b = broadcast %r : tile<f32, [1, 2, 16]>
  %u = add %t, %b : tile<f32, [1, 2, 16]>
  store_tile %y, %u, %im, %jm, %lm
}
)");
  EXPECT_NE(emit_cpp(*k).find("partly outside: each row copies its columns inside"), std::string::npos);
  for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 1}, {5, 17}, {6, 40}})
    expect_same_as_interp(*k, {{"B", 3}, {"M", m}, {"N", n}}, static_cast<uint64_t>(m + n));
}

}  // namespace
}  // namespace tessera::cputest
