#include "cli/Backend.h"

#include <iostream>

#include "cpu/CpuBackend.h"
#include "cuda/CudaBackend.h"
#include "cuda/Driver.h"
#include "interp/Interpreter.h"
#include "passes/Passes.h"
#include "tune/Measure.h"

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

// Device copies of the tensors of `args` (appended to `buffers`), and their addresses by
// argument (0 for a scalar).
std::vector<uint64_t> upload(const std::vector<KernelArg>& args, std::vector<cuda::DeviceBuffer>& buffers) {
  std::vector<uint64_t> ptrs(args.size(), 0);
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].tensor) continue;
    const Tensor& t = *args[i].tensor;
    buffers.emplace_back(std::max<size_t>(t.data.size(), 1));
    buffers.back().upload(t.data.data(), t.data.size());
    ptrs[i] = buffers.back().get();
  }
  return ptrs;
}

class CudaRunner : public Runner {
 public:
  CudaRunner(const Kernel& k, const std::string& backend, const std::vector<std::string>& disabled) {
    std::string why;
    if (!nvrtc_available(&why)) throw TesseraError("backend '" + backend + "' is not available here: " + why);
    if (!cuda_device_available(&why)) throw TesseraError("backend '" + backend + "' cannot run here: " + why);
    CudaOptions o;
    o.target = cuda_backend_target(backend);  // the device's own architecture, or the one asked
    o.target_from_device = false;
    disable_lowering_passes(o.target, disabled);
    compiled_ = compile_cuda(k, o);
    compile_seconds = compiled_->compile_seconds;
    detail = cuda::device().name + " " + compiled_->target.str();
  }
  void run(std::vector<KernelArg>& args) override { compiled_->run_host(args); }

  void make_resident(std::vector<KernelArg>& args) override {
    buffers_.clear();
    ptrs_ = upload(args, buffers_);
  }
  void run_resident(std::vector<KernelArg>& args) override {
    compiled_->launch(args, ptrs_, nullptr);
    cuda::check(cuda::driver()->cuCtxSynchronize(), "cuCtxSynchronize");
  }
  // A launch on device memory the caller holds, not waited for (StagedRunner).
  void launch(const std::vector<KernelArg>& args, const std::vector<uint64_t>& ptrs) {
    compiled_->launch(args, ptrs, nullptr);
  }

 private:
  std::shared_ptr<CudaKernel> compiled_;
  std::vector<cuda::DeviceBuffer> buffers_;
  std::vector<uint64_t> ptrs_;
};

// A library op's stages (LibraryStages) on one backend.
class StagedRunner : public Runner {
 public:
  StagedRunner(const std::string& backend, LibraryStages st, ScalarKind dtype, const std::vector<std::string>& disabled)
      : backend_(backend), st_(std::move(st)) {
    for (const LibraryStage& s : st_.stages) {
      PipelineOptions po;
      po.config = s.config;
      po.disabled = disabled;
      bound_.push_back(run_pipeline(*s.build(dtype), po));
    }
    // On cpu the stages' compilers run side by side (compile_cpu is thread-safe, as the
    // tuner's parallel builds use it): `tessera run topk -b cpu` at 64 x 131072 (four kernels)
    // cold in 0.78 s rather than 0.96 here, one of the 2 cores busy elsewhere. A cuda runner
    // loads its module into the thread's context: in turn.
    runners_.resize(bound_.size());
    auto make = [&](int64_t i) { runners_[size_t(i)] = make_runner(backend, *bound_[size_t(i)], disabled); };
    if (backend == "cpu") tune::parallel_for(int64_t(bound_.size()), 0, make);
    else
      for (size_t i = 0; i < bound_.size(); ++i) make(int64_t(i));
    for (const auto& r : runners_) compile_seconds += r->compile_seconds;
    detail = runners_.front()->detail;
    detail += (detail.empty() ? "" : ", ") + std::to_string(st_.stages.size()) + " kernels:";
    for (const auto& k : bound_) detail += " " + k->name;
    for (const LibraryTemporary& t : st_.temporaries) temps_.emplace_back(t.dtype, t.shape);
    for (Tensor& t : temps_) temp_args_.push_back({&t, int64_t{0}});
  }
  void run(std::vector<KernelArg>& args) override {
    for (size_t i = 0; i < runners_.size(); ++i) {
      std::vector<KernelArg> a = stage_args(st_.stages[i], args, temp_args_);
      runners_[i]->run(a);
    }
  }
  void make_resident(std::vector<KernelArg>& args) override {
    if (!is_cuda_backend(backend_)) return;
    buffers_.clear();
    op_ptrs_ = upload(args, buffers_);
    temp_ptrs_ = upload(temp_args_, buffers_);  // their contents do not matter
  }
  void run_resident(std::vector<KernelArg>& args) override {
    if (!is_cuda_backend(backend_)) return run(args);
    for (size_t i = 0; i < runners_.size(); ++i)
      static_cast<CudaRunner&>(*runners_[i])
          .launch(stage_args(st_.stages[i], args, temp_args_), stage_args(st_.stages[i], op_ptrs_, temp_ptrs_));
    cuda::check(cuda::driver()->cuCtxSynchronize(), "cuCtxSynchronize");
  }

