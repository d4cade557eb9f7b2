// Differential tests of every op class on small hand-written kernels (f32, bf16, ints), plus
// raw C++ bodies, against the interpreter.
#include <regex>

#include "CpuTestUtil.h"

namespace tessera::cputest {
namespace {

std::unique_ptr<Kernel> bound(const std::string& text) {
  auto m = parse_module(text, "t.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

const char* kFloatZoo = R"(kernel @zoo(%x: view<T, [N]>, %y: view<T, [N]>, %o1: view<T, [N]>, %o2: view<T, [N]>, %o3: view<T, [N]>, %o4: view<T, [N]>, %o5: view<T, [N]>, %o6: view<T, [N]>, %o7: view<T, [N]>, %o8: view<T, [N]>, %o9: view<T, [N]>, %o10: view<T, [N]>, %o11: view<T, [N]>, %o12: view<T, [N]>, %o13: view<T, [N]>, %o14: view<i32, [N]>, %o15: view<T, [N]>, %o16: view<T, [N]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    %b = const {value = 64} : i32
    %b1 = const {value = 63} : i32
    %t = add %n, %b1 : i32
    %g = div %t, %b : i32
    yield %g
  }
  %pid = program_id {axis = 0} : i32
  %a = load_tile %x, %pid : tile<T, [64]>
  %b = load_tile %y, %pid : tile<T, [64]>
  %one = const {value = 1.0} : T
  %ones = splat %one : tile<T, [64]>
  %e = exp %a : tile<T, [64]>
  store_tile %o1, %e, %pid
  %ab = abs %b : tile<T, [64]>
  %ab1 = add %ab, %ones : tile<T, [64]>
  %lg = log %ab1 : tile<T, [64]>
  store_tile %o2, %lg, %pid
  %sq = sqrt %ab : tile<T, [64]>
  store_tile %o3, %sq, %pid
  %rs = rsqrt %ab1 : tile<T, [64]>
  store_tile %o4, %rs, %pid
  %sn = sin %a : tile<T, [64]>
  %cs = cos %b : tile<T, [64]>
  %th = tanh %a : tile<T, [64]>
  %sg = sigmoid %b : tile<T, [64]>
  store_tile %o5, %sn, %pid
  store_tile %o6, %cs, %pid
  store_tile %o7, %th, %pid
  store_tile %o8, %sg, %pid
  %er = erf %a : tile<T, [64]>
  store_tile %o9, %er, %pid
  %fl = floor %e : tile<T, [64]>
  %ce = ceil %a : tile<T, [64]>
  %fc = add %fl, %ce : tile<T, [64]>
  store_tile %o10, %fc, %pid
  %ad = add %a, %b : tile<T, [64]>
  %sb = sub %a, %b : tile<T, [64]>
  %ml = mul %ad, %sb : tile<T, [64]>
  %dv = div %ml, %ab1 : tile<T, [64]>
  store_tile %o11, %dv, %pid
  %mn = min %a, %b : tile<T, [64]>
  %mx = max %a, %dv : tile<T, [64]>
  %fm = fma %mn, %mx, %a : tile<T, [64]>
  store_tile %o12, %fm, %pid
  %c = cmp %a, %b {pred = "lt"} : tile<i1, [64]>
  %ng = neg %a : tile<T, [64]>
  %w = where %c, %ng, %b : tile<T, [64]>
  %rm = rem %w, %ab1 : tile<T, [64]>
  store_tile %o13, %rm, %pid
  %hundred = const {value = 100.0} : T
  %hs = splat %hundred : tile<T, [64]>
  %big = mul %a, %hs : tile<T, [64]>
  %ci = cast %big : tile<i32, [64]>
  store_tile %o14, %ci, %pid
  %e2 = exp2 %a : tile<T, [64]>
  %l2 = log2 %ab1 : tile<T, [64]>
  store_tile %o15, %e2, %pid
  store_tile %o16, %l2, %pid
}
)";

std::string with_type(const char* text, const char* t) {
  return std::regex_replace(text, std::regex(R"(\bT\b)"), t);
}

TEST(CpuOps, FloatElementwiseF32) {
  auto k = bound(with_type(kFloatZoo, "f32"));
  expect_same_as_interp(*k, {{"N", 150}}, 11);
}

TEST(CpuOps, FloatElementwiseBf16) {
  auto k = bound(with_type(kFloatZoo, "bf16"));
  expect_same_as_interp(*k, {{"N", 150}}, 12);
}

TEST(CpuOps, IntegerOpsExact) {
  auto k = bound(R"(kernel @ints(%a: view<i32, [M, N]>, %b: view<i32, [M, N]>, %o1: view<i32, [M, N]>, %o2: view<i32, [M, N]>, %o3: view<i8, [M, N]>, %r: view<i32, [M]>, %am: view<i32, [M]>, %sc: view<i32, [M, N]>, %o4: view<f32, [M, N]>) {
  grid {
    %m = dim %a {axis = 0} : i32
    yield %m
  }
  %row = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %x = load_tile %a, %row, %c0 : tile<i32, [1, 64]>
  %y = load_tile %b, %row, %c0 : tile<i32, [1, 64]>
  %one = const {value = 1} : i32
  %ones = splat %one : tile<i32, [1, 64]>
  %yn = or %y, %ones : tile<i32, [1, 64]>
  %d = div %x, %yn : tile<i32, [1, 64]>
  %rm = rem %x, %yn : tile<i32, [1, 64]>
  %s = add %d, %rm : tile<i32, [1, 64]>
  %big = const {value = 1000000007} : i32
  %bigs = splat %big : tile<i32, [1, 64]>
  %p0 = mul %x, %bigs : tile<i32, [1, 64]>
  %p = mul %p0, %bigs : tile<i32, [1, 64]>
  %mn = min %p, %s : tile<i32, [1, 64]>
  %mx = max %mn, %x : tile<i32, [1, 64]>
  %ss = sub %mx, %y : tile<i32, [1, 64]>
  store_tile %o1, %ss, %row, %c0
  %seven = const {value = 7} : i32
  %sevens = splat %seven : tile<i32, [1, 64]>
  %sh = and %y, %sevens : tile<i32, [1, 64]>
  %l = shl %p, %sh : tile<i32, [1, 64]>
  %rr = shr %p, %sh : tile<i32, [1, 64]>
  %xo = xor %l, %rr : tile<i32, [1, 64]>
  %nt = not %xo : tile<i32, [1, 64]>
  %ng = neg %nt : tile<i32, [1, 64]>
  %ab = abs %ng : tile<i32, [1, 64]>
  %c = cmp %x, %y {pred = "lt"} : tile<i1, [1, 64]>
  %w = where %c, %ab, %p : tile<i32, [1, 64]>
  store_tile %o2, %w, %row, %c0
  %ca = cast %w : tile<i8, [1, 64]>
  store_tile %o3, %ca, %row, %c0
  %rs = reduce %p {axis = 1, kind = "sum"} : tile<i32, [1]>
  store_tile %r, %rs, %row
  %ax = reduce %y {axis = 1, kind = "argmax"} : tile<i32, [1]>
  store_tile %am, %ax, %row
  %scn = scan %p {axis = 1, kind = "sum"} : tile<i32, [1, 64]>
  store_tile %sc, %scn, %row, %c0
  %fl = cast %p : tile<f32, [1, 64]>
  store_tile %o4, %fl, %row, %c0
}
)");
  expect_same_as_interp(*k, {{"M", 5}, {"N", 50}}, 13);
}

