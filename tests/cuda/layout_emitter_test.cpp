// The layout emitter (src/cuda/EmitLowered.cpp, DistLayout.h) without a GPU: where layouts put
// elements (checked against the PTX ISA's mma.m16n8k16 fragment tables), which corpus kernels
// it prints, and that NVRTC compiles the bf16 FlashAttention it prints into two mma.sync dots
// fed by ldmatrix from a cp.async ring (sm_80), or into wgmma dots fed by a TMA ring (sm_90a).
// tests/gpu/layout_emitter_gpu_test.cpp runs them against the interpreter.
#include <filesystem>
#include <map>
#include <optional>
#include <regex>

#include "CudaTestUtil.h"
#include "../common/NtMatmulText.h"
#include "../common/ScopedEnv.h"
#include "cuda/CubinInfo.h"
#include "cuda/DistLayout.h"

namespace tessera::cudatest {
namespace {

using cudagen::Dist;
using cudagen::make_dist;
using cudagen::same_thread_slots;

std::vector<int64_t> at(const Dist& d, int64_t slot, int lane, int warp = 0) { return d.coord(slot, lane, warp); }

// A blocked layout of more warps (or lanes) than the program has is NotLowerable (the kernel
// then goes to the planning emitter with a note), not an index past the warp bits.
TEST(DistLayout, BlockedOfMoreWarpsThanTheProgramIsNotLowerable) {
  const Layout eight = Layout::blocked({1, 4}, {4, 8}, {8, 1}, {1, 0});
  try {
    make_dist(eight, {32, 32}, 4);
    ADD_FAILURE() << "8 warps placed in a program of 4";
  } catch (const cudagen::NotLowerable& e) {
    EXPECT_NE(e.why.find("not the program's"), std::string::npos) << e.why;
  }
}

TEST(DistLayout, MmaAccumulatorIsThePtxFragment) {
  // c0, c1 = C[g][2t, 2t + 1], c2, c3 = C[g + 8][...], g = lane / 4, t = lane % 4; then the n8
  // tiles, then the m16 tiles (here 2 x 2 tiles per warp, warps [2, 2]).
  Layout acc = Layout::mma(2, {2, 2}, {16, 8});
  Dist d = make_dist(acc, {64, 32}, 4);
  ASSERT_EQ(d.slots(), 16);
  const int lane = 4 * 5 + 3;  // g = 5, t = 3
  EXPECT_EQ(at(d, 0, lane), (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(at(d, 1, lane), (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(at(d, 2, lane), (std::vector<int64_t>{13, 6}));
  EXPECT_EQ(at(d, 4, lane), (std::vector<int64_t>{5, 6 + 16}));   // next n8 tile: past wn = 2 warps
  EXPECT_EQ(at(d, 8, lane), (std::vector<int64_t>{5 + 32, 6}));  // next m16 tile: past wm = 2 warps
  EXPECT_EQ(at(d, 0, lane, 1), (std::vector<int64_t>{5, 6 + 8}));   // warp 1 = (0, 1)
  EXPECT_EQ(at(d, 0, lane, 2), (std::vector<int64_t>{5 + 16, 6}));  // warp 2 = (1, 0)
}

TEST(DistLayout, MmaOperandsAreThePtxFragments) {
  Layout acc = Layout::mma(2, {4, 1}, {16, 8});
  const int lane = 4 * 2 + 1;  // g = 2, t = 1
  // A: a0 = A[g][2t..], a1 = A[g + 8][2t..], a2 = A[g][2t + 8..], a3 = A[g + 8][2t + 8..].
  Dist a = make_dist(Layout::dot_operand(acc, 0, 2), {64, 32}, 4);
  EXPECT_EQ(a.slots(), 16);
  EXPECT_EQ(at(a, 0, lane), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(at(a, 3, lane), (std::vector<int64_t>{10, 3}));
  EXPECT_EQ(at(a, 5, lane), (std::vector<int64_t>{2, 11}));
  EXPECT_EQ(at(a, 8, lane), (std::vector<int64_t>{2, 18}));  // the next k16 step
  EXPECT_EQ(at(a, 0, lane, 3), (std::vector<int64_t>{50, 2}));
  // B: b0 = B[2t..][g], b1 = B[2t + 8..][g]; every warp holds all of B (wn = 1).
  Dist b = make_dist(Layout::dot_operand(acc, 1, 2), {32, 16}, 4);
  EXPECT_EQ(b.slots(), 16);
  EXPECT_EQ(at(b, 1, lane), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(at(b, 2, lane), (std::vector<int64_t>{10, 2}));
  EXPECT_EQ(at(b, 4, lane), (std::vector<int64_t>{18, 2}));  // the next k16 step
  EXPECT_EQ(at(b, 8, lane), (std::vector<int64_t>{2, 10}));  // the next n8 tile
  EXPECT_EQ(at(b, 1, lane, 3), at(b, 1, lane, 0));
  EXPECT_EQ(b.owner_expr(), "((tsr_warp & 3) == 0)");
}

TEST(DistLayout, AccumulatorFeedsTheNextDotFromRegisters) {
  // FlashAttention's P: the scores' accumulator layout is the A operand's, thread by thread.
  Layout acc = Layout::mma(2, {4, 1}, {16, 8});
  Dist c = make_dist(acc, {64, 64}, 4), a = make_dist(Layout::dot_operand(acc, 0, 2), {64, 64}, 4);
  auto id = [](const std::vector<int64_t>& x) { return x; };
  EXPECT_EQ(same_thread_slots(c, a, 128, id).size(), size_t(a.slots()));
  // B needs other threads' elements.
  Dist b = make_dist(Layout::dot_operand(acc, 1, 2), {64, 64}, 4);
  EXPECT_TRUE(same_thread_slots(c, b, 128, id).empty());
}

TEST(DistLayout, FmaOperandsHoldWhatTheirAccumulatorSlotsNeed) {
  // The accumulator [16, 64]: 4 columns per thread, lane bits 0..3 along N and bit 4 along M,
  // warps along M (rows 0..7, then 8..15 in the next slots). A [16, 32] holds the thread's rows
  // and every k, k fastest; B [32, 64] the thread's columns and every k, k slowest; the lanes
  // and warps that tell the other dim apart hold copies.
  Layout acc = Layout::blocked({1, 4}, {2, 16}, {4, 1}, {1, 0});
  Dist a = make_dist(Layout::dot_operand(acc, 0, 1), {16, 32}, 4);
  EXPECT_EQ(a.slots(), 2 * 32);
  EXPECT_EQ(at(a, 5, 16, 2), (std::vector<int64_t>{5, 5}));        // lane bit 4: row 1, warp 2: row + 4
  EXPECT_EQ(at(a, 32 + 7, 16, 2), (std::vector<int64_t>{13, 7}));  // the second row block
  EXPECT_EQ(at(a, 5, 16 + 3, 2), at(a, 5, 16, 2));                 // lanes along N: copies
  EXPECT_EQ(a.owner_expr(), "((tsr_lane & 15) == 0)");
  Dist b = make_dist(Layout::dot_operand(acc, 1, 1), {32, 64}, 4);
  EXPECT_EQ(b.slots(), 4 * 32);
  EXPECT_EQ(at(b, 3 + 4 * 10, 5, 0), (std::vector<int64_t>{10, 4 * 5 + 3}));
  EXPECT_EQ(at(b, 3, 5 + 16, 3), at(b, 3, 5, 0));  // lane bit 4 and the warps (along M): copies
  EXPECT_EQ(b.owner_expr(), "((tsr_lane & 16) == 0 && (tsr_warp & 3) == 0)");
  // Every accumulator slot finds its row of A and column of B in the same thread.
  Dist c = make_dist(acc, {16, 64}, 4), mnk = c;
  mnk.shape.push_back(32);
  mnk.digits.insert(mnk.digits.begin(), Dist::Digit{32, 2, 1});
  EXPECT_EQ(same_thread_slots(a, mnk, 128, [](const std::vector<int64_t>& x) { return std::vector<int64_t>{x[0], x[2]}; }).size(),
            size_t(mnk.slots()));
  EXPECT_EQ(same_thread_slots(b, mnk, 128, [](const std::vector<int64_t>& x) { return std::vector<int64_t>{x[2], x[1]}; }).size(),
            size_t(mnk.slots()));
}

// A permuted layout puts each element where its parent puts the unpermuted tile's: the
// transposed wgmma accumulator of the swapped product ([64, 16] permuted to [16, 64]).
TEST(DistLayout, PermutedIsTheParentsPlacementTransposed) {
  const Layout acc = Layout::mma(3, {4, 1}, {64, 16});
  Dist p = make_dist(acc, {64, 16}, 4), t = make_dist(Layout::permuted(acc, {1, 0}), {16, 64}, 4);
  ASSERT_EQ(p.slots(), t.slots());
  for (int warp : {0, 3})
    for (int lane : {0, 5, 31})
      for (int64_t s = 0; s < p.slots(); ++s) {
        const std::vector<int64_t> c = at(p, s, lane, warp);
        EXPECT_EQ(at(t, s, lane, warp), (std::vector<int64_t>{c[1], c[0]})) << s << " " << lane << " " << warp;
      }
}

TEST(DistLayout, SliceOfBlockedAndWrap) {
  Layout bl = Layout::blocked({1, 4}, {2, 16}, {4, 1}, {1, 0});
  Dist d = make_dist(bl, {64, 64}, 4);  // covers [8, 64]: 8 repeats along dim 0
  EXPECT_EQ(d.slots(), 32);
  // slot 5: column 1, repeat 1 (row 8); lane 17: column + 4, row + 1; warp 2: row + 4.
  EXPECT_EQ(at(d, 5, 17, 2), (std::vector<int64_t>{13, 5}));
  Dist s = make_dist(Layout::slice(bl, 1), {64}, 4);
  EXPECT_EQ(s.slots(), 8);
  EXPECT_EQ(s.owner_expr(), "((tsr_lane & 15) == 0)");  // lanes along the sliced dim hold copies
  // A tile smaller than the layout: the warps past it hold copies.
  Dist w = make_dist(bl, {2, 64}, 4);
  EXPECT_EQ(w.slots(), 4);
  EXPECT_EQ(w.owner_expr(), "((tsr_warp & 3) == 0)");
}

// The layout emitter's emission of a bound kernel for `target`, and whether it printed it.
// How many times `what` stands in `text`.
size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

CudaEmission by_layouts(const Kernel& bound, const std::string& target, bool* printed,
                        const std::vector<std::string>& disabled = {}) {
  CudaTarget t = CudaTarget::parse(target);
  t.emitter = CudaTarget::Emitter::Layouts;
  t.disabled_passes = disabled;
  CudaEmission em = emit_cuda_with_info(*run_pipeline(bound, {}), t);
  *printed = false;
  for (const std::string& n : em.notes) *printed |= n.find("printed from the GPU lowering") != std::string::npos;
  return em;
}

// The layout emitter prints every corpus kernel for sm_80 and sm_90a (none falls back to the
// planning emitter; one note says which emitter made it).
TEST(LayoutEmitter, PrintsEveryCorpusKernel) {
  for (const char* target : {"sm_80", "sm_90a"})
    for (auto& e : std::filesystem::directory_iterator(std::string(TESSERA_SOURCE_DIR) + "/tests/corpus")) {
      if (e.path().extension() != ".tile") continue;
      auto m = parse_file(e.path().string());
      for (auto& k : m->kernels) {
        bool printed = false;
        CudaEmission em = by_layouts(*bind_constexprs(*k, {}), target, &printed);
        const bool fell_back = std::any_of(em.notes.begin(), em.notes.end(), [](const std::string& n) {
          return n.find("layout emitter cannot print") != std::string::npos;
        });
        EXPECT_TRUE(printed && !fell_back) << target << " " << k->name << ": " << em.notes.back();
      }
    }
}

// Every library kernel, in each of its dtypes, is printed by the layout emitter for sm_80 and
// sm_90a (bound with the target's preferred config, as `tessera compile` binds it): topk's
// whole-row kernel too since session 55 (its Struct buffer of row copies: alloc, async_copy,
// async_wait and buffer_read, each thread reading its elements). matmul_fp8's bf16 and f16 results
// on sm_90a are printed on wgmma, its f32 result there (BLOCK_K 64, narrower than an f8
// 128-byte swizzled row: wgmma declines) on mma.sync m16n8k32 with the fragments loaded ahead,
// and on sm_80 (no f8 mma) as FMA dots.
TEST(LayoutEmitter, PrintsEveryLibraryKernel) {
  for (const std::string target : {"sm_80", "sm_90a"})
    for (const LibraryKernel& lk : library())
      for (ScalarKind dt : lk.dtypes) {
        auto k = bind_constexprs(*lk.build(dt), library_config(lk, dt, "cuda:" + target));
        bool printed = false;
        CudaEmission em = by_layouts(*k, target, &printed);
        EXPECT_TRUE(printed) << lk.name << " " << scalar_name(dt) << " " << target << ": " << em.notes.back();
        if (lk.name == "topk") {  // (its row slots read a 16-byte run a thread at a time)
          EXPECT_GT(em.stats["struct-smem-bytes"], 0) << scalar_name(dt) << " " << target;
          EXPECT_GT(em.stats["vector-buffer-reads"], 0) << scalar_name(dt) << " " << target;
        }
        if (lk.name == "matmul_fp8") {
          const char* stat = target == "sm_80" ? "fma-dots" : dt == ScalarKind::F32 ? "mma-fragments-ahead" : "wgmma-dots-in-flight";
          EXPECT_EQ(em.stats[stat], 1) << scalar_name(dt) << " " << target << ": " << stat;
        }
      }
}

// The segmented top-k's kernels (topk_stages at issue 18's shapes: 64 x 131072 k = 64, the
// segments and the merge; 1 x 2^24 k = 1024, a candidate level too) are printed by the layout
// emitter for sm_80 and sm_90a in f32 and bf16: their histograms' and keep flags' prefix sums
// are block scans from registers (lowered_block_scan), and NVRTC compiles them. (The whole-row
// form, the library's own topk kernel: above.)
TEST(LayoutEmitter, PrintsTheSegmentedTopk) {
  std::string why;
  const bool nvrtc = nvrtc_available(&why);
  const LibraryKernel* lk = find_library_kernel("topk");
  for (const char* target : {"sm_80", "sm_90a"})
    for (ScalarKind dt : {ScalarKind::F32, ScalarKind::BF16})
      for (const Sizes& s : {Sizes{{"M", 64}, {"N", 131072}, {"K", 64}}, Sizes{{"M", 1}, {"N", 1 << 24}, {"K", 1024}}}) {
        LibraryStages st = lk->stages(dt, std::string("cuda:") + target, s, {});
        ASSERT_GE(st.stages.size(), 2u);
        for (const LibraryStage& stage : st.stages) {
          auto k = bind_constexprs(*stage.build(dt), stage.config);
          SCOPED_TRACE(k->name + " " + std::string(scalar_name(dt)) + " " + target);
          bool printed = false;
          CudaEmission em = by_layouts(*k, target, &printed);
          EXPECT_TRUE(printed) << em.notes.back();
          if (k->name != "topk_bucket_best") EXPECT_GE(em.stats["block-scans"], 1);  // (the bests: a `min`)
          if (nvrtc && s.at("M") == 64) expect_nvrtc_accepts(em, CudaTarget::parse(target));
        }
      }
}

// The scans the block scan does not take (a max, a min, a bf16 sum, sums of several lines),
// scan_with and reduce_with go through shared memory, in parts where the tile is larger than the
// exchanges' scratch, an insert_tile of a sub-tile larger than it in parts, and a tile carried
// through a while in its layout (tests/cuda_codegen/data/shared_folds.tile, which the GPU test runs): printed by the layout
// emitter for sm_80 and sm_90a, NVRTC compiles them.
TEST(LayoutEmitter, PrintsFoldsAndLargeInsertsThroughSharedMemory) {
  std::string why;
  const bool nvrtc = nvrtc_available(&why);
  auto m = parse_file(std::string(TESSERA_SOURCE_DIR) + "/tests/cuda_codegen/data/shared_folds.tile");
  ASSERT_EQ(m->kernels.size(), 9u);
  for (const char* target : {"sm_80", "sm_90a"})
    for (auto& k : m->kernels) {
      SCOPED_TRACE(k->name + " " + target);
      bool printed = false;
      CudaEmission em = by_layouts(*bind_constexprs(*k, {}), target, &printed);
      EXPECT_TRUE(printed) << em.notes.back();
      const std::string& n = k->name;
      EXPECT_EQ(em.stats["shared-scans"], n == "lse_line" || n == "insert_large" || n == "halve_while" || n == "store_in_while" ? 0 : 1);
      EXPECT_EQ(em.stats["tiles-through-while"], n == "halve_while" || n == "store_in_while" ? 1 : 0);
      EXPECT_EQ(em.stats["shared-reductions"], n == "lse_line" || n == "halving_rows" ? 1 : 0);
      EXPECT_EQ(em.source.find("for (int c_ = 0; c_ < ") != std::string::npos,
                n == "cummax_rows" || n == "cumsum_cols" || n == "lse_line" || n == "halving_rows");
      EXPECT_EQ(em.source.find("for (int pt_ = 0; pt_ < 2; ++pt_)") != std::string::npos, n == "insert_large");
      if (nvrtc) expect_nvrtc_accepts(em, CudaTarget::parse(target));
      // Auto prints them on the layout emitter too (they ran on the H100 in session 56), but for
      // the folds whose line stride was made odd after that run (unrun_layout_paths).
      const bool odd = n == "cummax_rows" || n == "cumsum_cols" || n == "halving_rows";
      EXPECT_EQ(em.stats["folds-odd-stride"], !odd ? 0 : n == "halving_rows" ? 2 : 1);  // (its scan_with and reduce_with)
      const CudaEmission by_default = emit_cuda_with_info(*run_pipeline(*bind_constexprs(*k, {}), {}), CudaTarget::parse(target));
      EXPECT_EQ(by_default.lowered != nullptr, !odd) << by_default.notes.back();
    }
}

// A tile whose layout leaves a thread more than kMaxSlots elements (a replicated [3000]: every
// thread all of it) is the planning emitter's: the layout emitter's unrolled register arrays
// kept NVRTC busy for minutes (found by fuzzing). A replicated [96] tile still prints.
// The tuner's small blocks on 4 warps (16 x 16, 16 x 32, 32 x 16: 122 of the 2304 library
// configs fell back) take an mma.sync warp grid of fewer warps, along N only as far as whole
// n8 tiles go (an even number of them where B is read from shared memory), the warps left over
// holding copies (`tsr_warp / wn % wm`): printed by the layout emitter on sm_80 and sm_89, NVRTC
// compiles them; Auto prints them so too (they ran on the H100 in session 56).
TEST(LayoutEmitter, SmallMmaTilesTakeAWarpGridWithCopyWarps) {
  std::string why;
  const bool nvrtc = nvrtc_available(&why);
  for (const char* name : {"matmul", "matmul_struct", "matmul_fp8"})
    for (const auto& [bm, bn, grid] : {std::tuple{16, 16, "wm_ = tsr_warp / 1 % 1, wn_ = tsr_warp % 1"},
                                       {16, 32, "wm_ = tsr_warp / 2 % 1, wn_ = tsr_warp % 2"},
                                       {32, 16, "wm_ = tsr_warp / 1 % 2, wn_ = tsr_warp % 1"}}) {
      const char* target = std::string(name) == "matmul_fp8" ? "sm_89" : "sm_80";
      auto k = bind_constexprs(*find_library_kernel(name)->build(ScalarKind::BF16), {{"BLOCK_M", bm}, {"BLOCK_N", bn}});
      SCOPED_TRACE(std::string(name) + " " + std::to_string(bm) + " x " + std::to_string(bn));
      bool printed = false;
      CudaEmission em = by_layouts(*k, target, &printed);
      ASSERT_TRUE(printed) << em.notes.back();
      EXPECT_EQ(em.stats["mma-copy-warps"], 1);
      EXPECT_NE(em.source.find(grid), std::string::npos);
      if (nvrtc) expect_nvrtc_accepts(em, CudaTarget::parse(target));
      const CudaEmission by_default = emit_cuda_with_info(*run_pipeline(*k, {}), CudaTarget::parse(target));
      EXPECT_NE(by_default.lowered, nullptr) << by_default.notes.back();
    }
  // FlashAttention at 16 x 16 blocks: its softmax reduces the scores' accumulator over a grid
  // with copy warps (Auto prints it so too since it ran on the H100 in session 56).
  auto fa = parse_file(std::string(TESSERA_SOURCE_DIR) + "/tests/corpus/flash_attention_bf16.tile");
  auto k = bind_constexprs(*fa->kernels.at(0), {{"BM", 16}, {"BN", 16}});
  bool printed = false;
  CudaEmission em = by_layouts(*k, "sm_80", &printed);
  ASSERT_TRUE(printed) << em.notes.back();
  EXPECT_GE(em.stats["reductions-over-copy-warps"], 1);
  if (nvrtc) expect_nvrtc_accepts(em, CudaTarget::parse("sm_80"));
  const CudaEmission by_default = emit_cuda_with_info(*run_pipeline(*k, {}), CudaTarget::parse("sm_80"));
  EXPECT_NE(by_default.lowered, nullptr) << by_default.notes.back();
}

// An f8 dot of B [K, N] as loaded (tests/cuda_codegen/data/f8_dot_kn.tile): B's shared tile is
// K-fastest, written by the conversion from the load's registers (the load is not made to write
// it: copies do not transpose); printed on sm_89 and sm_90a (mma.sync), NVRTC compiles it, and
// Auto prints it so too (it ran on the H100 in session 56).
TEST(LayoutEmitter, F8DotOfBAsLoadedKNStoresBKMajor) {
  std::string why;
  const bool nvrtc = nvrtc_available(&why);
  auto m = parse_file(std::string(TESSERA_SOURCE_DIR) + "/tests/cuda_codegen/data/f8_dot_kn.tile");
  for (const char* target : {"sm_89", "sm_90a"}) {
    SCOPED_TRACE(target);
    bool printed = false;
    CudaEmission em = by_layouts(*bind_constexprs(*m->kernels[0], {}), target, &printed);
    ASSERT_TRUE(printed) << em.notes.back();
    EXPECT_EQ(em.stats["transposed-stores-to-shared"], 1);
    EXPECT_NE(em.source.find("layout = shared<swizzle = 0, pad = 16, order = [0, 1]>"), std::string::npos);
    if (nvrtc) expect_nvrtc_accepts(em, CudaTarget::parse(target));
    const CudaEmission by_default = emit_cuda_with_info(*run_pipeline(*bind_constexprs(*m->kernels[0], {}), {}), CudaTarget::parse(target));
    EXPECT_NE(by_default.lowered, nullptr) << by_default.notes.back();
  }
}

TEST(LayoutEmitter, LeavesTilesOfTooManyElementsAThread) {
  auto kernel = [](int n) {
    const std::string t = "tile<f32, [" + std::to_string(n) + "]>";
    return "kernel @r(%x: view<f32, [N]>, %y: view<f32, [N]>) {\n  grid {\n    %n = dim %x {axis = 0} : i32\n"
           "    %b = const {value = " + std::to_string(n) + "} : i32\n    %g = cdiv %n, %b : i32\n    yield %g\n  }\n"
           "  %p = program_id {axis = 0} : i32\n  %a = load_tile %x, %p : " + t + "\n  %e = exp %a : " + t +
           "\n  store_tile %y, %e, %p\n}\n";
  };
  bool printed = true;
  auto m = parse_module(kernel(3000), "r.tile");
  CudaEmission em = by_layouts(*bind_constexprs(*m->kernels[0], {}), "sm_90a", &printed);
  EXPECT_FALSE(printed);
  EXPECT_NE(em.notes.back().find("elements a thread (more than 256)"), std::string::npos) << em.notes.back();
  m = parse_module(kernel(96), "r.tile");
  by_layouts(*bind_constexprs(*m->kernels[0], {}), "sm_90a", &printed);
  EXPECT_TRUE(printed);
}

// Knobs the GPU lowering has no pass for yet (stream-K, clusters, ...) are not
// silently dropped: the layout emitter's kernel says which it was given; defaults say nothing.
TEST(LayoutEmitter, TakesEveryCodegenKnob) {
  const LibraryKernel* lk = find_library_kernel("matmul");
  ASSERT_NE(lk, nullptr);
  auto notes_with = [&](const std::map<std::string, int64_t>& knobs) {
    auto k = lk->build(ScalarKind::BF16);
    for (const auto& [n, v] : knobs) k->set_constexpr(n, v);
    bool printed = false;
    CudaEmission em = by_layouts(*bind_constexprs(*k, library_config(*lk, ScalarKind::BF16, "cuda:sm_90a")), "sm_90a", &printed);
    EXPECT_TRUE(printed);
    std::string all;
    for (const std::string& n : em.notes) all += n + "\n";
    return all;
  };
  const std::string given = notes_with({{"stream_k", 1}, {"cluster_size", 2}, {"epilogue_overlap", 1}});
  // cluster_size is cluster-programs' since session 55: a GEMM's dot keeps it off clusters, and
  // the note says so.
  EXPECT_NE(given.find("cluster-programs: cluster_size = 2 not taken: a dot at"), std::string::npos) << given;
  EXPECT_EQ(given.find("is read by the planning emitter only"), std::string::npos) << given;
  // cluster_m = 2 is pair-programs' to read since session 53, stream_k = 1 stream-k-programs'
  // since session 54: taken, no note that they are ignored.
  EXPECT_EQ(given.find("knob stream_k"), std::string::npos) << given;
  EXPECT_EQ(notes_with({{"cluster_m", 2}}).find("knob cluster_m"), std::string::npos);
  EXPECT_EQ(given.find("epilogue_overlap"), std::string::npos) << given;  // its default asks for nothing
  // epilogue_overlap = 0 is overlap-epilogues' to read now: taken, no note.
  EXPECT_EQ(notes_with({{"epilogue_overlap", 0}}).find("epilogue_overlap"), std::string::npos);
  EXPECT_EQ(notes_with({}).find("knob "), std::string::npos);
}

// mma_l2_prefetch (hint-l2-policy's `l2_prefetch` on cp.async ring loads): the mma.sync
// matmul's ring copies ask L2 for that many bytes (cp.async's .L2::NB, through cp_async_16's
// template argument), with no note that the knob is ignored; NVRTC takes it; a value other than
// 0, 64, 128 or 256 is an error that names the knob.
TEST(LayoutEmitter, L2PrefetchKnobReachesTheRingsCopies) {
  const LibraryKernel* lk = find_library_kernel("matmul");
  auto emit_with = [&](int64_t pf) {
    auto k = lk->build(ScalarKind::F16);
    k->set_constexpr("mma_l2_prefetch", pf);
    bool printed = false;
    CudaEmission em = by_layouts(*bind_constexprs(*k, library_config(*lk, ScalarKind::F16, "cuda:sm_80")), "sm_80", &printed);
    EXPECT_TRUE(printed);
    return em;
  };
  const CudaEmission none = emit_with(0), with = emit_with(128);
  EXPECT_EQ(none.source.find("cp_async_16<"), std::string::npos);
  EXPECT_GT(occurrences(with.source, "tsr::cp_async_16<128>("), 0u);
  EXPECT_EQ(occurrences(with.source, "tsr::cp_async_16("), 0u) << "a ring copy without the prefetch";
  for (const std::string& n : with.notes) EXPECT_EQ(n.find("mma_l2_prefetch"), std::string::npos) << n;
  try {
    emit_with(100);
    ADD_FAILURE() << "mma_l2_prefetch = 100 accepted";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("knob mma_l2_prefetch = 100: 0 (no prefetch), 64, 128 or 256"), std::string::npos)
        << e.what();
  }
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  EXPECT_FALSE(nvrtc_compile(with.source, CudaTarget::parse("sm_80"), "l2pf.cu", with.line_op).cubin.empty());
}

// The bf16 matmul on sm_90a: each tensor map the kernel takes (the rings' and the TMA store's)
// is prefetched once, by one thread, before the ring's barriers are set up.
TEST(LayoutEmitter, TensorMapsArePrefetchedAtTheStart) {
  const LibraryKernel* lk = find_library_kernel("matmul");
  auto k = lk->build(ScalarKind::BF16);
  bool printed = false;
  const CudaEmission em =
      by_layouts(*bind_constexprs(*k, library_config(*lk, ScalarKind::BF16, "cuda:sm_90a")), "sm_90a", &printed);
  ASSERT_TRUE(printed);
  size_t maps = 0;
  for (const CudaParam& q : em.info.params) maps += q.kind == CudaParam::Kind::TensorMap;
  EXPECT_EQ(maps, 3u) << "A's and B's rings and C's store";
  EXPECT_EQ(occurrences(em.source, "tsr::prefetch_tensormap(&tsr_tma"), maps) << em.source;
  EXPECT_LT(em.source.find("tsr::prefetch_tensormap("), em.source.find("tsr::mbar_init(")) << em.source;
}

// stream_stores = 1 (hint-l2-policy's `l2_hint = "evict_first"` on stores): the bf16 softmax on
// sm_80, printed by the layout emitter by default, stores its rows with the streaming hint
// (tsr::store_vec_cs: st.global.cs in the PTX), and without the knob it does not; another
// value is an error naming the knob.
TEST(LayoutEmitter, StreamStoresKnobGivesTheStoresTheStreamingHint) {
  const LibraryKernel* lk = find_library_kernel("softmax");
  auto emit_with = [&](int64_t stream) {
    auto k = lk->build(ScalarKind::BF16);
    k->set_constexpr("stream_stores", stream);
    const auto bound = run_pipeline(*bind_constexprs(*k, library_config(*lk, ScalarKind::BF16, "cuda:sm_80")), {});
    return emit_cuda_with_info(*bound, CudaTarget::parse("sm_80"));  // the default: Auto
  };
  const CudaEmission plain = emit_with(0), streamed = emit_with(1);
  ASSERT_TRUE(streamed.lowered) << "the default printed it with the planning emitter";
  EXPECT_EQ(plain.source.find("store_vec_cs"), std::string::npos);
  EXPECT_GT(occurrences(streamed.source, "tsr::store_vec_cs<"), 0u) << streamed.source;
  for (const std::string& n : streamed.notes) EXPECT_EQ(n.find("stream_stores"), std::string::npos) << n;
  try {
    emit_with(2);
    ADD_FAILURE() << "stream_stores = 2 accepted";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("knob stream_stores = 2: 0 (no hint) or 1"), std::string::npos) << e.what();
  }
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  const NvrtcResult r = nvrtc_compile(streamed.source, CudaTarget::parse("sm_80"), "cs.cu", streamed.line_op);
  EXPECT_NE(r.ptx.find("st.global.cs.v4."), std::string::npos);
  // The bf16 mma.sync matmul's result from the fragments (no staging): two elements, 4 bytes,
  // a thread's vector, which st.global.cs.u32 takes (review: store_vec_cs had only 8 and 16).
  const LibraryKernel* mm = find_library_kernel("matmul");
  auto k = mm->build(ScalarKind::BF16);
  k->set_constexpr("stream_stores", 1);
  k->set_constexpr("mma_smem_epilogue", 0);
  const CudaEmission em = emit_cuda_with_info(
      *run_pipeline(*bind_constexprs(*k, library_config(*mm, ScalarKind::BF16, "cuda:sm_80")), {}), CudaTarget::parse("sm_80"));
  ASSERT_TRUE(em.lowered);
  const NvrtcResult m = nvrtc_compile(em.source, CudaTarget::parse("sm_80"), "cs_mm.cu", em.line_op);
  EXPECT_NE(m.ptx.find("st.global.cs.u32"), std::string::npos) << em.source;
}

// `f` throws a TesseraError whose message contains `what`.
template <class F>
void expect_error_containing(F f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no error: " << what;
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

// prefetch_loads = 1 (prefetch-loop-loads): the bf16 row kernels' loops that only read (their
// reduction passes over column tiles) issue the next tile's load before this one's reductions,
// and the default prints them with the layout emitter, the carried tile packed as the load
// (tsr::Packed16: at BLOCK_N = 4096 within 8 registers of the planning emitter's prefetch);
// the loops that store are left alone; another value is an error naming the knob.
TEST(LayoutEmitter, PrefetchLoadsKnobIssuesReadOnlyLoopsLoadsAnIterationAhead) {
  const CudaTarget sm90a = CudaTarget::parse("sm_90a");
  auto bound_with = [](const char* name, int64_t prefetch, int64_t block_n = 2048) {
    auto k = find_library_kernel(name)->build(ScalarKind::BF16);
    k->set_constexpr("prefetch_loads", prefetch);
    return run_pipeline(*bind_constexprs(*k, {{"BLOCK_N", block_n}}), {});
  };
  for (auto [name, read_loops] : {std::pair{"softmax", 1}, {"layernorm", 2}, {"rmsnorm", 1}}) {
    const auto bound = bound_with(name, 1);
    PassStats stats;
    const auto lowered = run_gpu_lowering(*bound, gpu_lowering_options(sm90a, true), {}, &stats);
    EXPECT_EQ(stats["prefetch-loop-loads.loops"], read_loops) << name;
    EXPECT_EQ(stats["prefetch-loop-loads.loads"], read_loops) << name;
    const CudaEmission em = emit_cuda_with_info(*bound, sm90a);
    ASSERT_TRUE(em.lowered) << name << ": the default printed it with the planning emitter";
    // The load, the tile carried into the next iteration and the `if` that passes it on: packed.
    EXPECT_GE(occurrences(em.source, "tsr::Packed16<true, "), 3u) << name;
    // Each prefetched loop: its first tile before it, the next one first in its body (in an
    // `if` on a next iteration), before the reductions' barriers.
    const size_t loop = em.source.find("for (int64_t iv", em.source.find("if (v", em.source.find("tessera_")));
    ASSERT_NE(loop, std::string::npos) << em.source;
    const size_t next = em.source.find("if (v", loop);
    EXPECT_LT(next, em.source.find("__syncthreads();", loop)) << name;
    std::string why;
    if (!nvrtc_available(&why)) continue;
    EXPECT_FALSE(nvrtc_compile(em.source, sm90a, "prefetch.cu", em.line_op).cubin.empty()) << name;
    // Registers at BLOCK_N = 4096 (32 bf16 a thread): within 8 of the planning emitter's.
    const auto big = bound_with(name, 1, 4096);
    CudaTarget planning = sm90a;
    planning.emitter = CudaTarget::Emitter::Planning;
    const CudaEmission by_layouts = emit_cuda_with_info(*big, sm90a), by_planning = emit_cuda_with_info(*big, planning);
    const int layouts_regs =
        cubin_resources(nvrtc_compile(by_layouts.source, sm90a, "pl.cu", by_layouts.line_op).cubin, by_layouts.info.symbol).registers;
    const int planning_regs =
        cubin_resources(nvrtc_compile(by_planning.source, sm90a, "pp.cu", by_planning.line_op).cubin, by_planning.info.symbol)
            .registers;
    EXPECT_GT(layouts_regs, 0) << name;
    EXPECT_LE(layouts_regs, planning_regs + 8) << name;  // (softmax 72 / 64; unpacked, 94)
  }
  PassStats plain;
  run_gpu_lowering(*bound_with("softmax", 0), gpu_lowering_options(sm90a, true), {}, &plain);
  EXPECT_EQ(plain["prefetch-loop-loads.loads"], 0);
  expect_error_containing([&] { run_gpu_lowering(*bound_with("softmax", 2), gpu_lowering_options(sm90a, true), {}, &plain); },
                          "knob prefetch_loads = 2: 0 (no prefetch) or 1");
}

// A bf16 tile a loop carries is kept packed with its loads (packs_value), unless a cast of the
// loop's argument is itself yielded: the cast is a view of the carried words, which the yield
// overwrites before it reads the cast (found by review: it read the next iteration's tile).
TEST(LayoutEmitter, CarriedPackedTileIsNotYieldedThroughItsCast) {
  auto source_with = [](const std::string& tail) {
    const std::string text = R"(kernel @al(%x: view<bf16, [M, N]>, %y: view<f32, [M, N]>) {
  grid {
    %rows0 = dim %x {axis = 0} : i32
    yield %rows0
  }
  %row = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %nt = const {value = 4} : i32
  %f0 = const {value = 0.0} : f32
  %z = splat %f0 : tile<f32, [1, 256]>
  %t0 = load_tile %x, %row, %c0 : tile<bf16, [1, 256]>
  %cur, %acc = for %c0, %nt, %c1, %t0, %z : tile<bf16, [1, 256]>, tile<f32, [1, 256]> {
    ^(%j: i32, %c: tile<bf16, [1, 256]>, %a: tile<f32, [1, 256]>):
    %f = cast %c : tile<f32, [1, 256]>
    %j1 = add %j, %c1 : i32
    %nx = load_tile %x, %row, %j1 : tile<bf16, [1, 256]>
)" + tail + R"(
  }
  store_tile %y, %acc, %row, %c0
})";
    auto m = parse_module(text, "carried.tile");
    const CudaEmission em = emit_cuda_with_info(*run_pipeline(*m->kernels[0], {}), CudaTarget::parse("sm_90a"));
    EXPECT_TRUE(em.lowered);
    return em.source;
  };
  EXPECT_EQ(source_with("    yield %nx, %f").find("Packed16"), std::string::npos);
  // The cast only added into the other carried value: the loads and the carried tile packed.
  EXPECT_GE(occurrences(source_with("    %s = add %a, %f : tile<f32, [1, 256]>\n    yield %nx, %s"), "tsr::Packed16<true, "), 3u);
}

// The bf16 library matmul for sm_80 with knob `knob` = `value`, by the default (Auto) emitter.
CudaEmission matmul_sm80_with(const char* knob, int64_t value) {
  const LibraryKernel* lk = find_library_kernel("matmul");
  auto k = lk->build(ScalarKind::BF16);
  k->set_constexpr(knob, value);
  return emit_cuda_with_info(*run_pipeline(*bind_constexprs(*k, library_config(*lk, ScalarKind::BF16, "cuda:sm_80")), {}),
                             CudaTarget::parse("sm_80"));
}

// mma_early_last_step = 1 (pipeline-loops' `early_last_step = 1` on a fragments_ahead dot): the
// bf16 matmul on sm_80, printed by the default's layout emitter, runs its last k step's mma
// instructions before the ring's wait and barrier and loads the next fragments after them;
// without the knob the wait comes first; another value is an error naming the knob.
TEST(LayoutEmitter, EarlyLastStepKnobMovesTheLastMmaStepBeforeTheWait) {
  const CudaTarget sm80 = CudaTarget::parse("sm_80");
  auto emit_with = [](int64_t value) { return matmul_sm80_with("mma_early_last_step", value); };
  const CudaEmission plain = emit_with(0), early = emit_with(1);
  ASSERT_TRUE(early.lowered) << "the default printed it with the planning emitter";
  EXPECT_EQ(early.stats.at("mma-early-last-steps"), 1);
  EXPECT_EQ(plain.stats.count("mma-early-last-steps"), 0u);
  // The last step's block: after the step's mma instructions, the wait, the barrier and the next
  // iteration's first fragments (ldmatrix), all before the next iteration's mma instructions.
  const size_t last = early.source.find("(early_last_step)");
  ASSERT_NE(last, std::string::npos) << early.source;
  EXPECT_LT(early.source.rfind("tsr::mma_", last), last);
  const size_t wait = early.source.find("tsr::cp_async_wait<", last), sync = early.source.find("__syncthreads();", last);
  EXPECT_LT(wait, sync);
  EXPECT_LT(sync, early.source.find("tsr::ldsm_x", sync));
  EXPECT_LT(early.source.find("tsr::ldsm_x", sync), early.source.find("tsr::mma_", sync));  // before the next mma
  EXPECT_EQ(plain.source.find("(early_last_step)"), std::string::npos);
  expect_error_containing([&] { emit_with(2); }, "knob mma_early_last_step = 2: 0 or 1");
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  EXPECT_FALSE(nvrtc_compile(early.source, sm80, "early.cu", early.line_op).cubin.empty());
}

// mma_spread_copies = 1 (pipeline-loops' `refill_parts = KT - 1` beside `refill_in_dot = 1`):
// the bf16 matmul on sm_80 (64-deep stages: 4 k steps) refills its ring in 3 pieces, in the
// dot's first three k steps, each load's copies cut into ranges of rounds, one commit group an
// iteration, with the last piece; the PTX compiles; another value is an error naming the knob.
TEST(LayoutEmitter, SpreadCopiesKnobRefillsTheRingInPiecesOverTheKSteps) {
  const CudaTarget sm80 = CudaTarget::parse("sm_80");
  auto emit_with = [](int64_t value) { return matmul_sm80_with("mma_spread_copies", value); };
  const CudaEmission plain = emit_with(0), spread = emit_with(1);
  ASSERT_TRUE(spread.lowered) << "the default printed it with the planning emitter";
  EXPECT_EQ(spread.stats.at("ring-refill-pieces"), 3);
  EXPECT_EQ(plain.stats.count("ring-refill-pieces"), 0u);
  for (int piece = 1; piece <= 3; ++piece) {
    const std::string at = "if (ks == " + std::to_string(piece - 1) + ") {  // the ring's refill, piece " +
                           std::to_string(piece) + " of 3";
    EXPECT_EQ(occurrences(spread.source, at), 1u) << at << "\n" << spread.source;
  }
  // One commit in the loop's body, after the last piece's copies (the prologue's loop has one).
  const size_t last_piece = spread.source.find("piece 3 of 3");
  EXPECT_EQ(occurrences(spread.source, "tsr::cp_async_commit();"), occurrences(plain.source, "tsr::cp_async_commit();"));
  EXPECT_LT(spread.source.rfind("tsr::cp_async_16(", spread.source.find("tsr::cp_async_commit();", last_piece)),
            spread.source.find("tsr::cp_async_commit();", last_piece));
  // More pieces print more copies' code, not more copies: the pieces' ranges of rounds cover
  // A's 4 and B's 8 rounds (128 x 64 and 64 x 256 bf16 over 256 threads) once each: A [0, 1),
  // [1, 2), [2, 4), B [0, 2), [2, 5), [5, 8) (each range in the whole-tile and the edge paths).
  for (const char* range : {"= 0; i[0-9]+ < 1;", "= 1; i[0-9]+ < 2;", "= 2; i[0-9]+ < 4;", "= 0; i[0-9]+ < 2;",
                            "= 2; i[0-9]+ < 5;", "= 5; i[0-9]+ < 8;"}) {
    const std::regex re(std::string("for \\(int i[0-9]+ ") + range);
    EXPECT_TRUE(std::regex_search(spread.source, re)) << range;
  }
  // B's whole range only in the prologue's copies (in both the prologue and the refill without).
  const std::regex whole_b("for \\(int i[0-9]+ = 0; i[0-9]+ < 8;");
  auto count_of = [&](const std::string& src) {
    return std::distance(std::sregex_iterator(src.begin(), src.end(), whole_b), std::sregex_iterator());
  };
  EXPECT_EQ(2 * count_of(spread.source), count_of(plain.source));
  expect_error_containing([&] { emit_with(2); }, "knob mma_spread_copies = 2: 0 or 1");
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  EXPECT_FALSE(nvrtc_compile(spread.source, sm80, "spread.cu", spread.line_op).cubin.empty());
}

// split_k >= 2 on a kernel whose K loop the runtime cannot split (the f32 matmul: FMA dots, no
// wgmma) says so in a note; the bf16 matmul, which splits, has no such note.
TEST(LayoutEmitter, SplitKKnobTheKernelCannotTakeIsANote) {
  const LibraryKernel* lk = find_library_kernel("matmul");
  auto emit_with = [&](ScalarKind dt) {
    auto k = lk->build(dt);
    k->set_constexpr("split_k", 4);
    bool printed = false;
    CudaEmission em = by_layouts(*bind_constexprs(*k, library_config(*lk, dt, "cuda:sm_90a")), "sm_90a", &printed);
    EXPECT_TRUE(printed);
    return em;
  };
  auto unsplit_note = [](const CudaEmission& em) {
    for (const std::string& n : em.notes)
      if (n.starts_with("knob split_k = 4: the kernel runs unsplit: ")) return true;
    return false;
  };
  const CudaEmission f32 = emit_with(ScalarKind::F32), bf16 = emit_with(ScalarKind::BF16);
  EXPECT_FALSE(f32.info.split_k_capable);
  EXPECT_TRUE(unsplit_note(f32));
  EXPECT_TRUE(bf16.info.split_k_capable);
  EXPECT_FALSE(unsplit_note(bf16));
}

// epilogue_buffers = 4 (store-epilogues-by-tma's `tma_buffers`): the persistent bf16 matmul's
// TMA-store staging is four 8 KiB boxes per compute warpgroup, taken in turn, and with four
// boxes a 64-row block three earlier stores may still be reading when a box is written; no note
// that the knob is ignored; NVRTC takes it without spills; another value is an error.
TEST(LayoutEmitter, EpilogueBuffersKnobGivesTheTmaStoreFourBoxes) {
  const LibraryKernel* lk = find_library_kernel("matmul");
  auto emit_with = [&](int64_t bufs) {
    auto k = lk->build(ScalarKind::BF16);
    k->set_constexpr("epilogue_buffers", bufs);
    k->set_constexpr("epilogue_overlap", 0);
    bool printed = false;
    CudaEmission em = by_layouts(*bind_constexprs(*k, library_config(*lk, ScalarKind::BF16, "cuda:sm_90a")), "sm_90a", &printed);
    EXPECT_TRUE(printed);
    return em;
  };
  const CudaEmission two = emit_with(2), four = emit_with(4);
  EXPECT_NE(two.source.find("uint32_t(tsr_tid / 128) * 16384u;"), std::string::npos);
  EXPECT_NE(four.source.find("uint32_t(tsr_tid / 128) * 32768u;"), std::string::npos) << four.source;
  // Box 3 of a 256-column block: the fourth buffer, three stores in flight (with two buffers:
  // the second buffer, one in flight).
  const std::string box3 = "tsr::epilogue_box_sw128<3, ";
  ASSERT_NE(four.source.find(box3), std::string::npos) << four.source;
  EXPECT_NE(four.source.find(" + 24576u, ", four.source.find(box3)), std::string::npos) << "the fourth box";
  EXPECT_NE(four.source.find(box3 + "3>("), std::string::npos);
  EXPECT_NE(two.source.find(box3 + "1>("), std::string::npos);
  EXPECT_NE(two.source.find(" + 8192u, ", two.source.find(box3)), std::string::npos);
  for (const std::string& n : four.notes) EXPECT_EQ(n.find("epilogue_buffers"), std::string::npos) << n;
  try {
    emit_with(3);
    ADD_FAILURE() << "epilogue_buffers = 3 accepted";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("knob epilogue_buffers = 3: 2 (the default) or 4"), std::string::npos) << e.what();
  }
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  const NvrtcResult r = nvrtc_compile(four.source, CudaTarget::parse("sm_90a"), "bufs.cu", four.line_op);
  EXPECT_EQ(cubin_resources(r.cubin, four.info.symbol).frame_bytes, 0) << "spills";
}

// swap_operands = 1 on matmul_fp8 (the weights as [N, K]) at a decode config: swap-dot-operands
// swaps the f8 dot (b^T the weights' tile itself, a^T the batch's: both K-major, as f8 wgmma
// reads them), the layout emitter prints it as m64n16k32 e4m3 wgmma, and NVRTC takes it
// without spills.
TEST(LayoutEmitter, F8SwappedProductIsWgmmaOnKMajorOperands) {
  const LibraryKernel* lk = find_library_kernel("matmul_fp8");
  auto k = bind_constexprs(*lk->build(ScalarKind::BF16), {{"BLOCK_M", 16}, {"BLOCK_N", 128}, {"BLOCK_K", 128}});
  k->set_constexpr("swap_operands", 1);
  bool printed = false;
  const CudaEmission em = by_layouts(*k, "sm_90a", &printed);
  ASSERT_TRUE(printed);
  std::vector<int64_t> dot_shape;
  walk(*em.lowered->body, [&](Op& op) {
    if (op.kind == OpKind::Dot) dot_shape = static_shape(op.result()->type.shape);
  });
  EXPECT_EQ(dot_shape, (std::vector<int64_t>{128, 16}));
  for (const std::string& n : em.notes) EXPECT_EQ(n.find("swap_operands"), std::string::npos) << n;
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  const NvrtcResult r = nvrtc_compile(em.source, CudaTarget::parse("sm_90a"), "f8swap.cu", em.line_op);
  EXPECT_NE(r.ptx.find("wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3"), std::string::npos);
  EXPECT_EQ(cubin_resources(r.cubin, em.info.symbol).frame_bytes, 0) << "spills";
}

// cluster_m = 2 (pair-programs) on the persistent bf16 matmul, printed by the layout emitter:
// clusters of two CTAs (the runtime launches pairs: persistent_cluster) number pairs of axis-0
// programs; B's ring tile (its index does not depend on axis 0) is copied half by each CTA into
// both rings (its tensor map's box half the tile's 64 rows; the half at rank x 32 rows), A's
// whole by each; a stage's release counts both CTAs' 8 compute warps and reaches both; the store
// of the program past an odd grid is skipped; a cluster barrier after the barriers' setup and one
// at the end. NVRTC takes it without spills, with multicast copies and cluster barriers in the
// PTX. Another value of the knob is a located error.
TEST(LayoutEmitter, ProgramPairsShareBTilesByMulticast) {
  const LibraryKernel* lk = find_library_kernel("matmul");
  auto emit_with = [&](int64_t c) {
    auto k = lk->build(ScalarKind::BF16);
    k->set_constexpr("cluster_m", c);
    bool printed = false;
    CudaEmission em = by_layouts(*bind_constexprs(*k, library_config(*lk, ScalarKind::BF16, "cuda:sm_90a")), "sm_90a", &printed);
    EXPECT_TRUE(printed);
    return em;
  };
  const CudaEmission one = emit_with(1), two = emit_with(2);
  EXPECT_EQ(one.info.persistent_cluster, 1);
  EXPECT_EQ(one.source.find("__cluster_dims__"), std::string::npos);
  EXPECT_EQ(two.info.persistent_cluster, 2);
  EXPECT_EQ(two.stats.at("program-pairs"), 1);
  EXPECT_EQ(two.stats.at("tma-multicast-loads"), 1);
  EXPECT_NE(two.source.find("__cluster_dims__(2, 1, 1)"), std::string::npos);
  for (const std::string& n : two.notes) EXPECT_EQ(n.find("knob cluster_m"), std::string::npos) << n;
  // The tensor maps: A's box 64 x 128 rows, B's 64 x 32 (half of its 64-row tile).
  std::vector<std::pair<int, int>> boxes;
  for (const CudaParam& p : two.info.params)
    if (p.kind == CudaParam::Kind::TensorMap && p.param_index < 2) boxes.push_back({p.box[0], p.box[1]});
  EXPECT_EQ(boxes, (std::vector<std::pair<int, int>>{{64, 128}, {64, 32}}));
  EXPECT_NE(two.source.find("for (uint32_t tsr_t = blockIdx.x / 2u; tsr_t < tsr_programs; tsr_t += gridDim.x / 2u) {"),
            std::string::npos);
  EXPECT_NE(two.source.find("const int32_t tsr_pid0 = int32_t(2 * (tsr_first + tsr_u % tsr_in_group % tsr_rows) + "
                            "int64_t(tsr::cluster_rank()));"),
            std::string::npos);
  EXPECT_EQ(occurrences(two.source, "tsr::tma_load_2d_multicast("), 4u);  // B's four 64-column boxes
  EXPECT_NE(two.source.find("+ tsr_mc_rank * 4096u, &tsr_tma1, int(v"), std::string::npos) << "half at 32 rows";
  EXPECT_NE(two.source.find(" + int(tsr_mc_rank) * 32, "), std::string::npos);
  EXPECT_NE(two.source.find("tsr::mbar_init(mb4 + 8u * (4u + s_), 16);"), std::string::npos) << two.source;
  EXPECT_EQ(occurrences(two.source, "tsr::mbar_arrive_cluster("), occurrences(one.source, "tsr::mbar_arrive(mb"));
  EXPECT_NE(two.source.find("if (tsr_pid0 < int32_t(tsr_grid0)) {"), std::string::npos);
  EXPECT_EQ(occurrences(two.source, "tsr::cluster_sync();"), 2u);
  try {
    emit_with(3);
    ADD_FAILURE() << "cluster_m = 3 accepted";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("knob cluster_m = 3: 1 (one CTA per program, the default) or 2"), std::string::npos)
        << e.what();
  }
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  const NvrtcResult r = nvrtc_compile(two.source, CudaTarget::parse("sm_90a"), "pairs.cu", two.line_op);
  EXPECT_EQ(cubin_resources(r.cubin, two.info.symbol).frame_bytes, 0) << "spills";
  EXPECT_NE(r.ptx.find(".multicast::cluster"), std::string::npos);
  EXPECT_NE(r.ptx.find("barrier.cluster.arrive"), std::string::npos);
  EXPECT_NE(r.ptx.find("mapa.shared::cluster"), std::string::npos);
  // B as [N, K] (K-major tiles: each CTA copies 128 of a box's 256 rows), bf16 and f8 operands.
  for (std::string in : {"bf16", "f8e4m3"}) {
    auto k = testutil::nt_matmul(in, "bf16", 128, 256, in == "bf16" ? 64 : 128);
    k->set_constexpr("cluster_m", 2);
    bool printed = false;
    const CudaEmission nt = by_layouts(*k, "sm_90a", &printed);
    EXPECT_TRUE(printed) << in;
    EXPECT_EQ(nt.info.persistent_cluster, 2) << in;
    EXPECT_NE(nt.source.find(" + int(tsr_mc_rank) * 128, "), std::string::npos) << in;
    const NvrtcResult rn = nvrtc_compile(nt.source, CudaTarget::parse("sm_90a"), "pairs_nt.cu", nt.line_op);
    EXPECT_EQ(cubin_resources(rn.cubin, nt.info.symbol).frame_bytes, 0) << in << ": spills";
  }
}

// stream-k-programs' marks printed by the layout emitter (the stream-K compilation, or the knob
// stream_k = 1; Emitter::Auto takes them only once they have run on a GPU): the
// persistent CTAs take whole tiles, then their units of the shared-out ones, last tile first;
// both branches run the K loop's part [trip pb / G, trip pe / G); after it the compute warps of
// a part that ends inside its tile leave their sum in the CTA's slot, raise its flag and skip
// the epilogue, and a tile's last part adds the earlier CTAs' slots in K order before it. The
// pending epilogue block (overlap-epilogues) is stored before the fixup. NVRTC compiles every
// planned tile without spills.
TEST(LayoutEmitter, StreamKSharesTheLastWaveOut) {
  const LibraryKernel* lk = find_library_kernel("matmul");
  auto emit_with = [&](ScalarKind dt, int64_t bm, int64_t bn) {
    auto k = lk->build(dt);
    for (auto [n, v] : {std::pair<const char*, int64_t>{"BLOCK_M", bm}, {"BLOCK_N", bn}, {"BLOCK_K", 64}}) k->set_constexpr(n, v);
    CudaTarget t = CudaTarget::parse("sm_90a");
    t.emitter = CudaTarget::Emitter::Layouts;
    t.stream_k = true;
    return emit_cuda_with_info(*run_pipeline(*bind_constexprs(*k, library_config(*lk, dt, "cuda:sm_90a")), {}), t);
  };
  const CudaEmission em = emit_with(ScalarKind::BF16, 128, 256);
  ASSERT_NE(em.lowered, nullptr);
  EXPECT_TRUE(em.info.persistent);
  EXPECT_TRUE(em.info.stream_k);
  EXPECT_EQ(em.stats.at("stream-k"), 1);
  EXPECT_EQ(em.info.split_slot_bytes, 128 * 256 * 4);  // both compute warpgroups' accumulators
  int workspaces = 0;
  for (const CudaParam& p : em.info.params) workspaces += p.kind == CudaParam::Kind::SplitWorkspace;
  EXPECT_EQ(workspaces, 1);
  const Op* y = em.lowered->grid->terminator();
  EXPECT_EQ(y->attr_int("stream_k"), 1);
  const std::string& src = em.source;
  EXPECT_NE(src.find("const int32_t tsr_L = tsr_rem == 0 ? 0 : 2 * tsr_rem >= tsr_G || tsr_programs < uint32_t(tsr_G) ? "
                     "tsr_rem : tsr_rem + tsr_G;"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("tsr_dp + uint32_t((tsr_u1 - 1) / tsr_G - (tsr_i - tsr_ndp))"), std::string::npos);
  // Both branches (the producer's copies and the compute warps' loop) run the same part.
  EXPECT_EQ(occurrences(src, "for (int32_t tsr_i = 0; tsr_i < tsr_ndp + tsr_nsk; ++tsr_i) {"), 2u);
  EXPECT_EQ(occurrences(src, " * tsr_pb / tsr_G * "), 2u);
  const size_t leave = src.find("tsr::floats_to_slot(");
  ASSERT_NE(leave, std::string::npos);
  EXPECT_LT(src.find("boxes the loop had too few iterations for"), leave);
  EXPECT_LT(leave, src.find("tsr::flag_release(skflag_ + blockIdx.x);"));
  EXPECT_LT(src.find("tsr::flag_release(skflag_ + blockIdx.x);"), src.find("continue;"));
  EXPECT_NE(src.find("for (int32_t c_ = tsr_tu / tsr_L; c_ < int32_t(blockIdx.x); ++c_) {"), std::string::npos);
  // (The sum is complete before the accumulator is packed for the epilogue.)
  // (16 quads a batch: the two compute warpgroups' 232 registers hold them beside the 128
  // accumulators, as the planning emitter's batches.)
  const size_t add = src.find("tsr::floats_add_slot_batched<16>(");
  ASSERT_NE(add, std::string::npos);
  EXPECT_LT(add, src.rfind("tsr::f2bf2("));
  EXPECT_NE(src.find("skflag_[c_] = 0u;"), std::string::npos);
  // Whole tiles by default; the split-K compilation splits instead.
  {
    auto k = lk->build(ScalarKind::BF16);
    CudaTarget t = CudaTarget::parse("sm_90a");
    t.emitter = CudaTarget::Emitter::Layouts;
    t.split_k = t.stream_k = true;
    const CudaEmission split =
        emit_cuda_with_info(*run_pipeline(*bind_constexprs(*k, library_config(*lk, ScalarKind::BF16, "cuda:sm_90a")), {}), t);
    EXPECT_TRUE(split.info.split_k);
    EXPECT_FALSE(split.info.stream_k);
    EXPECT_EQ(split.source.find("tsr_pb"), std::string::npos);
  }
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  for (ScalarKind dt : {ScalarKind::BF16, ScalarKind::F16})
    for (auto [m, n] : {std::pair<int64_t, int64_t>{64, 64}, {128, 128}, {128, 256}, {64, 192}}) {
      SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n));
      const CudaEmission e = emit_with(dt, m, n);
      ASSERT_TRUE(e.info.stream_k);
      const NvrtcResult r = nvrtc_compile(e.source, CudaTarget::parse("sm_90a"), "stream_k.cu", e.line_op);
      EXPECT_EQ(cubin_resources(r.cubin, e.info.symbol).frame_bytes, 0) << "spills";
    }
}

// stream_k = 1 written by hand with stream-k-programs left out (--disable-pass): the layout
// emitter checks again what the pass would have, and prints whole tiles with a note where the
// parts' sums would be wrong (an accumulator that starts at C: each part would add C again).
TEST(LayoutEmitter, HandWrittenStreamKMarksAreCheckedAgain) {
  auto kernel = [](const std::string& start) {
    return std::string("kernel @k(%a: view<f16, [M, K]>, %b: view<f16, [K, N]>, %o: view<f16, [M, N]>, %c0: view<f32, [M, N]>) {\n") +
           "  grid {\n    %m = dim %a {axis = 0} : i32\n    %n = dim %b {axis = 1} : i32\n"
           "    yield %m, %n {persistent = 1, stream_k = 1}\n  }\n"
           "  %pm = program_id {axis = 0} : i32\n  %pn = program_id {axis = 1} : i32\n"
           "  %zero = const {value = 0} : i32\n  %one = const {value = 1} : i32\n  %k = dim %a {axis = 1} : i32\n"
           "  %bk = const {value = 64} : i32\n  %kt = div %k, %bk : i32\n  %f0 = const {value = 0.0} : f32\n" + start +
           "  %acc = for %zero, %kt, %one, %z {warp_specialize = 1, stream_k = 1} : tile<f32, [128, 128]> {\n"
           "  ^(%kk: i32, %c: tile<f32, [128, 128]>):\n"
           "    %ta = load_tile %a, %pm, %kk : tile<f16, [128, 64]>\n    %tb = load_tile %b, %kk, %pn : tile<f16, [64, 128]>\n"
           "    %cn = dot %ta, %tb, %c : tile<f32, [128, 128]>\n    yield %cn\n  }\n"
           "  %h = cast %acc : tile<f16, [128, 128]>\n  store_tile %o, %h, %pm, %pn\n}\n";
  };
  auto emit = [&](const std::string& start) {
    auto m = parse_module(kernel(start), "hand.tile");
    CudaTarget t = CudaTarget::parse("sm_90a");
    t.emitter = CudaTarget::Emitter::Layouts;
    t.disabled_passes = {"stream-k-programs"};
    return emit_cuda_with_info(*run_pipeline(*m->kernels[0], {}), t);
  };
  const CudaEmission zero = emit("  %z = splat %f0 : tile<f32, [128, 128]>\n");
  EXPECT_TRUE(zero.info.stream_k);
  const CudaEmission from_c = emit("  %z = load_tile %c0, %pm, %pn : tile<f32, [128, 128]>\n");
  EXPECT_TRUE(from_c.info.persistent);
  EXPECT_FALSE(from_c.info.stream_k);
  EXPECT_EQ(from_c.source.find("tsr_pb"), std::string::npos);
  std::string all;
  for (const std::string& n : from_c.notes) all += n + "\n";
  EXPECT_NE(all.find("stream_k = 1 not printed (whole tiles): "), std::string::npos) << all;
  EXPECT_NE(all.find("does not start at 0"), std::string::npos) << all;
}

// 16-bit float rows are stored as words, two slots rounded in one conversion (tsr::f2bf2,
// cvt.rn.bf16x2.f32 in the PTX), as the planning emitter's row stores are; pair_stores = 0
// turns it off (a slot at a time), on the layout emitter too since session 54, and no longer
// sends the kernel to the planning emitter.
TEST(LayoutEmitter, SixteenBitRowStoresArePaired) {
  const LibraryKernel* lk = find_library_kernel("softmax");
  auto emit_with = [&](std::optional<int64_t> pairs) {
    auto k = lk->build(ScalarKind::BF16);
    k->set_constexpr("BLOCK_N", 4096);
    if (pairs) k->set_constexpr("pair_stores", *pairs);
    CudaTarget t = CudaTarget::parse("sm_90a");
    t.emitter = CudaTarget::Emitter::Auto;
    return emit_cuda_with_info(*run_pipeline(*bind_constexprs(*k, library_config(*lk, ScalarKind::BF16, "cuda:sm_90a")), {}), t);
  };
  const CudaEmission on = emit_with(std::nullopt), off = emit_with(0);
  ASSERT_NE(on.lowered, nullptr);
  ASSERT_NE(off.lowered, nullptr);
  EXPECT_NE(on.source.find("= tsr::f2bf2("), std::string::npos);
  EXPECT_NE(on.source.find("tsr::copy_vec<uint32_t, 4>(reinterpret_cast<uint32_t*>("), std::string::npos);
  EXPECT_EQ(off.source.find("tsr::f2bf2("), std::string::npos);
  EXPECT_NE(off.source.find("tsr::copy_vec<uint16_t, 8>("), std::string::npos);
  for (const std::string& n : off.notes) EXPECT_EQ(n.find("pair_stores"), std::string::npos) << n;
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  const NvrtcResult r = nvrtc_compile(on.source, CudaTarget::parse("sm_90a"), "pairs.cu", on.line_op);
  EXPECT_NE(r.ptx.find("cvt.rn.bf16x2.f32"), std::string::npos);
}

// The default (CudaTarget::Emitter::Auto): the layout emitter, whatever knobs the kernel sets
// (since session 55: stream_k and cluster_size ran on a GPU); the split-K compilation and the
// swapped product are the layout emitter's (split-k-loops, swap-dot-operands). TESSERA_CUDA_FROM_LAYOUTS picks one for all: 1 the
// layout emitter, 0 the planning emitter, unset the default, anything else an error.
TEST(LayoutEmitter, IsTheDefaultForEveryKnob) {
  const LibraryKernel* lk = find_library_kernel("matmul");
  ASSERT_NE(lk, nullptr);
  auto emit_default = [&](const std::map<std::string, int64_t>& knobs, bool split_k = false) {
    auto k = lk->build(ScalarKind::BF16);
    for (const auto& [n, v] : knobs) k->set_constexpr(n, v);
    CudaTarget t = CudaTarget::parse("sm_90a");
    t.emitter = CudaTarget::Emitter::Auto;
    t.split_k = split_k;
    CudaEmission em = emit_cuda_with_info(*run_pipeline(*bind_constexprs(*k, library_config(*lk, ScalarKind::BF16, "cuda:sm_90a")), {}), t);
    std::string all;
    for (const std::string& n : em.notes) all += n + "\n";
    return std::make_pair(em.lowered != nullptr, all);
  };
  auto [printed, notes] = emit_default({});
  EXPECT_TRUE(printed) << notes;
  EXPECT_NE(notes.find("printed from the GPU lowering's layouts (the layout emitter)"), std::string::npos) << notes;
  // stream_k = 1 (stream-k-programs, session 54) and cluster_size (cluster-programs, session
  // 55): the default's since they ran on a GPU (session 55); a GEMM's dot keeps it off
  // clusters, with cluster-programs' note.
  std::tie(printed, notes) = emit_default({{"stream_k", 1}, {"cluster_size", 2}});
  EXPECT_TRUE(printed) << notes;
  EXPECT_NE(notes.find("cluster-programs: cluster_size = 2 not taken: a dot at"), std::string::npos) << notes;
  std::tie(printed, notes) = emit_default({{"stream_k", 1}});
  EXPECT_TRUE(printed) << notes;
  EXPECT_EQ(notes.find("planning emitter"), std::string::npos) << notes;
  // cluster_m = 2: pair-programs' (session 53).
  std::tie(printed, notes) = emit_default({{"cluster_m", 2}});
  EXPECT_TRUE(printed) << notes;
  EXPECT_EQ(notes.find("knob "), std::string::npos) << notes;
  // prefetch_loads (prefetch-loop-loads) no longer asks for the planning emitter (the matmul's
  // K loop, a ring, takes none of it).
  std::tie(printed, notes) = emit_default({{"prefetch_loads", 1}});
  EXPECT_TRUE(printed) << notes;
  // Knobs at the values that ask for nothing, and knobs both emitters read (min_blocks: the
  // launch bounds), leave the kernel to the layout emitter.
  std::tie(printed, notes) = emit_default({{"swap_operands", 0}, {"split_k", 1}, {"min_blocks", 2}, {"pair_stores", 1}});
  EXPECT_TRUE(printed) << notes;
  // Knobs a GPU lowering pass takes: ring_stages (pipeline-loops), tma_store_epilogue and
  // epilogue_buffers (store-epilogues-by-tma), mma_l2_prefetch (hint-l2-policy), swap_operands
  // (swap-dot-operands), and the runtime's split_k (its split compilation's split-k-loops), with
  // no note that the layout emitter ignores them.
  std::tie(printed, notes) = emit_default({{"ring_stages", 6}, {"tma_store_epilogue", 0}, {"epilogue_buffers", 4},
                                           {"mma_l2_prefetch", 128}, {"swap_operands", 1}, {"split_k", 3}});
  EXPECT_TRUE(printed) << notes;
  EXPECT_EQ(notes.find("knob "), std::string::npos) << notes;
  // swap_operands on f8 operands (the weights as [N, K]) is swap-dot-operands' (session 53).
  {
    const LibraryKernel* fp8 = find_library_kernel("matmul_fp8");
    auto k = fp8->build(ScalarKind::BF16);
    k->set_constexpr("swap_operands", 1);
    CudaTarget t = CudaTarget::parse("sm_90a");
    t.emitter = CudaTarget::Emitter::Auto;
    CudaEmission em =
        emit_cuda_with_info(*run_pipeline(*bind_constexprs(*k, library_config(*fp8, ScalarKind::BF16, "cuda:sm_90a")), {}), t);
    std::string all;
    for (const std::string& n : em.notes) all += n + "\n";
    EXPECT_NE(em.lowered, nullptr) << all;
    EXPECT_EQ(all.find("swap_operands"), std::string::npos) << all;
  }
  std::tie(printed, notes) = emit_default({}, /*split_k=*/true);
  EXPECT_TRUE(printed) << notes;
  EXPECT_NE(notes.find("split-K: gridDim.z CTAs share each program's K loop (split-k-loops)"), std::string::npos) << notes;

  // The environment, read by CudaTarget::parse.
  const char* old = std::getenv("TESSERA_CUDA_FROM_LAYOUTS");
  const std::string saved = old ? old : "";
  ::unsetenv("TESSERA_CUDA_FROM_LAYOUTS");
  EXPECT_EQ(CudaTarget::parse("sm_90a").emitter, CudaTarget::Emitter::Auto);
  ::setenv("TESSERA_CUDA_FROM_LAYOUTS", "1", 1);
  EXPECT_EQ(CudaTarget::parse("sm_90a").emitter, CudaTarget::Emitter::Layouts);
  ::setenv("TESSERA_CUDA_FROM_LAYOUTS", "0", 1);
  EXPECT_EQ(CudaTarget::parse("cuda").emitter, CudaTarget::Emitter::Planning);
  ::setenv("TESSERA_CUDA_FROM_LAYOUTS", "yes", 1);
  try {
    CudaTarget::parse("sm_80");
    ADD_FAILURE() << "TESSERA_CUDA_FROM_LAYOUTS=yes accepted";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("TESSERA_CUDA_FROM_LAYOUTS = 'yes'"), std::string::npos) << e.what();
  }
  ::setenv("TESSERA_CUDA_FROM_LAYOUTS", "2", 1);
  try {
    CudaTarget::parse("sm_80");
    ADD_FAILURE() << "TESSERA_CUDA_FROM_LAYOUTS=2 accepted";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("expected 1 (the layout emitter) or 0 (the planning emitter)"), std::string::npos)
        << e.what();
  }
  if (old)
    ::setenv("TESSERA_CUDA_FROM_LAYOUTS", saved.c_str(), 1);
  else
    ::unsetenv("TESSERA_CUDA_FROM_LAYOUTS");
}

