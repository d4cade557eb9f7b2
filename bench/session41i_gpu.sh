#!/usr/bin/env bash
# Session 41's ninth GPU call (issue 16), from the repo root (about 2.5 minutes):
#   source .devdeps/setup.sh && bash bench/session41i_gpu.sh
# TESSERA_CUDA_RING_ADDR=1 (a ring's shared address converted once before its loop; fdb86bf's
# first half alone) against the default, beside the planning emitter: `tessera bench` medians
# (no L2 flush), three rounds alternated, matmul_struct and the mma.sync matmul, bf16 4096^3 on
# cuda:sm_90; `run --check` of both with the switch at ragged sizes. (As run at 90b6201; the
# switch was removed after this call: it cost the matmul 11% and gave matmul_struct 2%.)
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session41i.log") 2>&1
gpu_build tessera
T=$B/bin/tessera
for k in matmul_struct matmul; do for s in M=1000,N=776,K=1504 M=129,N=131,K=64; do
  TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_CUDA_RING_ADDR=1 timeout 60 $T run $k -b cuda:sm_90 --check --dtype bf16 --size $s 2>&1 | tail -1
done; done
for round in a b c; do
  for k in matmul_struct matmul; do
    a="$k -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096 --reps 30"
    p=$(timeout 60 $T bench $a 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
    l=$(TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T bench $a 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
    r=$(TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_CUDA_RING_ADDR=1 timeout 60 $T bench $a 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
    echo "$k 4096^3 cuda:sm_90 round $round: planning $p layouts $l ring-addr $r"
  done
done
echo "[$(( $(date +%s) - S0 )) s] done"
