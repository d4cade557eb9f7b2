// `tessera`: the command-line front end. Each subcommand lives in its own Cmd*.cpp; this
// file only declares the options and turns every error into one message and exit status 1.
#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdint>
#include <iostream>
#include <new>

#include "cli/Commands.h"
#include "cuda/CudaBackend.h"
#include "support/Diagnostic.h"

using namespace tessera::cli;

namespace {

// run's and bench's --backend: interp, cpu, cuda, or cuda with the architecture to compile for
// (cuda:sm_90 on a Hopper: the portable path); a target CudaTarget::parse refuses is an error
// here, before any kernel is read.
std::string check_backend(const std::string& b) {
  if (b == "interp" || b == "cpu" || b == "cuda") return "";
  if (b.rfind("cuda:sm_", 0) == 0) {
    try {
      const tessera::CudaTarget t = tessera::CudaTarget::parse(b);
      if (t.arch_specific && t.sm < 90)
        return "'" + b + "': only sm_90 and later have an arch-specific variant (sm_90a), not sm_" + std::to_string(t.sm);
      return "";
    } catch (const tessera::TesseraError& e) {
      const std::string why = e.what();
      return why.rfind("error: ", 0) == 0 ? why.substr(7) : why;
    }
  }
  return "expected interp, cpu, cuda or cuda:sm_XY[a] (e.g. cuda:sm_90), not '" + b + "'";
}

// Options shared by run, compile and bench.
void add_kernel_options(CLI::App* cmd, KernelOptions& k, bool sizes, bool kernel_required = true) {
  // Named apart from --kernel: CLI11 2.4 (Ubuntu 24.04) refuses a positional and an option of
  // the same name, and the binary aborted at startup there.
  auto* what = cmd->add_option("KERNEL", k.what, "a library kernel (see `tessera list`) or a .tile file");
  if (kernel_required) what->required();
  cmd->add_option("--kernel", k.kernel, "only this kernel of a .tile file");
  cmd->add_option("--dtype", k.dtype, "element type of a library kernel (default: its first)")
      ->check(CLI::IsMember({"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f8e4m3",
                             "f8e5m2", "f16", "bf16", "f32", "f64"}));
  cmd->add_option("--config", k.config, "constexpr value, NAME=VALUE (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--disable-pass", k.disable_passes,
                  "leave this pass out of the pipeline, e.g. repair-reductions for a before/after figure "
                  "(repeatable; compile, run and bench; not verify, bind-constexprs or verify-bound; a GPU lowering pass "
                  "leaves that decision out of what the layout emitter (the default) prints, but not "
                  "assign-launch-shape, assign-layouts or verify-lowered)")
      ->allow_extra_args(false);
  if (!sizes) return;
  cmd->add_option("--size", k.sizes,
                  "size of a symbolic dim, NAME=VALUE or M=1,N=2 (repeatable; library kernels "
                  "have defaults, a .tile file needs every dim)")
      ->allow_extra_args(false);
  cmd->add_option("--scalar", k.scalars,
                  "value of a scalar parameter, NAME=VALUE (default: the library kernel's own "
                  "value, else random)")
      ->allow_extra_args(false);
  // CLI11 would wrap -1 and saturate 1e30-sized integers without a word.
  cmd->add_option_function<std::string>(
      "--seed",
      [&k](const std::string& s) {
        uint64_t v = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || p != s.data() + s.size())
          throw CLI::ValidationError("--seed", "expected an integer in [0, 18446744073709551615], got '" + s + "'");
        k.seed = v;
      },
      "seed of the random inputs (default: 1)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tessera: a tile-level compiler for AI kernels.\n"
               "Results go to stdout; errors, IR dumps and statistics to stderr."};
  app.require_subcommand(1);

  bool verbose = false;
  auto* list = app.add_subcommand("list", "the kernels of the built-in library, one per line");
  list->add_flag("-v,--verbose", verbose, "also dtypes, default sizes and a summary");

  auto* ops = app.add_subcommand("ops", "the op table: operands, results, attributes, doc");

  std::vector<std::string> files;
  auto* check = app.add_subcommand("check", "parse and verify .tile files: `ok` or every error");
  check->add_option("file", files, "a .tile file")->required();

