// Checking passes for equivalence (`--check-passes`): the kernel runs on the interpreter before
// and after each pass of a pass list, on random inputs from several seeds, and the first pass
// whose outputs differ from its input's beyond the tolerance is named (docs/checking.md).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "ir/IR.h"
#include "passes/Passes.h"
#include "runtime/Tensor.h"

namespace tessera {

struct PassCheckOptions {
  // Every state of the kernel is bound with this config before it runs: a state before
  // bind-constexprs is unbound (symbolic tiles, `param` ops) and the interpreter needs numbers;
  // binding is idempotent, so after bind-constexprs it changes nothing.
  ConstexprConfig config;
  Sizes sizes;  // every symbolic view dim (ragged_check_sizes gives small ragged ones)
  std::vector<uint64_t> seeds{1, 2, 3};
  // Values of scalar parameters by name; the others take make_args' defaults (1, 0.5).
  std::map<std::string, std::variant<int64_t, double>> scalars;
};

struct PassCheckResult {
  std::string failed_pass;  // the first pass whose output differs; empty when none did
  // The pass, the kernel, the seed, the sizes and the first differing element (or what broke).
  std::string message;
  std::vector<uint64_t> seeds_checked;  // seeds on which the kernel as given runs on the interpreter
  std::string unchecked;                // the interpreter's error on the first seed it could not run
  std::vector<std::string> passes_run;  // passes that changed the IR, so their output was run

  bool ok() const { return failed_pass.empty(); }
};

// Runs `passes` in order on a copy of `k`; after each one that changes the (bound) IR, runs
// the kernel on every seed and compares with the state before the pass: exact for integers,
// the dtype's tolerance plus tile_error_bounds for floats (a pass may reorder a sum). A
// TesseraError of a pass itself propagates (the pipeline would fail the same way); so does
// one binding `k` with the config.
PassCheckResult check_passes(const Kernel& k, const std::vector<Pass>& passes, const PassCheckOptions& o);

// split_reduction's two kernels run in turn, `run` running each (the interpreter, a backend),
// on `args` (`bound`'s arguments: its view tensors end as `bound` would leave them) followed
// by partial tensors of their own: SPLIT_P = the programs of `bound`'s grid at these arguments,
// SPLIT_N = `runs`, random contents from `seed` (so that a run that stores nothing shows).
// Returns the number of programs the partial kernel ran (SPLIT_P * runs).
int64_t run_split(const Kernel& bound, const SplitKernels& s, std::vector<KernelArg> args, int64_t runs, uint64_t seed,
                  const std::function<void(const Kernel&, std::vector<KernelArg>&)>& run);

// Small ragged sizes for `k`'s symbolic view dims, in first-use order: 97, 127, 157, ... (the
// value in `caps` when that is smaller), so that tiles have partial edges.
Sizes ragged_check_sizes(const Kernel& k, const Sizes& caps = {});

}  // namespace tessera
