#!/usr/bin/env bash
# Session 32's GPU call (issue 18), from the repo root after `source .devdeps/setup.sh`: the
# segmented top-k starting from the row threshold (three histogram kernels first; every segment
# keeps only the keys at or below the row's threshold): exact checks at the shapes and
# ragged ones, then cuda_bench's topk rows with TESSERA_TOPK_ROW_THRESHOLD=1 and =0 (two rounds),
# torch.topk beside them, and ncu's kernel durations at 64 x 131072 f32 k = 64 and 1024.
# As run at bdd638d, where the row threshold was the default: since a841f28 it is opt-in, so the
# plain `run --check`, min_blocks=0, TESSERA_CUDA_HIST_MATCH (removed) and ncu lines now time
# the plain plan; prefix them with TESSERA_TOPK_ROW_THRESHOLD=1 to repeat the call.
set -uo pipefail
source bench/gpu_common.sh
gpu_build tessera cuda_bench
T=$B/bin/tessera
R=${OUT:-/tmp}
topk_checks
TESSERA_TOPK_SEGMENT=256 timeout 60 $T run topk -b cuda --check --dtype bf16 --size M=5,N=3001,K=100 2>&1 | tail -1
echo "[$(( $(date +%s) - S0 )) s] checks"
for round in 1 2; do
  for rt in 1 0; do
    echo "--- row threshold $rt, round $round"
    TESSERA_TOPK_ROW_THRESHOLD=$rt timeout 150 "$B/bin/cuda_bench" --only topk 2>&1 | grep -E "^topk " | awk '{print $1, $2, $3, $4}'
  done
done
echo "--- row threshold 1, the segment kernel without min_blocks (ptxas: 72 B of stack at 2)"
timeout 150 "$B/bin/cuda_bench" --only topk --set min_blocks=0 2>&1 | grep -E "^topk " | awk '{print $1, $2, $3, $4}'
echo "--- row threshold 1, histograms adding each warp's lanes of a bin once (TESSERA_CUDA_HIST_MATCH=1)"
TESSERA_CUDA_HIST_MATCH=1 timeout 150 "$B/bin/cuda_bench" --only topk 2>&1 | grep -E "^topk " | awk '{print $1, $2, $3, $4}'
TESSERA_CUDA_HIST_MATCH=1 timeout 60 $T run topk -b cuda --check --size M=64,N=131072,K=64 2>&1 | tail -1
python3 bench/torch_topk.py 2>&1 | tail -8
echo "[$(( $(date +%s) - S0 )) s] timed"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for k in 64 1024; do
  echo "--- ncu f32 64x131072 k=$k"
  timeout 90 "$NCU" --clock-control none -k regex:topk --launch-skip 10 --launch-count 6 --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
    "$T" bench topk -b cuda --size M=64,N=131072,K=$k --reps 3 > "$R/ncu_k$k.txt" 2>&1
  grep -E "^  [a-z_]+.*\(|duration|registers|warps_active" "$R/ncu_k$k.txt" | head -40
done
echo "[$(( $(date +%s) - S0 )) s] done"
