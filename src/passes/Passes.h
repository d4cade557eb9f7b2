// Compiler passes over the Tile IR. Each pass is its own file; the pipeline is one straight
// list in Pipeline.cpp.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/IR.h"

namespace tessera {

using ConstexprConfig = std::map<std::string, int64_t>;

// Replace every constexpr by its value: `param` ops become `const`, symbolic tile dims become
// integers, and the kernel's constexpr declarations record the bound values. Values missing
// from `config` keep their defaults. Throws TesseraError for an unknown name or a value outside
// the candidate set.
std::unique_ptr<Kernel> bind_constexprs(const Kernel& k, const ConstexprConfig& config);

// Statistics a pass reports (`--stats`): name -> count.
using PassStats = std::map<std::string, int64_t>;

struct Pass {
  std::string name;  // as used by --dump-after
  std::function<void(Kernel&, PassStats&)> run;
};

struct PipelineOptions {
  ConstexprConfig config;
  std::string dump_after;  // a pass name, "all", or empty
  // Where dumps go (default: stderr). Called with the pass name and the printed IR.
  std::function<void(const std::string& pass, const std::string& ir)> dump;
};

// The passes one by one, in place (tests and tools that run a single pass). Each counts what
// it changed in `stats` ("cse.removed", "dce.removed", "canonicalize.folded", ...).
void bind_constexprs_in_place(Kernel& k, const ConstexprConfig& config);
// Struct pipes pushed from views and popped in the same loop iteration become loads (the Lite
// pipelined loop, with the pipe's stages as `pipeline`): PipesToLoads.cpp.
void pipes_to_loads(Kernel& k, PassStats& stats);
void canonicalize(Kernel& k, PassStats& stats);  // folds scalar arithmetic on constants
void cse(Kernel& k, PassStats& stats);           // merges identical pure ops
void dce(Kernel& k, PassStats& stats);           // removes pure ops whose results are unused
// Moves ops of a `for` body that compute the same value every iteration (and cannot fail or
// write) in front of the loop: LoopInvariantCodeMotion.cpp.
void licm(Kernel& k, PassStats& stats);

// The pipeline's passes in order, as (name, run) pairs.
std::vector<Pass> pipeline_passes(const ConstexprConfig& config);

// The names of the passes in order (for --dump-after validation and docs).
std::vector<std::string> pipeline_pass_names();
// Run the whole pipeline on a copy of `k` and return the result. Verifies before and after.
std::unique_ptr<Kernel> run_pipeline(const Kernel& k, const PipelineOptions& opts, PassStats* stats = nullptr);

}  // namespace tessera
