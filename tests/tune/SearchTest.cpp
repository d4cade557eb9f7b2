// The search on a synthetic measurer (no compiles): budget, failures, the default first, and
// that it finds the optimum of a smooth space measuring a fraction of it. The rankers alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <thread>
#include <set>

#include "support/Diagnostic.h"
#include "cuda/RuntimeInternal.h"
#include "tune/Search.h"

namespace tessera::tune {
namespace {

// Four knobs of 5..8 values: 1120 configs.
Space synthetic_space() {
  Space s;
  s.kernel = "synthetic";
  s.target = "cpu";
  s.knobs = {{"BLOCK_M", KnobKind::Tile, {16, 32, 64, 128, 256}, 64, {}, ""},
             {"BLOCK_N", KnobKind::Tile, {16, 32, 64, 128, 256, 512, 1024}, 64, {}, ""},
             {"BLOCK_K", KnobKind::Tile, {8, 16, 32, 64}, 16, {}, ""},
             {"UNROLL", KnobKind::Codegen, {1, 2, 3, 4, 5, 6, 7, 8}, 1, {}, ""}};
  return s;
}

// A smooth bowl in log2 space, best at BLOCK_M=128, BLOCK_N=256, BLOCK_K=32, UNROLL=4, with the
// shape moving the optimum of BLOCK_N; configs with BLOCK_K = 8 and UNROLL = 7 fail their check.
class FakeMeasurer : public Measurer {
 public:
  explicit FakeMeasurer(int64_t n) : n_(n) {}
  static double cost(const Config& c, int64_t n) {
    auto l = [&](const char* k) { return std::log2(static_cast<double>(c.at(k))); };
    const double bn = std::log2(static_cast<double>(n)) - 2;
    return 1 + 0.3 * std::pow(l("BLOCK_M") - 7, 2) + 0.2 * std::pow(l("BLOCK_N") - bn, 2) +
           0.4 * std::pow(l("BLOCK_K") - 5, 2) + 0.05 * std::pow(static_cast<double>(c.at("UNROLL")) - 4, 2);
  }
  std::vector<Measurement> measure(const std::vector<Config>& cs) override {
    std::vector<Measurement> out;
    for (const Config& c : cs) {
      Measurement m;
      m.config = c;
      ++calls;
      if (c.at("BLOCK_K") == 8 && c.at("UNROLL") == 7) {
        m.status = "check-failed";
        m.message = "synthetic";
      } else {
        m.ms = cost(c, n_);
        m.round_ms = {m.ms};
      }
      out.push_back(m);
    }
    return out;
  }
  std::string device() const override { return "fake"; }
  std::string compiler() const override { return "fake"; }
  int calls = 0;

