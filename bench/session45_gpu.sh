#!/usr/bin/env bash
# Session 45 (issue 18), from the repo root, on the H200 (about 8 minutes; in order of priority):
#   source .devdeps/setup.sh && bash bench/session45_gpu.sh
# cuda_bench --only topk (do_bench timing: L2 flushed, events around the launches) for today's
# default and for the bucket threshold (layout emitter, segments of 4096), torch.topk at the same
# shapes, exact checks, then Nsight Compute's full sections for the bucket plan's kernels
# ($OUT/ncu_*.txt) and the GPU tests of the stages.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session45.log") 2>&1
gpu_build tessera cuda_bench
T=$B/bin/tessera
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for dt in f32 bf16; do for s in M=64,N=131072,K=64 M=1,N=16777216,K=1024 M=3,N=100001,K=1000; do
  TESSERA_TOPK_BUCKET_THRESHOLD=1 TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_TOPK_SEGMENT=4096 timeout 60 $T run topk -b cuda --check --dtype $dt --size $s 2>&1 | tail -1
done; done
ms() { timeout 60 $T bench topk -b cuda --dtype $1 --size $2 --reps 100 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2; }
# `ms` under extra environment variables (a function cannot be run by `env`).
v() { local e="$1"; shift; env $e bash -c "$(declare -f ms); T=$T; ms $*"; }
B1="TESSERA_TOPK_BUCKET_THRESHOLD=1"
for dt in f32 bf16; do for s in M=64,N=131072,K=64 M=64,N=131072,K=1024 M=1,N=16777216,K=1024; do
  echo "topk $dt $s: plain $(ms $dt $s) | bucket planning 4096 $(v "$B1 TESSERA_TOPK_SEGMENT=4096" $dt $s)" \
    "8192 $(v "$B1" $dt $s) | layouts 4096 $(v "$B1 TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_TOPK_SEGMENT=4096" $dt $s)" \
    "8192 $(v "$B1 TESSERA_CUDA_FROM_LAYOUTS=1" $dt $s) | plain $(ms $dt $s)"
done; done
echo "[$(( $(date +%s) - S0 )) s] tessera bench"
echo "== cuda_bench default"
timeout 150 $B/bin/cuda_bench --only topk --rounds 1 2>&1 | grep -v "^cuda_bench: device"
echo "[$(( $(date +%s) - S0 )) s]"
echo "== cuda_bench bucket, layouts, segments 4096"
TESSERA_TOPK_BUCKET_THRESHOLD=1 TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_TOPK_SEGMENT=4096 timeout 150 $B/bin/cuda_bench --only topk --rounds 1 2>&1 | grep -v "^cuda_bench: device"
echo "[$(( $(date +%s) - S0 )) s]"
python3 bench/torch_topk.py
echo "[$(( $(date +%s) - S0 )) s] torch"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for v in "plain:" "bucket:TESSERA_TOPK_BUCKET_THRESHOLD=1 TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_TOPK_SEGMENT=4096"; do
  name=${v%%:*}
  env ${v#*:} timeout 120 $NCU --clock-control none --set full -c 5 $T bench topk -b cuda --dtype f32 \
    --size M=64,N=131072,K=64 --reps 1 --warmup 0 > "$R/ncu_$name.txt" 2>&1
  grep -E "^  tessera_|Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy|Block Limit" "$R/ncu_$name.txt" | head -60
done
echo "[$(( $(date +%s) - S0 )) s] ncu"
timeout 200 cmake --build "$B" -j16 --target tessera_gpu_tests > /tmp/gt.log 2>&1 || tail -20 /tmp/gt.log
timeout 120 $B/bin/tessera_gpu_tests --gtest_filter='TopkStagesGpu.*:*Topk*:*Sort*' 2>&1 | tail -15
echo "[$(( $(date +%s) - S0 )) s] done"
