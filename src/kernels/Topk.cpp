// Row-wise top-k: the k largest elements of each row of x [M, N] (k <= N) with their column
// indices, largest first, ties by smaller column, NaN above +inf (docs/semantics.md), as
// torch.topk orders them. One program per row. The first column tile's top-k starts a running
// top-k; each further tile's top-k is merged with it: the two sit side by side in a [1, 2k]
// tile (the running one first, so that equal values keep the smaller column first, since the
// running columns all precede the tile's) and a top-k of that tile with the columns as its
// index operand keeps the best k. Padding reads -inf at columns >= N, after every real element
// of equal value, so it never enters a top-k of k <= N. Exact for rows up to 2^24 columns (i32
// column indices; the tile count stays small).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/Kernels.h"
#include "lang/Lang.h"

namespace tessera::kernels {

namespace {

std::unique_ptr<Kernel> build(ScalarKind dt) {
  using namespace lang;
  KernelBuilder k("topk");
  auto x = k.view("x", dt, {"M", "N"});
  auto values = k.view("values", dt, {"M", "K"});
  auto indices = k.view("indices", ScalarKind::I32, {"M", "K"});
  // K is the output's width: any value from 1 (the size_configs bind it from the sizes).
  auto K = k.constexpr_("K", {}, 64);
  auto BN = k.constexpr_("BLOCK_N", {256, 512, 1024, 2048, 4096}, 1024);
  // cuda: the sort network's steps are spread over the CTA's threads (one barrier each), so a
  // wide CTA takes fewer rounds per step; the heuristic's 4 warps for a 4096-element tile are
  // few (not measured yet: a knob for the bench).
  k.constexpr_("num_warps", {4, 8, 16, 32}, 16);
  k.grid({x.dim(0)});
  auto row = program_id(0);
  auto tiles = cdiv(x.dim(1), BN);
  Sorted first = topk(x.tile({1, BN}).load({row, 0}, -inf), K, 1);
  Var best = first.values;
  Var cols = first.indices;
  for_range(1, tiles, 1, [&](Val j) {
    Sorted t = topk(x.tile({1, BN}).load({row, j}, -inf), K, 1);
    Shape both{1, Dim(2) * Dim(K)};
    auto v = insert_tile(insert_tile(zeros(both, dt), best, {0, 0}), t.values, {0, 1});
    auto c = insert_tile(insert_tile(zeros(both, ScalarKind::I32), cols, {0, 0}), t.indices + j * BN, {0, 1});
    Sorted m = topk_pairs(v, c, K, 1);
    best = m.values;
    cols = m.indices;
  });
  values.tile({1, K}).store({row, 0}, best);
  indices.tile({1, K}).store({row, 0}, cols);
  return k.finish();
}

}  // namespace

// Row i of args[1] ([M, width]) gets the first `width` elements of row i of args[0] ([M, N]) in
// sort order (descending: largest first; NaN above +inf, -0 below +0, ties by smaller column:
// a stable sort), and row i of args[2] their columns: the top-k and sort references.
void sorted_rows_reference(std::vector<KernelArg>& args, int64_t M, int64_t N, int64_t width, bool descending) {
  const Tensor& x = *args[0].tensor;
  Tensor &v = *args[1].tensor, &ix = *args[2].tensor;
  std::vector<int64_t> c(static_cast<size_t>(N));
  for (int64_t i = 0; i < M; ++i) {
    std::iota(c.begin(), c.end(), 0);
    auto less = [&](int64_t a, int64_t b) {  // x[i, a] < x[i, b] in the sort order
      double va = x.get(i * N + a), vb = x.get(i * N + b);
      if (std::isnan(va)) return false;
      if (std::isnan(vb)) return true;
      if (va == vb) return std::signbit(va) && !std::signbit(vb);
      return va < vb;
    };
    std::stable_sort(c.begin(), c.end(), [&](int64_t a, int64_t b) { return descending ? less(b, a) : less(a, b); });
    for (int64_t r = 0; r < width && r < N; ++r) {
      v.set(i * width + r, x.get(i * N + c[static_cast<size_t>(r)]));
      ix.set_int(i * width + r, c[static_cast<size_t>(r)]);
    }
  }
}

LibraryKernel topk() {
  LibraryKernel k;
  k.name = "topk";
  k.summary = "row-wise top-k of x [M, N] (K <= N): values [M, K] largest first and their column indices";
  k.dtypes = {ScalarKind::F32, ScalarKind::BF16};
  k.default_sizes = {{"M", 64}, {"N", 4096}, {"K", 64}};
  k.build = build;
  k.reference = [](std::vector<KernelArg>& args, const Sizes& s) {
    sorted_rows_reference(args, s.at("M"), s.at("N"), s.at("K"), true);
  };
  // K is the output's width, so it follows the sizes; BLOCK_N at least K (a tile's top-k).
  k.size_configs = [](ScalarKind, const std::string&, const Sizes& s) {
    std::map<std::string, int64_t> c{{"K", s.at("K")}};
    if (s.at("K") > 1024) c["BLOCK_N"] = 4096;
    return c;
  };
  k.bytes = [](const Sizes& s, ScalarKind dt) {
    return double(s.at("M")) * (double(s.at("N")) * scalar_bytes(dt) + double(s.at("K")) * (scalar_bytes(dt) + 4));
  };
  // Comparisons, not flops: about log2(K) per element for a top-k (the figure is GB/s).
  k.flops = [](const Sizes& s, ScalarKind) {
    return double(s.at("M")) * double(s.at("N")) * std::max(1.0, std::log2(double(s.at("K"))));
  };
  return k;
}

}  // namespace tessera::kernels
