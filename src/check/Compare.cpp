#include "check/Compare.h"

#include <cmath>
#include <cstdio>

namespace tessera {

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

// The coarsest unit roundoff among the accumulators of `b`'s rounded reductions (0: none).
double reduction_roundoff(const Block& b) {
  double u = 0;
  for (const auto& op : b.ops) {
    if (!op) continue;
    ScalarKind acc = ScalarKind::I32;  // no rounded reduction
    auto kind = [&] { return op->has_attr("kind") ? op->attr_string("kind") : std::string(); };
    switch (op->kind) {
      case OpKind::Dot: acc = op->result()->type.elem; break;
      case OpKind::Reduce:
      case OpKind::Scan:
        if (kind() == "sum" || kind() == "prod") {
          acc = op->operand(0)->type.elem;
          // Narrow floats accumulate in f32 (semantics.md).
          if (acc != ScalarKind::F64 && is_float(acc)) acc = ScalarKind::F32;
        }
        break;
      case OpKind::ReduceWith:
      case OpKind::ScanWith: acc = op->operand(0)->type.elem; break;
      case OpKind::Atomic:
        if (kind() == "add") acc = op->result()->type.elem;
        break;
      default: break;
    }
    if (is_float(acc)) u = std::max(u, unit_roundoff(acc));
    for (const auto& r : op->regions)
      if (r) u = std::max(u, reduction_roundoff(*r));
  }
  return u;
}

}  // namespace

ErrorBounds tile_error_bounds(const Kernel& k, const Sizes& sizes, const std::vector<Tensor>& want) {
  double u = k.body ? reduction_roundoff(*k.body) : 0;
  if (u == 0) return {};
  int64_t longest = 1;
  for (const Value* p : k.view_params())
    for (const Dim& d : p->type.shape) {
      auto s = sizes.find(d.symbol);
      longest = std::max(longest, d.is_static() ? d.value : s != sizes.end() ? s->second : 1);
    }
  double nu = static_cast<double>(longest) * u;
  double g = nu < 1 ? 2 * nu / (1 - nu) : INFINITY;
  ErrorBounds out(want.size());
  for (size_t t = 0; t < want.size(); ++t) {
    if (!is_float(want[t].dtype)) continue;
    double mag = 0;
    for (int64_t i = 0; i < want[t].numel(); ++i)
      if (std::isfinite(want[t].get(i))) mag = std::max(mag, std::fabs(want[t].get(i)));
    out[t].assign(1, g * mag);  // the same for every element
  }
  return out;
}

Comparison compare_outputs(const Kernel& k, const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                           const ErrorBounds& bounds) {
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
    const std::vector<double>* bound = t < bounds.size() && !bounds[t].empty() ? &bounds[t] : nullptr;
    auto bound_at = [&](int64_t i) { return error_bound_at(*bound, i); };
    if (bound && bound->size() != 1 && static_cast<int64_t>(bound->size()) != g.numel())
      throw TesseraError("internal: " + std::to_string(bound->size()) + " error bounds for " + name + ", which has " +
                         std::to_string(g.numel()) + " elements");
    bool integral = !is_float(g.dtype);
    for (int64_t i = 0; i < g.numel(); ++i) {
      ++c.elements;
      double a = integral ? static_cast<double>(g.get_int(i)) : g.get(i);
      double b = integral ? static_cast<double>(w.get_int(i)) : w.get(i);
      double allowed = tol.atol + tol.rtol * std::fabs(b) + (bound ? bound_at(i) : 0);
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
        bad = diff > allowed;
        if (allowed > 0) c.worst_fraction = std::max(c.worst_fraction, diff / allowed);
      }
      c.max_abs_err = std::max(c.max_abs_err, diff);
      if (b != 0 && !std::isnan(b)) c.max_rel_err = std::max(c.max_rel_err, diff / std::fabs(b));
      if (!bad) continue;
      if (c.mismatches++ == 0) {
        char buf[200];
        int n = std::snprintf(buf, sizeof buf, ": got %.9g want %.9g (atol=%g rtol=%g", a, b, tol.atol, tol.rtol);
        if (bound && n > 0 && n < static_cast<int>(sizeof buf))
          std::snprintf(buf + n, sizeof buf - n, " bound=%g", bound_at(i));
        c.first_mismatch = name + index_str(g.shape, i) + buf + ")";
      }
    }
  }
  return c;
}

}  // namespace tessera
