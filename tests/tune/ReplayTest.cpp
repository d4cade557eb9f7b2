// The search replayed over exhaustive data (Replay.h) at a small scale: synthetic rows of three
// shapes (a smooth cost whose optimum moves with the shape, some configs failing their check).
#include <gtest/gtest.h>

#include <cmath>

#include "support/Diagnostic.h"
#include "tune/Replay.h"

namespace tessera::tune {
namespace {

double cost(const Config& c, int64_t n) {
  auto l = [&](const char* k) { return std::log2(static_cast<double>(c.at(k))); };
  const double bn = std::log2(static_cast<double>(n)) - 3;
  return 1 + 0.3 * std::pow(l("BLOCK_M") - 6, 2) + 0.2 * std::pow(l("BLOCK_N") - bn, 2) +
         0.4 * std::pow(l("BLOCK_K") - 5, 2) + 0.05 * std::pow(static_cast<double>(c.at("split_k")) - 2, 2);
}

// Every config of 5 x 6 x 4 x 4 = 480 at each shape, the default first; BLOCK_K = 8 with
// split_k = 3 fails its check, and a config measured twice keeps its least time.
std::vector<Record> rows(const std::vector<int64_t>& ns) {
  std::vector<Record> out;
  for (int64_t n : ns) {
    auto add = [&](const Config& c, double ms, const std::string& status) {
      Record r;
      r.key = {"synthetic", "h", "K=64,M=" + std::to_string(n / 8) + ",N=" + std::to_string(n), "f32", "cpu", "d", "c"};
      r.config = c;
      r.status = status;
      r.ms = ms;
      out.push_back(r);
    };
    add({{"BLOCK_K", 16}, {"BLOCK_M", 16}, {"BLOCK_N", 16}, {"split_k", 0}}, 1e9, "ok");  // measured again below
    for (int64_t m : {16, 32, 64, 128, 256})
      for (int64_t bn : {16, 32, 64, 128, 256, 512})
        for (int64_t k : {8, 16, 32, 64})
          for (int64_t s : {0, 2, 3, 4}) {
            Config c{{"BLOCK_K", k}, {"BLOCK_M", m}, {"BLOCK_N", bn}, {"split_k", s}};
            if (k == 8 && s == 3) add(c, 0, "check-failed");
            else add(c, cost(c, n), "ok");
          }
  }
  return out;
}

TEST(Replay, ReadsTheDataOnceAConfig) {
  ReplayData d = replay_data(rows({256, 2048}));
  ASSERT_EQ(d.shapes.size(), 2u);
  EXPECT_EQ(d.shapes[0].key, "K=64,M=32,N=256");
  EXPECT_EQ(d.shapes[0].results.size(), 480u);
  EXPECT_EQ(config_str(d.shapes[0].default_config), "BLOCK_K=16,BLOCK_M=16,BLOCK_N=16,split_k=0");
  EXPECT_DOUBLE_EQ(d.shapes[0].results[0].ms, cost(d.shapes[0].default_config, 256));  // the least of its rows
  ASSERT_EQ(d.knobs.size(), 4u);
  EXPECT_EQ(d.knobs[3].name, "split_k");
  EXPECT_EQ(d.knobs[3].kind, KnobKind::Codegen);
  std::vector<Record> mixed = rows({256});
  mixed.back().key.device = "other";
  EXPECT_THROW(replay_data(mixed), TesseraError);
}

// Rows from before a codegen knob existed (split_k left out of the first shape's rows) are that
// knob at its table default: one config with the newer rows that name it, not another config.
TEST(Replay, RowsWithoutANewerKnobAreItsDefault) {
  std::vector<Record> r = rows({256});
  for (Record& x : r)
    if (x.config.at("split_k") == 0) x.config.erase("split_k");
  Record again = r[1];  // BLOCK_K 8, 16 x 16, split_k 0 (left out): measured again, faster, naming it
  again.config["split_k"] = 0;
  again.ms = 0.5;
  r.push_back(again);
  ReplayData d = replay_data(r);
  ASSERT_EQ(d.shapes.size(), 1u);
  EXPECT_EQ(d.shapes[0].results.size(), 480u);
  EXPECT_EQ(config_str(d.shapes[0].default_config), "BLOCK_K=16,BLOCK_M=16,BLOCK_N=16,split_k=0");
  EXPECT_DOUBLE_EQ(d.shapes[0].results[1].ms, 0.5);
}

TEST(Replay, FindsTheBestOfEachShapeMeasuringFivePercentWithTheHistory) {
  ReplayData d = replay_data(rows({256, 2048, 512}));
  ReplayOptions o;
  o.order_dim = "N";
  for (uint64_t seed : {1, 2}) {
    std::vector<ReplayResult> r = replay(d, o, seed);
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(r[0].shape, "K=64,M=256,N=2048");  // larger N first (equal budgets)
    EXPECT_EQ(r[2].shape, "K=64,M=32,N=256");
    for (const ReplayResult& x : r) {
      EXPECT_EQ(x.budget, 24);  // 5% of 480
      EXPECT_EQ(x.measured, 24);
      EXPECT_FALSE(x.tuned.count("BLOCK_K") && x.tuned.at("BLOCK_K") == 8 && x.tuned.at("split_k") == 3);
      EXPECT_DOUBLE_EQ(x.tuned_ms, cost(x.tuned, std::stoll(x.shape.substr(x.shape.find("N=") + 2))));
      EXPECT_LE(x.regret(), 0.02) << "seed " << seed << " " << x.shape << " " << config_str(x.tuned);
    }
  }
  // Noise: the search picks by noisy times, the result is judged by the data's.
  o.noise = 0.5;
  o.budget = 3;
  double worst = 0;
  for (const ReplayResult& x : replay(d, o, 1)) worst = std::max(worst, x.regret());
  EXPECT_GT(worst, 0.02);
}

}  // namespace
}  // namespace tessera::tune
