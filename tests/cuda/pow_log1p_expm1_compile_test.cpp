// pow / log1p / expm1 for every float width: the emitter calls the float functions for f32 and
// the narrow types and the double ones for f64, and NVRTC accepts the result (the corpus covers
// f32 only). No GPU needed.
#include "CudaTestUtil.h"

namespace tessera::cudatest {
namespace {

const char* kMath = R"(kernel @powlog(%x: view<T, [N]>, %y: view<T, [N]>, %z: view<T, [N]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    %b = const {value = 128} : i32
    %b1 = const {value = 127} : i32
    %t = add %n, %b1 : i32
    %g = div %t, %b : i32
    yield %g
  }
  %pid = program_id {axis = 0} : i32
  %a = load_tile %x, %pid : tile<T, [128]>
  %b = load_tile %y, %pid : tile<T, [128]>
  %p = pow %a, %b : tile<T, [128]>
  %l = log1p %p : tile<T, [128]>
  %e = expm1 %l : tile<T, [128]>
  store_tile %z, %e, %pid
}
)";

TEST(CudaPowLog1pExpm1, EmitsTheFunctionsOfTheComputeTypeAndCompiles) {
  std::string why;
  bool nvrtc = nvrtc_available(&why);
  for (const char* dt : {"f32", "bf16", "f16", "f64"}) {
    SCOPED_TRACE(dt);
    auto m = parse_module(std::regex_replace(kMath, std::regex(R"(\bT\b)"), dt), "t.tile");
    auto k = bind_constexprs(*m->kernels.at(0), {});
    CudaTarget t = CudaTarget::parse("sm_90a");
    CudaEmission em = emit_cuda_with_info(*k, t);
    bool d = std::string(dt) == "f64";
    EXPECT_NE(em.source.find(d ? "pow(" : "powf("), std::string::npos);
    EXPECT_NE(em.source.find(d ? "log1p(" : "log1pf("), std::string::npos);
    EXPECT_NE(em.source.find(d ? "expm1(" : "expm1f("), std::string::npos);
    if (d) {
      EXPECT_EQ(em.source.find("powf("), std::string::npos) << "f64 must not compute in float";
    }
    if (!nvrtc) continue;
    expect_nvrtc_accepts(em, t);
  }
  if (!nvrtc) GTEST_SKIP() << "emitted text checked; not compiled: " << why;
}

}  // namespace
}  // namespace tessera::cudatest
