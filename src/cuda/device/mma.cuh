// Tessera device library: warp-level tensor-core matrix multiply-accumulate (sm_80+).
// Included by generated code as "tessera/mma.cuh".
//
// mma.sync m16n8k16 (row.col), f32 accumulators. Fragment ownership within a warp, with
// g = lane / 4 and t = lane % 4 (PTX ISA, "Matrix fragments for mma.m16n8k16"):
//   A (16x16): a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..], a[2] = A[g][2t+8..], a[3] = A[g+8][2t+8..]
//   B (16x8):  b[0] = B[2t..2t+1][g], b[1] = B[2t+8..2t+9][g]
//   C (16x8):  c[0..1] = C[g][2t..2t+1], c[2..3] = C[g+8][2t..2t+1]
// Each 32-bit register holds two 16-bit elements, the lower k in the low half.
//
// mma.sync m16n8k32 on 8-bit floats (e4m3, e5m2; sm_89+) has the same layout with K counted in
// bytes ("Matrix fragments for mma.m16n8k32"): a[0] = A[g][4t..4t+3], a[1] = A[g+8][4t..],
// a[2] = A[g][4t+16..], a[3] = A[g+8][4t+16..]; b[0] = B[4t..4t+3][g], b[1] = B[4t+16..][g]; C
// as above. A register holds four elements, the lowest k in the low byte: a pair of fp8 is one
// 16-bit element of the k16 layout, so the 16-bit fragment loads below serve fp8 unchanged with
// K in byte pairs (the *_f8 wrappers).
#pragma once

#include "tessera/core.cuh"

namespace tsr {

TSR_D void mma_bf16_16816(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
TSR_D void mma_f16_16816(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// F8 = 1: e4m3, 2: e5m2 (both operands of that kind).
template <int F8>
TSR_D void mma_f8_16832(float* c, const uint32_t* a, const uint32_t* b) {
  static_assert(F8 == 1 || F8 == 2, "F8: 1 (e4m3) or 2 (e5m2)");
#define TSR_MMA_F8(T)                                                                                    \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." T "." T ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, " \
               "{%8, %9}, {%0, %1, %2, %3};"                                                               \
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                            \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
  if constexpr (F8 == 1) TSR_MMA_F8("e4m3");
  else TSR_MMA_F8("e5m2");
#undef TSR_MMA_F8
}

// One warp, one k16 step (k32 for fp8): c[i][j] += A tile i * B tile j for its MT x NT mma
// tiles (the warp_mma_block fragment order below). Shared by every fragment source. F8 = 0: the
// 16-bit instruction BF16 picks; 1 / 2: fp8 e4m3 / e5m2 (mma_f8_16832).
template <bool BF16, int MT, int NT, int F8 = 0>
TSR_D void mma_tiles(float (&c)[MT][NT][4], const uint32_t (&a)[MT][4], const uint32_t (&b)[NT][2]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      if constexpr (F8 != 0) mma_f8_16832<F8>(c[i][j], a[i], b[j]);
      else if (BF16) mma_bf16_16816(c[i][j], a[i], b[j]);
      else mma_f16_16816(c[i][j], a[i], b[j]);
    }
}
template <int F8, int MT, int NT>
TSR_D void mma_tiles_f8(float (&c)[MT][NT][4], const uint32_t (&a)[MT][4], const uint32_t (&b)[NT][2]) {
  mma_tiles<false, MT, NT, F8>(c, a, b);
}

}  // namespace tsr

namespace tsr {

// One warp: a block of MT x NT mma tiles (16*MT rows, 8*NT columns) of C in registers,
// c[i][j][0..3] in the accumulator fragment order above, += A[16*MT x K] * B[K x 8*NT].
// A fragments are reused across the NT column tiles and B fragments across the MT row tiles.
// F8 != 0: the fp8 instruction (mma_tiles), with K, lda and ldb counted in byte pairs.
template <bool BF16, int K, int MT, int NT, int F8 = 0>
TSR_D void warp_mma_block(float (&c)[MT][NT][4], const uint16_t* a, int lda, const uint16_t* bt, int ldb, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll 2
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t af[MT][4], bf[NT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const uint16_t* ar = a + (16 * i + g) * lda + k0 + 2 * t;
      af[i][0] = *reinterpret_cast<const uint32_t*>(ar);
      af[i][1] = *reinterpret_cast<const uint32_t*>(ar + 8 * lda);
      af[i][2] = *reinterpret_cast<const uint32_t*>(ar + 8);
      af[i][3] = *reinterpret_cast<const uint32_t*>(ar + 8 * lda + 8);
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const uint16_t* br = bt + (8 * j + g) * ldb + k0 + 2 * t;
      bf[j][0] = *reinterpret_cast<const uint32_t*>(br);
      bf[j][1] = *reinterpret_cast<const uint32_t*>(br + 8);
    }
    mma_tiles<BF16, MT, NT, F8>(c, af, bf);
  }
}

// fp8 (F8 = 1: e4m3, 2: e5m2): A [16MT x KB] and B^T [8NT x KB] row-major in bytes, row strides
// lda, ldb bytes (even): each k32 step is a k16 step of byte pairs.
template <int F8, int KB, int MT, int NT>
TSR_D void warp_mma_block_f8(float (&c)[MT][NT][4], const uint8_t* a, int lda, const uint8_t* bt, int ldb, int lane) {
  static_assert(KB % 32 == 0, "fp8 mma steps 32 bytes of K at a time");
  warp_mma_block<false, KB / 2, MT, NT, F8>(c, reinterpret_cast<const uint16_t*>(a), lda / 2,
                                            reinterpret_cast<const uint16_t*>(bt), ldb / 2, lane);
}

}  // namespace tsr

