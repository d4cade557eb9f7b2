#!/usr/bin/env bash
# Session 44 (issue 18), from the repo root (about 4 minutes; in order of priority, so that a
# call cut short still says the most):
#   source .devdeps/setup.sh && bash bench/session44b_gpu.sh
# The bucket threshold (TESSERA_TOPK_BUCKET_THRESHOLD=1: each bucket's best, T = the K-th
# largest best per row, segments keep only the keys at or below T's) against the plain
# segmented top-k: exact checks, `tessera bench` medians (planning emitter, f32 / bf16, k = 64 /
# 1024, 1 x 2^24), torch.topk in the same call; then the layout emitter, longer segments, and
# each kernel's duration under Nsight Compute.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session44b.log") 2>&1
gpu_build tessera
T=$B/bin/tessera
nvidia-smi --query-gpu=name --format=csv,noheader
ms() { timeout 60 $T bench topk -b cuda --dtype $1 --size $2 --reps 100 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2; }
for dt in f32 bf16; do for s in M=64,N=131072,K=64 M=1,N=16777216,K=1024; do
  TESSERA_TOPK_BUCKET_THRESHOLD=1 timeout 60 $T run topk -b cuda --check --dtype $dt --size $s 2>&1 | tail -1
done; done
for s in M=64,N=131072,K=64 M=64,N=131072,K=1024 M=1,N=16777216,K=1024; do for dt in f32 bf16; do
  echo "topk $dt $s: plain $(ms $dt $s) bucket $(TESSERA_TOPK_BUCKET_THRESHOLD=1 ms $dt $s) plain $(ms $dt $s) bucket $(TESSERA_TOPK_BUCKET_THRESHOLD=1 ms $dt $s)"
done; done
echo "[$(( $(date +%s) - S0 )) s] timed"
python3 bench/torch_topk.py f32:64x131072:64 bf16:64x131072:64 f32:64x131072:1024 f32:1x16777216:1024
echo "[$(( $(date +%s) - S0 )) s] torch"
TESSERA_TOPK_BUCKET_THRESHOLD=1 timeout 60 $T run topk -b cuda --check --size M=3,N=100001,K=1000 2>&1 | tail -1
for dt in f32 bf16; do
  echo "topk $dt 64x131072 k=64 bucket: layouts $(TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_TOPK_BUCKET_THRESHOLD=1 ms $dt M=64,N=131072,K=64)" \
    "segment 16384 $(TESSERA_TOPK_SEGMENT=16384 TESSERA_TOPK_BUCKET_THRESHOLD=1 ms $dt M=64,N=131072,K=64)" \
    "segment 32768 $(TESSERA_TOPK_SEGMENT=32768 TESSERA_TOPK_BUCKET_THRESHOLD=1 ms $dt M=64,N=131072,K=64)"
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for dt in f32 bf16; do
  echo "== ncu bucket $dt"
  TESSERA_TOPK_BUCKET_THRESHOLD=1 timeout 90 $NCU --metrics gpu__time_duration.sum -c 8 $T bench topk -b cuda --dtype $dt \
    --size M=64,N=131072,K=64 --reps 2 --warmup 0 2>&1 | grep -E "tessera_topk|gpu__time_duration" | head -16
done
echo "[$(( $(date +%s) - S0 )) s] done"
