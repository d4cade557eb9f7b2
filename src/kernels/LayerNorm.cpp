// Layer normalization of each row: y = (x - mean) / sqrt(var + eps) * w + b. One program per
// BLOCK_M rows (default 1; more rows share each load of w and b). Rows that fit in one column
// tile (BLOCK_N >= N) are read once and kept; otherwise three passes over column tiles: the
// mean, the variance around it (padding masked off, since a padded 0 is not 0 away from the
// mean), then the output. Rows past M (the last program's) are padding, never stored.
#include <cmath>

#include "kernels/Kernels.h"
#include "lang/Lang.h"

namespace tessera::kernels {

namespace {

constexpr double kEps = 1e-5;

std::unique_ptr<Kernel> build(ScalarKind dt) {
  using namespace lang;
  KernelBuilder k("layernorm");
  auto x = k.view("x", dt, {"M", "N"}), w = k.view("w", dt, {"N"}), b = k.view("b", dt, {"N"});
  auto y = k.view("y", dt, {"M", "N"});
  auto BN = k.constexpr_("BLOCK_N", {256, 512, 1024, 2048, 4096, 8192, 16384, 32768}, 1024);
  auto BM = k.constexpr_("BLOCK_M", {1, 2, 4}, 1);
  // A codegen hint (the cuda backend reads it; the others ignore it): test each tile's bounds
  // and alignment once rather than per 16-byte vector. H200, 16384x4096 bf16: 3868 GB/s with
  // it, 3686 without (softmax and rmsnorm, with fewer registers to spare, lose 1% by it).
  k.constexpr_("whole_tile_checks", {0, 1}, 1);
  k.grid({cdiv(x.dim(0), BM)});
  auto rows = program_id(0);  // the program's block of BLOCK_M rows
  auto n = x.dim(1);
  auto tiles = cdiv(n, BN);
  auto nf = n.to(f32);

  if_(
      eq(tiles, 1),
      [&] {
        auto t = x.tile({BM, BN}).load({rows, 0}).to(f32);
        auto g = w.tile({BN}).load({0}).to(f32);
        auto c = b.tile({BN}).load({0}).to(f32);
        auto mean = expand_dims(sum(t, 1) / nf, 1);  // tile<f32, [BLOCK_M, 1]>
        // Padding counts as the mean: it adds nothing to the variance.
        auto in_row = expand_dims(arange(BN) < n, 0);
        auto d = where(in_row, t, mean) - mean;
        auto inv = expand_dims(rsqrt(sum(d * d, 1) / nf + kEps), 1);
        y.tile({BM, BN}).store({rows, 0}, ((t - mean) * inv * g + c).to(dt));
      },
      [&] {
        // Sums carried as [BLOCK_M] tiles (one reduction per tile) keep few registers live in the loops.
        Var acc = zeros({BM}, f32);
        for_range(0, tiles, 1, [&](Val j) { acc = acc + sum(x.tile({BM, BN}).load({rows, j}).to(f32), 1); });
        auto mean = expand_dims(acc / nf, 1);  // tile<f32, [BLOCK_M, 1]>

        Var sq = zeros({BM}, f32);
        for_range(0, tiles, 1, [&](Val j) {
          auto d = x.tile({BM, BN}).load({rows, j}).to(f32) - mean;
          auto in_row = expand_dims(j * BN + arange(BN) < n, 0);  // tile<i1, [1, BLOCK_N]>
          sq = sq + sum(where(in_row, d * d, 0.0), 1);
        });
        auto inv = expand_dims(rsqrt(sq / nf + kEps), 1);

        for_range(0, tiles, 1, [&](Val j) {
          auto t = x.tile({BM, BN}).load({rows, j}).to(f32);
          auto g = w.tile({BN}).load({j}).to(f32);
          auto c = b.tile({BN}).load({j}).to(f32);
          y.tile({BM, BN}).store({rows, j}, ((t - mean) * inv * g + c).to(dt));
        });
      });
  return k.finish();
}

// Calls out(flat index, exact y, bound) for every element of layernorm(x, w, b), computed in
// double. The bound: the f32 mean of N terms is off by at most gamma_N * mean|x|, which moves
// y by |w| * inv times that; the variance, a sum of N squares (positive terms), is within
// gamma_N of itself, and the reciprocal square root halves that: |x - mean| * |w| * inv *
// gamma_N / 2 more.
template <class Out>
void layernorm_rows(const Tensor& x, const Tensor& w, const Tensor& b, const Sizes& sizes, Out out) {
  int64_t M = sizes.at("M"), N = sizes.at("N");
  double g = gamma_n(N);
  for (int64_t i = 0; i < M; ++i) {
    double mean = 0, var = 0, mean_abs = 0;
    for (int64_t j = 0; j < N; ++j) mean += x.get(i * N + j), mean_abs += std::fabs(x.get(i * N + j));
    mean /= static_cast<double>(N);
    mean_abs /= static_cast<double>(N);
    for (int64_t j = 0; j < N; ++j) var += (x.get(i * N + j) - mean) * (x.get(i * N + j) - mean);
    double inv = 1.0 / std::sqrt(var / static_cast<double>(N) + kEps);
    for (int64_t j = 0; j < N; ++j) {
      double d = x.get(i * N + j) - mean;
      out(i * N + j, d * inv * w.get(j) + b.get(j), g * std::fabs(w.get(j)) * inv * (mean_abs + std::fabs(d) / 2));
    }
  }
}

void reference(std::vector<KernelArg>& args, const Sizes& sizes) {
  Tensor& y = *args[3].tensor;
  layernorm_rows(*args[0].tensor, *args[1].tensor, *args[2].tensor, sizes,
                 [&](int64_t i, double v, double) { y.set(i, v); });
}

ErrorBounds error_bounds(const std::vector<KernelArg>& args, const Sizes& sizes) {
  std::vector<double> y(static_cast<size_t>(args[3].tensor->numel()));
  layernorm_rows(*args[0].tensor, *args[1].tensor, *args[2].tensor, sizes,
                 [&](int64_t i, double, double bound) { y[static_cast<size_t>(i)] = bound; });
  return bounds_of_one(4, 3, std::move(y));
}

}  // namespace

LibraryKernel layernorm() {
  LibraryKernel k;
  k.name = "layernorm";
  k.summary = "y = (x - mean) / sqrt(var + 1e-5) * w + b per row, x [M, N], w and b [N]";
  k.dtypes = float_dtypes();
  k.default_sizes = {{"M", 1024}, {"N", 1024}};
  k.build = build;
  k.size_configs = [](ScalarKind dt, const std::string& target, const Sizes& s, const std::map<std::string, int64_t>& given) {
    return whole_row_config(dt, target, s, given);
  };
  k.reference = reference;
  k.error_bounds = error_bounds;
  k.bytes = [](const Sizes& s, ScalarKind dt) {
    return (2.0 * s.at("M") * s.at("N") + 2.0 * s.at("N")) * scalar_bytes(dt);
  };
  k.flops = [](const Sizes& s, ScalarKind) { return 8.0 * s.at("M") * s.at("N"); };
  return k;
}

}  // namespace tessera::kernels
