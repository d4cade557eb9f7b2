// Every library kernel on the GPU against the interpreter, in f32, bf16 and f16, at sizes that
// are tile multiples and at ragged sizes, bound with its own defaults and with the device
// target's preferred config (LibraryKernel::target_configs) where it has one.
#include "GpuTestUtil.h"
#include "cuda/Driver.h"

namespace tessera::gputest {
namespace {

struct Case {
  std::string kernel;
  ScalarKind dtype;
};

// ctest shows parameters through this (otherwise as raw bytes).
void PrintTo(const Case& c, std::ostream* os) { *os << c.kernel << "/" << scalar_name(c.dtype); }

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const auto& lk : library())
    for (ScalarKind dt : {ScalarKind::F32, ScalarKind::BF16, ScalarKind::F16})
      if (std::find(lk.dtypes.begin(), lk.dtypes.end(), dt) != lk.dtypes.end()) out.push_back({lk.name, dt});
  return out;
}

class LibraryGpu : public ::testing::TestWithParam<Case> {};

// The LibraryKernel::target_configs key of what compile_cuda builds for on this device
// (its own architecture, sm_90 as sm_90a): asked of the runtime itself, not guessed.
std::string device_target_key() {
  auto k = bind_constexprs(*find_library_kernel("vector_add")->build(ScalarKind::F32), {});
  return "cuda:" + compile_cuda(*k, test_options())->target.str();
}

std::string config_str(const Kernel& k) {
  std::string out;
  for (const auto& c : k.constexprs) out += (out.empty() ? "" : ",") + c.name + "=" + std::to_string(c.value);
  return out;
}

// The kernel's own defaults, and where the device's target has preferred values
// (LibraryKernel::target_configs: matmul bf16/f16 on sm_90a), that binding too: the CLI and
// the bench run the second, and the first must stay right for every other target.
std::vector<std::unique_ptr<Kernel>> default_bindings(const LibraryKernel& lk, ScalarKind dt) {
  auto unbound = lk.build(dt);
  std::vector<std::unique_ptr<Kernel>> out;
  out.push_back(bind_constexprs(*unbound, {}));
  ConstexprConfig target = library_config(lk, dt, device_target_key());
  if (!target.empty()) out.push_back(bind_constexprs(*unbound, target));
  return out;
}

TEST_P(LibraryGpu, MatchesInterpreter) {
  REQUIRE_GPU();
  const LibraryKernel& lk = *find_library_kernel(GetParam().kernel);
  for (const auto& k : default_bindings(lk, GetParam().dtype)) {
    SCOPED_TRACE(config_str(*k));
    bool one_dim = lk.default_sizes.size() == 1;
    // Tile multiples (every block constexpr of the library divides 256), then ragged sizes that
    // leave partial tiles in every dim, small and spanning several tiles, then the smallest.
    std::vector<Sizes> all = {one_dim ? sizes_for(*k, 8192, 0) : sizes_for(*k, 256, 0),
                              one_dim ? sizes_for(*k, 1 << 20, 0) : sizes_for(*k, 512, 0),
                              one_dim ? sizes_for(*k, 1001, 0) : sizes_for(*k, 67, 30),
                              one_dim ? sizes_for(*k, 70001, 0) : sizes_for(*k, 193, 37),
                              one_dim ? sizes_for(*k, 1, 0) : sizes_for(*k, 1, 1)};
    // A view dim named after a constexpr is that constexpr's value (topk's K), and sizes the
    // kernel states it cannot take (LibraryKernel::size_error: topk's K > N) are left out.
    for (Sizes& s : all)
      for (auto& [name, v] : s)
        if (const ConstexprDecl* c = k->find_constexpr(name)) v = c->value;
    std::erase_if(all, [&](const Sizes& s) { return lk.size_error && !lk.size_error(s).empty(); });
    ASSERT_GE(all.size(), 3u);
    uint64_t seed = 11;
    // fp8 wgmma adds into its f32 accumulators with the tensor cores' reduced internal precision
    // (docs/cuda-backend.md): an f16 result is held to the bf16 bound there. A layout or index
    // bug is off by whole products and still fails.
    Tolerance floor = lk.name == "matmul_fp8" ? tolerance_for(ScalarKind::BF16) : Tolerance{};
    for (const Sizes& s : all) {
      SCOPED_TRACE(sizes_str(s));
      EXPECT_GT(expect_gpu_matches_interp(*k, s, seed++, floor), 0);
    }
  }
}

// Small and quick, for tools/gpu-check's compute-sanitizer runs (memcheck, racecheck,
// synccheck) as well as the suite: the device target's default bf16 matmul (the TMA + wgmma
// ring on sm_90a) at ragged sizes against the interpreter, then more programs than SMs (the
// persistent loop runs several per CTA) against the kernel's own default binding on the GPU.
TEST(LibraryGpu, TargetDefaultMatmulSmall) {
  REQUIRE_GPU();
  const LibraryKernel& lk = *find_library_kernel("matmul");
  auto ks = default_bindings(lk, ScalarKind::BF16);
  if (ks.size() < 2) GTEST_SKIP() << "no preferred matmul config for " << device_target_key();
  const Kernel &own = *ks[0], &target = *ks[1];
  SCOPED_TRACE(config_str(target));
  // K = 1400: long enough that the runtime splits these few programs over K (the fixup under the
  // sanitizers too).
  EXPECT_GT(expect_gpu_matches_interp(target, {{"M", 200}, {"N", 264}, {"K", 1400}}, 21), 0);
  EXPECT_GT(expect_gpu_matches_interp(target, {{"M", 1}, {"N", 8}, {"K", 8}}, 22), 0);
  int64_t bm = target.find_constexpr("BLOCK_M")->value, bn = target.find_constexpr("BLOCK_N")->value;
  int64_t tiles = cuda::device().num_sms + 7;
  Sizes many = {{"M", bm * 8 - 40}, {"N", bn * ((tiles + 7) / 8) + 8}, {"K", 200}};
  SCOPED_TRACE(sizes_str(many));
  std::vector<Tensor> want = make_random_tensors(target, many, 23), got = want;
  auto wa = args_for(own, want), ga = args_for(target, got);
  compile_cuda(own, test_options())->run_host(wa);
  auto ck = compile_cuda(target, test_options());
  ck->run_host(ga);
  EXPECT_EQ(ck->launches_without_tma, 0);
  testutil::expect_tensors_match(want, got, "matmul [" + sizes_str(many) + "]", "gpu " + config_str(target));
}

