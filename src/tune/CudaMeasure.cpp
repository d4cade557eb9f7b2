// The measurement harness of the cuda backend (Measure.h, make_cuda_measurer): NVRTC compiles in
// parallel child processes, a prune on the cubins' resources, then do_bench timings in this
// process, where the CUDA context lives.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <thread>

#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"
#include "cuda/CubinInfo.h"
#include "cuda/Driver.h"
#include "cuda/RuntimeInternal.h"
#include "support/Diagnostic.h"
#include "tune/Measure.h"

namespace tessera::tune {

namespace {

using namespace cuda;

CudaOptions options_for(const std::string& target, bool split_k) {
  CudaOptions co;
  co.target = CudaTarget::parse(target);
  co.target.split_k = split_k;
  co.target_from_device = false;  // exactly the target the space was made for
  return co;
}

// `n` CUDA events, destroyed with the scope.
class Events {
 public:
  explicit Events(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      CUevent e = nullptr;
      if (CUresult r = driver()->cuEventCreate(&e, 0); r != CUDA_SUCCESS) {
        destroy();
        check(r, "cuEventCreate");
      }
      ev_.push_back(e);
    }
  }
  ~Events() { destroy(); }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  CUevent operator[](size_t i) const { return ev_[i]; }
  // Milliseconds from event a to event b (both recorded and b synchronized).
  double ms(size_t a, size_t b) const {
    float ms = 0;
    check(driver()->cuEventElapsedTime(&ms, ev_[a], ev_[b]), "cuEventElapsedTime");
    return ms;
  }