// The A/B switches of session 37 (each off by default), TESSERA_CUDA_SCRATCH_EXCHANGES and
// TESSERA_CUDA_SINGLE_FRAGMENTS, print what they say, and NVRTC takes the mma.sync matmul
// under each. (The third, 32-bit shared addresses for whole-tile cp.async copies and unsigned
// stage arithmetic, is the only path since session 38: checked here without a switch.)
TEST(LayoutEmitter, AbSwitchesPrintWhatTheySayAndCompile) {
  std::string why;
  const bool nvrtc = nvrtc_available(&why);
  auto mm = bind_constexprs(*find_library_kernel("matmul")->build(ScalarKind::BF16), {});
  auto fa = parse_file(std::string(TESSERA_SOURCE_DIR) + "/tests/corpus/flash_attention_bf16.tile");
  auto fab = bind_constexprs(*fa->kernels[0], {});
  auto sm = bind_constexprs(*find_library_kernel("softmax")->build(ScalarKind::BF16), {{"BLOCK_N", 1024}});
  struct Case {
    const char* env;
    const Kernel* k;
    const char* with;     // in the source with the switch
    const char* without;  // in the source without it
  };
  for (const Kernel* k : {mm.get(), fab.get()}) {
    bool printed = false;
    CudaEmission em = by_layouts(*k, "sm_80", &printed);
    ASSERT_TRUE(printed);
    EXPECT_NE(em.source.find("const uint32_t sb"), std::string::npos) << k->name;
    EXPECT_NE(em.source.find("u) % "), std::string::npos) << k->name;
  }
  // The ring's refill at the top of the iteration, or in the dot's first k step (mma.sync)
  // under TESSERA_CUDA_REFILL_IN_DOT=1; one cp.async commit an iteration either way.
  for (bool top : {false, true}) {
    testutil::ScopedEnv e("TESSERA_CUDA_REFILL_IN_DOT", top ? "0" : "1");
    bool printed = false;
    CudaEmission em = by_layouts(*mm, "sm_80", &printed);
    ASSERT_TRUE(printed);
    EXPECT_EQ(em.stats["ring-refills-in-dots"], top ? 0 : 1);
    EXPECT_EQ(em.source.find("if (ks == 0) {  // the ring's refill") == std::string::npos, top);
    EXPECT_EQ(occurrences(em.source, "tsr::cp_async_commit();"), 2u);  // the prologue's and the loop's
  }
  for (const Case& c : {Case{"TESSERA_CUDA_SINGLE_FRAGMENTS", mm.get(), "tsr::ldsm_x4(fa[ks & 1]", "if (ks + 1 < "},
                        Case{"TESSERA_CUDA_SCRATCH_EXCHANGES", sm.get(), "reinterpret_cast<float*>(tsr_smem + 0)[", "tsr_red"}}) {
    for (bool on : {false, true}) {
      SCOPED_TRACE(std::string(c.env) + (on ? "=1 " : "=0 ") + c.k->name);
      testutil::ScopedEnv e(c.env, on ? "1" : "0");
      bool printed = false;
      CudaEmission em = by_layouts(*c.k, "sm_80", &printed);
      ASSERT_TRUE(printed);
      EXPECT_NE(em.source.find(on ? c.with : c.without), std::string::npos);
      if (nvrtc && on) expect_nvrtc_accepts(em, CudaTarget::parse("sm_80"));
    }
  }
  if (!nvrtc) GTEST_SKIP() << "emitted text checked; not compiled: " << why;
}

