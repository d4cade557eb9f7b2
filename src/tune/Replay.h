// The search replayed over exhaustive data (docs/tuning.md "Replaying the search"): every
// config of a kernel's pruned space measured at some shapes (`tessera tune --exhaustive`, then
// `--export`), and search() run shape after shape with a Measurer that answers from those rows,
// with the history of the shapes before, as a `--shapes` tune fills one database. Noise-free
// (or with noise drawn from the seed) and deterministic: no compile, no device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tune/Database.h"
#include "tune/Search.h"

namespace tessera::tune {

struct ReplayShape {
  Sizes sizes;
  std::string key;                   // sizes_key(sizes)
  std::vector<Measurement> results;  // one per config of the data at this shape: its least ok
                                     // time, else the status of its first row
  Config default_config;             // the shape's first row: what a tune (or a sweep) measures first
};

struct ReplayData {
  std::string kernel;               // the rows' kernel name
  std::vector<ReplayShape> shapes;  // in the file's order
  std::vector<Knob> knobs;          // those that vary over the file, their values the union of its rows'
  std::optional<std::vector<std::string>> grid_knobs;  // Space::grid_knobs (the rows do not say: the caller sets it)
};

// The rows of one kernel, dtype, target and device (the first row's); other rows are an error.
ReplayData replay_data(const std::vector<Record>& rows);

struct ReplayOptions {
  int64_t budget = 0;       // configs measured per shape; 0: `percent` of the shape's configs
  double percent = 5;       // with budget 0: max(1, floor(configs x percent / 100)), as
                            // bench/tune_cuda_figure.py gives each shape
  int cores = 1;            // SearchOptions::cores (132 for the H200's data)
  std::string order_dim;    // non-empty: larger budgets first, then larger sizes of this dim
                            // (stable), as the figure runs its tunes; empty: the file's order
  double noise = 0;         // each answer's time x exp(noise x a normal draw from the seed)
  int finalists = 4;        // confirm_best's finalists after each search, as `tessera tune`
                            // does (0: the search's own pick, unconfirmed)
  int confirm_rounds = 2;   // confirm_best's calls (1 with finalists 1: the best against the
                            // default once, as `tessera tune` did before session 22)
};

struct ReplayResult {
  std::string shape;
  int64_t configs = 0, budget = 0, measured = 0;
  double best_ms = 0;   // the data's best at the shape
  double tuned_ms = 0;  // the data's time of the config the search picked (0: none passed)
  Config tuned;
  std::vector<Measurement> trace;  // what the search measured, in order
  double regret() const { return tuned_ms > 0 ? tuned_ms / best_ms - 1 : 1e9; }
};

// One replay of every shape with search seed `seed`.
std::vector<ReplayResult> replay(const ReplayData& data, const ReplayOptions& o, uint64_t seed);

}  // namespace tessera::tune
