// Op classes against hand-computed expectations: elementwise rounding and wrap-around, casts,
// gather/scatter/atomics with masks, shape ops, reductions, scans and control flow.
#include <cmath>

#include "Helpers.h"

using namespace tessera;
using namespace tessera::test;

namespace {

// One program: z = OP(x, y) over a 1-D tile of 8 elements (N = 8 so nothing is padded).
std::string binary_kernel(const std::string& op, const std::string& dt, const std::string& extra = "") {
  return "kernel @b(%x: view<" + dt + ", [N]>, %y: view<" + dt + ", [N]>, %z: view<" + dt +
         ", [N]>) {\n  grid {\n    %one = const {value = 1} : i32\n    yield %one\n  }\n"
         "  %c0 = const {value = 0} : i32\n"
         "  %a = load_tile %x, %c0 : tile<" + dt + ", [8]>\n"
         "  %b = load_tile %y, %c0 : tile<" + dt + ", [8]>\n"
         "  %r = " + op + " %a, %b" + extra + " : tile<" + dt + ", [8]>\n"
         "  store_tile %z, %r, %c0\n}\n";
}

std::string unary_kernel(const std::string& op, const std::string& from, const std::string& to) {
  return "kernel @u(%x: view<" + from + ", [N]>, %z: view<" + to + ", [N]>) {\n"
         "  grid {\n    %one = const {value = 1} : i32\n    yield %one\n  }\n"
         "  %c0 = const {value = 0} : i32\n"
         "  %a = load_tile %x, %c0 : tile<" + from + ", [8]>\n"
         "  %r = " + op + " %a : tile<" + to + ", [8]>\n"
         "  store_tile %z, %r, %c0\n}\n";
}

}  // namespace

TEST(Elementwise, NarrowFloatArithmeticRoundsEachOp) {
  for (const char* dt : {"bf16", "f16", "f8e4m3", "f8e5m2", "f32"}) {
    ScalarKind k = *scalar_from_name(dt);
    for (const char* op : {"add", "sub", "mul", "div", "max", "min"}) {
      auto p = parse(binary_kernel(op, dt));
      Tensor x = random_tensor(k, {8}, 10), y = random_tensor(k, {8}, 11), z(k, {8});
      auto args = args_of({&x, &y, &z});
      run_interp(p.k(), args);
      for (int i = 0; i < 8; ++i) {
        double a = x.get(i), b = y.get(i);
        double e = std::string(op) == "add" ? a + b : std::string(op) == "sub" ? a - b
                 : std::string(op) == "mul" ? a * b : std::string(op) == "div" ? a / b
                 : std::string(op) == "max" ? std::max(a, b) : std::min(a, b);
        ASSERT_EQ(z.get(i), round_to_float(k, e)) << dt << " " << op << " " << a << ", " << b;
      }
    }
  }
}

TEST(Elementwise, IntegerWrapAroundAndSignedness) {
  auto p = parse(binary_kernel("add", "i8"));
  Tensor x(ScalarKind::I8, {8}), y(ScalarKind::I8, {8}), z(ScalarKind::I8, {8});
  int64_t xs[8] = {100, -100, 127, -128, 5, -7, 64, 1}, ys[8] = {100, -100, 1, -1, -5, 3, 64, -2};
  for (int i = 0; i < 8; ++i) x.set_int(i, xs[i]), y.set_int(i, ys[i]);
  auto args = args_of({&x, &y, &z});
  run_interp(p.k(), args);
  int64_t want[8] = {-56, 56, -128, 127, 0, -4, -128, -1};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(z.get_int(i), want[i]) << i;

  // div/rem truncate toward zero; unsigned u8 compares and divides as unsigned.
  auto d = parse(binary_kernel("div", "i32"));
  auto r = parse(binary_kernel("rem", "i32"));
  Tensor a(ScalarKind::I32, {8}), b(ScalarKind::I32, {8}), q(ScalarKind::I32, {8}), m(ScalarKind::I32, {8});
  int64_t as[8] = {7, -7, 7, -7, -2147483648LL, 0, 1, 100}, bs[8] = {2, 2, -2, -2, -1, 5, 3, 7};
  for (int i = 0; i < 8; ++i) a.set_int(i, as[i]), b.set_int(i, bs[i]);
  auto dargs = args_of({&a, &b, &q});
  run_interp(d.k(), dargs);
  auto rargs = args_of({&a, &b, &m});
  run_interp(r.k(), rargs);
  int64_t wq[8] = {3, -3, -3, 3, -2147483648LL, 0, 0, 14}, wm[8] = {1, -1, 1, -1, 0, 0, 1, 2};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(q.get_int(i), wq[i]) << i;
  for (int i = 0; i < 8; ++i) EXPECT_EQ(m.get_int(i), wm[i]) << i;

  auto mx = parse(binary_kernel("max", "u8"));
  Tensor u(ScalarKind::U8, {8}), v(ScalarKind::U8, {8}), w(ScalarKind::U8, {8});
  for (int i = 0; i < 8; ++i) u.set_int(i, 200 + i), v.set_int(i, 100 - i);
  auto margs = args_of({&u, &v, &w});
  run_interp(mx.k(), margs);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(w.get_int(i), 200 + i);
}

