// What the subcommands share: reading a kernel given as a library name or a .tile file,
// NAME=VALUE options (--size, --config), and the small formatting helpers of the output lines.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/Commands.h"
#include "ir/IR.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "runtime/Tensor.h"
#include "support/Json.h"  // json_str, for the commands' --json

namespace tessera::cli {

// A kernel to run or compile, with where it came from. `lib` is set for a library kernel
// (which then has a reference and figures); a .tile file has none.
struct KernelSource {
  const LibraryKernel* lib = nullptr;
  std::string file;                        // the .tile path, when from a file
  std::unique_ptr<Module> module;          // owns file kernels
  std::unique_ptr<Kernel> built;           // owns the library kernel
  std::vector<const Kernel*> kernels;      // what to work on, in file order
  ScalarKind dtype = ScalarKind::F32;      // the library kernel's dtype
};

// The largest .tile file the CLI reads.
inline constexpr size_t kMaxSourceBytes = size_t{16} << 20;

// The whole file as text. Throws a located TesseraError for a missing, unreadable, empty or
// binary file, one that is not a regular file (a FIFO, a device) or one larger than
// kMaxSourceBytes, so that the parser only ever sees text.
std::string read_source_file(const std::string& path);

// Parse and verify a file. Returns the module, or prints every error (stderr) and returns null.
std::unique_ptr<Module> load_checked_module(const std::string& path);

// NAME or FILE: a path (anything with '/' or ending in .tile, or an existing file) is parsed
// and verified; otherwise it is looked up in the library. `dtype` applies to library kernels
// only; `kernel` picks one kernel of a file. Returns null after printing errors (stderr).
std::optional<KernelSource> resolve_kernel(const std::string& what, const std::string& dtype,
                                           const std::string& kernel);

// `--size M=1000 --size N=999` or `--size M=1000,N=999` -> {{"M", "1000"}, {"N", "999"}}.
// Throws naming the option and the bad item.
std::vector<std::pair<std::string, std::string>> split_assignments(
    const std::vector<std::string>& items, const std::string& option);
// A whole decimal integer; throws "bad <what> 'text': ..." otherwise.
int64_t parse_int(const std::string& text, const std::string& what);
ConstexprConfig parse_config(const std::vector<std::string>& items);

// The sizes of a kernel's symbolic view dims: the library defaults (if any) overridden by
// --size. Throws naming every dim without a size, and any --size the kernel does not have.
Sizes resolve_sizes(const Kernel& k, const LibraryKernel* lib,
                    const std::vector<std::string>& size_items);

// Every symbolic dim of the kernel's view parameters, in first-use order.
std::vector<std::string> symbolic_dims(const Kernel& k);

// "M=1000,N=999", in the kernel's dim order ("-" when it has none).
std::string sizes_str(const Kernel& k, const Sizes& sizes);

// Throws when the view tensors, `copies` times over (what the command holds at once), would be
// too large to allocate sensibly on this host (more than kMaxHostTensorBytes, 16 GiB).
// `output_bounds`: a double per element of every float view the kernel writes is held too (a
// library reference's error bounds under --check).
void check_tensor_budget(const Kernel& k, const Sizes& sizes, int copies, bool output_bounds = false);

// Kernel arguments over `tensors` (one per view parameter, in order) and a value for every
// scalar parameter: `--scalar NAME=VALUE`, else random from `seed` (nonzero, small), so that
// the reference and the backend see the same values.
std::vector<KernelArg> make_args(const Kernel& k, std::vector<Tensor>& tensors, uint64_t seed,
                                 const std::vector<std::string>& scalar_items);

// What one kernel of a source gets from --size, --config and --scalar. A file may hold several
// kernels: each option must name a dim, constexpr or scalar parameter of at least one of them,
// and each kernel takes the ones it has. Everything is checked before any kernel runs, so that
// a bad option gives one message and no partial output.
struct KernelPlan {
  const Kernel* kernel = nullptr;
  // The kernel as its source declares it: what the tuning database's key hashes.
  const Kernel* base = nullptr;
  // Codegen knobs the kernel does not declare (--config, or tuned: apply_target_configs), and
  // the copy of `base` that has them as constexprs (tune::with_codegen_knobs); `kernel` then
  // points at it.
  std::map<std::string, int64_t> knobs;
  std::shared_ptr<Kernel> with_knobs;
  void set_knobs();  // remakes with_knobs from base and knobs, and points kernel at it
  // What a library op's stages are given (LibraryKernel::stages): the config and the codegen
  // knobs, which a stage kernel may declare where the op's own kernel does not (topk's segment
  // kernels take min_blocks).
  ConstexprConfig given() const {
    ConstexprConfig g = config;
    g.insert(knobs.begin(), knobs.end());
    return g;
  }
  Sizes sizes;                       // empty unless sizes were asked for
  ConstexprConfig config;
  std::vector<std::string> scalars;  // NAME=VALUE items of this kernel's scalar parameters
};
// `copies`: 0 when the command takes no sizes, else how many copies of the tensors it holds
// (check_tensor_budget, with `output_bounds`).
std::vector<KernelPlan> plan_kernels(const KernelSource& src, const KernelOptions& o, int copies,
                                     bool output_bounds = false);

// A library kernel's preferred constexpr values for `target` (LibraryKernel::target_configs:
// "cuda:sm_90a", "cpu", ...; "" for none, and size_configs for the plan's sizes) under each
// plan's config, where --config names no value. A .tile file's kernels keep their own defaults.
// The tuning database's best config (tessera tune) comes first, where it has one for the kernel
// at the plan's sizes on this machine.
void apply_target_configs(const KernelSource& src, std::vector<KernelPlan>& plans, const std::string& target);
// The dtype a source's tuning records name: the library kernel's, "" for a .tile file (its IR
// names its types, and the IR hash is part of the key).
std::string tune_dtype(const KernelSource& src);

// --check-passes for one kernel of a plan: the pipeline's passes, bound with the plan's
// config, checked on the interpreter at `sizes` for `seeds` (check/PassCheck.h), scalars from
// the plan's --scalar items (else random from the first seed, as make_args draws them). Prints
// one line on stderr, `check-passes: PASS ...` or `check-passes: FAIL ...`, and returns whether
// it passed. A kernel the interpreter cannot run on any seed is a TesseraError (nothing checked).
bool check_pipeline_passes(const KernelPlan& plan, const Sizes& sizes, const std::vector<uint64_t>& seeds);

// A compact number for output lines: 0, 1.5e-07, 0.000244, 12.3.
std::string fmt_num(double v);

}  // namespace tessera::cli
