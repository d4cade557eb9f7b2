#!/usr/bin/env bash
# Session 43 (issue 16), from the repo root (about 2 minutes):
#   source .devdeps/setup.sh && bash bench/session43c_gpu.sh
# The segmented top-k through the layout emitter with its block scans' tiles in 32-byte runs
# (c3b1aa0, the default) against 16-byte ones (TESSERA_SCAN_RUN_BYTES=16, as before it) and the
# planning emitter: f32 and bf16 at 64 x 131072 k = 64 (the first call of session 43 found f32
# 1.075x and bf16 0.90x the planning emitter's time), three rounds alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session43c.log") 2>&1
gpu_build tessera
T=$B/bin/tessera
for dt in f32 bf16; do
  echo "check $dt runs=16: $(TESSERA_SCAN_RUN_BYTES=16 TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T run topk -b cuda --dtype $dt --size M=3,N=100001,K=1000 --check 2>&1 | tail -1)"
done
for round in a b c; do
  for dt in f32 bf16; do
    for v in p l32 l16; do
      case $v in p) e="TESSERA_CUDA_FROM_LAYOUTS=0" ;; l32) e="TESSERA_CUDA_FROM_LAYOUTS=1" ;; l16) e="TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_SCAN_RUN_BYTES=16" ;; esac
      ms=$(env $e timeout 60 $T bench topk -b cuda --dtype $dt --size M=64,N=131072,K=64 --reps 100 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
      echo "topk $dt 64x131072 k=64 $v round $round: $ms"
    done
  done
done
echo "[$(( $(date +%s) - S0 )) s] done"
