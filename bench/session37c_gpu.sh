#!/usr/bin/env bash
# Session 37's last call (about 4 minutes on a cold machine), from the repo root:
#   source .devdeps/setup.sh && bash bench/session37c_gpu.sh
# 1. The layout emitter's GPU tests, with the new RingLoopEnteredAgainInsideALoop (a cp.async
#    ring inside another loop, an odd number of K tiles: the barrier after the ring, from review).
# 2. A/B on one machine: the row kernels (softmax / layernorm bf16 4096 x 32768, layernorm
#    16384 x 4096; `tessera bench`, 2 alternated rounds) under the planning emitter, the layout
#    emitter, and the layout emitter with TESSERA_CUDA_SCRATCH_EXCHANGES=1 (reductions through
#    the scratch as before e4558b7); then cuda_bench --only matmul under the layout emitter with
#    and without TESSERA_CUDA_SINGLE_FRAGMENTS=1 (no fragment double buffering): its mma_sync lines.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session37c.log") 2>&1
gpu_build tessera tessera_gpu_tests cuda_bench
timeout 150 ctest --test-dir "$B" -L gpu -R "LayoutEmitterGpu" -j8 --timeout 140 --output-on-failure > "$R/ctest37c.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Failure|SEGFAULT" "$R/ctest37c.log" | head -12
echo "[$(( $(date +%s) - S0 )) s] ctest"
for round in 1 2; do
  for spec in "softmax M=4096,N=32768" "layernorm M=4096,N=32768" "layernorm M=16384,N=4096"; do
    set -- $spec
    for mode in planning layouts scratch; do
      case $mode in
        planning) envs="" ;;
        layouts) envs="TESSERA_CUDA_FROM_LAYOUTS=1" ;;
        scratch) envs="TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_CUDA_SCRATCH_EXCHANGES=1" ;;
      esac
      ms=$(env $envs timeout 60 $B/bin/tessera bench $1 -b cuda --dtype bf16 --size $2 --config BLOCK_N=1024 --reps 200 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
      echo "round $round $1 $2 $mode $ms"
    done
  done
done
echo "[$(( $(date +%s) - S0 )) s] rows"
for mode in double single; do
  envs="TESSERA_CUDA_FROM_LAYOUTS=1"
  [ $mode = single ] && envs="$envs TESSERA_CUDA_SINGLE_FRAGMENTS=1"
  echo "=== cuda_bench --only matmul, layouts, fragments $mode"
  env $envs timeout 150 $B/bin/cuda_bench --only matmul 2>&1 | grep -E "mma_sync 128x256x64  |mma_sync 128x128x64  |mma_sync 128x256x64 num_warps=16  |^matmul" | head -8
done
echo "[$(( $(date +%s) - S0 )) s] done"
