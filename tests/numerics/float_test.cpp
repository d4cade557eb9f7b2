// Exact narrow-float conversions: exhaustive round trips, hand-computed ties, subnormals,
// overflow/saturation, and f32 against the C++ cast.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "support/Float.h"

using namespace tessera;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

bool is_nan_bits(ScalarKind k, uint64_t b) { return std::isnan(float_from_bits(k, b)); }

void exhaustive_round_trip(ScalarKind k, int bits) {
  int nan_count = 0;
  for (uint64_t b = 0; b < (uint64_t{1} << bits); ++b) {
    double v = float_from_bits(k, b);
    if (std::isnan(v)) {
      ++nan_count;
      EXPECT_TRUE(is_nan_bits(k, float_to_bits(k, v))) << std::hex << b;
      continue;
    }
    ASSERT_EQ(float_to_bits(k, v), b) << scalar_name(k) << " bits 0x" << std::hex << b << " value " << v;
    ASSERT_EQ(std::bit_cast<uint64_t>(round_to_float(k, v)), std::bit_cast<uint64_t>(v));
  }
  // NaN encodings: f16 2*1023, bf16 2*127, e5m2 2*3, e4m3 2 (S.1111.111 only).
  int want = k == ScalarKind::F16 ? 2046 : k == ScalarKind::BF16 ? 254 : k == ScalarKind::F8E5M2 ? 6 : 2;
  EXPECT_EQ(nan_count, want) << scalar_name(k);
}

// Between every two adjacent finite values, the midpoint rounds to the one with an even
// mantissa, and points a hair either side of it round to the nearer one.
void exhaustive_ties(ScalarKind k, int bits) {
  uint64_t sign = uint64_t{1} << (bits - 1);
  for (uint64_t b = 0; b + 1 < sign; ++b) {
    double lo = float_from_bits(k, b), hi = float_from_bits(k, b + 1);
    if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
    double mid = (lo + hi) / 2;  // exact in double
    uint64_t even = (b & 1) ? b + 1 : b;
    ASSERT_EQ(float_to_bits(k, mid), even) << scalar_name(k) << " tie after 0x" << std::hex << b;
    ASSERT_EQ(float_to_bits(k, -mid), even | sign);
    ASSERT_EQ(float_to_bits(k, std::nextafter(mid, 0.0)), b);
    ASSERT_EQ(float_to_bits(k, std::nextafter(mid, kInf)), b + 1);
  }
}

}  // namespace

TEST(Float, ExhaustiveRoundTrip8Bit) {
  exhaustive_round_trip(ScalarKind::F8E4M3, 8);
  exhaustive_round_trip(ScalarKind::F8E5M2, 8);
}

TEST(Float, ExhaustiveRoundTrip16Bit) {
  exhaustive_round_trip(ScalarKind::F16, 16);
  exhaustive_round_trip(ScalarKind::BF16, 16);
}

TEST(Float, ExhaustiveTies) {
  exhaustive_ties(ScalarKind::F8E4M3, 8);
  exhaustive_ties(ScalarKind::F8E5M2, 8);
  exhaustive_ties(ScalarKind::F16, 16);
  exhaustive_ties(ScalarKind::BF16, 16);
}

TEST(Float, E4M3HandValues) {
  auto k = ScalarKind::F8E4M3;
  EXPECT_EQ(float_from_bits(k, 0x7E), 448.0);
  EXPECT_TRUE(std::isnan(float_from_bits(k, 0x7F)));
  EXPECT_TRUE(std::isnan(float_from_bits(k, 0xFF)));
  EXPECT_EQ(float_from_bits(k, 0x78), 256.0);       // 1.000 * 2^8
  EXPECT_EQ(float_from_bits(k, 0x01), std::ldexp(1.0, -9));  // smallest subnormal
  EXPECT_EQ(float_from_bits(k, 0x08), std::ldexp(1.0, -6));  // smallest normal
  EXPECT_EQ(float_from_bits(k, 0x38), 1.0);
  EXPECT_EQ(float_to_bits(k, 1.0 + 1.0 / 16), 0x38u);   // tie -> even (1.000)
  EXPECT_EQ(float_to_bits(k, 1.0 + 3.0 / 16), 0x3Au);   // tie -> even (1.010)
  EXPECT_EQ(float_to_bits(k, std::ldexp(1.0, -10)), 0x00u);      // half the min subnormal
  EXPECT_EQ(float_to_bits(k, std::ldexp(3.0, -10)), 0x02u);      // 1.5 subnormals -> 2
  EXPECT_EQ(float_to_bits(k, -std::ldexp(1.0, -10)), 0x80u);     // -0
  // Saturation: 464 is the tie between 448 and (non-existent) 480; beyond, inf: all 448.
  EXPECT_EQ(float_to_bits(k, 460.0), 0x7Eu);
  EXPECT_EQ(float_to_bits(k, 464.0), 0x7Eu);
  EXPECT_EQ(float_to_bits(k, 1e9), 0x7Eu);
  EXPECT_EQ(float_to_bits(k, kInf), 0x7Eu);
  EXPECT_EQ(float_to_bits(k, -kInf), 0xFEu);
  EXPECT_EQ(float_to_bits(k, kNaN), 0x7Fu);
  EXPECT_EQ(float_to_bits(k, -kNaN), 0xFFu);
  EXPECT_EQ(round_to_float(k, -1000.0), -448.0);
}

