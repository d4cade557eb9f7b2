# Sourced by bench/*_gpu.sh scripts run on the GPU machine from the repo root (after `source
# .devdeps/setup.sh`): B (the Release build folder, $BUILD or build-gpu), S0 (the script's start),
#   gpu_build TARGET...           configure B and build the targets, printing "[N s] built";
#   matmul_ms SHAPE CONFIG [REPS [WARMUP]]
#                                 `tessera bench` median ms of the bf16 library matmul on cuda at
#                                 SHAPE (M=..,N=..,K=..) with CONFIG (no L2 flush: for ranking
#                                 configs against each other, not against cuBLAS).
B=${BUILD:-build-gpu}
S0=${S0:-$(date +%s)}
gpu_build() {
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/gpu_common_cmake.log 2>&1 ||
    { tail -20 /tmp/gpu_common_cmake.log; exit 1; }
  timeout 400 cmake --build "$B" -j16 --target "$@" 2>&1 | tail -1
  echo "[$(( $(date +%s) - S0 )) s] built"
}
matmul_ms() {
  "$B/bin/tessera" bench matmul --dtype bf16 -b cuda --size "$1" --reps "${3:-100}" --warmup "${4:-10}" --config "$2" 2>&1 |
    grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2
}
