#include "cli/Backend.h"

#include "cli/Commands.h"
#include "cpu/CpuBackend.h"
#include "interp/Interpreter.h"

namespace tessera::cli {

namespace {

class InterpRunner : public Runner {
 public:
  explicit InterpRunner(const Kernel& k) : k_(k) {}
  void run(std::vector<KernelArg>& args) override { run_interp(k_, args); }

 private:
  const Kernel& k_;
};

class CpuRunner : public Runner {
 public:
  explicit CpuRunner(const Kernel& k) : compiled_(compile_cpu(k)) {
    compile_seconds = compiled_->compile_seconds;
  }
  void run(std::vector<KernelArg>& args) override { compiled_->run(args); }

 private:
  std::shared_ptr<CpuKernel> compiled_;
};

}  // namespace

void backend_unavailable(const std::string& backend) {
  throw TesseraError("backend '" + backend + "' is not available in this build");
}

std::unique_ptr<Runner> make_runner(const std::string& backend, const Kernel& bound) {
  if (backend == "interp") return std::make_unique<InterpRunner>(bound);
  if (backend == "cpu") return std::make_unique<CpuRunner>(bound);
  if (backend == "cuda") backend_unavailable(backend);
  throw TesseraError("unknown backend '" + backend + "' (expected interp, cpu or cuda)");
}

}  // namespace tessera::cli
