// Tessera device library: Hopper (sm_90 / sm_90a) primitives for TMA + mbarrier pipelines
// feeding wgmma. Included by generated code as "tessera/hopper.cuh" (wgmma.cuh includes it).
//
//  * mbarrier: a 64-bit barrier object in shared memory with an arrival count and a transaction
//    count (bytes). A phase completes when every expected arrival has arrived and every expected
//    byte has landed; waiting is by phase parity. A fresh barrier is in phase 0, and waiting for
//    parity 1 (the phase "before" it) returns at once: a producer's first round of waits on
//    "slot empty" barriers passes without any consumer having released anything.
//  * TMA: cp.async.bulk.tensor copies a box of a tensor described by a 128-byte tensor map
//    (encoded on the host with cuTensorMapEncodeTiled, passed as a __grid_constant__ kernel
//    parameter) into shared memory, completing bytes on an mbarrier. Elements outside the tensor
//    read as zero.
//  * wgmma matrix descriptors for 128-byte swizzled tiles as the TMA writes them (PTX ISA,
//    "Matrix Descriptor Format"): start address, leading and stride byte offsets (>> 4), swizzle
//    mode in bits 62-63 (1 = 128B). Tiles must start at 1024-byte aligned addresses so that the
//    swizzle pattern (address bits 4-6 XOR bits 7-9) is the one the TMA used.
#pragma once

#include "tessera/mma.cuh"

namespace tsr {

// The tensor map's bytes, as the host encoded them (CUtensorMap: 16 x u64, 64-byte aligned).
struct alignas(64) TmaDesc {
  unsigned long long v[16];
};

TSR_D void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the initialisations visible to the async proxy (TMA) before the barrier that publishes them.
TSR_D void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
TSR_D void mbar_arrive(uint32_t bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar) : "memory");
}
// One arrival that also announces `bytes` more bytes to come from async copies.
TSR_D void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// Announces `bytes` more bytes to come from async copies in the current phase, without an
// arrival (the Struct TMA copies, src/cuda/EmitStruct.cpp: any number of copies per phase, whose
// one arrival is async_wait's).
TSR_D void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
TSR_D bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}
// Waits until the phase with this parity has completed (try_wait itself suspends the thread for
// a while before it returns false, so this loop does not spin hot).
TSR_D void mbar_wait(uint32_t bar, uint32_t parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

// Orders this thread's earlier generic-proxy shared-memory accesses before later async-proxy
// ones (TMA writes, wgmma reads) of the CTA: needed when the TMA ring reuses shared memory that
// ordinary stores wrote.
TSR_D void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// TMA: the box at (c0 = inner coordinate, c1 = outer) of a 2-D tensor map -> shared `dst`,
// completing its bytes on `bar`.
TSR_D void tma_load_2d(uint32_t dst, const TmaDesc* map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// The same for a 3-D tensor map: the box at (c0 innermost, c1, c2).
TSR_D void tma_load_3d(uint32_t dst, const TmaDesc* map, int c0, int c1, int c2, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}

// L2 eviction policies (createpolicy) for the cache-hinted TMA load below: evict_first for
// data read once (its lines are replaced before any other, so streaming it does not push
// out what is resident, e.g. dirty lines that would then have to be written back),
// evict_last for data many CTAs read again. (For the rest the emitter copies without a hint:
// an explicit evict_normal policy coincided with 8-20% slower wgmma tiles in one gpu-check,
// bench/RESULTS.md, session 8.)
TSR_D uint64_t l2_policy_evict_first() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}
TSR_D uint64_t l2_policy_evict_last() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}
// tma_load_2d with an L2 cache policy from l2_policy_*.
TSR_D void tma_load_2d_hint(uint32_t dst, const TmaDesc* map, int c0, int c1, uint32_t bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3}], "
      "[%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "l"(policy)
      : "memory");
}

