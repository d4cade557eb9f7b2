// The sm_90a matmul path: which pipelined dot loops become a TMA + mbarrier ring feeding wgmma
// (with warp specialization), what the generated kernel looks like, the notes that say why a
// loop did not take it, and that NVRTC accepts every shape the planner allows.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"
#include "CodegenTestUtil.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"
#include "../common/NtMatmulText.h"

namespace tessera {
namespace {

using codegentest::emit;
using codegentest::lib_matmul;
using codegentest::planning_target;

using codegentest::notes;

// How many times `what` occurs in `src`.
size_t count(const std::string& src, const std::string& what) {
  size_t n = 0;
  for (size_t at = 0; (at = src.find(what, at)) != std::string::npos; ++at) ++n;
  return n;
}

TEST(CudaWgmma, LibraryMatmul128x256x64IsWarpSpecializedTmaWgmma) {
  CudaEmission em = emit(*lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}}));
  EXPECT_EQ(em.stats["dot.wgmma_tma"], 1) << notes(em);
  EXPECT_EQ(em.stats["dot.mma_pipelined"], 0);
  EXPECT_EQ(em.stats["warp-specialized"], 1);
  EXPECT_EQ(em.stats["threads"], 384);  // two consumer warpgroups and one producer warpgroup
  EXPECT_EQ(em.info.block_threads, 384);
  // 4 stages of 48 KiB (A 128 x 64, B 64 x 256), 1024-aligned, two 8 KiB epilogue buffers per
  // consumer warpgroup and 8 mbarriers.
  EXPECT_EQ(em.stats["pipeline-stages"], 4);
  EXPECT_EQ(em.info.dynamic_smem_bytes, 1024 + 4 * 49152 + 2 * 16384 + 64);
  EXPECT_NE(em.source.find("__launch_bounds__(384, 1)"), std::string::npos);
  EXPECT_NE(em.source.find("tsr::wgmma_m64n256k16_bf16<1>"), std::string::npos) << em.source;
  // One A box and four 64-column B boxes per stage (each copied with or without an L2 hint).
  size_t tma = 0;
  for (size_t at = 0; (at = em.source.find("tsr::tma_load_2d_hint(", at)) != std::string::npos; ++at) ++tma;
  EXPECT_EQ(tma, 5u);
  // After the scalars come the tensor maps, a (box 64 x 128), b (box 64 x 64) and c (box 64 x 64,
  // the TMA-store epilogue), then the persistent kernel's grid sizes.
  ASSERT_EQ(em.info.params.size(), 11u);
  const CudaParam& ma = em.info.params[6];
  const CudaParam& mb = em.info.params[7];
  EXPECT_EQ(ma.kind, CudaParam::Kind::TensorMap);
  EXPECT_EQ(ma.param_index, 0);
  EXPECT_EQ(ma.box[0], 64);
  EXPECT_EQ(ma.box[1], 128);
  EXPECT_EQ(mb.kind, CudaParam::Kind::TensorMap);
  EXPECT_EQ(mb.param_index, 1);
  EXPECT_EQ(mb.box[1], 64);
  EXPECT_EQ(em.info.params[8].kind, CudaParam::Kind::TensorMap);
  EXPECT_EQ(em.info.params[8].param_index, 2);
  EXPECT_EQ(em.info.params[9].kind, CudaParam::Kind::GridSize);
  EXPECT_EQ(em.info.params[10].param_index, 1);

  // Persistent: program ids come from the CTA's loop over the programs, and the ring's phases
  // carry from one program to the next (no CTA barrier after the loop).
  EXPECT_TRUE(em.info.persistent);
  EXPECT_EQ(em.stats["persistent"], 1);
  EXPECT_NE(em.source.find("for (int64_t tsr_t = blockIdx.x; tsr_t < tsr_programs; tsr_t += gridDim.x)"), std::string::npos);
  EXPECT_EQ(em.source.find("blockIdx.y"), std::string::npos);
  EXPECT_NE(em.source.find("ring_it_ += "), std::string::npos);
  // The epilogue goes from the wgmma fragments through swizzled shared memory to TMA stores,
  // consumer warps only (overlapped with the next program's loop), and the CTA waits for them
  // before it exits.
  EXPECT_EQ(em.stats["tma-store-epilogues"], 1);
  EXPECT_EQ(em.stats["mma-direct-epilogues"], 0);
  EXPECT_EQ(em.stats["epilogue-overlap"], 1);
  EXPECT_NE(em.source.find("} else {  // the consumer warpgroups"), std::string::npos);
  EXPECT_NE(em.source.find("tsr::epilogue_box_sw128<0, 1>(&tsr_tma2"), std::string::npos);
  EXPECT_NE(em.source.find("tsr::bulk_wait_all()"), std::string::npos);
  EXPECT_NE(notes(em).find("wgmma m64n256k16"), std::string::npos) << notes(em);
}

// A kernel that does more than the matmul loop and its store keeps one CTA per program.
// The persistent (sm_90a) and grouped (mma.sync) orders take GROUP_M rows of tiles at a time
// when the kernel declares that constexpr (else 8); a value below 1 is a located error.
TEST(CudaWgmma, GroupRowsFromTheKernelsGroupM) {
  auto with_group = [](int64_t g) {
    auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}});
    k->set_constexpr("GROUP_M", g);
    return k;
  };
  EXPECT_NE(emit(*lib_matmul(ScalarKind::BF16)).source.find("tsr_in_group = 8 * int64_t(tsr_grid1)"), std::string::npos);
  EXPECT_NE(emit(*with_group(16)).source.find("tsr_in_group = 16 * int64_t(tsr_grid1)"), std::string::npos);
  CudaEmission mma = emit(*with_group(4), "sm_90");
  EXPECT_NE(mma.source.find("tsr_in_group = 4 * int64_t(tsr_grid1)"), std::string::npos);
  EXPECT_NE(mma.source.find("tsr_first = tsr_t / tsr_in_group * 4"), std::string::npos);
  try {
    emit(*with_group(0));
    ADD_FAILURE() << "GROUP_M = 0 accepted";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("GROUP_M of kernel @matmul is 0"), std::string::npos) << e.what();
  }
}

// The TMA copies' L2 policy: evict_first for an operand whose tiles at most two programs read
// (B with at most two rows of 128-row tiles, A with at most two columns of 256-column ones),
// decided at run time from the dims, else the unhinted copy; the knobs tma_hint_a /
// tma_hint_b fix it (1 evict_first, 2 evict_last, 3 never a hint), and NVRTC takes each.
TEST(CudaWgmma, StreamedOperandsGoThroughL2EvictFirst) {
  auto with = [](int64_t a, int64_t b) {
    auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}});
    if (a) k->set_constexpr("tma_hint_a", a);
    if (b) k->set_constexpr("tma_hint_b", b);
    return k;
  };
  CudaEmission em = emit(*with(0, 0));
  EXPECT_EQ(em.stats["tma-l2-policy-auto"], 2);
  EXPECT_NE(em.source.find("const bool stream_a_ = (int64_t(tsr_dim_N) + 255) / 256 <= 2;"), std::string::npos)
      << em.source;
  EXPECT_NE(em.source.find("const bool stream_b_ = (int64_t(tsr_dim_M) + 127) / 128 <= 2;"), std::string::npos);
  EXPECT_EQ(count(em.source, "const uint64_t pol_first_ = tsr::l2_policy_evict_first();"), 1u);
  // One A box and four B boxes, each hinted or not by its operand's flag.
  EXPECT_EQ(count(em.source, "if (stream_a_) tsr::tma_load_2d_hint("), 1u);
  EXPECT_EQ(count(em.source, "if (stream_b_) tsr::tma_load_2d_hint("), 4u);
  EXPECT_EQ(count(em.source, ", bar_, pol_first_); else tsr::tma_load_2d("), 5u);

  em = emit(*with(2, 1));
  EXPECT_EQ(em.stats["tma-l2-policy-auto"], 0);
  EXPECT_EQ(em.source.find("stream_"), std::string::npos);
  EXPECT_EQ(count(em.source, ", bar_, pol_last_);"), 1u);
  EXPECT_EQ(count(em.source, ", bar_, pol_first_);"), 4u);

  em = emit(*with(3, 3));
  EXPECT_EQ(em.source.find("pol_"), std::string::npos);
  EXPECT_EQ(count(em.source, "tsr::tma_load_2d("), 5u);

  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  for (auto [a, b] : {std::pair<int64_t, int64_t>{0, 0}, {2, 1}, {1, 2}, {3, 0}}) {
    SCOPED_TRACE(std::to_string(a) + " " + std::to_string(b));
    em = emit(*with(a, b));
    EXPECT_FALSE(nvrtc_compile(em.source, planning_target("sm_90a"), "hint.cu", em.line_op).cubin.empty());
  }
}

