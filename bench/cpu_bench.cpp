// cpu backend benchmark: memory bandwidth, normalization kernels, matmul vs OpenBLAS, the
// speed-up over the interpreter, and compile / warm-cache load times, in one table.
//
//   cpu_bench                 run everything
//   cpu_bench --emit NAME [DTYPE]  print the generated C++ of a library kernel (default f32)
//   cpu_bench --rows          only the memcpy reference and the row kernels (a quick figure)
//   cpu_bench --compiles      only the cold compiles (every library kernel and dtype) and warm loads
//   cpu_bench --warm-load DIR (internal) load every library kernel from the disk cache in DIR
//                             in this fresh process and print "name seconds" lines
#include <sys/resource.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cpu/CpuBackend.h"
#include "interp/Interpreter.h"
#include "kernels/Library.h"
#include "passes/Passes.h"

#ifdef TESSERA_HAVE_OPENBLAS
extern "C" {
void cblas_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc);
void openblas_set_num_threads(int);
char* openblas_get_corename(void);
}
#endif

using namespace tessera;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

template <class F>
double median_time(F&& f, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    f();
    t.push_back(seconds_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::vector<KernelArg> args_for(const Kernel& k, std::vector<Tensor>& ts) {
  std::vector<KernelArg> a;
  size_t ti = 0;
  for (const Value* p : k.params) {
    KernelArg x;
    if (p->type.is_view()) x.tensor = &ts.at(ti++);
    a.push_back(x);
  }
  return a;
}

void row(const char* what, const std::string& value, const std::string& note) {
  std::printf("%-44s %18s   %s\n", what, value.c_str(), note.c_str());
}
std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

int warm_load(const std::string& dir) {
  CpuOptions o;
  o.cache_dir = dir;
  for (const auto& lk : library()) {
    auto k = bind_constexprs(*lk.build(lk.dtypes.at(0)), {});
    auto t0 = Clock::now();
    auto ck = compile_cpu(*k, o);
    double s = seconds_since(t0);
    std::printf("%s %.6f %d\n", lk.name.c_str(), s, ck->from_disk_cache ? 1 : 0);
  }
  return 0;
}

}  // namespace

// The cold compile rows (cache: a fresh path to name the scratch folders after).
void cold_compiles(const std::string& cache) {
  // Cold compile of each library kernel and dtype into an empty cache, then a fresh process
  // loading it. Wall time, and the compiler's CPU time (user + sys of the child processes: what
  // the machine's other tenants do not move). The kernels link the build's runtime object
  // (src/cpu/RuntimeObject.cpp); compiling that object, once per compiler and flags, is its own
  // row.
  std::string cold_dir = cache + "-cold";
  CpuOptions cold;
  cold.cache_dir = cold_dir;
  auto child_cpu = [] {
    struct rusage ru;
    ::getrusage(RUSAGE_CHILDREN, &ru);
    return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  };
  {
    std::string rt_dir = cache + "-runtime";
    double c0 = child_cpu();
    auto t0 = std::chrono::steady_clock::now();
    build_cpu_runtime_object(rt_dir, cold);
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    row("compile the runtime object (once)", fmt("%.3f s", wall), fmt("%.3f s of compiler CPU", child_cpu() - c0));
    std::error_code ec;
    std::filesystem::remove_all(rt_dir, ec);
  }
  for (const auto& lk : library())
    for (ScalarKind dt : lk.dtypes) {
      auto k = bind_constexprs(*lk.build(dt), {});
      clear_cpu_memory_cache();
      double c0 = child_cpu();
      auto ck = compile_cpu(*k, cold);
      row(("cold compile " + lk.name + " " + std::string(scalar_name(dt))).c_str(), fmt("%.3f s", ck->compile_seconds),
          fmt("%.3f s of compiler CPU (target < 0.5 s)", child_cpu() - c0));
    }
  std::string cmd = std::filesystem::read_symlink("/proc/self/exe").string() + " --warm-load " + cold_dir;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char name[128];
    double s;
    int hit;
    while (std::fscanf(p, "%127s %lf %d", name, &s, &hit) == 3)
      row(("warm disk-cache load " + std::string(name)).c_str(), fmt("%.2f ms", s * 1e3),
          std::string(hit ? "fresh process" : "MISSED the cache"));
    ::pclose(p);
  }
  std::error_code ec;
  std::filesystem::remove_all(cold_dir, ec);
}

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--warm-load") == 0) return warm_load(argv[2]);
  if ((argc == 3 || argc == 4) && std::strcmp(argv[1], "--emit") == 0) {  // a library kernel's C++
    const LibraryKernel* lk = find_library_kernel(argv[2]);
    if (!lk) return 1;
    std::optional<ScalarKind> dt = argc == 4 ? scalar_from_name(argv[3]) : ScalarKind::F32;
    if (!dt) return 1;
    std::fputs(emit_cpp(*run_pipeline(*lk->build(*dt), {})).c_str(), stdout);
    return 0;
  }
  const bool rows_only = argc == 2 && std::strcmp(argv[1], "--rows") == 0;
  if (argc == 2 && std::strcmp(argv[1], "--compiles") == 0) {
    cold_compiles((std::filesystem::temp_directory_path() / ("tessera-bench-" + std::to_string(::getpid()))).string());
    return 0;
  }
  // $TESSERA_BENCH_THREADS: fewer threads than cores (a 2-core figure on a larger machine).
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const char* e = std::getenv("TESSERA_BENCH_THREADS"); e && std::atoi(e) > 0) threads = std::atoi(e);
  std::printf("tessera cpu bench (%d threads)\n\n", threads);

  // memcpy bandwidth over 4096x4096 f32 buffers, one copy per thread over its half.
  const size_t n = 4096ull * 4096ull;
  std::vector<float> src(n, 1.5f), dst(n, 0.0f);
  auto copy = [&] {
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        size_t lo = n * t / threads, hi = n * (t + 1) / threads;
        std::memcpy(dst.data() + lo, src.data() + lo, (hi - lo) * sizeof(float));
      });
    for (auto& t : ts) t.join();
  };
  // Half a second of copies first: OpenBLAS (linked for the sgemm row) starts its thread pool
  // when the process loads, and while those threads spin the copies ran at half speed (17-24
  // against 42-51 GB/s on a 2-core Xeon, bench/RESULTS.md session 14), which made every
  // "of memcpy" ratio look twice as good as it was.
  for (auto t0 = Clock::now(); seconds_since(t0) < 0.5;) copy();
  double t_memcpy = median_time(copy, 9);
  double memcpy_gbs = 2.0 * n * sizeof(float) / t_memcpy / 1e9;
  row("memcpy 4096x4096 f32 (read+write)", fmt("%.2f GB/s", memcpy_gbs), "reference");

  std::string cache = (std::filesystem::temp_directory_path() / ("tessera-bench-" + std::to_string(::getpid()))).string();
  CpuOptions opts;
  opts.cache_dir = cache;
  opts.num_threads = threads;

  // Row kernels, f32 and bf16, with the configs `tessera bench -b cpu` gives them.
  auto bind_for_cpu = [](const LibraryKernel& lk, ScalarKind dt, const Sizes& s) {
    auto k = lk.build(dt);
    PipelineOptions po;
    for (const auto& [name, v] : library_config(lk, dt, "cpu", {}, &s)) po.config[name] = v;
    return run_pipeline(*k, po);
  };
  for (ScalarKind dt : {ScalarKind::F32, ScalarKind::BF16})
    for (const char* name : {"softmax", "layernorm", "rmsnorm"}) {
      const LibraryKernel* lk = find_library_kernel(name);
      if (!lk) {
        row(name, "missing", "");
        continue;
      }
      Sizes s = lk->default_sizes;
      for (auto& [d, v] : s) v = 4096;
      auto k = bind_for_cpu(*lk, dt, s);
      std::vector<Tensor> ts = make_random_tensors(*k, s, 1);
      auto args = args_for(*k, ts);
      auto ck = compile_cpu(*k, opts);
      ck->run(args);
      double t = median_time([&] { ck->run(args); }, 9);
      double gbs = lk->bytes(s, dt) / t / 1e9;
      row((std::string(name) + " 4096x4096 " + std::string(scalar_name(dt)) + " cpu").c_str(), fmt("%.2f GB/s", gbs),
          fmt("%.2f of memcpy (target >= 0.7)", gbs / memcpy_gbs));
      if (std::string(name) == "softmax" && dt == ScalarKind::F32) {
        // The interpreter on a slice of rows, scaled to the full size.
        Sizes small = s;
        small["M"] = 16;
        std::vector<Tensor> ts2 = make_random_tensors(*k, small, 1);
        auto a2 = args_for(*k, ts2);
        double ti = median_time([&] { run_interp(*k, a2); }, 1) * (4096.0 / 16.0);
        row("softmax 4096x4096 f32 interp (16 rows, scaled)", fmt("%.3f s", ti),
            fmt("cpu is %.0fx faster (target >= 50x)", ti / t));
      }
    }

  if (rows_only) {
    std::error_code ec;
    std::filesystem::remove_all(cache, ec);
    return 0;
  }

  // top-k of 64 rows of 131072 at k = 64 (the shape issue 18 compares with torch.topk on the GPU).
  if (const LibraryKernel* lk = find_library_kernel("topk")) {
    Sizes s{{"M", 64}, {"N", 131072}, {"K", 64}};
    auto k = bind_for_cpu(*lk, ScalarKind::F32, s);
    std::vector<Tensor> ts = make_random_tensors(*k, s, 3);
    auto args = args_for(*k, ts);
    auto ck = compile_cpu(*k, opts);
    ck->run(args);
    double t = median_time([&] { ck->run(args); }, 5);
    row("topk 64x131072 k=64 f32 cpu (whole-row kernel)", fmt("%.3f ms", t * 1e3),
        fmt("%.2f GB/s", lk->bytes(s, ScalarKind::F32) / t / 1e9));
    // What `tessera run topk -b cpu` runs at this shape: the stages from the bucket threshold.
    LibraryStages st = lk->stages(ScalarKind::F32, "cpu", s, {});
    std::vector<Tensor> temps;
    for (const LibraryTemporary& tmp : st.temporaries) temps.emplace_back(tmp.dtype, tmp.shape);
    std::vector<KernelArg> targs;
    for (Tensor& tmp : temps) targs.push_back({&tmp, int64_t{0}});
    std::vector<std::shared_ptr<CpuKernel>> compiled;
    for (const LibraryStage& stage : st.stages)
      compiled.push_back(compile_cpu(*run_pipeline(*stage.build(ScalarKind::F32), PipelineOptions{stage.config, "", nullptr, {}}), opts));
    auto run_stages = [&] {
      for (size_t i = 0; i < compiled.size(); ++i) {
        std::vector<KernelArg> a = stage_args(st.stages[i], args, targs);
        compiled[i]->run(a);
      }
    };
    if (!compiled.empty()) {
      run_stages();
      double ts = median_time(run_stages, 5);
      const std::string what = "topk 64x131072 k=64 f32 cpu (" + std::to_string(compiled.size()) + " kernels, the default)";
      row(what.c_str(), fmt("%.3f ms", ts * 1e3), fmt("%.2f GB/s", lk->bytes(s, ScalarKind::F32) / ts / 1e9));
    }
  }

  // Matmul vs OpenBLAS, at 1024^3 and 2048^3.
  if (const LibraryKernel* lk = find_library_kernel("matmul"))
    for (int64_t n : {1024, 2048}) {
      Sizes s = lk->default_sizes;
      for (auto& [d, v] : s) v = n;
      auto k = bind_for_cpu(*lk, ScalarKind::F32, s);
      std::vector<Tensor> ts = make_random_tensors(*k, s, 2);
      auto args = args_for(*k, ts);
      auto ck = compile_cpu(*k, opts);
      ck->run(args);
      double t = median_time([&] { ck->run(args); }, 5);
      double gf = lk->flops(s, ScalarKind::F32) / t / 1e9;
      std::string what = "matmul " + std::to_string(n) + "^3 f32";
      row((what + " cpu").c_str(), fmt("%.1f GFLOP/s", gf), "");
#ifdef TESSERA_HAVE_OPENBLAS
      openblas_set_num_threads(threads);
      const int ni = static_cast<int>(n);
      std::vector<float> A(n * n, 0.5f), B(n * n, 0.25f), C(n * n);
      auto sg = [&] { cblas_sgemm(101, 111, 111, ni, ni, ni, 1.0f, A.data(), ni, B.data(), ni, 0.0f, C.data(), ni); };
      sg();
      double tb = median_time(sg, 5);
      double gb = 2.0 * n * n * n / tb / 1e9;
      // OpenBLAS picks its kernel by CPU model (OPENBLAS_CORETYPE overrides it): 0.3.21 takes its
      // AVX2 "Haswell" kernel on AMD Zen 5, 0.57x its AVX-512 "SkylakeX" one there (session 17).
      row((what + " OpenBLAS sgemm").c_str(), fmt("%.1f GFLOP/s", gb),
          fmt("cpu at %.2fx of OpenBLAS time (target within 1.5x), kernel ", t / tb) + openblas_get_corename());
#else
      row((what + " OpenBLAS sgemm").c_str(), "n/a", "built without OpenBLAS (install libopenblas-dev)");
#endif
    }

  cold_compiles(cache);
  std::error_code ec;
  std::filesystem::remove_all(cache, ec);
  return 0;
}