 private:
  std::string backend_;
  LibraryStages st_;
  std::vector<std::unique_ptr<Kernel>> bound_;
  std::vector<std::unique_ptr<Runner>> runners_;
  std::vector<Tensor> temps_;
  std::vector<KernelArg> temp_args_;
  std::vector<cuda::DeviceBuffer> buffers_;
  std::vector<uint64_t> op_ptrs_, temp_ptrs_;
};

}  // namespace

std::unique_ptr<Runner> make_library_runner(const std::string& backend, const Kernel& bound, const LibraryKernel* lib,
                                            ScalarKind dtype, const Sizes& sizes,
                                            const std::map<std::string, int64_t>& given,
                                            const std::vector<std::string>& disabled) {
  if (lib && lib->stages) {
    LibraryStages st = lib->stages(dtype, backend_target(backend), sizes, given);
    if (!st.stages.empty()) return std::make_unique<StagedRunner>(backend, std::move(st), dtype, disabled);
  }
  return make_runner(backend, bound, disabled);
}

void disable_lowering_passes(CudaTarget& t, const std::vector<std::string>& disabled) {
  t.disabled_passes = gpu_lowering_passes_in(disabled);
  static bool said = false;  // once a process (a staged op has several kernels)
  if (t.emitter != CudaTarget::Emitter::Planning || t.disabled_passes.empty() || said) return;
  said = true;
  std::string names;
  for (const std::string& n : t.disabled_passes) names += (names.empty() ? "" : ", ") + n;
  std::cerr << "note: --disable-pass " << names << ": the GPU lowering's, which only the layout emitter "
            << "prints; the planning emitter, on now (TESSERA_CUDA_FROM_LAYOUTS=0), ignores it\n";
}

bool is_cuda_backend(const std::string& backend) { return backend == "cuda" || backend.rfind("cuda:", 0) == 0; }

CudaTarget cuda_backend_target(const std::string& backend) {
  CudaOptions o;
  o.target = CudaTarget::parse("cuda:sm_90a");  // without a device
  if (backend == "cuda") return cuda_target_for(o);
  if (!is_cuda_backend(backend)) throw TesseraError("'" + backend + "' is not a cuda backend");
  // An architecture the user asked for: compiled for exactly that, so it must run on the device
  // (a cubin runs on its own major architecture at the same or a later minor one; an
  // arch-specific one, sm_90a, on that architecture only).
  o.target = CudaTarget::parse(backend);
  o.target_from_device = false;
  CudaTarget t = cuda_target_for(o);
  if (cuda_device_available()) {
    const int dev = cuda::device().sm;
    if (t.sm / 10 != dev / 10 || t.sm > dev || (t.arch_specific && t.sm != dev))
      throw TesseraError("backend '" + backend + "': code for " + t.str() + " does not run on this device (sm_" +
                         std::to_string(dev) + "); -b cuda:sm_" + std::to_string(dev) +
                         " compiles its portable path (mma.sync, cp.async), -b cuda its own");
  }
  return t;
}

std::string backend_target(const std::string& backend) {
  if (is_cuda_backend(backend)) return "cuda:" + cuda_backend_target(backend).str();
  if (backend == "cpu") return "cpu";
  return "";
}

std::unique_ptr<Runner> make_runner(const std::string& backend, const Kernel& bound,
                                    const std::vector<std::string>& disabled) {
  if (backend == "interp") return std::make_unique<InterpRunner>(bound);
  if (backend == "cpu") return std::make_unique<CpuRunner>(bound);
  if (is_cuda_backend(backend)) return std::make_unique<CudaRunner>(bound, backend, disabled);
  throw TesseraError("unknown backend '" + backend + "' (expected interp, cpu, cuda or cuda:sm_XY[a])");
}

}  // namespace tessera::cli
