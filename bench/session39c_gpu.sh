#!/usr/bin/env bash
# Session 39's last GPU call (issue 16), from the repo root (about 2 minutes on a cold machine):
#   source .devdeps/setup.sh && bash bench/session39c_gpu.sh
# The layout emitter after pipeline-loops' fragments_ahead = 1 (the default now, not an
# environment switch) and overlap-epilogues' declines (no wgmma group in flight):
# 1. `run --check` of the bf16 matmul: cuda:sm_90 (mma.sync, fragments ahead) at ragged sizes;
#    the device's target (overlap-epilogues) with several programs per CTA and K loops of 1 and
#    3 iterations, at BLOCK_N 256 and 192.
# 2. The layout emitter's GPU tests (OverlappedEpiloguesAcrossPrograms is new).
# 3. `tessera bench` medians: the mma.sync matmul 4096^3 on cuda:sm_90, planning / layouts, three
#    rounds; the wgmma GEMMs at 4096^3 and 4096x14336x4096, two rounds.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session39c.log") 2>&1
gpu_build tessera tessera_gpu_tests
T=$B/bin/tessera
L="env TESSERA_CUDA_FROM_LAYOUTS=1"
for s in M=200,N=300,K=136 M=1000,N=777,K=1500 M=130,N=264,K=40; do
  echo "sm_90: $($L timeout 60 $T run matmul -b cuda:sm_90 --dtype bf16 --check --size $s 2>&1 | tail -1)"
done
for bn in 256 192; do
  for s in M=4100,N=2100,K=40 M=4100,N=2100,K=136; do
    echo "sm_90a BLOCK_N=$bn: $($L timeout 60 $T run matmul -b cuda --dtype bf16 --check --config BLOCK_N=$bn --size $s 2>&1 | tail -1)"
  done
done
echo "[$(( $(date +%s) - S0 )) s] checks"
timeout 150 ctest --test-dir "$B" -L gpu -R "LayoutEmitterGpu|LayoutEmitterLibraryGpu" -j8 --timeout 140 --output-on-failure \
  > "$R/ctest39c.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|SEGFAULT" "$R/ctest39c.log" | head -8
echo "[$(( $(date +%s) - S0 )) s] tests"
for round in a b c; do
  for v in planning layouts; do
    ms=$(env $([ $v = layouts ] && echo TESSERA_CUDA_FROM_LAYOUTS=1) timeout 60 $T bench matmul -b cuda:sm_90 --dtype bf16 \
      --size M=4096,N=4096,K=4096 --reps 30 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
    echo "matmul bf16 4096^3 cuda:sm_90 $v round $round: $ms"
  done
done
for round in a b; do
  for v in planning layouts; do
    for s in M=4096,N=4096,K=4096 M=4096,N=14336,K=4096; do
      ms=$(env $([ $v = layouts ] && echo TESSERA_CUDA_FROM_LAYOUTS=1) timeout 60 $T bench matmul -b cuda --dtype bf16 --size $s \
        --reps 50 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
      echo "matmul bf16 $s sm_90a $v round $round: $ms"
    done
  done
done
echo "[$(( $(date +%s) - S0 )) s] done"
