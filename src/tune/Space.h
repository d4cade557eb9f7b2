// A kernel's tuning space: its knobs (the constexprs it declares with candidates, and the
// backends' codegen knobs, each named with its values and the targets it applies to) and the
// constraints that prune configurations before anything compiles (docs/tuning.md).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/IR.h"
#include "runtime/Tensor.h"

namespace tessera::tune {

// One value per knob, by name (the ConstexprConfig that binding takes).
using Config = std::map<std::string, int64_t>;

// "BLOCK_K=64,BLOCK_M=32" (name order): how a config is printed, stored and read back.
std::string config_str(const Config& c);
// The inverse of config_str; throws TesseraError naming `what` on a malformed item.
Config parse_config_str(const std::string& s, const std::string& what);
// "K=200,M=257,N=129" (name order): how a shape is stored.
std::string sizes_key(const Sizes& s);

enum class KnobKind {
  Tile,     // a constexpr the kernel declares: it shapes the program's tiles
  Codegen,  // read by a backend's emitter only (num_warps, whole_tile_checks, mma_l2_prefetch, ...)
};

struct Knob {
  std::string name;
  KnobKind kind = KnobKind::Tile;
  std::vector<int64_t> values;
  int64_t default_value = 0;
  // Target prefixes it applies to: "cpu", "cuda" (every cuda target) or "cuda:sm_90a"; empty:
  // every target.
  std::vector<std::string> targets;
  std::string doc;
};

// Whether `target` ("cpu", "cuda:sm_90a") is one of the knob's targets.
bool knob_applies(const Knob& k, const std::string& target);

// A declared codegen knob: what the backends read from a kernel constexpr of this name, the
// values that mean something, and which kernels it concerns.
struct KnobDecl {
  Knob knob;
  // Which kernels: "any", "dot-loop" (a pipelined `for` with a dot: the matmuls), "struct"
  // (Struct async copies) or "rows" (no dot: the row kernels).
  std::string kernels = "any";
};
// The codegen knobs the backends read (src/cuda/*: EmitterInternal.h lists them), in one table.
const std::vector<KnobDecl>& codegen_knobs();
// The table's entry named `name`, or null.
const KnobDecl* find_codegen_knob(const std::string& name);

// What a space's constraints are told about a candidate.
struct Candidate {
  const Config& config;
  const Kernel& bound;  // the kernel with the config bound (bind_constexprs)
  const Sizes& sizes;
  const std::string& target;
};

struct Constraint {
  std::string name;
  std::string doc;
  // Why `c` is out (empty: it stays).
  std::function<std::string(const Candidate& c)> rejects;
};

struct Space {
  std::string kernel;
  std::string target;
  std::vector<Knob> knobs;              // those that vary on this target (two values or more)
  Config fixed;                         // constexprs with one value here (not tuned), and the defaults of knobs of other targets
  std::vector<Constraint> constraints;  // in the order they are tried
  std::vector<Knob> elsewhere;          // the kernel's knobs that apply to other targets only
  // The constexprs the kernel's grid reads (matmul's BLOCK_M and BLOCK_N, not BLOCK_K): the
  // tile knobs that count programs (features()). Not known (a space made by hand): every tile
  // knob counts.
  std::optional<std::vector<std::string>> grid_knobs;