 private:
  void destroy() {
    for (CUevent e : ev_) driver()->cuEventDestroy(e);
    ev_.clear();
  }
  std::vector<CUevent> ev_;
};

// Ends the process when a candidate's GPU work outlives the timeout: a kernel that hangs cannot
// be stopped from the host, and the context is lost with it. What earlier batches measured is
// already stored.
class Watchdog {
 public:
  Watchdog(double timeout_s, std::string what) : what_(std::move(what)) {
    thread_ = std::thread([this, timeout_s] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, std::chrono::duration<double>(timeout_s), [this] { return done_; })) {
        std::fprintf(stderr, "error: tune: %s ran past --timeout on the GPU; ending the tune (the batches before "
                             "it are stored)\n", what_.c_str());
        std::_Exit(1);
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

Compiled compile_all(const Problem& p, const MeasureOptions& o, const std::vector<Config>& configs, int sms,
                     std::vector<Measurement>& out);

class CudaMeasurer : public Measurer {
 public:
  CudaMeasurer(const Problem& p, const MeasureOptions& o) : p_(p), o_(o) {}

  std::string device() const override { return cuda_device_name(); }
  std::string compiler() const override { return cuda_compiler_version(); }

  std::vector<Measurement> measure(const std::vector<Config>& configs) override {
    const DeviceInfo& dev = cuda::device();
    std::vector<Measurement> out;
    std::vector<std::unique_ptr<Kernel>> bound = compile_all(p_, o_, configs, dev.num_sms, out).bound;
    const int n = static_cast<int>(configs.size());
    std::vector<std::shared_ptr<CudaKernel>> compiled(configs.size());
    for (int i = 0; i < n; ++i) {
      if (!out[i].ok()) continue;
      try {
        compiled[i] = compile_cuda(*bound[i], options_for(p_.target, false));  // a disk cache hit
      } catch (const TesseraError& e) {
        out[i].status = "compile-error";
        out[i].message = one_line(e.what());
      }
    }
    upload();
    measure_rounds(out, o_.rounds, [&](size_t i, bool first, Measurement& m) {
      Watchdog dog(o_.timeout_s, "candidate " + config_str(configs[i]));
      try {
        if (first)
          if (std::string bad = check_one(*bound[i], *compiled[i]); !bad.empty()) {
            m.status = "check-failed";
            m.message = bad;
            return;
          }
        m.round_ms.push_back(time_one(*bound[i], *compiled[i]));
      } catch (const TesseraError& e) {
        m.status = "run-error";
        m.message = one_line(e.what());
      }
    });
    return out;
  }

 private:
  // The inputs in device memory, once. `host_` gives the launches their shapes (its data is not
  // read) and takes a checked run's outputs.
  void upload() {
    if (!bufs_.empty() || p_.inputs.empty()) return;
    host_ = p_.inputs;
    for (const Tensor& t : host_) {
      bufs_.emplace_back(std::max<size_t>(t.data.size(), 1));
      ptrs_.push_back(bufs_.back().get());
    }
    reload();
    flush_ = DeviceBuffer(size_t{256} << 20);  // do_bench's L2 flush (Triton's 256 MiB)
  }
  void reload() {
    for (size_t i = 0; i < host_.size(); ++i) bufs_[i].upload(p_.inputs[i].data.data(), p_.inputs[i].data.size());
  }
  // Device pointers for the kernel's parameters: the view parameters take the buffers in order.
  std::vector<uint64_t> param_ptrs(const Kernel& k) const {
    std::vector<uint64_t> ptrs;
    size_t v = 0;
    for (const Value* prm : k.params) ptrs.push_back(prm->type.is_view() && v < ptrs_.size() ? ptrs_[v++] : 0);
    return ptrs;
  }

  // The first run on fresh inputs, compared with the reference ("" when it passes).
  std::string check_one(const Kernel& bound, CudaKernel& ck) {
    reload();
    std::vector<KernelArg> args = p_.make_args(bound, host_);
    ck.launch(args, param_ptrs(bound), nullptr);
    check(driver()->cuCtxSynchronize(), "cuCtxSynchronize");
    for (size_t i = 0; i < host_.size(); ++i)
      if (p_.rows.empty() || is_row_view(p_, bound, i)) bufs_[i].download(host_[i].data.data(), host_[i].data.size());
    return check_against_reference(p_, bound, host_);
  }

  // Triton's do_bench (bench/cuda_bench.cpp, Timing::kDoBench), shortened for tuning: estimate
  // one launch from 5 (each after an L2 flush), warm up back to back for a quarter of
  // round_ms, then for round_ms of launches flush L2 and time the launch alone (all enqueued
  // before one synchronization); the median.
  double time_one(const Kernel& bound, CudaKernel& ck) {
    std::vector<KernelArg> args = p_.make_args(bound, host_);
    const std::vector<uint64_t> ptrs = param_ptrs(bound);
    auto launch = [&] { ck.launch(args, ptrs, nullptr); };
    auto flush = [&] {
      check(driver()->cuMemsetD32Async(flush_.get(), 0, flush_.bytes() / 4, nullptr), "cuMemsetD32Async");
    };
    launch();
    check(driver()->cuCtxSynchronize(), "cuCtxSynchronize");
    const Driver& d = *driver();
    Events five(2);
    check(d.cuEventRecord(five[0], nullptr), "cuEventRecord");
    for (int i = 0; i < 5; ++i) {
      flush();
      launch();
    }
    check(d.cuEventRecord(five[1], nullptr), "cuEventRecord");
    check(d.cuEventSynchronize(five[1]), "cuEventSynchronize");
    const double estimate = std::max(five.ms(0, 1) / 5, 1e-4);
    const int warmup = std::clamp(static_cast<int>(o_.round_ms / 4 / estimate), 1, o_.max_reps);
    const int iters = std::clamp(static_cast<int>(o_.round_ms / estimate), o_.min_reps, o_.max_reps);
    for (int i = 0; i < warmup; ++i) launch();
    // All launches enqueued at once, each after a flush between its own pair of events.
    Events ev(2 * static_cast<size_t>(iters));
    for (int i = 0; i < iters; ++i) {
      flush();
      check(d.cuEventRecord(ev[2 * i], nullptr), "cuEventRecord");
      launch();
      check(d.cuEventRecord(ev[2 * i + 1], nullptr), "cuEventRecord");
    }
    check(d.cuEventSynchronize(ev[2 * static_cast<size_t>(iters) - 1]), "cuEventSynchronize");
    std::vector<double> ms;
    for (int i = 0; i < iters; ++i) ms.push_back(ev.ms(2 * i, 2 * i + 1));
    return median_of(ms);
  }

  const Problem& p_;
  MeasureOptions o_;
  std::vector<Tensor> host_;  // the shapes of the launches, and a checked run's outputs
  std::vector<DeviceBuffer> bufs_;
  std::vector<uint64_t> ptrs_;
  DeviceBuffer flush_;
};

}  // namespace

namespace {

// cuda_compile_candidates, keeping the bound kernels for the timing.
Compiled compile_all(const Problem& p, const MeasureOptions& o, const std::vector<Config>& configs, int sms,
                     std::vector<Measurement>& out) {
  if (!p.kernel) throw TesseraError("tune: no kernel to measure");
  std::string why;
  if (!nvrtc_available(&why)) throw TesseraError("tessera tune: cannot compile for " + p.target + " here: " + why);
  const int64_t capacity = sms > 0 ? sms : 132;
  // In each child: NVRTC into the disk cache (the child never touches the driver: a CUDA
  // context does not survive a fork), and the split-K compilation too when the programs at this
  // shape are few enough that the runtime would launch it (CudaTarget::split_k).
  Compiled c = bind_and_compile(p, o, configs, out, [&](const Kernel& b) {
    auto k = compile_cuda(b, options_for(p.target, false));
    if (k->split_k_capable && !p.inputs.empty()) {
      // (This is a forked child: the inputs are its own copy, and make_args only points at them.)
      std::array<int64_t, 3> grid = cuda_grid_size(b, p.make_args(b, const_cast<std::vector<Tensor>&>(p.inputs)));
      if (grid[0] * grid[1] * grid[2] <= capacity) compile_cuda(b, options_for(p.target, true));
    }
    CubinResources res = cubin_resources(k->cubin(), k->symbol);
    return std::to_string(res.registers) + " " +
           std::to_string(res.static_smem < 0 ? -1 : res.static_smem + k->dynamic_smem_bytes) + " " +
           std::to_string(k->block_threads);
  });
  for (size_t i = 0; i < out.size(); ++i) {
    Measurement& m = out[i];
    if (!m.ok()) continue;
    std::istringstream in(c.answers[i]);
    int threads = 0;
    in >> m.registers >> m.smem_bytes >> threads;
    if (std::string why = cuda_resources_reject(m.registers, threads, m.smem_bytes, p.target); !why.empty()) {
      m.status = "resources";
      m.message = why;
    }
  }
  return c;
}

}  // namespace

std::vector<Measurement> cuda_compile_candidates(const Problem& p, const MeasureOptions& o,
                                                 const std::vector<Config>& configs, int sms) {
  std::vector<Measurement> out;
  compile_all(p, o, configs, sms, out);
  return out;
}

std::string cuda_resources_reject(int registers, int threads, int64_t smem_bytes, const std::string& target) {
  if (registers > 0 && int64_t{registers} * threads > 65536)
    return "ptxas: " + std::to_string(registers) + " registers x " + std::to_string(threads) +
           " threads > 65536 per multiprocessor";
  if (const int64_t limit = cuda_smem_limit(target); smem_bytes > limit)
    return std::to_string(smem_bytes) + " bytes of shared memory per CTA > " + std::to_string(limit) + " on " + target;
  return "";
}

std::string cuda_cannot_measure() {
  std::string why;
  if (!nvrtc_available(&why)) return "NVRTC is not available (" + why + ")";
  if (!cuda_device_available(&why)) return why;
  return "";
}

std::unique_ptr<Measurer> make_cuda_measurer(const Problem& p, const MeasureOptions& o) {
  if (!p.kernel) throw TesseraError("tune: no kernel to measure");
  if (o.rounds < 1) throw TesseraError("tune: rounds must be at least 1");
  if (std::string why = cuda_cannot_measure(); !why.empty())
    throw TesseraError("tessera tune: cannot measure on cuda here: " + why);
  return std::make_unique<CudaMeasurer>(p, o);
}

std::string cuda_device_name() { return cuda::device().name; }

std::string cuda_compiler_version() {
  return std::string(kCudaCodegenVersion) + " " + nvrtc_version_string();
}

}  // namespace tessera::tune
