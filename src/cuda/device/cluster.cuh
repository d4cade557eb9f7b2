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

}  // namespace tsr
