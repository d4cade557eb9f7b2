#!/usr/bin/env bash
# Session 41's fourth GPU call (issue 16), from the repo root (about 3 minutes):
#   source .devdeps/setup.sh && bash bench/session41d_gpu.sh
# After fdb86bf the layout emitter's mma.sync matmul executes fewer instructions than the
# planning emitter's (78.7M against 90.1M) yet runs slower (0.387 ms against 0.357 before it;
# planning 0.30): Nsight Compute shows MIO-throttle stalls (1.06 per issue, 0.08 before), and
# the SASS issues step 1's eight ldmatrix loads and the refill's twelve copies back to back at
# the iteration's top, before any mma of step 0, where the planning emitter's loop starts with
# step 0's mma instructions and spreads the loads between them. The A/B: where the ring's refill
# goes (before step 0's mma instructions, the default; after them; at the iteration's top), for
# the mma.sync matmul 4096^3 bf16 and matmul_fp8 (e4m3 m16n8k32) on cuda:sm_90, planning beside,
# `tessera bench` medians (no L2 flush), three rounds alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session41d.log") 2>&1
gpu_build tessera
T=$B/bin/tessera
for round in a b c; do
  for k in matmul matmul_fp8; do
    for v in planning before after top; do
      case $v in planning) e="env" ;; before) e="env TESSERA_CUDA_FROM_LAYOUTS=1" ;;
        after) e="env TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_CUDA_REFILL_AFTER_MMA=1" ;;
        top) e="env TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_CUDA_REFILL_AT_TOP=1" ;; esac
      ms=$($e timeout 60 $T bench $k -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096 --reps 30 2>&1 |
        grep -o 'median_ms=[0-9.e+-]*')
      echo "$k 4096^3 cuda:sm_90 $v round $round: $ms"
    done
  done
done
for s in M=1000,N=776,K=1504 M=300,N=520,K=200; do
  TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_CUDA_REFILL_AFTER_MMA=1 timeout 60 $T run matmul -b cuda:sm_90 --check --dtype bf16 --size $s 2>&1 | tail -1
done
echo "[$(( $(date +%s) - S0 )) s] done"
