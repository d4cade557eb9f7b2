// Properties of the emitted CUDA text of small kernels: the layouts, access widths, tensor-core
// use and conversion counts the design promises, and located errors for what is unsupported.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "cuda/CudaBackend.h"
#include "CodegenTestUtil.h"
#include "cuda/CudaEmitter.h"
#include "kernels/Library.h"
#include "passes/Passes.h"
#include "text/Text.h"

namespace tessera {
namespace {

using codegentest::planning_target;

CudaEmission emit_lib(const std::string& name, ScalarKind dt, const ConstexprConfig& cfg = {}) {
  auto k = bind_constexprs(*find_library_kernel(name)->build(dt), cfg);
  CudaEmission em = emit_cuda_with_info(*k, planning_target("sm_90a"));
  if (const char* d = std::getenv("TESSERA_DUMP_CUDA")) std::ofstream(std::string(d) + "/" + name + ".cu") << em.source;
  return em;
}

std::unique_ptr<Kernel> parse_one(const std::string& text) {
  auto m = parse_module(text, "golden.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

int occurrences(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(CudaGolden, VectorAddUses16ByteVectorAccesses) {
  CudaEmission em = emit_lib("vector_add", ScalarKind::BF16);
  // Loads kept packed (two bf16 per word) and stores rounded two at a time: 4 words each.
  EXPECT_NE(em.source.find("tsr::copy_vec<uint32_t, 4>(reinterpret_cast<uint32_t*>(tsr_p2"), std::string::npos) << em.source;
  EXPECT_NE(em.source.find("tsr::f2bf2("), std::string::npos);
  EXPECT_NE(em.source.find("tsr::aligned_vec<uint16_t, 8>"), std::string::npos);
  EXPECT_GE(em.stats["vector-accesses"], 3);  // two loads and a store
  EXPECT_EQ(em.stats["layout-conversions"], 0);
  EXPECT_EQ(em.info.dynamic_smem_bytes, 0);
  EXPECT_EQ(em.source.find("__syncthreads"), std::string::npos) << "an elementwise kernel needs no barrier";
}

// 16 x 16 tiles give each warp an odd number of 8-wide n tiles: the ordinary (not pipelined) loop.
const ConstexprConfig kSmallTiles = {{"BLOCK_M", 16}, {"BLOCK_N", 16}, {"BLOCK_K", 16}};

TEST(CudaGolden, Bf16MatmulUsesTensorCoresWithTheAccumulatorInFragments) {
  CudaEmission em = emit_lib("matmul", ScalarKind::BF16, kSmallTiles);
  EXPECT_NE(em.source.find("tsr::warp_mma_block<true"), std::string::npos) << em.source;
  EXPECT_EQ(em.stats["mma-dots"], 1);
  EXPECT_EQ(em.stats["mma-carried-accumulators"], 1);
  // The accumulator starts as a splat (filled in the fragments) and is only cast and stored
  // (straight from the fragments): no conversion before, during or after the loop.
  EXPECT_EQ(em.stats["layout-conversions"], 0);
  EXPECT_EQ(em.stats["mma-direct-epilogues"], 1);
  EXPECT_GT(em.info.dynamic_smem_bytes, 0);  // the staged operands
  EXPECT_EQ(em.info.params.size(), 6u);  // a, b, c, then M, K, N
  EXPECT_EQ(em.info.params[3].kind, CudaParam::Kind::Dim);
  EXPECT_EQ(em.info.params[3].name, "M");
}

TEST(CudaGolden, F16MatmulUsesF16TensorCoresAndF32UsesFma) {
  EXPECT_NE(emit_lib("matmul", ScalarKind::F16, kSmallTiles).source.find("tsr::warp_mma_block<false"), std::string::npos);
  // The default tile on sm_80 (on sm_90a it is the wgmma tile).
  auto f16 = bind_constexprs(*find_library_kernel("matmul")->build(ScalarKind::F16), {});
  EXPECT_NE(emit_cuda_with_info(*f16, planning_target("sm_80")).source.find("tsr::mma_tiles<false>("), std::string::npos);
  CudaEmission f32 = emit_lib("matmul", ScalarKind::F32);
  EXPECT_EQ(f32.source.find("warp_mma_block"), std::string::npos);
  EXPECT_EQ(f32.stats["fma-dots"], 1);
}

TEST(CudaGolden, SoftmaxReducesAndBroadcastsWithoutConversions) {
  CudaEmission em = emit_lib("softmax", ScalarKind::F32);
  EXPECT_EQ(em.stats["reductions"], 4);  // max and sum in the one-tile and the looping branch
  // The reduced row max/sum are replicated in every thread: broadcasting them moves nothing.
  EXPECT_EQ(em.stats["layout-conversions"], 0) << em.source;
  EXPECT_NE(em.source.find("tsr::fexp"), std::string::npos);
}

TEST(CudaGolden, EveryIrOpIsACommentWithItsLine) {
  CudaEmission em = emit_lib("rmsnorm", ScalarKind::BF16);
  EXPECT_NE(em.source.find("// %"), std::string::npos);
  ASSERT_EQ(em.line_op.size(), static_cast<size_t>(occurrences(em.source, "\n")));
  int with_op = 0;
  for (const Op* op : em.line_op) with_op += op != nullptr;
  EXPECT_GT(with_op, 20);
}

TEST(CudaGolden, NumWarpsConstexprSetsTheBlockSize) {
  auto k = parse_one(R"(kernel @k(%x: view<f32, [N]>) {
  constexpr num_warps = 8
  grid {
    %n = dim %x {axis = 0} : i32
    yield %n
  }
  %p = program_id {axis = 0} : i32
  %t = load_tile %x, %p : tile<f32, [1024]>
  %u = neg %t : tile<f32, [1024]>
  store_tile %x, %u, %p
}
)");
  CudaEmission em = emit_cuda_with_info(*k, planning_target("sm_80"));
  EXPECT_EQ(em.info.block_threads, 256);
  EXPECT_NE(em.source.find("__launch_bounds__(256)"), std::string::npos);
}

TEST(CudaGolden, RawWithoutCudaBodyIsALocatedError) {
  auto k = parse_one(R"(kernel @k(%x: view<i32, [N]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    yield %n
  }
  %s = const {value = 7} : i32
  %r = raw %s {name = "twice", cpp = "out0 = in0 * 2;"} : i32
  %p = program_id {axis = 0} : i32
  %t = splat %r : tile<i32, [128]>
  store_tile %x, %t, %p
}
)");
  try {
    emit_cuda(*k, planning_target("sm_90a"));
    FAIL() << "expected an error";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("golden.tile:7:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no cuda body"), std::string::npos) << e.what();
  }
}

TEST(CudaGolden, TooMuchSharedMemoryNamesTheKernelAndTheLimit) {
  auto k = parse_one(R"(kernel @huge(%x: view<f32, [N, N]>) {
  grid {
    %n = dim %x {axis = 0} : i32
    yield %n
  }
  %c = const {value = 0} : i32
  %t = load_tile %x, %c, %c : tile<f32, [256, 256]>
  %p = permute %t {dims = [1, 0]} : tile<f32, [256, 256]>
  store_tile %x, %p, %c, %c
}
)");
  try {
    emit_cuda(*k, planning_target("sm_80"));
    FAIL() << "expected an error";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("@huge"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("shared memory"), std::string::npos) << e.what();
  }
}