// Knob epilogue_buffers = 4: each consumer warpgroup stages its four 64-column boxes in four
// 8 KiB buffers (no box waits for an earlier box's store), and the ring has one stage less to
// make room; tma_store_epilogue = 0 stores the fragments directly. (The epilogue after each
// program's loop, epilogue_overlap = 0; the overlapped one uses the same buffers.)
TEST(CudaWgmma, EpilogueKnobs) {
  auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}});
  k->set_constexpr("epilogue_overlap", 0);
  CudaEmission two = emit(*k);
  EXPECT_EQ(two.stats["pipeline-stages"], 4);
  EXPECT_NE(two.source.find("if (lead_) tsr::bulk_wait_read<1>();"), std::string::npos);
  EXPECT_NE(two.source.find("const uint32_t buf_ = stg_ + uint32_t(c_ & 1) * 8192u;"), std::string::npos);
  k->set_constexpr("epilogue_buffers", 4);
  CudaEmission four = emit(*k);
  EXPECT_EQ(four.stats["pipeline-stages"], 3);
  EXPECT_EQ(four.info.dynamic_smem_bytes, 1024 + 3 * 49152 + 2 * 32768 + 48);
  EXPECT_NE(four.source.find("const uint32_t stg_ = ring_ + 147456u + wg_ * 32768u;"), std::string::npos) << four.source;
  EXPECT_NE(four.source.find("if (lead_) tsr::bulk_wait_read<3>();"), std::string::npos);
  EXPECT_NE(four.source.find("const uint32_t buf_ = stg_ + uint32_t(c_ & 3) * 8192u;"), std::string::npos);
  k->set_constexpr("epilogue_overlap", 1);
  CudaEmission four_overlap = emit(*k);
  EXPECT_NE(four_overlap.source.find("const uint32_t epi_buf_ = ring_ + 147456u + uint32_t(tsr_tid / 128) * 32768u;"),
            std::string::npos)
      << four_overlap.source;
  EXPECT_NE(four_overlap.source.find("tsr::epilogue_box_sw128<3, 3>(&tsr_tma2, epi_buf_ + 24576u, pk_, pcol_, prow_);"),
            std::string::npos);
  k->set_constexpr("epilogue_buffers", 2);
  k->set_constexpr("tma_store_epilogue", 0);
  CudaEmission direct = emit(*k);
  EXPECT_EQ(direct.stats["tma-store-epilogues"], 0);
  EXPECT_EQ(direct.stats["mma-direct-epilogues"], 1);
  EXPECT_NE(direct.source.find("tsr::store_frags("), std::string::npos);
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  EXPECT_FALSE(nvrtc_compile(four.source, planning_target("sm_90a"), "four.cu", four.line_op).cubin.empty());
  EXPECT_FALSE(
      nvrtc_compile(four_overlap.source, planning_target("sm_90a"), "four_o.cu", four_overlap.line_op).cubin.empty());
  EXPECT_FALSE(nvrtc_compile(direct.source, planning_target("sm_90a"), "direct.cu", direct.line_op).cubin.empty());
}

// Knob ring_stages: the TMA ring holds that many stages where shared memory has room (64 x 128
// tiles: 4 from the loop's annotation, 8 asked; 128 x 256: 4 fit of 6 asked), not in the split-K
// compilation (8), and 17 is an error. 64 x 64 tiles (16 KiB stages) hold 13 of 16 asked.
TEST(CudaWgmma, RingStagesKnob) {
  auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 64}, {"BLOCK_N", 128}, {"BLOCK_K", 64}});
  EXPECT_EQ(emit(*k).stats["pipeline-stages"], 4);
  k->set_constexpr("ring_stages", 8);
  CudaEmission eight = emit(*k);
  EXPECT_EQ(eight.stats["pipeline-stages"], 8);
  auto small = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"BLOCK_K", 64}});
  small->set_constexpr("ring_stages", 16);
  CudaEmission thirteen = emit(*small);
  EXPECT_EQ(thirteen.stats["pipeline-stages"], 13);
  // An iteration's stage and phase counted as the loop goes, wrapping at 13, not divided out of
  // the iteration count (which cost rings of 5-7 stages 10-20% on the H200, 13 at this tile too).
  EXPECT_NE(thirteen.source.find("const uint32_t s_ = cs_, ph_ = cp_, ps_ = ls_; ls_ = s_; if (++cs_ == 13u) cs_ = 0, "
                                 "cp_ ^= 1u;"),
            std::string::npos);
  EXPECT_EQ(thirteen.source.find("% 13u"), std::string::npos);
  EXPECT_EQ(thirteen.source.find("(ring_it_ + i_)"), std::string::npos);
  auto big = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}});
  big->set_constexpr("ring_stages", 6);
  EXPECT_EQ(emit(*big).stats["pipeline-stages"], 4);
  // The split-K compilation keeps its 8 stages, deeper or shallower than the knob.
  CudaTarget split = planning_target("sm_90a");
  split.split_k = true;
  k->set_constexpr("ring_stages", 6);
  EXPECT_EQ(emit_cuda_with_info(*k, split).stats["pipeline-stages"], 8);
  k->set_constexpr("ring_stages", 17);
  try {
    emit(*k);
    ADD_FAILURE() << "ring_stages = 17 was taken";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("knob ring_stages = 17: 0 (the loop's pipeline) or 2..16"), std::string::npos) << e.what();
  }
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  EXPECT_FALSE(nvrtc_compile(eight.source, planning_target("sm_90a"), "eight.cu", eight.line_op).cubin.empty());
  EXPECT_FALSE(nvrtc_compile(thirteen.source, planning_target("sm_90a"), "thirteen.cu", thirteen.line_op).cubin.empty());
}

