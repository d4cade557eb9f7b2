// The kernel corpus (tests/corpus/*.tile): Lite kernels written as a new user writes them from
// the docs, one kernel family per file. Every file:
//  - starts with a header of `//` lines saying what it computes, including
//      // sizes: NAME=VALUE,...     a size for every symbolic view dim of its kernels (ragged:
//                                   not multiples of the tiles)
//    and optionally
//      // range: VIEW=LO..HI,...    the inputs of that view (by parameter name, in every kernel
//                                   of the file) drawn uniformly from [LO, HI), integers from
//                                   LO..HI inclusive, instead of make_random_tensors' defaults
//                                   (structured inputs: ids in range, packed bytes, positive sums);
//  - is canonical: with its comment lines removed, print_module(parse(text)) == text;
//  - uses the Lite layer only (no Struct op, no raw, no layout encoding);
//  - runs on the cpu backend (after the pass pipeline) with the same results as the
//    interpreter (on the bound kernel as written), on random inputs of two seeds; the
//    interpreter's outputs must differ from the inputs, hold a nonzero element and no NaN, so
//    that a kernel that does nothing, or computes only zeros, fails;
//  - is unchanged by every pass of the pipeline (check_passes, `--check-passes`) at its sizes.
// Below them, the kernels are checked against plain double references of what their headers
// say (attention in its five forms, decode split + merge composed, cross-entropy with and
// without the linear layer, int4 dequantization, argmax, MoE counts, softmax, norms, RoPE, the
// matmul epilogues, transpose).
#include <filesystem>
#include <random>
#include <set>
#include <sstream>

#include "../cpu/CpuTestUtil.h"
#include "../text/TextTestUtil.h"
#include "check/PassCheck.h"

namespace tessera::cputest {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(TESSERA_SOURCE_DIR) / "tests" / "corpus";

std::vector<std::string> corpus_files() {
  std::vector<std::string> out;
  for (const auto& p : testing::tile_files(kDir)) out.push_back(p.filename().string());
  return out;
}

std::string read_text(const std::string& name) { return testing::read_file(kDir / name); }

bool is_comment_line(const std::string& line) {
  size_t i = line.find_first_not_of(" \t");
  return i != std::string::npos && line.compare(i, 2, "//") == 0;
}

// The text without its comment lines and without the blank lines before the first kernel.
std::string strip_comments(const std::string& text) {
  std::istringstream lines(text);
  std::string out;
  for (std::string line; std::getline(lines, line);) {
    if (is_comment_line(line)) continue;
    if (out.empty() && line.empty()) continue;
    out += line + "\n";
  }
  return out;
}

// The NAME=VALUE words after `// KEY: ` (split on commas and spaces), from every such line.
std::vector<std::pair<std::string, std::string>> directive(const std::string& text, const std::string& key) {
  std::string tag = "// " + key + ": ";
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(tag, 0) != 0) continue;
    std::string rest = line.substr(tag.size());
    std::replace(rest.begin(), rest.end(), ',', ' ');
    std::istringstream words(rest);
    for (std::string w; words >> w;) {
      auto eq = w.find('=');
      if (eq == std::string::npos) throw std::runtime_error("'" + key + "' word without '=': " + w);
      out.emplace_back(w.substr(0, eq), w.substr(eq + 1));
    }
  }
  return out;
}

struct Range {
  double lo, hi;
};

std::map<std::string, Range> ranges_of(const std::string& text) {
  std::map<std::string, Range> out;
  for (const auto& [name, v] : directive(text, "range")) {
    auto dots = v.find("..");
    if (dots == std::string::npos) throw std::runtime_error("range of '" + name + "' is not LO..HI: " + v);
    out[name] = {std::stod(v.substr(0, dots)), std::stod(v.substr(dots + 2))};
  }
  return out;
}

// Refills the tensors of the views named in `ranges` (deterministically from `seed`).
void apply_ranges(const Kernel& k, std::vector<Tensor>& ts, const std::map<std::string, Range>& ranges,
                  uint64_t seed) {
  std::mt19937_64 rng(seed * 7919 + 17);
  size_t ti = 0;
  for (const Value* p : k.view_params()) {
    Tensor& t = ts.at(ti++);
    auto it = ranges.find(p->name);
    if (it == ranges.end()) continue;
    const Range r = it->second;
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (is_float(t.dtype)) {
        t.set(i, std::uniform_real_distribution<double>(r.lo, r.hi)(rng));
      } else {
        auto lo = static_cast<int64_t>(r.lo), hi = static_cast<int64_t>(r.hi);
        t.set_int(i, std::uniform_int_distribution<int64_t>(lo, hi)(rng));
      }
    }
  }
}

