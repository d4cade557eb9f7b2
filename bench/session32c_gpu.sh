#!/usr/bin/env bash
# Session 32's third GPU call (issue 18), from the repo root after `source .devdeps/setup.sh`:
# the segment kernel in small programs (1-4 warps, segments of 1024-4096, digits of 8 bits:
# fewer barriers and bins a program), exact checks and `tessera bench` medians at 64 x 131072
# k = 64 (f32, bf16; no L2 flush: for ranking), cuda_bench (L2 flushed) for the fastest beside
# the default and torch.topk; then where the default segment kernel's instructions and stalls
# go (ncu source counters, NVRTC -lineinfo) into $OUT.
set -uo pipefail
source bench/gpu_common.sh
gpu_build tessera cuda_bench
T=$B/bin/tessera
R=${OUT:-/tmp}
CONFIGS=("8192 16 0" "1024 1 8" "2048 2 8" "2048 4 8" "4096 4 8" "8192 16 8" "2048 4 11" "4096 8 8")
best=""; best_ms=9
for c in "${CONFIGS[@]}"; do
  set -- $c
  seg=$1 nw=$2 rb=$3
  cfg=()
  envs=(TESSERA_TOPK_SEGMENT=$seg); [ "$rb" != 0 ] && envs+=(TESSERA_TOPK_RADIX_BITS=$rb)
  [ "$nw" != 16 ] && envs+=(TESSERA_TOPK_SEGMENT_WARPS=$nw)
  chk=$(env "${envs[@]}" timeout 60 $T run topk -b cuda --check --size M=64,N=131072,K=64 "${cfg[@]}" 2>&1 | tail -1 | cut -c1-12)
  chk2=$(env "${envs[@]}" timeout 60 $T run topk -b cuda --check --size M=3,N=100001,K=100 "${cfg[@]}" 2>&1 | tail -1 | cut -c1-12)
  f=$(env "${envs[@]}" timeout 60 $T bench topk -b cuda --size M=64,N=131072,K=64 --reps 50 "${cfg[@]}" 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)
  b=$(env "${envs[@]}" timeout 60 $T bench topk -b cuda --dtype bf16 --size M=64,N=131072,K=64 --reps 50 "${cfg[@]}" 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)
  echo "segment $seg warps $nw radix $rb: $chk / $chk2 f32 $f bf16 $b"
  if [ -n "$f" ] && awk "BEGIN{exit !($f < $best_ms)}" && [[ $chk == PASS* ]]; then best="$c"; best_ms=$f; fi
done
echo "[$(( $(date +%s) - S0 )) s] sweep; fastest f32: $best"
set -- $best
sets=(); [ "$2" != 16 ] && sets+=(TESSERA_TOPK_SEGMENT_WARPS=$2)
[ "$3" != 0 ] && sets+=(TESSERA_TOPK_RADIX_BITS=$3)
for round in 1 2; do
  echo "--- cuda_bench default, round $round"
  timeout 120 "$B/bin/cuda_bench" --only topk 2>&1 | grep -E "^topk " | awk '{print $1, $2, $3, $4}'
  echo "--- cuda_bench segment $1 warps $2 radix $3, round $round"
  env TESSERA_TOPK_SEGMENT=$1 "${sets[@]}" timeout 150 "$B/bin/cuda_bench" --only topk 2>&1 | grep -E "^topk " | awk '{print $1, $2, $3, $4}'
done
echo "--- cuda_bench default, warps with no lane to count skip tsr::hist_add (TESSERA_CUDA_HIST_SKIP=1)"
TESSERA_CUDA_HIST_SKIP=1 timeout 120 "$B/bin/cuda_bench" --only topk 2>&1 | grep -E "^topk " | awk '{print $1, $2, $3, $4}'
TESSERA_CUDA_HIST_SKIP=1 timeout 60 $T run topk -b cuda --check --size M=64,N=131072,K=1024 2>&1 | tail -1
python3 bench/torch_topk.py f32:64x131072:64 bf16:64x131072:64 2>&1 | tail -2
echo "[$(( $(date +%s) - S0 )) s] timed"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "--- ncu kernel durations, segment $1 warps $2 radix $3 (f32 k = 64)"
env TESSERA_TOPK_SEGMENT=$1 "${sets[@]}" timeout 90 "$NCU" --clock-control none -k regex:topk --launch-skip 6 --launch-count 4 \
  --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size \
  "$T" bench topk -b cuda --size M=64,N=131072,K=64 --reps 3 2>&1 | grep -E "^  [a-z_]+.*\(|duration|registers|grid_size" | head -16
TESSERA_NVRTC_LINEINFO=1 timeout 200 "$NCU" --clock-control none -k regex:topk_segments_tile --launch-skip 2 --launch-count 1 \
  --section SourceCounters --section WarpStateStats --section InstructionStats --section SchedulerStats --section LaunchStats \
  -o "$R/seg" -f "$T" bench topk -b cuda --size M=64,N=131072,K=64 --reps 3 > "$R/ncu_run.txt" 2>&1
tail -2 "$R/ncu_run.txt"
"$NCU" -i "$R/seg.ncu-rep" --page details > "$R/seg_details.txt" 2>&1
grep -E "Warp Cycles|Issued|Executed Ipc|Stall|Registers" "$R/seg_details.txt" | head -20
"$NCU" -i "$R/seg.ncu-rep" --page source --csv --print-source sass > "$R/seg_sass.csv" 2>&1
wc -l "$R/seg_sass.csv"; head -2 "$R/seg_sass.csv" | cut -c1-300
echo "[$(( $(date +%s) - S0 )) s] done"
