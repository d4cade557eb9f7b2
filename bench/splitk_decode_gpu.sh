#!/usr/bin/env bash
# Split-K at the decode and small-M shapes where the tuned matmul is under cuBLAS (issue 20,
# session 16's table): cuda_bench's matmul at one shape, each split count and tile, timed
# alternately with cuBLAS in the same binary. One GPU call from the repo root after
# `source .devdeps/setup.sh` (build-gpu built, or BUILD=...).
set -uo pipefail
B=${BUILD:-build-gpu}
CB="$B/bin/cuda_bench"
run() {  # shape, split, tile sets...
  local mnk=$1 s=$2; shift 2
  local sets=()
  for kv in "$@"; do sets+=(--set "$kv"); done
  echo -n "$mnk split=$s $*: "
  timeout 60 "$CB" --only matmul --mnk "$mnk" --split-k "$s" --rounds 2 "${sets[@]}" 2>&1 | grep -E "^(matmul|cublas)|FAIL|rror" | awk "{print \$1, \$4, \$5, \$8}" | tr '\n' ' '
  echo
}
for mnk in ${SHAPES:-1x4608x3584 16x4608x3584 16x1536x7168}; do
  for s in 1 2 3 4 6; do run "$mnk" "$s" BLOCK_M=64 BLOCK_N=128 BLOCK_K=64; done
  for s in 1 3 4; do run "$mnk" "$s" BLOCK_M=64 BLOCK_N=64 BLOCK_K=64; done
done
for mnk in ${SHAPES_M128:-128x4096x4096 1024x1536x7168}; do
  for s in 1 2 3 4; do run "$mnk" "$s" BLOCK_M=128 BLOCK_N=128 BLOCK_K=64; done
  for s in 1 2 3 4; do run "$mnk" "$s" BLOCK_M=64 BLOCK_N=128 BLOCK_K=64; done
done
