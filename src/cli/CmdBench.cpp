// `tessera bench`: median time of a kernel on a backend, and its own figure of merit.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "cli/Args.h"
#include "cli/Backend.h"
#include "cli/Commands.h"

namespace tessera::cli {

namespace {

std::string json_num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

struct Figure {
  double value = 0;
  std::string unit;  // "GB/s", "GFLOP/s", "TFLOP/s", or empty when the kernel has none
};

// Memory-bound kernels are judged by bandwidth, compute-bound ones by FLOP/s; the split is a
// rough arithmetic intensity where a CPU or GPU stops being bandwidth-limited.
Figure figure_of(double bytes, double flops, double seconds) {
  if (seconds <= 0) return {};
  if (flops > 0 && (bytes <= 0 || flops / bytes >= 8)) {
    double f = flops / seconds;
    return f >= 1e12 ? Figure{f / 1e12, "TFLOP/s"} : Figure{f / 1e9, "GFLOP/s"};
  }
  if (bytes > 0) return {bytes / seconds / 1e9, "GB/s"};
  return {};
}

}  // namespace

int cmd_bench(const BenchOptions& o) {
  if (o.reps < 0) throw TesseraError("--reps must be at least 1");
  int reps = o.reps > 0 ? o.reps : (o.backend == "interp" ? 3 : 20);
  auto src = resolve_kernel(o.k.what, o.k.dtype, o.k.kernel);
  if (!src) return 1;

  std::vector<KernelPlan> plans = plan_kernels(*src, o.k, 1);
  apply_target_configs(*src, plans, backend_target(o.backend));
  for (const KernelPlan& plan : plans) {
    const Kernel* k = plan.kernel;
    const Sizes& sizes = plan.sizes;
    PipelineOptions po;
    po.config = plan.config;
    po.disabled = o.k.disable_passes;
    std::unique_ptr<Kernel> bound = run_pipeline(*k, po);
    auto runner = make_library_runner(o.backend, *bound, src->lib, src->dtype, sizes, plan.given(), o.k.disable_passes);
    std::vector<Tensor> tensors = make_random_tensors(*bound, sizes, o.k.seed);
    std::vector<KernelArg> args = make_args(*bound, tensors, o.k.seed, plan.scalars);

    // Host-device copies are not the kernel's time: cuda runs on resident device buffers.
    runner->make_resident(args);
    for (int i = 0; i < o.warmup; ++i) runner->run_resident(args);
    std::vector<double> ms;
    for (int i = 0; i < reps; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      runner->run_resident(args);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    double median = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;

    double bytes = src->lib && src->lib->bytes ? src->lib->bytes(sizes, src->dtype) : 0;
    double flops = src->lib && src->lib->flops ? src->lib->flops(sizes, src->dtype) : 0;
    Figure fig = figure_of(bytes, flops, median / 1e3);
    std::string dtype = src->lib ? std::string(scalar_name(src->dtype)) : "";

    if (o.json) {
      std::string sz;
      for (const auto& d : symbolic_dims(*k))
        sz += (sz.empty() ? "" : ", ") + json_str(d) + ": " + std::to_string(sizes.at(d));
      std::cout << "{\"kernel\": " << json_str(k->name) << ", \"backend\": " << json_str(o.backend)
                << ", \"dtype\": " << json_str(dtype) << ", \"sizes\": {" << sz << "}"
                << ", \"reps\": " << reps << ", \"warmup\": " << o.warmup
                << ", \"median_ms\": " << json_num(median) << ", \"min_ms\": " << json_num(ms.front())
                << ", \"max_ms\": " << json_num(ms.back())
                << ", \"compile_s\": " << json_num(runner->compile_seconds)
                << ", \"device\": " << json_str(runner->detail)
                << ", \"bytes\": " << json_num(bytes) << ", \"flops\": " << json_num(flops)
                << ", \"figure\": " << json_num(fig.value) << ", \"unit\": " << json_str(fig.unit)
                << "}\n";
    } else {
      std::cout << k->name << " " << o.backend << " " << sizes_str(*k, sizes)
                << (dtype.empty() ? "" : " dtype=" + dtype) << " median_ms=" << fmt_num(median)
                << " min_ms=" << fmt_num(ms.front()) << " reps=" << reps;
      if (!fig.unit.empty()) std::cout << " " << fmt_num(fig.value) << " " << fig.unit;
      if (!runner->detail.empty()) std::cout << " (" << runner->detail << ")";
      std::cout << "\n";
    }
  }
  return 0;
}

}  // namespace tessera::cli
