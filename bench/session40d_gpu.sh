#!/usr/bin/env bash
# Session 40's fourth GPU call (issue 16), from the repo root (about 2-3 minutes):
#   source .devdeps/setup.sh && bash bench/session40d_gpu.sh
# The layout emitter's TMA path at sizes TMA can describe (found by review: the earlier checks
# of matmul_fp8 on wgmma and of the overlapped epilogue ran the compilation without TMA): the
# two GPU tests that now expect no fallback (with every layout-emitter GPU test: the mma.sync
# refill now before the first k step's mma instructions), `run --check` of matmul_fp8 (bf16, f16) at
# 1000 x 776 x 1504; then topk f32 beside the planning emitter after the scalar reductions'
# tree folds (two rounds).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session40d.log") 2>&1
gpu_build tessera tessera_gpu_tests
T=$B/bin/tessera
timeout 240 "$B/bin/tessera_gpu_tests" --gtest_filter='*LayoutEmitter*' 2>&1 |
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|^\[       OK|Failure|fell back|Which is|error:" | grep -v "^\[       OK" | head -40
for dt in bf16 f16; do
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T run matmul_fp8 -b cuda --check --dtype $dt --size M=1000,N=776,K=1504 2>&1 | tail -2
done
for round in a b; do
  for v in planning layouts; do
    ms=$(env $([ $v = layouts ] && echo TESSERA_CUDA_FROM_LAYOUTS=1) timeout 60 $T bench topk -b cuda --dtype f32 \
      --size M=64,N=131072,K=64 --reps 30 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
    echo "topk f32 64x131072 k=64 $v round $round: $ms"
  done
done
echo "[$(( $(date +%s) - S0 )) s] done"
