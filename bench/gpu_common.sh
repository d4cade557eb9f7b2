# Sourced by bench/*_gpu.sh scripts run on the GPU machine from the repo root (after `source
# .devdeps/setup.sh`): B (the Release build folder, $BUILD or build-gpu), S0 (the script's start),
#   gpu_build TARGET...           configure B and build the targets, printing "[N s] built";
#   topk_checks                   `run --check` of topk on cuda at issue 18's shapes (f32 and bf16)
#                                 and at ragged ones, segments of 256 and 2048 included;
#   matmul_ms SHAPE CONFIG [REPS [WARMUP]]
#                                 `tessera bench` median ms of the bf16 library matmul on cuda at
#                                 SHAPE (M=..,N=..,K=..) with CONFIG (no L2 flush: for ranking
#                                 configs against each other, not against cuBLAS).
B=${BUILD:-build-gpu}
S0=${S0:-$(date +%s)}
gpu_build() {
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/gpu_common_cmake.log 2>&1 ||
    { tail -20 /tmp/gpu_common_cmake.log; exit 1; }
  # A failed (or timed-out) build stops the script: its binaries would be missing or old.
  timeout 400 cmake --build "$B" -j16 --target "$@" > /tmp/gpu_common_build.log 2>&1 ||
    { tail -30 /tmp/gpu_common_build.log; echo "gpu_build: the build failed"; exit 1; }
  tail -1 /tmp/gpu_common_build.log
  echo "[$(( $(date +%s) - S0 )) s] built"
}
matmul_ms() {
  "$B/bin/tessera" bench matmul --dtype bf16 -b cuda --size "$1" --reps "${3:-100}" --warmup "${4:-10}" --config "$2" 2>&1 |
    grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2
}
topk_checks() {
  local dt s
  for dt in f32 bf16; do
    for s in M=64,N=131072,K=64 M=64,N=131072,K=1024 M=1,N=16777216,K=1024; do
      timeout 60 "$B/bin/tessera" run topk -b cuda --check --dtype $dt --size $s 2>&1 | tail -1
    done
  done
  timeout 60 "$B/bin/tessera" run topk -b cuda --check --size M=3,N=100001,K=1000 2>&1 | tail -1
  TESSERA_TOPK_SEGMENT=256 timeout 60 "$B/bin/tessera" run topk -b cuda --check --size M=3,N=2000,K=300 2>&1 | tail -1
  TESSERA_TOPK_SEGMENT=2048 timeout 60 "$B/bin/tessera" run topk -b cuda --check --size M=2,N=1000000,K=200 2>&1 | tail -1
}
