// Every library kernel in f32 and bf16 on the cpu backend against the interpreter, ragged sizes.
#include "CpuTestUtil.h"
#include "check/Compare.h"
#include "kernels/Library.h"

namespace tessera::cputest {
namespace {

TEST(CpuLibrary, EveryKernelMatchesInterpreter) {
  ASSERT_FALSE(library().empty());
  for (const LibraryKernel& lk : library()) {
    for (ScalarKind dt : {ScalarKind::F32, ScalarKind::BF16}) {
      if (std::find(lk.dtypes.begin(), lk.dtypes.end(), dt) == lk.dtypes.end()) continue;
      SCOPED_TRACE(lk.name + " " + std::string(scalar_name(dt)));
      auto k = bind_constexprs(*lk.build(dt), {});
      // Small ragged sizes: not multiples of any block size.
      Sizes s;
      int i = 0;
      for (const auto& [name, v] : lk.default_sizes) s[name] = std::min<int64_t>(v, 67 + 30 * i++);
      EXPECT_GT(expect_same_as_interp(*k, s, 21), 0);
    }
  }
}

// Issue 17: the f32 matmul at K = 1000 and 4000 on the cpu backend, against the library
// reference within gamma_K * (|a| @ |b|) (the dtype's 1e-5 alone fails at K = 4000); one
// element moved past its bound fails.
TEST(CpuLibrary, MatmulAtLongKMatchesReferenceWithinItsBound) {
  const LibraryKernel* lk = find_library_kernel("matmul");
  auto k = bind_constexprs(*lk->build(ScalarKind::F32), {});
  auto compiled = compile_cpu(*k, test_options());
  for (int64_t K : {1000, 4000}) {
    SCOPED_TRACE("K=" + std::to_string(K));
    Sizes sizes{{"M", 64}, {"N", 128}, {"K", K}};
    std::vector<Tensor> got = make_random_tensors(*k, sizes, 1), want = got;
    auto ga = make_args(*k, got), wa = make_args(*k, want);
    compiled->run(ga);
    lk->reference(wa, sizes);
    ErrorBounds bounds = lk->error_bounds(wa, sizes);
    Comparison c = compare_outputs(*k, got, want, bounds);
    EXPECT_TRUE(c.ok()) << c.first_mismatch;
    EXPECT_GT(c.max_abs_err, 1e-5);
    if (K == 4000) {
      EXPECT_GT(compare_outputs(*k, got, want).mismatches, 50);
    }
    got[2].set(77, want[2].get(77) + 2 * (1e-5 + 1e-5 * std::fabs(want[2].get(77)) + bounds[2][77]));
    EXPECT_EQ(compare_outputs(*k, got, want, bounds).mismatches, 1);
  }
}

}  // namespace
}  // namespace tessera::cputest
