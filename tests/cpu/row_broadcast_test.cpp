// Row broadcasts ([R, 1] -> [R, C]) read inside their elementwise users (rows, then columns;
// no [R, C] array), and an elementwise accumulator rescale written straight into the carried
// array a dot then accumulates into: the fused attention loop's acc = dot(p, v, acc * alpha).
// Each against the interpreter, including the hazard where the broadcast's source is a
// carried value that is updated between the broadcast and its user.
#include "CpuTestUtil.h"

namespace tessera::cputest {
namespace {

// For each 16-row tile i of x [N, 32]: acc [16, 32] over the column tiles j of w [N2, 32]...
// simplified: a running row max m, alpha = exp(m_old - m_new), acc = dot(exp(s - m), v,
// acc * alpha) over tiles of v [T, 32], with s = the x tile times a v tile transposed.
const char* kRescale = R"(kernel @rescale(%x: view<f32, [N, 32]>, %v: view<f32, [T, 32]>, %y: view<f32, [N, 32]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    %b = const {value = 16} : i32
    %g = cdiv %n, %b : i32
    yield %g
  }
  %i = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %t = dim %v {axis = 0} : i32
  %c16 = const {value = 16} : i32
  %nt = cdiv %t, %c16 : i32
  %q = load_tile %x, %i, %c0 : tile<f32, [16, 32]>
  %ninf = const {value = -inf} : f32
  %f0 = const {value = 0.0} : f32
  %m0 = splat %ninf : tile<f32, [16]>
  %acc0 = splat %f0 : tile<f32, [16, 32]>
  %z = splat %f0 : tile<f32, [16, 16]>
  %m, %acc = for %c0, %nt, %c1, %m0, %acc0 : tile<f32, [16]>, tile<f32, [16, 32]> {
    ^(%j: i32, %mc: tile<f32, [16]>, %ac: tile<f32, [16, 32]>):
    %vt = load_tile %v, %j, %c0 : tile<f32, [16, 32]>
    %vtt = permute %vt {dims = [1, 0]} : tile<f32, [32, 16]>
    %s = dot %q, %vtt, %z : tile<f32, [16, 16]>
    %rm = reduce %s {axis = 1, kind = "max"} : tile<f32, [16]>
    %mn = max %mc, %rm : tile<f32, [16]>
    %d = sub %mc, %mn : tile<f32, [16]>
    %alpha = exp %d : tile<f32, [16]>
    %mn2 = expand_dims %mn {axis = 1} : tile<f32, [16, 1]>
    %mnb = broadcast %mn2 : tile<f32, [16, 16]>
    %sd = sub %s, %mnb : tile<f32, [16, 16]>
    %p = exp %sd : tile<f32, [16, 16]>
    %a2 = expand_dims %alpha {axis = 1} : tile<f32, [16, 1]>
    %ab = broadcast %a2 : tile<f32, [16, 32]>
    %sc = mul %ac, %ab : tile<f32, [16, 32]>
    %accn = dot %p, %vt, %sc : tile<f32, [16, 32]>
    yield %mn, %accn
  }
  store_tile %y, %acc, %i, %c0
}
)";

// The broadcast of the carried %lc is made before %lc's update and read after it: the update
// must not be written into the carried array the broadcast still reads.
const char* kHazard = R"(kernel @hazard(%x: view<f32, [N, 32]>, %y: view<f32, [N, 32]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    %b = const {value = 16} : i32
    %g = cdiv %n, %b : i32
    yield %g
  }
  %i = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %c3 = const {value = 3} : i32
  %f1 = const {value = 1.0} : f32
  %t = load_tile %x, %i, %c0 : tile<f32, [16, 32]>
  %l0 = splat %f1 : tile<f32, [16]>
  %o0 = splat %f1 : tile<f32, [16, 32]>
  %l, %o = for %c0, %c3, %c1, %l0, %o0 : tile<f32, [16]>, tile<f32, [16, 32]> {
    ^(%j: i32, %lc: tile<f32, [16]>, %oc: tile<f32, [16, 32]>):
    %l2 = expand_dims %lc {axis = 1} : tile<f32, [16, 1]>
    %lb = broadcast %l2 : tile<f32, [16, 32]>
    %rs = reduce %t {axis = 1, kind = "sum"} : tile<f32, [16]>
    %ln = add %lc, %rs : tile<f32, [16]>
    %ot = mul %t, %lb : tile<f32, [16, 32]>
    %on = add %oc, %ot : tile<f32, [16, 32]>
    yield %ln, %on
  }
  store_tile %y, %o, %i, %c0
}
)";

// The same hazard with a one-element carried tile: its broadcast's users read lc[0] where
// they run, after the in-place update would have changed it (found by review, session 16).
const char* kHazardOneElement = R"(kernel @hazard1(%x: view<f32, [N, 32]>, %y: view<f32, [N, 32]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    %b = const {value = 16} : i32
    %g = cdiv %n, %b : i32
    yield %g
  }
  %i = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %c3 = const {value = 3} : i32
  %f1 = const {value = 1.0} : f32
  %t = load_tile %x, %i, %c0 : tile<f32, [16, 32]>
  %l0 = splat %f1 : tile<f32, [1, 1]>
  %one = splat %f1 : tile<f32, [1, 1]>
  %o0 = splat %f1 : tile<f32, [16, 32]>
  %l, %o = for %c0, %c3, %c1, %l0, %o0 : tile<f32, [1, 1]>, tile<f32, [16, 32]> {
    ^(%j: i32, %lc: tile<f32, [1, 1]>, %oc: tile<f32, [16, 32]>):
    %lb = broadcast %lc : tile<f32, [16, 32]>
    %ln = add %lc, %one : tile<f32, [1, 1]>
    %ot = mul %t, %lb : tile<f32, [16, 32]>
    %on = add %oc, %ot : tile<f32, [16, 32]>
    yield %ln, %on
  }
  store_tile %y, %o, %i, %c0
}
)";

std::unique_ptr<Kernel> bound(const char* text) {
  auto m = parse_module(text, "t.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

TEST(CpuRowBroadcast, RescaledAccumulatorMatchesInterpreter) {
  auto k = bound(kRescale);
  const std::string src = emit_cpp(*k);
  // The paths this test is for: no [16, 32] broadcast array, the rescale written into the
  // carried accumulator, the dot accumulating in place.
  EXPECT_NE(src.find("(each row's element read by its users)"), std::string::npos) << src;
  EXPECT_NE(src.find("(accumulated in place into the carried"), std::string::npos) << src;
  auto c = compile_cpu(*k, test_options());
  for (uint64_t seed : {1, 2, 3})
    for (auto [n, t] : {std::pair<int64_t, int64_t>{16, 16}, {37, 50}, {100, 130}})
      EXPECT_GT(expect_same_as_interp(*k, {{"N", n}, {"T", t}}, seed, c), 0);
}

TEST(CpuRowBroadcast, CarriedSourceUpdatedBeforeItsReader) {
  for (const char* text : {kHazard, kHazardOneElement}) {
    auto k = bound(text);
    auto c = compile_cpu(*k, test_options());
    for (uint64_t seed : {1, 2})
      for (int64_t n : {16, 45}) EXPECT_GT(expect_same_as_interp(*k, {{"N", n}}, seed, c), 0) << k->name;
  }
}

}  // namespace
}  // namespace tessera::cputest
