// The measurement harness of the cuda backend (Measure.h, make_cuda_measurer): NVRTC compiles in
// parallel child processes, a prune on the cubins' resources, then do_bench timings in this
// process, where the CUDA context lives.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>

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

// CUDA events, made as needed and kept for the process: a round enqueues a pair per launch.
class EventPool {
 public:
  // At least n events; [i] is valid until the next call of reserve.
  void reserve(size_t n) {
    while (ev_.size() < n) {
      CUevent e = nullptr;
      check(driver()->cuEventCreate(&e, 0), "cuEventCreate");
      ev_.push_back(e);
    }
  }
  CUevent operator[](size_t i) const { return ev_[i]; }
  // Milliseconds from event a to event b (both recorded and b synchronized).
  double ms(size_t a, size_t b) const {
    float ms = 0;
    check(driver()->cuEventElapsedTime(&ms, ev_[a], ev_[b]), "cuEventElapsedTime");
    return ms;
  }

 private:
  std::vector<CUevent> ev_;  // never destroyed: the process's context owns them to its end
};

// What one process keeps across measurers (a `tune --shapes` run tunes every shape in one
// process, on one CUDA context): each config's compiled and loaded kernel, by its bound IR's
// hash (the cubin does not depend on the shape, so a config loaded for one shape is launched at
// every other with no emission, disk read or module load), the compile children's answers
// (registers, shared memory, threads) by that hash, the L2 flush buffer and the events.
struct Session {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<CudaKernel>> kernels;
  std::map<std::string, std::string> answers;
  DeviceBuffer flush;
  EventPool events;
};
Session& session() {
  static Session* s = new Session;  // never destroyed: its buffers must not outlive the driver at exit
  return *s;
}

