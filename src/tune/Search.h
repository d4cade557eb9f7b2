// The search: a learned ranking of configurations (XGBoost, rank:pairwise) over features of
// the shape and the config, the top predictions measured, then a genetic refinement that the
// model ranks; a small diverse sample first when nothing is known (docs/tuning.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tune/Measure.h"
#include "tune/Space.h"

namespace tessera::tune {

// Features of one (shape, config): log2 of every size and knob value, then what they imply
// for the grid (programs, waves over the cores, the tiles' fill of the padded shape, elements
// per program). `feature_names` lists them.
std::vector<float> features(const Space& space, const Sizes& sizes, const Config& config, int cores);
std::vector<std::string> feature_names(const Space& space, const Sizes& sizes);

// A learning-to-rank model: groups of rows (one group per shape), higher relevance better.
class Ranker {
 public:
  virtual ~Ranker() = default;
  // rows[i] has relevance[i]; groups are consecutive rows, group_sizes[g] of them.
  virtual void fit(const std::vector<std::vector<float>>& rows, const std::vector<float>& relevance,
                   const std::vector<unsigned>& group_sizes) = 0;
  // Scores (higher: predicted faster); fit must have been called.
  virtual std::vector<float> predict(const std::vector<std::vector<float>>& rows) const = 0;
  virtual std::string name() const = 0;
};

// XGBoost rank:pairwise when built with libxgboost-dev, else the neighbour ranker.
std::unique_ptr<Ranker> make_ranker(uint64_t seed);
// The fallback (and a baseline in tests): a row scores the relevance-weighted closeness to the
// measured rows.
std::unique_ptr<Ranker> make_neighbour_ranker();
bool have_xgboost();

// Measurements of earlier runs at other shapes (or this one), from the database.
struct History {
  Sizes sizes;
  std::vector<Measurement> measured;
};

struct SearchOptions {
  int64_t budget = 0;   // configs to measure, the default's included (at least 1)
  double time_s = 0;    // stop starting new batches after this long (0: no limit)
  uint64_t seed = 1;
  int batch = 4;        // configs measured together (compiled in parallel)
  int cores = 1;        // for the waves feature
};

struct SearchProgress {
  std::string phase;  // "default", "sample", "model", "genetic"
  int64_t measured = 0, budget = 0;
  const Measurement* best = nullptr;  // null until one passes
  double elapsed_s = 0, eta_s = 0;
  const std::vector<Measurement>* batch = nullptr;  // the batch just measured
};

struct SearchResult {
  std::vector<Measurement> measured;  // in order; [0] is the default config
  std::optional<size_t> best;         // index of the fastest passing one
  std::string ranker;
};

// Measures `defaults` first, then searches `candidates` (the pruned space) with `m` until the
// budget or the time is spent. `progress` is called after every batch.
SearchResult search(const Space& space, const std::vector<Config>& candidates, const Config& defaults,
                    const Sizes& sizes, Measurer& m, const std::vector<History>& history, const SearchOptions& o,
                    const std::function<void(const SearchProgress&)>& progress = {});

// The search's pick checked again (src/tune/Confirm.cpp): the fastest `finalists` passing
// configs it measured (those within `margin` of its best) and the default, measured again side
// by side in `rounds` Measurer calls, so that the pick is not the luckiest of many noisy draws.
struct ConfirmOptions {
  int finalists = 4;    // the search's fastest configs timed again (at least 1: its best)
  double margin = 0.1;  // only those within this fraction of its best time
  int rounds = 2;       // Measurer calls over the finalists; the mean of a config's times decides
};
struct Confirmation {
  std::vector<Measurement> rows;    // every measurement taken, call after call (stored as confirmed)
  std::optional<Measurement> best;  // the least mean of those that passed every call (the default
                                    // on a tie), its ms that mean, noise and round_ms over the
                                    // calls; none when none did (or the search had no pick)
  std::optional<Measurement> dflt;  // the default's: its mean as for `best`, or its failing row
                                    // when it failed a call; the search's own row when it was
                                    // not measured again (no pick); none when it failed there
};
Confirmation confirm_best(Measurer& m, const SearchResult& res, const ConfirmOptions& o = {});

}  // namespace tessera::tune
