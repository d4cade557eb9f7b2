#include "cli/Check.h"

#include <cmath>
#include <cstdio>

#include "kernels/Tolerance.h"

namespace tessera::cli {

namespace {

std::string index_str(const std::vector<int64_t>& shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    int64_t n = shape[d] > 0 ? shape[d] : 1;
    idx[d] = flat % n;
    flat /= n;
  }
  std::string s = "[";
  for (size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + std::to_string(idx[i]);
  return s + "]";
}

}  // namespace

Comparison compare_outputs(const Kernel& k, const std::vector<Tensor>& got,
                           const std::vector<Tensor>& want) {
  Comparison c;
  std::vector<Value*> views = k.view_params();
  for (size_t t = 0; t < got.size() && t < want.size(); ++t) {
    const Tensor& g = got[t];
    const Tensor& w = want[t];
    std::string name = t < views.size() ? views[t]->name : "arg" + std::to_string(t);
    if (g.shape != w.shape || g.dtype != w.dtype) {
      c.mismatches += 1;
      if (c.first_mismatch.empty()) c.first_mismatch = name + ": shape or dtype differs";
      continue;
    }
    Tolerance tol = tolerance_for(g.dtype);
    bool integral = !is_float(g.dtype);
    for (int64_t i = 0; i < g.numel(); ++i) {
      ++c.elements;
      double a = integral ? static_cast<double>(g.get_int(i)) : g.get(i);
      double b = integral ? static_cast<double>(w.get_int(i)) : w.get(i);
      bool bad;
      double diff;
      if (std::isnan(a) || std::isnan(b)) {
        bad = std::isnan(a) != std::isnan(b);
        diff = bad ? INFINITY : 0;
      } else if (std::isinf(a) || std::isinf(b)) {
        bad = a != b;
        diff = bad ? INFINITY : 0;
      } else {
        diff = std::fabs(a - b);
        bad = diff > tol.atol + tol.rtol * std::fabs(b);
      }
      c.max_abs_err = std::max(c.max_abs_err, diff);
      if (b != 0 && !std::isnan(b)) c.max_rel_err = std::max(c.max_rel_err, diff / std::fabs(b));
      if (!bad) continue;
      if (c.mismatches++ == 0) {
        char buf[160];
        std::snprintf(buf, sizeof buf, ": got %.9g want %.9g (atol=%g rtol=%g)", a, b, tol.atol,
                      tol.rtol);
        c.first_mismatch = name + index_str(g.shape, i) + buf;
      }
    }
  }
  return c;
}

}  // namespace tessera::cli
