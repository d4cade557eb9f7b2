// `tessera tune`: search a kernel's tuning space at one shape, store every measurement in the
// tuning database, print the best config against the default (docs/tuning.md).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <set>
#include <thread>

#include "check/Compare.h"
#include "cli/Args.h"
#include "cli/Backend.h"
#include "cli/Commands.h"
#include "cuda/Driver.h"
#include "interp/Interpreter.h"
#include "kernels/Library.h"
#include "tune/Database.h"
#include "tune/Lookup.h"
#include "tune/Search.h"

namespace tessera::cli {

namespace {

using tune::Config;
using tune::Measurement;

// Above this many floating-point operations (the library's count), the reference runs on
// sampled rows (LibraryKernel::row_dim): its double loops take about a second per 1e9.
constexpr double kSampledCheckFlops = 2e9;

std::string knob_targets(const tune::Knob& k) {
  if (k.targets.empty()) return "all";
  std::string s;
  for (const auto& t : k.targets) s += (s.empty() ? "" : ",") + t;
  return s;
}

std::string values_str(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

std::string ms_str(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", ms);
  return buf;
}

std::string pct(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * f);
  return buf;
}

// `p`: null when the space is too large to prune.
void print_space(const tune::Space& s, const tune::Pruned* p, const Kernel& k, const Sizes& sizes,
                 const std::string& dtype) {
  std::cout << "space of " << k.name << " on " << s.target << (dtype.empty() ? "" : " dtype=" + dtype) << " at "
            << sizes_str(k, sizes) << "\n";
  std::cout << "  knob                 kind     targets      default  values\n";
  for (const tune::Knob& kn : s.knobs) {
    char line[256];
    std::snprintf(line, sizeof line, "  %-20s %-8s %-12s %-8lld %s\n", kn.name.c_str(),
                  kn.kind == tune::KnobKind::Tile ? "tile" : "codegen", knob_targets(kn).c_str(),
                  static_cast<long long>(kn.default_value), values_str(kn.values).c_str());
    std::cout << line;
  }
  for (const tune::Knob& kn : s.elsewhere)
    std::cout << "  (" << kn.name << ": " << knob_targets(kn) << " only, " << values_str(kn.values) << ")\n";
  if (!s.fixed.empty()) std::cout << "  fixed: " << tune::config_str(s.fixed) << "\n";
  for (const tune::Constraint& c : s.constraints) std::cout << "  constraint " << c.name << ": " << c.doc << "\n";
  if (!p) {
    std::cout << "size " << s.size() << ", too large to prune: fix some knobs with --config\n";
    return;
  }
  std::cout << "size " << s.size() << ", pruned " << p->configs.size();
  for (const auto& [why, n] : p->removed_by) std::cout << " (" << why << " removed " << n << ")";
  std::cout << "\n";
}

// Progress: one rewritten line on a terminal, a plain line per batch when piped.
class Progress {
 public:
  Progress(bool quiet) : tty_(!quiet && ::isatty(2)), quiet_(quiet) {}
  void update(const tune::SearchProgress& p) {
    if (quiet_) return;
    std::string best = p.best ? ms_str(p.best->ms) + " ms (" + tune::config_str(p.best->config) + ")" : "none yet";
    char head[128];
    std::snprintf(head, sizeof head, "tune: %-7s %lld/%lld measured, best ", p.phase.c_str(),
                  static_cast<long long>(p.measured), static_cast<long long>(p.budget));
    std::string line = head + best + ", eta " + std::to_string(static_cast<long long>(std::lround(p.eta_s))) + " s";
    if (tty_) {
      std::cerr << "\r\033[K" << line << std::flush;
    } else {
      std::cerr << line << "\n";
      for (const Measurement& m : *p.batch)
        if (!m.ok()) std::cerr << "tune:   " << m.status << " " << tune::config_str(m.config) << ": " << m.message << "\n";
    }
  }
  void done() {
    if (tty_) std::cerr << "\n";
  }

