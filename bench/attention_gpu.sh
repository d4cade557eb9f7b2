#!/usr/bin/env bash
# One GPU call for the attention work (run on the H200 from the repo root, after
# `source .devdeps/setup.sh`): builds (Release), runs the corpus on the GPU with the layout
# emitter (TESSERA_CUDA_FROM_LAYOUTS=1) against the interpreter, checks the bf16
# FlashAttention at ragged sizes (D 64 and 128), and times it with the layout emitter (and,
# with PLANNING=1, without) beside torch SDPA's FlashAttention-2 and cuDNN in the same call.
# QUICK=1: fewer sizes and tiles (a call short of device time); SANITIZE=1: compute-sanitizer's
# memcheck, racecheck and synccheck over one small FlashAttention on the wgmma + TMA path.
set -uo pipefail
B=${BUILD:-build-gpu}
QUICK=${QUICK:-0}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null &&
  timeout 400 cmake --build "$B" -j16 --target tessera tessera_gpu_tests 2>&1 | tail -1
T="$B/bin/tessera"
FA=tests/corpus/flash_attention_bf16.tile
echo "=== which emitter prints the FlashAttention (sm_90a)"
TESSERA_CUDA_FROM_LAYOUTS=1 "$T" compile "$FA" -t cuda:sm_90a -e cuda --stats 2>&1 >/dev/null | grep -E "note|mma-dots|staged|producer|threads"
echo "=== tests/corpus and the text corpus on the GPU, layout emitter"
timeout 240 "$B/bin/tessera_gpu_tests" --gtest_filter='*LayoutEmitterGpu*' 2>&1 |
  grep -E "layout emitter\]|FAILED|PASSED|Failure|error|Expected|Which|max" | head -80
[ "$QUICK" = 1 ] || TESSERA_CUDA_FROM_LAYOUTS=1 timeout 240 "$B/bin/tessera_gpu_tests" --gtest_filter='Corpus*' 2>&1 |
  grep -E "FAILED|PASSED|Failure" | head -20
if [ "${SANITIZE:-0}" = 1 ]; then
  echo "=== compute-sanitizer, FlashAttention D=128 BM=128 BN=64 (wgmma, TMA ring), layout emitter"
  SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck synccheck; do
    ( TESSERA_CUDA_FROM_LAYOUTS=1 timeout 150 "$SAN" --tool $tool --print-limit 10 "$T" run "$FA" -b cuda --check \
        --size H=2,S=100,T=150,DH=128 --config D=128 --config BM=128 --config BN=64 > /tmp/san_$tool.log 2>&1
      echo "$tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL' /tmp/san_$tool.log | tr '\n' ' ')" ) &
  done
  wait
fi
echo "=== FlashAttention bf16 against the interpreter, layout emitter"
CFGS=("BM=64 BN=64" "BM=128 BN=64" "BM=128 BN=128")
[ "$QUICK" = 1 ] && CFGS=("BM=64 BN=64" "BM=128 BN=64")
for d in 64 128; do
  for bm in "${CFGS[@]}"; do
    set -- $bm
    for sz in H=2,S=100,T=150 H=3,S=257,T=333; do
      echo -n "D=$d $bm $sz: "
      TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 "$T" run "$FA" -b cuda --check --size "$sz,DH=$d" --config D=$d \
        --config "$1" --config "$2" 2>&1 | tail -1
    done
  done
done
echo "=== FlashAttention bf16 timing (4 x 32 heads, S = T = 4096, D = 128; 8 x 16 heads, S = T = 8192, D = 64)"
for cfg in "${CFGS[@]}"; do
  set -- $cfg
  echo "--- layout emitter $cfg D=128"
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 120 "$T" bench "$FA" -b cuda --size H=128,S=4096,T=4096,DH=128 \
    --config D=128 --config "$1" --config "$2" --reps 5 2>&1 | tail -2
  echo "--- layout emitter $cfg D=64"
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 120 "$T" bench "$FA" -b cuda --size H=128,S=8192,T=8192,DH=64 \
    --config D=64 --config "$1" --config "$2" --reps 5 2>&1 | tail -2
done
# The same loop without its producer warpgroup (one compute thread issues the copies).
NOWS=$(mktemp --suffix=.tile)
sed 's/for %c0, %ntiles, %c1, %m0, %l0, %acc0 :/for %c0, %ntiles, %c1, %m0, %l0, %acc0 {warp_specialize = 0} :/' "$FA" > "$NOWS"
echo "--- layout emitter BM=128 BN=64 D=128, warp_specialize = 0"
TESSERA_CUDA_FROM_LAYOUTS=1 timeout 120 "$T" bench "$NOWS" -b cuda --size H=128,S=4096,T=4096,DH=128 \
  --config D=128 --config BM=128 --config BN=64 --reps 5 2>&1 | tail -2
if [ -n "${PLANNING:-}" ]; then
  echo "--- planning emitter BM=128 BN=64 D=128"
  timeout 120 "$T" bench "$FA" -b cuda --size H=128,S=4096,T=4096,DH=128 --config D=128 --config BM=128 \
    --config BN=64 --reps 5 2>&1 | tail -2
fi
python3 bench/sdpa_anchor.py 4,32,4096,128 8,16,8192,64
