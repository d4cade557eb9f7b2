// The autotuner's search replayed over exhaustive data (docs/tuning.md): for each shape of a
// JSON Lines export (`tessera tune --export`) that measured a kernel's whole pruned space, the
// search runs with a measurer that answers from the data (each config's least time), the
// shapes in file order with the history of the earlier ones, as bench/tune_cpu_figure.sh
// tunes them. Noise-free and deterministic: it compares search variants and seeds, and a
// random search of the same budget, without measuring anything.
//
//   tune_replay FILE.jsonl [--budget 6] [--seeds 20]
//   xz -dc bench/data/tune_cpu_matmul_exhaustive_20.jsonl.xz | tune_replay - --budget 34 --seeds 5
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "support/Diagnostic.h"
#include "tune/Database.h"
#include "tune/Search.h"

using namespace tessera;
using namespace tessera::tune;

namespace {

class Replay : public Measurer {
 public:
  explicit Replay(const std::map<std::string, double>& ms) : ms_(ms) {}
  std::vector<Measurement> measure(const std::vector<Config>& cs) override {
    std::vector<Measurement> out;
    for (const Config& c : cs) {
      Measurement m;
      m.config = c;
      if (auto it = ms_.find(config_str(c)); it != ms_.end()) {
        m.ms = it->second;
        m.round_ms = {m.ms};
      } else {
        m.status = "timeout";
        m.message = "not in the data";
      }
      out.push_back(m);
    }
    return out;
  }
  std::string device() const override { return "replay"; }
  std::string compiler() const override { return "replay"; }

 private:
  const std::map<std::string, double>& ms_;
};

struct ShapeData {
  Sizes sizes;
  std::map<std::string, double> ms;  // config_str -> least ms of its passing rows
  Config fallback_default;           // the first row's config: what the tune measured first
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tune_replay FILE.jsonl [--budget 6] [--seeds 20]\n");
    return 1;
  }
  int64_t budget = 6;
  int seeds = 20;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--budget") budget = std::stoll(argv[i + 1]);
    else if (a == "--seeds") seeds = std::stoi(argv[i + 1]);
  }
  try {
    Database db(":memory:", true);
    const std::string file = argv[1];
    if (file == "-") {
      db.import_jsonl(std::cin, "<stdin>");
    } else {
      std::ifstream in(file);
      if (!in) throw TesseraError("cannot read " + file);
      db.import_jsonl(in, file);
    }
    std::vector<std::string> order;
    std::map<std::string, ShapeData> shapes;
    for (const Record& r : db.all()) {
      ShapeData& s = shapes[r.key.shape];
      if (s.sizes.empty()) {
        order.push_back(r.key.shape);
        for (const auto& [d, v] : parse_config_str(r.key.shape, "shape")) s.sizes[d] = v;
        s.fallback_default = r.config;
      }
      if (r.status != "ok") continue;
      auto [it, fresh] = s.ms.insert({config_str(r.config), r.ms});
      if (!fresh) it->second = std::min(it->second, r.ms);
    }
    // The space: every knob's values as the data holds them (the configs share their keys).
    int within_search = 0, within_random = 0, runs = 0;
    double regret_search = 0, regret_random = 0;
    for (int seed = 1; seed <= seeds; ++seed) {
      std::vector<History> history;
      std::mt19937_64 rng(static_cast<uint64_t>(seed));
      for (const std::string& name : order) {
        const ShapeData& sh = shapes[name];
        Space space;
        std::map<std::string, std::vector<int64_t>> values;
        std::vector<Config> candidates;
        double best = 1e300;
        for (const auto& [c, ms] : sh.ms) {
          Config cfg = parse_config_str(c, "config");
          for (const auto& [k, v] : cfg) values[k].push_back(v);
          candidates.push_back(cfg);
          best = std::min(best, ms);
        }
        for (auto& [k, vs] : values) {
          std::sort(vs.begin(), vs.end());
          vs.erase(std::unique(vs.begin(), vs.end()), vs.end());
          if (vs.size() > 1) space.knobs.push_back({k, KnobKind::Tile, vs, sh.fallback_default.at(k), {}, ""});
        }
        Replay m(sh.ms);
        SearchOptions o;
        o.budget = budget;
        o.seed = static_cast<uint64_t>(seed);
        SearchResult r = search(space, candidates, sh.fallback_default, sh.sizes, m, history, o);
        const double got = r.best ? r.measured[*r.best].ms : 1e300;
        // Random search: the default and budget - 1 others.
        std::vector<Config> pool = candidates;
        std::shuffle(pool.begin(), pool.end(), rng);
        double rnd = sh.ms.count(config_str(sh.fallback_default)) ? sh.ms.at(config_str(sh.fallback_default)) : 1e300;
        for (int64_t i = 0; i + 1 < budget && i < static_cast<int64_t>(pool.size()); ++i)
          rnd = std::min(rnd, sh.ms.at(config_str(pool[static_cast<size_t>(i)])));
        within_search += got <= best * 1.02;
        within_random += rnd <= best * 1.02;
        regret_search += got / best - 1;
        regret_random += rnd / best - 1;
        ++runs;
        History h;
        h.sizes = sh.sizes;
        h.measured = r.measured;
        history.push_back(std::move(h));
      }
    }
    std::printf("%s: %zu shapes x %d seeds, budget %lld, ranker %s\n", argv[1], order.size(), seeds,
                static_cast<long long>(budget), make_ranker(1)->name().c_str());
    std::printf("  search: within 2%% of the best in %.1f%% of runs, mean regret %.1f%%\n", 100.0 * within_search / runs,
                100 * regret_search / runs);
    std::printf("  random: within 2%% of the best in %.1f%% of runs, mean regret %.1f%%\n", 100.0 * within_random / runs,
                100 * regret_random / runs);
    return 0;
  } catch (const TesseraError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
