// Tuned-config lookup (Lookup.h).
#include "tune/Lookup.h"

#include <sys/stat.h>

#include "tune/Measure.h"

namespace tessera::tune {

TuneKey make_key(const Kernel& unbound, const std::string& dtype, const std::string& target, const Sizes& sizes) {
  TuneKey k;
  k.kernel = unbound.name;
  k.kernel_hash = kernel_ir_hash(unbound);
  k.shape = sizes_key(sizes);
  k.dtype = dtype;
  k.target = target;
  if (target == "cpu") {
    k.device = cpu_device_name();
    k.compiler = cpu_compiler_version();
  }
  return k;
}

std::optional<Config> lookup_tuned(const Kernel& unbound, const std::string& dtype, const std::string& target,
                                   const Sizes& sizes, const std::string& db_path) {
  if (target != "cpu" || sizes.empty()) return std::nullopt;
  const std::string path = db_path.empty() ? default_database_path() : db_path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;  // never tuned here: the defaults
  Database db(path, false);
  std::optional<Config> best = db.best(make_key(unbound, dtype, target, sizes));
  if (!best) return best;
  Config mine;
  for (const auto& [n, v] : *best) {
    const KnobDecl* d = find_codegen_knob(n);
    if (unbound.find_constexpr(n) || (d && knob_applies(d->knob, target))) mine[n] = v;
  }
  return mine;
}

}  // namespace tessera::tune
