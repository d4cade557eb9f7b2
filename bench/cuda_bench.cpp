// CUDA benchmarks of the library kernels: median kernel time from CUDA events after warm-up,
// on inputs larger than L2 (or rotated across enough buffer sets to exceed it), with the
// kernel's own figure (GB/s or TFLOP/s); NVRTC compile time per kernel and the time of a
// warm-cache hit. Kernels are bound with the device target's preferred configs
// (LibraryKernel::target_configs) and compiled for exactly that target.
//
// matmul (bf16): 4096^3, 8192^3, M=4096 N=14336 K=4096, M=128 N=14336 K=4096 and M=16 N=4096
// K=4096 (the shapes of .devdeps/bench/anchors_h200.py, named MxNxK there too), each against
// cuBLAS's GEMM on the same buffers, with the ratio, and the achieved HBM bandwidth (bytes of
// A + B + C over the time; the figure that matters for M = 16). The default tile is the
// library's for the target and the shape (size_configs: 64-row tiles for few programs). Each
// shape also runs 2-4 alternative tiles (128x256x64 where it is not the default, 128x128x64,
// 64x256x64, and for small M 64x128x64, 64x64x64); the best of those and the default is the
// `matmul_best` row, which names its config. Every matmul result
// (cuBLAS's, alternatives and tuned configs included) is checked on sampled elements against
// a double-precision product.
// matmul_mma_sync (first shape, not --quick unless --tune): the portable mma.sync path (what sm_80
// runs, and sm_90a for tiles outside the wgmma envelope) compiled for sm_90 on Hopper, at the
// kernel's default tile and four others; the best against cuBLAS, every tile in its note.
// --tune: matmul over its whole constexpr space at the first shape only (4096^3; 2048^3 with
// --quick); softmax/layernorm/rmsnorm over every BLOCK_N (the loop branch included) and CTA
// size, each checked against the default's output.
// topk (f32; bf16 too with --only topk): 64 x 131072 at k = 64, 256 and 1024, and 1 x 2^24 at k = 1024; sort (f32):
// 4096 x 4096, one tile a row. The anchors time torch.topk / torch.sort at the same shapes (compare the `topk` rows' ms).
// Where topk runs as the segmented top-k (LibraryKernel::stages), its row times the stages and
// `topk_one_kernel` the whole-row kernel at the same shape.
// --quick: small row shapes and one matmul shape (2048^3) without alternatives.
// --mnk N or MxNxK: that one matmul shape instead of the list.
//
// Timing (--timing): `dobench` (the default) times each launch as Triton's do_bench times the
// anchors (L2 flushed before each launch, 25 ms of warm-up, 100 ms of launches, median);
// `stream` times launches back to back without flushes. The default matmul tile and cuBLAS
// are timed in alternating rounds (--rounds R, default 3; 1 with --quick), median of rounds.
//
//   cuda_bench [--quick] [--json [FILE]] [--only NAME] [--tune] [--iters N] [--dump-cubin DIR]
//              [--vec-n N] [--rows M --cols N] [--mnk N|MxNxK] [--split-k N] [--stream-k]
//              [--timing dobench|stream] [--rounds R] [--set NAME=V ...]
//
// Without a GPU it still reports the compile and cache-hit times.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/CudaBackend.h"
#include "cuda/Driver.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "support/Float.h"
#include "tune/Space.h"

using namespace tessera;
using namespace tessera::cuda;

namespace {

struct Flags {
  bool quick = false, tune = false, json = false;
  bool default_rows = true;  // the row shapes were not changed by flags
  bool matmul_alternatives = true;  // time the alternative tiles of each matmul shape (not --quick)
  std::string json_file, only, dump_cubin;
  int iters = 0;  // 0: adaptive
  int split_k = 0;  // CudaOptions::split_k: 0 automatic, 1 never, n >= 2 always n ways
  bool stream_k = false;  // CudaTarget::stream_k (--stream-k: share the last partial wave's K work)
  // --split-ab: each matmul shape also compiled with CudaOptions::split_k_cluster = false, and
  // the two fixups of a split launch (cluster and workspace) timed in alternating rounds.
  bool split_ab = false;
  std::vector<std::pair<std::string, int64_t>> sets;  // --set NAME=V, in order
  // Rounds of the default matmul tile and cuBLAS timed alternately (--rounds; 0: 3, 1 with --quick).
  int rounds = 0;
  int64_t vec_n = int64_t{1} << 28;
  std::vector<std::pair<int64_t, int64_t>> row_sizes = {{16384, 4096}, {4096, 32768}};
  // M, N, K of each matmul shape; the first is the one --tune searches.
  std::vector<std::array<int64_t, 3>> matmul_shapes = {
      {4096, 4096, 4096}, {8192, 8192, 8192}, {4096, 14336, 4096}, {128, 14336, 4096}, {16, 4096, 4096}};
};

struct Result {
  std::string kernel, dtype, sizes, config, unit;
  double median_ms = 0, figure = 0;
  double compile_s = 0, memory_hit_ms = 0, disk_hit_ms = 0;
  // matmul rows: cuBLAS's TFLOP/s at the same shape, figure / that, and the bytes of A + B + C
  // over the median time (GB/s); 0 where not measured.
  double cublas = 0, cublas_ratio = 0, hbm_gbps = 0;
  double host_us = 0;  // host time per launch (submission), 0 where not measured
  double back_to_back_ms = 0;  // matmuls with M <= 64: time per launch back to back
  std::string note;
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string sizes_str(const Sizes& s) {
  std::string out;
  for (const auto& [n, v] : s) out += (out.empty() ? "" : ",") + n + "=" + std::to_string(v);
  return out;
}

std::string config_str(const Kernel& k) {
  std::string out;
  for (const auto& c : k.constexprs) out += (out.empty() ? "" : ",") + c.name + "=" + std::to_string(c.value);
  return out;
}

// Fill a device buffer from one host chunk: floats standard normal (torch.randn, as the
// anchors' inputs: the values a tensor core multiplies change its power draw, and so the clock
// a long GEMM runs at), integers small and positive.
void fill_random(const DeviceBuffer& buf, ScalarKind dt, uint64_t seed) {
  size_t esz = scalar_bytes(dt);
  size_t chunk = std::min<size_t>(buf.bytes(), size_t{8} << 20) / esz * esz;
  if (chunk == 0) return;
  std::vector<uint8_t> host(chunk);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (size_t i = 0; i < chunk / esz; ++i) {
    uint64_t bits = is_float(dt) ? float_to_bits(dt, normal(rng))
                                 : static_cast<uint64_t>(static_cast<int64_t>(u(rng) * 8) + 9);
    std::memcpy(host.data() + i * esz, &bits, esz);  // little-endian: the low bytes
  }
  for (size_t off = 0; off < buf.bytes(); off += chunk) {
    size_t n = std::min(chunk, buf.bytes() - off);
    check(driver()->cuMemcpyHtoD(buf.get() + off, host.data(), n), "cuMemcpyHtoD");
  }
}

// How per-launch times are taken (--timing). kDoBench, the default, is Triton's `do_bench`,
// which times every anchor in .devdeps/bench/anchors_h200.py: estimate one launch from 5
// (each after an L2 flush), warm up back to back for 25 ms, then for 100 ms of launches flush
// L2 (a 256 MiB memset) and record an event pair around the launch alone. kStream is this
// bench's former way: launches back to back, an event pair around each, no flush. They differ
// most for memory-bound kernels (bench/RESULTS.md, session 8: 16x4096x4096 20.4 against 17.5
// us, 128x14336x4096 -16%; the large GEMMs within 1%): after the memset L2 is full of dirty
// lines, which a kernel's reads must first write back. A ratio to an anchor is only fair when
// both sides are timed the same way.
enum class Timing { kDoBench, kStream };
Timing g_timing = Timing::kDoBench;

// `n` CUDA events, destroyed with the scope: a failed check throws, main reports the case and
// goes on to the next, and the events must not stay behind.
class Events {
 public:
  explicit Events(size_t n) {
    try {
      ev_.reserve(n);
      for (size_t i = 0; i < n; ++i) {
        CUevent e = nullptr;
        check(driver()->cuEventCreate(&e, 0), "cuEventCreate");
        ev_.push_back(e);
      }
    } catch (...) {
      destroy();
      throw;
    }
  }
  ~Events() { destroy(); }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  CUevent operator[](size_t i) const { return ev_[i]; }
  CUevent back() const { return ev_.back(); }