class CorpusFile : public ::testing::TestWithParam<std::string> {};

TEST(Corpus, HasAtLeastFifteenFiles) { EXPECT_GE(corpus_files().size(), 15u); }

TEST_P(CorpusFile, HeaderSaysWhatAndSizes) {
  std::string text = read_text(GetParam());
  ASSERT_EQ(text.rfind("// ", 0), 0u) << "the file must start with a comment saying what it computes";
  EXPECT_FALSE(directive(text, "sizes").empty()) << "no '// sizes: ' line";
}

TEST_P(CorpusFile, IsCanonicalLite) {
  std::string text = strip_comments(read_text(GetParam()));
  auto m = parse_module(text, GetParam());
  ASSERT_FALSE(m->kernels.empty());
  EXPECT_EQ(print_module(*m), text);
  EXPECT_EQ(text.find("layout ="), std::string::npos) << "layout encodings are not plain Lite";
  for (auto& k : m->kernels) {
    walk(*k, [&](Op& op) {
      OpClass c = op_info(op.kind).cls;
      EXPECT_TRUE(c != OpClass::Struct && c != OpClass::Raw && op.kind != OpKind::ConvertLayout)
          << k->name << " uses '" << op_info(op.kind).name << "', not plain Lite";
    });
  }
}

TEST_P(CorpusFile, CpuMatchesInterpreter) {
  std::string raw = read_text(GetParam());
  Sizes sizes;
  for (const auto& [name, v] : directive(raw, "sizes")) sizes[name] = std::stoll(v);
  auto ranges = ranges_of(raw);
  auto m = parse_module(strip_comments(raw), GetParam());
  ASSERT_FALSE(m->kernels.empty());
  std::set<std::string> ranged;
  for (auto& k : m->kernels) {
    SCOPED_TRACE(k->name);
    for (const Value* p : k->view_params()) {
      if (ranges.count(p->name)) ranged.insert(p->name);
      for (const Dim& d : p->type.shape)
        ASSERT_TRUE(d.is_static() || sizes.count(d.symbol)) << "'// sizes:' gives no size for dim " << d.symbol;
    }
    auto bound = bind_constexprs(*k, {});
    auto optimized = run_pipeline(*k, {});
    auto compiled = compile_cpu(*optimized, test_options());
    for (uint64_t seed : {1, 2}) {
      SCOPED_TRACE("seed " + std::to_string(seed));
      std::vector<Tensor> inputs = make_random_tensors(*bound, sizes, seed);
      apply_ranges(*bound, inputs, ranges, seed);
      std::vector<Tensor> want = inputs, got = inputs;
      auto wa = args_for(*bound, want), ga = args_for(*optimized, got);
      run_interp(*bound, wa);
      compiled->run(ga);
      // Not a test that cannot fail: the kernel writes something, not only zeros, and no NaN.
      int64_t changed = 0, nonzero = 0, nans = 0;
      for (size_t t = 0; t < want.size(); ++t) {
        bool written = false;
        for (int64_t i = 0; i < want[t].numel(); ++i) {
          bool same = is_float(want[t].dtype) ? want[t].get(i) == inputs[t].get(i)
                                              : want[t].get_int(i) == inputs[t].get_int(i);
          written |= !same;
          changed += !same;
        }
        if (!written) continue;
        for (int64_t i = 0; i < want[t].numel(); ++i) {
          double w = want[t].get(i);
          nonzero += w != 0;
          nans += std::isnan(w);
        }
      }
      EXPECT_GT(changed, 0) << "the interpreter changed no output";
      EXPECT_GT(nonzero, 0) << "the outputs are all zero";
      EXPECT_EQ(nans, 0) << "NaN in the outputs";
      EXPECT_GT(testutil::expect_tensors_match(want, got, k->name, "cpu", {}, tile_error_bounds(*bound, sizes, want)),
                0);
    }
  }
  EXPECT_EQ(ranged.size(), ranges.size()) << "a '// range:' names a view no kernel has";
}

TEST_P(CorpusFile, EveryPassKeepsTheResults) {
  std::string raw = read_text(GetParam());
  PassCheckOptions o;
  for (const auto& [name, v] : directive(raw, "sizes")) o.sizes[name] = std::stoll(v);
  o.seeds = {1, 2};
  auto m = parse_module(strip_comments(raw), GetParam());
  for (auto& k : m->kernels) {
    PassCheckResult r = check_passes(*k, pipeline_passes({}), o);
    EXPECT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.seeds_checked, o.seeds) << k->name << ": " << r.unchecked;
  }
}

