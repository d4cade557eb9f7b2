#!/usr/bin/env bash
# Issue 16: can the layout emitter (the GPU lowering's passes, TESSERA_CUDA_FROM_LAYOUTS=1) be
# the default? Two calls on the GPU machine, from the repo root (each under 10 minutes):
#
#   source .devdeps/setup.sh && PART=1 bash bench/emitters_gpu.sh
#   source .devdeps/setup.sh && PART=2 bash bench/emitters_gpu.sh
#
# PART=1: the build, then `run --check` of every library kernel the layout emitter prints, in
#   f32 and bf16, at ragged sizes (not multiples of the tiles), each line must say PASS; then the
#   segmented top-k under the layout emitter (printed by it since session 33: its prefix sums
#   as block scans from registers): exact at issue 18's shapes and ragged ones, and `tessera
#   bench` medians (no L2 flush) beside the planning emitter's, alternated.
# PART=2: cuda_bench (the issue's figures: the bf16 matmul at 4096^3, 8192^3, 4096x14336x4096,
#   128x14336x4096 and 16x4096x4096 beside cuBLAS, the row kernels, vector_add) with the planning
#   emitter and with the layout emitter, in turn, for each of ROUNDS (default "a b"; "a" alone if
#   the call runs short), JSON to $OUT, then a table: each benchmark's median ms under both
#   emitters and layout / planning. On a machine that starts cold, the build and four
#   cuda_bench runs may pass 10 minutes: ROUNDS=a then ROUNDS=b as two calls.
# Every line also goes to $OUT/emitters_part$PART.log.
#
# Expected (sessions 20-22): the library matmul level at 4096^3 (0.185 against 0.183 ms in
# session 20); the decode shape 16x4096x4096 slower under the layout emitter, which has no
# split-K (the runtime's split-K compilation is the planning emitter's); the row kernels
# unknown (the layout emitter ignores whole_tile_checks and the program-prefetch knobs).
# A row where layout / planning > 1.03 is what a flip of the default must first mend.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
OUTDIR=${OUT:-/tmp/emitters}
PART=${PART:-1}
case "$PART" in 1 | 2) ;; *) echo "PART=1 or PART=2" >&2; exit 2 ;; esac
mkdir -p "$OUTDIR"
exec > >(tee -a "$OUTDIR/emitters_part$PART.log") 2>&1
TEE=$!
# Before the script ends: close the pipe to tee and wait, so that the log has every line.
finish() { exec >&- 2>&-; wait "$TEE"; }
trap finish EXIT
gpu_build tessera cuda_bench

if [ "$PART" = 1 ]; then
  echo "=== checks, layout emitter ($(( $(date +%s) - S0 )) s)"
  for dt in f32 bf16; do
    for spec in "vector_add N=100003" "softmax M=37,N=3001" "layernorm M=37,N=3001" "rmsnorm M=37,N=3001" \
                "matmul M=200,N=300,K=136" "matmul_struct M=200,N=300,K=136" "sort M=5,N=1000"; do
      set -- $spec
      TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 "$B/bin/tessera" run "$1" -b cuda --check --dtype $dt --size "$2" 2>&1 | tail -1
    done
  done
  echo "=== topk checks, layout emitter ($(( $(date +%s) - S0 )) s)"
  TESSERA_CUDA_FROM_LAYOUTS=1 topk_checks
  for round in a b; do
    for em in planning layouts; do
      for dt in f32 bf16; do
        ms=$(env TESSERA_CUDA_FROM_LAYOUTS=$([ $em = layouts ] && echo 1 || echo 0) timeout 60 "$B/bin/tessera" bench topk -b cuda \
          --dtype $dt --size M=64,N=131072,K=64 --reps 100 2>&1 | grep -o 'median_ms=[0-9.e+-]*')
        echo "topk $dt 64x131072 k=64 $em round $round: $ms"
      done
    done
  done
  echo "[$(( $(date +%s) - S0 )) s] done"
  exit 0
fi

for round in ${ROUNDS:-a b}; do
  for em in planning layouts; do
    echo "=== cuda_bench, $em emitter, round $round ($(( $(date +%s) - S0 )) s)"
    # Each emitter for every kernel (since session 48 the default picks per kernel).
    if [ $em = layouts ]; then export TESSERA_CUDA_FROM_LAYOUTS=1; else export TESSERA_CUDA_FROM_LAYOUTS=0; fi
    timeout 200 "$B/bin/cuda_bench" --json "$OUTDIR/cuda_bench_${em}_$round.json" > "$OUTDIR/cuda_bench_${em}_$round.txt" 2>&1 ||
      { echo "cuda_bench ($em, $round) failed: tail of its log:"; tail -5 "$OUTDIR/cuda_bench_${em}_$round.txt"; }
  done
done
unset TESSERA_CUDA_FROM_LAYOUTS

echo "=== layout / planning ($(( $(date +%s) - S0 )) s)"
ROUNDS=${ROUNDS:-a b} python3 - "$OUTDIR" <<'PY'
import json, os, sys
d = sys.argv[1]
rounds = os.environ["ROUNDS"].split()
def load(em, r):
    try:
        return {(x["kernel"], x["dtype"], x["sizes"]): x for x in json.load(open(f"{d}/cuda_bench_{em}_{r}.json"))["results"]}
    except Exception as e:
        print(f"no results for {em} {r}: {e}")
        return {}
runs = {(em, r): load(em, r) for em in ("planning", "layouts") for r in rounds}
keys = [k for k in runs[("planning", rounds[0])] if all(k in v for v in runs.values())]
print(f"{'kernel':14} {'dtype':5} {'sizes':24} {'planning ms':>18} {'layouts ms':>18} {'layouts/planning':>17}  cuBLAS ratio p / l")
for k in keys:
    p = [runs[("planning", r)][k]["median_ms"] for r in rounds]
    l = [runs[("layouts", r)][k]["median_ms"] for r in rounds]
    ratio = sum(l) / sum(p) if sum(p) > 0 else float("nan")
    cb = [runs[(em, rounds[0])][k].get("cublas_ratio", 0) for em in ("planning", "layouts")]
    flag = "  <- slower" if ratio > 1.03 else ""
    print(f"{k[0]:14} {k[1]:5} {k[2]:24} {' '.join(f'{v:.4f}' for v in p):>18} {' '.join(f'{v:.4f}' for v in l):>18} "
          f"{ratio:17.3f}  {cb[0]:.3f} / {cb[1]:.3f}{flag}")
PY
echo "[$(( $(date +%s) - S0 )) s] done"