 private:
  bool tty_, quiet_;
};

int db_only(const TuneOptions& o) {
  const std::string path = o.db.empty() ? tune::default_database_path() : o.db;
  if (!o.import_file.empty()) {
    std::ifstream in(o.import_file);
    if (!in) throw TesseraError("cannot read " + o.import_file);
    tune::Database db(path, true);
    int64_t n = db.import_jsonl(in, o.import_file);
    std::cout << "imported " << n << " rows into " << path << "\n";
  }
  if (!o.export_file.empty()) {
    tune::Database db(path, false);
    if (o.export_file == "-") {
      db.export_jsonl(std::cout);
    } else {
      std::ofstream out(o.export_file);
      if (!out) throw TesseraError("cannot write " + o.export_file);
      db.export_jsonl(out);
      out.close();
      if (!out) throw TesseraError("cannot write " + o.export_file);
      std::cerr << "exported " << db.count() << " rows to " << o.export_file << "\n";
    }
  }
  return 0;
}

// --compile-only: every config of the pruned space compiled (NVRTC, in parallel, into the
// compile cache), and what the cubins' registers and shared memory prune.
int compile_only(const Kernel& k, const std::string& target, const Sizes& sizes, const tune::Pruned& pruned,
                 const tune::Space& space, const TuneOptions& o) {
  tune::Problem prob;
  prob.kernel = &k;
  prob.target = target;
  prob.sizes = sizes;
  // Zero tensors: the shapes say whether the split-K compilation is needed too.
  std::unique_ptr<Kernel> b = tune::bind_config(k, space.defaults());
  for (const Value* v : b->view_params()) prob.inputs.emplace_back(v->type.elem, view_shape(*b, *v, sizes));
  prob.make_args = [sizes](const Kernel& bk, std::vector<Tensor>& t) { return tessera::make_args(bk, t, sizes); };
  tune::MeasureOptions mo;
  mo.timeout_s = o.timeout_s;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Measurement> ms = tune::cuda_compile_candidates(prob, mo, pruned.configs);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::map<std::string, int> by_status;
  std::map<std::string, std::string> first;
  int lo = 1 << 30, hi = -1;
  double compile_s = 0;
  for (const Measurement& m : ms) {
    ++by_status[m.status];
    if (!m.ok() && !first.count(m.status)) first[m.status] = tune::config_str(m.config) + ": " + m.message;
    if (m.registers >= 0) lo = std::min(lo, m.registers), hi = std::max(hi, m.registers);
    compile_s += m.compile_s;
  }
  std::cout << k.name << " " << target << " " << sizes_str(k, sizes) << ": compiled " << ms.size() << " configs in "
            << ms_str(seconds) << " s (" << ms_str(compile_s) << " s of compiles, cache hits included)";
  if (hi >= 0) std::cout << ", " << lo << "-" << hi << " registers per thread";
  std::cout << "\n";
  for (const auto& [st, c] : by_status)
    std::cout << "  " << st << " " << c << (first.count(st) ? " (first: " + first[st] + ")" : "") << "\n";
  return by_status.count("ok") ? 0 : 1;
}

}  // namespace

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The reference of a kernel independent by rows (LibraryKernel::row_dim) on `rows` of it: its
// row views cut to those rows (prob.want, and prob.bounds), the other views (the kernel's
// inputs) read where they are, not copied (an LLM GEMM's b is 117 million elements).
void reference_on_rows(const LibraryKernel& lib, const Kernel& bound, const Sizes& sizes, uint64_t seed,
                       const std::vector<std::string>& scalars, const std::vector<int64_t>& rows, tune::Problem& prob) {
  const size_t nviews = prob.inputs.size();
  prob.want.assign(nviews, tune::no_rows());
  for (size_t i = 0; i < nviews; ++i)
    if (tune::is_row_view(prob, bound, i)) prob.want[i] = tune::take_rows(prob.inputs[i], rows);
  std::vector<KernelArg> args = make_args(bound, prob.want, seed, scalars);
  size_t v = 0;
  for (size_t j = 0; j < bound.params.size(); ++j) {
    if (!bound.params[j]->type.is_view()) continue;
    if (!tune::is_row_view(prob, bound, v)) args[j].tensor = const_cast<Tensor*>(&prob.inputs[v]);  // read only
    ++v;
  }
  Sizes s = sizes;
  s[prob.row_dim] = static_cast<int64_t>(rows.size());
  lib.reference(args, s);
  prob.bounds.clear();
  if (lib.error_bounds) prob.bounds = lib.error_bounds(args, s);
}

// A measurement as the --json lines print it: config, status, ms, noise.
std::string measurement_json(const Measurement* m) {
  if (!m) return "null";
  std::string cfg;
  for (const auto& [nme, v] : m->config) cfg += (cfg.empty() ? "" : ", ") + json_str(nme) + ": " + std::to_string(v);
  return "{\"config\": {" + cfg + "}, \"status\": " + json_str(m->status) + ", \"ms\": " + ms_str(m->ms) +
         ", \"noise\": " + ms_str(m->noise) + "}";
}

// The kernel's symbolic dims and their sizes, as a JSON object.
std::string sizes_json(const Kernel& k, const Sizes& sizes) {
  std::string sz;
  for (const auto& d : symbolic_dims(k)) sz += (sz.empty() ? "" : ", ") + json_str(d) + ": " + std::to_string(sizes.at(d));
  return "{" + sz + "}";
}

// The tune's result: a JSON line (--json) or a table; 1 when no config passed.
int report(const TuneOptions& o, const Kernel& k, const Sizes& sizes, const std::string& dtype, const tune::Space& space,
           int64_t n, const tune::SearchResult& res, const Measurement& def, const std::optional<Measurement>& best_m,
           double seconds, const std::string& db_path, const tune::MeasureStats& st, double inputs_s, double setup_s,
           double total_s) {
  std::map<std::string, int> failures;
  for (const Measurement& m : res.measured)
    if (!m.ok()) ++failures[m.status];
  const Measurement* best = best_m ? &*best_m : nullptr;
  const double speedup = best && def.ok() && best->ms > 0 ? def.ms / best->ms : 0;
  if (o.json) {
    std::string fails;
    for (const auto& [s, c] : failures) fails += (fails.empty() ? "" : ", ") + json_str(s) + ": " + std::to_string(c);
    // Where the time went: the problem's inputs and reference, then the measurer's phases.
    std::string phases = "{\"inputs_s\": " + ms_str(inputs_s) + ", \"reference_s\": " + ms_str(setup_s - inputs_s) +
                         ", \"compile_s\": " + ms_str(st.compile_s) + ", \"load_s\": " + ms_str(st.load_s) +
                         ", \"check_s\": " + ms_str(st.check_s) + ", \"time_s\": " + ms_str(st.time_s) +
                         ", \"forks\": " + std::to_string(st.forks) + ", \"checked\": " + std::to_string(st.checked) +
                         ", \"timed\": " + std::to_string(st.timed) + ", \"total_s\": " + ms_str(total_s) + "}";
    std::cout << "{\"kernel\": " << json_str(k.name) << ", \"backend\": " << json_str(o.backend)
              << ", \"dtype\": " << json_str(dtype) << ", \"sizes\": " << sizes_json(k, sizes)
              << ", \"space\": " << space.size() << ", \"pruned\": " << n << ", \"measured\": " << res.measured.size()
              << ", \"ranker\": " << json_str(res.ranker) << ", \"seconds\": " << ms_str(seconds)
              << ", \"best\": " << measurement_json(best) << ", \"default\": " << measurement_json(&def)
              << ", \"speedup\": " << ms_str(speedup) << ", \"failures\": {" << fails << "}"
              << ", \"phases\": " << phases << ", \"database\": " << json_str(db_path) << "}\n";
  } else {
    std::cout << k.name << " " << o.backend << " " << sizes_str(k, sizes) << (dtype.empty() ? "" : " dtype=" + dtype)
              << ": measured " << res.measured.size() << " of " << n << " configs (space " << space.size()
              << "), ranker " << res.ranker << ", " << ms_str(seconds) << " s\n";
    char line[512];
    std::snprintf(line, sizeof line, "  %-8s %-60s %10s %7s %8s\n", "", "config", "ms", "noise", "speed-up");
    std::cout << line;
    auto row = [&](const char* what, const Measurement& m) {
      std::string su = m.ok() && def.ok() && m.ms > 0 ? ms_str(def.ms / m.ms) + "x" : "-";
      std::snprintf(line, sizeof line, "  %-8s %-60s %10s %7s %8s\n", what, tune::config_str(m.config).c_str(),
                    m.ok() ? ms_str(m.ms).c_str() : m.status.c_str(), m.ok() && m.round_ms.size() > 1 ? pct(m.noise).c_str() : "-", su.c_str());
      std::cout << line;
    };
    if (best) row("best", *best);
    row("default", def);
    if (!failures.empty()) {
      std::cout << "  failed:";
      for (const auto& [s, c] : failures) std::cout << " " << s << " " << c;
      std::cout << " (stored with their messages; `tessera tune --export -` lists them)\n";
    }
    std::cout << "  stored in " << db_path
              << (best ? ": `tessera run` and `bench` now use the best config at this shape\n" : "\n");
  }
  if (!best) {
    std::cerr << "error: no configuration of '" << k.name << "' passed its check at " << sizes_str(k, sizes)
              << (def.status == "check-failed" ? " (the default's neither: a shape the kernel cannot take?)" : "") << "\n";
    return 1;
  }
  return 0;
}

// One more round of a config: a failure puts it out (its row says why), a pass adds its times
// (the config's figure the least of its rounds, its noise their spread).
void add_round(Measurement& m, const Measurement& again) {
  if (!again.ok()) {
    m = again;
    return;
  }
  m.round_ms.insert(m.round_ms.end(), again.round_ms.begin(), again.round_ms.end());
  auto [lo, hi] = std::minmax_element(m.round_ms.begin(), m.round_ms.end());
  m.ms = *lo;
  m.noise = *lo > 0 ? (*hi - *lo) / *lo : 0;
}

// --compare FILE: its configs, each completed with the default's values for the knobs it does
// not name; a name that is not a knob of the space, or a config the pruning removed, is an error
// naming the line.
std::vector<Config> compare_list(const std::string& path, const Config& defaults, const tune::Pruned& pruned) {
  std::ifstream in(path);
  if (!in) throw TesseraError("--compare: cannot open '" + path + "'");
  std::vector<Config> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    const size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    line = line.substr(b, line.find_last_not_of(" \t\r") + 1 - b);
    const std::string where = path + ":" + std::to_string(n);
    Config c = defaults;
    for (const auto& [name, v] : tune::parse_config_str(line, "--compare " + where)) {
      if (!defaults.count(name)) throw TesseraError("--compare " + where + ": '" + name + "' is not a knob of this kernel's space");
      c[name] = v;
    }
    if (std::find(pruned.configs.begin(), pruned.configs.end(), c) == pruned.configs.end() && c != defaults)
      throw TesseraError("--compare " + where + ": not a config of the pruned space (`tessera tune --space` says why), "
                         "or one that timed out or failed to run at this shape before");
    out.push_back(std::move(c));
  }
  if (out.empty()) throw TesseraError("--compare " + path + ": no config in it");
  return out;
}

