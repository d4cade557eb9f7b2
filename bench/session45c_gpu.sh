#!/usr/bin/env bash
# Session 45 (issue 18), third call: the new cuda default for topk (the bucket threshold, segments
# of 4096, max(2 K, 1024) bests, the bests' kernel on tiles of 2048), from the repo root:
#   source .devdeps/setup.sh && bash bench/session45c_gpu.sh
# Exact checks at the issue's and ragged shapes, cuda_bench --only topk (do_bench timing) for the
# default (planning emitter) and the plain segments (TESSERA_TOPK_BUCKET_THRESHOLD=0), torch.topk.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session45c.log") 2>&1
gpu_build tessera cuda_bench
T=$B/bin/tessera
nvidia-smi --query-gpu=name --format=csv,noheader
topk_checks
row() { grep "^topk " | awk '{printf "%s %s %s | ", $2, $3, $4} END {print ""}'; }
echo "== default";  timeout 150 $B/bin/cuda_bench --only topk --rounds 1 2>&1 | row
echo "== plain";    TESSERA_TOPK_BUCKET_THRESHOLD=0 timeout 150 $B/bin/cuda_bench --only topk --rounds 1 2>&1 | row
echo "[$(( $(date +%s) - S0 )) s] cuda_bench"
python3 bench/torch_topk.py
echo "[$(( $(date +%s) - S0 )) s] torch"
echo "[$(( $(date +%s) - S0 )) s] done"
