// Shared helpers for the cpu backend tests: a private cache directory, compiling once per
// kernel text, and differential runs against the interpreter.
#pragma once

#include <gtest/gtest.h>

#include "../common/BackendTestUtil.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "check/Compare.h"
#include "cpu/CpuBackend.h"
#include "interp/Interpreter.h"
#include "kernels/Tolerance.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera::cputest {

inline const std::string& test_cache_dir() { return testutil::process_cache_dir("cpu"); }

inline CpuOptions test_options() {
  CpuOptions o;
  o.cache_dir = test_cache_dir();
  return o;
}

using testutil::args_for;

// Every symbolic view dim of `k` gets a size from `sizes`, else a ragged default.
inline Sizes sizes_for(const Kernel& k, const Sizes& given) {
  Sizes s = given;
  for (const Value* p : k.params)
    if (p->type.is_view())
      for (const Dim& d : p->type.shape)
        if (!d.is_static() && !s.count(d.symbol)) s[d.symbol] = 150 + static_cast<int64_t>(d.symbol.size()) * 29;
  return s;
}

// Runs `k` on the interpreter and on the cpu backend from the same random inputs and compares
// every tensor (exact for integers, tolerance_for() plus the .tile rule's bound for floats:
// docs/checking.md). Returns the number of elements compared.
inline int64_t expect_same_as_interp(const Kernel& k, const Sizes& sizes, uint64_t seed,
                                     std::shared_ptr<CpuKernel> compiled = nullptr) {
  std::vector<Tensor> want = make_random_tensors(k, sizes, seed);
  std::vector<Tensor> got = want;
  auto wa = args_for(k, want), ga = args_for(k, got);
  run_interp(k, wa);
  if (!compiled) compiled = compile_cpu(k, test_options());
  compiled->run(ga);
  return testutil::expect_tensors_match(want, got, k.name, "cpu", {}, tile_error_bounds(k, sizes, want));
}

}  // namespace tessera::cputest