// The ring's stage and phase as the emitted loops count them (no GPU needed): the producer's
// and the consumer's lines, compiled on the host around loops of random trip counts that carry
// ring_it_ from one to the next (a persistent CTA's programs), give (ring_it_ + i_) % S and
// ((ring_it_ + i_) / S) & 1 at every iteration, the consumer's ps_ the previous stage and ls_
// the last one, for stage counts that are and are not powers of two.
TEST(CudaWgmma, RingCountersFollowTheIterationCount) {
  const char* cxx = std::getenv("TESSERA_CXX");
  for (int64_t stages : {5, 8, 13}) {
    auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"BLOCK_K", 64}});
    k->set_constexpr("ring_stages", stages == 13 ? 16 : stages);
    CudaEmission em = emit(*k);
    ASSERT_EQ(em.stats["pipeline-stages"], stages);
    // The four lines: each role's counters before its loop and its step at the loop's top.
    auto line_with = [&](const std::string& what) {
      size_t at = em.source.find(what);
      if (at == std::string::npos) return std::string();
      size_t b = em.source.rfind('\n', at) + 1, e = em.source.find('\n', at);
      return em.source.substr(b, e - b);
    };
    const std::string S = std::to_string(stages);
    const std::string pbase = line_with("cp_ = uint32_t(ring_it_ / " + S + ") & 1u;"),
                      cbase = line_with("& 1u, ls_ = 0;"), pstep = line_with("const uint32_t s_ = cs_, ph_ = cp_;"),
                      cstep = line_with("ps_ = ls_; ls_ = s_;");
    ASSERT_FALSE(pbase.empty() || cbase.empty() || pstep.empty() || cstep.empty()) << em.source;
    const std::string dir = ::testing::TempDir() + "ring_counters_" + S;
    std::ofstream(dir + ".cpp") << "#include <cstdint>\n#include <cstdio>\n#include <cstdlib>\nint main() {\n"
                                   "  int64_t ring_it_ = 0; long bad = 0;\n  std::srand(7);\n"
                                   "  for (int t = 0; t < 5000; ++t) {\n    const int64_t trip = std::rand() % 40;\n"
                                   "    { " << pbase << "\n      for (int64_t i_ = 0; i_ < trip; ++i_) { " << pstep << "\n"
                                   "        const int64_t it = ring_it_ + i_;\n"
                                   "        bad += s_ != uint32_t(it % " << S << ") || ph_ != uint32_t((it / " << S << ") & 1); } }\n"
                                   "    { " << cbase << "\n      for (int64_t i_ = 0; i_ < trip; ++i_) { " << cstep << "\n"
                                   "        const int64_t it = ring_it_ + i_;\n"
                                   "        bad += s_ != uint32_t(it % " << S << ") || ph_ != uint32_t((it / " << S << ") & 1) ||\n"
                                   "               (i_ > 0 && ps_ != uint32_t((it - 1) % " << S << ")); }\n"
                                   "      bad += trip > 0 && ls_ != uint32_t((ring_it_ + trip - 1) % " << S << "); }\n"
                                   "    ring_it_ += trip;\n  }\n  std::printf(\"%ld\\n\", bad);\n  return bad != 0;\n}\n";
    const std::string cmd = std::string(cxx && *cxx ? cxx : "c++") + " -O1 -w -o " + dir + ".bin " + dir + ".cpp && " +
                            dir + ".bin > " + dir + ".out";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::ifstream out(dir + ".out");
    long bad = -1;
    out >> bad;
    EXPECT_EQ(bad, 0) << "stages " << S;
  }
}

// A knob value the emitter gives no meaning is an error, not quietly the default; so is
// epilogue_buffers = 4 on a tile of fewer than four 64-column boxes, where a box would rewrite
// a buffer that an earlier tile's store may still be reading.
TEST(CudaWgmma, KnobValuesWithoutAMeaningAreErrors) {
  auto error = [](int64_t bn, const std::string& knob, int64_t v) {
    auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", bn}, {"BLOCK_K", 64}});
    k->set_constexpr(knob, v);
    try {
      emit(*k);
    } catch (const TesseraError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error(256, "tma_hint_a", 4).find("knob tma_hint_a = 4: 0 (automatic)"), std::string::npos);
  EXPECT_NE(error(256, "tma_hint_b", -1).find("knob tma_hint_b = -1: 0 (automatic)"), std::string::npos);
  EXPECT_NE(error(256, "epilogue_buffers", 3).find("knob epilogue_buffers = 3: 2 (the default) or 4"),
            std::string::npos);
  // (Negative values too: not the default in disguise.)
  EXPECT_NE(error(256, "epilogue_overlap", 2).find("knob epilogue_overlap = 2: 0 (the consumers"), std::string::npos);
  EXPECT_NE(error(256, "epilogue_overlap", -1).find("knob epilogue_overlap = -1: 0 (the consumers"), std::string::npos);
  EXPECT_EQ(error(256, "epilogue_overlap", 0), "");
  EXPECT_EQ(error(256, "epilogue_overlap", 1), "");
  EXPECT_EQ(error(128, "epilogue_buffers", 4), "");
  EXPECT_EQ(error(256, "epilogue_buffers", 4), "");
  EXPECT_EQ(error(128, "epilogue_buffers", 2), "");
  EXPECT_EQ(error(256, "tma_hint_a", 0), "");
  EXPECT_NE(error(256, "split_k", 17).find("knob split_k = 17: 0 (the runtime's rule), 1 (never split) or 2..16"),
            std::string::npos);
  EXPECT_NE(error(256, "split_k", -1).find("knob split_k = -1"), std::string::npos);
  EXPECT_EQ(error(256, "split_k", 3), "");
  EXPECT_NE(error(256, "stream_k", 2).find("knob stream_k = 2: 0 (whole programs) or 1"), std::string::npos);
  EXPECT_EQ(error(256, "stream_k", 1), "");
}

// The stream_k knob (which the tuner varies) is the stream-K compilation CudaTarget::stream_k
// asks for: the same kernel but for the knob's constexpr line.
TEST(CudaWgmma, TheStreamKKnobIsTheStreamKCompilation) {
  auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"BLOCK_K", 64}});
  CudaTarget sk = planning_target("sm_90a");
  sk.stream_k = true;
  const CudaEmission by_target = emit_cuda_with_info(*k, sk);
  k->set_constexpr("stream_k", 1);
  const CudaEmission by_knob = emit(*k);
  EXPECT_TRUE(by_knob.info.stream_k);
  std::string src = by_knob.source;
  const std::string knob_line = "  [[maybe_unused]] constexpr int64_t stream_k = 1LL;\n";
  ASSERT_NE(src.find(knob_line), std::string::npos);
  src.erase(src.find(knob_line), knob_line.size());
  EXPECT_EQ(src, by_target.source);
}

// split_k is read by the runtime at launch: configs that differ only in it print the same
// source, so they share one compilation (the cache key is the source).
TEST(CudaWgmma, TheSplitKKnobIsNotPrinted) {
  auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 64}, {"BLOCK_N", 128}, {"BLOCK_K", 64}});
  const std::string plain = emit(*k).source;
  k->set_constexpr(kSplitKKnob, 3);
  EXPECT_EQ(emit(*k).source, plain);
}

// The TMA-store epilogue's wait before each box: the earlier stores may run on only when a
// tile's 64-column boxes are a multiple of the buffers, so that the buffer's last store was
// that many boxes back even across tiles; otherwise (one box at BLOCK_N = 64, two boxes on
// four buffers) every earlier store must have finished reading first. The same in the
// overlapped epilogue (epilogue_box_sw128's second argument), where a block's boxes follow the
// previous block's as they do here.
TEST(CudaWgmma, EpilogueWaitsForEveryStoreWhenBoxesDoNotRotate) {
  for (int64_t overlap : {0, 1}) {
    SCOPED_TRACE("epilogue_overlap " + std::to_string(overlap));
    auto wait = [&](int64_t bn, int64_t bufs) {
      auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", bn}, {"BLOCK_K", 64}});
      k->set_constexpr("epilogue_buffers", bufs);
      k->set_constexpr("epilogue_overlap", overlap);
      CudaEmission em = emit(*k);
      EXPECT_EQ(em.stats["tma-store-epilogues"], 1) << bn << " " << bufs;
      EXPECT_EQ(em.stats["epilogue-overlap"], overlap);
      for (int n : {0, 1, 3}) {
        const std::string w = overlap ? "tsr::epilogue_box_sw128<0, " + std::to_string(n) + ">("
                                      : "if (lead_) tsr::bulk_wait_read<" + std::to_string(n) + ">();";
        if (em.source.find(w) != std::string::npos) return n;
      }
      return -1;
    };
    EXPECT_EQ(wait(256, 2), 1);
    EXPECT_EQ(wait(128, 2), 1);
    EXPECT_EQ(wait(64, 2), 0);
    EXPECT_EQ(wait(256, 4), 3);
    EXPECT_EQ(wait(128, 4), 0);
    EXPECT_EQ(wait(64, 4), 0);
  }
}

