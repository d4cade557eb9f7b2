// sort and topk on the cpu backend against the interpreter, element for element (values with a
// zero's sign, indices exactly), on keys with many ties, NaN, both zeros and infinities, at a
// size that leaves the last tiles partly out of bounds (padding NaN takes part).
#include "CpuTestUtil.h"
#include "../common/SortKernel.h"

namespace tessera::cputest {
namespace {

class CpuSort : public ::testing::TestWithParam<const char*> {};

TEST_P(CpuSort, MatchesTheInterpreterOnTiesAndNaN) {
  auto m = parse_module(testutil::sort_kernel(GetParam()), "t.tile");
  auto k = bind_constexprs(*m->kernels.at(0), {});
  Sizes sizes{{"M", 10}, {"N", 30}};
  std::vector<Tensor> want = make_random_tensors(*k, sizes, 3);
  testutil::fill_sort_keys(want[0], 17);
  std::vector<Tensor> got = want;
  const std::vector<Tensor> before = want;
  auto wa = args_for(*k, want), ga = args_for(*k, got);
  run_interp(*k, wa);
  compile_cpu(*k, test_options())->run(ga);
  int bad = 0, changed = 0;
  for (size_t t = 2; t < want.size(); ++t)
    for (int64_t i = 0; i < want[t].numel(); ++i) {
      changed += !testutil::same_element(want[t], before[t], i);
      if (!testutil::same_element(want[t], got[t], i) && bad++ < 5)
        ADD_FAILURE() << "output " << t << " element " << i << ": cpu " << got[t].get(i) << ", interp " << want[t].get(i);
    }
  EXPECT_GT(changed, 1000) << "the kernel wrote too little: the test could not fail";
}

INSTANTIATE_TEST_SUITE_P(Types, CpuSort, ::testing::Values("f32", "bf16", "f64", "i32", "u8", "i64"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace tessera::cputest
