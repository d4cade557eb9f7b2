#!/usr/bin/env bash
# Where the GELU epilogue's time goes (issue 16), one GPU call from the repo root after
# `source .devdeps/setup.sh`: Nsight Compute's sections (speed of light, compute and memory
# workload, warp states, scheduler) for tests/corpus/matmul_bias_gelu.tile in bf16 at 4096^3,
# cooperative 128 x 256 and ping-pong 128 x 128, each with the GELU and without an epilogue,
# beside the library matmul. Full reports go to $OUT (or a temporary directory); the lines that
# say where time goes are printed. Times under ncu are not the benchmark's: bench/pingpong_gpu.sh
# times the same forms.
set -uo pipefail
source bench/matmul_forms.sh
R=${OUT:-$(mktemp -d)}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
SZ=M=4096,N=4096,K=4096
SECTIONS=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
          --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy)
prof() {  # name, env..., -- tessera args
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  echo "=== $name"
  env "${envs[@]}" timeout 120 "$NCU" --clock-control none -k regex:tessera_ --launch-skip 3 --launch-count 1 \
    "${SECTIONS[@]}" --print-details all "$T" bench "$@" -b cuda --size $SZ --reps 3 > "$R/$name.txt" 2>&1
  grep -E "Duration|Elapsed Cycles|SM Busy|Issue Slots Busy|Issued Ipc|Executed Ipc|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Stall|No Eligible|Active Warps Per|Eligible Warps|Registers Per|Tensor|XU|FMA |ALU |Shared Memory Config|Dynamic Shared|One or More" "$R/$name.txt" | head -60
}
L=(TESSERA_CUDA_FROM_LAYOUTS=1)
P=(TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_PINGPONG_CONSUMERS=1)
C256=(--config BM=128 --config BN=256 --config BK=64)
C128=(--config BM=128 --config BN=128 --config BK=64)
prof coop256_gelu "${L[@]}" -- "$D/gelu.tile" "${C256[@]}"
prof coop256_plain "${L[@]}" -- "$D/plain.tile" "${C256[@]}"
prof pp128_gelu "${P[@]}" -- "$D/gelu.tile" "${C128[@]}"
prof pp128_plain "${P[@]}" -- "$D/plain.tile" "${C128[@]}"
prof library_matmul TESSERA_NOTHING=1 -- matmul --dtype bf16
echo "=== metrics with tensor / gmma / xu in their names (for later calls)"
"$NCU" --query-metrics 2>/dev/null | grep -iE "gmma|pipe_tensor|pipe_xu|pipe_fma " | head -20
