// Compiler passes over the Tile IR. Each pass is its own file; the pipeline is one straight
// list in Pipeline.cpp.
#pragma once
#include <set>

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

// Statistics a pass reports (`--stats`): name -> count, and notes (one line each) saying why
// a pass left something as written (`tessera compile --stats` prints them).
struct PassStats : std::map<std::string, int64_t> {
  std::vector<std::string> notes;
};

struct Pass {
  std::string name;  // as used by --dump-after
  std::function<void(Kernel&, PassStats&)> run;
};

struct PipelineOptions {
  ConstexprConfig config;
  std::string dump_after;  // a pass name, "all", or empty
  // Where dumps go (default: stderr). Called with the pass name and the printed IR.
  std::function<void(const std::string& pass, const std::string& ir)> dump;
  // Passes not to run (`--disable-pass NAME`, for before/after figures); only the optional
  // ones (disableable_pass; a GPU lowering pass's name is accepted by run_pipeline and left
  // out by run_gpu_lowering, disableable_gpu_lowering_pass).
  std::vector<std::string> disabled;
};

// Whether a pass may be left out of the pipeline: not verify, bind-constexprs or verify-bound,
// which every backend relies on.
bool disableable_pass(const std::string& name);
// Whether a GPU lowering pass may be left out (`--disable-pass` reaches the lowering the layout
// emitter prints, through CudaTarget::disabled_passes): not assign-launch-shape,
// assign-layouts or verify-lowered.
bool disableable_gpu_lowering_pass(const std::string& name);
// The GPU lowering passes among `names` (a --disable-pass list), sorted and without repeats:
// what CudaTarget::disabled_passes takes (the target-independent ones are left out of the
// bound kernel already, and would only change the cuda emission's key).
std::vector<std::string> gpu_lowering_passes_in(const std::vector<std::string>& names);

// The passes one by one, in place (tests and tools that run a single pass). Each counts what
// it changed in `stats` ("cse.removed", "dce.removed", "canonicalize.folded", ...).
void bind_constexprs_in_place(Kernel& k, const ConstexprConfig& config);
// Struct pipes pushed from views and popped in the same loop iteration become loads (the Lite
// pipelined loop, with the pipe's stages as `pipeline`): PipesToLoads.cpp.
void pipes_to_loads(Kernel& k, PassStats& stats);
void canonicalize(Kernel& k, PassStats& stats);  // folds scalar arithmetic on constants
// 1 + tanh(y) -> 2 sigmoid(2y), 1 - tanh(y) -> 2 sigmoid(-2y): no cancellation near tanh = -1
// (TanhSumsToSigmoid.cpp)
void tanh_sums_to_sigmoid(Kernel& k, PassStats& stats);
void cse(Kernel& k, PassStats& stats);           // merges identical pure ops
void dce(Kernel& k, PassStats& stats);           // removes pure ops whose results are unused
// Moves ops of a `for` body that compute the same value every iteration (and cannot fail or
// write) in front of the loop: LoopInvariantCodeMotion.cpp.
void licm(Kernel& k, PassStats& stats);
// Cuts a whole row of scores (a tile axis that a row max reduces, made by a dot) into chunks:
// each reduction over it becomes a loop over the chunks, for repair-reductions to fuse
// (ChunkReductions.cpp, docs/passes.md).
void chunk_reductions(Kernel& k, PassStats& stats);
// Fuses a running-max loop and the loops that need its final value (sum of exp(x - max),
// exp-weighted dots, division by the sum) into one loop with the FlashAttention repair:
// RepairReductions.cpp, docs/passes.md.
void repair_reductions(Kernel& k, PassStats& stats);
// An f32 exp whose result reaches memory only rounded to a narrow float, through ops that keep
// relative errors relative, gets max_rel_error = kRelaxedExpError: RelaxExpPrecision.cpp.
void relax_exp_precision(Kernel& k, PassStats& stats);
// The split schedule (FlashDecoding) of a rolling reduction: a loop of the kernel body carrying
// a running max and sums rescaled by exp(m_old - m_new) (what repair_reductions writes) becomes
// two kernels with the parameters of `k` followed by one partial view per carried value,
// `split_<name>: view<T, [SPLIT_P, SPLIT_N, dims of the value]>`:
//  - `<k>_partial`, its grid `k`'s plus an axis of SPLIT_N programs: program (p, s) runs the
//    s-th of SPLIT_N runs of the loop's iterations from -inf and 0 and stores its (m, sums) at
//    [p, s] (p: the program's row-major number in `k`'s grid, < SPLIT_P);
//  - `<k>_merge`, `k`'s grid: merges the runs' partials (M = max m_s, S = sum S_s exp(m_s - M))
//    and runs what followed the loop, so it writes what `k` writes.
// Running the first, then the second, on the same tensors computes what `k` does (up to
// rounding). Refused (both null, `why` and a note say why): no such loop, a grid of 3 axes, a
// write before the loop, unbound shapes. docs/passes.md states the rule.
struct SplitKernels {
  std::unique_ptr<Kernel> partial, merge;
  std::string why;
};
SplitKernels split_reduction(const Kernel& bound, PassStats& stats);

