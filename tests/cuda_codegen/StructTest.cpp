// The cuda backend's generic lowering of the Struct layer, without a GPU: buffers and pipe rings
// in shared memory after the scratch, cooperative copies between barriers, traps for the faults
// the interpreter reports, warp_role regions in program order; NVRTC accepts it for sm_80 and
// sm_90a at every stage count. The knob struct_cp_async (async_copy as cp.async), and the knob
// struct_tma (async_copy as a TMA box on sm_90a, async_wait as an mbarrier wait): what it emits,
// the rule that decides which copies it takes (the others keep their cp.async or plain copy,
// byte for byte) and NVRTC accepting its kernels. (tests/gpu runs the library's matmul_struct,
// the corpus and the knobs' kernels.)
#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "cuda/CudaBackend.h"
#include "CodegenTestUtil.h"
#include "cuda/CudaEmitter.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

using codegentest::planning_target;

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

// Kernel `name` of a .tile file, its text edited (`from` -> `to`, each must occur), then bound.
std::unique_ptr<Kernel> kernel_from(const std::string& rel, const std::string& name, const ConstexprConfig& cfg = {},
                                    const std::vector<std::pair<std::string, std::string>>& edits = {}) {
  std::string text = read_text(rel);
  for (const auto& [from, to] : edits) {
    size_t at = text.find(from);
    if (at == std::string::npos) throw std::runtime_error("no '" + from + "' in " + rel);
    text.replace(at, from.size(), to);
  }
  return bind_constexprs(*parse_module(text, rel)->find(name), cfg);
}

// struct.tile's double_buffered_rows with `from` replaced by `to` in its text.
std::unique_ptr<Kernel> rows_kernel_with(const std::string& from, const std::string& to) {
  return kernel_from("tests/text/data/struct.tile", "double_buffered_rows", {}, {{from, to}});
}

// tests/cuda_codegen/data/struct_cp_async.tile: 2-D bf16 tiles, knob struct_cp_async = 1.
std::unique_ptr<Kernel> tiles_kernel(const ConstexprConfig& cfg = {}) {
  auto m = parse_module(read_text("tests/cuda_codegen/data/struct_cp_async.tile"), "struct_cp_async.tile");
  return bind_constexprs(*m->find("double_buffered_tiles"), cfg);
}

std::unique_ptr<Kernel> matmul_struct(ScalarKind dt, const ConstexprConfig& cfg = {}) {
  return bind_constexprs(*find_library_kernel("matmul_struct")->build(dt), cfg);
}

void expect_nvrtc_accepts(const Kernel& k, const std::string& what,
                          const std::vector<CudaTarget>& targets = {planning_target("sm_80"), planning_target("sm_90a")}) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  for (const CudaTarget& t : targets) {
    const std::string arch = t.str() + (t.tma ? "" : " without TMA");
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

// After each line of `s` holding `what`, up to the next op's comment line: no barrier (a copy
// left in flight until async_wait).
void expect_no_barrier_after(const std::string& s, const std::string& what) {
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) {
    size_t eol = s.find('\n', p);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(s.begin() + static_cast<std::ptrdiff_t>(eol), s.end(), m, std::regex("\n *// ")));
    std::string after = s.substr(eol, static_cast<size_t>(m.position(0)));
    EXPECT_EQ(after.find("__syncthreads"), std::string::npos) << after;
  }
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
  CudaEmission two = emit_cuda_with_info(*matmul_struct(ScalarKind::F32), planning_target("sm_80"));
  CudaEmission three = emit_cuda_with_info(*matmul_struct(ScalarKind::F32, {{"STAGES", 3}}), planning_target("sm_80"));
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
  CudaEmission em = emit_cuda_with_info(*corpus_kernel("double_buffered_rows"), planning_target("sm_90a"));
  const std::string& s = em.source;
  EXPECT_EQ(em.stats.at("struct-smem-bytes"), 2 * 32 * 4);
  EXPECT_EQ(count(s, "__trap();  // slot index out of range"), 5);  // 2 copies, 2 reads, 1 write
  EXPECT_NE(s.find("reinterpret_cast<float*>(tsr_smem + tsr_struct_base + 0LL)"), std::string::npos);
  // The pad of the first copy (0.0) and the plain copy inside the loop.
  EXPECT_EQ(count(s, ": float(0x0p+0f);"), 2);
}

