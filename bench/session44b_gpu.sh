#!/usr/bin/env bash
# Session 44 (issue 18), from the repo root (about 3 minutes):
#   source .devdeps/setup.sh && bash bench/session44b_gpu.sh
# The bucket threshold (TESSERA_TOPK_BUCKET_THRESHOLD=1: each bucket's best, T = the K-th
# largest best per row, segments keep only the keys at or below T's) against the plain
# segmented top-k: exact checks at issue 18's shapes and ragged ones, `tessera bench` medians
# (both emitters, f32 / bf16, k = 64 / 256 / 1024 and 1 x 2^24), each kernel's duration under
# Nsight Compute, and torch.topk in the same call.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session44b.log") 2>&1
gpu_build tessera
T=$B/bin/tessera
nvidia-smi --query-gpu=name --format=csv,noheader
echo "== checks, bucket threshold"
TESSERA_TOPK_BUCKET_THRESHOLD=1 topk_checks
echo "[$(( $(date +%s) - S0 )) s] checked"
for round in a; do
  for s in M=64,N=131072,K=64 M=64,N=131072,K=256 M=64,N=131072,K=1024 M=1,N=16777216,K=1024; do
    for dt in f32 bf16; do
      line="topk $dt $s round $round:"
      for v in 0/0 0/1 1/1; do em=${v%/*}; bt=${v#*/}; for once in 1; do
        ms=$(TESSERA_TOPK_BUCKET_THRESHOLD=$bt TESSERA_CUDA_FROM_LAYOUTS=$em timeout 60 $T bench topk -b cuda --dtype $dt --size $s --reps 100 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)
        line="$line layouts=$em/bucket=$bt $ms"
      done; done
      echo "$line"
    done
  done
done
# Longer segments from the bucket threshold (fewer slots for the merge: 512 or 256 a row).
for dt in f32 bf16; do for seg in 16384 32768; do
  ms=$(TESSERA_TOPK_SEGMENT=$seg TESSERA_TOPK_BUCKET_THRESHOLD=1 timeout 60 $T bench topk -b cuda --dtype $dt --size M=64,N=131072,K=64 --reps 100 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)
  echo "topk $dt 64x131072 k=64 bucket=1 segment=$seg: $ms"
done; done
echo "[$(( $(date +%s) - S0 )) s] timed"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for em in 0; do for dt in f32 bf16; do
  echo "== ncu bucket=1 layouts=$em $dt"
  TESSERA_TOPK_BUCKET_THRESHOLD=1 TESSERA_CUDA_FROM_LAYOUTS=$em timeout 120 $NCU --metrics gpu__time_duration.sum -c 8 $T bench topk -b cuda --dtype $dt \
    --size M=64,N=131072,K=64 --reps 2 --warmup 0 2>&1 | grep -E "tessera_topk|gpu__time_duration" | head -16
done; done
python3 bench/torch_topk.py
echo "[$(( $(date +%s) - S0 )) s] done"
