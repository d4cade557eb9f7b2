// TESSERA_CUDA_OVERRIDE_DIR (CudaRuntime.cpp): a hand-edited <symbol>.cu there is compiled in
// place of the emitted source; without one the emitted source runs. The probe's edit returns
// at the kernel's first line, so its output keeps the sentinel it was filled with.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "GpuTestUtil.h"

namespace tessera::gputest {
namespace {

// A kernel of its own (no other test compiles it, so no in-process cache holds it).
const char* kProbe = R"(kernel @override_probe(%x: view<f32, [N]>, %y: view<f32, [N]>) {
  constexpr BLOCK = 256
  grid {
    %n = dim %x {axis = 0} : i32
    %bs = param {name = "BLOCK"} : i32
    %g = cdiv %n, %bs : i32
    yield %g
  }
  %i = program_id {axis = 0} : i32
  %t = load_tile %x, %i : tile<f32, [BLOCK]>
  %two = const {value = 2.0} : f32
  %tb = splat %two : tile<f32, [BLOCK]>
  %r = mul %t, %tb : tile<f32, [BLOCK]>
  store_tile %y, %r, %i
}
)";

TEST(OverrideDirGpu, CompilesTheGivenSourceInPlaceOfTheEmittedOne) {
  REQUIRE_GPU();
  auto m = parse_module(kProbe, "override_probe.tile");
  auto k = bind_constexprs(*m->kernels.at(0), {});
  const int64_t n = 1000;
  auto run = [&](const char* dir) {
    if (dir) setenv("TESSERA_CUDA_OVERRIDE_DIR", dir, 1);
    std::vector<Tensor> t = make_random_tensors(*k, {{"N", n}}, 5);
    for (int64_t i = 0; i < n; ++i) t[1].set(i, 7.0);
    auto a = args_for(*k, t);
    compile_cuda(*k, test_options())->run_host(a);
    unsetenv("TESSERA_CUDA_OVERRIDE_DIR");
    return t;
  };
  // The override: the emitted source with a return as the body's first statement.
  const CudaEmission em = emit_cuda_with_info(*k, CudaTarget::parse("sm_90a"));
  std::string src = em.source;
  const size_t body = src.find(") {\n", src.find("__global__"));
  ASSERT_NE(body, std::string::npos);
  src.insert(body + 4, "  if (threadIdx.x < 100000) return;\n");
  const std::filesystem::path dir = std::filesystem::path(test_cache_dir()) / "override_probe";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / (em.info.symbol + ".cu")) << src;
  std::vector<Tensor> kept = run(dir.c_str());
  for (int64_t i = 0; i < n; i += 97) EXPECT_EQ(kept[1].get(i), 7.0) << i;
  // Without it (another folder, no such file there) the emitted source runs: y = 2x.
  std::vector<Tensor> ran = run(nullptr);
  for (int64_t i = 0; i < n; i += 97) EXPECT_EQ(ran[1].get(i), 2.0 * ran[0].get(i)) << i;
}

}  // namespace
}  // namespace tessera::gputest