// TMA multicast within a thread-block cluster (the wgmma ring's `cluster_m = 2`,
// src/cuda/EmitWgmma.cpp): the box lands at the same shared offset `dst` in every CTA whose
// bit is set in `mask` (cluster ranks) and completes its bytes on the mbarrier at the same
// offset `bar` in each of them.
TSR_D void tma_load_2d_multicast(uint32_t dst, const TmaDesc* map, int c0, int c1, uint32_t bar, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
      "%3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
      : "memory");
}
TSR_D void tma_load_2d_multicast_hint(uint32_t dst, const TmaDesc* map, int c0, int c1, uint32_t bar, uint16_t mask,
                                      uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint "
      "[%0], [%1, {%2, %3}], [%4], %5, %6;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(mask), "l"(policy)
      : "memory");
}
// One arrival on the mbarrier at this CTA's shared offset `bar`, but in the shared memory of
// cluster CTA `rank`. The arrival has the default semantics (release at CTA scope), as
// CUTLASS's cluster barriers do: what it publishes is that this warp's wgmma groups have
// finished reading a stage, which wgmma.wait_group already made complete. (An arrival with
// release at cluster scope made each consumer warp wait for a cluster-wide fence every
// iteration: twice the time per tile, bench/RESULTS.md, session 9.)
TSR_D void mbar_arrive_cluster(uint32_t bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(bar), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}
// Starts fetching a tensor map into the TMA unit's descriptor cache, so that the first copy
// does not wait for it (a __grid_constant__ parameter's generic address).
TSR_D void prefetch_tensormap(const TmaDesc* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// TMA store: shared `src` (a box laid out as the tensor map says, 128-byte swizzled) -> the box
// at (c0, c1) of the tensor; parts outside the tensor are not written. Completion is tracked by
// bulk groups of the issuing thread.
TSR_D void tma_store_2d(const TmaDesc* map, uint32_t src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1)
               : "memory");
}
TSR_D void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Until at most N of this thread's bulk groups still read their shared memory source.
template <int N>
TSR_D void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// Until all of this thread's bulk groups are complete (their writes done).
TSR_D void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// Barrier `id` (1..15; 0 is __syncthreads) among `count` threads (a multiple of 32).
TSR_D void named_barrier(uint32_t id, uint32_t count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
TSR_D void st_shared_u32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}

// One 64 x 64 box of a persistent wgmma kernel's overlapped epilogue (EmitWgmma.cpp,
// knob epilogue_overlap). pk holds this thread's share of its warpgroup's 64-row block as
// 16-bit pairs in the m64nNk16 accumulator layout: pk[2j + h] is columns 8j + 2t, +1 of row
// 16v + g + 8h (v the warp in the warpgroup, g = lane / 4, t = lane % 4). Box C (columns
// 64C .. 64C + 63) goes into the 8 KiB buffer `buf` under the 128-byte swizzle the tensor map
// names (row r's 16-byte chunk q at chunk q ^ (r % 8)); then the warpgroup's first thread
// stores it to (c0 + 64C, c1) with TMA, (c0, c1) being the block's first column and row.
// InFlight: how many of that thread's earlier stores may still read their buffers when this
// one is written (the emitter picks it so that `buf`'s last store is not among them).
// Barrier 1 + warpgroup orders the warpgroup's writes and the copy's read.
template <int C, int InFlight, int N>
TSR_D void epilogue_box_sw128(const TmaDesc* map, uint32_t buf, const uint32_t (&pk)[N], int c0, int c1) {
  static_assert(N % 16 == 0 && C < N / 16, "box C of a row of N / 16 boxes");
  const uint32_t tid = threadIdx.x % 128u, wg = threadIdx.x / 128u;
  const uint32_t v = tid / 32u, g = tid % 32u / 4u, t = tid % 4u;
  const bool lead = tid == 0;
  if (lead) bulk_wait_read<InFlight>();
  named_barrier(1u + wg, 128u);
#pragma unroll
  for (uint32_t j = 0; j < 8; ++j)
#pragma unroll
    for (uint32_t h = 0; h < 2; ++h) {
      const uint32_t r = 16u * v + g + 8u * h;
      st_shared_u32(buf + r * 128u + ((j ^ (r & 7u)) << 4) + 4u * t, pk[16 * C + 2 * j + h]);
    }
  // The copy engine reads what ordinary stores wrote: each writer fences, then the barrier.
  fence_proxy_async();
  named_barrier(1u + wg, 128u);
  if (lead) {
    tma_store_2d(map, buf, c0 + 64 * C, c1);
    bulk_commit();
  }
}

// A wgmma shared-memory matrix descriptor, offsets in bytes; `layout` in bits 62-63 is the
// swizzle (1: 128-byte, 2: 64-byte).
template <int Layout>
TSR_D uint64_t wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((addr & 0x3FFFF) >> 4) | (uint64_t((lbo >> 4) & 0x3FFF) << 16) |
         (uint64_t((sbo >> 4) & 0x3FFF) << 32) | (uint64_t(Layout) << 62);
}
TSR_D uint64_t wgmma_desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) { return wgmma_desc<1>(addr, lbo, sbo); }
// 64-byte swizzle: B tiles of N = 32 (mod 64) columns, MN-major, as boxes of 32 columns (64
// bytes) whose 8-row groups are 512 bytes.
TSR_D uint64_t wgmma_desc_sw64(uint32_t addr, uint32_t lbo, uint32_t sbo) { return wgmma_desc<2>(addr, lbo, sbo); }

