// The codegen knobs cpu_dot_mr / cpu_dot_nr (docs/tuning.md): tsr::dot_f32 with a register
// block of the tuner's choosing computes what the interpreter computes, and the default
// text carries no block.
#include "CpuTestUtil.h"
#include "kernels/Library.h"
#include "tune/Space.h"

namespace tessera::cputest {
namespace {

TEST(CpuDotBlockKnobs, AnyBlockMatchesTheInterpreter) {
  auto k = find_library_kernel("matmul")->build(ScalarKind::F32);
  const Sizes sizes = {{"M", 70}, {"N", 90}, {"K", 50}};
  auto plain = tune::bind_config(*k, {{"BLOCK_M", 32}, {"BLOCK_N", 32}, {"BLOCK_K", 16}});
  EXPECT_NE(emit_cpp(*plain).find("tsr::dot_f32<32, 32, 16>("), std::string::npos);
  for (auto [mr, nr] : {std::pair{1, 8}, {2, 16}, {8, 32}, {4, 0}, {0, 8}}) {
    SCOPED_TRACE(std::to_string(mr) + "x" + std::to_string(nr));
    auto bound = tune::bind_config(
        *k, {{"BLOCK_M", 32}, {"BLOCK_N", 32}, {"BLOCK_K", 16}, {"cpu_dot_mr", mr}, {"cpu_dot_nr", nr}});
    EXPECT_NE(emit_cpp(*bound).find("tsr::dot_f32<32, 32, 16, " + std::to_string(mr) + ", " + std::to_string(nr) + ">("),
              std::string::npos);
    expect_same_as_interp(*bound, sizes, 5);
  }
}

}  // namespace
}  // namespace tessera::cputest
