// Internals of the cuda runtime side shared by its files (NVRTC, cache, launch, bench).
#pragma once

#include <string>
#include <vector>

#include "cuda/CudaBackend.h"
#include "cuda/CudaEmitter.h"

namespace tessera::cuda {

// "nvrtc 13.0"; throws TesseraError when NVRTC is not available.
std::string nvrtc_version_string();
// The NVRTC options used for a target (part of the cache key).
std::vector<std::string> nvrtc_options(const CudaTarget& target);
// One op on one line in the style of the text format, for "generated from:" messages.
std::string op_summary(const Op& op);

// Split-K (CudaTarget::split_k): how many CTAs should share each program's K loop when
// `programs` programs run on a device that holds `capacity` CTAs at once (multiprocessors x
// resident CTAs each). 1 unless the programs fill at most a third of it; else as many as fill
// it, at most kAutoSplitK. Measured on the H200 (bench/RESULTS.md): 36 programs of 64 x 128
// (1 x 4608 x 3584, session 21) ran 1.32x faster in 3 ways than in none (2: 1.27x, 4: 1.08x,
// 6: 1.12x), where the quarter had left them unsplit; a 2-way split of 56
// programs of 128 x 256 (128x14336x4096) ran slower than none (299 against 337 TFLOP/s: the
// partial sums of large tiles cost more than the idle SMs), and at 16x4096x4096 4 ways beat 8
// and 16 for every tile (128x256: 22 / 18 / 12 TFLOP/s; 64x128: 31 / 25 / 20): the last CTA's
// reads of the other slots grow with the splits.
// `loop_k`, the split loop's reduction length when known (cuda_split_loop_k; -1 when not): no
// more ways than give each slice kMinSplitKSlice of it. The fixup costs a few microseconds
// whatever the split (the partial tiles written, the counter, the last CTA's reads, in series),
// which a short slice does not win back. Measured on the H200 (bench/split_steps_gpu.sh,
// session 26, M = 1 at 64 x 128 x 64 and 64 x 256 x 64 tiles, 12-36 programs): at K = 256 and
// 512 every split ran 6-40% slower than none, at 1024 none was within 3% of the best split, at
// 2048 the best of 2-4 ways ran 7-18% faster: slices of at least 640 (10 k steps of 64). Measured
// in bf16 only (an fp8 slice of the same K moves half the bytes).
inline constexpr int kAutoSplitK = 4;
inline constexpr int64_t kMinSplitKSlice = 640;
int split_k_factor(int64_t programs, int64_t capacity, int64_t loop_k = -1);

// Whether a split launch of `ctas` CTAs (programs x splits) on `sms` multiprocessors runs each
// program's CTAs as one cluster (CudaKernelInfo::split_cluster): at most kMaxSplitKCluster ways,
// and CTAs that fill at most 55% of the SMs. Measured on the H200 (bench/split_cluster_gpu.sh,
// session 27: the same launches with both fixups in alternating rounds, M = 1, 16 and 128 at
// 8 decode shapes, 64 x 64 / 128 / 256 tiles, 2-4 ways): at up to 72 CTAs on 132 SMs the
// cluster's launch was the faster in 31 of 38 (geomean 0.957 of the workspace's time, 0.915 to
// 1.052), from 84 to 224 CTAs in 16 of 52 (geomean 1.035, 0.916 to 1.178: a cluster's CTAs
// must be placed together, within one GPC).
inline constexpr double kSplitClusterMaxShare = 0.55;
bool split_in_clusters(int64_t ctas, int splits, int64_t sms);

// Stream-K (CudaKernelInfo::stream_k): of `programs` whole tiles on `ctas` persistent CTAs, how
// many the kernel shares out as equal parts of K work over all of them (the rest run whole,
// one CTA each). All of them when they are fewer than the CTAs; else the last partial wave
// when it holds at least half the CTAs, a smaller one with the full wave before it (so that no
// CTA idles for most of a tile time while a few run the last tiles); none when the tiles fill
// whole waves. The generated kernel computes the same (EmitWgmma / CudaEmitter's tsr_L).
int64_t stream_k_tiles(int64_t programs, int64_t ctas);
// The CTAs a persistent stream-K launch of `programs` runs on a device that holds `ctas` at
// once: all of them, or kStreamKMaxParts per program when that is fewer, so that a tile's K
// loop is cut into about 4 parts at most (G / programs of them, one more where a CTA's share
// does not start at a tile's edge: 5 at 34-43 tiles on 132 CTAs). The tile's last part adds
// the earlier parts' sums one after another; past four parts that serial fixup costs more than
// the shorter K loops save (as kAutoSplitK found for split-K at 16x4096x4096).
inline constexpr int64_t kStreamKMaxParts = 4;
int64_t stream_k_ctas(int64_t programs, int64_t ctas);

}  // namespace tessera::cuda
