#!/usr/bin/env bash
# Session 43 (issue 16), from the repo root (about 2 minutes):
#   source .devdeps/setup.sh && bash bench/session43b_gpu.sh
# The mma.sync matmul (bf16 4096^3, cuda:sm_90): the layout emitter's source dumped and its
# first k step's fragments loaded before the K loop instead of under a branch inside it
# (bench/session43_variants.py h1), compiled through TESSERA_CUDA_OVERRIDE_DIR; `run --check`
# of the variant (one iteration, K = 40; many, K = 1504); `tessera bench` medians (no L2
# flush), three rounds alternated: p0 planning, l0 layouts as emitted, h1.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session43b.log") 2>&1
gpu_build tessera
T=$B/bin/tessera
MM="matmul -b cuda:sm_90 --dtype bf16"
rm -rf /tmp/dump43b ovr43b
TESSERA_CUDA_DUMP_DIR=/tmp/dump43b TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T bench $MM --size M=4096,N=4096,K=4096 --reps 2 2>&1 | tail -1
f=$(ls /tmp/dump43b/tessera_matmul-*.cu | head -1)
python3 bench/session43_variants.py "$f" ovr43b || exit 1
envof() { case $1 in p0) echo "env TESSERA_CUDA_FROM_LAYOUTS=0" ;; l0) echo "env TESSERA_CUDA_FROM_LAYOUTS=1" ;;
  *) echo "env TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_CUDA_OVERRIDE_DIR=ovr43b/$1" ;; esac; }
for s in M=256,N=512,K=40 M=1000,N=776,K=1504; do
  echo "h1 $s: $($(envof h1) timeout 60 $T run $MM --size $s --check 2>&1 | tail -1)"
done
for round in a b c; do
  for v in p0 l0 h1; do
    o=$($(envof $v) timeout 60 $T bench $MM --size M=4096,N=4096,K=4096 --reps 30 2>&1)
    echo "matmul 4096^3 $v round $round: $(echo "$o" | grep -o 'median_ms=[0-9.e+-]*') overrides=$(echo "$o" | grep -c 'OVERRIDE_DIR: compiling')"
  done
done
echo "[$(( $(date +%s) - S0 )) s] done"
