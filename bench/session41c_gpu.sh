#!/usr/bin/env bash
# Session 41's third GPU call (issue 16), from the repo root (about 5 minutes):
#   source .devdeps/setup.sh && bash bench/session41c_gpu.sh
# After fdb86bf (the layout emitter's ldmatrix addresses: stage + lane offset + constant; ring
# addresses converted once): the layout emitter's GPU tests, the SASS of its mma.sync matmul
# (cubins in an untracked sass41c/ that came with the tree), Nsight Compute's counts for one
# launch, and `tessera bench` medians (no L2 flush), three rounds alternated, of the mma.sync
# matmul 4096^3 bf16 and matmul_fp8 (e4m3 m16n8k32) on cuda:sm_90, and matmul_struct bf16 on
# cuda:sm_80 (planning / layouts).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session41c.log") 2>&1
if [ -d sass41c ]; then
  for f in sass41c/*.cubin; do cuobjdump -sass "$f" > "$R/$(basename "$f" .cubin).sass" 2>&1 || echo "cuobjdump $f failed"; done
fi
gpu_build tessera tessera_gpu_tests
T=$B/bin/tessera
echo "=== the layout emitter's GPU tests ($(( $(date +%s) - S0 )) s)"
timeout 300 "$B/bin/tessera_gpu_tests" --gtest_filter='*LayoutEmitter*' 2>&1 |
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|fell back|no TMA|Which is|error:" | head -40
MM="matmul -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M="sm__cycles_elapsed.max,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
M="$M,launch__registers_per_thread,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
echo "=== ncu layouts ($(( $(date +%s) - S0 )) s)"
TESSERA_CUDA_FROM_LAYOUTS=1 timeout 120 "$NCU" --kernel-name regex:tessera_matmul --launch-skip 2 --launch-count 1 \
  --metrics "$M,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
  $T bench $MM --reps 3 --warmup 2 2>&1 | grep -E "^\s+(sm|smsp|l1tex|lts|dram|launch)__" |
  awk '$NF+0 >= 0.05 || $0 !~ /stalled/' | sed 's/  */ /g'
echo "=== speed ($(( $(date +%s) - S0 )) s)"
for round in a b c; do
  for k in "matmul -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096" \
           "matmul_fp8 -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096" \
           "matmul_struct -b cuda:sm_80 --dtype bf16 --size M=4096,N=4096,K=4096"; do
    p=$(timeout 60 $T bench $k --reps 30 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
    l=$(TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T bench $k --reps 30 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
    echo "${k%% *} ${k#* -b } round $round: planning $p layouts $l"
  done
done
echo "[$(( $(date +%s) - S0 )) s] done"
