// confirm_best: the search's fastest few and the default, timed again side by side.
//
// Why: search() keeps the least time it saw, and with a few percent of noise per measurement
// the least of ten or twenty draws is often a lucky draw of a config a few percent slower than
// another it measured. Replayed against the H200 data with 2% noise (bench/RESULTS.md, session
// 22; 10 seeds): the search's own pick came within 2% of the best at 41.6 of 50 shapes, the
// best confirmed against the default in one call (what `tessera tune` did before) at 42.3, the
// 4 fastest and the default timed again in 2 calls at 44.2. The mean of those calls decides, as
// Database::best decides among a shape's confirmed rows (which also holds earlier tunes' rows
// of the shape, if any, and breaks an exact tie by config order).
#include "tune/Search.h"

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

namespace tessera::tune {

Confirmation confirm_best(Measurer& m, const SearchResult& res, const ConfirmOptions& o) {
  Confirmation c;
  if (res.measured.empty()) return c;
  const Measurement& def = res.measured.front();
  if (def.ok()) c.dflt = def;
  if (!res.best) return c;
  const Measurement& best = res.measured[*res.best];
  // The finalists: the search's fastest passing configs within the margin, each once, then the
  // default (last, so that it wins a tie: it is what runs without a database).
  std::vector<size_t> order;
  for (size_t i = 0; i < res.measured.size(); ++i)
    if (res.measured[i].ok()) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return res.measured[a].ms < res.measured[b].ms; });
  std::vector<Config> configs;
  std::set<std::string> seen;
  for (size_t i : order) {
    const Measurement& x = res.measured[i];
    if (static_cast<int>(configs.size()) >= std::max(1, o.finalists) || x.ms > best.ms * (1 + o.margin)) break;
    if (seen.insert(config_str(x.config)).second) configs.push_back(x.config);
  }
  if (def.ok() && seen.insert(config_str(def.config)).second) configs.push_back(def.config);
  // `rounds` calls; a config counts only if it passed in every one (a config that failed a
  // check or timed out once is not what `run` should use: Database::best leaves it out too).
  const int n = std::max(1, o.rounds);
  std::vector<std::vector<double>> times(configs.size());  // each config's passing calls
  std::vector<std::optional<Measurement>> failed(configs.size());
  std::vector<size_t> first_row(configs.size(), 0);
  for (int r = 0; r < n; ++r) {
    std::vector<Measurement> again = m.measure(configs);
    for (size_t i = 0; i < configs.size(); ++i) {
      // (One per config, as Measurer promises; a missing one counts as a failure.)
      if (i >= again.size() || !again[i].ok()) {
        if (!failed[i]) {
          Measurement x;
          if (i < again.size()) x = again[i];
          else x.config = configs[i], x.status = "run-error", x.message = "not measured";
          failed[i] = x;
        }
        continue;
      }
      if (times[i].empty()) first_row[i] = c.rows.size() + i;
      times[i].push_back(again[i].ms);
    }
    c.rows.insert(c.rows.end(), again.begin(), again.end());
  }
  auto mean = [&](size_t i) {
    double t = 0;
    for (double x : times[i]) t += x;
    return t / static_cast<double>(times[i].size());
  };
  // A config's confirmed figure: its first call's row with the mean of the calls, their spread
  // as its noise (as Measurement::noise) and their times as its rounds.
  auto confirmed = [&](size_t i) {
    Measurement x = c.rows[first_row[i]];
    const auto [lo, hi] = std::minmax_element(times[i].begin(), times[i].end());
    x.ms = mean(i);
    x.noise = *lo > 0 ? (*hi - *lo) / *lo : 0;
    x.round_ms = times[i];
    return x;
  };
  std::optional<size_t> pick;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (failed[i]) continue;
    const bool is_default = def.ok() && configs[i] == def.config;
    // The least mean; the default (last) wins a tie.
    if (!pick || mean(i) < mean(*pick) || (mean(i) == mean(*pick) && is_default)) pick = i;
  }
  // Nothing passed again: no pick (the search's best failed its confirmation).
  c.best = pick ? std::optional<Measurement>(confirmed(*pick)) : std::nullopt;
  for (size_t i = 0; i < configs.size(); ++i)
    if (def.ok() && configs[i] == def.config) c.dflt = failed[i] ? *failed[i] : confirmed(i);
  return c;
}

}  // namespace tessera::tune