 private:
  void destroy() {
    for (CUevent e : ev_) driver()->cuEventDestroy(e);
    ev_.clear();
  }
  std::vector<CUevent> ev_;
};

// Milliseconds between an event pair around what `enqueue` puts on the default stream.
template <class Enqueue>
double events_ms(Enqueue&& enqueue) {
  const Driver& d = *driver();
  Events ev(2);
  check(d.cuEventRecord(ev[0], nullptr), "cuEventRecord");
  enqueue();
  check(d.cuEventRecord(ev[1], nullptr), "cuEventRecord");
  check(d.cuEventSynchronize(ev[1]), "cuEventSynchronize");
  float ms = 0;
  check(d.cuEventElapsedTime(&ms, ev[0], ev[1]), "cuEventElapsedTime");
  return ms;
}

// do_bench's L2 flush: zero 256 MiB (Triton 3.6's get_empty_cache_for_benchmark).
void flush_l2() {
  static DeviceBuffer flush(size_t{256} << 20);
  check(driver()->cuMemsetD32Async(flush.get(), 0, flush.bytes() / 4, nullptr), "cuMemsetD32Async");
}

// Per-launch CUDA event times (ms) after warm-up, under g_timing; `iters_flag` > 0 fixes the
// number of timed launches (else kDoBench's 100 ms worth, as do_bench, unclamped; or kStream's
// 0.5 s worth within 10..200).
template <class Launch>
std::vector<float> time_launches(Launch&& launch, int iters_flag) {
  const Driver& d = *driver();
  const bool dobench = g_timing == Timing::kDoBench;
  for (int i = 0; i < 3; ++i) launch(i);
  check(d.cuCtxSynchronize(), "cuCtxSynchronize");
  int iters = 0;
  if (dobench) {
    double five = events_ms([&] {
      for (int i = 0; i < 5; ++i) {
        flush_l2();
        launch(i);
      }
    });
    double estimate = std::max(five / 5.0, 1e-4);
    int warmup = std::max(1, static_cast<int>(25 / estimate));
    iters = iters_flag > 0 ? iters_flag : std::max(1, static_cast<int>(100 / estimate));
    for (int i = 0; i < warmup; ++i) launch(i);
  } else {
    double t0 = now_s();
    launch(0);
    check(d.cuCtxSynchronize(), "cuCtxSynchronize");
    double one = std::max(now_s() - t0, 1e-6);
    iters = iters_flag > 0 ? iters_flag : static_cast<int>(std::clamp(0.5 / one, 10.0, 200.0));
  }
  Events ev(2 * static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    if (dobench) flush_l2();
    check(d.cuEventRecord(ev[2 * i], nullptr), "cuEventRecord");
    launch(i);
    check(d.cuEventRecord(ev[2 * i + 1], nullptr), "cuEventRecord");
  }
  check(d.cuEventSynchronize(ev.back()), "cuEventSynchronize");
  std::vector<float> ms(iters);
  for (int i = 0; i < iters; ++i) check(d.cuEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]), "cuEventElapsedTime");
  return ms;
}

// Launches back to back between one pair of events (iters launches, inputs rotated by the
// caller): the time per launch when the GPU never waits for the next launch, as in a stream of
// kernels or a CUDA graph. Reported beside the per-launch median for memory-bound matmuls,
// where the gap between launches is a large part of the per-launch figure.
template <class Launch>
double time_back_to_back_ms(Launch&& launch, int iters) {
  return events_ms([&] {
    for (int i = 0; i < iters; ++i) launch(i);
  }) / iters;
}

// The middle value; of an even count the upper of the two middle ones (--rounds 2: the slower).
template <class T>
double median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Device buffers for one kernel: enough sets that one pass over them all exceeds 2x L2.
struct Buffers {
  std::vector<std::vector<DeviceBuffer>> sets;
  std::vector<Tensor> shapes;  // host tensors for binding dims (their data is not used)
  std::vector<KernelArg> args;
};

Buffers make_buffers(const Kernel& k, const Sizes& sizes, uint64_t l2_bytes) {
  Buffers b;
  size_t footprint = 0;
  for (const Value* p : k.view_params()) {
    std::vector<int64_t> shape;
    for (const Dim& d : p->type.shape) shape.push_back(d.is_static() ? d.value : sizes.at(d.symbol));
    // bind_dims checks that a tensor's data matches its shape, so these hold host memory too
    // (never copied: the device buffers are filled directly).
    Tensor t(p->type.elem, shape);
    footprint += static_cast<size_t>(t.numel()) * scalar_bytes(t.dtype);
    b.shapes.push_back(std::move(t));
  }
  size_t nsets = std::clamp<size_t>((2 * l2_bytes + footprint - 1) / std::max<size_t>(footprint, 1), 1, 16);
  size_t ti = 0;
  for (const Value* p : k.params) {
    KernelArg a;
    if (p->type.is_view()) a.tensor = &b.shapes[ti++];
    else if (is_float(p->type.elem)) a.scalar = 0.5;
    else a.scalar = int64_t{1};
    b.args.push_back(a);
  }
  for (size_t s = 0; s < nsets; ++s) {
    std::vector<DeviceBuffer> set;
    for (size_t i = 0; i < b.shapes.size(); ++i) {
      set.emplace_back(static_cast<size_t>(b.shapes[i].numel()) * scalar_bytes(b.shapes[i].dtype));
      fill_random(set.back(), b.shapes[i].dtype, 1000 * s + i + 1);
    }
    b.sets.push_back(std::move(set));
  }
  return b;
}

std::vector<uint64_t> ptrs_for(const Kernel& k, const Buffers& b, size_t set) {
  std::vector<uint64_t> ptrs(k.params.size(), 0);
  size_t vi = 0;
  for (size_t j = 0; j < k.params.size(); ++j)
    if (k.params[j]->type.is_view()) ptrs[j] = b.sets[set][vi++].get();
  return ptrs;
}

// ptrs_for of every buffer set, for launches that rotate through them.
std::vector<std::vector<uint64_t>> ptrs_for_all(const Kernel& k, const Buffers& b) {
  std::vector<std::vector<uint64_t>> ptrs;
  for (size_t s = 0; s < b.sets.size(); ++s) ptrs.push_back(ptrs_for(k, b, s));
  return ptrs;
}

// A matmul row's median time and the figures from it (TFLOP/s, bytes of A + B + C per second).
void set_matmul_time(const LibraryKernel& lk, const Sizes& sizes, ScalarKind dt, Result& x, double ms) {
  x.median_ms = ms;
  x.unit = "TFLOP/s";
  x.figure = lk.flops(sizes, dt) / (ms * 1e-3) / 1e12;
  x.hbm_gbps = lk.bytes(sizes, dt) / (ms * 1e-3) / 1e9;
}

// Time one compiled kernel on the device; fills median and figure.
void measure(const LibraryKernel& lk, const Kernel& k, CudaKernel& ck, const Sizes& sizes, ScalarKind dt,
             Result& r, const Flags& f, Buffers* keep = nullptr) {
  const DeviceInfo& dev = device();
  Buffers local;
  Buffers& b = keep ? *keep : local;
  if (b.sets.empty()) b = make_buffers(k, sizes, static_cast<uint64_t>(dev.l2_bytes));
  const auto ptrs = ptrs_for_all(k, b);
  auto ms = time_launches([&](int i) { ck.launch(b.args, ptrs[i % ptrs.size()], nullptr); }, f.iters);
  r.median_ms = median(ms);
  // Host time per launch (submission only; the GPU runs behind): when it approaches the kernel's
  // time, the event figure measures the host, not the kernel.
  {
    constexpr int kHostReps = 50;
    double t0 = now_s();
    for (int i = 0; i < kHostReps; ++i) ck.launch(b.args, ptrs[i % ptrs.size()], nullptr);
    r.host_us = (now_s() - t0) / kHostReps * 1e6;
    check(driver()->cuCtxSynchronize(), "cuCtxSynchronize");
  }
  double flops = lk.flops ? lk.flops(sizes, dt) : 0, bytes = lk.bytes ? lk.bytes(sizes, dt) : 0;
  if (lk.name.rfind("matmul", 0) == 0 && flops > 0) {
    set_matmul_time(lk, sizes, dt, r, r.median_ms);
    if (sizes.count("M") && sizes.at("M") <= 64)
      r.back_to_back_ms = time_back_to_back_ms([&](int i) { ck.launch(b.args, ptrs[i % ptrs.size()], nullptr); },
                                               static_cast<int>(ms.size()));
  } else {
    r.figure = bytes / (r.median_ms * 1e-3) / 1e9;
    r.unit = "GB/s";
  }
  if (b.sets.size() > 1) r.note = "rotating " + std::to_string(b.sets.size()) + " buffer sets";
}

// A library op that runs as several kernels at these sizes (LibraryKernel::stages, the
// segmented top-k): every stage compiled (r.compile_s: their sum, cold), the op's buffers as
// for its own kernel and the temporaries allocated once; each timed launch runs the stages in
// turn on the stream (do_bench's L2 flush before the first). The note names the kernels.
void measure_stages(const LibraryKernel& lk, const Kernel& op, const LibraryStages& st, ScalarKind dt,
                    const Sizes& sizes, const CudaOptions& opts, Result& r, const Flags& f) {
  std::vector<std::unique_ptr<Kernel>> bound;
  std::vector<std::shared_ptr<CudaKernel>> cks;
  r.compile_s = 0;
  r.note = std::to_string(st.stages.size()) + " kernels:";
  for (const LibraryStage& s : st.stages) {
    bound.push_back(bind_constexprs(*s.build(dt), s.config));
    cks.push_back(compile_cuda(*bound.back(), opts));
    r.compile_s += cks.back()->compile_seconds;
    r.note += " " + bound.back()->name + "(" + config_str(*bound.back()) + ")";
  }
  Buffers b = make_buffers(op, sizes, static_cast<uint64_t>(device().l2_bytes));
  std::vector<Tensor> temps;
  std::vector<DeviceBuffer> tbufs;
  std::vector<KernelArg> targs;
  std::vector<uint64_t> tptrs;
  for (const LibraryTemporary& t : st.temporaries) {
    temps.emplace_back(t.dtype, t.shape);
    tbufs.emplace_back(static_cast<size_t>(temps.back().numel()) * scalar_bytes(t.dtype));
    tptrs.push_back(tbufs.back().get());
  }
  for (Tensor& t : temps) targs.push_back({&t, int64_t{0}});
  const auto ptrs = ptrs_for_all(op, b);
  auto launch = [&](int i) {
    for (size_t s = 0; s < st.stages.size(); ++s)
      cks[s]->launch(stage_args(st.stages[s], b.args, targs), stage_args(st.stages[s], ptrs[i % ptrs.size()], tptrs),
                     nullptr);
  };
  r.median_ms = median(time_launches(launch, f.iters));
  r.figure = lk.bytes(sizes, dt) / (r.median_ms * 1e-3) / 1e9;
  r.unit = "GB/s";
}