// ---- pipelined operands: cp.async rings in swizzled shared memory, ldmatrix fragment loads ----
//
// A stage holds a 16-bit tile row-major in 16-byte chunks (8 elements); chunk q = row * CPR + c
// (CPR chunks per row: below 8, or a multiple of 8) lives at chunk slot swz<CPR>(q). The XOR key
// flips only the low 3 bits, so a chunk stays inside its 128-byte line (and its row when
// CPR >= 8): any 8 consecutive rows read at one chunk column (one ldmatrix phase) hit 8
// different 16-byte bank groups. (A CPR of 10, say, would let a line straddle two rows with
// different keys, and two chunks could land in one slot.)
namespace tsr {

template <int CPR>
TSR_D int swz(int q) {
  return q ^ (((CPR >= 8) ? q / CPR : q / 8) & 7);
}

// swz<CPR>(row * CPR + col) for col < CPR, written (rows of whole 128-byte lines) so that the
// compiler sees the key depend on row % 8 only: the fragment loops' rows are a lane's row plus
// multiples of 16, so their addresses become per-lane constants plus immediates.
template <int CPR>
TSR_D int swz_rc(int row, int col) {
  if (CPR % 8 == 0) return row * CPR + (col ^ (row & 7));
  return swz<CPR>(row * CPR + col);
}

TSR_D uint32_t smem_u32(const void* p) {
  uint32_t a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
// The same address through the compiler's own conversion, which it folds and shares
// (smem_addr(base + i) is smem_addr(base) + i): the layout emitter's TESSERA_CUDA_SMEM_ADDR=1 form
// (EmitLowered.cpp: fewer PTX instructions, a slower mma.sync matmul).
TSR_D uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// The layout emitter's 128-byte swizzled shared tiles of 16-bit elements (the layout the TMA
// writes with a 128-byte swizzle and wgmma's descriptors read, hopper.cuh): the fastest dim in
// blocks of 64 columns, each block `rows` rows of 128 bytes, row r's 16-byte chunk q stored at
// chunk q ^ (r % 8). The element index of (row, col).
TSR_D int sw128_index(int row, int col, int rows) {
  return (col >> 6) * rows * 64 + row * 64 + ((((col >> 3) & 7) ^ (row & 7)) << 3) + (col & 7);
}
// The same with the swizzle's key, row % 8, given: the layout emitter's ldmatrix rows are a
// lane's row plus multiples of 8, so it passes (tsr_lane & 7), which the compiler then sees is
// the same for every fragment a lane loads (computed from the whole row, the key kept each
// fragment's address apart: the mma.sync matmul went 234 -> 255 registers and spilled).
// (sw128_index is not written as sw128_index_key(row, col, rows, row & 7): that form took the
// mma.sync matmul's ring copies from 213 to 236 registers, session 42.)
TSR_D int sw128_index_key(int row, int col, int rows, int key) {
  return (col >> 6) * rows * 64 + row * 64 + ((((col >> 3) & 7) ^ key) << 3) + (col & 7);
}
// 64-byte swizzled tiles of 16-bit elements (mma.sync operands whose rows are 64 bytes, the
// TMA's 64-byte swizzle): the fastest dim in blocks of 32 columns, each block `rows` rows of 64
// bytes, row r's 16-byte chunk q stored at chunk q ^ (r / 2 % 4): the eight rows an ldmatrix
// phase reads fall in different banks, and a 32-byte piece of a row stays one.
TSR_D int sw64_index(int row, int col, int rows) {
  return (col >> 5) * rows * 32 + row * 32 + ((((col >> 3) & 3) ^ ((row >> 1) & 3)) << 3) + (col & 7);
}
TSR_D int sw64_index_key(int row, int col, int rows, int key) {
  return (col >> 5) * rows * 32 + row * 32 + ((((col >> 3) & 3) ^ key) << 3) + (col & 7);
}
// `p` rounded up to the next 1024-byte boundary of the shared window (the swizzle pattern is
// of address bits 4-9, so a swizzled tile starts on one).
TSR_D unsigned char* align_smem_1024(unsigned char* p) { return p + ((1024u - (smem_u32(p) & 1023u)) & 1023u); }

// 16 bytes global -> shared, bypassing L1; bytes < 16 reads only that many and zero-fills the rest
// (0: nothing is read, the chunk is all zeros). Without `bytes`: all 16. A part of a chunk
// (0 < bytes < 16, the ragged end of a row) is read and stored by this thread instead of by
// cp.async with a src-size: compute-sanitizer's memcheck counts such a cp.async as a 16-byte read
// and stops the kernel where the row is the last of its allocation. Every caller already stores
// chunks it cannot copy asynchronously the same way, ordered by the same barrier. L2PF (64, 128 or 256;
// 0: none) asks L2 to fetch that many bytes around the chunk from memory at once (the
// .L2::NB prefetch-size qualifier, sm_80+), a knob the pipelined matmul exposes as
// mma_l2_prefetch.
#define TSR_CP_ASYNC_16_PF(BODY)                                                                                 \
  static_assert(L2PF == 0 || L2PF == 64 || L2PF == 128 || L2PF == 256, "L2 prefetch size: 0, 64, 128 or 256 bytes"); \
  if constexpr (L2PF == 256) BODY(".L2::256B");                                                                    \
  else if constexpr (L2PF == 128) BODY(".L2::128B");                                                               \
  else if constexpr (L2PF == 64) BODY(".L2::64B");                                                                 \
  else BODY("")
#define TSR_CP_ASYNC_16_N(PF) \
  asm volatile("cp.async.cg.shared.global" PF " [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory")
#define TSR_CP_ASYNC_16_ALL(PF) \
  asm volatile("cp.async.cg.shared.global" PF " [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory")
// The first `bytes` (1-15) of a 16-byte chunk, the rest zeros. Not inlined: it serves only the
// ragged ends of rows, and one body keeps the callers' PTX (and ptxas's time) as it was.
__device__ __noinline__ void store_partial_chunk(uint32_t dst, const unsigned char* s, int bytes) {
  uint64_t lo = 0, hi = 0;
#pragma unroll 1
  for (int i = 0; i < bytes; ++i) {
    const uint64_t b = uint64_t(s[i]) << (8 * (i & 7));
    if (i < 8) lo |= b;
    else hi |= b;
  }
  asm volatile("st.shared.v2.u64 [%0], {%1, %2};\n" ::"r"(dst), "l"(lo), "l"(hi) : "memory");
}
template <int L2PF = 0>
TSR_D void cp_async_16(uint32_t dst, const void* src, int bytes) {
  if (bytes > 0 && bytes < 16) return store_partial_chunk(dst, static_cast<const unsigned char*>(src), bytes);
  TSR_CP_ASYNC_16_PF(TSR_CP_ASYNC_16_N);
}
template <int L2PF = 0>
TSR_D void cp_async_16(uint32_t dst, const void* src) {
  TSR_CP_ASYNC_16_PF(TSR_CP_ASYNC_16_ALL);
}
#undef TSR_CP_ASYNC_16_PF
#undef TSR_CP_ASYNC_16_N
#undef TSR_CP_ASYNC_16_ALL
TSR_D void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
TSR_D void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// One thread's 16-byte chunk of a Struct async_copy (cuda/EmitStruct.cpp, knob struct_cp_async):
// the first n elements of the chunk come from src[0], src[stride], ..., the rest are zeros (pad
// 0). dst is 16-byte aligned shared memory. With stride 1, n > 0 and a 16-byte aligned source it
// is one cp.async (a part of a chunk is read by the thread, cp_async_16; the caller commits the
// group); otherwise plain stores, visible after the barrier of the async_wait that
// ends the copy, as the cp.async data is.
//
// A whole aligned chunk inline; everything else (the row's ragged end, strided or unaligned
// sources) in one function that is not inlined: inline, the element loop unrolled at every call
// site was a tenth of topk's PTX (bench/RESULTS.md, session 20). TSR_INLINE_EDGES (see
// TSR_EDGE) selects the former form.
#ifndef TSR_INLINE_EDGES
template <class T>
TSR_EDGE void struct_copy_chunk_edge(T* dst, const T* src, int n, int64_t stride) {
  constexpr int E = 16 / int(sizeof(T));
  if (n > 0 && stride == 1 && aligned_vec<T, E>(src)) return cp_async_16(smem_u32(dst), src, n * int(sizeof(T)));
  *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll 1
  for (int e = 0; e < n; ++e) dst[e] = src[e * stride];
}
template <class T>
TSR_D void struct_copy_chunk(T* dst, const T* src, int64_t n, int64_t stride) {
  static_assert(16 % sizeof(T) == 0, "whole elements in a 16-byte chunk");
  constexpr int E = 16 / int(sizeof(T));
  if (n >= E && stride == 1) {  // a whole chunk of a row: inline, aligned or not (odd row lengths)
    if (aligned_vec<T, E>(src)) return cp_async_16(smem_u32(dst), src);
#pragma unroll
    for (int e = 0; e < E; ++e) dst[e] = src[e];
    return;
  }
  struct_copy_chunk_edge(dst, src, n > E ? E : n < 0 ? 0 : int(n), stride);
}
#else
template <class T>
TSR_D void struct_copy_chunk(T* dst, const T* src, int64_t n, int64_t stride) {
  constexpr int E = 16 / int(sizeof(T));
  if (n > E) n = E;
  if (n > 0 && stride == 1 && aligned_vec<T, E>(src)) {
    if (n == E) cp_async_16(smem_u32(dst), src);
    else cp_async_16(smem_u32(dst), src, int(n) * int(sizeof(T)));
    return;
  }
  *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
  for (int e = 0; e < n; ++e) dst[e] = src[e * stride];
}
#endif

TSR_D void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
// The same, each register named (the order a caller's fragments want).
TSR_D void ldsm_x4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}
TSR_D void ldsm_x4_trans(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}

// cp_tile_async's edge tiles and unaligned operands: the thread's chunks i_begin .. i_end - 1,
// rolled (no per-chunk values kept live across the main loop). Inlined: out of line (one body
// per shape, TSR_EDGE) the matmul's four call sites cost ptxas 0.1-0.2 s less, but the call in
// the K loop made matmul_struct bf16 at 4096^3 11% slower on the H200 (0.650 -> 0.725 ms,
// bench/RESULTS.md, session 20).
template <int CPR, int NTHREADS, int L2PF, int total, int i_begin, int i_end, class T>
TSR_D void cp_tile_async_edge(uint32_t base, const T* g, int64_t row0, int64_t col0, int64_t nrows, int64_t ncols,
                                 int64_t ld, int tid, bool vec) {
  constexpr int E = 16 / int(sizeof(T));
#pragma unroll 1
  for (int i = i_begin; i < i_end; ++i) {
    const int q = tid + i * NTHREADS;
    if (total % NTHREADS == 0 || q < total) {
      const int64_t gr = row0 + q / CPR, gc = col0 + E * (q % CPR);
      const bool in = gr >= 0 && gr < nrows && gc >= 0 && gc < ncols;
      const uint32_t dst = base + uint32_t(swz<CPR>(q)) * 16u;
      if (vec || !in) {
        int bytes = 0;
        const T* src = g;
        if (in) {
          bytes = ncols - gc >= E ? 16 : int(ncols - gc) * int(sizeof(T));
          src = g + gr * ld + gc;
        }
        cp_async_16<L2PF>(dst, src, bytes);
      } else {
        const T* src = g + gr * ld + gc;
        uint32_t w[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if constexpr (sizeof(T) == 2) {
            const uint32_t lo = gc + 2 * e < ncols ? uint32_t(src[2 * e]) : 0u;
            const uint32_t hi = gc + 2 * e + 1 < ncols ? uint32_t(src[2 * e + 1]) : 0u;
            w[e] = lo | (hi << 16);
          } else {
            w[e] = 0u;
#pragma unroll
            for (int x = 0; x < 4; ++x)
              if (gc + 4 * e + x < ncols) w[e] |= uint32_t(src[4 * e + x]) << (8 * x);
          }
        }
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                     : "memory");
      }
    }
  }
}

