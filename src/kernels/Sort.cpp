// Row-wise sort of x [M, N] for rows of one tile (N <= BLOCK_N; size_configs pick the tile):
// values ascending (NaN last, -0 before +0, ties by smaller column: a stable sort, as
// torch.sort(stable=True) orders them) and the column each came from. Padding reads NaN at
// columns >= N: it sorts after every real element, NaNs included (ties by column), so the
// stored first N are the row's.
#include <algorithm>
#include <cmath>

#include "kernels/Kernels.h"
#include "lang/Lang.h"

namespace tessera::kernels {

namespace {

std::unique_ptr<Kernel> build(ScalarKind dt) {
  using namespace lang;
  KernelBuilder k("sort");
  auto x = k.view("x", dt, {"M", "N"});
  auto values = k.view("values", dt, {"M", "N"});
  auto indices = k.view("indices", ScalarKind::I32, {"M", "N"});
  auto BN = k.constexpr_("BLOCK_N", {32, 64, 128, 256, 512, 1024, 2048, 4096}, 1024);
  // cuda: the sort network's steps are spread over the CTA's threads (one barrier each), so a
  // wide CTA takes fewer rounds per step; the heuristic's 4 warps for a 4096-element tile are
  // few (not measured yet: a knob for the bench).
  k.constexpr_("num_warps", {4, 8, 16, 32}, 16);
  k.grid({x.dim(0)});
  auto row = program_id(0);
  Sorted s = sort_indexed(x.tile({1, BN}).load({row, 0}, NAN), 1);
  values.tile({1, BN}).store({row, 0}, s.values);
  indices.tile({1, BN}).store({row, 0}, s.indices);
  return k.finish();
}

}  // namespace

LibraryKernel sort() {
  LibraryKernel k;
  k.name = "sort";
  k.summary = "row-wise stable ascending sort of x [M, N], N <= BLOCK_N (4096 at most): values and column indices";
  k.dtypes = {ScalarKind::F32, ScalarKind::BF16};
  k.default_sizes = {{"M", 64}, {"N", 1024}};
  k.build = build;
  k.reference = [](std::vector<KernelArg>& args, const Sizes& s) {
    sorted_rows_reference(args, s.at("M"), s.at("N"), s.at("N"), false);
  };
  // The row must fit one tile: the smallest candidate that holds it.
  k.size_configs = [](ScalarKind, const std::string&, const Sizes& s, const std::map<std::string, int64_t>&) {
    int64_t b = 32;
    while (b < s.at("N") && b < 4096) b *= 2;
    return std::map<std::string, int64_t>{{"BLOCK_N", b}};
  };
  k.bytes = [](const Sizes& s, ScalarKind dt) {
    return double(s.at("M")) * double(s.at("N")) * (2.0 * scalar_bytes(dt) + 4);
  };
  // Comparisons, not flops: about log2(N) per element (the figure is GB/s).
  k.flops = [](const Sizes& s, ScalarKind) {
    return double(s.at("M")) * double(s.at("N")) * std::max(1.0, std::log2(double(s.at("N"))));
  };
  return k;
}

}  // namespace tessera::kernels
