#!/usr/bin/env bash
# Ring depth, stage by stage (issue 20; bench/RESULTS.md, session 29): `tessera bench` medians (no
# L2 flush) of the bf16 matmul at ring_stages 4..8 (and 12, 16: as many as fit), alternated in
# ROUNDS rounds, for each "shape:tile" of CASES. One GPU call after `source .devdeps/setup.sh`
# and a build of build-gpu/bin/tessera.
set -uo pipefail
source bench/gpu_common.sh
for cs in ${CASES:-M=1024,N=1536,K=7168:BLOCK_M=128,BLOCK_N=96,BLOCK_K=64 M=128,N=3584,K=3584:BLOCK_M=64,BLOCK_N=64,BLOCK_K=64 M=1024,N=1536,K=7040:BLOCK_M=128,BLOCK_N=96,BLOCK_K=64}; do
  s=${cs%%:*} c=${cs#*:}
  for r in $(seq "${ROUNDS:-2}"); do
    line="$s $c r$r:"
    for st in ${STAGES:-4 5 6 7 8 12 16}; do
      ms=$(matmul_ms "$s" "$c,split_k=0,stream_k=0,ring_stages=$st")
      line="$line $st:${ms:-fail}"
    done
    echo "$line"
  done
done
