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

void reference(std::vector<KernelArg>& args, const Sizes& sizes) {
  const Tensor &x = *args[0].tensor, &w = *args[1].tensor;
  Tensor& y = *args[2].tensor;
  int64_t M = sizes.at("M"), N = sizes.at("N");
  for (int64_t i = 0; i < M; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < N; ++j) ss += x.get(i * N + j) * x.get(i * N + j);
    double inv = 1.0 / std::sqrt(ss / static_cast<double>(N) + kEps);
    for (int64_t j = 0; j < N; ++j) y.set(i * N + j, x.get(i * N + j) * inv * w.get(j));
  }
}

}  // namespace

LibraryKernel rmsnorm() {
  LibraryKernel k;
  k.name = "rmsnorm";
  k.summary = "y = x / sqrt(mean(x^2, row) + 1e-5) * w for x [M, N], w [N]";
  k.dtypes = float_dtypes();
  k.default_sizes = {{"M", 1024}, {"N", 1024}};
  k.build = build;
  k.reference = reference;
  k.bytes = [](const Sizes& s, ScalarKind dt) {
    return (2.0 * s.at("M") * s.at("N") + s.at("N")) * scalar_bytes(dt);
  };
  k.flops = [](const Sizes& s, ScalarKind) { return 4.0 * s.at("M") * s.at("N"); };
  return k;
}

}  // namespace tessera::kernels
