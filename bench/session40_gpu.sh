#!/usr/bin/env bash
# Session 40's GPU call (issue 16), from the repo root, one call (about 7 minutes on a cold machine):
#   source .devdeps/setup.sh && bash bench/session40_gpu.sh; python3 .devdeps/bench/anchors_h200.py
# 1. matmul_fp8 printed by the layout emitter (wgmma k32 e4m3, c208268): its GPU test (ragged K,
#    persistent CTAs, overlapped epilogue) and `run --check` in bf16 and f16;
# 2. matmul_fp8 bf16 4096^3 and 8192^3, planning and layout emitters alternated (`tessera bench`
#    medians, no L2 flush), three rounds;
# 3. every cuda_bench figure under both emitters (emitters_gpu.sh PART=2, ROUNDS=a; the anchors
#    follow in the same call);
# 4. session 39d's A/B: the mma.sync ring's refill at the iteration's top against after the first
#    k step, with the fragments loaded ahead (cuda:sm_90, planning beside).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session40.log") 2>&1
gpu_build tessera tessera_gpu_tests cuda_bench
T=$B/bin/tessera
echo "=== 1. matmul_fp8 under the layout emitter ($(( $(date +%s) - S0 )) s)"
timeout 150 "$B/bin/tessera_gpu_tests" --gtest_filter='LayoutEmitterGpu.MatmulFp8OnWgmma' 2>&1 | grep -E "OK|FAILED|Failure|error|PASSED" | head -20
for dt in bf16 f16; do
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T run matmul_fp8 -b cuda --check --dtype $dt --size M=1000,N=777,K=1500 2>&1 | tail -1
done
echo "=== 2. matmul_fp8 speed ($(( $(date +%s) - S0 )) s)"
for round in a b c; do
  for v in planning layouts; do
    for n in 4096 8192; do
      ms=$(env $([ $v = layouts ] && echo TESSERA_CUDA_FROM_LAYOUTS=1) timeout 60 $T bench matmul_fp8 -b cuda --dtype bf16 \
        --size M=$n,N=$n,K=$n --reps 30 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
      echo "matmul_fp8 bf16 ${n}^3 $v round $round: $ms"
    done
  done
done
echo "=== 3. cuda_bench, both emitters ($(( $(date +%s) - S0 )) s)"
ROUNDS=a PART=2 OUT=$R bash bench/emitters_gpu.sh 2>&1 | sed -n '/=== layout \/ planning/,$p'
echo "=== 4. mma.sync refill placement ($(( $(date +%s) - S0 )) s)"
OUT=$R bash bench/session39d_gpu.sh 2>&1 | grep -v built
echo "[$(( $(date +%s) - S0 )) s] done"
