#!/usr/bin/env bash
# Session 34's GPU call (run once that session, late: bench/RESULTS.md "Session 34 (H200)"), from the repo root, one call of
# under 10 minutes that gives the most where a device comes rarely:
#
#   source .devdeps/setup.sh && bash bench/session34_gpu.sh
#
# 1. The Release build of everything (the GPU tests too).
# 2. `ctest -L gpu`: no GPU test has run since session 31, and topk's default generated code
#    changed in session 33 (one packed reduction per digit pass; TopkStagesGpu, new, checks its
#    stages exact under both emitters and the one-barrier scans).
# 3. cuda_bench topk (L2 flushed) with and without TESSERA_CUDA_ONE_BARRIER_SCANS=1, one round,
#    and torch.topk in the same call: session 33's prediction was the default 3-8% under
#    session 32's 0.0727 ms (f32 k = 64), the switch 2-5% more.
# Then, if the machine is still warm: bench/session33_gpu.sh (two rounds, HIST_SKIP too).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
# Every line also goes to $OUT/session34.log (what a call cut at its limit still returns).
mkdir -p "${OUT:-/tmp}"
exec > >(tee -a "${OUT:-/tmp}/session34.log") 2>&1
echo "=== build ($(( $(date +%s) - S0 )) s)"
gpu_build all
echo "=== ctest -L gpu ($(( $(date +%s) - S0 )) s)"
timeout 220 ctest --test-dir "$B" -L gpu -j8 --timeout 180 > /tmp/s34_ctest.log 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|SEGFAULT|Exception" /tmp/s34_ctest.log | head -30
cp /tmp/s34_ctest.log "${OUT:-/tmp}/" 2>/dev/null
for sw in "" "TESSERA_CUDA_ONE_BARRIER_SCANS=1"; do
  echo "--- cuda_bench topk: ${sw:-default} ($(( $(date +%s) - S0 )) s)"
  env $sw timeout 70 "$B/bin/cuda_bench" --only topk 2>&1 | grep -E "^topk " | awk '{print $1, $2, $3, $4}'
done
timeout 90 python3 bench/torch_topk.py f32:64x131072:64 f32:64x131072:256 f32:64x131072:1024 bf16:64x131072:64 f32:1x16777216:1024 2>&1 | tail -5
echo "[$(( $(date +%s) - S0 )) s] done"