// The split schedule (split_reduction, `tessera run --split`) of every kernel it applies to,
// run as its partial then its merge kernel on the interpreter, gives what the kernel as written
// gives, for runs that divide the loop unevenly and for more runs than iterations (empty runs).
TEST_P(CorpusFile, SplitScheduleKeepsTheResults) {
  std::string raw = read_text(GetParam());
  Sizes sizes;
  for (const auto& [name, v] : directive(raw, "sizes")) sizes[name] = std::stoll(v);
  auto ranges = ranges_of(raw);
  auto m = parse_module(strip_comments(raw), GetParam());
  for (auto& k : m->kernels) {
    SCOPED_TRACE(k->name);
    auto bound = bind_constexprs(*k, {});
    auto optimized = run_pipeline(*k, {});
    PassStats stats;
    SplitKernels s = split_reduction(*optimized, stats);
    if (!s.partial) continue;
    for (int64_t runs : {3, 40}) {
      SCOPED_TRACE("runs " + std::to_string(runs));
      std::vector<Tensor> inputs = make_random_tensors(*bound, sizes, 1);
      apply_ranges(*bound, inputs, ranges, 1);
      std::vector<Tensor> want = inputs, got = inputs;
      auto wa = args_for(*bound, want);
      run_interp(*bound, wa);
      run_split(*optimized, s, args_for(*optimized, got), runs, 1,
                [](const Kernel& x, std::vector<KernelArg>& a) { run_interp(x, a); });
      EXPECT_GT(testutil::expect_tensors_match(want, got, k->name, "split", {}, tile_error_bounds(*bound, sizes, want)), 0);
    }
  }
}

// Which kernels the split schedule applies to (so that the test above cannot pass by splitting
// nothing), and the plain decode attention's split compiled for the cpu backend: 8 runs over a
// ragged KV length, against the interpreter on the kernel as written.
TEST(CorpusSplit, DerivedFromPlainPrograms) {
  std::set<std::string> split;
  for (const std::string& f : corpus_files()) {
    auto m = parse_module(strip_comments(read_text(f)), f);
    for (auto& k : m->kernels) {
      PassStats stats;
      if (split_reduction(*run_pipeline(*k, {}), stats).partial) split.insert(k->name);
    }
  }
  for (const char* k : {"decode_attention", "attention_three_loops", "linear_cross_entropy", "flash_attention_fwd",
                        "flash_attention_causal"})
    EXPECT_TRUE(split.count(k)) << k << " was not split";
  EXPECT_FALSE(split.count("matmul_bias_gelu"));  // no running max

  auto m = parse_module(strip_comments(read_text("decode_attention.tile")), "decode_attention.tile");
  const Kernel& k = *m->kernels[0];
  auto bound = bind_constexprs(k, {});
  auto optimized = run_pipeline(k, {});
  PassStats stats;
  SplitKernels s = split_reduction(*optimized, stats);
  ASSERT_TRUE(s.partial) << s.why;
  auto partial = compile_cpu(*s.partial, test_options());
  auto merge = compile_cpu(*s.merge, test_options());
  Sizes sizes{{"H", 2}, {"T", 1000}, {"DH", 64}};
  std::vector<Tensor> want = make_random_tensors(*bound, sizes, 5), got = want;
  auto wa = args_for(*bound, want);
  run_interp(*bound, wa);
  int64_t programs = run_split(*optimized, s, args_for(*optimized, got), 8, 5, [&](const Kernel& x, std::vector<KernelArg>& a) {
    (&x == s.partial.get() ? partial : merge)->run(a);
  });
  EXPECT_EQ(programs, 16);
  EXPECT_GT(testutil::expect_tensors_match(want, got, k.name, "cpu split", {}, tile_error_bounds(*bound, sizes, want)), 0);
}

// The GPU lowering (layouts, then the conversion removal's rewrites and search) keeps every
// kernel's results, for the wgmma and the mma.sync targets.
TEST_P(CorpusFile, GpuLoweringKeepsTheResults) {
  std::string raw = read_text(GetParam());
  PassCheckOptions o;
  for (const auto& [name, v] : directive(raw, "sizes")) o.sizes[name] = std::stoll(v);
  o.seeds = {3};
  auto m = parse_module(strip_comments(raw), GetParam());
  for (auto& k : m->kernels) {
    auto optimized = run_pipeline(*k, {});
    for (GpuLoweringOptions target : {GpuLoweringOptions{90, true}, GpuLoweringOptions{80, false}}) {
      PassCheckResult r = check_passes(*optimized, gpu_lowering_passes(target), o);
      EXPECT_TRUE(r.ok()) << "sm_" << target.sm << ": " << r.message;
      EXPECT_EQ(r.seeds_checked, o.seeds) << k->name << ": " << r.unchecked;
    }
  }
}

