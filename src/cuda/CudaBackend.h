// The cuda backend: bound IR -> CUDA C++ (calling Tessera's small device header library in
// src/cuda/device/) -> NVRTC (in process) -> cubin -> driver API launch.
//
// libnvrtc and libcuda are loaded at run time (dlopen), so one build runs with and without the
// toolkit and with and without a GPU: without libnvrtc the backend reports itself unavailable;
// without a device, running (not compiling) reports "no CUDA device".
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/IR.h"
#include "runtime/Tensor.h"

namespace tessera {

struct CudaTarget {
  int sm = 90;          // compute capability major*10 + minor: 80, 86, 89, 90
  bool arch_specific = false;  // sm_90a: wgmma, setmaxnreg
  // sm_90a: pipelined matmul loops may use TMA + wgmma, and Struct async_copy TMA boxes (knob
  // struct_tma). The runtime compiles a variant with tma = false (the mma.sync path, the other
  // copies) for views a tensor map cannot describe.
  bool tma = true;
  // sm_90a: a kernel whose wgmma loop may be split over K (CudaKernelInfo::split_k_capable) is
  // compiled as its split-K variant: gridDim.z CTAs share each program, each adds a slice of the
  // K loop, and the last to finish sums the slices and runs the epilogue. The runtime compiles
  // and launches this variant when the programs alone would leave multiprocessors idle.
  bool split_k = false;
  // sm_90a: a persistent wgmma kernel whose programs end in a partial wave spreads that wave's
  // K loops (with the full wave before it when it is under half the CTAs; all of them when
  // they are fewer than the CTAs: cuda::stream_k_tiles, stream_k_ctas) evenly over the CTAs
  // (stream-K): the CTA that ends a tile adds the earlier parts, which
  // other CTAs leave in a workspace. Off by default (a tuning knob, stream_k): on the H200 it
  // wins at short last waves (1024x4608x3584: 0.0539 against 0.0763 ms) and loses where whole
  // tiles nearly fill the last wave (4096^3: 0.196 against 0.189; bench/RESULTS.md, session 22).
  bool stream_k = false;
  // Which emitter prints the kernel (docs/cuda-backend.md, "Two emitters"): the layout
  // emitter (EmitLowered.cpp) prints the GPU lowering's IR, each op in the layout the passes
  // gave it; the planning emitter makes its own decisions from the optimized IR. Auto, the
  // default, and Layouts: the layout emitter (the same since session 55, when the last knobs
  // it took, stream_k and cluster_size, ran on a GPU). Either way, a kernel the layout emitter
  // cannot print yet is printed by the planning emitter, with a note that says why. parse()
  // reads TESSERA_CUDA_FROM_LAYOUTS: 1 for Layouts, 0 for Planning.
  enum class Emitter { Auto, Layouts, Planning };
  Emitter emitter = Emitter::Auto;
  // GPU lowering passes left out of the lowering the layout emitter prints (`--disable-pass`,
  // disableable_gpu_lowering_pass): an A/B switch per decision. The planning emitter ignores it.
  std::vector<std::string> disabled_passes{};
  static CudaTarget parse(const std::string& s);  // "cuda:sm_80", "sm_90a", "cuda" (= sm_90a)
  // TESSERA_CUDA_FROM_LAYOUTS as an emitter: 1 Layouts, 0 Planning, unset nothing; another
  // value is an error that names it.
  static std::optional<Emitter> emitter_from_environment();
  std::string str() const;                        // "sm_90a"
};

// CUDA C++ source for a bound kernel, with the IR ops as comments.
std::string emit_cuda(const Kernel& bound_kernel, const CudaTarget& target);

struct NvrtcResult {
  std::string ptx;
  std::vector<char> cubin;
  std::string log;
  double seconds = 0;
  // The process's CPU time during the compile (NVRTC's threads, ptxas's included; other
  // threads of the process too): unlike `seconds`, it hardly grows with other processes' work
  // on a loaded machine.
  double cpu_seconds = 0;
  // NVRTC's own phase times (its --time report), filled by nvrtc_compile_timed; -1 otherwise.
  // ptxas is "PTX Translation", inside NVRTC's compile to a cubin.
  double frontend_seconds = -1, nvvm_seconds = -1, ptxas_seconds = -1;
};

// Is NVRTC loadable? (no GPU needed). `why` gets the reason when not.
bool nvrtc_available(std::string* why = nullptr);
// Is there a usable CUDA device? `why` gets the reason when not ("no CUDA device", no driver).
bool cuda_device_available(std::string* why = nullptr);

// Compile CUDA C++ with NVRTC for the target. Throws TesseraError with the NVRTC log; when
// `kernel` is given, the failing generated line is mapped back to the IR op it came from.
NvrtcResult nvrtc_compile(const std::string& source, const CudaTarget& target,
                          const std::string& name = "kernel.cu");
// The same, mapping the first error back to the IR: line_ops[i] is the op that line i+1 of
// `source` was generated from (null for none); the error then ends with
// "generated from: <op> at FILE:LINE:COL" and carries the op's location.
NvrtcResult nvrtc_compile(const std::string& source, const CudaTarget& target, const std::string& name,
                          const std::vector<const Op*>& line_ops);

// nvrtc_compile with NVRTC's phase times (front end, NVVM, ptxas) in the result: for
// `tessera compile --time` and tools/nvrtc-times (issue 18: where a kernel's compile time goes).
NvrtcResult nvrtc_compile_timed(const std::string& source, const CudaTarget& target, const std::string& name,
                                const std::vector<const Op*>& line_ops);

struct CudaOptions {
  CudaTarget target;       // default: the device's own (sm_90 -> sm_90a)
  std::string cache_dir;   // as the cpu backend: $TESSERA_CACHE_DIR, XDG, ~/.cache/tessera
  bool disk_cache = true;
  // When true and a device is present, `target` is replaced by the device's own architecture
  // (sm_90 -> sm_90a). Set false to compile for `target` exactly (cross-compiling, tests).
  bool target_from_device = true;
  // Split-K for wgmma matmuls (CudaTarget::split_k): 0 lets the runtime launch the split-K
  // compilation when the programs would fill at most a third of the device and the K loop gives
  // each slice at least kMinSplitKSlice of K (split_k_factor);
  // 1 never splits; n >= 2 always splits n ways where the kernel allows it (for experiments).
  int split_k = 0;
  // A split launch that cuda::split_in_clusters allows (at most kMaxSplitKCluster ways, its CTAs
  // filling at most 55% of the SMs) runs each program's CTAs as one thread-block cluster whose
  // first CTA adds the others' partial sums over distributed shared memory, where the tile's
  // partial sums fit in its ring and staging (CudaKernelInfo::split_cluster); false (or
  // TESSERA_CUDA_SPLIT_K_WORKSPACE=1) meets them in the global workspace, as other splits do.
  bool split_k_cluster = true;
};

class CudaKernel {
 public:
  virtual ~CudaKernel() = default;
  // Device pointers in the tensors' places: host tensors are copied in and out by run_host.
  virtual void run_host(std::vector<KernelArg>& args) = 0;
  // Launch on device memory, asynchronously on `stream` (a CUstream; null: the default
  // stream), with no copies and no synchronisation. `args` give the shapes and the scalars
  // (checked by bind_dims, which wants each tensor's data to match its shape; the data is not
  // read); device_ptrs[i] is the device address for parameter i (ignored for scalars).
  virtual void launch(const std::vector<KernelArg>& args, const std::vector<uint64_t>& device_ptrs,
                      void* stream = nullptr) = 0;
  virtual const std::vector<char>& cubin() const = 0;
  virtual const std::string& source() const = 0;  // the generated CUDA C++
  CudaTarget target;           // what it was compiled for
  double compile_seconds = 0;  // NVRTC time; 0 when it came from a cache
  bool from_cache = false;
  bool from_memory_cache = false;
  // Launches that went to the compilation without TMA because an operand could not be
  // described by a tensor map (sm_90a wgmma kernels; CudaEmitter.h, TensorMap parameters).
  int64_t launches_without_tma = 0;
  // Launches that ran the split-K variant (CudaTarget::split_k) because the programs were too few
  // to fill the device.
  int64_t launches_split_k = 0;
  int last_splits = 1;  // CTAs per program of the latest launch (split-K), 1 otherwise
  // Of those, the launches whose split ran as one cluster per program (partial sums added over
  // distributed shared memory, CudaKernelInfo::split_cluster), and cluster launches the driver
  // refused (run again without clusters, through the workspace).
  int64_t launches_split_cluster = 0;
  int64_t cluster_launches_refused = 0;
  std::string cluster_refusal;  // the first refusal's error
  // CTAs per program when the kernel runs each program on a thread-block cluster (sm_90+;
  // CudaKernelInfo::cluster), 1 otherwise.
  int cluster = 1;
  // The launch the emitter asks for (CudaKernelInfo): threads per CTA, dynamic shared memory,
  // and whether the runtime may launch a split-K compilation of it (CudaTarget::split_k).
  int block_threads = 0;
  int dynamic_smem_bytes = 0;
  bool split_k_capable = false;
  std::string symbol;  // the kernel's extern "C" name in the cubin
};

// Compile (or fetch from the memory or disk cache) a bound kernel. Needs NVRTC, not a device:
// the cubin is loaded into the device at the first launch.
std::shared_ptr<CudaKernel> compile_cuda(const Kernel& bound_kernel, const CudaOptions& opts = {});

// The target compile_cuda compiles for: the device's own architecture (sm_90 as sm_90a) when
// opts.target_from_device and a device is present, else opts.target.
CudaTarget cuda_target_for(const CudaOptions& opts = {});

// Forget the in-memory cache (as a new process would); the disk cache is untouched.
void clear_cuda_memory_cache();
// The disk cache directory `opts` resolves to.
std::string cuda_cache_dir(const CudaOptions& opts = {});

}  // namespace tessera
