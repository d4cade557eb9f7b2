#!/usr/bin/env bash
# Ready for the next session's GPU call (about 4 minutes on a cold machine), from the repo root:
#   source .devdeps/setup.sh && bash bench/session38_gpu.sh
# Session 37 left its last changes unmeasured on a GPU; this call checks and times them:
# 1. The GPU tests of both emitters' row kernels and the layout emitter (the cuda default for
#    softmax / layernorm / rmsnorm is now the whole-row tile up to 32768 columns; the layout
#    emitter's ring prologue is a loop), and --check of the row kernels at the sizes where the
#    new default applies (ragged: 37 x 3001, 5 x 20000, 3 x 32768), both emitters.
# 2. A/B of TESSERA_CUDA_U32_SHARED_COPIES=1 (cp.async addresses from one 32-bit shared base,
#    unsigned stage arithmetic: ~5 PTX instructions a copy instead of ~13) on the layout
#    emitter's mma.sync matmul: cuda_bench --only matmul, its mma_sync lines, switch off / on /
#    off (the planning emitter's 128x256x64 ran 422 TFLOP/s, the layout emitter's 291, H100).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session38.log") 2>&1
gpu_build tessera tessera_gpu_tests cuda_bench
timeout 200 ctest --test-dir "$B" -L gpu -R "LayoutEmitterGpu|ProgramPrefetchGpu|RowBlocksGpu|LibraryGpu\." -j8 --timeout 190 \
  --output-on-failure > "$R/ctest38.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Failure|SEGFAULT" "$R/ctest38.log" | head -12
echo "[$(( $(date +%s) - S0 )) s] ctest"
for L in 0 1; do
  for dt in f32 bf16; do
    for k in softmax layernorm rmsnorm; do
      for s in M=37,N=3001 M=5,N=20000 M=3,N=32768; do
        TESSERA_CUDA_FROM_LAYOUTS=$L timeout 60 $B/bin/tessera run $k -b cuda --check --dtype $dt --size $s 2>&1 | tail -1
      done
    done
  done
done
echo "[$(( $(date +%s) - S0 )) s] checks"
for mode in off on off; do
  envs="TESSERA_CUDA_FROM_LAYOUTS=1"
  [ $mode = on ] && envs="$envs TESSERA_CUDA_U32_SHARED_COPIES=1"
  echo "=== cuda_bench --only matmul, layouts, u32 shared copies $mode"
  env $envs timeout 150 $B/bin/cuda_bench --only matmul 2>&1 | grep -E "mma_sync 128x256x64  |mma_sync 128x128x64  |^matmul_mma_sync" | cut -c1-160
done
echo "[$(( $(date +%s) - S0 )) s] done"
