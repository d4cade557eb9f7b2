// Row-wise softmax, numerically stable: one program per row. When the row fits in one column
// tile (BLOCK_N >= N) it is read once and kept: max, exp, sum, scale. Otherwise pass 1 keeps a
// running max and a running sum rescaled whenever the max grows (online softmax) and pass 2
// writes exp(x - max) / sum. Padding reads -inf, which exp turns into 0.
#include <cmath>

#include "kernels/Kernels.h"
#include "lang/Lang.h"

namespace tessera::kernels {

namespace {

std::unique_ptr<Kernel> build(ScalarKind dt) {
  using namespace lang;
  KernelBuilder k("softmax");
  auto x = k.view("x", dt, {"M", "N"}), y = k.view("y", dt, {"M", "N"});
  auto BN = k.constexpr_("BLOCK_N", {256, 512, 1024, 2048, 4096, 8192, 16384, 32768}, 1024);
  k.grid({x.dim(0)});
  auto row = program_id(0);
  auto tiles = cdiv(x.dim(1), BN);

  if_(
      eq(tiles, 1),
      [&] {
        auto t = x.tile({1, BN}).load({row, 0}, -inf).to(f32);
        auto e = exp(t - max(t, 1));
        y.tile({1, BN}).store({row, 0}, (e * (1.0 / sum(e, 1))).to(dt));
      },
      [&] {
        Var m = full({1}, -inf, f32);  // running max of the row
        Var s = zeros({1}, f32);       // running sum of exp(x - m)
        for_range(0, tiles, 1, [&](Val j) {
          auto t = x.tile({1, BN}).load({row, j}, -inf).to(f32);
          auto m_new = maximum(m, max(t, 1));
          s = s * exp(m - m_new) + sum(exp(t - m_new), 1);
          m = m_new;
        });
        auto inv = 1.0 / s;
        for_range(0, tiles, 1, [&](Val j) {
          auto t = x.tile({1, BN}).load({row, j}, -inf).to(f32);
          y.tile({1, BN}).store({row, j}, (exp(t - m) * inv).to(dt));
        });
      });
  return k.finish();
}

// Calls out(flat index, exact y) for every element of softmax(x), computed in double.
template <class Out>
void softmax_rows(const Tensor& x, const Sizes& sizes, Out out) {
  int64_t M = sizes.at("M"), N = sizes.at("N");
  for (int64_t i = 0; i < M; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < N; ++j) mx = std::max(mx, x.get(i * N + j));
    for (int64_t j = 0; j < N; ++j) sum += std::exp(x.get(i * N + j) - mx);
    for (int64_t j = 0; j < N; ++j) out(i * N + j, std::exp(x.get(i * N + j) - mx) / sum);
  }
}

void reference(std::vector<KernelArg>& args, const Sizes& sizes) {
  Tensor& y = *args[1].tensor;
  softmax_rows(*args[0].tensor, sizes, [&](int64_t i, double v) { y.set(i, v); });
}

// y = e / s with s the f32 sum of a row's N terms e >= 0: s is within gamma_N * s (the terms
// are positive, so sum |e| = s), and the online loop's rescalings of s (one per column tile,
// at most N) add at most N more roundings: y within gamma_2N * y. The exp of each element is
// one op, within the dtype's rtol.
ErrorBounds error_bounds(const std::vector<KernelArg>& args, const Sizes& sizes) {
  std::vector<double> y(static_cast<size_t>(args[1].tensor->numel()));
  double g = gamma_n(2 * sizes.at("N"));
  softmax_rows(*args[0].tensor, sizes, [&](int64_t i, double v) { y[static_cast<size_t>(i)] = g * v; });
  return bounds_of_one(2, 1, std::move(y));
}

}  // namespace

LibraryKernel softmax() {
  LibraryKernel k;
  k.name = "softmax";
  k.summary = "row-wise numerically stable softmax of x [M, N]";
  k.dtypes = float_dtypes();
  k.default_sizes = {{"M", 1024}, {"N", 1024}};
  k.build = build;
  k.size_configs = [](ScalarKind dt, const std::string& target, const Sizes& s, const std::map<std::string, int64_t>& given) {
    return whole_row_config(dt, target, s, given);
  };
  k.reference = reference;
  k.error_bounds = error_bounds;
  k.bytes = [](const Sizes& s, ScalarKind dt) {
    return 2.0 * s.at("M") * s.at("N") * scalar_bytes(dt);
  };
  k.flops = [](const Sizes& s, ScalarKind) { return 5.0 * s.at("M") * s.at("N"); };
  return k;
}

}  // namespace tessera::kernels
