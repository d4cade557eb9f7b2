// pipes-to-loads keeps meaning: the Struct matmul before the pass (pipes and roles, run by the
// interpreter's sequential Struct semantics) and after it (loads in a pipelined loop) compute
// the same bits, at ragged sizes and with one and several stages.
#include <gtest/gtest.h>

#include "Helpers.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "runtime/Tensor.h"

namespace tessera::test {
namespace {

int count_ops(Kernel& k, OpKind kind) {
  int n = 0;
  walk(k, [&](Op& o) { n += o.kind == kind; });
  return n;
}

TEST(PipesToLoads, StructMatmulMeansTheSameAfterThePass) {
  for (int64_t stages : {1, 3}) {
    for (ScalarKind dt : {ScalarKind::F32, ScalarKind::BF16}) {
      ConstexprConfig cfg = {{"BLOCK_M", 16}, {"BLOCK_N", 32}, {"BLOCK_K", 16}, {"STAGES", stages}};
      auto before = bind_constexprs(*find_library_kernel("matmul_struct")->build(dt), cfg);
      auto after = before->clone();
      PassStats st;
      pipes_to_loads(*after, st);
      ASSERT_EQ(st["pipes-to-loads.loops"], 1);
      EXPECT_EQ(count_ops(*after, OpKind::PipePop), 0);
      EXPECT_EQ(count_ops(*after, OpKind::WarpRole), 0);
      EXPECT_GT(count_ops(*before, OpKind::PipePop), 0);
      for (Sizes s : {Sizes{{"M", 45}, {"N", 38}, {"K", 51}}, Sizes{{"M", 1}, {"N", 1}, {"K", 1}}}) {
        std::vector<Tensor> a = make_random_tensors(*before, s, 9), b = a;
        std::vector<KernelArg> aa = args_of({&a[0], &a[1], &a[2]}), ba = args_of({&b[0], &b[1], &b[2]});
        run_interp(*before, aa);
        run_interp(*after, ba);
        ASSERT_EQ(a[2].data, b[2].data) << scalar_name(dt) << " STAGES=" << stages;
        EXPECT_NE(a[2].get(0), 0.0);
      }
    }
  }
}

}  // namespace
}  // namespace tessera::test