// ---- References: what each header says, in double, on the interpreter's results ----

// Runs kernel `name` of corpus file `file` (constexprs at their defaults) on the interpreter
// over `ts`, the view tensors in signature order (float scalars are 0.75, args_for).
void run_kernel(const std::string& file, const std::string& name, std::vector<Tensor>& ts) {
  auto m = parse_module(strip_comments(read_text(file)), file);
  for (auto& k : m->kernels)
    if (k->name == name) {
      auto b = bind_constexprs(*k, {});
      auto a = args_for(*b, ts);
      run_interp(*b, a);
      return;
    }
  FAIL() << "no kernel " << name << " in " << file;
}

Tensor random_tensor(ScalarKind dt, std::vector<int64_t> shape, double lo, double hi, uint64_t seed) {
  Tensor t(dt, std::move(shape));
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (is_float(dt)) t.set(i, std::uniform_real_distribution<double>(lo, hi)(rng));
    else t.set_int(i, std::uniform_int_distribution<int64_t>(static_cast<int64_t>(lo), static_cast<int64_t>(hi))(rng));
  }
  return t;
}

// |got - want| <= atol + rtol * |want| (+ slack[i] where given), at most 5 failures reported.
void expect_close(const Tensor& got, const std::vector<double>& want, double atol, double rtol, const std::string& what,
                  const std::vector<double>& slack = {}) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  int bad = 0;
  double nonzero = 0;
  for (size_t i = 0; i < want.size() && bad < 5; ++i) {
    double g = got.get(static_cast<int64_t>(i)), w = want[i];
    nonzero += w != 0;
    double tol = atol + rtol * std::fabs(w) + (slack.empty() ? 0 : slack[i]);
    if (!(std::fabs(g - w) <= tol)) {
      ++bad;
      ADD_FAILURE() << what << "[" << i << "]: got " << g << " want " << w;
    }
  }
  EXPECT_GT(nonzero, 0) << what << ": the reference is all zero";
}

// softmax(q k^T * scale) v per head: q [H, S, DH], k and v [H, T, DH]; causal keeps key j <= i.
std::vector<double> attention_ref(const Tensor& q, const Tensor& k, const Tensor& v, int64_t H, int64_t S,
                                  int64_t T, int64_t DH, bool causal) {
  const double scale = 1.0 / std::sqrt(64.0);  // the constexpr D
  std::vector<double> o(static_cast<size_t>(H * S * DH));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < S; ++i) {
      int64_t keys = causal ? std::min(i + 1, T) : T;
      std::vector<double> sc(static_cast<size_t>(keys));
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < keys; ++j) {
        double d = 0;
        for (int64_t c = 0; c < DH; ++c) d += q.get((h * S + i) * DH + c) * k.get((h * T + j) * DH + c);
        sc[j] = d * scale;
        mx = std::max(mx, sc[j]);
      }
      for (auto& x : sc) sum += (x = std::exp(x - mx));
      for (int64_t c = 0; c < DH; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < keys; ++j) acc += sc[j] * v.get((h * T + j) * DH + c);
        o[(h * S + i) * DH + c] = acc / sum;
      }
    }
  return o;
}

const std::string kFa = "flash_attention_fwd.tile";

TEST(CorpusReference, FlashAttentionForward) {
  for (int64_t dh : {64, 40}) {  // the head size at the constexpr D, and below it
    SCOPED_TRACE("DH=" + std::to_string(dh));
    const int64_t H = 2, S = 100, T = 150;
    std::vector<Tensor> ts{random_tensor(ScalarKind::F32, {H, S, dh}, -1, 1, 1),
                           random_tensor(ScalarKind::F32, {H, T, dh}, -1, 1, 2),
                           random_tensor(ScalarKind::F32, {H, T, dh}, -1, 1, 3),
                           random_tensor(ScalarKind::F32, {H, S, dh}, -1, 1, 4)};
    run_kernel(kFa, "flash_attention_fwd", ts);
    expect_close(ts[3], attention_ref(ts[0], ts[1], ts[2], H, S, T, dh, false), 1e-5, 1e-4, "o");
  }
}

TEST(CorpusReference, FlashAttentionCausal) {
  const int64_t H = 2, N = 150, DH = 64;
  std::vector<Tensor> ts{random_tensor(ScalarKind::F32, {H, N, DH}, -1, 1, 5),
                         random_tensor(ScalarKind::F32, {H, N, DH}, -1, 1, 6),
                         random_tensor(ScalarKind::F32, {H, N, DH}, -1, 1, 7),
                         random_tensor(ScalarKind::F32, {H, N, DH}, -1, 1, 8)};
  run_kernel("flash_attention_causal.tile", "flash_attention_causal", ts);
  expect_close(ts[3], attention_ref(ts[0], ts[1], ts[2], H, N, N, DH, true), 1e-5, 1e-4, "o");
}