  RunOptions run;
  auto* run_cmd = app.add_subcommand(
      "run", "run a kernel on random inputs (or --input files); with --check compare with the reference and "
             "print PASS/FAIL <kernel> <backend> <sizes> max_abs_err=.. max_rel_err=.. [dtype=..] [reference=..]; "
             "reference=self: a .tile file on interp, which has no independent reference, so the line only "
             "shows that it ran");
  add_kernel_options(run_cmd, run.k, true);
  run_cmd->add_option("--backend,-b", run.backend,
                      "interp, cpu or cuda; cuda:sm_XY[a] compiles for that architecture (cuda:sm_90 on a "
                      "Hopper runs the portable mma.sync path; default cuda: the device's own)")
      ->check(check_backend)
      ->capture_default_str();
  run_cmd->add_flag("--check", run.check, "compare every view tensor with the reference");
  run_cmd->add_option("--input", run.inputs,
                      "NAME=FILE.npy: view NAME's data from a NumPy file of its dtype and shape (repeatable; "
                      "the other views random; bf16 and f8 as raw bits, '<u2' and '|u1')")
      ->allow_extra_args(false);
  run_cmd->add_option("--output", run.output_dir, "write every view as DIR/NAME.npy after the run (creates DIR)")
      ->check([](const std::string& d) { return d.empty() ? std::string("needs a directory, not ''") : std::string(); });
  run_cmd->add_option("--reference", run.references,
                      "NAME=FILE.npy: check view NAME against this data, under --check's tolerances "
                      "(repeatable; implies --check; the line then says reference=npy:NAMES)")
      ->allow_extra_args(false);
  run_cmd->add_option("--split", run.split,
                      "N: run the split schedule (FlashDecoding) of the kernel's rolling reduction: a partial "
                      "kernel over N runs of the loop per program, then the merge kernel (docs/passes.md); "
                      "--check compares with the interpreter on the kernel as written");
  run_cmd->add_flag("--check-passes", run.check_passes,
                    "also run the kernel on the interpreter before and after each pass (at these sizes, "
                    "seeds --seed, +1, +2) and name the first pass that changes its output (stderr)");

  CompileOptions comp;
  auto* compile_cmd = app.add_subcommand(
      "compile", "run the pass pipeline and print the result (stdout); dumps and --stats go to stderr");
  add_kernel_options(compile_cmd, comp.k, false);
  compile_cmd->add_option("--size", comp.k.sizes,
                          "a library op's sizes, NAME=VALUE or M=1,N=2: compile the kernels it runs there (an op of "
                          "several kernels, e.g. topk's segmented form on cuda, prints each in launch order)")
      ->allow_extra_args(false);
  compile_cmd->add_option("--target,-t", comp.target,
                          "cpu, cuda:sm_80, cuda:sm_89 (Ada: fp8 mma.sync), cuda:sm_90 (Hopper without wgmma: the "
                          "mma.sync path) or cuda:sm_90a")
      ->check(CLI::IsMember({"cpu", "cuda:sm_80", "cuda:sm_89", "cuda:sm_90", "cuda:sm_90a"}))
      ->capture_default_str();
  compile_cmd->add_option("--emit,-e", comp.emit, "ir (after the pipeline), cpp (cpu), cuda or ptx")
      ->check(CLI::IsMember({"ir", "cpp", "cuda", "ptx"}))
      ->capture_default_str();
  compile_cmd->add_option("--dump-after", comp.dump_after,
                          "print the IR after this pass, or after every pass with `all` (stderr)");
  compile_cmd->add_flag("--stats", comp.stats, "print the passes' statistics (stderr)");
  compile_cmd->add_flag("--split", comp.split,
                        "the split schedule (FlashDecoding) of the kernel's rolling reduction: its partial and "
                        "merge kernels, emitted one after the other (docs/passes.md)");
  compile_cmd->add_flag("--check-passes", comp.check_passes,
                        "run the kernel on the interpreter before and after each pass (small ragged sizes, "
                        "seeds 1, 2, 3) and name the first pass that changes its output (stderr)");
  compile_cmd->add_flag("--time", comp.time,
                        "cuda: also compile each kernel to a cubin with NVRTC, as the runtime does (no GPU needed), "
                        "and print the time of NVRTC's phases, the PTX size, registers and stack (stderr)");
  compile_cmd->add_flag("--split-k", comp.split_k,
                        "cuda:sm_90a: emit the split-K compilation, which the runtime launches when a wgmma "
                        "matmul has too few programs to fill the GPU");

  BenchOptions bench;
  auto* bench_cmd = app.add_subcommand(
      "bench", "median time over --reps runs after a warm-up, and GB/s or FLOP/s");
  add_kernel_options(bench_cmd, bench.k, true);
  bench_cmd->add_option("--backend,-b", bench.backend,
                      "interp, cpu or cuda; cuda:sm_XY[a] compiles for that architecture (cuda:sm_90 on a "
                      "Hopper runs the portable mma.sync path; default cuda: the device's own)")
      ->check(check_backend)
      ->capture_default_str();
  bench_cmd->add_option("--reps", bench.reps, "timed runs (default: 3 on interp, 20 otherwise)")
      ->check(CLI::Range(1, 1000000));
  bench_cmd->add_option("--warmup", bench.warmup, "untimed runs first")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  bench_cmd->add_flag("--json", bench.json, "one JSON object per kernel");

