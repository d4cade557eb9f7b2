// `tessera run`: build, lower, run on random inputs (or --input files), write the views with
// --output, and with --check compare with the reference (the library kernel's own C++ loops, or
// the interpreter for a .tile file) and with --reference against given data.
#include <chrono>
#include <iostream>

#include "cli/Args.h"
#include "cli/Backend.h"
#include "cli/Commands.h"
#include "cli/TensorIO.h"
#include "check/Compare.h"
#include "check/PassCheck.h"
#include "interp/Interpreter.h"

namespace tessera::cli {

namespace {

// The interpreter as the reference of a .tile file: say so when it is the reference that
// cannot run the kernel (a raw op), or the user would think the backend failed.
void run_reference_interp(const Kernel& k, std::vector<KernelArg>& args) {
  try {
    run_interp(k, args);
  } catch (const TesseraError& e) {
    throw TesseraError(e.loc(), e.message() + " (the interpreter is the reference of --check for a .tile file)");
  }
}

// Run one kernel; prints its line and returns whether it passed. `inputs` and `refs` hold the
// --input and --reference data (one entry per view, empty when none).
bool run_one(const KernelSource& src, const KernelPlan& plan, const RunOptions& o, const ViewFiles& inputs,
             const ViewFiles& refs) {
  const Kernel& k = *plan.kernel;
  const Sizes& sizes = plan.sizes;
  PipelineOptions po;
  po.config = plan.config;
  po.disabled = o.k.disable_passes;
  std::unique_ptr<Kernel> bound = run_pipeline(k, po);
  // A library op may run as several kernels at these sizes (LibraryKernel::stages).
  auto runner = make_library_runner(o.backend, *bound, src.lib, src.dtype, sizes, plan.given(), o.k.disable_passes);

  // One copy of the tensors, two with --check (the reference's, taken before the backend writes
  // them; a .tile file on the interpreter is its own reference): what plan_kernels budgets.
  const bool self_reference = !src.lib && o.backend == "interp";
  std::string ref_names;  // the views checked against --reference data
  for (size_t i = 0; i < refs.size(); ++i)
    if (refs[i]) ref_names += (ref_names.empty() ? "" : ",") + bound->view_params()[i]->name;
  const bool check = o.check || !ref_names.empty();
  std::vector<Tensor> got = make_random_tensors(*bound, sizes, o.k.seed);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]) got[i] = *inputs[i];
  std::vector<Tensor> want;
  if (check && !self_reference) want = got;
  std::vector<KernelArg> args = make_args(*bound, got, o.k.seed, plan.scalars);
  auto t0 = std::chrono::steady_clock::now();
  runner->run(args);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  std::string what = k.name + " " + o.backend + " " + sizes_str(k, sizes);
  // The dtype goes last so that the contract's fields keep their positions.
  std::string dtype = src.lib ? " dtype=" + std::string(scalar_name(src.dtype)) : "";
  if (!o.output_dir.empty()) write_view_files(*bound, got, o.output_dir);
  if (!check) {
    std::cout << "RAN " << what << " time_ms=" << fmt_num(ms) << dtype << "\n";
    return true;
  }

  // Beyond the dtype's tolerance, what the reductions may round (docs/checking.md): the
  // library reference's own bounds, or for a .tile file the rule of tile_error_bounds.
  ErrorBounds bounds;
  if (!self_reference) {  // else the interpreter is the reference: nothing to compare with itself
    std::vector<KernelArg> ref_args = make_args(*bound, want, o.k.seed, plan.scalars);
    if (src.lib) {
      src.lib->reference(ref_args, sizes);
      if (src.lib->error_bounds) bounds = src.lib->error_bounds(ref_args, sizes);
    } else {
      run_reference_interp(*bound, ref_args);
      bounds = tile_error_bounds(*bound, sizes, want);
    }
  }
  // Given data replaces the reference's view; on the interpreter a .tile file's bounds then
  // take their magnitudes from it (there is no other reference).
  if (self_reference && !ref_names.empty()) want = got;
  for (size_t i = 0; i < refs.size(); ++i)
    if (refs[i]) want[i] = *refs[i];
  if (self_reference && !ref_names.empty()) bounds = tile_error_bounds(*bound, sizes, want);
  Comparison c = compare_outputs(*bound, got, want.empty() ? got : want, bounds);
  // After the dtype, so that the contract's fields keep their positions: absent when every view
  // has an independent reference, `self` when none has (nothing was checked), else the views
  // checked against --reference data.
  std::string reference = !ref_names.empty() ? " reference=npy:" + ref_names : self_reference ? " reference=self" : "";
  std::cout << (c.ok() ? "PASS " : "FAIL ") << what << " max_abs_err=" << fmt_num(c.max_abs_err)
            << " max_rel_err=" << fmt_num(c.max_rel_err) << dtype << reference;
  if (!c.ok())
    std::cout << " mismatches=" << c.mismatches << "/" << c.elements << " first: " << c.first_mismatch;
  std::cout << "\n";
  return c.ok();
}

