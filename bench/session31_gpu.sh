#!/usr/bin/env bash
# Session 31's first GPU call, from the repo root after `source .devdeps/setup.sh`: build
# everything (Release), every GPU test (`ctest -L gpu`: main's ring counters had not run on the
# GPU in their final form), then where the segmented top-k's time goes (issue 18): each stage's
# kernel time at 64 x 131072 (k = 64, 1024) and Nsight Compute's warp states for its segment
# kernel, the topk rows of cuda_bench and torch.topk in the same call.
set -uo pipefail
source bench/gpu_common.sh
gpu_build all
timeout 200 ctest --test-dir "$B" -L gpu -j8 --timeout 150 2>&1 | grep -E "tests passed|tests failed|Failed|\*\*\*|Timeout" | head -30
echo "[$(( $(date +%s) - S0 )) s] ctest -L gpu"
T=$B/bin/tessera
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
for dk in "f32 64" "f32 1024" "bf16 64"; do
  set -- $dk
  echo "=== topk $1 64x131072 k=$2"
  [ -n "$NCU" ] && timeout 90 "$NCU" --clock-control none -k regex:"topk|tessera" --launch-skip 0 --launch-count 6 \
    --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
    "$T" bench topk --dtype $1 -b cuda --size M=64,N=131072,K=$2 --reps 1 --warmup 1 2>&1 |
    grep -E "^  [a-z_]+.*\(|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Stall|Warp Cycles Per Issued|Block Limit|Shared Memory Per Block|Memory Throughput|Compute \(SM\)" | head -60
done
echo "[$(( $(date +%s) - S0 )) s] ncu"
timeout 150 "$B/bin/cuda_bench" --only topk 2>&1 | grep -E "^kernel|^topk"
python3 bench/torch_topk.py 2>&1 | tail -8
echo "[$(( $(date +%s) - S0 )) s] cuda_bench, torch"
# Segment lengths and CTA sizes of the first level (f32 and bf16, --quick: 64 x 131072 k = 64 ...).
for v in "SEG=16384" "SEG=4096 num_warps=8" "SEG=2048 num_warps=4" "SEG=8192 num_warps=8"; do
  sets="" seg=""
  for a in $v; do case $a in SEG=*) seg=${a#SEG=} ;; *) sets="$sets --set $a" ;; esac; done
  TESSERA_TOPK_SEGMENT=$seg timeout 60 "$B/bin/cuda_bench" --only topk --quick $sets 2>&1 | grep -E "^topk " | sed "s|^|[$v] |"
done
echo "[$(( $(date +%s) - S0 )) s] done"