  TuneOptions tune;
  auto* tune_cmd = app.add_subcommand(
      "tune", "search a kernel's tuning space at one shape on a backend, store every measurement in the tuning "
              "database (which `run` and `bench` then consult), and print the best config against the default");
  add_kernel_options(tune_cmd, tune.k, true, false);
  tune_cmd->add_option("--backend,-b", tune.backend, "the backend to measure on (cpu or cuda)")
      ->check(CLI::IsMember({"interp", "cpu", "cuda"}))
      ->capture_default_str();
  auto* budget_opt = tune_cmd->add_option("--budget", tune.budget,
                       "configs to measure, the default's included (default: 5% of the pruned space, at least 8)");
  auto* time_opt = tune_cmd->add_option("--time", tune.time_s, "seconds: start no new batch of measurements after this long");
  tune_cmd->add_flag("--json", tune.json, "one JSON object: the best config, the default, the search's figures");
  auto* space_opt =
      tune_cmd->add_flag("--space", tune.space, "print the knobs, constraints and the pruned size; measure nothing");
  auto* compile_only_opt = tune_cmd->add_flag("--compile-only", tune.compile_only,
                     "cuda: compile every config of the pruned space in parallel (into the compile cache) and "
                     "report what ptxas's registers and shared memory prune; needs no GPU, measures nothing");
  tune_cmd->add_option("--db", tune.db,
                       "the tuning database (default: $TESSERA_TUNE_DB, else tuning.db in Tessera's cache directory)");
  tune_cmd->add_option("--rounds", tune.rounds, "timing rounds over the candidates (noise estimate)")
      ->capture_default_str();
  tune_cmd->add_option("--timeout", tune.timeout_s, "seconds per candidate for its compile, and for each round")
      ->capture_default_str();
  tune_cmd->add_option("--rep", tune.rep_ms,
                       "milliseconds of timed runs per candidate and round, after a quarter of it of warm-up "
                       "(do_bench's rep; default: cpu 20, cuda 10)");
  tune_cmd->add_option("--shapes", tune.shapes_file,
                       "FILE: one --size value per line (# comments), each shape tuned in turn in this process (one "
                       "CUDA context, each config loaded once); with --json a line per shape");
  auto* exh_opt = tune_cmd->add_flag("--exhaustive", tune.exhaustive,
                                     "measure every config of the pruned space once (no search), then the --finalists "
                                     "fastest in --rounds rounds; every row stored");
  tune_cmd->add_option("--finalists", tune.finalists, "with --exhaustive: how many of the fastest are timed again")
      ->capture_default_str();
  tune_cmd->add_flag("--missing", tune.missing,
                     "with --exhaustive: measure only the configs that have no row at the shape in --db (an "
                     "earlier sweep, or rows --import added, completed after the space grew); the default is "
                     "measured again, and the finalists come from the earlier rows and the new ones")
      ->needs(exh_opt);
  exh_opt->excludes(budget_opt);
  exh_opt->excludes(time_opt);
  auto* cmp_opt = tune_cmd->add_option("--compare", tune.compare_file,
                                       "FILE: configs of the pruned space, one NAME=VALUE,... per line (# comments; "
                                       "knobs not named keep the default's values), measured side by side in --rounds "
                                       "rounds in alternating order, nothing else; rows stored confirmed (a figure that "
                                       "compares two configs from one call, not from rows of different calls)");
  cmp_opt->excludes(exh_opt);
  cmp_opt->excludes(budget_opt);
  cmp_opt->excludes(time_opt);
  cmp_opt->excludes(space_opt);
  cmp_opt->excludes(compile_only_opt);
  tune_cmd->add_option("--export", tune.export_file, "write the database as JSON Lines to FILE (- for stdout)");
  tune_cmd->add_option("--import", tune.import_file, "add the JSON Lines rows of FILE to the database");
  budget_opt->excludes(time_opt);

  // CLI11 would call a misspelt command a missing one.
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands({})) known |= argc > 1 && sub->get_name() == argv[1];
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::cerr << "error: unknown command '" << argv[1]
              << "' (commands: list, ops, check, run, compile, bench, tune)\n";
    return 1;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, like every other error; the hint names the command's own help.
    std::string help = known ? std::string("tessera ") + argv[1] + " --help" : "tessera --help";
    std::cerr << "error: " << e.what() << " (see `" << help << "`)\n";
    return 1;
  }

  try {
    if (*list) return cmd_list(verbose);
    if (*ops) return cmd_ops();
    if (*check) return cmd_check(files);
    // Checked on the parsed value (CLI11 reads 0x0, +0 and 010 too): 0, the default, means no
    // split, so a given 0 would be taken in silence for it.
    if (*run_cmd && run_cmd->count("--split") && run.split < 1)
      throw tessera::TesseraError("--split needs N >= 1 runs per program, not " + std::to_string(run.split));
    if (*run_cmd) return cmd_run(run);
    if (*compile_cmd) return cmd_compile(comp);
    if (*bench_cmd) return cmd_bench(bench);
    if (*tune_cmd) return cmd_tune(tune);
  } catch (const tessera::TesseraError& e) {
    std::cerr << e.what() << "\n";
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of memory\n";
  } catch (const std::exception& e) {
    std::cerr << "error: internal error (please report): " << e.what() << "\n";
  }
  return 1;
}