TEST(CpuOps, ShapesReductionsScans) {
  auto k = bound(R"(kernel @shapes(%x: view<f32, [M, N]>, %o1: view<f32, [N, M]>, %o2: view<f32, [M]>, %o3: view<f32, [N]>, %o4: view<i32, [N]>, %o5: view<f32, [M, N]>, %o6: view<f32, [M, N]>) {
  grid {
    %one = const {value = 1} : i32
    yield %one
  }
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %t = load_tile %x, %c0, %c0 {pad = 0.5} : tile<f32, [8, 32]>
  %tp = permute %t {dims = [1, 0]} : tile<f32, [32, 8]>
  store_tile %o1, %tp, %c0, %c0
  %rmax = reduce %t {axis = 1, kind = "max"} : tile<f32, [8]>
  %rsum = reduce %t {axis = 1, kind = "sum"} : tile<f32, [8]>
  %rr = add %rmax, %rsum : tile<f32, [8]>
  store_tile %o2, %rr, %c0
  %cmin = reduce %t {axis = 0, kind = "min"} : tile<f32, [32]>
  %cprod = reduce %t {axis = 0, kind = "prod"} : tile<f32, [32]>
  %cc = add %cmin, %cprod : tile<f32, [32]>
  store_tile %o3, %cc, %c0
  %am = reduce %t {axis = 0, kind = "argmin"} : tile<i32, [32]>
  store_tile %o4, %am, %c0
  %sub = extract_tile %t, %c1, %c1 : tile<f32, [4, 16]>
  %e = exp %sub : tile<f32, [4, 16]>
  %ins = insert_tile %t, %e, %c0, %c1 : tile<f32, [8, 32]>
  %sc = scan %ins {axis = 0, kind = "max"} : tile<f32, [8, 32]>
  store_tile %o5, %sc, %c0, %c0
  %row = reduce %t {axis = 0, kind = "sum"} : tile<f32, [32]>
  %r2 = expand_dims %row {axis = 0} : tile<f32, [1, 32]>
  %rb = broadcast %r2 : tile<f32, [8, 32]>
  %rs = reshape %rb : tile<f32, [256]>
  %rs2 = reshape %rs : tile<f32, [8, 32]>
  %mul = mul %rs2, %t : tile<f32, [8, 32]>
  store_tile %o6, %mul, %c0, %c0
}
)");
  expect_same_as_interp(*k, {{"M", 7}, {"N", 29}}, 14);
}

