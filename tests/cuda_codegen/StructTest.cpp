// The cuda backend's generic lowering of the Struct layer, without a GPU: buffers and pipe rings
// in shared memory after the scratch, cooperative copies between barriers, traps for the faults
// the interpreter reports, warp_role regions in program order; NVRTC accepts it for sm_80 and
// sm_90a at every stage count. (tests/gpu runs the library's matmul_struct and the corpus.)
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

std::unique_ptr<Kernel> corpus_kernel(const std::string& name, const ConstexprConfig& cfg = {}) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/tests/text/data/struct.tile");
  std::stringstream ss;
  ss << in.rdbuf();
  auto m = parse_module(ss.str(), "struct.tile");
  return bind_constexprs(*m->find(name), cfg);
}

std::unique_ptr<Kernel> matmul_struct(ScalarKind dt, const ConstexprConfig& cfg = {}) {
  return bind_constexprs(*find_library_kernel("matmul_struct")->build(dt), cfg);
}

void expect_nvrtc_accepts(const Kernel& k, const std::string& what) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    CudaTarget t = CudaTarget::parse(arch);
    CudaEmission em = emit_cuda_with_info(k, t);
    try {
      EXPECT_FALSE(nvrtc_compile(em.source, t, k.name + ".cu").cubin.empty()) << what << " " << arch;
    } catch (const TesseraError& e) {
      ADD_FAILURE() << what << " " << arch << ":\n" << e.what() << "\n--- source ---\n" << em.source;
    }
  }
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// (Every dtype at the default stage count is compiled with the rest of the library.)
TEST(CudaStruct, MatmulStructCompilesAtEveryStageCount) {
  for (int64_t stages : {1, 3, 4}) {
    SCOPED_TRACE("STAGES=" + std::to_string(stages));
    expect_nvrtc_accepts(*matmul_struct(ScalarKind::BF16, {{"STAGES", stages}}), "matmul_struct");
  }
}

TEST(CudaStruct, CorpusKernelsCompile) {
  expect_nvrtc_accepts(*corpus_kernel("pipe_matmul", {{"STAGES", 3}}), "pipe_matmul");
  expect_nvrtc_accepts(*corpus_kernel("double_buffered_rows", {{"BLOCK", 64}}), "double_buffered_rows");
}

// Two pipes of STAGES slots of [64, 32] and [32, 64] f32 after the scratch; each push is a
// copy between barriers; each push and pop checks the ring; the roles run in sequence.
TEST(CudaStruct, PipesAreRingsInSharedMemoryAfterTheScratch) {
  CudaEmission two = emit_cuda_with_info(*matmul_struct(ScalarKind::F32), CudaTarget::parse("sm_80"));
  CudaEmission three = emit_cuda_with_info(*matmul_struct(ScalarKind::F32, {{"STAGES", 3}}), CudaTarget::parse("sm_80"));
  const int64_t slots_bytes = (64 * 32 + 32 * 64) * 4;
  EXPECT_EQ(two.stats.at("struct-smem-bytes"), 2 * slots_bytes);
  EXPECT_EQ(three.stats.at("struct-smem-bytes"), 3 * slots_bytes);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(two.source, m, std::regex("constexpr int64_t tsr_struct_base = ([0-9]+)LL;")));
  int64_t base = std::stoll(m[1]);
  EXPECT_EQ(base % 128, 0);
  EXPECT_EQ(two.info.dynamic_smem_bytes, base + 2 * slots_bytes);
  EXPECT_EQ(two.stats.at("warp-roles-in-sequence"), 2);
  const std::string& s = two.source;
  EXPECT_EQ(count(s, "__trap();  // pipe_push onto a full pipe"), 2);
  EXPECT_EQ(count(s, "__trap();  // pipe_pop from an empty pipe"), 2);
  EXPECT_NE(s.find("a_tiles_head = 0, "), std::string::npos);
  EXPECT_NE(s.find("% 2LL) * 2048LL;"), std::string::npos);  // the free slot of a 2-stage ring
  EXPECT_NE(s.find("// warp_role producer: run by every thread, in program order"), std::string::npos);
  // Two copies, each between two barriers.
  EXPECT_EQ(count(s, "+= tsr_nthreads) {"), 2);
}

TEST(CudaStruct, BuffersCopyBetweenBarriersAndCheckSlots) {
  CudaEmission em = emit_cuda_with_info(*corpus_kernel("double_buffered_rows"), CudaTarget::parse("sm_90a"));
  const std::string& s = em.source;
  EXPECT_EQ(em.stats.at("struct-smem-bytes"), 2 * 32 * 4);
  EXPECT_EQ(count(s, "__trap();  // slot index out of range"), 5);  // 2 copies, 2 reads, 1 write
  EXPECT_NE(s.find("reinterpret_cast<float*>(tsr_smem + tsr_struct_base + 0LL)"), std::string::npos);
  // The pad of the first copy (0.0) and the plain copy inside the loop.
  EXPECT_EQ(count(s, ": float(0x0p+0f);"), 2);
}

TEST(CudaStruct, KernelsWithoutStructOpsAreUnchanged) {
  auto k = bind_constexprs(*find_library_kernel("matmul")->build(ScalarKind::BF16), {});
  CudaEmission em = emit_cuda_with_info(*k, CudaTarget::parse("sm_80"));
  EXPECT_EQ(em.source.find("tsr_struct_base"), std::string::npos);
  EXPECT_EQ(em.stats.count("struct-smem-bytes"), 0u);
}

TEST(CudaStruct, RingsThatDoNotFitSharedMemoryAreALocatedError) {
  // 4 stages of two 128 x 64 f32 slots: 256 KiB of rings.
  auto k = matmul_struct(ScalarKind::F32, {{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"BLOCK_K", 64}, {"STAGES", 4}});
  try {
    emit_cuda_with_info(*k, CudaTarget::parse("sm_90a"));
    FAIL() << "no error";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("bytes of shared memory; the limit on sm_90a is"), std::string::npos)
        << e.what();
    EXPECT_TRUE(e.loc().known());
  }
}

}  // namespace
}  // namespace tessera
