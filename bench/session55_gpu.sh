#!/usr/bin/env bash
# Session 55 (issue 16): cluster-programs (cluster_size as IR, the layout emitter on clusters)
# on a GPU, then what session 54 left unrun. In order, each bounded:
#  1. the cluster GPU tests on the layout emitter (TESSERA_CUDA_FROM_LAYOUTS=1; Auto still sends
#     cluster_size to the planning emitter until they pass);
#  2. every GPU test (ctest -L gpu, CTEST_S seconds);
#  3. the row kernels at 4096 x 32768 bf16 with cluster_size = 8 on the planning emitter (P)
#     and the layout emitter (L), and without clusters (1: the layout emitter), median ms of
#     `tessera bench` in alternating rounds (a ratio between forms);
#  4. the stream-K A/B of session 54 (bench/session54_gpu.sh's last part: P/L/W).
# From the repo root on the GPU machine:
#   source .devdeps/setup.sh && bash bench/session55_gpu.sh
# PARTS="3 4" runs only those parts (default all), ROWS the row kernels of part 3.
# Logs in $OUT: ctest_cluster.log, ctest_gpu.log, session55.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session55.log") 2>&1
gpu_build tessera tessera_gpu_tests
nvidia-smi --query-gpu=name --format=csv,noheader
summary() {
  grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$1" | head -20
  grep -E -A8 ": Failure$" "$1" | head -40
}
part() { [[ " ${PARTS:-1 2 3 4} " == *" $1 "* ]]; }
part 1 && echo "=== 1. ClusterGpu on the layout emitter ($(( $(date +%s) - S0 )) s)"
part 1 && TESSERA_CUDA_FROM_LAYOUTS=1 timeout 150 ctest --test-dir "$B" -L gpu -R "ClusterGpu" -j2 --output-on-failure --timeout 140 \
  > "$R/ctest_cluster.log" 2>&1
part 1 && summary "$R/ctest_cluster.log"
part 2 && echo "=== 2. ctest -L gpu ($(( $(date +%s) - S0 )) s)"
part 2 && timeout ${CTEST_S:-260} ctest --test-dir "$B" -L gpu -j4 --output-on-failure --timeout 150 > "$R/ctest_gpu.log" 2>&1
part 2 && summary "$R/ctest_gpu.log"
echo "=== 3. rows 4096x32768 bf16, median ms: P planning cluster 8, L layouts cluster 8, 1 layouts one CTA ($(( $(date +%s) - S0 )) s)"
for op in $(part 3 && echo ${ROWS:-softmax layernorm rmsnorm}); do
  "$B/bin/tessera" compile $op --dtype bf16 --dump-after verify 2>&1 >/dev/null | tail -n +2 |
    sed '1a\  constexpr cluster_size = 8' > "$R/$op.cluster.tile"
  line="$op"
  for round in 1 2 3; do
    for v in P L 1; do
      env=$([ $v = P ] && echo 0 || echo 1); c=$([ $v = 1 ] && echo 1 || echo 8)
      [ $(( $(date +%s) - S0 )) -gt ${AB_S:-500} ] && { echo "(out of time)"; break 3; }
      ms=$(TESSERA_CUDA_FROM_LAYOUTS=$env timeout 30 "$B/bin/tessera" bench "$R/$op.cluster.tile" -b cuda --size M=4096,N=32768 \
             --reps 100 --warmup 10 --config cluster_size=$c --config BLOCK_N=32768 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)
      line="$line $v:${ms:-?}"
    done
  done
  echo "$line"
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 30 "$B/bin/tessera" run "$R/$op.cluster.tile" -b cuda --check --size M=37,N=30001 \
    --config cluster_size=8 --config BLOCK_N=32768 2>&1 | tail -1
done
echo "=== 4. stream-K A/B median ms: P planning stream_k=1, L layouts stream_k=1, W layouts whole tiles ($(( $(date +%s) - S0 )) s)"
for s in $(part 4 && echo ${SHAPES:-M=1024,N=4608,K=3584 M=4096,N=4096,K=4096}); do
  [ $(( $(date +%s) - S0 )) -gt ${AB_S:-500} ] && { echo "(out of time)"; break; }
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
done
echo "=== done ($(( $(date +%s) - S0 )) s)"