// Every GPU lowering pass --disable-pass may leave out (CudaTarget::disabled_passes) leaves a
// kernel the layout emitter still prints, for sm_80 and sm_90a: the bf16 matmul, FlashAttention
// bf16 and softmax; and the passes that decide something in them (those listed at the end:
// stage-mma-operands, prefetch-programs and pingpong-consumers decide nothing there) change what
// is printed (a pass left out is really out). One exception, with its note: without pipeline-loops the
// matmul's written `pipeline = 4` stays (the pass fits the stages to the target), whose ring
// needs more shared memory than sm_80 has, and the planning emitter prints it.
// LayoutEmitterGpu.EachLoweringPassLeftOutStillMatches runs them.
TEST(LayoutEmitter, EachLoweringPassLeftOutIsStillPrinted) {
  auto mm = bind_constexprs(*find_library_kernel("matmul")->build(ScalarKind::BF16), {});
  auto fa = parse_file(std::string(TESSERA_SOURCE_DIR) + "/tests/corpus/flash_attention_bf16.tile");
  auto fab = bind_constexprs(*fa->kernels[0], {});
  auto sm = bind_constexprs(*find_library_kernel("softmax")->build(ScalarKind::F32), {});
  std::map<std::string, int> changed;  // pass -> kernels x targets whose source it changed
  for (const char* target : {"sm_80", "sm_90a"})
    for (const Kernel* k : {mm.get(), fab.get(), sm.get()}) {
      bool printed = false;
      const std::string full = by_layouts(*k, target, &printed).source;
      ASSERT_TRUE(printed) << k->name << " " << target;
      for (const std::string& pass : gpu_lowering_pass_names()) {
        if (!disableable_gpu_lowering_pass(pass)) continue;
        CudaEmission em = by_layouts(*k, target, &printed, {pass});
        if (pass == "pipeline-loops" && k == mm.get() && std::string(target) == "sm_80")
          EXPECT_NE(em.notes.back().find("its shared tiles need 196608 bytes, over the 166912 of sm_80"), std::string::npos)
              << em.notes.back();
        else
          EXPECT_TRUE(printed) << "--disable-pass " << pass << ": " << k->name << " " << target << ": " << em.notes.back();
        changed[pass] += em.source != full;
      }
    }
  for (const char* pass : {"swizzle-mma-operands", "pipeline-loops", "persist-programs", "stage-epilogue-stores",
                           "specialize-warps"})
    EXPECT_GT(changed[pass], 0) << pass;
}