TSR_D void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
TSR_D void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
TSR_D void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the accumulator registers from being read or written by ordinary code while wgmma
// groups that use them are in flight (the compiler must not move accesses across the wait).
template <int NT>
TSR_D void wgmma_fence_regs(float (&d)[1][NT][4]) {
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) asm volatile("" : "+f"(d[0][j][r])::"memory");
}

// The RS A fragment (wgmma.cuh, "RS") of thread `tid` (0..127) of the warpgroup, from a row-major
// 64 x 16 tile of 16-bit elements at `a` (row stride lda elements, even; `a` 4-byte aligned), in
// shared or global memory: warp tid / 32 reads its 16 rows as mma.cuh's m16n8k16 A fragment.
TSR_D void wgmma_load_a(uint32_t (&f)[4], const uint16_t* a, int lda, int tid) {
  const uint16_t* p = a + (16 * (tid >> 5) + ((tid & 31) >> 2)) * lda + 2 * (tid & 3);
  f[0] = *reinterpret_cast<const uint32_t*>(p);
  f[1] = *reinterpret_cast<const uint32_t*>(p + 8 * lda);
  f[2] = *reinterpret_cast<const uint32_t*>(p + 8);
  f[3] = *reinterpret_cast<const uint32_t*>(p + 8 * lda + 8);
}
// fp8 (k32): a row-major 64 x 32 tile of bytes (lda bytes, a multiple of 4): the 16-bit load of
// byte pairs, as mma.cuh's warp_mma_block_f8 does.
TSR_D void wgmma_load_a_f8(uint32_t (&f)[4], const uint8_t* a, int lda, int tid) {
  wgmma_load_a(f, reinterpret_cast<const uint16_t*>(a), lda / 2, tid);
}
// As wgmma_fence_regs, for an RS A fragment: its registers stay untouched until the wait that
// this follows (the wgmma reads them asynchronously).
TSR_D void wgmma_fence_a(uint32_t (&f)[4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r) asm volatile("" : "+r"(f[r])::"memory");
}

