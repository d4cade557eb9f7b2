// The pass pipeline: one straight list, read top to bottom. Each pass can be dumped
// (--dump-after=NAME or all) and reports statistics.
#include <algorithm>
#include <iostream>

#include "ir/Verifier.h"
#include "passes/Passes.h"
#include "support/Env.h"
#include "text/Text.h"

namespace tessera {

namespace {

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The verifier, now requiring static tile shapes.
void verify_bound(Kernel& k, PassStats&) {
  VerifyOptions o;
  o.require_bound = true;
  verify_or_throw(k, o);
}

}  // namespace

bool fma_dot_in_registers_env() {
  static const bool on = env_flag("TESSERA_FMA_DOT_IN_REGISTERS");
  return on;
}

std::vector<Pass> pipeline_passes(const ConstexprConfig& config) {
  return {
      {"verify", [](Kernel& k, PassStats&) { verify_or_throw(k); }},
      {"bind-constexprs", [config](Kernel& k, PassStats&) { bind_constexprs_in_place(k, config); }},
      {"pipes-to-loads", pipes_to_loads},
      {"canonicalize", canonicalize},
      // After canonicalize (its 1s are constants by then), before cse and dce (which take the
      // splats of 2 it makes, and the sums and tanhs it leaves unused).
      {"tanh-sums-to-sigmoid", tanh_sums_to_sigmoid},
      {"cse", cse},
      {"licm", licm},
      // After licm, so that the loops hold only what varies; before dce, which removes the
      // spreads of the old results that only the fused loops read. chunk-reductions makes
      // loops of whole-row reductions for repair-reductions to fuse.
      {"chunk-reductions", chunk_reductions},
      {"repair-reductions", repair_reductions},
      {"dce", dce},
      // After dce (an unused op reading an exp would keep it exact).
      {"relax-exp-precision", relax_exp_precision},
      {"verify-bound", verify_bound},
  };
}

std::vector<Pass> gpu_lowering_passes(const GpuLoweringOptions& o) {
  return {
      // Before assign-launch-shape, which sizes the program for the dots as they will be.
      {"swap-dot-operands", [o](Kernel& k, PassStats& st) { swap_dot_operands(k, o, st); }},
      // Before assign-launch-shape, which gives a program on a cluster the warps of its CTAs.
      {"cluster-programs", [o](Kernel& k, PassStats& st) { cluster_programs(k, o, st); }},
      {"assign-launch-shape", [o](Kernel& k, PassStats& st) { assign_launch_shape(k, o, st); }},
      {"assign-layouts", [o](Kernel& k, PassStats& st) { assign_layouts(k, o, st); }},
      {"remove-layout-conversions", remove_layout_conversions},
      {"stage-mma-operands", stage_mma_operands},
      {"swizzle-mma-operands", [o](Kernel& k, PassStats& st) { swizzle_mma_operands(k, o, st); }},
      // Before pipeline-loops (which sizes the split loop's deeper ring) and persist-programs
      // (a split kernel runs one CTA per program and slice).
      {"split-k-loops", [o](Kernel& k, PassStats& st) { split_k_loops(k, o, st); }},
      {"pipeline-loops", [o](Kernel& k, PassStats& st) { pipeline_loops(k, o, st); }},
      {"hint-l2-policy", [o](Kernel& k, PassStats& st) { hint_l2_policy(k, o, st); }},
      {"specialize-warps", [o](Kernel& k, PassStats& st) { specialize_warps(k, o, st); }},
      {"persist-programs", persist_programs},
      {"prefetch-programs", [o](Kernel& k, PassStats& st) { prefetch_programs(k, o, st); }},
      // After pipeline-loops (a loop it gave a ring keeps its loads) and prefetch-programs (the
      // first tile's load it puts before the loop is not the next program's to copy).
      {"prefetch-loop-loads", prefetch_loop_loads},
      {"store-epilogues-by-tma", store_epilogues_by_tma},
      {"stage-epilogue-stores", stage_epilogue_stores},
      {"pingpong-consumers", pingpong_consumers},
      {"overlap-epilogues", overlap_epilogues},
      // After persist-programs and pingpong-consumers (stream-K shares the persistent CTAs'
      // last wave out; ping-pong consumers take programs of their own CTA).
      {"stream-k-programs", [o](Kernel& k, PassStats& st) { stream_k_programs(k, o, st); }},
      // After pingpong-consumers (whose consumers take programs of their own CTA: no pairs) and
      // stream-k-programs (its parts are not run in step by pairs).
      {"pair-programs", [o](Kernel& k, PassStats& st) { pair_programs(k, o, st); }},
      {"verify-lowered", verify_bound},
  };
}

std::vector<std::string> gpu_lowering_pass_names() {
  std::vector<std::string> names;
  for (const Pass& p : gpu_lowering_passes({})) names.push_back(p.name);
  return names;
}

std::unique_ptr<Kernel> run_gpu_lowering(const Kernel& bound, const GpuLoweringOptions& o, const PipelineOptions& opts,
                                         PassStats* stats) {
  auto dump = opts.dump ? opts.dump : [](const std::string& pass, const std::string& ir) {
    std::cerr << "// ----- IR after " << pass << " -----\n" << ir;
  };
  PassStats local;
  PassStats& st = stats ? *stats : local;
  auto out = bound.clone();
  for (const Pass& p : gpu_lowering_passes(o)) {
    if (listed(opts.disabled, p.name) && disableable_gpu_lowering_pass(p.name)) continue;
    p.run(*out, st);
    if (opts.dump_after == "all" || opts.dump_after == p.name) dump(p.name, print_kernel(*out));
  }
  return out;
}

bool disableable_pass(const std::string& name) {
  return name != "verify" && name != "bind-constexprs" && name != "verify-bound";
}

// The layout emitter needs a launch shape and a layout on every tile, and the lowered IR
// verified; every other lowering pass is a decision it prints when made (each left out is the
// kernel without that decision: no swizzle, no ring, no producer warps, ...).
bool disableable_gpu_lowering_pass(const std::string& name) {
  return name != "assign-launch-shape" && name != "assign-layouts" && name != "verify-lowered";
}

std::vector<std::string> gpu_lowering_passes_in(const std::vector<std::string>& names) {
  const auto lowering = gpu_lowering_pass_names();
  std::vector<std::string> out;
  for (const std::string& n : names)
    if (listed(lowering, n)) out.push_back(n);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::string> pipeline_pass_names() {
  std::vector<std::string> names;
  for (const Pass& p : pipeline_passes({})) names.push_back(p.name);
  return names;
}

std::unique_ptr<Kernel> run_pipeline(const Kernel& k, const PipelineOptions& opts, PassStats* stats) {
  auto passes = pipeline_passes(opts.config);
  const auto names = pipeline_pass_names(), lowering = gpu_lowering_pass_names();
  for (const std::string& d : opts.disabled) {
    // A GPU lowering pass is left out where the lowering runs (run_gpu_lowering).
    if (listed(lowering, d) ? !disableable_gpu_lowering_pass(d) : !listed(names, d) || !disableable_pass(d)) {
      std::string valid;
      for (const std::string& n : names)
        if (disableable_pass(n)) valid += (valid.empty() ? "" : ", ") + n;
      valid += "; of the GPU lowering (what the layout emitter prints): ";
      bool first = true;
      for (const std::string& n : lowering)
        if (disableable_gpu_lowering_pass(n)) valid += (first ? "" : ", ") + n, first = false;
      throw TesseraError("--disable-pass " + d + ": not a pass that can be left out (" + valid + ")");
    }
    std::erase_if(passes, [&](const Pass& p) { return p.name == d; });
  }
  if (listed(opts.disabled, opts.dump_after))
    throw TesseraError("--dump-after " + opts.dump_after + ": that pass is left out (--disable-pass " + opts.dump_after +
                       "): nothing to print after it");
  if (!opts.dump_after.empty() && opts.dump_after != "all") {
    bool known = false;
    std::string valid;
    for (const Pass& p : passes) {
      known = known || p.name == opts.dump_after;
      valid += p.name + ", ";
    }
    known = known || listed(lowering, opts.dump_after);
    if (!known) throw TesseraError("unknown pass '" + opts.dump_after + "' for --dump-after (valid: " + valid + "all)");
  }
  auto dump = opts.dump ? opts.dump : [](const std::string& pass, const std::string& ir) {
    std::cerr << "// ----- IR after " << pass << " -----\n" << ir;
  };
  PassStats local;
  PassStats& st = stats ? *stats : local;
  auto out = k.clone();
  for (const Pass& p : passes) {
    p.run(*out, st);
    if (opts.dump_after == "all" || opts.dump_after == p.name) dump(p.name, print_kernel(*out));
  }
  return out;
}

}  // namespace tessera
