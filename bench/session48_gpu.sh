#!/usr/bin/env bash
# Session 48 (issue 16): the layout emitter as the default (CudaTarget::Emitter::Auto). The
# whole GPU suite (ctest -L gpu) as it is now (the default) and with every kernel on the
# planning emitter (TESSERA_CUDA_FROM_LAYOUTS=0, as before the flip), from the repo root on
# the GPU machine:
#   source .devdeps/setup.sh && bash bench/session48_gpu.sh
# Logs in $OUT: ctest_default.log, ctest_planning.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session48.log") 2>&1
gpu_build tessera tessera_gpu_tests
nvidia-smi --query-gpu=name --format=csv,noheader
for em in default planning; do
  # (the planning emitter's run, the baseline, only while the call has time for it)
  [ $em = planning ] && [ $(( $(date +%s) - S0 )) -gt ${PLANNING_BEFORE_S:-300} ] && { echo "planning run skipped (time)"; continue; }
  echo "=== ctest -L gpu, $em emitter ($(( $(date +%s) - S0 )) s)"
  env $([ $em = planning ] && echo TESSERA_CUDA_FROM_LAYOUTS=0) timeout 280 ctest --test-dir "$B" -L gpu -j8 \
    --output-on-failure --timeout 200 > "$R/ctest_$em.log" 2>&1
  grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$R/ctest_$em.log" | head -60
  if [ $em = default ]; then
    echo "=== the default's failures, first lines ($(( $(date +%s) - S0 )) s)"
    grep -E -A6 ": Failure$" "$R/ctest_$em.log" | head -150
  fi
done
echo "[$(( $(date +%s) - S0 )) s] done"
