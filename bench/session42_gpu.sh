#!/usr/bin/env bash
# Session 42's first GPU call (issue 16), from the repo root (about 4 minutes):
#   source .devdeps/setup.sh && bash bench/session42_gpu.sh
# What matmul_struct's 1.41x (layout emitter against planning, bf16 4096^3, cuda:sm_90) is made
# of. The layout emitter's source is dumped here (TESSERA_CUDA_DUMP_DIR) and edited by
# bench/session42_variants.py into one-change variants compiled through
# TESSERA_CUDA_OVERRIDE_DIR (l1 whole-tile tests hoisted, l2 stage addresses once an iteration,
# l3 refill at the iteration's top, l4 all three, l5 a 6-CTA launch bound). Nsight Compute's
# issue and stall counts for p0 (planning), l0 (layouts) and l4; `run --check` of each variant;
# `tessera bench` medians (no L2 flush), three rounds alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session42.log") 2>&1
gpu_build tessera
T=$B/bin/tessera
MS="matmul_struct -b cuda:sm_90 --dtype bf16"
rm -rf /tmp/dump42 ovr42
TESSERA_CUDA_DUMP_DIR=/tmp/dump42 TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T run $MS --size M=256,N=256,K=256 --check 2>&1 | tail -1
f=$(ls /tmp/dump42/tessera_matmul_struct-*.cu | head -1)
python3 bench/session42_variants.py "$f" ovr42 || exit 1
cp "$f" "$R/"
envof() {
  case $1 in p0) echo "env" ;; l0) echo "env TESSERA_CUDA_FROM_LAYOUTS=1" ;;
    *) echo "env TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_CUDA_OVERRIDE_DIR=ovr42/$1" ;; esac
}
for v in l1 l2 l3 l4 l5; do
  for s in M=1000,N=776,K=1504 M=129,N=131,K=64 M=256,N=512,K=192; do
    echo "$v $s: $($(envof $v) timeout 60 $T run $MS --size $s --check 2>&1 | tail -1)"
  done
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
M="smsp__cycles_active.avg,sm__cycles_elapsed.max,smsp__inst_executed.sum,smsp__inst_executed_pipe_tensor.sum"
M="$M,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
M="$M,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
M="$M,smsp__inst_executed_op_ldsm.sum,smsp__inst_executed_op_ldgsts.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct"
M="$M,launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,smsp__warps_active.avg.per_cycle_active"
for v in p0 l0 l4; do
  echo "=== ncu $v ($(( $(date +%s) - S0 )) s)"
  $(envof $v) timeout 120 "$NCU" --kernel-name regex:tessera_matmul --launch-skip 2 --launch-count 1 \
    --metrics "$M,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    $T bench $MS --size M=4096,N=4096,K=4096 --reps 3 --warmup 2 2>&1 | grep -E "^\s+(sm|smsp|l1tex|lts|dram|launch)__" |
    awk '$NF+0 != 0 || $0 !~ /stalled/' | sed 's/  */ /g'
done
echo "=== speed ($(( $(date +%s) - S0 )) s)"
for round in a b c; do
  for v in p0 l0 l1 l2 l3 l4 l5; do
    ms=$($(envof $v) timeout 60 $T bench $MS --size M=4096,N=4096,K=4096 --reps 30 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
    echo "matmul_struct 4096^3 $v round $round: $ms"
  done
done
echo "[$(( $(date +%s) - S0 )) s] done"
