#!/usr/bin/env bash
# Session 42's third GPU call (issue 16), from the repo root (about 3 minutes):
#   source .devdeps/setup.sh && bash bench/session42b_gpu.sh
# Where matmul_struct's warps wait, per SASS instruction: Nsight Compute's source counters
# (warp-state samples by PC) for p0 (planning), l0 (layouts) and l4 (session42_variants.py's
# three changes), 4096^3 bf16 on cuda:sm_90, exported as CSV (`--page source --print-source
# sass`) to $OUT. Then `run --check` of l6 and l7 (direct stores from the accumulator) and
# `tessera bench` medians (no L2 flush) of p0, l0, l3, l4, l6, l7, three rounds alternated.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session42b.log") 2>&1
gpu_build tessera
T=$B/bin/tessera
MS="matmul_struct -b cuda:sm_90 --dtype bf16"
rm -rf /tmp/dump42 ovr42
TESSERA_CUDA_DUMP_DIR=/tmp/dump42 TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T run $MS --size M=256,N=256,K=256 --check 2>&1 | tail -1
f=$(ls /tmp/dump42/tessera_matmul_struct-*.cu | head -1)
python3 bench/session42_variants.py "$f" ovr42 || exit 1
envof() {
  case $1 in p0) echo "env" ;; l0) echo "env TESSERA_CUDA_FROM_LAYOUTS=1" ;;
    *) echo "env TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_CUDA_OVERRIDE_DIR=ovr42/$1" ;; esac
}
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for v in p0 l0 l4; do
  echo "=== ncu $v ($(( $(date +%s) - S0 )) s)"
  $(envof $v) TESSERA_NVRTC_LINEINFO=1 timeout 150 "$NCU" --kernel-name regex:tessera_matmul --launch-skip 2 --launch-count 1 \
    --section SourceCounters --section WarpStateStats -f -o /tmp/rep_$v \
    $T bench $MS --size M=4096,N=4096,K=4096 --reps 3 --warmup 2 > /tmp/ncu_$v.log 2>&1 || tail -5 /tmp/ncu_$v.log
  timeout 120 "$NCU" -i /tmp/rep_$v.ncu-rep --page source --csv --print-source sass > "$R/src_$v.csv" 2> "$R/src_$v.err"
  wc -c "$R/src_$v.csv"; head -c 600 "$R/src_$v.csv"; echo
done
for v in l6 l7; do
  for s in M=1000,N=776,K=1504 M=129,N=131,K=64 M=256,N=512,K=192 M=77,N=35,K=40; do
    echo "$v $s: $($(envof $v) timeout 60 $T run $MS --size $s --check 2>&1 | tail -1)"
  done
done
for round in a b c; do
  for v in p0 l0 l3 l4 l6 l7; do
    ms=$($(envof $v) timeout 60 $T bench $MS --size M=4096,N=4096,K=4096 --reps 30 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
    echo "matmul_struct 4096^3 $v round $round: $ms"
  done
done
echo "[$(( $(date +%s) - S0 )) s] done"
