// assign-layouts and remove-layout-conversions on the library: the lowered kernel verifies,
// means the same (the interpreter ignores layouts: bit-identical results at ragged sizes), and
// the matmul's conversions go where the issue says they should.
#include <gtest/gtest.h>

#include "../common/BackendTestUtil.h"
#include "interp/Interpreter.h"
#include "ir/Verifier.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

struct Lowered {
  std::unique_ptr<Kernel> before, after;
  PassStats stats;
};

Lowered lower(const std::string& name, ScalarKind dt, const GpuLoweringOptions& o, const ConstexprConfig& cfg = {}) {
  Lowered l;
  PipelineOptions po;
  po.config = cfg;
  l.before = run_pipeline(*find_library_kernel(name)->build(dt), po);
  l.after = run_gpu_lowering(*l.before, o, {}, &l.stats);
  return l;
}

int64_t converts(const Kernel& k) { return layout_conversion_cost(k).first; }

TEST(LayoutLowering, MatmulKeepsItsAccumulatorInTheTensorCoreLayout) {
  // sm_90a: the operands load into shared memory (wgmma's SS form) and the accumulator stays
  // in the wgmma layout across the loop and into the store: nothing is exchanged.
  Lowered h = lower("matmul", ScalarKind::BF16, {90, true});
  EXPECT_EQ(h.stats["assign-layouts.conversions"], 4);
  EXPECT_EQ(h.stats["remove-layout-conversions.after"], 0);
  const std::string ir = print_kernel(*h.after);
  EXPECT_NE(ir.find("layout = mma<version = 3, warps = [8, 1], instr = [64, 256]>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("layout = shared<swizzle = 128, pad = 0>, space = \"shared\""), std::string::npos) << ir;
  // sm_80: the same for mma.sync: the loads write shared tiles (cp.async; 128-byte swizzled by
  // swizzle-mma-operands, their rows being whole 128-byte lines) that the dot reads with
  // ldmatrix, so no conversion is left and no operand passes through registers.
  Lowered a = lower("matmul", ScalarKind::BF16, {80, false});
  EXPECT_EQ(a.stats["assign-layouts.conversions"], 4);
  EXPECT_EQ(a.stats["remove-layout-conversions.after"], 0);
  int shared_operands = 0, converts = 0;
  walk(*a.after->body, [&](Op& op) {
    converts += op.kind == OpKind::ConvertLayout;
    if (op.kind != OpKind::Dot) return;
    EXPECT_EQ(op.result()->type.layout.kind, Layout::Kind::Mma);
    EXPECT_EQ(op.result()->type.layout.version, 2);
    for (int i = 0; i < 2; ++i) {
      const Type& t = op.operand(i)->type;
      shared_operands += t.layout == Layout::shared(128, 0) && t.space == "shared" && op.operand(i)->def &&
                         op.operand(i)->def->kind == OpKind::LoadTile;
    }
  });
  EXPECT_EQ(shared_operands, 2) << print_kernel(*a.after);
  EXPECT_EQ(converts, 0) << print_kernel(*a.after);
}

// A ring that the target's shared memory cannot hold gets the stages that fit: the library
// matmul's 4 stages of 128 x 64 and 64 x 256 bf16 tiles (48 KiB each, swizzled) are 3 on
// sm_80 (163 KiB), and stay 4 on sm_90 (227 KiB).
TEST(LayoutLowering, RingStagesFitTheTargetsSharedMemory) {
  for (auto [sm, want] : {std::pair{80, 3}, std::pair{90, 4}}) {
    Lowered l = lower("matmul", ScalarKind::BF16, {sm, false});
    int64_t stages = 0;
    walk(*l.after->body, [&](Op& op) {
      if (op.kind == OpKind::For && op.has_attr("pipeline")) stages = op.attr_int("pipeline");
    });
    EXPECT_EQ(stages, want) << "sm_" << sm;
    EXPECT_EQ(l.stats["pipeline-loops.stages-cut"], sm == 80 ? 1 : 0) << "sm_" << sm;
  }
}

// Every library kernel lowers to IR that verifies, with no more conversions (and bytes) than
// the assignment made, and runs to the same bits on the interpreter.
TEST(LayoutLowering, LibraryKernelsMeanTheSame) {
  const ConstexprConfig small = {{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"BLOCK_K", 32}};
  for (const LibraryKernel& lib : library())
    for (ScalarKind dt : lib.dtypes)
      for (GpuLoweringOptions o : {GpuLoweringOptions{90, true}, GpuLoweringOptions{80, false}}) {
        // Small tiles, so that the row kernels' looping branch and several K steps run.
        ConstexprConfig cfg;
        if (lib.name.starts_with("matmul")) cfg = small;
        else if (lib.name != "vector_add") cfg["BLOCK_N"] = 256;
        Lowered l = lower(lib.name, dt, o, cfg);
        const std::string what = lib.name + " " + std::string(scalar_name(dt)) + " sm_" + std::to_string(o.sm);
        ASSERT_NO_THROW(verify_or_throw(*l.after)) << what;
        EXPECT_LE(l.stats["remove-layout-conversions.after"], l.stats["remove-layout-conversions.before"]) << what;
        EXPECT_LE(l.stats["remove-layout-conversions.bytes-after"], l.stats["remove-layout-conversions.bytes-before"])
            << what;
        // (vector_add, sort and topk keep every tile in one blocked layout: nothing to convert.)
        if (lib.name != "vector_add" && lib.name != "sort" && lib.name != "topk")
          EXPECT_GT(converts(*l.after) + l.stats["assign-layouts.conversions"], 0) << what;
        Sizes s = lib.default_sizes;
        for (auto& [n, v] : s) v = n == "K" ? 70 : n == "N" ? 300 : 37;
        std::vector<Tensor> a = make_random_tensors(*l.before, s, 5), b = a;
        auto aa = testutil::args_for(*l.before, a), ba = testutil::args_for(*l.after, b);
        run_interp(*l.before, aa);
        run_interp(*l.after, ba);
        for (size_t t = 0; t < a.size(); ++t)
          for (int64_t i = 0; i < a[t].numel(); ++i) ASSERT_EQ(a[t].get(i), b[t].get(i)) << what << " tensor " << t;
      }
}