// The TMA hints are the layout emitter's too (hint-l2-policy writes l2_hint from them): A with
// evict_first always, B with no hint, and no "ignored" note; by default the run-time rule.
TEST(LayoutEmitter, TakesTheTmaHintKnobsThroughHintL2Policy) {
  const LibraryKernel* lk = find_library_kernel("matmul");
  ASSERT_NE(lk, nullptr);
  auto source_with = [&](const std::map<std::string, int64_t>& knobs, std::string& notes) {
    auto k = lk->build(ScalarKind::BF16);
    for (const auto& [n, v] : knobs) k->set_constexpr(n, v);
    bool printed = false;
    CudaEmission em = by_layouts(*bind_constexprs(*k, library_config(*lk, ScalarKind::BF16, "cuda:sm_90a")), "sm_90a", &printed);
    EXPECT_TRUE(printed);
    for (const std::string& n : em.notes) notes += n + "\n";
    return em.source;
  };
  std::string notes;
  const std::string fixed = source_with({{"tma_hint_a", 1}, {"tma_hint_b", 3}}, notes);
  EXPECT_EQ(notes.find("tma_hint"), std::string::npos) << notes;
  EXPECT_GT(occurrences(fixed, "tsr::tma_load_2d_hint("), 0u);
  EXPECT_EQ(occurrences(fixed, "<= 2) tsr::tma_load_2d_hint("), 0u);  // no run-time rule
  const std::string rule = source_with({}, notes);
  EXPECT_GT(occurrences(rule, "<= 2) tsr::tma_load_2d_hint("), 0u);
}