 private:
  int64_t n_;
};

TEST(Search, FindsTheOptimumOfASmoothSpaceMeasuringFivePercent) {
  Space s = synthetic_space();
  std::vector<Config> all = s.enumerate();
  const int64_t budget = static_cast<int64_t>(all.size()) * 5 / 100;  // 56 of 1120
  for (uint64_t seed : {1, 2, 3}) {
    FakeMeasurer m(1024);
    SearchOptions o;
    o.budget = budget;
    o.seed = seed;
    SearchResult r = search(s, all, s.defaults(), {{"N", 1024}}, m, {}, o);
    ASSERT_TRUE(r.best);
    EXPECT_LE(static_cast<int64_t>(r.measured.size()), budget);
    EXPECT_EQ(m.calls, static_cast<int>(r.measured.size()));
    double opt = 1e30;
    for (const Config& c : all) opt = std::min(opt, FakeMeasurer::cost(c, 1024));
    EXPECT_LE(r.measured[*r.best].ms, opt * 1.02) << "seed " << seed << " best " << config_str(r.measured[*r.best].config);
  }
}

TEST(Search, MeasuresTheDefaultFirstNothingTwiceAndSkipsFailures) {
  Space s = synthetic_space();
  std::vector<Config> all = s.enumerate();
  FakeMeasurer m(256);
  SearchOptions o;
  o.budget = 40;
  std::vector<std::string> phases;
  SearchResult r = search(s, all, s.defaults(), {{"N", 256}}, m, {}, o,
                          [&](const SearchProgress& p) { phases.push_back(p.phase); });
  ASSERT_EQ(r.measured.size(), 40u);
  EXPECT_EQ(r.measured[0].config, s.defaults());
  EXPECT_EQ(phases.front(), "default");
  EXPECT_NE(std::find(phases.begin(), phases.end(), "genetic"), phases.end());
  std::set<std::string> seen;
  for (const Measurement& x : r.measured) EXPECT_TRUE(seen.insert(config_str(x.config)).second);
  EXPECT_TRUE(r.measured[*r.best].ok());
  // A budget larger than the space measures each candidate once.
  std::vector<Config> few(all.begin(), all.begin() + 5);
  FakeMeasurer m2(256);
  o.budget = 100;
  EXPECT_LE(search(s, few, s.defaults(), {{"N", 256}}, m2, {}, o).measured.size(), 6u);
  o.budget = 0;
  EXPECT_THROW(search(s, all, s.defaults(), {{"N", 256}}, m2, {}, o), TesseraError);
}

TEST(Search, StopsStartingBatchesWhenTheTimeIsSpent) {
  // Each measurement takes 20 ms; 0.3 s leave room for about 15 of the 200 budgeted.
  class Slow : public FakeMeasurer {
   public:
    Slow() : FakeMeasurer(256) {}
    std::vector<Measurement> measure(const std::vector<Config>& cs) override {
      std::this_thread::sleep_for(std::chrono::milliseconds(20 * cs.size()));
      return FakeMeasurer::measure(cs);
    }
  } m;
  Space s = synthetic_space();
  SearchOptions o;
  o.budget = 200;
  o.time_s = 0.3;
  auto t0 = std::chrono::steady_clock::now();
  SearchResult r = search(s, s.enumerate(), s.defaults(), {{"N", 256}}, m, {}, o);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(r.measured.size(), 20u);
  EXPECT_GT(r.measured.size(), 4u);
  EXPECT_LT(took, 0.3 + 0.2);
}

TEST(Search, HistoryOfOtherShapesShrinksTheColdSample) {
  Space s = synthetic_space();
  std::vector<Config> all = s.enumerate();
  // Measured earlier at N = 4096 and 64.
  std::vector<History> hist;
  for (int64_t n : {4096, 64}) {
    History h;
    h.sizes = {{"N", n}};
    FakeMeasurer m(n);
    for (size_t i = 0; i < all.size(); i += 37) h.measured.push_back(m.measure({all[i]})[0]);
    hist.push_back(h);
  }
  int sampled = 0;
  FakeMeasurer m(1024);
  SearchOptions o;
  o.budget = 30;
  SearchResult r = search(s, all, s.defaults(), {{"N", 1024}}, m, hist, o, [&](const SearchProgress& p) {
    if (p.phase == "sample") sampled += static_cast<int>(p.batch->size());
  });
  EXPECT_EQ(sampled, 0);  // the model, trained on the other shapes, picks them all
  double opt = 1e30;
  for (const Config& c : all) opt = std::min(opt, FakeMeasurer::cost(c, 1024));
  EXPECT_LE(r.measured[*r.best].ms, opt * 1.05);
  // Under a budget of 10, one far config guards against the model's worst misses.
  sampled = 0;
  FakeMeasurer small(1024);
  o.budget = 9;
  search(s, all, s.defaults(), {{"N", 1024}}, small, hist, o, [&](const SearchProgress& p) {
    if (p.phase == "sample") sampled += static_cast<int>(p.batch->size());
  });
  EXPECT_EQ(sampled, 1);
  o.budget = 30;
  // Without the history: a third of the budget.
  sampled = 0;
  FakeMeasurer cold(1024);
  search(s, all, s.defaults(), {{"N", 1024}}, cold, {}, o, [&](const SearchProgress& p) {
    if (p.phase == "sample") sampled += static_cast<int>(p.batch->size());
  });
  EXPECT_EQ(sampled, 10);
}

TEST(Search, FeaturesNameEveryColumn) {
  Space s = synthetic_space();
  Sizes sz = {{"M", 100}, {"N", 300}};
  std::vector<float> f = features(s, sz, s.defaults(), 2);
  EXPECT_EQ(f.size(), feature_names(s, sz).size());
  // BLOCK_M = 64 over M = 100: 2 tiles, BLOCK_N = 64 over 300: 5 tiles, so 10 programs.
  EXPECT_FLOAT_EQ(f[sz.size() + s.knobs.size()], static_cast<float>(std::log2(11.0)));
}

TEST(Search, FeaturesCountTheCtasASplitLaunches) {
  Space s;
  s.knobs = {{"BLOCK_M", KnobKind::Tile, {16, 64}, 64, {}, ""},
             {"BLOCK_N", KnobKind::Tile, {64, 128}, 128, {}, ""},
             {"BLOCK_K", KnobKind::Tile, {64, 128}, 64, {}, ""},
             {"min_blocks", KnobKind::Codegen, {1, 2}, 1, {}, ""},
             {"split_k", KnobKind::Codegen, {0, 1, 3}, 0, {}, ""},
             {"stream_k", KnobKind::Codegen, {0, 1}, 0, {}, ""}};
  s.grid_knobs = std::vector<std::string>{"BLOCK_M", "BLOCK_N"};
  const Sizes sz = {{"K", 7168}, {"M", 16}, {"N", 1600}};
  const std::vector<std::string> names = feature_names(s, sz);
  auto at = [&](const Config& c, const std::string& name) {
    std::vector<float> f = features(s, sz, c, 132);
    EXPECT_EQ(f.size(), names.size());
    return f.at(static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin()));
  };
  auto lg = [](double v) { return static_cast<float>(std::log2(v + 1)); };
  Config c = s.defaults();
  // 13 programs of 64 x 128 (BLOCK_K is a loop within a program); split_k = 0: the runtime's rule.
  const int rule = cuda::split_k_factor(13, 132);
  ASSERT_GT(rule, 1);
  EXPECT_FLOAT_EQ(at(c, "log2 programs"), lg(13));
  EXPECT_FLOAT_EQ(at(c, "log2 split"), lg(rule));
  EXPECT_FLOAT_EQ(at(c, "log2 CTAs"), lg(13.0 * rule));
  EXPECT_FLOAT_EQ(at(c, "last wave fill"), static_cast<float>(13.0 * rule / 132));
  EXPECT_FLOAT_EQ(at(c, "log2 loop steps/CTA"), lg(112.0 / rule));
  c["split_k"] = 3;
  EXPECT_FLOAT_EQ(at(c, "log2 CTAs"), lg(39));
  c["split_k"] = 1;
  EXPECT_FLOAT_EQ(at(c, "log2 CTAs"), lg(13));
  c["stream_k"] = 1;  // the last wave shared out
  EXPECT_FLOAT_EQ(at(c, "last wave fill"), 1.0f);
  // 2 resident CTAs per multiprocessor: the rule splits 13 programs to fill 264.
  c = s.defaults();
  c["min_blocks"] = 2;
  EXPECT_FLOAT_EQ(at(c, "log2 split"), lg(cuda::split_k_factor(13, 264)));
  // At K = 1024 the rule leaves the programs unsplit (slices under cuda::kMinSplitKSlice).
  const Sizes short_k = {{"K", 1024}, {"M", 16}, {"N", 1600}};
  const std::vector<float> fs = features(s, short_k, s.defaults(), 132);
  EXPECT_FLOAT_EQ(fs.at(static_cast<size_t>(std::find(names.begin(), names.end(), "log2 split") - names.begin())), lg(1));
  // A space that does not know its grid counts every tile knob as programs, and no K loop: the
  // rule as the runtime has it without the loop's length.
  s.grid_knobs.reset();
  EXPECT_FLOAT_EQ(at(s.defaults(), "log2 programs"), lg(13 * 112));
  EXPECT_FLOAT_EQ(at(s.defaults(), "log2 split"), lg(cuda::split_k_factor(13 * 112, 132)));
}

// A knob of minor effect (under 1% here, at every shape) does not fill a model batch with
// variants of one config once the history shows it minor.
TEST(Search, ModelBatchesSpreadOverTheKnobsThatMatter) {
  Space s = synthetic_space();
  s.knobs.push_back({"minor", KnobKind::Codegen, {1, 2, 3, 4}, 1, {}, ""});
  class Minor : public FakeMeasurer {
   public:
    using FakeMeasurer::FakeMeasurer;
    std::vector<Measurement> measure(const std::vector<Config>& cs) override {
      std::vector<Measurement> out = FakeMeasurer::measure(cs);
      for (Measurement& m : out) m.ms *= 1 + 0.002 * static_cast<double>(m.config.at("minor"));
      return out;
    }
  };
  std::vector<Config> all = s.enumerate();
  History h;  // another shape, every minor variant of 12 configs
  h.sizes = {{"N", 256}};
  {
    Minor m(256);
    std::vector<Config> some;
    for (size_t i = 0; i < all.size() && some.size() < 48; i += 97)
      for (int64_t v : {1, 2, 3, 4}) {
        Config c = all[i];
        c["minor"] = v;
        some.push_back(c);
      }
    h.measured = m.measure(some);
  }
  for (uint64_t seed : {1, 2}) {
    Minor m(1024);
    SearchOptions o;
    o.budget = 40;
    o.seed = seed;
    int batches = 0;
    search(s, all, s.defaults(), {{"N", 1024}}, m, {h}, o, [&](const SearchProgress& p) {
      if (p.phase != "model") return;
      ++batches;
      std::set<std::string> major;
      for (const Measurement& x : *p.batch) {
        Config c = x.config;
        c.erase("minor");
        EXPECT_TRUE(major.insert(config_str(c)).second) << "seed " << seed << ": " << config_str(x.config);
      }
    });
    EXPECT_GE(batches, 3);
  }
}

TEST(Search, RankersOrderByWhatTheyLearnt) {
  // Relevance grows with the first feature, in two groups.
  std::vector<std::vector<float>> rows;
  std::vector<float> rel;
  for (int g = 0; g < 2; ++g)
    for (int i = 0; i < 8; ++i) {
      rows.push_back({static_cast<float>(i), static_cast<float>(g), static_cast<float>((i * 5) % 3)});
      rel.push_back(static_cast<float>(i));
    }
  for (auto& r : {make_ranker(1), make_neighbour_ranker()}) {
    r->fit(rows, rel, {8, 8});
    std::vector<float> s = r->predict({{1, 0, 0}, {6, 0, 0}});
    EXPECT_GT(s[1], s[0]) << r->name();
  }
  EXPECT_EQ(make_ranker(1)->name(), have_xgboost() ? "xgboost rank:pairwise" : "neighbour");
}

// confirm_best: the search's least time was a lucky draw; timed again, another finalist is
// faster and becomes the pick. Only configs within the margin go, each once, the default last;
// every call's rows are returned; the mean of the calls decides; a config that fails a call is
// not picked; the default wins a tie; nothing is picked when nothing passes again.
TEST(Search, ConfirmationPicksTheFastestOfTheFinalistsTimedAgain) {
  // Times by BLOCK_M, one per call (the last repeats; a negative one fails its check).
  class Table : public Measurer {
   public:
    std::map<int64_t, std::vector<double>> ms;
    std::map<int64_t, int> seen;
    std::vector<std::vector<int64_t>> calls;
    std::vector<Measurement> measure(const std::vector<Config>& cs) override {
      std::vector<Measurement> out;
      calls.emplace_back();
      for (const Config& c : cs) {
        const int64_t bm = c.at("BLOCK_M");
        calls.back().push_back(bm);
        const auto& v = ms.at(bm);
        Measurement m;
        m.config = c;
        m.ms = v[std::min<size_t>(static_cast<size_t>(seen[bm]++), v.size() - 1)];
        if (m.ms < 0) m.status = "check-failed", m.ms = 0;
        out.push_back(m);
      }
      return out;
    }
    std::string device() const override { return "fake"; }
    std::string compiler() const override { return "fake"; }
  };
  auto meas = [](int64_t bm, double ms) {
    Measurement m;
    m.config = {{"BLOCK_M", bm}};
    m.ms = ms;
    return m;
  };
  Measurement failed = meas(5, 0);
  failed.status = "check-failed";
  SearchResult res;
  // The default (BLOCK_M 1, 2.0 ms), then the search's draws: 2 looked fastest, 3 near it and
  // measured twice, 6 over the 10% margin, 5 failed once in the search (not a finalist for it).
  res.measured = {meas(1, 2.0), meas(2, 1.00), meas(3, 1.02), meas(3, 1.04), meas(6, 1.11), failed, meas(5, 1.05)};
  res.best = 1;
  Table t;
  // 3 has the least mean (1.0 and 1.1: 1.05) though 5 was fastest in the first call (0.9, then
  // 1.3: 1.1); 2 is slower both times.
  t.ms = {{1, {2.0, 2.2}}, {2, {1.2}}, {3, {1.0, 1.1}}, {5, {0.9, 1.3}}, {6, {0.5}}};
  Confirmation c = confirm_best(t, res);
  ASSERT_EQ(t.calls.size(), 2u);  // two calls
  // Within 10% of 1.00 in time order, each once (6 is over the margin), the default last.
  EXPECT_EQ(t.calls[0], (std::vector<int64_t>{2, 3, 5, 1}));
  EXPECT_EQ(t.calls[1], t.calls[0]);
  EXPECT_EQ(c.rows.size(), 8u);
  ASSERT_TRUE(c.best);
  EXPECT_EQ(c.best->config.at("BLOCK_M"), 3);
  EXPECT_DOUBLE_EQ(c.best->ms, 1.05);
  EXPECT_EQ(c.best->round_ms, (std::vector<double>{1.0, 1.1}));
  EXPECT_NEAR(c.best->noise, 0.1, 1e-12);
  ASSERT_TRUE(c.dflt);
  EXPECT_DOUBLE_EQ(c.dflt->ms, 2.1);  // the default's mean, not its search figure

  // 5 fastest in both calls but failing the second: not picked; the default failing a call is
  // reported as failed.
  Table fails;
  fails.ms = {{1, {2.0, -1}}, {2, {1.2}}, {3, {1.1}}, {5, {0.5, -1}}};
  Confirmation f = confirm_best(fails, res);
  ASSERT_TRUE(f.best);
  EXPECT_EQ(f.best->config.at("BLOCK_M"), 3);
  ASSERT_TRUE(f.dflt);
  EXPECT_EQ(f.dflt->status, "check-failed");

  // The default ties the fastest finalist: it stays.
  Table tie;
  tie.ms = {{1, {1.0}}, {2, {1.0}}, {3, {1.5}}, {5, {1.5}}};
  Confirmation d = confirm_best(tie, res);
  ASSERT_TRUE(d.best);
  EXPECT_EQ(d.best->config.at("BLOCK_M"), 1);

  // Nothing passes again: no pick.
  Table none_pass;
  none_pass.ms = {{1, {-1}}, {2, {-1}}, {3, {-1}}, {5, {-1}}};
  EXPECT_FALSE(confirm_best(none_pass, res).best);

  // No search pick: nothing measured; fewer finalists and calls asked: fewer timed.
  SearchResult none;
  none.measured = {failed};
  Table unused;
  EXPECT_FALSE(confirm_best(unused, none).best);
  EXPECT_TRUE(unused.calls.empty());
  Table one;
  one.ms = t.ms;
  ConfirmOptions o;
  o.finalists = 1;
  o.rounds = 1;
  Confirmation e = confirm_best(one, res, o);
  ASSERT_EQ(one.calls.size(), 1u);
  EXPECT_EQ(one.calls[0], (std::vector<int64_t>{2, 1}));
  ASSERT_TRUE(e.best);
  EXPECT_EQ(e.best->config.at("BLOCK_M"), 2);
}

}  // namespace
}  // namespace tessera::tune
