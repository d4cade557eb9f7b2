#!/usr/bin/env bash
# Session 47 (issue 19): bf16 softmax on cpu with the relaxed exp (relax-exp-precision, the
# default) against the exact one (--disable-pass relax-exp-precision), each with the default
# streaming rule and with every row store streamed (TESSERA_CPU_STREAM_STORES=1), alternated,
# `tessera bench` medians in ms; then cpu_bench --rows (ratios to a memcpy of the same run).
#   bash bench/relaxed_exp_cpu.sh [ROUNDS]      (from the repo root, after a build)
set -uo pipefail
cd "$(dirname "$0")/.."
T=${T:-build/bin/tessera}
for r in $(seq "${1:-3}"); do
  for v in exact relaxed exact_streamed relaxed_streamed; do
    dis=(); [[ $v == exact* ]] && dis=(--disable-pass relax-exp-precision)
    st=""; [[ $v == *_streamed ]] && st=1
    ms=$(TESSERA_CPU_STREAM_STORES=$st "$T" bench softmax -b cpu --dtype bf16 --size M=4096,N=4096 --config BLOCK_N=4096 \
           --reps 30 "${dis[@]}" 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)
    printf '%s %s | ' "$v" "$ms"
  done
  echo
done
build/bin/cpu_bench --rows 2>&1 | grep -E "memcpy|4096x4096 (f32|bf16) cpu"
