#!/usr/bin/env bash
# Session 56 (issue 16): what the layout emitter prints since session 55 and 56 that Auto kept
# on the planning emitter until it had run on a GPU: session 55's Struct buffers and raw code
# (bench/session55_topk_gpu.sh: topk's whole-row kernel on both emitters, its run --check and
# median ms; SKIP_TOPK=1 leaves it out), then session 56's folds through shared memory, inserts
# in parts, tiles in a while (SharedFoldsAndLargeInsertsMatchTheInterpreter), mma.sync warp
# grids with copy warps and FlashAttention's reductions over them
# (SmallMmaTilesWithCopyWarpsMatchTheInterpreter), an f8 B [K, N] stored K-major
# (F8DotOfBAsLoadedKNMatchesTheInterpreter), with the corpus and mma.sync-path tests beside
# them; then the median ms of some of them on the planning (P) and layout (L) emitters.
# From the repo root on the GPU machine:
#   source .devdeps/setup.sh && bash bench/session56_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
if [ "${SKIP_TOPK:-0}" = 1 ]; then gpu_build tessera tessera_gpu_tests; else bash bench/session55_topk_gpu.sh; fi
timeout 200 ctest --test-dir "$B" -L gpu -R "SharedFoldsAndLargeInserts|SmallMmaTilesWithCopyWarps|F8DotOfBAsLoadedKN|LayoutEmitterGpu.MatchesInterpreter|MmaSyncPathMatchesInterpreter|RawCodeMatchesTheHost" \
  -j4 --output-on-failure --timeout 180 > "$R/ctest_session56.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)" "$R/ctest_session56.log"
grep -E -B2 -A10 ": Failure$" "$R/ctest_session56.log" | head -60
ab() {  # FILE-or-kernel ARGS...: median ms, planning (P) then layouts (L), three rounds
  local line="$*"
  for round in 1 2 3; do
    for e in 0 1; do
      ms=$(TESSERA_CUDA_FROM_LAYOUTS=$e timeout 60 "$B/bin/tessera" bench "$@" -b cuda --reps 50 --warmup 5 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)
      line="$line $([ $e = 0 ] && echo P || echo L):${ms:-?}"
    done
  done
  echo "$line"
}
F=tests/cuda_codegen/data/shared_folds.tile
ab $F --kernel cummax_rows --size M=4096,N=4096
ab $F --kernel cumsum_cols --size M=64,N=65536
ab $F --kernel halving_rows --size M=4096,N=512
ab matmul --dtype bf16 --size M=4096,N=4096,K=4096 --config BLOCK_M=16 --config BLOCK_N=32
ab tests/cuda_codegen/data/f8_dot_kn.tile --size M=4096,N=4096,K=4096
echo "[$(( $(date +%s) - S0 )) s] done"
