#!/usr/bin/env bash
# The radix-select topk (issue 18) on the H200 in one call, from the repo root after
# `source .devdeps/setup.sh`: builds the CLI and cuda_bench (Release); checks topk on cuda
# against the C++ reference (ragged rows, both dtypes, k not a power of two, k = N, one row of
# 2^24, and rows of NaN, infinities, both zeros and heavy ties given with --input); then times
# it with cuda_bench (do_bench: L2 flushed before each launch, median) at 64 x 131072,
# k = 64 / 256 / 1024 and 1 x 2^24, k = 1024, for the default config and BLOCK_N / num_warps
# variants, and torch.topk at the same shapes with triton's do_bench in the same call.
# Every line that matters starts with PASS, FAIL, topk, [variant] or torch.topk.
# VARIANTS=0: the default config only (no variants).
# The whole-row kernel throughout (TESSERA_TOPK_SEGMENT=0): bench/topk_seg_gpu.sh times the
# segmented top-k that replaced the split stages this script timed before.
set -uo pipefail
export TESSERA_TOPK_SEGMENT=0
B=build-gpu
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_TESTS=OFF > /dev/null 2>&1 || cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
timeout 300 cmake --build $B -j16 --target tessera cuda_bench 2>&1 | tail -1
T=$B/bin/tessera
for dt in f32 bf16; do
  for s in M=3,N=5000,K=100 M=64,N=131072,K=64 M=5,N=131071,K=1000 M=4,N=77,K=77 M=3,N=9000,K=1; do
    timeout 60 $T run topk -b cuda --check --dtype $dt --size $s 2>&1 | tail -1
  done
done
timeout 120 $T run topk -b cuda --check --size M=1,N=16777216,K=1024 2>&1 | tail -1
# Rows drawn from a handful of values (NaN, +-inf, both zeros, ties), as .npy files.
D=$(mktemp -d)
python3 bench/topk_ties_npy.py "$D"
for dt in f32 bf16; do
  timeout 60 $T run topk -b cuda --check --dtype $dt --size M=3,N=70001,K=300 --input x=$D/x_$dt.npy 2>&1 | tail -1
done
# Timing: cuda_bench's topk rows (the four shapes), default config, then variants.
timeout 300 $B/bin/cuda_bench --only topk 2>&1 | grep -E "^kernel|^topk"
[ "${VARIANTS:-1}" = 0 ] || for v in "RING_GROUP=3" "RING_GROUP=1" "num_warps=32" "BLOCK_N=4096 num_warps=32" "BLOCK_N=4096 RING_GROUP=3" "struct_cp_async=0"; do
  sets=""
  for a in $v; do sets="$sets --set $a"; done
  timeout 300 $B/bin/cuda_bench --only topk $sets 2>&1 | grep -E "^topk" | sed "s|^|[$v] |"
done
python3 -c "
import torch; from triton.testing import do_bench
for m, n, k in [(64, 131072, 64), (64, 131072, 256), (64, 131072, 1024), (1, 1 << 24, 1024)]:
    x = torch.randn(m, n, device='cuda')
    print('torch.topk %dx%d k=%d: %.4f ms' % (m, n, k, do_bench(lambda: torch.topk(x, k, dim=1), return_mode='median')))
" 2>&1 | tail -4
rm -rf "$D"
