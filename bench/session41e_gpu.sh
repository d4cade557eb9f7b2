#!/usr/bin/env bash
# Session 41's fifth GPU call (issue 16), from the repo root (about 3 minutes):
#   source .devdeps/setup.sh && bash bench/session41e_gpu.sh
# What the rest of the mma.sync matmul's 1.19x is made of, by hand-edited variants of the two
# emitters' generated source (TESSERA_CUDA_OVERRIDE_DIR; the files in an untracked ovr41/ that
# came with the tree, each one change from `tessera compile matmul -t cuda:sm_90 --dtype bf16
# -e cuda` at 8c9e370): p1 = planning with direct 4-byte stores (tsr::store_frags) in place of
# its staged epilogue; p2 = planning with its first fragments loaded inside the loop under a
# branch, as the layout emitter does; l1 = layouts with the first fragments before the loop;
# l2 = layouts with its epilogue through shared memory (16-byte rows out). `tessera bench`
# medians (4096^3 bf16, cuda:sm_90, no L2 flush), three rounds alternated; `run --check` of
# each variant at whole tiles. (As run at 662b286, the files were named <symbol>.cu; since then
# TESSERA_CUDA_OVERRIDE_DIR reads <symbol>-<cache key>.cu, the name TESSERA_CUDA_DUMP_DIR gives.)
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session41e.log") 2>&1
gpu_build tessera
T=$B/bin/tessera
MM="matmul -b cuda:sm_90 --dtype bf16"
for v in p1 p2 l1 l2; do
  e="env TESSERA_CUDA_OVERRIDE_DIR=ovr41/$v"; case $v in l*) e="$e TESSERA_CUDA_FROM_LAYOUTS=1" ;; esac
  echo "$v: $($e timeout 60 $T run $MM --size M=256,N=512,K=192 --check 2>&1 | tail -1)"
done
for round in a b c; do
  for v in p0 p1 p2 l0 l1 l2; do
    e="env TESSERA_CUDA_OVERRIDE_DIR=ovr41/$v"; case $v in l*) e="$e TESSERA_CUDA_FROM_LAYOUTS=1" ;; esac
    ms=$($e timeout 60 $T bench $MM --size M=4096,N=4096,K=4096 --reps 30 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
    echo "mma.sync 4096^3 $v round $round: $ms"
  done
done
echo "[$(( $(date +%s) - S0 )) s] done"
