// Helpers for the GPU tests (ctest label `gpu`): every test skips where there is no device.
#pragma once

#include <gtest/gtest.h>

#include "../common/BackendTestUtil.h"
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "../cuda/CudaTestUtil.h"
#include "interp/Interpreter.h"
#include "kernels/Tolerance.h"

namespace tessera::gputest {

using namespace cudatest;

#define REQUIRE_GPU()                                          \
  do {                                                         \
    std::string why_;                                          \
    if (!nvrtc_available(&why_)) GTEST_SKIP() << why_;         \
    if (!cuda_device_available(&why_)) GTEST_SKIP() << why_;   \
  } while (0)

inline const std::string& test_cache_dir() { return testutil::process_cache_dir("gpu"); }

inline CudaOptions test_options() {
  CudaOptions o;
  o.cache_dir = test_cache_dir();
  return o;
}

// The planning emitter for every kernel (its own paths: the pipelined mma.sync ring, the wgmma
// plans, split-K and stream-K), where the default (CudaTarget::Emitter::Auto) would give most
// kernels to the layout emitter.
inline CudaOptions planning_options() {
  CudaOptions o = test_options();
  o.target.emitter = CudaTarget::Emitter::Planning;
  return o;
}

using testutil::args_for;

// Kernel `name` of the .tile file `rel` (relative to the source tree), bound with `cfg`, with
// the codegen knob `knob` (a kernel constexpr) set to 1.
inline std::unique_ptr<Kernel> knob_kernel(const std::string& rel, const std::string& name, const ConstexprConfig& cfg,
                                           const std::string& knob) {
  auto k = bind_constexprs(*parse_file(std::string(TESSERA_SOURCE_DIR) + "/" + rel)->find(name), cfg);
  k->set_constexpr(knob, 1);
  return k;
}

// Every symbolic view dim of `k` gets `base + step * i` (i counts the dims), unless given.
inline Sizes sizes_for(const Kernel& k, int64_t base, int64_t step) {
  Sizes s;
  int i = 0;
  for (const Value* p : k.params)
    if (p->type.is_view())
      for (const Dim& d : p->type.shape)
        if (!d.is_static() && !s.count(d.symbol)) s[d.symbol] = base + step * i++;
  return s;
}

inline std::string sizes_str(const Sizes& s) {
  std::string out;
  for (const auto& [n, v] : s) out += (out.empty() ? "" : ",") + n + "=" + std::to_string(v);
  return out;
}

// Runs `k` on the interpreter and on the GPU (compiled with `opts`) from the same random inputs
// and compares every tensor (exact for integers, tolerance_for() for floats). Returns the
// elements compared.
inline int64_t expect_gpu_matches_interp(const Kernel& k, const Sizes& sizes, uint64_t seed, Tolerance floor = {},
                                         const CudaOptions& opts = test_options()) {
  std::vector<Tensor> want = make_random_tensors(k, sizes, seed);
  std::vector<Tensor> got = want;
  auto wa = args_for(k, want), ga = args_for(k, got);
  run_interp(k, wa);
  auto compiled = compile_cuda(k, opts);
  compiled->run_host(ga);
  return testutil::expect_tensors_match(want, got, k.name + " [" + sizes_str(sizes) + "]", "gpu", floor);
}

}  // namespace tessera::gputest
