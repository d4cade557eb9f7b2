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
  // A check on sampled rows (a large problem, whose whole reference would take minutes): when
  // `rows` is not empty, `want` and `bounds` hold only those rows (in this order) of every view
  // whose first dim is the symbol `row_dim` (is_row_view), and nothing (no_rows(), no bounds)
  // for the others, which are the kernel's inputs (LibraryKernel::row_dim).
  std::string row_dim;
  std::vector<int64_t> rows;
  // Arguments over `tensors` for a bound kernel (the scalars as `tessera run` gives them).
  std::function<std::vector<KernelArg>(const Kernel& bound, std::vector<Tensor>& tensors)> make_args;
};

struct Measurement {
  Config config;
  // "ok", "bind-error", "compile-error", "resources" (cuda: ptxas's registers or shared memory
  // exceed the target's), "run-error", "check-failed", "timeout"
  std::string status = "ok";
  // The least of the rounds' medians: on a shared machine load only ever slows a round down,
  // so the fastest round is the best estimate of the candidate's own speed (as Python's timeit
  // advises), and rounds interleave the candidates so that each sees the machine's calm spells.
  double ms = 0;
  double noise = 0;  // (max - min) / min of the rounds' medians
  std::vector<double> round_ms;
  double compile_s = 0;
  int registers = -1;      // cuda: per thread, from the cubin (-1: not known)
  int64_t smem_bytes = -1; // cuda: static + dynamic shared memory per CTA (-1: not known)
  std::string message;     // why it failed: one line
  std::string bound_hash;  // kernel_ir_hash of the bound kernel
  bool ok() const { return status == "ok"; }
};

// Where a measurer's time went (seconds, summed over its measure() calls): what `tune --json`
// reports as "phases", so that a slow tune says why.
struct MeasureStats {
  double compile_s = 0;  // binding and compiling (parallel children; cache hits included)
  double load_s = 0;     // in this process: the compiled kernels fetched and loaded
  double check_s = 0;    // first runs on fresh outputs, their download and the comparison
  double time_s = 0;     // the timed runs
  int64_t forks = 0;     // compile children started (none for a config compiled before)
  int64_t checked = 0, timed = 0;
};

struct MeasureOptions {
  int rounds = 3;          // each round times every candidate still standing once
  // A candidate's runs in one round last at least this long (cuda: do_bench's `rep`, after a
  // quarter of it of warm-up) ...
  double round_ms = 20;
  int min_reps = 3;        // ... and are at least this many
  int max_reps = 1000;
  double timeout_s = 60;   // per candidate, per child process (compile, or one round)
  int jobs = 0;            // parallel compiles; 0: the cores of this machine
  // cuda: called with a candidate that ends the process, just before it does: one whose GPU
  // work outlived timeout_s ("timeout", from the watchdog's thread: a hung kernel cannot be
  // stopped, and the context dies with it), or whose run error lost the CUDA context
  // ("run-error": every later launch would fail). The tuner stores it, so that the next tune
  // of the shape leaves it out.
  std::function<void(const Measurement&)> on_hang;
};

class Measurer {
 public:
  virtual ~Measurer() = default;
  // One Measurement per config, in order.
  virtual std::vector<Measurement> measure(const std::vector<Config>& configs) = 0;
  virtual std::string device() const = 0;    // TuneKey::device
  virtual std::string compiler() const = 0;  // TuneKey::compiler
  virtual MeasureStats stats() const { return {}; }
};

std::unique_ptr<Measurer> make_cpu_measurer(const Problem& p, const MeasureOptions& o);

// The cuda backend's (CudaMeasure.cpp): compiles every candidate with NVRTC in parallel child
// processes (into the disk cache; as many at once as cores), prunes on what ptxas gave it (the
// cubin's registers x threads within 64K, static + dynamic shared memory within the target's),
// then times each candidate in this process as Triton's do_bench does (L2 flushed before each
// launch, events around the launch alone, median), checking its first run against the
// reference. `target` as "cuda:sm_90a". Throws TesseraError, one line saying why, when NVRTC
// or a CUDA device is missing (measuring needs the device; cuda_compile_candidates does not).
std::unique_ptr<Measurer> make_cuda_measurer(const Problem& p, const MeasureOptions& o);
// The compile side alone (no device needed): one Measurement per config, "ok" for those that
// compiled within the limits (with compile_s, registers, smem_bytes), else why not. `sms`: the
// device's multiprocessors (0: unknown, taken as 132), to know when the split-K compilation
// (launched when the programs are few) is needed too.
std::vector<Measurement> cuda_compile_candidates(const Problem& p, const MeasureOptions& o,
                                                 const std::vector<Config>& configs, int sms = 0);
// Why a compiled candidate cannot launch on `target` ("" when it can): its registers per thread
// times its threads over a multiprocessor's 65536, or its static + dynamic shared memory over
// cuda_smem_limit (status "resources").
std::string cuda_resources_reject(int registers, int threads, int64_t smem_bytes, const std::string& target);
// Why cuda cannot measure here ("" when it can): NVRTC or the device missing.
std::string cuda_cannot_measure();
// The GPU's name (TuneKey::device) and the cuda codegen and NVRTC versions (TuneKey::compiler).
std::string cuda_device_name();
std::string cuda_compiler_version();

