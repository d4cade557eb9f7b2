#!/usr/bin/env bash
# Session 25's first GPU call (issues 16, 20), from the repo root after `source .devdeps/setup.sh`:
#  1. build (Release, tests on) and the WgmmaGpu tests (tiles of 192 after the split-K batch fix);
#  2. matmul + bias + GELU in bf16 at 4096^3 (layout emitter, 128 x 256) with and without the
#     tanh-sums-to-sigmoid pass, alternated over three rounds, beside the library matmul and
#     cuBLASLt's fused bias + GELU (bench/torch_decode_gelu.py gelu) in the same call, after a
#     --check at ragged sizes with the pass.
# (Section 1 stops after 200 s: `WgmmaGpu.*` takes longer, so name fewer tests to see a verdict.)
set -uo pipefail
B=${BUILD:-build-gpu}
S=$(date +%s)
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null &&
  timeout 330 cmake --build "$B" -j16 --target tessera tessera_gpu_tests 2>&1 | tail -1
echo "[$(( $(date +%s) - S )) s] built"
echo "=== 1. WgmmaGpu tests"
timeout 200 "$B/bin/tessera_gpu_tests" --gtest_filter='WgmmaGpu.*' 2>&1 | grep -E "^\[  (PASSED|FAILED) |FAILED|tests ran" | head -20
echo "[$(( $(date +%s) - S )) s]"
T="$B/bin/tessera"
D=$(mktemp -d)
sed -e 's/f16/bf16/g' tests/corpus/matmul_bias_gelu.tile > "$D/gelu.tile"
CFG=(--config BM=128 --config BN=256 --config BK=64)
echo "=== 2. GELU with tanh-sums-to-sigmoid"
for sz in M=257,N=304,K=504 M=1000,N=776,K=336 M=70,N=45,K=100; do
  echo -n "check $sz: "; TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 "$T" run "$D/gelu.tile" -b cuda --check --size "$sz" "${CFG[@]}" 2>&1 | tail -1
done
for round in 1 2 3; do
  echo "--- round $round"
  echo -n "GELU, sigmoid pass: "
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 "$T" bench "$D/gelu.tile" -b cuda --size M=4096,N=4096,K=4096 "${CFG[@]}" --reps 30 2>&1 | tail -1
  echo -n "GELU, without the pass: "
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 "$T" bench "$D/gelu.tile" -b cuda --size M=4096,N=4096,K=4096 "${CFG[@]}" --disable-pass tanh-sums-to-sigmoid --reps 30 2>&1 | tail -1
  echo -n "library matmul bf16: "
  timeout 60 "$T" bench matmul -b cuda --dtype bf16 --size M=4096,N=4096,K=4096 --reps 30 2>&1 | tail -1
done
timeout 120 python3 bench/torch_decode_gelu.py gelu
echo "[$(( $(date +%s) - S )) s]"