TEST(CudaStruct, KernelsWithoutStructOpsAreUnchanged) {
  auto k = bind_constexprs(*find_library_kernel("matmul")->build(ScalarKind::BF16), {});
  CudaEmission em = emit_cuda_with_info(*k, planning_target("sm_80"));
  EXPECT_EQ(em.source.find("tsr_struct_base"), std::string::npos);
  EXPECT_EQ(em.stats.count("struct-smem-bytes"), 0u);
}

TEST(CudaStruct, RingsThatDoNotFitSharedMemoryAreALocatedError) {
  // 4 stages of two 128 x 64 f32 slots: 256 KiB of rings.
  auto k = matmul_struct(ScalarKind::F32, {{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"BLOCK_K", 64}, {"STAGES", 4}});
  try {
    emit_cuda_with_info(*k, planning_target("sm_90a"));
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
  CudaEmission em = emit_cuda_with_info(*k, planning_target("sm_80"));
  const std::string& s = em.source;
  EXPECT_EQ(em.stats.at("struct-cp-async-copies"), 2);
  EXPECT_EQ(count(s, "tsr::struct_copy_chunk(dst"), 2);
  EXPECT_EQ(count(s, ": float(0x0p+0f);"), 0);  // no plain copy left
  const std::string commit = "tsr::cp_async_commit();";
  ASSERT_EQ(count(s, commit), 2);
  expect_no_barrier_after(s, commit);
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
    std::string a = emit_cuda_with_info(*plain, planning_target(arch)).source;
    std::string b = emit_cuda_with_info(*off, planning_target(arch)).source;
    const std::string decl = "  [[maybe_unused]] constexpr int64_t struct_cp_async = 0LL;\n";
    ASSERT_EQ(count(b, decl), 1);
    b.erase(b.find(decl), decl.size());
    EXPECT_EQ(a, b) << arch;
    EXPECT_EQ(a.find("tsr::cp_async"), std::string::npos);
  }
  CudaEmission tiles = emit_cuda_with_info(*tiles_kernel({{"struct_cp_async", 0}}), planning_target("sm_80"));
  EXPECT_EQ(tiles.source.find("tsr::cp_async"), std::string::npos);
  EXPECT_EQ(tiles.stats.count("struct-cp-async-copies"), 0u);
}

// Zero-filling chunks matches only pad +0.0: another pad keeps that op's plain copy.
TEST(CudaStruct, CpAsyncFallsBackForOtherPads) {
  for (const char* pad : {"1.5", "-0.0"}) {
    SCOPED_TRACE(pad);
    auto k = rows_kernel_with("{pad = 0.0}", std::string("{pad = ") + pad + "}");
    k->set_constexpr("struct_cp_async", 1);
    CudaEmission em = emit_cuda_with_info(*k, planning_target("sm_80"));
    EXPECT_EQ(em.stats.at("struct-cp-async-copies"), 1);  // the copy in the loop (no pad: 0)
    EXPECT_EQ(count(em.source, "tsr::struct_copy_chunk(dst"), 1);
    EXPECT_EQ(count(em.source, "+= tsr_nthreads) {"), 2);  // one plain copy, one cp.async loop
  }
}

TEST(CudaStruct, CpAsyncKnobValuesOtherThanZeroOrOneAreErrors) {
  auto k = corpus_kernel("double_buffered_rows");
  k->set_constexpr("struct_cp_async", 2);
  try {
    emit_cuda_with_info(*k, planning_target("sm_80"));
    FAIL() << "no error";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("struct_cp_async is 2"), std::string::npos) << e.what();
  }
}

