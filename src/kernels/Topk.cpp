// Row-wise top-k: the k largest elements of each row of x [M, N] (k <= N) with their column
// indices, largest first, ties by smaller column, NaN above +inf (docs/semantics.md), as
// torch.topk orders them. One program per row, a radix select over the row's bits:
//
// - Each element's key is its bits made an unsigned integer whose ascending order is the
//   descending order of the values (bitcast to u32, or u16 for bf16; positives get their
//   non-sign bits flipped: NaN, which bitcast makes the positive canonical NaN, has the smallest
//   key, -inf the largest). The top-k are the k smallest keys, ties by smaller column.
// - Passes over the row find the k-th smallest key T one digit at a time, most significant
//   first (f32: 11, 11 and 10 bits; bf16: 8 and 8): a histogram of the digit of every key
//   whose higher digits equal T's found so far, summed over the column tiles; its prefix sum
//   gives T's digit (the first bin whose count reaches the number still wanted) and how many
//   keys lie in the bins before it (all wanted). When T's bin holds exactly the number still
//   wanted, every key in it is taken and the passes stop early.
// - A last pass keeps each key below T (at the digits resolved) and, of the keys equal to T,
//   the first ones by column, as many as still wanted (ranked by a prefix sum only in a tile
//   where they run past that number): prefix sums of the keep flags give each kept element
//   its place in the output row, where it is scattered with its column (in column order).
// - The k kept elements are loaded back and sorted descending with their columns (a stable
//   sort: equal values stay in column order).
//
// Every pass reads the row through a shared-memory ring of asynchronous copies (Struct:
// alloc_shared, copy, async_wait; cp.async on cuda), two groups of RING_GROUP column tiles,
// so that the next group's bytes are in flight while this group is worked on.
//
// Padding past N gets a key past every real key and comes after every real element by column,
// so with k <= N it is never kept. Exact for rows up to
// 2^24 columns (i32 columns and counts).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <numeric>

