// CUDA benchmarks of the library kernels: median kernel time from CUDA events after warm-up,
// on inputs larger than L2 (or rotated across enough buffer sets to exceed it), with the
// kernel's own figure (GB/s or TFLOP/s); matmul against cuBLAS's bf16 GEMM in the same process;
// NVRTC compile time per kernel and the time of a warm-cache hit.
// --tune: matmul over its constexpr space; softmax/layernorm/rmsnorm over every BLOCK_N
// (the loop branch included) and CTA size, each checked against the default's output.
//
//   cuda_bench [--quick] [--json [FILE]] [--only NAME] [--tune] [--iters N] [--dump-cubin DIR]
//              [--vec-n N] [--rows M --cols N] [--mnk N]
//
// Without a GPU it still reports the compile and cache-hit times.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/CudaBackend.h"
#include "cuda/Driver.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "support/Float.h"

using namespace tessera;
using namespace tessera::cuda;

namespace {

struct Flags {
  bool quick = false, tune = false, json = false;
  bool default_rows = true;  // the row shapes were not changed by flags
  std::string json_file, only, dump_cubin;
  int iters = 0;  // 0: adaptive
  int64_t vec_n = int64_t{1} << 28;
  std::vector<std::pair<int64_t, int64_t>> row_sizes = {{16384, 4096}, {4096, 32768}};
  int64_t mnk = 4096;
};

struct Result {
  std::string kernel, dtype, sizes, config, unit;
  double median_ms = 0, figure = 0;
  double compile_s = 0, memory_hit_ms = 0, disk_hit_ms = 0;
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

// Fill a device buffer with values uniform in [-1, 1) of the dtype, from one host chunk.
void fill_random(const DeviceBuffer& buf, ScalarKind dt, uint64_t seed) {
  size_t esz = scalar_bytes(dt);
  size_t chunk = std::min<size_t>(buf.bytes(), size_t{8} << 20) / esz * esz;
  if (chunk == 0) return;
  std::vector<uint8_t> host(chunk);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (size_t i = 0; i < chunk / esz; ++i) {
    double v = u(rng);
    uint64_t bits = is_float(dt) ? float_to_bits(dt, v) : static_cast<uint64_t>(static_cast<int64_t>(v * 8) + 9);
    std::memcpy(host.data() + i * esz, &bits, esz);  // little-endian: the low bytes
  }
  for (size_t off = 0; off < buf.bytes(); off += chunk) {
    size_t n = std::min(chunk, buf.bytes() - off);
    check(driver()->cuMemcpyHtoD(buf.get() + off, host.data(), n), "cuMemcpyHtoD");
  }
}

// Per-launch CUDA event times (ms) of `iters` back-to-back launches after warm-up.
template <class Launch>
std::vector<float> time_launches(Launch&& launch, int iters_flag) {
  const Driver& d = *driver();
  for (int i = 0; i < 3; ++i) launch(i);
  check(d.cuCtxSynchronize(), "cuCtxSynchronize");
  double t0 = now_s();
  launch(0);
  check(d.cuCtxSynchronize(), "cuCtxSynchronize");
  double one = std::max(now_s() - t0, 1e-6);
  int iters = iters_flag > 0 ? iters_flag : static_cast<int>(std::clamp(0.5 / one, 10.0, 200.0));
  std::vector<CUevent> ev(2 * iters);
  for (auto& e : ev) check(d.cuEventCreate(&e, 0), "cuEventCreate");
  for (int i = 0; i < iters; ++i) {
    check(d.cuEventRecord(ev[2 * i], nullptr), "cuEventRecord");
    launch(i);
    check(d.cuEventRecord(ev[2 * i + 1], nullptr), "cuEventRecord");
  }
  check(d.cuEventSynchronize(ev.back()), "cuEventSynchronize");
  std::vector<float> ms(iters);
  for (int i = 0; i < iters; ++i) check(d.cuEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]), "cuEventElapsedTime");
  for (auto& e : ev) d.cuEventDestroy(e);
  return ms;
}