// ---- cuBLAS, loaded at run time ----
struct Cublas {
  int (*create)(void**) = nullptr;
  int (*destroy)(void*) = nullptr;
  int (*gemm_ex)(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int,
                 const void*, void*, int, int, int, int) = nullptr;
  int (*set_workspace)(void*, void*, size_t) = nullptr;
  void* handle = nullptr;
  // The workspace torch gives cuBLAS on Hopper (32 MiB, its getChosenWorkspaceSize), so that
  // cuBLAS's heuristic may pick the kernels it picks under torch, the anchors' cuBLAS. Never
  // freed: the handle uses it until the process exits.
  DeviceBuffer* workspace = nullptr;
  std::string why;
};

Cublas load_cublas() {
  Cublas c;
  void* h = nullptr;
  for (const char* n : {"libcublas.so", "libcublas.so.13", "libcublas.so.12", "/usr/local/cuda/lib64/libcublas.so",
                        "/usr/local/cuda/lib64/libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so.12"})
    if ((h = ::dlopen(n, RTLD_NOW | RTLD_LOCAL))) break;
  if (!h) {
    c.why = std::string("cannot load libcublas: ") + ::dlerror();
    return c;
  }
  c.create = reinterpret_cast<decltype(c.create)>(::dlsym(h, "cublasCreate_v2"));
  c.destroy = reinterpret_cast<decltype(c.destroy)>(::dlsym(h, "cublasDestroy_v2"));
  c.gemm_ex = reinterpret_cast<decltype(c.gemm_ex)>(::dlsym(h, "cublasGemmEx"));
  if (!c.create || !c.gemm_ex) {
    c.why = "libcublas lacks cublasCreate_v2/cublasGemmEx";
    return c;
  }
  if (int s = c.create(&c.handle); s != 0) {
    c.why = "cublasCreate failed with status " + std::to_string(s);
    return c;
  }
  c.set_workspace = reinterpret_cast<decltype(c.set_workspace)>(::dlsym(h, "cublasSetWorkspace_v2"));
  if (c.set_workspace) {
    c.workspace = new DeviceBuffer(size_t(32) << 20);
    if (int s = c.set_workspace(c.handle, reinterpret_cast<void*>(c.workspace->get()), c.workspace->bytes()); s != 0)
      c.why = "cublasSetWorkspace failed with status " + std::to_string(s);
  }
  return c;
}

constexpr int CUBLAS_OP_N = 0, CUDA_R_16BF = 14, CUDA_R_16F = 2, CUDA_R_32F = 0, CUBLAS_COMPUTE_32F = 68,
              CUBLAS_GEMM_DEFAULT = -1;

// Row-major C[M,N] = A[M,K] B[K,N] is column-major C^T = B^T A^T: swap the operands.
int cublas_gemm(const Cublas& c, ScalarKind dt, int64_t M, int64_t N, int64_t K, CUdeviceptr A, CUdeviceptr B,
                CUdeviceptr C) {
  int t = dt == ScalarKind::BF16 ? CUDA_R_16BF : dt == ScalarKind::F16 ? CUDA_R_16F : CUDA_R_32F;
  float alpha = 1, beta = 0;
  return c.gemm_ex(c.handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K),
                   &alpha, reinterpret_cast<const void*>(B), t, static_cast<int>(N), reinterpret_cast<const void*>(A), t,
                   static_cast<int>(K), &beta, reinterpret_cast<void*>(C), t, static_cast<int>(N), CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT);
}

std::vector<double> download_values(CUdeviceptr p, int64_t n, ScalarKind dt) {
  size_t esz = scalar_bytes(dt);
  std::vector<uint8_t> h(static_cast<size_t>(n) * esz);
  check(driver()->cuMemcpyDtoH(h.data(), p, h.size()), "cuMemcpyDtoH");
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) {
    uint64_t bits = 0;
    std::memcpy(&bits, h.data() + i * esz, esz);
    v[i] = float_from_bits(dt, bits);
  }
  return v;
}

// C = A B (row-major, A M x K, B K x N) computed in double on the host at a sample of elements
// (the last row and column among them), once per shape: every GEMM of the shape is then
// checked by reading back only those elements of its C.
struct GemmSample {
  int64_t N = 0;
  ScalarKind dt = ScalarKind::BF16;
  std::vector<std::pair<int64_t, int64_t>> at;
  std::vector<double> want;
  double scale = 1e-30;  // the largest |want|
};

GemmSample sample_gemm(CUdeviceptr a, CUdeviceptr b, int64_t M, int64_t N, int64_t K, ScalarKind dt) {
  std::vector<double> A = download_values(a, M * K, dt), B = download_values(b, K * N, dt);
  GemmSample g;
  g.N = N;
  g.dt = dt;
  std::mt19937_64 rng(5);
  for (int s = 0; s < 256; ++s) {
    int64_t i = s == 0 ? M - 1 : static_cast<int64_t>(rng() % M), j = s == 0 ? N - 1 : static_cast<int64_t>(rng() % N);
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
    g.scale = std::max(g.scale, std::fabs(acc));
    g.at.push_back({i, j});
    g.want.push_back(acc);
  }
  return g;
}

// Largest error of the sampled elements of C relative to the largest reference value.
double gemm_error(const GemmSample& g, CUdeviceptr c) {
  size_t esz = scalar_bytes(g.dt);
  double worst = 0;
  for (size_t s = 0; s < g.at.size(); ++s) {
    uint64_t bits = 0;
    CUdeviceptr p = c + static_cast<CUdeviceptr>((g.at[s].first * g.N + g.at[s].second) * static_cast<int64_t>(esz));
    check(driver()->cuMemcpyDtoH(&bits, p, esz), "cuMemcpyDtoH");
    double got = float_from_bits(g.dt, bits);
    worst = std::max(worst, std::isnan(got) ? 1.0 : std::fabs(got - g.want[s]) / g.scale);
  }
  return worst;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) o += c;
  }
  return o;
}

// "-" for a figure that was not measured.
std::string or_dash(double v, const char* fmt) {
  if (v <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

void print_results(const std::vector<Result>& rs, const Flags& f, const std::string& device_desc) {
  std::printf("\n%-12s %-5s %-26s %10s %12s %-8s %9s %7s %9s %8s %10s %9s %9s  %s\n", "kernel", "dtype", "sizes",
              "median_ms", "figure", "unit", "cuBLAS", "ratio", "hbm_GB/s", "host_us", "nvrtc_s", "mem_ms", "disk_ms",
              "config / note");
  for (const auto& r : rs) {
    std::string note = r.note;
    if (r.back_to_back_ms > 0 && r.median_ms > 0) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%sback to back %.1f us = %.0f GB/s", note.empty() ? "" : "; ",
                    r.back_to_back_ms * 1e3, r.hbm_gbps * r.median_ms / r.back_to_back_ms);
      note += buf;
    }
    std::printf("%-12s %-5s %-26s %10.4f %12.2f %-8s %9s %7s %9s %8s %10.3f %9.3f %9.3f  %s %s\n", r.kernel.c_str(),
                r.dtype.c_str(), r.sizes.c_str(), r.median_ms, r.figure, r.unit.c_str(),
                or_dash(r.cublas, "%.1f").c_str(), or_dash(r.cublas_ratio, "%.3f").c_str(),
                or_dash(r.hbm_gbps, "%.0f").c_str(), or_dash(r.host_us, "%.1f").c_str(), r.compile_s, r.memory_hit_ms, r.disk_hit_ms, r.config.c_str(),
                note.c_str());
  }
  if (!f.json) return;
  std::ostringstream j;
  j << "{\n  \"device\": \"" << json_escape(device_desc) << "\",\n  \"timing\": \""
    << (g_timing == Timing::kDoBench ? "dobench" : "stream") << "\",\n  \"results\": [\n";
  for (size_t i = 0; i < rs.size(); ++i) {
    const Result& r = rs[i];
    j << "    {\"kernel\": \"" << r.kernel << "\", \"dtype\": \"" << r.dtype << "\", \"sizes\": \"" << r.sizes
      << "\", \"config\": \"" << r.config << "\", \"median_ms\": " << r.median_ms << ", \"figure\": " << r.figure
      << ", \"unit\": \"" << r.unit << "\", \"cublas_figure\": " << r.cublas << ", \"cublas_ratio\": " << r.cublas_ratio
      << ", \"hbm_GBps\": " << r.hbm_gbps << ", \"host_us\": " << r.host_us << ", \"nvrtc_s\": " << r.compile_s << ", \"memory_hit_ms\": " << r.memory_hit_ms
      << ", \"disk_hit_ms\": " << r.disk_hit_ms << ", \"back_to_back_ms\": " << r.back_to_back_ms << ", \"note\": \"" << json_escape(r.note) << "\"}"
      << (i + 1 < rs.size() ? ",\n" : "\n");
  }
  j << "  ]\n}\n";
  if (f.json_file.empty()) std::fputs(j.str().c_str(), stdout);
  else std::ofstream(f.json_file) << j.str();
}

