// Tessera device library: scalar types, narrow-float conversions, integer helpers and atomics.
// Self-contained (no CUDA toolkit headers) so that NVRTC needs no include path and compiles
// fast. Included by generated code as "tessera/core.cuh".
#pragma once

#ifdef __CUDACC_RTC__
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef unsigned long long uintptr_t;
#else
#include <cstdint>
#endif

#define TSR_D __device__ __forceinline__
// Code for the edges of a tile (ragged ends, unaligned sources): one out-of-line body per shape
// instead of a copy at every call site, so that it costs NVVM and ptxas little (issue 18's cold
// compiles). TSR_INLINE_EDGES (TESSERA_CUDA_INLINE_EDGES=1 prints it) gives the former inline
// forms, the A/B switch of tools/h200-nvcold-check.
#ifndef TSR_INLINE_EDGES
#define TSR_EDGE __device__ __noinline__
#else
#define TSR_EDGE TSR_D
#endif

namespace tsr {

TSR_D float inf_f() { return __int_as_float(0x7f800000); }
TSR_D float nan_f() { return __int_as_float(0x7fc00000); }
TSR_D double inf_d() { return __longlong_as_double(0x7ff0000000000000LL); }
TSR_D double nan_d() { return __longlong_as_double(0x7ff8000000000000LL); }

// ---- narrow floats: storage bits <-> float (compute type), round to nearest even ----
TSR_D float bf2f(uint16_t b) { return __uint_as_float(uint32_t(b) << 16); }
TSR_D uint16_t f2bf(float f) {
  uint16_t r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}
TSR_D float h2f(uint16_t b) {
  float r;
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(b));
  return r;
}
TSR_D uint16_t f2h(float f) {
  uint16_t r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(f));
  return r;
}
// Two floats rounded to nearest even into one word (lo in the low half: the element at the lower
// address), one instruction (sm_80+).
TSR_D uint32_t f2bf2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
TSR_D uint32_t f2h2(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
TSR_D float rbf16(float f) { return bf2f(f2bf(f)); }
TSR_D float rf16(float f) { return h2f(f2h(f)); }
// Round-to-odd: truncate, and set the last bit when anything was dropped. A value rounded to
// odd with at least two bits to spare, then rounded to nearest even to a narrower format, is
// rounded once (f64 -> bf16/f16/f8 through float; 64-bit ints -> float through double).
TSR_D float d2f_odd(double d) {
  float f = __double2float_rz(d);
  if (double(f) != d && f == f) f = __int_as_float(__float_as_int(f) | 1);
  return f;
}
TSR_D double i2d_odd(long long v) {
  double d = __ll2double_rz(v);
  if ((long long)d != v) d = __longlong_as_double(__double_as_longlong(d) | 1);
  return d;
}
TSR_D double i2d_odd(unsigned long long v) {
  double d = __ull2double_rz(v);
  if ((unsigned long long)d != v) d = __longlong_as_double(__double_as_longlong(d) | 1);
  return d;
}

// 2^n as a float, for -126 <= n <= 127 (a normal float). x * pow2i(n) is ldexpf(x, n) wherever
// the product is exact, as in every use below; ldexpf is a libdevice function with range checks
// and branches, and the f8 conversions inlined it for every element.
TSR_D float pow2i(int n) { return __int_as_float((n + 127) << 23); }

// f8 (E exponent bits, M mantissa bits). Inf: the format has infinities (e5m2); without (e4m3fn)
// the all-ones pattern is NaN and the max finite is 448. Finite overflow saturates to +-max,
// inf becomes +-max for e4m3 and stays inf for e5m2 (src/support/Float.h).
template <int E, int M, bool Inf>
TSR_D float f8_value(uint32_t b) {
  constexpr int bias = (1 << (E - 1)) - 1;
  constexpr uint32_t abs_mask = (1u << (E + M)) - 1, exp_mask = ((1u << E) - 1) << M;
  const uint32_t a = b & abs_mask, sign = ((b >> (E + M)) & 1u) << 31;
  // The magnitude's exponent and mantissa bits in a float's fields, with the sign, are the value
  // times 2^(bias - 127) (an f8 subnormal lands on a float subnormal: NVRTC does not flush them,
  // and Tessera never asks it to), so one exact multiply rescales it: a few instructions, where
  // ldexpf on the mantissa took some 40 per element. NaN and inf by selects, not branches (a
  // branch made every element's conversion a block of its own).
  const float v = __uint_as_float(sign | (a << (23 - M))) * pow2i(127 - bias);
  if (Inf) {
    const bool special = (a & exp_mask) == exp_mask;
    const float s = (a & ~exp_mask) ? nan_f() : __uint_as_float(sign | 0x7f800000u);
    return special ? s : v;
  }
  return a == abs_mask ? nan_f() : v;
}
template <int E, int M, bool Inf>
TSR_D uint8_t f8_bits(float x) {
  constexpr int bias = (1 << (E - 1)) - 1;
  uint32_t sign = (__float_as_uint(x) >> 31) << (E + M);
  if (x != x) return uint8_t(Inf ? (sign | (((1u << E) - 1) << M) | (1u << (M - 1))) : (sign | ((1u << (E + M)) - 1)));
  constexpr uint32_t max_bits = Inf ? ((((1u << E) - 2) << M) | ((1u << M) - 1)) : ((((1u << E) - 1) << M) | ((1u << M) - 2));
  const float maxv = f8_value<E, M, Inf>(max_bits);
  float a = fabsf(x);
  if (a == inf_f()) return uint8_t(Inf ? (sign | (((1u << E) - 1) << M)) : (sign | max_bits));
  if (a >= 2.0f * maxv) return uint8_t(sign | max_bits);
  int e = int((__float_as_uint(a) >> 23) & 255) - 127;
  if (e < 1 - bias) e = 1 - bias;
  // Exact scaling by a power of two, then round to nearest even: 0 <= a * 2^(M - e) < 2^(M + 1),
  // and adding 2^23 leaves no bits below the units. Not rintf: NVVM does not fold it, so every
  // constant conversion (the pad value of each padded f8 load) ran in full at run time.
  float r = (a * pow2i(M - e) + 8388608.0f) - 8388608.0f;
  float v = r * pow2i(e - M);
  if (v > maxv) return uint8_t(sign | max_bits);
  if (v == 0.0f) return uint8_t(sign);
  int ev = int((__float_as_uint(v) >> 23) & 255) - 127;
  if (ev < 1 - bias) return uint8_t(sign | uint32_t(v * pow2i(bias - 1 + M)));  // subnormal
  uint32_t mant = uint32_t(v * pow2i(M - ev)) - (1u << M);
  return uint8_t(sign | (uint32_t(ev + bias) << M) | mant);
}
TSR_D float e4m32f(uint8_t b) { return f8_value<4, 3, false>(b); }
TSR_D uint8_t f2e4m3(float f) { return f8_bits<4, 3, false>(f); }
TSR_D float e5m22f(uint8_t b) { return f8_value<5, 2, true>(b); }
TSR_D uint8_t f2e5m2(float f) { return f8_bits<5, 2, true>(f); }
TSR_D float rf8e4m3(float f) { return e4m32f(f2e4m3(f)); }
TSR_D float rf8e5m2(float f) { return e5m22f(f2e5m2(f)); }

// ---- bitcast: a value's bits, a NaN as its format's positive canonical quiet NaN (cvt makes
// 0x7fff of a bf16 or f16 NaN and drops its sign), and back ----
TSR_D uint32_t f32_bits(float f) { return f != f ? 0x7fc00000u : __float_as_uint(f); }
TSR_D uint64_t f64_bits(double d) { return d != d ? 0x7ff8000000000000ull : uint64_t(__double_as_longlong(d)); }
TSR_D float f32_of_bits(uint32_t u) { return __uint_as_float(u); }
TSR_D double f64_of_bits(uint64_t u) { return __longlong_as_double((long long)u); }
// A bf16 or f16 compute value is exact in its format, so its bits are exact too.
TSR_D uint16_t bf16_bits(float f) { return f != f ? uint16_t(0x7fc0u) : uint16_t(__float_as_uint(f) >> 16); }
TSR_D uint16_t f16_bits(float f) { return f != f ? uint16_t(0x7e00u) : f2h(f); }
TSR_D uint8_t f8e4m3_bits(float f) { return f != f ? uint8_t(0x7fu) : f2e4m3(f); }
TSR_D uint8_t f8e5m2_bits(float f) { return f != f ? uint8_t(0x7eu) : f2e5m2(f); }

// ---- integers: division and shifts defined for every input ----
// Division by zero is undefined on hardware backends; 0 keeps the kernel running.
template <class T> TSR_D T idiv(T a, T b) {
  if (b == 0) return 0;
  if (T(-1) < T(0) && b == T(-1)) return T(T(0) - a);
  return T(a / b);
}
template <class T> TSR_D T irem(T a, T b) {
  if (b == 0) return 0;
  if (T(-1) < T(0) && b == T(-1)) return 0;
  return T(a % b);
}
template <class T> TSR_D T ishl(T a, T b) {
  if (uint64_t(b) >= sizeof(T) * 8 || b < 0) return 0;
  return T(uint64_t(a) << int(b));
}
template <class T> TSR_D T ishr(T a, T b) {
  if (uint64_t(b) >= sizeof(T) * 8 || b < 0) return (T(-1) < T(0) && a < 0) ? T(-1) : T(0);
  return T(a >> int(b));
}
template <class T> TSR_D T imin(T a, T b) { return a < b ? a : b; }
template <class T> TSR_D T imax(T a, T b) { return a > b ? a : b; }
template <class T> TSR_D T fmin_nan(T a, T b) { return (a < b || a != a) ? a : b; }
template <class T> TSR_D T fmax_nan(T a, T b) { return (a > b || a != a) ? a : b; }
// f32 reductions: NaN-propagating max/min in one instruction (sm_80+; the result of a NaN input
// is the canonical NaN).
TSR_D float max_nan_f32(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
TSR_D float min_nan_f32(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
// The elementwise min/max ops also order -0 before +0 (docs/semantics.md). Reductions use the
// plain versions above: the document lets a reduction over zeros of both signs return either.
TSR_D bool sign_bit(float a) { return __float_as_int(a) < 0; }
TSR_D bool sign_bit(double a) { return __double_as_longlong(a) < 0; }
template <class T> TSR_D T fmin_nan_z(T a, T b) { return (a < b || a != a || (a == b && sign_bit(a))) ? a : b; }
template <class T> TSR_D T fmax_nan_z(T a, T b) { return (a > b || a != a || (a == b && !sign_bit(a))) ? a : b; }
// float -> integer: truncate toward zero, saturate, NaN -> 0.
template <class To> TSR_D To f2i(double v, double lo, double hi, To lo_i, To hi_i) {
  if (v != v) return To(0);
  if (v <= lo) return lo_i;
  if (v >= hi) return hi_i;
  return To(v);
}

// exp through the fast base-2 exponential (well within the f32 tolerance for |x| < 100).
TSR_D float fexp(float x) { return exp2f(x * 1.4426950408889634f); }
// 1 / (1 + e^-x) with the approximate division (2 ulp): the IEEE one (rcp.rn) carries a slow
// path that ptxas calls as a subroutine, and in an unrolled epilogue of 128 values per thread
// the calls spill (a 328-byte stack frame in a wgmma matmul's x * sigmoid(2 a) epilogue, 0.296 ms
// against 0.203 for the same GELU through tanhf). The divisor is at least 1, so the
// approximation's limit (a divisor over 2^126 gives 0) only meets x < -87, where sigmoid is
// below 2^-126; x = -inf gives 0, +inf 1, NaN NaN.
TSR_D float fsigmoid(float x) { return __fdividef(1.0f, 1.0f + fexp(-x)); }

// ---- vector copies of B bytes between global memory and registers ----
template <int B> struct VecT;
template <> struct VecT<1> { typedef uint8_t T; };
template <> struct VecT<2> { typedef uint16_t T; };
template <> struct VecT<4> { typedef uint32_t T; };
template <> struct VecT<8> { typedef uint2 T; };
template <> struct VecT<16> { typedef uint4 T; };
// Copy N elements of S from aligned `src` to `dst` in 16-byte (or smaller) pieces.
template <class S, int N>
TSR_D void copy_vec(S* __restrict__ dst, const S* __restrict__ src) {
  constexpr int bytes = int(sizeof(S)) * N;
  constexpr int piece = bytes >= 16 ? 16 : bytes;
  typedef typename VecT<piece>::T P;
#pragma unroll
  for (int i = 0; i < bytes / piece; ++i) reinterpret_cast<P*>(dst)[i] = reinterpret_cast<const P*>(src)[i];
}
// copy_vec into global memory with the evict-first (streaming) cache hint (every width the
// emitters store: 2 to 16 bytes; a 1-byte store goes without it).
template <class S, int N>
TSR_D void store_vec_cs(S* __restrict__ dst, const S* __restrict__ src) {
  constexpr int bytes = int(sizeof(S)) * N;
  if constexpr (bytes == 16) {
    const uint4 v = *reinterpret_cast<const uint4*>(src);
    asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
  } else if constexpr (bytes == 8) {
    const uint2 v = *reinterpret_cast<const uint2*>(src);
    asm volatile("st.global.cs.v2.u32 [%0], {%1, %2};" ::"l"(dst), "r"(v.x), "r"(v.y) : "memory");
  } else if constexpr (bytes == 4) {
    const uint32_t v = *reinterpret_cast<const uint32_t*>(src);
    asm volatile("st.global.cs.u32 [%0], %1;" ::"l"(dst), "r"(v) : "memory");
  } else if constexpr (bytes == 2) {
    const uint16_t v = *reinterpret_cast<const uint16_t*>(src);
    asm volatile("st.global.cs.u16 [%0], %1;" ::"l"(dst), "h"(v) : "memory");
  } else {
    copy_vec<S, N>(dst, src);
  }
}
template <class S, int N>
TSR_D bool aligned_vec(const S* p) {
  constexpr int bytes = int(sizeof(S)) * N;
  constexpr int piece = bytes >= 16 ? 16 : bytes;
  return (reinterpret_cast<uintptr_t>(p) & uintptr_t(piece - 1)) == 0;
}

// A thread's slots of a bf16 (BF) or f16 tile as loaded: two elements per 32-bit register,
// element i in half i % 2 of word i / 2, converted to float at each use. The conversions are
// volatile asm so that the compiler cannot merge those of different uses into one float kept
// live in between (which would take back the registers packing saves); one instruction each.
template <bool BF, int N>
struct Packed16 {
  uint32_t w[N / 2];
  TSR_D float operator[](int i) const {
    float r;
    if (BF) {
      if (i & 1) asm volatile("and.b32 %0, %1, 0xffff0000;" : "=f"(r) : "r"(w[i >> 1]));
      else asm volatile("shl.b32 %0, %1, 16;" : "=f"(r) : "r"(w[i >> 1]));
    } else {
      if (i & 1) asm volatile("{ .reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, h; }" : "=f"(r) : "r"(w[i >> 1]));
      else asm volatile("{ .reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, l; }" : "=f"(r) : "r"(w[i >> 1]));
    }
    return r;
  }
};

// ---- atomics on any storage type: compare-and-swap on the containing word ----
template <int B> struct UIntT;
template <> struct UIntT<1> { typedef uint8_t T; };
template <> struct UIntT<2> { typedef uint16_t T; };
template <> struct UIntT<4> { typedef unsigned int T; };
template <> struct UIntT<8> { typedef unsigned long long T; };
template <class To, class From>
TSR_D To bitcast(From f) {
  static_assert(sizeof(To) == sizeof(From), "bitcast needs equal sizes");
  union {
    From f;
    To t;
  } u;
  u.f = f;
  return u.t;
}
// Bit-pattern equality (atomic_cas compares stored bits: -0 != +0, a NaN matches itself).
template <class S> TSR_D bool same_bits(S a, S b) {
  typedef typename UIntT<sizeof(S)>::T U;
  return bitcast<U>(a) == bitcast<U>(b);
}
// ---- reductions: identities and warp exchanges ----
template <class T> TSR_D T lowest_int() { return T(-1) < T(0) ? T(uint64_t(1) << (sizeof(T) * 8 - 1)) : T(0); }
template <class T> TSR_D T highest_int() { return T(~lowest_int<T>()); }
// The value of lane (lane ^ m) of a fully active warp, for any type of up to 8 bytes.
template <class T> TSR_D T shfl_xor(T v, int m) {
  if constexpr (sizeof(T) == 8) {
    return bitcast<T>(__shfl_xor_sync(0xffffffffu, bitcast<unsigned long long>(v), m));
  } else if constexpr (sizeof(T) == 4) {
    return bitcast<T>(__shfl_xor_sync(0xffffffffu, bitcast<unsigned int>(v), m));
  } else {
    return T(__shfl_xor_sync(0xffffffffu, (unsigned int)(v), m));
  }
}

// F maps the old value (storage type) to the new one; returns the old value.
template <class S, class F>
TSR_D S atomic_rmw(S* p, F f) {
  typedef typename UIntT<sizeof(S)>::T U;
  if constexpr (sizeof(S) == 8 || sizeof(S) == 4) {
    U* w = reinterpret_cast<U*>(p);
    U old = *reinterpret_cast<volatile U*>(w), assumed;
    do {
      assumed = old;
      old = atomicCAS(w, assumed, bitcast<U>(f(bitcast<S>(assumed))));
    } while (old != assumed);
    return bitcast<S>(old);
  } else {
    // 1- and 2-byte values: CAS on the aligned 32-bit word that holds them.
    uintptr_t addr = reinterpret_cast<uintptr_t>(p);
    unsigned int* w = reinterpret_cast<unsigned int*>(addr & ~uintptr_t(3));
    const unsigned shift = unsigned(addr & 3) * 8;
    const unsigned mask = ((1u << (sizeof(S) * 8)) - 1) << shift;
    unsigned old = *reinterpret_cast<volatile unsigned*>(w), assumed;
    do {
      assumed = old;
      S o = bitcast<S>(U((assumed & mask) >> shift));
      unsigned nb = unsigned(bitcast<U>(f(o)));
      old = atomicCAS(w, assumed, (assumed & ~mask) | ((nb << shift) & mask));
    } while (old != assumed);
    return bitcast<S>(U((old & mask) >> shift));
  }
}

// ---- sort / topk (docs/semantics.md): an unsigned key whose order is the sort order ----
// Floats: -inf < ... < -0 < +0 < ... < +inf < NaN (every NaN the largest key); signed integers
// offset by 2^(bits-1); 8- and 16-bit integers widen to 32 bits. 32-bit keys for 32-bit and
// narrower types (narrow floats are held as float), 64-bit keys for 64-bit types.
TSR_D uint32_t sort_key(float v) {
  const uint32_t u = __float_as_uint(v);
  return v != v ? 0xffffffffu : (u >> 31) ? ~u : (u | 0x80000000u);
}
TSR_D uint64_t sort_key(double v) {
  const uint64_t u = uint64_t(__double_as_longlong(v));
  return v != v ? ~0ull : (u >> 63) ? ~u : (u | (1ull << 63));
}
TSR_D uint32_t sort_key(signed char v) { return uint32_t(int(v)) ^ 0x80000000u; }
TSR_D uint32_t sort_key(short v) { return uint32_t(int(v)) ^ 0x80000000u; }
TSR_D uint32_t sort_key(int v) { return uint32_t(v) ^ 0x80000000u; }
TSR_D uint64_t sort_key(long v) { return uint64_t(v) ^ (1ull << 63); }
TSR_D uint64_t sort_key(long long v) { return uint64_t(v) ^ (1ull << 63); }
TSR_D uint32_t sort_key(unsigned char v) { return v; }
TSR_D uint32_t sort_key(unsigned short v) { return v; }
TSR_D uint32_t sort_key(unsigned v) { return v; }
TSR_D uint64_t sort_key(unsigned long v) { return v; }
TSR_D uint64_t sort_key(unsigned long long v) { return v; }

// ---- histogram (docs/semantics.md) and sums across the CTA ----
// Adds one to bin b of the shared counts h when 0 <= b < bins. Called by every lane of a fully
// active warp (b = -1 for a lane with nothing to count). A warp whose lanes all hold one bin
// adds 32 once (a constant or padded stretch of a row would otherwise queue 32 atomics on one
// address); other lanes add one each. B: int for values of up to 32 bits (an unsigned value
// past 2^31 turns negative, past any bin count either way), long long for wider ones.
// TSR_HIST_SKIP (TESSERA_CUDA_HIST_SKIP=1 prints it): a warp none of whose lanes counts (most
// warps in a radix select's later passes) leaves after one vote.
template <class B>
TSR_D void hist_add(unsigned* h, B b, B bins) {
  const bool in = b >= 0 && b < bins;
#ifdef TSR_HIST_SKIP
  if (!__any_sync(0xffffffffu, in)) return;
#endif
  const B first = __shfl_sync(0xffffffffu, b, 0);
  if (__all_sync(0xffffffffu, in && b == first)) {
    if ((threadIdx.x & 31) == 0) atomicAdd(h + first, 32u);
  } else if (in) {
    atomicAdd(h + b, 1u);
  }
}
template <class T> TSR_D T shfl_up(T v, int d) {
  if constexpr (sizeof(T) == 8) return bitcast<T>(__shfl_up_sync(0xffffffffu, bitcast<unsigned long long>(v), d));
  else return bitcast<T>(__shfl_up_sync(0xffffffffu, bitcast<unsigned int>(v), d));
}
template <class T> TSR_D T shfl_idx(T v, int l) {
  if constexpr (sizeof(T) == 8) return bitcast<T>(__shfl_sync(0xffffffffu, bitcast<unsigned long long>(v), l));
  else return bitcast<T>(__shfl_sync(0xffffffffu, bitcast<unsigned int>(v), l));
}
// The sum of v over the threads before this one in the CTA of NW warps (T: a 4- or 8-byte
// unsigned integer or float), and in `total` the sum over all of them. `part` is NW elements of
// shared memory that no thread still reads (the caller's barrier); one barrier inside.
template <int NW, class T> TSR_D T block_exclusive_sum(T v, T* part, T& total) {
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
  T x = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const T y = shfl_up(x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) part[warp] = x;
  __syncthreads();
  T w = lane < NW ? part[lane] : T(0);
#pragma unroll
  for (int d = 1; d < NW; d <<= 1) {
    const T y = shfl_up(w, d);
    if (lane >= d) w += y;
  }
  total = shfl_idx(w, NW - 1);
  const T before_warp = shfl_idx(w, warp > 0 ? warp - 1 : 0);
  T before_lane = shfl_up(x, 1);
  if (lane == 0) before_lane = T(0);
  return (warp > 0 ? before_warp : T(0)) + before_lane;
}

// block_exclusive_sum for R values a thread at once, with one barrier inside where R calls
// take R: the values in the order (value 0 of every thread in thread order, then value 1 of
// every thread, ...), as a blocked tile's repeats lie. off[r] is the sum of everything before
// this thread's value r (added as a single call's `run + (before the warp + before the lane)`,
// so float sums round alike), and the return value the sum of all. `part` is NW * R elements
// of shared memory that no thread still reads (the caller's barrier).
template <int NW, int R, class T> TSR_D T block_exclusive_sums(const T (&v)[R], T (&off)[R], T* part) {
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
  T x[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    x[r] = v[r];
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const T y = shfl_up(x[r], d);
      if (lane >= d) x[r] += y;
    }
    if (lane == 31) part[r * NW + warp] = x[r];
  }
  __syncthreads();
  T run = T(0);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    T w = lane < NW ? part[r * NW + lane] : T(0);
#pragma unroll
    for (int d = 1; d < NW; d <<= 1) {
      const T y = shfl_up(w, d);
      if (lane >= d) w += y;
    }
    const T total = shfl_idx(w, NW - 1);
    const T before_warp = shfl_idx(w, warp > 0 ? warp - 1 : 0);
    T before_lane = shfl_up(x[r], 1);
    if (lane == 0) before_lane = T(0);
    off[r] = run + ((warp > 0 ? before_warp : T(0)) + before_lane);
    run += total;
  }
  return run;
}

}  // namespace tsr
