#!/usr/bin/env bash
# Session 31's third GPU call (issue 18), from the repo root after `source .devdeps/setup.sh`:
# the segmented top-k with the f32 segment kernel at min_blocks = 2 (its new default): exact
# checks against the reference at the shapes and ragged ones, then cuda_bench's topk
# rows (all four shapes, f32 and bf16) beside torch.topk in the same call.
set -uo pipefail
source bench/gpu_common.sh
gpu_build tessera cuda_bench
T=$B/bin/tessera
for dt in f32 bf16; do
  for s in M=64,N=131072,K=64 M=64,N=131072,K=1024 M=1,N=16777216,K=1024; do
    timeout 60 $T run topk -b cuda --check --dtype $dt --size $s 2>&1 | tail -1
  done
done
timeout 60 $T run topk -b cuda --check --size M=3,N=100001,K=1000 2>&1 | tail -1
TESSERA_TOPK_SEGMENT=256 timeout 60 $T run topk -b cuda --check --size M=3,N=2000,K=300 2>&1 | tail -1
TESSERA_TOPK_SEGMENT=2048 timeout 60 $T run topk -b cuda --check --size M=2,N=1000000,K=200 2>&1 | tail -1
echo "[$(( $(date +%s) - S0 )) s] checks"
timeout 150 "$B/bin/cuda_bench" --only topk 2>&1 | grep -E "^topk " | awk '{print $1, $2, $3, $4}'
python3 bench/torch_topk.py 2>&1 | tail -8
echo "[$(( $(date +%s) - S0 )) s] done"
