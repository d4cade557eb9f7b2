// Row tiles are read in place from the view (no local copy) unless memory is written while
// the tile is still read; a loop-carried tile is updated in place unless it is read after the
// update. Both paths must match the interpreter.
#include <cmath>

#include "CpuTestUtil.h"

namespace tessera::cputest {
namespace {

std::unique_ptr<Kernel> bound(const std::string& text) {
  auto m = parse_module(text, "t.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

// %t is read after %x was overwritten at the same place: it must keep the loaded values.
const char* kWriteThenRead = R"(kernel @rw(%x: view<f32, [M, N]>, %y: view<f32, [M, N]>) {
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %pid = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %t = load_tile %x, %pid, %c0 : tile<f32, [1, 64]>
  %two = const {value = 2.0} : f32
  %twos = splat %two : tile<f32, [1, 64]>
  %d = mul %t, %twos : tile<f32, [1, 64]>
  store_tile %x, %d, %pid, %c0
  %e = exp %t : tile<f32, [1, 64]>
  store_tile %y, %e, %pid, %c0
}
)";

// Two row tiles, the second partly outside the view (N = 100): in place, then padded.
const char* kRowScale = R"(kernel @rowscale(%x: view<f32, [M, N]>, %y: view<f32, [M, N]>) {
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %pid = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %t0 = load_tile %x, %pid, %c0 : tile<f32, [1, 64]>
  %t1 = load_tile %x, %pid, %c1 {pad = 0.5} : tile<f32, [1, 64]>
  %s0 = reduce %t0 {axis = 1, kind = "sum"} : tile<f32, [1]>
  %s1 = reduce %t1 {axis = 1, kind = "max"} : tile<f32, [1]>
  %e0 = expand_dims %s0 {axis = 0} : tile<f32, [1, 1]>
  %e1 = expand_dims %s1 {axis = 0} : tile<f32, [1, 1]>
  %b0 = broadcast %e0 : tile<f32, [1, 64]>
  %b1 = broadcast %e1 : tile<f32, [1, 64]>
  %y0 = mul %t0, %b1 : tile<f32, [1, 64]>
  %y1 = add %t1, %b0 : tile<f32, [1, 64]>
  store_tile %y, %y0, %pid, %c0
  store_tile %y, %y1, %pid, %c1
}
)";

// Row sums over column tiles, carried in %acc; %d reads %a (the old sum) after %n is computed,
// so %n must not overwrite it.
const char* kCarried = R"(kernel @carried(%x: view<f32, [M, N]>, %y: view<f32, [M, N]>, %s: view<f32, [M, 32]>) {
  constexpr B = 32
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %pid = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %nn = dim %x {axis = 1} : i32
  %cb = const {value = 32} : i32
  %cb1 = const {value = 31} : i32
  %nb = add %nn, %cb1 : i32
  %tiles = div %nb, %cb : i32
  %z = const {value = 0.0} : f32
  %acc0 = splat %z : tile<f32, [1, B]>
  %acc = for %c0, %tiles, %c1, %acc0 : tile<f32, [1, B]> {
    ^(%j: i32, %a: tile<f32, [1, B]>):
    %t = load_tile %x, %pid, %j : tile<f32, [1, B]>
    %n = add %a, %t : tile<f32, [1, B]>
    %d = mul %a, %a : tile<f32, [1, B]>
    store_tile %y, %d, %pid, %j
    yield %n
  }
  store_tile %s, %acc, %pid, %c0
}
)";

// The same sum where nothing reads %a after the update.
const char* kCarriedInPlace = R"(kernel @carried2(%x: view<f32, [M, N]>, %s: view<f32, [M, 32]>) {
  constexpr B = 32
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %pid = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %nn = dim %x {axis = 1} : i32
  %cb = const {value = 32} : i32
  %cb1 = const {value = 31} : i32
  %nb = add %nn, %cb1 : i32
  %tiles = div %nb, %cb : i32
  %z = const {value = 0.0} : f32
  %acc0 = splat %z : tile<f32, [1, B]>
  %acc = for %c0, %tiles, %c1, %acc0 : tile<f32, [1, B]> {
    ^(%j: i32, %a: tile<f32, [1, B]>):
    %t = load_tile %x, %pid, %j : tile<f32, [1, B]>
    %q = mul %t, %t : tile<f32, [1, B]>
    %n = add %a, %q : tile<f32, [1, B]>
    yield %n
  }
  store_tile %s, %acc, %pid, %c0
}
)";