TEST(CpuOps, GatherScatterAtomics) {
  auto k = bound(R"(kernel @gsa(%x: view<f32, [N]>, %y: view<f32, [N]>, %acc: view<f32, [1]>, %cnt: view<i32, [4]>, %mx: view<i32, [1]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    %b = const {value = 64} : i32
    %b1 = const {value = 63} : i32
    %t = add %n, %b1 : i32
    %g = div %t, %b : i32
    yield %g
  }
  %pid = program_id {axis = 0} : i32
  %c64 = const {value = 64} : i32
  %base = mul %pid, %c64 : i32
  %ar = arange : tile<i32, [64]>
  %bs = splat %base : tile<i32, [64]>
  %idx = add %ar, %bs : tile<i32, [64]>
  %n = dim %x {axis = 0} : i32
  %ns = splat %n : tile<i32, [64]>
  %m = cmp %idx, %ns {pred = "lt"} : tile<i1, [64]>
  %one = const {value = 1} : i32
  %n1 = sub %n, %one : i32
  %n1s = splat %n1 : tile<i32, [64]>
  %rev = sub %n1s, %idx : tile<i32, [64]>
  %g = gather %x, %rev, %m {pad = 2.0} : tile<f32, [64]>
  scatter %y, %g, %idx, %m
  %z = const {value = 0} : i32
  %zs = splat %z : tile<i32, [64]>
  %old = atomic %acc, %g, %zs, %m {kind = "add"} : tile<f32, [64]>
  %three = const {value = 3} : i32
  %threes = splat %three : tile<i32, [64]>
  %slot = and %idx, %threes : tile<i32, [64]>
  %ones = splat %one : tile<i32, [64]>
  %old2 = atomic %cnt, %ones, %slot, %m {kind = "add"} : tile<i32, [64]>
  %old3 = atomic %mx, %idx, %zs, %m {kind = "max"} : tile<i32, [64]>
}
)");
  expect_same_as_interp(*k, {{"N", 150}}, 15);
}

TEST(CpuOps, RawCppBody) {
  auto k = bound(R"(kernel @twice(%x: view<f32, [N]>, %y: view<f32, [N]>) {
  constexpr BLOCK = 32
  grid {
    %n = dim %x {axis = 0} : i32
    yield %n
  }
  %pid = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %t = load_tile %x, %c0 : tile<f32, [BLOCK]>
  %r = raw %t {name = "twice", cpp = "for (int64_t i = 0; i < in0_numel; ++i) out0[i] = 2 * in0[i] + BLOCK;"} : tile<f32, [BLOCK]>
  store_tile %y, %r, %c0
}
)");
  std::vector<Tensor> ts = make_random_tensors(*k, {{"N", 20}}, 3);
  auto args = args_for(*k, ts);
  compile_cpu(*k, test_options())->run(args);
  for (int64_t i = 0; i < 20; ++i) EXPECT_FLOAT_EQ(ts[1].get(i), 2 * ts[0].get(i) + 32);
}

}  // namespace
}  // namespace tessera::cputest
