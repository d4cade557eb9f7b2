// --check-passes (run and compile): the pipeline checked pass by pass on the interpreter.
#include <iostream>

#include "check/PassCheck.h"
#include "cli/Args.h"

namespace tessera::cli {

bool check_pipeline_passes(const KernelPlan& plan, const Sizes& sizes, const std::vector<uint64_t>& seeds) {
  const Kernel& k = *plan.kernel;
  PassCheckOptions o;
  o.config = plan.config;
  o.sizes = sizes;
  o.seeds = seeds;
  // The scalars' values, drawn once as `run` draws them (no tensors needed for that).
  std::vector<Tensor> none(k.view_params().size());
  std::vector<KernelArg> args = make_args(k, none, seeds.empty() ? 1 : seeds.front(), plan.scalars);
  for (size_t i = 0; i < k.params.size(); ++i)
    if (!k.params[i]->type.is_view()) o.scalars[k.params[i]->name] = args[i].scalar;

  PassCheckResult r = check_passes(k, pipeline_passes(plan.config), o);
  if (r.seeds_checked.empty())
    throw TesseraError(k.loc, "--check-passes: kernel '" + k.name + "' does not run on the interpreter with random inputs, "
                                  "so nothing can be checked (" + r.unchecked + ")");
  if (!r.ok()) {
    std::cerr << "check-passes: FAIL " << r.message << "\n";
    return false;
  }
  std::string seeds_str, run;
  for (uint64_t s : r.seeds_checked) seeds_str += (seeds_str.empty() ? "" : ",") + std::to_string(s);
  for (const std::string& p : r.passes_run) run += (run.empty() ? "" : ",") + p;
  std::cerr << "check-passes: PASS " << k.name << " sizes " << sizes_str(k, sizes) << " seeds " << seeds_str
            << " passes that changed the IR: " << (run.empty() ? "none" : run);
  if (!r.unchecked.empty()) std::cerr << " (unchecked " << r.unchecked << ")";
  std::cerr << "\n";
  return true;
}

}  // namespace tessera::cli