// Both emitters launch a program with the same warps (default_num_warps): whole rows of the
// norm kernels at 32768 elements take 16 warps (three such tiles loaded: x, w, b) or 32, not
// the 8 the layout emitter once took for every large tile (layernorm f32 at BLOCK_N = 32768: 128
// f32 a thread, 2.3 KB of stack and 5.9 s of NVRTC). A num_warps outside 1..32 is a located
// error on both, where it was silently replaced (0 is the backend's choice, as the tuner asks).
TEST(LayoutEmitter, TakesThePlanningEmittersWarps) {
  for (const auto& [name, block_n, threads] :
       std::vector<std::tuple<const char*, int64_t, int>>{{"layernorm", 32768, 512}, {"rmsnorm", 32768, 1024},
                                                          {"softmax", 32768, 1024}, {"softmax", 4096, 128}}) {
    SCOPED_TRACE(std::string(name) + " " + std::to_string(block_n));
    const LibraryKernel* lk = find_library_kernel(name);
    ASSERT_NE(lk, nullptr);
    auto k = bind_constexprs(*lk->build(ScalarKind::F32), {{"BLOCK_N", block_n}});
    bool printed = false;
    CudaEmission lay = by_layouts(*k, "sm_90a", &printed);
    EXPECT_TRUE(printed);
    EXPECT_EQ(lay.info.block_threads, threads);
    EXPECT_EQ(emit_cuda_with_info(*run_pipeline(*k, {}), CudaTarget::parse("sm_90a")).info.block_threads, threads);
    // num_warps = 0 is the backend's choice (the tuner's candidate), not an error.
    auto k0 = lk->build(ScalarKind::F32);
    k0->set_constexpr("num_warps", 0);
    EXPECT_EQ(by_layouts(*bind_constexprs(*k0, {{"BLOCK_N", block_n}}), "sm_90a", &printed).info.block_threads, threads);
  }
  for (int64_t warps : {-1, 33}) {
    auto k = find_library_kernel("softmax")->build(ScalarKind::F32);
    k->set_constexpr("num_warps", warps);
    for (bool layouts : {false, true}) {
      CudaTarget t = CudaTarget::parse("sm_90a");
      t.emitter = layouts ? CudaTarget::Emitter::Layouts : CudaTarget::Emitter::Planning;
      try {
        emit_cuda_with_info(*run_pipeline(*bind_constexprs(*k, {}), {}), t);
        ADD_FAILURE() << "num_warps = " << warps << " accepted";
      } catch (const TesseraError& e) {
        EXPECT_NE(std::string(e.what()).find("num_warps of kernel @softmax is " + std::to_string(warps)), std::string::npos)
            << e.what();
      }
    }
  }
}

