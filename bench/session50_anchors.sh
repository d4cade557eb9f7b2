#!/usr/bin/env bash
# Session 50 (issue 16): the figures against the anchors in one call of under 10 minutes (the
# parts of tools/gpu-check that time things, without its NVRTC-only test binary, GPU suite,
# SASS and sanitizer phases): the anchors (.devdeps/bench/anchors_h200.py, in the background
# while the Release build runs, as gpu-check does), cuda_bench (the library matmul beside
# in-binary cuBLAS, alternating; the row kernels), torch's cuBLAS GEMMs again after it
# (bench/torch_gemm.py), gpu-check's table (--summary-only), then, while time is left, the
# planning / layout emitter A/B of bench/session50_gpu.sh. From the repo root on the GPU machine:
#   source .devdeps/setup.sh && bash bench/session50_anchors.sh
# Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp/session50}
mkdir -p "$R"
exec > >(tee -a "$R/session50_anchors.log") 2>&1
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
( OUT="$R" timeout 420 python3 .devdeps/bench/anchors_h200.py > "$R/anchors.log" 2>&1 ) &
ANCHORS=$!
gpu_build tessera cuda_bench
wait "$ANCHORS" || echo "the anchors script failed (anchors.log)"
tail -3 "$R/anchors.log"
echo "=== cuda_bench ($(( $(date +%s) - S0 )) s)"
timeout 300 "$B/bin/cuda_bench" --json "$R/cuda_bench.json" > "$R/cuda_bench.log" 2>&1 || echo "cuda_bench failed or timed out"
grep -v "^cuda_bench: device" "$R/cuda_bench.log" | tail -40
echo "=== torch cuBLAS after ($(( $(date +%s) - S0 )) s)"
timeout 100 python3 bench/torch_gemm.py "$R/anchors_after.json" > "$R/anchors_after.log" 2>&1 || echo "torch_gemm failed"
echo "=== table ($(( $(date +%s) - S0 )) s)"
OUT="$R" tools/gpu-check --summary-only
echo "=== A/B planning (0) vs layouts (1), median ms, while time is left ($(( $(date +%s) - S0 )) s)"
for s in M=1,N=4608,K=3584 M=32,N=4096,K=4096 M=200,N=400,K=4096 M=128,N=1536,K=7168 M=16,N=4096,K=4096; do
  [ $(( $(date +%s) - S0 )) -gt 540 ] && { echo "(out of time)"; break; }
  line="$s"
  for round in 1 2 3; do
    for env in 0 1; do
      ms=$(TESSERA_CUDA_FROM_LAYOUTS=$env timeout 30 "$B/bin/tessera" bench matmul --dtype bf16 -b cuda --size "$s" --reps 200 --warmup 20 2>&1 |
           grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)
      line="$line ${env}:${ms:-?}"
    done
  done
  echo "$line"
done
echo "[$(( $(date +%s) - S0 )) s] done"