// All NTHREADS threads: start copying the ROWS x (E*CPR) tile at (row0, col0) of a row-major
// global matrix of T (16-bit, or bytes for fp8: E = 16 / sizeof(T) elements per 16-byte chunk;
// nrows x ncols, row stride ld elements, col0 a multiple of E) into the swizzled
// stage `s`. Elements outside the matrix read as 0. `vec` (uniform): base and ld are 16-byte
// aligned, so every chunk is one cp.async; otherwise the chunks that hold data are read element
// by element and written with one 16-byte shared store (synchronous: visible after the barrier
// that also publishes the cp.async groups), so that unaligned operands need no second loop.
//
// A tile wholly inside an aligned matrix (every tile but the last row and column of tiles) takes
// a shorter path without per-chunk bounds; there, when NTHREADS spans whole rows and whole
// swizzle periods, a thread's i-th chunk sits a fixed distance from its first in both memories,
// so its addresses are one add each (this matters for registers: 128 x 256 x 64 spilled with
// the per-chunk arithmetic).
//
// L2PF: cp_async_16's L2 prefetch size. PART of NPARTS: only that share of each thread's chunks
// (chunk rounds PART * R / NPARTS up to (PART + 1) * R / NPARTS of its R), so that a stage's
// copies can be issued in pieces between the k16 steps of the one before (the pipelined
// matmul's mma_spread_copies); the NPARTS calls together copy the whole tile.
template <int ROWS, int CPR, int NTHREADS, int L2PF = 0, int PART = 0, int NPARTS = 1, class T>
TSR_D void cp_tile_async(T* s, const T* g, int64_t row0, int64_t col0, int64_t nrows, int64_t ncols, int64_t ld,
                         int tid, bool vec) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2, "16-bit or 8-bit elements");
  constexpr int E = 16 / int(sizeof(T));
  constexpr int total = ROWS * CPR;
  constexpr int rounds = (total + NTHREADS - 1) / NTHREADS;
  constexpr int i_begin = rounds * PART / NPARTS, i_end = rounds * (PART + 1) / NPARTS;
  static_assert(PART >= 0 && PART < NPARTS, "part out of range");
  if constexpr (i_begin == i_end) return;
  const uint32_t base = smem_u32(s);
  if (vec && row0 >= 0 && col0 >= 0 && row0 + ROWS <= nrows && col0 + E * CPR <= ncols) {
    // Chunk tid + i * NTHREADS is NTHREADS / CPR rows below chunk tid, in the same column...
    constexpr bool whole_rows = NTHREADS % CPR == 0;
    // ... and has the same XOR key (which depends on q / max(CPR, 8) mod 8 only).
    constexpr bool same_key = whole_rows && NTHREADS % 8 == 0 && (NTHREADS / (CPR >= 8 ? CPR : 8)) % 8 == 0;
    const T* src0 = g + (row0 + tid / CPR) * ld + col0 + E * (tid % CPR);
    const uint32_t dst0 = base + uint32_t(swz<CPR>(tid)) * 16u;
    const int64_t step = int64_t(NTHREADS / CPR) * ld;
#pragma unroll
    for (int i = i_begin; i < i_end; ++i) {
      const int q = tid + i * NTHREADS;
      if (total % NTHREADS != 0 && q >= total) continue;
      const uint32_t dst = same_key ? dst0 + uint32_t(i * NTHREADS * 16) : base + uint32_t(swz<CPR>(q)) * 16u;
      const T* src = whole_rows ? src0 + i * step : g + (row0 + q / CPR) * ld + col0 + E * (q % CPR);
      cp_async_16<L2PF>(dst, src);
    }
    return;
  }
  // Edge tiles and unaligned operands: rare.
  cp_tile_async_edge<CPR, NTHREADS, L2PF, total, i_begin, i_end>(base, g, row0, col0, nrows, ncols, ld, tid, vec);
}

