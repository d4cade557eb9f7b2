#!/usr/bin/env bash
# Session 49 (issue 16): the GPU suite under the default (the layout emitter since session 48,
# never run on a GPU before this), then split-K through split-k-loops (the layout emitter's
# split compilation, TESSERA_CUDA_FROM_LAYOUTS=1) against the planning emitter's (the default's
# split compilation), in alternating rounds of `tessera bench` at shapes whose programs are too
# few to fill the GPU; at M = 16 and 1 the same A/B compares the swapped decode products
# (swap-dot-operands on the layout emitter against the planning emitter's swap). From the repo root on the GPU machine:
#   source .devdeps/setup.sh && bash bench/session49_gpu.sh
# Logs in $OUT: ctest_default.log, session49.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session49.log") 2>&1
gpu_build tessera tessera_gpu_tests
nvidia-smi --query-gpu=name --format=csv,noheader
echo "=== ctest -L gpu, the default ($(( $(date +%s) - S0 )) s)"
timeout ${CTEST_S:-300} ctest --test-dir "$B" -L gpu -j8 --output-on-failure --timeout 200 > "$R/ctest_default.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$R/ctest_default.log" | head -60
echo "=== failures, first lines"
grep -E -A6 ": Failure$" "$R/ctest_default.log" | head -120
echo "=== A/B: the default (planning split / swap) vs FROM_LAYOUTS=1 (split-k-loops, swap-dot-operands), median ms ($(( $(date +%s) - S0 )) s)"
for s in M=128,N=14336,K=4096 M=64,N=4096,K=4096 M=200,N=400,K=4096 M=128,N=1536,K=7168 M=16,N=4096,K=4096 M=1,N=4608,K=3584; do
  line="$s"
  for round in 1 2 3; do
    for env in 0 1; do
      e=""; [ $env = 1 ] && e="TESSERA_CUDA_FROM_LAYOUTS=1"
      ms=$(env $e timeout 60 "$B/bin/tessera" bench matmul --dtype bf16 -b cuda --size "$s" --reps 200 --warmup 20 2>&1 |
           grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)
      line="$line ${env}:${ms:-?}"
    done
  done
  echo "$line"
  timeout 60 env TESSERA_CUDA_FROM_LAYOUTS=1 "$B/bin/tessera" run matmul -b cuda --check --dtype bf16 --size "$s" 2>&1 | tail -1
done
echo "[$(( $(date +%s) - S0 )) s] done"
