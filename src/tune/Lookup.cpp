// Tuned-config lookup (Lookup.h).
#include "tune/Lookup.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>

#include "tune/Measure.h"

namespace tessera::tune {

namespace {

// The key without its device and compiler (which take /proc/cpuinfo and a `c++ --version`).
TuneKey key_without_machine(const Kernel& unbound, const std::string& dtype, const std::string& target,
                            const Sizes& sizes) {
  TuneKey k;
  k.kernel = unbound.name;
  k.kernel_hash = kernel_identity_hash(unbound);
  k.shape = sizes_key(sizes);
  k.dtype = dtype;
  k.target = target;
  return k;
}

bool is_cuda(const std::string& target) { return target.rfind("cuda:", 0) == 0; }

void add_machine(TuneKey& k) {
  if (k.target == "cpu") {
    k.device = cpu_device_name();
    k.compiler = cpu_compiler_version();
  } else if (is_cuda(k.target) && cuda_cannot_measure().empty()) {
    k.device = cuda_device_name();
    k.compiler = cuda_compiler_version();
  }
}

}  // namespace

TuneKey make_key(const Kernel& unbound, const std::string& dtype, const std::string& target, const Sizes& sizes) {
  TuneKey k = key_without_machine(unbound, dtype, target, sizes);
  add_machine(k);
  return k;
}

std::string shape_bucket(const Sizes& sizes) {
  Sizes b;
  for (const auto& [d, v] : sizes) {
    int64_t p = 1;
    while (p < v) p *= 2;
    b[d] = p;
  }
  return sizes_key(b);
}

std::optional<Config> lookup_tuned(const Kernel& unbound, const std::string& dtype, const std::string& target,
                                   const Sizes& sizes, const std::string& db_path, std::string* tuned_at) {
  if (tuned_at) tuned_at->clear();
  if ((target != "cpu" && !is_cuda(target)) || sizes.empty()) return std::nullopt;
  const std::string path = db_path.empty() ? default_database_path() : db_path;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;  // never tuned here: the defaults
  Database db(path, false);
  // Most runs are of kernels and shapes never tuned: they stop here, before the device name and
  // the compiler's version (a process) are worked out. The exact shape first, then the tuned
  // shapes of its bucket, nearest first.
  TuneKey key = key_without_machine(unbound, dtype, target, sizes);
  std::vector<std::pair<double, std::string>> shapes;
  if (db.has_shape(key)) {
    shapes.emplace_back(0, key.shape);
  } else {
    const std::string bucket = shape_bucket(sizes);
    for (const std::string& s : db.shapes(key)) {
      Sizes other;
      try {
        for (const auto& [d, v] : parse_config_str(s, "tuning database " + path + ": shape")) other[d] = v;
      } catch (const TesseraError&) {
        continue;  // not a shape of this kernel's dims
      }
      if (other.size() != sizes.size() || shape_bucket(other) != bucket) continue;
      double dist = 0;
      for (const auto& [d, v] : sizes) dist += std::fabs(std::log2(static_cast<double>(other[d]) / static_cast<double>(v)));
      shapes.emplace_back(dist, s);
    }
    std::sort(shapes.begin(), shapes.end());
  }
  if (shapes.empty()) return std::nullopt;
  add_machine(key);
  if (key.device.empty()) return std::nullopt;  // cuda without a device: nothing runs here
  for (const auto& [dist, shape] : shapes) {
    key.shape = shape;
    std::optional<Config> best = db.best(key);
    if (!best) continue;
    if (tuned_at && dist > 0) *tuned_at = shape;
    // The key leaves the space out (kernel_identity_hash), so a row may name a value the
    // kernel's constexpr no longer offers (a candidate taken away, or a one-value constexpr
    // given another): such a config is not this space's, and that shape gives none.
    Config mine;
    bool in_space = true;
    for (const auto& [n, v] : *best) {
      const KnobDecl* d = find_codegen_knob(n);
      if (const ConstexprDecl* c = unbound.find_constexpr(n)) {
        in_space = in_space && (c->candidates.empty() || std::find(c->candidates.begin(), c->candidates.end(), v) !=
                                                             c->candidates.end());
        mine[n] = v;
      } else if (d && knob_applies(d->knob, target)) {
        mine[n] = v;
      }
    }
    if (!in_space) continue;
    return mine;
  }
  return std::nullopt;
}

}  // namespace tessera::tune
