// Tensor element access in native bit patterns, and random inputs.
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/Tensor.h"
#include "support/Float.h"

using namespace tessera;

TEST(Tensor, NarrowFloatStorageIsTheBitPattern) {
  Tensor t(ScalarKind::BF16, {3});
  t.set(0, 1.0);
  t.set(1, 1.0 + 1.0 / 256 + 1e-9);  // rounds up to 1 + 1/128
  t.set(2, -3.0e38 * 10);            // overflow: -inf
  uint16_t w[3];
  std::memcpy(w, t.data.data(), 6);
  EXPECT_EQ(w[0], 0x3F80);
  EXPECT_EQ(w[1], 0x3F81);
  EXPECT_EQ(w[2], 0xFF80);
  EXPECT_EQ(t.get(1), 1.0 + 1.0 / 128);
  EXPECT_EQ(t.get_int(1), 1);

  Tensor e(ScalarKind::F8E4M3, {2});
  e.set(0, 500.0);
  e.set_int(1, -3);
  EXPECT_EQ(e.data[0], 0x7E);
  EXPECT_EQ(e.get(1), -3.0);
}

TEST(Tensor, IntegersWrapAndSaturate) {
  Tensor t(ScalarKind::I8, {2});
  t.set_int(0, 130);
  t.set(1, -1000.5);  // like a cast: saturates
  EXPECT_EQ(t.get_int(0), -126);
  EXPECT_EQ(t.get_int(1), -128);
  Tensor u(ScalarKind::U64, {1});
  u.set_int(0, -1);
  EXPECT_EQ(u.get(0), 18446744073709551616.0);
  Tensor b(ScalarKind::I1, {1});
  b.set_int(0, 3);
  EXPECT_EQ(b.data[0], 1);
}

TEST(Tensor, RandomTensorsAreDeterministicAndInRange) {
  Kernel k;
  k.name = "r";
  k.add_param(Type::view(ScalarKind::F16, {"M", 5}), "x");
  k.add_param(Type::view(ScalarKind::I8, {"M"}), "i");
  k.add_param(Type::view(ScalarKind::U16, {3}), "u");
  k.add_param(Type::view(ScalarKind::I1, {"N"}), "b");
  k.add_param(Type::scalar(ScalarKind::F32), "alpha");
  Sizes s{{"M", 7}, {"N", 1}};
  auto a = make_random_tensors(k, s, 42), b = make_random_tensors(k, s, 42),
       c = make_random_tensors(k, s, 43);
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a[0].shape, (std::vector<int64_t>{7, 5}));
  EXPECT_EQ(a[0].data, b[0].data);
  EXPECT_NE(a[0].data, c[0].data);
  bool nonzero = false;
  for (int64_t i = 0; i < a[0].numel(); ++i) {
    double v = a[0].get(i);
    EXPECT_GE(v, -1.0);
    EXPECT_LE(v, 1.0);  // [-1, 1) may round up to 1 in f16
    EXPECT_EQ(v, round_to_float(ScalarKind::F16, v));
    nonzero |= v != 0;
  }
  EXPECT_TRUE(nonzero);
  for (int64_t i = 0; i < a[1].numel(); ++i) {
    EXPECT_GE(a[1].get_int(i), -8);
    EXPECT_LT(a[1].get_int(i), 8);
  }
  for (int64_t i = 0; i < a[2].numel(); ++i) EXPECT_LT(a[2].get_int(i), 16);
  EXPECT_EQ(a[3].get_int(0), 1);  // a single i1 element is never left zero
  EXPECT_THROW(make_random_tensors(k, {{"M", 2}}, 1), TesseraError);

  auto args = make_args(k, a, s);
  ASSERT_EQ(args.size(), 5u);
  EXPECT_EQ(args[0].tensor, &a[0]);
  EXPECT_EQ(args[4].tensor, nullptr);
  EXPECT_EQ(std::get<double>(args[4].scalar), 0.5);
}