#include "kernels/Kernels.h"
#include "lang/Lang.h"
#include "support/Env.h"

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
  // cuda: one program (CTA) per row; each column tile costs a few barriers (the histogram's),
  // so tiles are long (registers bound them: 8192 f32 at 16 warps).
  auto BN = k.constexpr_("BLOCK_N", {256, 512, 1024, 2048, 4096, 8192}, 8192);
  k.constexpr_("num_warps", {4, 8, 16, 32}, 16);
  // cuda: the ring's copies as cp.async (0: plain copies, each waited for at once).
  k.constexpr_("struct_cp_async", {0, 1}, 1);
  k.grid({x.dim(0)});
  auto row = program_id(0);
  auto n = x.dim(1);
  auto tiles = cdiv(n, BN);
  const bool f32 = dt == ScalarKind::F32;
  const int key_bits = f32 ? 32 : 16;
  const int digits = f32 ? 3 : 2, d = f32 ? 11 : 8;  // f32: 11, 11 and 10 bits; bf16: 8 and 8
  const int64_t bins = int64_t(1) << d;
  auto key = [&](Val t) {
    if (f32) {
      Val u = bitcast(t, ScalarKind::U32);
      return where(eq(u >> 31, 0), u ^ 0x7FFFFFFF, u);
    }
    Val u = bitcast(t, ScalarKind::U16).to(ScalarKind::U32);
    return where(eq(u >> 15, 0), u ^ 0x7FFF, u);
  };
  // Past every real key (-inf's is 0xFF800000, or 0xFF80 for bf16): the padding's.
  Val pad_key = full({}, f32 ? 4294967295.0 : 65535.0, ScalarKind::U32);
  // The row's column tiles reach shared memory through a ring of asynchronous copies, two
  // groups of RING_GROUP slots: while the tiles of one group are worked on, the next group's
  // copies are in flight, more bytes than registers could hold (RING_GROUP * BLOCK_N
  // elements; cuda: 2 * RING_GROUP * BLOCK_N elements of shared memory, 128 KiB for f32 at the
  // defaults). A loop over the row: body(j, tile j, its keys). The copies pad with 0
  // (cp.async zero-fills), so the last tile's columns past N get pad_key.
  auto G = k.constexpr_("RING_GROUP", {1, 2, 3}, 2);
  Buffer ring = alloc_shared(dt, {Dim(2) * Dim(G), 1, BN});
  auto groups = cdiv(tiles, G);
  auto over_row = [&](const std::function<void(Val, Val, Val)>& body) {
    for_range(0, G, 1, [&](Val i) { ring.copy({i}, x.tile({1, BN}), {row, i}); });
    for_range(0, groups, 1, [&](Val g) {
      async_wait();
      Val half = (g % 2) * G;
      if_(g + 1 < groups, [&] {
        for_range(0, G, 1, [&](Val i) { ring.copy({(G - half) + i}, x.tile({1, BN}), {row, (g + 1) * G + i}); });
      });
      for_range(0, minimum(G, tiles - g * G), 1, [&](Val i) {
        Val j = g * G + i;
        Val t = reshape(ring.read({half + i}), {BN});
        Val kk = key(t);
        kk = if_(
            eq(j, tiles - 1), [&] { return where(arange(BN) + j * BN < n, kk, pad_key); }, [&] { return kk; });
        body(j, t, kk);
      });
    });
  };

  Var prefix = zeros({}, ScalarKind::U32);  // T's digits found so far (the rest 0)
  Var wanted = K;  // how many of the keys matching `prefix` are still wanted
  Var resolved = full({}, key_bits, ScalarKind::U32);  // T's bits from here up are known
  Var refine = full({}, 1, ScalarKind::I1);
  // One pass: the digit of `nbins` bins below bit `high` (0 <= shift = high - log2(nbins)).
  auto pass = [&](Val high, Val shift, int64_t nbins) {
    Var hist = zeros({nbins}, ScalarKind::I32);
    over_row([&](Val, Val, Val kk) {
      Val digit = ((kk >> shift) & (nbins - 1)).to(ScalarKind::I32);
      // The first pass counts every key (a shift by the key's width or more gives 0).
      digit = where(eq(kk >> high, prefix >> high), digit, -1);
      hist = hist + histogram(digit, nbins);
    });
    Val before = cumsum(hist, 0) < wanted;    // the bins whose keys are all wanted
    Val bin = sum(before.to(ScalarKind::I32), 0);  // T's digit
    Val in_bin = sum(where(eq(arange(nbins), bin), hist, 0), 0);
    wanted = wanted - sum(where(before, hist, 0), 0);
    prefix = prefix | (bin.to(ScalarKind::U32) << shift);
    resolved = shift;
    refine = ne(in_bin, wanted);
  };
  // The passes are one loop, so NVRTC compiles the pass once (f32 topk: 1.35 -> 0.8 s of CPU on
  // sm_80). Pass p takes the d bits below bit key_bits - p * d; the last f32 pass, where 10
  // remain, reads bits 0..10, and bit 10 (resolved by the pass before) is the same in every key
  // it counts. TESSERA_TOPK_UNROLLED_PASSES=1 writes one copy per pass instead, each its exact
  // width (the former code; the A/B switch of tools/h200-nvcold-check).
  if (env_flag("TESSERA_TOPK_UNROLLED_PASSES")) {
    for (int p = 0, high = key_bits; p < digits; ++p) {
      const int width = std::min(d, high), shift = high - width;
      auto at = [](int64_t v) { return full({}, double(v), ScalarKind::U32); };
      if_(refine, [&] { pass(at(high), at(shift), int64_t(1) << width); });
      high = shift;
    }
  } else {
    for_range(0, int64_t(digits), 1, [&](Val p) {
      if_(refine, [&] {
        Val high = (key_bits - p * d).to(ScalarKind::U32);
        pass(high, maximum(high, d) - d, bins);
      });
    });
  }

  // Keep the keys below T and the first `wanted` equal to it (at the resolved digits).
  Val T = prefix >> resolved;
  Var kept = 0, kept_equal = 0;
  over_row([&](Val j, Val t, Val keys) {
    Val kk = keys >> resolved;
    Val equal = eq(kk, T);
    Val below = kk < T;
    Val n_equal = sum(equal.to(ScalarKind::I32), 0);
    // Usually every equal key of the tile is wanted (always when the passes stopped early);
    // only a tile where the equal keys run past `wanted` ranks them.
    Val keep = if_(
        kept_equal + n_equal <= wanted, [&] { return below | equal; },
        [&] {
          Val rank = cumsum(equal.to(ScalarKind::I32), 0) + kept_equal;  // 1-based among the equal keys
          return below | (equal & (rank <= wanted));
        });
    Val at = cumsum(keep.to(ScalarKind::I32), 0) + (kept - 1);
    scatter(values, t, {row, at}, keep);
    scatter(indices, arange(BN) + j * BN, {row, at}, keep);
    kept_equal = kept_equal + n_equal;
    kept = kept + sum(keep.to(ScalarKind::I32), 0);
  });
  Sorted best = sort_pairs(values.tile({1, K}).load({row, 0}), indices.tile({1, K}).load({row, 0}), 1, true);
  values.tile({1, K}).store({row, 0}, best.values);
  indices.tile({1, K}).store({row, 0}, best.indices);
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
  k.size_error = [](const Sizes& s) -> std::string {
    auto n = s.find("N"), kk = s.find("K");
    if (n == s.end() || kk == s.end() || kk->second <= n->second) return "";
    return "topk: K = " + std::to_string(kk->second) + " is more than the row length N = " + std::to_string(n->second) +
           " (the k largest of a row need k <= N)";
  };
  k.build = build;
  k.reference = [](std::vector<KernelArg>& args, const Sizes& s) {
    sorted_rows_reference(args, s.at("M"), s.at("N"), s.at("K"), true);
  };
  // K is the output's width, so it follows the sizes.
  k.size_configs = [](ScalarKind, const std::string&, const Sizes& s) {
    return std::map<std::string, int64_t>{{"K", s.at("K")}};
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