// Knob cluster_m = 2: the persistent kernel runs in clusters of two CTAs, which take programs
// (2q, n) and (2q + 1, n); each CTA copies half the rows of every B box (the tensor map's box
// is half as high) into both rings with TMA multicast, each consumer warp releases a stage to
// both CTAs' producers (so a stage's "empty" barrier counts the consumer warps of both), and
// both CTAs pass a cluster barrier after setting up their barriers and before leaving.
TEST(CudaWgmma, ClusterPairsMulticastBTiles) {
  auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}});
  k->set_constexpr("cluster_m", 2);
  CudaEmission em = emit(*k);
  EXPECT_EQ(em.stats["tma-multicast"], 1) << notes(em);
  EXPECT_EQ(em.info.persistent_cluster, 2);
  EXPECT_EQ(em.info.cluster, 1);  // (not a program split over a cluster)
  EXPECT_NE(em.source.find("__cluster_dims__(2, 1, 1) __launch_bounds__(384, 1)"), std::string::npos) << em.source;
  EXPECT_NE(em.source.find("tsr::mbar_init(empty_ + 8u * s_, 16);"), std::string::npos);
  EXPECT_EQ(count(em.source, "tsr::cluster_sync();"), 2u);
  EXPECT_NE(em.source.find("for (int64_t tsr_t = blockIdx.x / 2; tsr_t < tsr_programs; tsr_t += gridDim.x / 2)"),
            std::string::npos);
  EXPECT_NE(em.source.find("const int32_t tsr_pid0 = int32_t(2 * (tsr_first + tsr_t % tsr_in_group % tsr_rows) + "
                           "int64_t(tsr::cluster_rank()));"),
            std::string::npos);
  // A: one box of this CTA's own; B: four 64-column boxes, rows [32 r, 32 r + 32) of each.
  EXPECT_EQ(count(em.source, "tsr::tma_load_2d_multicast_hint(sa_ + 16384u + mc_rank_ * 4096u, &tsr_tma1, "
                             "int(int64_t(v2) * 256 + 0), int(int64_t(ivp16) * 64 + int64_t(mc_rank_) * 32), bar_, 3, "
                             "pol_first_)"),
            1u)
      << em.source;
  EXPECT_EQ(count(em.source, "tsr::tma_load_2d_multicast("), 4u);
  EXPECT_EQ(count(em.source, "tsr::tma_load_2d_hint(sa_ + 0u, &tsr_tma0"), 1u);
  EXPECT_EQ(em.info.params[7].box[1], 32);
  EXPECT_EQ(count(em.source, "tsr::mbar_arrive_cluster(empty_ + 8u * "), 2u);
  EXPECT_NE(em.source.find("const uint32_t mc_peer_ = tsr::cluster_rank() ^ 1u;"), std::string::npos);
  // Without the knob: one CTA per program, whole B boxes.
  CudaEmission one = emit(*lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}}));
  EXPECT_EQ(one.info.persistent_cluster, 1);
  EXPECT_EQ(one.source.find("cluster"), std::string::npos);
  EXPECT_EQ(one.info.params[7].box[1], 64);

  // Not taken, with a note: a stream-K compilation; an error: a value without a meaning.
  CudaTarget sk = planning_target("sm_90a");
  sk.stream_k = true;
  CudaEmission streamk = emit_cuda_with_info(*k, sk);
  EXPECT_EQ(streamk.info.persistent_cluster, 1);
  EXPECT_NE(notes(streamk).find("cluster_m = 2 not taken: stream-K"), std::string::npos) << notes(streamk);
  k->set_constexpr("cluster_m", 3);
  EXPECT_THROW(emit(*k), TesseraError);

  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  EXPECT_FALSE(nvrtc_compile(em.source, planning_target("sm_90a"), "pairs.cu", em.line_op).cubin.empty());
  // Narrower tiles, and B as [N, K] (K-major: half of each box's BLOCK_N rows) in bf16 and fp8.
  for (int64_t bn : {64, 128}) {
    auto n = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 64}, {"BLOCK_N", bn}, {"BLOCK_K", 64}});
    n->set_constexpr("cluster_m", 2);
    CudaEmission e = emit(*n);
    EXPECT_EQ(e.stats["tma-multicast"], 1);
    EXPECT_FALSE(nvrtc_compile(e.source, planning_target("sm_90a"), "pairs_n.cu", e.line_op).cubin.empty());
  }
  for (std::string in : {"bf16", "f8e4m3"}) {
    auto nt = testutil::nt_matmul(in, "bf16", 128, 256, in == "bf16" ? 64 : 128);
    nt->set_constexpr("cluster_m", 2);
    CudaEmission e = emit(*nt);
    EXPECT_EQ(e.stats["tma-multicast"], 1) << notes(e);
    EXPECT_NE(e.source.find("+ mc_rank_ * 16384u"), std::string::npos) << e.source;  // 128 of 256 rows
    EXPECT_FALSE(nvrtc_compile(e.source, planning_target("sm_90a"), "pairs_nt.cu", e.line_op).cubin.empty());
  }
}

