#!/usr/bin/env bash
# Split-K's partial sums added within a cluster (distributed shared memory) against through the
# workspace in global memory (issue 20; bench/RESULTS.md, session 27), one GPU call from the repo
# root after `source .devdeps/setup.sh`: `cuda_bench --split-ab` per decode shape and tile, each
# process timing both fixups of the same launch in alternating rounds (do_bench's method, L2
# flushed) beside cuBLAS. SPLITS: the --split-k values (0: the runtime's rule; n: forced).
# BM: BLOCK_M (default 64, where cuda::split_in_clusters's bound was measured; 128 in session 27's second call).
set -uo pipefail
B=${BUILD:-build-gpu}
if [ -z "${CUDA_BENCH:-}" ]; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/splitab_cmake.log 2>&1 || { tail -20 /tmp/splitab_cmake.log; exit 1; }
  timeout 300 cmake --build "$B" -j16 --target cuda_bench 2>&1 | tail -1
  CUDA_BENCH="$B/bin/cuda_bench"
fi
# One compile cache for all the processes (their "compile" column is then a disk-cache hit).
if [ -z "${CUDA_BENCH_CACHE:-}" ]; then
  CUDA_BENCH_CACHE=$(mktemp -d)
  trap 'rm -rf "$CUDA_BENCH_CACHE"' EXIT
fi
export CUDA_BENCH_CACHE
SHAPES=${SHAPES:-1x4608x3584 1x1536x7168 1x7168x2048 1x3584x3584 16x4608x3584 16x3584x3584 128x3584x3584 128x1536x7168}
TILES=${TILES:-64 128 256}
SPLITS=${SPLITS:-0 2 3 4}
for s in $SHAPES; do
  for bn in $TILES; do
    for sk in $SPLITS; do
      echo "--- $s BLOCK_N=$bn split-k=$sk: $($CUDA_BENCH --only matmul --quick --mnk "$s" --set BLOCK_M=${BM:-64} --set BLOCK_N=$bn \
        --set BLOCK_K=64 --split-k "$sk" --rounds 3 --split-ab 2>&1 | grep -E 'split A/B|rror' | head -2)"
    done
  done
done
