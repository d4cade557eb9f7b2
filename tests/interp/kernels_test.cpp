// Whole kernels through the interpreter against plain C++ references that perform the same
// operations in the same order and rounding (so results must match exactly).
#include <chrono>
#include <cmath>

#include "Helpers.h"

using namespace tessera;
using namespace tessera::test;

namespace {

const char* kSoftmax = R"(
kernel @softmax(%x: view<f32, [M, N]>, %y: view<f32, [M, N]>) {
  constexpr BLOCK_N = 1024 in [256, 512, 1024, 2048]
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %row = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %t = load_tile %x, %row, %c0 {pad = -inf} : tile<f32, [1, BLOCK_N]>
  %mx = reduce %t {axis = 1, kind = "max"} : tile<f32, [1]>
  %mx2 = expand_dims %mx {axis = 1} : tile<f32, [1, 1]>
  %mxb = broadcast %mx2 : tile<f32, [1, BLOCK_N]>
  %d = sub %t, %mxb : tile<f32, [1, BLOCK_N]>
  %e = exp %d : tile<f32, [1, BLOCK_N]>
  %s = reduce %e {axis = 1, kind = "sum"} : tile<f32, [1]>
  %s2 = expand_dims %s {axis = 1} : tile<f32, [1, 1]>
  %sb = broadcast %s2 : tile<f32, [1, BLOCK_N]>
  %o = div %e, %sb : tile<f32, [1, BLOCK_N]>
  store_tile %y, %o, %row, %c0
}
)";

void softmax_ref(const Tensor& x, Tensor& y) {
  int64_t M = x.shape[0], N = x.shape[1];
  for (int64_t r = 0; r < M; ++r) {
    float mx = -INFINITY;
    for (int64_t c = 0; c < N; ++c) mx = std::max(mx, static_cast<float>(x.get(r * N + c)));
    float s = 0;
    bool first = true;
    std::vector<float> e(N);
    for (int64_t c = 0; c < N; ++c) {
      e[c] = static_cast<float>(std::exp(static_cast<double>(static_cast<float>(x.get(r * N + c)) - mx)));
      s = first ? e[c] : s + e[c];
      first = false;
    }
    for (int64_t c = 0; c < N; ++c) y.set(r * N + c, static_cast<float>(e[c] / s));
  }
}

// A tiled matmul: ragged M, N, K exercise padding on load and dropping on store.
const char* kMatmul = R"(
kernel @matmul(%a: view<DT, [M, K]>, %b: view<DT, [K, N]>, %c: view<f32, [M, N]>) {
  constexpr BM = 16
  constexpr BN = 16
  constexpr BK = 8
  grid {
    %m = dim %a {axis = 0} : i32
    %n = dim %b {axis = 1} : i32
    %bm = param {name = "BM"} : i32
    %bn = param {name = "BN"} : i32
    %one = const {value = 1} : i32
    %m1 = sub %bm, %one : i32
    %mr = add %m, %m1 : i32
    %gm = div %mr, %bm : i32
    %n1 = sub %bn, %one : i32
    %nr = add %n, %n1 : i32
    %gn = div %nr, %bn : i32
    yield %gm, %gn
  }
  %pm = program_id {axis = 0} : i32
  %pn = program_id {axis = 1} : i32
  %k = dim %a {axis = 1} : i32
  %bk = param {name = "BK"} : i32
  %zero = const {value = 0} : i32
  %f0 = const {value = 0.0} : f32
  %acc0 = splat %f0 : tile<f32, [BM, BN]>
  %acc = for %zero, %k, %bk, %acc0 {pipeline = 3} : tile<f32, [BM, BN]> {
    ^(%kk: i32, %accc: tile<f32, [BM, BN]>):
    %kt = div %kk, %bk : i32
    %ta = load_tile %a, %pm, %kt : tile<DT, [BM, BK]>
    %tb = load_tile %b, %kt, %pn : tile<DT, [BK, BN]>
    %accn = dot %ta, %tb, %accc : tile<f32, [BM, BN]>
    yield %accn
  }
  store_tile %c, %acc, %pm, %pn
}
)";

std::string with_dtype(std::string s, const std::string& dt) {
  for (size_t p; (p = s.find("DT")) != std::string::npos;) s.replace(p, 2, dt);
  return s;
}