// Knob epilogue_overlap = 1 (the default): the producer warpgroup and the consumer warpgroups
// run their own loops over the programs (setmaxnreg moves registers to the consumers); a consumer packs its
// finished block into 16-bit pairs and stores box c of it during iteration c of the next
// program's wgmma loop, the boxes the loop had too few iterations for after it, and the last
// program's block after its program loop.
TEST(CudaWgmma, EpilogueOverlapStoresEachBlockDuringTheNextProgramsLoop) {
  auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}});
  k->set_constexpr("epilogue_overlap", 1);
  CudaEmission em = emit(*k);
  const std::string& src = em.source;
  EXPECT_EQ(em.stats["epilogue-overlap"], 1) << notes(em);
  EXPECT_NE(notes(em).find("epilogue overlapped"), std::string::npos) << notes(em);
  // The roles' branches, each with its register target and its own program loop.
  const size_t prod = src.find("if (tsr_tid >= 256) {"), cons = src.find("} else {  // the consumer warpgroups");
  ASSERT_NE(prod, std::string::npos) << src;
  ASSERT_NE(cons, std::string::npos) << src;
  EXPECT_LT(prod, src.find("tsr::setmaxnreg_dec<40>();"));
  EXPECT_LT(cons, src.find("tsr::setmaxnreg_inc<232>();"));
  EXPECT_EQ(count(src, "for (int64_t tsr_t = blockIdx.x; tsr_t < tsr_programs; tsr_t += gridDim.x) {"), 2u);
  EXPECT_EQ(src.find("if (warp_ >= 8)"), std::string::npos);
  // The producer's loop copies and stores nothing; the consumers' loop runs the wgmma.
  const std::string producer = src.substr(prod, cons - prod), consumer = src.substr(cons);
  EXPECT_EQ(count(producer, "tsr::tma_load_2d_hint("), 5u);
  EXPECT_EQ(producer.find("wgmma"), std::string::npos);
  EXPECT_EQ(producer.find("epilogue_box"), std::string::npos);
  EXPECT_EQ(consumer.find("tma_load"), std::string::npos);
  // Packed at the store; box c in iteration c, after the loop when it ran fewer, at the end.
  EXPECT_NE(consumer.find("uint32_t pk_[64];"), std::string::npos);
  EXPECT_NE(consumer.find("[0][j_][2]) | (cv_(frag"), std::string::npos) << consumer;
  EXPECT_NE(consumer.find("pk_[2 * j_ + 1] = cv_(frag"), std::string::npos);
  EXPECT_NE(consumer.find(" * 128) + (tsr_tid / 128) * 64;"), std::string::npos);
  EXPECT_NE(consumer.find("pcol_ = int(int64_t(v"), std::string::npos);
  const std::string box3 = "tsr::epilogue_box_sw128<3, 1>(&tsr_tma2, epi_buf_ + 8192u, pk_, pcol_, prow_);";
  EXPECT_NE(consumer.find("else if (i_ == 3) " + box3), std::string::npos) << consumer;
  EXPECT_NE(consumer.find(" <= 3) " + box3), std::string::npos);
  EXPECT_EQ(count(consumer, "tsr::epilogue_box_sw128<"), 12u);
  EXPECT_EQ(count(consumer, "tsr::tma_store_2d"), 0u);  // (only inside epilogue_box_sw128)
  // In iteration i_, the box goes between the group's commit and the wait for the one before.
  const size_t commit = consumer.find("tsr::wgmma_commit();");
  EXPECT_LT(commit, consumer.find("if (i_ == 0) tsr::epilogue_box_sw128<0, 1>"));
  EXPECT_LT(consumer.find("if (i_ == 0) tsr::epilogue_box_sw128<0, 1>"), consumer.find("tsr::wgmma_wait<1>();"));
  // It is the default; turned off, one program loop and no register targets.
  EXPECT_EQ(emit(*lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}})).stats["epilogue-overlap"], 1);
  k->set_constexpr("epilogue_overlap", 0);
  CudaEmission plain = emit(*k);
  k->set_constexpr("epilogue_overlap", 1);
  EXPECT_EQ(plain.source.find("setmaxnreg"), std::string::npos);
  EXPECT_EQ(plain.source.find("pk_"), std::string::npos);
  EXPECT_EQ(plain.stats.count("epilogue-overlap"), 0u);

  // Not taken, each with a note: a direct (non-TMA) epilogue, and a
  // block whose accumulators and packed copy need more registers than a consumer can have
  // (192 x 192: three consumer warpgroups share 152 each; 192 x 256 does not take wgmma at all).
  // An error: a value without a meaning.
  auto nt = [](int bm, int bn) { return testutil::nt_matmul("bf16", "bf16", bm, bn, 64); };
  auto note_for = [&](auto&& adjust, int64_t bm = 128, int64_t bn = 256) {
    auto n = nt(bm, bn);
    n->set_constexpr("epilogue_overlap", 1);
    adjust(*n);
    CudaTarget t = planning_target("sm_90a");
    CudaEmission e = emit_cuda_with_info(*n, t);
    EXPECT_EQ(e.stats.count("epilogue-overlap"), 0u) << notes(e);
    return notes(e);
  };
  EXPECT_NE(note_for([](Kernel& n) { n.set_constexpr("tma_store_epilogue", 0); }).find("not taken: the epilogue is not staged"),
            std::string::npos);
  EXPECT_NE(note_for([](Kernel&) {}, 192, 192).find("96 accumulator and 48 packed registers"), std::string::npos);
  // By default (the knob not set) a kernel that cannot have it takes the plain epilogue quietly.
  CudaEmission quiet = emit(*nt(192, 192));
  EXPECT_EQ(quiet.stats.count("epilogue-overlap"), 0u);
  EXPECT_EQ(notes(quiet).find("epilogue_overlap"), std::string::npos) << notes(quiet);
  k->set_constexpr("epilogue_overlap", 2);
  EXPECT_THROW(emit(*k), TesseraError);

  // NVRTC compiles every overlapped shape; ptxas fits the default one without spills (the
  // consumer side needs more than the 168 registers a thread has without setmaxnreg).
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  EXPECT_FALSE(nvrtc_compile(src, planning_target("sm_90a"), "overlap.cu", em.line_op).cubin.empty());
  codegentest::PtxasReport r = codegentest::ptxas_report(src, "sm_90a");
  if (r.skip.empty()) {
    EXPECT_FALSE(r.spills()) << r.out;
  }
  // With cluster pairs (TMA multicast of B) too.
  auto pairs = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}});
  pairs->set_constexpr("cluster_m", 2);
  CudaEmission ep = emit(*pairs);
  EXPECT_EQ(ep.stats["epilogue-overlap"], 1) << notes(ep);
  EXPECT_EQ(ep.stats["tma-multicast"], 1);
  codegentest::PtxasReport rp = codegentest::ptxas_report(ep.source, "sm_90a");
  if (rp.skip.empty()) {
    EXPECT_FALSE(rp.spills()) << rp.out;
  }
  struct Shape {
    int64_t bm, bn;
    const char* setmaxnreg;  // the consumers' target, or "" where they need none
  };
  // (B as [N, K], K-major in shared memory, through the NT matmul.)
  for (const Shape& sh : {Shape{64, 64, ""}, Shape{64, 256, ""}, Shape{128, 64, "<232>"}, Shape{128, 192, "<232>"},
                          Shape{192, 128, "<152>"}}) {
    SCOPED_TRACE(std::to_string(sh.bm) + " x " + std::to_string(sh.bn));
    auto n = nt(sh.bm, sh.bn);
    n->set_constexpr("epilogue_overlap", 1);
    CudaEmission e = emit(*n);
    ASSERT_EQ(e.stats["epilogue-overlap"], 1) << notes(e);
    EXPECT_EQ(e.source.find("setmaxnreg_inc") != std::string::npos, *sh.setmaxnreg != 0);
    if (*sh.setmaxnreg) {
      EXPECT_NE(e.source.find(std::string("setmaxnreg_inc") + sh.setmaxnreg), std::string::npos);
    }
    // An odd number of 64-column boxes waits for every earlier store (see emit_wgmma_tma_store).
    EXPECT_NE(e.source.find("tsr::epilogue_box_sw128<0, " + std::string(sh.bn / 64 % 2 ? "0" : "1") + ">"),
              std::string::npos);
    EXPECT_FALSE(nvrtc_compile(e.source, planning_target("sm_90a"), "overlap_n.cu", e.line_op).cubin.empty());
  }
  // fp8 with per-tensor scales (the epilogue's scalar chain is applied as the block is packed).
  auto f8 = bind_constexprs(*find_library_kernel("matmul_fp8")->build(ScalarKind::BF16),
                            {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 128}});
  f8->set_constexpr("epilogue_overlap", 1);
  CudaEmission e8 = emit(*f8);
  ASSERT_EQ(e8.stats["epilogue-overlap"], 1) << notes(e8);
  EXPECT_FALSE(nvrtc_compile(e8.source, planning_target("sm_90a"), "overlap_fp8.cu", e8.line_op).cubin.empty());
  codegentest::PtxasReport r8 = codegentest::ptxas_report(e8.source, "sm_90a");
  if (r8.skip.empty()) {
    EXPECT_FALSE(r8.spills()) << r8.out;
  }
}

