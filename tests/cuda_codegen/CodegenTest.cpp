// The CUDA emitter without a GPU: generated code of every library kernel (f32, bf16, f16) and
// of the op corpus compiles with NVRTC for sm_80 and sm_90a, plus checks on the emitted text
// (vector accesses, tensor cores, layout conversions), its errors and the host grid.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cuda/CudaBackend.h"
#include "CodegenTestUtil.h"
#include "cuda/CudaEmitter.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

using codegentest::planning_target;

std::unique_ptr<Kernel> lib(const std::string& name, ScalarKind dt, const ConstexprConfig& cfg = {}) {
  const LibraryKernel* lk = find_library_kernel(name);
  EXPECT_NE(lk, nullptr) << name;
  return bind_constexprs(*lk->build(dt), cfg);
}

using codegentest::expect_compiles;

std::vector<std::string> corpus() {
  std::vector<std::string> out;
  for (auto& e : std::filesystem::directory_iterator(std::string(TESSERA_SOURCE_DIR) + "/tests/text/data"))
    if (e.path().extension() == ".tile") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CudaCodegen, LibraryCompiles) {
  for (const auto& lk : library())
    for (ScalarKind dt : {ScalarKind::F32, ScalarKind::BF16, ScalarKind::F16}) {
      if (std::find(lk.dtypes.begin(), lk.dtypes.end(), dt) == lk.dtypes.end()) continue;
      expect_compiles(*lib(lk.name, dt), lk.name + "/" + std::string(scalar_name(dt)));
    }
}

// The row kernels at the bench's tiles (one to 32 warps, the one-barrier exchanges with and
// without the lane fold) and with a warp count that is not a power of two.
TEST(CudaCodegen, RowKernelsCompileAtLargeTiles) {
  for (const char* name : {"softmax", "layernorm", "rmsnorm"})
    for (int64_t bn : {4096, 8192, 32768}) expect_compiles(*lib(name, ScalarKind::BF16, {{"BLOCK_N", bn}}), name);
  expect_compiles(*lib("layernorm", ScalarKind::F16, {{"BLOCK_N", 4096}}), "layernorm f16");
  auto k = lib("layernorm", ScalarKind::BF16, {{"BLOCK_N", 4096}});
  k->constexprs.push_back({"num_warps", 6, {6}, k->loc});
  expect_compiles(*k, "layernorm num_warps=6");
  for (const char* name : {"softmax", "layernorm", "rmsnorm"}) {
    auto p = lib(name, ScalarKind::BF16, {{"BLOCK_N", 2048}});
    p->constexprs.push_back({"prefetch_loads", 1, {0, 1}, p->loc});
    expect_compiles(*p, std::string(name) + " prefetch_loads=1");
    auto q = lib(name, ScalarKind::BF16, {{"BLOCK_N", 4096}});
    q->constexprs.push_back({"stream_stores", 1, {0, 1}, q->loc});
    // (16-bit values rounded two at a time: four words per vector)
    EXPECT_NE(emit_cuda(*q, planning_target("sm_90a")).find("tsr::store_vec_cs<uint32_t, 4>("), std::string::npos);
    expect_compiles(*q, std::string(name) + " stream_stores=1");
  }
}

TEST(CudaCodegen, CorpusCompilesOrSaysWhy) {
  for (const std::string& f : corpus()) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    auto m = parse_module(ss.str(), f);
    for (auto& k : m->kernels) {
      auto b = bind_constexprs(*k, {});
      bool has_raw_without_cuda = false;
      walk(*b, [&](Op& op) { has_raw_without_cuda |= op.kind == OpKind::Raw && !op.has_attr("cuda"); });
      if (has_raw_without_cuda) {
        EXPECT_THROW(emit_cuda(*b, planning_target("sm_90a")), TesseraError) << f;
        continue;
      }
      expect_compiles(*b, f + " @" + k->name);
    }
  }
}

}  // namespace
}  // namespace tessera