// The row kernels' memory path as the planning emitter's (session 36, H100: layernorm bf16 at
// 4096 columns 1066 -> 2477 GB/s before the packing): a bf16 row loads in 16-byte runs (eight
// elements a thread along the row, assign-layouts' default for a shape loaded as bf16), tested
// once per tile (whole_tile_checks, on unless the kernel sets 0), into packed words that its
// f32 casts read at each use (pack_narrow_loads = 0 keeps f32 arrays); the second of two
// reductions in a row writes the other half of the scratch with no barrier before it.
TEST(LayoutEmitter, RowKernelsLoadPackedSixteenByteRuns) {
  for (const char* name : {"softmax", "layernorm", "rmsnorm"}) {
    SCOPED_TRACE(name);
    auto k = bind_constexprs(*find_library_kernel(name)->build(ScalarKind::BF16), {{"BLOCK_N", 4096}});
    bool printed = false;
    CudaEmission em = by_layouts(*k, "sm_90a", &printed);
    ASSERT_TRUE(printed);
    EXPECT_GE(em.stats["packed-loads"], 1);
    EXPECT_GE(em.stats["whole-tile-accesses"], 2);  // the row's load and store at least
    EXPECT_NE(em.source.find("tsr::copy_vec<uint32_t, 4>("), std::string::npos);  // 16 bytes
    EXPECT_NE(em.source.find("converts at each use"), std::string::npos);
    if (std::string(name) != "rmsnorm") EXPECT_GE(em.stats["reduction-barriers-saved"], 1);
    auto unpacked = find_library_kernel(name)->build(ScalarKind::BF16);
    unpacked->set_constexpr("pack_narrow_loads", 0);
    unpacked->set_constexpr("whole_tile_checks", 0);
    CudaEmission f32 = by_layouts(*bind_constexprs(*unpacked, {{"BLOCK_N", 4096}}), "sm_90a", &printed);
    EXPECT_EQ(f32.stats.count("packed-loads"), 0u);
    EXPECT_EQ(f32.stats.count("whole-tile-accesses"), 0u);
    EXPECT_NE(f32.source.find("tsr::copy_vec<uint16_t, 8>("), std::string::npos);
  }
}

// prefetch-programs' marks, printed: a whole bf16 row of 32768 (64 KiB a program) runs on
// persistent CTAs that copy the next program's row into shared memory after the first barrier
// that follows the load (one buffer), and layernorm keeps its weight and bias there too (copied
// once per CTA); the knob prefetch_programs = 0 keeps one CTA per program; with two buffers the
// copies follow the load. Compiled by NVRTC where it is installed (ptxas: no spills).
TEST(LayoutEmitter, RowKernelsPrefetchTheNextProgramsRow) {
  std::string why;
  const bool nvrtc = nvrtc_available(&why);
  for (const char* name : {"softmax", "layernorm"}) {
    SCOPED_TRACE(name);
    auto k = bind_constexprs(*find_library_kernel(name)->build(ScalarKind::BF16), {{"BLOCK_N", 32768}});
    bool printed = false;
    CudaEmission em = by_layouts(*k, "sm_90a", &printed);
    ASSERT_TRUE(printed);
    EXPECT_TRUE(em.info.persistent);
    EXPECT_EQ(em.stats["prefetched-program-loads"], 1);
    EXPECT_EQ(em.stats["prefetched-invariant-loads"], std::string(name) == "layernorm" ? 2 : 0);
    const std::string copy = "tsr::cp_async_16(tsr::smem_u32(tsr_pf_nxt";
    ASSERT_NE(em.source.find(copy), std::string::npos);
    // One buffer: the copies wait for a barrier after the load's reads of it.
    const size_t read = em.source.find("tsr_pf_cur + 0 + ");
    ASSERT_NE(read, std::string::npos);
    EXPECT_NE(em.source.substr(read, em.source.find(copy) - read).find("__syncthreads();"), std::string::npos);
    if (nvrtc && std::string(name) == "softmax") expect_nvrtc_accepts(em, CudaTarget::parse("sm_90a"));  // (layernorm: 3 s)
    auto off = find_library_kernel(name)->build(ScalarKind::BF16);
    off->set_constexpr("prefetch_programs", 0);
    CudaEmission plain = by_layouts(*bind_constexprs(*off, {{"BLOCK_N", 32768}}), "sm_90a", &printed);
    EXPECT_FALSE(plain.info.persistent);
    EXPECT_EQ(plain.source.find("tsr_pf_"), std::string::npos);
  }
  auto two = find_library_kernel("softmax")->build(ScalarKind::F32);
  two->set_constexpr("prefetch_buffers", 2);
  bool printed = false;
  CudaEmission em = by_layouts(*bind_constexprs(*two, {{"BLOCK_N", 16384}}), "sm_80", &printed);
  ASSERT_TRUE(printed);
  EXPECT_NE(em.source.find("tsr_pf_at ^= "), std::string::npos);
  const size_t read = em.source.find("tsr_pf_cur + 0 + "), copy = em.source.find("tsr_pf_nxt + 0 + ");
  ASSERT_NE(copy, std::string::npos);
  EXPECT_EQ(em.source.substr(read, copy - read).find("__syncthreads();"), std::string::npos);
  if (nvrtc) expect_nvrtc_accepts(em, CudaTarget::parse("sm_80"));
}

// Marks written by hand (prefetch-programs' output read back): printed as the pass's own, and
// the marks the copies could not honour are located errors: a tile copied once with two
// buffers (the second would never hold it), tiles overlapping in the buffer.
TEST(LayoutEmitter, WrittenPrefetchMarksArePrintedOrRejected) {
  auto text = [](const std::string& load_attrs, const std::string& w_attrs, int64_t buffers) {
    return "kernel @k(%x: view<f32, [M, N]>, %w: view<f32, [N]>, %y: view<f32, [M, N]>) {\n"
           "  grid {\n    %m = dim %x {axis = 0} : i32\n    yield %m {persistent = 1, prefetch_buffers = " +
           std::to_string(buffers) +
           "}\n  }\n"
           "  %p = program_id {axis = 0} : i32\n  %zero = const {value = 0} : i32\n"
           "  %t = load_tile %x, %p, %zero {" + load_attrs + "} : tile<f32, [1, 8192]>\n"
           "  %wt = load_tile %w, %zero " + (w_attrs.empty() ? "" : "{" + w_attrs + "} ") + ": tile<f32, [8192]>\n"
           "  %w2 = expand_dims %wt {axis = 0} : tile<f32, [1, 8192]>\n"
           "  %r = mul %t, %w2 : tile<f32, [1, 8192]>\n  store_tile %y, %r, %p, %zero\n}\n";
  };
  auto print = [&](const std::string& src) {
    auto m = parse_module(src, "marks.tile");
    bool printed = false;
    CudaEmission em = by_layouts(*bind_constexprs(*m->kernels.at(0), {}), "sm_80", &printed);
    EXPECT_TRUE(printed);
    return em;
  };
  CudaEmission em = print(text("prefetch = \"next_program\", prefetch_at = 0", "prefetch = \"once\", prefetch_at = 32768", 1));
  EXPECT_TRUE(em.info.persistent);
  EXPECT_EQ(em.stats["prefetched-program-loads"], 1);
  EXPECT_EQ(em.stats["prefetched-invariant-loads"], 1);
  auto error_of = [&](const std::string& src) -> std::string {
    try {
      print(src);
    } catch (const TesseraError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of(text("prefetch = \"next_program\", prefetch_at = 0", "prefetch = \"once\", prefetch_at = 32768", 2))
                .find("prefetch = \"once\" needs prefetch_buffers = 1"),
            std::string::npos);
  EXPECT_NE(error_of(text("prefetch = \"next_program\", prefetch_at = 0", "prefetch = \"once\", prefetch_at = 16384", 1))
                .find("overlap those of the load at"),
            std::string::npos);
  EXPECT_NE(error_of(text("prefetch = \"once\", prefetch_at = 0", "", 1)).find("on a tile that depends on the program ids"),
            std::string::npos);
  // A kernel prefetch-programs would decline (a dot: its copies and ring are its own).
  const std::string with_dot = R"(kernel @k(%x: view<f32, [M, N]>, %a: view<f16, [M, K]>, %b: view<f16, [K, N]>, %y: view<f32, [M, N]>) {
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m {persistent = 1, prefetch_buffers = 1}
  }
  %p = program_id {axis = 0} : i32
  %zero = const {value = 0} : i32
  %t = load_tile %x, %p, %zero {prefetch = "next_program", prefetch_at = 0} : tile<f32, [64, 64]>
  %ta = load_tile %a, %p, %zero : tile<f16, [64, 64]>
  %tb = load_tile %b, %zero, %zero : tile<f16, [64, 64]>
  %c = dot %ta, %tb, %t : tile<f32, [64, 64]>
  store_tile %y, %c, %p, %zero
}
)";
  EXPECT_NE(error_of(with_dot).find("which program prefetch cannot run beside"), std::string::npos) << error_of(with_dot);
}

// A load whose rows are not whole 16-byte chunks (24 i8 elements) cannot be cp.async copies:
// it stays a load into registers, stored into the shared tile after it, and the layout
// emitter prints the kernel (it fell back to the planning emitter when remove-layout-conversions
// made every such load write shared memory); B's rows of 32 bytes load into shared memory.
TEST(LayoutEmitter, LoadsIntoSharedMemoryOnlyInWholeChunks) {
  auto m = parse_module(R"(kernel @k24(%a: view<i8, [M, K]>, %b: view<i8, [K, N]>, %c: view<i32, [M, N]>) {
  grid {
    %one = const {value = 1} : i32
    yield %one
  }
  %z = const {value = 0} : i32
  %x = load_tile %a, %z, %z : tile<i8, [32, 24]>
  %y = load_tile %b, %z, %z : tile<i8, [24, 32]>
  %acc = splat %z : tile<i32, [32, 32]>
  %d = dot %x, %y, %acc : tile<i32, [32, 32]>
  store_tile %c, %d, %z, %z
})", "k24.tile");
  for (const char* target : {"sm_80", "sm_90a"}) {
    SCOPED_TRACE(target);
    bool printed = false;
    CudaEmission em = by_layouts(*m->kernels[0], target, &printed);
    EXPECT_TRUE(printed) << em.notes.back();
    EXPECT_EQ(em.stats["fma-dots-from-shared"], 1);
    EXPECT_EQ(em.stats["loads-into-shared"], 1);
    EXPECT_EQ(em.stats["stores-to-shared"], 1);
  }
}

// NVRTC (and ptxas) compile what the layout emitter prints for the kernels it learned to print
// last, for sm_80 and sm_90a: the corpus's FMA dots (f32 and small dots), argmax, gathers,
// atomics and insert_tile; the library's sort, and its 16-bit matmul on sm_80 (the ring cut to
// 3 stages). One test per kernel file, so that ctest runs them side by side (attention_plain's
// FMA dots over K = 256 took ptxas most of a minute per target while their operands were held
// in registers for all of K; read from shared memory per k since session 19, about a second).
// tests/gpu/layout_emitter_gpu_test.cpp runs them against the interpreter.
class NewlyPrinted : public ::testing::TestWithParam<std::string> {};

