#!/usr/bin/env bash
# Session 53 (issue 16): pair-programs (cluster_m = 2 as IR) and the f8 swap on a GPU. The CTA-pair and swapped-product GPU tests
# under both emitters (WgmmaGpu.ClusterPairs*: the planning emitter's pairs and the layout
# emitter's, which the default does not yet take), then the bf16 matmul with cluster_m = 2 on
# the planning emitter (TESSERA_CUDA_FROM_LAYOUTS=0) and the layout emitter (=1), and the layout
# emitter without pairs (cluster_m = 1), in alternating rounds of `tessera bench` (median ms, no
# L2 flush: a ratio between emitters, not against cuBLAS), each shape followed by a `run --check`
# of the layout emitter's pairs. From the repo root on the GPU machine:
#   source .devdeps/setup.sh && bash bench/session53_gpu.sh
# SHAPES="M=..,N=..,K=.. ..." the A/B's shapes; AB_S the seconds after which no shape starts;
# SHAPES2, AB2_S the same for the decode A/B of the default's kernels (the swapped product's
# epilogue from its permuted accumulator).
# Logs in $OUT: ctest_pairs.log, session53.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session53.log") 2>&1
gpu_build tessera tessera_gpu_tests
nvidia-smi --query-gpu=name --format=csv,noheader
echo "=== ctest ClusterPairs, SwappedOperands, SwappedDecode ($(( $(date +%s) - S0 )) s)"
timeout ${CTEST_S:-200} ctest --test-dir "$B" -L gpu -R "${CTEST_R:-ClusterPairs|SwappedOperands|SwappedDecode}" -j4 --output-on-failure --timeout 150 > "$R/ctest_pairs.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$R/ctest_pairs.log" | head -20
grep -E -A8 ": Failure$" "$R/ctest_pairs.log" | head -60
echo "=== A/B median ms: P2 planning cluster_m=2, L2 layouts cluster_m=2, L1 layouts cluster_m=1 ($(( $(date +%s) - S0 )) s)"
for s in ${SHAPES:-M=4096,N=4096,K=4096 M=4096,N=14336,K=4096 M=8192,N=8192,K=8192 M=128,N=4096,K=14336}; do
  [ $(( $(date +%s) - S0 )) -gt ${AB_S:-540} ] && { echo "(out of time)"; break; }
  line="$s"
  for round in 1 2 3; do
    for v in P2 L2 L1; do
      env=$([ $v = P2 ] && echo 0 || echo 1); c=${v:1:1}
      ms=$(TESSERA_CUDA_FROM_LAYOUTS=$env timeout 40 "$B/bin/tessera" bench matmul --dtype bf16 -b cuda --size "$s" \
             --reps 100 --warmup 10 --config cluster_m=$c 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)
      line="$line $v:${ms:-?}"
    done
  done
  echo "$line"
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 "$B/bin/tessera" run matmul -b cuda --check --dtype bf16 --size "$s" \
    --config cluster_m=2 2>&1 | tail -1
done
echo "=== decode A/B, the default's kernels: planning (0) vs layouts (1), median ms ($(( $(date +%s) - S0 )) s)"
for s in ${SHAPES2:-M=1,N=4608,K=3584 M=16,N=4096,K=4096 M=1,N=4096,K=4096}; do
  [ $(( $(date +%s) - S0 )) -gt ${AB2_S:-570} ] && { echo "(out of time)"; break; }
  line="$s"
  for round in 1 2 3; do
    for env in 0 1; do
      ms=$(TESSERA_CUDA_FROM_LAYOUTS=$env timeout 30 "$B/bin/tessera" bench matmul --dtype bf16 -b cuda --size "$s" --reps 200 --warmup 20 2>&1 |
           grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)
      line="$line ${env}:${ms:-?}"
    done
  done
  echo "$line"
done
echo "[$(( $(date +%s) - S0 )) s] done"
