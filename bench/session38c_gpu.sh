#!/usr/bin/env bash
# Session 38's third GPU call (about 3 minutes): topk bf16 on the layout emitter after
# assign-layouts gives a unit-dim reshape's two shapes one access width (the segment kernel's
# [1, 8192] row and its [8192] keys: 8-element runs, no exchange through shared memory; ptxas 90
# registers without a cap, 64 with min_blocks = 2). Session 38b (H100): layouts 0.093 ms against
# planning 0.079 at 64 x 131072, k = 64 (1.17x).
#   source .devdeps/setup.sh && bash bench/session38c_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session38c.log") 2>&1
gpu_build tessera
TESSERA_CUDA_FROM_LAYOUTS=1 topk_checks
echo "[$(( $(date +%s) - S0 )) s] checks"
for round in a b; do
  for dt in bf16 f32; do
    for em in planning layouts; do
      for mb in 0 2; do
        ms=$(env $([ $em = layouts ] && echo TESSERA_CUDA_FROM_LAYOUTS=1) timeout 60 "$B/bin/tessera" bench topk -b cuda \
          --dtype $dt --size M=64,N=131072,K=64 --reps 200 --config min_blocks=$mb 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
        echo "topk $dt 64x131072 k=64 $em min_blocks=$mb round $round: $ms"
      done
    done
  done
done
echo "[$(( $(date +%s) - S0 )) s] done"
