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
//    that a kernel that does nothing, or computes only zeros, fails.
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "../cpu/CpuTestUtil.h"

namespace tessera::cputest {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(TESSERA_SOURCE_DIR) / "tests" / "corpus";

std::vector<std::string> corpus_files() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kDir))
    if (e.path().extension() == ".tile") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_text(const std::string& name) {
  std::ifstream in(kDir / name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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
      EXPECT_GT(testutil::expect_tensors_match(want, got, k->name, "cpu"), 0);
    }
  }
  EXPECT_EQ(ranged.size(), ranges.size()) << "a '// range:' names a view no kernel has";
}

INSTANTIATE_TEST_SUITE_P(Files, CorpusFile, ::testing::ValuesIn(corpus_files()),
                         [](const auto& info) { return fs::path(info.param).stem().string(); });

}  // namespace
}  // namespace tessera::cputest