TEST_P(NewlyPrinted, CompilesForSm80AndSm90a) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  std::vector<std::unique_ptr<Kernel>> kernels;
  if (const LibraryKernel* lk = find_library_kernel(GetParam())) {
    const ScalarKind dt = lk->name == "sort" ? ScalarKind::F32 : ScalarKind::BF16;
    kernels.push_back(bind_constexprs(*lk->build(dt), library_config(*lk, dt, "cuda:sm_80")));
  } else {
    auto m = parse_file(std::string(TESSERA_SOURCE_DIR) + "/tests/corpus/" + GetParam() + ".tile");
    for (auto& k : m->kernels) kernels.push_back(bind_constexprs(*k, {}));
  }
  for (const char* target : {"sm_80", "sm_90a"}) {
    if (GetParam() == "matmul" && std::string(target) != "sm_80") continue;
    for (const auto& k : kernels) {
      SCOPED_TRACE(std::string(target) + " " + k->name);
      bool printed = false;
      CudaEmission em = by_layouts(*k, target, &printed);
      ASSERT_TRUE(printed) << em.notes.back();
      expect_nvrtc_accepts(em, CudaTarget::parse(target));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(LayoutEmitter, NewlyPrinted,
                         ::testing::Values("attention_plain", "attention_three_loops", "flash_attention_fwd",
                                           "flash_attention_causal", "linear_cross_entropy",
                                           "linear_cross_entropy_materialized", "argmax_rows", "cross_entropy",
                                           "int4_dequant_matmul", "moe_count", "sort", "matmul"));

// Reductions of a whole tile to a scalar (a row's statistic in layernorm, decode attention's
// running max and sum): folds, shuffles over the lanes that hold different elements, then one
// exchange over the warps; NVRTC compiles what the layout emitter prints.
TEST(LayoutEmitter, ScalarReductionsCompile) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  for (const char* file : {"layernorm", "decode_attention"}) {
    auto m = parse_file(std::string(TESSERA_SOURCE_DIR) + "/tests/corpus/" + file + ".tile");
    CudaTarget t = CudaTarget::parse("sm_90a");
    t.emitter = CudaTarget::Emitter::Layouts;
    CudaEmission em = emit_cuda_with_info(*run_pipeline(*bind_constexprs(*m->kernels.at(0), {}), {}), t);
    EXPECT_NE(em.notes.at(0).find("printed from the GPU lowering"), std::string::npos) << file;
    EXPECT_GT(em.stats["reduction-shuffles"], 0) << file;
    if (std::string(file) == "decode_attention") EXPECT_GT(em.stats["reduction-warp-exchanges"], 0);
    NvrtcResult r = nvrtc_compile(em.source, t, std::string(file) + ".cu", em.line_op);
    EXPECT_NE(r.ptx.find("shfl.sync.bfly"), std::string::npos) << file;
  }
}

// The corpus's bf16 FlashAttention at these constexprs, printed by the layout emitter for
// `target`, and its PTX.
struct FlashAttentionPtx {
  CudaEmission em;
  std::string ptx;
  size_t count(const std::string& what) const { return occurrences(ptx, what); }
};
FlashAttentionPtx flash_attention_ptx(const std::string& target, const std::map<std::string, int64_t>& config) {
  auto m = parse_file(std::string(TESSERA_SOURCE_DIR) + "/tests/corpus/flash_attention_bf16.tile");
  auto k = run_pipeline(*bind_constexprs(*m->find("flash_attention_bf16"), config), {});
  CudaTarget t = CudaTarget::parse(target);
  t.emitter = CudaTarget::Emitter::Layouts;
  FlashAttentionPtx out{emit_cuda_with_info(*k, t), ""};
  out.ptx = nvrtc_compile(out.em.source, t, "fa.cu", out.em.line_op).ptx;
  return out;
}

TEST(LayoutEmitter, FlashAttentionBf16IsTwoMmaDotsOnLdmatrix) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  FlashAttentionPtx fa = flash_attention_ptx("sm_80", {});
  auto& st = fa.em.stats;
  EXPECT_EQ(st["mma-dots"], 2);
  EXPECT_EQ(st["loads-into-shared"], 1);     // Q, before the loop
  EXPECT_EQ(st["ring-loops"], 1);            // K and V through a 2-stage cp.async ring
  EXPECT_EQ(st["register-conversions"], 1);  // P: the scores' accumulator is A
  EXPECT_EQ(st["layout-exchanges"], 0);      // the output is stored from the accumulator's layout
  // 2 dots x 4 k16 steps x 8 n8 tiles per warp (BM = BN = D = 64, 4 warps of 16 rows).
  EXPECT_EQ(fa.count("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), 64u);
  EXPECT_GT(fa.count("ldmatrix.sync.aligned.m8n8.x4"), 0u);
  EXPECT_GT(fa.count("cp.async.cg.shared.global"), 0u);
  // Q's copy (2) and the loop (1 per iteration: after the wait for its stage, which also
  // frees the stage the next copies refill).
  EXPECT_EQ(fa.count("bar.sync"), 3u);
}

TEST(LayoutEmitter, FlashAttentionBf16OnSm90aIsWgmmaSsThenRs) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  FlashAttentionPtx fa = flash_attention_ptx("sm_90a", {{"BM", 128}, {"D", 128}});
  auto& st = fa.em.stats;
  EXPECT_EQ(st["wgmma-dots"], 2);
  EXPECT_EQ(st["mma-dots"], 0);
  EXPECT_EQ(st["tma-ring-loops"], 1);    // K and V: TMA into swizzled tiles, an mbarrier ring
  EXPECT_EQ(st["staged-operands"], 0);   // no operand goes through shared memory but loads
  EXPECT_EQ(st["layout-exchanges"], 0);  // the output is stored from the accumulator's layout
  // K's and V's 3-D views get tensor maps, boxes of 64 columns x BN rows x 1 head.
  int maps = 0;
  for (const CudaParam& p : fa.em.info.params)
    if (p.kind == CudaParam::Kind::TensorMap) maps += p.rank == 3 && p.box[0] == 64 && p.box[1] == 64 && p.box[2] == 1;
  EXPECT_EQ(maps, 2);
  // QK^T: Q and K from shared memory (SS), 8 k16 steps of m64n64 per warpgroup; P@V: P from
  // registers (RS, four 32-bit A registers), 4 k16 steps of m64n128 with V MN-major.
  EXPECT_EQ(fa.count("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "), 8u);
  EXPECT_EQ(fa.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "), 4u);
  EXPECT_EQ(fa.count("ldmatrix"), 0u);
  EXPECT_EQ(fa.count("mma.sync"), 0u);
  // No producer warpgroup: two programs' shared tiles (Q and a 2-stage K/V ring, 96 KiB) fit
  // on an SM (specialize-warps). Two boxes of 64 columns each for K and V, in the prologue and
  // in the loop.
  EXPECT_EQ(st["producer-warpgroups"], 0);
  EXPECT_EQ(fa.em.info.block_threads, 256);
  EXPECT_EQ(fa.count("cp.async.bulk.tensor.3d"), 8u);
  // Q's copy (2) and the barriers' initialisation (1): none in the loop, whose warps meet only
  // at the ring's mbarriers.
  EXPECT_EQ(fa.count("bar.sync"), 3u);
}

// With BN = 128 the K/V ring takes 128 KiB: one program per SM, and the loop gets a producer
// warpgroup (specialize-warps): two compute warpgroups and one whose thread issues every copy
// (two boxes for K and two for V, in its loop only), registers moved to the compute warps, and
// the compute warps' barriers named ones that the producer never joins.
TEST(LayoutEmitter, FlashAttentionBf16WithLargeTilesHasAProducerWarpgroup) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  FlashAttentionPtx fa = flash_attention_ptx("sm_90a", {{"BM", 128}, {"BN", 128}, {"D", 128}});
  auto& st = fa.em.stats;
  EXPECT_EQ(st["wgmma-dots"], 2);
  EXPECT_EQ(st["producer-warpgroups"], 1);
  EXPECT_EQ(fa.em.info.block_threads, 384);
  EXPECT_NE(fa.em.source.find("__launch_bounds__(384, 1)"), std::string::npos);
  EXPECT_EQ(fa.count("cp.async.bulk.tensor.3d"), 4u);
  EXPECT_EQ(fa.count("setmaxnreg.dec.sync.aligned.u32 40"), 1u);
  EXPECT_EQ(fa.count("setmaxnreg.inc.sync.aligned.u32 232"), 1u);
  // The barriers' initialisation (1, the whole program) and Q's copy (2, the compute warps'
  // named barrier over their 256 threads).
  EXPECT_EQ(fa.count("bar.sync"), 3u);
  const size_t compute = fa.em.source.find("the compute warps");
  ASSERT_NE(compute, std::string::npos);
  EXPECT_EQ(fa.em.source.find("__syncthreads", compute), std::string::npos);
  EXPECT_NE(fa.em.source.find("tsr::named_barrier(8u, 256u);", compute), std::string::npos);
}

// persist-programs: matmul + bias + GELU's K loop has a producer warpgroup, so its programs run
// on persistent CTAs. Both branches loop over the programs in grouped order (the grid's sizes
// are parameters), the compute warps' count of iterations runs on across programs, and they
// release the last stage of each program's loop for the producer's next copies; the result
// goes out by TMA (store-epilogues-by-tma). Written `persistent = 0`: one CTA per program again.
TEST(LayoutEmitter, MatmulWithAProducerRunsOnPersistentCtas) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  const std::string path = std::string(TESSERA_SOURCE_DIR) + "/tests/corpus/matmul_bias_gelu.tile";
  CudaTarget t = CudaTarget::parse("sm_90a");
  t.emitter = CudaTarget::Emitter::Layouts;
  auto emit = [&](const std::string& text) {
    auto m = parse_module(text, path);
    auto k = run_pipeline(*bind_constexprs(*m->find("matmul_bias_gelu"), {{"BM", 128}, {"BN", 128}, {"BK", 64}}), {});
    return emit_cuda_with_info(*k, t);
  };
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CudaEmission em = emit(text);
  EXPECT_EQ(em.stats["producer-warpgroups"], 1);
  EXPECT_EQ(em.stats["persistent-programs"], 1);
  EXPECT_TRUE(em.info.persistent);
  int grid_params = 0;
  for (const auto& p : em.info.params) grid_params += p.kind == CudaParam::Kind::GridSize;
  EXPECT_EQ(grid_params, 3);
  const std::string loop = "for (uint32_t tsr_t = blockIdx.x; tsr_t < tsr_programs; tsr_t += gridDim.x) {";
  const size_t compute = em.source.find("the compute warps");
  ASSERT_NE(compute, std::string::npos);
  EXPECT_LT(em.source.find(loop), compute);            // the producer's
  EXPECT_NE(em.source.find(loop, compute), std::string::npos);  // the compute warps'
  EXPECT_NE(em.source.find("iterations begun, over the CTA's programs", compute), std::string::npos);
  EXPECT_NE(em.source.find("this program's first iteration", compute), std::string::npos);
  // The in-flight dot's last stage is released after the loop, for the next program's copies.
  const size_t last = em.source.find("tsr::wgmma_wait<0>();  // the last group", compute);
  ASSERT_NE(last, std::string::npos);
  const size_t release = em.source.find("tsr::mbar_arrive(", last);
  ASSERT_NE(release, std::string::npos);
  EXPECT_LT(release, em.source.find("load_tile %bias", last));
  // store-epilogues-by-tma: the f16 result goes out in two 64 x 64 boxes per warpgroup by TMA,
  // whose reads of the buffers end before the CTA does.
  EXPECT_EQ(em.stats["tma-stores"], 1);
  EXPECT_NE(em.source.find("tsr::epilogue_box_sw128<1, 1>(", compute), std::string::npos);
  EXPECT_EQ(em.source.find("tsr::epilogue_box_sw128<2, "), std::string::npos);
  EXPECT_NE(em.source.find("tsr::bulk_wait_all();", compute), std::string::npos);
  const std::string ptx = nvrtc_compile(em.source, t, "persistent.cu", em.line_op).ptx;
  EXPECT_NE(ptx.find("wgmma.mma_async"), std::string::npos);
  EXPECT_NE(ptx.find("cp.async.bulk.tensor.2d.global.shared::cta"), std::string::npos);

  const std::string written = std::regex_replace(text, std::regex("yield %gm, %gn\n"), "yield %gm, %gn {persistent = 0}\n");
  ASSERT_NE(written, text);
  CudaEmission one = emit(written);
  EXPECT_EQ(one.stats["producer-warpgroups"], 1);
  EXPECT_EQ(one.stats["persistent-programs"], 0);
  EXPECT_FALSE(one.info.persistent);
  EXPECT_EQ(one.source.find("tsr_programs"), std::string::npos);
  EXPECT_EQ(one.stats["tma-stores"], 0);  // the TMA store follows persistence
}

// split-k-loops in the layout emitter (Emitter::Layouts): the unsplit compilation of the
// library's bf16 matmul says the runtime may split it; its split-K compilation runs one CTA per
// program and slice (not persistent), takes the SplitWorkspace last, sizes a CTA's slot as the
// compute threads' accumulator slots, and adds the partial sums after the loop and before the
// epilogue's store, within a cluster where launched in one (the 128 KiB of partial sums fit the
// B operand's idle ring of 4 x 32 KiB; the producer warpgroup passes the same two cluster
// barriers as the compute warps), else through the workspace; it compiles without spills. The default (Emitter::Auto) still gives the
// split compilation to the planning emitter, whose split the GPU has measured.
TEST(LayoutEmitter, SplitKCompilationAddsThePartialSumsBeforeTheEpilogue) {
  const LibraryKernel& lk = *find_library_kernel("matmul");
  auto k = run_pipeline(*bind_constexprs(*lk.build(ScalarKind::BF16), library_config(lk, ScalarKind::BF16, "cuda:sm_90a")), {});
  CudaTarget t = CudaTarget::parse("sm_90a");
  t.emitter = CudaTarget::Emitter::Layouts;
  const CudaEmission whole = emit_cuda_with_info(*k, t);
  EXPECT_TRUE(whole.info.split_k_capable);
  EXPECT_FALSE(whole.info.split_k);
  t.split_k = true;
  const CudaEmission em = emit_cuda_with_info(*k, t);
  ASSERT_TRUE(em.lowered);
  EXPECT_TRUE(em.info.split_k);
  EXPECT_TRUE(em.info.split_cluster);
  EXPECT_FALSE(em.info.persistent);
  EXPECT_EQ(em.stats.at("split-k"), 1);
  ASSERT_FALSE(em.info.params.empty());
  EXPECT_EQ(em.info.params.back().kind, CudaParam::Kind::SplitWorkspace);
  EXPECT_EQ(em.info.split_slot_bytes, 128 * 256 * 4);  // the 128 x 256 f32 accumulator
  const size_t fixup = em.source.find("atomicAdd(cnt_ + prog_, 1u)");
  ASSERT_NE(fixup, std::string::npos);
  EXPECT_LT(em.source.find("tsr::wgmma_wait<0>();  // the last group"), fixup);
  EXPECT_LT(fixup, em.source.find("// store_tile %c"));
  EXPECT_NE(em.source.find("int32_t(blockIdx.z)"), std::string::npos);  // program_id(2): the slice
  const size_t compute = em.source.find("} else {  // the compute warps");
  ASSERT_NE(compute, std::string::npos);
  const size_t producer_syncs = em.source.find("tsr::cluster_sync(), tsr::cluster_sync();");
  EXPECT_LT(producer_syncs, compute);
  const size_t in_cluster = em.source.find("tsr::floats_add_cluster(", compute);
  EXPECT_LT(in_cluster, fixup);  // (the cluster's path first, the workspace's in its else)
  // Two cluster barriers on the compute warps' path too, after one over the compute warps (each
  // warpgroup's wait covers only its own wgmma groups, which still read the ring the sums go to).
  const size_t last_group = em.source.find("tsr::wgmma_wait<0>();  // the last group", compute);
  const size_t to_smem = em.source.find("tsr::floats_to_smem(", compute);
  ASSERT_NE(to_smem, std::string::npos);
  EXPECT_NE(em.source.substr(last_group, to_smem - last_group).find("tsr::named_barrier(8u, 256u);"), std::string::npos);
  int compute_syncs = 0;
  for (size_t p = em.source.find("tsr::cluster_sync();", compute); p != std::string::npos;
       p = em.source.find("tsr::cluster_sync();", p + 1))
    ++compute_syncs;
  EXPECT_EQ(compute_syncs, 2);
  t.emitter = CudaTarget::Emitter::Auto;  // the default's split compilation is this one
  EXPECT_TRUE(emit_cuda_with_info(*k, t).lowered);
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  t.emitter = CudaTarget::Emitter::Layouts;
  const NvrtcResult r = nvrtc_compile(em.source, t, "split.cu", em.line_op);
  EXPECT_EQ(cubin_resources(r.cubin, em.info.symbol).frame_bytes, 0) << "spills";
}

// Where the unsplit compilation says the runtime may split (split_k_capable), the split
// compilation splits, over the wgmma kernels' tile choices: the runtime runs a kernel whose
// split compilation does not split unsplit, which this keeps the exception.
TEST(LayoutEmitter, SplitCapableKernelsSplit) {
  CudaTarget t = CudaTarget::parse("sm_90a");
  t.emitter = CudaTarget::Emitter::Layouts;
  int capable = 0;
  for (const char* name : {"matmul", "matmul_fp8"}) {
    const LibraryKernel& lk = *find_library_kernel(name);
    for (ScalarKind dt : lk.dtypes)
      for (int64_t bm : {64, 128})
        for (int64_t bn : {64, 128, 256})
          for (int64_t bk : {64, 128}) {
            auto k = run_pipeline(*bind_constexprs(*lk.build(dt), {{"BLOCK_M", bm}, {"BLOCK_N", bn}, {"BLOCK_K", bk}}), {});
            const std::string what = std::string(name) + " " + std::string(scalar_name(dt)) + " " + std::to_string(bm) + "x" +
                                     std::to_string(bn) + "x" + std::to_string(bk);
            CudaTarget whole = t;
            CudaEmission em;
            try {
              em = emit_cuda_with_info(*k, whole);
            } catch (const TesseraError&) {
              continue;  // (a tile over the shared memory: a located error, not this test's)
            }
            if (!em.info.split_k_capable) continue;
            ++capable;
            CudaTarget split = t;
            split.split_k = true;
            const CudaEmission s = emit_cuda_with_info(*k, split);
            EXPECT_TRUE(s.info.split_k) << what;
            EXPECT_TRUE(s.lowered) << what;
            EXPECT_TRUE(s.info.split_cluster) << what;
          }
  }
  EXPECT_GT(capable, 10);
}

// A wgmma A operand read MN-major (a permute of a [K, M] shared tile, 16-bit): the decode GEMM
// of the corpus written as c^T = b^T a^T takes wgmma with the A-transpose immediate, each
// warpgroup's 64 rows one 128-byte column block of b's [64, 128] tile (8 KiB apart), k16 steps
// 16 rows (2 KiB) down; it compiles without spills.
TEST(LayoutEmitter, WgmmaReadsAnMnMajorAOperand) {
  const std::string path = std::string(TESSERA_SOURCE_DIR) + "/tests/corpus/matmul_decode_swapped.tile";
  auto m = parse_file(path);
  auto k = run_pipeline(*m->kernels[0], {});
  CudaTarget t = CudaTarget::parse("sm_90a");
  t.emitter = CudaTarget::Emitter::Layouts;
  const CudaEmission em = emit_cuda_with_info(*k, t);
  ASSERT_TRUE(em.lowered);
  EXPECT_EQ(em.stats.at("wgmma-dots"), 1);
  EXPECT_EQ(em.stats.at("wgmma-mn-major-a"), 1);
  EXPECT_NE(em.source.find("tsr::wgmma_m64n16k16_bf16<0, 1>("), std::string::npos);
  EXPECT_NE(em.source.find("tsr::wgmma_desc_sw128(sa_ + 2048u + wg_ * 8192u, 8192u, 1024u)"), std::string::npos);
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  const NvrtcResult r = nvrtc_compile(em.source, t, "swapped.cu", em.line_op);
  EXPECT_NE(r.ptx.find("wgmma.mma_async"), std::string::npos);
  EXPECT_EQ(cubin_resources(r.cubin, em.info.symbol).frame_bytes, 0) << "spills";
}

