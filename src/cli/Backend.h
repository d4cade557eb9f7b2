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
  virtual void run(std::vector<KernelArg>& args) = 0;
  double compile_seconds = 0;
};

// "interp", "cpu" or "cuda" (which throws: not in this build). `bound` must outlive the runner.
std::unique_ptr<Runner> make_runner(const std::string& backend, const Kernel& bound);

}  // namespace tessera::cli