// One warp: the fragments of k16 step `ks` (k = 16ks .. 16ks+15 of the stage) of its block at
// rows m0 .. m0+16MT, columns n0 .. n0+8NT, from a swizzled stage at shared addresses `sa` (A
// row-major BM x BK, BK/8 chunks per row) and `sb` (B row-major BK x BN, CPRB = BN/8 chunks per
// row), in mma_tiles' order. Lane l addresses row l % 16 and chunk l / 16 of a 16x16 block: for
// A that is x4 = {rows 0-7, 8-15} x {k 0-7, 8-15} = a[i][0..3]; for B (rows are k) x4.trans =
// {k 0-7, k 8-15} x {n 0-7, n 8-15} = b[j][0], b[j][1], b[j+1][0], b[j+1][1]. MT + NT/2
// ldmatrix.x4 feed MT * NT mma: 8 per 32 for a 64 x 64 warp block.
// B_KMAJOR: B is stored as B^T (row-major BN x BK, rows of A's width): its k runs along a row as
// A's does, so a fragment is ldmatrix without .trans of rows n (lane l: row l % 16 of an n16
// block, chunk l / 16 = {n 0-7, n 8-15} x {k 0-7, 8-15} = b[j][0], b[j+1][0], b[j][1], b[j+1][1]).
template <int BK, int MT, int NT, int CPRB, bool B_KMAJOR = false>
TSR_D void ldsm_frags(uint32_t (&a)[MT][4], uint32_t (&b)[NT][2], uint32_t sa, uint32_t sb, int ks, int m0, int n0,
                      int lane) {
  static_assert(NT % 2 == 0, "B fragments are loaded in pairs of n tiles");
  constexpr int CPRA = BK / 8;
  const int r = lane & 15, h = lane >> 4;
#pragma unroll
  for (int i = 0; i < MT; ++i) ldsm_x4(a[i], sa + uint32_t(swz_rc<CPRA>(m0 + 16 * i + r, 2 * ks + h)) * 16u);
#pragma unroll
  for (int j = 0; j < NT; j += 2) {
    if constexpr (B_KMAJOR)
      ldsm_x4(b[j][0], b[j + 1][0], b[j][1], b[j + 1][1], sb + uint32_t(swz_rc<CPRA>(n0 + 8 * j + r, 2 * ks + h)) * 16u);
    else
      ldsm_x4_trans(b[j][0], b[j][1], b[j + 1][0], b[j + 1][1],
                    sb + uint32_t(swz_rc<CPRB>(16 * ks + r, n0 / 8 + j + h)) * 16u);
  }
}

