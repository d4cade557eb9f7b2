// The segmented top-k (issue 18): topk's stages (a segment top-k per program, levels over the
// candidates, a merge) run on the interpreter and the cpu backend against the reference, exact
// on ties (smaller column first), NaN, -0 and infinities across segment boundaries; and the
// rule that picks the stages.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "check/Compare.h"
#include "cpu/CpuBackend.h"
#include "interp/Interpreter.h"
#include "kernels/Kernels.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "../common/ScopedEnv.h"
#include "../common/TopkStages.h"

namespace tessera {
namespace {

struct StagesCase {
  ScalarKind dtype;
  int64_t M, N, K, segment, merge_limit;
  size_t stages;  // how many kernels the plan must have
  bool few_values;  // rows drawn from NaN, +-inf, +-0 and a few ties; else random
  // The first level's BLOCK_N (0: the segment, one tile) and the candidate forms' largest one
  // tile (smaller: their multi-tile loops).
  int64_t block_n = 0, candidate_tile = 8192;
  int64_t radix_bits = 0;  // RADIX_BITS given (0: none, the dtype's default)
  // 1: K values of 1000 and up planted over a random row, one in each of K buckets: their keys
  // share the first digit's bin and no other key does, so the bucket threshold's select stops
  // after one digit. 2: K values from -1 up planted over a row of values in [-10, -2], so that a
  // best of 0 (a padding column read as a value) would rank above every one of them.
  int planted = 0;
  int64_t bucket_sample = 0;  // BUCKET_SAMPLE given (0: none, whole buckets)
};

// Runs topk's stages on `backend` ("interp" or "cpu") on the op's tensors.
void run_stages(const LibraryStages& st, ScalarKind dt, std::vector<KernelArg>& op, const std::string& backend) {
  testutil::run_topk_stages(st, dt, op, [&](const Kernel& bound, std::vector<KernelArg>& a) {
    if (backend == "cpu") compile_cpu(bound)->run(a);
    else run_interp(bound, a);
  });
}

// `threshold`: the stages start from the row's digit histograms (three kernels more) or its
// bucket threshold (two more, where a row has 2 * topk_bucket_bests(K) columns or more).
void check_stages(const StagesCase& c, const std::string& backend, uint64_t seed, kernels::TopkThreshold threshold) {
  using kernels::TopkThreshold;
  SCOPED_TRACE(backend + " " + std::string(scalar_name(c.dtype)) + " M=" + std::to_string(c.M) +
               " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) + " segment=" + std::to_string(c.segment) +
               " threshold=" + std::to_string(int(threshold)));
  const LibraryKernel* lk = find_library_kernel("topk");
  std::map<std::string, int64_t> given;
  if (c.block_n) given["BLOCK_N"] = c.block_n;
  if (c.radix_bits) given["RADIX_BITS"] = c.radix_bits;
  if (c.bucket_sample) given["BUCKET_SAMPLE"] = c.bucket_sample;
  LibraryStages st =
      kernels::topk_stages(c.dtype, c.M, c.N, c.K, c.segment, c.merge_limit, given, c.candidate_tile, threshold);
  const size_t before = threshold == TopkThreshold::RowHistograms ? 3
                        : threshold == TopkThreshold::BucketBest && c.N / 2 >= kernels::topk_bucket_bests(c.K) ? 2
                                                                                     : 0;
  ASSERT_EQ(st.stages.size(), c.stages + before);
  Sizes sizes{{"M", c.M}, {"N", c.N}, {"K", c.K}};
  auto op = bind_constexprs(*lk->build(c.dtype), {{"K", c.K}});
  std::vector<Tensor> got = make_random_tensors(*op, sizes, seed);
  if (c.few_values) testutil::fill_few_values(got[0], seed);
  if (c.planted == 2)
    for (int64_t e = 0; e < got[0].numel(); ++e) got[0].set(e, -2.0 - double((e * 7919) % 800) / 100);
  if (c.planted)
    for (int64_t r = 0; r < c.M; ++r)
      for (int64_t i = 0; i < c.K; ++i)
        got[0].set(r * c.N + i * (c.N / c.K) + r, c.planted == 1 ? 1000.0 + double(i) / 4 : -1.0 + double(i) / 64);
  std::vector<Tensor> want = got;
  std::vector<KernelArg> ga = make_args(*op, got, sizes), wa = make_args(*op, want, sizes);
  run_stages(st, c.dtype, ga, backend);
  lk->reference(wa, sizes);
  Comparison cmp = compare_outputs(*op, got, want);
  EXPECT_TRUE(cmp.ok()) << cmp.mismatches << "/" << cmp.elements << " first: " << cmp.first_mismatch;
}

// Ragged rows (the last segment short), K above a segment's length (segments padded with
// column -1), K = N, a level over the candidates (whose last segments hold padding slots), and
// rows of a handful of values: ties everywhere, across every segment boundary; segments and
// candidate rows of one tile (read once) and of several.
const StagesCase kCases[] = {
    {ScalarKind::F32, 3, 1000, 37, 256, 1 << 20, 2, false},
    {ScalarKind::F32, 2, 1100, 100, 256, 1 << 20, 2, true},
    {ScalarKind::BF16, 2, 777, 300, 256, 1 << 20, 2, false},
    {ScalarKind::F32, 2, 600, 600, 256, 1 << 20, 2, true},
    {ScalarKind::F32, 2, 2830, 60, 256, 300, 3, true},
    {ScalarKind::BF16, 2, 2830, 60, 256, 300, 3, true},
    {ScalarKind::F32, 1, 9000, 64, 256, 100, 4, true},
    // Segments of two tiles (the ring), candidate levels and the merge over several tiles.
    {ScalarKind::F32, 2, 11000, 50, 512, 300, 3, true, 256, 256},
    {ScalarKind::BF16, 3, 2100, 130, 512, 1 << 20, 2, false, 256, 256},
    // Digits of 8 bits (four f32 passes), ties and random, a candidate level.
    {ScalarKind::F32, 2, 2830, 60, 256, 300, 3, true, 0, 8192, 8},
    {ScalarKind::F32, 3, 1000, 37, 256, 1 << 20, 2, false, 0, 8192, 8},
    // K = N with 8-bit digits (bf16, and f32 at RADIX_BITS 8), a short last segment and -inf:
    // the row threshold's first digit fits exactly in the last bin, which the padding's key
    // shares at the resolved bits.
    {ScalarKind::BF16, 2, 600, 600, 256, 1 << 20, 2, true},
    {ScalarKind::F32, 2, 600, 600, 256, 1 << 20, 2, true, 0, 8192, 8},
    // Buckets of 32 for the bucket threshold (a short last bucket): random rows (bf16's have
    // ties at T), and a candidate level over segments of 512 (of one tile; of two tiles, as the
    // first level's, with random rows: the candidate form's fast path over tiles).
    {ScalarKind::F32, 2, 40001, 19, 2048, 1 << 20, 2, false},
    {ScalarKind::BF16, 2, 40001, 19, 2048, 1 << 20, 2, false},
    {ScalarKind::F32, 1, 40000, 30, 512, 1000, 3, false},
    {ScalarKind::F32, 1, 40000, 30, 512, 1000, 3, false, 256, 256},
    // Segments of four tiles from the bucket threshold (random rows: the fast path's running
    // count over the tiles).
    {ScalarKind::F32, 2, 40000, 19, 2048, 1 << 20, 2, false, 512},
    // 1250 bests, one tile; 10000 (K = 4500, a segment shorter than K): the threshold's select
    // over several tiles.
    {ScalarKind::F32, 1, 40000, 600, 2048, 1 << 20, 2, false},
    {ScalarKind::F32, 1, 40000, 4500, 8192, 1 << 20, 2, false},
    // Bests of samples: the first 4 columns of each bucket of 16 (the last bucket one column),
    // random rows, and ties at the threshold (bf16); the planted K (below 0) in sampled columns
    // (at 2048 i + r), so that T is the smallest of them: this fails if the last bucket's
    // sample counts a column past N as a best (read as 0 or any larger value, T would be the
    // second smallest planted).
    {ScalarKind::F32, 2, 40001, 19, 2048, 1 << 20, 2, false, 0, 8192, 0, 0, 4},
    {ScalarKind::BF16, 2, 40001, 19, 2048, 1 << 20, 2, true, 0, 8192, 0, 0, 4},
    {ScalarKind::F32, 2, 40961, 20, 2048, 1 << 20, 2, false, 0, 8192, 0, 2, 4},
    // The planted K: the threshold's select stops after one digit (these fail if the segments
    // compare with T's resolved digits alone, without T_hi's low bits set).
    {ScalarKind::F32, 2, 2048, 20, 256, 1 << 20, 2, false, 0, 8192, 0, 1},
    {ScalarKind::BF16, 2, 4096, 20, 256, 1 << 20, 2, false, 0, 8192, 0, 1},
};

// Each case from the row threshold and from the bucket threshold (random rows: the segments
// keep only the keys at or below it; rows of a few values: ties at the threshold overflow a
// segment's slots, which then selects from scratch), and without either.
TEST(TopkStages, InterpreterMatchesTheReferenceExactly) {
  using kernels::TopkThreshold;
  uint64_t seed = 11;
  for (const StagesCase& c : kCases)
    for (TopkThreshold t : {TopkThreshold::RowHistograms, TopkThreshold::BucketBest, TopkThreshold::None})
      check_stages(c, "interp", seed++, t);
}

// The cpu backend on the tie-heavy level case (three kernels) in both dtypes, a random one
// from the row threshold, and from the bucket threshold: random bf16 rows, a candidate level
// (of one tile and of two), segments of four tiles, the planted early stop (f32), bests of
// samples (f32: random, planted), ties at the threshold (bf16, a candidate level).
TEST(TopkStages, CpuMatchesTheReferenceExactly) {
  using kernels::TopkThreshold;
  const size_t n = std::size(kCases);
  check_stages(kCases[4], "cpu", 21, TopkThreshold::RowHistograms);
  check_stages(kCases[5], "cpu", 22, TopkThreshold::None);
  check_stages(kCases[0], "cpu", 23, TopkThreshold::RowHistograms);
  check_stages(kCases[n - 11], "cpu", 24, TopkThreshold::BucketBest);
  check_stages(kCases[n - 10], "cpu", 25, TopkThreshold::BucketBest);
  check_stages(kCases[n - 9], "cpu", 29, TopkThreshold::BucketBest);
  check_stages(kCases[n - 8], "cpu", 28, TopkThreshold::BucketBest);
  check_stages(kCases[n - 2], "cpu", 26, TopkThreshold::BucketBest);
  check_stages(kCases[n - 5], "cpu", 30, TopkThreshold::BucketBest);
  check_stages(kCases[n - 3], "cpu", 31, TopkThreshold::BucketBest);
  check_stages(kCases[5], "cpu", 27, TopkThreshold::BucketBest);
}

// The rule: on cuda, rows of four segments of 8192 (or 8 K) or more and fewer than 1024 rows take
// the stages, from the bucket threshold (two kernels first) in segments of 4096: the issue's
// shapes get four kernels (64 x 131072; five at k = 1024, a level over the candidates) and nine
// (1 x 2^24, k = 1024: levels until a row has at most 8192 candidates); short rows and many
// rows keep the whole-row kernel.
TEST(TopkStages, TheRuleKeepsShortRowsOnTheWholeRowKernel) {
  for (const char* e : {"TESSERA_TOPK_SEGMENT", "TESSERA_TOPK_BUCKET_THRESHOLD", "TESSERA_TOPK_ROW_THRESHOLD"})
    if (std::getenv(e)) GTEST_SKIP() << e << " overrides the rule";
  const LibraryKernel* lk = find_library_kernel("topk");
  auto kernels = [&](int64_t M, int64_t N, int64_t K) {
    return lk->stages(ScalarKind::F32, "cuda:sm_90a", {{"M", M}, {"N", N}, {"K", K}}, {}).stages.size();
  };
  EXPECT_EQ(kernels(64, 131072, 64), 4u);
  EXPECT_EQ(kernels(64, 131072, 256), 4u);
  EXPECT_EQ(kernels(64, 131072, 1024), 5u);
  EXPECT_EQ(kernels(1, int64_t{1} << 24, 1024), 9u);
  EXPECT_EQ(lk->stages(ScalarKind::F32, "cuda:sm_90a", {{"M", 64}, {"N", 131072}, {"K", 64}}, {}).stages[2].config.at("SEGMENT"), 4096);
  EXPECT_EQ(kernels(64, 4096, 64), 0u);
  EXPECT_EQ(kernels(64, 16384, 64), 0u);
  EXPECT_EQ(kernels(4096, 131072, 64), 0u);
  // K = 8192: segments of 65536, so a row of 131072 is two segments: the whole-row kernel.
  EXPECT_EQ(kernels(8, 131072, 8192), 0u);
  // K above 16384: a segment of 8K would be longer than the largest SEGMENT: the whole-row kernel.
  EXPECT_EQ(kernels(1, int64_t{1} << 21, 20000), 0u);
  // RADIX_BITS: 8, or 11 for f32; anything else is an error naming it.
  try {
    lk->stages(ScalarKind::BF16, "cuda:sm_90a", {{"M", 64}, {"N", 131072}, {"K", 64}}, {{"RADIX_BITS", 11}});
    ADD_FAILURE() << "RADIX_BITS = 11 taken for bf16";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("topk: RADIX_BITS = 11: 8, or 11 for f32"), std::string::npos) << e.what();
  }
  // On cpu only from the bucket threshold (two kernels more): rows of 32 K columns and four
  // segments, however many rows.
  auto cpu_kernels = [&](int64_t M, int64_t N, int64_t K) {
    return lk->stages(ScalarKind::F32, "cpu", {{"M", M}, {"N", N}, {"K", K}}, {}).stages.size();
  };
  EXPECT_EQ(cpu_kernels(64, 131072, 64), 4u);
  EXPECT_EQ(cpu_kernels(4096, 65536, 32), 4u);
  EXPECT_EQ(cpu_kernels(64, 32768, 64), 4u);
  EXPECT_EQ(cpu_kernels(64, 32767, 64), 0u);
  {
    const testutil::ScopedEnv off("TESSERA_TOPK_BUCKET_THRESHOLD", "0");
    EXPECT_EQ(cpu_kernels(64, 131072, 64), 0u);
    EXPECT_EQ(kernels(64, 131072, 64), 2u);  // the plain segments (of 8192)
    EXPECT_EQ(kernels(1, int64_t{1} << 24, 1024), 5u);
  }
  {
    const testutil::ScopedEnv on("TESSERA_TOPK_BUCKET_THRESHOLD", "1");
    EXPECT_EQ(cpu_kernels(64, 131072, 64), 4u);
    EXPECT_EQ(kernels(64, 131072, 64), 4u);
    EXPECT_EQ(kernels(64, 131072, 1024), 5u);
    // (The interpreter keeps the whole-row kernel unless TESSERA_TOPK_SEGMENT asks.)
    EXPECT_EQ(lk->stages(ScalarKind::F32, "interp", {{"M", 64}, {"N", 131072}, {"K", 64}}, {}).stages.size(), 0u);
  }
  {
    // The row histograms instead: on cpu the stages are then TESSERA_TOPK_SEGMENT's to ask for.
    const testutil::ScopedEnv row("TESSERA_TOPK_ROW_THRESHOLD", "1");
    EXPECT_EQ(cpu_kernels(64, 131072, 64), 0u);
  }
  // Every stage binds with its config (each value a candidate of its constexpr).
  LibraryStages st = lk->stages(ScalarKind::BF16, "cpu", {{"M", 1}, {"N", int64_t{1} << 24}, {"K", 1000}}, {});
  for (const LibraryStage& s : st.stages) EXPECT_NO_THROW(bind_constexprs(*s.build(ScalarKind::BF16), s.config));
}

// TESSERA_TOPK_SEGMENT takes 0 or a SEGMENT candidate; anything else is an error naming it,
// not a knob the user never set. Text that is not a decimal integer is an error too (it was read
// as 0, the whole-row kernel, in silence), and so for the stages' other switches; RADIX_BITS is
// checked before it is narrowed (2^32 + 8 is not 8).
TEST(TopkStages, ASegmentLengthThatIsNoCandidateIsAnError) {
  const LibraryKernel* lk = find_library_kernel("topk");
  const std::pair<const char*, const char*> cases[] = {
      {"TESSERA_TOPK_SEGMENT=1000", "TESSERA_TOPK_SEGMENT = 1000: 0 (the whole-row kernel) or a power of two"},
      {"TESSERA_TOPK_SEGMENT=abc", "TESSERA_TOPK_SEGMENT = 'abc': not an integer"},
      {"TESSERA_TOPK_SEGMENT=256x", "TESSERA_TOPK_SEGMENT = '256x': not an integer"},
      {"TESSERA_TOPK_SEGMENT=99999999999999999999", "TESSERA_TOPK_SEGMENT = '99999999999999999999': out of the 64-bit range"},
      {"TESSERA_TOPK_SEGMENT= 8192", "TESSERA_TOPK_SEGMENT = ' 8192': not an integer"},
      {"TESSERA_TOPK_SEGMENT=+8192", "TESSERA_TOPK_SEGMENT = '+8192': not an integer"},
      {"TESSERA_TOPK_SEGMENT=-", "TESSERA_TOPK_SEGMENT = '-': not an integer"},
      {"TESSERA_TOPK_RADIX_BITS=4294967304", "RADIX_BITS = 4294967304: 8, or 11 for f32"},
      {"TESSERA_TOPK_RADIX_BITS=eleven", "TESSERA_TOPK_RADIX_BITS = 'eleven': not an integer"},
      {"TESSERA_TOPK_SEGMENT_WARPS=4.5", "TESSERA_TOPK_SEGMENT_WARPS = '4.5': not an integer"},
      {"TESSERA_TOPK_BUCKET_THRESHOLD=yes", "TESSERA_TOPK_BUCKET_THRESHOLD = 'yes': not an integer"},
      {"TESSERA_TOPK_BUCKET_THRESHOLD=2", "TESSERA_TOPK_BUCKET_THRESHOLD = 2: 0 (off) or 1 (on)"},
      {"TESSERA_TOPK_BUCKET_SAMPLE=48", "topk: BUCKET_SAMPLE = 48: 0 (whole buckets) or a power of two up to 2048"},
      {"TESSERA_TOPK_BUCKET_SAMPLE=4096", "topk: BUCKET_SAMPLE = 4096: 0 (whole buckets) or a power of two"},
  };
  for (const auto& [assignment, message] : cases) {
    const std::string a = assignment, name = a.substr(0, a.find('='));
    const char* before = std::getenv(name.c_str());
    const std::string saved = before ? before : "";
    ::setenv(name.c_str(), a.substr(a.find('=') + 1).c_str(), 1);
    try {
      lk->stages(ScalarKind::F32, "cuda:sm_90a", {{"M", 1}, {"N", 100000}, {"K", 10}}, {});
      ADD_FAILURE() << assignment << ": no error";
    } catch (const TesseraError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << assignment << ": " << e.what();
    }
    if (before) ::setenv(name.c_str(), saved.c_str(), 1);
    else ::unsetenv(name.c_str());
  }
}

}  // namespace
}  // namespace tessera
