// Layout encodings do not change what a kernel computes (docs/semantics.md): the interpreter
// gives bit-identical results with and without them, and so does the cpu backend.
#include <fstream>
#include <sstream>

#include "CpuTestUtil.h"

namespace tessera::cputest {
namespace {

void strip_layouts(Block& b) {
  for (Value* a : b.args) a->type.layout = {}, a->type.space.clear();
  for (auto& op : b.ops) {
    for (Value* r : op->results) r->type.layout = {}, r->type.space.clear();
    for (auto& region : op->regions) strip_layouts(*region);
  }
}

TEST(Layouts, EncodingsDoNotChangeResults) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/tests/text/data/layouts.tile");
  std::stringstream ss;
  ss << in.rdbuf();
  auto with = bind_constexprs(*parse_module(ss.str(), "layouts.tile")->kernels.at(0), {});
  auto without = with->clone();
  strip_layouts(*without->body);
  ASSERT_EQ(print_kernel(*without).find("layout ="), std::string::npos);
  ASSERT_NE(print_kernel(*with).find("layout = dot_operand"), std::string::npos);
  for (int64_t m : {77, 32}) {
    Sizes s = {{"M", m}};
    std::vector<Tensor> a = make_random_tensors(*with, s, 11), b = a, c = a;
    auto aa = args_for(*with, a), ba = args_for(*without, b), ca = args_for(*with, c);
    run_interp(*with, aa);
    run_interp(*without, ba);
    compile_cpu(*with, test_options())->run(ca);
    for (size_t t = 0; t < a.size(); ++t)
      for (int64_t i = 0; i < a[t].numel(); ++i) ASSERT_EQ(a[t].get(i), b[t].get(i)) << "tensor " << t << " element " << i;
    EXPECT_GT(testutil::expect_tensors_match(a, c, "layouts", "cpu"), 0);
  }
}

}  // namespace
}  // namespace tessera::cputest
