#!/usr/bin/env bash
# Session 29's first GPU call (issue 20), from the repo root after `source .devdeps/setup.sh`:
# build, the swapped-operand GPU tests (now with 256-wide N tiles), cuBLAS's kernels at the shapes
# still under it, and swapped N tiles of 256 against 128 and 192 at wide decode shapes.
set -uo pipefail
source bench/gpu_common.sh
gpu_build tessera tessera_gpu_tests
timeout 200 "$B/bin/tessera_gpu_tests" --gtest_filter="${FILTER:-WgmmaGpu.Swapped*}" 2>&1 | grep -E "^\[  (FAILED|PASSED|  OK) |Failure|error" | head -30
echo "[$(( $(date +%s) - S0 )) s] tests"
timeout 120 python3 bench/cublas_kernels.py ${CUBLAS_SHAPES:-1024x1536x7168 128x3584x3584 128x4096x4096 1024x6144x4096 4096x6144x4096 16x28672x4096 16x18944x3584}
echo "[$(( $(date +%s) - S0 )) s] cublas"
KN="swap_operands=1,split_k=0"
for s in ${SW_SHAPES:-M=16,N=28672,K=4096 M=1,N=18944,K=3584 M=16,N=6144,K=4096}; do
  for r in 1 2 3; do
    line="$s r$r:"
    for bn in 128 192 256; do
      ms=$(matmul_ms "$s" "BLOCK_M=16,BLOCK_N=$bn,BLOCK_K=128,$KN" 200 20)
      line="$line 16x${bn}x128 ${ms:-fail}"
    done
    echo "$line"
  done
done
echo "[$(( $(date +%s) - S0 )) s] done"