void matmul_ref(const Tensor& a, const Tensor& b, Tensor& c) {
  int64_t M = a.shape[0], K = a.shape[1], N = b.shape[1];
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float s = 0;
      for (int64_t k = 0; k < K; ++k)
        s = std::fmaf(static_cast<float>(a.get(i * K + k)), static_cast<float>(b.get(k * N + j)), s);
      c.set(i * N + j, s);
    }
}

}  // namespace

TEST(Kernels, SoftmaxRaggedMatchesExactly) {
  auto p = parse(kSoftmax, {{"BLOCK_N", 256}});
  Tensor x = random_tensor(ScalarKind::F32, {5, 999}, 1);  // 999 = 3 full tiles + 231
  // BLOCK_N 256 < N: the kernel only covers the first tile; check that and that the rest of y
  // stays untouched.
  Tensor y(ScalarKind::F32, {5, 999});
  for (int64_t i = 0; i < y.numel(); ++i) y.set(i, 7.0);
  auto args = args_of({&x, &y});
  run_interp(p.k(), args);
  Tensor x1(ScalarKind::F32, {5, 256}), y1(ScalarKind::F32, {5, 256});
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t c = 0; c < 256; ++c) x1.set(r * 256 + c, x.get(r * 999 + c));
  softmax_ref(x1, y1);
  for (int64_t r = 0; r < 5; ++r) {
    for (int64_t c = 0; c < 256; ++c) ASSERT_EQ(y.get(r * 999 + c), y1.get(r * 256 + c));
    for (int64_t c = 256; c < 999; ++c) ASSERT_EQ(y.get(r * 999 + c), 7.0);
  }
}

TEST(Kernels, SoftmaxPaddedTileMatchesExactly) {
  auto p = parse(kSoftmax);  // BLOCK_N 1024 > N 999: 25 padded columns read -inf
  Tensor x = random_tensor(ScalarKind::F32, {37, 999}, 2), y(ScalarKind::F32, {37, 999}),
         want(ScalarKind::F32, {37, 999});
  auto args = args_of({&x, &y});
  run_interp(p.k(), args);
  softmax_ref(x, want);
  EXPECT_EQ(y.data, want.data);
}

TEST(Kernels, MatmulRaggedF32AndBF16) {
  for (const char* dt : {"f32", "bf16", "f16", "f8e4m3"}) {
    auto p = parse(with_dtype(kMatmul, dt));
    ScalarKind k = *scalar_from_name(dt);
    Tensor a = random_tensor(k, {37, 19}, 3), b = random_tensor(k, {19, 29}, 4);
    Tensor c(ScalarKind::F32, {37, 29}), want(ScalarKind::F32, {37, 29});
    auto args = args_of({&a, &b, &c});
    run_interp(p.k(), args);
    matmul_ref(a, b, want);
    EXPECT_EQ(c.data, want.data) << dt;
  }
}

TEST(Kernels, LargeSizesRunQuickly) {
  auto sm = parse(kSoftmax);
  Tensor x = random_tensor(ScalarKind::F32, {1000, 999}, 5), y(ScalarKind::F32, {1000, 999});
  auto t0 = std::chrono::steady_clock::now();
  auto args = args_of({&x, &y});
  run_interp(sm.k(), args);
  auto mm = parse(with_dtype(kMatmul, "f32"), {{"BM", 16}, {"BN", 16}, {"BK", 8}});
  Tensor a = random_tensor(ScalarKind::F32, {1000, 77}, 6), b = random_tensor(ScalarKind::F32, {77, 999}, 7);
  Tensor c(ScalarKind::F32, {1000, 999});
  auto margs = args_of({&a, &b, &c});
  run_interp(mm.k(), margs);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 10.0);
  // Spot-check one output of the matmul against the reference order.
  float s = 0;
  for (int k = 0; k < 77; ++k) s = std::fmaf(static_cast<float>(a.get(999 * 77 + k)), static_cast<float>(b.get(k * 999 + 998)), s);
  EXPECT_EQ(c.get(999 * 999 + 998), s);
  std::printf("softmax 1000x999 + matmul 1000x999x77: %.2f s\n", secs);
}