Flags parse_flags(int argc, char** argv) {
  Flags f;
  int64_t rows = 0, cols = 0;
  std::optional<std::array<int64_t, 3>> mnk_flag;
  auto need = [&](int& i) -> std::string {
    if (i + 1 >= argc) {
      std::fprintf(stderr, "cuda_bench: %s needs a value\n", argv[i]);
      std::exit(2);
    }
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") f.quick = true;
    else if (a == "--tune") f.tune = true;
    else if (a == "--json") {
      f.json = true;
      if (i + 1 < argc && argv[i + 1][0] != '-') f.json_file = argv[++i];
    } else if (a == "--only") f.only = need(i);
    else if (a == "--iters") f.iters = std::stoi(need(i));
    else if (a == "--dump-cubin") f.dump_cubin = need(i);
    else if (a == "--vec-n") f.vec_n = std::stoll(need(i));
    else if (a == "--split-k") f.split_k = std::stoi(need(i));
    else if (a == "--stream-k") f.stream_k = true;
    else if (a == "--split-ab") f.split_ab = true;
    else if (a == "--set") {
      std::string v = need(i);
      size_t eq = v.find('=');
      char* end = nullptr;
      long long x = eq == std::string::npos ? 0 : std::strtoll(v.c_str() + eq + 1, &end, 10);
      if (eq == std::string::npos || eq == 0 || end == v.c_str() + eq + 1 || *end != '\0') {
        std::fprintf(stderr, "cuda_bench: --set wants NAME=INTEGER, got %s\n", v.c_str());
        std::exit(2);
      }
      f.sets.emplace_back(v.substr(0, eq), static_cast<int64_t>(x));
    }
    else if (a == "--rounds") {
      f.rounds = std::stoi(need(i));
      if (f.rounds < 1) {
        std::fprintf(stderr, "cuda_bench: --rounds wants 1 or more, got %d\n", f.rounds);
        std::exit(2);
      }
    }
    else if (a == "--timing") {
      std::string v = need(i);
      if (v != "dobench" && v != "stream") {
        std::fprintf(stderr, "cuda_bench: --timing wants dobench or stream, got %s\n", v.c_str());
        std::exit(2);
      }
      g_timing = v == "dobench" ? Timing::kDoBench : Timing::kStream;
    }
    else if (a == "--mnk") {
      // N (a cube) or MxNxK.
      std::string v = need(i);
      std::array<int64_t, 3> mnk{};
      int n = std::sscanf(v.c_str(), "%" SCNd64 "x%" SCNd64 "x%" SCNd64, &mnk[0], &mnk[1], &mnk[2]);
      if (n == 1) mnk[1] = mnk[2] = mnk[0];
      if ((n != 1 && n != 3) || mnk[0] < 1 || mnk[1] < 1 || mnk[2] < 1) {
        std::fprintf(stderr, "cuda_bench: --mnk wants N or MxNxK, got %s\n", v.c_str());
        std::exit(2);
      }
      mnk_flag = mnk;
    }
    else if (a == "--rows") rows = std::stoll(need(i));
    else if (a == "--cols") cols = std::stoll(need(i));
    else if (a == "-h" || a == "--help") {
      std::printf("usage: cuda_bench [--quick] [--json [FILE]] [--only NAME] [--tune] [--iters N] [--dump-cubin DIR]\n"
                  "                  [--vec-n N] [--rows M] [--cols N] [--mnk N|MxNxK] [--split-k N] [--stream-k]\n"
                  "                  [--timing dobench|stream] [--rounds R] [--set NAME=V ...]\n"
                  "--set NAME=V: a constexpr (tile or codegen knob, e.g. tma_hint_b=3) over the kernel's\n"
                  "and the target's choice, for every kernel benchmarked (use with --only).\n"
                  "--timing: dobench (default) flushes L2 before each timed launch as Triton's do_bench\n"
                  "does for the anchors; stream times launches back to back. --rounds R: the default\n"
                  "matmul tile and cuBLAS timed alternately R times (default 3, 1 with --quick).\n"
                  "matmul (bf16) shapes: 4096^3 (the one --tune searches), 8192^3, 4096x14336x4096,\n"
                  "128x14336x4096, 16x4096x4096 (MxNxK), each beside cuBLAS; --quick: 2048^3 only;\n"
                  "--mnk: that one shape. --split-k: 0 (default) lets the runtime split small wgmma\n"
                  "matmuls over K, 1 never splits, N >= 2 always splits N ways. --split-ab: a split's\n"
                  "partial sums added within a cluster and through the workspace, alternately timed.\n");
      std::exit(0);
    } else {
      std::fprintf(stderr, "cuda_bench: unknown flag %s\n", a.c_str());
      std::exit(2);
    }
  }
  if (f.quick) {
    f.vec_n = int64_t{1} << 24;
    f.row_sizes = {{4096, 4096}};
    f.matmul_shapes = {{2048, 2048, 2048}};
  }
  if (mnk_flag) f.matmul_shapes = {*mnk_flag};
  // --rows/--cols replace the two default shapes by one.
  if (rows || cols) f.row_sizes = {{rows ? rows : 4096, cols ? cols : 4096}};
  f.default_rows = !f.quick && !rows && !cols;
  f.matmul_alternatives = !f.quick;
  if (f.rounds == 0) f.rounds = f.quick ? 1 : 3;
  return f;
}

struct BenchCase {
  std::string kernel;
  ScalarKind dt;
  Sizes sizes;
  bool tune = true;  // --tune searches this case (matmul: only the first shape)
};

std::vector<BenchCase> bench_cases(const Flags& f) {
  std::vector<BenchCase> c;
  c.push_back({"vector_add", ScalarKind::F32, {{"N", f.vec_n}}});
  for (const char* k : {"softmax", "layernorm", "rmsnorm"}) {
    for (auto [m, n] : f.row_sizes) c.push_back({k, ScalarKind::BF16, {{"M", m}, {"N", n}}});
    // The anchors (.devdeps/bench/anchors_h200.py) measure the norms at 4096x8192 too.
    if (f.default_rows && std::string(k) != "softmax") c.push_back({k, ScalarKind::BF16, {{"M", 4096}, {"N", 8192}}});
  }
  for (size_t i = 0; i < f.matmul_shapes.size(); ++i) {
    auto [m, n, k] = f.matmul_shapes[i];
    c.push_back({"matmul", ScalarKind::BF16, {{"M", m}, {"N", n}, {"K", k}}, i == 0});
  }
  // fp8 e4m3 (b as [N, K], per-tensor scales, bf16 c) at the anchors' cuBLASLt shapes.
  if (!f.quick)
    for (int64_t n : {4096, 8192}) c.push_back({"matmul_fp8", ScalarKind::BF16, {{"M", n}, {"N", n}, {"K", n}}, false});
  // top-k of 64 rows of 131072 at k = 64, 256, 1024, and a one-tile sort: entries `topk` /
  // `sort` with these sizes, for the anchors' torch.topk / torch.sort at the same shapes in the
  // same call (issue 18).
  if (!f.quick || f.only == "topk")
    for (int64_t k : {64, 256, 1024}) c.push_back({"topk", ScalarKind::F32, {{"M", 64}, {"N", 131072}, {"K", k}}, false});
  // One row of 2^24 at k = 1024 (one program: the long-row figure).
  if (!f.quick) c.push_back({"topk", ScalarKind::F32, {{"M", 1}, {"N", int64_t{1} << 24}, {"K", 1024}}, false});
  // --only topk: the same four shapes in bf16 too.
  if (f.only == "topk") {
    for (int64_t k : {64, 256, 1024}) c.push_back({"topk", ScalarKind::BF16, {{"M", 64}, {"N", 131072}, {"K", k}}, false});
    if (!f.quick) c.push_back({"topk", ScalarKind::BF16, {{"M", 1}, {"N", int64_t{1} << 24}, {"K", 1024}}, false});
  }
  if (!f.quick || f.only == "sort") c.push_back({"sort", ScalarKind::F32, {{"M", 4096}, {"N", 4096}}, false});
  std::vector<BenchCase> out;
  for (auto& x : c)
    if (f.only.empty() || f.only == x.kernel) out.push_back(x);
  return out;
}

// The row kernels' column tile: the smallest BLOCK_N candidate that holds a whole row, so that
// the row is read once and stays in registers (the largest when none does).
ConstexprConfig row_config(const Kernel& k, const BenchCase& bc) {
  const ConstexprDecl* d = k.find_constexpr("BLOCK_N");
  if (!d || d->candidates.empty() || !bc.sizes.count("N") || bc.kernel.rfind("matmul", 0) == 0) return {};
  // Since 16-bit rows stay packed in registers (two values per register), the whole row wins at
  // 32768 columns too. Measured on the H200 (bench/RESULTS.md, session 4, 4096x32768 bf16):
  // whole row against 8192-column loops, softmax 2769 vs 2717 GB/s, layernorm 2698 vs 2453,
  // rmsnorm 3376 vs 2934 (before packing the 8192 loop had won: 2415 vs 2096 for softmax).
  int64_t n = bc.sizes.at("N"), best = 0;
  for (int64_t c : d->candidates)
    if ((c >= n && (best < n || c < best)) || (best < n && c > best)) best = c;
  return {{"BLOCK_N", best}};
}

