#!/usr/bin/env bash
# Session 31's second GPU call (issue 18), from the repo root after `source .devdeps/setup.sh`:
# NVRTC's cold compile of every library kernel on this host's CPU (`tessera compile --time`,
# and the segmented top-k's kernels at 64 x 131072), then the segmented top-k with its segment
# kernel's min_blocks = 2 (two 16-warp CTAs per SM: ptxas held to 64 registers), 32 warps (8
# elements a thread, 50 registers) and segments of 2048 at 4 warps with min_blocks = 4 beside
# the default, Nsight Compute's occupancy for min_blocks 0 and 2, and torch.topk, in one call.
# Full logs under $OUT.
set -uo pipefail
source bench/gpu_common.sh
gpu_build tessera cuda_bench
T=$B/bin/tessera
for t in sm_90a sm_80; do
  for k in vector_add softmax layernorm rmsnorm matmul matmul_fp8 matmul_struct topk sort; do
    for r in 1 2; do $T compile $k -t cuda:$t -e ptx --time 2>&1 >/dev/null | grep "^time"; done
  done
done > ${OUT:-/tmp}/nvrtc_times.txt
awk '{print $2, $3, $7}' ${OUT:-/tmp}/nvrtc_times.txt | sort -k1,2 -k3n | awk '!seen[$1" "$2]++'
echo "[$(( $(date +%s) - S0 )) s] nvrtc"
for r in 1 2; do
  timeout 150 "$B/bin/cuda_bench" --only topk --quick 2>&1 | grep -E "^topk " | awk '{print "[default]", $1, $2, $3, $4}'
  timeout 150 "$B/bin/cuda_bench" --only topk --quick --set min_blocks=2 2>&1 | grep -E "^topk |rror" | awk '{print "[min_blocks=2]", $1, $2, $3, $4, $5}'
done
timeout 150 "$B/bin/cuda_bench" --only topk --quick --set num_warps=32 2>&1 | grep -E "^topk |rror" | awk '{print "[num_warps=32]", $1, $2, $3, $4, $5}'
TESSERA_TOPK_SEGMENT=2048 timeout 150 "$B/bin/cuda_bench" --only topk --quick --set num_warps=4 --set min_blocks=4 2>&1 | grep -E "^topk |rror" | awk '{print "[SEG=2048 num_warps=4 min_blocks=4]", $1, $2, $3, $4, $5}'
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for mb in 0 2; do
  echo "=== ncu topk f32 64x131072 k=64 min_blocks=$mb"
  timeout 90 "$NCU" --clock-control none --launch-skip 0 --launch-count 2 --section SpeedOfLight --section WarpStateStats \
    --section LaunchStats --section Occupancy "$T" bench topk -b cuda --size M=64,N=131072,K=64 --config min_blocks=$mb \
    --reps 1 --warmup 1 > ${OUT:-/tmp}/ncu_mb$mb.txt 2>&1
  grep -E "^  [a-z_]+.*\(|Duration|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Block Limit (Reg|Shared)|Shared Memory Configuration|Grid Size" ${OUT:-/tmp}/ncu_mb$mb.txt | head -20
done
python3 bench/torch_topk.py f32:64x131072:64 f32:64x131072:256 f32:64x131072:1024 bf16:64x131072:64 bf16:64x131072:256 bf16:64x131072:1024 2>&1 | tail -6
echo "[$(( $(date +%s) - S0 )) s] done"