// --- GPU lowering (a second list, after the pipeline, for cuda targets) ---
// A loop's one dot if it is a wgmma dot (mma v3 accumulator) whose accumulator the loop only
// carries (its block argument feeds only the dot, the dot's result only the yield, at the same
// position) and whose operands are ring stages or made before the loop, so that its group may
// stay in flight into the next iteration; else null.
// pipeline-loops marks it `in_flight = 1`; the layout emitter prints what that allows.
Op* in_flight_dot(Op& loop);
// A cp.async ring loop's one mma.sync dot (mma v2 accumulator) that can load the next
// iteration's first k step's fragments before its own last step: the body is the ring's index
// arithmetic (`chain`, ring_loads'), its loads (`loads`), the dot of two of those stages or
// permutes of them (16-bit or f8 elements, an even number of k steps) and the yield, so that nothing else reads a
// stage or needs the barrier where the iteration begins; else null. pipeline-loops marks it
// `fragments_ahead = 1`; the layout emitter prints what that allows.
const Op* fragments_ahead_dot(const Op& loop, const std::vector<const Op*>& loads, const std::vector<const Op*>& chain);

// TESSERA_FMA_DOT_IN_REGISTERS=1 in the environment (read once): the A/B switch of
// tools/h200-fmadot-check, the default of GpuLoweringOptions::fma_operands_in_shared below.
bool fma_dot_in_registers_env();
struct GpuLoweringOptions {
  int sm = 90;         // compute capability, major * 10 + minor
  bool wgmma = false;  // sm_90a: wgmma accumulators, operands in shared memory
  // An FMA dot's operands in shared memory, read per k (assign-layouts);
  // false keeps them in registers for all of K (the dot_operand layouts: the former lowering).
  bool fma_operands_in_shared = !fma_dot_in_registers_env();
  // The split-K compilation (CudaTarget::split_k): split-k-loops slices the K loop over grid axis 2.
  bool split_k = false;
  // The stream-K compilation (CudaTarget::stream_k): stream-k-programs shares the last partial
  // wave out, as the knob stream_k = 1 asks.
  bool stream_k = false;
  // Clusters for the knob cluster_size (cluster-programs); false: the layout emitter's second
  // lowering of a kernel it could not print on clusters.
  bool clusters = true;
};
// The most warps of a program (1024 threads, a CTA's limit).
inline constexpr int kMaxWarps = 32;
// The warps of a program, for both cuda emitters: the kernel's `num_warps` constexpr (1 to
// kMaxWarps; 0 is the backend's choice, the emitters reject others), else 8 for a dot of 128 x 128 or a kernel with a dot
// and a tile of 8192 elements, 4 for other kernels with dots, and for kernels without dots
// about 32 elements of the largest tile per thread (split over `cluster` CTAs), 4 to 32 warps
// (16 where three such tiles are loaded in one block).
int default_num_warps(const Kernel& k, int cluster = 1);
// Float operands of 16 bits or fewer (f16, bf16, f8): what mma.sync and wgmma dots take.
inline bool tensor_core_float(ScalarKind t) { return scalar_bits(t) <= 16 && is_float(t); }
// The warps of a program in the GPU lowering's passes and the layout emitter: the `num_warps`
// that assign-launch-shape wrote on the grid's yield, else default_num_warps.
int launch_warps(const Kernel& k);
// The CTAs of a program: the `num_ctas` that cluster-programs wrote on the grid's yield, else 1.
// A program's `num_warps` are spread over them, num_warps / num_ctas to a CTA.
int launch_ctas(const Kernel& k);
// The knob cluster_size = C (2, 4 or 8; sm_90+): `num_ctas = C` on the grid's yield, each
// program on a thread-block cluster of C CTAs (ClusterPrograms.cpp).
void cluster_programs(Kernel& k, const GpuLoweringOptions& o, PassStats& stats);
// What an op is that keeps its kernel off clusters ("a dot"), "" for an op whose data crosses
// the CTAs of a cluster only as cluster-programs' reductions do (both the pass and the layout
// emitter ask).
std::string unclusterable_op(const Op& op);
// The knob swap_operands = 1 on sm_90a: a top-level K loop's dot of 8 to 32 rows of 16-bit
// operands computed as c^T = b^T a^T, the loop carrying the transposed accumulator and one
// permute after it (SwapDotOperands.cpp).
void swap_dot_operands(Kernel& k, const GpuLoweringOptions& o, PassStats& stats);
// Writes `num_warps` on the grid's yield (AssignLaunchShape.cpp).
void assign_launch_shape(Kernel& k, const GpuLoweringOptions& o, PassStats& stats);
// The blocked layout a tile of this static shape starts in: 16 bytes per thread along the
// fastest dim (at most the tile's elements per thread of the program), the warp's threads
// fastest dim first, the warps slowest dim first (replicated when no blocked layout fits).
// (`run_bytes`: 32 for the 1-D tiles a block scan reads, AssignLayouts.cpp.)
Layout default_blocked_layout(const std::vector<int64_t>& shape, int elem_bytes, int num_warps, int run_bytes = 16);
// Every tile gets a layout, every exchange an explicit convert_layout (AssignLayouts.cpp).
void assign_layouts(Kernel& k, const GpuLoweringOptions& o, PassStats& stats);
// A producer warpgroup for the kernel's ring loop on sm_90a: `warp_specialize = 1` on a top-level
// pipelined loop whose bounds and load indices the producer can compute alone
// (SpecializeWarps.cpp).
void specialize_warps(Kernel& k, const GpuLoweringOptions& o, PassStats& stats);
// The loop a split-K launch slices (the first top-level loop whose body holds a dot, when it
// can be split; else null, and *why says why) and, for the split-K compilation, the slicing
// itself: the loop's bounds from program_id / num_programs of axis 2, `split_k = 1` on it (its
// partial sums added after it), `persistent = 0` on the grid (SplitKLoops.cpp).
Op* splittable_k_loop(const Kernel& k, std::string* why = nullptr);
void split_k_loops(Kernel& k, const GpuLoweringOptions& o, PassStats& stats);
// For a split loop: the load of its dot's A operand (through layout conversions) whose tile row
// is fixed before the loop, when everything computed from the loop's result is elementwise up
// to stores at that tile row of views with A's rows; else null. Then the accumulator's rows
// past A's view are never read (the stores drop them): `split_skip_rows = 1`, and the split's
// fixup leaves out the warps that hold only such rows (their sums would not be used).
const Op* split_rows_load(const Op& loop);
// Persistent CTAs, in grouped order, for a kernel with a producer warpgroup: `persistent = 1,
// group_rows = 8` on the grid block's yield (PersistPrograms.cpp).
void persist_programs(Kernel& k, PassStats& stats);
// Persistent CTAs that copy the next program's tiles into shared memory while this one computes,
// for a row kernel whose programs read at least 32 KiB: `prefetch = "next_program" | "once"` and
// `prefetch_at` on the loads, `persistent = 1, prefetch_buffers` on the grid's yield
// (PrefetchPrograms.cpp).
void prefetch_programs(Kernel& k, const GpuLoweringOptions& o, PassStats& stats);
// Its rules, which the emitters' program prefetch reads too (EmitProgramPrefetch.cpp):
// whether `op` runs inside a for or while;
bool inside_loop(const Op& op);
// the views some op of `k` writes (stores, scatters, ...);
std::set<const Value*> written_views(const Kernel& k);
// why program prefetch cannot run beside `k`'s other ops (a dot, Struct or Raw op, a ring of
// its own, a load into shared memory), "" where it can;
std::string program_prefetch_blocker(const Kernel& k);
// whether `load`'s indices are pure scalar arithmetic on the program ids, constants and dims,
// with those ops that depend on a program id (in program order) and whether there are any.
bool program_index_chain(const Kernel& k, const Op& load, std::vector<const Op*>* chain, bool* on_pid);
// The L2 cache policy of a pipelined loop's 2-D TMA copies on sm_90a: `l2_hint` on its ring
// loads, evict_first for tiles that at most two programs read; the knob mma_l2_prefetch's
// `l2_prefetch` on the ring loads copied by cp.async (HintL2Policy.cpp).
void hint_l2_policy(Kernel& k, const GpuLoweringOptions& o, PassStats& stats);
// The knob prefetch_loads = 1: in each loop whose body writes no memory, the loads at indices
// from outside it and its induction variable are issued one iteration ahead, into a tile the
// loop carries (PrefetchLoopLoads.cpp).
void prefetch_loop_loads(Kernel& k, PassStats& stats);
// The ring loads of `loop` that a kernel with wgmma dots copies by TMA, each with its box
// (innermost dim first: one 128-byte swizzle atom, then the tile's other dims): every ring load
// of a pipelined top-level loop when each is a 2- or 3-D row-major 128-byte swizzled tile of 8-
// or 16-bit elements of a kernel parameter's view of its rank, without a pad, dims up to 256;
// else none (the loop's ring is copied by cp.async). The layout emitter's plan_tma_rings and
// hint-l2-policy both ask it.
std::vector<std::pair<const Op*, std::vector<int64_t>>> tma_ring_boxes(const Kernel& k, const Op& loop);
// The grid's yield `yield` says one CTA per program again: `persistent = 0`, no `group_rows` or
// `program_pairs` (persist-programs declining a written 1, the cuda emitter printing without a
// producer).
void take_back_persistence(Op& yield);
// A persistent kernel's wgmma result stored from shared memory by TMA: `tma_store = 1` on its
// store_tile (StoreEpiloguesByTma.cpp).
void store_epilogues_by_tma(Kernel& k, PassStats& stats);
// An mma.sync result tile stored through shared memory in 16-byte rows: `staged = 1` on its
// store_tile (StageEpilogueStores.cpp).
void stage_epilogue_stores(Kernel& k, PassStats& stats);
// Two consumer warpgroups taking alternate programs of a persistent CTA (ping-pong), opt-in:
// `consumers = 2` on the warp-specialized loop, every wgmma accumulator layout on one warpgroup
// (PingPongConsumers.cpp).
void pingpong_consumers(Kernel& k, PassStats& stats);
// A persistent kernel's TMA-stored result stored during the next program's K loop: `overlap = 1`
// on the store (OverlapEpilogues.cpp).
void overlap_epilogues(Kernel& k, PassStats& stats);
// The knob stream_k = 1 or the stream-K compilation: a persistent warp-specialized GEMM shares
// its last partial wave's K loops out over every CTA, `stream_k = 1` on the grid's yield and on
// the K loop (its parts' partial sums added after it) (StreamKPrograms.cpp).
void stream_k_programs(Kernel& k, const GpuLoweringOptions& o, PassStats& stats);
// The knob cluster_m = 2: CTA pairs of a cluster take programs (2q, n) and (2q + 1, n) of a
// persistent warp-specialized kernel, `program_pairs = 1` on the grid's yield, and copy the ring
// tiles both programs read by TMA multicast, `multicast = 1` on those loads (PairPrograms.cpp).
void pair_programs(Kernel& k, const GpuLoweringOptions& o, PassStats& stats);
// The top-level pure scalar ops, in program order, that a producer warpgroup re-computes to
// issue `loop`'s ring copies (its bounds, its loads' indices); *why says what stops a producer
// (then the result is empty; "" when it can run).
std::vector<const Op*> producer_slice(const Kernel& k, const Op& loop, std::string* why);
// Removes the conversions the program can do without (RemoveLayoutConversions.cpp).
void remove_layout_conversions(Kernel& k, PassStats& stats);
// mma.sync operands that must cross threads go through shared tiles; loads write them
// directly (StageMmaOperands.cpp).
void stage_mma_operands(Kernel& k, PassStats& stats);
// In a kernel without wgmma dots: the shared tiles only mma.sync dots read, rows of whole 128-
// or 64-byte lines, get the 128- or 64-byte swizzle in place of padded rows (SwizzleMmaOperands.cpp).
void swizzle_mma_operands(Kernel& k, const GpuLoweringOptions& o, PassStats& stats);
// Whether `b` (nested regions included) has a dot with an mma accumulator of this version
// (2: mma.sync, 3: wgmma).
inline bool has_mma_dot(Block& b, int version) {
  bool any = false;
  walk(b, [&](Op& op) {
    any |= op.kind == OpKind::Dot && op.result()->type.layout.kind == Layout::Kind::Mma && op.result()->type.layout.version == version;
  });
  return any;
}
// A loop whose body loads tiles into shared memory at indices computable one iteration ahead
// gets `pipeline = 2` unless it has a `pipeline` (PipelineLoops.cpp).
// The dynamic shared memory one program may use on compute capability `sm` (227 KiB on sm_90+,
// 163 KiB on sm_80/87, else 99 KiB): what a ring of pipeline-loops must fit in.
int64_t shared_memory_per_program(int sm);
// The bytes of one stage of a load into a shared tile: unswizzled rows of whole 16-byte chunks
// padded by one chunk (or the layout's pad, if larger), as the layout emitter lays them out; a
// swizzled tile from a 1024-byte boundary; 0 for a tile whose shape is not static.
int64_t stage_bytes(const Op& load);
void pipeline_loops(Kernel& k, const GpuLoweringOptions& o, PassStats& stats);
// Those loads of `loop` (top level of its body, in order); `chain` gets the body's pure
// scalar ops that their indices may use, in order (to compute them for another iteration).
std::vector<const Op*> ring_loads(const Op& loop, std::vector<const Op*>* chain);
// An op without regions whose results are all scalars, of a class without side effects.
bool pure_scalar_op(const Op& o);
// How often `v` is an operand in `b` and the blocks nested in it.
int64_t uses_in(Block& b, const Value* v);
// Whether `v` is a splat of the constant 0 (an accumulator whose parts may be added: split-K,
// stream-K).
bool starts_as_zero_splat(const Value* v);
// The kernel's convert_layout ops: how many, and their bytes times the trip counts of the
// loops around them (a trip count that is not a constant counts as 16).
std::pair<int64_t, int64_t> layout_conversion_cost(const Kernel& k);
// What sits between a dot's location and the reason in the note that says why a dot did not
// take wgmma ("dot at LOC: not wgmma: WHY"): assign-layouts and the planning emitter write it,
// the layout emitter looks for it (CudaEmission::wgmma_not_taken).
inline constexpr const char* kNotWgmmaMarker = ": not wgmma: ";

// The GPU lowering passes in order. The layout emitter (CudaTarget::emitter; docs/cuda-backend.md)
// prints their output; the planning emitter does not read it (for it they run only for
// `tessera compile --target cuda:... --dump-after PASS|all` and `--stats`).
std::vector<Pass> gpu_lowering_passes(const GpuLoweringOptions& o);
std::vector<std::string> gpu_lowering_pass_names();
// Run them on a copy of a bound kernel (dumps and stats as run_pipeline's).
std::unique_ptr<Kernel> run_gpu_lowering(const Kernel& bound, const GpuLoweringOptions& o,
                                         const PipelineOptions& opts, PassStats* stats = nullptr);

// The pipeline's passes in order, as (name, run) pairs.
std::vector<Pass> pipeline_passes(const ConstexprConfig& config);

// The names of the passes in order (for --dump-after validation and docs).
std::vector<std::string> pipeline_pass_names();
// Run the whole pipeline on a copy of `k` and return the result. Verifies before and after.
std::unique_ptr<Kernel> run_pipeline(const Kernel& k, const PipelineOptions& opts, PassStats* stats = nullptr);

}  // namespace tessera