// fp8: the fragments of k32 step `ks` from stages of A (BM x BKB bytes) and B^T (BN x BKB
// bytes, K-major: an [N, K] operand), both rows of BKB / 16 chunks; the k16 loads of byte pairs.
// (A [K, N] fp8 B has no ldmatrix form: .trans moves 16-bit elements, not bytes.)
template <int BKB, int MT, int NT>
TSR_D void ldsm_frags_f8(uint32_t (&a)[MT][4], uint32_t (&b)[NT][2], uint32_t sa, uint32_t sb, int ks, int m0, int n0,
                         int lane) {
  ldsm_frags<BKB / 2, MT, NT, BKB / 16, true>(a, b, sa, sb, ks, m0, n0, lane);
}

}  // namespace tsr

// ---- epilogue: accumulator fragments straight to global memory ----
namespace tsr {

// A thread's two adjacent columns of one m16n8 accumulator fragment f, row half h (f[2h] and
// f[2h + 1]), each through conv, side by side: one 2-element store of `pair`, or one of `s`
// each at a ragged edge.
template <class S>
union FragPair {
  typedef typename VecT<2 * sizeof(S)>::T P;
  S s[2];
  P pair;
};
template <class S, class Conv>
TSR_D FragPair<S> frag_pair(const float (&f)[4], int h, Conv conv) {
  FragPair<S> u;
  u.s[0] = conv(f[2 * h]);
  u.s[1] = conv(f[2 * h + 1]);
  return u;
}

// One warp's c[MT][NT] (the warp_mma_block fragment order; the warp's block starts at row0, col0
// of a row-major nrows x ncols matrix with row stride ld) -> memory, each value through conv.
// A thread owns pairs of adjacent columns: one 2-element store per pair when `pair_ok` (base and
// ld aligned for it; col0 is even) and both columns are inside, element stores at ragged edges.
template <class S, int MT, int NT, class Conv>
TSR_D void store_frags(const float (&c)[MT][NT][4], S* g, int64_t row0, int64_t col0, int64_t nrows, int64_t ncols,
                       int64_t ld, bool pair_ok, int lane, Conv conv) {
  typedef typename FragPair<S>::P P;
  const int64_t r0 = row0 + (lane >> 2), c0 = col0 + 2 * (lane & 3);
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = r0 + 16 * i + 8 * h;
      if (r < 0 || r >= nrows) continue;
      S* const row = g + r * ld;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int64_t cc = c0 + 8 * j;
        const FragPair<S> u = frag_pair<S>(c[i][j], h, conv);
        if (pair_ok && cc >= 0 && cc + 2 <= ncols) {
          *reinterpret_cast<P*>(row + cc) = u.pair;
        } else {
          if (cc >= 0 && cc < ncols) row[cc] = u.s[0];
          if (cc + 1 >= 0 && cc + 1 < ncols) row[cc + 1] = u.s[1];
        }
      }
    }
}