// 2-D tiles are copied row by row (8 bf16 chunks a row); NVRTC accepts both kernels.
TEST(CudaStruct, CpAsyncKernelsCompile) {
  for (int64_t bm : {8, 16}) {
    auto k = tiles_kernel({{"BM", bm}});
    CudaEmission em = emit_cuda_with_info(*k, planning_target("sm_80"));
    EXPECT_EQ(em.stats.at("struct-cp-async-copies"), 2);
    EXPECT_EQ(count(em.source, "// the chunk's row of the slot"), 2);
    expect_nvrtc_accepts(*k, "double_buffered_tiles BM=" + std::to_string(bm));
  }
  auto rows = corpus_kernel("double_buffered_rows", {{"BLOCK", 64}});
  rows->set_constexpr("struct_cp_async", 1);
  expect_nvrtc_accepts(*rows, "double_buffered_rows struct_cp_async=1");
}

// ----- knob struct_tma -----

const char* kTmaFile = "tests/cuda_codegen/data/struct_tma.tile";

std::unique_ptr<Kernel> tma_kernel(const std::string& name, const ConstexprConfig& cfg = {},
                                   const std::vector<std::pair<std::string, std::string>>& edits = {}) {
  return kernel_from(kTmaFile, name, cfg, edits);
}

// struct.tile's double_buffered_rows (f32 [1, BLOCK] slots, pad 0.0 on the first copy) with the knob.
std::unique_ptr<Kernel> rows_kernel(int64_t block, int64_t knob = 1,
                                    const std::vector<std::pair<std::string, std::string>>& edits = {}) {
  auto k = kernel_from("tests/text/data/struct.tile", "double_buffered_rows", {{"BLOCK", block}}, edits);
  k->set_constexpr("struct_tma", knob);
  return k;
}

int64_t stat(const CudaEmission& em, const std::string& name) {
  auto it = em.stats.find(name);
  return it == em.stats.end() ? 0 : it->second;
}

std::string all_notes(const CudaEmission& em) {
  std::string out;
  for (const std::string& n : em.notes) out += n + "\n";
  return out;
}

const CudaTarget kSm90a = planning_target("sm_90a");

CudaTarget no_tma() {
  CudaTarget t = kSm90a;
  t.tma = false;
  return t;
}

// The source with the knob's constexpr line removed (the only line the knob adds by itself).
std::string without_knob_line(std::string s, int64_t v) {
  const std::string decl = "  [[maybe_unused]] constexpr int64_t struct_tma = " + std::to_string(v) + "LL;\n";
  size_t at = s.find(decl);
  if (at != std::string::npos) s.erase(at, decl.size());
  return s;
}

