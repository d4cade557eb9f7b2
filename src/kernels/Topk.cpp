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
//
// The segmented top-k (topk_stages; LibraryKernel::stages picks it for long rows: on cuda in
// few rows, on cpu from the bucket threshold in any number):
// one program per row is one CTA per row on cuda (64 rows: half the H200's SMs; a row of 2^24:
// one). The same radix select runs instead
// - on each segment of SEGMENT columns (grid M x segments): the segment's top-min(K, length)
//   are scattered as above, unsorted, in column order, to its K slots in candidates [M, W]
//   (W = segments * K), with their columns; the slots left over (a segment shorter than K)
//   get column -1;
// - while a row has more than merge_limit candidates, on segments of the candidates the same
//   way (the candidate form: the columns are read with the values, and column -1 gets the
//   padding's key);
// - and once over each row's candidates with the sorted output (the merge).
// Exact, ties included: order the row's elements by (key, column), a total order in which the
// top-k are the first k. An element of the row's top-k has fewer than k elements before it in
// the row, so fewer in its segment: it is among its segment's candidates (the same holds at
// each level). The candidates of a row lie in column order (segments in order, each one's in
// column order), so the keep pass's "equal keys: the first by position" is "by column", and
// the final stable sort keeps equal values in that order: ties by smaller column, as one
// program over the row. Padding slots (column -1) have the key past every real key and the
// row has at least k real elements (k <= N), so none is kept by the merge.
//
// From the row threshold (Form::row_threshold; topk_stages' TopkThreshold::RowHistograms, not
// the default): a
// segment's three digit passes cost ~2,300 instructions a thread on the H200 (instruction-
// bound, not memory-bound), where most of its keys cannot be in the row's top-k. So three
// small kernels first clear hist [M, 2 * bins], add every tile's histogram of its keys' first
// digit to its row's (atomics), then of the second digit of the keys whose first is the row's
// K-th key's. From those two histograms every later kernel settles the row's state after two
// digits (T's first 22 bits for f32 at the default digits, 16 at 8-bit ones, all 16 for bf16;
// the keys before T's bin, all wanted): a segment keeps every key at or below T at those bits
// (a superset of its share of the row's top-k) when they fit its K slots, one prefix sum, no
// digit pass; only a segment with more (ties at T) selects its own top K from scratch. The
// merge starts from the row's state and runs the digit passes left (none for bf16). The
// histograms count real keys only, so T's resolved bits can be the padding's (an exact fit in
// the last bin, K = N): these kernels leave padding out by its key, not by the order of keys.
// Exact as above: each level still keeps a superset of the row's top-k in column
// order. Measured on the H200 it is slower (64 x 131072 f32, k = 64: 0.105 against 0.073 ms;
// ncu: the histograms 19 and 28 us, the segments 47, where the plain segment kernel takes ~60):
// each program's fixed costs (the row histograms' loads and scans, the count, the keep pass)
// and the two extra reads of x outweigh the digit passes saved. Kept as an option for plans
// that amortize them (TESSERA_TOPK_ROW_THRESHOLD=1).
//
// From the bucket threshold (Form::bucket_threshold; TopkThreshold::BucketBest, the default on
// cpu and cuda): a threshold from one cheap pass instead of the row's histograms. A kernel
// takes each bucket's best (the smallest key of BUCKET consecutive columns), and the whole-row
// select over the B bests (Form::threshold_out) writes each row's T_hi: the largest key whose
// resolved digits are those of the K-th smallest best (the K-th itself unless the passes
// stopped early).
// At least K distinct elements of the row (K buckets' bests) have keys at or below T_hi, so
// every key of the row's top K does: a segment keeps its keys at or below T_hi where they fit
// its K slots (in column order, as ever), else selects its own top K from scratch, and each
// level keeps a superset of the row's top K as above. Buckets: the largest power of two (up to
// 8192) that leaves at least max(2 K, 1024) of them, so that a random row has about
// B * -ln(1 - K / B) <= 1.39 K keys at or below T (66 at 64 x 131072, k = 64, buckets of 128):
// the merge's real candidates are few as well. More bests cost the select over them (one CTA a
// row, of one tile up to 8192: 1 x 2^24 k = 1024 0.179 -> 0.157 ms from 16384 bests to 2048 on
// the H100), fewer cost the bests' kernel its in-thread `min` (64 x 131072 k = 64: 1024 bests
// 0.056, 256 0.061; bench/RESULTS.md, session 45).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <numeric>

#include "kernels/Kernels.h"
#include "lang/Lang.h"
#include "support/Env.h"

