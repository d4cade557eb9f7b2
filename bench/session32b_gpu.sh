#!/usr/bin/env bash
# Session 32's second GPU call (issue 18), from the repo root after `source .devdeps/setup.sh`:
# where the f32 segment kernel's instructions and stalls go, per SASS instruction (ncu's source
# counters and warp-state samples; NVRTC with -lineinfo), at 64 x 131072 k = 64, for $OUT.
set -uo pipefail
source bench/gpu_common.sh
gpu_build tessera
T=$B/bin/tessera
R=${OUT:-/tmp}
timeout 60 $T run topk -b cuda --check --size M=64,N=131072,K=64 2>&1 | tail -1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
"$NCU" --version | tail -1
TESSERA_NVRTC_LINEINFO=1 timeout 240 "$NCU" --clock-control none -k regex:topk_segments_tile --launch-skip 2 --launch-count 1 \
  --section SourceCounters --section WarpStateStats --section InstructionStats --section SchedulerStats --section LaunchStats \
  -o "$R/seg" -f "$T" bench topk -b cuda --size M=64,N=131072,K=64 --reps 3 > "$R/ncu_run.txt" 2>&1
tail -3 "$R/ncu_run.txt"
"$NCU" -i "$R/seg.ncu-rep" --page details > "$R/seg_details.txt" 2>&1; grep -E "Warp Cycles|Issued|Executed Ipc|Stall|Registers" "$R/seg_details.txt" | head -30
"$NCU" -i "$R/seg.ncu-rep" --page source --csv --print-source sass > "$R/seg_sass.csv" 2>&1; wc -l "$R/seg_sass.csv"; head -3 "$R/seg_sass.csv" | cut -c1-600
"$NCU" -i "$R/seg.ncu-rep" --page source --csv --print-source cuda,sass > "$R/seg_cuda_sass.csv" 2>&1; wc -l "$R/seg_cuda_sass.csv"; head -3 "$R/seg_cuda_sass.csv" | cut -c1-400
# The row threshold's first-digit histogram kernel: it only reads x and counts, yet took 18.8 us.
TESSERA_TOPK_ROW_THRESHOLD=1 TESSERA_NVRTC_LINEINFO=1 timeout 200 "$NCU" --clock-control none -k regex:topk_histogram_high --launch-skip 2 --launch-count 1 \
  --section SourceCounters --section WarpStateStats --section InstructionStats --section MemoryWorkloadAnalysis --section SpeedOfLight \
  -o "$R/hist" -f "$T" bench topk -b cuda --size M=64,N=131072,K=64 --reps 3 > "$R/ncu_hist_run.txt" 2>&1
"$NCU" -i "$R/hist.ncu-rep" --page details > "$R/hist_details.txt" 2>&1; grep -E "Duration|Warp Cycles|Issued|Stall|Throughput|L2 Hit" "$R/hist_details.txt" | head -30
"$NCU" -i "$R/hist.ncu-rep" --page source --csv --print-source sass > "$R/hist_sass.csv" 2>&1; wc -l "$R/hist_sass.csv"
echo "[$(( $(date +%s) - S0 )) s] done"
