#!/usr/bin/env bash
# Session 29's first GPU call (issue 20), from the repo root after `source .devdeps/setup.sh`:
# build, the swapped-operand GPU tests (now with 256-wide N tiles), cuBLAS's kernels at the shapes
# still under it, and swapped N tiles of 256 against 128 and 192 at wide decode shapes.
set -uo pipefail
B=${BUILD:-build-gpu}
S0=$(date +%s)
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/s29_cmake.log 2>&1 || { tail -20 /tmp/s29_cmake.log; exit 1; }
timeout 400 cmake --build "$B" -j16 --target tessera tessera_gpu_tests 2>&1 | tail -1
echo "[$(( $(date +%s) - S0 )) s] built"
timeout 200 "$B/bin/tessera_gpu_tests" --gtest_filter="${FILTER:-WgmmaGpu.Swapped*}" 2>&1 | grep -E "^\[  (FAILED|PASSED|  OK) |Failure|error" | head -30
echo "[$(( $(date +%s) - S0 )) s] tests"
timeout 120 python3 bench/cublas_kernels.py ${CUBLAS_SHAPES:-1024x1536x7168 128x3584x3584 128x4096x4096 1024x6144x4096 4096x6144x4096 16x28672x4096 16x18944x3584}
echo "[$(( $(date +%s) - S0 )) s] cublas"
T="$B/bin/tessera"
KN="swap_operands=1,split_k=0"
for s in ${SW_SHAPES:-M=16,N=28672,K=4096 M=1,N=18944,K=3584 M=16,N=6144,K=4096}; do
  for r in 1 2 3; do
    line="$s r$r:"
    for bn in 128 192 256; do
      ms=$("$T" bench matmul --dtype bf16 -b cuda --size "$s" --reps 200 --warmup 20 \
        --config "BLOCK_M=16,BLOCK_N=$bn,BLOCK_K=128,$KN" 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)
      line="$line 16x${bn}x128 ${ms:-fail}"
    done
    echo "$line"
  done
done
echo "[$(( $(date +%s) - S0 )) s] done"
