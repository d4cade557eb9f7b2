// Test kernels for the wgmma RS wrappers (A from registers, src/cuda/device/wgmma.cuh): one
// warpgroup computes D = C + A B for A [64 x K], B [K x N], C [64 x N] twice, once with A from
// registers (RS, its fragment loaded by wgmma_load_a from A in global memory) and once with A from
// shared memory (SS), B in shared memory through a descriptor in both. K is one instruction's:
// 32 bytes (16 bf16/f16, 32 fp8). Shared by the NVRTC compile test (tests/cuda) and the GPU test
// (tests/gpu), which launches the same kernels.
#pragma once

#include <string>
#include <vector>

namespace tessera::testutil {

struct WgmmaRsCase {
  std::string type;  // the wrappers' type name: bf16, f16, e4m3, e5m2
  int n = 64;
  int tb = 0;  // B MN-major (row-major [K, N] in shared memory) when 1; the fp8 forms take 0 only
};

inline int wgmma_rs_elem_bytes(const std::string& type) { return type[0] == 'e' ? 1 : 2; }
inline int wgmma_rs_k(const std::string& type) { return 32 / wgmma_rs_elem_bytes(type); }

inline std::string wgmma_rs_kernel_name(const WgmmaRsCase& c) {
  return "rs_" + c.type + "_n" + std::to_string(c.n) + "_tb" + std::to_string(c.tb);
}

// The kernels take (a, b, c, d_rs, d_ss): A row-major [64 x K] (rows of 32 bytes), B row-major
// [K x N], C and both results row-major [64 x N] f32. Launch one CTA of 128 threads.
inline std::string wgmma_rs_test_source(const std::vector<WgmmaRsCase>& cases) {
  std::string s = R"(#include "tessera/wgmma.cuh"

// Byte offset of byte `kb` of row `row` in a 128-byte swizzled K-major tile (rows of 128 bytes,
// the 16-byte chunk c of row r at chunk c ^ (r % 8), as the TMA writes SWIZZLE_128B boxes): A
// [64 x K] and B^T [N x K]; an instruction reads the first 32 bytes of each row.
__device__ unsigned kmajor_off(int row, int kb) { return row * 128 + (((kb >> 4) ^ (row & 7)) << 4) + (kb & 15); }
// Byte `nb` of row k of B [K x N] MN-major: 64-column boxes of K rows x 128 bytes, K * 128 bytes
// apart (the descriptor's leading byte offset), each swizzled as above.
__device__ unsigned mnmajor_off(int k, int nb, int K) {
  return (nb >> 7) * (K * 128) + k * 128 + ((((nb & 127) >> 4) ^ (k & 7)) << 4) + (nb & 15);
}

template <int N, int ES, int TB, class Rs, class Ss>
__device__ void rs_and_ss(const unsigned char* a, const unsigned char* b, const float* c, float* d_rs, float* d_ss,
                          Rs rs, Ss ss) {
  constexpr int K = 32 / ES;  // elements of K in one instruction
  // A (64 rows of 128 bytes), then B, from a 1024-byte boundary (the swizzle's period: the
  // hardware swizzles address bits 4-6 with bits 7-9), which the buffer's own alignment may not be.
  __shared__ __align__(1024) unsigned char smem[1024 + 64 * 128 + (TB ? (N + 63) / 64 * K * 128 : N * 128)];
  unsigned char* sa = smem + ((1024u - (tsr::smem_u32(smem) & 1023u)) & 1023u);
  unsigned char* sb = sa + 64 * 128;
  const int tid = threadIdx.x;
  for (int i = tid; i < 64 * 32; i += 128) sa[kmajor_off(i / 32, i % 32)] = a[i];
  for (int i = tid; i < K * N * ES; i += 128) {
    const int k = i / (N * ES), nb = i % (N * ES);
    sb[TB ? mnmajor_off(k, nb, K) : kmajor_off(nb / ES, k * ES + nb % ES)] = b[i];
  }
  // wgmma reads shared memory through the async proxy: each writer fences, then the barrier.
  tsr::fence_proxy_async();
  __syncthreads();
  const uint64_t da = tsr::wgmma_desc_sw128(tsr::smem_u32(sa), 16u, 1024u);
  const uint64_t db = tsr::wgmma_desc_sw128(tsr::smem_u32(sb), TB ? K * 128u : 16u, 1024u);
  // Both accumulators start as C, in the fragment D layout.
  const int v = tid >> 5, g = (tid & 31) >> 2, q = tid & 3;
  float fr[1][N / 8][4], fs[1][N / 8][4];
  for (int j = 0; j < N / 8; ++j)
    for (int r = 0; r < 4; ++r) fr[0][j][r] = fs[0][j][r] = c[(16 * v + g + 8 * (r >> 1)) * N + 8 * j + 2 * q + (r & 1)];
  uint32_t fa[4];
  if (ES == 2) tsr::wgmma_load_a(fa, reinterpret_cast<const uint16_t*>(a), 16, tid);
  else tsr::wgmma_load_a_f8(fa, a, 32, tid);
  tsr::wgmma_fence_regs(fr);
  tsr::wgmma_fence_regs(fs);
  tsr::wgmma_fence_a(fa);
  tsr::wgmma_fence();
  rs(fr, fa, db);
  tsr::wgmma_commit();
  ss(fs, da, db);
  tsr::wgmma_commit();
  tsr::wgmma_wait<0>();
  tsr::wgmma_fence_regs(fr);
  tsr::wgmma_fence_regs(fs);
  tsr::wgmma_fence_a(fa);
  for (int j = 0; j < N / 8; ++j)
    for (int r = 0; r < 4; ++r) {
      const int at = (16 * v + g + 8 * (r >> 1)) * N + 8 * j + 2 * q + (r & 1);
      d_rs[at] = fr[0][j][r];
      d_ss[at] = fs[0][j][r];
    }
}
)";
  for (const WgmmaRsCase& c : cases) {
    const std::string n = std::to_string(c.n), nt = std::to_string(c.n / 8), es = std::to_string(wgmma_rs_elem_bytes(c.type));
    const std::string fn = "tsr::wgmma_m64n" + n + "k" + std::to_string(wgmma_rs_k(c.type)) + "_" + c.type;
    std::string tb;  // the 16-bit forms' template argument
    if (es == "2") tb.append("<").append(std::to_string(c.tb)).append(">");
    const std::string frag = "float (&d)[1][" + nt + "][4]";
    s += "\nextern \"C\" __global__ void __launch_bounds__(128) " + wgmma_rs_kernel_name(c) +
         "(const unsigned char* a, const unsigned char* b, const float* c, float* d_rs, float* d_ss) {\n"
         "  rs_and_ss<" + n + ", " + es + ", " + std::to_string(c.tb) + ">(a, b, c, d_rs, d_ss,\n"
         "      [](" + frag + ", const uint32_t (&fa)[4], uint64_t db) { " + fn + "_rs" + tb + "(d, fa, db); },\n"
         "      [](" + frag + ", uint64_t da, uint64_t db) { " + fn + tb + "(d, da, db); });\n"
         "}\n";
  }
  return s;
}

}  // namespace tessera::testutil
