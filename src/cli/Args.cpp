#include "cli/Args.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <sstream>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/Verifier.h"
#include "passes/Passes.h"
#include "tune/Space.h"
#include "text/Text.h"

namespace tessera::cli {

namespace {

// A file-level problem: located at 1:1 so that editors and the contract's
// `FILE:LINE:COL: error:` shape still hold for errors that have no better position.
[[noreturn]] void file_error(const std::string& path, int line, int col, const std::string& msg) {
  throw TesseraError(Loc::in_file(path, line, col), msg);
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

std::string join(const std::vector<std::string>& v, const std::string& sep = ", ") {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

}  // namespace

std::string read_source_file(const std::string& path) {
  // Regular files only (a FIFO or a device such as /dev/zero never ends), and at most
  // kMaxSourceBytes of them, read through one descriptor: O_NONBLOCK so that opening a FIFO
  // does not wait for a writer before fstat says what it is.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw TesseraError("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw TesseraError("cannot open '" + path + "': " + (S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file"));
  }
  const std::string too_large = "cannot read '" + path + "': larger than the limit of " +
                                std::to_string(kMaxSourceBytes >> 20) + " MiB for a .tile file";
  if (static_cast<uint64_t>(st.st_size) > kMaxSourceBytes) {
    ::close(fd);
    throw TesseraError(too_large);
  }
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      throw TesseraError("cannot read '" + path + "': " + std::strerror(e));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxSourceBytes) break;
  }
  ::close(fd);
  if (text.size() > kMaxSourceBytes) throw TesseraError(too_large);  // it grew while read

