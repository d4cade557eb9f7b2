#!/usr/bin/env bash
# Session 40's second GPU call (issue 16), from the repo root (about 5 minutes on a cold machine):
#   source .devdeps/setup.sh && bash bench/session40b_gpu.sh
# 1. The layout emitter's GPU tests (the corpus, the library in every dtype, matmul_fp8 on wgmma
#    and, new, on mma.sync m16n8k32 through cuda:sm_90), after the casts that only stores read
#    stopped rounding (the stores round once) and the TMA store's pairs became one cvt each;
# 2. `tessera bench` medians (no L2 flush), planning and layout emitters alternated, three
#    rounds: matmul_fp8 bf16 4096^3 and 8192^3 (sm_90a, wgmma), matmul bf16 4096^3 and 8192^3,
#    matmul_fp8 4096^3 on cuda:sm_90 (mma.sync e4m3, new in the layout emitter), softmax and
#    layernorm bf16 at 4096 x 32768 and 16384 x 4096, topk f32 at 64 x 131072 k = 64 and 1 x 2^24
#    k = 1024 (after the blocked-layout cap: fewer replicated histogram slots).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session40b.log") 2>&1
gpu_build tessera tessera_gpu_tests
T=$B/bin/tessera
echo "=== 1. the layout emitter's GPU tests ($(( $(date +%s) - S0 )) s)"
timeout 300 "$B/bin/tessera_gpu_tests" --gtest_filter='*LayoutEmitter*' 2>&1 |
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|error:|tests? ran" | head -40
for dt in bf16 f16; do
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T run matmul_fp8 -b cuda:sm_90 --check --dtype $dt --size M=1000,N=777,K=1500 2>&1 | tail -1
done
echo "=== 2. speed ($(( $(date +%s) - S0 )) s)"
bench_one() {  # NAME BACKEND DTYPE SIZE
  for v in planning layouts; do
    ms=$(env $([ $v = layouts ] && echo TESSERA_CUDA_FROM_LAYOUTS=1) timeout 60 $T bench $1 -b $2 --dtype $3 --size $4 --reps 30 2>&1 |
      grep -o 'median_ms=[0-9.e+-]*')
    echo "$1 $3 $4 $2 $v round $round: $ms"
  done
}
for round in a b c; do
  bench_one matmul_fp8 cuda bf16 M=4096,N=4096,K=4096
  bench_one matmul_fp8 cuda bf16 M=8192,N=8192,K=8192
  bench_one matmul cuda bf16 M=4096,N=4096,K=4096
  bench_one matmul cuda bf16 M=8192,N=8192,K=8192
  bench_one matmul_fp8 cuda:sm_90 bf16 M=4096,N=4096,K=4096
  bench_one softmax cuda bf16 M=4096,N=32768
  bench_one softmax cuda bf16 M=16384,N=4096
  bench_one layernorm cuda bf16 M=4096,N=32768
  bench_one topk cuda f32 M=64,N=131072,K=64
  bench_one topk cuda f32 M=1,N=16777216,K=1024
done
echo "[$(( $(date +%s) - S0 )) s] done"
