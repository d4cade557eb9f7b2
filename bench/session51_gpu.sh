#!/usr/bin/env bash
# Session 51 (issue 16): the GPU suite under the default as the branch default-switch makes it
# (the layout emitter's split-K compilation and swapped decode product; no environment
# override), then the planning (TESSERA_CUDA_FROM_LAYOUTS=0) / layout (=1) emitter A/B in
# alternating rounds of `tessera bench` at the few-program and decode shapes, each followed by a
# `run --check` of the default. From the repo root on the GPU machine:
#   source .devdeps/setup.sh && bash bench/session51_gpu.sh
# CTEST_R=regex runs only the GPU tests it matches; SHAPES="M=..,N=..,K=.. ..." the A/B's shapes.
# Logs in $OUT: ctest_default.log, session51.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session51.log") 2>&1
gpu_build tessera tessera_gpu_tests
nvidia-smi --query-gpu=name --format=csv,noheader
echo "=== ctest -L gpu, the default ($(( $(date +%s) - S0 )) s)"
timeout ${CTEST_S:-300} ctest --test-dir "$B" -L gpu ${CTEST_R:+-R "$CTEST_R"} -j8 --output-on-failure --timeout 200 > "$R/ctest_default.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$R/ctest_default.log" | head -60
grep -E -A6 ": Failure$" "$R/ctest_default.log" | head -80
echo "=== A/B: planning (0) vs layouts (1), median ms ($(( $(date +%s) - S0 )) s)"
for s in ${SHAPES:-M=1,N=4608,K=3584 M=16,N=4096,K=4096 M=32,N=4096,K=4096 M=200,N=400,K=4096 M=128,N=1536,K=7168 M=48,N=1536,K=7168}; do
  [ $(( $(date +%s) - S0 )) -gt ${AB_S:-560} ] && { echo "(out of time)"; break; }
  line="$s"
  for round in 1 2 3; do
    for env in 0 1; do
      ms=$(TESSERA_CUDA_FROM_LAYOUTS=$env timeout 30 "$B/bin/tessera" bench matmul --dtype bf16 -b cuda --size "$s" --reps 200 --warmup 20 2>&1 |
           grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)
      line="$line ${env}:${ms:-?}"
    done
  done
  echo "$line"
  timeout 60 "$B/bin/tessera" run matmul -b cuda --check --dtype bf16 --size "$s" 2>&1 | tail -1
done
echo "[$(( $(date +%s) - S0 )) s] done"