TEST(CorpusReference, PlainAttention) {
  const int64_t S = 100, T = 150, DH = 64;
  std::vector<Tensor> ts{random_tensor(ScalarKind::F32, {S, DH}, -1, 1, 9),
                         random_tensor(ScalarKind::F32, {T, DH}, -1, 1, 10),
                         random_tensor(ScalarKind::F32, {T, DH}, -1, 1, 11),
                         random_tensor(ScalarKind::F32, {S, DH}, -1, 1, 12)};
  run_kernel("attention_plain.tile", "attention_plain", ts);
  expect_close(ts[3], attention_ref(ts[0], ts[1], ts[2], 1, S, T, DH, false), 1e-5, 1e-4, "o");
}

TEST(CorpusReference, PlainCausalAttention) {
  const int64_t H = 2, S = 100, T = 150, DH = 64;
  std::vector<Tensor> ts{random_tensor(ScalarKind::F32, {H, S, DH}, -1, 1, 70),
                         random_tensor(ScalarKind::F32, {H, T, DH}, -1, 1, 71),
                         random_tensor(ScalarKind::F32, {H, T, DH}, -1, 1, 72),
                         random_tensor(ScalarKind::F32, {H, S, DH}, -1, 1, 73)};
  run_kernel("attention_plain_causal.tile", "attention_plain_causal", ts);
  expect_close(ts[3], attention_ref(ts[0], ts[1], ts[2], H, S, T, DH, true), 1e-5, 1e-4, "o");
}

// The split kernel's partials merged by the merge kernel are attention of one query row; with
// NS = 7 over 10 key tiles, the last splits are empty (-inf, 0, 0) and must weigh nothing.
TEST(CorpusReference, DecodeSplitThenMergeIsAttention) {
  for (int64_t ns : {4, 7}) {
    SCOPED_TRACE("NS=" + std::to_string(ns));
    const int64_t H = 3, T = 300, DH = 64;
    Tensor q = random_tensor(ScalarKind::F32, {H, DH}, -1, 1, 13);
    std::vector<Tensor> split{q, random_tensor(ScalarKind::F32, {H, T, DH}, -1, 1, 14),
                              random_tensor(ScalarKind::F32, {H, T, DH}, -1, 1, 15),
                              random_tensor(ScalarKind::F32, {H, ns, DH}, -1, 1, 16),
                              random_tensor(ScalarKind::F32, {H, ns}, -1, 1, 17),
                              random_tensor(ScalarKind::F32, {H, ns}, -1, 1, 18)};
    run_kernel("decode_attention_split.tile", "decode_attention_split", split);
    std::vector<Tensor> merge{split[3], split[4], split[5], random_tensor(ScalarKind::F32, {H, DH}, -1, 1, 19)};
    run_kernel("decode_attention_split.tile", "decode_attention_merge", merge);
    Tensor q3 = q;
    q3.shape = {H, 1, DH};
    expect_close(merge[3], attention_ref(q3, split[1], split[2], H, 1, T, DH, false), 1e-5, 1e-4, "out");
  }
}

TEST(CorpusReference, CrossEntropy) {
  const int64_t M = 37, V = 300;
  std::vector<Tensor> ts{random_tensor(ScalarKind::F32, {M, V}, -4, 4, 20), random_tensor(ScalarKind::I32, {M}, -1, V, 21),
                         random_tensor(ScalarKind::F32, {M}, -1, 1, 22)};
  ts[1].set_int(3, -1);  // ignore indices, below and past the vocabulary
  ts[1].set_int(10, V);
  run_kernel("cross_entropy.tile", "cross_entropy", ts);
  std::vector<double> want(M);
  int ignored = 0;
  for (int64_t r = 0; r < M; ++r) {
    int64_t t = ts[1].get_int(r);
    if (t < 0 || t >= V) {
      ++ignored;
      continue;
    }
    double mx = -INFINITY, sum = 0;
    for (int64_t c = 0; c < V; ++c) mx = std::max(mx, ts[0].get(r * V + c));
    for (int64_t c = 0; c < V; ++c) sum += std::exp(ts[0].get(r * V + c) - mx);
    want[r] = mx + std::log(sum) - ts[0].get(r * V + t);
  }
  EXPECT_GT(ignored, 0);  // the ignore index is exercised
  expect_close(ts[2], want, 1e-5, 1e-5, "loss");
}