// --split N: the kernel after the pipeline, split by split_reduction into a partial and a
// merge kernel, both run on the backend; --check compares with the interpreter on the kernel as
// written (constexprs bound, no other pass), the plain program the split is derived from.
bool run_split_one(const KernelPlan& plan, const RunOptions& o) {
  const Kernel& k = *plan.kernel;
  PipelineOptions po;
  po.config = plan.config;
  po.disabled = o.k.disable_passes;
  std::unique_ptr<Kernel> bound = run_pipeline(k, po);
  PassStats stats;
  SplitKernels s = split_reduction(*bound, stats);
  if (!s.partial) throw TesseraError(k.loc, "--split: kernel '" + k.name + "' has no reduction to split: " + s.why);
  auto partial = make_runner(o.backend, *s.partial, o.k.disable_passes);
  auto merge = make_runner(o.backend, *s.merge, o.k.disable_passes);
  std::vector<Tensor> got = make_random_tensors(*bound, plan.sizes, o.k.seed);
  std::vector<Tensor> want;
  if (o.check) want = got;
  std::vector<KernelArg> args = make_args(*bound, got, o.k.seed, plan.scalars);
  auto t0 = std::chrono::steady_clock::now();
  int64_t programs = run_split(*bound, s, args, o.split, o.k.seed, [&](const Kernel& kk, std::vector<KernelArg>& a) {
    (&kk == s.partial.get() ? partial : merge)->run(a);
  });
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // After the contract's fields, so that they keep their positions.
  std::string what = k.name + " " + o.backend + " " + sizes_str(k, plan.sizes);
  std::string split = " split=" + std::to_string(o.split) + " programs=" + std::to_string(programs);
  if (!o.check) {
    std::cout << "RAN " << what << " time_ms=" << fmt_num(ms) << split << "\n";
    return true;
  }
  std::unique_ptr<Kernel> plain = bind_constexprs(k, plan.config);
  std::vector<KernelArg> ref_args = make_args(*plain, want, o.k.seed, plan.scalars);
  run_reference_interp(*plain, ref_args);
  Comparison c = compare_outputs(*bound, got, want, tile_error_bounds(*plain, plan.sizes, want));
  std::cout << (c.ok() ? "PASS " : "FAIL ") << what << " max_abs_err=" << fmt_num(c.max_abs_err)
            << " max_rel_err=" << fmt_num(c.max_rel_err) << split << " reference=interp-plain";
  if (!c.ok())
    std::cout << " mismatches=" << c.mismatches << "/" << c.elements << " first: " << c.first_mismatch;
  std::cout << "\n";
  return c.ok();
}

}  // namespace

int cmd_run(const RunOptions& o) {
  auto src = resolve_kernel(o.k.what, o.k.dtype, o.k.kernel);
  if (!src) return 1;
  const bool files = !o.inputs.empty() || !o.references.empty() || !o.output_dir.empty();
  const bool check = o.check || !o.references.empty();
  // Copies held at once: the tensors, the reference's, the data read from --input files and
  // from --reference files (each held beside the others), and a library reference's error
  // bounds (a double per output element).
  const int copies = 1 + (check && (src->lib || o.backend != "interp" || !o.references.empty())) +
                     !o.inputs.empty() + !o.references.empty();
  std::vector<KernelPlan> plans = plan_kernels(*src, o.k, copies, check && src->lib && src->lib->error_bounds);
  if (files && plans.size() > 1) {
    std::string names;
    for (const KernelPlan& p : plans) names += (names.empty() ? "" : ", ") + p.kernel->name;
    throw TesseraError("--input, --output and --reference name the views of one kernel, and " + src->file +
                       " has several (" + names + "): pick one with --kernel");
  }
  apply_target_configs(*src, plans, backend_target(o.backend));
  // Read before anything runs, so that a bad file gives one message and no output.
  ViewFiles inputs, refs;
  if (files) {
    inputs = read_view_files(*plans[0].kernel, plans[0].sizes, o.inputs, "--input");
    refs = read_view_files(*plans[0].kernel, plans[0].sizes, o.references, "--reference");
  }
  bool ok = true;
  for (const KernelPlan& p : plans) {
    if (o.check_passes) ok &= check_pipeline_passes(p, p.sizes, {o.k.seed, o.k.seed + 1, o.k.seed + 2});
    if (o.split) {
      if (files) throw TesseraError("--split does not take --input, --output or --reference");
      ok &= run_split_one(p, o);
      continue;
    }
    ok &= run_one(*src, p, o, inputs, refs);
  }
  return ok ? 0 : 1;
}

}  // namespace tessera::cli
