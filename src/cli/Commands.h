// The subcommands of `tessera`. Each returns the process exit status (0 ok, 1 any error or
// FAIL) and writes results to stdout, diagnostics to stderr. User errors are thrown as
// TesseraError and reported by main().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::cli {

// Options several commands share.
struct KernelOptions {
  std::string what;                  // NAME or FILE.tile
  std::string kernel;                // one kernel of a file (default: all)
  std::string dtype;                 // a library kernel's dtype (default: its first)
  std::vector<std::string> sizes;    // --size NAME=VALUE
  std::vector<std::string> config;   // --config NAME=VALUE
  std::vector<std::string> scalars;  // --scalar NAME=VALUE
  uint64_t seed = 1;
  std::vector<std::string> disable_passes;  // --disable-pass NAME: pipeline passes not to run
};

struct RunOptions {
  KernelOptions k;
  std::string backend = "interp";
  bool check = false;
  bool check_passes = false;  // --check-passes at the run's sizes (docs/checking.md)
  std::vector<std::string> inputs;      // --input NAME=FILE.npy
  std::vector<std::string> references;  // --reference NAME=FILE.npy (implies --check)
  std::string output_dir;               // --output DIR
  int64_t split = 0;  // --split N: the split schedule of the kernel's rolling reduction, N runs
};

struct CompileOptions {
  KernelOptions k;
  std::string target = "cpu";
  std::string emit = "ir";
  std::string dump_after;
  bool stats = false;
  bool check_passes = false;  // --check-passes at small ragged sizes
  bool split_k = false;  // cuda:sm_90a: the split-K compilation the runtime uses for few programs
  bool split = false;    // --split: print split_reduction's partial and merge kernels instead
  bool time = false;     // --time: compile to a cubin and print NVRTC's phase times (stderr)
};

struct BenchOptions {
  KernelOptions k;
  std::string backend = "interp";
  int reps = 0;  // 0: a default that suits the backend
  int warmup = 1;
  bool json = false;
};

struct TuneOptions {
  KernelOptions k;
  std::string backend = "cpu";
  int64_t budget = -1;  // configs to measure; -1: 5% of the pruned space, at least 8
  double time_s = 0;    // 0: no limit
  bool json = false;
  bool space = false;   // --space: print the space and its pruned size, measure nothing
  bool compile_only = false;  // --compile-only (cuda): compile the pruned space, measure nothing
  std::string db;       // the tuning database (default: tune::default_database_path())
  int rounds = 3;
  double timeout_s = 60;
  double rep_ms = 0;    // --rep: each round's timed runs last this long (0: the backend's: cpu 20, cuda 10)
  std::string shapes_file;  // --shapes: one --size value per line, every shape tuned in this process
  bool exhaustive = false;  // --exhaustive: measure the whole pruned space, no search
  int finalists = 8;        // --exhaustive: re-timed in --rounds rounds
  bool missing = false;     // --exhaustive --missing: only configs without a row at the shape in --db
  std::string compare_file;  // --compare: only these configs, side by side in --rounds rounds
  std::string export_file, import_file;  // JSON Lines
};

int cmd_list(bool verbose);
int cmd_ops();
int cmd_check(const std::vector<std::string>& files);
int cmd_run(const RunOptions& o);
int cmd_compile(const CompileOptions& o);
int cmd_bench(const BenchOptions& o);
int cmd_tune(const TuneOptions& o);

}  // namespace tessera::cli
