// Cluster-split programs on sm_90+: which kernels run each program on a thread-block cluster
// (CudaKernelInfo::cluster), what the split emission looks like, that NVRTC accepts it, and the
// kernels that fall back to one CTA per program with a note. The GPU tests run them against
// the interpreter (tests/gpu/cluster_gpu_test.cpp).
#include <gtest/gtest.h>

#include "CodegenTestUtil.h"
#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"
#include "passes/Passes.h"
#include "support/Diagnostic.h"
#include "text/Text.h"

namespace tessera {
namespace {

using codegentest::emit;
using codegentest::planning_target;

std::unique_ptr<Kernel> row_kernel(const char* name, int64_t block_n, int64_t cluster = 0) {
  auto k = bind_constexprs(*find_library_kernel(name)->build(ScalarKind::BF16), {{"BLOCK_N", block_n}});
  if (cluster > 0) k->constexprs.push_back({"cluster_size", cluster, {cluster}, k->loc});
  return k;
}

bool has_note(const CudaEmission& em, const std::string& part) {
  for (const auto& n : em.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

TEST(CudaCluster, LongRowsSplitOverEightCtasWhenAsked) {
  for (const char* name : {"softmax", "layernorm", "rmsnorm"}) {
    SCOPED_TRACE(name);
    CudaEmission em = emit(*row_kernel(name, 32768, 8));
    EXPECT_EQ(em.info.cluster, 8);
    EXPECT_EQ(em.info.block_threads, 128);  // 4096 elements per CTA, 32 per thread
    EXPECT_EQ(em.stats["cluster-size"], 8);
    EXPECT_NE(em.source.find("__cluster_dims__(8, 1, 1) __launch_bounds__(128)"), std::string::npos);
    // The program is the cluster; a CTA's part of a row starts at rank * 4096.
    EXPECT_NE(em.source.find("int32_t(tsr::cluster_id_x())"), std::string::npos);
    EXPECT_NE(em.source.find("tsr_crank * 4096 + "), std::string::npos);
    // Two reductions in the whole-row branch and two in the loop: each ends with a cluster
    // exchange; the kernel ends with one more cluster barrier.
    EXPECT_EQ(em.stats["cluster-exchanges"], name == std::string("rmsnorm") ? 2 : 4);
    EXPECT_NE(em.source.rfind("tsr::cluster_sync();\n}"), std::string::npos);
    EXPECT_TRUE(has_note(em, "cluster of 8 CTAs"));
  }
}

// Clusters are opt-in: one CTA per program unless the kernel declares cluster_size (measured
// slower for the row kernels, CudaEmitter.cpp pick_cluster).
TEST(CudaCluster, WithoutTheConstexprEveryProgramIsOneCta) {
  for (int64_t bn : {4096, 32768}) {
    CudaEmission em = emit(*row_kernel("softmax", bn));
    EXPECT_EQ(em.info.cluster, 1);
    EXPECT_EQ(em.source.find("__cluster_dims__"), std::string::npos);
    EXPECT_EQ(em.source.find("tsr_crank"), std::string::npos);
  }
  CudaEmission ampere = emit(*row_kernel("softmax", 32768), "sm_80");
  EXPECT_EQ(ampere.info.cluster, 1);
  EXPECT_EQ(ampere.info.block_threads, 1024);
  EXPECT_EQ(ampere.source.find("cluster"), std::string::npos);
}

TEST(CudaCluster, ClusterSizeConstexprPicksTheSplit) {
  for (int64_t c : {1, 2, 4, 8}) {
    SCOPED_TRACE(c);
    CudaEmission em = emit(*row_kernel("layernorm", 8192, c));
    EXPECT_EQ(em.info.cluster, c);
    EXPECT_EQ(em.info.block_threads, c == 1 ? 256 : 128);
  }
  // On a target without clusters the constexpr is a note, not an error; a bad value is one.
  CudaEmission ampere = emit(*row_kernel("layernorm", 8192, 4), "sm_80");
  EXPECT_EQ(ampere.info.cluster, 1);
  EXPECT_TRUE(has_note(ampere, "cluster_size = 4 needs sm_90"));
}

// On either emitter.
TEST(CudaCluster, BadClusterSizeIsALocatedError) {
  auto k = row_kernel("softmax", 8192, 3);
  CudaTarget layouts = planning_target("sm_90a");
  layouts.emitter = CudaTarget::Emitter::Layouts;
  for (const CudaTarget& t : {planning_target("sm_90a"), layouts}) {
    try {
      emit_cuda_with_info(*k, t);
      ADD_FAILURE() << "cluster_size = 3 accepted (emitter " << static_cast<int>(t.emitter) << ")";
    } catch (const TesseraError& e) {
      EXPECT_NE(std::string(e.what()).find("cluster_size of kernel @softmax is 3; it must be 1, 2, 4 or 8"),
                std::string::npos)
          << e.what();
    }
  }
}

// Kernels whose tiles cross threads other than in a reduction with one result fall back to one
// CTA per program, and say why.
TEST(CudaCluster, KernelsThatMoveTileDataFallBackWithANote) {
  const char* text = R"(
kernel @argmax_rows(%x: view<f32, [M, N]>, %idx: view<i32, [M, 1]>) {
  constexpr BLOCK_N = 8192
  constexpr cluster_size = 4
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %row = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %t = load_tile %x, %row, %c0 {pad = -inf} : tile<f32, [1, BLOCK_N]>
  %a = reduce %t {axis = 1, kind = "argmax"} : tile<i32, [1]>
  %a2 = expand_dims %a {axis = 1} : tile<i32, [1, 1]>
  store_tile %idx, %a2, %row, %c0
}
kernel @transpose(%x: view<f32, [M, N]>, %y: view<f32, [N, M]>) {
  constexpr cluster_size = 2
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %c0 = const {value = 0} : i32
  %t = load_tile %x, %c0, %c0 : tile<f32, [128, 128]>
  %u = permute %t {dims = [1, 0]} : tile<f32, [128, 128]>
  store_tile %y, %u, %c0, %c0
}
)";
  auto m = parse_module(text, "cluster_fallback.tile");
  for (auto& k : m->kernels) {
    SCOPED_TRACE(k->name);
    auto b = bind_constexprs(*k, {});
    CudaEmission em = emit(*b);
    EXPECT_EQ(em.info.cluster, 1);
    EXPECT_EQ(em.source.find("__cluster_dims__"), std::string::npos);
    EXPECT_TRUE(has_note(em, "not split over a cluster of")) << (em.notes.empty() ? "" : em.notes.back());
  }
}

// The layout emitter (cluster-programs, since session 55): the program's warps are its CTAs'
// (a CTA's warps follow the lower ranks'), the row spread over all of them, and each reduction
// along it ends with a cluster exchange.
CudaTarget layouts_target(const std::string& sm) {
  CudaTarget t = planning_target(sm);
  t.emitter = CudaTarget::Emitter::Layouts;
  return t;
}

TEST(CudaCluster, TheLayoutEmitterSplitsLongRowsOverEightCtas) {
  for (const char* name : {"softmax", "layernorm", "rmsnorm"}) {
    SCOPED_TRACE(name);
    CudaEmission em = emit_cuda_with_info(*run_pipeline(*row_kernel(name, 32768, 8), {}), layouts_target("sm_90a"));
    EXPECT_TRUE(has_note(em, "printed from the GPU lowering's layouts"));
    EXPECT_EQ(em.info.cluster, 8);
    EXPECT_EQ(em.info.block_threads, 128);
    EXPECT_NE(em.source.find("__cluster_dims__(8, 1, 1) __launch_bounds__(128)"), std::string::npos);
    EXPECT_NE(em.source.find("tsr_warp = (tsr_tid >> 5) + 4 * tsr_crank;"), std::string::npos);
    EXPECT_NE(em.source.find("int32_t(tsr::cluster_id_x())"), std::string::npos);
    EXPECT_EQ(em.stats["cluster-exchanges"], name == std::string("rmsnorm") ? 2 : 4);
    EXPECT_NE(em.source.rfind("tsr::cluster_sync();\n}"), std::string::npos);
  }
  // sm_80: no clusters, a note from cluster-programs.
  CudaEmission ampere = emit_cuda_with_info(*run_pipeline(*row_kernel("softmax", 32768, 8), {}), layouts_target("sm_80"));
  EXPECT_EQ(ampere.info.cluster, 1);
  EXPECT_TRUE(has_note(ampere, "cluster-programs: cluster_size = 8 not taken: thread-block clusters need sm_90"));
}

// What the layout emitter cannot print on a cluster: declined by cluster-programs (an argmax),
// or found while printing (a sum of each of two rows whose warps, and so the cluster's CTAs,
// are split between the rows and along them), then lowered again without clusters; each with
// a note.
TEST(CudaCluster, TheLayoutEmittersFallBacksSayWhy) {
  const char* text = R"(
kernel @argmax_rows(%x: view<f32, [M, N]>, %idx: view<i32, [M, 1]>) {
  constexpr cluster_size = 4
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %row = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %t = load_tile %x, %row, %c0 {pad = -inf} : tile<f32, [1, 8192]>
  %a = reduce %t {axis = 1, kind = "argmax"} : tile<i32, [1]>
  %a2 = expand_dims %a {axis = 1} : tile<i32, [1, 1]>
  store_tile %idx, %a2, %row, %c0
}
kernel @two_rows(%x: view<f32, [M, N]>, %y: view<f32, [M, 1]>) {
  constexpr cluster_size = 4
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %row = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %t = load_tile %x, %row, %c0 : tile<f32, [2, 8192]>
  %s = reduce %t {axis = 1, kind = "sum"} : tile<f32, [2]>
  %s2 = expand_dims %s {axis = 1} : tile<f32, [2, 1]>
  store_tile %y, %s2, %row, %c0
}
)";
  auto m = parse_module(text, "cluster_fallback.tile");
  for (auto& k : m->kernels) {
    SCOPED_TRACE(k->name);
    CudaEmission em = emit_cuda_with_info(*run_pipeline(*bind_constexprs(*k, {}), {}), layouts_target("sm_90a"));
    EXPECT_TRUE(has_note(em, "printed from the GPU lowering's layouts"));
    EXPECT_EQ(em.info.cluster, 1);
    EXPECT_EQ(em.source.find("__cluster_dims__"), std::string::npos);
    EXPECT_TRUE(has_note(em, k->name == "argmax_rows" ? "cluster-programs: cluster_size = 4 not taken: a reduction of kind argmax"
                                                      : "cluster_size = 4 not taken: a reduction whose axis is split over some of the cluster's CTAs"))
        << (em.notes.empty() ? "" : em.notes.back());
  }
}

TEST(CudaCluster, NvrtcCompilesClusterSplitRowKernels) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  for (const char* name : {"softmax", "layernorm", "rmsnorm"})
    for (auto [bn, c] : {std::pair<int64_t, int64_t>{32768, 8}, {8192, 2}, {16384, 4}}) {
      SCOPED_TRACE(std::string(name) + " BLOCK_N=" + std::to_string(bn));
      CudaEmission em = emit(*row_kernel(name, bn, c));
      EXPECT_GT(em.info.cluster, 1);
      NvrtcResult r = nvrtc_compile(em.source, planning_target("sm_90a"), "cluster.cu", em.line_op);
      EXPECT_FALSE(r.cubin.empty()) << r.log;
      if (bn != 32768) continue;
      // The layout emitter's (one shape each: NVRTC takes seconds a kernel).
      CudaEmission lo = emit_cuda_with_info(*run_pipeline(*row_kernel(name, bn, c), {}), layouts_target("sm_90a"));
      EXPECT_EQ(lo.info.cluster, c);
      r = nvrtc_compile(lo.source, planning_target("sm_90a"), "cluster_layouts.cu", lo.line_op);
      EXPECT_FALSE(r.cubin.empty()) << r.log;
    }
}

}  // namespace
}  // namespace tessera