TEST(Float, E5M2HandValues) {
  auto k = ScalarKind::F8E5M2;
  EXPECT_EQ(float_from_bits(k, 0x7B), 57344.0);
  EXPECT_EQ(float_from_bits(k, 0x7C), kInf);
  EXPECT_EQ(float_from_bits(k, 0x01), std::ldexp(1.0, -16));
  EXPECT_EQ(float_to_bits(k, 61440.0), 0x7Bu);  // tie with the next binade: saturates
  EXPECT_EQ(float_to_bits(k, 1e6), 0x7Bu);
  EXPECT_EQ(float_to_bits(k, -1e6), 0xFBu);
  EXPECT_EQ(float_to_bits(k, kInf), 0x7Cu);     // inf stays inf
  EXPECT_EQ(float_to_bits(k, -kInf), 0xFCu);
  EXPECT_TRUE(std::isnan(round_to_float(k, kNaN)));
  EXPECT_EQ(float_to_bits(k, 1.125), 0x3Cu);    // 1.125 is the tie 1.00|1.25 -> 1.00
  EXPECT_EQ(float_to_bits(k, 1.375), 0x3Eu);    // tie 1.25|1.5 -> 1.5 (even)
}

TEST(Float, F16HandValues) {
  auto k = ScalarKind::F16;
  EXPECT_EQ(float_to_bits(k, 1.0), 0x3C00u);
  EXPECT_EQ(float_to_bits(k, 65504.0), 0x7BFFu);
  EXPECT_EQ(float_to_bits(k, 65519.99), 0x7BFFu);
  EXPECT_EQ(float_to_bits(k, 65520.0), 0x7C00u);  // the tie rounds to even: inf
  EXPECT_EQ(float_to_bits(k, -1e6), 0xFC00u);
  EXPECT_EQ(float_to_bits(k, std::ldexp(1.0, -24)), 0x0001u);
  EXPECT_EQ(float_to_bits(k, std::ldexp(1.0, -25)), 0x0000u);
  EXPECT_EQ(float_to_bits(k, std::ldexp(3.0, -25)), 0x0002u);
  EXPECT_EQ(float_to_bits(k, std::ldexp(1.0, -14) - std::ldexp(1.0, -25)), 0x0400u);  // carry into normal
  EXPECT_EQ(float_to_bits(k, 1.0 + std::ldexp(1.0, -11)), 0x3C00u);
  EXPECT_EQ(float_to_bits(k, 1.0 + std::ldexp(3.0, -11)), 0x3C02u);
  // Just above a tie: a conversion through f32 would round twice and get 0x3C00.
  EXPECT_EQ(float_to_bits(k, 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)), 0x3C01u);
  EXPECT_EQ(float_to_bits(k, 2048.0 + 1.0), 0x6800u);  // 2049: tie between 2048 and 2050
  EXPECT_EQ(float_to_bits(k, 2048.0 + 3.0), 0x6802u);  // 2051 -> 2052
}

TEST(Float, BF16MatchesF32BitRounding) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200000; ++i) {
    uint32_t fb = static_cast<uint32_t>(rng());
    float f = std::bit_cast<float>(fb);
    if (std::isnan(f)) continue;
    // Reference: round the f32 bit pattern to its upper 16 bits, ties to even.
    uint32_t want = (fb + 0x7FFF + ((fb >> 16) & 1)) >> 16;
    ASSERT_EQ(float_to_bits(ScalarKind::BF16, f), want) << std::hex << fb;
  }
  EXPECT_EQ(float_to_bits(ScalarKind::BF16, 1.0), 0x3F80u);
  EXPECT_EQ(float_to_bits(ScalarKind::BF16, 3.4e38), 0x7F80u);  // overflow -> inf
  // 1 + 2^-8 + tiny is above the tie: one rounding gives 1 + 2^-7.
  EXPECT_EQ(float_to_bits(ScalarKind::BF16, 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -50)), 0x3F81u);
}

