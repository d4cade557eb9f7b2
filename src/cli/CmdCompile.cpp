// `tessera compile`: run the pass pipeline and print what a target would get.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>

#include "cli/Args.h"
#include "cli/Backend.h"
#include "cli/Commands.h"
#include "check/PassCheck.h"
#include "cpu/CpuBackend.h"
#include "cuda/CubinInfo.h"
#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"
#include "kernels/Library.h"
#include "text/Text.h"

namespace tessera::cli {

namespace {

void check_dump_after(const std::string& name, bool cuda_target) {
  if (name.empty() || name == "all") return;
  auto names = pipeline_pass_names(), lowering = gpu_lowering_pass_names();
  if (std::find(names.begin(), names.end(), name) != names.end()) return;
  const bool lowering_pass = std::find(lowering.begin(), lowering.end(), name) != lowering.end();
  if (lowering_pass && cuda_target) return;
  if (lowering_pass) throw TesseraError("--dump-after " + name + " is a GPU lowering pass: it needs a cuda target (--target cuda:sm_90a)");
  std::string list, more;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  for (const auto& n : lowering) more += (more.empty() ? "" : ", ") + n;
  throw TesseraError("unknown pass '" + name + "' for --dump-after (passes: " + list + ", or all; with a cuda target also " +
                     more + ")");
}

// One line (stderr) per kernel: where its cold compile goes. The cubin is the runtime's (NVRTC
// runs ptxas inside); tools/nvrtc-times makes a table of these lines.
void print_compile_time(const Kernel& k, const CudaTarget& target, const CudaEmission& em) {
  NvrtcResult r = nvrtc_compile_timed(em.source, target, k.name + ".cu", em.line_op);
  auto lines = [](const std::string& s) { return std::count(s.begin(), s.end(), '\n'); };
  auto sec = [](double s) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", s);
    return std::string(b);
  };
  CubinResources res = cubin_resources(r.cubin, em.info.symbol);
  std::cerr << "time " << k.name << " " << target.str() << " " << (em.lowered ? "layouts" : "planning")
            << ": nvrtc " << sec(r.seconds) << " s, cpu " << sec(r.cpu_seconds) << " s (front end " << sec(r.frontend_seconds) << ", nvvm "
            << sec(r.nvvm_seconds) << ", ptxas " << sec(r.ptxas_seconds) << "), cuda " << lines(em.source)
            << " lines, ptx " << lines(r.ptx) << " lines, " << res.registers << " registers, " << res.frame_bytes
            << " B stack\n";
}

}  // namespace