  bool blank = true;
  int line = 1, col = 1;
  for (unsigned char c : text) {
    // Control bytes other than tab/newline/CR never occur in a .tile file; reporting the first
    // one beats a confusing token error (or a parser reading a binary blob).
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", c);
      file_error(path, line, col, std::string("not a text file (byte ") + hex + ")");
    }
    if (!std::isspace(c)) blank = false;
    if (c == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  if (blank) file_error(path, 1, 1, "empty file: expected at least one kernel");
  return text;
}

std::unique_ptr<Module> load_checked_module(const std::string& path) {
  std::unique_ptr<Module> m;
  try {
    std::string text = read_source_file(path);
    m = parse_module(text, path);
  } catch (const TesseraError& e) {
    std::cerr << e.what() << "\n";
    return nullptr;
  }
  if (m->kernels.empty()) {
    std::cerr << TesseraError(Loc::in_file(path, 1, 1), "no kernel in file").what() << "\n";
    return nullptr;
  }
  bool ok = true;
  for (const auto& k : m->kernels) {
    for (const auto& e : verify(*k)) {
      std::cerr << e.what() << "\n";
      ok = false;
    }
  }
  return ok ? std::move(m) : nullptr;
}

std::optional<KernelSource> resolve_kernel(const std::string& what, const std::string& dtype,
                                           const std::string& kernel) {
  KernelSource src;
  struct stat st {};
  bool looks_like_file = what.find('/') != std::string::npos ||
                         (what.size() > 5 && what.ends_with(".tile")) ||
                         ::stat(what.c_str(), &st) == 0;
  if (looks_like_file) {
    if (!dtype.empty())
      throw TesseraError("--dtype applies to library kernels; the types of '" + what +
                         "' are written in the file");
    src.file = what;
    src.module = load_checked_module(what);
    if (!src.module) return std::nullopt;
    for (const auto& k : src.module->kernels)
      if (kernel.empty() || k->name == kernel) src.kernels.push_back(k.get());
    if (src.kernels.empty()) {
      std::vector<std::string> names;
      for (const auto& k : src.module->kernels) names.push_back(k->name);
      throw TesseraError("no kernel '" + kernel + "' in " + what + " (it has: " + join(names) + ")");
    }
    return src;
  }

  src.lib = find_library_kernel(what);
  if (!src.lib)
    throw TesseraError("unknown kernel '" + what +
                       "': not a library kernel (see `tessera list`) and no such file");
  if (!kernel.empty() && kernel != what)
    throw TesseraError("--kernel picks a kernel of a .tile file; '" + what + "' is a library kernel");
  if (src.lib->dtypes.empty()) throw TesseraError("library kernel '" + what + "' declares no dtype");
  src.dtype = src.lib->dtypes.front();
  if (!dtype.empty()) {
    auto dt = scalar_from_name(dtype);
    bool supported = false;
    for (ScalarKind k : src.lib->dtypes) supported |= dt && *dt == k;
    if (!supported) {
      std::vector<std::string> names;
      for (ScalarKind k : src.lib->dtypes) names.emplace_back(scalar_name(k));
      throw TesseraError("kernel '" + what + "' has no dtype '" + dtype + "' (it has: " +
                         join(names) + ")");
    }
    src.dtype = *dt;
  }
  src.built = src.lib->build(src.dtype);
  verify_or_throw(*src.built);
  src.kernels.push_back(src.built.get());
  return src;
}

std::vector<std::pair<std::string, std::string>> split_assignments(
    const std::vector<std::string>& items, const std::string& option) {
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::string> seen;
  for (const auto& item : items) {
    // getline would drop a trailing empty item: "M=5," must not pass for "M=5".
    size_t start = 0;
    while (true) {
      size_t comma = item.find(',', start);
      std::string part = item.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (part.empty())
        throw TesseraError("bad " + option + " '" + item + "': stray comma (empty item)");
      auto eq = part.find('=');
      std::string name = eq == std::string::npos ? part : part.substr(0, eq);
      if (eq == std::string::npos || !is_identifier(name) || eq + 1 == part.size())
        throw TesseraError("bad " + option + " '" + part + "': expected NAME=VALUE, e.g. " +
                           option + " M=1024");
      // Silently letting the last one win hides a typo in a long command line.
      if (!seen.insert(name).second)
        throw TesseraError("bad " + option + ": " + name + " is given twice");
      out.emplace_back(name, part.substr(eq + 1));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return out;
}

int64_t parse_int(const std::string& text, const std::string& what) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range)
    throw TesseraError("bad " + what + " '" + text + "': out of range");
  if (ec != std::errc() || p != text.data() + text.size())
    throw TesseraError("bad " + what + " '" + text + "': expected an integer");
  return v;
}

namespace {

// A --scalar value for an integer parameter of kind `sk`, which it must fit: an i32 given
// 99999999999 or an i1 given 2 is an error, not a value wrapped in silence. A u64 takes all
// of [0, 2^64 - 1] and is held as its bits.
int64_t parse_scalar_int(const std::string& text, ScalarKind sk, const std::string& name) {
  const std::string what = "--scalar value for " + name;
  const int bits = scalar_bits(sk);
  const std::string type(scalar_name(sk));
  if (is_unsigned_int(sk) || is_bool(sk)) {
    uint64_t u = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), u);
    if (ec == std::errc() && p == text.data() + text.size()) {
      const uint64_t top = bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
      if (u > top)
        throw TesseraError("bad " + what + " '" + text + "': out of the range of " + type + " [0, " + std::to_string(top) + "]");
      return static_cast<int64_t>(u);
    }
    if (ec != std::errc::result_out_of_range && !text.empty() && text[0] == '-' && parse_int(text, what) == 0)
      return 0;  // -0
    if (ec == std::errc::result_out_of_range || (!text.empty() && text[0] == '-'))
      throw TesseraError("bad " + what + " '" + text + "': out of the range of " + type);
    throw TesseraError("bad " + what + " '" + text + "': expected an integer");
  }
  const int64_t v = parse_int(text, what);
  if (bits < 64) {
    const int64_t hi = (int64_t{1} << (bits - 1)) - 1, lo = -hi - 1;
    if (v < lo || v > hi)
      throw TesseraError("bad " + what + " '" + text + "': out of the range of " + type + " [" + std::to_string(lo) +
                         ", " + std::to_string(hi) + "]");
  }
  return v;
}

}  // namespace

ConstexprConfig parse_config(const std::vector<std::string>& items) {
  ConstexprConfig c;
  for (const auto& [name, value] : split_assignments(items, "--config"))
    c[name] = parse_int(value, "--config value for " + name);
  return c;
}

std::vector<std::string> symbolic_dims(const Kernel& k) {
  std::vector<std::string> dims;
  for (const Value* p : k.params) {
    if (!p->type.is_view()) continue;
    for (const Dim& d : p->type.shape)
      if (!d.is_static() && std::find(dims.begin(), dims.end(), d.symbol) == dims.end())
        dims.push_back(d.symbol);
  }
  return dims;
}