// Every combination of the constexpr candidates (capped), for --tune.
std::vector<ConstexprConfig> all_configs(const Kernel& k, size_t cap) {
  std::vector<ConstexprConfig> out = {{}};
  for (const auto& c : k.constexprs) {
    if (c.candidates.empty()) continue;
    std::vector<ConstexprConfig> next;
    for (const auto& cfg : out)
      for (int64_t v : c.candidates) {
        ConstexprConfig n = cfg;
        n[c.name] = v;
        next.push_back(n);
      }
    out = std::move(next);
  }
  if (out.size() > cap) out.resize(cap);
  return out;
}

// Codegen knobs for comparing the row kernels' code with and without a change, from the
// environment (cuda_bench only): TESSERA_BENCH_NO_PACK=1 keeps 16-bit loads as f32 arrays
// (pack_narrow_loads = 0); TESSERA_BENCH_PREFETCH=1 issues the reduction loops' next tile
// before this one's reductions (prefetch_loads = 1); TESSERA_BENCH_STREAM_STORES=1 stores with
// the evict-first hint (stream_stores = 1); TESSERA_BENCH_MIN_BLOCKS=B asks ptxas for
// registers that fit B CTAs per SM (min_blocks); TESSERA_BENCH_WHOLE_TILE=1 tests bounds and
// alignment once per tile instead of per 16-byte vector (whole_tile_checks = 1);
// TESSERA_BENCH_NO_PAIR_STORES=1 rounds 16-bit stores one value at a time from a rounded float
// copy (pair_stores = 0); TESSERA_BENCH_PREFETCH_PROGRAMS=1 / 0 forces program prefetch on / off
// (prefetch_programs: persistent CTAs that copy the next row while this one computes);
// TESSERA_BENCH_PREFETCH_BUFFERS=1 / 2 sets prefetch_buffers, TESSERA_BENCH_PREFETCH_INVARIANT=0 / 1
// prefetch_invariant (layernorm's w and b copied for each row too). They show in the config column and carry over to the --tune variants.
void add_row_knobs(Kernel& k) {
  if (const char* e = std::getenv("TESSERA_BENCH_NO_PACK"); e && std::string(e) == "1") k.set_constexpr("pack_narrow_loads", 0);
  if (const char* e = std::getenv("TESSERA_BENCH_PREFETCH"); e && std::string(e) == "1") k.set_constexpr("prefetch_loads", 1);
  if (const char* e = std::getenv("TESSERA_BENCH_STREAM_STORES"); e && std::string(e) == "1") k.set_constexpr("stream_stores", 1);
  if (const char* e = std::getenv("TESSERA_BENCH_MIN_BLOCKS"); e && std::atoi(e) >= 1) k.set_constexpr("min_blocks", std::atoi(e));
  // (layernorm declares whole_tile_checks = 1; set_constexpr sets its own.)
  if (const char* e = std::getenv("TESSERA_BENCH_WHOLE_TILE"); e && (std::string(e) == "1" || std::string(e) == "0"))
    k.set_constexpr("whole_tile_checks", std::string(e) == "1");
  if (const char* e = std::getenv("TESSERA_BENCH_NO_PAIR_STORES"); e && std::string(e) == "1") k.set_constexpr("pair_stores", 0);
  if (const char* e = std::getenv("TESSERA_BENCH_PREFETCH_PROGRAMS"); e && (std::string(e) == "1" || std::string(e) == "0"))
    k.set_constexpr("prefetch_programs", std::string(e) == "1");
  if (const char* e = std::getenv("TESSERA_BENCH_PREFETCH_BUFFERS"); e && (std::string(e) == "1" || std::string(e) == "2"))
    k.set_constexpr("prefetch_buffers", std::atoi(e));
  if (const char* e = std::getenv("TESSERA_BENCH_PREFETCH_INVARIANT"); e && (std::string(e) == "1" || std::string(e) == "0"))
    k.set_constexpr("prefetch_invariant", std::atoi(e));
}

// A row kernel's tuning space for --tune: every BLOCK_N candidate (those smaller than the row
// take the kernel's loop branch), each with the emitter's own thread count and with 4..32 warps
// where a thread then holds 8..64 elements of the tile (fewer: not one 16-byte vector of bf16;
// more: the row no longer fits the registers), tiles shorter than the row (length n) also with
// their next tile prefetched, and register caps (below). Kernels with a BLOCK_M (rows per
// program: layernorm) also try 2 and 4 rows at the smallest tile that holds the row, with the
// same warp counts and caps; and the whole-row tile with one bounds test per tile. num_warps is
// added to a copy of the kernel, which the emitter reads as the CTA size; the library kernels do
// not declare it.
std::vector<std::unique_ptr<Kernel>> row_variants(const Kernel& unbound, int64_t n) {
  std::vector<std::unique_ptr<Kernel>> out;
  const ConstexprDecl* d = unbound.find_constexpr("BLOCK_N");
  if (!d) return out;
  const ConstexprDecl* dm = unbound.find_constexpr("BLOCK_M");
  int64_t whole = 0;  // the smallest candidate that holds the row
  for (int64_t c : d->candidates)
    if (c >= n && (whole == 0 || c < whole)) whole = c;
  auto bound = [&](int64_t bn, int64_t bm) {
    ConstexprConfig c{{"BLOCK_N", bn}};
    if (dm) c["BLOCK_M"] = bm;
    return bind_constexprs(unbound, c);
  };
  // The thread counts and register caps at a tile of bm x bn.
  auto warps_and_caps = [&](int64_t bn, int64_t bm) {
    if (unbound.find_constexpr("num_warps")) return;
    for (int64_t w : {4, 8, 16, 32}) {
      int64_t per_thread = bm * bn / (w * 32);
      if (per_thread < 8 || per_thread > 64) continue;
      auto k = bound(bn, bm);
      k->constexprs.push_back({"num_warps", w, {w}, unbound.loc});
      out.push_back(std::move(k));
      // The same with a register cap of 64 or 48 per thread (min_blocks CTAs per SM): a row
      // kernel's registers are set by the heavier of its two branches, often the unused one.
      if (unbound.find_constexpr("min_blocks")) continue;
      int64_t last = 0;
      for (int64_t cap : {64, 48}) {
        int64_t blocks = 65536 / (w * 32 * cap);
        if (blocks < 2 || blocks * w * 32 > 2048 || blocks == last) continue;
        last = blocks;
        auto kb = bound(bn, bm);
        kb->constexprs.push_back({"num_warps", w, {w}, unbound.loc});
        kb->constexprs.push_back({"min_blocks", blocks, {blocks}, unbound.loc});
        out.push_back(std::move(kb));
      }
    }
  };
  for (int64_t bn : d->candidates) {
    out.push_back(bound(bn, 1));
    // Tiles shorter than the row loop over it: also with the next tile prefetched.
    if (bn < n && !unbound.find_constexpr("prefetch_loads")) {
      out.push_back(bound(bn, 1));
      out.back()->constexprs.push_back({"prefetch_loads", 1, {1}, unbound.loc});
    }
    warps_and_caps(bn, 1);
  }
  if (dm && whole > 0)
    for (int64_t bm : dm->candidates) {
      if (bm == 1) continue;
      out.push_back(bound(whole, bm));
      warps_and_caps(whole, bm);
    }
  // The whole-row tile (and its row blocks) with one bounds test per tile (whole_tile_checks =
  // 1), at the emitter's thread count and at 4 warps with 8 CTAs per SM (64 registers).
  if (whole > 0 && !unbound.find_constexpr("whole_tile_checks"))
    for (int64_t bm : dm ? dm->candidates : std::vector<int64_t>{1}) {
      out.push_back(bound(whole, bm));
      out.back()->constexprs.push_back({"whole_tile_checks", 1, {1}, unbound.loc});
      int64_t per_thread = bm * whole / 128;
      if (unbound.find_constexpr("num_warps") || unbound.find_constexpr("min_blocks") || per_thread < 8 || per_thread > 64)
        continue;
      auto k = bound(whole, bm);
      k->constexprs.push_back({"num_warps", 4, {4}, unbound.loc});
      k->constexprs.push_back({"min_blocks", 8, {8}, unbound.loc});
      k->constexprs.push_back({"whole_tile_checks", 1, {1}, unbound.loc});
      out.push_back(std::move(k));
    }
  return out;
}

// The first elements (at most 2^20) of the last view (the row kernels' output y) in
// buffer set 0, to check a tuned variant against the default before reporting its time.
std::vector<double> output_sample(const Buffers& b) {
  const Tensor& t = b.shapes.back();
  int64_t n = std::min<int64_t>(t.numel(), int64_t{1} << 20);
  return download_values(b.sets[0].back().get(), n, t.dtype);
}

// Largest |got - want| relative to the largest |want|.
double rel_diff(const std::vector<double>& got, const std::vector<double>& want) {
  double worst = 0, scale = 1e-30;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    worst = std::max(worst, std::isnan(got[i]) != std::isnan(want[i]) ? 1.0 : std::fabs(got[i] - want[i]) / scale);
  return worst;
}

// "128x256x64": a matmul's BLOCK_M x BLOCK_N x BLOCK_K, then its codegen knobs that are on
// ("128x256x64 mma_spread_copies=1"; the mma.sync variants).
std::string tile_str(const ConstexprConfig& c) {
  auto v = [&](const char* n) {
    auto it = c.find(n);
    return it == c.end() ? std::string("?") : std::to_string(it->second);
  };
  std::string out = v("BLOCK_M") + "x" + v("BLOCK_N") + "x" + v("BLOCK_K");
  for (const auto& [name, value] : c)
    if (name.rfind("BLOCK_", 0) != 0 && value != 0) out += " " + name + "=" + std::to_string(value);
  return out;
}

