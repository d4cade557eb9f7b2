// bitcast on the cpu backend against the interpreter and against the definition
// (docs/semantics.md), for every float width and its integers, on random bits with NaN
// (quiet, signalling, negative, with payloads), infinities, signed zeros and subnormals, at a
// ragged size (the last tile partly out of bounds).
#include <cstring>
#include <random>

#include "CpuTestUtil.h"
#include "../common/BitcastKernel.h"
#include "support/Float.h"

namespace tessera::cputest {
namespace {

// Random bits, with the special patterns of float kind `F` (of t's width) on the first elements:
// signed zeros, infinities, NaNs (quiet and signalling, with payloads, negative), subnormals,
// the largest magnitudes, and all ones.
void fill_bits(Tensor& t, ScalarKind F, uint64_t seed) {
  const int w = scalar_bits(t.dtype);
  const size_t bytes = static_cast<size_t>(scalar_bytes(t.dtype));
  const uint64_t sign = uint64_t{1} << (w - 1);
  const int m = F == ScalarKind::F64 ? 52 : F == ScalarKind::F32 ? 23 : F == ScalarKind::F16 ? 10
              : F == ScalarKind::BF16 ? 7 : F == ScalarKind::F8E4M3 ? 3 : 2;  // mantissa bits
  const uint64_t exp_all = (sign - 1) & ~((uint64_t{1} << m) - 1);
  const std::vector<uint64_t> special = {0, sign, exp_all, exp_all | sign, exp_all | 1, exp_all | 1 | sign,
                                         exp_all | (uint64_t{1} << (m - 1)), exp_all | (uint64_t{1} << (m - 1)) | 3 | sign,
                                         sign - 1, ~uint64_t{0}, 1, 1 | sign, (uint64_t{1} << m) - 1};
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint64_t v = static_cast<size_t>(i) < special.size() ? special[static_cast<size_t>(i)] : rng();
    std::memcpy(t.data.data() + static_cast<size_t>(i) * bytes, &v, bytes);  // little-endian
  }
}

uint64_t bits_at(const Tensor& t, int64_t i) {
  uint64_t v = 0;
  const size_t bytes = static_cast<size_t>(scalar_bytes(t.dtype));
  std::memcpy(&v, t.data.data() + static_cast<size_t>(i) * bytes, bytes);
  return v;
}

TEST(CpuBitcast, MatchesTheInterpreterAndTheDefinitionOnEveryBitPattern) {
  for (const testutil::BitcastTypes& w : testutil::kBitcastTypes) {
    SCOPED_TRACE(w.f);
    auto m = parse_module(testutil::bitcast_kernel(w.f, w.i, w.u), "t.tile");
    auto k = bind_constexprs(*m->kernels.at(0), {});
    Sizes sizes{{"N", 333}};
    std::vector<Tensor> want = make_random_tensors(*k, sizes, 5);
    const ScalarKind F = want[2].dtype;
    fill_bits(want[0], F, 11);
    fill_bits(want[1], F, 12);
    std::vector<Tensor> got = want;
    auto wa = args_for(*k, want), ga = args_for(*k, got);
    run_interp(*k, wa);
    compile_cpu(*k, test_options())->run(ga);
    const int bits = scalar_bits(F);
    const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    int bad = 0;
    for (int64_t i = 0; i < 333 && bad < 5; ++i) {
      // The integer views: the same bits on both, and the definition's.
      for (size_t t : {3, 4, 5, 6}) {
        if (bits_at(want[t], i) != bits_at(got[t], i))
          ++bad, ADD_FAILURE() << "o" << t - 1 << "[" << i << "]: cpu " << std::hex << bits_at(got[t], i) << " interp "
                               << bits_at(want[t], i);
      }
      const uint64_t x = bits_at(want[0], i), y = bits_at(want[1], i);
      const bool x_nan = std::isnan(float_from_bits(F, x)), y_nan = std::isnan(float_from_bits(F, y));
      EXPECT_EQ(bits_at(want[3], i), x_nan ? float_bits_canonical(F, float_from_bits(F, x)) : x) << i;
      EXPECT_EQ(bits_at(want[4], i), y_nan ? float_bits_canonical(F, float_from_bits(F, y)) : y) << i;
      EXPECT_EQ(bits_at(want[6], i), x & mask) << i;
      // o1 is a float: NaN where the bits are a NaN (any payload), else exactly the bits.
      for (const Tensor* o : {&want[2], &got[2]}) {
        if (x_nan) EXPECT_TRUE(std::isnan(o->get(i))) << i;
        else EXPECT_EQ(bits_at(*o, i), x) << i;
      }
    }
  }
}

}  // namespace
}  // namespace tessera::cputest
