#!/usr/bin/env bash
# The autotuner's H200 figure (issue 20; docs/tuning.md): bf16 matmul at 50 LLM GEMM shapes
# (Llama-3-8B, Qwen2.5-7B and DeepSeek-V3 projections and MLPs at M = 1..4096), each tuned with
# `tessera tune -b cuda` measuring at most 5% of a fixed sub-space of the cuda knobs, against the
# exhaustive best of that sub-space, the default config and cuBLAS (torch.matmul, triton's
# do_bench). One command, from the repo root on the GPU machine, in one device call:
#
#   source .devdeps/setup.sh && bench/tune_cuda_figure.sh
#
# Builds the CLI (Release, no tests; 2-3 minutes from scratch on 16 cores), then
# bench/tune_cuda_figure.py runs the phases against deadlines counted from this script's start
# (TOTAL=530 s in all): every config compiled in parallel, the 50 tunes (one process, one CUDA
# context), cuBLAS, then the exhaustive sweeps of the configs that
# bench/data/tune_cuda_matmul_exhaustive_50_splitk.jsonl.xz does not hold yet, and the table. The
# exhaustive data (old and new rows) is written to $WORK and $OUT as
# tune_cuda_matmul_exhaustive_50_splitk.jsonl.xz: when the sweeps did not all fit, commit that file as
# bench/data/tune_cuda_matmul_exhaustive_50_splitk.jsonl.xz and run the command again; the second call
# measures only the configs still missing. Everything goes to $WORK (default
# /tmp/tessera-tune-cuda); the table, the exhaustive data and a tarball of the logs to $OUT when
# it names a folder.
#
#   DRY=1 bench/tune_cuda_figure.sh       # no GPU: build, --space and --compile-only only
#   BACKEND=cpu bench/tune_cuda_figure.sh # no GPU: the whole driver on the cpu backend, 3 small shapes
#   NSHAPES=10 TOTAL=300 TUNE_UNTIL=... CUBLAS_UNTIL=... REP=10 EXH_REP=5 KNOBS=... EXH_DATA=... SWEEP_M=1024,4096
set -uo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s)
B=${BUILD:-build-gpu}
W=${WORK:-/tmp/tessera-tune-cuda}
JOBS=$(nproc 2>/dev/null || echo 16)
mkdir -p "$W"
echo "[0 s] build" >&2
if [ -z "${TESSERA:-}" ]; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_TESTS=OFF > "$W/cmake.log" 2>&1 ||
    { echo "cmake failed:"; tail -20 "$W/cmake.log"; exit 1; }
  timeout 300 cmake --build "$B" -j"$JOBS" --target tessera > "$W/build.log" 2>&1 ||
    { echo "build failed:"; tail -20 "$W/build.log"; exit 1; }
  T=$B/bin/tessera
else
  T=$TESSERA
fi
echo "[$(( $(date +%s) - START )) s] built" >&2
exec python3 bench/tune_cuda_figure.py --tessera "$T" --work "$W" --out "${OUT:-}" --start "$START"