Sizes resolve_sizes(const Kernel& k, const LibraryKernel* lib,
                    const std::vector<std::string>& size_items) {
  std::vector<std::string> dims = symbolic_dims(k);
  Sizes sizes;
  if (lib)
    for (const auto& [n, v] : lib->default_sizes)
      if (std::find(dims.begin(), dims.end(), n) != dims.end()) sizes[n] = v;
  for (const auto& [name, text] : split_assignments(size_items, "--size")) {
    if (std::find(dims.begin(), dims.end(), name) == dims.end())
      throw TesseraError("kernel '" + k.name + "' has no dim '" + name + "' (its dims: " +
                         (dims.empty() ? std::string("none") : join(dims)) + ")");
    int64_t v = parse_int(text, "--size value for " + name);
    // Indices inside kernels are i32.
    if (v < 1 || v > INT32_MAX)
      throw TesseraError("bad --size " + name + "=" + text + ": a dim must be in [1, 2147483647]");
    sizes[name] = v;
  }
  std::vector<std::string> missing;
  for (const auto& d : dims)
    if (!sizes.count(d)) missing.push_back(d);
  if (!missing.empty()) {
    std::string eg;
    for (const auto& d : missing) eg += " --size " + d + "=VALUE";
    throw TesseraError("kernel '" + k.name + "' needs a size for dim" +
                       (missing.size() > 1 ? "s " : " ") + join(missing) + ": add" + eg);
  }
  return sizes;
}

std::string sizes_str(const Kernel& k, const Sizes& sizes) {
  std::string out;
  for (const auto& d : symbolic_dims(k)) {
    auto it = sizes.find(d);
    if (it == sizes.end()) continue;
    out += (out.empty() ? "" : ",") + d + "=" + std::to_string(it->second);
  }
  return out.empty() ? "-" : out;
}

void check_tensor_budget(const Kernel& k, const Sizes& sizes, int copies, bool output_bounds) {
  const std::set<const Value*> written = output_bounds ? written_views(k) : std::set<const Value*>{};
  double total = 0, bounds = 0;
  for (const Value* p : k.params) {
    if (!p->type.is_view()) continue;
    double n = 1;
    for (const Dim& d : p->type.shape) {
      auto it = d.is_static() ? sizes.end() : sizes.find(d.symbol);
      n *= d.is_static() ? static_cast<double>(d.value) : (it == sizes.end() ? 1.0 : double(it->second));
    }
    total += n * scalar_bytes(p->type.elem) * copies;
    if (written.count(p) && is_float(p->type.elem)) bounds += n * sizeof(double);
  }
  total += bounds;
  if (total > kMaxHostTensorBytes) {
    std::string held;
    if (copies > 1)
      held = std::to_string(copies) + " copies at once: the run's, and the reference's or data read from files";
    if (bounds > 0)
      held += std::string(held.empty() ? "" : ", and ") + "a double per output element for its error bounds";
    throw TesseraError("the tensors of '" + k.name + "' at " + sizes_str(k, sizes) + " need " +
                       fmt_num(total / (1ull << 30)) + " GiB" + (held.empty() ? "" : " (" + held + ")") +
                       "; the limit is " + std::to_string(kMaxHostTensorGiB) + " GiB");
  }
}

std::vector<KernelArg> make_args(const Kernel& k, std::vector<Tensor>& tensors, uint64_t seed,
                                 const std::vector<std::string>& scalar_items) {
  std::map<std::string, std::string> given;
  for (const auto& [n, v] : split_assignments(scalar_items, "--scalar")) given[n] = v;
  std::set<std::string> used;

  // Seeded apart from the tensors so that adding a scalar does not change the tensor data.
  std::mt19937_64 rng(seed ^ 0x5ca1a75ull);
  std::vector<KernelArg> args;
  size_t t = 0;
  for (const Value* p : k.params) {
    KernelArg a;
    if (p->type.is_view()) {
      if (t >= tensors.size()) throw TesseraError("internal: fewer tensors than view parameters");
      a.tensor = &tensors[t++];
    } else {
      ScalarKind sk = p->type.elem;
      auto it = given.find(p->name);
      if (it != given.end()) {
        used.insert(p->name);
        if (is_float(sk)) {
          char* end = nullptr;
          double v = std::strtod(it->second.c_str(), &end);
          if (end == it->second.c_str() || *end)
            throw TesseraError("bad --scalar " + p->name + "=" + it->second + ": expected a number");
          a.scalar = v;
        } else {
          a.scalar = parse_scalar_int(it->second, sk, p->name);
        }
      } else if (is_float(sk)) {
        a.scalar = 0.5 + std::uniform_real_distribution<double>(0, 1)(rng);
      } else if (is_bool(sk)) {
        a.scalar = int64_t{1};
      } else {
        a.scalar = static_cast<int64_t>(1 + rng() % 7);
      }
    }
    args.push_back(a);
  }
  for (const auto& [n, v] : given)
    if (!used.count(n))
      throw TesseraError("kernel '" + k.name + "' has no scalar parameter '" + n + "'");
  return args;
}

namespace {

// "its dims: M, N" for one kernel, "their dims: ..." over every kernel of a file.
std::string unknown_name_error(const KernelSource& src, const std::string& what,
                               const std::string& name, const std::vector<std::string>& names) {
  std::string list = names.empty() ? std::string("none") : join(names);
  if (src.kernels.size() == 1)
    return "kernel '" + src.kernels[0]->name + "' has no " + what + " '" + name + "' (its " + what +
           "s: " + list + ")";
  return "no kernel of " + src.file + " has a " + what + " '" + name + "' (their " + what +
         "s: " + list + "; pick one kernel with --kernel)";
}

}  // namespace

