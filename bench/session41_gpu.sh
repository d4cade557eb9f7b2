#!/usr/bin/env bash
# Ready for session 41's first GPU call (issue 16), from the repo root (about 6 minutes cold):
#   source .devdeps/setup.sh && bash bench/session41_gpu.sh
# 1. The layout emitter's GPU tests (`*LayoutEmitter*`), which b279827 (tsr::smem_addr, the float
#    max/min broadcast, the TMA tests at K 112 / 272 with a TMA-presence check) has not run yet;
# 2. `tessera bench` medians (no L2 flush), three rounds alternated: the mma.sync matmul 4096^3
#    on cuda:sm_90 under planning / layouts / layouts with TESSERA_CUDA_ASM_SMEM=1 (smem_addr's
#    A/B); the wgmma matmul and matmul_fp8 at 4096^3 (planning / layouts); topk f32 64 x 131072
#    k = 64 (planning / layouts).
# (As run at 940165d. Since 0e39634 smem_u32 is the default and TESSERA_CUDA_SMEM_ADDR=1 prints
# smem_addr: the "asm-smem" arm now prints the default code.)
# Then, if time is left in the call: ROUNDS=a PART=2 bash bench/emitters_gpu.sh and the anchors.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session41.log") 2>&1
gpu_build tessera tessera_gpu_tests
T=$B/bin/tessera
echo "=== 1. the layout emitter's GPU tests ($(( $(date +%s) - S0 )) s)"
timeout 300 "$B/bin/tessera_gpu_tests" --gtest_filter='*LayoutEmitter*' 2>&1 |
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|fell back|no TMA|Which is|error:" | head -40
echo "=== 2. speed ($(( $(date +%s) - S0 )) s)"
arm() {  # LABEL ENV... -- ARGS...
  local label=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  ms=$(env "${envs[@]}" timeout 60 $T bench "$@" --reps 30 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
  echo "$label round $round: $ms"
}
for round in a b c; do
  mm="matmul -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096"
  arm "mma.sync 4096^3 planning" X=0 -- $mm
  arm "mma.sync 4096^3 layouts" TESSERA_CUDA_FROM_LAYOUTS=1 -- $mm
  arm "mma.sync 4096^3 layouts asm-smem" TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_CUDA_ASM_SMEM=1 -- $mm
  for k in matmul matmul_fp8; do
    arm "$k 4096^3 sm_90a planning" X=0 -- $k -b cuda --dtype bf16 --size M=4096,N=4096,K=4096
    arm "$k 4096^3 sm_90a layouts" TESSERA_CUDA_FROM_LAYOUTS=1 -- $k -b cuda --dtype bf16 --size M=4096,N=4096,K=4096
  done
  arm "topk f32 64x131072 k=64 planning" X=0 -- topk -b cuda --dtype f32 --size M=64,N=131072,K=64
  arm "topk f32 64x131072 k=64 layouts" TESSERA_CUDA_FROM_LAYOUTS=1 -- topk -b cuda --dtype f32 --size M=64,N=131072,K=64
done
echo "[$(( $(date +%s) - S0 )) s] done"
