#!/usr/bin/env bash
# Session 41's seventh GPU call (issue 16), from the repo root (about 4 minutes):
#   source .devdeps/setup.sh && bash bench/session41g_gpu.sh
# pipeline-loops' fragments_ahead with a 2-stage ring only for dots of 4 or more k steps (an
# unwritten ring of such a loop gets 3 stages): matmul_struct (STAGES = 2, 32-deep tiles) no
# longer loads ahead. The layout emitter's GPU tests; `run --check` of matmul_struct and the
# corpus matmul_bias_gelu on cuda:sm_90 at ragged sizes; `tessera bench` medians (no L2 flush),
# three rounds alternated, planning / layouts: matmul_struct bf16 4096^3 and the mma.sync matmul
# 4096^3 on cuda:sm_90.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session41g.log") 2>&1
gpu_build tessera tessera_gpu_tests
T=$B/bin/tessera
echo "=== GPU tests ($(( $(date +%s) - S0 )) s)"
timeout 300 "$B/bin/tessera_gpu_tests" --gtest_filter='*LayoutEmitter*:*OverrideDir*' 2>&1 |
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|fell back|no TMA|Which is|error:" | head -40
echo "=== checks ($(( $(date +%s) - S0 )) s)"
for s in M=1000,N=776,K=1504 M=129,N=131,K=64; do
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T run matmul_struct -b cuda:sm_90 --check --dtype bf16 --size $s 2>&1 | tail -1
done
TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T run tests/corpus/matmul_bias_gelu.tile -b cuda:sm_90 --check --size M=300,N=520,K=200 2>&1 | tail -1
echo "=== speed ($(( $(date +%s) - S0 )) s)"
for round in a b c; do
  for k in matmul_struct matmul; do
    a="$k -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096 --reps 30"
    p=$(timeout 60 $T bench $a 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
    l=$(TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T bench $a 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
    echo "$k 4096^3 cuda:sm_90 round $round: planning $p layouts $l"
  done
done
echo "[$(( $(date +%s) - S0 )) s] done"
