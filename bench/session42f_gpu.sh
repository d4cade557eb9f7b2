#!/usr/bin/env bash
# Session 42's seventh GPU call (issue 16), from the repo root (about 5 minutes):
#   source .devdeps/setup.sh && bash bench/session42f_gpu.sh
# The ring's refill at the iteration's top by default (TESSERA_CUDA_REFILL_IN_DOT=1 the former
# place) with swizzle-mma-operands' 128- and 64-byte swizzles: the layout emitter's GPU tests,
# `run --check` of the kernels whose layout-emitter source changed (cuda:sm_90: the mma.sync
# path), and `tessera bench` medians (no L2 flush), three rounds alternated, planning /
# layouts / layouts with TESSERA_CUDA_REFILL_IN_DOT=1.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session42f.log") 2>&1
gpu_build tessera tessera_gpu_tests
T=$B/bin/tessera
echo "=== GPU tests ($(( $(date +%s) - S0 )) s)"
timeout 300 "$B/bin/tessera_gpu_tests" --gtest_filter='*LayoutEmitter*:*OverrideDir*' 2>&1 |
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|fell back|Which is|error:" | head -40
echo "=== checks ($(( $(date +%s) - S0 )) s)"
export TESSERA_CUDA_FROM_LAYOUTS=1
for k in matmul matmul_struct; do
  for s in M=1000,N=776,K=1504 M=77,N=70,K=40 M=256,N=512,K=192; do
    echo "$k bf16 $s: $(timeout 60 $T run $k -b cuda:sm_90 --check --dtype bf16 --size $s 2>&1 | tail -1)"
  done
done
for dt in bf16 f32; do
  echo "matmul_fp8 $dt: $(timeout 60 $T run matmul_fp8 -b cuda:sm_90 --check --dtype $dt --size M=300,N=520,K=200 2>&1 | tail -1)"
done
for f in flash_attention_bf16 flash_attention_fwd attention_three_loops; do
  echo "$f: $(timeout 60 $T run tests/corpus/$f.tile -b cuda:sm_90 --check --size H=2,S=100,T=150,DH=64 2>&1 | tail -1)"
done
for f in matmul_bias_gelu swiglu; do
  echo "$f: $(timeout 60 $T run tests/corpus/$f.tile -b cuda:sm_90 --check --size M=300,N=520,K=200 2>&1 | tail -1)"
done
echo "int4_dequant_matmul: $(timeout 60 $T run tests/corpus/int4_dequant_matmul.tile -b cuda:sm_90 --check --size M=37,N=45,K=150,KP=75,G=3 2>&1 | tail -1)"
echo "=== speed ($(( $(date +%s) - S0 )) s)"
run_ms() { timeout 60 "$@" 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2; }
for round in a b c; do
  for k in matmul_struct matmul matmul_fp8; do
    a="$k -b cuda:sm_90 --dtype bf16 --size M=4096,N=4096,K=4096 --reps 30"
    echo "$k 4096^3 cuda:sm_90 round $round: planning $(TESSERA_CUDA_FROM_LAYOUTS=0 run_ms $T bench $a) layouts $(run_ms $T bench $a)" \
      "in_dot $(TESSERA_CUDA_REFILL_IN_DOT=1 run_ms $T bench $a)"
  done
  a="tests/corpus/flash_attention_bf16.tile -b cuda:sm_90 --size H=64,S=4096,T=4096,DH=64 --reps 10"
  echo "flash_attention_bf16 H=64 S=T=4096 D=64 cuda:sm_90 round $round: layouts $(run_ms $T bench $a) in_dot $(TESSERA_CUDA_REFILL_IN_DOT=1 run_ms $T bench $a)"
done
echo "[$(( $(date +%s) - S0 )) s] done"
