// The cuda backend's generic lowering of the Struct layer, without a GPU: buffers and pipe rings
// in shared memory after the scratch, cooperative copies between barriers, traps for the faults
// the interpreter reports, warp_role regions in program order; NVRTC accepts it for sm_80 and
// sm_90a at every stage count. The knob struct_cp_async (async_copy as cp.async). (tests/gpu
// runs the library's matmul_struct, the corpus and the knob's kernels.)
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

std::string read_text(const std::string& rel) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/" + rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<Kernel> corpus_kernel(const std::string& name, const ConstexprConfig& cfg = {}) {
  auto m = parse_module(read_text("tests/text/data/struct.tile"), "struct.tile");
  return bind_constexprs(*m->find(name), cfg);
}

// struct.tile's double_buffered_rows with `from` replaced by `to` in its text.
std::unique_ptr<Kernel> rows_kernel_with(const std::string& from, const std::string& to) {
  std::string text = read_text("tests/text/data/struct.tile");
  size_t at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("no '" + from + "' in struct.tile");
  text.replace(at, from.size(), to);
  return bind_constexprs(*parse_module(text, "struct.tile")->find("double_buffered_rows"), {});
}

// tests/cuda_codegen/data/struct_cp_async.tile: 2-D bf16 tiles, knob struct_cp_async = 1.
std::unique_ptr<Kernel> tiles_kernel(const ConstexprConfig& cfg = {}) {
  auto m = parse_module(read_text("tests/cuda_codegen/data/struct_cp_async.tile"), "struct_cp_async.tile");
  return bind_constexprs(*m->find("double_buffered_tiles"), cfg);
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

// Knob struct_cp_async = 1: each async_copy is a barrier, then cp.async chunks and a commit
// group with no barrier after; async_wait is cp.async.wait_group 0 and then a barrier.
TEST(CudaStruct, CpAsyncKnobCopiesAsynchronously) {
  auto k = corpus_kernel("double_buffered_rows");
  k->set_constexpr("struct_cp_async", 1);
  CudaEmission em = emit_cuda_with_info(*k, CudaTarget::parse("sm_80"));
  const std::string& s = em.source;
  EXPECT_EQ(em.stats.at("struct-cp-async-copies"), 2);
  EXPECT_EQ(count(s, "tsr::struct_copy_chunk(dst"), 2);
  EXPECT_EQ(count(s, ": float(0x0p+0f);"), 0);  // no plain copy left
  const std::string commit = "tsr::cp_async_commit();";
  ASSERT_EQ(count(s, commit), 2);
  for (size_t p = s.find(commit); p != std::string::npos; p = s.find(commit, p + 1)) {
    // Up to the next op's comment line: no barrier after the copy.
    size_t eol = s.find('\n', p);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(s.begin() + static_cast<std::ptrdiff_t>(eol), s.end(), m, std::regex("\n *// ")));
    std::string after = s.substr(eol, static_cast<size_t>(m.position(0)));
    EXPECT_EQ(after.find("__syncthreads"), std::string::npos) << after;
  }
  // The copy's barrier before it (write-after-read) ...
  EXPECT_EQ(count(s, "__syncthreads();\n    {  // cp.async, 8 chunks of 16 bytes a row"), 1);
  // ... and the one async_wait: wait for this thread's copies, then a barrier.
  std::regex wait("tsr::cp_async_wait<0>\\(\\);[^\n]*\n *__syncthreads\\(\\);");
  EXPECT_EQ(std::distance(std::sregex_iterator(s.begin(), s.end(), wait), std::sregex_iterator()), 1);
}

// Absent or 0, the knob leaves the code as it was: the same source but for the constexpr line.
TEST(CudaStruct, CpAsyncKnobOffIsThePlainCopy) {
  auto plain = corpus_kernel("double_buffered_rows"), off = corpus_kernel("double_buffered_rows");
  off->set_constexpr("struct_cp_async", 0);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    std::string a = emit_cuda_with_info(*plain, CudaTarget::parse(arch)).source;
    std::string b = emit_cuda_with_info(*off, CudaTarget::parse(arch)).source;
    const std::string decl = "  [[maybe_unused]] constexpr int64_t struct_cp_async = 0LL;\n";
    ASSERT_EQ(count(b, decl), 1);
    b.erase(b.find(decl), decl.size());
    EXPECT_EQ(a, b) << arch;
    EXPECT_EQ(a.find("tsr::cp_async"), std::string::npos);
  }
  CudaEmission tiles = emit_cuda_with_info(*tiles_kernel({{"struct_cp_async", 0}}), CudaTarget::parse("sm_80"));
  EXPECT_EQ(tiles.source.find("tsr::cp_async"), std::string::npos);
  EXPECT_EQ(tiles.stats.count("struct-cp-async-copies"), 0u);
}

// Zero-filling chunks matches only pad +0.0: another pad keeps that op's plain copy.
TEST(CudaStruct, CpAsyncFallsBackForOtherPads) {
  for (const char* pad : {"1.5", "-0.0"}) {
    SCOPED_TRACE(pad);
    auto k = rows_kernel_with("{pad = 0.0}", std::string("{pad = ") + pad + "}");
    k->set_constexpr("struct_cp_async", 1);
    CudaEmission em = emit_cuda_with_info(*k, CudaTarget::parse("sm_80"));
    EXPECT_EQ(em.stats.at("struct-cp-async-copies"), 1);  // the copy in the loop (no pad: 0)
    EXPECT_EQ(count(em.source, "tsr::struct_copy_chunk(dst"), 1);
    EXPECT_EQ(count(em.source, "+= tsr_nthreads) {"), 2);  // one plain copy, one cp.async loop
  }
}

TEST(CudaStruct, CpAsyncKnobValuesOtherThanZeroOrOneAreErrors) {
  auto k = corpus_kernel("double_buffered_rows");
  k->set_constexpr("struct_cp_async", 2);
  try {
    emit_cuda_with_info(*k, CudaTarget::parse("sm_80"));
    FAIL() << "no error";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("struct_cp_async is 2"), std::string::npos) << e.what();
  }
}

// 2-D tiles are copied row by row (8 bf16 chunks a row); NVRTC accepts both kernels.
TEST(CudaStruct, CpAsyncKernelsCompile) {
  for (int64_t bm : {8, 16}) {
    auto k = tiles_kernel({{"BM", bm}});
    CudaEmission em = emit_cuda_with_info(*k, CudaTarget::parse("sm_80"));
    EXPECT_EQ(em.stats.at("struct-cp-async-copies"), 2);
    EXPECT_EQ(count(em.source, "// the chunk's row of the slot"), 2);
    expect_nvrtc_accepts(*k, "double_buffered_tiles BM=" + std::to_string(bm));
  }
  auto rows = corpus_kernel("double_buffered_rows", {{"BLOCK", 64}});
  rows->set_constexpr("struct_cp_async", 1);
  expect_nvrtc_accepts(*rows, "double_buffered_rows struct_cp_async=1");
}

}  // namespace
}  // namespace tessera
