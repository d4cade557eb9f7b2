#!/usr/bin/env bash
# Session 35's first GPU call, from the repo root (under 10 minutes on a cold machine):
#
#   source .devdeps/setup.sh && bash bench/session35_gpu.sh
#
# 1. The Release build of everything (the GPU tests too).
# 2. TopkStagesGpu, split in session 34 into one test per emitter setting (the combined test ran
#    past ctest's 180 s under -j8 there): each must pass within the limit.
#    And tests/corpus/int8_matmul.tile (new: 1-byte shared tiles for FMA dots) on both emitters.
# 3. bench/emitters_gpu.sh PART=1 (never run): every library kernel the layout emitter prints,
#    checked at ragged sizes, and topk under both emitters.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
mkdir -p "${OUT:-/tmp}"
exec > >(tee -a "${OUT:-/tmp}/session35.log") 2>&1
echo "=== build ($(( $(date +%s) - S0 )) s)"
gpu_build all
echo "=== ctest -R TopkStages|int8_matmul ($(( $(date +%s) - S0 )) s)"
timeout 240 ctest --test-dir "$B" -L gpu -R "TopkStages|int8_matmul" -j4 --timeout 180 > /tmp/s35_ctest.log 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Passed|SEGFAULT" /tmp/s35_ctest.log | head -12
echo "=== emitters PART=1 ($(( $(date +%s) - S0 )) s)"
S0=$S0 PART=1 bash bench/emitters_gpu.sh
