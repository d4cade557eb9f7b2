// The search (Search.h): default, diverse sample, model's top picks, genetic refinement.
#include "tune/Search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "support/Diagnostic.h"

namespace tessera::tune {

namespace {

using Clock = std::chrono::steady_clock;

float lg(double v) { return static_cast<float>(std::log2(std::max(v, 0.0) + 1.0)); }

int64_t value_of(const Config& c, const Knob& k) {
  auto it = c.find(k.name);
  return it == c.end() ? k.default_value : it->second;
}

}  // namespace

std::vector<std::string> feature_names(const Space& space, const Sizes& sizes) {
  std::vector<std::string> n;
  for (const auto& [d, v] : sizes) n.push_back("log2 " + d);
  for (const Knob& k : space.knobs) n.push_back("log2 " + k.name);
  for (const char* f : {"log2 programs", "log2 split", "log2 CTAs", "log2 waves", "last wave fill", "tile fill",
                        "log2 elements/program", "log2 loop steps/CTA"})
    n.push_back(f);
  return n;
}

std::vector<float> features(const Space& space, const Sizes& sizes, const Config& config, int cores) {
  std::vector<float> f;
  for (const auto& [d, v] : sizes) f.push_back(lg(static_cast<double>(v)));
  for (const Knob& k : space.knobs) f.push_back(lg(static_cast<double>(value_of(config, k))));
  // Programs: the tiles of the dims the grid spans (the grid's knobs when the space knows
  // them); the other tiled dims are loop steps within a program (matmul's K over BLOCK_K).
  // loop_k: the padded extent of the tiled dims the grid does not read (matmul's K), what the
  // runtime's split rule weighs; -1 (not known: the rule as without it) when there is none.
  double programs = 1, steps = 1, fill = 1, elems = 1, loop_k = -1;
  for (const auto& [name, v] : config) {
    std::string dim = tiled_dim(name, sizes);
    if (dim.empty() || v < 1) continue;
    const double x = static_cast<double>(sizes.at(dim)), b = static_cast<double>(v);
    const double tiles = std::ceil(x / b);
    const bool grid = !space.grid_knobs ||
                      std::find(space.grid_knobs->begin(), space.grid_knobs->end(), name) != space.grid_knobs->end();
    (grid ? programs : steps) *= tiles;
    if (!grid) loop_k = (loop_k < 0 ? 1 : loop_k) * tiles * b;
    fill *= x / (tiles * b);
    elems *= std::min(x, b);
  }
  // The CTAs a launch runs: programs x the runtime's split over K (split_k: n >= 2 ways, 0 its
  // own rule at the occupancy min_blocks asks for, cuda::split_k_factor). Stream-K shares the
  // last partial wave out, so it runs full.
  const double c = std::max(cores, 1);
  const double split =
      static_cast<double>(launch_splits(config, static_cast<int64_t>(programs), static_cast<int64_t>(c),
                                        static_cast<int64_t>(loop_k)));
  const double ctas = programs * split;
  const double waves = std::ceil(ctas / c);
  auto sk = config.find("stream_k");
  const bool stream = sk != config.end() && sk->second == 1;
  f.push_back(lg(programs));
  f.push_back(lg(split));
  f.push_back(lg(ctas));
  f.push_back(lg(ctas / c));
  f.push_back(stream ? 1.0f : static_cast<float>(ctas / (waves * c)));
  f.push_back(static_cast<float>(fill));
  f.push_back(lg(elems));
  f.push_back(lg(steps / split));
  return f;
}

SearchResult search(const Space& space, const std::vector<Config>& candidates, const Config& defaults,
                    const Sizes& sizes, Measurer& m, const std::vector<History>& history, const SearchOptions& o,
                    const std::function<void(const SearchProgress&)>& progress) {
  if (o.budget < 1) throw TesseraError("tune: the budget must be at least 1 configuration");
  if (candidates.empty()) throw TesseraError("tune: no configuration to search");
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  std::mt19937_64 rng(o.seed);
  SearchResult res;
  std::unique_ptr<Ranker> ranker = make_ranker(o.seed);
  res.ranker = ranker->name();

  std::map<std::string, size_t> index;  // config_str -> candidate
  for (size_t i = 0; i < candidates.size(); ++i) index[config_str(candidates[i])] = i;
  std::set<std::string> seen;
  std::vector<char> measured(candidates.size(), 0);  // by candidate: seen, without a config_str each time
  // Each candidate's features, worked out once (the model ranks the same candidates batch after batch).
  std::vector<std::vector<float>> feats(candidates.size());
  auto features_of = [&](size_t i) -> const std::vector<float>& {
    if (feats[i].empty()) feats[i] = features(space, sizes, candidates[i], o.cores);
    return feats[i];
  };

  auto best_ptr = [&]() -> const Measurement* { return res.best ? &res.measured[*res.best] : nullptr; };
  // Measures `batch` (cut to what the budget has left); false when nothing was left to measure.
  auto run_batch = [&](std::vector<Config> batch, const std::string& phase) {
    const int64_t left = o.budget - static_cast<int64_t>(res.measured.size());
    if (static_cast<int64_t>(batch.size()) > left) batch.resize(static_cast<size_t>(std::max<int64_t>(left, 0)));
    if (batch.empty()) return false;
    for (const Config& c : batch) {
      const std::string key = config_str(c);
      seen.insert(key);
      if (auto it = index.find(key); it != index.end()) measured[it->second] = 1;
    }
    std::vector<Measurement> got = m.measure(batch);
    for (Measurement& g : got) {
      res.measured.push_back(std::move(g));
      const Measurement& x = res.measured.back();
      if (x.ok() && (!res.best || x.ms < res.measured[*res.best].ms)) res.best = res.measured.size() - 1;
    }
    if (progress) {
      SearchProgress p;
      p.phase = phase;
      p.measured = static_cast<int64_t>(res.measured.size());
      p.budget = o.budget;
      p.best = best_ptr();
      p.elapsed_s = elapsed();
      const double per = p.elapsed_s / static_cast<double>(p.measured);
      const int64_t unseen = static_cast<int64_t>(candidates.size()) - static_cast<int64_t>(seen.size());
      p.eta_s = per * static_cast<double>(std::max<int64_t>(0, std::min(o.budget - p.measured, unseen + 1)));
      if (o.time_s > 0) p.eta_s = std::min(p.eta_s, std::max(0.0, o.time_s - p.elapsed_s));
      std::vector<Measurement> last(res.measured.end() - static_cast<std::ptrdiff_t>(got.size()), res.measured.end());
      p.batch = &last;
      progress(p);
    }
    return true;
  };
  auto out_of_time = [&] {
    if (o.time_s <= 0 || res.measured.empty()) return false;
    const double per = elapsed() / static_cast<double>(res.measured.size());
    return elapsed() + per * o.batch > o.time_s;
  };
  auto unseen = [&] {
    std::vector<size_t> u;
    for (size_t i = 0; i < candidates.size(); ++i)
      if (!measured[i]) u.push_back(i);
    return u;
  };
  auto remaining = [&] { return o.budget - static_cast<int64_t>(res.measured.size()); };

  // 1. The default config: the baseline, and the first sign of a shape the kernel cannot take.
  run_batch({defaults}, "default");

  // Knob positions of each candidate, normalized to [0, 1], for distances and mutation.
  auto position = [&](const Config& c) {
    std::vector<double> p;
    for (const Knob& k : space.knobs) {
      auto it = std::find(k.values.begin(), k.values.end(), value_of(c, k));
      const double i = it == k.values.end() ? 0 : static_cast<double>(it - k.values.begin());
      p.push_back(k.values.size() > 1 ? i / static_cast<double>(k.values.size() - 1) : 0);
    }
    return p;
  };
  auto dist2 = [](const std::vector<double>& a, const std::vector<double>& b) {
    double d = 0;
    for (size_t i = 0; i < a.size(); ++i) d += (a[i] - b[i]) * (a[i] - b[i]);
    return d;
  };

  // 2. A diverse sample (farthest points from everything measured), larger when the database
  // knows nothing of this kernel here.
  size_t known_groups = 0;
  for (const History& h : history) {
    int ok = 0;
    for (const Measurement& x : h.measured) ok += x.ok();
    known_groups += ok >= 2;
  }
  // With rows at other shapes the model already ranks this one. At a small budget one far
  // config guards against its worst misses: replayed over
  // bench/data/tune_cpu_matmul_exhaustive_10.jsonl.xz (bench/tune_replay), budget 6, the mean
  // distance from the best fell from 11.5% with none to 5.7% with one (session 14; 8.0% and 4.0%
  // in session 21). At 10 or more the model and the genetic step make better use of it: at the
  // H200's decode shapes (budgets 11-16, bench/RESULTS.md session 21) within 2% of the best at
  // 17.1 of 20 shapes without it against 16.6 with it (10 seeds), and 17.4 against 16.3 of 20
  // on bench/data/tune_cpu_matmul_exhaustive_20.jsonl.xz (budgets of 5%).
  const int64_t sample = known_groups > 0 ? std::min<int64_t>(o.budget < 10 ? 1 : 0, remaining())
                                          : std::min<int64_t>(remaining(), std::max<int64_t>(3, o.budget / 3));
  {
    std::vector<std::vector<double>> chosen;
    for (const Measurement& x : res.measured) chosen.push_back(position(x.config));
    std::vector<Config> batch;
    std::vector<size_t> pool = unseen();
    std::shuffle(pool.begin(), pool.end(), rng);
    // Each candidate's position once, and its distance to the nearest chosen one kept up to date.
    std::vector<std::vector<double>> pos;
    std::vector<double> nearest;
    for (size_t i : pool) {
      pos.push_back(position(candidates[i]));
      double d = 1e300;
      for (const auto& c : chosen) d = std::min(d, dist2(pos.back(), c));
      nearest.push_back(d);
    }
    while (static_cast<int64_t>(batch.size()) < sample && !pool.empty()) {
      size_t best_j = 0;
      double best_d = -1;
      for (size_t j = 0; j < pool.size(); ++j)
        if (nearest[j] > best_d) best_d = nearest[j], best_j = j;
      batch.push_back(candidates[pool[best_j]]);
      const std::vector<double> picked = pos[best_j];
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(best_j));
      pos.erase(pos.begin() + static_cast<std::ptrdiff_t>(best_j));
      nearest.erase(nearest.begin() + static_cast<std::ptrdiff_t>(best_j));
      for (size_t j = 0; j < pool.size(); ++j) nearest[j] = std::min(nearest[j], dist2(pos[j], picked));
    }
    for (size_t i = 0; i < batch.size() && !out_of_time(); i += static_cast<size_t>(o.batch))
      run_batch(std::vector<Config>(batch.begin() + static_cast<std::ptrdiff_t>(i),
                                    batch.begin() + static_cast<std::ptrdiff_t>(std::min(batch.size(), i + o.batch))),
                "sample");
  }