// Each copy: a proxy fence and a barrier (write-after-read), then thread 0 announces the box's
// bytes and issues one cp.async.bulk.tensor; no barrier after it. Each async_wait: one arrival,
// a wait on the phase, the parity flipped, then a barrier. Two maps (one per view), unswizzled,
// box = the tile; the barrier's set-up at the top, the drain at the end.
TEST(CudaStructTma, KnobCopiesWithTmaOnSm90a) {
  CudaEmission em = emit_cuda_with_info(*tma_kernel("tma_pair", {{"BM", 16}, {"BN", 64}}), kSm90a);
  const std::string& s = em.source;
  EXPECT_EQ(stat(em, "struct-tma-copies"), 4);
  EXPECT_EQ(count(s, "tsr::tma_load_2d(tsr::smem_u32(dst"), 4);
  EXPECT_EQ(count(s, "tsr::mbar_expect_tx(tsr_tma_bar, 2048u);"), 2);  // 16 x 64 bf16
  EXPECT_EQ(count(s, "tsr::mbar_expect_tx(tsr_tma_bar, 4096u);"), 2);  // 16 x 64 f32
  EXPECT_EQ(count(s, ", &tsr_tma0, "), 2);
  EXPECT_EQ(count(s, ", &tsr_tma1, "), 2);
  EXPECT_NE(s.find("#include \"tessera/hopper.cuh\""), std::string::npos);
  EXPECT_EQ(s.find("tessera/wgmma.cuh"), std::string::npos);
  EXPECT_EQ(count(s, "{  // wholly outside the view: zeros"), 4);
  // No plain or cp.async copy is left.
  EXPECT_EQ(s.find("tsr::cp_async"), std::string::npos);
  EXPECT_EQ(count(s, " : float(0x0p+0f);"), 0);

  // Maps after the dims, one per view: {BN columns, BM rows}, no swizzle.
  std::vector<const CudaParam*> maps;
  for (const CudaParam& p : em.info.params)
    if (p.kind == CudaParam::Kind::TensorMap) maps.push_back(&p);
  ASSERT_EQ(maps.size(), 2u);
  EXPECT_EQ(em.info.params.size(), 3u + 2u + 2u);  // x, w, y; M, N; two maps
  EXPECT_EQ(em.info.params[5].kind, CudaParam::Kind::TensorMap);
  EXPECT_EQ(maps[0]->param_index, 0);
  EXPECT_EQ(maps[0]->elem, ScalarKind::BF16);
  EXPECT_EQ(maps[1]->param_index, 1);
  EXPECT_EQ(maps[1]->elem, ScalarKind::F32);
  for (const CudaParam* m : maps) {
    EXPECT_EQ(m->box[0], 64);
    EXPECT_EQ(m->box[1], 16);
    EXPECT_EQ(m->swizzle, 0);
  }
  EXPECT_NE(s.find("const __grid_constant__ tsr::TmaDesc tsr_tma0, const __grid_constant__ tsr::TmaDesc tsr_tma1)"),
            std::string::npos);

  // Every copy: fence, barrier, then the box; and up to the next op's comment, no barrier.
  std::regex copy("tsr::fence_proxy_async\\(\\);\n *__syncthreads\\(\\);\n *\\{  // TMA: one 16 x 64 box");
  EXPECT_EQ(std::distance(std::sregex_iterator(s.begin(), s.end(), copy), std::sregex_iterator()), 4);
  expect_no_barrier_after(s, "tsr::tma_load_2d(");
  // Only thread 0 issues, after announcing the bytes (the tile is zeros when wholly outside).
  std::regex issued("\\} else if \\(tsr_tid == 0\\) \\{\n *tsr::mbar_expect_tx\\(tsr_tma_bar, [0-9]+u\\);\n *tsr::tma_load_2d");
  EXPECT_EQ(std::distance(std::sregex_iterator(s.begin(), s.end(), issued), std::sregex_iterator()), 4);

  // The one async_wait.
  std::regex wait(
      "if \\(tsr_tid == 0\\) tsr::mbar_arrive\\(tsr_tma_bar\\);\n *tsr::mbar_wait\\(tsr_tma_bar, tsr_tma_phase\\);[^\n]*\n"
      " *tsr_tma_phase \\^= 1u;\n *__syncthreads\\(\\);");
  EXPECT_EQ(std::distance(std::sregex_iterator(s.begin(), s.end(), wait), std::sregex_iterator()), 1);
  EXPECT_EQ(count(s, "tsr::mbar_wait("), 2);  // the wait and the drain

  // Set-up before the body: the barrier first in the 128-byte aligned struct storage.
  EXPECT_NE(s.find("const int64_t tsr_struct_base = "), std::string::npos);
  EXPECT_EQ(s.find("constexpr int64_t tsr_struct_base"), std::string::npos);
  EXPECT_NE(s.find("tsr::mbar_init(tsr_tma_bar, 1);"), std::string::npos);
  EXPECT_EQ(count(s, "tsr::prefetch_tensormap(&tsr_tma"), 2);
  EXPECT_LT(s.find("tsr::mbar_init_fence();\n  }\n  __syncthreads();"), s.find("// %pm = program_id"));
  EXPECT_NE(s.find("reinterpret_cast<uint16_t*>(tsr_smem + tsr_struct_base + 128LL)"), std::string::npos);
  EXPECT_EQ(em.stats.at("struct-smem-bytes"), 128 + 2 * 16 * 64 * 2 + 2 * 16 * 64 * 4);
  // The drain: the last statement of the kernel.
  EXPECT_NE(s.find("    tsr::mbar_wait(tsr_tma_bar, tsr_tma_phase);\n  }\n}\n"), std::string::npos);
}

