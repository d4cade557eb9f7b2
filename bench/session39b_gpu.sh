#!/usr/bin/env bash
# Session 39's GPU call (issue 16), from the repo root (about 8 minutes on a cold machine; the
# parts in order of worth, each line in $OUT/session39b.log as it comes):
#   source .devdeps/setup.sh && bash bench/session39b_gpu.sh
# 1. `tessera bench` medians of the mma.sync matmul at 4096^3 bf16 on cuda:sm_90 (the portable
#    path on a Hopper; the layout emitter at ~1.4x the planning emitter's time, first call):
#    planning / layouts / layouts + TESSERA_CUDA_FRAGMENTS_AHEAD=1 (the dot loads the next
#    iteration's first fragments before its last k step, the ring's barrier moved there; cp.async
#    copies stepped and their edge path rolled since 88d0641), three rounds alternated.
# 2. The wgmma GEMMs at 4096^3 and 4096x14336x4096 on the device's own target, planning /
#    layouts (overlap-epilogues: the result's boxes stored during the next program's loop), two
#    rounds.
# 3. `run --check` of the bf16 matmul at ragged sizes: cuda:sm_90 in the three forms, and the
#    layout emitter on the device's target.
# 4. The layout emitter's GPU tests, without and with TESSERA_CUDA_FRAGMENTS_AHEAD=1, and the
#    `-b cuda:sm_90` CLI test.
# 5. Nsight Compute on one launch of each mma.sync form, while time is left: the details page and
#    the per-SASS-instruction source counters (xz'd CSV).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session39b.log") 2>&1
gpu_build tessera tessera_gpu_tests tessera_cli_tests
T=$B/bin/tessera
variant() {  # planning | layouts | ahead
  case $1 in planning) echo "env" ;; layouts) echo "env TESSERA_CUDA_FROM_LAYOUTS=1" ;;
    ahead) echo "env TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_CUDA_FRAGMENTS_AHEAD=1" ;; esac
}
for round in a b c; do
  for v in planning layouts ahead; do
    ms=$($(variant $v) timeout 60 $T bench matmul -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096 --reps 30 2>&1 |
      grep -o 'median_ms=[0-9.e+-]*')
    echo "matmul bf16 4096^3 cuda:sm_90 $v round $round: $ms"
  done
done
echo "[$(( $(date +%s) - S0 )) s] mma.sync bench"
for round in a b; do
  for v in planning layouts; do
    for s in M=4096,N=4096,K=4096 M=4096,N=14336,K=4096; do
      ms=$($(variant $v) timeout 60 $T bench matmul -b cuda --dtype bf16 --size $s --reps 50 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
      echo "matmul bf16 $s sm_90a $v round $round: $ms"
    done
  done
done
echo "[$(( $(date +%s) - S0 )) s] wgmma bench"
for v in planning layouts ahead; do
  for s in M=200,N=300,K=136 M=1000,N=777,K=1500 M=130,N=264,K=40; do
    echo "$v sm_90: $($(variant $v) timeout 60 $T run matmul -b cuda:sm_90 --dtype bf16 --check --size $s 2>&1 | tail -1)"
  done
done
for s in M=200,N=300,K=136 M=1000,N=777,K=1500 M=130,N=264,K=40 M=4100,N=2100,K=300; do
  echo "layouts sm_90a: $(TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T run matmul -b cuda --dtype bf16 --check --size $s 2>&1 | tail -1)"
done
echo "[$(( $(date +%s) - S0 )) s] checks"
for ahead in 0 1; do
  TESSERA_CUDA_FRAGMENTS_AHEAD=$ahead timeout 150 ctest --test-dir "$B" -L gpu -R "LayoutEmitterGpu|LayoutEmitterLibraryGpu" -j8 \
    --timeout 140 --output-on-failure > "/tmp/ctest_ahead$ahead.log" 2>&1
  cat "/tmp/ctest_ahead$ahead.log" >> "$R/ctest39b.log"
  echo "ahead=$ahead: $(grep -E "tests passed|tests failed" "/tmp/ctest_ahead$ahead.log")"
  grep -E "\(Failed\)|\(Timeout\)|SEGFAULT" "/tmp/ctest_ahead$ahead.log" | head -8
done
$B/bin/tessera_cli_tests --gtest_filter='Cli.BackendWithATarget:Cli.RunOnCuda*' 2>&1 | grep -E "^\[  (PASSED|FAILED)|Failure|Which is" | head -8
echo "[$(( $(date +%s) - S0 )) s] tests"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for v in planning layouts ahead; do
  [ $(( $(date +%s) - S0 )) -gt 400 ] && { echo "no time for ncu $v"; continue; }
  $(variant $v) TESSERA_NVRTC_LINEINFO=1 timeout 80 "$NCU" --clock-control none -k regex:tessera_matmul \
    --launch-skip 2 --launch-count 1 --section SourceCounters --section WarpStateStats --section InstructionStats \
    --section SchedulerStats --section LaunchStats --section Occupancy --section SpeedOfLight \
    -o "/tmp/$v" -f "$T" bench matmul -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096 --reps 3 > "/tmp/ncu_$v.txt" 2>&1
  tail -1 "/tmp/ncu_$v.txt"
  "$NCU" -i "/tmp/$v.ncu-rep" --page details > "$R/${v}_details.txt" 2>&1
  grep -E "Duration|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc A|No Eligible|Local Memory|Stall" "$R/${v}_details.txt" | head -16
  "$NCU" -i "/tmp/$v.ncu-rep" --page source --csv --print-source sass 2>&1 | xz -T4 > "$R/${v}_sass.csv.xz"
  echo "[$(( $(date +%s) - S0 )) s] ncu $v"
done
echo "[$(( $(date +%s) - S0 )) s] done"
