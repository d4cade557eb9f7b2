#!/usr/bin/env bash
# Ping-pong consumers (issue 16) with the order barrier raised once a consumer's last group is
# issued, and with deeper rings: one GPU call from the repo root after
# `source .devdeps/setup.sh`. A ping-pong consumer's stage of 128 x 64 and 64 x 128 bf16 tiles
# lasts ~512 cycles of one warpgroup's wgmma, half of a cooperative 128 x 256 stage, so 4 stages
# buffer half the time; the profile (bench/epilogue_profile_gpu.sh) had the consumers stalled
# on their loads. Checks (GPU tests and --check at ragged sizes) first, then 4096^3 bf16 times:
# ping-pong at 4, 5 and 6 stages (`pipeline = S` written on the K loop), cooperative 128 x 256,
# and the library matmul, each with the GELU, the bias only and no epilogue, in two rounds.
set -uo pipefail
source bench/matmul_forms.sh
timeout 300 cmake --build "$B" -j16 --target tessera_gpu_tests 2>&1 | tail -1
echo "=== GPU tests (ping-pong, layout emitter)"
timeout 200 "$B/bin/tessera_gpu_tests" --gtest_filter='LayoutEmitterGpu.PingPong*:LayoutEmitterGpu.*Persistent*' 2>&1 | grep -E "^\[  (PASSED|FAILED|  OK) |FAILED" | head -20
for f in gelu bias plain; do
  for S in 5 6; do
    sed "s/%acc = for %c0, %ktiles, %c1, %acc0 :/%acc = for %c0, %ktiles, %c1, %acc0 {pipeline = $S} :/" "$D/$f.tile" > "$D/${f}_s$S.tile"
    grep -q "pipeline = $S" "$D/${f}_s$S.tile" || echo "could not write pipeline = $S into $f"
  done
done
L=(env TESSERA_CUDA_FROM_LAYOUTS=1)
P=(env TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_PINGPONG_CONSUMERS=1)
C128=(--config BM=128 --config BN=128 --config BK=64)
echo "=== checks against the interpreter (ping-pong)"
for sz in M=3000,N=2904,K=200 M=1000,N=776,K=336 M=257,N=304,K=504 M=1700,N=2104,K=64 M=130,N=4000,K=104; do
  for v in gelu gelu_s6 bias_s5; do
    echo -n "$v $sz: "; "${P[@]}" timeout 60 "$T" run "$D/$v.tile" -b cuda --check --size "$sz" "${C128[@]}" 2>&1 | tail -1
  done
done
if [ "${SANITIZE:-0}" = 1 ]; then
  SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in racecheck synccheck memcheck; do
    echo -n "compute-sanitizer $tool, ping-pong gelu_s6 M=1800,N=1904,K=136: "
    "${P[@]}" timeout 100 "$SAN" --tool $tool "$T" run "$D/gelu_s6.tile" -b cuda --check --size M=1800,N=1904,K=136 \
      "${C128[@]}" 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL|rror" | head -3 | tr '\n' ' '
    echo
  done
fi
SZ=M=4096,N=4096,K=4096
for round in 1 2; do
  echo "--- round $round (4096^3 bf16, median ms)"
  for f in gelu bias plain; do
    for v in $f ${f}_s5 ${f}_s6; do
      echo -n "$v ping-pong 128 x 128: "
      "${P[@]}" timeout 60 "$T" bench "$D/$v.tile" -b cuda --size $SZ "${C128[@]}" --reps 30 2>&1 | tail -1
    done
    echo -n "$f cooperative 128 x 256: "
    "${L[@]}" timeout 60 "$T" bench "$D/$f.tile" -b cuda --size $SZ --config BM=128 --config BN=256 --config BK=64 --reps 30 2>&1 | tail -1
  done
  echo -n "library matmul, planning: "
  timeout 60 "$T" bench matmul -b cuda --dtype bf16 --size $SZ --reps 30 2>&1 | tail -1
done
