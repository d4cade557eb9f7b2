#include "interp/Values.h"

#include "support/Float.h"

namespace tessera::interp {

RValue RValue::make(ScalarKind k, bool is_scalar, std::vector<int64_t> shape) {
  RValue r;
  r.elem = k;
  r.scalar = is_scalar;
  r.shape = std::move(shape);
  int64_t n = 1;
  for (int64_t d : r.shape) n *= d;
  if (is_float(k)) r.f.assign(static_cast<size_t>(n), 0.0);
  else r.i.assign(static_cast<size_t>(n), 0);
  return r;
}

RValue RValue::of_type(const Type& t) {
  if (t.is_scalar()) return make(t.elem, true, {});
  return make(t.elem, false, static_shape(t.shape));
}

double RValue::get_f(int64_t idx) const {
  if (floats()) return f[idx];
  if (elem == ScalarKind::U64) return static_cast<double>(static_cast<uint64_t>(i[idx]));
  return static_cast<double>(i[idx]);
}

int64_t RValue::get_i(int64_t idx) const {
  if (floats()) return float_to_int(ScalarKind::I64, f[idx]);
  return i[idx];
}

void RValue::set_f(int64_t idx, double v) {
  if (floats()) f[idx] = round_to_float(elem, v);
  else i[idx] = float_to_int(elem, v);
}

void RValue::set_i(int64_t idx, int64_t v) {
  if (floats()) f[idx] = int_to_float(elem, v, false);
  else if (elem == ScalarKind::I1) i[idx] = v != 0;
  else i[idx] = wrap_int(elem, v);
}

std::string coords_str(const std::vector<int64_t>& c) {
  std::string s = "(";
  for (size_t d = 0; d < c.size(); ++d) s += (d ? ", " : "") + std::to_string(c[d]);
  return s + ")";
}

std::string index_str(const std::vector<int64_t>& shape, int64_t flat) {
  std::vector<int64_t> c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = flat % shape[d];
    flat /= shape[d];
  }
  return coords_str(c);
}

std::string dims_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

}  // namespace tessera::interp
