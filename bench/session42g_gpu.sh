#!/usr/bin/env bash
# Session 42's eighth GPU call (issue 16), from the repo root (about 2 minutes):
#   source .devdeps/setup.sh && bash bench/session42g_gpu.sh
# What is left of the mma.sync matmul's 1.07x (layout emitter against planning, bf16 4096^3,
# cuda:sm_90) after swizzle-mma-operands: Nsight Compute's counters and source counters (warp
# samples per SASS instruction, CSV to $OUT) for both emitters' kernels, and `tessera bench`
# medians, three rounds alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session42g.log") 2>&1
gpu_build tessera
T=$B/bin/tessera
MM="matmul -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M="smsp__cycles_active.avg,sm__cycles_elapsed.max,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active"
M="$M,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread"
M="$M,smsp__warps_active.avg.per_cycle_active,lts__t_sector_hit_rate.pct,dram__bytes_read.sum"
for v in planning layouts; do
  e="env TESSERA_CUDA_FROM_LAYOUTS=0"; [ $v = layouts ] && e="env TESSERA_CUDA_FROM_LAYOUTS=1"
  echo "=== ncu $v ($(( $(date +%s) - S0 )) s)"
  $e timeout 120 "$NCU" --kernel-name regex:tessera_matmul --launch-skip 2 --launch-count 1 \
    --metrics "$M,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    $T bench $MM --reps 3 --warmup 2 2>&1 | grep -E "^\s+(sm|smsp|lts|dram|launch)__" |
    awk '$NF+0 != 0 || $0 !~ /stalled/' | sed 's/  */ /g'
  $e timeout 150 "$NCU" --kernel-name regex:tessera_matmul --launch-skip 2 --launch-count 1 \
    --section SourceCounters -f -o /tmp/rep_$v $T bench $MM --reps 3 --warmup 2 > /tmp/ncu_$v.log 2>&1 || tail -5 /tmp/ncu_$v.log
  timeout 120 "$NCU" -i /tmp/rep_$v.ncu-rep --page source --csv --print-source sass > "$R/mm_src_$v.csv" 2> /dev/null
  wc -c "$R/mm_src_$v.csv"
done
echo "=== speed ($(( $(date +%s) - S0 )) s)"
for round in a b c; do
  p=$(TESSERA_CUDA_FROM_LAYOUTS=0 timeout 60 $T bench $MM --reps 30 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
  l=$(TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T bench $MM --reps 30 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
  echo "matmul 4096^3 cuda:sm_90 round $round: planning $p layouts $l"
done
echo "[$(( $(date +%s) - S0 )) s] done"
