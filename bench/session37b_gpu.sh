#!/usr/bin/env bash
# Session 37's third call (about 4 minutes on a cold machine), from the repo root:
#   source .devdeps/setup.sh && bash bench/session37b_gpu.sh
# 1. The layout emitter's GPU tests (the corpus on the device's target and on the mma.sync
#    path, library kernels at ragged sizes), then --check on the layout emitter of the looped
#    row kernels (rows wider than their chunk: each chunk's reductions now exchange through
#    words of their own, one barrier each) and of topk (its reductions too).
# 2. cuda_bench under both emitters (ROUNDS=a of bench/emitters_gpu.sh): the mma.sync matmul
#    now loads step k + 1's fragments while step k's mma instructions run (was 1.51x), and the
#    4096 x 32768 softmax / layernorm (1.125 / 1.090).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session37b.log") 2>&1
gpu_build tessera tessera_gpu_tests cuda_bench
timeout 150 ctest --test-dir "$B" -L gpu -R "LayoutEmitterGpu" -j8 --timeout 140 --output-on-failure > "$R/ctest37b.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Failure|SEGFAULT" "$R/ctest37b.log" | head -12
echo "[$(( $(date +%s) - S0 )) s] ctest"
for dt in f32 bf16; do
  for k in softmax layernorm rmsnorm; do
    TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $B/bin/tessera run $k -b cuda --check --dtype $dt --size M=37,N=40003 2>&1 | tail -1
  done
done
TESSERA_CUDA_FROM_LAYOUTS=1 topk_checks
echo "[$(( $(date +%s) - S0 )) s] checks"
PART=2 ROUNDS=a S0=$S0 timeout 300 bash bench/emitters_gpu.sh 2>&1 | tail -45
echo "[$(( $(date +%s) - S0 )) s] done"
