#!/usr/bin/env bash
# Session 42's ninth GPU call (issue 16), from the repo root (about 2 minutes):
#   source .devdeps/setup.sh && bash bench/session42h_gpu.sh
# The mma.sync matmul's mma instruction order (bf16 4096^3, cuda:sm_90): the layout emitter's
# source dumped and reordered by bench/session42h_mma_order.py (m1: B tile outer, as the
# planning emitter; m2: A outer, B serpentine), compiled through TESSERA_CUDA_OVERRIDE_DIR;
# `run --check` of each; `tessera bench` medians (no L2 flush), three rounds alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session42h.log") 2>&1
gpu_build tessera
T=$B/bin/tessera
MM="matmul -b cuda:sm_90 --dtype bf16"
rm -rf /tmp/dump42h ovr42h
TESSERA_CUDA_DUMP_DIR=/tmp/dump42h TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T bench $MM --size M=4096,N=4096,K=4096 --reps 2 2>&1 | tail -1
ls /tmp/dump42h
f=$(ls /tmp/dump42h/tessera_matmul-*.cu | head -1)
python3 bench/session42h_mma_order.py "$f" ovr42h || exit 1
envof() { case $1 in p0) echo "env TESSERA_CUDA_FROM_LAYOUTS=0" ;; l0) echo "env TESSERA_CUDA_FROM_LAYOUTS=1" ;;
  *) echo "env TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_CUDA_OVERRIDE_DIR=ovr42h/$1" ;; esac; }
for v in m1 m2; do
  for s in M=256,N=512,K=192 M=1000,N=776,K=1504; do
    echo "$v $s: $($(envof $v) timeout 60 $T run $MM --size $s --check 2>&1 | tail -1)"
  done
done
for round in a b c; do
  for v in p0 l0 m1 m2; do
    o=$($(envof $v) timeout 60 $T bench $MM --size M=4096,N=4096,K=4096 --reps 30 2>&1)
    echo "matmul 4096^3 $v round $round: $(echo "$o" | grep -o 'median_ms=[0-9.e+-]*') overrides=$(echo "$o" | grep -c 'OVERRIDE_DIR: compiling')"
  done
done
echo "[$(( $(date +%s) - S0 )) s] done"