namespace tessera::kernels {

namespace {

// The largest SEGMENT candidate: a longer segment runs the whole-row kernel instead.
constexpr int64_t kMaxTopkSegment = 131072;

}  // namespace

namespace {

// What a kernel of this file reads and writes: the library's topk is the whole-row form; the
// segmented top-k (topk_stages) runs the segment form on x, optionally the segment form on
// candidates, then the candidate form with sorted output (the merge).
struct Form {
  // Reads candidates (values [M, C] and their columns [M, C], -1 where there is none: a
  // padding slot) instead of x [M, N]: each element's column is the one read, and a -1 gets
  // the padding's key.
  bool candidates = false;
  // One program per segment of SEGMENT consecutive elements of a row (grid M x segments): the
  // segment's top-min(K, its length) go unsorted, in column order, to slots [s * K, s * K + K)
  // of outputs [M, W] (W = segments * K), the rest of the K slots get column -1.
  bool segments = false;
  // The row (or segment) is one tile (BLOCK_N >= N, or SEGMENT = BLOCK_N), loaded once.
  bool one_tile = false;
  // Starts from the row's threshold that hist [M, 2 * bins] (the row's histograms of its keys'
  // first digit, and of the second among keys whose first is the row's K-th's:
  // build_row_histogram) settle: a segment keeps every key at or below it (all of them, if
  // at most K, else it selects its top K from scratch), the merge resolves only the digits
  // after the two.
  bool row_threshold = false;
  // A segment form (over x or candidates) that starts from the row's bucket threshold: a key
  // T_hi at or past the K-th smallest of the row's bucket bests (topk_stages'
  // TopkThreshold::BucketBest), read from thr [M, 1] (threshold_out's). A segment keeps every
  // key at or below it where they fit its K slots, else selects its own top K from scratch,
  // as from the row threshold.
  bool bucket_threshold = false;
  // The whole-row form that only finds the row's K-th key T (of the bucket threshold's bests):
  // thr [M, 1] (i32) gets the largest key whose digits match T's resolved ones (T itself, or
  // past it where the passes stopped early: still at least K keys at or below it), no values.
  bool threshold_out = false;
  // The digits' width in bits (0: f32 11, bf16 8; topk_stages' RADIX_BITS).
  int radix_bits = 0;
};

// The radix select's digits over dt's keys, most significant first: by default f32 11, 11 and
// 10 bits, bf16 8 and 8 (`radix_bits` 8: f32 four of 8). The row-threshold histograms settle
// the first two.
struct Digits {
  int key_bits, count, width;
  int64_t bins;
};
Digits digits_of(ScalarKind dt, int radix_bits = 0) {
  const int key_bits = dt == ScalarKind::F32 ? 32 : 16;
  const int width = radix_bits ? radix_bits : (dt == ScalarKind::F32 ? 11 : 8);
  return Digits{key_bits, (key_bits + width - 1) / width, width, int64_t(1) << width};
}
constexpr int kRowDigits = 2;

// A key per element whose ascending order is the values' descending order (the file's comment).
lang::Val radix_key(ScalarKind dt, lang::Val t) {
  using namespace lang;
  if (dt == ScalarKind::F32) {
    Val u = bitcast(t, ScalarKind::U32);
    return where(eq(u >> 31, 0), u ^ 0x7FFFFFFF, u);
  }
  Val u = bitcast(t, ScalarKind::U16).to(ScalarKind::U32);
  return where(eq(u >> 15, 0), u ^ 0x7FFF, u);
}

// The padding's key, past every real key (-inf's is 0xFF800000, or 0xFF80 for bf16; bitcast
// makes every NaN the positive canonical one, whose key is small): columns past the row's end.
lang::Val padding_key(ScalarKind dt) {
  return lang::full({}, dt == ScalarKind::F32 ? 4294967295.0 : 65535.0, ScalarKind::U32);
}

// Where a radix select stands: T's digits found so far (`prefix`, the rest 0), the bit from
// which up they are known (`resolved`), how many keys matching them are still wanted, and
// whether another digit is needed (`refine`: false once T's bin holds exactly the number
// still wanted).
struct SelectState {
  // A select that starts: no digit known, `wanted` keys wanted.
  SelectState(const Digits& g, const lang::Operand& wanted)
      : prefix(lang::zeros({}, ScalarKind::U32)),
        wanted(wanted),
        resolved(lang::full({}, g.key_bits, ScalarKind::U32)),
        refine(lang::full({}, 1, ScalarKind::I1)) {}
  // The same start, assigned (inside a branch: the Vars become its results).
  void restart(const Digits& g, const lang::Operand& w) {
    prefix = lang::zeros({}, ScalarKind::U32);
    wanted = w;
    resolved = lang::full({}, g.key_bits, ScalarKind::U32);
    refine = lang::full({}, 1, ScalarKind::I1);
  }
  lang::Var prefix, wanted, resolved, refine;
};

// Settles one digit (the `nbins` bins at `shift`) from its histogram over the keys matching
// the prefix: T's digit is the first bin whose prefix sum reaches the number still wanted.
// T's bin holds exactly the keys still wanted (no further digit needed) when that prefix sum
// equals the number wanted, that is when some bin's prefix sum does (the sums never fall).
// The three counts (bins before T's, bins whose prefix sum is the number wanted, keys in the
// bins before T's) are fields of one 64-bit sum: one block reduction where there were three,
// the third waiting on the first (bins <= 2048 fit 12 bits each; keys < 2^40 the rest).
void settle_digit(SelectState& s, lang::Val hist, lang::Val shift, int64_t nbins) {
  using namespace lang;
  if (nbins >= 4096) throw TesseraError("topk: a digit of " + std::to_string(nbins) + " bins does not fit settle_digit's 12-bit fields");
  Val cs = cumsum(hist, 0);
  Val before = cs < s.wanted;  // the bins whose keys are all wanted
  Val counts = where(before, (hist.to(ScalarKind::I64) << 24) + 1, 0) + where(eq(cs, s.wanted), 4096, 0).to(ScalarKind::I64);
  Val packed = sum(counts, 0);
  Val bin = (packed & 0xFFF).to(ScalarKind::I32);  // T's digit
  s.wanted = s.wanted - (packed >> 24).to(ScalarKind::I32);
  s.prefix = s.prefix | (bin.to(ScalarKind::U32) << shift);
  s.resolved = shift;
  s.refine = eq((packed >> 12) & 0xFFF, 0);
}

// The row's state after its first `count` digits (at most kRowDigits), from hist's row `row`;
// `s` is a select that starts with the op's K wanted.
void settle_row(SelectState& s, const Digits& g, const lang::View& hist, lang::Val row, int count = kRowDigits) {
  using namespace lang;
  for (int p = 0; p < count; ++p)
    if_(s.refine, [&] {
      Val h = reshape(hist.tile({1, g.bins}).load({row, full({}, p, ScalarKind::I32)}), {g.bins});
      settle_digit(s, h, full({}, g.key_bits - (p + 1) * g.width, ScalarKind::U32), g.bins);
    });
}

std::unique_ptr<Kernel> build_select(ScalarKind dt, const char* name, Form f) {
  using namespace lang;
  KernelBuilder k(name);
  auto x = k.view(f.candidates ? "cand_values" : "x", dt, {"M", f.candidates ? "C" : "N"});
  std::optional<View> cols;
  if (f.candidates) cols = k.view("cand_indices", ScalarKind::I32, {"M", "C"});
  std::optional<View> values, indices, thr_out;
  if (f.threshold_out) {
    thr_out = k.view("thr", ScalarKind::I32, {"M", "one"});
  } else {
    values = k.view(f.segments ? "seg_values" : "values", dt, {"M", f.segments ? "W" : "K"});
    indices = k.view(f.segments ? "seg_indices" : "indices", ScalarKind::I32, {"M", f.segments ? "W" : "K"});
  }
  // K is the output's width: any value from 1 (the size_configs bind it from the sizes).
  auto K = k.constexpr_("K", {}, 64);
  // cuda: one program (CTA) per row; each column tile costs a few barriers (the histogram's),
  // so tiles are long (registers bound them: 8192 f32 at 16 warps).
  auto BN = k.constexpr_("BLOCK_N", {256, 512, 1024, 2048, 4096, 8192}, 8192);
  // The stages' kernels also take 1 or 2 warps (small programs over short segments); the
  // whole-row kernel at 1 warp holds 256 f32 a thread (ptxas: 2.8 KB of stack, 9 s to compile).
  if (f.segments || f.candidates)
    k.constexpr_("num_warps", {1, 2, 4, 8, 16, 32}, 16);
  else
    k.constexpr_("num_warps", {4, 8, 16, 32}, 16);
  // cuda: the ring's copies as cp.async (0: plain copies, each waited for at once).
  k.constexpr_("struct_cp_async", {0, 1}, 1);
  // The segment form's segment length: a multiple of BLOCK_N (topk_stages picks both).
  std::optional<Constexpr> SEG;
  if (f.segments) {
    // cuda: CTAs per SM that __launch_bounds__ asks registers for (0: none asked; the segment
    // kernel at 88 registers runs one 16-warp CTA per SM).
    k.constexpr_("min_blocks", {0, 1, 2, 3, 4}, 0);
    SEG = k.constexpr_("SEGMENT", {256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, kMaxTopkSegment}, 8192);
    k.grid({x.dim(0), cdiv(x.dim(1), *SEG)});
  } else {
    k.grid({x.dim(0)});
  }
  auto row = program_id(0);
  // The segment form: segment `seg` of the row is its tiles t0, t0 + 1, ... (n elements; only
  // a row's last segment is shorter than SEGMENT).
  Val seg, t0;
  if (f.segments) {
    seg = program_id(1);
    t0 = seg * (SEG->val() / BN.val());
  }
  auto at_tile = [&](Val j) { return f.segments ? t0 + j : j; };  // a tile's index in the row
  Val n = f.segments ? minimum(*SEG, x.dim(1) - seg * *SEG) : x.dim(1);
  auto tiles = cdiv(n, BN);
  const Digits g = digits_of(dt, f.radix_bits);
  const int key_bits = g.key_bits, digits = g.count, d = g.width;
  const int64_t bins = g.bins;
  auto key = [&](Val t) { return radix_key(dt, t); };
  std::optional<View> row_hist;
  if (f.row_threshold) row_hist = k.view("hist", ScalarKind::I32, {"M", "H"});
  if (f.bucket_threshold && !f.segments) throw TesseraError("topk: the bucket threshold is a segment form's");
  std::optional<View> thr;
  if (f.bucket_threshold) thr = k.view("thr", ScalarKind::I32, {"M", "one"});
  Val pad_key = padding_key(dt);
  // A loop over the row (or segment): body(j, tile j, its keys, its columns; the columns are
  // only given in the candidate form, else null).
  using Body = std::function<void(Val, Val, Val, Val)>;
  std::function<void(const Body&)> over_row;
  if (f.one_tile) {
    // The row (or segment) is one tile: read once before the passes, which then work on
    // registers (the ring below would copy it again for every pass).
    Val j0 = full({}, 0, ScalarKind::I32);
    Val t = reshape(x.tile({1, BN}).load({row, at_tile(j0)}), {BN});
    Val c, kk;
    if (f.candidates) {
      c = reshape(cols->tile({1, BN}).load({row, at_tile(j0)}, -1), {BN});
      kk = where(c < 0, pad_key, key(t));
    } else {
      kk = where(arange(BN) < n, key(t), pad_key);
    }
    over_row = [=](const Body& body) { body(j0, t, kk, c); };
  } else if (f.candidates) {
    // Candidates are few beside the row (K per segment): plain loads, the values with their
    // columns; a -1 column (a padding slot, or past C) gets pad_key.
    over_row = [&](const Body& body) {
      for_range(0, tiles, 1, [&](Val j) {
        Val t = reshape(x.tile({1, BN}).load({row, at_tile(j)}), {BN});
        Val c = reshape(cols->tile({1, BN}).load({row, at_tile(j)}, -1), {BN});
        body(j, t, where(c < 0, pad_key, key(t)), c);
      });
    };
  } else {
    // The row's column tiles reach shared memory through a ring of asynchronous copies, two
    // groups of RING_GROUP slots: while the tiles of one group are worked on, the next group's
    // copies are in flight, more bytes than registers could hold (RING_GROUP * BLOCK_N
    // elements; cuda: 2 * RING_GROUP * BLOCK_N elements of shared memory, 128 KiB for f32 at the
    // defaults). The copies pad with 0 (cp.async zero-fills), so the last tile's columns past N
    // get pad_key.
    auto G = k.constexpr_("RING_GROUP", {1, 2, 3}, 2);
    Buffer ring = alloc_shared(dt, {Dim(2) * Dim(G), 1, BN});
    auto groups = cdiv(tiles, G);
    over_row = [&, G, ring, groups](const Body& body) {
      for_range(0, G, 1, [&](Val i) { ring.copy({i}, x.tile({1, BN}), {row, at_tile(i)}); });
      for_range(0, groups, 1, [&](Val g) {
        async_wait();
        Val half = (g % 2) * G;
        if_(g + 1 < groups, [&] {
          for_range(0, G, 1,
                    [&](Val i) { ring.copy({(G - half) + i}, x.tile({1, BN}), {row, at_tile((g + 1) * G + i)}); });
        });
        for_range(0, minimum(G, tiles - g * G), 1, [&](Val i) {
          Val j = g * G + i;
          Val t = reshape(ring.read({half + i}), {BN});
          Val kk = key(t);
          kk = if_(
              eq(j, tiles - 1), [&] { return where(arange(BN) + j * BN < n, kk, pad_key); }, [&] { return kk; });
          body(j, t, kk, Val());
        });
      });
    };
  }

  SelectState st(g, K);
  Var &prefix = st.prefix, &wanted = st.wanted, &resolved = st.resolved, &refine = st.refine;
  // How many of the keys matching `prefix` are still wanted: K, or a segment's length if less
  // (from the row or bucket threshold, the row's K to start, and the segment's own only from
  // scratch).
  if (f.segments && !f.row_threshold && !f.bucket_threshold) wanted = minimum(K, n);
  // One pass: the digit of `nbins` bins below bit `high` (0 <= shift = high - log2(nbins)).
  auto pass = [&](Val high, Val shift, int64_t nbins) {
    Var hist = zeros({nbins}, ScalarKind::I32);
    over_row([&](Val, Val, Val kk, Val) {
      Val digit = ((kk >> shift) & (nbins - 1)).to(ScalarKind::I32);
      // The first pass counts every key (a shift by the key's width or more gives 0).
      digit = where(eq(kk >> high, prefix >> high), digit, -1);
      hist = hist + histogram(digit, nbins);
    });
    settle_digit(st, hist, shift, nbins);
  };
  // The passes from digit `first` on. They are one loop, so NVRTC compiles the pass once (f32
  // topk: 1.35 -> 0.8 s of CPU on sm_80). Pass p takes the d bits below bit key_bits - p * d;
  // the last f32 pass, where 10 remain, reads bits 0..10, and bit 10 (resolved by the pass
  // before) is the same in every key it counts. TESSERA_TOPK_UNROLLED_PASSES=1 writes one copy
  // per pass instead, each its exact width (the former code; the A/B switch of
  // tools/h200-nvcold-check).
  auto passes = [&](int first) {
    if (first >= digits) return;
    if (env_flag("TESSERA_TOPK_UNROLLED_PASSES")) {
      for (int p = first, high = key_bits - first * d; p < digits; ++p) {
        const int width = std::min(d, high), shift = high - width;
        auto at = [](int64_t v) { return full({}, double(v), ScalarKind::U32); };
        if_(refine, [&] { pass(at(high), at(shift), int64_t(1) << width); });
        high = shift;
      }
    } else {
      for_range(int64_t(first), int64_t(digits), 1, [&](Val p) {
        if_(refine, [&] {
          Val high = (key_bits - p * d).to(ScalarKind::U32);
          pass(high, maximum(high, d) - d, bins);
        });
      });
    }
  };
  if (f.threshold_out) {
    passes(0);
    // (A shift by 32, no digit resolved, cannot happen: the first pass always runs.)
    Val mask = (full({}, 1, ScalarKind::U32) << resolved) - 1;
    thr_out->tile({1, 1}).store({row, 0}, splat(bitcast(prefix | mask, ScalarKind::I32), {1, 1}));
    return k.finish();
  }
  // The keep pass: keep the keys below T and the first `wanted` equal to it (at the resolved
  // digits), scattered in column order to the output row (or the segment's slots) with their
  // columns; `kept` counts them.
  Var kept = 0, kept_equal = 0;
  auto keep_pass = [&] {
    Val T = prefix >> resolved;
    over_row([&](Val j, Val t, Val keys, Val c) {
      Val kk = keys >> resolved;
      Val equal = eq(kk, T);
      Val below = kk < T;
      if (f.row_threshold || f.bucket_threshold) {
        // The row's state comes from histograms of the real keys only, so T's resolved bits can
        // be the padding's (an exact fit in the last bin: K = N, -inf or -2^127 and below, 8-bit
        // digits): padding (past n, or column -1) is left out by its key, which no real key has
        // (bitcast makes every NaN the positive canonical one).
        Val real = ne(keys, pad_key);
        equal = equal & real;
        below = below & real;
      }
      // The tile's equal and below keys counted in one reduction (16-bit fields: BLOCK_N <=
      // 8192), and so how many it keeps without a reduction of its own over the keep flags.
      Val counts = sum(where(equal, 1, 0) + where(below, 1 << 16, 0), 0);
      Val n_equal = counts & 0xFFFF, n_below = counts >> 16;
      // Usually every equal key of the tile is wanted (always when the passes stopped early);
      // only a tile where the equal keys run past `wanted` ranks them.
      Val keep = if_(
          kept_equal + n_equal <= wanted, [&] { return below | equal; },
          [&] {
            Val rank = cumsum(equal.to(ScalarKind::I32), 0) + kept_equal;  // 1-based among the equal keys
            return below | (equal & (rank <= wanted));
          });
      Val at = cumsum(keep.to(ScalarKind::I32), 0) + (kept - 1);
      if (f.segments) at = at + seg * K;  // the segment's slots
      scatter(*values, t, {row, at}, keep);
      scatter(*indices, f.candidates ? c : arange(BN) + at_tile(j) * BN, {row, at}, keep);
      // The equal keys kept: those ranked at most `wanted`, all of them in the first branch.
      kept = kept + n_below + minimum(n_equal, maximum(wanted - kept_equal, 0));
      kept_equal = kept_equal + n_equal;
    });
  };
  if (!f.row_threshold && !f.bucket_threshold) {
    passes(0);
    keep_pass();
  } else if (!f.segments) {
    // The merge: its candidates hold every key of the row's top K, so the row's state holds.
    settle_row(st, g, *row_hist, row);
    passes(kRowDigits);
    keep_pass();
  } else {
    // A segment keeps every key at or below the row's threshold T (at the digits the row's
    // histograms resolved, or all of the bucket threshold's: every key of the row's top K is
    // one) where they fit its K slots; else (many keys equal to T at those digits: ties) its
    // own top K, from scratch.
    if (f.bucket_threshold) {
      prefix = bitcast(item(thr->tile({1, 1}).load({row, 0})), ScalarKind::U32);
      resolved = zeros({}, ScalarKind::U32);
    } else {
      settle_row(st, g, *row_hist, row);
    }
    Val T = prefix >> resolved;
    auto at_or_below = [&](Val kk) { return ((kk >> resolved) <= T) & ne(kk, pad_key); };
    Var count = 0;
    over_row([&](Val, Val, Val kk, Val) { count = count + sum(at_or_below(kk).to(ScalarKind::I32), 0); });
    if_(
        count > K,
        [&] {
          st.restart(g, minimum(K, n));
          passes(0);
          keep_pass();
        },
        [&] {
          // Every key at or below T, in column order: no ranking of equal keys, no counts (a
          // segment from the bucket threshold usually keeps a few of thousands: the scatters
          // below skip most of their work).
          over_row([&](Val j, Val t, Val kk, Val c) {
            Val keep = at_or_below(kk);
            Val at = cumsum(keep.to(ScalarKind::I32), 0) + (kept - 1) + seg * K;
            scatter(*values, t, {row, at}, keep);
            scatter(*indices, f.candidates ? c : arange(BN) + at_tile(j) * BN, {row, at}, keep);
            if (!f.one_tile) kept = kept + sum(keep.to(ScalarKind::I32), 0);
          });
          kept = count;
        });
  }
  if (f.segments) {
    // The segment's slots past its kept elements (a segment shorter than K) get column -1:
    // other addresses than the scatters' above, so no order between them is needed.
    Val r = arange(K);
    scatter(*indices, full({K}, -1, ScalarKind::I32), {row, r + seg * K}, r >= kept);
    return k.finish();
  }
  Sorted best = sort_pairs(values->tile({1, K}).load({row, 0}), indices->tile({1, K}).load({row, 0}), 1, true);
  values->tile({1, K}).store({row, 0}, best.values);
  indices->tile({1, K}).store({row, 0}, best.indices);
  return k.finish();
}

// The row threshold's histograms (Form::row_threshold) in hist [M, 2 * bins], one kernel each:
// `which` = -1 clears them; 0 adds each program's histogram of its tile's first digits to its
// row's first bins (atomics: a row's programs share them); 1 adds that of the second digits of
// the keys whose first digit is the row's K-th key's (settled from the first bins) to the
// second bins, nothing where the first digit settled the row.
std::unique_ptr<Kernel> build_row_histogram(ScalarKind dt, const char* name, int which, int radix_bits) {
  using namespace lang;
  KernelBuilder k(name);
  const Digits g = digits_of(dt, radix_bits);
  if (which < 0) {
    auto hist = k.view("hist", ScalarKind::I32, {"M", "H"});
    k.grid({hist.dim(0)});
    hist.tile({1, kRowDigits * g.bins}).store({program_id(0), 0}, zeros({1, kRowDigits * g.bins}, ScalarKind::I32));
    return k.finish();
  }
  auto x = k.view("x", dt, {"M", "N"});
  auto hist = k.view("hist", ScalarKind::I32, {"M", "H"});
  std::optional<Constexpr> K;  // the second digit's kernel settles the first for K wanted
  if (which == 1) K = k.constexpr_("K", {}, 64);
  auto BN = k.constexpr_("BLOCK_N", {256, 512, 1024, 2048, 4096, 8192}, 8192);
  k.constexpr_("num_warps", {1, 2, 4, 8, 16, 32}, 16);
  k.grid({x.dim(0), cdiv(x.dim(1), BN)});
  Val row = program_id(0), j = program_id(1);
  Val kk = radix_key(dt, reshape(x.tile({1, BN}).load({row, j}), {BN}));
  Val real = arange(BN) + j * BN < x.dim(1);
  auto add = [&](Val counted) {
    Val shift = full({}, g.key_bits - (which + 1) * g.width, ScalarKind::U32);
    Val digit = where(counted, ((kk >> shift) & (g.bins - 1)).to(ScalarKind::I32), -1);
    Val h = histogram(digit, g.bins);
    atomic_add(hist, h, {row, arange(g.bins) + which * g.bins}, h > 0);
  };
  if (which == 0) {
    add(real);
  } else {
    SelectState s(g, *K);
    settle_row(s, g, hist, row, 1);
    if_(s.refine, [&] {
      Val high = full({}, g.key_bits - g.width, ScalarKind::U32);
      add(real & eq(kk >> high, s.prefix >> high));
    });
  }
  return k.finish();
}

// The value whose key (radix_key) is `key`: radix_key undone (it is its own inverse on the
// key's bits: the sign bit tells a flipped key from a kept one).
lang::Val key_value(ScalarKind dt, lang::Val key) {
  using namespace lang;
  if (dt == ScalarKind::F32) return bitcast(where(eq(key >> 31, 0), key ^ 0x7FFFFFFF, key), ScalarKind::F32);
  return bitcast(where(eq(key >> 15, 0), key ^ 0x7FFF, key).to(ScalarKind::U16), ScalarKind::BF16);
}

// The bucket threshold's first kernel (TopkThreshold::BucketBest): best [M, B] gets, for each
// bucket of BUCKET consecutive columns of x (B = cdiv(N, BUCKET); the last one may be short),
// its first element in topk's order: the smallest key, as a value. The K-th largest of a row's
// bests (the whole-row select over best) is T: K distinct elements of the row have keys at or
// below T's (the K buckets' bests), so every key of the row's top K does.
//
// `sampled`: each bucket's best of its first SAMPLE columns only (a gather of [BN / BUCKET,
// SAMPLE]): still a distinct element of the row per bucket, so T stays exact, only lower (more
// keys at or below T_hi for the segments to keep), for SAMPLE / BUCKET of the reads.
std::unique_ptr<Kernel> build_bucket_best(ScalarKind dt, const char* name, bool sampled) {
  using namespace lang;
  KernelBuilder k(name);
  auto x = k.view("x", dt, {"M", "N"});
  auto best = k.view("best", dt, {"M", "B"});
  auto BN = k.constexpr_("BLOCK_N", {256, 512, 1024, 2048, 4096, 8192, 16384, 32768}, 8192);
  auto BK = k.constexpr_("BUCKET", {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192}, 128);
  k.constexpr_("num_warps", {4, 8, 16}, 8);
  k.grid({x.dim(0), cdiv(x.dim(1), BN)});
  Val row = program_id(0), j = program_id(1);
  // Columns past N get the padding's key (every bucket's first column is a real one, so none
  // is a best).
  Val pad_key = padding_key(dt);
  Val bests;
  if (!sampled) {
    Val kk = where(arange(BN) + j * BN < x.dim(1), radix_key(dt, reshape(x.tile({1, BN}).load({row, j}), {BN})), pad_key);
    bests = min(reshape(kk, {Dim(BN) / Dim(BK), BK}), 1);
  } else {
    auto S = k.constexpr_("SAMPLE", {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048}, 32);
    Val col = expand_dims(arange(Dim(BN) / Dim(BK)) * BK + j * BN, 1) + expand_dims(arange(S), 0);
    Val real = col < x.dim(1);
    bests = min(where(real, radix_key(dt, gather(x, {row, col}, real)), pad_key), 1);
  }
  // (Buckets past B, in the row's last tile, fall outside the view: not stored.)
  best.tile({1, Dim(BN) / Dim(BK)}).store({row, j}, reshape(key_value(dt, bests), {1, Dim(BN) / Dim(BK)}));
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

LibraryStages topk_stages(ScalarKind dt, int64_t M, int64_t N, int64_t K, int64_t segment, int64_t merge_limit,
                          const std::map<std::string, int64_t>& given, int64_t candidate_tile, TopkThreshold threshold) {
  LibraryStages st;
  const bool row_threshold = threshold == TopkThreshold::RowHistograms;
  // RADIX_BITS (given): the digits' width of every select of the plan (8 or 11; bf16 8 only).
  int radix = 0;
  if (auto it = given.find("RADIX_BITS"); it != given.end()) {
    radix = it->second == 8 || it->second == 11 ? int(it->second) : 0;
    if (!(radix == 8 || (radix == 11 && dt == ScalarKind::F32)))
      throw TesseraError("topk: RADIX_BITS = " + std::to_string(it->second) + ": 8, or 11 for f32");
  }
  if (segment <= 0 || N <= segment || K > N) return st;
  // cuda: the segments are the grid's y extent (at most 65535). Longer than the largest SEGMENT
  // candidate (131072: k above 16384, or rows past 2^33): the whole-row kernel.
  while ((N + segment - 1) / segment > 65535) segment *= 2;
  if (segment > kMaxTopkSegment) return st;
  auto pow2_at_least = [](int64_t v, int64_t lo) { return std::max(lo, int64_t(std::bit_ceil(uint64_t(v)))); };
  // Level 1: the segment form over x. Its tile is the segment's (or 8192 when longer: the
  // whole-row kernel's), BLOCK_N, num_warps, RING_GROUP, struct_cp_async and min_blocks as given.
  std::map<std::string, int64_t> c1{{"K", K}, {"BLOCK_N", std::min<int64_t>(segment, 8192)}};
  for (const char* knob : {"BLOCK_N", "num_warps", "RING_GROUP", "struct_cp_async", "min_blocks"})
    if (auto it = given.find(knob); it != given.end()) c1[knob] = it->second;
  segment = std::max(segment, c1["BLOCK_N"]);
  c1["SEGMENT"] = segment;
  // A segment of one tile is read once, into registers (no ring).
  const bool one_tile = segment == c1["BLOCK_N"];
  if (one_tile) c1.erase("RING_GROUP");
  // cuda: two 16-warp CTAs of the f32 one-tile segment kernel per SM (ptxas holds it to 64
  // registers, from 88; 8 bytes of stack): it is latency-bound at one CTA per SM (issue slots
  // ~46% busy). 64 x 131072 f32: 0.097 -> 0.073 ms at k = 64, 0.137 -> 0.113 at k = 1024
  // (bench/RESULTS.md, session 31). bf16 (64 registers already) ran 5% slower with it; the ring
  // form (segments over 8192: k >= 2048) needs 136 KiB of shared memory, so one CTA per SM
  // whatever the registers, and the cap only spilled.
  if (one_tile && dt == ScalarKind::F32 && !given.count("min_blocks") && !given.count("num_warps")) c1["min_blocks"] = 2;
  auto temporaries = [&](int64_t width) {
    st.temporaries.push_back({dt, {M, width}});
    st.temporaries.push_back({ScalarKind::I32, {M, width}});
    return -1 - int(st.temporaries.size() - 2);  // the values' argument; the columns' is one less
  };
  // The row threshold: the row's histograms of its first two digits (Form::row_threshold),
  // cleared, then counted over tiles of 8192 (or the segment, if shorter), as the last
  // argument of every select stage after them.
  std::vector<int> hist;
  if (row_threshold) {
    st.temporaries.push_back({ScalarKind::I32, {M, kRowDigits * digits_of(dt, radix).bins}});
    hist = {-int(st.temporaries.size())};
    st.stages.push_back({[radix](ScalarKind d) { return build_row_histogram(d, "topk_histogram_clear", -1, radix); }, {}, hist});
    const std::map<std::string, int64_t> ch{{"BLOCK_N", std::min<int64_t>(segment, 8192)}};
    std::map<std::string, int64_t> cl = ch;
    cl["K"] = K;
    st.stages.push_back({[radix](ScalarKind d) { return build_row_histogram(d, "topk_histogram_high", 0, radix); }, ch, {0, hist[0]}});
    st.stages.push_back({[radix](ScalarKind d) { return build_row_histogram(d, "topk_histogram_low", 1, radix); }, cl, {0, hist[0]}});
  }
  // The bucket threshold (the file's comment): a kernel writes each bucket's best
  // (build_bucket_best), the whole-row select over them (one tile where the bests fit one;
  // threshold_out) each row's T_hi, the last argument of every segment stage after them.
  // Buckets of the largest power of two up to 8192 that leaves at least topk_bucket_bests(K)
  // of them (none: no threshold). Given BUCKET_SAMPLE = S (0, the default: whole buckets),
  // each bucket's best is of its first S columns only (a gather): S / BUCKET of the row's
  // reads for a T that lets a few times more keys through to the segments, which keep them
  // with one prefix sum while they fit (random rows, 131072 columns, k = 64, buckets of 128:
  // 242 keys a row at or above T from samples of 32, 66 from whole buckets). Not the default:
  // on cpu the gather's scalar loads cost more than the reads they save (2 cores, 64 x 131072
  // f32 k = 64: 9.4-9.8 ms whole, 15.3-15.7 sampled by 32, 11.2-13.5 by 64); not yet timed on
  // a GPU (bench/session46_gpu.sh). The bests' kernel reads 2048 elements a CTA on 4 warps (or
  // one bucket's, if more): many CTAs, whose loads overlap others' reductions (64 x 131072
  // k = 64 on the H100: 0.056 -> 0.053 ms against tiles of 8192 on 8 warps, a single wave).
  std::vector<int> thr;
  if (threshold == TopkThreshold::BucketBest) {
    int64_t bucket = 1;
    while (bucket < 8192 && N / (2 * bucket) >= topk_bucket_bests(K)) bucket *= 2;
    int64_t sample = 0;
    if (auto it = given.find("BUCKET_SAMPLE"); it != given.end()) {
      sample = it->second;
      if (sample != 0 && (sample < 1 || sample > 2048 || !std::has_single_bit(uint64_t(sample))))
        throw TesseraError("topk: BUCKET_SAMPLE = " + std::to_string(sample) +
                           ": 0 (whole buckets) or a power of two up to 2048");
    }
    const bool sampled = sample > 0 && sample < bucket;
    if (bucket >= 2) {
      const int64_t buckets = (N + bucket - 1) / bucket;
      // (2048 elements read a CTA: of every bucket, or of its sample)
      const int64_t read = sampled ? sample : bucket;
      const int64_t bn = std::max(bucket, std::min({2048 * bucket / read, int64_t(32768), pow2_at_least(N, 256)}));
      std::map<std::string, int64_t> cb{{"BLOCK_N", bn}, {"BUCKET", bucket}, {"num_warps", 4}};
      if (sampled) cb["SAMPLE"] = sample;
      st.temporaries.push_back({dt, {M, buckets}});
      const int best = -int(st.temporaries.size());
      st.stages.push_back({[sampled](ScalarKind d) { return build_bucket_best(d, "topk_bucket_best", sampled); }, cb, {0, best}});
      const int64_t sel_bn = std::min<int64_t>(8192, pow2_at_least(buckets, 256));
      const Form sel{.one_tile = sel_bn >= buckets, .threshold_out = true, .radix_bits = radix};
      st.temporaries.push_back({ScalarKind::I32, {M, 1}});
      thr = {-int(st.temporaries.size())};
      st.stages.push_back({[sel](ScalarKind d) { return build_select(d, sel.one_tile ? "topk_bucket_select_tile" : "topk_bucket_select", sel); },
                           {{"K", K}, {"BLOCK_N", sel_bn}}, {best, thr[0]}});
    }
  }
  // A select stage of `form` (the plan's row threshold and digits) on arguments `a` (and hist,
  // or thr for a segment form, last), named `plain`, or `at_threshold` from the row threshold
  // ("_bkt" inserted after "topk" from the bucket threshold), "_tile" added for one tile.
  auto add_select = [&](const std::string& plain, const std::string& at_threshold, Form form,
                        std::map<std::string, int64_t> config, std::vector<int> a) {
    form.row_threshold = row_threshold;
    form.bucket_threshold = !thr.empty() && form.segments;
    form.radix_bits = radix;
    const std::string name = (row_threshold ? at_threshold : form.bucket_threshold ? "topk_bkt" + plain.substr(4) : plain) +
                             (form.one_tile ? "_tile" : "");
    a.insert(a.end(), hist.begin(), hist.end());
    if (form.bucket_threshold) a.insert(a.end(), thr.begin(), thr.end());
    st.stages.push_back({[form, name](ScalarKind d) { return build_select(d, name.c_str(), form); }, std::move(config), std::move(a)});
  };
  int64_t width = (N + segment - 1) / segment * K;
  int out = temporaries(width);
  add_select("topk_segments", "topk_thr_segments", {.segments = true, .one_tile = one_tile}, c1, {0, out, out - 1});
  // The candidate forms' tile: a segment (or the merge's row) of at most candidate_tile
  // candidates is one tile, else tiles of min(candidate_tile, 4096) (values and columns).
  auto candidate_config = [&](int64_t len) {
    const int64_t one = pow2_at_least(len, 256);
    return std::map<std::string, int64_t>{{"K", K}, {"BLOCK_N", one <= candidate_tile ? one : std::min<int64_t>(candidate_tile, 4096)}};
  };
  // Further levels over the candidates while there are more than merge_limit a row and a level
  // shrinks them at least 4x (segments of at least 4K candidates).
  while (width > merge_limit && 4 * K <= segment && width >= 2 * segment) {
    std::map<std::string, int64_t> c = candidate_config(segment);
    c["SEGMENT"] = segment;
    const bool one = c["BLOCK_N"] == segment;
    int64_t next = (width + segment - 1) / segment * K;
    int in = out;
    out = temporaries(next);
    add_select("topk_segments_candidates", "topk_thr_candidates", {.candidates = true, .segments = true, .one_tile = one}, c,
               {in, in - 1, out, out - 1});
    width = next;
  }
  // The merge: the candidate form with the sorted output, into the op's values and indices.
  std::map<std::string, int64_t> cm = candidate_config(width);
  const bool merge_one = cm["BLOCK_N"] >= width;
  add_select("topk_merge", "topk_thr_merge", {.candidates = true, .one_tile = merge_one}, cm, {out, out - 1, 1, 2});
  return st;
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
  k.build = [](ScalarKind dt) { return build_select(dt, "topk", {}); };
  k.reference = [](std::vector<KernelArg>& args, const Sizes& s) {
    sorted_rows_reference(args, s.at("M"), s.at("N"), s.at("K"), true);
  };
  // K is the output's width, so it follows the sizes.
  k.size_configs = [](ScalarKind, const std::string&, const Sizes& s, const std::map<std::string, int64_t>&) {
    return std::map<std::string, int64_t>{{"K", s.at("K")}};
  };
  // On cuda, rows of at least four segments (8192 columns, or 8K when more), fewer rows than
  // fill a GPU several times over, run as the segmented top-k (topk_stages) from the bucket
  // threshold, in segments of 4096 where K <= 1024 (else 8 K). On cpu, rows of at least four
  // segments (so 32 K columns and more: a segment is at least 8 K) run it from the bucket
  // threshold too, however many rows (the interpreter keeps the whole-row kernel): each element
  // then costs one pass that finds its bucket's best and one that compares it with T, where the
  // whole-row kernel's digit passes read it three times (2 cores, 64 x 131072 f32: 8.7-10 ms
  // against 19-25 at k = 64, 17-18 against 23-25 at k = 1024; 4096 x 65536, k = 32: 308
  // against 642; bench/RESULTS.md, session 44). Without it the segments cost more on cpu (92
  // ms against 63 in session 31). On the H100 (session 45, cuda_bench against the plain segments of 8192) it
  // wins at every shape of issue 18 (1.07-1.8x: f32 64 x 131072 k = 64 0.0723 -> 0.0612 ms,
  // k = 1024 0.112 -> 0.105, 1 x 2^24 0.225 -> 0.149) once a segment that fits keeps its keys
  // with one prefix sum: the segment kernel 65 -> 23 us at 64 x 131072 k = 64 (ncu). TESSERA_TOPK_SEGMENT=S
  // sets the segment length on any backend (0: never); TESSERA_TOPK_BUCKET_THRESHOLD=1 or 0
  // turns the bucket threshold on or off wherever the stages run (on the interpreter only with
  // TESSERA_TOPK_SEGMENT); TESSERA_TOPK_ROW_THRESHOLD=1 takes the row histograms instead (and
  // on cpu, like =0, leaves the stages to TESSERA_TOPK_SEGMENT); TESSERA_TOPK_BUCKET_SAMPLE=S
  // sets the bests' sampled columns a bucket (0: whole buckets).
  k.stages = [](ScalarKind dt, const std::string& target, const Sizes& s, const std::map<std::string, int64_t>& given) {
    const int64_t M = s.at("M"), N = s.at("N"), K = s.at("K");
    const bool cuda = target.rfind("cuda:", 0) == 0;
    const bool row_threshold = env_flag("TESSERA_TOPK_ROW_THRESHOLD");
    const std::optional<int64_t> bucket_env = env_int("TESSERA_TOPK_BUCKET_THRESHOLD");
    if (bucket_env && *bucket_env != 0 && *bucket_env != 1)
      throw TesseraError("TESSERA_TOPK_BUCKET_THRESHOLD = " + std::to_string(*bucket_env) + ": 0 (off) or 1 (on)");
    const bool bucket = !row_threshold && (bucket_env ? *bucket_env == 1 : cuda || target == "cpu");
    int64_t segment = std::max<int64_t>(8192, int64_t(std::bit_ceil(uint64_t(8 * K))));
    if (const std::optional<int64_t> e = env_int("TESSERA_TOPK_SEGMENT")) {
      segment = *e;
      if (segment != 0 && (segment < 256 || segment > kMaxTopkSegment || !std::has_single_bit(uint64_t(segment))))
        throw TesseraError("TESSERA_TOPK_SEGMENT = " + std::to_string(segment) +
                           ": 0 (the whole-row kernel) or a power of two from 256 to " + std::to_string(kMaxTopkSegment));
    } else if (N < 4 * segment || (cuda ? M >= 1024 : target != "cpu" || !bucket)) {
      segment = 0;
    } else if (cuda && bucket && K <= 1024) {
      // From the bucket threshold a segment usually keeps a few keys (one prefix sum): shorter
      // segments, twice the CTAs, hide more of each one's load (64 x 131072 k = 64 on the H100:
      // 0.055 ms at 4096, 0.079 at 8192, 0.066 at 2048; session 45). Larger K keep theirs: a
      // segment writes K slots, and at 4096 the merge would need levels (not measured).
      segment = 4096;
    }
    // At most 8192 candidates a row for the merge: one tile, read once (64 x 131072, k = 1024:
    // a level of two segments a row, 16384 -> 2048, rather than one CTA a row over 16384).
    // TESSERA_TOPK_ROW_THRESHOLD=1: the stages start from the row threshold (slower on the
    // H200: 0.105 against 0.073 ms at 64 x 131072 f32 k = 64; bench/RESULTS.md, session 32).
    // TESSERA_TOPK_RADIX_BITS=B and TESSERA_TOPK_SEGMENT_WARPS=W: the stages' RADIX_BITS and
    // the segment kernel's num_warps where the caller gives none (the CLI's --config checks a
    // value against the whole-row kernel, which has no RADIX_BITS and takes 4 warps or more).
    std::map<std::string, int64_t> g = given;
    if (!g.count("RADIX_BITS"))
      if (const std::optional<int64_t> e = env_int("TESSERA_TOPK_RADIX_BITS")) g["RADIX_BITS"] = *e;
    if (!g.count("num_warps"))
      if (const std::optional<int64_t> e = env_int("TESSERA_TOPK_SEGMENT_WARPS")) g["num_warps"] = *e;
    if (!g.count("BUCKET_SAMPLE"))
      if (const std::optional<int64_t> e = env_int("TESSERA_TOPK_BUCKET_SAMPLE")) g["BUCKET_SAMPLE"] = *e;
    const TopkThreshold threshold =
        row_threshold ? TopkThreshold::RowHistograms : bucket ? TopkThreshold::BucketBest : TopkThreshold::None;
    return topk_stages(dt, M, N, K, segment, 8192, g, 8192, threshold);
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
