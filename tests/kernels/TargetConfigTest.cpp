// Per-target default configs of the library (LibraryKernel::target_configs, size_configs):
// every entry names a constexpr the kernel has and one of its candidates, the caller's values
// win, and matmul's sm_90a entry is the one the wgmma path takes (bf16/f16 only).
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <cmath>

#include "interp/Interpreter.h"
#include "kernels/Library.h"
#include "kernels/Tolerance.h"
#include "passes/Passes.h"
#include "tune/Space.h"

namespace tessera {
namespace {

TEST(TargetConfigs, EveryEntryIsACandidateOfAConstexprTheKernelHas) {
  int entries = 0;
  for (const auto& lk : library()) {
    if (!lk.target_configs) continue;
    for (ScalarKind dt : lk.dtypes) {
      auto unbound = lk.build(dt);
      for (const auto& [target, cfg] : lk.target_configs(dt)) {
        SCOPED_TRACE(lk.name + " " + std::string(scalar_name(dt)) + " " + target);
        // The key format: "cpu" or "cuda:sm_XY" / "cuda:sm_XYa".
        EXPECT_TRUE(target == "cpu" || target.starts_with("cuda:sm_")) << target;
        EXPECT_FALSE(cfg.empty());
        for (const auto& [name, v] : cfg) {
          const ConstexprDecl* c = unbound->find_constexpr(name);
          ASSERT_NE(c, nullptr) << "no constexpr " << name;
          EXPECT_NE(std::find(c->candidates.begin(), c->candidates.end(), v), c->candidates.end())
              << name << "=" << v << " is not a candidate";
          ++entries;
        }
        EXPECT_NO_THROW(bind_constexprs(*unbound, cfg));
      }
    }
  }
  EXPECT_GT(entries, 0) << "no library kernel states a per-target config";
}

TEST(TargetConfigs, MatmulOnSm90aTakesTheWgmmaTileFor16BitTypesOnly) {
  const LibraryKernel& mm = *find_library_kernel("matmul");
  ConstexprConfig wgmma = {{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}};
  EXPECT_EQ(library_config(mm, ScalarKind::BF16, "cuda:sm_90a"), wgmma);
  EXPECT_EQ(library_config(mm, ScalarKind::F16, "cuda:sm_90a"), wgmma);
  // f32 has no tensor-core path; other cuda targets keep the kernel's own defaults (cpu: its
  // BLOCK_K, below).
  EXPECT_TRUE(library_config(mm, ScalarKind::F32, "cuda:sm_90a").empty());
  for (const char* t : {"cuda:sm_80", "cuda:sm_90", ""})
    EXPECT_TRUE(library_config(mm, ScalarKind::BF16, t).empty()) << t;
}

TEST(TargetConfigs, TheCallersValuesWin) {
  const LibraryKernel& mm = *find_library_kernel("matmul");
  ConstexprConfig got = library_config(mm, ScalarKind::BF16, "cuda:sm_90a", {{"BLOCK_K", 32}});
  EXPECT_EQ(got, (ConstexprConfig{{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 32}}));
  got = library_config(mm, ScalarKind::BF16, "cuda:sm_80", {{"BLOCK_N", 64}});
  EXPECT_EQ(got, (ConstexprConfig{{"BLOCK_N", 64}}));
  // A kernel without per-target configs passes the caller's through.
  const LibraryKernel& va = *find_library_kernel("vector_add");
  EXPECT_EQ(library_config(va, ScalarKind::F32, "cuda:sm_90a", {{"BLOCK", 1024}}),
            (ConstexprConfig{{"BLOCK", 1024}}));
}

// Size-dependent configs (LibraryKernel::size_configs): candidates of the kernel's constexprs,
// applied only with sizes, over the target's entry, under the caller's values.
TEST(TargetConfigs, MatmulOnSm90aTakesSmallerTilesForFewPrograms) {
  const LibraryKernel& mm = *find_library_kernel("matmul");
  auto unbound = mm.build(ScalarKind::BF16);
  const Sizes m16 = {{"M", 16}, {"N", 4096}, {"K", 4096}}, m128 = {{"M", 128}, {"N", 14336}, {"K", 4096}},
              big = {{"M", 4096}, {"N", 4096}, {"K", 4096}};
  for (const Sizes& s : {m16, m128, big})
    for (const auto& [name, v] : mm.size_configs(ScalarKind::BF16, "cuda:sm_90a", s, {})) {
      if (name == "swap_operands") {  // a codegen knob (tune::codegen_knobs)
        EXPECT_EQ(v, 1);
        continue;
      }
      const ConstexprDecl* c = unbound->find_constexpr(name);
      ASSERT_NE(c, nullptr) << name;
      EXPECT_NE(std::find(c->candidates.begin(), c->candidates.end(), v), c->candidates.end()) << name << "=" << v;
    }
  // M <= 16: 16 x 64 x 128 tiles on swapped wgmma operands (128 columns past one wave of 64);
  // M <= 64: 64 x 128 tiles (split-K spreads them); 56 tiles of 128 x 256: 64 x 256; many: the
  // target's 128 x 256.
  EXPECT_EQ(library_config(mm, ScalarKind::BF16, "cuda:sm_90a", {}, &m16),
            (ConstexprConfig{{"BLOCK_M", 16}, {"BLOCK_N", 64}, {"BLOCK_K", 128}, {"swap_operands", 1}}));
  const Sizes m1_wide = {{"M", 1}, {"N", 18944}, {"K", 3584}}, m40 = {{"M", 40}, {"N", 4096}, {"K", 4096}};
  EXPECT_EQ(library_config(mm, ScalarKind::BF16, "cuda:sm_90a", {}, &m1_wide),
            (ConstexprConfig{{"BLOCK_M", 16}, {"BLOCK_N", 128}, {"BLOCK_K", 128}, {"swap_operands", 1}}));
  EXPECT_EQ(library_config(mm, ScalarKind::BF16, "cuda:sm_90a", {}, &m40),
            (ConstexprConfig{{"BLOCK_M", 64}, {"BLOCK_N", 128}, {"BLOCK_K", 64}}));
  EXPECT_EQ(library_config(mm, ScalarKind::F16, "cuda:sm_90a", {}, &m128),
            (ConstexprConfig{{"BLOCK_M", 64}, {"BLOCK_N", 256}, {"BLOCK_K", 64}}));
  EXPECT_EQ(library_config(mm, ScalarKind::BF16, "cuda:sm_90a", {}, &big),
            (ConstexprConfig{{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}}));
  // Without sizes, on other targets and for f32: no size rule.
  EXPECT_EQ(library_config(mm, ScalarKind::BF16, "cuda:sm_90a"),
            (ConstexprConfig{{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 64}}));
  EXPECT_TRUE(library_config(mm, ScalarKind::BF16, "cuda:sm_80", {}, &m16).empty());
  EXPECT_TRUE(library_config(mm, ScalarKind::F32, "cuda:sm_90a", {}, &m16).empty());
  // The caller's values win over the size rule.
  EXPECT_EQ(library_config(mm, ScalarKind::BF16, "cuda:sm_90a", {{"BLOCK_N", 128}}, &m16),
            (ConstexprConfig{{"BLOCK_M", 16}, {"BLOCK_N", 128}, {"BLOCK_K", 128}, {"swap_operands", 1}}));
}

// Every kernel's size rule names candidates of its own constexprs (or values of the target's
// codegen knobs), on every target and dtype, at
// sizes from one program to many (matmul_struct once inherited matmul's 256-column tiles).
TEST(TargetConfigs, SizeConfigsAreCandidatesOfEveryKernel) {
  for (const LibraryKernel& lk : library()) {
    if (!lk.size_configs) continue;
    for (ScalarKind dt : lk.dtypes) {
      auto unbound = lk.build(dt);
      for (const char* target : {"cpu", "cuda:sm_80", "cuda:sm_90", "cuda:sm_90a"})
        for (int64_t n : {1, 16, 128, 1000, 4096, 14336}) {
          Sizes s = lk.default_sizes;
          for (auto& [dim, v] : s) v = dim == "K" && lk.name == "topk" ? 1 : n;
          for (const auto& [name, v] : lk.size_configs(dt, target, s, {})) {
            const ConstexprDecl* c = unbound->find_constexpr(name);
            if (!c) {  // else a codegen knob of the target, at one of its values
              const tune::KnobDecl* d = tune::find_codegen_knob(name);
              ASSERT_NE(d, nullptr) << lk.name << " " << name;
              EXPECT_TRUE(tune::knob_applies(d->knob, target)) << lk.name << " " << name << " on " << target;
              EXPECT_NE(std::find(d->knob.values.begin(), d->knob.values.end(), v), d->knob.values.end()) << name;
              continue;
            }
            EXPECT_TRUE(c->candidates.empty() ||
                        std::find(c->candidates.begin(), c->candidates.end(), v) != c->candidates.end())
                << lk.name << " " << scalar_name(dt) << " " << target << " " << name << "=" << v << " at " << n;
          }
        }
    }
  }
}

// Row kernels take the one-tile path for rows of up to 8192 elements on cpu and 64 KiB on cuda
// (32768 bf16, 16384 f32; not with a caller's BLOCK_M > 1 or num_warps there; no rule for other
// targets); f32 matmul 64-deep k on cpu.
TEST(TargetConfigs, RowKernelsHoldTheWholeRow) {
  for (const char* name : {"softmax", "layernorm", "rmsnorm"}) {
    const LibraryKernel& lk = *find_library_kernel(name);
    auto unbound = lk.build(ScalarKind::BF16);
    const ConstexprDecl* bn = unbound->find_constexpr("BLOCK_N");
    ASSERT_NE(bn, nullptr);
    for (const auto& [target, dt, most] : std::vector<std::tuple<std::string, ScalarKind, int64_t>>{
             {"cpu", ScalarKind::BF16, 8192}, {"cpu", ScalarKind::F32, 8192}, {"cuda:sm_80", ScalarKind::BF16, 32768},
             {"cuda:sm_90", ScalarKind::F16, 32768}, {"cuda:sm_90a", ScalarKind::BF16, 32768},
             {"cuda:sm_90a", ScalarKind::F32, 16384}}) {
      for (int64_t n : {int64_t{1}, int64_t{100}, int64_t{256}, int64_t{257}, int64_t{4096}, int64_t{5000}, most}) {
        Sizes s = {{"M", 3}, {"N", n}};
        ConstexprConfig got = library_config(lk, dt, target, {}, &s);
        ASSERT_EQ(got.count("BLOCK_N"), 1u) << name << " " << target << " N=" << n;
        int64_t v = got.at("BLOCK_N");
        EXPECT_GE(v, n);
        EXPECT_TRUE(v == 256 || v / 2 < n) << name << " N=" << n << ": " << v << " is not the least";
        EXPECT_NE(std::find(bn->candidates.begin(), bn->candidates.end(), v), bn->candidates.end()) << v;
      }
      Sizes wide = {{"M", 3}, {"N", most + 1}};
      EXPECT_FALSE(library_config(lk, dt, target, {}, &wide).count("BLOCK_N")) << name << " " << target;
    }
    // A caller's rows per program or warps on cuda: the kernel's own BLOCK_N (layernorm with
    // BLOCK_M = 4 at 32768 columns was 512 KiB of registers).
    Sizes row = {{"M", 4}, {"N", 32768}};
    EXPECT_FALSE(library_config(lk, ScalarKind::BF16, "cuda:sm_90a", {{"num_warps", 4}}, &row).count("BLOCK_N")) << name;
    if (unbound->find_constexpr("BLOCK_M")) {
      EXPECT_FALSE(library_config(lk, ScalarKind::BF16, "cuda:sm_90a", {{"BLOCK_M", 4}}, &row).count("BLOCK_N")) << name;
      EXPECT_EQ(library_config(lk, ScalarKind::BF16, "cuda:sm_90a", {{"BLOCK_M", 1}}, &row).at("BLOCK_N"), 32768) << name;
    }
    Sizes s = {{"M", 3}, {"N", 100}};
    EXPECT_FALSE(library_config(lk, ScalarKind::F32, "", {}, &s).count("BLOCK_N")) << name;
    EXPECT_EQ(library_config(lk, ScalarKind::F32, "cpu", {{"BLOCK_N", 1024}}, &s).at("BLOCK_N"), 1024);
    EXPECT_EQ(library_config(lk, ScalarKind::F32, "cuda:sm_90a", {{"BLOCK_N", 1024}}, &s).at("BLOCK_N"), 1024);
  }
  const LibraryKernel& mm = *find_library_kernel("matmul");
  EXPECT_EQ(library_config(mm, ScalarKind::F32, "cpu"), (ConstexprConfig{{"BLOCK_K", 128}}));
  // f32 on cpu: 128-deep k steps; 128-row tiles from M = 128; 256-column tiles from N = 1024
  // where they pad no more than 128-column ones (bench/RESULTS.md session 17).
  auto cpu = [&](int64_t m, int64_t n) {
    Sizes s = {{"M", m}, {"N", n}, {"K", 1000}};
    return library_config(mm, ScalarKind::F32, "cpu", {}, &s);
  };
  EXPECT_EQ(cpu(1024, 1024), (ConstexprConfig{{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 128}}));
  EXPECT_EQ(cpu(2048, 2000), (ConstexprConfig{{"BLOCK_M", 128}, {"BLOCK_N", 256}, {"BLOCK_K", 128}}));
  EXPECT_EQ(cpu(1000, 1100), (ConstexprConfig{{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"BLOCK_K", 128}}));
  EXPECT_EQ(cpu(100, 1000), (ConstexprConfig{{"BLOCK_N", 128}, {"BLOCK_K", 128}}));
  for (ScalarKind dt : {ScalarKind::BF16, ScalarKind::F16})
    EXPECT_EQ(library_config(mm, dt, "cpu"), (ConstexprConfig{{"BLOCK_K", 128}}));
}

// The sm_90a matmul tile on the interpreter against the reference: ragged in every dim (two
// tiles in N and two K steps, one partial), so the bound kernel itself is right at that shape.
TEST(TargetConfigs, MatmulSm90aTileMatchesTheReference) {
  const LibraryKernel& mm = *find_library_kernel("matmul");
  auto k = bind_constexprs(*mm.build(ScalarKind::BF16), library_config(mm, ScalarKind::BF16, "cuda:sm_90a"));
  Sizes s = {{"M", 3}, {"N", 261}, {"K", 67}};
  std::vector<Tensor> got = make_random_tensors(*k, s, 9), want = got;
  auto ga = make_args(*k, got, s), wa = make_args(*k, want, s);
  run_interp(*k, ga);
  mm.reference(wa, s);
  Tolerance tol = tolerance_for(ScalarKind::BF16);
  const Tensor &c = got.back(), &r = want.back();
  int bad = 0;
  for (int64_t i = 0; i < c.numel(); ++i) bad += std::fabs(c.get(i) - r.get(i)) > tol.atol + tol.rtol * std::fabs(r.get(i));
  EXPECT_EQ(bad, 0);
  EXPECT_NE(c.get(c.numel() - 1), 0.0);
}

}  // namespace
}  // namespace tessera