std::string tile_str(const Kernel& k) {
  ConstexprConfig c;
  for (const auto& d : k.constexprs) c[d.name] = d.value;
  return tile_str(c);
}

// Tiles timed beside the target's default at every matmul shape (not --quick): a narrower and
// a shorter one than 128x256x64, and for few rows (M <= 128) tiles that give the grid more
// CTAs: at M = 16, N = 4096 the 128x256 tile makes 16 CTAs for 132 SMs, and the kernel is
// bound by reading B once, which wants every SM streaming.
std::vector<ConstexprConfig> matmul_alternatives(const BenchCase& bc) {
  auto t = [](int64_t m, int64_t n, int64_t k) {
    return ConstexprConfig{{"BLOCK_M", m}, {"BLOCK_N", n}, {"BLOCK_K", k}};
  };
  // 128x256x64 is the sm_90a default where the sizes choose no other tile (size_configs).
  std::vector<ConstexprConfig> out = {t(128, 256, 64), t(128, 128, 64), t(64, 256, 64)};
  if (bc.sizes.at("M") <= 128) {
    out.push_back(t(64, 128, 64));
    out.push_back(t(64, 64, 64));
  }
  return out;
}

// A sampled error above this is a wrong product (bf16 output: a few ulps of the largest value).
constexpr double kGemmTolerance = 0.02;

// " split-K N" when the kernel's latest launch shared each program among N CTAs.
std::string split_str(const CudaKernel& ck) {
  return ck.last_splits > 1 ? " split-K " + std::to_string(ck.last_splits) : "";
}

// Bind and compile every configuration in parallel (NVRTC is the cost), then time each on the
// shape's buffers with `iters` launches and check its output (buffer set 0) against the sample.
// Returns the correct ones; `summary` gets "tile figure" per configuration, with those that
// failed to compile or launch (e.g. too much shared memory) or were WRONG (status 1) named.
std::vector<Result> time_matmul_configs(const LibraryKernel& lk, const Kernel& unbound, const BenchCase& bc,
                                        const std::vector<ConstexprConfig>& cfgs, Buffers& bufs, const GemmSample& g,
                                        const Flags& f, int iters, const CudaOptions& opts, const Result& base,
                                        std::string& summary, int& status) {
  std::vector<std::future<std::pair<std::unique_ptr<Kernel>, std::shared_ptr<CudaKernel>>>> futs;
  for (const auto& cfg : cfgs)
    futs.push_back(std::async(std::launch::async, [&unbound, &opts, cfg] {
      std::unique_ptr<Kernel> kk;
      std::shared_ptr<CudaKernel> ckk;
      try {
        kk = bind_constexprs(unbound, cfg);
        ckk = compile_cuda(*kk, opts);
      } catch (const TesseraError&) {
      }
      return std::make_pair(std::move(kk), ckk);
    }));
  std::vector<Result> out;
  auto say = [&](const std::string& what) { summary += (summary.empty() ? "" : "; ") + what; };
  for (size_t i = 0; i < futs.size(); ++i) {
    auto [kk, ckk] = futs[i].get();
    if (!kk || !ckk) {
      say(tile_str(cfgs[i]) + " compile failed");
      continue;
    }
    Result t = base;
    t.note.clear();
    t.config = config_str(*kk);
    t.compile_s = ckk->compile_seconds;
    Flags fi = f;
    fi.iters = iters;
    double err = 0;
    try {
      measure(lk, *kk, *ckk, bc.sizes, bc.dt, t, fi, &bufs);
      ckk->launch(bufs.args, ptrs_for(*kk, bufs, 0), nullptr);
      check(driver()->cuCtxSynchronize(), "cuCtxSynchronize");
      err = gemm_error(g, bufs.sets[0][2].get());
    } catch (const TesseraError&) {
      say(tile_str(*kk) + " launch failed");
      continue;
    }
    char fig[64];
    std::snprintf(fig, sizeof fig, " %.0f", t.figure);
    say(tile_str(*kk) + split_str(*ckk) + fig + (err > kGemmTolerance ? " WRONG" : ""));
    if (err > kGemmTolerance) {
      status = 1;
      continue;
    }
    out.push_back(t);
  }
  return out;
}

// The mma.sync path's codegen knobs (all off at 0; src/cuda/EmitterInternal.h, PipePlan, and
// EmitDot.cpp): cp.async L2 prefetch size, the next stage's copies spread over the k16 steps,
// the epilogue staged through shared memory with 16-byte stores, the last k16 step's mma before
// the stage barrier, a CTA-count register cap (with the ring sized for it) and the CTA size.
const char* const kMmaKnobs[] = {"mma_l2_prefetch", "mma_spread_copies", "mma_smem_epilogue", "mma_early_last_step",
                                 "min_blocks", "num_warps"};

// The tile and knob combinations time_mma_sync measures beside the kernel's own default: the
// knobs one at a time and together at 128x256x64 (the default), and the cheap ones at the other
// tiles; 2 CTAs per SM (min_blocks = 2: 128 registers, the ring in half of shared memory) at
// 128x128, and 16 warps (64 x 32 warp tiles, 128 registers) at 128x256.
std::vector<ConstexprConfig> mma_sync_configs() {
  auto t = [](int64_t m, int64_t n, int64_t k, ConstexprConfig knobs = {}) {
    ConstexprConfig c{{"BLOCK_M", m}, {"BLOCK_N", n}, {"BLOCK_K", k}};
    c.insert(knobs.begin(), knobs.end());
    return c;
  };
  const ConstexprConfig spread = {{"mma_spread_copies", 1}}, staged = {{"mma_smem_epilogue", 1}},
                        early = {{"mma_early_last_step", 1}};
  auto with = [](ConstexprConfig a, const ConstexprConfig& b) {
    a.insert(b.begin(), b.end());
    return a;
  };
  auto pf = [](int64_t bytes) { return ConstexprConfig{{"mma_l2_prefetch", bytes}}; };
  // {} is the kernel's own default (128x256x64 for 16-bit types).
  std::vector<ConstexprConfig> out = {{}, t(128, 256, 32), t(128, 128, 64), t(128, 128, 32), t(64, 256, 64)};
  for (const ConstexprConfig& k :
       {pf(64), pf(128), pf(256), spread, staged, with(spread, pf(128)), with(spread, staged), with(staged, pf(128)),
        with(with(spread, staged), pf(128)), with(with(spread, staged), pf(256)), early, with(early, spread),
        with(with(early, spread), staged), with(with(with(early, spread), staged), pf(128)), ConstexprConfig{{"num_warps", 16}},
        with({{"num_warps", 16}}, with(spread, staged))})
    out.push_back(t(128, 256, 64, k));
  for (const ConstexprConfig& k : {pf(128), staged, with(staged, pf(128)), early, with(early, staged),
                                   ConstexprConfig{{"num_warps", 16}}, with({{"num_warps", 16}}, early)})
    out.push_back(t(128, 256, 32, k));
  for (const ConstexprConfig& k : {ConstexprConfig{{"min_blocks", 2}}, with({{"min_blocks", 2}}, staged),
                                   with({{"min_blocks", 2}}, with(staged, pf(128))), spread, with(spread, staged),
                                   with(with(spread, staged), early)})
    out.push_back(t(128, 128, 64, k));
  for (const ConstexprConfig& k : {pf(128), staged, with(staged, pf(128))}) out.push_back(t(128, 128, 32, k));
  for (const ConstexprConfig& k : {spread, with(spread, staged), with(with(spread, staged), early)})
    out.push_back(t(64, 256, 64, k));
  return out;
}

// The portable tensor-core path (mma.sync fed by a cp.async ring), which sm_80 and every tile
// outside the wgmma envelope run: compiled for the device's architecture without the
// arch-specific variant (sm_90 on Hopper, so that no tile takes TMA + wgmma), the kernel's own
// default, a few other mma.sync tiles and the knob combinations of mma_sync_configs, each
// checked like the other tiles; each one's figure and ratio to cuBLAS (`cublas`, TFLOP/s; 0:
// not measured) is printed on its own line, the best is the `matmul_mma_sync` row, every
// tile's figure in its note. This table is the planning emitter's mma.sync path, whose knobs it
// varies (TESSERA_CUDA_FROM_LAYOUTS=1 puts it on the layout emitter, which takes
// mma_smem_epilogue through stage-epilogue-stores and ignores the other mma_* knobs).
std::vector<Result> time_mma_sync(const LibraryKernel& lk, const BenchCase& bc, Buffers& bufs, const GemmSample& g,
                                  const Flags& f, const CudaOptions& opts, const Result& base, double cublas,
                                  int& status) {
  CudaOptions mo = opts;
  mo.target = CudaTarget{device().sm, false};
  mo.target.emitter = CudaTarget::emitter_from_environment().value_or(CudaTarget::Emitter::Planning);
  // The library kernel with the knobs declared (off), so that the configurations can bind them.
  auto knobbed = lk.build(bc.dt);
  for (const char* name : kMmaKnobs) knobbed->constexprs.push_back({name, 0, {}, knobbed->loc});
  std::vector<ConstexprConfig> cfgs = mma_sync_configs();
  std::string summary;
  std::vector<Result> all = time_matmul_configs(lk, *knobbed, bc, cfgs, bufs, g, f, f.iters, mo, base, summary, status);
  Result best;
  std::printf("cuda_bench: mma.sync (%s) at %s, %zu of %zu configurations correct:\n", mo.target.str().c_str(),
              base.sizes.c_str(), all.size(), cfgs.size());
  for (const Result& a : all) {
    if (a.figure > best.figure) best = a;
    // "BLOCK_M=128,...,mma_l2_prefetch=0,..." -> "128x256x64 mma_spread_copies=1".
    ConstexprConfig c;
    std::stringstream in(a.config);
    for (std::string kv; std::getline(in, kv, ',');)
      if (size_t eq = kv.find('='); eq != std::string::npos) c[kv.substr(0, eq)] = std::stoll(kv.substr(eq + 1));
    char ratio[32] = "";
    if (cublas > 0) std::snprintf(ratio, sizeof ratio, "%.3f of cuBLAS", a.figure / cublas);
    std::printf("  mma_sync %-64s %8.1f TFLOP/s  %s\n", tile_str(c).c_str(), a.figure, ratio);
  }
  if (best.figure <= 0) return {};
  best.kernel = "matmul_mma_sync";
  best.note = "mma.sync compiled for " + mo.target.str() + ", best of " + std::to_string(all.size()) + ": " + summary;
  return {best};
}

