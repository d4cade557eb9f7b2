#!/usr/bin/env bash
# Session 31's third GPU call (issue 18), from the repo root after `source .devdeps/setup.sh`:
# the segmented top-k with the f32 segment kernel at min_blocks = 2 (its new default): exact
# checks against the reference at the shapes and ragged ones, then cuda_bench's topk
# rows (all four shapes, f32 and bf16) beside torch.topk in the same call.
set -uo pipefail
source bench/gpu_common.sh
gpu_build tessera cuda_bench
topk_checks
echo "[$(( $(date +%s) - S0 )) s] checks"
timeout 150 "$B/bin/cuda_bench" --only topk 2>&1 | grep -E "^topk " | awk '{print $1, $2, $3, $4}'
python3 bench/torch_topk.py 2>&1 | tail -8
echo "[$(( $(date +%s) - S0 )) s] done"
