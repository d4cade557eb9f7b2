// Program prefetch (src/cuda/EmitProgramPrefetch.cpp), without a GPU: which kernels and loads
// get it, what the persistent loop and the copies look like, and NVRTC compiling them for sm_80
// and sm_90a. The GPU checks are in tests/gpu/program_prefetch_gpu_test.cpp.
#include <gtest/gtest.h>

#include "CodegenTestUtil.h"
#include "text/Text.h"
#include "../common/PrefetchGrid2dText.h"

namespace tessera {
namespace {

using codegentest::emit;
using codegentest::expect_compiles;

std::unique_ptr<Kernel> row_kernel(const char* name, int64_t block_n, ScalarKind dt = ScalarKind::BF16) {
  return run_pipeline(*find_library_kernel(name)->build(dt), {.config = {{"BLOCK_N", block_n}}});
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// A whole row of 32768 bf16 (64 KiB, one 1024-thread CTA per SM) is prefetched by default: the
// kernel loops over the programs, passes the grid's three sizes, and reads the row from the
// buffer when the previous program copied it there. 4096 columns (8 KiB, several CTAs per SM)
// are not, unless prefetch_programs = 1 asks.
TEST(CudaProgramPrefetch, LongRowsByDefaultShortRowsWhenAsked) {
  for (const char* name : {"softmax", "layernorm", "rmsnorm"}) {
    SCOPED_TRACE(name);
    CudaEmission em = emit(*row_kernel(name, 32768));
    EXPECT_EQ(em.stats["prefetched-program-loads"], 1);  // x
    // layernorm's w and b (rmsnorm's w) are the same tile for every program: copied once per
    // CTA (while they fit), read from shared memory by its later programs; prefetch_invariant =
    // 0 turns that off.
    const bool ln = std::string(name) == "layernorm", rms = std::string(name) == "rmsnorm";
    const int64_t inv = em.stats["prefetched-invariant-loads"];
    EXPECT_EQ(inv, ln ? 2 : rms ? 1 : 0);
    EXPECT_EQ(count(em.source, "tsr::cp_async_commit();"), 1 + inv);
    EXPECT_EQ(count(em.source, " >= 0;"), inv);  // their hit test
    EXPECT_EQ(count(em.source, " < 0) {"), inv);  // their one copy
    EXPECT_GE(em.info.dynamic_smem_bytes, (1 + inv) * 65536);
    EXPECT_LT(em.info.dynamic_smem_bytes, (2 + inv) * 65536);
    auto no_inv = row_kernel(name, 32768);
    no_inv->set_constexpr("prefetch_invariant", 0);
    CudaEmission emn = emit(*no_inv);
    EXPECT_EQ(emn.stats.count("prefetched-invariant-loads"), 0u);
    EXPECT_EQ(count(emn.source, "tsr::cp_async_commit();"), 1);
    // The whole tile's bounds and alignment are tested once (the per-chunk test stays for tiles
    // at ragged or unaligned edges), unless the kernel says otherwise.
    EXPECT_NE(em.source.find("const bool whole"), std::string::npos);
    EXPECT_TRUE(em.info.persistent);
    EXPECT_TRUE(em.info.persistent_fill);
    int grids = 0;
    for (const CudaParam& p : em.info.params) grids += p.kind == CudaParam::Kind::GridSize;
    EXPECT_EQ(grids, 3);
    EXPECT_NE(em.source.find("for (int64_t tsr_t = blockIdx.x; tsr_t < tsr_programs; tsr_t += gridDim.x)"), std::string::npos);
    // One copy per prefetched tile and chunk loop (the whole-tile test's and the chunk-by-chunk one).
    EXPECT_EQ(count(em.source, "tsr::cp_async_16(tsr::smem_u32(tsr_pf_nxt"), 2 * (1 + inv));
    EXPECT_NE(em.source.find("reinterpret_cast<const uint32_t*>(tsr_pf_cur"), std::string::npos);
    EXPECT_EQ(em.source.find("TSR_PF_OFFSET"), std::string::npos);  // filled in
    // One buffer of the row after the reductions' scratch, refilled after the first barrier
    // that follows the load (the max or sum reduction's exchange).
    const size_t sync = em.source.find("__syncthreads();", em.source.find("const bool hit"));
    EXPECT_LT(sync, em.source.find("the next program's copy of this tile"));
    EXPECT_EQ(em.source.find("tsr_pf_at"), std::string::npos);
    auto two = row_kernel(name, 32768);
    two->set_constexpr("prefetch_buffers", 2);
    CudaEmission em2 = emit(*two);
    EXPECT_GE(em2.info.dynamic_smem_bytes, 2 * 65536);
    // (two buffers leave no room for w and b in the default budget)
    EXPECT_EQ(em2.stats.count("prefetched-invariant-loads"), 0u);

    EXPECT_NE(em2.source.find("tsr_pf_at ^= 65536;"), std::string::npos);
    // Right after the load: no barrier between the read and the copies into the other buffer.
    const size_t hit2 = em2.source.find("const bool hit");
    EXPECT_GT(em2.source.find("__syncthreads();", hit2), em2.source.find("the next program's copy of this tile", hit2));

    CudaEmission short_rows = emit(*row_kernel(name, 4096));
    EXPECT_EQ(short_rows.stats.count("prefetched-program-loads"), 0u);
    EXPECT_FALSE(short_rows.info.persistent);
    auto asked = row_kernel(name, 4096);
    asked->set_constexpr("prefetch_programs", 1);
    CudaEmission on = emit(*asked);
    EXPECT_EQ(on.stats["prefetched-program-loads"], 1);
    EXPECT_EQ(on.info.dynamic_smem_bytes % 16, 0);
    auto off = row_kernel(name, 32768);
    off->set_constexpr("prefetch_programs", 0);
    EXPECT_EQ(emit(*off).stats.count("prefetched-program-loads"), 0u);
  }
}

TEST(CudaProgramPrefetch, RowKernelsCompile) {
  for (const char* name : {"softmax", "layernorm", "rmsnorm"}) {
    expect_compiles(*row_kernel(name, 32768), std::string(name) + " BLOCK_N=32768");
    auto two = row_kernel(name, 32768);
    two->set_constexpr("prefetch_buffers", 2);
    expect_compiles(*two, std::string(name) + " BLOCK_N=32768 prefetch_buffers=2");
    auto k = row_kernel(name, 1024, ScalarKind::F32);
    k->set_constexpr("prefetch_programs", 1);
    expect_compiles(*k, std::string(name) + " f32 BLOCK_N=1024 prefetch_programs=1");
  }
}

// Bad knobs: a clear error naming the kernel and the limit, never a silent fallback.
TEST(CudaProgramPrefetch, BadKnobsAreLocatedErrors) {
  auto three = row_kernel("softmax", 32768);
  three->set_constexpr("prefetch_buffers", 3);
  try {
    emit(*three);
    ADD_FAILURE() << "prefetch_buffers = 3 accepted";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("prefetch_buffers of kernel @softmax is 3; it must be 1 or 2"), std::string::npos)
        << e.what();
  }
  // Two buffers of a 128 KiB f32 row, asked for: more shared memory than an SM has.
  auto big = row_kernel("softmax", 32768, ScalarKind::F32);
  big->set_constexpr("prefetch_programs", 1);
  big->set_constexpr("prefetch_buffers", 2);
  try {
    emit(*big);
    ADD_FAILURE() << "two 128 KiB buffers accepted";
  } catch (const TesseraError& e) {
    EXPECT_NE(std::string(e.what()).find("kernel @softmax needs"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bytes of shared memory; the limit on sm_90a is"), std::string::npos) << e.what();
  }
  // By default the f32 row (128 KiB, one buffer) still fits; two do not, so they are not chosen.
  EXPECT_EQ(emit(*row_kernel("softmax", 32768, ScalarKind::F32)).stats["prefetched-program-loads"], 1);
  auto two = row_kernel("softmax", 32768, ScalarKind::F32);
  two->set_constexpr("prefetch_buffers", 2);
  EXPECT_EQ(emit(*two).stats.count("prefetched-program-loads"), 0u);
}

std::unique_ptr<Kernel> parse_one(const std::string& src) {
  auto m = parse_module(src, "prefetch.tile");
  return bind_constexprs(*m->kernels.at(0), {});
}

// A 2-D grid: the ids of this program and of the next come from one counter, x fastest.
TEST(CudaProgramPrefetch, TwoDimensionalGrid) {
  auto k = parse_one(testutil::kPrefetchGrid2dText);
  CudaEmission em = emit(*k);
  EXPECT_EQ(em.stats["prefetched-program-loads"], 1);
  EXPECT_NE(em.source.find("tsr_npid1 = int32_t(tsr_tn / tsr_grid0 % tsr_grid1)"), std::string::npos);
  EXPECT_NE(em.source.find("= tsr_npid0;"), std::string::npos);
  EXPECT_NE(em.source.find("= tsr_npid1;"), std::string::npos);
  expect_compiles(*k, "2-D grid");
}

// The loads' indices may be arithmetic on the program ids (recomputed for the next program);
// a load inside a loop, one whose index comes from memory, and one from a view the kernel also
// writes are not prefetched, even when asked.
TEST(CudaProgramPrefetch, WhichLoads) {
  auto k = parse_one(R"(kernel @k(%x: view<f32, [M, N]>, %z: view<f32, [M, N]>, %y: view<f32, [M, N]>) {
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %p = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %c2 = const {value = 2} : i32
  %q = add %p, %c1 : i32
  %r = rem %q, %c2 : i32
  %t = load_tile %x, %p, %c0 : tile<f32, [1, 4096]>
  %u = load_tile %z, %r, %c0 : tile<f32, [1, 4096]>
  %w = load_tile %y, %p, %c0 : tile<f32, [1, 4096]>
  %s = add %t, %u : tile<f32, [1, 4096]>
  %v = add %s, %w : tile<f32, [1, 4096]>
  store_tile %y, %v, %p, %c0
}
)");
  k->set_constexpr("prefetch_programs", 1);
  CudaEmission em = emit(*k);
  EXPECT_EQ(em.stats["prefetched-program-loads"], 2);  // x and z, not y
  // z's row index (p + 1) % 2 again for the next program, from tsr_npid0.
  EXPECT_EQ(count(em.source, "= tsr_npid0;"), 2) << em.source;
  // No reduction: one barrier at the body's end, then both loads' copies.
  EXPECT_EQ(count(em.source, "__syncthreads();  // this program's reads of the prefetch buffer are done"), 1) << em.source;
  EXPECT_EQ(count(em.source, "the next program's copy of this tile"), 2);
  expect_compiles(*k, "x and z prefetched");

  auto loop = parse_one(R"(kernel @k(%x: view<f32, [M, N]>, %y: view<f32, [M, N]>) {
  grid {
    %m = dim %x {axis = 0} : i32
    yield %m
  }
  %p = program_id {axis = 0} : i32
  %c0 = const {value = 0} : i32
  %c1 = const {value = 1} : i32
  %c2 = const {value = 2} : i32
  %zero = const {value = 0.0} : f32
  %acc0 = splat %zero : tile<f32, [1, 4096]>
  %acc = for %c0, %c2, %c1, %acc0 : tile<f32, [1, 4096]> {
    ^(%j: i32, %a: tile<f32, [1, 4096]>):
    %t = load_tile %x, %p, %j : tile<f32, [1, 4096]>
    %a1 = add %a, %t : tile<f32, [1, 4096]>
    yield %a1
  }
  store_tile %y, %acc, %p, %c0
}
)");
  loop->set_constexpr("prefetch_programs", 1);
  CudaEmission lem = emit(*loop);
  EXPECT_EQ(lem.stats.count("prefetched-program-loads"), 0u);
  EXPECT_FALSE(lem.info.persistent);
}

}  // namespace
}  // namespace tessera
