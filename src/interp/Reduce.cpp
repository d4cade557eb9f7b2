// dot, reductions and scans (built-in kinds and combiner regions).
//
// A reduction along `axis` views the operand as [outer, len, inner]; every (outer, inner)
// pair is one left-to-right chain over len elements.
#include <cmath>

#include "interp/Exec.h"
#include "support/Float.h"

namespace tessera::interp {

namespace {

[[noreturn]] void fail(const Op& op, const std::string& msg) { throw TesseraError(op.loc, msg); }

void dot(Machine& m, const Op& op) {
  const RValue &a = m.val(op, op.operand(0)), &b = m.val(op, op.operand(1)),
               &acc = m.val(op, op.operand(2));
  if (a.shape.size() != 2 || b.shape.size() != 2 || acc.shape.size() != 2 ||
      a.shape[1] != b.shape[0] || acc.shape[0] != a.shape[0] || acc.shape[1] != b.shape[1])
    fail(op, "dot needs a [M, K], b [K, N] and acc [M, N]");
  if (a.elem != b.elem || a.floats() != acc.floats())
    fail(op, "dot operands a and b need one element type, and acc the matching kind");
  int64_t M = a.shape[0], K = a.shape[1], N = b.shape[1];
  RValue r = acc;
  ScalarKind ak = acc.elem;
  if (acc.floats()) {
    const double *A = a.f.data(), *B = b.f.data();
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = r.f[i * N + j];
        if (ak == ScalarKind::F32) {
          float sf = static_cast<float>(s);
          for (int64_t k = 0; k < K; ++k)
            sf = std::fmaf(static_cast<float>(A[i * K + k]), static_cast<float>(B[k * N + j]), sf);
          s = sf;
        } else {
          for (int64_t k = 0; k < K; ++k) s = fma_round(ak, A[i * K + k], B[k * N + j], s);
        }
        r.f[i * N + j] = s;
      }
  } else {
    const int64_t *A = a.i.data(), *B = b.i.data();
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        uint64_t s = static_cast<uint64_t>(r.i[i * N + j]);
        for (int64_t k = 0; k < K; ++k)
          s += static_cast<uint64_t>(A[i * K + k]) * static_cast<uint64_t>(B[k * N + j]);
        r.i[i * N + j] = wrap_int(ak, static_cast<int64_t>(s));
      }
  }
  m.set(op.result(), std::move(r));
}

struct Axis {
  int64_t outer = 1, len = 1, inner = 1;
  int axis = 0;
};

Axis split(const Op& op, const RValue& t) {
  int64_t ax = op.attr_int("axis");
  if (t.scalar || ax < 0 || ax >= static_cast<int64_t>(t.shape.size()))
    fail(op, std::string(op.name()) + " axis " + std::to_string(ax) + " is out of range for " +
                 op.operand(0)->type.str());
  Axis a;
  a.axis = static_cast<int>(ax);
  for (int64_t d = 0; d < static_cast<int64_t>(t.shape.size()); ++d) {
    if (d < ax) a.outer *= t.shape[d];
    else if (d == ax) a.len = t.shape[d];
    else a.inner *= t.shape[d];
  }
  return a;
}

// Built-in combiners. NaN propagates through max/min (it counts as the largest for max and
// the smallest for min).
double combine_float(const std::string& kind, ScalarKind k, double acc, double x) {
  if (kind == "sum") return round_to_float(k, acc + x);
  if (kind == "prod") return round_to_float(k, acc * x);
  if (kind == "max") return fmax_nan(acc, x);
  return fmin_nan(acc, x);
}

int64_t combine_int(const std::string& kind, ScalarKind k, int64_t acc, int64_t x) {
  auto U = [](int64_t v) { return static_cast<uint64_t>(v); };
  bool uns = is_unsigned_int(k);
  if (kind == "sum") return wrap_int(k, static_cast<int64_t>(U(acc) + U(x)));
  if (kind == "prod") return wrap_int(k, static_cast<int64_t>(U(acc) * U(x)));
  bool less = uns ? U(x) < U(acc) : x < acc;
  bool greater = uns ? U(x) > U(acc) : x > acc;
  if (kind == "max") return greater ? x : acc;
  return less ? x : acc;
}

