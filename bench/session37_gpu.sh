#!/usr/bin/env bash
# Session 37's GPU call (about 5 minutes on a cold machine), from the repo root:
#   source .devdeps/setup.sh && bash bench/session37_gpu.sh
# 1. The layout emitter's GPU tests (every corpus kernel on the device's target and on the
#    mma.sync path, the bf16 matmul at a ragged size, persistent and ping-pong kernels): the
#    cp.async rings now take one CTA barrier an iteration and copy whole tiles without per-chunk
#    tests, and the TMA rings' copies carry hint-l2-policy's L2 hints.
# 2. cuda_bench under both emitters (ROUNDS=a of bench/emitters_gpu.sh): the mma.sync matmul
#    (was 2.03x the planning emitter's time on the H100) and the 128-row GEMM (1.10x).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session37.log") 2>&1
gpu_build tessera tessera_gpu_tests cuda_bench
timeout 200 ctest --test-dir "$B" -L gpu -R "LayoutEmitterGpu" -j8 --timeout 190 --output-on-failure > "$R/ctest37.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Failure|SEGFAULT" "$R/ctest37.log" | head -12
echo "[$(( $(date +%s) - S0 )) s] ctest"
for L in 0 1; do
  TESSERA_CUDA_FROM_LAYOUTS=$L timeout 60 $B/bin/tessera run matmul -b cuda --check --dtype bf16 --size M=128,N=14336,K=4096 2>&1 | tail -1
done
echo "[$(( $(date +%s) - S0 )) s] checks"
PART=2 ROUNDS=a S0=$S0 timeout 300 bash bench/emitters_gpu.sh 2>&1 | tail -45
echo "[$(( $(date +%s) - S0 )) s] done"