// cluster_m = 2 with an odd number of program rows: the last pair's second CTA runs program
// row tsr_grid0, outside the kernel's grid, only to keep its partner's multicast protocol. A grid
// need not cover the whole output (here floor(M / 128) rows of tiles: the interpreter writes
// nothing past them), so that program's store is skipped, whichever epilogue makes it (the
// overlapped one packs nothing and leaves nothing pending: its loop stored the block before).
TEST(CudaWgmma, ClusterPairsProgramPastAnOddGridStoresNothing) {
  std::string t = testutil::nt_matmul_text("bf16", "bf16", 128, 256, 64);
  const std::string ceil_rows = "%gm = div %mr, %bm : i32";
  ASSERT_NE(t.find(ceil_rows), std::string::npos);
  t.replace(t.find(ceil_rows), ceil_rows.size(), "%gm = div %m, %bm : i32");
  struct Case {
    int64_t tma_store, overlap;
    const char* store;
  };
  for (const Case& c : {Case{1, 1, "pend_ = true;"}, Case{1, 0, "tsr::tma_store_2d(&tsr_tma3"},
                        Case{0, 0, "tsr::store_frags("}}) {
    SCOPED_TRACE("tma_store_epilogue = " + std::to_string(c.tma_store) + ", epilogue_overlap = " +
                 std::to_string(c.overlap));
    auto k = bind_constexprs(*parse_module(t, "floor_rows.tile")->kernels.at(0), {});
    k->set_constexpr("cluster_m", 2);
    k->set_constexpr("tma_store_epilogue", c.tma_store);
    k->set_constexpr("epilogue_overlap", c.overlap);
    CudaEmission em = emit(*k);
    ASSERT_EQ(em.info.persistent_cluster, 2) << notes(em);
    EXPECT_EQ(em.stats["tma-store-epilogues"], c.tma_store);
    EXPECT_EQ(em.stats["epilogue-overlap"], c.overlap);
    const std::string guard = "if (tsr_pid0 < tsr_grid0) {";
    const size_t at = em.source.find(guard);
    ASSERT_NE(at, std::string::npos) << em.source;
    EXPECT_EQ(em.source.find(guard, at + 1), std::string::npos);
    // The store is inside it: after the guard, and nothing but the store's own block between.
    EXPECT_LT(at, em.source.find(c.store)) << em.source;
    const std::string comment = "// store_tile %c, %out, %pm, %pn\n";
    const size_t cm = em.source.rfind(comment, at);  // (the producer's loop has the comment too)
    ASSERT_NE(cm, std::string::npos);
    EXPECT_EQ(em.source.find_first_not_of(' ', cm + comment.size()), at) << em.source;
    // The overlapped epilogue: the guard's else clears pend_ ("bool pend_ = false;" before the
    // program loop would match a bare search for the statement).
    const size_t els = em.source.find("} else {", at);
    if (c.overlap) {
      ASSERT_NE(els, std::string::npos) << em.source;
      EXPECT_EQ(em.source.find_first_not_of(" \n", els + 8), em.source.find("pend_ = false;", els)) << em.source;
    } else {
      EXPECT_EQ(em.source.find("pend_"), std::string::npos);
    }
    // One CTA per program: no such guard.
    k->set_constexpr("cluster_m", 1);
    EXPECT_EQ(emit(*k).source.find("tsr_pid0 < tsr_grid0"), std::string::npos);
    std::string why;
    if (!nvrtc_available(&why)) GTEST_SKIP() << why;
    EXPECT_FALSE(nvrtc_compile(em.source, planning_target("sm_90a"), "floor_rows.cu", em.line_op).cubin.empty());
  }
}

TEST(CudaWgmma, OtherWorkAtTopLevelKeepsOneCtaPerProgram) {
  std::string t =
      "kernel @mm(%a: view<bf16, [M, K]>, %b: view<bf16, [K, N]>, %c: view<bf16, [M, N]>, %d: view<f32, [M]>) {\n"
      "  grid {\n"
      "    %m = dim %a {axis = 0} : i32\n"
      "    %n = dim %b {axis = 1} : i32\n"
      "    yield %m, %n\n"
      "  }\n"
      "  %pm = program_id {axis = 0} : i32\n"
      "  %pn = program_id {axis = 1} : i32\n"
      "  %k = dim %a {axis = 1} : i32\n"
      "  %bk = const {value = 64} : i32\n"
      "  %zero = const {value = 0} : i32\n"
      "  %f0 = const {value = 0.0} : f32\n"
      "  %acc0 = splat %f0 : tile<f32, [64, 64]>\n"
      "  %acc = for %zero, %k, %bk, %acc0 {pipeline = 3} : tile<f32, [64, 64]> {\n"
      "    ^(%kk: i32, %accc: tile<f32, [64, 64]>):\n"
      "    %kt = div %kk, %bk : i32\n"
      "    %ta = load_tile %a, %pm, %kt : tile<bf16, [64, 64]>\n"
      "    %tb = load_tile %b, %kt, %pn : tile<bf16, [64, 64]>\n"
      "    %accn = dot %ta, %tb, %accc : tile<f32, [64, 64]>\n"
      "    yield %accn\n"
      "  }\n"
      "  %out = cast %acc : tile<bf16, [64, 64]>\n"
      "  store_tile %c, %out, %pm, %pn\n"
      "  %s = reduce %acc {axis = 1, kind = \"sum\"} : tile<f32, [64]>\n"
      "  store_tile %d, %s, %pm\n"
      "}\n";
  auto k = bind_constexprs(*parse_module(t, "mm.tile")->kernels.at(0), {});
  CudaEmission em = emit(*k);
  EXPECT_EQ(em.stats["dot.wgmma_tma"], 1) << notes(em);
  EXPECT_FALSE(em.info.persistent);
  EXPECT_NE(em.source.find("blockIdx.x"), std::string::npos);
  std::string why;
  if (nvrtc_available(&why)) {
    EXPECT_FALSE(nvrtc_compile(em.source, planning_target("sm_90a")).cubin.empty());
  }
}

TEST(CudaWgmma, ShapesTheRingCannotTakeStayOnMmaSyncWithAReason) {
  // BLOCK_K = 32: rows of 64 bytes, not the 128-byte swizzle atom.
  CudaEmission em = emit(*lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"BLOCK_K", 32}}));
  EXPECT_EQ(em.stats["dot.wgmma_tma"], 0);
  EXPECT_EQ(em.stats["dot.mma_pipelined"], 1);
  EXPECT_NE(notes(em).find("not wgmma: BLOCK_K = 32"), std::string::npos) << notes(em);
  // That note, on its own too (what `tessera compile` prints without --stats).
  EXPECT_NE(em.wgmma_not_taken.find(": not wgmma: BLOCK_K = 32"), std::string::npos) << em.wgmma_not_taken;
  EXPECT_EQ(std::count(em.notes.begin(), em.notes.end(), em.wgmma_not_taken), 1);
  EXPECT_EQ(emit(*lib_matmul(ScalarKind::BF16)).wgmma_not_taken, "");
  // BLOCK_M = 32: below one warpgroup's 64 rows; the note names the knob that takes it.
  em = emit(*lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 32}, {"BLOCK_N", 128}, {"BLOCK_K", 64}}));
  EXPECT_EQ(em.stats["dot.wgmma_tma"], 0);
  EXPECT_NE(notes(em).find("BLOCK_M = 32 (wgmma needs 64, 128 or 192; swap_operands = 1 would put it on wgmma's n"),
            std::string::npos)
      << notes(em);
  // 192 x 256: three consumer warpgroups and the producer's are 512 threads, 128 registers
  // each, fewer than 128 accumulators and the loop's state (ptxas would stop: "Insufficient
  // registers"); 192 x 192 and 128 x 256 fit.
  em = emit(*lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 192}, {"BLOCK_N", 256}, {"BLOCK_K", 64}}));
  EXPECT_EQ(em.stats["dot.wgmma_tma"], 0);
  EXPECT_NE(notes(em).find("128 accumulator registers per thread do not fit the 128 that 512 threads leave"),
            std::string::npos)
      << notes(em);
  for (int64_t bn : {192, 128})
    EXPECT_EQ(emit(*lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 192}, {"BLOCK_N", bn}, {"BLOCK_K", 64}})).stats["dot.wgmma_tma"], 1)
        << bn;
  // f32 operands.
  em = emit(*lib_matmul(ScalarKind::F32, {{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"BLOCK_K", 64}}));
  EXPECT_EQ(em.stats["dot.wgmma_tma"], 0);
  EXPECT_NE(notes(em).find("bf16, f16 or f8"), std::string::npos) << notes(em);
  // sm_80 and a compilation without TMA never take it (and say nothing about it on sm_80).
  em = emit(*lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}}), "sm_80");
  EXPECT_EQ(em.stats["dot.wgmma_tma"], 0);
  EXPECT_EQ(notes(em).find("wgmma"), std::string::npos) << notes(em);
  CudaTarget no_tma = planning_target("sm_90a");
  no_tma.tma = false;
  em = emit_cuda_with_info(*lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}}), no_tma);
  EXPECT_EQ(em.stats["dot.wgmma_tma"], 0);
  EXPECT_EQ(em.stats["dot.mma_pipelined"], 1);
  EXPECT_NE(notes(em).find("TMA is disabled"), std::string::npos) << notes(em);
}