TEST(CorpusReference, AttentionThreeLoops) {
  const int64_t H = 2, S = 100, T = 150, DH = 64;
  std::vector<Tensor> ts{random_tensor(ScalarKind::F32, {H, S, DH}, -1, 1, 58),
                         random_tensor(ScalarKind::F32, {H, T, DH}, -1, 1, 59),
                         random_tensor(ScalarKind::F32, {H, T, DH}, -1, 1, 60),
                         random_tensor(ScalarKind::F32, {H, S, DH}, -1, 1, 61)};
  run_kernel("attention_three_loops.tile", "attention_three_loops", ts);
  expect_close(ts[3], attention_ref(ts[0], ts[1], ts[2], H, S, T, DH, false), 1e-5, 1e-4, "o");
}

// Per row of x [M, HID] against w [V, HID]: logsumexp(x w^T) - (x w^T)[target], 0 for a
// target outside [0, V).
std::vector<double> linear_cross_entropy_ref(const Tensor& x, const Tensor& w, const Tensor& tgt, int64_t M, int64_t HID,
                                             int64_t V) {
  std::vector<double> want(M);
  for (int64_t r = 0; r < M; ++r) {
    int64_t t = tgt.get_int(r);
    if (t < 0 || t >= V) continue;
    std::vector<double> logit(V);
    double mx = -INFINITY, sum = 0;
    for (int64_t c = 0; c < V; ++c) {
      for (int64_t h = 0; h < HID; ++h) logit[c] += x.get(r * HID + h) * w.get(c * HID + h);
      mx = std::max(mx, logit[c]);
    }
    for (int64_t c = 0; c < V; ++c) sum += std::exp(logit[c] - mx);
    want[r] = mx + std::log(sum) - logit[t];
  }
  return want;
}

TEST(CorpusReference, LinearCrossEntropy) {
  const int64_t M = 37, HID = 100, V = 300;
  std::vector<Tensor> ts{random_tensor(ScalarKind::F32, {M, HID}, -1, 1, 62), random_tensor(ScalarKind::F32, {V, HID}, -1, 1, 63),
                         random_tensor(ScalarKind::I32, {M}, 0, V - 1, 64), random_tensor(ScalarKind::F32, {M}, -1, 1, 65)};
  ts[2].set_int(5, -1);  // ignore indices
  ts[2].set_int(20, V);
  run_kernel("linear_cross_entropy.tile", "linear_cross_entropy", ts);
  std::vector<double> want = linear_cross_entropy_ref(ts[0], ts[1], ts[2], M, HID, V);
  expect_close(ts[3], want, 1e-5, 1e-5, "loss");
  // The baseline of the memory figure (bench/RESULTS.md): the logits stored by one kernel and
  // read by the other give the same loss.
  std::vector<Tensor> lin{ts[0], ts[1], random_tensor(ScalarKind::F32, {M, V}, -1, 1, 66)};
  run_kernel("linear_cross_entropy_materialized.tile", "linear_logits", lin);
  std::vector<Tensor> ce{lin[2], ts[2], random_tensor(ScalarKind::F32, {M}, -1, 1, 67)};
  run_kernel("linear_cross_entropy_materialized.tile", "logits_cross_entropy", ce);
  expect_close(ce[2], want, 1e-5, 1e-5, "loss (materialized)");
}

TEST(CorpusReference, Int4DequantMatmul) {
  const int64_t M = 37, N = 45, K = 150, KP = 75, G = 3, GS = 64;  // GS: the constexpr BK
  std::vector<Tensor> ts{random_tensor(ScalarKind::F16, {M, K}, -1, 1, 23), random_tensor(ScalarKind::U8, {KP, N}, 0, 255, 24),
                         random_tensor(ScalarKind::F16, {G, N}, -1, 1, 25), random_tensor(ScalarKind::F32, {M, N}, -1, 1, 26)};
  run_kernel("int4_dequant_matmul.tile", "int4_dequant_matmul", ts);
  std::vector<double> want(M * N), slack(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        int64_t byte = ts[1].get_int((k / 2) * N + j);
        int64_t nib = k % 2 == 0 ? (byte & 15) : (byte >> 4);
        double w = static_cast<double>(nib - 8) * ts[2].get((k / GS) * N + j);
        acc += ts[0].get(i * K + k) * w;
        mag += std::fabs(ts[0].get(i * K + k) * w);
      }
      want[i * N + j] = acc;
      slack[i * N + j] = 1e-3 * mag;  // the dequantized weight is rounded to f16
    }
  expect_close(ts[3], want, 1e-5, 1e-5, "out", slack);
}