// Absent, 0, or 1 where no copy qualifies: the code the kernel had without the knob (but for the
// constexpr line), and for 1 a note per copy saying why not.
TEST(CudaStructTma, KnobOffOrNotTakenKeepsTheOldCodeByteForByte) {
  // The rows kernel without the knob at all.
  auto plain = kernel_from("tests/text/data/struct.tile", "double_buffered_rows", {{"BLOCK", 32}});
  const std::string before = emit_cuda_with_info(*plain, kSm90a).source;
  EXPECT_EQ(without_knob_line(emit_cuda_with_info(*rows_kernel(32, 0), kSm90a).source, 0), before);
  // Knob 1 where TMA cannot run: sm_80, sm_90 (no arch-specific features), the compilation
  // without TMA that the runtime launches for views a tensor map cannot describe.
  struct Case {
    CudaTarget t;
    const char* why;
  };
  for (const Case& c : {Case{planning_target("sm_80"), "TMA copies need sm_90a (this is sm_80)"},
                        Case{planning_target("sm_90"), "TMA copies need sm_90a (this is sm_90)"},
                        Case{no_tma(), "TMA is disabled for this compilation"}}) {
    SCOPED_TRACE(c.t.str() + (c.t.tma ? "" : " no-tma"));
    const std::string want = emit_cuda_with_info(*plain, c.t).source;
    CudaEmission em = emit_cuda_with_info(*rows_kernel(32, 1), c.t);
    EXPECT_EQ(without_knob_line(em.source, 1), want);
    EXPECT_EQ(stat(em, "struct-tma-copies"), 0);
    EXPECT_EQ(count(all_notes(em), std::string("not TMA: ") + c.why), 2) << all_notes(em);
    for (const CudaParam& p : em.info.params) EXPECT_NE(p.kind, CudaParam::Kind::TensorMap);
  }
  // The pair kernel, knob 0 against knob 1 on the compilation without TMA.
  for (int64_t bm : {8, 64}) {
    SCOPED_TRACE("BM=" + std::to_string(bm));
    std::string a = emit_cuda_with_info(*tma_kernel("tma_pair", {{"BM", bm}, {"struct_tma", 0}}), kSm90a).source;
    std::string b = emit_cuda_with_info(*tma_kernel("tma_pair", {{"BM", bm}}), no_tma()).source;
    EXPECT_EQ(without_knob_line(a, 0), without_knob_line(b, 1));
    EXPECT_EQ(a.find("tsr_tma"), std::string::npos);
  }
}

