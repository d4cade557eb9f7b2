#!/usr/bin/env bash
# Session 29's second GPU call (issue 20), from the repo root after `source .devdeps/setup.sh`:
# the wgmma GPU tests after the ring's 32-bit stage and phase, then deep rings (64 x 64 x 64, as
# cuBLAS's 13-stage nvjet kernel at M = 128) and one-wave tiles at 1024x1536x7168, `tessera bench`
# medians (no L2 flush) in alternated rounds, cuBLAS beside them (bench/cublas_kernels.py).
set -uo pipefail
source bench/gpu_common.sh
gpu_build tessera tessera_gpu_tests
timeout 300 "$B/bin/tessera_gpu_tests" --gtest_filter="${FILTER:-WgmmaGpu.*:LibraryGpu.*Matmul*:ClusterGpu.*}" 2>&1 | grep -E "^\[  (FAILED|PASSED) |Failure|error|tests ran" | head -30
echo "[$(( $(date +%s) - S0 )) s] tests"
run_set() {  # shape, configs...
  local s=$1; shift
  for r in 1 2; do
    for c in "$@"; do echo "$s r$r $c: $(matmul_ms "$s" "$c" 200 20)"; done
  done
}
D="split_k=0,stream_k=0"
run_set M=128,N=3584,K=3584 "BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,$D,ring_stages=4" "BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,$D,ring_stages=8" \
  "BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,$D,ring_stages=12" "BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,$D,ring_stages=16" \
  "BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,$D,ring_stages=16,cluster_m=2" "BLOCK_M=64,BLOCK_N=128,BLOCK_K=64,split_k=2,stream_k=0"
echo "[$(( $(date +%s) - S0 )) s]"
run_set M=128,N=4096,K=4096 "BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,$D,ring_stages=8" "BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,$D,ring_stages=16" \
  "BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,$D,ring_stages=16,cluster_m=2" "BLOCK_M=64,BLOCK_N=128,BLOCK_K=64,split_k=2,stream_k=0"
echo "[$(( $(date +%s) - S0 )) s]"
run_set M=1024,N=1536,K=7168 "BLOCK_M=128,BLOCK_N=192,BLOCK_K=64,split_k=0,stream_k=1" "BLOCK_M=128,BLOCK_N=192,BLOCK_K=64,split_k=2,stream_k=0" \
  "BLOCK_M=64,BLOCK_N=192,BLOCK_K=64,$D,ring_stages=8" "BLOCK_M=64,BLOCK_N=192,BLOCK_K=64,$D,ring_stages=10" \
  "BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,split_k=0,stream_k=1" "BLOCK_M=128,BLOCK_N=192,BLOCK_K=64,split_k=0,stream_k=1,ring_stages=6"
echo "[$(( $(date +%s) - S0 )) s]"
timeout 100 python3 bench/cublas_kernels.py 128x3584x3584 128x4096x4096 1024x1536x7168
echo "[$(( $(date +%s) - S0 )) s] done"
