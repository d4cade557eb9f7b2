#!/usr/bin/env bash
# Session 45 (issue 18), second call: the bucket threshold's knobs, from the repo root:
#   source .devdeps/setup.sh && bash bench/session45b_gpu.sh
# `tessera bench` medians (host-timed, no L2 flush: for ranking variants against each other) of
# the bucket plan (layout emitter, segments of 4096) with 8-bit digits, fewer bests a row
# (TESSERA_TOPK_BESTS_PER_K, buckets up to 8192), the bests' tile and warps; then each kernel's
# duration under ncu for the best variant. The TESSERA_TOPK_BESTS_PER_K / MAX_BUCKET / BEST_BLOCK /
# BEST_WARPS / SELECT_WARPS / MERGE_WARPS switches were temporary (not committed): a record of the
# call, not runnable as it is on later code.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session45b.log") 2>&1
gpu_build tessera cuda_bench
T=$B/bin/tessera
nvidia-smi --query-gpu=name --format=csv,noheader
export TESSERA_TOPK_BUCKET_THRESHOLD=1 TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_TOPK_SEGMENT=4096 TESSERA_TOPK_MAX_BUCKET=8192
for s in M=64,N=131072,K=64 M=1,N=16777216,K=1024 M=3,N=100001,K=1000; do
  TESSERA_TOPK_BESTS_PER_K=2 TESSERA_TOPK_SELECT_WARPS=4 TESSERA_TOPK_MERGE_WARPS=4 TESSERA_TOPK_BEST_BLOCK=2048 \
    timeout 60 $T run topk -b cuda --check --size $s 2>&1 | tail -1
done
ms() { timeout 60 $T bench topk -b cuda --dtype $1 --size $2 --reps 200 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2; }
v() { local e="$1"; shift; echo "$(env $e bash -c "$(declare -f ms); T=$T; ms $*")"; }
for dt in f32 bf16; do for s in M=64,N=131072,K=64 M=64,N=131072,K=256 M=64,N=131072,K=1024 M=1,N=16777216,K=1024; do
  line="$dt $s:"
  for e in "X=0" "TESSERA_TOPK_BESTS_PER_K=4" "TESSERA_TOPK_BESTS_PER_K=2" "TESSERA_TOPK_RADIX_BITS=8" \
           "TESSERA_TOPK_BEST_BLOCK=2048" "TESSERA_TOPK_BEST_BLOCK=2048 TESSERA_TOPK_BEST_WARPS=4" \
           "TESSERA_TOPK_SELECT_WARPS=4" "TESSERA_TOPK_MERGE_WARPS=4" "TESSERA_TOPK_SELECT_WARPS=8 TESSERA_TOPK_MERGE_WARPS=8" \
           "TESSERA_TOPK_BESTS_PER_K=4 TESSERA_TOPK_SELECT_WARPS=4 TESSERA_TOPK_MERGE_WARPS=4 TESSERA_TOPK_BEST_BLOCK=2048" "X=1"; do
    [ $dt = bf16 ] && [[ $e == *RADIX* ]] && continue
    line="$line | $e $(v "$e" $dt $s)"
  done
  echo "$line"
done; done
# Longer segments at k = 1024 (fewer slots: a segment writes K of them, mostly padding).
for dt in f32 bf16; do for s in M=64,N=131072,K=1024 M=1,N=16777216,K=1024; do
  line="$dt $s:"
  for e in "TESSERA_TOPK_SEGMENT=8192" "TESSERA_TOPK_SEGMENT=16384" "TESSERA_TOPK_SEGMENT=32768" \
           "TESSERA_TOPK_SEGMENT=16384 TESSERA_TOPK_BESTS_PER_K=4"; do
    line="$line | $e $(v "$e" $dt $s)"
  done
  echo "$line"
done; done
echo "[$(( $(date +%s) - S0 )) s] variants"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for e in "X=0" "TESSERA_TOPK_BESTS_PER_K=4 TESSERA_TOPK_SELECT_WARPS=4 TESSERA_TOPK_MERGE_WARPS=4 TESSERA_TOPK_BEST_BLOCK=2048"; do
  for s in M=64,N=131072,K=64 M=1,N=16777216,K=1024; do
    echo "== ncu $e $s"
    env $e timeout 90 $NCU --clock-control none --metrics gpu__time_duration.sum $T bench topk -b cuda --size $s --reps 1 --warmup 0 2>&1 |
      grep -E "^  tessera_|gpu__time_duration" | paste - - | awk '{print $1, $(NF)}'
  done
done
echo "[$(( $(date +%s) - S0 )) s] done"