Compiled compile_all(const Problem& p, const MeasureOptions& o, const std::vector<Config>& configs, int sms,
                     std::vector<Measurement>& out, MeasureStats* stats = nullptr);

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class CudaMeasurer : public Measurer {
 public:
  CudaMeasurer(const Problem& p, const MeasureOptions& o)
      : p_(p), o_(o), dog_([this](const std::string& what) { hung(what); }) {}

  std::string device() const override { return cuda_device_name(); }
  std::string compiler() const override { return cuda_compiler_version(); }
  MeasureStats stats() const override { return stats_; }

  std::vector<Measurement> measure(const std::vector<Config>& configs) override {
    const DeviceInfo& dev = cuda::device();
    std::vector<Measurement> out;
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::unique_ptr<Kernel>> bound = compile_all(p_, o_, configs, dev.num_sms, out, &stats_).bound;
    stats_.compile_s += seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const int n = static_cast<int>(configs.size());
    std::vector<std::shared_ptr<CudaKernel>> compiled(configs.size());
    for (int i = 0; i < n; ++i) {
      if (!out[i].ok()) continue;
      try {
        compiled[i] = kernel_for(*bound[i], out[i].bound_hash);
      } catch (const TesseraError& e) {
        out[i].status = "compile-error";
        out[i].message = one_line(e.what());
      }
    }
    upload();
    stats_.load_s += seconds_since(t0);
    measure_rounds(out, o_.rounds, [&](size_t i, bool first, Measurement& m) {
      {
        std::lock_guard<std::mutex> lock(current_mu_);
        current_ = m;
      }
      dog_.arm(o_.timeout_s, "candidate " + config_str(configs[i]));
      try {
        if (first) {
          auto tc = std::chrono::steady_clock::now();
          std::string bad = check_one(*bound[i], *compiled[i]);
          stats_.check_s += seconds_since(tc);
          ++stats_.checked;
          if (!bad.empty()) {
            m.status = "check-failed";
            m.message = bad;
          }
        }
        if (m.ok()) {
          auto tt = std::chrono::steady_clock::now();
          m.round_ms.push_back(time_one(*bound[i], *compiled[i]));
          stats_.time_s += seconds_since(tt);
          ++stats_.timed;
        }
      } catch (const TesseraError& e) {
        m.status = "run-error";
        m.message = one_line(e.what());
        // A sticky error (an illegal address, a failed launch) loses the context: every later
        // candidate, of this shape and the next, would fail too. Stored, then the process ends
        // (as for a hang), and a later tune leaves the config out at this shape.
        if (CUresult r = driver()->cuCtxSynchronize(); r != CUDA_SUCCESS) {
          m.message += " (the CUDA context is lost: " + error_text(r, "cuCtxSynchronize") + ")";
          end_tune(m, "candidate " + config_str(configs[i]) + " lost the CUDA context");
        }
      }
      dog_.disarm();
    });
    return out;
  }

 private:
  // The watchdog's end of a candidate whose GPU work never finished: recorded (on_hang), then
  // the process ends (Watchdog's default).
  void hung(const std::string& what) {
    Measurement m;
    {
      std::lock_guard<std::mutex> lock(current_mu_);
      m = current_;
    }
    m.status = "timeout";
    m.round_ms.clear();
    m.ms = 0;
    m.message = "its GPU work ran past --timeout (" + std::to_string(o_.timeout_s) + " s); the tune ended there";
    end_tune(m, what + " ran past --timeout on the GPU");
  }
  // Stores `m` (on_hang) and ends the process: the GPU or its context cannot be recovered.
  [[noreturn]] void end_tune(const Measurement& m, const std::string& why) {
    if (o_.on_hang) {
      try {
        o_.on_hang(m);
      } catch (...) {
      }
    }
    std::fprintf(stderr, "error: tune: %s; ending the tune (what was measured before it is stored, and this "
                         "candidate as %s)\n", why.c_str(), m.status.c_str());
    std::_Exit(1);
  }

  // The config's kernel, compiled (a disk cache hit after the compile children) and loaded once
  // per process.
  std::shared_ptr<CudaKernel> kernel_for(const Kernel& bound, const std::string& hash) {
    Session& s = session();
    {
      std::lock_guard<std::mutex> lock(s.mu);
      if (auto it = s.kernels.find(p_.target + " " + hash); it != s.kernels.end()) return it->second;
    }
    auto k = compile_cuda(bound, options_for(p_.target, false));
    std::lock_guard<std::mutex> lock(s.mu);
    return s.kernels.emplace(p_.target + " " + hash, std::move(k)).first->second;
  }

  // The inputs in device memory, once per measurer (per shape); a pristine copy of each view
  // the kernel writes, restored on the device before each checked run; host tensors of those
  // views for the checked runs' outputs.
  void upload() {
    if (!bufs_.empty() || p_.inputs.empty()) return;
    const Kernel& k = *p_.kernel;
    for (size_t i = 0; i < p_.inputs.size(); ++i) {
      const Tensor& t = p_.inputs[i];
      bufs_.emplace_back(std::max<size_t>(t.data.size(), 1));
      bufs_.back().upload(t.data.data(), t.data.size());
      ptrs_.push_back(bufs_.back().get());
      const bool written = is_written_view(k, i);
      if (written) {
        pristine_.emplace_back(std::max<size_t>(t.data.size(), 1));
        check(driver()->cuMemcpyDtoD(pristine_.back().get(), bufs_.back().get(), t.data.size()), "cuMemcpyDtoD");
      } else {
        pristine_.emplace_back();
      }
      // A sampled check takes only the rows (filled per checked run); else the whole view.
      std::vector<int64_t> shape = t.shape;
      if (!p_.rows.empty() && !shape.empty()) shape[0] = static_cast<int64_t>(p_.rows.size());
      got_.push_back(written ? Tensor(t.dtype, shape) : no_rows());
    }
    Session& s = session();
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.flush.get()) s.flush = DeviceBuffer(size_t{256} << 20);  // do_bench's L2 flush (Triton's 256 MiB)
  }
  // Device pointers for the kernel's parameters: the view parameters take the buffers in order.
  std::vector<uint64_t> param_ptrs(const Kernel& k) const {
    std::vector<uint64_t> ptrs;
    size_t v = 0;
    for (const Value* prm : k.params) ptrs.push_back(prm->type.is_view() && v < ptrs_.size() ? ptrs_[v++] : 0);
    return ptrs;
  }
  // Arguments for a launch: the problem's tensors give the shapes and scalars (their data is
  // not read; make_args only points at them).
  std::vector<KernelArg> args_for(const Kernel& bound) {
    return p_.make_args(bound, const_cast<std::vector<Tensor>&>(p_.inputs));
  }

  // The first run on fresh outputs (the written views restored on the device), compared with
  // the reference on what the check compares ("" when it passes): only those views come back,
  // and on a sampled check only their sampled rows.
  std::string check_one(const Kernel& bound, CudaKernel& ck) {
    const Driver& d = *driver();
    for (size_t i = 0; i < bufs_.size(); ++i)
      if (pristine_[i].get())
        check(d.cuMemcpyDtoD(bufs_[i].get(), pristine_[i].get(), p_.inputs[i].data.size()), "cuMemcpyDtoD");
    std::vector<KernelArg> args = args_for(bound);
    ck.launch(args, param_ptrs(bound), nullptr);
    check(d.cuCtxSynchronize(), "cuCtxSynchronize");
    for (size_t i = 0; i < bufs_.size(); ++i) {
      if (!pristine_[i].get()) continue;
      Tensor& g = got_[i];
      if (p_.rows.empty()) {
        bufs_[i].download(g.data.data(), g.data.size());
        continue;
      }
      if (!is_row_view(p_, bound, i) || g.shape.empty()) continue;  // not compared
      const size_t row_bytes = g.data.size() / std::max<size_t>(p_.rows.size(), 1);
      for (size_t j = 0; j < p_.rows.size(); ++j)
        check(d.cuMemcpyDtoH(g.data.data() + j * row_bytes, bufs_[i].get() + static_cast<size_t>(p_.rows[j]) * row_bytes,
                             row_bytes),
              "cuMemcpyDtoH");
    }
    return p_.rows.empty() ? check_against_reference(p_, bound, got_) : check_rows_against_reference(p_, bound, got_);
  }

  // Triton's do_bench (bench/cuda_bench.cpp, Timing::kDoBench), with a short rep for ranking:
  // estimate one launch from 3 (each after an L2 flush), warm up back to back for a quarter of
  // round_ms, then for round_ms of launches flush L2 and time the launch alone (all enqueued
  // before one synchronization); the median.
  double time_one(const Kernel& bound, CudaKernel& ck) {
    std::vector<KernelArg> args = args_for(bound);
    const std::vector<uint64_t> ptrs = param_ptrs(bound);
    Session& s = session();
    auto launch = [&] { ck.launch(args, ptrs, nullptr); };
    auto flush = [&] {
      check(driver()->cuMemsetD32Async(s.flush.get(), 0, s.flush.bytes() / 4, nullptr), "cuMemsetD32Async");
    };
    const Driver& d = *driver();
    EventPool& ev = s.events;
    ev.reserve(2);
    check(d.cuEventRecord(ev[0], nullptr), "cuEventRecord");
    for (int i = 0; i < 3; ++i) {
      flush();
      launch();
    }
    check(d.cuEventRecord(ev[1], nullptr), "cuEventRecord");
    check(d.cuEventSynchronize(ev[1]), "cuEventSynchronize");
    const double estimate = std::max(ev.ms(0, 1) / 3, 1e-4);
    const int warmup = std::clamp(static_cast<int>(o_.round_ms / 4 / estimate), 1, o_.max_reps);
    const int iters = std::clamp(static_cast<int>(o_.round_ms / estimate), o_.min_reps, o_.max_reps);
    for (int i = 0; i < warmup; ++i) launch();
    // All launches enqueued at once, each after a flush between its own pair of events.
    ev.reserve(2 * static_cast<size_t>(iters));
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
  MeasureStats stats_;
  std::vector<DeviceBuffer> bufs_, pristine_;  // pristine_: empty for the views not written
  std::vector<uint64_t> ptrs_;
  // A checked run's written views, or their sampled rows on a sampled check (no_rows() for the
  // others).
  std::vector<Tensor> got_;
  std::mutex current_mu_;
  Measurement current_;  // (a copy of) the candidate on the GPU now, for the watchdog's thread
  Watchdog dog_;  // last: its thread ends before the members it reads
};

}  // namespace

