// The wgmma RS wrappers (A from registers, src/cuda/device/wgmma.cuh) on an sm_90a device, raw:
// one warpgroup computes D = C + A B (A 64 x K from registers through wgmma_load_a, B K x N in
// shared memory through a descriptor; tests/common/WgmmaRsKernels.h) from random non-zero inputs,
// against a double-precision host reference, and bit for bit against the SS form (A through a
// descriptor) on the same inputs in the same kernel.
#include <cstring>
#include <random>

#include "GpuTestUtil.h"
#include "cuda/Driver.h"
#include "support/Float.h"
#include "../common/WgmmaRsKernels.h"

namespace tessera::gputest {
namespace {

using testutil::WgmmaRsCase;

#define REQUIRE_SM90()                                                                          \
  do {                                                                                          \
    REQUIRE_GPU();                                                                              \
    if (cuda::device().sm != 90) GTEST_SKIP() << "not an sm_90 device: sm_" << cuda::device().sm; \
  } while (0)

ScalarKind kind_of(const std::string& type) {
  if (type == "bf16") return ScalarKind::BF16;
  if (type == "f16") return ScalarKind::F16;
  return type == "e4m3" ? ScalarKind::F8E4M3 : ScalarKind::F8E5M2;
}

// The cases' kernels compiled for sm_90a and loaded into the device.
class Module {
 public:
  explicit Module(const std::vector<WgmmaRsCase>& cases) {
    NvrtcResult r = nvrtc_compile(testutil::wgmma_rs_test_source(cases), CudaTarget::parse("sm_90a"), "wgmma_rs.cu");
    cuda::device();
    cuda::check(cuda::driver()->cuModuleLoadData(&mod_, r.cubin.data()), "cuModuleLoadData");
  }
  ~Module() {
    if (mod_) cuda::driver()->cuModuleUnload(mod_);
  }
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  cuda::CUfunction function(const std::string& name) const {
    cuda::CUfunction f = nullptr;
    cuda::check(cuda::driver()->cuModuleGetFunction(&f, mod_, name.c_str()), "cuModuleGetFunction");
    return f;
  }

 private:
  cuda::CUmodule mod_ = nullptr;
};

// Runs case `c` once on random inputs: the RS result against the reference, and equal to SS's.
void expect_rs_matches(const Module& m, const WgmmaRsCase& c, uint64_t seed) {
  SCOPED_TRACE(testutil::wgmma_rs_kernel_name(c));
  const ScalarKind kind = kind_of(c.type);
  const int es = testutil::wgmma_rs_elem_bytes(c.type), K = testutil::wgmma_rs_k(c.type), N = c.n;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mag(0.25, 2.0);
  // A non-zero value of the operand type: magnitude in [0.25, 2), either sign, rounded.
  auto operand = [&](double& value) {
    const uint64_t bits = float_to_bits(kind, (rng() & 1 ? -1 : 1) * mag(rng));
    value = float_from_bits(kind, bits);
    EXPECT_NE(value, 0.0);
    return bits;
  };
  // A row-major [64 x K] and B row-major [K x N] as the device reads them (little-endian
  // elements of es bytes), and their values.
  std::vector<unsigned char> a_bytes(size_t(64) * K * es), b_bytes(size_t(K) * N * es);
  std::vector<double> a(size_t(64) * K), b(size_t(K) * N);
  for (size_t i = 0; i < a.size(); ++i) {
    const uint64_t bits = operand(a[i]);
    std::memcpy(&a_bytes[i * es], &bits, size_t(es));
  }
  for (size_t i = 0; i < b.size(); ++i) {
    const uint64_t bits = operand(b[i]);
    std::memcpy(&b_bytes[i * es], &bits, size_t(es));
  }
  std::vector<float> cm(size_t(64) * N);
  for (float& x : cm) x = float((rng() & 1 ? -1 : 1) * 2.0 * mag(rng));

  cuda::DeviceBuffer da(a_bytes.size()), db(b_bytes.size()), dc(cm.size() * 4), drs(cm.size() * 4), dss(cm.size() * 4);
  da.upload(a_bytes.data(), a_bytes.size());
  db.upload(b_bytes.data(), b_bytes.size());
  dc.upload(cm.data(), cm.size() * 4);
  cuda::CUdeviceptr pa = da.get(), pb = db.get(), pc = dc.get(), prs = drs.get(), pss = dss.get();
  void* params[] = {&pa, &pb, &pc, &prs, &pss};
  const cuda::Driver* d = cuda::driver();
  cuda::check(d->cuLaunchKernel(m.function(testutil::wgmma_rs_kernel_name(c)), 1, 1, 1, 128, 1, 1, 0, nullptr, params,
                                nullptr),
              "cuLaunchKernel");
  cuda::check(d->cuCtxSynchronize(), "cuCtxSynchronize");
  std::vector<float> rs(cm.size()), ss(cm.size());
  drs.download(rs.data(), rs.size() * 4);
  dss.download(ss.data(), ss.size() * 4);

  // The products are exact in f32; the tensor cores add them with about 14 significant bits for
  // fp8 (docs/cuda-backend.md, "fp8 accuracy") and near f32 for 16-bit types: an error bound
  // relative to the sum of the terms' magnitudes (about 20-35 here: at most 0.07 for fp8, 0.0035
  // for 16-bit), where a misplaced operand element moves a result by the difference of two
  // products, about 1 on average.
  const double rel = es == 1 ? 2e-3 : 1e-4;
  int bad = 0;
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < N; ++j) {
      double want = cm[size_t(i) * N + j], scale = std::fabs(want);
      for (int k = 0; k < K; ++k) {
        const double p = a[size_t(i) * K + k] * b[size_t(k) * N + j];
        want += p;
        scale += std::fabs(p);
      }
      const float got = rs[size_t(i) * N + j];
      if (std::fabs(got - want) > rel * scale && bad++ < 5)
        ADD_FAILURE() << "D[" << i << "][" << j << "]: RS " << got << ", reference " << want;
    }
  EXPECT_EQ(bad, 0) << "elements off the reference";
  EXPECT_EQ(std::memcmp(rs.data(), ss.data(), rs.size() * 4), 0) << "RS and SS results differ";
}

TEST(WgmmaRsGpu, RegisterAMatchesTheReferenceAndSharedMemoryA) {
  REQUIRE_SM90();
  std::vector<WgmmaRsCase> cases;
  for (const char* type : {"bf16", "f16"})
    for (int n : {64, 256})
      for (int tb : {0, 1}) cases.push_back({type, n, tb});
  for (const char* type : {"e4m3", "e5m2"})
    for (int n : {64, 256}) cases.push_back({type, n, 0});
  Module m(cases);
  uint64_t seed = 1;
  for (const WgmmaRsCase& c : cases) expect_rs_matches(m, c, seed++);
}

}  // namespace
}  // namespace tessera::gputest
