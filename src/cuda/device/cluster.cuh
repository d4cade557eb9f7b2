// Tessera device library: thread-block clusters (sm_90+), for kernels whose program runs on a
// cluster of CTAs (cluster-split tiles, CudaEmitter.cpp; TMA multicast pairs and split-K's
// fixup within a cluster, EmitWgmma.cpp). Included by generated code as "tessera/cluster.cuh".
//
//  * A program's CTAs are the cluster's: its index is %clusterid, a CTA's share of each tile is
//    picked by %cluster_ctarank.
//  * Reductions end with a cluster exchange: every CTA writes its value to a slot in its own
//    shared memory, all CTAs pass a cluster barrier (release / acquire: the slot writes are
//    visible after it), and every thread reads the slots of all CTAs through distributed shared
//    memory (mapa + ld.shared::cluster), folding them in rank order so that every CTA holds the
//    same bits.
//  * A CTA must not exit while another may still read its shared memory: the kernel ends with
//    one more cluster barrier.
#pragma once

#include "tessera/mma.cuh"

namespace tsr {

TSR_D unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// CTAs in this CTA's cluster: 1 when the kernel was launched without clusters.
TSR_D unsigned cluster_ctas() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}
TSR_D unsigned cluster_id_x() {
  unsigned r;
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
  return r;
}
TSR_D unsigned cluster_count_x() {
  unsigned r;
  asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
  return r;
}
// Every thread of every CTA of the cluster arrives (with release semantics) and waits (acquire).
// `.aligned`: all threads of a warp execute it together (control flow is uniform in generated
// code).
TSR_D void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// A slot of the exchange holds any value of up to 8 bytes, as its bits.
template <class T> TSR_D unsigned long long to_slot(T v) {
  if constexpr (sizeof(T) == 8) return bitcast<unsigned long long>(v);
  else if constexpr (sizeof(T) == 4) return bitcast<unsigned int>(v);
  else if constexpr (sizeof(T) == 2) return bitcast<unsigned short>(v);
  else return bitcast<unsigned char>(v);
}
template <class T> TSR_D T from_slot(unsigned long long b) {
  if constexpr (sizeof(T) == 8) return bitcast<T>(b);
  else if constexpr (sizeof(T) == 4) return bitcast<T>((unsigned int)b);
  else if constexpr (sizeof(T) == 2) return bitcast<T>((unsigned short)b);
  else return bitcast<T>((unsigned char)b);
}
// The slot at `local` (this CTA's shared address of it) in the shared memory of CTA `rank`.
template <class T> TSR_D T cluster_slot(const unsigned long long* local, unsigned rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_u32(local)), "r"(rank));
  unsigned long long b;
  asm volatile("ld.shared::cluster.b64 %0, [%1];" : "=l"(b) : "r"(remote) : "memory");
  return from_slot<T>(b);
}

// Split-K's partial sums within a cluster (the layout emitter's fixup after a `split_k = 1`
// loop, EmitLowered.cpp): every CTA but the first leaves its N accumulator registers (N a
// multiple of 4) in its own idle ring at `buf`, 16 bytes at a time at 16 (j nthreads + tid) for
// the j-th four, and after a cluster barrier the first adds each peer's, in rank order, reading
// them through distributed shared memory 8 x 16 bytes at a time (the loads of a batch in flight
// together before any is added).
template <int N>
TSR_D void floats_to_smem(const float (&v)[N], uint32_t buf, int tid, int nthreads) {
  static_assert(N % 4 == 0, "fours of registers");
#pragma unroll
  for (int j = 0; j < N / 4; ++j)
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(buf + 16u * uint32_t(j * nthreads + tid)),
                 "f"(v[4 * j]), "f"(v[4 * j + 1]), "f"(v[4 * j + 2]), "f"(v[4 * j + 3])
                 : "memory");
}
template <int N>
TSR_D void floats_add_cluster(float (&v)[N], uint32_t buf, unsigned rank, int tid, int nthreads) {
  static_assert(N % 4 == 0, "fours of registers");
  constexpr int B = (N / 4) % 8 == 0 ? 8 : (N / 4) % 4 == 0 ? 4 : 1;
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(buf), "r"(rank));
#pragma unroll
  for (int j0 = 0; j0 < N / 4; j0 += B) {
    float4 p[B];
#pragma unroll
    for (int b = 0; b < B; ++b)
      asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                   : "=f"(p[b].x), "=f"(p[b].y), "=f"(p[b].z), "=f"(p[b].w)
                   : "r"(remote + 16u * uint32_t((j0 + b) * nthreads + tid))
                   : "memory");
#pragma unroll
    for (int b = 0; b < B; ++b) {
      v[4 * (j0 + b)] += p[b].x, v[4 * (j0 + b) + 1] += p[b].y;
      v[4 * (j0 + b) + 2] += p[b].z, v[4 * (j0 + b) + 3] += p[b].w;
    }
  }
}

}  // namespace tsr
