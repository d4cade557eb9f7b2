// bitcast on the cuda backend: every float width with its integers emits the runtime's
// canonical-NaN bit functions, and NVRTC compiles the result (no GPU needed; the cpu test
// checks the values against the interpreter). Two widths go through NVRTC, to keep the test
// short: every compile parses all of core.cuh's tsr::*_bits, and the emitted text is the same
// shape for the others.
#include "CudaTestUtil.h"
#include "../common/BitcastKernel.h"

namespace tessera::cudatest {
namespace {

TEST(CudaBitcast, EveryWidthEmitsAndCompiles) {
  std::string why;
  bool nvrtc = nvrtc_available(&why);
  for (const testutil::BitcastTypes& w : testutil::kBitcastTypes) {
    SCOPED_TRACE(w.f);
    auto m = parse_module(testutil::bitcast_kernel(w.f, w.i, w.u), "t.tile");
    auto k = bind_constexprs(*m->kernels.at(0), {});
    CudaTarget t = CudaTarget::parse("sm_90a");
    CudaEmission em = emit_cuda_with_info(*k, t);
    EXPECT_NE(em.source.find("tsr::" + std::string(w.f) + "_bits("), std::string::npos);
    const std::string f = w.f;
    if (!nvrtc || (f != "f32" && f != "bf16")) continue;
    expect_nvrtc_accepts(em, t);
  }
  if (!nvrtc) GTEST_SKIP() << "emitted text checked; not compiled: " << why;
}

}  // namespace
}  // namespace tessera::cudatest
