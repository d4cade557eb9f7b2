#!/usr/bin/env bash
# Session 42's sixth GPU call (issue 16), from the repo root (about 5 minutes):
#   source .devdeps/setup.sh && bash bench/session42e_gpu.sh
# swizzle-mma-operands with the 64-byte swizzle for 64-byte rows (matmul_struct's A [64, 32]):
# the layout emitter's GPU tests, `run --check` of matmul_struct at ragged sizes (K not a
# multiple of 32: the edge copies into the swizzled tile) and the corpus kernels it changes on
# cuda:sm_90; then `tessera bench` medians (no L2 flush), three rounds alternated, of the
# planning emitter, the layout emitter (swizzled), with --disable-pass swizzle-mma-operands (TESSERA_NO_SWIZZLE_MMA_OPERANDS=1 when it ran)
# (padded) and with TESSERA_CUDA_REFILL_AT_TOP=1 (the ring's refill at the iteration's top for
# every loop: session 42's variant l3 of matmul_struct was 4.5% faster so; session 39 found
# the big matmul 8% slower so), for matmul_struct, the mma.sync matmul and FlashAttention bf16.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session42e.log") 2>&1
gpu_build tessera tessera_gpu_tests
T=$B/bin/tessera
echo "=== GPU tests ($(( $(date +%s) - S0 )) s)"
timeout 300 "$B/bin/tessera_gpu_tests" --gtest_filter='*LayoutEmitter*' 2>&1 |
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|fell back|Which is|error:" | head -40
echo "=== checks ($(( $(date +%s) - S0 )) s)"
export TESSERA_CUDA_FROM_LAYOUTS=1
for dt in bf16 f16; do
  for s in M=1000,N=776,K=1504 M=129,N=131,K=64 M=256,N=512,K=192 M=77,N=70,K=40 M=200,N=72,K=100; do
    echo "matmul_struct $dt $s: $(timeout 60 $T run matmul_struct -b cuda:sm_90 --check --dtype $dt --size $s 2>&1 | tail -1)"
  done
  echo "matmul_struct $dt refill at top: $(TESSERA_CUDA_REFILL_AT_TOP=1 timeout 60 $T run matmul_struct -b cuda:sm_90 --check --dtype $dt --size M=200,N=72,K=100 2>&1 | tail -1)"
done
for f in matmul_bias_gelu swiglu; do
  echo "$f: $(timeout 60 $T run tests/corpus/$f.tile -b cuda:sm_90 --check --size M=300,N=520,K=200 2>&1 | tail -1)"
done
echo "=== speed ($(( $(date +%s) - S0 )) s)"
run_ms() { timeout 60 "$@" 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2; }
for round in a b c; do
  for k in matmul_struct matmul; do
    a="$k -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096 --reps 30"
    echo "$k 4096^3 cuda:sm_90 round $round: planning $(TESSERA_CUDA_FROM_LAYOUTS=0 run_ms $T bench $a) swizzled $(run_ms $T bench $a)" \
      "padded $(run_ms $T bench $a --disable-pass swizzle-mma-operands) top $(TESSERA_CUDA_REFILL_AT_TOP=1 run_ms $T bench $a)"
  done
  a="tests/corpus/flash_attention_bf16.tile -b cuda:sm_90 --size H=64,S=4096,T=4096,DH=64 --reps 10"
  echo "flash_attention_bf16 H=64 S=T=4096 D=64 cuda:sm_90 round $round: swizzled $(run_ms $T bench $a) top $(TESSERA_CUDA_REFILL_AT_TOP=1 run_ms $T bench $a)"
done
echo "[$(( $(date +%s) - S0 )) s] done"
