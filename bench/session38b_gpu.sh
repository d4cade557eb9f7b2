#!/usr/bin/env bash
# Session 38's GPU call for the pass prefetch-programs (the layout emitter's program prefetch),
# from the repo root (about 6 minutes on a cold machine):
#   source .devdeps/setup.sh && bash bench/session38b_gpu.sh
# 1. GPU tests (the layout emitter's cp.async copies now take 32-bit shared addresses always):
#    ProgramPrefetchGpu (now on both emitters; the layout emitter with one and two
#    buffers, loads in branches, a 2-D grid), the layout emitter's library and corpus tests.
# 2. topk checks on the layout emitter (its segment kernel now prefetches the next segment).
# 3. cuda_bench --only softmax / layernorm / rmsnorm / topk (bf16 rows 16384 x 4096 and
#    4096 x 32768, L2 flushed), planning then layouts, two rounds: the session-37 gaps were
#    1.41 / 1.32 / 1.12 at 32768 on the H200 (the planning emitter's program prefetch).
#    Predicted: within 3% of the planning emitter.
# 4. A/B of TESSERA_CUDA_REFILL_AT_TOP=1 on the layout emitter's mma.sync matmul (cuda_bench
#    --only matmul, mma_sync lines; off = the ring's refill after the dot's first k step, the
#    new default: 48 B of stack at 255 registers by ptxas; on = at the iteration's top as before).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session38b.log") 2>&1
gpu_build tessera tessera_gpu_tests cuda_bench
timeout 240 ctest --test-dir "$B" -L gpu -R "ProgramPrefetchGpu|LayoutEmitterGpu|LayoutEmitterLibraryGpu" -j8 --timeout 230 \
  --output-on-failure > "$R/ctest38b.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Failure|SEGFAULT" "$R/ctest38b.log" | head -20
echo "[$(( $(date +%s) - S0 )) s] ctest"
TESSERA_CUDA_FROM_LAYOUTS=1 topk_checks
echo "[$(( $(date +%s) - S0 )) s] topk checks"
rows() {
  local round=$1
  for em in planning layouts; do
    for k in softmax layernorm rmsnorm topk; do
      env $([ $em = layouts ] && echo TESSERA_CUDA_FROM_LAYOUTS=1) timeout 100 $B/bin/cuda_bench --only $k 2>&1 |
        grep -E "^$k " | sed "s/^/$em $round: /" | cut -c1-150
    done
  done
}
rows a
echo "[$(( $(date +%s) - S0 )) s] rows a"
for mode in off on off; do
  envs="TESSERA_CUDA_FROM_LAYOUTS=1"
  [ $mode = on ] && envs="$envs TESSERA_CUDA_REFILL_AT_TOP=1"
  echo "=== cuda_bench --only matmul, layouts, refill at top $mode"
  env $envs timeout 150 $B/bin/cuda_bench --only matmul 2>&1 | grep -E "mma_sync 128x256x64  |mma_sync 128x128x64  |^matmul_mma_sync" | cut -c1-160
done
echo "[$(( $(date +%s) - S0 )) s] refill A/B"
# The second round of rows while the call has time for it (10 minutes a call).
[ $(( $(date +%s) - S0 )) -lt 420 ] && rows b
echo "[$(( $(date +%s) - S0 )) s] done"