// The rule, op by op: each async_copy that TMA cannot take keeps its own lowering (here the
// plain copy) and says why in a note; the other copies of the kernel still take TMA.
TEST(CudaStructTma, CopiesTmaCannotTakeKeepTheirLoweringAndSayWhy) {
  struct Case {
    std::string what;
    std::unique_ptr<Kernel> k;
    int copies, tma;  // async_copy ops, and those TMA takes
    std::string why;  // in the note of each other copy
  };
  std::vector<Case> cases;
  // double_buffered_rows: its first copy has pad 0.0, the loop's none (0).
  cases.push_back({"pad 1.5", rows_kernel(32, 1, {{"{pad = 0.0}", "{pad = 1.5}"}}), 2, 1,
                   "pad 1.5 (TMA fills out-of-bounds elements with +0)"});
  cases.push_back({"pad -0.0", rows_kernel(32, 1, {{"{pad = 0.0}", "{pad = -0.0}"}}), 2, 1, "pad -0.0 (TMA fills"});
  cases.push_back({"pad -inf", tma_kernel("tma_pair", {}, {{"{pad = 0.0}", "{pad = -inf}"}}), 4, 3, "pad -inf (TMA"});
  // [1, 16] f32 slots are 64 bytes: the second slot is not 128-byte aligned.
  cases.push_back({"64-byte slots", rows_kernel(16), 2, 0, "slots of 64 bytes do not all start 128-byte aligned"});
  cases.push_back({"24-byte rows", tma_kernel("tma_shift", {{"BN", 6}}, {{"constexpr BN = 16 in [16, 32]", "constexpr BN = 16"}}),
                   3, 0, "a tile row is 24 bytes (TMA boxes need a multiple of 16)"});
  cases.push_back({"512 columns", tma_kernel("tma_pair", {{"BN", 512}}, {{"constexpr BN = 32 in [32, 64]", "constexpr BN = 32"}}),
                   4, 0, "the tile is 8 x 512 (a box has at most 256 rows and columns)"});
  // Stores into the view the copies read (tma_shift made in place): ordinary stores and TMA
  // reads of global memory are not ordered by the copy's barrier.
  cases.push_back({"written view", tma_kernel("tma_shift", {}, {{"tile<i32, [BM, BN]>\n    store_tile %y, ", "tile<i32, [BM, BN]>\n    store_tile %x, "}}), 3, 0,
                   "the kernel also writes the view (the TMA would read it through the async proxy, unordered)"});
  const std::string one_d = R"(
kernel @one_d(%x: view<f32, [N]>, %y: view<f32, [N]>) {
  constexpr BLOCK = 64
  constexpr struct_tma = 1
  grid {
    %n = dim %x {axis = 0} : i32
    %b = param {name = "BLOCK"} : i32
    %g = div %n, %b : i32
    yield %g
  }
  %p = program_id {axis = 0} : i32
  %buf = alloc : buffer<f32, [2, BLOCK], space = "shared">
  %c1 = const {value = 1} : i32
  async_copy %buf, %x, %c1, %p
  async_wait
  %t = buffer_read %buf, %c1 : tile<f32, [BLOCK]>
  store_tile %y, %t, %p
}
)";
  cases.push_back({"1-D view", bind_constexprs(*parse_module(one_d, "one_d.tile")->find("one_d"), {}), 1, 0,
                   "the view is 1-D (a TMA copy here is a 2-D box)"});
  for (Case& c : cases) {
    SCOPED_TRACE(c.what);
    CudaEmission em = emit_cuda_with_info(*c.k, kSm90a);
    EXPECT_EQ(stat(em, "struct-tma-copies"), c.tma);
    const std::string notes = all_notes(em);
    EXPECT_EQ(count(notes, ": not TMA: " + c.why), c.copies - c.tma) << notes;
    EXPECT_EQ(count(notes, "; a plain copy"), c.copies - c.tma) << notes;
    EXPECT_EQ(count(em.source, "tsr::tma_load_2d("), c.tma);
    EXPECT_EQ(count(em.source, "+= tsr_nthreads) {"), c.copies - c.tma);  // the plain copies' loops
    if (c.tma == 0) {
      // Nothing of the TMA path: no barrier, no maps, no Hopper header.
      EXPECT_EQ(em.source.find("tsr_tma"), std::string::npos);
      EXPECT_EQ(em.source.find("tessera/hopper.cuh"), std::string::npos);
      EXPECT_NE(em.source.find("constexpr int64_t tsr_struct_base"), std::string::npos);
    }
  }
}

// With struct_cp_async = 1 too, a copy TMA cannot take becomes cp.async where that applies, and
// async_wait then waits for this thread's cp.async groups and for the TMA phase.
TEST(CudaStructTma, MixesWithCpAsync) {
  // tma_shift plus a copy into [1, 4] i32 slots (16 bytes: not 128-byte aligned; one cp.async chunk).
  auto k = tma_kernel("tma_shift", {}, {{"async_copy %buf, %x, %c1, %pm, %c0\n",
                                         "async_copy %buf, %x, %c1, %pm, %c0\n  %small = alloc : buffer<i32, [2, 1, 4], "
                                         "space = \"shared\">\n  async_copy %small, %x, %c1, %pm, %c0\n"}});
  k->set_constexpr("struct_cp_async", 1);
  CudaEmission em = emit_cuda_with_info(*k, kSm90a);
  EXPECT_EQ(stat(em, "struct-tma-copies"), 3);
  EXPECT_EQ(stat(em, "struct-cp-async-copies"), 1);
  EXPECT_EQ(count(all_notes(em), "not TMA: slots of 16 bytes do not all start 128-byte aligned; cp.async copies"), 1)
      << all_notes(em);
  const std::string& s = em.source;
  std::regex wait("tsr::cp_async_wait<0>\\(\\);[^\n]*\n *if \\(tsr_tid == 0\\) tsr::mbar_arrive\\(tsr_tma_bar\\);");
  EXPECT_EQ(std::distance(std::sregex_iterator(s.begin(), s.end(), wait), std::sregex_iterator()), 1);
  expect_nvrtc_accepts(*k, "tma_shift with a cp.async copy", {kSm90a});
  // Without the TMA knob the same kernel is all cp.async.
  k->set_constexpr("struct_tma", 0);
  CudaEmission off = emit_cuda_with_info(*k, kSm90a);
  EXPECT_EQ(stat(off, "struct-tma-copies"), 0);
  EXPECT_EQ(stat(off, "struct-cp-async-copies"), 4);
}