// The tensor-map parameter of kernel parameter `view` (null when there is none).
const CudaParam* map_of(const CudaEmission& em, int view) {
  for (const CudaParam& p : em.info.params)
    if (p.kind == CudaParam::Kind::TensorMap && p.param_index == view) return &p;
  return nullptr;
}

// An MN-major B tile of 96 columns: three boxes of 32 columns (64 bytes) under 64-byte swizzle,
// read through 64-byte-swizzle descriptors (32-column boxes BK * 64 bytes apart, 8-row groups
// 512 bytes apart); its fragments are stored directly (no 64-column TMA-store boxes), so no
// staging is reserved and the ring holds a stage more. K-major B of 96 rows keeps 128 bytes.
TEST(CudaWgmma, NinetySixColumnsOfBTakeSixtyFourByteSwizzle) {
  auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 128}, {"BLOCK_N", 96}, {"BLOCK_K", 64}});
  CudaEmission em = emit(*k);
  ASSERT_EQ(em.stats["dot.wgmma_tma"], 1) << notes(em);
  ASSERT_NE(map_of(em, 1), nullptr);
  EXPECT_EQ(map_of(em, 1)->swizzle, 64);
  EXPECT_EQ(map_of(em, 1)->box[0], 32);
  EXPECT_EQ(map_of(em, 0)->swizzle, 128);
  EXPECT_EQ(map_of(em, 2), nullptr);  // (no TMA-store map for c)
  EXPECT_NE(em.source.find("wgmma_m64n96k16_bf16<1>"), std::string::npos);
  EXPECT_NE(em.source.find("tsr::wgmma_desc_sw64(sb_ + 1024u, 4096u, 512u)"), std::string::npos);
  EXPECT_NE(em.source.find("int(int64_t(v2) * 96 + 64)"), std::string::npos);  // the third box
  EXPECT_EQ(em.stats["pipeline-stages"], 4);
  // A pair multicasts half of each 64-byte box's rows: 32 rows x 64 bytes further on.
  auto pair = k->clone();
  pair->set_constexpr("cluster_m", 2);
  CudaEmission pe = emit(*pair);
  EXPECT_EQ(pe.stats["tma-multicast"], 1) << notes(pe);
  EXPECT_NE(pe.source.find("mc_rank_ * 2048u"), std::string::npos);
  EXPECT_EQ(map_of(pe, 1)->box[1], 32);
  // K-major (an [N, K] view): 96 rows of 128-byte atoms.
  CudaEmission nt = emit(*testutil::nt_matmul("bf16", "bf16", 128, 96, 64));
  ASSERT_EQ(nt.stats["dot.wgmma_tma"], 1) << notes(nt);
  EXPECT_EQ(map_of(nt, 1)->swizzle, 128);
  EXPECT_EQ(nt.source.find("desc_sw64"), std::string::npos);
}

// B as [N, K] with a transposed tile: K-major B in shared memory (the only layout fp8 wgmma
// reads), and the scale multiply folded into the TMA-store epilogue.
TEST(CudaWgmma, TransposedBIsKMajorAndFp8UsesK32Instructions) {
  CudaEmission em = emit(*testutil::nt_matmul("bf16", "bf16", 128, 256, 64));
  EXPECT_EQ(em.stats["dot.wgmma_tma"], 1) << notes(em);
  EXPECT_NE(em.source.find("tsr::wgmma_m64n256k16_bf16<0>"), std::string::npos);
  EXPECT_EQ(em.stats["tma-store-epilogues"], 1);
  EXPECT_EQ(em.stats["mma-fused-epilogue-ops"], 1);
  EXPECT_TRUE(em.info.persistent);
  // One A box and one B box (128 rows of K) per stage; B's tensor map box is 64 x BN.
  size_t tma = 0;
  for (size_t at = 0; (at = em.source.find("tsr::tma_load_2d_hint(", at)) != std::string::npos; ++at) ++tma;
  EXPECT_EQ(tma, 2u);
  ASSERT_NE(map_of(em, 1), nullptr);
  EXPECT_EQ(map_of(em, 1)->box[1], 256);
  EXPECT_NE(notes(em).find("B K-major"), std::string::npos) << notes(em);

  em = emit(*testutil::nt_matmul("f8e4m3", "bf16", 128, 256, 128));
  EXPECT_EQ(em.stats["dot.wgmma_tma"], 1) << notes(em);
  EXPECT_NE(em.source.find("tsr::wgmma_m64n256k32_e4m3("), std::string::npos);
  // 128 fp8 of K = one 128-byte row: 4 k32 instructions per stage; box 128 x rows.
  ASSERT_NE(map_of(em, 1), nullptr);
  EXPECT_EQ(map_of(em, 1)->box[0], 128);
  EXPECT_EQ(em.stats["pipeline-stages"], 4);
  // fp8 rows must be whole 128-byte atoms: BLOCK_K = 64 is refused with the reason.
  em = emit(*testutil::nt_matmul("f8e4m3", "bf16", 128, 256, 64));
  EXPECT_EQ(em.stats["dot.wgmma_tma"], 0);
  EXPECT_NE(notes(em).find("BLOCK_K = 64 (wgmma + TMA needs 128 or 256 for f8e4m3)"), std::string::npos) << notes(em);
}

TEST(CudaWgmma, NvrtcCompilesTransposedAndFp8Kernels) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  for (auto [in, bk] : {std::pair<std::string, int>{"bf16", 64}, {"f16", 128}, {"f8e4m3", 128}, {"f8e5m2", 128}}) {
    SCOPED_TRACE(in);
    CudaEmission em = emit(*testutil::nt_matmul(in, "bf16", 128, 128, bk));
    ASSERT_EQ(em.stats["dot.wgmma_tma"], 1) << notes(em);
    NvrtcResult r = nvrtc_compile(em.source, planning_target("sm_90a"), "nt.cu", em.line_op);
    EXPECT_FALSE(r.cubin.empty());
    EXPECT_EQ(r.log.find("serialized"), std::string::npos) << r.log;
    // The compilation the runtime falls back to when TMA cannot describe the operands (the
    // scale then runs in the mma.sync path's epilogue).
    CudaTarget no_tma = planning_target("sm_90a");
    no_tma.tma = false;
    CudaEmission fb = emit_cuda_with_info(*testutil::nt_matmul(in, "bf16", 128, 128, bk), no_tma);
    EXPECT_FALSE(nvrtc_compile(fb.source, no_tma, "nt_fallback.cu", fb.line_op).cubin.empty());
  }
}

// The library's fp8 matmul (b as [N, K]) takes the fp8 wgmma path at its sm_90a config, scales
// fused into the TMA-store epilogue.
TEST(CudaWgmma, LibraryFp8MatmulIsKMajorE4m3Wgmma) {
  auto k = bind_constexprs(*find_library_kernel("matmul_fp8")->build(ScalarKind::BF16),
                           {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 128}});
  CudaEmission em = emit(*k);
  EXPECT_EQ(em.stats["dot.wgmma_tma"], 1) << notes(em);
  EXPECT_NE(em.source.find("tsr::wgmma_m64n256k32_e4m3("), std::string::npos);
  EXPECT_EQ(em.stats["tma-store-epilogues"], 1);
  EXPECT_EQ(em.stats["mma-fused-epilogue-ops"], 1);
  EXPECT_NE(notes(em).find("B K-major"), std::string::npos) << notes(em);
}

