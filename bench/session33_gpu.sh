#!/usr/bin/env bash
# Session 33's GPU call (issue 18; ready, not run: no device in session 33), from the repo root:
#
#   source .devdeps/setup.sh && bash bench/session33_gpu.sh     (about 6 minutes)
#
# The segmented top-k after session 33's changes to its kernels (one packed reduction per digit
# pass where there were three, none after the keep pass's scatters), and two A/B switches of
# the CUDA code it prints: TESSERA_CUDA_ONE_BARRIER_SCANS=1 (a block scan of several chunks a
# thread in one tsr::block_exclusive_sums: one barrier, where each chunk took two) and
# TESSERA_CUDA_HIST_SKIP=1 (session 32: a warp with no lane to count leaves tsr::hist_add after
# one vote). First the exact checks with each switch (issue 18's shapes and ragged ones), then
# cuda_bench (L2 flushed) of topk in the four combinations, two rounds alternated, and
# torch.topk in the same call.
# Prediction: the default 3-8% under session 32's 0.0727 ms (f32 k = 64); each switch 2-5% more.
# Keep a switch as the default where it wins in both rounds (and drop the other).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
gpu_build tessera cuda_bench
T=$B/bin/tessera
echo "=== checks ($(( $(date +%s) - S0 )) s)"
echo "--- default"; topk_checks
echo "--- TESSERA_CUDA_ONE_BARRIER_SCANS=1"; TESSERA_CUDA_ONE_BARRIER_SCANS=1 topk_checks
TESSERA_CUDA_ONE_BARRIER_SCANS=1 timeout 60 $T run sort -b cuda --check --size M=5,N=3000 2>&1 | tail -1
echo "--- both switches"
TESSERA_CUDA_ONE_BARRIER_SCANS=1 TESSERA_CUDA_HIST_SKIP=1 timeout 60 $T run topk -b cuda --check --size M=64,N=131072,K=1024 2>&1 | tail -1
TESSERA_CUDA_ONE_BARRIER_SCANS=1 TESSERA_CUDA_HIST_SKIP=1 timeout 60 $T run topk -b cuda --check --dtype bf16 --size M=3,N=100001,K=1000 2>&1 | tail -1
for round in 1 2; do
  for sw in "" "TESSERA_CUDA_ONE_BARRIER_SCANS=1" "TESSERA_CUDA_HIST_SKIP=1" "TESSERA_CUDA_ONE_BARRIER_SCANS=1 TESSERA_CUDA_HIST_SKIP=1"; do
    echo "--- cuda_bench topk, round $round: ${sw:-default} ($(( $(date +%s) - S0 )) s)"
    env $sw timeout 100 "$B/bin/cuda_bench" --only topk 2>&1 | grep -E "^topk " | awk '{print $1, $2, $3, $4}'
  done
done
python3 bench/torch_topk.py f32:64x131072:64 f32:64x131072:256 f32:64x131072:1024 bf16:64x131072:64 f32:1x16777216:1024 2>&1 | tail -5
echo "[$(( $(date +%s) - S0 )) s] done"
