// The built-in kernel library, written in Tessera's C++ language, with plain C++ reference
// loops that `tessera run --check` compares against.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/IR.h"
#include "kernels/Tolerance.h"
#include "runtime/Tensor.h"

namespace tessera {

// A library op that runs as several kernels in turn, with temporaries between them (issue 18:
// the segmented top-k, whose segments' candidates a second kernel merges). The op keeps its
// own kernel (LibraryKernel::build): its parameters are the op's, and it is what `tessera
// compile` and `tune` see; the stages replace it where LibraryKernel::stages gives some for
// the sizes (`tessera run` and `bench`, bench/cuda_bench, tests). Each stage is a kernel of its
// own, bound with `config` and compiled as a library kernel is; the runner allocates the
// temporaries where the kernels run (host tensors on interp and cpu, device memory on cuda:
// cli::make_library_runner), their contents undefined until a stage writes them.
struct LibraryTemporary {
  ScalarKind dtype = ScalarKind::F32;
  std::vector<int64_t> shape;
};
struct LibraryStage {
  std::function<std::unique_ptr<Kernel>(ScalarKind dtype)> build;  // unbound, as LibraryKernel::build
  std::map<std::string, int64_t> config;  // every constexpr it is bound with
  // Its parameters in order: i >= 0 is the op's parameter i (of LibraryKernel::build's kernel),
  // -1 - t is temporary t.
  std::vector<int> args;
};
struct LibraryStages {
  std::vector<LibraryTemporary> temporaries;
  std::vector<LibraryStage> stages;  // run in order; empty: the op's own kernel runs instead
};
// A stage's arguments (KernelArgs, device pointers, ...) from the op's and the temporaries'.
template <class T>
std::vector<T> stage_args(const LibraryStage& s, const std::vector<T>& op, const std::vector<T>& temporaries) {
  std::vector<T> out;
  for (int a : s.args) out.push_back(a >= 0 ? op.at(static_cast<size_t>(a)) : temporaries.at(static_cast<size_t>(-1 - a)));
  return out;
}

struct LibraryKernel {
  std::string name;
  std::string summary;
  std::vector<ScalarKind> dtypes;  // the first is the default
  Sizes default_sizes;             // every symbolic dim of the kernel
  // Values of scalar parameters for tests and for `tessera run`/`bench` when --scalar gives
  // none (a scalar not listed gets the caller's default): realistic values, distinct and not
  // powers of two, so that a kernel that mixes up two scalars fails its check.
  std::map<std::string, double> scalars;
  // Preferred constexpr values per target, for a dtype (the best tile shape depends on both),
  // where they differ from the kernel's own defaults. Keys name the code a target gets: "cpu",
  // or "cuda:" + CudaTarget::str() of the architecture compiled for ("cuda:sm_80",
  // "cuda:sm_90a"; plain "cuda:sm_90" has no wgmma and is a key of its own). Applied wherever
  // a library kernel is bound for a target and the caller names no value for that constexpr
  // (`--config` wins): `tessera run/compile/bench`, bench/cuda_bench, the GPU tests. Every
  // value must be a candidate of its constexpr (tests/kernels checks). Null, or no key for
  // the target: the kernel's own defaults.
  std::function<std::map<std::string, std::map<std::string, int64_t>>(ScalarKind dtype)> target_configs;
  // Preferred values that depend on the problem's sizes too (a target key as above, a dtype and
  // every symbolic dim), over target_configs' where both name a constexpr; the caller's own
  // values still win. Applied where the sizes are known when the kernel is bound (`tessera
  // run/bench`, bench/cuda_bench); `tessera compile` without sizes gets target_configs alone.
  // Null, or an empty map: none. Every value must be a candidate of its constexpr.
  // `given`: the values the caller chose (--config, a tuning database's), which a rule may
  // defer to (the row kernels' whole-row tile only without a caller's BLOCK_M or num_warps).
  std::function<std::map<std::string, int64_t>(ScalarKind dtype, const std::string& target, const Sizes& sizes,
                                               const std::map<std::string, int64_t>& given)>
      size_configs;
  // Why the kernel cannot run at `sizes` (every symbolic dim), or "" when it can: a
  // precondition its results depend on (topk: K <= N). `tessera run/bench/tune` refuse such
  // sizes with this message; the interpreter would stop at an out-of-bounds scatter, and the
  // compiled backends would drop those stores and return a wrong result. Null: no condition.
  std::function<std::string(const Sizes& sizes)> size_error;
  // The stages that run the op at these sizes for a target key (as size_configs) and dtype
  // instead of its own kernel (LibraryStages above); `given`: the constexpr values the op's own
  // kernel would be bound with (--config, then a tuning database's config for that kernel),
  // which a stage may take over. Null, or no stages: the op's own kernel.
  std::function<LibraryStages(ScalarKind dtype, const std::string& target, const Sizes& sizes,
                              const std::map<std::string, int64_t>& given)>
      stages;
  // Build the kernel's IR (unbound: constexprs keep their candidates) for a dtype.
  std::function<std::unique_ptr<Kernel>(ScalarKind dtype)> build;
  // Compute the expected outputs in place: args hold the same inputs the kernel got; the
  // reference overwrites the output tensors (in double precision, rounded to their dtype).
  std::function<void(std::vector<KernelArg>& args, const Sizes& sizes)> reference;
  // How far a correct kernel's outputs may lie from the reference's because it rounds its
  // reductions (sums over a row, dots over K) in f32, in an order of its own: one bound per
  // element of each output, computed from the same inputs as the reference (args as the kernel
  // got them), which a check adds to the dtype's tolerance (Tolerance.h, docs/checking.md).
  // Null, or an empty entry: the dtype's tolerance alone.
  std::function<ErrorBounds(const std::vector<KernelArg>& args, const Sizes& sizes)> error_bounds;
  // A symbolic dim by whose rows the kernel is independent: row i of each view whose first dim
  // it is depends only on row i of the others (and on the views without it): matmul's "M". A
  // check of a large problem (`tessera tune`) then runs the reference on a few rows only.
  // Empty: none.
  std::string row_dim;
  // Bytes moved and floating-point operations for the given sizes (for bench figures).
  std::function<double(const Sizes&, ScalarKind)> bytes;
  std::function<double(const Sizes&, ScalarKind)> flops;
};

const std::vector<LibraryKernel>& library();
const LibraryKernel* find_library_kernel(const std::string& name);

// The constexpr values (a ConstexprConfig, passes/Passes.h) to bind library kernel `k` with
// for `target` (a target_configs key; "" for none): its preferred values for the target and
// dtype (and for `sizes`, when given: size_configs first, also for no target), with `given` (the caller's own
// choices) taking precedence.
std::map<std::string, int64_t> library_config(const LibraryKernel& k, ScalarKind dtype, const std::string& target,
                                              const std::map<std::string, int64_t>& given = {},
                                              const Sizes* sizes = nullptr);

}  // namespace tessera
