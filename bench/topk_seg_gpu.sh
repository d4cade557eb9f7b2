#!/usr/bin/env bash
# The segmented top-k (issue 18) on the H200 in one call, from the repo root after
# `source .devdeps/setup.sh`: builds the CLI and cuda_bench (Release) into build-gpu; checks
# topk on cuda against the C++ reference (exact: values and indices) at the shapes,
# both dtypes (the segmented path by its rule), ragged rows, k above a segment's length, a
# level over the candidates, and rows of NaN, infinities, both zeros and heavy ties given with
# --input; then times it with cuda_bench (do_bench: L2 flushed before each launch, median): a
# `topk` row (the stages, its note naming the kernels) and a `topk_one_kernel` row (the
# whole-row kernel of before) per shape, f32 and bf16, then a few segment lengths / CTA sizes,
# and torch.topk at the same shapes with triton's do_bench in the same call.
# Every line that matters starts with PASS, FAIL, topk, [variant] or torch.topk.
# VARIANTS=0: the default configs only.
set -uo pipefail
B=build-gpu
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_TESTS=OFF > /dev/null 2>&1 || cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
timeout 300 cmake --build $B -j16 --target tessera cuda_bench 2>&1 | tail -1
T=$B/bin/tessera
# The shapes (segmented by the rule), both dtypes.
for dt in f32 bf16; do
  for s in M=64,N=131072,K=64 M=64,N=131072,K=256 M=64,N=131072,K=1024 M=1,N=16777216,K=1024; do
    timeout 60 $T run topk -b cuda --check --dtype $dt --size $s 2>&1 | tail -1
  done
done
# Ragged: rows not a multiple of the segment, k not a power of two; k above the segment's
# length and k = N (segments of 256 by TESSERA_TOPK_SEGMENT); levels over the candidates
# (segments of 2048: 489 of them, 97800 candidates, levels of 48 and 5 segments, the merge).
# M=3,N=100001,K=1000 merges 13000 candidates a row in tiles of 4096.
timeout 60 $T run topk -b cuda --check --size M=3,N=100001,K=1000 2>&1 | tail -1
timeout 60 $T run topk -b cuda --check --dtype bf16 --size M=5,N=40000,K=7 2>&1 | tail -1
TESSERA_TOPK_SEGMENT=256 timeout 60 $T run topk -b cuda --check --size M=3,N=2000,K=300 2>&1 | tail -1
TESSERA_TOPK_SEGMENT=256 timeout 60 $T run topk -b cuda --check --dtype bf16 --size M=4,N=1000,K=1000 2>&1 | tail -1
TESSERA_TOPK_SEGMENT=2048 timeout 60 $T run topk -b cuda --check --size M=2,N=1000000,K=200 2>&1 | tail -1
# Rows drawn from a handful of values (NaN, +-inf, both zeros, ties), as .npy files.
D=$(mktemp -d)
python3 bench/topk_ties_npy.py "$D"
for dt in f32 bf16; do
  timeout 60 $T run topk -b cuda --check --dtype $dt --size M=3,N=70001,K=300 --input x=$D/x_$dt.npy 2>&1 | tail -1
  TESSERA_TOPK_SEGMENT=1024 timeout 60 $T run topk -b cuda --check --dtype $dt --size M=3,N=70001,K=100 --input x=$D/x_$dt.npy 2>&1 | tail -1
done
rm -rf "$D"
# Timing: cuda_bench's topk rows (four shapes, f32 and bf16): stages, then the one kernel.
timeout 200 $B/bin/cuda_bench --only topk 2>&1 | grep -E "^kernel|^topk"
# Variants of the first level at 64 x 131072 (--quick): the segment length (one tile) and the
# CTA size. At the defaults (8192, 16 warps) ptxas gives 88 registers a thread: one CTA per SM;
# 4096 at 8 warps, 104: two; 2048 at 4 warps, 122: four (k = 1024 then merges 65536 a row).
[ "${VARIANTS:-1}" = 0 ] || for v in "SEG=4096 num_warps=8" "SEG=2048 num_warps=4"; do
  sets=""
  seg=""
  for a in $v; do
    case $a in SEG=*) seg=${a#SEG=} ;; *) sets="$sets --set $a" ;; esac
  done
  TESSERA_TOPK_SEGMENT=$seg timeout 100 $B/bin/cuda_bench --only topk --quick $sets 2>&1 | grep -E "^topk " | sed "s|^|[$v] |"
done
python3 bench/torch_topk.py 2>&1 | tail -8