double median(std::vector<float> v) {
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

// Time one compiled kernel on the device; fills median and figure.
void measure(const LibraryKernel& lk, const Kernel& k, CudaKernel& ck, const Sizes& sizes, ScalarKind dt,
             Result& r, const Flags& f, Buffers* keep = nullptr) {
  const DeviceInfo& dev = device();
  Buffers local;
  Buffers& b = keep ? *keep : local;
  if (b.sets.empty()) b = make_buffers(k, sizes, static_cast<uint64_t>(dev.l2_bytes));
  std::vector<std::vector<uint64_t>> ptrs;
  for (size_t s = 0; s < b.sets.size(); ++s) ptrs.push_back(ptrs_for(k, b, s));
  auto ms = time_launches([&](int i) { ck.launch(b.args, ptrs[i % ptrs.size()], nullptr); }, f.iters);
  r.median_ms = median(ms);
  double flops = lk.flops ? lk.flops(sizes, dt) : 0, bytes = lk.bytes ? lk.bytes(sizes, dt) : 0;
  if (lk.name == "matmul" && flops > 0) {
    r.figure = flops / (r.median_ms * 1e-3) / 1e12;
    r.unit = "TFLOP/s";
  } else {
    r.figure = bytes / (r.median_ms * 1e-3) / 1e9;
    r.unit = "GB/s";
  }
  if (b.sets.size() > 1) r.note = "rotating " + std::to_string(b.sets.size()) + " buffer sets";
}

// ---- cuBLAS, loaded at run time ----
struct Cublas {
  int (*create)(void**) = nullptr;
  int (*destroy)(void*) = nullptr;
  int (*gemm_ex)(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int,
                 const void*, void*, int, int, int, int) = nullptr;
  void* handle = nullptr;
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
  if (int s = c.create(&c.handle); s != 0) c.why = "cublasCreate failed with status " + std::to_string(s);
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

// Largest error of C (row-major M x N) against C = A B computed in double on the host, on a
// sample of elements, relative to the largest reference value.
double sample_gemm_error(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, int64_t M, int64_t N, int64_t K,
                         ScalarKind dt) {
  std::vector<double> A = download_values(a, M * K, dt), B = download_values(b, K * N, dt),
                      C = download_values(c, M * N, dt);
  std::mt19937_64 rng(5);
  double worst = 0, scale = 1e-30;
  std::vector<std::pair<double, double>> got_want;
  for (int s = 0; s < 256; ++s) {
    int64_t i = static_cast<int64_t>(rng() % M), j = static_cast<int64_t>(rng() % N);
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) acc += A[i * K + k] * B[k * N + j];
    scale = std::max(scale, std::fabs(acc));
    got_want.push_back({C[i * N + j], acc});
  }
  for (auto [g, w] : got_want) worst = std::max(worst, std::fabs(g - w) / scale);
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

void print_results(const std::vector<Result>& rs, const Flags& f, const std::string& device_desc) {
  std::printf("\n%-12s %-5s %-26s %10s %12s %-8s %10s %9s %9s  %s\n", "kernel", "dtype", "sizes", "median_ms",
              "figure", "unit", "nvrtc_s", "mem_ms", "disk_ms", "config / note");
  for (const auto& r : rs)
    std::printf("%-12s %-5s %-26s %10.4f %12.2f %-8s %10.3f %9.3f %9.3f  %s %s\n", r.kernel.c_str(), r.dtype.c_str(),
                r.sizes.c_str(), r.median_ms, r.figure, r.unit.c_str(), r.compile_s, r.memory_hit_ms, r.disk_hit_ms,
                r.config.c_str(), r.note.c_str());
  if (!f.json) return;
  std::ostringstream j;
  j << "{\n  \"device\": \"" << json_escape(device_desc) << "\",\n  \"results\": [\n";
  for (size_t i = 0; i < rs.size(); ++i) {
    const Result& r = rs[i];
    j << "    {\"kernel\": \"" << r.kernel << "\", \"dtype\": \"" << r.dtype << "\", \"sizes\": \"" << r.sizes
      << "\", \"config\": \"" << r.config << "\", \"median_ms\": " << r.median_ms << ", \"figure\": " << r.figure
      << ", \"unit\": \"" << r.unit << "\", \"nvrtc_s\": " << r.compile_s << ", \"memory_hit_ms\": " << r.memory_hit_ms
      << ", \"disk_hit_ms\": " << r.disk_hit_ms << ", \"note\": \"" << json_escape(r.note) << "\"}"
      << (i + 1 < rs.size() ? ",\n" : "\n");
  }
  j << "  ]\n}\n";
  if (f.json_file.empty()) std::fputs(j.str().c_str(), stdout);
  else std::ofstream(f.json_file) << j.str();
}

Flags parse_flags(int argc, char** argv) {
  Flags f;
  int64_t rows = 0, cols = 0;
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
    else if (a == "--mnk") f.mnk = std::stoll(need(i));
    else if (a == "--rows") rows = std::stoll(need(i));
    else if (a == "--cols") cols = std::stoll(need(i));
    else if (a == "-h" || a == "--help") {
      std::printf("usage: cuda_bench [--quick] [--json [FILE]] [--only NAME] [--tune] [--iters N] [--dump-cubin DIR]\n"
                  "                  [--vec-n N] [--rows M] [--cols N] [--mnk N]\n");
      std::exit(0);
    } else {
      std::fprintf(stderr, "cuda_bench: unknown flag %s\n", a.c_str());
      std::exit(2);
    }
  }
  if (f.quick) {
    f.vec_n = int64_t{1} << 24;
    f.row_sizes = {{4096, 4096}};
    f.mnk = 2048;
  }
  // --rows/--cols replace the two default shapes by one.
  if (rows || cols) f.row_sizes = {{rows ? rows : 4096, cols ? cols : 4096}};
  f.default_rows = !f.quick && !rows && !cols;
  return f;
}

struct BenchCase {
  std::string kernel;
  ScalarKind dt;
  Sizes sizes;
};

std::vector<BenchCase> bench_cases(const Flags& f) {
  std::vector<BenchCase> c;
  c.push_back({"vector_add", ScalarKind::F32, {{"N", f.vec_n}}});
  for (const char* k : {"softmax", "layernorm", "rmsnorm"}) {
    for (auto [m, n] : f.row_sizes) c.push_back({k, ScalarKind::BF16, {{"M", m}, {"N", n}}});
    // The anchors (.devdeps/bench/anchors_h200.py) measure the norms at 4096x8192 too.
    if (f.default_rows && std::string(k) != "softmax") c.push_back({k, ScalarKind::BF16, {{"M", 4096}, {"N", 8192}}});
  }
  c.push_back({"matmul", ScalarKind::BF16, {{"M", f.mnk}, {"N", f.mnk}, {"K", f.mnk}}});
  std::vector<BenchCase> out;
  for (auto& x : c)
    if (f.only.empty() || f.only == x.kernel) out.push_back(x);
  return out;
}

// The row kernels' column tile: the smallest BLOCK_N candidate that holds a whole row, so that
// the row is read once and stays in registers (the largest when none does).
ConstexprConfig row_config(const Kernel& k, const BenchCase& bc) {
  const ConstexprDecl* d = k.find_constexpr("BLOCK_N");
  if (!d || d->candidates.empty() || !bc.sizes.count("N") || bc.kernel == "matmul") return {};
  // The smallest tile that holds the whole row (read once, kept in registers), but no more
  // than 8192 columns: longer rows loop over 8192-column tiles, whose second read comes from
  // L2. Measured on the H200 (bench/RESULTS.md, 08:20 run, 4096x32768 bf16): BLOCK_N=8192
  // beat the whole-row tile for softmax (2415 vs 2096 GB/s), layernorm (1865 vs 1563) and
  // rmsnorm (2847 vs 2807).
  constexpr int64_t kLongestRowTile = 8192;
  int64_t n = std::min(bc.sizes.at("N"), kLongestRowTile), best = 0;
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

// A row kernel's tuning space for --tune: every BLOCK_N candidate (those smaller than the row
// take the kernel's loop branch), each with the emitter's own thread count and with 4..32 warps
// where a thread then holds 8..64 elements of the tile (fewer: not one 16-byte vector of bf16;
// more: the row no longer fits the registers). num_warps is added to a copy of the kernel, which
// the emitter reads as the CTA size; the library kernels do not declare it.
std::vector<std::unique_ptr<Kernel>> row_variants(const Kernel& unbound) {
  std::vector<std::unique_ptr<Kernel>> out;
  const ConstexprDecl* d = unbound.find_constexpr("BLOCK_N");
  if (!d) return out;
  for (int64_t bn : d->candidates) {
    out.push_back(bind_constexprs(unbound, {{"BLOCK_N", bn}}));
    if (unbound.find_constexpr("num_warps")) continue;
    for (int64_t w : {4, 8, 16, 32}) {
      int64_t per_thread = bn / (w * 32);
      if (per_thread < 8 || per_thread > 64) continue;
      auto k = bind_constexprs(unbound, {{"BLOCK_N", bn}});
      k->constexprs.push_back({"num_warps", w, {w}, unbound.loc});
      out.push_back(std::move(k));
    }
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
  std::printf("cuda_bench: device %s\n", device_desc.c_str());
  std::string cache = (std::filesystem::temp_directory_path() / ("tessera-cuda-bench-" + std::to_string(::getpid()))).string();
  CudaOptions opts;
  opts.cache_dir = cache;

  std::vector<Result> results;
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
      auto k = bind_constexprs(*unbound, row_config(*unbound, bc));
      r.config = config_str(*k);
      // Cold NVRTC compile, then a memory-cache hit and a disk-cache hit (as a new process).
      clear_cuda_memory_cache();
      std::filesystem::remove_all(cache);
      auto ck = compile_cuda(*k, opts);
      r.compile_s = ck->compile_seconds;
      double t0 = now_s();
      auto hit = compile_cuda(*k, opts);
      r.memory_hit_ms = (now_s() - t0) * 1e3;
      clear_cuda_memory_cache();
      t0 = now_s();
      ck = compile_cuda(*k, opts);
      r.disk_hit_ms = (now_s() - t0) * 1e3;
      if (!ck->from_cache) r.note = "disk cache missed!";
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
      Buffers bufs;
      measure(*lk, *k, *ck, bc.sizes, bc.dt, r, f, &bufs);
      results.push_back(r);

      if (f.tune && (bc.kernel == "softmax" || bc.kernel == "layernorm" || bc.kernel == "rmsnorm")) {
        // Every variant compiled in parallel (NVRTC is the cost), then each timed and its output
        // compared with the default's on the same inputs; the best correct one is reported
        // beside the default, and every variant's figure in its note.
        ck->launch(bufs.args, ptrs_for(*k, bufs, 0), nullptr);
        check(driver()->cuCtxSynchronize(), "cuCtxSynchronize");
        std::vector<double> want = output_sample(bufs);
        auto variants = row_variants(*unbound);
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

      if (bc.kernel == "matmul") {
        // cuBLAS on the same buffers; its output goes to a separate C so both can be compared.
        static Cublas cb = load_cublas();
        Result c;
        c.kernel = "cublas_gemm";
        c.dtype = r.dtype;
        c.sizes = r.sizes;
        c.unit = "TFLOP/s";
        if (!cb.why.empty()) {
          c.note = cb.why;
        } else {
          int64_t M = bc.sizes.at("M"), N = bc.sizes.at("N"), K = bc.sizes.at("K");
          DeviceBuffer cref(static_cast<size_t>(M * N) * scalar_bytes(bc.dt));
          auto& set = bufs.sets[0];
          int st = cublas_gemm(cb, bc.dt, M, N, K, set[0].get(), set[1].get(), cref.get());
          if (st != 0) {
            c.note = "cublasGemmEx status " + std::to_string(st);
          } else {
            auto ms = time_launches([&](int i) {
              auto& s = bufs.sets[i % bufs.sets.size()];
              cublas_gemm(cb, bc.dt, M, N, K, s[0].get(), s[1].get(), cref.get());
            }, f.iters);
            c.median_ms = median(ms);
            c.figure = lk->flops(bc.sizes, bc.dt) / (c.median_ms * 1e-3) / 1e12;
            // The timed runs rotated the inputs: recompute both products from set 0.
            cublas_gemm(cb, bc.dt, M, N, K, set[0].get(), set[1].get(), cref.get());
            ck->launch(bufs.args, ptrs_for(*k, bufs, 0), nullptr);
            check(driver()->cuCtxSynchronize(), "cuCtxSynchronize");
            double et = sample_gemm_error(set[0].get(), set[1].get(), set[2].get(), M, N, K, bc.dt);
            double ec = sample_gemm_error(set[0].get(), set[1].get(), cref.get(), M, N, K, bc.dt);
            c.note = "sampled max rel error: tessera " + std::to_string(et) + ", cuBLAS " + std::to_string(ec);
            if (et > 0.02) {
              c.note += " TESSERA WRONG";
              status = 1;
            }
            if (ec > 0.02) {
              c.note += " CUBLAS CALL WRONG";
              status = 1;
            }
            r.note += (r.note.empty() ? "" : "; ") + std::string("cuBLAS ratio ") +
                      std::to_string(r.figure / std::max(c.figure, 1e-9));
            results.back().note = r.note;
          }
        }
        results.push_back(c);

        if (f.tune) {
          // Compile every configuration in parallel (NVRTC is the cost), then time each.
          auto cfgs = all_configs(*unbound, 64);
          std::vector<std::future<std::pair<std::unique_ptr<Kernel>, std::shared_ptr<CudaKernel>>>> futs;
          for (const auto& cfg : cfgs)
            futs.push_back(std::async(std::launch::async, [&, cfg] {
              auto kk = bind_constexprs(*unbound, cfg);
              std::shared_ptr<CudaKernel> ckk;
              try {
                ckk = compile_cuda(*kk, opts);
              } catch (const TesseraError&) {
              }
              return std::make_pair(std::move(kk), ckk);
            }));
          Result best;
          for (auto& fu : futs) {
            auto [kk, ckk] = fu.get();
            if (!ckk) continue;
            Result t = r;
            t.note.clear();
            t.config = config_str(*kk);
            Flags quick = f;
            quick.iters = 10;
            try {
              measure(*lk, *kk, *ckk, bc.sizes, bc.dt, t, quick, &bufs);
            } catch (const TesseraError&) {
              continue;  // e.g. a configuration needing more shared memory than the device has
            }
            if (t.figure > best.figure) best = t;
          }
          if (best.figure > 0) {
            best.kernel = "matmul_tuned";
            best.note = "best of " + std::to_string(cfgs.size()) + " configurations; cuBLAS ratio " +
                        std::to_string(best.figure / std::max(c.figure, 1e-9));
            results.push_back(best);
          }
        }
      }
    } catch (const TesseraError& e) {
      r.note = std::string("ERROR: ") + e.what();
      results.push_back(r);
      status = 1;
    }
  }
  std::filesystem::remove_all(cache);
  print_results(results, f, device_desc);
  return status;
}
