// The autotuner's search replayed over exhaustive data (src/tune/Replay.h, docs/tuning.md):
// for each shape of a JSON Lines export (`tessera tune --export`) that measured a kernel's
// whole pruned space, search() runs with a measurer that answers from the data, shape after
// shape with the history of the shapes before, beside a random search of the same budget.
// No compile, no device: it compares search variants over several seeds.
//
//   tune_replay FILE.jsonl|- [--budget B | --percent 5] [--cores 1] [--order-by DIM]
//               [--seeds 5] [--noise 0] [--finalists 4] [--confirm-rounds 2] [--shapes] [--trace]
//   # the H200 figure's tunes (bench/tune_cuda_figure.py): 5% of each shape's space, 132 SMs,
//   # larger budgets first, then larger M
//   xz -dc bench/data/tune_cuda_matmul_exhaustive_50_splitk.jsonl.xz | build/bin/tune_replay - --cores 132 --order-by M
//
// Per seed: how many shapes the tuned config is within 2% of the data's best at, the worst,
// and the geometric mean of tuned / best; then the seeds' mean, and with --shapes each shape's
// count over the seeds and mean distance.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/Library.h"
#include "support/Diagnostic.h"
#include "tune/Replay.h"

using namespace tessera;
using namespace tessera::tune;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: tune_replay FILE.jsonl|- [--budget B | --percent 5] [--cores 1] [--order-by DIM] "
                 "[--seeds 5] [--noise 0] [--finalists 4] [--confirm-rounds 2] [--shapes] [--trace]\n");
    return 1;
  }
  ReplayOptions o;
  int seeds = 5;
  bool per_shape = false, trace = false;
  try {
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--shapes" || a == "--trace") {
        (a == "--shapes" ? per_shape : trace) = true;
        continue;
      }
      if (i + 1 >= argc) throw TesseraError(a + " needs a value");
      const std::string v = argv[++i];
      if (a == "--budget") o.budget = std::stoll(v);
      else if (a == "--percent") o.percent = std::stod(v);
      else if (a == "--cores") o.cores = std::stoi(v);
      else if (a == "--order-by") o.order_dim = v;
      else if (a == "--seeds") seeds = std::stoi(v);
      else if (a == "--noise") o.noise = std::stod(v);
      else if (a == "--finalists") o.finalists = std::stoi(v);
      else if (a == "--confirm-rounds") o.confirm_rounds = std::stoi(v);
      else throw TesseraError("unknown option " + a);
    }
    Database db(":memory:", true);
    const std::string file = argv[1];
    if (file == "-") {
      db.import_jsonl(std::cin, "<stdin>");
    } else {
      std::ifstream in(file);
      if (!in) throw TesseraError("cannot read " + file);
      db.import_jsonl(in, file);
    }
    ReplayData data = replay_data(db.all());
    // The grid's knobs (which tiles count programs) from the library kernel of that name.
    if (const LibraryKernel* lib = find_library_kernel(data.kernel))
      data.grid_knobs = grid_knobs(*lib->build(lib->dtypes.at(0)));
    std::string grid;
    if (data.grid_knobs)
      for (const std::string& g : *data.grid_knobs) grid += (grid.empty() ? "" : ",") + g;
    char budget[64];
    if (o.budget > 0) std::snprintf(budget, sizeof budget, "budget %lld", static_cast<long long>(o.budget));
    else std::snprintf(budget, sizeof budget, "budget %g%% of each shape", o.percent);
    std::printf("%s: %zu shapes, %zu knobs (grid %s), ranker %s, cores %d, %s, noise %g, finalists %d\n", file.c_str(),
                data.shapes.size(), data.knobs.size(), !data.grid_knobs ? "not known" : grid.empty() ? "none" : grid.c_str(),
                make_ranker(1)->name().c_str(), o.cores, budget, o.noise, o.finalists);
    std::map<std::string, std::pair<int, double>> shapes;  // within count, summed regret
    std::vector<std::string> order;
    double within_all = 0, geo_all = 0, worst_all = 0, random_within = 0;
    for (int seed = 1; seed <= seeds; ++seed) {
      const std::vector<ReplayResult> rs = replay(data, o, static_cast<uint64_t>(seed));
      int within = 0;
      double worst = 0, log_sum = 0;
      int64_t measured = 0, configs = 0;
      std::mt19937_64 rng(static_cast<uint64_t>(seed));
      for (const ReplayResult& r : rs) {
        within += r.regret() <= 0.02;
        worst = std::max(worst, r.regret());
        log_sum += std::log1p(std::min(r.regret(), 1e3));
        measured = std::max(measured, r.measured), configs += r.configs;
        if (!shapes.count(r.shape)) order.push_back(r.shape);
        auto& [n, reg] = shapes[r.shape];
        n += r.regret() <= 0.02;
        reg += r.regret();
        // A random search of the same budget: the default and budget - 1 other configs.
        const ReplayShape& sh = *std::find_if(data.shapes.begin(), data.shapes.end(),
                                              [&](const ReplayShape& s) { return s.key == r.shape; });
        std::vector<const Measurement*> pool;
        double rnd = 1e300;
        for (const Measurement& m : sh.results)
          if (config_str(m.config) == config_str(sh.default_config)) rnd = m.ok() ? m.ms : rnd;
          else pool.push_back(&m);
        std::shuffle(pool.begin(), pool.end(), rng);
        for (int64_t i = 0; i + 1 < r.budget && i < static_cast<int64_t>(pool.size()); ++i)
          if (pool[static_cast<size_t>(i)]->ok()) rnd = std::min(rnd, pool[static_cast<size_t>(i)]->ms);
        random_within += rnd <= r.best_ms * 1.02;
        if (trace) {
          std::printf("    seed %d %s: budget %lld, %+.1f%%\n", seed, r.shape.c_str(), static_cast<long long>(r.budget),
                      100 * r.regret());
          for (const Measurement& m : r.trace)
            std::printf("      %s %s %.4g\n", config_str(m.config).c_str(), m.status.c_str(), m.ms / r.best_ms);
        }
      }
      const double geo = std::exp(log_sum / static_cast<double>(rs.size()));
      std::printf("  seed %d: within 2%% at %d of %zu shapes, worst %+.1f%%, tuned/best geomean %.4f\n", seed, within,
                  rs.size(), 100 * worst, geo);
      within_all += within, geo_all += geo, worst_all += worst;
    }
    std::printf("  mean over %d seeds: within 2%% at %.1f of %zu shapes, worst %+.1f%%, tuned/best geomean %.4f "
                "(random search of the same budgets: within 2%% at %.1f)\n",
                seeds, within_all / seeds, data.shapes.size(), 100 * worst_all / seeds, geo_all / seeds,
                random_within / seeds);
    if (per_shape)
      for (const std::string& s : order)
        std::printf("    %-28s within 2%% in %d of %d seeds, mean %+.1f%%\n", s.c_str(), shapes[s].first, seeds,
                    100 * shapes[s].second / seeds);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tune_replay: %s\n", e.what());
    return 1;
  }
}