TEST(CudaStructTma, KnobValuesOtherThanZeroOrOneAreErrors) {
  try {
    emit_cuda_with_info(*rows_kernel(32, 2), kSm90a);
    FAIL() << "no error";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("struct_tma is 2; it takes 0 (no TMA) or 1 (TMA copies on sm_90a)"),
              std::string::npos)
        << e.what();
    EXPECT_TRUE(e.loc().known());
  }
}

// Two copies of one view with different tiles need two maps (a box is part of the map); copies
// with the same tile share one.
TEST(CudaStructTma, OneMapPerViewAndBox) {
  // A single slot of 4 x 4 i32 (64 bytes: the region's start is 128-byte aligned).
  auto k = tma_kernel("tma_shift", {}, {{"async_copy %buf, %x, %c0, %pm, %cm1\n",
                                         "async_copy %buf, %x, %c0, %pm, %cm1\n  %small = alloc : buffer<i32, [4, 4], "
                                         "space = \"shared\">\n  async_copy %small, %x, %pm, %c0\n"}});
  CudaEmission em = emit_cuda_with_info(*k, kSm90a);
  EXPECT_EQ(stat(em, "struct-tma-copies"), 4);
  std::vector<std::array<int, 2>> boxes;
  for (const CudaParam& p : em.info.params)
    if (p.kind == CudaParam::Kind::TensorMap) boxes.push_back({p.box[0], p.box[1]});
  ASSERT_EQ(boxes.size(), 2u);
  EXPECT_EQ(boxes[0], (std::array<int, 2>{16, 8}));
  EXPECT_EQ(boxes[1], (std::array<int, 2>{4, 4}));
  EXPECT_EQ(count(em.source, ", &tsr_tma0, "), 3);
  EXPECT_EQ(count(em.source, ", &tsr_tma0_1, "), 1);
  expect_nvrtc_accepts(*k, "tma_shift with a second box", {kSm90a});
}

// NVRTC compiles (and ptxas assembles) every TMA kernel for sm_90a, and the same kernels with
// TMA disabled.
TEST(CudaStructTma, KernelsCompile) {
  for (int64_t bm : {8, 16, 64})
    for (int64_t bn : {32, 64}) {
      auto k = tma_kernel("tma_pair", {{"BM", bm}, {"BN", bn}});
      EXPECT_EQ(stat(emit_cuda_with_info(*k, kSm90a), "struct-tma-copies"), 4);
      expect_nvrtc_accepts(*k, "tma_pair " + std::to_string(bm) + "x" + std::to_string(bn), {kSm90a});
    }
  for (int64_t bm : {8, 32}) {
    auto k = tma_kernel("tma_shift", {{"BM", bm}, {"BN", 32}});
    EXPECT_EQ(stat(emit_cuda_with_info(*k, kSm90a), "struct-tma-copies"), 3);
    expect_nvrtc_accepts(*k, "tma_shift BM=" + std::to_string(bm), {kSm90a, no_tma()});
  }
  for (int64_t block : {16, 64}) expect_nvrtc_accepts(*rows_kernel(block), "double_buffered_rows " + std::to_string(block), {kSm90a});
}

}  // namespace
}  // namespace tessera
