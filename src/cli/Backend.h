// One way to run a bound kernel on each backend, so that `run` and `bench` compile once and
// then call many times.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda/CudaBackend.h"
#include "ir/IR.h"
#include "kernels/Library.h"
#include "runtime/Tensor.h"

namespace tessera::cli {

class Runner {
 public:
  virtual ~Runner() = default;
  // Run on host tensors: outputs are written back into `args`.
  virtual void run(std::vector<KernelArg>& args) = 0;
  // For timing: make `args` resident where the kernel runs (device memory for cuda), then
  // run_resident() runs once on them and waits, without host copies. Default: plain run().
  virtual void make_resident(std::vector<KernelArg>& args) {}
  virtual void run_resident(std::vector<KernelArg>& args) { run(args); }
  double compile_seconds = 0;
  std::string detail;  // e.g. the GPU and the architecture compiled for
};

// "cuda", or "cuda:" and an architecture (cuda:sm_90): the backends that run on the GPU.
bool is_cuda_backend(const std::string& backend);

// The architecture a cuda backend compiles for in `run` and `bench`. "cuda": the device's own,
// with sm_90 as sm_90a (the rule of compile_cuda's default, resolve_target in
// src/cuda/CudaRuntime.cpp); sm_90a without a device (nothing runs then). "cuda:sm_XY[a]":
// exactly that architecture (cuda:sm_90 on a Hopper runs the portable path: mma.sync dots fed
// by cp.async, no TMA or wgmma), a TesseraError where the device cannot run its code. The
// cuda runner compiles for exactly this target, so the configs chosen for it (backend_target)
// and the code it gets cannot disagree.
CudaTarget cuda_backend_target(const std::string& backend = "cuda");

// What a backend compiles for here, as a LibraryKernel::target_configs key: "cuda:sm_90a"
// (cuda_backend_target), "cpu", or "" for the interpreter (no preferred configs).
std::string backend_target(const std::string& backend);

// The runner of a library op at `sizes`: its stages (LibraryKernel::stages for the backend's
// target, `given` the caller's constexprs; each stage bound, through the pipeline without
// `disabled` passes, and compiled once) when it has some there, else make_runner(backend,
// bound). It runs on the op's arguments (`bound`'s): the stages' temporaries are its own,
// host tensors for run(), device memory for run_resident() on cuda, where the stages are
// launched in turn and waited for once. `lib` may be null (a .tile file's kernel).
std::unique_ptr<Runner> make_library_runner(const std::string& backend, const Kernel& bound, const LibraryKernel* lib,
                                            ScalarKind dtype, const Sizes& sizes,
                                            const std::map<std::string, int64_t>& given,
                                            const std::vector<std::string>& disabled);

// `t` takes the GPU lowering passes among the `--disable-pass` names (gpu_lowering_passes_in),
// with a note on stderr (once a process) where it prints with the planning emitter, which does
// not run them.
void disable_lowering_passes(CudaTarget& t, const std::vector<std::string>& disabled);

// "interp", "cpu", "cuda" or "cuda:sm_XY[a]". `bound` must outlive the runner. Throws TesseraError when the
// backend cannot be used here (cuda without NVRTC or without a device). `disabled`: the
// `--disable-pass` names, of which cuda's layout emitter leaves the GPU lowering's out
// (CudaTarget::disabled_passes).
std::unique_ptr<Runner> make_runner(const std::string& backend, const Kernel& bound,
                                    const std::vector<std::string>& disabled = {});

}  // namespace tessera::cli
