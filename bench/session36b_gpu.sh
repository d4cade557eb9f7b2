#!/usr/bin/env bash
# Session 36's last call (about 3 minutes on a cold machine), from the repo root:
#   source .devdeps/setup.sh && bash bench/session36b_gpu.sh
# 1. The layout emitter's GPU tests: the corpus's dot kernels on the mma.sync path (new), the
#    persistent wgmma matmul, and the corpus matmul kernels on the device's own target.
# 2. The 128-row GEMM (BLOCK_M = 64: now 4 warps, wgmma) under both emitters: --check, then
#    `tessera bench` medians (no L2 flush: the two emitters against each other only).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session36b.log") 2>&1
gpu_build tessera tessera_gpu_tests
timeout 150 ctest --test-dir "$B" -L gpu -R "LayoutEmitterGpu\.(MmaSync|Persistent)|LayoutEmitterGpu.MatchesInterpreter/(matmul|swiglu)" \
  -j8 --timeout 140 --output-on-failure > "$R/ctest36b.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Failure|SEGFAULT" "$R/ctest36b.log" | head -12
echo "[$(( $(date +%s) - S0 )) s] ctest"
for L in 0 1; do
  TESSERA_CUDA_FROM_LAYOUTS=$L timeout 60 $B/bin/tessera run matmul -b cuda --check --dtype bf16 --size M=128,N=14336,K=4096 2>&1 | tail -1
  echo "layouts=$L $(TESSERA_CUDA_FROM_LAYOUTS=$L timeout 60 $B/bin/tessera bench matmul -b cuda --dtype bf16 --size M=128,N=14336,K=4096 --reps 100 2>&1 | tail -1)"
done
echo "[$(( $(date +%s) - S0 )) s] done"
