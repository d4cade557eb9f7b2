// sort and topk (docs/semantics.md), and histogram: along `axis`, the operand viewed as [outer, len, inner];
// each (outer, inner) line is ordered on its own by a stable sort of its positions, so ties keep
// the smaller position first. The order compares values directly (not through the bit keys the
// compiled backends use), so the backends are checked against an independent statement of it.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "interp/Exec.h"

namespace tessera::interp {

namespace {

[[noreturn]] void fail(const Op& op, const std::string& msg) { throw TesseraError(op.loc, msg); }

// a < b in the sort order of floats: -inf < ... < -0 < +0 < ... < +inf < NaN, every NaN equal.
bool float_less(double a, double b) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  if (a == b) return std::signbit(a) && !std::signbit(b);
  return a < b;
}

}  // namespace

// histogram: counts of the values in [0, B), B the result's dim; other values are not counted
// (unsigned 64-bit values past 2^63 are held negative here, and are past B either way).
void exec_histogram(Machine& m, const Op& op) {
  const RValue& x = m.val(op, op.operand(0));
  if (x.floats()) fail(op, "histogram needs an integer tile, got " + op.operand(0)->type.str());
  RValue h = RValue::of_type(op.result()->type);
  const int64_t bins = h.numel();
  for (int64_t v : x.i)
    if (v >= 0 && v < bins) ++h.i[static_cast<size_t>(v)];
  m.set(op.result(), std::move(h));
}

void exec_sort(Machine& m, const Op& op) {
  if (op.kind == OpKind::Histogram) return exec_histogram(m, op);
  const RValue& x = m.val(op, op.operand(0));
  const RValue* idx = op.operands.size() > 1 ? &m.val(op, op.operand(1)) : nullptr;
  int64_t axis = op.attr_int("axis");
  if (x.scalar || axis < 0 || axis >= static_cast<int64_t>(x.shape.size()))
    fail(op, std::string(op.name()) + " axis " + std::to_string(axis) + " is out of range");
  if (op.results.empty() || op.results.size() > 2) fail(op, std::string(op.name()) + " must have 1 or 2 results");
  RValue vals = RValue::of_type(op.result(0)->type);
  RValue inds;
  if (op.results.size() == 2) inds = RValue::of_type(op.result(1)->type);
  int64_t outer = 1, inner = 1, len = x.shape[static_cast<size_t>(axis)];
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  if (vals.shape.size() != x.shape.size() || vals.elem != x.elem)
    fail(op, std::string(op.name()) + " result type " + op.result(0)->type.str() + " does not match its operand");
  int64_t k = vals.shape[static_cast<size_t>(axis)];
  if (k < 1 || k > len || vals.numel() != outer * k * inner)
    fail(op, std::string(op.name()) + " result type " + op.result(0)->type.str() + " does not fit its operand " +
                 op.operand(0)->type.str());
  bool desc = op.kind == OpKind::Topk ? !op.has_attr("largest") || op.attr_bool("largest")
                                      : op.has_attr("descending") && op.attr_bool("descending");
  bool uns = is_unsigned_int(x.elem);
  // before(a, b): element a goes strictly before element b (flat indices into x).
  auto less = [&](int64_t a, int64_t b) {
    if (x.floats()) return float_less(x.f[a], x.f[b]);
    if (uns) return static_cast<uint64_t>(x.i[a]) < static_cast<uint64_t>(x.i[b]);
    return x.i[a] < x.i[b];
  };
  std::vector<int64_t> pos(static_cast<size_t>(len));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t l) { return (o * len + l) * inner + in; };
      std::iota(pos.begin(), pos.end(), 0);
      std::stable_sort(pos.begin(), pos.end(), [&](int64_t a, int64_t b) {
        return desc ? less(at(b), at(a)) : less(at(a), at(b));
      });
      for (int64_t r = 0; r < k; ++r) {
        int64_t src = at(pos[static_cast<size_t>(r)]), dst = (o * k + r) * inner + in;
        if (x.floats()) vals.f[dst] = x.f[src];
        else vals.i[dst] = x.i[src];
        if (op.results.size() == 2) inds.i[dst] = idx ? idx->i[src] : pos[static_cast<size_t>(r)];
      }
    }
  m.set(op.result(0), std::move(vals));
  if (op.results.size() == 2) m.set(op.result(1), std::move(inds));
}

}  // namespace tessera::interp
