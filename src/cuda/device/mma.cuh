// Tessera device library: warp-level tensor-core matrix multiply-accumulate (sm_80+).
// Included by generated code as "tessera/mma.cuh".
//
// mma.sync m16n8k16 (row.col), f32 accumulators. Fragment ownership within a warp, with
// g = lane / 4 and t = lane % 4 (PTX ISA, "Matrix fragments for mma.m16n8k16"):
//   A (16x16): a[0] = A[g][2t..2t+1], a[1] = A[g+8][2t..], a[2] = A[g][2t+8..], a[3] = A[g+8][2t+8..]
//   B (16x8):  b[0] = B[2t..2t+1][g], b[1] = B[2t+8..2t+9][g]
//   C (16x8):  c[0..1] = C[g][2t..2t+1], c[2..3] = C[g+8][2t..2t+1]
// Each 32-bit register holds two 16-bit elements, the lower k in the low half.
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

// One warp: C[16x8] (f32, in registers c[4]) += A[16 x K] * B[K x 8], both 16-bit in shared
// memory: A row-major at `a` with row stride lda (elements), B stored transposed (n-major) at
// `bt` with row stride ldb, so that both fragments are 32-bit loads of consecutive k.
template <bool BF16, int K>
TSR_D void warp_mma_tile(float* c, const uint16_t* a, int lda, const uint16_t* bt, int ldb, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll 4
  for (int k0 = 0; k0 < K; k0 += 16) {
    uint32_t af[4], bf[2];
    af[0] = *reinterpret_cast<const uint32_t*>(a + g * lda + k0 + 2 * t);
    af[1] = *reinterpret_cast<const uint32_t*>(a + (g + 8) * lda + k0 + 2 * t);
    af[2] = *reinterpret_cast<const uint32_t*>(a + g * lda + k0 + 2 * t + 8);
    af[3] = *reinterpret_cast<const uint32_t*>(a + (g + 8) * lda + k0 + 2 * t + 8);
    bf[0] = *reinterpret_cast<const uint32_t*>(bt + g * ldb + k0 + 2 * t);
    bf[1] = *reinterpret_cast<const uint32_t*>(bt + g * ldb + k0 + 2 * t + 8);
    if (BF16) mma_bf16_16816(c, af, bf);
    else mma_f16_16816(c, af, bf);
  }
}

}  // namespace tsr

namespace tsr {

// One warp: a block of MT x NT mma tiles (16*MT rows, 8*NT columns) of C in registers,
// c[i][j][0..3] in the accumulator fragment order above, += A[16*MT x K] * B[K x 8*NT].
// A fragments are reused across the NT column tiles and B fragments across the MT row tiles.
template <bool BF16, int K, int MT, int NT>
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
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        if (BF16) mma_bf16_16816(c[i][j], af[i], bf[j]);
        else mma_f16_16816(c[i][j], af[i], bf[j]);
      }
  }
}

}  // namespace tsr
