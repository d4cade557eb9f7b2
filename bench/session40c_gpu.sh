#!/usr/bin/env bash
# Session 40's third GPU call (issue 16), from the repo root (about 2 minutes):
#   source .devdeps/setup.sh && bash bench/session40c_gpu.sh
# (As run in session 40, at adfb974, the arms were: layouts = refill after the mma instructions,
# before = TESSERA_CUDA_REFILL_BEFORE_MMA=1. Since 5e6505a "before" is the default and "layouts"
# runs TESSERA_CUDA_REFILL_AFTER_MMA=1: the same comparison.)
# The mma.sync matmul (4096^3 bf16 on cuda:sm_90): the ring's refill before the first k step's
# mma instructions against after them, the
# planning emitter beside, three rounds alternated (`tessera bench` medians, no L2 flush); and,
# where a folder sass40/ of cubins came with the tree, their SASS (cuobjdump) into $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session40c.log") 2>&1
if [ -d sass40 ]; then
  for f in sass40/*.cubin; do cuobjdump -sass "$f" > "$R/$(basename "$f" .cubin).sass" 2>&1 || echo "cuobjdump $f failed"; done
  ls -la "$R"
fi
gpu_build tessera
T=$B/bin/tessera
for round in a b c; do
  for v in planning layouts before; do
    case $v in planning) e="env" ;; layouts) e="env TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_CUDA_REFILL_AFTER_MMA=1" ;;
      before) e="env TESSERA_CUDA_FROM_LAYOUTS=1" ;; esac
    ms=$($e timeout 60 $T bench matmul -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096 --reps 30 2>&1 |
      grep -o 'median_ms=[0-9.e+-]*')
    echo "matmul bf16 4096^3 cuda:sm_90 $v round $round: $ms"
  done
done
for s in M=1000,N=777,K=1500 M=300,N=520,K=200; do
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T run matmul -b cuda:sm_90 --check --dtype bf16 --size $s 2>&1 | tail -1
done
echo "[$(( $(date +%s) - S0 )) s] done"
