// RMS normalization of each row: y = x / sqrt(mean(x^2) + eps) * w. One program per row. A row
// that fits in one column tile (BLOCK_N >= N) is read once and kept; otherwise pass 1
// accumulates x^2 over column tiles (padding reads 0 and adds nothing) and pass 2 writes y.
#include <cmath>

#include "kernels/Kernels.h"
#include "lang/Lang.h"

namespace tessera::kernels {

namespace {

constexpr double kEps = 1e-5;

std::unique_ptr<Kernel> build(ScalarKind dt) {
  using namespace lang;
  KernelBuilder k("rmsnorm");
  auto x = k.view("x", dt, {"M", "N"}), w = k.view("w", dt, {"N"}), y = k.view("y", dt, {"M", "N"});
  auto BN = k.constexpr_("BLOCK_N", {256, 512, 1024, 2048, 4096, 8192, 16384, 32768}, 1024);
  k.grid({x.dim(0)});
  auto row = program_id(0);
  auto tiles = cdiv(x.dim(1), BN);
  auto nf = x.dim(1).to(f32);

  if_(
      eq(tiles, 1),
      [&] {
        auto t = x.tile({1, BN}).load({row, 0}).to(f32);
        auto g = w.tile({BN}).load({0}).to(f32);  // issued with x's load, not after the sum
        auto inv = rsqrt(sum(t * t, 1) / nf + kEps);
        y.tile({1, BN}).store({row, 0}, (t * inv * g).to(dt));
      },
      [&] {
        // The sum carried as a [1] tile (one reduction per tile) keeps few registers live.
        Var acc = zeros({1}, f32);
        for_range(0, tiles, 1, [&](Val j) {
          auto t = x.tile({1, BN}).load({row, j}).to(f32);
          acc = acc + sum(t * t, 1);
        });
        auto inv = rsqrt(acc / nf + kEps);  // tile<f32, [1]>
        for_range(0, tiles, 1, [&](Val j) {
          auto t = x.tile({1, BN}).load({row, j}).to(f32);
          auto g = w.tile({BN}).load({j}).to(f32);
          y.tile({1, BN}).store({row, j}, (t * inv * g).to(dt));
        });
      });
  return k.finish();
}

// Calls out(flat index, exact y) for every element of rmsnorm(x, w), computed in double.
template <class Out>
void rmsnorm_rows(const Tensor& x, const Tensor& w, const Sizes& sizes, Out out) {
  int64_t M = sizes.at("M"), N = sizes.at("N");
  for (int64_t i = 0; i < M; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < N; ++j) ss += x.get(i * N + j) * x.get(i * N + j);
    double inv = 1.0 / std::sqrt(ss / static_cast<double>(N) + kEps);
    for (int64_t j = 0; j < N; ++j) out(i * N + j, x.get(i * N + j) * inv * w.get(j));
  }
}

void reference(std::vector<KernelArg>& args, const Sizes& sizes) {
  Tensor& y = *args[2].tensor;
  rmsnorm_rows(*args[0].tensor, *args[1].tensor, sizes, [&](int64_t i, double v) { y.set(i, v); });
}

// The f32 sum of the row's N squares (positive terms) is within gamma_N of itself; the
// reciprocal square root halves a relative error: y within gamma_N / 2 * |y|.
ErrorBounds error_bounds(const std::vector<KernelArg>& args, const Sizes& sizes) {
  std::vector<double> y(static_cast<size_t>(args[2].tensor->numel()));
  double g = gamma_n(sizes.at("N")) / 2;
  rmsnorm_rows(*args[0].tensor, *args[1].tensor, sizes,
               [&](int64_t i, double v) { y[static_cast<size_t>(i)] = g * std::fabs(v); });
  return bounds_of_one(3, 2, std::move(y));
}

}  // namespace

LibraryKernel rmsnorm() {
  LibraryKernel k;
  k.name = "rmsnorm";
  k.summary = "y = x / sqrt(mean(x^2, row) + 1e-5) * w for x [M, N], w [N]";
  k.dtypes = float_dtypes();
  k.default_sizes = {{"M", 1024}, {"N", 1024}};
  k.build = build;
  k.size_configs = [](ScalarKind dt, const std::string& target, const Sizes& s, const std::map<std::string, int64_t>& given) {
    return whole_row_config(dt, target, s, given);
  };
  k.reference = reference;
  k.error_bounds = error_bounds;
  k.bytes = [](const Sizes& s, ScalarKind dt) {
    return (2.0 * s.at("M") * s.at("N") + s.at("N")) * scalar_bytes(dt);
  };
  k.flops = [](const Sizes& s, ScalarKind) { return 4.0 * s.at("M") * s.at("N"); };
  return k;
}

}  // namespace tessera::kernels
