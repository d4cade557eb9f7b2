// Library kernels' per-target default configs in the CLI: --config wins, then the tuning
// database's best config for the kernel at these sizes on this machine (`tessera tune`), then
// the kernel's preferred values for the target, then its own defaults (bind-constexprs).
#include <iostream>

#include "cli/Args.h"
#include "tune/Lookup.h"
#include "tune/Space.h"

namespace tessera::cli {

std::string tune_dtype(const KernelSource& src) { return src.lib ? std::string(scalar_name(src.dtype)) : std::string(); }

void apply_target_configs(const KernelSource& src, std::vector<KernelPlan>& plans, const std::string& target) {
  for (KernelPlan& p : plans) {
    if (src.lib && src.lib->size_error && !p.sizes.empty())
      if (std::string why = src.lib->size_error(p.sizes); !why.empty()) throw TesseraError(why);
    // The lookup keys on the kernel as declared (the tuner's key), not on a copy with --config's
    // codegen knobs; what --config gave wins over the database.
    std::string tuned_at;
    bool tuned_here = false;
    if (!p.sizes.empty())
      if (auto tuned = tune::lookup_tuned(*p.base, tune_dtype(src), target, p.sizes, "", &tuned_at)) {
        tune::Config applied;
        for (const auto& [name, v] : *tuned) {
          const bool declared = p.base->find_constexpr(name);
          if (declared ? p.config.insert({name, v}).second : p.knobs.insert({name, v}).second) applied[name] = v;
        }
        p.set_knobs();
        tuned_here = !applied.empty();  // (not when --config gave every value the database has)
        if (!applied.empty())
          std::cerr << "note: " << p.kernel->name << ": tuned config " << tune::config_str(applied)
                    << (tuned_at.empty() ? "" : " (tuned at " + tuned_at + ", the nearest shape of its bucket)")
                    << " from the tuning database " << tune::default_database_path() << "\n";
      }
    if (src.lib) {
      p.config = library_config(*src.lib, src.dtype, target, p.config, &p.sizes);
      // A size rule may ask for a codegen knob the kernel does not declare (matmul's
      // swap_operands at decode shapes): it joins the knobs, under --config's. Not under a tuned
      // config, which is a whole config (a row from before the knob existed was measured without it).
      bool added = false;
      for (const auto& kv : tune::take_codegen_knobs(*p.base, p.config))
        if (!tuned_here) added |= p.knobs.insert(kv).second;
      if (added) p.set_knobs();
    }
  }
}

}  // namespace tessera::cli