  // The model, refitted from the history and this shape's measurements so far; the history's
  // rows are made once.
  std::vector<std::vector<float>> hist_rows;
  std::vector<float> hist_rel;
  std::vector<unsigned> hist_groups;
  // One group: a row per measurement, relevance round(10 * best / ms) (0 for a failure).
  auto add_group = [&](std::vector<std::vector<float>>& rows, std::vector<float>& rel, std::vector<unsigned>& groups,
                       const Sizes& s, const std::vector<Measurement>& ms, bool here) {
    double best = 0;
    for (const Measurement& x : ms)
      if (x.ok() && x.ms > 0 && (best == 0 || x.ms < best)) best = x.ms;
    if (best == 0) return;
    unsigned n = 0;
    for (const Measurement& x : ms) {
      auto it = here ? index.find(config_str(x.config)) : index.end();
      rows.push_back(it != index.end() ? features_of(it->second) : features(space, s, x.config, o.cores));
      rel.push_back(x.ok() && x.ms > 0 ? std::round(static_cast<float>(10 * best / x.ms)) : 0.0f);
      ++n;
    }
    groups.push_back(n);
  };
  for (const History& h : history) add_group(hist_rows, hist_rel, hist_groups, h.sizes, h.measured, false);
  auto fit = [&]() -> bool {
    std::vector<std::vector<float>> rows = hist_rows;
    std::vector<float> rel = hist_rel;
    std::vector<unsigned> groups = hist_groups;
    add_group(rows, rel, groups, sizes, res.measured, true);
    if (rows.size() < 3) return false;
    ranker->fit(rows, rel, groups);
    return true;
  };
  // Candidates (by index), best predicted first.
  auto rank = [&](const std::vector<size_t>& cs) {
    std::vector<std::vector<float>> rows;
    for (size_t i : cs) rows.push_back(features_of(i));
    std::vector<float> score = ranker->predict(rows);
    std::vector<size_t> order(cs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
    std::vector<size_t> out;
    for (size_t i : order) out.push_back(cs[i]);
    return out;
  };
  // |log2 ratio| of each pair of configs measured at one shape that differ in knob k alone.
  auto pair_ratios = [&](size_t k, const std::vector<Measurement>& ms, std::vector<double>& d) {
    // The rest of the config -> this knob's value -> least log2 ms.
    std::map<std::string, std::map<int64_t, double>> by_rest;
    for (const Measurement& x : ms) {
      if (!x.ok() || x.ms <= 0) continue;
      Config rest = x.config;
      rest.erase(space.knobs[k].name);
      auto [it, fresh] = by_rest[config_str(rest)].insert({value_of(x.config, space.knobs[k]), std::log2(x.ms)});
      if (!fresh) it->second = std::min(it->second, std::log2(x.ms));
    }
    for (const auto& [rest, vs] : by_rest)
      for (auto a = vs.begin(); a != vs.end(); ++a)
        for (auto b = std::next(a); b != vs.end(); ++b) d.push_back(std::abs(a->second - b->second));
  };
  std::vector<std::vector<double>> hist_ratios(space.knobs.size());  // the history's, once
  for (size_t k = 0; k < space.knobs.size(); ++k)
    for (const History& h : history) pair_ratios(k, h.measured, hist_ratios[k]);
  // Knobs of minor effect: over the pairs of configs measured at one shape (the history's and
  // this one's) that differ in that knob alone, the median |log2 of their times' ratio| is under
  // log2(1.02). Unknown (fewer than 3 pairs): not minor. Knobs the model cannot tell apart at
  // these shapes (cluster_m and min_blocks at the H200's decode shapes) would otherwise fill
  // whole batches with variants of one config.
  auto minor_knobs = [&] {
    std::vector<char> minor(space.knobs.size(), 0);
    for (size_t k = 0; k < space.knobs.size(); ++k) {
      std::vector<double> d = hist_ratios[k];
      pair_ratios(k, res.measured, d);
      if (d.size() < 3) continue;
      std::nth_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2), d.end());
      minor[k] = d[d.size() / 2] < std::log2(1.02);
    }
    return minor;
  };
  // The first `n` of `ranked` whose major knobs (not minor_knobs) differ from each other's and,
  // with `unmeasured`, from every measured config's; then the others in rank order, when too
  // few are left.
  auto diverse = [&](const std::vector<size_t>& ranked, size_t n, bool unmeasured) {
    const std::vector<char> minor = minor_knobs();
    auto major = [&](const Config& c) {
      std::string key;
      for (size_t k = 0; k < space.knobs.size(); ++k)
        if (!minor[k]) key += std::to_string(value_of(c, space.knobs[k])) + ",";
      return key;
    };
    std::set<std::string> taken;
    if (unmeasured)
      for (const Measurement& x : res.measured) taken.insert(major(x.config));
    std::vector<size_t> out, rest;
    for (size_t i : ranked) {
      if (out.size() >= n) break;
      if (taken.insert(major(candidates[i])).second) out.push_back(i);
      else rest.push_back(i);
    }
    for (size_t i = 0; out.size() < n && i < rest.size(); ++i) out.push_back(rest[i]);
    return out;
  };
  auto configs_of = [&](const std::vector<size_t>& cs) {
    std::vector<Config> out;
    for (size_t i : cs) out.push_back(candidates[i]);
    return out;
  };

  // 3. The model's top predictions, refitted after each batch, for half of what is left (two
  // thirds when it learnt from other shapes too).
  const int64_t model_budget = known_groups > 0 ? remaining() * 2 / 3 : remaining() / 2;
  const int64_t model_end = static_cast<int64_t>(res.measured.size()) + model_budget;
  while (static_cast<int64_t>(res.measured.size()) < model_end && !out_of_time()) {
    std::vector<size_t> pool = unseen();
    if (pool.empty()) break;
    if (fit()) pool = rank(pool);
    else std::shuffle(pool.begin(), pool.end(), rng);
    pool = diverse(pool, static_cast<size_t>(std::min<int64_t>(o.batch, model_end - res.measured.size())), true);
    if (!run_batch(configs_of(pool), "model")) break;
  }

  // 4. Genetic refinement: children of the fastest measured configs (uniform crossover, then a
  // step of one knob to a neighbouring value), and the fastest config with any other value of
  // one knob, those in the pruned space and not measured yet, ranked by the model. The one-knob
  // variants reach values that one-step moves seldom do within the budget (at the first cpu
  // shape every config within 2% had cpu_dot_mr = 4, which the search never tried); replayed
  // (10 seeds, bench/RESULTS.md session 22) within 2% at 17.9 of 20 cpu shapes against 17.4
  // without them (16.5 against 15.1 with 2% noise), the session-22 H200 data level (46.7 and
  // 44.2 of 50), session 16's 48.0 against 47.6 without noise, 47.1 against 47.6 with it.
  while (remaining() > 0 && !out_of_time()) {
    std::vector<const Measurement*> parents;
    for (const Measurement& x : res.measured)
      if (x.ok()) parents.push_back(&x);
    std::sort(parents.begin(), parents.end(), [](auto* a, auto* b) { return a->ms < b->ms; });
    if (parents.size() > 4) parents.resize(4);
    std::vector<size_t> children;
    std::set<size_t> made;
    for (int tries = 0; tries < 64 * o.batch && !parents.empty() && static_cast<int>(children.size()) < 8 * o.batch;
         ++tries) {
      const Config& a = parents[rng() % parents.size()]->config;
      const Config& b = parents[rng() % parents.size()]->config;
      Config c = a;
      for (const Knob& k : space.knobs)
        if (rng() % 2) c[k.name] = value_of(b, k);
      if (!space.knobs.empty()) {
        const Knob& k = space.knobs[rng() % space.knobs.size()];
        auto it = std::find(k.values.begin(), k.values.end(), value_of(c, k));
        int64_t i = it == k.values.end() ? 0 : it - k.values.begin();
        i += (rng() % 2) ? 1 : -1;
        if (i >= 0 && i < static_cast<int64_t>(k.values.size())) c[k.name] = k.values[static_cast<size_t>(i)];
      }
      auto it = index.find(config_str(c));
      if (it == index.end() || measured[it->second] || !made.insert(it->second).second) continue;
      children.push_back(it->second);
    }
    if (!parents.empty())
      for (const Knob& k : space.knobs)
        for (int64_t v : k.values) {
          Config c = parents[0]->config;
          c[k.name] = v;
          auto it = index.find(config_str(c));
          if (it != index.end() && !measured[it->second] && made.insert(it->second).second) children.push_back(it->second);
        }
    // Too few children (a small or exhausted neighbourhood): the model's best unmeasured.
    std::vector<size_t> pool = children;
    if (static_cast<int>(pool.size()) < o.batch)
      for (size_t i : unseen())
        if (!made.count(i)) pool.push_back(i);
    if (pool.empty()) break;
    if (fit()) pool = rank(pool);
    else std::shuffle(pool.begin(), pool.end(), rng);
    pool = diverse(pool, static_cast<size_t>(o.batch), false);
    if (!run_batch(configs_of(pool), "genetic")) break;
  }
  return res;
}

}  // namespace tessera::tune