// Whether x replaces the current best in argmax / argmin (first index wins ties).
bool better(bool is_max, const RValue& t, int64_t best, int64_t x) {
  if (t.floats()) {
    double b = t.f[best], v = t.f[x];
    if (std::isnan(b)) return false;
    if (std::isnan(v)) return true;
    return is_max ? v > b : v < b;
  }
  if (is_unsigned_int(t.elem)) {
    auto b = static_cast<uint64_t>(t.i[best]), v = static_cast<uint64_t>(t.i[x]);
    return is_max ? v > b : v < b;
  }
  return is_max ? t.i[x] > t.i[best] : t.i[x] < t.i[best];
}

// reduce / reduce_with / scan / scan_with.
void reduce_or_scan(Machine& m, const Op& op) {
  const RValue& t = m.val(op, op.operand(0));
  Axis ax = split(op, t);
  bool scan = op.kind == OpKind::Scan || op.kind == OpKind::ScanWith;
  bool custom = op.kind == OpKind::ReduceWith || op.kind == OpKind::ScanWith;
  std::string kind = custom ? std::string() : op.attr_string("kind");
  if (!custom && kind != "sum" && kind != "prod" && kind != "max" && kind != "min" &&
      (scan || (kind != "argmax" && kind != "argmin")))
    fail(op, std::string(op.name()) + " kind '" + kind + "' is not one of sum, prod, max, min" +
                 (scan ? "" : ", argmax, argmin"));
  if (op.results.size() != 1) fail(op, std::string(op.name()) + " must have one result");
  RValue r = RValue::of_type(op.result()->type);
  bool arg = kind == "argmax" || kind == "argmin";
  int64_t want = scan ? t.numel() : ax.outer * ax.inner;
  if (r.numel() != want || (!arg && r.elem != t.elem) || (arg && r.floats()))
    fail(op, std::string(op.name()) + " result type " + op.result()->type.str() +
                 " does not match its operand " + op.operand(0)->type.str());
  // Narrow float (bf16, f16, f8) sums and products run in f32 and are rounded to the element
  // type at each output.
  ScalarKind acc_kind = is_float(t.elem) && scalar_bits(t.elem) < 32 ? ScalarKind::F32 : t.elem;
  for (int64_t o = 0; o < ax.outer; ++o)
    for (int64_t in = 0; in < ax.inner; ++in) {
      auto at = [&](int64_t k) { return (o * ax.len + k) * ax.inner + in; };
      int64_t out = o * ax.inner + in;
      if (arg) {
        int64_t best = at(0), bi = 0;
        for (int64_t k = 1; k < ax.len; ++k)
          if (better(kind == "argmax", t, best, at(k))) best = at(k), bi = k;
        r.set_i(out, bi);
        continue;
      }
      if (t.floats()) {
        double acc = t.f[at(0)];
        if (scan) r.f[at(0)] = acc;
        for (int64_t k = 1; k < ax.len; ++k) {
          double x = t.f[at(k)];
          acc = custom ? m.combine_f(op, t.elem, acc, x) : combine_float(kind, acc_kind, acc, x);
          if (scan) r.f[at(k)] = round_to_float(t.elem, acc);
        }
        if (!scan) r.f[out] = round_to_float(t.elem, acc);
      } else {
        int64_t acc = t.i[at(0)];
        if (scan) r.i[at(0)] = acc;
        for (int64_t k = 1; k < ax.len; ++k) {
          int64_t x = t.i[at(k)];
          acc = custom ? m.combine_i(op, t.elem, acc, x) : combine_int(kind, t.elem, acc, x);
          if (scan) r.i[at(k)] = acc;
        }
        if (!scan) r.i[out] = acc;
      }
    }
  m.set(op.result(), std::move(r));
}

}  // namespace

void exec_reduce(Machine& m, const Op& op) {
  if (op.kind == OpKind::Dot) dot(m, op);
  else reduce_or_scan(m, op);
}

}  // namespace tessera::interp
