#include "cli/Backend.h"

#include "cpu/CpuBackend.h"
#include "cuda/CudaBackend.h"
#include "cuda/Driver.h"
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

class CudaRunner : public Runner {
 public:
  explicit CudaRunner(const Kernel& k) {
    std::string why;
    if (!nvrtc_available(&why)) throw TesseraError("backend 'cuda' is not available here: " + why);
    if (!cuda_device_available(&why)) throw TesseraError("backend 'cuda' cannot run here: " + why);
    CudaOptions o;
    o.target = cuda_backend_target();  // the device's own architecture
    o.target_from_device = false;
    compiled_ = compile_cuda(k, o);
    compile_seconds = compiled_->compile_seconds;
    detail = cuda::device().name + " " + compiled_->target.str();
  }
  void run(std::vector<KernelArg>& args) override { compiled_->run_host(args); }

  void make_resident(std::vector<KernelArg>& args) override {
    buffers_.clear();
    ptrs_.assign(args.size(), 0);
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i].tensor) continue;
      const Tensor& t = *args[i].tensor;
      buffers_.emplace_back(std::max<size_t>(t.data.size(), 1));
      buffers_.back().upload(t.data.data(), t.data.size());
      ptrs_[i] = buffers_.back().get();
    }
  }
  void run_resident(std::vector<KernelArg>& args) override {
    compiled_->launch(args, ptrs_, nullptr);
    cuda::check(cuda::driver()->cuCtxSynchronize(), "cuCtxSynchronize");
  }

 private:
  std::shared_ptr<CudaKernel> compiled_;
  std::vector<cuda::DeviceBuffer> buffers_;
  std::vector<uint64_t> ptrs_;
};

}  // namespace

CudaTarget cuda_backend_target() {
  CudaOptions o;
  o.target = CudaTarget::parse("cuda:sm_90a");  // without a device
  return cuda_target_for(o);
}

std::string backend_target(const std::string& backend) {
  if (backend == "cuda") return "cuda:" + cuda_backend_target().str();
  if (backend == "cpu") return "cpu";
  return "";
}

std::unique_ptr<Runner> make_runner(const std::string& backend, const Kernel& bound) {
  if (backend == "interp") return std::make_unique<InterpRunner>(bound);
  if (backend == "cpu") return std::make_unique<CpuRunner>(bound);
  if (backend == "cuda") return std::make_unique<CudaRunner>(bound);
  throw TesseraError("unknown backend '" + backend + "' (expected interp, cpu or cuda)");
}

}  // namespace tessera::cli
