#!/usr/bin/env bash
# compute-sanitizer memcheck over tests/corpus/matmul_bias_gelu.tile on the layout emitter's
# TMA ring (sm_90a), in four forms: the wgmma group kept in flight or not (in_flight = 1 / 0)
# crossed with a ring of 2 or 4 stages (`pipeline = S` written on the loop). Says which of the
# two decisions a memcheck failure follows. Run from the repo root after
# `source .devdeps/setup.sh`, with the CLI built in ${BUILD:-build-gpu}.
set -uo pipefail
T=${BUILD:-build-gpu}/bin/tessera
F=tests/corpus/matmul_bias_gelu.tile
TILES=(--config BM=128 --config BN=128 --config BK=64)
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
D=$(mktemp -d)
for fl in 1 0; do
  for st in 2 4; do
    V="$D/v_${fl}_${st}.tile"
    sed -e "s/dot %ta, %tb, %accc :/dot %ta, %tb, %accc {in_flight = $fl} :/" \
        -e "s/for %c0, %ktiles, %c1, %acc0 :/for %c0, %ktiles, %c1, %acc0 {pipeline = $st} :/" "$F" > "$V"
    echo "=== in_flight = $fl, pipeline = $st"
    TESSERA_CUDA_FROM_LAYOUTS=1 "$T" compile "$V" -t cuda:sm_90a -e cuda --stats "${TILES[@]}" 2>&1 >/dev/null |
      grep -E "in-flight|stages|note" | head -4
    echo -n "plain: "; TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 "$T" run "$V" -b cuda --check --size M=257,N=300,K=500 "${TILES[@]}" 2>&1 | tail -1
    for sz in M=257,N=300,K=500 M=128,N=128,K=64; do
      echo -n "memcheck $sz: "
      TESSERA_CUDA_FROM_LAYOUTS=1 timeout 120 "$SAN" --tool memcheck --print-limit 5 "$T" run "$V" -b cuda --check \
        --size "$sz" "${TILES[@]}" > "$D/log" 2>&1
      grep -E "ERROR SUMMARY|PASS|FAIL" "$D/log" | tr '\n' ' '; echo
      grep -vE "Program hit|^=========\s*$" "$D/log" | grep "=========" | head -8
    done
  done
done
