#!/usr/bin/env bash
# Session 56 (issue 16): what the layout emitter prints since session 55 and 56 that Auto keeps
# on the planning emitter until it has run on a GPU: session 55's Struct buffers and raw code
# (bench/session55_topk_gpu.sh: topk's whole-row kernel on both emitters, its run --check and
# median ms), then session 56's folds through shared memory, inserts in parts, tiles in a
# while (SharedFoldsAndLargeInsertsMatchTheInterpreter) and mma.sync warp grids with copy warps
# (SmallMmaTilesWithCopyWarpsMatchTheInterpreter), with the corpus and mma.sync-path tests
# beside them. From the repo root on the GPU machine:
#   source .devdeps/setup.sh && bash bench/session56_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
R=${OUT:-/tmp}
bash bench/session55_topk_gpu.sh
B=${BUILD:-build-gpu}
timeout 200 ctest --test-dir "$B" -L gpu -R "SharedFoldsAndLargeInserts|SmallMmaTilesWithCopyWarps|LayoutEmitterGpu.MatchesInterpreter|MmaSyncPathMatchesInterpreter" \
  -j4 --output-on-failure --timeout 180 > "$R/ctest_session56.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)" "$R/ctest_session56.log"
grep -E -B2 -A10 ": Failure$" "$R/ctest_session56.log" | head -60
