// Elementwise ops: unary, binary, compare, fma, where, cast.
//
// Each op dispatches once on (op, element type) and then runs a plain loop; float results are
// rounded to the element type after every op (computing in double and rounding once is exact
// for + - * / sqrt; fma uses round-to-odd, see fma_round).
#include <cmath>
#include <cstring>
#include <limits>

#include "interp/Exec.h"
#include "support/Float.h"

namespace tessera::interp {

double fmin_nan(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == b) return std::signbit(a) ? a : b;  // -0 < +0
  return a < b ? a : b;
}

double fmax_nan(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

double fma_round(ScalarKind k, double a, double b, double c) {
  if (k == ScalarKind::F64) return std::fma(a, b, c);
  if (k == ScalarKind::F32)  // f32 operands: fmaf is the one correctly rounded result
    return std::fmaf(static_cast<float>(a), static_cast<float>(b), static_cast<float>(c));
  // Narrow kinds: a*b is exact in double (<= 24 significant bits). Round the sum to odd in
  // double, after which one rounding to <= 24 bits is correct.
  double p = a * b;
  double s = p + c;
  if (std::isfinite(s)) {
    double bp = s - c, err = (p - bp) + (c - (s - bp));  // TwoSum: s + err == p + c exactly
    if (err != 0) {
      uint64_t bits;
      std::memcpy(&bits, &s, 8);
      if ((bits & 1) == 0) s = std::nextafter(s, err > 0 ? INFINITY : -INFINITY);
    }
  }
  return round_to_float(k, s);
}

namespace {

[[noreturn]] void fail(const Op& op, const std::string& msg) { throw TesseraError(op.loc, msg); }

RValue like(const RValue& a, ScalarKind elem) { return RValue::make(elem, a.scalar, a.shape); }

void check_same(const Op& op, const RValue& a, const RValue& b) {
  if (a.elem != b.elem || a.shape != b.shape)
    fail(op, std::string(op.name()) + " operands differ in type");
}

// Apply `fn` to every float element and round the result to `k`.
template <class Fn>
void float_map(ScalarKind k, size_t n, double* out, Fn fn) {
  switch (k) {
    case ScalarKind::F64:
      for (size_t j = 0; j < n; ++j) out[j] = fn(j);
      break;
    case ScalarKind::F32:
      for (size_t j = 0; j < n; ++j) out[j] = static_cast<float>(fn(j));
      break;
    default:
      for (size_t j = 0; j < n; ++j) out[j] = round_to_float(k, fn(j));
  }
}

double unary_float(OpKind kind, double x) {
  switch (kind) {
    case OpKind::Neg: return -x;
    case OpKind::Exp: return std::exp(x);
    case OpKind::Exp2: return std::exp2(x);
    case OpKind::Log: return std::log(x);
    case OpKind::Log2: return std::log2(x);
    case OpKind::Log1p: return std::log1p(x);
    case OpKind::Expm1: return std::expm1(x);
    case OpKind::Sqrt: return std::sqrt(x);
    case OpKind::Rsqrt: return 1.0 / std::sqrt(x);
    case OpKind::Abs: return std::fabs(x);
    case OpKind::Sin: return std::sin(x);
    case OpKind::Cos: return std::cos(x);
    case OpKind::Tanh: return std::tanh(x);
    case OpKind::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case OpKind::Erf: return std::erf(x);
    case OpKind::Floor: return std::floor(x);
    case OpKind::Ceil: return std::ceil(x);
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

RValue unary(const Op& op, const RValue& a) {
  RValue r = like(a, a.elem);
  size_t n = static_cast<size_t>(a.numel());
  if (a.floats()) {
    if (op.kind == OpKind::Not) fail(op, "not needs an integer or i1 operand");
    const double* x = a.f.data();
    switch (op.kind) {  // the common ones get their own loop; the rest go through the switch
      case OpKind::Exp: float_map(a.elem, n, r.f.data(), [&](size_t j) { return std::exp(x[j]); }); break;
      case OpKind::Neg: float_map(a.elem, n, r.f.data(), [&](size_t j) { return -x[j]; }); break;
      default: {
        OpKind k = op.kind;
        float_map(a.elem, n, r.f.data(), [&](size_t j) { return unary_float(k, x[j]); });
      }
    }
    return r;
  }
  ScalarKind e = a.elem;
  switch (op.kind) {
    case OpKind::Neg:
    case OpKind::Abs:
      if (!is_signed_int(e)) fail(op, std::string(op.name()) + " needs a signed integer or float operand");
      for (size_t j = 0; j < n; ++j) {
        uint64_t u = static_cast<uint64_t>(a.i[j]);
        bool flip = op.kind == OpKind::Neg || a.i[j] < 0;
        r.i[j] = wrap_int(e, static_cast<int64_t>(flip ? uint64_t{0} - u : u));
      }
      return r;
    case OpKind::Not:
      for (size_t j = 0; j < n; ++j) r.i[j] = wrap_int(e, ~a.i[j]);
      return r;
    default: fail(op, std::string(op.name()) + " needs a float operand");
  }
}

RValue binary_float(const Op& op, const RValue& a, const RValue& b) {
  RValue r = like(a, a.elem);
  size_t n = a.f.size();
  const double *x = a.f.data(), *y = b.f.data();
  double* o = r.f.data();
  ScalarKind k = a.elem;
  switch (op.kind) {
    case OpKind::Add: float_map(k, n, o, [&](size_t j) { return x[j] + y[j]; }); break;
    case OpKind::Sub: float_map(k, n, o, [&](size_t j) { return x[j] - y[j]; }); break;
    case OpKind::Mul: float_map(k, n, o, [&](size_t j) { return x[j] * y[j]; }); break;
    case OpKind::Div: float_map(k, n, o, [&](size_t j) { return x[j] / y[j]; }); break;
    case OpKind::Rem: float_map(k, n, o, [&](size_t j) { return std::fmod(x[j], y[j]); }); break;
    case OpKind::Min: float_map(k, n, o, [&](size_t j) { return fmin_nan(x[j], y[j]); }); break;
    case OpKind::Max: float_map(k, n, o, [&](size_t j) { return fmax_nan(x[j], y[j]); }); break;
    case OpKind::Pow: float_map(k, n, o, [&](size_t j) { return std::pow(x[j], y[j]); }); break;
    default: fail(op, std::string(op.name()) + " needs integer operands");
  }
  return r;
}

int64_t shift(OpKind kind, ScalarKind e, int64_t x, int64_t amount) {
  int bits = scalar_bits(e);
  bool sgn = is_signed_int(e);
  uint64_t am = static_cast<uint64_t>(amount);  // a negative amount counts as huge
  if (am >= static_cast<uint64_t>(bits)) {
    if (kind == OpKind::Shr && sgn && x < 0) return -1;
    return 0;
  }
  if (kind == OpKind::Shl) return wrap_int(e, static_cast<int64_t>(static_cast<uint64_t>(x) << am));
  if (sgn) return x >> am;  // x is sign-extended: arithmetic shift
  return wrap_int(e, static_cast<int64_t>(static_cast<uint64_t>(x) >> am));
}

RValue binary_int(const Op& op, const RValue& a, const RValue& b) {
  RValue r = like(a, a.elem);
  size_t n = a.i.size();
  const int64_t *x = a.i.data(), *y = b.i.data();
  int64_t* o = r.i.data();
  ScalarKind e = a.elem;
  bool uns = is_unsigned_int(e);
  auto U = [](int64_t v) { return static_cast<uint64_t>(v); };
  auto W = [&](uint64_t v) { return wrap_int(e, static_cast<int64_t>(v)); };
  switch (op.kind) {
    case OpKind::Add: for (size_t j = 0; j < n; ++j) o[j] = W(U(x[j]) + U(y[j])); break;
    case OpKind::Sub: for (size_t j = 0; j < n; ++j) o[j] = W(U(x[j]) - U(y[j])); break;
    case OpKind::Mul: for (size_t j = 0; j < n; ++j) o[j] = W(U(x[j]) * U(y[j])); break;
    case OpKind::Div:
    case OpKind::Rem:
    case OpKind::Cdiv:
      for (size_t j = 0; j < n; ++j) {
        if (y[j] == 0)
          fail(op, std::string(op.name()) + " by zero" + (a.shape.empty() ? "" : " at element " + index_str(a.shape, j)));
        bool div = op.kind != OpKind::Rem;
        // cdiv is (a + b - 1) / b with the sum wrapping in the element type, as the builder
        // writes it with add, sub and div.
        int64_t xj = op.kind == OpKind::Cdiv ? W(U(x[j]) + U(y[j]) - 1) : x[j];
        if (uns) {
          o[j] = W(div ? U(xj) / U(y[j]) : U(xj) % U(y[j]));
        } else if (y[j] == -1) {  // INT64_MIN / -1 overflows in C++; the wrapped answer is -x
          o[j] = div ? W(uint64_t{0} - U(xj)) : 0;
        } else {
          o[j] = W(U(div ? xj / y[j] : xj % y[j]));
        }
      }
      break;
    case OpKind::Min:
      for (size_t j = 0; j < n; ++j) o[j] = (uns ? U(y[j]) < U(x[j]) : y[j] < x[j]) ? y[j] : x[j];
      break;
    case OpKind::Max:
      for (size_t j = 0; j < n; ++j) o[j] = (uns ? U(y[j]) > U(x[j]) : y[j] > x[j]) ? y[j] : x[j];
      break;
    case OpKind::And: for (size_t j = 0; j < n; ++j) o[j] = x[j] & y[j]; break;
    case OpKind::Or: for (size_t j = 0; j < n; ++j) o[j] = x[j] | y[j]; break;
    case OpKind::Xor: for (size_t j = 0; j < n; ++j) o[j] = x[j] ^ y[j]; break;
    case OpKind::Shl:
    case OpKind::Shr:
      for (size_t j = 0; j < n; ++j) o[j] = shift(op.kind, e, x[j], y[j]);
      break;
    case OpKind::Pow: fail(op, "pow needs float operands");
    default: fail(op, "interpreter: unexpected binary op " + std::string(op.name()));
  }
  return r;
}

RValue cmp(const Op& op, const RValue& a, const RValue& b) {
  const std::string& pred = op.attr_string("pred");
  if (pred != "eq" && pred != "ne" && pred != "lt" && pred != "le" && pred != "gt" && pred != "ge")
    fail(op, "cmp pred '" + pred + "' is not one of eq ne lt le gt ge");
  RValue r = like(a, ScalarKind::I1);
  size_t n = static_cast<size_t>(a.numel());
  // Dispatch on the predicate once; the loops are the same shape for all three data kinds.
  auto run = [&](auto get) {
    using T = decltype(get(size_t{0}, a));
    auto loop = [&](auto f) { for (size_t j = 0; j < n; ++j) r.i[j] = f(get(j, a), get(j, b)); };
    if (pred == "eq") loop([](T x, T y) { return x == y; });
    else if (pred == "ne") loop([](T x, T y) { return x != y; });
    else if (pred == "lt") loop([](T x, T y) { return x < y; });
    else if (pred == "le") loop([](T x, T y) { return x <= y; });
    else if (pred == "gt") loop([](T x, T y) { return x > y; });
    else loop([](T x, T y) { return x >= y; });
  };
  if (a.floats()) run([](size_t j, const RValue& v) { return v.f[j]; });
  else if (is_unsigned_int(a.elem)) run([](size_t j, const RValue& v) { return static_cast<uint64_t>(v.i[j]); });
  else run([](size_t j, const RValue& v) { return v.i[j]; });
  return r;
}

RValue cast(const Op& op, const RValue& a, ScalarKind to) {
  RValue r = like(a, to);
  size_t n = static_cast<size_t>(a.numel());
  ScalarKind from = a.elem;
  if (to == ScalarKind::I1) {
    for (size_t j = 0; j < n; ++j) r.i[j] = a.floats() ? (a.f[j] != 0) : (a.i[j] != 0);
  } else if (is_float(from) && is_float(to)) {
    float_map(to, n, r.f.data(), [&](size_t j) { return a.f[j]; });
  } else if (is_float(from)) {
    for (size_t j = 0; j < n; ++j) r.i[j] = float_to_int(to, a.f[j]);
  } else if (is_float(to)) {
    bool uns = is_unsigned_int(from);
    for (size_t j = 0; j < n; ++j) r.f[j] = int_to_float(to, a.i[j], uns);
  } else {
    for (size_t j = 0; j < n; ++j) r.i[j] = wrap_int(to, a.i[j]);
  }
  return r;
}

// The same bits as another element type of the same width (the verifier checks the widths).
RValue bitcast(const RValue& a, ScalarKind to) {
  RValue r = like(a, to);
  size_t n = static_cast<size_t>(a.numel());
  double f = 0;
  int64_t i = 0;
  for (size_t j = 0; j < n; ++j) {
    bitcast_scalar(a.elem, to, a.floats() ? a.f[j] : 0.0, a.floats() ? 0 : a.i[j], &f, &i);
    if (r.floats()) r.f[j] = f;
    else r.i[j] = i;
  }
  return r;
}

}  // namespace

void exec_elementwise(Machine& m, const Op& op) {
  if (op.results.size() != 1) fail(op, std::string(op.name()) + " must have one result");
  const Type& rt = op.result()->type;
  switch (op.info().cls) {
    case OpClass::Unary: m.set(op.result(), unary(op, m.val(op, op.operand(0)))); return;
    case OpClass::Binary: {
      const RValue &a = m.val(op, op.operand(0)), &b = m.val(op, op.operand(1));
      check_same(op, a, b);
      m.set(op.result(), a.floats() ? binary_float(op, a, b) : binary_int(op, a, b));
      return;
    }
    case OpClass::Compare: {
      const RValue &a = m.val(op, op.operand(0)), &b = m.val(op, op.operand(1));
      check_same(op, a, b);
      m.set(op.result(), cmp(op, a, b));
      return;
    }
    case OpClass::Cast: {
      const RValue& a = m.val(op, op.operand(0));
      if (op.kind == OpKind::Bitcast && scalar_bits(a.elem) != scalar_bits(rt.elem))
        fail(op, "bitcast needs element types of the same width");
      m.set(op.result(), op.kind == OpKind::Bitcast ? bitcast(a, rt.elem) : cast(op, a, rt.elem));
      return;
    }
    default: break;
  }
  const RValue &c = m.val(op, op.operand(0)), &a = m.val(op, op.operand(1)),
               &b = m.val(op, op.operand(2));
  if (op.kind == OpKind::Fma) {
    check_same(op, c, a);
    check_same(op, c, b);
    if (!c.floats()) fail(op, "fma needs float operands");
    RValue r = like(c, c.elem);
    for (size_t j = 0; j < r.f.size(); ++j) r.f[j] = fma_round(c.elem, c.f[j], a.f[j], b.f[j]);
    m.set(op.result(), std::move(r));
    return;
  }
  // where %cond, %a, %b
  check_same(op, a, b);
  if (c.elem != ScalarKind::I1 || c.numel() != a.numel())
    fail(op, "where needs an i1 condition of the operands' shape");
  RValue r = a;
  if (r.floats()) {
    for (size_t j = 0; j < r.f.size(); ++j) if (!c.i[j]) r.f[j] = b.f[j];
  } else {
    for (size_t j = 0; j < r.i.size(); ++j) if (!c.i[j]) r.i[j] = b.i[j];
  }
  m.set(op.result(), std::move(r));
}

}  // namespace tessera::interp