TEST(CorpusReference, ArgmaxRows) {
  const int64_t M = 37, N = 300;
  std::vector<Tensor> ts{random_tensor(ScalarKind::F32, {M, N}, -1, 1, 27), random_tensor(ScalarKind::F32, {M}, -1, 1, 28),
                         random_tensor(ScalarKind::I32, {M}, -5, 5, 29)};
  run_kernel("argmax_rows.tile", "argmax_rows", ts);
  for (int64_t r = 0; r < M; ++r) {
    int64_t best = 0;
    for (int64_t c = 1; c < N; ++c)
      if (ts[0].get(r * N + c) > ts[0].get(r * N + best)) best = c;
    EXPECT_EQ(ts[2].get_int(r), best) << "row " << r;
    EXPECT_EQ(ts[1].get(r), ts[0].get(r * N + best)) << "row " << r;
  }
}

TEST(CorpusReference, MoeCountsBothWays) {
  const int64_t NT = 300, E = 13;
  Tensor ids = random_tensor(ScalarKind::I32, {NT}, -1, E, 30);
  std::vector<int64_t> hist(E, 0);
  int dropped = 0;
  for (int64_t i = 0; i < NT; ++i) {
    int64_t e = ids.get_int(i);
    if (e >= 0 && e < E) ++hist[e];
    else ++dropped;
  }
  EXPECT_GT(dropped, 0);
  std::vector<Tensor> atomic{ids, Tensor(ScalarKind::I32, {E})};  // counts from zero
  run_kernel("moe_count.tile", "moe_count_atomic", atomic);
  std::vector<Tensor> reduce{ids, random_tensor(ScalarKind::I32, {E}, 1, 9, 31)};  // overwritten
  run_kernel("moe_count.tile", "moe_count_reduce", reduce);
  for (int64_t e = 0; e < E; ++e) {
    EXPECT_EQ(atomic[1].get_int(e), hist[e]) << "expert " << e;
    EXPECT_EQ(reduce[1].get_int(e), hist[e]) << "expert " << e;
  }
}

TEST(CorpusReference, RowKernels) {
  const int64_t M = 37, N = 300;
  Tensor x = random_tensor(ScalarKind::F32, {M, N}, -2, 2, 32);
  std::vector<double> sm(M * N), ln(M * N);
  Tensor w = random_tensor(ScalarKind::F32, {N}, -1, 1, 33), b = random_tensor(ScalarKind::F32, {N}, -1, 1, 34);
  for (int64_t r = 0; r < M; ++r) {
    double mx = -INFINITY, sum = 0, mean = 0, var = 0;
    for (int64_t c = 0; c < N; ++c) mx = std::max(mx, x.get(r * N + c)), mean += x.get(r * N + c) / N;
    for (int64_t c = 0; c < N; ++c) {
      sum += std::exp(x.get(r * N + c) - mx);
      var += (x.get(r * N + c) - mean) * (x.get(r * N + c) - mean) / N;
    }
    for (int64_t c = 0; c < N; ++c) {
      sm[r * N + c] = std::exp(x.get(r * N + c) - mx) / sum;
      ln[r * N + c] = (x.get(r * N + c) - mean) / std::sqrt(var + 1e-5) * w.get(c) + b.get(c);
    }
  }
  std::vector<Tensor> s{x, random_tensor(ScalarKind::F32, {M, N}, -1, 1, 35)};
  run_kernel("softmax_looped.tile", "softmax_looped", s);
  expect_close(s[1], sm, 1e-6, 1e-5, "softmax");
  std::vector<Tensor> l{x, w, b, random_tensor(ScalarKind::F32, {M, N}, -1, 1, 36)};
  run_kernel("layernorm.tile", "layernorm", l);
  expect_close(l[3], ln, 1e-5, 1e-4, "layernorm");

  // rmsnorm_residual: h = bf16(x + res) stored, y = h / rms(h) * w in bf16.
  std::vector<Tensor> rn{random_tensor(ScalarKind::BF16, {M, N}, -1, 1, 37), random_tensor(ScalarKind::BF16, {M, N}, -1, 1, 38),
                         w, random_tensor(ScalarKind::BF16, {M, N}, -1, 1, 39), random_tensor(ScalarKind::BF16, {M, N}, -1, 1, 40)};
  run_kernel("rmsnorm_residual.tile", "rmsnorm_residual", rn);
  Tensor h(ScalarKind::BF16, {M, N});
  for (int64_t i = 0; i < M * N; ++i) h.set(i, rn[0].get(i) + rn[1].get(i));
  std::vector<double> hw(M * N), yw(M * N);
  for (int64_t r = 0; r < M; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < N; ++c) ss += h.get(r * N + c) * h.get(r * N + c);
    double rstd = 1 / std::sqrt(ss / N + 1e-6);
    for (int64_t c = 0; c < N; ++c) {
      hw[r * N + c] = h.get(r * N + c);
      yw[r * N + c] = h.get(r * N + c) * rstd * w.get(c);
    }
  }
  expect_close(rn[3], hw, 0, 0, "h");
  expect_close(rn[4], yw, 1e-2, 1e-2, "y");
}