// The rows a sampled check keeps (Problem::rows) of a dim of `n` rows: the first, the last, and
// `extra` more drawn by `seed`, in increasing order, distinct.
std::vector<int64_t> sample_rows(int64_t n, int extra, uint64_t seed);
// A tensor of no elements (shape [0]): what a sampled check compares for a view it leaves out.
Tensor no_rows();
// `t` with only `rows` of its first dim (a view of `Problem::row_dim` rows).
Tensor take_rows(const Tensor& t, const std::vector<int64_t>& rows);
// Whether view i of `bound` has the problem's row dim first (a view the sampled check compares).
bool is_row_view(const Problem& p, const Kernel& bound, size_t i);
// Whether view i of `k` is one the kernel writes: the view of a store_tile, scatter, atomic or
// atomic_cas, or a view operand of a raw op (which may write anything). The tuner compares (and
// the cuda harness restores and downloads) only these: the others are inputs that no op of the
// kernel writes, and comparing an LLM GEMM's B with itself on every candidate took a second.
bool is_written_view(const Kernel& k, size_t i);
// The comparison of a candidate's outputs (the view tensors after its run) with the problem's
// reference, as `run --check` does, on the views the kernel writes (is_written_view; the
// problem's `want` holds no_rows() for the others), on the sampled rows when the problem has
// some.
std::string check_against_reference(const Problem& p, const Kernel& bound, const std::vector<Tensor>& got);
// The same on a sampled check for outputs already cut to the problem's rows: got[i] holds the
// sampled rows of each compared view (a written view with the row dim), in the order of
// Problem::rows; the others are not read.
std::string check_rows_against_reference(const Problem& p, const Kernel& bound, const std::vector<Tensor>& got);

// The tuner's random inputs: as make_random_tensors (floats uniform in [-1, 1), integers small,
// never all zeros), but drawn in chunks of 2^20 elements, each from its own splitmix64 stream seeded
// by (seed, view, chunk), on every core: the same tensors for a seed on any machine, and an LLM
// GEMM's 250 million elements in a fraction of a second instead of seconds. (Not the values
// `tessera run --seed` gives.)
std::vector<Tensor> random_inputs(const Kernel& k, const Sizes& sizes, uint64_t seed);
// Runs fn(i) for i in [0, n) on up to `threads` threads (0: the cores); the first exception is
// rethrown after all have finished.
void parallel_for(int64_t n, int threads, const std::function<void(int64_t)>& fn);

// Ends the process when armed longer than its timeout: the cuda harness arms it around a
// candidate's GPU work, which cannot be stopped from the host when it hangs. One thread for the
// watchdog's life; arm/disarm are cheap. On expiry it calls `expired` (which by default
// reports and ends the process; tests pass one that does not).
class Watchdog {
 public:
  explicit Watchdog(std::function<void(const std::string& what)> expired = {});
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  void arm(double timeout_s, std::string what);
  void disarm();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// 32 hex digits over the printed IR (the compile cache's content_hash).
std::string kernel_ir_hash(const Kernel& k);
// The database's kernel key (TuneKey::kernel_hash): kernel_ir_hash of the unbound kernel with
// its constexprs' defaults and candidate lists left out. What a configuration computes depends
// on the program and the configuration (which every row records whole), not on which other
// values the space offers, so a space grown by a candidate (or given a new default) keeps
// every row measured before: the sweep of a grown space measures only the new configs. (A key
// over the config list is what Triton's autotune cache is faulted for.)
std::string kernel_identity_hash(const Kernel& unbound);
// "AMD EPYC 9B14 x2": /proc/cpuinfo's model name and the threads kernels run on (the cores,
// or $OMP_NUM_THREADS): a config tuned on one thread is not the one for two.
std::string cpu_device_name();
// The threads the cpu backend's kernels run on: OpenMP's default, which $OMP_NUM_THREADS sets
// (its first number), else the cores.
int cpu_threads();
// The cpu codegen version and the first line of the C++ compiler's --version.
std::string cpu_compiler_version();

// The compile side of both harnesses: binds each config (`out` gets one Measurement per config,
// "bind-error" where it does not bind), then runs `compile` on the bound kernels in child
// processes, o.jobs at once (0: the cores), each killed after o.timeout_s ("timeout"; an
// exception or a crash is "compile-error"), and times it (compile_s). `compile` runs in the
// child and answers a line that comes back in `answers` (empty for a failure). `known`, when
// given, runs here first: a non-empty answer from it (a config compiled before) is taken as is,
// with no child (compile_s 0).
struct Compiled {
  std::vector<std::unique_ptr<Kernel>> bound;  // null where binding failed
  std::vector<std::string> answers;
  int64_t forks = 0;  // children started
};
Compiled bind_and_compile(const Problem& p, const MeasureOptions& o, const std::vector<Config>& configs,
                          std::vector<Measurement>& out, const std::function<std::string(const Kernel&)>& compile,
                          const std::function<std::string(const Kernel&)>& known = {});

// The timing side of both: `rounds` rounds, each calling `one` for every candidate still "ok"
// (first: the first round, which checks), in the order of `out`, reversed every other round so
// that a drift of the machine's speed favours no one; `one` adds to m.round_ms or fails m.
// Then each passing candidate's ms is the least of its rounds and its noise (max - min) / min.
void measure_rounds(std::vector<Measurement>& out, int rounds,
                    const std::function<void(size_t i, bool first, Measurement& m)>& one);

// Helpers of the measurers: `s` on one line of at most `max` characters; write all of `s` to a
// file descriptor; the median (0 of none).
std::string one_line(std::string s, size_t max = 400);
void write_all(int fd, const std::string& s);
double median_of(std::vector<double> v);

// Runs fn(i) for i in [0, n) in child processes, at most `jobs` at once, each killed after
// `timeout_s`; returns each child's output (what fn returned), "timeout", or "crash: ..." when it
// died without an answer. fn runs in the child (a fork of this process).
std::vector<std::string> run_in_children(int n, int jobs, double timeout_s, const std::function<std::string(int)>& fn);

}  // namespace tessera::tune
