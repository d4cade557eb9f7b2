// The CUDA code generator: bound IR -> CUDA C++ source plus what the driver needs to launch it.
//
// Contract with the NVRTC/driver side (src/cuda/CudaBackend.cpp):
//
// * Device headers. The generated source includes Tessera's device library as
//   `#include "tessera/<file>.cuh"`; the files are src/cuda/device/<file>.cuh. The backend embeds
//   every src/cuda/device/*.cuh at build time and hands each to NVRTC as an in-memory header
//   named "tessera/<file>.cuh". The source includes nothing else (no <cuda_bf16.h>: the library
//   defines its own bit-level bf16/f16/f8 conversions, so NVRTC needs no include path).
//   CudaEmission::headers lists the include names the source uses.
//
// * Launch. One CTA per program instance (info.cluster CTAs along x when the kernel is split
//   over a thread-block cluster): gridDim = the grid sizes (cuda_grid_size below),
//   blockDim = (info.block_threads, 1, 1), dynamic shared memory = info.dynamic_smem_bytes
//   (when it exceeds 48 KiB, set CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES first).
//   block_threads = 32 * num_warps: the kernel's constexpr `num_warps` when declared; else, for
//   a kernel with a dot, 8 (a dot output of >= 128x128 or a tile of >= 8192 elements) or 4; for
//   a kernel without, 4 doubled while the largest tile has more than 32 elements per thread
//   (at most 1024 threads; 512 where a block loads three such tiles); both emitters take it from
//   default_num_warps (src/passes); a loop printed with a producer warpgroup (specialize-warps)
//   adds 128.
//
// * Parameter ABI, in this order (info.params lists them):
//     1. one device pointer per view (or ptr) parameter, in signature order;
//     2. every symbolic view dim, as int32, in order of first appearance in the signature
//        (static dims are compiled in; tensors are row-major and contiguous);
//     3. every scalar parameter by value, in signature order: i1/u8 as uint8_t, i8 as int8_t,
//        16/32/64-bit integers as their own C type, f32 and the narrow floats (f16, bf16, f8:
//        already rounded to the type) as float, f64 as double;
//     4. (sm_90a TMA kernels) one tensor map per operand view of the wgmma pipeline, then one
//        per view, box and swizzle of the Struct async_copy ops taken by TMA (TensorMap);
//     5. (persistent kernels) the grid's sizes as int32 (GridSize): x and y for the planning
//        emitter's wgmma kernels, x, y and z for program prefetch and the layout emitter's.
//     6. (split-K variants) the device address of the split workspace (SplitWorkspace).
//   The kernel is `extern "C" __global__`, named info.symbol.
//
// * Errors. line_op[i] is the IR op whose code produced line i+1 of the source (null: none),
//   for mapping an NVRTC error back to the user's source.
//
// Raw ops: the `cuda` body is inlined in a block. Operands are `in0`, `in1`, ... and results
// `out0`, `out1`, ... (the cpu backend's names). A scalar is a variable of its compute type
// (float for f16/bf16/f8); a tile is a flat row-major array of its compute type in shared
// memory (`inN_numel`, `outN_numel` give sizes). Every thread of the CTA runs the body; it may
// split work with `tsr_tid` / `tsr_nthreads` or let threads write identical values. Constexprs
// are visible as `constexpr int64_t NAME`. A raw op without a cuda body is a TesseraError.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda/CudaBackend.h"
#include "ir/IR.h"
#include "runtime/Tensor.h"

