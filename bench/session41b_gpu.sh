#!/usr/bin/env bash
# Session 41's second GPU call (issue 16), from the repo root (about 4 minutes):
#   source .devdeps/setup.sh && bash bench/session41b_gpu.sh
# Where the mma.sync matmul's 1.19x against the planning emitter goes (4096^3 bf16 on
# cuda:sm_90): the SASS of both emitters' kernels (cubins in an untracked sass41/ that came with
# the tree: ptxas -arch=sm_90 of `tessera compile -e ptx`), Nsight Compute's stall reasons,
# instruction, shared-memory and L2/DRAM counts for one launch of each, and `tessera bench`
# medians (no L2 flush), three rounds alternated, of planning / layouts / layouts with the
# ring's cp.async asking L2 for 128 bytes (TESSERA_CUDA_RING_L2PF=128, an A/B switch).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session41b.log") 2>&1
if [ -d sass41 ]; then
  for f in sass41/*.cubin; do cuobjdump -sass "$f" > "$R/$(basename "$f" .cubin).sass" 2>&1 || echo "cuobjdump $f failed"; done
fi
gpu_build tessera
T=$B/bin/tessera
MM="matmul -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M="smsp__cycles_active.avg,sm__cycles_elapsed.max,smsp__inst_executed.sum,smsp__inst_executed_pipe_tensor.sum"
M="$M,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
M="$M,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
M="$M,smsp__inst_executed_op_ldsm.sum,smsp__inst_executed_op_ldgsts.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct"
M="$M,launch__registers_per_thread,smsp__warps_active.avg.per_cycle_active"
for v in planning layouts; do
  e="env"; [ $v = layouts ] && e="env TESSERA_CUDA_FROM_LAYOUTS=1"
  echo "=== ncu $v ($(( $(date +%s) - S0 )) s)"
  $e timeout 120 "$NCU" --kernel-name regex:tessera_matmul --launch-skip 2 --launch-count 1 \
    --metrics "$M,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    $T bench $MM --reps 3 --warmup 2 2>&1 | grep -E "^\s+(sm|smsp|l1tex|lts|dram|launch)__" |
    awk '$NF+0 != 0 || $0 !~ /stalled/' | sed 's/  */ /g'
done
echo "=== speed ($(( $(date +%s) - S0 )) s)"
for round in a b c; do
  for v in planning layouts l2pf128; do
    case $v in planning) e="env" ;; layouts) e="env TESSERA_CUDA_FROM_LAYOUTS=1" ;;
      l2pf128) e="env TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_CUDA_RING_L2PF=128" ;; esac
    ms=$($e timeout 60 $T bench $MM --reps 30 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
    echo "mma.sync 4096^3 $v round $round: $ms"
  done
done
TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_CUDA_RING_L2PF=128 timeout 60 $T run matmul -b cuda:sm_90 --dtype bf16 --size M=1000,N=776,K=1504 --check 2>&1 | tail -1
echo "[$(( $(date +%s) - S0 )) s] done"
