#!/usr/bin/env bash
# Session 42's fifth GPU call (issue 16): session42c_gpu.sh again after the ldmatrix addresses' lane part was made one value per lane (the fourth call's addressing took 255 registers), from the repo root (about 5 minutes):
#   source .devdeps/setup.sh && bash bench/session42d_gpu.sh
# swizzle-mma-operands (mma.sync operand tiles 128-byte swizzled instead of padded rows, after
# session 42's counters showed the padded rows splitting every cp.async's 32-byte pieces): the
# layout emitter's GPU tests, `run --check` of the kernels it changes at ragged sizes on
# cuda:sm_90 and cuda:sm_80-compiled paths, and `tessera bench` medians (no L2 flush), three
# rounds alternated: planning emitter / layouts (swizzled) / layouts with
# --disable-pass swizzle-mma-operands (padded, as before; TESSERA_NO_SWIZZLE_MMA_OPERANDS=1 when it ran), for the mma.sync matmul, matmul_struct
# and FlashAttention bf16 on cuda:sm_90.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session42d.log") 2>&1
gpu_build tessera tessera_gpu_tests
T=$B/bin/tessera
echo "=== GPU tests ($(( $(date +%s) - S0 )) s)"
timeout 300 "$B/bin/tessera_gpu_tests" --gtest_filter='*LayoutEmitter*' 2>&1 |
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|fell back|Which is|error:" | head -40
echo "=== checks ($(( $(date +%s) - S0 )) s)"
export TESSERA_CUDA_FROM_LAYOUTS=1
for dt in bf16 f16; do
  for k in matmul matmul_struct; do
    for s in M=1000,N=776,K=1504 M=129,N=131,K=64 M=256,N=512,K=192; do
      echo "$k $dt $s: $(timeout 60 $T run $k -b cuda:sm_90 --check --dtype $dt --size $s 2>&1 | tail -1)"
    done
  done
done
for f in flash_attention_bf16 flash_attention_fwd attention_three_loops; do
  echo "$f: $(timeout 60 $T run tests/corpus/$f.tile -b cuda:sm_90 --check --size H=2,S=100,T=150,DH=64 2>&1 | tail -1)"
done
echo "matmul_bias_gelu: $(timeout 60 $T run tests/corpus/matmul_bias_gelu.tile -b cuda:sm_90 --check --size M=300,N=520,K=200 2>&1 | tail -1)"
echo "$(timeout 60 $T run tests/corpus/flash_attention_bf16.tile -b cuda:sm_90 --check --size H=3,S=200,T=333,DH=64 2>&1 | tail -1)"
echo "=== speed ($(( $(date +%s) - S0 )) s)"
run_ms() { timeout 60 "$@" 2>&1 | grep -o 'median_ms=[0-9.e+-]*'; }
for round in a b c; do
  for k in matmul matmul_struct; do
    a="$k -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096 --reps 30"
    p=$(TESSERA_CUDA_FROM_LAYOUTS=0 run_ms $T bench $a)
    l=$(run_ms $T bench $a)
    n=$(run_ms $T bench $a --disable-pass swizzle-mma-operands)
    echo "$k 4096^3 cuda:sm_90 round $round: planning $p swizzled $l padded $n"
  done
  a="tests/corpus/flash_attention_bf16.tile -b cuda:sm_90 --size H=64,S=4096,T=4096,DH=64 --reps 10"
  p=$(TESSERA_CUDA_FROM_LAYOUTS=0 run_ms $T bench $a)
  l=$(run_ms $T bench $a)
  n=$(run_ms $T bench $a --disable-pass swizzle-mma-operands)
  echo "flash_attention_bf16 H=64 S=T=4096 D=64 cuda:sm_90 round $round: planning $p swizzled $l padded $n"
done
echo "[$(( $(date +%s) - S0 )) s] done"
