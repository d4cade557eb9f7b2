#!/usr/bin/env bash
# Session 41's sixth GPU call (issue 16), from the repo root (about 4 minutes):
#   source .devdeps/setup.sh && bash bench/session41f_gpu.sh
# stage-epilogue-stores (an mma.sync result through shared memory in 16-byte rows): the layout
# emitter's GPU tests and the override test; `run --check` of the staged store at ragged and
# unaligned sizes; `tessera bench` medians (no L2 flush), three rounds alternated, planning /
# layouts: the mma.sync matmul, matmul_fp8 (e4m3 m16n8k32) and matmul_struct at 4096^3 on
# cuda:sm_90.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session41f.log") 2>&1
gpu_build tessera tessera_gpu_tests
T=$B/bin/tessera
echo "=== GPU tests ($(( $(date +%s) - S0 )) s)"
timeout 300 "$B/bin/tessera_gpu_tests" --gtest_filter='*LayoutEmitter*:*OverrideDir*' 2>&1 |
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|fell back|no TMA|Which is|error:" | head -40
echo "=== checks ($(( $(date +%s) - S0 )) s)"
for k in matmul matmul_fp8 matmul_struct; do for dt in bf16 f16; do
  for s in M=1000,N=776,K=1504 M=300,N=520,K=200 M=129,N=131,K=64 M=256,N=512,K=192; do
    TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T run $k -b cuda:sm_90 --check --dtype $dt --size $s 2>&1 | tail -1
  done
done; done
echo "=== speed ($(( $(date +%s) - S0 )) s)"
for round in a b c; do
  for k in matmul matmul_fp8 matmul_struct; do
    a="$k -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096 --reps 30"
    p=$(timeout 60 $T bench $a 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
    l=$(TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T bench $a 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
    echo "$k 4096^3 cuda:sm_90 round $round: planning $p layouts $l"
  done
done
echo "[$(( $(date +%s) - S0 )) s] done"
