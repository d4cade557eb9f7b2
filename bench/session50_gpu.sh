#!/usr/bin/env bash
# Session 50 (issue 16): the default takes the layout emitter's split-K compilation
# (split-k-loops) and swapped decode product (swap-dot-operands), and specialize-warps gives a
# GEMM's K loop a producer warpgroup even where two programs fit. The GPU suite under that
# default (TESSERA_CUDA_FROM_LAYOUTS=1 here, so that it also runs before the switch), then an
# A/B in alternating rounds of `tessera bench`: the planning emitter (TESSERA_CUDA_FROM_LAYOUTS=0)
# against the layout emitter (=1), at the shapes session 49 measured (few
# programs: split-K; M = 16 and 1: the swapped products) and more decode shapes. From the repo
# root on the GPU machine:
#   source .devdeps/setup.sh && bash bench/session50_gpu.sh
# CTEST_R=regex runs only the GPU tests it matches.
# Logs in $OUT: ctest_default.log, session50.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session50.log") 2>&1
gpu_build tessera tessera_gpu_tests
nvidia-smi --query-gpu=name --format=csv,noheader
echo "=== ctest -L gpu, the default ($(( $(date +%s) - S0 )) s)"
TESSERA_CUDA_FROM_LAYOUTS=1 timeout ${CTEST_S:-300} ctest --test-dir "$B" -L gpu ${CTEST_R:+-R "$CTEST_R"} -j8 --output-on-failure --timeout 200 > "$R/ctest_default.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$R/ctest_default.log" | head -60
echo "=== failures, first lines"
grep -E -A6 ": Failure$" "$R/ctest_default.log" | head -120
echo "=== A/B: planning (0) vs layouts (1), median ms ($(( $(date +%s) - S0 )) s)"
for s in M=1,N=4608,K=3584 M=16,N=4096,K=4096 M=1,N=4096,K=4096 M=16,N=1536,K=7168 M=32,N=4096,K=4096 \
         M=128,N=14336,K=4096 M=64,N=4096,K=4096 M=200,N=400,K=4096 M=128,N=1536,K=7168; do
  line="$s"
  for round in 1 2 3; do
    for env in 0 1; do
      e="TESSERA_CUDA_FROM_LAYOUTS=$env"
      ms=$(env $e timeout 60 "$B/bin/tessera" bench matmul --dtype bf16 -b cuda --size "$s" --reps 200 --warmup 20 2>&1 |
           grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)
      line="$line ${env}:${ms:-?}"
    done
  done
  echo "$line"
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 "$B/bin/tessera" run matmul -b cuda --check --dtype bf16 --size "$s" 2>&1 | tail -1
done
echo "[$(( $(date +%s) - S0 )) s] done"