int cmd_compile(const CompileOptions& o) {
  bool cuda_target = o.target.starts_with("cuda:");
  if (o.emit == "cpp" && cuda_target)
    throw TesseraError("--emit cpp is the cpu backend's output; use --target cpu");
  if ((o.emit == "cuda" || o.emit == "ptx") && !cuda_target)
    throw TesseraError("--emit " + o.emit + " needs a cuda target (--target cuda:sm_80 or cuda:sm_90a)");
  if (o.time && !cuda_target) throw TesseraError("--time times NVRTC: it needs a cuda target (--target cuda:sm_90a)");
  std::string why;
  if ((o.emit == "ptx" || o.time) && !nvrtc_available(&why))
    throw TesseraError(std::string(o.time ? "--time" : "--emit ptx") + " needs NVRTC, which is not available here: " + why);
  check_dump_after(o.dump_after, cuda_target);

  auto src = resolve_kernel(o.k.what, o.k.dtype, o.k.kernel);
  if (!src) return 1;
  std::vector<KernelPlan> plans = plan_kernels(*src, o.k, 0);
  if (o.split_k && !cuda_target) throw TesseraError("--split-k needs a cuda target (--target cuda:sm_90a)");
  CudaTarget target;
  if (cuda_target) {
    target = CudaTarget::parse(o.target);
    // Split-K is the wgmma matmul's compilation: another target would print the same code.
    if (o.split_k && !(target.sm == 90 && target.arch_specific))
      throw TesseraError("--split-k is the split-K compilation of wgmma matmuls: it needs --target cuda:sm_90a, not " + o.target);
    target.split_k = o.split_k;
    disable_lowering_passes(target, o.k.disable_passes);  // for the layout emitter
  }
  // The target's preferred configs key on the architecture as CudaTarget prints it.
  const std::string target_key = cuda_target ? "cuda:" + CudaTarget::parse(o.target).str() : o.target;
  // --size: what a library op runs at these sizes, as `run --size` would: its size rules and
  // tuned configs apply (topk's K), and an op that runs as several kernels there
  // (LibraryKernel::stages, e.g. the segmented top-k on cuda) compiles those kernels, each at
  // its config, in launch order (a note says which).
  Sizes sizes;
  if (!o.k.sizes.empty()) {
    if (!src->lib) throw TesseraError("--size picks the kernels a library op runs at those sizes; a .tile file compiles with symbolic sizes");
    if (o.check_passes || o.split) throw TesseraError(std::string(o.check_passes ? "--check-passes" : "--split") + " does not take --size");
    sizes = resolve_sizes(*plans.front().base, src->lib, o.k.sizes);
    for (KernelPlan& p : plans) p.sizes = sizes;
  }
  apply_target_configs(*src, plans, target_key);
  std::vector<std::unique_ptr<Kernel>> stage_kernels;
  if (!sizes.empty()) {
    LibraryStages st;
    if (src->lib->stages) st = src->lib->stages(src->dtype, target_key, sizes, plans.front().given());
    const std::string at = " at " + sizes_str(*plans.front().base, sizes) + "\n";
    if (st.stages.empty()) {
      std::cerr << "note: " << src->lib->name << " runs as one kernel" << at;
    } else {
      std::vector<KernelPlan> staged;
      for (const LibraryStage& stage : st.stages) {
        stage_kernels.push_back(stage.build(src->dtype));
        KernelPlan p;
        p.kernel = p.base = stage_kernels.back().get();
        p.config = stage.config;
        staged.push_back(std::move(p));
      }
      std::cerr << "note: " << src->lib->name << " runs as " << staged.size() << " kernels" << at;
      plans = std::move(staged);
    }
  }
  PipelineOptions po;
  po.dump_after = o.dump_after;
  po.disabled = o.k.disable_passes;
  po.dump = [](const std::string& pass, const std::string& ir) {
    std::cerr << "// ----- IR after " << pass << " -----\n" << ir;
    if (!ir.empty() && ir.back() != '\n') std::cerr << "\n";
  };

  bool first = true, passes_ok = true;
  for (const KernelPlan& plan : plans) {
    const Kernel* k = plan.kernel;
    po.config = plan.config;
    PassStats stats;
    std::unique_ptr<Kernel> bound = run_pipeline(*k, po, &stats);
    // The GPU lowering passes run again here, for their dumps and statistics (the planning
    // emitter does not read their output). On sm_90a with wgmma, unless the layout emitter printed
    // the kernel from its lowering for mma.sync (what it cannot print with wgmma): then that one.
    // (That emission of the bound kernel is kept for the output below.)
    const auto lowering = gpu_lowering_pass_names();
    std::optional<CudaEmission> bound_em;
    if (cuda_target && (o.stats || o.dump_after == "all" ||
                        std::find(lowering.begin(), lowering.end(), o.dump_after) != lowering.end())) {
      bool wgmma = target.arch_specific && target.tma, clusters = true;
      const ConstexprDecl* cluster_size = bound->find_constexpr("cluster_size");
      // (Emitted here only where the lowering to show depends on it or --stats asks: a dump of
      // IR must not fail on what only the CUDA output would.)
      if (target.emitter != CudaTarget::Emitter::Planning && (wgmma || o.stats || (cluster_size && cluster_size->value != 1))) {
        try {
          bound_em = emit_cuda_with_info(*bound, target);
          wgmma = wgmma && (!bound_em->lowered || bound_em->lowered_with_wgmma);
          clusters = !bound_em->lowered || bound_em->lowered_with_clusters;
        } catch (const TesseraError&) {
          if (o.stats || o.emit == "cuda" || o.emit == "ptx" || o.time) throw;  // (the output needs it)
        }
      }
      GpuLoweringOptions lowering_options = gpu_lowering_options(target, wgmma);
      lowering_options.clusters = clusters;
      run_gpu_lowering(*bound, lowering_options, po, &stats);
      // The planning emitter printed it (asked for, or a knob only it reads, or what the layout
      // emitter cannot print): the lowering's counts and notes are not what runs.
      if (o.stats && (!bound_em || !bound_em->lowered))
        stats.notes.push_back("the planning emitter printed this kernel: the GPU lowering's statistics and notes "
                              "above are of what the layout emitter would print");
    }
    // --split: the split schedule's two kernels take the bound kernel's place.
    std::vector<const Kernel*> outs{bound.get()};
    SplitKernels split;
    if (o.split) {
      split = split_reduction(*bound, stats);
      if (!split.partial) throw TesseraError(k->loc, "--split: kernel '" + k->name + "' has no reduction to split: " + split.why);
      outs = {split.partial.get(), split.merge.get()};
    }
    // With --stats a cuda target also reports what its emitter chose (dot paths, conversions),
    // whatever is emitted.
    std::optional<CudaEmission> em;
    for (const Kernel* out : outs) {
      if (!first) std::cout << "\n";
      first = false;
      if (cuda_target && (o.emit == "cuda" || o.emit == "ptx" || o.stats || o.time))
        em = bound_em && out == bound.get() ? std::move(*bound_em) : emit_cuda_with_info(*out, target);
      if (o.time) print_compile_time(*out, target, *em);
      if (o.emit == "ir")
        std::cout << print_kernel(*out);
      else if (o.emit == "cpp")
        std::cout << emit_cpp(*out);
      else if (o.emit == "cuda")
        std::cout << em->source;
      else
        std::cout << nvrtc_compile(em->source, target, out->name + ".cu").ptx;
    }
    std::cout.flush();
    // A dot that could have taken the Hopper path (wgmma + TMA) and did not says why, --stats
    // or not: `compile matmul --target cuda:sm_90a` is f32 unless --dtype says otherwise, and
    // f32 dots run on the mma.sync path.
    if (em && !o.stats && !em->wgmma_not_taken.empty())
      std::cerr << "note: " << em->wgmma_not_taken << " (--stats: every choice)\n";
    if (o.stats) {
      std::cerr << "// ----- statistics for " << k->name << " -----\n";
      for (const auto& [name, value] : stats) std::cerr << name << " = " << value << "\n";
      for (const std::string& n : stats.notes) std::cerr << "note: " << n << "\n";
      if (em) {
        std::cerr << "// ----- cuda emitter statistics for " << k->name << " (" << o.target << ") -----\n";
        for (const auto& [name, value] : em->stats) std::cerr << name << " = " << value << "\n";
        for (const std::string& n : em->notes) std::cerr << "note: " << n << "\n";
      }
    }
    if (o.check_passes)
      passes_ok &= check_pipeline_passes(plan, ragged_check_sizes(*k, src->lib ? src->lib->default_sizes : Sizes{}),
                                         {1, 2, 3});
  }
  return passes_ok ? 0 : 1;
}

}  // namespace tessera::cli
