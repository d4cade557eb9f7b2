#include "check/PassCheck.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "check/Compare.h"
#include "interp/Interpreter.h"
#include "text/Text.h"

namespace tessera {

namespace {

std::string sizes_str(const Sizes& s) {
  std::string out;
  for (const auto& [n, v] : s) out += (out.empty() ? "" : ",") + n + "=" + std::to_string(v);
  return out.empty() ? "-" : out;
}

// Runs `bound` on copies of `inputs`; the outputs, or the interpreter's error.
std::vector<Tensor> run_on(const Kernel& bound, const std::vector<Tensor>& inputs, const PassCheckOptions& o) {
  std::vector<Tensor> ts = inputs;
  std::vector<KernelArg> args = make_args(bound, ts);
  for (size_t i = 0; i < bound.params.size() && i < args.size(); ++i) {
    auto it = o.scalars.find(bound.params[i]->name);
    if (it != o.scalars.end() && !bound.params[i]->type.is_view())
      args[i].scalar = std::visit([](auto v) { return std::variant<int64_t, double>(v); }, it->second);
  }
  run_interp(bound, args);
  return ts;
}

}  // namespace

Sizes ragged_check_sizes(const Kernel& k, const Sizes& caps) {
  Sizes s;
  int64_t next = 97;
  for (const Value* p : k.view_params())
    for (const Dim& d : p->type.shape) {
      if (d.is_static() || s.count(d.symbol)) continue;
      auto cap = caps.find(d.symbol);
      s[d.symbol] = cap != caps.end() ? std::min(next, cap->second) : next;
      next += 30;
    }
  return s;
}

PassCheckResult check_passes(const Kernel& k, const std::vector<Pass>& passes, const PassCheckOptions& o) {
  PassCheckResult r;
  std::unique_ptr<Kernel> before = bind_constexprs(k, o.config);
  std::string before_text = print_kernel(*before);

  // Inputs per seed, made once from the kernel as given; outputs of the latest state.
  std::vector<std::vector<Tensor>> inputs, outputs;
  for (uint64_t seed : o.seeds) {
    std::vector<Tensor> in = make_random_tensors(*before, o.sizes, seed);
    try {
      outputs.push_back(run_on(*before, in, o));
    } catch (const TesseraError& e) {
      if (r.unchecked.empty()) r.unchecked = "seed " + std::to_string(seed) + ": " + e.what();
      continue;
    }
    inputs.push_back(std::move(in));
    r.seeds_checked.push_back(seed);
  }
  if (r.seeds_checked.empty()) return r;

  std::unique_ptr<Kernel> state = k.clone();
  PassStats stats;
  for (const Pass& p : passes) {
    p.run(*state, stats);
    std::string where = "pass '" + p.name + "' on kernel '" + k.name + "'";
    auto fail = [&](uint64_t seed, const std::string& what) {
      r.failed_pass = p.name;
      r.message = where + (seed ? " (seed " + std::to_string(seed) + ", sizes " + sizes_str(o.sizes) + ")" : "") +
                  ": " + what;
      return r;
    };
    std::unique_ptr<Kernel> after;
    try {
      after = bind_constexprs(*state, o.config);
    } catch (const TesseraError& e) {
      return fail(0, std::string("its output no longer binds: ") + e.what());
    }
    std::string after_text = print_kernel(*after);
    if (after_text == before_text) continue;  // the same program: the same outputs
    r.passes_run.push_back(p.name);
    for (size_t s = 0; s < inputs.size(); ++s) {
      uint64_t seed = r.seeds_checked[s];
      std::vector<Tensor> out;
      try {
        out = run_on(*after, inputs[s], o);
      } catch (const TesseraError& e) {
        return fail(seed, std::string("the kernel no longer runs on the interpreter: ") + e.what());
      }
      Comparison c = compare_outputs(*after, out, outputs[s], tile_error_bounds(*after, o.sizes, outputs[s]));
      if (!c.ok())
        return fail(seed, "the output differs in " + std::to_string(c.mismatches) + " of " +
                              std::to_string(c.elements) + " elements; first " + c.first_mismatch +
                              " (got: after the pass, want: before)");
      outputs[s] = std::move(out);
    }
    before_text = std::move(after_text);
  }
  return r;
}

int64_t run_split(const Kernel& bound, const SplitKernels& s, std::vector<KernelArg> args, int64_t runs, uint64_t seed,
                  const std::function<void(const Kernel&, std::vector<KernelArg>&)>& run) {
  if (!s.partial || !s.merge) throw TesseraError(bound.loc, "kernel '" + bound.name + "' was not split: " + s.why);
  if (runs < 1) throw TesseraError("the number of runs of a split reduction must be at least 1, not " + std::to_string(runs));
  std::array<int64_t, 3> g = interp_grid(bound, args);
  int64_t programs = 0;
  if (__builtin_mul_overflow(g[0], g[1], &programs) || __builtin_mul_overflow(programs, g[2], &programs))
    throw TesseraError("the split's grid of " + std::to_string(g[0]) + " x " + std::to_string(g[1]) + " x " +
                       std::to_string(g[2]) + " programs overflows int64");
  // The partial views follow the kernel's own parameters, one per carried value. Counted
  // before anything is allocated: `--split 2147483647` would otherwise fill gigabytes element
  // by element until the host runs out. They have the limit the kernel's tensors have
  // (kMaxHostTensorBytes, the CLI's check_tensor_budget).
  double bytes = 0;
  for (size_t i = bound.params.size(); i < s.partial->params.size(); ++i) {
    const Type& t = s.partial->params[i]->type;
    double n = double(programs) * double(runs) * scalar_bytes(t.elem);
    for (size_t d = 2; d < t.shape.size(); ++d) n *= double(t.shape[d].value);
    bytes += n;
  }
  if (bytes > kMaxHostTensorBytes) {
    char gib[32];
    std::snprintf(gib, sizeof gib, "%.1f", bytes / double(1ull << 30));
    throw TesseraError("the split's partial results (" + std::to_string(programs) + " programs x " + std::to_string(runs) +
                       " runs) need " + gib + " GiB; the limit is " + std::to_string(kMaxHostTensorGiB) + " GiB: fewer runs");
  }
  std::vector<Tensor> partials;
  partials.reserve(s.partial->params.size() - bound.params.size());
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1, 1);
  for (size_t i = bound.params.size(); i < s.partial->params.size(); ++i) {
    const Type& t = s.partial->params[i]->type;
    std::vector<int64_t> shape{programs, runs};
    for (size_t d = 2; d < t.shape.size(); ++d) shape.push_back(t.shape[d].value);
    partials.emplace_back(t.elem, shape);
    for (int64_t e = 0; e < partials.back().numel(); ++e) partials.back().set(e, uniform(rng));
  }
  for (Tensor& t : partials) args.push_back({&t, int64_t{0}});
  std::vector<KernelArg> merge_args = args;
  run(*s.partial, args);
  run(*s.merge, merge_args);
  return programs * runs;
}

}  // namespace tessera
