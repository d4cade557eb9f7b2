#!/usr/bin/env bash
# A short GPU call (issue 18), from the repo root after `source .devdeps/setup.sh`: the CLI only,
# exact checks of the segmented top-k at its new f32 default (the segment kernel at min_blocks
# = 2) and a ragged one, then `tessera bench topk` at 64 x 131072 k = 64 beside torch.topk.
set -uo pipefail
source bench/gpu_common.sh
gpu_build tessera
T=$B/bin/tessera
for s in M=64,N=131072,K=64 M=64,N=131072,K=1024 M=1,N=16777216,K=1024 M=3,N=100001,K=1000; do
  timeout 40 $T run topk -b cuda --check --size $s 2>&1 | tail -1
done
timeout 40 $T run topk -b cuda --check --dtype bf16 --size M=64,N=131072,K=256 2>&1 | tail -1
echo "[$(( $(date +%s) - S0 )) s] checks"
timeout 40 $T bench topk -b cuda --size M=64,N=131072,K=64 --reps 50 2>&1 | tail -1
python3 bench/torch_topk.py f32:64x131072:64 2>&1 | tail -1
echo "[$(( $(date +%s) - S0 )) s] done"