// The matmul rows beyond the default's `r` (already timed on `bufs`): the default checked,
// cuBLAS on the same buffers (figure and ratio into r), the best of the alternative tiles,
// and with --tune at the first shape the best of the whole constexpr space.
std::vector<Result> bench_matmul(const LibraryKernel& lk, const BenchCase& bc, const Kernel& unbound, const Kernel& k,
                                 CudaKernel& ck, Buffers& bufs, Result& r, const Flags& f, const CudaOptions& opts,
                                 int& status) {
  std::vector<Result> out;
  int64_t M = bc.sizes.at("M"), N = bc.sizes.at("N"), K = bc.sizes.at("K");
  auto& set = bufs.sets[0];
  GemmSample g = sample_gemm(set[0].get(), set[1].get(), M, N, K, bc.dt);
  auto note = [](Result& x, const std::string& what) { x.note += (x.note.empty() ? "" : "; ") + what; };

  // The timed runs rotated the inputs: recompute the product from set 0 before checking it.
  ck.launch(bufs.args, ptrs_for(k, bufs, 0), nullptr);
  check(driver()->cuCtxSynchronize(), "cuCtxSynchronize");
  double et = gemm_error(g, set[2].get());
  note(r, "tile " + tile_str(k) + split_str(ck) + ", sampled max rel error " + std::to_string(et));
  if (et > kGemmTolerance) {
    note(r, "TESSERA WRONG");
    status = 1;
  }

  // cuBLAS; its output goes to a separate C.
  static Cublas cb = load_cublas();
  Result c;
  c.kernel = "cublas_gemm";
  c.dtype = r.dtype;
  c.sizes = r.sizes;
  c.unit = "TFLOP/s";
  // cuBLAS's C, kept for the rounds below.
  std::unique_ptr<DeviceBuffer> cref_keep;
  // cuBLAS's launch `i`, on the buffer sets in rotation as the default's launches.
  auto cublas_launch = [&](int i) {
    auto& s = bufs.sets[i % bufs.sets.size()];
    cublas_gemm(cb, bc.dt, M, N, K, s[0].get(), s[1].get(), cref_keep->get());
  };
  if (!cb.why.empty()) {
    c.note = cb.why;
  } else {
    cref_keep = std::make_unique<DeviceBuffer>(static_cast<size_t>(M * N) * scalar_bytes(bc.dt));
    DeviceBuffer& cref = *cref_keep;
    int st = cublas_gemm(cb, bc.dt, M, N, K, set[0].get(), set[1].get(), cref.get());
    if (st != 0) {
      c.note = "cublasGemmEx status " + std::to_string(st);
    } else {
      auto ms = time_launches(cublas_launch, f.iters);
      c.median_ms = median(ms);
      double t0 = now_s();
      for (int i = 0; i < 50; ++i) cublas_launch(i);
      c.host_us = (now_s() - t0) / 50 * 1e6;
      check(driver()->cuCtxSynchronize(), "cuCtxSynchronize");
      if (M <= 64) c.back_to_back_ms = time_back_to_back_ms(cublas_launch, static_cast<int>(ms.size()));
      set_matmul_time(lk, bc.sizes, bc.dt, c, c.median_ms);
      c.cublas = c.figure;
      c.cublas_ratio = 1;
      cublas_gemm(cb, bc.dt, M, N, K, set[0].get(), set[1].get(), cref.get());
      check(driver()->cuCtxSynchronize(), "cuCtxSynchronize");
      double ec = gemm_error(g, cref.get());
      c.note = "sampled max rel error " + std::to_string(ec);
      if (ec > kGemmTolerance) {
        c.note += " CUBLAS CALL WRONG";
        status = 1;
      }
      if (bufs.sets.size() > 1) note(c, "rotating " + std::to_string(bufs.sets.size()) + " buffer sets");
    }
  }
  // More rounds: the default tile and cuBLAS timed alternately, f.rounds times each in all
  // (the first above); each figure is the median of its rounds' medians, so that the clock's
  // drift over a run (temperature, power) favours neither the one timed first nor the last.
  if (f.rounds > 1 && c.median_ms > 0) {
    const auto ptrs = ptrs_for_all(k, bufs);
    std::vector<double> ours{r.median_ms}, theirs{c.median_ms};
    for (int round = 1; round < f.rounds; ++round) {
      ours.push_back(median(time_launches([&](int i) { ck.launch(bufs.args, ptrs[i % ptrs.size()], nullptr); }, f.iters)));
      theirs.push_back(median(time_launches(cublas_launch, f.iters)));
    }
    auto list = [](const std::vector<double>& v) {
      std::string out;
      for (double x : v) {
        char b[32];
        std::snprintf(b, sizeof b, "%s%.4f", out.empty() ? "" : "/", x);
        out += b;
      }
      return out;
    };
    note(r, "ms per round " + list(ours) + ", cuBLAS " + list(theirs));
    set_matmul_time(lk, bc.sizes, bc.dt, r, median(ours));
    set_matmul_time(lk, bc.sizes, bc.dt, c, median(theirs));
    c.cublas = c.figure;
  }
  // --split-ab: the same launches through the workspace's fixup (a second compilation with
  // split_k_cluster off), alternated with the cluster's, R rounds each.
  if (f.split_ab) {
    CudaOptions wo = opts;
    wo.split_k_cluster = false;
    auto wk = compile_cuda(k, wo);
    const auto ptrs = ptrs_for_all(k, bufs);
    std::vector<double> cl, ws;
    for (int round = 0; round < std::max(f.rounds, 2); ++round) {
      cl.push_back(median(time_launches([&](int i) { ck.launch(bufs.args, ptrs[i % ptrs.size()], nullptr); }, f.iters)));
      ws.push_back(median(time_launches([&](int i) { wk->launch(bufs.args, ptrs[i % ptrs.size()], nullptr); }, f.iters)));
    }
    char b[200];
    std::snprintf(b, sizeof b, "split A/B (%d ways, %lld in clusters): cluster %.5f ms, workspace %.5f ms (%.3f)",
                  ck.last_splits, static_cast<long long>(ck.launches_split_cluster), median(cl), median(ws),
                  median(cl) / median(ws));
    note(r, b);
    std::printf("%s %s %s: %s; cuBLAS %.5f ms\n", r.kernel.c_str(), r.sizes.c_str(), tile_str(k).c_str(), b,
                c.median_ms);
  }
  auto vs_cublas = [&](Result& x) {
    if (c.figure <= 0) return;
    x.cublas = c.figure;
    x.cublas_ratio = x.figure / c.figure;
  };
  vs_cublas(r);
  out.push_back(c);

  if (f.matmul_alternatives) {
    std::vector<ConstexprConfig> cfgs;
    for (const auto& cfg : matmul_alternatives(bc))
      if (config_str(*bind_constexprs(unbound, cfg)) != r.config) cfgs.push_back(cfg);
    std::string summary;
    std::vector<Result> alts = time_matmul_configs(lk, unbound, bc, cfgs, bufs, g, f, f.iters, opts, r, summary, status);
    Result best = r;
    for (const Result& a : alts)
      if (a.figure > best.figure) best = a;
    best.kernel = "matmul_best";
    char head[96];
    std::snprintf(head, sizeof head, "best of %zu: default %s %.0f; ", alts.size() + 1, tile_str(k).c_str(), r.figure);
    best.note = head + summary;
    vs_cublas(best);
    out.push_back(best);
  }

  if (f.tune && bc.tune) {
    auto cfgs = all_configs(unbound, 64);
    std::string summary;
    std::vector<Result> all = time_matmul_configs(lk, unbound, bc, cfgs, bufs, g, f, 10, opts, r, summary, status);
    Result best;
    for (const Result& a : all)
      if (a.figure > best.figure) best = a;
    if (best.figure > 0) {
      best.kernel = "matmul_tuned";
      best.note = "best of " + std::to_string(all.size()) + " correct of " + std::to_string(cfgs.size()) +
                  " configurations";
      vs_cublas(best);
      out.push_back(best);
    }
    // Every configuration's figure, for the log (the table's note would be too long).
    std::printf("cuda_bench: matmul %s --tune: %s\n", r.sizes.c_str(), summary.c_str());
  }

  if (bc.tune && (f.matmul_alternatives || f.tune)) {
    std::vector<Result> mma = time_mma_sync(lk, bc, bufs, g, f, opts, r, c.figure, status);
    for (Result& x : mma) vs_cublas(x);
    out.insert(out.end(), mma.begin(), mma.end());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f = parse_flags(argc, argv);
  std::string why;
  if (!nvrtc_available(&why)) {
    std::fprintf(stderr, "cuda_bench: %s\n", why.c_str());
    return 1;
  }
  bool gpu = cuda_device_available(&why);
  std::string device_desc = "none (" + why + ")";
  if (gpu) {
    const DeviceInfo& d = device();
    device_desc = d.name + " sm_" + std::to_string(d.sm) + ", " + std::to_string(d.num_sms) + " SMs, L2 " +
                  std::to_string(d.l2_bytes >> 20) + " MB";
  }
  // A fresh compile cache per process (cold compiles are timed), unless CUDA_BENCH_CACHE names
  // one that scripts running many processes share (the compile times are then disk-cache hits).
  const char* cache_env = std::getenv("CUDA_BENCH_CACHE");
  const bool shared_cache = cache_env && *cache_env;
  std::string cache = shared_cache ? std::string(cache_env)
                          : (std::filesystem::temp_directory_path() / ("tessera-cuda-bench-" + std::to_string(::getpid()))).string();
  CudaOptions opts;
  opts.cache_dir = cache;
  // The device's own architecture, sm_90 as sm_90a (compile_cuda's own default rule), and
  // sm_90a without a device; compiled for exactly that, so that the configs chosen for the
  // target (target_configs) and the code cannot disagree.
  opts.target = CudaTarget::parse("cuda:sm_90a");
  opts.target = cuda_target_for(opts);
  opts.target_from_device = false;
  opts.split_k = f.split_k;
  opts.target.stream_k = f.stream_k;
  const std::string target = "cuda:" + opts.target.str();
  std::printf("cuda_bench: device %s; compiling for %s\n", device_desc.c_str(), opts.target.str().c_str());

  std::vector<Result> results;
  std::set<std::string> compiled;  // kernel, dtype and config of every cold compile timed
  int status = 0;
  for (const BenchCase& bc : bench_cases(f)) {
    const LibraryKernel* lk = find_library_kernel(bc.kernel);
    if (!lk) continue;
    Result r;
    r.kernel = bc.kernel;
    r.dtype = std::string(scalar_name(bc.dt));
    r.sizes = sizes_str(bc.sizes);
    try {
      auto unbound = lk->build(bc.dt);
      if (bc.kernel == "softmax" || bc.kernel == "layernorm" || bc.kernel == "rmsnorm") add_row_knobs(*unbound);
      // TESSERA_BENCH_GROUP_M=G: rows of tiles per group in the persistent wgmma order (the
      // emitter's GROUP_M, 8 where the kernel does not declare it), for the matmul rows.
      if (const char* e = std::getenv("TESSERA_BENCH_GROUP_M"); e && std::atoi(e) >= 1 && bc.kernel == "matmul")
        unbound->set_constexpr("GROUP_M", std::atoi(e));
      // --set NAME=V: constexprs (tiles or codegen knobs such as tma_hint_a, epilogue_buffers,
      // tma_store_epilogue) over whatever the kernel and the target choose.
      for (const auto& [name, v] : f.sets) unbound->set_constexpr(name, v);
      // The row kernels' tile for the row length, else the target's preferred config.
      ConstexprConfig cfg = library_config(*lk, bc.dt, target, row_config(*unbound, bc), &bc.sizes);
      for (const auto& [name, v] : f.sets) cfg[name] = v;
      // A size rule's codegen knob that the kernel does not declare (matmul's swap_operands at
      // M <= 16): a constexpr of the kernel, as the CLI applies it.
      for (const auto& [name, v] : tune::take_codegen_knobs(*unbound, cfg)) unbound->set_constexpr(name, v);
      auto k = bind_constexprs(*unbound, cfg);
      r.config = config_str(*k);
      std::shared_ptr<CudaKernel> ck;
      if (compiled.insert(bc.kernel + " " + r.dtype + " " + r.config).second) {
        // Cold NVRTC compile, then a memory-cache hit and a disk-cache hit (as a new process).
        clear_cuda_memory_cache();
        if (!shared_cache) std::filesystem::remove_all(cache);
        ck = compile_cuda(*k, opts);
        r.compile_s = ck->compile_seconds;
        double t0 = now_s();
        auto hit = compile_cuda(*k, opts);
        r.memory_hit_ms = (now_s() - t0) * 1e3;
        clear_cuda_memory_cache();
        t0 = now_s();
        ck = compile_cuda(*k, opts);
        r.disk_hit_ms = (now_s() - t0) * 1e3;
        if (!ck->from_cache) r.note = "disk cache missed!";
      } else {
        // The same kernel at another shape (dims are symbolic): its compile times are above,
        // and the other matmul tiles stay cached too.
        ck = compile_cuda(*k, opts);
      }
      if (!f.dump_cubin.empty()) {
        std::filesystem::create_directories(f.dump_cubin);
        std::ofstream(f.dump_cubin + "/" + bc.kernel + "_" + r.dtype + ".cubin", std::ios::binary)
            .write(ck->cubin().data(), static_cast<std::streamsize>(ck->cubin().size()));
        std::ofstream(f.dump_cubin + "/" + bc.kernel + "_" + r.dtype + ".cu") << ck->source();
      }
      if (!gpu) {
        r.note = "no device: compile only";
        results.push_back(r);
        continue;
      }
      // An op made of stages at this shape: the stages are its row; its own kernel (the
      // whole-row topk) follows as `NAME_one_kernel`, timed in the same call for comparison.
      if (lk->stages) {
        std::map<std::string, int64_t> given(f.sets.begin(), f.sets.end());
        LibraryStages st = lk->stages(bc.dt, target, bc.sizes, given);
        if (!st.stages.empty()) {
          Result one = r;
          measure_stages(*lk, *k, st, bc.dt, bc.sizes, opts, r, f);
          results.push_back(r);
          one.kernel += "_one_kernel";
          measure(*lk, *k, *ck, bc.sizes, bc.dt, one, f);
          results.push_back(one);
          continue;
        }
      }
      Buffers bufs;
      measure(*lk, *k, *ck, bc.sizes, bc.dt, r, f, &bufs);
      if (bc.kernel == "matmul") {
        std::vector<Result> more = bench_matmul(*lk, bc, *unbound, *k, *ck, bufs, r, f, opts, status);
        results.push_back(r);
        results.insert(results.end(), more.begin(), more.end());
        continue;
      }
      results.push_back(r);

      if (f.tune && (bc.kernel == "softmax" || bc.kernel == "layernorm" || bc.kernel == "rmsnorm")) {
        // Every variant compiled in parallel (NVRTC is the cost), then each timed and its output
        // compared with the default's on the same inputs; the best correct one is reported
        // beside the default, and every variant's figure in its note.
        ck->launch(bufs.args, ptrs_for(*k, bufs, 0), nullptr);
        check(driver()->cuCtxSynchronize(), "cuCtxSynchronize");
        std::vector<double> want = output_sample(bufs);
        auto variants = row_variants(*unbound, bc.sizes.at("N"));
        std::vector<std::future<std::shared_ptr<CudaKernel>>> futs;
        for (const auto& kk : variants)
          futs.push_back(std::async(std::launch::async, [&opts, kp = kk.get()]() -> std::shared_ptr<CudaKernel> {
            try {
              return compile_cuda(*kp, opts);
            } catch (const TesseraError&) {
              return nullptr;
            }
          }));
        Result best;
        std::string all;
        int timed = 0;
        for (size_t i = 0; i < variants.size(); ++i) {
          auto ckk = futs[i].get();
          std::string cfg = config_str(*variants[i]);
          if (!ckk) {
            all += (all.empty() ? "" : "; ") + cfg + " compile failed";
            continue;
          }
          Result t = r;
          t.note.clear();
          t.config = cfg;
          t.compile_s = ckk->compile_seconds;
          Flags quick = f;
          quick.iters = 20;
          try {
            measure(*lk, *variants[i], *ckk, bc.sizes, bc.dt, t, quick, &bufs);
            ckk->launch(bufs.args, ptrs_for(*variants[i], bufs, 0), nullptr);
            check(driver()->cuCtxSynchronize(), "cuCtxSynchronize");
          } catch (const TesseraError&) {
            all += (all.empty() ? "" : "; ") + cfg + " launch failed";
            continue;
          }
          double err = rel_diff(output_sample(bufs), want);
          char fig[64];
          std::snprintf(fig, sizeof fig, " %.0f", t.figure);
          all += (all.empty() ? "" : "; ") + cfg + fig + (err > 0.02 ? " WRONG" : "");
          if (err > 0.02) {
            status = 1;
            continue;
          }
          ++timed;
          if (t.figure > best.figure) best = t;
        }
        if (best.figure > 0) {
          best.kernel = bc.kernel + "_tuned";
          char head[160];
          std::snprintf(head, sizeof head, "best of %d variants (default %s: %.0f %s, x%.2f): ", timed,
                        r.config.c_str(), r.figure, r.unit.c_str(), best.figure / std::max(r.figure, 1e-9));
          best.note = head + all;
          results.push_back(best);
        }
      }

    } catch (const TesseraError& e) {
      r.note = std::string("ERROR: ") + e.what();
      results.push_back(r);
      status = 1;
    }
  }
  if (!shared_cache) std::filesystem::remove_all(cache);
  print_results(results, f, device_desc);
  return status;
}
