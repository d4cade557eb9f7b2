// Exact conversions for the narrow float formats (see Float.h for the rules).
//
// One generic encoder handles every binary format of at most 16 bits: the magnitude is scaled
// by the quantum (ulp) of its binade, rounded to an integer with the FPU's round-to-nearest-even
// (exact: scaling by a power of two loses nothing), and the integer is turned into bits. The
// integer form makes carries into the next binade and into the normal range come out right
// without special cases.
#include "support/Float.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace tessera {

namespace {

struct Format {
  int exp_bits;
  int man_bits;
  int bias;
  bool ieee_top;     // the top exponent encodes inf/NaN (IEEE); false for e4m3fn
  bool saturate;     // finite overflow gives max finite instead of inf
  uint64_t nan_bits; // canonical quiet NaN (positive)
};

const Format* format_of(ScalarKind k) {
  static const Format f16{5, 10, 15, true, false, 0x7E00};
  static const Format bf16{8, 7, 127, true, false, 0x7FC0};
  static const Format e4m3{4, 3, 7, false, true, 0x7F};
  static const Format e5m2{5, 2, 15, true, true, 0x7E};
  switch (k) {
    case ScalarKind::F16: return &f16;
    case ScalarKind::BF16: return &bf16;
    case ScalarKind::F8E4M3: return &e4m3;
    case ScalarKind::F8E5M2: return &e5m2;
    default: return nullptr;
  }
}

uint64_t sign_bit(const Format& f) { return uint64_t{1} << (f.exp_bits + f.man_bits); }

uint64_t max_finite_bits(const Format& f) {
  uint64_t top_exp = (uint64_t{1} << f.exp_bits) - 1;
  uint64_t man_all = (uint64_t{1} << f.man_bits) - 1;
  if (f.ieee_top) return ((top_exp - 1) << f.man_bits) | man_all;
  return (top_exp << f.man_bits) | (man_all - 1);  // e4m3fn: S.1111.111 is NaN
}

uint64_t inf_bits(const Format& f) {
  return ((uint64_t{1} << f.exp_bits) - 1) << f.man_bits;
}

uint64_t encode(const Format& f, double v) {
  if (std::isnan(v)) return f.nan_bits | (std::signbit(v) ? sign_bit(f) : 0);
  uint64_t sign = std::signbit(v) ? sign_bit(f) : 0;
  double a = std::fabs(v);
  if (std::isinf(a)) return sign | (f.ieee_top ? inf_bits(f) : max_finite_bits(f));
  if (a == 0) return sign;
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int unbiased = e - 1;
  int emin = 1 - f.bias;
  bool subnormal = unbiased < emin;
  int quantum_exp = (subnormal ? emin : unbiased) - f.man_bits;
  // Huge inputs overflow anyway; clamp so that the scaled value stays finite.
  if (unbiased > f.bias + 4) return sign | (f.saturate ? max_finite_bits(f) : inf_bits(f));
  double n = std::nearbyint(std::ldexp(a, -quantum_exp));  // default mode: nearest even
  uint64_t ni = static_cast<uint64_t>(n);
  uint64_t bits;
  if (subnormal) {
    bits = ni;  // n == 2^man_bits lands exactly on the smallest normal's encoding
  } else {
    bits = (static_cast<uint64_t>(unbiased + f.bias) << f.man_bits) + ni -
           (uint64_t{1} << f.man_bits);  // n == 2^(man_bits+1) carries into the exponent
  }
  if (bits > max_finite_bits(f)) bits = f.saturate ? max_finite_bits(f) : inf_bits(f);
  return sign | bits;
}

double decode(const Format& f, uint64_t bits) {
  uint64_t man_mask = (uint64_t{1} << f.man_bits) - 1;
  uint64_t exp_mask = (uint64_t{1} << f.exp_bits) - 1;
  bool neg = bits & sign_bit(f);
  uint64_t ex = (bits >> f.man_bits) & exp_mask;
  uint64_t man = bits & man_mask;
  double mag;
  if (f.ieee_top && ex == exp_mask) {
    mag = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (!f.ieee_top && ex == exp_mask && man == man_mask) {
    mag = std::numeric_limits<double>::quiet_NaN();
  } else if (ex == 0) {
    mag = std::ldexp(static_cast<double>(man), 1 - f.bias - f.man_bits);
  } else {
    mag = std::ldexp(static_cast<double>(man | (man_mask + 1)),
                     static_cast<int>(ex) - f.bias - f.man_bits);
  }
  return neg ? -mag : mag;
}

}  // namespace

uint64_t float_to_bits(ScalarKind k, double v) {
  if (k == ScalarKind::F64) return std::bit_cast<uint64_t>(v);
  if (k == ScalarKind::F32) return std::bit_cast<uint32_t>(static_cast<float>(v));
  if (const Format* f = format_of(k)) return encode(*f, v);
  return 0;
}

double float_from_bits(ScalarKind k, uint64_t bits) {
  if (k == ScalarKind::F64) return std::bit_cast<double>(bits);
  if (k == ScalarKind::F32) return std::bit_cast<float>(static_cast<uint32_t>(bits));
  // bf16 is f32's upper half: the same value, without decode's ldexp (a reference's inner loop
  // decodes every element of b). Infinities and NaNs go the general way.
  if (k == ScalarKind::BF16 && ((bits >> 7) & 0xFF) != 0xFF)
    return std::bit_cast<float>(static_cast<uint32_t>(bits & 0xFFFF) << 16);
  if (const Format* f = format_of(k)) return decode(*f, bits);
  return 0;
}

uint64_t float_bits_canonical(ScalarKind k, double v) {
  if (std::isnan(v)) {
    if (k == ScalarKind::F32) return 0x7FC00000u;
    if (k == ScalarKind::F64) return 0x7FF8000000000000u;
    if (const Format* f = format_of(k)) return f->nan_bits;
  }
  return float_to_bits(k, v);
}

void bitcast_scalar(ScalarKind from, ScalarKind to, double v, int64_t i, double* f, int64_t* i_out) {
  const int w = scalar_bits(from);
  const uint64_t mask = w == 64 ? ~uint64_t{0} : (uint64_t{1} << w) - 1;
  const uint64_t bits = is_float(from) ? float_bits_canonical(from, v) : static_cast<uint64_t>(i) & mask;
  if (is_float(to)) *f = float_from_bits(to, bits);
  else *i_out = wrap_int(to, static_cast<int64_t>(bits));
}

double round_to_float(ScalarKind k, double v) {
  switch (k) {
    case ScalarKind::F64: return v;
    case ScalarKind::F32: return static_cast<float>(v);
    default: break;
  }
  if (const Format* f = format_of(k)) return decode(*f, encode(*f, v));
  return v;
}

int64_t wrap_int(ScalarKind k, int64_t v) {
  uint64_t u = static_cast<uint64_t>(v);
  switch (k) {
    case ScalarKind::I1: return static_cast<int64_t>(u & 1);
    case ScalarKind::I8: return static_cast<int8_t>(u);
    case ScalarKind::I16: return static_cast<int16_t>(u);
    case ScalarKind::I32: return static_cast<int32_t>(u);
    case ScalarKind::U8: return static_cast<uint8_t>(u);
    case ScalarKind::U16: return static_cast<uint16_t>(u);
    case ScalarKind::U32: return static_cast<uint32_t>(u);
    default: return v;  // i64, u64 (held as its bit pattern)
  }
}

int64_t float_to_int(ScalarKind k, double v) {
  if (k == ScalarKind::I1) return v != 0 ? 1 : 0;  // "x != 0", as a cast to i1 means
  if (std::isnan(v)) return 0;
  double t = std::trunc(v);
  if (is_unsigned_int(k)) {
    if (t <= 0) return 0;
    int bits = scalar_bits(k);
    // 2^bits is exact in double; anything at or above it saturates to all ones.
    if (t >= std::ldexp(1.0, bits)) return static_cast<int64_t>(~uint64_t{0} >> (64 - bits));
    return static_cast<int64_t>(static_cast<uint64_t>(t));
  }
  int bits = scalar_bits(k);
  double hi = std::ldexp(1.0, bits - 1);  // 2^(bits-1): the first value out of range
  if (t >= hi) return static_cast<int64_t>((uint64_t{1} << (bits - 1)) - 1);
  if (t < -hi) return static_cast<int64_t>(~uint64_t{0} << (bits - 1));  // sign-extended min
  return static_cast<int64_t>(t);
}

double int_to_float(ScalarKind k, int64_t v, bool is_unsigned) {
  uint64_t mag = is_unsigned ? static_cast<uint64_t>(v)
                             : (v < 0 ? uint64_t{0} - static_cast<uint64_t>(v)
                                      : static_cast<uint64_t>(v));
  bool neg = !is_unsigned && v < 0;
  double d;
  if (k == ScalarKind::F64 || mag < (uint64_t{1} << 53)) {
    d = static_cast<double>(mag);  // exact, or the one correct rounding to f64
  } else {
    // Round to odd to 53 bits, then the final rounding to <= 24 bits is still correct.
    int shift = 64 - std::countl_zero(mag) - 53;
    uint64_t kept = mag >> shift;
    if (mag & ((uint64_t{1} << shift) - 1)) kept |= 1;
    d = std::ldexp(static_cast<double>(kept), shift);
  }
  if (neg) d = -d;
  return round_to_float(k, d);
}

}  // namespace tessera
