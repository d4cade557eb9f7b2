#!/usr/bin/env bash
# Stream-K against whole tiles (issue 20: the M = 1024 shapes where the tuned matmul stays
# under cuBLAS end in a short last wave). One GPU call from the repo root:
#
#   source .devdeps/setup.sh && bash bench/stream_k_gpu.sh
#
# Builds the CLI, cuda_bench and the GPU tests (Release), runs the stream-K and persistent
# GPU tests (the interpreter and the host reference), then cuda_bench's matmul at each shape
# and tile with and without --stream-k, each timed alternately with cuBLAS (cublasGemmEx) in
# the same binary; cuda_bench checks a sample of every result (TESSERA WRONG on a mismatch).
set -uo pipefail
B=${BUILD:-build-gpu}
JOBS=$(nproc 2>/dev/null || echo 16)
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/stream_k_cmake.log 2>&1 ||
  { tail -20 /tmp/stream_k_cmake.log; exit 1; }
timeout 400 cmake --build "$B" -j"$JOBS" --target tessera cuda_bench tessera_gpu_tests > /tmp/stream_k_build.log 2>&1 ||
  { tail -30 /tmp/stream_k_build.log; exit 1; }
echo "=== GPU tests"
timeout 240 "$B/bin/tessera_gpu_tests" --gtest_filter="${TESTS:-WgmmaGpu.StreamK*:WgmmaGpu.ManyPrograms*:WgmmaGpu.PersistentKnobs*}" 2>&1 |
  grep -E "^\[ +(OK|FAILED|PASSED) +\]|Failure|rror" | head -40
echo "=== cuda_bench: shape tile stream-K -> ours, cuBLAS (TFLOP/s, median of rounds)"
run() {  # shape, tile (BMxBN), extra flags...
  local mnk=$1 tile=$2; shift 2
  echo -n "$mnk $tile ${*:-whole}: "
  timeout 90 "$B/bin/cuda_bench" --only matmul --mnk "$mnk" --rounds "${ROUNDS:-3}" --set BLOCK_M="${tile%x*}" \
    --set BLOCK_N="${tile#*x}" --set BLOCK_K=64 "$@" 2>&1 |
    grep -E "^(matmul|cublas)|WRONG|rror" | awk '{print $1, $4, $5, $8}' | tr '\n' ' '
  echo
}
# A case is shape:tile, or shape:tile:flags (cuda_bench's, commas for spaces) given to both
# runs: `:--split-k,1` keeps the runtime from splitting programs under a third of the SMs, which
# stream-K shares out instead (cuda::stream_k_ctas).
for st in ${CASES:-1024x4096x4096:128x256 1024x4608x3584:128x256 1024x4608x3584:128x128 1024x6144x4096:128x256 \
                  1024x6144x4096:128x128 1024x1536x7168:128x128 1024x1536x7168:128x256 128x3584x18944:64x128 \
                  128x3584x3584:64x128 16x4096x4096:64x128:--split-k,1 1x1536x7168:64x64:--split-k,1 \
                  1024x18944x3584:128x256 4096x4096x4096:128x256}; do
  IFS=: read -r mnk tile flags <<< "$st"
  run "$mnk" "$tile" ${flags//,/ }
  run "$mnk" "$tile" ${flags//,/ } --stream-k
done
# SANITIZE=1: then compute-sanitizer's memcheck, racecheck and synccheck (in parallel, 150 s
# each) on the stream-K GPU tests: the flags, slots and fixup under every tool.
if [ "${SANITIZE:-0}" = 1 ]; then
  echo "=== compute-sanitizer on ${SANITIZE_FILTER:=WgmmaGpu.StreamK*}"
  SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck synccheck; do
    timeout -k 10 150 "$SAN" --tool "$tool" --print-limit 10 "$B/bin/tessera_gpu_tests" --gtest_filter="$SANITIZE_FILTER" \
      > "/tmp/sanitize_$tool.log" 2>&1 &
  done
  wait
  for tool in memcheck racecheck synccheck; do
    echo "$tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/sanitize_$tool.log | tail -1)" \
         "$(grep -E '^\[  (PASSED|FAILED) ' /tmp/sanitize_$tool.log | tr '\n' ' ')"
    grep -m3 -E '^========= [A-Z][a-z]' "/tmp/sanitize_$tool.log"
  done
fi