// The transpose of store_frags: fragment element (r, c) of the warp's block (rows r0 + .., as
// store_frags counts them) goes to g[(col0 + c) * ld + row0 + r]. For the operand-swapped wgmma
// matmul, whose accumulator holds C^T (the weights' N along wgmma's 64 rows, the batch along its
// n of 8-32): a fragment's row is C's column. Element by element: a pair (c, c + 1) lies in two
// rows of C; the eight rows g of a column block land in eight consecutive elements of a row.
template <class S, int MT, int NT, class Conv>
TSR_D void store_frags_t(const float (&c)[MT][NT][4], S* g, int64_t row0, int64_t col0, int64_t nrows, int64_t ncols,
                         int64_t ld, int lane, Conv conv) {
  const int64_t r0 = row0 + (lane >> 2), c0 = col0 + 2 * (lane & 3);
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = r0 + 16 * i + 8 * h;  // C's column
      if (r < 0 || r >= ncols) continue;
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t cc = c0 + 8 * j + e;  // C's row
          if (cc >= 0 && cc < nrows) g[cc * ld + r] = conv(c[i][j][2 * h + e]);
        }
    }
}


// The first n elements of a chunk, element by element: a ragged or unaligned edge of an
// epilogue's store, out of line (inline, unrolled at every call site, it cost ptxas 0.1 s of the
// bf16 matmul on sm_80; bench/RESULTS.md, session 20).
template <class S>
TSR_EDGE void copy_chunk_edge(S* dst, const S* src, int n) {
#pragma unroll 1
  for (int e = 0; e < n; ++e) dst[e] = src[e];
}

