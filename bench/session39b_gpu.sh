#!/usr/bin/env bash
# Session 39's profile of the mma.sync matmul (issue 16: the layout emitter's mma.sync path runs
# at ~1.4x the planning emitter's time), from the repo root (about 8 minutes on a cold machine):
#   source .devdeps/setup.sh && bash bench/session39b_gpu.sh
# 1. The new `-b cuda:sm_90` (the portable path on a Hopper): its CLI test, and `run --check` of
#    the bf16 matmul at ragged sizes on both emitters.
# 2. `tessera bench` medians at 4096^3 bf16 on cuda:sm_90, planning / layouts alternated.
# 3. Nsight Compute on one launch of each emitter's kernel (NVRTC -lineinfo): details page
#    (warp states, issue slots, registers, occupancy) and the per-SASS-instruction source
#    counters and stall samples, xz'd CSV, for reading offline.
# 4. If time is left: the whole GPU suite (session 38's last review fixes were not GPU-run).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session39b.log") 2>&1
gpu_build tessera tessera_gpu_tests tessera_cli_tests
T=$B/bin/tessera
$B/bin/tessera_cli_tests --gtest_filter='Cli.BackendWithATarget:Cli.RunOnCuda*' 2>&1 | grep -E "OK|FAILED|Failure|Expected|Which|actual" | head -12
for L in 0 1; do
  for s in M=200,N=300,K=136 M=1000,N=777,K=1500; do
    TESSERA_CUDA_FROM_LAYOUTS=$L timeout 60 $T run matmul -b cuda:sm_90 --dtype bf16 --check --size $s 2>&1 | tail -1
  done
done
echo "[$(( $(date +%s) - S0 )) s] checks"
for round in a b c; do
  for L in 0 1; do
    ms=$(TESSERA_CUDA_FROM_LAYOUTS=$L timeout 60 $T bench matmul -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096 --reps 30 2>&1 |
      grep -o 'median_ms=[0-9.e+-]*')
    echo "matmul bf16 4096^3 cuda:sm_90 layouts=$L round $round: $ms"
  done
done
echo "[$(( $(date +%s) - S0 )) s] bench"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
"$NCU" --version | tail -1
for L in 0 1; do
  name=$([ $L = 1 ] && echo lay || echo plan)
  TESSERA_CUDA_FROM_LAYOUTS=$L TESSERA_NVRTC_LINEINFO=1 timeout 150 "$NCU" --clock-control none -k regex:tessera_matmul \
    --launch-skip 2 --launch-count 1 --section SourceCounters --section WarpStateStats --section InstructionStats \
    --section SchedulerStats --section LaunchStats --section Occupancy --section SpeedOfLight --section ComputeWorkloadAnalysis \
    -o "/tmp/$name" -f "$T" bench matmul -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096 --reps 3 > "/tmp/ncu_$name.txt" 2>&1
  tail -2 "/tmp/ncu_$name.txt"
  "$NCU" -i "/tmp/$name.ncu-rep" --page details > "$R/${name}_details.txt" 2>&1
  grep -E "Duration|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc A|No Eligible|Achieved Occ|Local Memory|Stall" "$R/${name}_details.txt" | head -30
  "$NCU" -i "/tmp/$name.ncu-rep" --page source --csv --print-source sass 2>&1 | xz -T4 > "$R/${name}_sass.csv.xz"
  ls -la "$R/${name}_sass.csv.xz"
  echo "[$(( $(date +%s) - S0 )) s] ncu $name"
done
if [ $(( $(date +%s) - S0 )) -lt 360 ]; then
  timeout 200 ctest --test-dir "$B" -L gpu -j8 --timeout 190 --output-on-failure > "$R/ctest39b.log" 2>&1
  grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Failure|SEGFAULT" "$R/ctest39b.log" | head -20
fi
echo "[$(( $(date +%s) - S0 )) s] done"
