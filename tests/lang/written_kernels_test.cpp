// Five kernels written from docs/language.md alone, as a review of the language by use: each
// runs on the interpreter against a plain C++ reference at ragged sizes, and through the cpu
// backend against the interpreter. They are tests, not library kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "../common/BackendTestUtil.h"
#include "cpu/CpuBackend.h"
#include "interp/Interpreter.h"
#include "lang/Lang.h"
#include "passes/Passes.h"
#include "runtime/Tensor.h"

namespace tessera {
namespace {

using namespace lang;

Tensor random_tensor(ScalarKind dt, std::vector<int64_t> shape, std::mt19937& rng,
                     double lo = -2.0, double hi = 2.0) {
  Tensor t(dt, std::move(shape));
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, u(rng));
  return t;
}

std::vector<KernelArg> args_of(std::vector<Tensor*> ts) {
  std::vector<KernelArg> a;
  for (Tensor* t : ts) a.push_back(KernelArg{t});
  return a;
}

CpuOptions cpu_options() {
  CpuOptions o;
  o.cache_dir = testutil::process_cache_dir("lang-written");
  return o;
}

// The outputs of the interpreter and of the cpu backend agree within `tol` (relative to 1 +
// |value|), element by element.
void expect_close(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  for (int64_t i = 0; i < a.numel(); ++i)
    ASSERT_NEAR(a.get(i), b.get(i), tol * (1 + std::abs(b.get(i)))) << what << " at " << i;
}

// ---------------------------------------------------------------- (1) residual add + rmsnorm

// h = x + r (stored), y = h * rsqrt(mean(h^2) + eps) * w, one program per row.
std::unique_ptr<Kernel> add_rmsnorm(ScalarKind dt) {
  KernelBuilder k("add_rmsnorm");
  auto x = k.view("x", dt, {"M", "N"}), r = k.view("r", dt, {"M", "N"});
  auto w = k.view("w", dt, {"N"});
  auto h = k.view("h", dt, {"M", "N"}), y = k.view("y", dt, {"M", "N"});
  auto BN = k.constexpr_("BLOCK_N", {16, 64, 256}, 64);
  k.grid({x.dim(0)});
  auto row = program_id(0);
  auto tiles = cdiv(x.dim(1), BN);

  Var acc = zeros({1, BN}, f32);
  for_range(0, tiles, 1, [&](Val j) {
    auto s = x.tile({1, BN}).load({row, j}) + r.tile({1, BN}).load({row, j});
    h.tile({1, BN}).store({row, j}, s);
    auto t = s.to(f32);  // the rounded sum, as stored
    acc += t * t;
  });
  auto inv = rsqrt(sum(acc, 1) / x.dim(1).to(f32) + 1e-6);
  for_range(0, tiles, 1, [&](Val j) {
    auto t = h.tile({1, BN}).load({row, j}).to(f32);
    auto g = w.tile({BN}).load({j}).to(f32);
    y.tile({1, BN}).store({row, j}, (t * inv * g).to(dt));
  });
  return k.finish();
}

TEST(WrittenKernels, AddRmsNorm) {
  auto kernel = add_rmsnorm(f32);
  for (auto [M, N, BN] : {std::tuple{5, 37, 16}, {3, 300, 64}, {1, 1, 16}, {4, 256, 256}}) {
    std::mt19937 rng(M * 1000 + N);
    Tensor x = random_tensor(f32, {M, N}, rng), r = random_tensor(f32, {M, N}, rng);
    Tensor w = random_tensor(f32, {N}, rng), h(f32, {M, N}), y(f32, {M, N});
    auto bound = bind_constexprs(*kernel, {{"BLOCK_N", BN}});
    auto args = args_of({&x, &r, &w, &h, &y});
    run_interp(*bound, args);

    for (int m = 0; m < M; ++m) {
      double ss = 0;
      std::vector<float> hs(N);
      for (int n = 0; n < N; ++n) {
        hs[n] = float(x.get(m * N + n)) + float(r.get(m * N + n));
        ss += double(hs[n]) * hs[n];
      }
      double inv = 1 / std::sqrt(ss / N + 1e-6);
      for (int n = 0; n < N; ++n) {
        ASSERT_EQ(h.get(m * N + n), hs[n]) << m << "," << n;
        ASSERT_NEAR(y.get(m * N + n), hs[n] * inv * w.get(n), 1e-5) << m << "," << n;
      }
    }

    Tensor h2(f32, {M, N}), y2(f32, {M, N});
    auto args2 = args_of({&x, &r, &w, &h2, &y2});
    compile_cpu(*bound, cpu_options())->run(args2);
    expect_close(h2, h, 0, "h");
    expect_close(y2, y, 1e-5, "y");
  }
}


// ---------------------------------------------------------------- (2) cross-entropy

// loss[m] = logsumexp(logits[m, :]) - logits[m, labels[m]]; a negative label (ignore index)
// gives 0. Two passes over the row: the max, then the sum of exponentials.
std::unique_ptr<Kernel> cross_entropy() {
  KernelBuilder k("cross_entropy");
  auto logits = k.view("logits", f32, {"M", "V"}), labels = k.view("labels", i32, {"M"});
  auto loss = k.view("loss", f32, {"M"});
  auto BV = k.constexpr_("BLOCK_V", {16, 128, 1024}, 128);
  k.grid({logits.dim(0)});
  auto row = program_id(0);
  auto tiles = cdiv(logits.dim(1), BV);

  Var mx = full({1, BV}, -inf, f32);
  for_range(0, tiles, 1, [&](Val j) {
    mx = maximum(mx, logits.tile({1, BV}).load({row, j}, -inf));
  });
  auto m = max(mx, 1);  // tile<f32, [1]>
  Var se = zeros({1, BV}, f32);
  for_range(0, tiles, 1, [&](Val j) {
    se += exp(logits.tile({1, BV}).load({row, j}, -inf) - m);
  });
  auto lse = log(sum(se, 1)) + m;
  auto label = gather(labels, {row});
  auto valid = label >= 0;
  auto picked = gather(logits, {row, label}, valid);
  auto l = where(valid, lse - picked, 0.0);
  loss.tile({1}).store({row}, l);
  return k.finish();
}

TEST(WrittenKernels, CrossEntropy) {
  auto kernel = cross_entropy();
  for (auto [M, V, BV] : {std::tuple{6, 37, 16}, {3, 1000, 128}, {2, 1, 16}, {5, 1024, 1024}}) {
    std::mt19937 rng(M * 7 + V);
    Tensor logits = random_tensor(f32, {M, V}, rng, -8, 8), labels(i32, {M}), loss(f32, {M});
    std::uniform_int_distribution<int> pick(0, V - 1);
    for (int m = 0; m < M; ++m) labels.set_int(m, m == 1 ? -100 : pick(rng));
    auto bound = bind_constexprs(*kernel, {{"BLOCK_V", BV}});
    auto args = args_of({&logits, &labels, &loss});
    run_interp(*bound, args);

    for (int m = 0; m < M; ++m) {
      double mxv = -INFINITY, s = 0;
      for (int v = 0; v < V; ++v) mxv = std::max(mxv, logits.get(m * V + v));
      for (int v = 0; v < V; ++v) s += std::exp(logits.get(m * V + v) - mxv);
      int64_t lab = labels.get_int(m);
      double want = lab < 0 ? 0 : std::log(s) + mxv - logits.get(m * V + lab);
      ASSERT_NEAR(loss.get(m), want, 1e-4 * (1 + std::abs(want))) << "row " << m;
    }

    Tensor loss2(f32, {M});
    auto args2 = args_of({&logits, &labels, &loss2});
    compile_cpu(*bound, cpu_options())->run(args2);
    expect_close(loss2, loss, 1e-5, "loss");
  }
}


// ---------------------------------------------------------------- (3) GELU, 2-D tiles

// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), computed in f32, over [BM, BN] tiles.
std::unique_ptr<Kernel> gelu_tanh(ScalarKind dt) {
  KernelBuilder k("gelu_tanh");
  auto x = k.view("x", dt, {"M", "N"}), y = k.view("y", dt, {"M", "N"});
  auto BM = k.constexpr_("BLOCK_M", {1, 8, 32}, 8);
  auto BN = k.constexpr_("BLOCK_N", {16, 64}, 16);
  k.grid({cdiv(x.dim(0), BM), cdiv(x.dim(1), BN)});
  auto i = program_id(0), j = program_id(1);
  auto t = x.tile({BM, BN}).load({i, j}).to(f32);
  auto inner = 0.7978845608028654 * (t + 0.044715 * t * t * t);
  y.tile({BM, BN}).store({i, j}, (0.5 * t * (1.0 + tanh(inner))).to(dt));
  return k.finish();
}

double gelu_ref(double x) {
  return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

TEST(WrittenKernels, GeluTanh2D) {
  for (ScalarKind dt : {f32, bf16}) {
    auto kernel = gelu_tanh(dt);
    for (auto [M, N, BM, BN] : {std::tuple{13, 37, 8, 16}, {1, 5, 1, 64}, {70, 130, 32, 64}}) {
      std::mt19937 rng(M + N);
      Tensor x = random_tensor(dt, {M, N}, rng, -4, 4), y(dt, {M, N});
      auto bound = bind_constexprs(*kernel, {{"BLOCK_M", BM}, {"BLOCK_N", BN}});
      auto args = args_of({&x, &y});
      run_interp(*bound, args);
      // bf16 output: one rounding of the f32 result (relative 2^-8).
      double tol = dt == f32 ? 1e-6 : 1.0 / 256;
      for (int64_t e = 0; e < x.numel(); ++e)
        ASSERT_NEAR(y.get(e), gelu_ref(x.get(e)), tol * (1 + std::abs(y.get(e)))) << e;

      Tensor y2(dt, {M, N});
      auto args2 = args_of({&x, &y2});
      compile_cpu(*bound, cpu_options())->run(args2);
      expect_close(y2, y, tol, "gelu");
    }
  }
}

// ---------------------------------------------------------------- (4) tiled transpose

// y = x^T: program (i, j) loads tile (i, j) of x and stores its permutation as tile (j, i).
std::unique_ptr<Kernel> transpose_kernel(ScalarKind dt) {
  KernelBuilder k("transpose");
  auto x = k.view("x", dt, {"M", "N"}), y = k.view("y", dt, {"N", "M"});
  auto BM = k.constexpr_("BLOCK_M", {8, 32}, 32);
  auto BN = k.constexpr_("BLOCK_N", {4, 16}, 16);
  k.grid({cdiv(x.dim(0), BM), cdiv(x.dim(1), BN)});
  auto i = program_id(0), j = program_id(1);
  auto t = x.tile({BM, BN}).load({i, j});
  y.tile({BN, BM}).store({j, i}, permute(t, {1, 0}));
  return k.finish();
}

TEST(WrittenKernels, Transpose) {
  for (ScalarKind dt : {f32, i32}) {
    auto kernel = transpose_kernel(dt);
    for (auto [M, N, BM, BN] : {std::tuple{13, 37, 8, 4}, {1, 1, 8, 4}, {64, 33, 32, 16}}) {
      std::mt19937 rng(M * N);
      Tensor x = random_tensor(dt, {M, N}, rng, -100, 100), y(dt, {N, M});
      auto bound = bind_constexprs(*kernel, {{"BLOCK_M", BM}, {"BLOCK_N", BN}});
      auto args = args_of({&x, &y});
      run_interp(*bound, args);
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < N; ++n) ASSERT_EQ(y.get(n * M + m), x.get(m * N + n)) << m << "," << n;

      Tensor y2(dt, {N, M});
      auto args2 = args_of({&x, &y2});
      compile_cpu(*bound, cpu_options())->run(args2);
      expect_close(y2, y, 0, "transpose");
    }
  }
}


// ---------------------------------------------------------------- (5) row-wise argmax

// idx[m] = the first n with x[m, n] maximal, val[m] = that maximum. Per column tile: the tile's
// max and argmax; a later tile replaces the running best only when strictly greater, so ties
// keep the first index.
std::unique_ptr<Kernel> row_argmax(ScalarKind dt) {
  KernelBuilder k("row_argmax");
  auto x = k.view("x", dt, {"M", "N"});
  auto idx = k.view("idx", i32, {"M"}), val = k.view("val", dt, {"M"});
  auto BN = k.constexpr_("BLOCK_N", {8, 64, 512}, 64);
  k.grid({x.dim(0)});
  auto row = program_id(0);

  Var best = full({1}, -inf, dt);
  Var best_i = zeros({1}, i32);
  for_range(0, cdiv(x.dim(1), BN), 1, [&](Val j) {
    auto t = x.tile({1, BN}).load({row, j}, -inf);
    auto tm = max(t, 1);  // tile<dt, [1]>
    auto better = tm > best;
    best_i = where(better, argmax(t, 1) + j * BN, best_i);
    best = where(better, tm, best);
  });
  idx.tile({1}).store({row}, best_i);
  val.tile({1}).store({row}, best);
  return k.finish();
}

// The same with scalar running values: item() turns the tile's [1] statistics into scalars, so
// that an if_ can take the branch (a row kernel's reductions give tile<T, [1]>, not scalars).
std::unique_ptr<Kernel> row_argmax_scalar(ScalarKind dt) {
  KernelBuilder k("row_argmax_scalar");
  auto x = k.view("x", dt, {"M", "N"});
  auto idx = k.view("idx", i32, {"M"}), val = k.view("val", dt, {"M"});
  auto BN = k.constexpr_("BLOCK_N", {8, 64, 512}, 64);
  k.grid({x.dim(0)});
  auto row = program_id(0);

  Var best = full({}, -inf, dt);
  Var best_i = 0;
  for_range(0, cdiv(x.dim(1), BN), 1, [&](Val j) {
    auto t = x.tile({1, BN}).load({row, j}, -inf);
    auto tm = item(max(t, 1));
    if_(tm > best, [&] {
      best = tm;
      best_i = item(argmax(t, 1)) + j * BN;
    });
  });
  scatter(idx, best_i, {row});
  scatter(val, best, {row});
  return k.finish();
}

TEST(WrittenKernels, RowArgmax) {
  for (auto [make, dt] : {std::pair{&row_argmax, f32}, {&row_argmax, bf16}, {&row_argmax_scalar, f32},
                          {&row_argmax_scalar, bf16}}) {
    auto kernel = make(dt);
    for (auto [M, N, BN] : {std::tuple{5, 37, 8}, {3, 1000, 64}, {2, 1, 8}, {4, 512, 512}}) {
      for (bool ties : {false, true}) {
        std::mt19937 rng(M * 31 + N + ties);
        Tensor x = random_tensor(dt, {M, N}, rng, -50, 50), idx(i32, {M}), val(dt, {M});
        // Few distinct values: the maximum occurs many times, in several tiles.
        if (ties)
          for (int64_t e = 0; e < x.numel(); ++e) x.set(e, std::floor(x.get(e) / 20));
        auto bound = bind_constexprs(*kernel, {{"BLOCK_N", BN}});
        auto args = args_of({&x, &idx, &val});
        run_interp(*bound, args);
        for (int m = 0; m < M; ++m) {
          int best = 0;
          for (int n = 1; n < N; ++n)
            if (x.get(m * N + n) > x.get(m * N + best)) best = n;
          ASSERT_EQ(idx.get_int(m), best) << "row " << m << " ties " << ties;
          ASSERT_EQ(val.get(m), x.get(m * N + best)) << "row " << m;
        }

        Tensor idx2(i32, {M}), val2(dt, {M});
        auto args2 = args_of({&x, &idx2, &val2});
        compile_cpu(*bound, cpu_options())->run(args2);
        expect_close(idx2, idx, 0, "idx");
        expect_close(val2, val, 0, "val");
      }
    }
  }
}

}  // namespace
}  // namespace tessera
