// fp8 matmul on the cpu backend: the f8 dot as docs/semantics.md defines it (products and a
// k-ordered sum in f32) on the interpreter and the cpu backend, and the library's matmul_fp8
// against the interpreter at ragged sizes that span several default 128x128x64 tiles.
#include <cmath>

#include "CpuTestUtil.h"
#include "kernels/Library.h"

namespace tessera::cputest {
namespace {

std::string f8_dot_kernel(const std::string& dt) {
  return "kernel @d(%a: view<" + dt + ", [16, 32]>, %b: view<" + dt + ", [32, 16]>, %z: view<f32, [16, 16]>) {\n"
         "  grid {\n    %one = const {value = 1} : i32\n    yield %one\n  }\n"
         "  %c0 = const {value = 0} : i32\n"
         "  %f0 = const {value = 0.0} : f32\n"
         "  %acc = splat %f0 : tile<f32, [16, 16]>\n"
         "  %x = load_tile %a, %c0, %c0 : tile<" + dt + ", [16, 32]>\n"
         "  %y = load_tile %b, %c0, %c0 : tile<" + dt + ", [32, 16]>\n"
         "  %r = dot %x, %y, %acc : tile<f32, [16, 16]>\n"
         "  store_tile %z, %r, %c0, %c0\n}\n";
}

// Element (0, 0) sums big^2 + tiny^2 - big^2: in f32 the tiny product is lost next to big^2 and
// the result is 0; a sum in double would give tiny^2. Element (1, 1) is 1.25^2 = 1.5625, which
// f8 cannot hold: the product is not rounded to the input type. The rest is random.
TEST(CpuMatmulFp8, F8DotSumsInF32InOrderOfK) {
  struct Case { const char* dt; double big, tiny; };
  for (Case c : {Case{"f8e4m3", 448, std::ldexp(1.0, -9)}, Case{"f8e5m2", 57344, std::ldexp(1.0, -16)}}) {
    SCOPED_TRACE(c.dt);
    auto m = parse_module(f8_dot_kernel(c.dt), "f8dot.tile");
    auto k = bind_constexprs(*m->kernels.at(0), {});
    std::vector<Tensor> want = make_random_tensors(*k, {}, 17);
    Tensor &a = want[0], &b = want[1];
    for (int64_t j = 0; j < 32; ++j) {
      a.set(j, 0);           // row 0 of a
      a.set(32 + j, 0);      // row 1 of a
      b.set(j * 16, 0);      // column 0 of b
      b.set(j * 16 + 1, 0);  // column 1 of b
    }
    const double row0[] = {c.big, c.tiny, -c.big}, col0[] = {c.big, c.tiny, c.big};
    for (int64_t p = 0; p < 3; ++p) {
      a.set(p, row0[p]);
      b.set(p * 16, col0[p]);
    }
    a.set(32, 1.25);   // a[1, 0]
    b.set(1, 1.25);    // b[0, 1]
    ASSERT_EQ(a.get(1) * b.get(16), c.tiny * c.tiny) << "tiny must be an f8 value";
    std::vector<Tensor> got = want;
    auto wa = args_for(*k, want), ga = args_for(*k, got);
    run_interp(*k, wa);
    EXPECT_EQ(want[2].get(0), 0.0);
    EXPECT_EQ(want[2].get(17), 1.5625);
    // Every element: the k-ordered f32 fma chain.
    for (int64_t i = 0; i < 16; ++i)
      for (int64_t j = 0; j < 16; ++j) {
        float s = 0;
        for (int64_t p = 0; p < 32; ++p)
          s = std::fmaf(static_cast<float>(a.get(i * 32 + p)), static_cast<float>(b.get(p * 16 + j)), s);
        ASSERT_EQ(want[2].get(i * 16 + j), s) << i << ", " << j;
      }
    // The cpu backend sums in the same order (dot_f32): the same bits.
    compile_cpu(*k, test_options())->run(ga);
    EXPECT_EQ(got[2].data, want[2].data);
  }
}

// The library kernel at the default tiles: 8 x 8 programs with ragged last rows and columns, and
// K = 77 = one full 64-wide K tile plus a padded one; then the smallest size.
TEST(CpuMatmulFp8, LibraryKernelMatchesInterpreterAtRaggedSizes) {
  const LibraryKernel* lk = find_library_kernel("matmul_fp8");
  ASSERT_NE(lk, nullptr);
  for (ScalarKind dt : lk->dtypes) {
    SCOPED_TRACE(scalar_name(dt));
    auto k = bind_constexprs(*lk->build(dt), {});
    auto compiled = compile_cpu(*k, test_options());
    EXPECT_GT(expect_same_as_interp(*k, {{"M", 1000}, {"N", 999}, {"K", 77}}, 5, compiled), 0);
    EXPECT_GT(expect_same_as_interp(*k, {{"M", 1}, {"N", 1}, {"K", 1}}, 6, compiled), 0);
  }
}

}  // namespace
}  // namespace tessera::cputest