// The whole CTA's BM x BN accumulator tile (each warp's c[MT][NT] at rows m0.., columns n0.. of
// it, warps with `active` false holding none) -> memory through shared memory `stile` (16-byte
// aligned, BM * (BN + 16 / sizeof(S)) elements, free for the CTA's use): each thread writes its
// converted pairs into rows padded by 16 bytes (8 rows of a warp's store then fall in 8 different
// bank quads), then the tile goes out in 16-byte row chunks, consecutive threads on consecutive
// chunks, so a warp writes whole 128-byte lines where store_frags writes 16-byte pieces of 8
// rows. `vec_ok`: base and ld aligned for 16-byte vectors (col0 is a multiple of BN); chunks
// across the right edge and unaligned matrices go element by element. Barriers before (the
// shared memory may still be read) and after (it may be reused).
template <class S, int BM, int BN, int NTHREADS, int MT, int NT, class Conv>
TSR_D void store_frags_staged(const float (&c)[MT][NT][4], S* stile, int m0, int n0, bool active, S* g, int64_t row0,
                              int64_t col0, int64_t nrows, int64_t ncols, int64_t ld, bool vec_ok, int tid, Conv conv) {
  typedef typename FragPair<S>::P P;
  constexpr int E = 16 / int(sizeof(S));  // elements per chunk
  constexpr int LDS = BN + E;
  constexpr int CPR = BN / E;
  static_assert(BN % E == 0, "rows of whole 16-byte chunks");
  const int lane = tid % 32;
  __syncthreads();
  if (active) {
    S* const w0 = stile + (m0 + (lane >> 2)) * LDS + n0 + 2 * (lane & 3);
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < NT; ++j)
          *reinterpret_cast<P*>(w0 + (16 * i + 8 * h) * LDS + 8 * j) = frag_pair<S>(c[i][j], h, conv).pair;
  }
  __syncthreads();
#pragma unroll 4
  for (int q = tid; q < BM * CPR; q += NTHREADS) {
    const int r = q / CPR, cc = q % CPR;
    const int64_t gr = row0 + r, gc = col0 + int64_t(cc) * E;
    if (gr >= nrows || gc >= ncols) continue;
    const S* src = stile + r * LDS + cc * E;
    S* dst = g + gr * ld + gc;
    if (vec_ok && gc + E <= ncols) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    } else {
#ifndef TSR_INLINE_EDGES
      copy_chunk_edge(dst, src, gc + E <= ncols ? E : int(ncols - gc));
#else
      for (int e = 0; e < E && gc + e < ncols; ++e) dst[e] = src[e];
#endif
    }
  }
  __syncthreads();
}
}  // namespace tsr
