// TESSERA_CUDA_OVERRIDE_DIR (CudaRuntime.cpp): a hand-edited <symbol>-<key>.cu there (the name
// TESSERA_CUDA_DUMP_DIR gives the emitted source) is compiled in place of the emitted source;
// without the variable the emitted source runs. The probe's edit returns at the kernel's first
// line, so its output keeps the sentinel it was filled with.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

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
  auto run = [&](const char* env, const std::string& dir) {
    if (env) setenv(env, dir.c_str(), 1);
    std::vector<Tensor> t = make_random_tensors(*k, {{"N", n}}, 5);
    for (int64_t i = 0; i < n; ++i) t[1].set(i, 7.0);
    auto a = args_for(*k, t);
    compile_cuda(*k, test_options())->run_host(a);
    if (env) unsetenv(env);
    return t;
  };
  namespace fs = std::filesystem;
  const fs::path dump = fs::path(test_cache_dir()) / "override_probe_dump", over = fs::path(test_cache_dir()) / "override_probe";
  fs::remove_all(dump);
  fs::remove_all(over);
  fs::create_directories(over);
  // The emitted source runs (y = 2x), and TESSERA_CUDA_DUMP_DIR names it <symbol>-<key>.cu.
  std::vector<Tensor> ran = run("TESSERA_CUDA_DUMP_DIR", dump.string());
  for (int64_t i = 0; i < n; i += 97) EXPECT_EQ(ran[1].get(i), 2.0 * ran[0].get(i)) << i;
  std::vector<fs::path> dumped;
  for (const auto& e : fs::directory_iterator(dump)) dumped.push_back(e.path());
  ASSERT_EQ(dumped.size(), 1u);
  // The override: that file under the same name with a return as the body's first statement.
  std::ifstream in(dumped[0]);
  std::string src((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t body = src.find(") {\n", src.find("__global__"));
  ASSERT_NE(body, std::string::npos);
  src.insert(body + 4, "  if (threadIdx.x < 100000) return;\n");
  std::ofstream(over / dumped[0].filename()) << src;
  std::vector<Tensor> kept = run("TESSERA_CUDA_OVERRIDE_DIR", over.string());
  for (int64_t i = 0; i < n; i += 97) EXPECT_EQ(kept[1].get(i), 7.0) << i;
  // The in-process cache does not hand the override's compilation to a call made without it.
  std::vector<Tensor> again = run(nullptr, "");
  for (int64_t i = 0; i < n; i += 97) EXPECT_EQ(again[1].get(i), 2.0 * again[0].get(i)) << i;
}

}  // namespace
}  // namespace tessera::gputest