// The configs side by side: --rounds calls of the measurer, one round each, over those that
// have passed so far, the order reversed each round (so that none always runs first after the
// others warmed the device), each config's figure the least of its rounds, as --exhaustive's
// finalists. 1 when none passed.
int compare_configs(const TuneOptions& o, const Kernel& k, const Sizes& sizes, const std::string& dtype,
                    const std::vector<Config>& configs, tune::Measurer& measurer,
                    const std::function<void(const std::vector<Measurement>&)>& store) {
  std::vector<Measurement> res(configs.size());
  std::vector<size_t> order(configs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i, res[i].config = configs[i], res[i].status = "ok";
  for (int r = 0; r < o.rounds; ++r) {
    std::vector<size_t> live;
    for (size_t i : order)
      if (res[i].ok()) live.push_back(i);
    if (live.empty()) break;
    std::vector<Config> batch;
    for (size_t i : live) batch.push_back(configs[i]);
    std::vector<Measurement> got = measurer.measure(batch);
    store(got);
    for (size_t j = 0; j < got.size() && j < live.size(); ++j) add_round(res[live[j]], got[j]);
    std::reverse(order.begin(), order.end());
  }
  const bool any = std::any_of(res.begin(), res.end(), [](const Measurement& m) { return m.ok(); });
  if (o.json) {
    std::cout << "{\"kernel\": " << json_str(k.name) << ", \"backend\": " << json_str(o.backend)
              << ", \"dtype\": " << json_str(dtype) << ", \"sizes\": " << sizes_json(k, sizes) << ", \"compare\": [";
    for (size_t i = 0; i < res.size(); ++i) {
      std::string m = measurement_json(&res[i]);
      m.insert(m.size() - 1, ", \"message\": " + json_str(res[i].message));
      std::cout << (i ? ", " : "") << m;
    }
    std::cout << "]}\n";
  } else {
    std::cout << k.name << " " << o.backend << " " << sizes_str(k, sizes) << (dtype.empty() ? "" : " dtype=" + dtype)
              << ": " << res.size() << " configs side by side, " << o.rounds << " rounds\n";
    for (const Measurement& m : res)
      std::cout << "  " << tune::config_str(m.config) << ": "
                << (m.ok() ? ms_str(m.ms) + " ms" : m.status + (m.message.empty() ? "" : " (" + m.message + ")")) << "\n";
  }
  return any ? 0 : 1;
}

// One shape: `ko` is the command's kernel options with this shape's --size.
int tune_shape(const TuneOptions& o, const KernelSource& src, const KernelOptions& ko_in) {
  const auto t_start = std::chrono::steady_clock::now();
  // --config may also fix a codegen knob the kernel does not declare (cluster_m=1): the
  // others go to plan_kernels, which checks them against the kernel's constexprs.
  KernelOptions ko = ko_in;
  ko.config.clear();
  Config codegen_fixed;
  for (const auto& [name, v] : split_assignments(ko_in.config, "--config")) {
    const bool declared = src.kernels[0]->find_constexpr(name);
    if (tune::find_codegen_knob(name) && !declared) codegen_fixed[name] = parse_int(v, "--config value for " + name);
    else ko.config.push_back(name + "=" + v);
  }
  // The tensors, the reference's, and the inputs kept for every candidate (and a library
  // reference's error bounds).
  std::vector<KernelPlan> plans = plan_kernels(src, ko, 3, src.lib && src.lib->error_bounds);
  KernelPlan& plan = plans[0];
  const Kernel& k = *plan.kernel;
  const Sizes& sizes = plan.sizes;
  const std::string target = backend_target(o.backend);
  const std::string dtype = tune_dtype(src);
  if (src.lib && src.lib->size_error)
    if (std::string why = src.lib->size_error(sizes); !why.empty()) throw TesseraError(why);

  // The default: what `tessera run` would bind without a database (--config, then the
  // library's preferred values). --config's knobs are not tuned.
  Config defaults = src.lib ? library_config(*src.lib, src.dtype, target, plan.config, &plan.sizes) : plan.config;
  tune::Space space = tune::make_space(k, target, defaults);
  for (auto it = space.knobs.begin(); it != space.knobs.end();) {
    if (plan.config.count(it->name)) {
      space.fixed[it->name] = plan.config.at(it->name);
      it = space.knobs.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [name, v] : codegen_fixed) {
    auto it = std::find_if(space.knobs.begin(), space.knobs.end(), [&](const tune::Knob& x) { return x.name == name; });
    if (it == space.knobs.end())
      throw TesseraError("--config " + name + ": a codegen knob of other targets or kernels, not of '" + k.name +
                         "' on " + target);
    if (std::find(it->values.begin(), it->values.end(), v) == it->values.end())
      throw TesseraError("--config " + name + "=" + std::to_string(v) + ": not one of its values (" +
                         values_str(it->values) + ")");
    space.fixed[name] = v;
    space.knobs.erase(it);
  }
  if (space.knobs.empty())
    throw TesseraError("kernel '" + k.name + "' has no knobs to tune on " + target +
                       (plan.config.empty() ? "" : " besides those --config fixes") +
                       " (constexprs with two candidates or more, or codegen knobs of the target)");
  if (o.space && space.size() > tune::kMaxEnumerated) {
    print_space(space, nullptr, k, sizes, dtype);
    return 0;
  }
  tune::Pruned pruned = tune::prune(space, k, sizes);
  if (o.space) {
    print_space(space, &pruned, k, sizes, dtype);
    return 0;
  }
  if (pruned.configs.empty()) {
    std::string why;
    for (const auto& [c, n] : pruned.removed_by) why += (why.empty() ? "" : ", ") + c + " removed " + std::to_string(n);
    throw TesseraError("kernel '" + k.name + "' at " + sizes_str(k, sizes) + ": no configuration of its " +
                       std::to_string(space.size()) + " is left after pruning (" + why + ")");
  }
  const Config default_config = space.defaults();
  if (o.compile_only) return compile_only(k, target, sizes, pruned, space, o);
  // A row written before one of the space's codegen knobs existed was measured as the knob's
  // table default makes the emitter run (its "nothing asked" value: ring_stages 0 is the
  // loop's annotation, what the emitter did before the knob): its config gets that value (not
  // --config's, which may ask for something else), so that the earlier failures, --missing and
  // the history see the config a sweep would make now.
  auto complete = [&](Config c) {
    for (const auto& [n, v] : default_config)
      if (!c.count(n))
        if (const tune::KnobDecl* d = tune::find_codegen_knob(n)) c[n] = d->knob.default_value;
    return c;
  };

  const std::string db_path = o.db.empty() ? tune::default_database_path() : o.db;
  tune::Database db(db_path, true);
  tune::TuneKey key = tune::make_key(k, dtype, target, sizes);
  // A config that timed out or failed to run at this shape before is not tried again: on cuda
  // such a candidate ended that tune (a hung kernel, a lost context), and would end this one.
  {
    std::set<std::string> failed;
    for (const tune::Record& r : db.select(key, true))
      if (r.status == "timeout" || r.status == "run-error") failed.insert(tune::config_str(complete(r.config)));
    if (failed.count(tune::config_str(default_config)))
      throw TesseraError("kernel '" + k.name + "' at " + sizes_str(k, sizes) + ": its default config timed out or "
                         "failed to run here before (tuning database " + db_path + ")");
    if (!failed.empty()) {
      const size_t before = pruned.configs.size();
      std::erase_if(pruned.configs, [&](const Config& c) { return failed.count(tune::config_str(c)) > 0; });
      if (pruned.configs.size() < before)
        std::cerr << "note: tune: " << before - pruned.configs.size() << " config(s) that timed out or failed to run "
                  << "at " << sizes_str(k, sizes) << " before are left out\n";
    }
    if (pruned.configs.empty()) pruned.configs.push_back(default_config);
  }
  // --compare's configs, read before the inputs and the reference are made (a typo costs nothing).
  const std::vector<Config> compared =
      o.compare_file.empty() ? std::vector<Config>{} : compare_list(o.compare_file, default_config, pruned);
  const int64_t n = static_cast<int64_t>(pruned.configs.size());
  int64_t budget = o.budget > 0 ? o.budget : std::max<int64_t>(8, (n * 5 + 99) / 100);
  budget = std::min(budget, n + 1);  // every candidate and the default

  // The problem: random inputs and the reference's outputs, computed once.
  auto t_setup = std::chrono::steady_clock::now();
  std::unique_ptr<Kernel> bound_default = tune::bind_config(k, default_config);
  tune::Problem prob;
  prob.kernel = &k;
  prob.target = target;
  prob.sizes = sizes;
  prob.inputs = tune::random_inputs(*bound_default, sizes, o.k.seed);
  const double inputs_s = seconds_since(t_setup);
  const std::vector<std::string> scalars = plan.scalars;
  const uint64_t seed = o.k.seed;
  prob.make_args = [scalars, seed](const Kernel& b, std::vector<Tensor>& t) { return make_args(b, t, seed, scalars); };
  {
    const LibraryKernel* lib = src.lib;
    if (lib && !lib->row_dim.empty() && sizes.count(lib->row_dim)) {
      // A kernel independent by rows: its reference runs on the rows checked, and a large
      // problem is checked on a few rows only (the reference's double loops over a whole LLM
      // GEMM would take minutes).
      prob.row_dim = lib->row_dim;
      const int64_t m = sizes.at(lib->row_dim);
      std::vector<int64_t> rows;
      if (lib->flops && lib->flops(sizes, src.dtype) > kSampledCheckFlops) {
        prob.rows = tune::sample_rows(m, 6, seed);
        rows = prob.rows;
      } else {
        for (int64_t r = 0; r < m; ++r) rows.push_back(r);
      }
      reference_on_rows(*lib, *bound_default, sizes, seed, scalars, rows, prob);
    } else {
      prob.want = prob.inputs;
      std::vector<KernelArg> ref_args = make_args(*bound_default, prob.want, seed, scalars);
      if (lib) {
        lib->reference(ref_args, sizes);
        if (lib->error_bounds) prob.bounds = lib->error_bounds(ref_args, sizes);
      } else {
        run_interp(*bound_default, ref_args);
        prob.bounds = tile_error_bounds(*bound_default, sizes, prob.want);
      }
    }
    // Only the views the kernel writes are compared (tune::is_written_view).
    for (size_t i = 0; i < prob.want.size(); ++i)
      if (!tune::is_written_view(*bound_default, i)) {
        prob.want[i] = tune::no_rows();
        if (i < prob.bounds.size()) prob.bounds[i].clear();
      }
  }
  const double setup_s = seconds_since(t_setup);

  auto store = [&](const std::vector<Measurement>& batch, bool confirmed) {
    std::vector<tune::Record> rows;
    for (const Measurement& m : batch) {
      tune::Record r;
      r.key = key;
      r.config = m.config;
      r.status = m.status;
      r.ms = m.ms;
      r.noise = m.noise;
      r.rounds = static_cast<int64_t>(m.round_ms.size());
      r.bound_hash = m.bound_hash;
      r.message = m.message;
      r.confirmed = confirmed;
      rows.push_back(std::move(r));
    }
    db.insert(rows);
  };
  tune::MeasureOptions mo;
  // --exhaustive and --compare: their rounds are measure() calls of one round each.
  mo.rounds = o.exhaustive || !compared.empty() ? 1 : o.rounds;
  mo.timeout_s = o.timeout_s;
  if (o.rep_ms > 0) mo.round_ms = o.rep_ms;
  else if (o.backend == "cuda") mo.round_ms = 10;
  mo.on_hang = [&](const Measurement& m) { store({m}, false); };
  auto measurer = o.backend == "cuda" ? tune::make_cuda_measurer(prob, mo) : tune::make_cpu_measurer(prob, mo);
  if (!compared.empty())
    return compare_configs(o, k, sizes, dtype, compared, *measurer,
                           [&](const std::vector<Measurement>& rows) { store(rows, true); });

  // The history: this kernel's rows at every shape on this machine and compiler.
  std::map<std::string, tune::History> by_shape;
  for (const tune::Record& r : db.select(key, false)) {
    tune::History& h = by_shape[r.key.shape];
    if (h.sizes.empty()) {
      for (const auto& [d, v] : tune::parse_config_str(r.key.shape, "tuning database " + db_path + ": shape"))
        h.sizes[d] = v;
    }
    Measurement m;
    m.config = complete(r.config);
    m.status = r.status;
    m.ms = r.ms;
    h.measured.push_back(std::move(m));
  }
  // --exhaustive --missing: each config's earlier figure at this shape, its least passing row
  // (any failing row: it failed).
  std::map<Config, Measurement> have;
  if (o.missing)
    if (auto it = by_shape.find(key.shape); it != by_shape.end())
      for (const Measurement& m : it->second.measured) {
        auto [at, fresh] = have.emplace(m.config, m);
        if (!fresh && at->second.ok() && (!m.ok() || m.ms < at->second.ms)) at->second = m;
      }
  std::vector<tune::History> history;
  for (auto& [s, h] : by_shape) history.push_back(std::move(h));

  tune::SearchOptions so;
  so.budget = budget;
  so.time_s = o.time_s;
  so.seed = o.k.seed;
  // The waves feature: programs over what runs at once (threads, or multiprocessors).
  so.cores = o.backend == "cuda" ? cuda::device().num_sms : tune::cpu_threads();
  Progress progress(o.exhaustive);
  const auto t0 = std::chrono::steady_clock::now();
  bool first = true;
  auto default_runs = [&](const Measurement& d) {
    if (d.status == "run-error" || d.status == "bind-error")
      throw TesseraError("kernel '" + k.name + "' cannot run at " + sizes_str(k, sizes) + ": " + d.message);
  };
  tune::SearchResult res;
  Measurement def;
  std::optional<Measurement> best_m;
  if (o.exhaustive) {
    // Every config once (the default first), in batches stored as measured; then the fastest
    // timed again side by side in --rounds rounds, stored confirmed.
    // --missing: the configs with a row at this shape already (an earlier sweep, imported)
    // count as measured; the default is measured again, so that it is timed beside the new ones,
    // unless nothing is new (then nothing is measured: the result is the earlier rows').
    std::vector<Config> all = {default_config};
    for (const Config& c : pruned.configs) {
      if (c == default_config) continue;
      if (auto it = have.find(c); it != have.end()) res.measured.push_back(it->second);
      else all.push_back(c);
    }
    const size_t earlier = res.measured.size();
    if (all.size() == 1 && have.count(default_config)) {
      all.clear();
      res.measured.push_back(have.at(default_config));
    }
    constexpr size_t kBatch = 32;
    for (size_t i = 0; i < all.size(); i += kBatch) {
      std::vector<Config> batch(all.begin() + static_cast<std::ptrdiff_t>(i),
                                all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), i + kBatch)));
      std::vector<Measurement> got = measurer->measure(batch);
      if (i == 0) default_runs(got[0]);
      store(got, false);
      for (Measurement& g : got) res.measured.push_back(std::move(g));
      if (!o.json) std::cerr << "tune: exhaustive " << res.measured.size() - earlier << "/" << all.size() << " measured\n";
    }
    // The default first (as the search's results have it), the earlier rows after the new ones.
    std::rotate(res.measured.begin(), res.measured.begin() + static_cast<std::ptrdiff_t>(earlier), res.measured.end());
    res.ranker = "exhaustive";
    // The finalists: the fastest, and the default, timed in --rounds rounds in all (alternating
    // order), each config's figure the least of its rounds.
    std::vector<size_t> order;
    for (size_t i = 0; i < res.measured.size(); ++i)
      if (res.measured[i].ok()) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return res.measured[a].ms < res.measured[b].ms; });
    if (order.size() > static_cast<size_t>(o.finalists)) order.resize(static_cast<size_t>(o.finalists));
    if (res.measured.front().ok() && std::find(order.begin(), order.end(), size_t{0}) == order.end()) order.push_back(0);
    for (int r = 0; r < o.rounds - 1 && !order.empty() && !all.empty(); ++r) {
      std::vector<Config> fin;
      for (size_t i : order) fin.push_back(res.measured[i].config);
      std::vector<Measurement> again = measurer->measure(fin);
      store(again, true);
      for (size_t j = 0; j < again.size(); ++j) add_round(res.measured[order[j]], again[j]);
      std::reverse(order.begin(), order.end());
    }
    def = res.measured.front();
    for (size_t i = 0; i < res.measured.size(); ++i)
      if (res.measured[i].ok() && (!res.best || res.measured[i].ms < res.measured[*res.best].ms)) res.best = i;
    if (res.best) best_m = res.measured[*res.best];
    const tune::MeasureStats a = measurer->stats();
    return report(o, k, sizes, dtype, space, n, res, def, best_m, seconds_since(t0), db_path, a, inputs_s, setup_s,
                  seconds_since(t_start));
  }
  res = tune::search(space, pruned.configs, default_config, sizes, *measurer, history, so,
                     [&](const tune::SearchProgress& p) {
    // The default first: a run error there is a shape the kernel cannot take.
    if (first) {
      first = false;
      default_runs((*p.batch)[0]);
    }
    store(*p.batch, false);  // as measured: an interrupted tune keeps what it measured
    progress.update(p);
  });
  progress.done();

  // The search's fastest few (within 10% of its best) and the default measured again, side by
  // side in two calls (tune::confirm_best): the search measured them at different times, a
  // shared machine's load drifts, and its least time is often a lucky draw. These rows are
  // stored too, marked confirmed; the least mean of those that passed both calls is the pick
  // (as Database::best, which `run` uses, decides from the confirmed rows), and the table shows
  // it. None passing again is the error of a tune where nothing passed.
  def = res.measured.front();
  if (res.best) best_m = res.measured[*res.best];
  if (best_m) {
    if (!o.json) std::cerr << "tune: confirming the fastest against the default\n";
    tune::Confirmation c = tune::confirm_best(*measurer, res);
    store(c.rows, true);
    best_m = c.best;
    if (c.dflt) def = *c.dflt;
  }
  return report(o, k, sizes, dtype, space, n, res, def, best_m, seconds_since(t0), db_path, measurer->stats(), inputs_s,
                setup_s, seconds_since(t_start));
}

}  // namespace

