// Runs the segmented top-k's kernels (LibraryKernel::stages of topk) on some backend, for the
// interp / cpu test (tests/kernels/TopkStagesTest.cpp) and the GPU one
// (tests/gpu/topk_stages_gpu_test.cpp): the op's tensors, the inputs of a few values.
#pragma once

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "kernels/Library.h"
#include "passes/Passes.h"
#include "runtime/Tensor.h"

namespace tessera::testutil {

// Runs the stages in order on the op's arguments, each bound and given to `run`, the
// temporaries filled with garbage (NaN values, column 12345) so that a slot a stage should
// write and does not shows.
inline void run_topk_stages(const LibraryStages& st, ScalarKind dt, std::vector<KernelArg>& op,
                            const std::function<void(const Kernel& bound, std::vector<KernelArg>& args)>& run) {
  std::vector<Tensor> temps;
  for (const LibraryTemporary& t : st.temporaries) {
    temps.emplace_back(t.dtype, t.shape);
    for (int64_t i = 0; i < temps.back().numel(); ++i)
      t.dtype == ScalarKind::I32 ? temps.back().set_int(i, 12345) : temps.back().set(i, NAN);
  }
  std::vector<KernelArg> targs;
  for (Tensor& t : temps) targs.push_back({&t, int64_t{0}});
  for (const LibraryStage& s : st.stages) {
    auto bound = run_pipeline(*s.build(dt), PipelineOptions{s.config, "", nullptr, {}});
    std::vector<KernelArg> a = stage_args(s, op, targs);
    run(*bound, a);
  }
}

// Rows drawn from a handful of values: ties everywhere, NaN, infinities and zeros of both signs.
inline void fill_few_values(Tensor& x, uint64_t seed) {
  const double few[] = {-1.5, -0.0, 0.0, 2, INFINITY, -INFINITY, NAN, 0.5};
  std::mt19937 rng(static_cast<unsigned>(seed));
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, few[rng() % 8]);
}

}  // namespace tessera::testutil