TEST(CorpusReference, RopeTransposeMaskedRows) {
  const int64_t T = 75, DH = 64, HALF = 32;
  std::vector<Tensor> r{random_tensor(ScalarKind::F32, {T, DH}, -1, 1, 41), random_tensor(ScalarKind::F32, {T, HALF}, -1, 1, 42),
                        random_tensor(ScalarKind::F32, {T, HALF}, -1, 1, 43), random_tensor(ScalarKind::F32, {T, DH}, -1, 1, 44)};
  run_kernel("rope.tile", "rope", r);
  std::vector<double> rw(T * DH);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < HALF; ++i) {
      double x1 = r[0].get(t * DH + i), x2 = r[0].get(t * DH + HALF + i), c = r[1].get(t * HALF + i),
             s = r[2].get(t * HALF + i);
      rw[t * DH + i] = x1 * c - x2 * s;
      rw[t * DH + HALF + i] = x2 * c + x1 * s;
    }
  expect_close(r[3], rw, 1e-6, 1e-6, "rope");

  const int64_t M = 100, N = 75;
  std::vector<Tensor> tr{random_tensor(ScalarKind::BF16, {M, N}, -1, 1, 45), random_tensor(ScalarKind::BF16, {N, M}, -1, 1, 46)};
  run_kernel("transpose.tile", "transpose", tr);
  std::vector<double> tw(N * M);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) tw[j * M + i] = tr[0].get(i * N + j);
  expect_close(tr[1], tw, 0, 0, "transpose");

  const int64_t B = 37, L = 300;
  std::vector<Tensor> mr{random_tensor(ScalarKind::F32, {B, L}, -1, 1, 47), random_tensor(ScalarKind::I32, {B}, -3, 320, 48),
                         random_tensor(ScalarKind::F32, {B, L}, -1, 1, 49)};
  run_kernel("masked_rows.tile", "masked_rows", mr);
  std::vector<double> mw(B * L);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i) mw[b * L + i] = i < mr[1].get_int(b) ? 0.75 * mr[0].get(b * L + i) : 0;
  expect_close(mr[2], mw, 1e-7, 1e-7, "masked_rows");
}

TEST(CorpusReference, MatmulEpilogues) {
  const int64_t M = 70, N = 45, K = 100;
  auto matmul = [&](const Tensor& a, const Tensor& b, int64_t i, int64_t j) {
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) acc += a.get(i * K + k) * b.get(k * N + j);
    return acc;
  };
  std::vector<Tensor> g{random_tensor(ScalarKind::F16, {M, K}, -1, 1, 50), random_tensor(ScalarKind::F16, {K, N}, -1, 1, 51),
                        random_tensor(ScalarKind::F32, {N}, -1, 1, 52), random_tensor(ScalarKind::F16, {M, N}, -1, 1, 53)};
  run_kernel("matmul_bias_gelu.tile", "matmul_bias_gelu", g);
  std::vector<double> gw(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double x = matmul(g[0], g[1], i, j) + g[2].get(j);
      gw[i * N + j] = 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    }
  expect_close(g[3], gw, 2e-3, 2e-3, "gelu");

  std::vector<Tensor> sw{random_tensor(ScalarKind::BF16, {M, K}, -1, 1, 54), random_tensor(ScalarKind::BF16, {K, N}, -1, 1, 55),
                         random_tensor(ScalarKind::BF16, {K, N}, -1, 1, 56), random_tensor(ScalarKind::BF16, {M, N}, -1, 1, 57)};
  run_kernel("swiglu.tile", "swiglu", sw);
  std::vector<double> ww(M * N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double gt = matmul(sw[0], sw[1], i, j), up = matmul(sw[0], sw[2], i, j);
      ww[i * N + j] = gt / (1 + std::exp(-gt)) * up;
    }
  expect_close(sw[3], ww, 1e-2, 1.6e-2, "swiglu");
}

INSTANTIATE_TEST_SUITE_P(Files, CorpusFile, ::testing::ValuesIn(corpus_files()),
                         [](const auto& info) { return fs::path(info.param).stem().string(); });

}  // namespace
}  // namespace tessera::cputest
