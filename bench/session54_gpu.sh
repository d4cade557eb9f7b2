#!/usr/bin/env bash
# Session 54 (issue 16): stream-k-programs (stream_k = 1 as IR) on a GPU. The stream-K GPU tests
# (WgmmaGpu.StreamK*: both emitters; PersistentKnobs: the default's, now the layout emitter's),
# then the bf16 matmul with stream_k = 1 on the planning emitter (TESSERA_CUDA_FROM_LAYOUTS=0,
# P) and the layout emitter (=1, L), and the layout emitter's whole tiles (stream_k = 0, W), in
# alternating rounds of `tessera bench` (median ms, no L2 flush: a ratio between forms, not
# against cuBLAS), each shape followed by a `run --check` of the layout emitter's stream-K;
# before that the bf16 row kernels with the layout emitter's paired 16-bit stores (pair_stores
# = 1, the default) and without (0).
# From the repo root on the GPU machine:
#   source .devdeps/setup.sh && bash bench/session54_gpu.sh
# SHAPES="M=..,N=..,K=.. ..." the A/B's shapes; AB_S the seconds after which no shape starts;
# CTEST_R the GPU tests' regex. Logs in $OUT: ctest_stream_k.log, session54.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session54.log") 2>&1
gpu_build tessera tessera_gpu_tests
nvidia-smi --query-gpu=name --format=csv,noheader
echo "=== ctest ${CTEST_R:-StreamK|PersistentKnobs|SplitK} ($(( $(date +%s) - S0 )) s)"
timeout ${CTEST_S:-200} ctest --test-dir "$B" -L gpu -R "${CTEST_R:-StreamK|PersistentKnobs|SplitK}" -j4 --output-on-failure \
  --timeout 150 > "$R/ctest_stream_k.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$R/ctest_stream_k.log" | head -20
grep -E -A8 ": Failure$" "$R/ctest_stream_k.log" | head -60
echo "=== row kernels, layouts: pair_stores 1 (the default) vs 0, median ms ($(( $(date +%s) - S0 )) s)"
# (The library kernels declare no pair_stores: a copy of each as the first pass sees it, with
# the knob declared, at BLOCK_N = the row.)
for op in softmax layernorm rmsnorm; do
  "$B/bin/tessera" compile $op --dtype bf16 --dump-after verify 2>&1 >/dev/null | tail -n +2 |
    sed '1a\  constexpr pair_stores = 1' > "$R/$op.pairs.tile"
  for s in M=16384,N=4096 M=4096,N=32768; do
    [ $(( $(date +%s) - S0 )) -gt ${AB_S:-540} ] && { echo "(out of time)"; break 2; }
    line="$op $s"
    for round in 1 2 3; do
      for p in 1 0; do
        ms=$(timeout 30 "$B/bin/tessera" bench "$R/$op.pairs.tile" -b cuda --size "$s" --reps 100 --warmup 10 \
               --config pair_stores=$p --config BLOCK_N=${s##*N=} 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)
        line="$line $p:${ms:-?}"
      done
    done
    echo "$line"
  done
done
echo "=== A/B median ms: P planning stream_k=1, L layouts stream_k=1, W layouts whole tiles ($(( $(date +%s) - S0 )) s)"
for s in ${SHAPES:-M=1024,N=4608,K=3584 M=4096,N=4096,K=4096 M=2048,N=5120,K=8192 M=4096,N=14336,K=4096}; do
  [ $(( $(date +%s) - S0 )) -gt ${AB_S:-540} ] && { echo "(out of time)"; break; }
  line="$s"
  for round in 1 2 3; do
    for v in P L W; do
      env=$([ $v = P ] && echo 0 || echo 1); c=$([ $v = W ] && echo 0 || echo 1)
      ms=$(TESSERA_CUDA_FROM_LAYOUTS=$env timeout 40 "$B/bin/tessera" bench matmul --dtype bf16 -b cuda --size "$s" \
             --reps 100 --warmup 10 --config stream_k=$c 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)
      line="$line $v:${ms:-?}"
    done
  done
  echo "$line"
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 "$B/bin/tessera" run matmul -b cuda --check --dtype bf16 --size "$s" \
    --config stream_k=1 2>&1 | tail -1
done
echo "[$(( $(date +%s) - S0 )) s] done"
