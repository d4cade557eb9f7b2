#!/usr/bin/env bash
# Tiles of 96 columns at the shape where cuBLAS runs them (issue 20; bench/RESULTS.md, session
# 29): one GPU call from the repo root after `source .devdeps/setup.sh`. Builds, runs the 96-column
# GPU tests, then times the bf16 matmul at SHAPES with `tessera tune --exhaustive` (the figure's
# timing: do_bench, rep 5, 3 rounds of the finalists) over ring_stages {0, 6, 8} for each of
# CONFIGS (the figure's other knobs fixed), and cuBLAS (bench/cublas_kernels.py) beside it.
set -uo pipefail
source bench/gpu_common.sh
gpu_build tessera tessera_gpu_tests
[ -z "${NOTEST:-}" ] && timeout 240 "$B/bin/tessera_gpu_tests" --gtest_filter="${FILTER:-WgmmaGpu.TilesOf96*}" 2>&1 | grep -E "^\[ *(OK|FAILED|PASSED) |Failure|Which is|error" | head -30
echo "[$(( $(date +%s) - S0 )) s] tests"
T="$B/bin/tessera"
W=$(mktemp -d)
KN="num_warps=0,whole_tile_checks=0,mma_l2_prefetch=0,mma_spread_copies=0,mma_early_last_step=0,epilogue_buffers=2"
KN="$KN,epilogue_overlap=1,tma_store_epilogue=1,tma_hint_a=0,tma_hint_b=0,min_blocks=1,swap_operands=0"
for s in ${SHAPES:-M=1024,N=1536,K=7168}; do
  for c in ${CONFIGS:-BLOCK_M=128,BLOCK_N=96,BLOCK_K=64,cluster_m=1,split_k=0,stream_k=0 BLOCK_M=128,BLOCK_N=96,BLOCK_K=64,cluster_m=2,split_k=0,stream_k=0 BLOCK_M=128,BLOCK_N=192,BLOCK_K=64,cluster_m=1,split_k=0,stream_k=1}; do
    timeout 100 "$T" tune matmul --dtype bf16 -b cuda --config "$KN,$c" --size "$s" --exhaustive --rounds 3 --finalists 8 \
      --rep 5 --timeout 20 --db "$W/t.db" --json > /dev/null 2>> "$W/tune.err" || echo "tune $s $c: failed ($(tail -1 "$W/tune.err"))"
  done
done
"$T" tune --db "$W/t.db" --export - > "$W/rows.jsonl"
[ -n "${OUT:-}" ] && cp "$W/rows.jsonl" "$OUT/tiles96.jsonl"
python3 - "$W/rows.jsonl" <<'PY'
import json, sys
best = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["status"] != "ok": continue
    c = r["config"]
    tag = (r["shape"], f'{c["BLOCK_M"]}x{c["BLOCK_N"]}x{c["BLOCK_K"]} cl{c["cluster_m"]} sk{c["stream_k"]} rs{c["ring_stages"]}')
    best[tag] = min(best.get(tag, 9), r["ms"])
for (s, t), ms in sorted(best.items()): print(f"{s} {t}: {ms * 1000:.1f} us")
PY
echo "[$(( $(date +%s) - S0 )) s] tuned"
timeout 60 python3 bench/cublas_kernels.py ${CUBLAS_SHAPES:-1024x1536x7168}
echo "[$(( $(date +%s) - S0 )) s] done"
