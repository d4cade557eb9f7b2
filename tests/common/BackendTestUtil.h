// Helpers shared by the backend test binaries (tests/cpu, tests/gpu): a private compile-cache
// directory per test process and kernel arguments for a set of tensors.
#pragma once

#include <algorithm>

#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/Tolerance.h"
#include "runtime/Tensor.h"

namespace tessera::testutil {

// One cache directory per test process (named after `what`), removed at exit. The name lives
// in a never-destroyed string: the exit handler runs after the statics are destroyed.
inline const std::string& process_cache_dir(const std::string& what) {
  static const std::string* dir = [&] {
    auto* d = new std::string((std::filesystem::temp_directory_path() /
                               ("tessera-" + what + "-test-" + std::to_string(::getpid())))
                                  .string());
    std::filesystem::create_directories(*d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(*dir, ec);
    });
    return d;
  }();
  return *dir;
}

// Arguments in signature order: the tensors for the views, fixed nonzero scalars.
inline std::vector<KernelArg> args_for(const Kernel& k, std::vector<Tensor>& ts) {
  std::vector<KernelArg> a;
  size_t ti = 0;
  for (const Value* p : k.params) {
    KernelArg x;
    if (p->type.is_view()) x.tensor = &ts.at(ti++);
    else if (p->type.is_scalar() && is_float(p->type.elem)) x.scalar = 0.75;
    else if (p->type.is_scalar()) x.scalar = int64_t{3};
    a.push_back(x);
  }
  return a;
}

// Compares a backend's tensors with the interpreter's: exact for integers, tolerance_for() for
// floats (NaN matches NaN). Reports at most 5 mismatches per tensor, each prefixed by `what`
// and naming `backend`. Returns the number of elements compared.
// `floor`: a looser bound to use where it is looser than the dtype's (a hardware path whose
// documented accuracy is below the interpreter's, e.g. fp8 tensor-core accumulation).
// `bounds`: per-element error bounds added to the tolerance (tile_error_bounds, check/Compare.h).
inline int64_t expect_tensors_match(const std::vector<Tensor>& want, const std::vector<Tensor>& got,
                                    const std::string& what, const std::string& backend,
                                    Tolerance floor = {}, const ErrorBounds& bounds = {}) {
  int64_t compared = 0;
  for (size_t t = 0; t < want.size(); ++t) {
    ScalarKind dt = want[t].dtype;
    Tolerance tol = tolerance_for(dt);
    tol.atol = std::max(tol.atol, floor.atol);
    tol.rtol = std::max(tol.rtol, floor.rtol);
    int bad = 0;
    for (int64_t i = 0; i < want[t].numel() && bad < 5; ++i, ++compared) {
      if (is_float(dt)) {
        double w = want[t].get(i), g = got[t].get(i);
        double bound = t < bounds.size() ? error_bound_at(bounds[t], i) : 0;
        bool ok = (std::isnan(w) && std::isnan(g)) || w == g ||
                  std::fabs(w - g) <= tol.atol + tol.rtol * std::fabs(w) + bound;
        if (!ok) {
          ++bad;
          ADD_FAILURE() << what << " tensor " << t << " element " << i << ": " << backend << " " << g << " interp " << w;
        }
      } else if (want[t].get_int(i) != got[t].get_int(i)) {
        ++bad;
        ADD_FAILURE() << what << " tensor " << t << " element " << i << ": " << backend << " " << got[t].get_int(i)
                      << " interp " << want[t].get_int(i);
      }
    }
  }
  return compared;
}

}  // namespace tessera::testutil
