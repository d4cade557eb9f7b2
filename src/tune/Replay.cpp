// The search replayed over exhaustive data (Replay.h).
#include "tune/Replay.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "support/Diagnostic.h"

namespace tessera::tune {

namespace {

// Answers from one shape's data. A config the data lacks cannot come from the search (the
// candidates are the data's configs); asked anyway, it is a failure ("not in the data").
class ReplayMeasurer : public Measurer {
 public:
  ReplayMeasurer(const ReplayShape& s, double noise, uint64_t seed) : noise_(noise), rng_(seed) {
    for (const Measurement& m : s.results) by_config_[config_str(m.config)] = &m;
  }
  std::vector<Measurement> measure(const std::vector<Config>& cs) override {
    std::vector<Measurement> out;
    for (const Config& c : cs) {
      Measurement m;
      m.config = c;
      auto it = by_config_.find(config_str(c));
      if (it == by_config_.end()) {
        m.status = "check-failed";
        m.message = "not in the replayed data";
      } else if (!it->second->ok()) {
        m.status = it->second->status;
        m.message = it->second->message;
      } else {
        m.ms = it->second->ms;
        if (noise_ > 0) m.ms *= std::exp(noise_ * normal_(rng_));
        m.round_ms = {m.ms};
      }
      out.push_back(std::move(m));
    }
    return out;
  }
  std::string device() const override { return "replay"; }
  std::string compiler() const override { return "replay"; }

 private:
  std::map<std::string, const Measurement*> by_config_;
  double noise_;
  std::mt19937_64 rng_;
  std::normal_distribution<double> normal_;
};

}  // namespace

ReplayData replay_data(const std::vector<Record>& given) {
  ReplayData d;
  if (given.empty()) throw TesseraError("replay: no rows");
  // A row written before a codegen knob that other rows name existed is one config with the
  // newer rows that name the knob's default (as `tessera tune` reads such rows).
  std::vector<Record> rows = given;
  complete_knob_defaults(rows);
  const TuneKey& k0 = rows[0].key;
  d.kernel = k0.kernel;
  std::map<std::string, size_t> shape_index;
  std::vector<std::map<std::string, size_t>> config_index;
  std::map<std::string, std::vector<int64_t>> values;
  for (const Record& r : rows) {
    if (r.key.kernel_hash != k0.kernel_hash || r.key.dtype != k0.dtype || r.key.target != k0.target ||
        r.key.device != k0.device)
      throw TesseraError("replay: rows of more than one kernel, dtype, target or device (" + r.key.kernel + " " +
                         r.key.dtype + " " + r.key.target + " " + r.key.device + " after " + k0.kernel + " " +
                         k0.dtype + " " + k0.target + " " + k0.device + ")");
    auto [si, fresh] = shape_index.insert({r.key.shape, d.shapes.size()});
    if (fresh) {
      ReplayShape s;
      s.key = r.key.shape;
      for (const auto& [dim, v] : parse_config_str(r.key.shape, "replay: shape")) s.sizes[dim] = v;
      s.default_config = r.config;
      d.shapes.push_back(std::move(s));
      config_index.emplace_back();
    }
    ReplayShape& s = d.shapes[si->second];
    for (const auto& [name, v] : r.config) values[name].push_back(v);
    auto [ci, new_config] = config_index[si->second].insert({config_str(r.config), s.results.size()});
    if (new_config) {
      Measurement m;
      m.config = r.config;
      m.status = r.status;
      m.ms = r.status == "ok" ? r.ms : 0;
      m.message = r.message;
      s.results.push_back(std::move(m));
      continue;
    }
    Measurement& m = s.results[ci->second];
    if (r.status != "ok") continue;
    if (!m.ok() || r.ms < m.ms) m.status = "ok", m.ms = r.ms, m.message.clear();
  }
  // The knobs: those with two values or more over the file (the others are fixed), each
  // default the first shape's.
  for (auto& [name, vs] : values) {
    std::sort(vs.begin(), vs.end());
    vs.erase(std::unique(vs.begin(), vs.end()), vs.end());
    if (vs.size() < 2) continue;
    const KnobDecl* decl = find_codegen_knob(name);
    const Config& def = d.shapes[0].default_config;
    d.knobs.push_back({name, decl ? KnobKind::Codegen : KnobKind::Tile, vs,
                       def.count(name) ? def.at(name) : vs[0], {}, ""});
  }
  return d;
}

std::vector<ReplayResult> replay(const ReplayData& data, const ReplayOptions& o, uint64_t seed) {
  auto budget_of = [&](const ReplayShape& s) {
    const int64_t n = static_cast<int64_t>(s.results.size());
    const int64_t b = o.budget > 0 ? o.budget : static_cast<int64_t>(std::floor(static_cast<double>(n) * o.percent / 100));
    return std::clamp<int64_t>(b, 1, n);
  };
  std::vector<const ReplayShape*> order;
  for (const ReplayShape& s : data.shapes) order.push_back(&s);
  if (!o.order_dim.empty())
    std::stable_sort(order.begin(), order.end(), [&](const ReplayShape* a, const ReplayShape* b) {
      const int64_t ba = budget_of(*a), bb = budget_of(*b);
      if (ba != bb) return ba > bb;
      auto dim = [&](const ReplayShape* s) { return s->sizes.count(o.order_dim) ? s->sizes.at(o.order_dim) : 0; };
      return dim(a) > dim(b);
    });
  std::vector<History> history;
  std::vector<ReplayResult> out;
  for (const ReplayShape* s : order) {
    Space space;
    space.kernel = "replay";
    space.knobs = data.knobs;
    space.grid_knobs = data.grid_knobs;
    for (Knob& k : space.knobs)
      if (auto it = s->default_config.find(k.name); it != s->default_config.end()) k.default_value = it->second;
    std::vector<Config> candidates;
    ReplayResult r;
    r.shape = s->key;
    std::map<std::string, double> data_ms;
    for (const Measurement& m : s->results) {
      candidates.push_back(m.config);
      if (!m.ok()) continue;
      data_ms[config_str(m.config)] = m.ms;
      if (r.best_ms == 0 || m.ms < r.best_ms) r.best_ms = m.ms;
    }
    r.configs = static_cast<int64_t>(candidates.size());
    r.budget = budget_of(*s);
    ReplayMeasurer m(*s, o.noise, seed * 1000003 + out.size());
    SearchOptions so;
    so.budget = r.budget;
    so.seed = seed;
    so.cores = o.cores;
    SearchResult res = search(space, candidates, s->default_config, s->sizes, m, history, so);
    r.measured = static_cast<int64_t>(res.measured.size());
    if (res.best) {
      r.tuned = res.measured[*res.best].config;
      if (o.finalists > 0) {
        ConfirmOptions co;
        co.finalists = o.finalists;
        co.rounds = o.confirm_rounds;
        if (Confirmation c = confirm_best(m, res, co); c.best) r.tuned = c.best->config;
      }
      r.tuned_ms = data_ms.at(config_str(r.tuned));
    }
    r.trace = res.measured;
    History h;
    h.sizes = s->sizes;
    h.measured = res.measured;
    history.push_back(std::move(h));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace tessera::tune