namespace tessera {

struct GpuLoweringOptions;  // passes/Passes.h

// Bumped whenever the generated code changes meaning (part of the compile cache key).
inline constexpr const char* kCudaCodegenVersion = "tessera-cuda-codegen-1";

// The most CTAs a split-K launch gives one program (CudaTarget::split_k): each adds a slot of
// partial sums that the program's last CTA reads back.
inline constexpr int kMaxSplitK = 16;
// The most CTAs of a split launched as one cluster (CudaKernelInfo::split_cluster): the portable
// cluster size; splits beyond it take the workspace's path.
inline constexpr int kMaxSplitKCluster = 8;
// The dot tiles (M x N) that the wgmma plan computes on swapped operands (knob swap_operands):
// M on wgmma's n (8, 16 or 32), N on its 64-row blocks (one to four consumer warpgroups).
// Shared by the plan and the tuner's cuda-swap-operands constraint.
inline bool wgmma_swap_m(int64_t m) { return m == 8 || m == 16 || m == 32; }
inline bool wgmma_swap_n(int64_t n) { return n % 64 == 0 && n >= 64 && n <= 256; }
// The codegen knob that asks for a split (tune/Space.cpp's table): a kernel constexpr read by
// the runtime at launch (0: its own rule, split_k_factor; n >= 2: n ways where the kernel
// allows it), not by the emitters, and left out of the printed source, so that configs that
// differ only in it share one compilation. CudaOptions::split_k, when nonzero, comes first.
inline constexpr const char* kSplitKKnob = "split_k";

struct CudaParam {
  enum class Kind : uint8_t { Pointer, Dim, Scalar, TensorMap, GridSize, SplitWorkspace };
  Kind kind = Kind::Pointer;
  ScalarKind elem = ScalarKind::F32;  // pointee (Pointer), i32 (Dim), the scalar's type (Scalar)
  int bytes = 8;                      // size of the by-value argument
  std::string name;                   // parameter name, or the dim symbol ("M")
  int param_index = -1;               // index into Kernel::params (Pointer, Scalar, TensorMap); -1 for Dim
  // TensorMap: a 128-byte CUtensorMap by value (a __grid_constant__ tsr::TmaDesc) for the 2-D
  // view param_index, encoded at launch: dims {cols, rows}, row stride in bytes, box {box[0]
  // columns, box[1] rows}, `swizzle`, zero fill out of bounds. The view's base must be
  // 16-byte aligned and its row stride a multiple of 16 bytes; when not, the launch uses the
  // kernel compiled without TMA (CudaTarget::tma = false) instead.
  int box[5] = {0, 0, 1, 1, 1};
  // TensorMap: the view's rank (2 for the wgmma ring and Struct copies; the layout emitter's
  // rings take views up to rank 5): dims and box are then innermost first, box[2..] the box's
  // extents along the outer dims, the strides those of the dense row-major view.
  int rank = 2;
  // TensorMap: 128 (the 128-byte swizzle of the wgmma ring and the TMA-store epilogue), 64 (the
  // wgmma ring's MN-major B of 96 columns) or 0 (none: a Struct async_copy's row-major slot).
  int swizzle = 128;
};

struct CudaKernelInfo {
  std::string symbol;            // extern "C" kernel name
  int block_threads = 128;       // blockDim.x
  int static_smem_bytes = 0;     // __shared__ arrays declared in the kernel
  int dynamic_smem_bytes = 0;    // extern __shared__ bytes to pass at launch
  std::vector<CudaParam> params;
  // A persistent kernel loops over the program grid itself: launch gridDim.x = min(programs,
  // multiprocessors) CTAs (one per SM) and pass the grid's sizes as the GridSize parameters
  // (int32, param_index = axis). Its programs run in grouped order (8 rows of axis 0 at a time,
  // or the grid's `group_rows` in the layout emitter's), so that concurrently running programs
  // share operand tiles in L2.
  bool persistent = false;
  // A persistent kernel of program prefetch (docs/cuda-backend.md): launch as many CTAs as fit
  // on the device at once (multiprocessors x resident CTAs per SM), not one per SM, and pass
  // the grid's x, y and z sizes; programs run in plain order (x fastest).
  bool persistent_fill = false;
  // CTAs per program (a thread-block cluster along x, compiled in with __cluster_dims__):
  // launch gridDim.x = grid x size * cluster. 1: one CTA per program.
  int cluster = 1;
  // A persistent wgmma kernel whose CTAs run in clusters of this many along x (cluster_m = 2:
  // pairs of programs sharing B tiles through TMA multicast; compiled in with
  // __cluster_dims__): launch gridDim.x as a multiple of it. 1: no clusters.
  int persistent_cluster = 1;
  // The kernel's wgmma loop could be split over K (its top level is what a persistent kernel
  // allows, and its accumulator starts at a splat of 0): when programs are too few to fill the
  // device, the runtime launches the kernel's split-K compilation (CudaTarget::split_k) instead.
  bool split_k_capable = false;
  // This is a split-K compilation: launch gridDim.z = splits CTAs per program (grid x and y as
  // usual) and pass a SplitWorkspace of split_workspace_bytes(programs, splits) bytes whose
  // first programs x 4 bytes (the per-program arrival counters) are zero; the kernel leaves them
  // zero again, so one workspace serves launch after launch in stream order.
  bool split_k = false;
  int64_t split_slot_bytes = 0;  // one CTA's partial accumulators
  // A split-K compilation that can also add its partial sums within a cluster: launched with a
  // cluster of 1 x 1 x splits CTAs (at most kMaxSplitKCluster, cuLaunchKernelEx), CTA 0 of each
  // program adds its peers' sums over distributed shared memory and the workspace goes unused;
  // launched without clusters it takes the workspace's path.
  bool split_cluster = false;
  // A persistent kernel with stream-K (CudaTarget::stream_k): pass a SplitWorkspace of
  // split_workspace_bytes(CTAs launched, 1) bytes, its counters (one flag per CTA) zero; the
  // kernel leaves them zero again.
  bool stream_k = false;
  int64_t split_workspace_bytes(int64_t programs, int64_t splits) const {
    return split_counter_bytes(programs) + programs * splits * split_slot_bytes;
  }
  static int64_t split_counter_bytes(int64_t programs) { return (programs * 4 + 255) / 256 * 256; }
};

struct CudaEmission {
  std::string source;
  CudaKernelInfo info;
  std::vector<const Op*> line_op;       // per source line
  std::vector<std::string> headers;     // include names used, e.g. "tessera/core.cuh"
  std::map<std::string, int64_t> stats; // e.g. "layout-conversions", "smem-bytes", "mma-dots"
  // Decisions worth telling the user, one sentence each (`tessera compile --stats` prints them):
  // which path a dot took and why not a faster one.
  std::vector<std::string> notes;
  // The one of `notes` that says why a dot that could have taken the sm_90a wgmma path did
  // not ("dot at LOC: not wgmma: ..."; `tessera compile` prints it without --stats); empty when
  // the kernel has no such dot or the dot took the path.
  std::string wgmma_not_taken;
  // The GPU lowering's output the source was printed from (by the layout emitter), which
  // line_op points into; null when the source was printed from the kernel given.
  std::shared_ptr<const Kernel> lowered;
  // The GpuLoweringOptions::wgmma that lowering ran with: false on sm_90a where the layout
  // emitter lowered the kernel again for mma.sync (what it could not print with wgmma), so that
  // `tessera compile --dump-after` and `--stats` can show the lowering that was printed.
  bool lowered_with_wgmma = false;
  // Whether that lowering let cluster-programs run (false: lowered again without clusters, what
  // the layout emitter could not print on one; GpuLoweringOptions::clusters).
  bool lowered_with_clusters = true;
};

CudaEmission emit_cuda_with_info(const Kernel& bound_kernel, const CudaTarget& target);

// What the GPU lowering passes are told of `target` (its sm, wgmma dots where `wgmma`, the
// split-K compilation where it is one and wgmma): what the layout emitter prints from, and
// what `tessera compile --dump-after` shows.
GpuLoweringOptions gpu_lowering_options(const CudaTarget& target, bool wgmma);

// The grid sizes (x, y, z; unused ones are 1) of a bound kernel for arguments `args`
// (dims are bound from the tensors' shapes, scalars from the args). Throws TesseraError for a
// grid op that cannot be evaluated.
std::array<int64_t, 3> cuda_grid_size(const Kernel& bound_kernel, const std::vector<KernelArg>& args);
// The same for dims already bound (`sizes`), e.g. a shape without tensors (the tuner's
// constraints): `args` gives the scalar parameters the grid reads, by parameter index (a grid
// that reads one not given is a TesseraError).
std::array<int64_t, 3> cuda_grid_size(const Kernel& bound_kernel, const Sizes& sizes,
                                      const std::vector<KernelArg>& args = {});
// The reduction length of the loop a split-K launch splits (the first loop at the top of the
// body whose body holds a dot: the wgmma loop of a split-K-capable kernel): its trip count x
// its dot's K per step, for dims `sizes` and the scalar parameters in `args`; -1 when its bounds
// are not known before the programs run (they read a program id, a tile, or an op the host does
// not evaluate). The runtime weighs the K a slice would get against the split's fixup
// (cuda::split_k_factor).
int64_t cuda_split_loop_k(const Kernel& bound_kernel, const Sizes& sizes, const std::vector<KernelArg>& args = {});

}  // namespace tessera
