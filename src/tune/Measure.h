// Measuring configurations of one kernel at one shape (docs/tuning.md). A Measurer is the one
// interface the search sees; the cpu backend's compiles candidates in parallel child
// processes, then times them one at a time in rounds, each candidate in a child process of its
// own with a timeout, so that a hung, crashing or failing candidate is recorded and skipped.
// A candidate is kept only when its first run passes --check's comparison with the reference.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/IR.h"
#include "kernels/Tolerance.h"
#include "runtime/Tensor.h"
#include "tune/Space.h"

namespace tessera::tune {

// What is measured: a kernel at a shape, its inputs and its reference outputs.
struct Problem {
  const Kernel* kernel = nullptr;  // unbound (constexprs keep their candidates)
  std::string target = "cpu";
  Sizes sizes;
  std::vector<Tensor> inputs;  // one per view parameter, as the kernel gets them
  std::vector<Tensor> want;    // the reference's view tensors after the run
  ErrorBounds bounds;          // added to the dtypes' tolerances (docs/checking.md)
  // Arguments over `tensors` for a bound kernel (the scalars as `tessera run` gives them).
  std::function<std::vector<KernelArg>(const Kernel& bound, std::vector<Tensor>& tensors)> make_args;
};

struct Measurement {
  Config config;
  // "ok", "bind-error", "compile-error", "run-error", "check-failed", "timeout"
  std::string status = "ok";
  // The least of the rounds' medians: on a shared machine load only ever slows a round down,
  // so the fastest round is the best estimate of the candidate's own speed (as Python's timeit
  // advises), and rounds interleave the candidates so that each sees the machine's calm spells.
  double ms = 0;
  double noise = 0;  // (max - min) / min of the rounds' medians
  std::vector<double> round_ms;
  double compile_s = 0;
  std::string message;     // why it failed: one line
  std::string bound_hash;  // kernel_ir_hash of the bound kernel
  bool ok() const { return status == "ok"; }
};

struct MeasureOptions {
  int rounds = 3;          // each round times every candidate still standing once
  double round_ms = 20;    // a candidate's runs in one round last at least this long ...
  int min_reps = 3;        // ... and are at least this many
  int max_reps = 1000;
  double timeout_s = 60;   // per candidate, per child process (compile, or one round)
  int jobs = 0;            // parallel compiles; 0: the cores of this machine
};

class Measurer {
 public:
  virtual ~Measurer() = default;
  // One Measurement per config, in order.
  virtual std::vector<Measurement> measure(const std::vector<Config>& configs) = 0;
  virtual std::string device() const = 0;    // TuneKey::device
  virtual std::string compiler() const = 0;  // TuneKey::compiler
};

std::unique_ptr<Measurer> make_cpu_measurer(const Problem& p, const MeasureOptions& o);

// 32 hex digits over the printed IR (the compile cache's content_hash).
std::string kernel_ir_hash(const Kernel& k);
// "AMD EPYC 9B14 x2": /proc/cpuinfo's model name and the threads kernels run on (the cores,
// or $OMP_NUM_THREADS): a config tuned on one thread is not the one for two.
std::string cpu_device_name();
// The threads the cpu backend's kernels run on: OpenMP's default, which $OMP_NUM_THREADS sets
// (its first number), else the cores.
int cpu_threads();
// The cpu codegen version and the first line of the C++ compiler's --version.
std::string cpu_compiler_version();

// Runs fn(i) for i in [0, n) in child processes, at most `jobs` at once, each killed after
// `timeout_s`; returns each child's output (what fn returned), "timeout", or "crash: ..." when it
// died without an answer. fn runs in the child (a fork of this process).
std::vector<std::string> run_in_children(int n, int jobs, double timeout_s, const std::function<std::string(int)>& fn);

}  // namespace tessera::tune
