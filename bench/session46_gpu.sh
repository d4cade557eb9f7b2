#!/usr/bin/env bash
# Session 46 (issue 18): the bucket bests from samples (TESSERA_TOPK_BUCKET_SAMPLE=S: each
# bucket's best of its first S columns, a gather; not the default), from the repo root:
#   source .devdeps/setup.sh && bash bench/session46_gpu.sh
# Exact checks with samples of 32 and 2048, then cuda_bench --only topk (do_bench timing) for
# whole buckets (today's default) and samples of 32, 64, 256 and 2048 columns, and torch.topk.
# Prediction (H100): the bests' kernel reads a quarter or less of the row: 64 x 131072 k = 64
# f32 0.061 -> ~0.052 ms, 1 x 2^24 k = 1024 0.149 -> ~0.125 (buckets of 8192, S 2048).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session46.log") 2>&1
gpu_build tessera cuda_bench
nvidia-smi --query-gpu=name --format=csv,noheader
for smp in 32 2048; do echo "== checks, samples of $smp"; TESSERA_TOPK_BUCKET_SAMPLE=$smp topk_checks; done
row() { grep "^topk " | awk '{printf "%s %s %s | ", $2, $3, $4} END {print ""}'; }
for smp in 0 32 64 256 2048; do
  echo "== samples of $smp"
  TESSERA_TOPK_BUCKET_SAMPLE=$smp timeout 150 $B/bin/cuda_bench --only topk --rounds 1 2>&1 | row
done
echo "[$(( $(date +%s) - S0 )) s] cuda_bench"
python3 bench/torch_topk.py
echo "[$(( $(date +%s) - S0 )) s] done"