int cmd_tune(const TuneOptions& o) {
  if (!o.import_file.empty() || !o.export_file.empty()) {
    if (!o.k.what.empty()) throw TesseraError("--import and --export take no kernel");
    return db_only(o);
  }
  if (o.k.what.empty()) throw TesseraError("tessera tune: name a kernel (or --import/--export a database)");
  if (!o.k.disable_passes.empty())
    throw TesseraError("--disable-pass is for compile, run and bench: tune measures the kernel the full pipeline makes");
  if (o.budget == 0) throw TesseraError("--budget 0 measures nothing: give at least 1");
  if (o.budget < -1) throw TesseraError("--budget must be at least 1");
  if (o.time_s < 0 || !std::isfinite(o.time_s)) throw TesseraError("--time must be a positive number of seconds");
  if (o.rounds < 1) throw TesseraError("--rounds must be at least 1");
  if (!(o.timeout_s > 0)) throw TesseraError("--timeout must be a positive number of seconds");
  if (o.rep_ms < 0 || !std::isfinite(o.rep_ms)) throw TesseraError("--rep must be a positive number of milliseconds");
  if (o.finalists < 1) throw TesseraError("--finalists must be at least 1");
  if (o.backend == "interp")
    throw TesseraError("tessera tune: --backend interp has nothing to tune (the interpreter defines meaning, not speed)");
  if (o.compile_only && o.backend != "cuda")
    throw TesseraError("tessera tune: --compile-only is for --backend cuda (the cpu harness compiles as it measures)");
  // Measuring on cuda needs NVRTC and a device: said before any input is made.
  if (o.backend == "cuda" && !o.space && !o.compile_only)
    if (std::string why = tune::cuda_cannot_measure(); !why.empty())
      throw TesseraError("tessera tune: cannot measure on cuda here: " + why +
                         " (`--space` and `--compile-only` need no GPU)");

  // The shapes: --size, or each line of --shapes.
  std::vector<std::vector<std::string>> shapes;
  if (o.shapes_file.empty()) {
    shapes.push_back(o.k.sizes);
  } else {
    if (!o.k.sizes.empty()) throw TesseraError("--shapes and --size: give one of them");
    std::ifstream in(o.shapes_file);
    if (!in) throw TesseraError("cannot read --shapes file " + o.shapes_file);
    std::string line;
    int no = 0;
    while (std::getline(in, line)) {
      ++no;
      if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
      line.erase(0, line.find_first_not_of(" \t\r"));
      line.erase(line.find_last_not_of(" \t\r") + 1);
      if (line.empty()) continue;
      if (line.find('=') == std::string::npos)
        throw TesseraError(o.shapes_file + ":" + std::to_string(no) + ": not a shape (NAME=VALUE,...): '" + line + "'");
      shapes.push_back({line});
    }
    if (shapes.empty()) throw TesseraError("--shapes file " + o.shapes_file + " has no shape");
  }

  auto src = resolve_kernel(o.k.what, o.k.dtype, o.k.kernel);
  if (!src) return 1;
  if (src->kernels.size() != 1) throw TesseraError(src->file + " has several kernels: pick one with --kernel");
  if (shapes.size() == 1 && o.shapes_file.empty()) return tune_shape(o, *src, o.k);
  // Every shape in this process; one that fails says why (a JSON line with "error" under
  // --json) and the others go on.
  int status = 0;
  for (const auto& sz : shapes) {
    KernelOptions ko = o.k;
    ko.sizes = sz;
    try {
      status |= tune_shape(o, *src, ko);
    } catch (const std::exception& e) {  // TesseraError, or a library's (a full disk, memory)
      status = 1;
      std::string msg = tune::one_line(e.what());
      if (msg.rfind("error: ", 0) == 0) msg.erase(0, 7);
      if (o.json) std::cout << "{\"shape\": " << json_str(sz[0]) << ", \"error\": " << json_str(msg) << "}\n";
      else std::cerr << "error: " << sz[0] << ": " << msg << "\n";
    }
    std::cout.flush();
  }
  return status;
}

}  // namespace tessera::cli