// The Struct-layer matmul (pipes and producer/consumer roles) becomes the Lite pipelined loop in
// pipes-to-loads, so it gets the same rings: cp.async at its defaults, TMA + wgmma at a tile the
// Hopper planner takes.
TEST(CudaWgmma, StructMatmulGetsTheSameRings) {
  const LibraryKernel& lk = *find_library_kernel("matmul_struct");
  PassStats stats;
  PipelineOptions po;
  auto k = run_pipeline(*lk.build(ScalarKind::BF16), po, &stats);
  EXPECT_EQ(stats["pipes-to-loads.loops"], 1);
  CudaEmission em = emit(*k);
  EXPECT_EQ(em.stats["dot.mma_pipelined"], 1) << notes(em);
  EXPECT_EQ(em.stats.count("warp-roles-in-sequence"), 0u);
  po.config = {{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"BLOCK_K", 64}};
  em = emit(*run_pipeline(*lk.build(ScalarKind::BF16), po));
  EXPECT_EQ(em.stats["dot.wgmma_tma"], 1) << notes(em);
  EXPECT_TRUE(em.info.persistent);
}

// swap_operands = 1: a 16-row M tile runs as C^T = B^T A^T, the weights (b) on wgmma's 64-row
// blocks and the batch on n = 16; bf16 reads b MN-major (the A-transpose immediate), fp8 (b as
// [N, K]) K-major; the fragments leave transposed from registers.
TEST(CudaWgmma, SwappedOperandsPutTheBatchOnN) {
  auto k = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 16}, {"BLOCK_N", 128}, {"BLOCK_K", 64}});
  EXPECT_EQ(emit(*k).stats["dot.wgmma_tma"], 0);  // by default the mma.sync path
  k->set_constexpr("swap_operands", 1);
  CudaEmission em = emit(*k);
  ASSERT_EQ(em.stats["dot.wgmma_tma"], 1) << notes(em);
  EXPECT_EQ(em.stats["wgmma-swapped-operands"], 1);
  EXPECT_EQ(em.info.block_threads, 384);  // 128 weight rows: two consumer warpgroups
  EXPECT_NE(em.source.find("tsr::wgmma_m64n16k16_bf16<0, 1>"), std::string::npos) << em.source;
  EXPECT_EQ(em.stats["mma-transposed-epilogues"], 1);
  EXPECT_EQ(em.stats["tma-store-epilogues"], 0);
  EXPECT_NE(em.source.find("tsr::store_frags_t("), std::string::npos);
  // Stages of 16 KiB of weights and 2 KiB of the batch; the weights' map has boxes of 64 rows of
  // K x 64 columns, the batch's 16 rows x 64.
  ASSERT_NE(map_of(em, 1), nullptr);
  EXPECT_EQ(map_of(em, 1)->box[1], 64);
  ASSERT_NE(map_of(em, 0), nullptr);
  EXPECT_EQ(map_of(em, 0)->box[1], 16);
  EXPECT_NE(notes(em).find("on swapped operands"), std::string::npos) << notes(em);
  // An N tile wgmma's 64-row blocks cannot take keeps the reason.
  auto odd = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 16}, {"BLOCK_N", 32}, {"BLOCK_K", 64}});
  odd->set_constexpr("swap_operands", 1);
  CudaEmission no = emit(*odd);
  EXPECT_EQ(no.stats["dot.wgmma_tma"], 0);
  EXPECT_NE(notes(no).find("BLOCK_N = 32 (the swapped product puts it on wgmma's 64-row blocks: 64, 128, 192 or 256)"),
            std::string::npos)
      << notes(no);
  // 256 columns: four consumer warpgroups (640 threads, 8 accumulators each).
  auto wide = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 16}, {"BLOCK_N", 256}, {"BLOCK_K", 64}});
  wide->set_constexpr("swap_operands", 1);
  CudaEmission w256 = emit(*wide);
  EXPECT_EQ(w256.stats["wgmma-swapped-operands"], 1);
  EXPECT_NE(w256.source.find("wgmma_m64n16k16_bf16"), std::string::npos);
  EXPECT_NE(w256.source.find("__launch_bounds__(640"), std::string::npos);
  // No TMA-store staging is reserved for the swap, so the split-K compilation's ring holds six
  // stages of 36 KiB at 16 x 128 x 128 (five beside staging it would not use).
  auto deep = lib_matmul(ScalarKind::BF16, {{"BLOCK_M", 16}, {"BLOCK_N", 128}, {"BLOCK_K", 128}});
  deep->set_constexpr("swap_operands", 1);
  CudaTarget split6 = planning_target("sm_90a");
  split6.split_k = true;
  EXPECT_EQ(emit_cuda_with_info(*deep, split6).stats["pipeline-stages"], 6);
  // fp8: both operands K-major, no transpose immediates.
  auto f8 = bind_constexprs(*find_library_kernel("matmul_fp8")->build(ScalarKind::BF16),
                            {{"BLOCK_M", 32}, {"BLOCK_N", 64}, {"BLOCK_K", 128}});
  f8->set_constexpr("swap_operands", 1);
  CudaEmission e8 = emit(*f8);
  ASSERT_EQ(e8.stats["dot.wgmma_tma"], 1) << notes(e8);
  EXPECT_NE(e8.source.find("tsr::wgmma_m64n32k32_e4m3("), std::string::npos);
  EXPECT_EQ(e8.stats["mma-fused-epilogue-ops"], 1);  // the scales, on the transposed store too
  // The split-K compilation adds the parts as before; its rows past the output are columns now.
  CudaTarget split = planning_target("sm_90a");
  split.split_k = true;
  CudaEmission es = emit_cuda_with_info(*k, split);
  EXPECT_TRUE(es.info.split_k);
  EXPECT_NE(es.source.find("tsr::store_frags_t("), std::string::npos);
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  for (const CudaEmission* e : {&em, &e8, &es}) {
    NvrtcResult r = nvrtc_compile(e->source, planning_target("sm_90a"), "swapped.cu", e->line_op);
    EXPECT_FALSE(r.cubin.empty());
    EXPECT_EQ(r.log.find("serialized"), std::string::npos) << r.log;
  }
}

// A kernel that stores an mma.sync loop's fragments before its swapped wgmma loop: the first
// store is direct, the second transposed (the transposed store once looked the swapped dot's
// fragments up before they existed: an internal error).
TEST(CudaWgmma, SwappedLoopAfterAnMmaSyncLoop) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/tests/cuda_codegen/data/swapped_after_mma_loop.tile");
  std::stringstream text;
  text << in.rdbuf();
  auto m = parse_module(text.str(), "swapped_after_mma_loop.tile");
  auto k = bind_constexprs(*m->kernels.at(0), {});
  CudaEmission em = emit(*k);
  EXPECT_EQ(em.stats["wgmma-swapped-operands"], 1) << notes(em);
  EXPECT_EQ(em.stats["mma-transposed-epilogues"], 1);
  EXPECT_EQ(em.stats["mma-direct-epilogues"], 1);
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  EXPECT_FALSE(nvrtc_compile(em.source, planning_target("sm_90a"), "two.cu", em.line_op).cubin.empty());
}

// NVRTC accepts every block shape the planner takes, in bf16 and f16.
TEST(CudaWgmma, NvrtcCompilesEveryPlannedShape) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  struct Cfg {
    int64_t m, n, k;
  };
  for (ScalarKind dt : {ScalarKind::BF16, ScalarKind::F16})
    for (Cfg c : {Cfg{128, 256, 64}, Cfg{128, 128, 64}, Cfg{64, 64, 64}, Cfg{64, 256, 64}, Cfg{128, 64, 64},
                  Cfg{128, 96, 64}}) {
      SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k));
      auto k = lib_matmul(dt, {{"BLOCK_M", c.m}, {"BLOCK_N", c.n}, {"BLOCK_K", c.k}});
      CudaEmission em = emit(*k);
      ASSERT_EQ(em.stats["dot.wgmma_tma"], 1) << notes(em);
      NvrtcResult r = nvrtc_compile(em.source, planning_target("sm_90a"), "wgmma.cu", em.line_op);
      EXPECT_FALSE(r.cubin.empty());
      // ptxas would say so if it had to serialize the wgmma instructions.
      EXPECT_EQ(r.log.find("serialized"), std::string::npos) << r.log;
    }
}

}  // namespace
}  // namespace tessera
