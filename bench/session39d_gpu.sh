#!/usr/bin/env bash
# Session 39's fourth GPU call (issue 16), from the repo root (about 1 minute on a cold machine):
#   source .devdeps/setup.sh && bash bench/session39d_gpu.sh
# Where the layout emitter's cp.async ring refills with the fragments loaded ahead (the default
# since 89d5655): after the dot's first k step (default) or at the iteration's top
# (TESSERA_CUDA_REFILL_AT_TOP=1), mma.sync matmul 4096^3 bf16 on cuda:sm_90, planning beside,
# three rounds alternated (`tessera bench` medians, no L2 flush).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session39d.log") 2>&1
gpu_build tessera
T=$B/bin/tessera
for round in a b c; do
  for v in planning layouts top; do
    case $v in planning) e="env" ;; layouts) e="env TESSERA_CUDA_FROM_LAYOUTS=1" ;;
      top) e="env TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_CUDA_REFILL_AT_TOP=1" ;; esac
    ms=$($e timeout 60 $T bench matmul -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096 --reps 30 2>&1 |
      grep -o 'median_ms=[0-9.e+-]*')
    echo "matmul bf16 4096^3 cuda:sm_90 $v round $round: $ms"
  done
done
echo "$(TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_CUDA_REFILL_AT_TOP=1 timeout 60 $T run matmul -b cuda:sm_90 --dtype bf16 --check --size M=1000,N=777,K=1500 2>&1 | tail -1)"
echo "[$(( $(date +%s) - S0 )) s] done"