TEST(CpuInPlaceCarried, ReadAfterUpdateKeepsATemporary) {
  auto k = bound(kCarried);
  EXPECT_EQ(emit_cpp(*k).find("written into the carried"), std::string::npos);
  expect_same_as_interp(*k, {{"M", 4}, {"N", 100}}, 25);
}

TEST(CpuInPlaceCarried, UpdateWrittenIntoTheCarriedArray) {
  auto k = bound(kCarriedInPlace);
  EXPECT_NE(emit_cpp(*k).find("written into the carried"), std::string::npos);
  expect_same_as_interp(*k, {{"M", 4}, {"N", 100}}, 26);
}

TEST(CpuInPlaceLoad, WriteBeforeLastReadCopiesTheTile) {
  auto k = bound(kWriteThenRead);
  EXPECT_EQ(emit_cpp(*k).find("_pad["), std::string::npos) << "expected a local copy";
  expect_same_as_interp(*k, {{"M", 5}, {"N", 64}}, 21);
  std::vector<Tensor> ts = make_random_tensors(*k, {{"M", 5}, {"N", 64}}, 22);
  Tensor x0 = ts[0];
  auto args = args_for(*k, ts);
  compile_cpu(*k, test_options())->run(args);
  for (int64_t i = 0; i < 5 * 64; ++i) {
    EXPECT_FLOAT_EQ(ts[0].get(i), 2 * x0.get(i));
    EXPECT_NEAR(ts[1].get(i), std::exp(x0.get(i)), 1e-5 * std::exp(x0.get(i)));
  }
}

TEST(CpuInPlaceLoad, RowTilesReadInPlaceAndPadded) {
  auto k = bound(kRowScale);
  std::string src = emit_cpp(*k);
  EXPECT_NE(src.find("_pad["), std::string::npos) << "expected in-place row tiles";
  expect_same_as_interp(*k, {{"M", 7}, {"N", 100}}, 23);
  expect_same_as_interp(*k, {{"M", 3}, {"N", 128}}, 24);
}

// A bf16 row read in place is a tsr::bf16_row, not an array: a transpose of it and an
// insert_tile into it (which copied it with tsr::transpose and memcpy) read it element by
// element; the generated C++ did not compile.
TEST(CpuInPlaceLoad, Bf16RowsPermutedAndInsertedInto) {
  const std::string head = R"(kernel @p(%x: view<bf16, [M, N]>, %y: view<bf16, [N, M]>) {
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %p = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %t = load_tile %x, %p, %c0 : tile<bf16, [1, 64]>
)";
  auto permuted = bound(head + R"(  %tt = permute %t {dims = [1, 0]} : tile<bf16, [64, 1]>
  store_tile %y, %tt, %c0, %p
}
)");
  EXPECT_NE(emit_cpp(*permuted).find("tsr::bf16_row"), std::string::npos) << "expected the row read in place";
  EXPECT_GT(expect_same_as_interp(*permuted, {{"M", 5}, {"N", 50}}, 25), 0);
  auto inserted = bound(head + R"(  %s = extract_tile %t, %c0, %c1 : tile<bf16, [1, 32]>
  %r = insert_tile %t, %s, %c0, %c0 : tile<bf16, [1, 64]>
  %rt = permute %r {dims = [1, 0]} : tile<bf16, [64, 1]>
  store_tile %y, %rt, %c0, %p
}
)");
  EXPECT_GT(expect_same_as_interp(*inserted, {{"M", 5}, {"N", 50}}, 26), 0);
}

}  // namespace
}  // namespace tessera::cputest