TEST(Float, F32MatchesCppCast) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::vector<double> xs = {0.0, -0.0, 1e-46, -1e-46, 1.4e-45, 3.4028235e38, 3.4028236e38, 1e39,
                            -1e39, kInf, -kInf, 1.0 + std::ldexp(1.0, -24)};
  for (int i = 0; i < 100000; ++i) xs.push_back(std::ldexp(uni(rng), static_cast<int>(rng() % 300) - 150));
  for (double x : xs) {
    float f = static_cast<float>(x);
    ASSERT_EQ(float_to_bits(ScalarKind::F32, x), std::bit_cast<uint32_t>(f)) << x;
    ASSERT_EQ(std::bit_cast<uint64_t>(round_to_float(ScalarKind::F32, x)),
              std::bit_cast<uint64_t>(static_cast<double>(f)));
  }
  EXPECT_TRUE(std::isnan(round_to_float(ScalarKind::F32, kNaN)));
}

#ifdef __FLT16_MAX__
TEST(Float, F16MatchesCompilerFloat16) {
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  for (int i = 0; i < 200000; ++i) {
    double x = std::ldexp(uni(rng), static_cast<int>(rng() % 44) - 28);
    _Float16 h = static_cast<_Float16>(x);
    uint16_t hb;
    std::memcpy(&hb, &h, 2);
    ASSERT_EQ(float_to_bits(ScalarKind::F16, x), hb) << x;
  }
}
#endif

TEST(Float, FloatToIntTruncatesAndSaturates) {
  EXPECT_EQ(float_to_int(ScalarKind::I8, 127.9), 127);
  EXPECT_EQ(float_to_int(ScalarKind::I8, -128.9), -128);
  EXPECT_EQ(float_to_int(ScalarKind::I8, 300.0), 127);
  EXPECT_EQ(float_to_int(ScalarKind::I8, -1e10), -128);
  EXPECT_EQ(float_to_int(ScalarKind::I8, -2.7), -2);
  EXPECT_EQ(float_to_int(ScalarKind::I32, kNaN), 0);
  EXPECT_EQ(float_to_int(ScalarKind::I32, kInf), 2147483647);
  EXPECT_EQ(float_to_int(ScalarKind::I32, -kInf), -2147483648LL);
  EXPECT_EQ(float_to_int(ScalarKind::U8, -5.0), 0);
  EXPECT_EQ(float_to_int(ScalarKind::U8, 255.5), 255);
  EXPECT_EQ(float_to_int(ScalarKind::U8, 1e30), 255);
  EXPECT_EQ(static_cast<uint64_t>(float_to_int(ScalarKind::U64, 1e30)), ~uint64_t{0});
  EXPECT_EQ(static_cast<uint64_t>(float_to_int(ScalarKind::U64, 1.8e19)), 18000000000000000000ull);
  EXPECT_EQ(float_to_int(ScalarKind::I64, 9.3e18), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(float_to_int(ScalarKind::I64, -9.3e18), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(float_to_int(ScalarKind::I1, 0.5), 1);
  EXPECT_EQ(float_to_int(ScalarKind::I1, 0.0), 0);
}

TEST(Float, WrapInt) {
  EXPECT_EQ(wrap_int(ScalarKind::I8, 200), -56);
  EXPECT_EQ(wrap_int(ScalarKind::U8, -1), 255);
  EXPECT_EQ(wrap_int(ScalarKind::I16, 40000), -25536);
  EXPECT_EQ(wrap_int(ScalarKind::U32, -1), 4294967295LL);
  EXPECT_EQ(wrap_int(ScalarKind::I32, 2147483648LL), -2147483648LL);
  EXPECT_EQ(wrap_int(ScalarKind::I1, 3), 1);
  EXPECT_EQ(wrap_int(ScalarKind::I1, 2), 0);
}

TEST(Float, IntToFloatRoundsOnce) {
  int64_t v = (int64_t{1} << 60) + (int64_t{1} << 36) + 1;  // just above the f32 tie
  EXPECT_EQ(int_to_float(ScalarKind::F32, v, false), std::ldexp(1.0, 60) + std::ldexp(1.0, 37));
  EXPECT_EQ(int_to_float(ScalarKind::F32, -v, false), -(std::ldexp(1.0, 60) + std::ldexp(1.0, 37)));
  EXPECT_EQ(int_to_float(ScalarKind::F32, (1 << 24) + 1, false), 16777216.0);
  EXPECT_EQ(int_to_float(ScalarKind::F32, (1 << 24) + 3, false), 16777220.0);
  EXPECT_EQ(int_to_float(ScalarKind::F64, -1, true), 18446744073709551616.0);  // u64 max
  EXPECT_EQ(int_to_float(ScalarKind::F16, 70000, false), kInf);
  EXPECT_EQ(int_to_float(ScalarKind::F8E4M3, 1000, false), 448.0);
  EXPECT_EQ(int_to_float(ScalarKind::BF16, 257, false), 256.0);
  EXPECT_EQ(int_to_float(ScalarKind::BF16, 259, false), 260.0);
}
