#!/usr/bin/env bash
# Session 44's shortest call (issue 18; about 3 minutes with the build): the bucket threshold's
# exact checks and `tessera bench` medians against the plain segmented top-k at 64 x 131072,
# k = 64 (f32, bf16; alternated, twice), then torch.topk at the same shapes in the same call.
# bench/session44b_gpu.sh is the fuller one.
#   source .devdeps/setup.sh && bash bench/session44c_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session44c.log") 2>&1
gpu_build tessera
T=$B/bin/tessera
nvidia-smi --query-gpu=name --format=csv,noheader
ms() { timeout 60 $T bench topk -b cuda --dtype $1 --size $2 --reps 100 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2; }
s=M=64,N=131072,K=64
for dt in f32 bf16; do TESSERA_TOPK_BUCKET_THRESHOLD=1 timeout 60 $T run topk -b cuda --check --dtype $dt --size $s 2>&1 | tail -1; done
for dt in f32 bf16; do
  echo "topk $dt $s: plain $(ms $dt $s) bucket $(TESSERA_TOPK_BUCKET_THRESHOLD=1 ms $dt $s) plain $(ms $dt $s) bucket $(TESSERA_TOPK_BUCKET_THRESHOLD=1 ms $dt $s)"
done
echo "[$(( $(date +%s) - S0 )) s] timed"
python3 bench/torch_topk.py f32:64x131072:64 bf16:64x131072:64
TESSERA_TOPK_BUCKET_THRESHOLD=1 timeout 60 $T run topk -b cuda --check --size M=1,N=16777216,K=1024 2>&1 | tail -1
echo "topk f32 M=1,N=16777216,K=1024: plain $(ms f32 M=1,N=16777216,K=1024) bucket $(TESSERA_TOPK_BUCKET_THRESHOLD=1 ms f32 M=1,N=16777216,K=1024)"
echo "[$(( $(date +%s) - S0 )) s] done"
