#!/usr/bin/env bash
# Session 36's row-kernel call (issue 16: can the layout emitter be the default?), from the repo
# root: source .devdeps/setup.sh && bash bench/session36_gpu.sh
# 1. The layout emitter's row kernels checked at ragged sizes and at whole tiles (whole_tile_checks
#    path), f32 and bf16.
#    Then ctest -L gpu -R "LayoutEmitter|TopkStages".
# 2. cuda_bench --only softmax / layernorm / rmsnorm: the planning emitter (with NOPACK=1 also
#    with 16-bit loads as f32 arrays, TESSERA_BENCH_NO_PACK=1) and the layout emitter. Logs in
#    $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session36.log") 2>&1
gpu_build all
T=$B/bin/tessera
# Every GPU test of the layout emitter (the corpus on it, TopkStages' layout ways).
timeout 300 ctest --test-dir "$B" -L gpu -R "LayoutEmitter|TopkStages" -j8 --timeout 200 > "$R/ctest_layouts.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|SEGFAULT" "$R/ctest_layouts.log" | head -12
echo "[$(( $(date +%s) - S0 )) s] ctest"
for dt in f32 bf16; do
  for k in softmax layernorm rmsnorm; do
    for s in M=37,N=3001 M=5,N=4096 M=3,N=32768; do
      TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 $T run $k -b cuda --check --dtype $dt --size $s 2>&1 | tail -1
    done
  done
done
echo "[$(( $(date +%s) - S0 )) s] checked"
for k in softmax layernorm rmsnorm; do
  timeout 100 $B/bin/cuda_bench --only $k > "$R/plan_$k.txt" 2>&1
  [ -n "${NOPACK:-}" ] && TESSERA_BENCH_NO_PACK=1 timeout 100 $B/bin/cuda_bench --only $k > "$R/nopack_$k.txt" 2>&1
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 100 $B/bin/cuda_bench --only $k > "$R/lay_$k.txt" 2>&1
  echo "[$(( $(date +%s) - S0 )) s] $k"
done
for f in plan ${NOPACK:+nopack} lay; do echo "--- $f"; cat "$R"/${f}_*.txt | grep -E "^(softmax|layernorm|rmsnorm) " | cut -c1-80; done
