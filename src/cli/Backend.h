// One way to run a bound kernel on each backend, so that `run` and `bench` compile once and
// then call many times.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/IR.h"
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

// "interp", "cpu" or "cuda". `bound` must outlive the runner. Throws TesseraError when the
// backend cannot be used here (cuda without NVRTC or without a device).
std::unique_ptr<Runner> make_runner(const std::string& backend, const Kernel& bound);

}  // namespace tessera::cli
