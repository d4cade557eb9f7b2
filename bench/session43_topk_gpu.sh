#!/usr/bin/env bash
# For the next session with a GPU (issue 16), from the repo root (about 3 minutes):
#   source .devdeps/setup.sh && bash bench/session43_topk_gpu.sh
# Session 42's assign-layouts change (1-D tiles a block scan reads take 32-byte runs: the
# segmented top-k's [8192] scans in 2 block-wide steps instead of 4; ptxas: the layout
# emitter's segment kernel spills 12 bytes instead of 32) was not run on a GPU. This checks the
# layout emitter's topk (issue 18's shapes and ragged ones, segments of 256 and 2048) and times
# it beside the planning emitter's, f32 and bf16, three rounds alternated (session 41: 1.04).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session43_topk.log") 2>&1
gpu_build tessera tessera_gpu_tests
T=$B/bin/tessera
timeout 300 "$B/bin/tessera_gpu_tests" --gtest_filter='*Topk*' 2>&1 | grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure" | head -20
TESSERA_CUDA_FROM_LAYOUTS=1 topk_checks
for round in a b c; do
  for dt in f32 bf16; do
    for em in 0 1; do
      ms=$(TESSERA_CUDA_FROM_LAYOUTS=$em timeout 60 $T bench topk -b cuda --dtype $dt --size M=64,N=131072,K=64 --reps 100 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
      echo "topk $dt 64x131072 k=64 layouts=$em round $round: $ms"
    done
  done
done
echo "[$(( $(date +%s) - S0 )) s] done"