// Split-K (src/cuda/EmitWgmma.cpp, EmitLowered.cpp): the CTAs that share one output tile each
// add a slice of K, leave their f32 accumulators in a global workspace slot, and the last of
// them to finish adds all slots in split order (deterministic) and runs the epilogue. A slot
// holds one 16-byte column per quad of registers and thread: float4 (j * nthreads + tid), so
// stores are coalesced and no layout is needed beyond "the same thread reads what the same
// thread index wrote". The .cg accesses go to L2, where other CTAs' slots were written. The
// floats_* forms take a flat array of N registers (the layout emitter's accumulators; quad j is
// v[4j .. 4j+3]), the frags_* forms the planning emitter's fragments [1][NT][4], the same
// registers in the same order.
template <int N>
TSR_D void floats_to_slot(const float (&v)[N], float* slot, int tid, int nthreads) {
  static_assert(N % 4 == 0, "fours of registers");
#pragma unroll
  for (int j = 0; j < N / 4; ++j)
    asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(slot + 4 * (int64_t(j) * nthreads + tid)),
                 "f"(v[4 * j]), "f"(v[4 * j + 1]), "f"(v[4 * j + 2]), "f"(v[4 * j + 3])
                 : "memory");
}
template <int NT>
TSR_D void frags_to_slot(const float (&d)[1][NT][4], float* slot, int tid, int nthreads) {
  floats_to_slot(*reinterpret_cast<const float (*)[4 * NT]>(&d[0][0][0]), slot, tid, nthreads);
}
TSR_D float4 ld_cg_f4(const float* p) {
  float4 v;
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
// v += load(j) for every quad j, B quads at a time: a batch's B loads are in flight together
// before any of them is added (B is what registers allow beside the accumulators without
// spills). `load` reads a slot (global) or a peer's ring (cluster).
template <int B, int N, class Load>
TSR_D void floats_add_batched(float (&v)[N], Load load) {
  static_assert(N % 4 == 0 && B >= 1 && (N / 4) % B == 0, "whole batches of quads");
#pragma unroll
  for (int j0 = 0; j0 < N / 4; j0 += B) {
    float4 p[B];
#pragma unroll
    for (int b = 0; b < B; ++b) p[b] = load(j0 + b);
#pragma unroll
    for (int b = 0; b < B; ++b)
      v[4 * (j0 + b)] += p[b].x, v[4 * (j0 + b) + 1] += p[b].y, v[4 * (j0 + b) + 2] += p[b].z, v[4 * (j0 + b) + 3] += p[b].w;
  }
}
template <int B, int NT, class Load>
TSR_D void frags_add_batched(float (&d)[1][NT][4], Load load) {
  floats_add_batched<B>(*reinterpret_cast<float (*)[4 * NT]>(&d[0][0][0]), load);
}
// v += the slot that floats_to_slot wrote with the same tid and nthreads (through L2, .cg:
// another multiprocessor wrote it).
template <int B, int N>
TSR_D void floats_add_slot_batched(float (&v)[N], const float* slot, int tid, int nthreads) {
  floats_add_batched<B>(v, [&](int j) { return ld_cg_f4(slot + 4 * (int64_t(j) * nthreads + tid)); });
}
// d += the slot that frags_to_slot wrote with the same tid and nthreads.
template <int B, int NT>
TSR_D void frags_add_slot_batched(float (&d)[1][NT][4], const float* slot, int tid, int nthreads) {
  floats_add_slot_batched<B>(*reinterpret_cast<float (*)[4 * NT]>(&d[0][0][0]), slot, tid, nthreads);
}
// v = the sum over s = 0 .. splits-1 of slot `first + s * stride`, added in that order, slot by
// slot, B quads at a time: the rounds of L2 latency are splits * N / 4 / B (B = N / 4: one per
// slot; the loads one quad at a time, as ptxas scheduled them, cost a round per few quads: 3 us
// of the 16 x 4096 x 4096 fixup).
template <int B, int N>
TSR_D void floats_sum_slots(float (&v)[N], const float* first, int64_t stride, int splits, int tid, int nthreads) {
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = 0.0f;
  for (int s = 0; s < splits; ++s)
    floats_add_batched<B>(v, [&](int j) { return ld_cg_f4(first + s * stride + 4 * (int64_t(j) * nthreads + tid)); });
}
template <int B, int NT>
TSR_D void frags_sum_slots(float (&d)[1][NT][4], const float* first, int64_t stride, int splits, int tid, int nthreads) {
  floats_sum_slots<B>(*reinterpret_cast<float (*)[4 * NT]>(&d[0][0][0]), first, stride, splits, tid, nthreads);
}

// Split-K within a cluster (src/cuda/EmitWgmma.cpp): when the runtime launches a program's
// gridDim.z CTAs as one cluster, the partial sums meet in shared memory instead: every CTA but
// the first leaves its fragments in its own (now idle) TMA ring, in frags_to_slot's order, and
// after a cluster barrier the first reads them through distributed shared memory (mapa +
// ld.shared::cluster), adding them in split order: the same sum, bit for bit, as the workspace's
// (0 + slot 0 + slot 1 + ...), without the round trips through L2 or the arrival counter.
// (cluster_ctas and cluster_sync: tessera/cluster.cuh.)
template <int NT>
TSR_D void frags_to_smem(const float (&d)[1][NT][4], uint32_t buf, int tid, int nthreads) {
#pragma unroll
  for (int j = 0; j < NT; ++j)
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(buf + 16u * uint32_t(j * nthreads + tid)),
                 "f"(d[0][j][0]), "f"(d[0][j][1]), "f"(d[0][j][2]), "f"(d[0][j][3])
                 : "memory");
}
// d = 0 + d + the buffers at `buf` of cluster ranks 1 .. ranks-1, in that order, B columns at a
// time.
template <int B, int NT>
TSR_D void frags_add_cluster(float (&d)[1][NT][4], uint32_t buf, unsigned ranks, int tid, int nthreads) {
  // 0 + d first, as the workspace's sum starts (a -0 slice of rank 0 gives +0 there too).
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) d[0][j][r] = 0.0f + d[0][j][r];
  for (unsigned r = 1; r < ranks; ++r) {
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(buf), "r"(r));
    frags_add_batched<B>(d, [&](int j) {
      float4 v;
      asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                   : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                   : "r"(remote + 16u * uint32_t(j * nthreads + tid))
                   : "memory");
      return v;
    });
  }
}

// Stream-K (src/cuda/EmitWgmma.cpp): a CTA whose part of a tile's K loop ends inside the tile
// leaves its f32 fragments in its slot (frags_to_slot) and raises its flag with release
// semantics; the CTA that ends the tile waits for each earlier part's flag (one thread polls,
// backing off, so that the waiting CTAs do not flood L2 with loads), and after a barrier every
// thread takes the flag with acquire semantics itself before it reads the slot, adding the
// slots in K order.
TSR_D void flag_release(unsigned* flag) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(flag), "r"(1u) : "memory");
}
TSR_D unsigned flag_acquire(const unsigned* flag) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(flag) : "memory");
  return v;
}
TSR_D void flag_poll(const unsigned* flag) {
  for (unsigned ns = 32; flag_acquire(flag) == 0u; ns = ns < 1024 ? 2 * ns : ns) __nanosleep(ns);
}

// Register reallocation between warpgroups (sm_90a): producers give registers back, consumers
// take them. Both must name a multiple of 8 in [24, 256].
template <int R>
TSR_D void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
TSR_D void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}

}  // namespace tsr