  // The number of configurations before pruning (the product of the knobs' value counts).
  int64_t size() const;
  // Every configuration, knobs in declaration order, the last varying fastest.
  std::vector<Config> enumerate() const;
  // The knobs' defaults.
  Config defaults() const;
};

// The constexprs `unbound`'s grid reads (its `param` ops), in order of first use.
std::vector<std::string> grid_knobs(const Kernel& unbound);

// The space of `unbound` (a kernel whose constexprs keep their candidates) on `target`: every
// constexpr with two candidates or more that applies to the target (a constexpr named in
// codegen_knobs() applies to that knob's targets only), then the declared codegen knobs for the
// kind of kernel it is, and the constraints for the target. `defaults` (the library's preferred
// config for the target and shape, library_config) overrides the kernels' own defaults.
Space make_space(const Kernel& unbound, const std::string& target, const Config& defaults = {});

struct Pruned {
  std::vector<Config> configs;                   // what survives, in enumeration order
  std::map<std::string, int64_t> removed_by;     // constraint name -> configs it removed
};
// The most configurations prune() enumerates.
inline constexpr int64_t kMaxEnumerated = 1'000'000;

// Every configuration of `space` that binds, verifies and passes the constraints at `sizes`.
// The tile-level IR depends on the tile knobs only, so each combination of them is bound once.
// A space over kMaxEnumerated is a TesseraError.
Pruned prune(const Space& space, const Kernel& unbound, const Sizes& sizes);

// The constraints, exposed for tests:
// "tile-cover": a BLOCK_X knob (X a symbolic dim of the kernel; BLOCK alone for a kernel of one
// dim) keeps the values below the size of X and the least value that covers it; larger tiles
// only add padding. Except on sm_90a, where the least value of 64 or more that is a dot's row
// count stays too: under 64 rows a dot cannot take wgmma.
Constraint tile_cover_constraint();
// "cpu-tile-bytes": the tiles one program holds at once on the cpu backend (every tile-typed
// result, counted in the compute type) within `limit` bytes (default 4 MiB: beyond L2, and each
// tile past the first MiB lives on the heap; docs/cpu-backend.md).
Constraint cpu_tile_bytes_constraint(int64_t limit = int64_t{4} << 20);
// "cpu-dot-block": a nonzero cpu_dot_mr / cpu_dot_nr divides every dot's M / N and is not the
// block tsr::dot_f32 picks by itself (that config is the one with 0).
Constraint cpu_dot_block_constraint();
// "cuda-smem": a pipelined loop's stages of loaded tiles within the target's shared memory
// (sm_80 163 KiB, sm_89 99 KiB, sm_90/sm_90a 227 KiB).
Constraint cuda_smem_constraint();
// The shared memory a CTA may use on a cuda target ("cuda:sm_90a"), opted in: sm_80 163 KiB,
// sm_89 99 KiB, sm_90 and sm_90a 227 KiB.
int64_t cuda_smem_limit(const std::string& target);
// "cuda-split-k": a config with split_k = n >= 2 (the runtime's split-K, kSplitKKnob) needs a
// dot of a multiple of 64 rows, or a swapped one (the wgmma loop the split compilation splits), at most two
// waves of `sms` multiprocessors (x min_blocks) once split, and differs from split_k = 0 (the
// runtime's own rule, split_k_factor, which would pick n anyway). `sms`: the H100 / H200's 132
// (the device is not known when a space is pruned).
Constraint cuda_split_k_constraint(int64_t sms = 132);
// "cuda-stream-k": stream_k = 1 needs a dot of a multiple of 64 rows, programs that end in a
// partial last wave the kernel shares out (cuda::stream_k_tiles on cuda::stream_k_ctas of
// `sms`: any wave but a full one), and neither cluster_m = 2 (not taken with stream-K) nor a split (the
// split compilation runs instead).
Constraint cuda_stream_k_constraint(int64_t sms = 132);
// "cuda-b-tile-96": a dot of 96 columns only where the wgmma plan takes it (cuda:sm_90a, 16-bit
// operands, a multiple of 64 rows; B as 32-column boxes): elsewhere B's rows of 12 16-byte
// chunks take no cp.async ring and the dot runs unpipelined.
Constraint cuda_narrow_b_constraint();
// "cuda-swap-operands": swap_operands = 1 needs a dot of 8, 16 or 32 rows and 64, 128, 192 or
// 256 columns on 16-bit or fp8 (b transposed) operands with K steps of one or two 128-byte rows (what the
// wgmma plan swaps); elsewhere it is the same program as 0. Not with
// cluster_m = 2, which the swapped plan does not take (the same program as 1). (With the swap,
// such a dot counts as wgmma's for split_k and stream_k too.)
Constraint cuda_swap_constraint();
// The CTAs a launch holds at once for config `c` on `sms` multiprocessors: sms x min_blocks.
int64_t split_capacity(const Config& c, int64_t sms);
// The CTAs per program the cuda runtime launches for config `c` at `programs` programs: its
// split_k (n >= 2), the runtime's rule for split_k = 0 (cuda::split_k_factor at
// split_capacity and `loop_k`, the split loop's reduction length, -1 when not known), 1 without
// the knob or for split_k = 1. Shared by the constraints and the search's features.
int64_t launch_splits(const Config& c, int64_t programs, int64_t sms, int64_t loop_k = -1);

// A copy of `k` with the codegen knobs of `knobs` it does not declare set as constexprs of one
// value (Kernel::set_constexpr), which is how a kernel gets a knob the backends read; knobs it
// declares are left to binding.
std::unique_ptr<Kernel> with_codegen_knobs(const Kernel& k, const Config& knobs);

// `unbound` with `config` bound and the tile-level pipeline run (run_pipeline): codegen knobs
// the kernel does not declare become constexprs of one candidate first. Throws TesseraError
// when the config does not bind or verify.
std::unique_ptr<Kernel> bind_config(const Kernel& unbound, const Config& config);
// Takes out of `config` the declared codegen knobs that `k` does not declare as constexprs (a
// library size rule's swap_operands, say) and returns them, for tune::with_codegen_knobs or
// Kernel::set_constexpr: bind_constexprs takes only the kernel's own constexprs.
Config take_codegen_knobs(const Kernel& k, std::map<std::string, int64_t>& config);

// The symbolic dim a tile knob tiles: BLOCK_X -> X when `sizes` has X; BLOCK (or BLOCK_SIZE)
// -> the only dim of a kernel with one; else "".
std::string tiled_dim(const std::string& knob, const Sizes& sizes);

// Bytes of the tiles a program of `bound` holds (each tile-typed op result in its compute type).
int64_t program_tile_bytes(const Kernel& bound);

}  // namespace tessera::tune