namespace {

// cuda_compile_candidates, keeping the bound kernels for the timing.
Compiled compile_all(const Problem& p, const MeasureOptions& o, const std::vector<Config>& configs, int sms,
                     std::vector<Measurement>& out, MeasureStats* stats) {
  if (!p.kernel) throw TesseraError("tune: no kernel to measure");
  std::string why;
  if (!nvrtc_available(&why)) throw TesseraError("tessera tune: cannot compile for " + p.target + " here: " + why);
  const int64_t capacity = sms > 0 ? sms : 132;
  // Whether the runtime would launch the split-K compilation at this shape (the programs are
  // few, or the config's split_k knob asks for it: CudaTarget::split_k), so that it must be
  // compiled too. make_args only points at the inputs.
  auto few_programs = [&](const Kernel& b) {
    if (p.inputs.empty()) return false;
    if (const ConstexprDecl* d = b.find_constexpr(kSplitKKnob); d && d->value >= 2) return true;
    std::array<int64_t, 3> grid = cuda_grid_size(b, p.make_args(b, const_cast<std::vector<Tensor>&>(p.inputs)));
    return grid[0] * grid[1] * grid[2] <= capacity;
  };
  // The memo of the children's answers: a config compiled before in this process (its cubins
  // on disk, the split-K one too where this shape needs it) starts no child.
  auto memo_key = [&](const Kernel& b) {
    return p.target + " " + kernel_ir_hash(b) + (few_programs(b) ? " few" : "");
  };
  Session& s = session();
  // In each child: NVRTC into the disk cache (the child never touches the driver: a CUDA
  // context does not survive a fork), and the split-K compilation too when the runtime would
  // launch it.
  Compiled c = bind_and_compile(p, o, configs, out, [&](const Kernel& b) {
    auto k = compile_cuda(b, options_for(p.target, false));
    if (k->split_k_capable && few_programs(b)) compile_cuda(b, options_for(p.target, true));
    CubinResources res = cubin_resources(k->cubin(), k->symbol);
    return std::to_string(res.registers) + " " +
           std::to_string(res.static_smem < 0 ? -1 : res.static_smem + k->dynamic_smem_bytes) + " " +
           std::to_string(k->block_threads);
  }, [&](const Kernel& b) {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.answers.find(memo_key(b));
    return it == s.answers.end() ? std::string() : it->second;
  });
  if (stats) stats->forks += c.forks;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].ok() && c.bound[i] && !c.answers[i].empty()) {
      std::lock_guard<std::mutex> lock(s.mu);
      s.answers.emplace(memo_key(*c.bound[i]), c.answers[i]);
    }
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

// (The emitter in effect is part of it: a config measured when the planning emitter printed
// every kernel, before session 48, is not the default's any more.)
std::string cuda_compiler_version() {
  const auto e = CudaTarget::emitter_from_environment().value_or(CudaTarget::Emitter::Auto);
  const char* emitter = e == CudaTarget::Emitter::Auto ? "auto" : e == CudaTarget::Emitter::Layouts ? "layouts" : "planning";
  return std::string(kCudaCodegenVersion) + " emitter-" + emitter + " " + nvrtc_version_string();
}

}  // namespace tessera::tune
