// Library kernels' per-target default configs in the CLI: --config wins, then the kernel's
// preferred values for the target, then its own defaults (bind-constexprs).
#include "cli/Args.h"

namespace tessera::cli {

void apply_target_configs(const KernelSource& src, std::vector<KernelPlan>& plans, const std::string& target) {
  if (!src.lib) return;
  for (KernelPlan& p : plans) p.config = library_config(*src.lib, src.dtype, target, p.config, &p.sizes);
}

}  // namespace tessera::cli
