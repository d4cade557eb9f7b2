#!/usr/bin/env bash
# Session 48 (issue 16): can the layout emitter be the default? The whole GPU suite
# (ctest -L gpu) under TESSERA_CUDA_FROM_LAYOUTS=1, beside the same suite as it is (the
# planning emitter), from the repo root on the GPU machine:
#   source .devdeps/setup.sh && bash bench/session48_gpu.sh
# Logs in $OUT: ctest_planning.log, ctest_layouts.log. Tests that look at the planning
# emitter's own stats or source are expected to fail under the layout emitter; a wrong result
# (a Failure with "max" or "mismatch") is what would block the flip.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session48.log") 2>&1
gpu_build tessera tessera_gpu_tests tessera_cuda_tests cuda_bench
nvidia-smi --query-gpu=name --format=csv,noheader
for em in planning layouts; do
  echo "=== ctest -L gpu, $em emitter ($(( $(date +%s) - S0 )) s)"
  env $([ $em = layouts ] && echo TESSERA_CUDA_FROM_LAYOUTS=1) timeout 280 ctest --test-dir "$B" -L gpu -j8 \
    --output-on-failure --timeout 200 > "$R/ctest_$em.log" 2>&1
  grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$R/ctest_$em.log" | head -60
done
echo "[$(( $(date +%s) - S0 )) s] done"