TEST(Elementwise, Shifts) {
  auto l = parse(binary_kernel("shl", "i16")), r = parse(binary_kernel("shr", "i16"));
  Tensor x(ScalarKind::I16, {8}), y(ScalarKind::I16, {8}), zl(ScalarKind::I16, {8}), zr(ScalarKind::I16, {8});
  int64_t xs[8] = {1, -1, 0x4001, -32768, 5, -5, 3, -3}, ys[8] = {15, 3, 1, 15, 16, 16, 40, 1};
  for (int i = 0; i < 8; ++i) x.set_int(i, xs[i]), y.set_int(i, ys[i]);
  auto la = args_of({&x, &y, &zl});
  run_interp(l.k(), la);
  auto ra = args_of({&x, &y, &zr});
  run_interp(r.k(), ra);
  int64_t wl[8] = {-32768, -8, -32766, 0, 0, 0, 0, -6}, wr[8] = {0, -1, 0x2000, -1, 0, -1, 0, -2};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(zl.get_int(i), wl[i]) << i;
  for (int i = 0; i < 8; ++i) EXPECT_EQ(zr.get_int(i), wr[i]) << i;
}

TEST(Elementwise, DivisionByZeroNamesTheElement) {
  auto p = parse(binary_kernel("div", "i32"));
  Tensor x = random_tensor(ScalarKind::I32, {8}, 3), y(ScalarKind::I32, {8}), z(ScalarKind::I32, {8});
  for (int i = 0; i < 8; ++i) y.set_int(i, i == 5 ? 0 : 3);
  EXPECT_EQ(run_error(p.k(), args_of({&x, &y, &z})), "div by zero at element (5)");
}

TEST(Elementwise, CastsSaturateAndRound) {
  auto p = parse(unary_kernel("cast", "f32", "i8"));
  Tensor x(ScalarKind::F32, {8}), z(ScalarKind::I8, {8});
  double xs[8] = {1.9, -1.9, 300, -300, NAN, 127.5, -0.5, 42};
  for (int i = 0; i < 8; ++i) x.set(i, xs[i]);
  auto a = args_of({&x, &z});
  run_interp(p.k(), a);
  int64_t want[8] = {1, -1, 127, -128, 0, 127, 0, 42};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(z.get_int(i), want[i]) << i;

  auto q = parse(unary_kernel("cast", "f32", "f8e4m3"));
  Tensor f8(ScalarKind::F8E4M3, {8});
  double ys[8] = {1000, -1000, INFINITY, -INFINITY, NAN, 1.0625, 1.1875, 0.0009};  // 0.0009 < 2^-10: rounds to 0
  for (int i = 0; i < 8; ++i) x.set(i, ys[i]);
  auto qa = args_of({&x, &f8});
  run_interp(q.k(), qa);
  uint8_t wb[8] = {0x7E, 0xFE, 0x7E, 0xFE, 0x7F, 0x38, 0x3A, 0x00};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(f8.data[i], wb[i]) << i;

  auto b = parse(unary_kernel("cast", "f32", "i1"));
  Tensor bits(ScalarKind::I1, {8});
  double zs[8] = {0.0, -0.0, 0.5, NAN, -3, 0, 1e-30, 0};
  for (int i = 0; i < 8; ++i) x.set(i, zs[i]);
  auto ba = args_of({&x, &bits});
  run_interp(b.k(), ba);
  int64_t wbits[8] = {0, 0, 1, 1, 1, 0, 1, 0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(bits.get_int(i), wbits[i]) << i;

  auto u = parse(unary_kernel("cast", "i32", "u8"));
  Tensor iv(ScalarKind::I32, {8}), uv(ScalarKind::U8, {8});
  for (int i = 0; i < 8; ++i) iv.set_int(i, 250 + i);  // int -> int wraps
  auto ua = args_of({&iv, &uv});
  run_interp(u.k(), ua);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(uv.get_int(i), (250 + i) % 256);
}

TEST(Elementwise, MathFunctionsRoundToElementType) {
  for (const char* op : {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "floor", "sin"}) {
    auto p = parse(unary_kernel(op, "bf16", "bf16"));
    Tensor x = random_tensor(ScalarKind::BF16, {8}, 21), z(ScalarKind::BF16, {8});
    for (int i = 0; i < 8; ++i) x.set(i, std::fabs(x.get(i)) + 0.25);
    auto a = args_of({&x, &z});
    run_interp(p.k(), a);
    for (int i = 0; i < 8; ++i) {
      double v = x.get(i), e;
      std::string o = op;
      e = o == "exp" ? std::exp(v) : o == "log" ? std::log(v) : o == "sqrt" ? std::sqrt(v)
        : o == "rsqrt" ? 1 / std::sqrt(v) : o == "tanh" ? std::tanh(v)
        : o == "sigmoid" ? 1 / (1 + std::exp(-v)) : o == "erf" ? std::erf(v)
        : o == "floor" ? std::floor(v) : std::sin(v);
      EXPECT_EQ(z.get(i), round_to_float(ScalarKind::BF16, e)) << op << " " << v;
    }
  }
}

TEST(Elementwise, FmaRoundsOnce) {
  // a = b = 1 + 2^-10, c = -(1 + 2^-9): the exact a*b + c is 2^-20 (an f16 subnormal); rounding
  // the product first loses it and gives 0.
  const char* text = R"(
kernel @f(%z: view<f16, [N]>) {
  grid {
    %one = const {value = 1} : i32
    yield %one
  }
  %c0 = const {value = 0} : i32
  %i1 = const {value = 1} : i32
  %a = const {value = 1.0009765625} : f16
  %c = const {value = -1.001953125} : f16
  %p = fma %a, %a, %c : f16
  %m = mul %a, %a : f16
  %r = add %m, %c : f16
  %t = splat %p : tile<f16, [2]>
  %u = splat %r : tile<f16, [1]>
  %s = insert_tile %t, %u, %i1 : tile<f16, [2]>
  store_tile %z, %s, %c0
}
)";
  auto p = parse(text);
  Tensor z(ScalarKind::F16, {2});
  auto a = args_of({&z});
  run_interp(p.k(), a);
  EXPECT_EQ(z.get(0), std::ldexp(1.0, -20));
  EXPECT_EQ(z.get(1), 0.0);
}