// split-k-loops (the split-K compilation): the matmul's K loop becomes the slice of program
// axis 2's CTA, which on one CTA per program (what the interpreter runs) is the whole loop:
// the same bits at ragged sizes with several k steps.
TEST(LayoutLowering, SplitKLoopOnOneCtaIsTheWholeLoop) {
  GpuLoweringOptions o{90, true};
  o.split_k = true;
  Lowered l = lower("matmul", ScalarKind::BF16, o, {{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"BLOCK_K", 32}});
  ASSERT_NO_THROW(verify_or_throw(*l.after));
  EXPECT_EQ(l.stats["split-k-loops.split"], 1);
  int split = 0;
  for (const auto& op : l.after->body->ops) split += op->kind == OpKind::For && op->has_attr("split_k");
  EXPECT_EQ(split, 1);
  const Sizes s{{"M", 37}, {"N", 300}, {"K", 200}};
  std::vector<Tensor> a = make_random_tensors(*l.before, s, 9), b = a;
  auto aa = testutil::args_for(*l.before, a), ba = testutil::args_for(*l.after, b);
  run_interp(*l.before, aa);
  run_interp(*l.after, ba);
  for (size_t t = 0; t < a.size(); ++t)
    for (int64_t i = 0; i < a[t].numel(); ++i) ASSERT_EQ(a[t].get(i), b[t].get(i)) << "tensor " << t;
}

// swap-dot-operands (knob swap_operands = 1, sm_90a): the decode tile's dot as c^T = b^T a^T,
// the loop carrying the transposed accumulator: the same sums in the same order, so the same
// bits on the interpreter, at ragged sizes with several k steps; and the dot takes wgmma.
TEST(LayoutLowering, SwappedDotKeepsTheBits) {
  auto k = find_library_kernel("matmul")->build(ScalarKind::BF16);
  k->set_constexpr("swap_operands", 1);
  PipelineOptions po;
  po.config = {{"BLOCK_M", 16}, {"BLOCK_N", 64}, {"BLOCK_K", 64}};
  auto before = run_pipeline(*k, po);
  PassStats stats;
  auto after = run_gpu_lowering(*before, {90, true}, {}, &stats);
  ASSERT_NO_THROW(verify_or_throw(*after));
  EXPECT_EQ(stats["swap-dot-operands.swapped"], 1);
  int wgmma = 0;
  walk(*after->body, [&](Op& op) {
    wgmma += op.kind == OpKind::Dot && op.result()->type.layout.kind == Layout::Kind::Mma && op.result()->type.layout.version == 3 &&
             static_shape(op.result()->type.shape) == std::vector<int64_t>{64, 16};
  });
  EXPECT_EQ(wgmma, 1);
  const Sizes s{{"M", 13}, {"N", 150}, {"K", 300}};
  std::vector<Tensor> a = make_random_tensors(*before, s, 4), b = a;
  auto aa = testutil::args_for(*before, a), ba = testutil::args_for(*after, b);
  run_interp(*before, aa);
  run_interp(*after, ba);
  for (size_t t = 0; t < a.size(); ++t)
    for (int64_t i = 0; i < a[t].numel(); ++i) ASSERT_EQ(a[t].get(i), b[t].get(i)) << "tensor " << t;
  // Not on mma.sync targets (16-row tiles suit mma.sync as they are).
  PassStats none;
  run_gpu_lowering(*before, {80, false}, {}, &none);
  EXPECT_EQ(none["swap-dot-operands.swapped"], 0);
}

// layouts_place_alike: which conversions move nothing between threads.
TEST(LayoutLowering, LayoutsThatPlaceElementsInTheSameThreads) {
  const Layout row4 = Layout::blocked({1, 4}, {1, 32}, {1, 4}, {1, 0});
  const Layout row8 = Layout::blocked({1, 8}, {1, 32}, {1, 4}, {1, 0});
  const Layout col = Layout::blocked({1, 1}, {1, 32}, {4, 1}, {1, 0});
  EXPECT_TRUE(layouts_place_alike(row4, row4, {1, 1024}, 4));
  // Element 4 of a row: thread 1 holds it in row4, thread 0 in row8.
  EXPECT_FALSE(layouts_place_alike(row4, row8, {1, 1024}, 4));
  // A row's reduced statistic (a [1] tile) is held by every thread either way.
  EXPECT_TRUE(layouts_place_alike(Layout::slice(row4, 1), Layout::slice(col, 0), {1}, 4));
  EXPECT_TRUE(layouts_place_alike(Layout::slice(row4, 1), Layout::replicated(), {1}, 4));
  // ... but a [4] slice along dim 1 of a layout with warps along dim 0 is split over the warps.
  EXPECT_FALSE(layouts_place_alike(Layout::slice(col, 1), Layout::replicated(), {4}, 4));
  // Tensor-core layouts are not decided: the safe answer.
  const Layout mma = Layout::mma(2, {2, 2}, {16, 8});
  EXPECT_FALSE(layouts_place_alike(mma, Layout::blocked({1, 4}, {4, 8}, {2, 2}, {1, 0}), {32, 32}, 4));
}

}  // namespace
}  // namespace tessera
