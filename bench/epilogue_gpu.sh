#!/usr/bin/env bash
# One GPU call for issue 16's epilogue figure (on the H200 from the repo root, after
# `source .devdeps/setup.sh`): tests/corpus/matmul_bias_gelu.tile (f16 a @ b + bias, tanh-GELU,
# f16 out) printed by the layout emitter (TESSERA_CUDA_FROM_LAYOUTS=1: wgmma + a TMA ring, the
# epilogue in the accumulator's layout) and by the planning emitter, checked against the
# interpreter at ragged sizes, then timed at 4096^3 beside the library matmul (bf16 and f16)
# in the same call. The layout emitter's form is timed twice: as pipeline-loops leaves it (the
# wgmma dot kept in flight across iterations, `in_flight = 1`, a 4-stage ring) and with
# `in_flight = 0` written on the dot (each iteration waits for its own group, 2 stages).
# SANITIZE=1 adds compute-sanitizer's racecheck, synccheck and memcheck over the in-flight loop
# (with its producer warpgroup where TMA applies, and on the cp.async ring where it does not).
set -uo pipefail
B=${BUILD:-build-gpu}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null &&
  timeout 400 cmake --build "$B" -j16 --target tessera 2>&1 | tail -1
T="$B/bin/tessera"
F=tests/corpus/matmul_bias_gelu.tile
TILES=(--config BM=128 --config BN=128 --config BK=64)
SYNC=$(mktemp --suffix=.tile)
sed 's/dot %ta, %tb, %accc :/dot %ta, %tb, %accc {in_flight = 0} :/' "$F" > "$SYNC"
grep -q "in_flight = 0" "$SYNC" || echo "epilogue_gpu.sh: could not write in_flight = 0 into a copy of $F"
NOWS=$(mktemp --suffix=.tile)
sed 's/for %c0, %ktiles, %c1, %acc0 :/for %c0, %ktiles, %c1, %acc0 {warp_specialize = 0} :/' "$F" > "$NOWS"
grep -q "warp_specialize = 0" "$NOWS" || echo "epilogue_gpu.sh: could not write warp_specialize = 0 into a copy of $F"
echo "=== which path (sm_90a), layout emitter"
TESSERA_CUDA_FROM_LAYOUTS=1 "$T" compile "$F" -t cuda:sm_90a -e cuda --stats "${TILES[@]}" 2>&1 >/dev/null | grep -E "note|wgmma|tma|producer|threads" | head
echo "=== checks against the interpreter"
# The last two sizes have rows of whole 16-byte chunks (TMA, and so the producer warpgroup);
# the others take the cp.async ring the runtime compiles for operands TMA cannot describe.
for sz in M=70,N=45,K=100 M=257,N=300,K=200 M=1000,N=777,K=333 M=257,N=304,K=504 M=1000,N=776,K=336; do
  echo -n "layout $sz: "; TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 "$T" run "$F" -b cuda --check --size "$sz" "${TILES[@]}" 2>&1 | tail -1
  echo -n "layout, in_flight = 0 $sz: "; TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 "$T" run "$SYNC" -b cuda --check --size "$sz" "${TILES[@]}" 2>&1 | tail -1
  echo -n "planning $sz: "; timeout 60 "$T" run "$F" -b cuda --check --size "$sz" 2>&1 | tail -1
done
if [ "${SANITIZE:-0}" = 1 ] && command -v compute-sanitizer > /dev/null; then
  for sz in M=257,N=304,K=504 M=257,N=300,K=500; do
    for tool in racecheck synccheck memcheck; do
      echo -n "compute-sanitizer $tool, layout emitter, $sz: "
      TESSERA_CUDA_FROM_LAYOUTS=1 timeout 120 compute-sanitizer --tool $tool "$T" run "$F" -b cuda --check \
        --size "$sz" "${TILES[@]}" 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL" | tr '\n' ' '
      echo
    done
  done
fi
echo "=== timing at 4096^3 (two rounds)"
for round in 1 2; do
  echo "--- round $round"
  echo -n "epilogue, layout emitter BM=BN=128 BK=64: "
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 120 "$T" bench "$F" -b cuda --size M=4096,N=4096,K=4096 "${TILES[@]}" --reps 20 2>&1 | tail -1
  echo -n "epilogue, layout emitter, warp_specialize = 0: "
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 120 "$T" bench "$NOWS" -b cuda --size M=4096,N=4096,K=4096 "${TILES[@]}" --reps 20 2>&1 | tail -1
  echo -n "epilogue, layout emitter, in_flight = 0: "
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 120 "$T" bench "$SYNC" -b cuda --size M=4096,N=4096,K=4096 "${TILES[@]}" --reps 20 2>&1 | tail -1
  echo -n "epilogue, planning emitter (defaults): "
  timeout 120 "$T" bench "$F" -b cuda --size M=4096,N=4096,K=4096 --reps 20 2>&1 | tail -1
  for dt in bf16 f16; do
    echo -n "library matmul $dt: "
    timeout 120 "$T" bench matmul -b cuda --dtype $dt --size M=4096,N=4096,K=4096 --reps 20 2>&1 | tail -1
  done
done