TEST(CudaGolden, GridSizeIsEvaluatedOnTheHost) {
  auto k = bind_constexprs(*find_library_kernel("matmul")->build(ScalarKind::BF16), {});
  Tensor a(ScalarKind::BF16, {100, 30}), b(ScalarKind::BF16, {30, 130}), c(ScalarKind::BF16, {100, 130});
  std::vector<KernelArg> args(3);
  args[0].tensor = &a, args[1].tensor = &b, args[2].tensor = &c;
  auto g = cuda_grid_size(*k, args);
  int64_t bm = k->find_constexpr("BLOCK_M")->value, bn = k->find_constexpr("BLOCK_N")->value;
  EXPECT_EQ(g[0], (100 + bm - 1) / bm);
  EXPECT_EQ(g[1], (130 + bn - 1) / bn);
  EXPECT_EQ(g[2], 1);
}

// The text format's cdiv op in a grid, evaluated on the host like the interpreter does: a
// ragged 75 rows in tiles of 16 is 5 programs, in twos 38; a zero divisor is an error.
TEST(CudaGolden, GridCdivIsEvaluatedOnTheHost) {
  auto m = parse_module(R"(kernel @g(%x: view<f32, [M]>, %d: i32) {
  constexpr B = 16
  grid {
    %n = dim %x {axis = 0} : i32
    %b = param {name = "B"} : i32
    %g0 = cdiv %n, %b : i32
    %g1 = cdiv %n, %d : i32
    yield %g0, %g1
  }
}
)", "g.tile");
  auto k = bind_constexprs(*m->kernels.at(0), {});
  Tensor x(ScalarKind::F32, {75});
  std::vector<KernelArg> args(2);
  args[0].tensor = &x;
  args[1].scalar = int64_t{2};
  auto g = cuda_grid_size(*k, args);
  EXPECT_EQ(g[0], 5);
  EXPECT_EQ(g[1], 38);
  args[1].scalar = int64_t{0};
  EXPECT_THROW(cuda_grid_size(*k, args), TesseraError);  // cdiv by zero in the grid
}

