// Bad input for the Struct layer on cuda: buffers that do not fit in shared memory are a
// located error naming the bytes and the target's limit, at compile time (never a launch
// failure or a silent overflow).
#include <gtest/gtest.h>

#include "cuda/CudaBackend.h"
#include "CodegenTestUtil.h"
#include "cuda/CudaEmitter.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

using codegentest::planning_target;

std::string buffer_kernel(int slots, int elems) {
  return "kernel @big(%x: view<f32, [N]>, %y: view<f32, [N]>) {\n"
         "  grid {\n    %one = const {value = 1} : i32\n    yield %one\n  }\n"
         "  %z = const {value = 0} : i32\n"
         "  %buf = alloc : buffer<f32, [" + std::to_string(slots) + ", " + std::to_string(elems) +
         "], space = \"shared\">\n"
         "  async_copy %buf, %x, %z, %z\n"
         "  async_wait\n"
         "  %t = buffer_read %buf, %z : tile<f32, [" + std::to_string(elems) + "]>\n"
         "  store_tile %y, %t, %z\n"
         "}\n";
}

TEST(CudaStructLimits, BuffersBeyondSharedMemoryAreALocatedError) {
  // 4 x 16384 f32 = 256 KiB: over sm_90a's 227 KiB and sm_80's 163 KiB.
  auto k = bind_constexprs(*parse_module(buffer_kernel(4, 16384), "big.tile")->kernels.at(0), {});
  for (const char* arch : {"sm_80", "sm_90a"}) {
    try {
      emit_cuda(*k, planning_target(arch));
      ADD_FAILURE() << "expected a shared-memory error on " << arch;
    } catch (const TesseraError& e) {
      std::string m = e.what();
      EXPECT_NE(m.find("big.tile:1:1"), std::string::npos) << m;
      EXPECT_NE(m.find("needs 262144 bytes of shared memory"), std::string::npos) << m;
      EXPECT_NE(m.find(std::string("the limit on ") + arch), std::string::npos) << m;
    }
  }
  // One slot fits.
  auto ok = bind_constexprs(*parse_module(buffer_kernel(1, 16384), "ok.tile")->kernels.at(0), {});
  EXPECT_NO_THROW(emit_cuda(*ok, planning_target("sm_90a")));
}

}  // namespace
}  // namespace tessera
