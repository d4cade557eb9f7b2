// NVRTC and the driver without a GPU: targets, compiling, located errors, "no device".
#include <gtest/gtest.h>

#include "CudaTestUtil.h"

namespace tessera::cudatest {
namespace {

#define REQUIRE_NVRTC()                                  \
  do {                                                   \
    std::string why_;                                    \
    if (!nvrtc_available(&why_)) GTEST_SKIP() << why_;   \
  } while (0)

TEST(CudaTarget, Parses) {
  EXPECT_EQ(CudaTarget::parse("cuda").str(), "sm_90a");
  EXPECT_EQ(CudaTarget::parse("cuda:sm_80").str(), "sm_80");
  EXPECT_EQ(CudaTarget::parse("sm_90a").str(), "sm_90a");
  CudaTarget t = CudaTarget::parse("cuda:sm_86");
  EXPECT_EQ(t.sm, 86);
  EXPECT_FALSE(t.arch_specific);
  EXPECT_TRUE(CudaTarget::parse("sm_100a").arch_specific);
  for (const char* bad : {"gfx90a", "sm_", "sm_8", "sm_9x", "cuda:sm_60", "sm_80b"})
    EXPECT_THROW(CudaTarget::parse(bad), TesseraError) << bad;
}

TEST(Nvrtc, AvailabilityHasAReason) {
  std::string why;
  bool ok = nvrtc_available(&why);
  if (!ok) EXPECT_NE(why.find("NVRTC"), std::string::npos) << why;
  else EXPECT_TRUE(why.empty());
}

TEST(Nvrtc, CompilesWithEmbeddedHeadersForBothArchitectures) {
  REQUIRE_NVRTC();
  const char* src =
      "#include \"tessera/core.cuh\"\n"
      "extern \"C\" __global__ void tk(float* x, int n) {\n"
      "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
      "  if (i < n) x[i] = tsr::rbf16(x[i] * 2.0f);\n"
      "}\n";
  for (const char* arch : {"sm_80", "sm_90a"}) {
    NvrtcResult r = nvrtc_compile(src, CudaTarget::parse(arch));
    EXPECT_FALSE(r.cubin.empty()) << arch;
    // An ELF image, and PTX for --emit ptx.
    ASSERT_GE(r.cubin.size(), 4u);
    EXPECT_EQ(std::string(r.cubin.data() + 1, 3), "ELF") << arch;
    EXPECT_NE(r.ptx.find(".entry tk("), std::string::npos) << arch;
    EXPECT_NE(r.ptx.find(std::string(".target ") + arch), std::string::npos) << arch;
    EXPECT_GT(r.seconds, 0) << arch;
    EXPECT_EQ(ptx_param_bytes(r.ptx, "tk"), (std::vector<int>{8, 4}));
  }
}

TEST(Nvrtc, BadSourceIsAnErrorWithTheLog) {
  REQUIRE_NVRTC();
  try {
    nvrtc_compile("extern \"C\" __global__ void k(float* x) {\n  x[0] = undefined_name;\n}\n",
                  CudaTarget::parse("sm_80"));
    FAIL() << "no error";
  } catch (const TesseraError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("kernel.cu(2)"), std::string::npos) << m;
    EXPECT_NE(m.find("undefined_name"), std::string::npos) << m;
    EXPECT_NE(m.find("sm_80"), std::string::npos) << m;
  }
}

// The failing generated line maps back to the IR op and its location in the user's file.
TEST(Nvrtc, ErrorIsLocatedAtTheIrOp) {
  REQUIRE_NVRTC();
  auto m = parse_module(
      "kernel @k(%x: view<f32, [N]>) {\n"
      "  grid {\n"
      "    %n = dim %x {axis = 0} : i32\n"
      "    yield %n\n"
      "  }\n"
      "  %pid = program_id {axis = 0} : i32\n"
      "  %t = load_tile %x, %pid : tile<f32, [128]>\n"
      "  %e = exp %t : tile<f32, [128]>\n"
      "  store_tile %x, %e, %pid\n"
      "}\n",
      "user.tile");
  Kernel& k = *m->kernels.at(0);
  const Op* exp_op = nullptr;
  for (auto& op : k.body->ops)
    if (op->kind == OpKind::Exp) exp_op = op.get();
  ASSERT_NE(exp_op, nullptr);
  std::string src = "extern \"C\" __global__ void k(float* x) {\n  float a = x[0];\n  x[0] = expf(a, a);\n}\n";
  std::vector<const Op*> line_ops = {nullptr, nullptr, exp_op, nullptr};
  try {
    nvrtc_compile(src, CudaTarget::parse("sm_90a"), "kernel.cu", line_ops);
    FAIL() << "no error";
  } catch (const TesseraError& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.loc().str(), "user.tile:8:3") << msg;
    EXPECT_EQ(msg.rfind("user.tile:8:3: error:", 0), 0u) << msg;
    EXPECT_NE(msg.find("generated from: %e = exp %t : tile<f32, [128]> at user.tile:8:3"), std::string::npos) << msg;
  }
  // A line without an op: the error is still reported, just without a location.
  try {
    nvrtc_compile(src, CudaTarget::parse("sm_90a"), "kernel.cu", {nullptr, nullptr, nullptr});
    FAIL() << "no error";
  } catch (const TesseraError& e) {
    EXPECT_FALSE(e.loc().known());
    EXPECT_EQ(std::string(e.what()).find("generated from"), std::string::npos);
  }
}

TEST(Nvrtc, UnsupportedArchitectureIsAnError) {
  REQUIRE_NVRTC();
  EXPECT_THROW(nvrtc_compile("extern \"C\" __global__ void k() {}\n", CudaTarget{71, false}), TesseraError);
}

TEST(CudaDevice, NoDeviceHasAReason) {
  std::string why;
  if (cuda_device_available(&why)) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(why.empty());
  EXPECT_TRUE(why.find("no CUDA device") != std::string::npos || why.find("CUDA driver") != std::string::npos) << why;
}

}  // namespace
}  // namespace tessera::cudatest