INSTANTIATE_TEST_SUITE_P(Library, LibraryGpu, ::testing::ValuesIn(cases()), [](const auto& info) {
  return info.param.kernel + "_" + std::string(scalar_name(info.param.dtype));
});

// Every candidate of every constexpr of the library (one at a time, the others at their
// defaults) on the GPU: configurations the autotuner will try must all be correct.
// One test per library kernel: each compiles a few dozen kernels with NVRTC (up to a second
// each for the row kernels), too many for one test's time limit, and ctest runs them in parallel.
class LibraryCandidatesGpu : public ::testing::TestWithParam<std::string> {};

std::vector<std::string> library_names() {
  std::vector<std::string> out;
  for (const auto& lk : library()) out.push_back(lk.name);
  return out;
}

TEST_P(LibraryCandidatesGpu, EveryConstexprCandidate) {
  REQUIRE_GPU();
  const LibraryKernel& lk = *find_library_kernel(GetParam());
  auto unbound = lk.build(lk.dtypes.front());
  for (const auto& c : unbound->constexprs)
    for (int64_t v : c.candidates) {
      SCOPED_TRACE(lk.name + " " + c.name + "=" + std::to_string(v));
      auto k = bind_constexprs(*unbound, {{c.name, v}});
      bool one_dim = lk.default_sizes.size() == 1;
      expect_gpu_matches_interp(*k, one_dim ? sizes_for(*k, 5003, 0) : sizes_for(*k, 131, 22), 5);
    }
}

INSTANTIATE_TEST_SUITE_P(Library, LibraryCandidatesGpu, ::testing::ValuesIn(library_names()),
                         [](const auto& info) { return info.param; });

TEST(Gpu, EmptyLaunchAndCacheHit) {
  REQUIRE_GPU();
  auto k = bind_constexprs(*find_library_kernel("vector_add")->build(ScalarKind::F32), {});
  // N = 0: an empty grid runs nothing and is not an error.
  std::vector<Tensor> ts = make_random_tensors(*k, {{"N", 0}}, 1);
  auto a = args_for(*k, ts);
  compile_cuda(*k, test_options())->run_host(a);
  // A memory-cache hit launches the already loaded module.
  auto again = compile_cuda(*k, test_options());
  EXPECT_TRUE(again->from_cache);
  EXPECT_GT(expect_gpu_matches_interp(*k, {{"N", 3333}}, 2), 0);
}

TEST(Gpu, DeviceIsDescribed) {
  REQUIRE_GPU();
  std::string why;
  EXPECT_TRUE(cuda_device_available(&why));
  auto kk = compile_cuda(*bind_constexprs(*find_library_kernel("vector_add")->build(ScalarKind::F32), {}), test_options());
  // The default target is the device's own architecture.
  EXPECT_GE(kk->target.sm, 80);
}

}  // namespace
}  // namespace tessera::gputest

namespace tessera::gputest {
namespace {

// Large shapes (many tiles, long K loops) against the library's double-precision reference:
// the interpreter-sized tests above cannot reach them.
TEST(LibraryGpu, LargeMatmulMatchesReference) {
  REQUIRE_GPU();
  const LibraryKernel& lk = *find_library_kernel("matmul");
  for (Sizes s : {Sizes{{"M", 512}, {"N", 384}, {"K", 640}}, Sizes{{"M", 256}, {"N", 256}, {"K", 4096}}}) {
    SCOPED_TRACE(sizes_str(s));
    auto k = bind_constexprs(*lk.build(ScalarKind::BF16), {});
    std::vector<Tensor> got = make_random_tensors(*k, s, 3), want = got;
    auto ga = args_for(*k, got), wa = args_for(*k, want);
    compile_cuda(*k, test_options())->run_host(ga);
    lk.reference(wa, s);
    const Tensor& c = got.back();
    const Tensor& r = want.back();
    Tolerance tol = tolerance_for(ScalarKind::BF16);
    int bad = 0;
    for (int64_t i = 0; i < c.numel() && bad < 5; ++i) {
      double w = r.get(i), g = c.get(i);
      // K-long sums in f32: allow the accumulation error of sqrt(K) terms on top of bf16 rounding.
      if (std::fabs(w - g) > tol.atol * std::sqrt(double(s.at("K"))) + tol.rtol * std::fabs(w)) {
        ++bad;
        ADD_FAILURE() << "element " << i << " (row " << i / s.at("N") << ", col " << i % s.at("N") << "): gpu " << g
                      << " reference " << w;
      }
    }
  }
}

}  // namespace
}  // namespace tessera::gputest