void KernelPlan::set_knobs() {
  if (knobs.empty()) return;
  with_knobs = tune::with_codegen_knobs(*base, knobs);
  kernel = with_knobs.get();
}

std::vector<KernelPlan> plan_kernels(const KernelSource& src, const KernelOptions& o, int copies,
                                     bool output_bounds) {
  const bool with_sizes = copies > 0;
  // In first-use order, as the kernels declare them.
  std::vector<std::string> dims, constexprs, scalars;
  auto add = [](std::vector<std::string>& v, const std::string& n) {
    if (std::find(v.begin(), v.end(), n) == v.end()) v.push_back(n);
  };
  auto has = [](const std::vector<std::string>& v, const std::string& n) {
    return std::find(v.begin(), v.end(), n) != v.end();
  };
  for (const Kernel* k : src.kernels) {
    for (const auto& d : symbolic_dims(*k)) add(dims, d);
    for (const auto& c : k->constexprs) add(constexprs, c.name);
    for (const Value* p : k->params)
      if (!p->type.is_view()) add(scalars, p->name);
  }

  auto size_items = split_assignments(o.sizes, "--size");
  ConstexprConfig config = parse_config(o.config);
  auto scalar_items = split_assignments(o.scalars, "--scalar");
  if (with_sizes)
    for (const auto& [name, v] : size_items)
      if (!has(dims, name)) throw TesseraError(unknown_name_error(src, "dim", name, dims));
  // A declared codegen knob (docs/tuning.md) is taken by every kernel, as a constexpr of a copy
  // when the kernel does not declare it (the backends that do not read it ignore it).
  auto codegen_knob = [](const std::string& n) { return tune::find_codegen_knob(n) != nullptr; };
  for (const auto& [name, v] : config)
    if (!has(constexprs, name) && !codegen_knob(name))
      throw TesseraError(unknown_name_error(src, "constexpr", name, constexprs));
  for (const auto& [name, v] : scalar_items)
    if (!has(scalars, name))
      throw TesseraError(unknown_name_error(src, "scalar parameter", name, scalars));

  std::vector<KernelPlan> plans;
  for (const Kernel* k : src.kernels) {
    KernelPlan p;
    p.kernel = p.base = k;
    for (const auto& [name, v] : config) {
      const ConstexprDecl* c = k->find_constexpr(name);
      if (!c && codegen_knob(name)) {
        if (std::string range = constexpr_range_error(name, v); !range.empty()) throw TesseraError(range);
        p.knobs[name] = v;
        continue;
      }
      if (!c) continue;
      // The pass would say the same, but located in Tessera's own C++ for a library kernel.
      if (std::string range = constexpr_range_error(name, v); !range.empty())
        throw TesseraError(src.lib ? Loc{} : c->loc, range);
      if (!c->candidates.empty() &&
          std::find(c->candidates.begin(), c->candidates.end(), v) == c->candidates.end()) {
        std::string list;
        for (int64_t x : c->candidates) list += (list.empty() ? "" : ", ") + std::to_string(x);
        throw TesseraError(src.lib ? Loc{} : c->loc, "constexpr " + name + " = " + std::to_string(v) +
                                                         " is not one of its candidates [" + list + "]");
      }
      p.config[name] = v;
    }
    for (const auto& [name, v] : scalar_items)
      for (const Value* q : k->params)
        if (!q->type.is_view() && q->name == name) p.scalars.push_back(name + "=" + v);
    // A library kernel's own scalar values stand in for the ones not given (make_args draws
    // random values only for the rest).
    if (src.lib)
      for (const auto& [name, v] : src.lib->scalars)
        if (std::none_of(scalar_items.begin(), scalar_items.end(), [&](const auto& s) { return s.first == name; })) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.17g", v);
          p.scalars.push_back(name + "=" + buf);
        }
    if (with_sizes) {
      std::vector<std::string> mine;
      std::vector<std::string> kdims = symbolic_dims(*k);
      for (const auto& [name, v] : size_items)
        if (std::find(kdims.begin(), kdims.end(), name) != kdims.end()) mine.push_back(name + "=" + v);
      p.sizes = resolve_sizes(*k, src.lib, mine);
      check_tensor_budget(*k, p.sizes, copies, output_bounds);
    }
    p.set_knobs();
    plans.push_back(std::move(p));
  }
  return plans;
}

std::string fmt_num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace tessera::cli