// store-epilogues-by-tma's boxes: a 192-wide result has three boxes, so the next program's first
// box writes the buffer of this program's last, and every box waits for all earlier stores'
// reads (InFlight 0). A kernel whose exchanges need the shared memory the staging buffers take
// (a column sum stored beside the matmul's 128 x 256 result) stores from registers instead.
TEST(LayoutEmitter, TmaStoreBoxesAndStagingThatDoesNotFit) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  auto text = [](int bn, bool column_sum) {
    const std::string BN = std::to_string(bn), T = "tile<f32, [128, " + BN + "]>";
    return "kernel @k(%a: view<f16, [M, K]>, %b: view<f16, [K, N]>, %o: view<f16, [M, N]>, %s: view<f32, [N]>) {\n"
           "  grid {\n    %m = dim %a {axis = 0} : i32\n    %n = dim %b {axis = 1} : i32\n    yield %m, %n\n  }\n"
           "  %pm = program_id {axis = 0} : i32\n  %pn = program_id {axis = 1} : i32\n"
           "  %zero = const {value = 0} : i32\n  %one = const {value = 1} : i32\n"
           "  %k = dim %a {axis = 1} : i32\n  %bk = const {value = 64} : i32\n  %kt = div %k, %bk : i32\n"
           "  %f0 = const {value = 0.0} : f32\n  %z = splat %f0 : " + T + "\n"
           "  %acc = for %zero, %kt, %one, %z : " + T + " {\n  ^(%kk: i32, %c: " + T + "):\n"
           "    %ta = load_tile %a, %pm, %kk : tile<f16, [128, 64]>\n"
           "    %tb = load_tile %b, %kk, %pn : tile<f16, [64, " + BN + "]>\n"
           "    %cn = dot %ta, %tb, %c : " + T + "\n    yield %cn\n  }\n"
           "  %h = cast %acc : tile<f16, [128, " + BN + "]>\n  store_tile %o, %h, %pm, %pn\n" +
           (column_sum ? "  %cs = reduce %acc {kind = \"sum\", axis = 0} : tile<f32, [" + BN + "]>\n  store_tile %s, %cs, %pn\n"
                       : std::string()) + "}\n";
  };
  CudaTarget t = CudaTarget::parse("sm_90a");
  t.emitter = CudaTarget::Emitter::Layouts;
  auto emit = [&](const std::string& src) {
    auto m = parse_module(src, "tma_store.tile");
    return emit_cuda_with_info(*run_pipeline(*m->kernels.at(0), {}), t);
  };
  CudaEmission three = emit(text(192, false));
  EXPECT_EQ(three.stats["tma-stores"], 1);
  EXPECT_NE(three.source.find("tsr::epilogue_box_sw128<2, 0>("), std::string::npos);
  EXPECT_EQ(three.source.find("tsr::epilogue_box_sw128<1, 1>("), std::string::npos);
  CudaEmission both = emit(text(256, true));
  EXPECT_EQ(both.stats["wgmma-dots"], 1);
  EXPECT_EQ(both.stats["producer-warpgroups"], 1);
  EXPECT_EQ(both.stats["tma-stores"], 0);
  const bool noted = std::any_of(both.notes.begin(), both.notes.end(),
                                 [](const std::string& n) { return n.find("tma_store = 0: ") == 0; });
  EXPECT_TRUE(noted);
  ASSERT_TRUE(both.lowered);
  EXPECT_NE(print_kernel(*both.lowered).find("{tma_store = 0}"), std::string::npos);
}

// A wgmma A operand computed in registers in another layout than the fragment's (a cast of a
// loaded f32 tile) is exchanged into the RS fragment layout, not staged for ldmatrix (which
// wgmma does not read): the dot is RS wgmma and NVRTC compiles it.
TEST(LayoutEmitter, WgmmaRegisterOperandFromAnotherLayoutIsExchanged) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  auto m = parse_module(R"(kernel @k(%a: view<f32, [M, K]>, %b: view<bf16, [K, N]>, %o: view<f32, [M, N]>) {
  grid {
    %m = dim %a {axis = 0} : i32
    yield %m
  }
  %pm = program_id {axis = 0} : i32
  %zero = const {value = 0} : i32
  %f0 = const {value = 0.0} : f32
  %z = splat %f0 : tile<f32, [128, 64]>
  %ta = load_tile %a, %pm, %zero : tile<f32, [128, 64]>
  %ab = cast %ta : tile<bf16, [128, 64]>
  %tb = load_tile %b, %zero, %zero : tile<bf16, [64, 64]>
  %r = dot %ab, %tb, %z : tile<f32, [128, 64]>
  store_tile %o, %r, %pm, %zero
})", "rs.tile");
  CudaTarget t = CudaTarget::parse("sm_90a");
  t.emitter = CudaTarget::Emitter::Layouts;
  CudaEmission em = emit_cuda_with_info(*run_pipeline(*m->kernels.at(0), {}), t);
  EXPECT_EQ(em.stats["wgmma-dots"], 1);
  EXPECT_EQ(em.stats["staged-operands"], 0);
  EXPECT_EQ(em.source.find("tsr::f2bf2(sh"), std::string::npos);  // fragments from registers only
  NvrtcResult r = nvrtc_compile(em.source, t, "rs.cu", em.line_op);
  EXPECT_NE(r.ptx.find("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"), std::string::npos);
}

// Raw code (since session 55): its tile operands staged into shared memory as flat arrays by
// their layouts, its tile results gathered back into theirs (blocked, from assign-layouts);
// Emitter::Layouts and Auto print it (it ran on the H100 in session 56), and
// NVRTC compiles it. (tests/gpu: LayoutEmitterGpu.RawCodeMatchesTheHost.)
TEST(LayoutEmitter, PrintsRawCode) {
  auto m = parse_module(R"(kernel @popcount(%x: view<i32, [N]>, %y: view<i32, [N]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    yield %n
  }
  %p = program_id {axis = 0} : i32
  %t = load_tile %x, %p : tile<i32, [1024]>
  %pc = raw %t {name = "popcount", cuda = "for (int64_t i = tsr_tid; i < in0_numel; i += tsr_nthreads) out0[i] = __popc(in0[i]);"} : tile<i32, [1024]>
  store_tile %y, %pc, %p
})", "raw.tile");
  const auto bound = bind_constexprs(*m->kernels.at(0), {});
  bool printed = false;
  CudaEmission em = by_layouts(*bound, "sm_90a", &printed);
  EXPECT_TRUE(printed) << em.notes.back();
  EXPECT_NE(em.source.find("out0[i] = __popc(in0[i]);"), std::string::npos);
  CudaTarget t = CudaTarget::parse("sm_90a");
  t.emitter = CudaTarget::Emitter::Auto;
  const CudaEmission by_default = emit_cuda_with_info(*run_pipeline(*bound, {}), t);
  EXPECT_NE(by_default.lowered, nullptr) << by_default.notes.back();
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  EXPECT_FALSE(nvrtc_compile(em.source, CudaTarget::parse("sm_90a"), "raw.cu", em.line_op).cubin.empty());
}

// A loop that specialize-warps gives a producer warpgroup (here written: `warp_specialize = 1`)
// but the layout emitter prints without one (its ring loads read 4-D views, which the TMA
// copies here do not describe: a cp.async ring instead) is printed from IR that says so: the
// lowered kernel and the source's IR comments have `warp_specialize = 0`, and the note says why.
// The same re-print serves a kernel whose compute code needs a whole-program barrier
// (NotWarpSpecializable), which no kernel reaches today: specialize-warps refuses the sort,
// topk, histogram, Struct and raw ops whose code has one.
TEST(LayoutEmitter, LoopPrintedWithoutItsProducerSaysSoInTheIr) {
  auto m = parse_module(R"(kernel @k(%a: view<f16, [B, H, M, K]>, %b: view<f16, [B, H, K, N]>, %o: view<f32, [M, N]>) {
  grid {
    %m = dim %a {axis = 2} : i32
    %bm = const {value = 128} : i32
    %g = div %m, %bm : i32
    yield %g
  }
  %pm = program_id {axis = 0} : i32
  %zero = const {value = 0} : i32
  %one = const {value = 1} : i32
  %k = dim %a {axis = 3} : i32
  %bk = const {value = 64} : i32
  %kt = div %k, %bk : i32
  %f0 = const {value = 0.0} : f32
  %z = splat %f0 : tile<f32, [128, 128]>
  %acc = for %zero, %kt, %one, %z {warp_specialize = 1} : tile<f32, [128, 128]> {
  ^(%kk: i32, %c: tile<f32, [128, 128]>):
    %ta4 = load_tile %a, %zero, %zero, %pm, %kk : tile<f16, [1, 1, 128, 64]>
    %ta = reshape %ta4 : tile<f16, [128, 64]>
    %tb4 = load_tile %b, %zero, %zero, %kk, %zero : tile<f16, [1, 1, 64, 128]>
    %tb = reshape %tb4 : tile<f16, [64, 128]>
    %cn = dot %ta, %tb, %c : tile<f32, [128, 128]>
    yield %cn
  }
  store_tile %o, %acc, %pm, %zero
})", "ws.tile");
  CudaTarget t = CudaTarget::parse("sm_90a");
  t.emitter = CudaTarget::Emitter::Layouts;
  const auto bound = run_pipeline(*m->kernels.at(0), {});
  // specialize-warps keeps the written request: the pass alone cannot tell.
  const auto lowered = run_gpu_lowering(*bound, {90, true}, {}, nullptr);
  EXPECT_NE(print_kernel(*lowered).find("warp_specialize = 1"), std::string::npos);
  EXPECT_NE(print_kernel(*lowered).find("persistent = 1"), std::string::npos);  // persist-programs follows it
  CudaEmission em = emit_cuda_with_info(*bound, t);
  EXPECT_EQ(em.stats["wgmma-dots"], 1);
  EXPECT_EQ(em.stats["producer-warpgroups"], 0);
  EXPECT_EQ(em.info.block_threads, 256);
  ASSERT_TRUE(em.lowered);
  const std::string ir = print_kernel(*em.lowered);
  EXPECT_NE(ir.find("warp_specialize = 0"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("warp_specialize = 1"), std::string::npos) << ir;
  // Without its producer the kernel runs one program per CTA, and its IR says so (with the
  // warps assign-launch-shape wrote).
  EXPECT_NE(ir.find("yield %g {persistent = 0, num_warps = 8}"), std::string::npos) << ir;
  EXPECT_EQ(em.source.find("warp_specialize = 1"), std::string::npos);
  EXPECT_EQ(em.source.find("the compute warps"), std::string::npos);
  const bool noted = std::any_of(em.notes.begin(), em.notes.end(), [](const std::string& n) {
    return n.find("no producer warpgroup: its load at ws.tile:20:5 is not a TMA copy (warp_specialize = 0)") !=
           std::string::npos;
  });
  EXPECT_TRUE(noted);
}

// A GEMM c = a @ b^T of `elem` operands, b given [N, K] and read through a permute (the
// layout of weights; f8 tensor cores read both operands K-major), into an f32 c.
std::string nt_matmul(const std::string& elem, const std::string& b_shape = "[N, K]") {
  const bool kn = b_shape == "[K, N]";
  return "kernel @nt(%a: view<" + elem + ", [M, K]>, %b: view<" + elem + ", " + b_shape +
         ">, %c: view<f32, [M, N]>) {\n"
         "  grid {\n    %m = dim %a {axis = 0} : i32\n    %n = dim %b {axis = " + (kn ? "1" : "0") +
         "} : i32\n    yield %m, %n\n  }\n"
         "  %pm = program_id {axis = 0} : i32\n  %pn = program_id {axis = 1} : i32\n"
         "  %zero = const {value = 0} : i32\n  %one = const {value = 1} : i32\n"
         "  %k = dim %a {axis = 1} : i32\n  %bk = const {value = 128} : i32\n  %kt = div %k, %bk : i32\n"
         "  %f0 = const {value = 0.0} : f32\n  %z = splat %f0 : tile<f32, [128, 128]>\n"
         "  %acc = for %zero, %kt, %one, %z : tile<f32, [128, 128]> {\n"
         "  ^(%kk: i32, %cc: tile<f32, [128, 128]>):\n"
         "    %ta = load_tile %a, %pm, %kk : tile<" + elem + ", [128, 128]>\n" +
         (kn ? "    %tbt = load_tile %b, %kk, %pn : tile<" + elem + ", [128, 128]>\n"
             : "    %tb = load_tile %b, %pn, %kk : tile<" + elem + ", [128, 128]>\n"
               "    %tbt = permute %tb {dims = [1, 0]} : tile<" + elem + ", [128, 128]>\n") +
         "    %cn = dot %ta, %tbt, %cc : tile<f32, [128, 128]>\n    yield %cn\n  }\n"
         "  store_tile %c, %acc, %pm, %pn\n}\n";
}

// The forms the f8 work (session 40) opened beyond matmul_fp8's e4m3, each printed by the layout
// emitter and compiled by NVRTC: e5m2 on mma.sync (sm_89, m16n8k32 e5m2) and on wgmma (sm_90a,
// m64nNk32 e5m2); a 16-bit dot of a permuted B, whose ring dot now loads its fragments ahead
// (sm_80, through the permuted view of the next stage) and whose wgmma group stays in flight
// (sm_90a); and an f8 B given [K, N] (not K-major), which ldmatrix cannot transpose: since
// session 56 stored K-major into shared memory by a conversion (F8DotOfBAsLoadedKNStoresBKMajor).
TEST(LayoutEmitter, F8AndPermutedOperandForms) {
  std::string why;
  const bool nvrtc = nvrtc_available(&why);
  struct Case {
    std::string elem, target, stat, instr;
  };
  for (const Case& c : {Case{"f8e5m2", "sm_89", "mma-fragments-ahead", "e5m2"},
                        Case{"f8e5m2", "sm_90a", "wgmma-dots-in-flight", "e5m2"},
                        Case{"bf16", "sm_80", "mma-fragments-ahead", "bf16"},
                        Case{"bf16", "sm_90a", "wgmma-dots-in-flight", "bf16"}}) {
    SCOPED_TRACE(c.elem + " " + c.target);
    auto m = parse_module(nt_matmul(c.elem), "nt.tile");
    bool printed = false;
    CudaEmission em = by_layouts(*bind_constexprs(*m->kernels.at(0), {}), c.target, &printed);
    ASSERT_TRUE(printed) << em.notes.back();
    EXPECT_EQ(em.stats[c.stat], 1);
    if (!nvrtc) continue;
    CudaTarget t = CudaTarget::parse(c.target);
    const std::string ptx = nvrtc_compile(em.source, t, "nt.cu", em.line_op).ptx;
    EXPECT_NE(ptx.find("." + c.instr + "." + c.instr), std::string::npos) << "no " << c.instr << " tensor-core instruction";
  }
  auto m = parse_module(nt_matmul("f8e4m3", "[K, N]"), "kn.tile");
  bool printed = false;
  CudaEmission em = by_layouts(*bind_constexprs(*m->kernels.at(0), {}), "sm_89", &printed);
  EXPECT_TRUE(printed) << em.notes.back();
  EXPECT_EQ(em.stats["transposed-stores-to-shared"], 1);
  if (nvrtc) expect_nvrtc_accepts(em, CudaTarget::parse("sm_89"));
}

}  // namespace
}  // namespace tessera::cudatest