// docs/semantics.md's run-time rules on cuda, where they are decided on the host (the grid: the
// interpreter's located messages; a size of 0 is no error, the launch runs nothing) and in the
// generated code (a `for` step that is not a positive constant and every `while` trap when
// broken), in both emitters and after the pass pipeline (dce keeps the unused loops).
TEST(CudaGolden, RunTimeRulesOnCuda) {
  auto m = parse_module(R"(kernel @r(%y: view<i32, [N]>, %n: i32, %d: i32) {
  grid {
    %k0 = const {value = 0} : i32
    %g0 = sub %n, %k0 : i32
    %g1 = div %n, %d : i32
    %g2 = rem %n, %d : i32
    yield %g0, %g1, %g2
  }
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %c7 = const {value = 7} : i32
  %s = sub %d, %n : i32
  for %c0, %c7, %s {
  ^(%i: i32):
    yield
  }
  %w = while %c0 : i32 {
    ^(%a: i32):
    %go = cmp %a, %n {pred = "lt"} : i1
    yield %go
  } do {
    ^(%b: i32):
    %b1 = add %b, %c1 : i32
    yield %b1
  }
  %t = splat %c7 : tile<i32, [1]>
  store_tile %y, %t, %c0
}
)", "r.tile");
  auto k = run_pipeline(*bind_constexprs(*m->kernels.at(0), {}), {});
  Tensor y(ScalarKind::I32, {1});
  std::vector<KernelArg> args(3);
  args[0].tensor = &y;
  auto grid = [&](int64_t n, int64_t d) {
    args[1].scalar = n;
    args[2].scalar = d;
    try {
      auto g = cuda_grid_size(*k, args);
      return std::to_string(g[0]) + " " + std::to_string(g[1]) + " " + std::to_string(g[2]);
    } catch (const TesseraError& e) {
      return std::string(e.what());
    }
  };
  EXPECT_EQ(grid(7, 2), "7 3 1");
  EXPECT_EQ(grid(0, 2), "0 0 0");  // no programs: no error
  EXPECT_EQ(grid(-3, 2), "r.tile:7:5: error: grid size on axis 0 of kernel 'r' is negative (a size of 0 runs no "
                         "programs; a negative size is an error)");
  EXPECT_EQ(grid(7, 0), "r.tile:5:5: error: div by zero");
  for (bool layouts : {false, true}) {
    CudaTarget t = planning_target("sm_90a");
    t.emitter = layouts ? CudaTarget::Emitter::Layouts : CudaTarget::Emitter::Planning;
    const std::string src = emit_cuda_with_info(*k, t).source;
    EXPECT_NE(src.find("> 0)) __trap();  // 'for' step is not positive"), std::string::npos) << layouts;
    EXPECT_NE(src.find(">= 67108864LL) __trap();"), std::string::npos) << layouts;
  }
}

}  // namespace
}  // namespace tessera
