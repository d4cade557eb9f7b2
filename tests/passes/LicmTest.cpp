// licm keeps what the kernel computes: the interpreter gives bit-identical results before and
// after it on the pass file's kernel (loads, a nested loop, a store into a view it also reads),
// at sizes that are not multiples of the tile.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "../common/BackendTestUtil.h"
#include "interp/Interpreter.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

TEST(Licm, KeepsTheInterpretersResults) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/tests/passes/data/licm.tile");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  auto before = parse_module(text.substr(0, text.find("// ----- expect")), "licm.tile")->kernels.at(0)->clone();
  auto after = before->clone();
  PassStats stats;
  licm(*after, stats);
  EXPECT_EQ(stats["licm.hoisted"], 8);
  for (uint64_t seed : {3u, 4u}) {
    Sizes s = {{"M", 5}, {"N", 37}};
    std::vector<Tensor> a = make_random_tensors(*before, s, seed), b = a;
    auto aa = testutil::args_for(*before, a), ba = testutil::args_for(*after, b);
    run_interp(*before, aa);
    run_interp(*after, ba);
    for (size_t t = 0; t < a.size(); ++t)
      for (int64_t i = 0; i < a[t].numel(); ++i) ASSERT_EQ(a[t].get(i), b[t].get(i)) << "tensor " << t << " element " << i;
  }
}

// extract_tile fails on a sub-tile index out of range: moved out of a loop that runs zero
// times, it would fail where the program does not. It stays.
TEST(Licm, KeepsOpsThatCanFailInTheLoop) {
  const char* text = R"(kernel @k(%x: view<f32, [16, 16]>, %y: view<f32, [16, 16]>, %s: i32, %n: i32) {
  grid {
    %g = const {value = 1} : i32
    yield %g
  }
  %zero = const {value = 0} : i32
  %one = const {value = 1} : i32
  %t = load_tile %x, %zero, %zero : tile<f32, [16, 16]>
  %r = for %zero, %n, %one, %t : tile<f32, [16, 16]> {
    ^(%i: i32, %acc: tile<f32, [16, 16]>):
    %sub = extract_tile %t, %s, %zero : tile<f32, [4, 16]>
    %ins = insert_tile %acc, %sub, %zero, %zero : tile<f32, [16, 16]>
    yield %ins
  }
  store_tile %y, %r, %zero, %zero
}
)";
  auto k = parse_module(text, "extract.tile")->kernels.at(0)->clone();
  PassStats stats;
  licm(*k, stats);
  EXPECT_EQ(stats["licm.hoisted"], 0);
  EXPECT_EQ(print_kernel(*k), text);
}

}  // namespace
}  // namespace tessera
