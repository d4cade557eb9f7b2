#!/usr/bin/env bash
# The autotuner's H200 figure (issue 20; docs/tuning.md): bf16 matmul over 50 LLM GEMM shapes
# (the projection and MLP sizes of Llama-3-8B, Qwen2.5-7B and DeepSeek-V3 at M = 1..4096),
# each tuned with `tessera tune -b cuda` measuring 5% of a fixed sub-space of the cuda knobs,
# against the default config (what `tessera run` binds without a database: size_configs),
# against the exhaustive best on a few shapes (every config of the sub-space measured), and
# against cuBLAS through torch.matmul (triton's do_bench, as the tuner times). One command,
# from the repo root on the GPU machine:
#
#   source .devdeps/setup.sh && bench/tune_cuda_figure.sh
#
# About 5 minutes on one H200 with 16 cores after the CLI's build (Release, no tests; up to
# 200 s more when the machine has no build yet, which the deadlines do not count): every config
# of the sub-space compiled once in parallel (`tune --compile-only` at M=128 and M=1, which
# need the split-K compilations too; the cubins do not depend on the shape, so the tunes then
# hit the compile cache), the exhaustive shapes, then the tunes in order into one database (so
# that later shapes learn from earlier ones), then cuBLAS. A phase past its deadline is cut
# short and the table reports what was measured. Everything goes to $WORK (default
# /tmp/tessera-tune-cuda), the table to $WORK/table.md; when $OUT names a folder (the device
# machine's, whose files come back), the table and a tarball of the data are copied there. A
# failing step is reported and the script goes on.
#
#   DRY=1 bench/tune_cuda_figure.sh     # no GPU: build, --space and --compile-only only
#   NSHAPES=10 bench/tune_cuda_figure.sh   # the first 10 shapes
#   BUDGET=12 KNOBS=... EXHAUSTIVE="M=16,N=6144,K=4096 ..." DEADLINE=280 (seconds, for the tunes)
set -uo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s)
B=${BUILD:-build-gpu}
W=${WORK:-/tmp/tessera-tune-cuda}
JOBS=$(nproc 2>/dev/null || echo 16)
# Seconds after the build: no exhaustive shape is begun after EXH_UNTIL, no tune after
# DEADLINE (the table then reports the shapes tuned).
EXH_UNTIL=${EXH_UNTIL:-140}
DEADLINE=${DEADLINE:-290}
# The sub-space: the tiles (BLOCK_M x BLOCK_N x BLOCK_K, 60), 2-CTA clusters (cluster_m) and
# the occupancy hint (min_blocks): 240 configs, 60 at M <= 16 (tile-cover); the other codegen
# knobs fixed at their defaults (bf16 matmul on sm_90a has 4.9 million configs in all). The
# default config (size_configs) is in it, and is what `tessera run` binds without a database.
KNOBS=${KNOBS:-num_warps=0,whole_tile_checks=0,mma_l2_prefetch=0,mma_spread_copies=0,mma_early_last_step=0,epilogue_buffers=2,epilogue_overlap=1,tma_store_epilogue=1,tma_hint_a=0,tma_hint_b=0}
# BUDGET unset: tune's default, 5% of the pruned space, at least 8 (12 of 240; 8 of 60 at M <= 16).
budget=()
[ -n "${BUDGET:-}" ] && budget=(--budget "$BUDGET")
elapsed() { echo $(( $(date +%s) - START )); }
log() { echo "[$(elapsed) s] $*" >&2; }

mkdir -p "$W"
rm -f "$W"/*.json "$W"/*.db "$W"/*.jsonl "$W"/*.log
log "build"
if [ -z "${TESSERA:-}" ]; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_TESTS=OFF > "$W/cmake.log" 2>&1 ||
    { echo "cmake failed:"; tail -20 "$W/cmake.log"; exit 1; }
  timeout 200 cmake --build "$B" -j"$JOBS" --target tessera > "$W/build.log" 2>&1 ||
    { echo "build failed:"; tail -20 "$W/build.log"; exit 1; }
  T=$B/bin/tessera
else
  T=$TESSERA
fi
export TESSERA_TUNE_DB="$W/tuned.db"
START=$(date +%s)  # the deadlines count from here, after the build
log "built"

# N,K of the weights (out, in features), then the batch sizes M.
NK=(6144,4096 4096,4096 28672,4096 4096,14336    # Llama-3-8B: qkv, o, gate_up, down
    4608,3584 3584,3584 18944,3584 3584,18944    # Qwen2.5-7B: qkv, o, up, down
    1536,7168 7168,2048)                         # DeepSeek-V3: q_a, an expert's down
MS=(1 16 128 1024 4096)
SHAPES=()
for m in "${MS[@]}"; do for nk in "${NK[@]}"; do SHAPES+=("M=$m,N=${nk%,*},K=${nk#*,}"); done; done
[ -n "${NSHAPES:-}" ] && SHAPES=("${SHAPES[@]:0:$NSHAPES}")
printf '%s\n' "${SHAPES[@]}" > "$W/shapes.txt"
read -r -a EXH <<< "${EXHAUSTIVE:-M=16,N=6144,K=4096 M=1024,N=4096,K=14336 M=128,N=28672,K=4096}"
TUNE=("$T" tune matmul --dtype bf16 -b cuda --config "$KNOBS")

log "the space"
"${TUNE[@]}" --size "${SHAPES[0]}" --space | tee "$W/space.txt" | tail -3
# Every config at M=128 (BLOCK_M 16-128), with the split-K compilations of those whose programs
# are few at N=1536; then M=1's split-K ones (mostly hits).
log "compile every config (NVRTC on $JOBS cores)"
for s in M=128,N=1536,K=7168 M=1,N=1536,K=7168; do
  timeout 200 "${TUNE[@]}" --size "$s" --compile-only --timeout 120 2>&1 | tee -a "$W/compile.txt"
done
if [ -n "${DRY:-}" ]; then
  "${TUNE[@]}" --size "${SHAPES[0]}" 2>&1 | tail -1
  log "dry run done"
  exit 0
fi

# Exhaustive: every config of the sub-space at a shape, one round each (its own database, so
# that the tunes learn nothing from it). A shape cut short by its timeout keeps what it stored.
log "exhaustive: ${EXH[*]}"
i=0
: > "$W/exh_shapes.txt"
for s in "${EXH[@]}"; do
  if [ "$(elapsed)" -ge "$EXH_UNTIL" ]; then log "exhaustive: no time left for $s"; break; fi
  timeout 70 "${TUNE[@]}" --size "$s" --budget 100000 --rounds 1 --db "$W/exhaustive_$i.db" --json \
    > "$W/exhaustive_$i.json" 2> "$W/exhaustive_$i.log" || log "exhaustive $s: exit $? ($(tail -1 "$W/exhaustive_$i.log"))"
  "$T" tune --db "$W/exhaustive_$i.db" --export - >> "$W/exhaustive.jsonl" 2>/dev/null
  echo "$s" >> "$W/exh_shapes.txt"
  i=$((i + 1))
done

log "tune ${#SHAPES[@]} shapes, ${budget[*]:-the default budget} (deadline $DEADLINE s)"
i=0
for s in "${SHAPES[@]}"; do
  if [ "$(elapsed)" -ge "$DEADLINE" ]; then log "deadline: $i of ${#SHAPES[@]} shapes tuned"; break; fi
  timeout 45 "${TUNE[@]}" --size "$s" "${budget[@]}" --rounds 2 --json > "$W/tuned_$i.json" 2> "$W/tuned_$i.log" ||
    log "tune $s: exit $? ($(tail -1 "$W/tuned_$i.log"))"
  i=$((i + 1))
done

log "cuBLAS through torch"
timeout 60 python3 - "$W" <<'PY' 2>&1 | tail -2
import json, sys
out = sys.argv[1]
import torch
from triton.testing import do_bench
res = {}
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
for _ in range(200): a @ a  # out of idle clocks
for line in open(f"{out}/shapes.txt"):
    d = dict(kv.split("=") for kv in line.strip().split(","))
    m, n, k = int(d["M"]), int(d["N"]), int(d["K"])
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    res[line.strip()] = do_bench(lambda: x @ w, warmup=10, rep=40, return_mode="median")
json.dump(res, open(f"{out}/cublas.json", "w"))
print(f"cuBLAS: {len(res)} shapes")
PY

log "table"
python3 - "$W" "${#SHAPES[@]}" <<'PY' | tee "$W/table.md"
import glob, json, math, os, sys
out, n = sys.argv[1], int(sys.argv[2])
shapes = [l.strip() for l in open(f"{out}/shapes.txt")]
def load(p):
    try: return json.load(open(p))
    except Exception: return None
cublas = load(f"{out}/cublas.json") or {}
def key(sizes): return ",".join(f"{k}={sizes[k]}" for k in ("M", "N", "K"))
def cfg(c): return ",".join(f"{k}={v}" for k, v in sorted(c.items()) if k.startswith("BLOCK") or k in ("cluster_m", "epilogue_buffers", "min_blocks"))
print("| shape | measured of pruned | tuning s | default ms | tuned ms | tuned config | tuned/default | cuBLAS ms | tuned vs cuBLAS |")
print("|---|---|---|---|---|---|---|---|---|")
speed, vs_cublas, tuned_n = [], [], 0
for i, s in enumerate(shapes):
    t = load(f"{out}/tuned_{i}.json")
    cb = cublas.get(s)
    if not t or not t.get("best"):
        print(f"| {s} | not tuned | | | | | | {cb and f'{cb:.4g}' or '-'} | |"); continue
    tuned_n += 1
    b, d = t["best"]["ms"], t["default"]["ms"] if t["default"]["status"] == "ok" else None
    su = d / b if d else float("nan")
    if d: speed.append(su)
    r = cb / b if cb else float("nan")
    if cb: vs_cublas.append(r)
    print(f"| {s} | {t['measured']} of {t['pruned']} ({100 * t['measured'] / max(t['pruned'], 1):.0f}%) | {t['seconds']} | "
          f"{d and f'{d:.4g}' or t['default']['status']} | {b:.4g} | {cfg(t['best']['config'])} | {su:.2f}x | "
          f"{cb and f'{cb:.4g}' or '-'} | {r:.2f}x |")
geo = lambda v: math.exp(sum(map(math.log, v)) / len(v)) if v else float("nan")
print(f"\ntuned {tuned_n} of {len(shapes)} shapes; tuned over default: geomean {geo(speed):.3f}x (min {min(speed, default=float('nan')):.2f}x); "
      f"tuned over cuBLAS (cuBLAS ms / tuned ms): geomean {geo(vs_cublas):.3f}x, {sum(r >= 1.0 for r in vs_cublas)} of {len(vs_cublas)} at >= 1.0x, min {min(vs_cublas, default=float('nan')):.2f}x")
# Exhaustive shapes: the tuned config's time in the exhaustive data against its best.
best_of = {}
try:
    for line in open(f"{out}/exhaustive.jsonl"):
        r = json.loads(line)
        if r["status"] != "ok": continue
        k2 = (r["shape"], json.dumps(r["config"], sort_keys=True))
        best_of[k2] = min(best_of.get(k2, 1e30), r["ms"])
except FileNotFoundError:
    pass
print("\n| exhaustive shape | configs measured | best ms | best config | tuned config's ms there | within | default's ms there |")
print("|---|---|---|---|---|---|---|")
within = []
for line in open(f"{out}/exh_shapes.txt"):
    s3 = line.strip()
    d = dict(kv.split("=") for kv in s3.split(","))
    shape = ",".join(f"{k}={d[k]}" for k in sorted(d))
    times = {c: ms for (sh, c), ms in best_of.items() if sh == shape}
    if not times:
        print(f"| {s3} | 0 | | | | | |"); continue
    bc = min(times, key=times.get)
    best = times[bc]
    mine = dflt = None
    if s3 in shapes:
        t = load(f"{out}/tuned_{shapes.index(s3)}.json")
        if t and t.get("best"):
            mine = times.get(json.dumps(t["best"]["config"], sort_keys=True))
            dflt = times.get(json.dumps(t["default"]["config"], sort_keys=True))
    w = f"{100 * (mine / best - 1):.1f}%" if mine else "(tuned config not measured there, or shape not tuned)"
    if mine: within.append(mine / best - 1)
    print(f"| {s3} | {len(times)} | {best:.4g} | {cfg(json.loads(bc))} | {mine and f'{mine:.4g}' or '-'} | {w} | {dflt and f'{dflt:.4g}' or '-'} |")
if within:
    print(f"\nwithin 2% of the exhaustive best: {sum(w <= 0.02 for w in within)} of {len(within)}; worst {100 * max(within):.1f}%")
PY
if [ -n "${OUT:-}" ] && [ -d "$OUT" ] && [ "$OUT" != "$W" ]; then
  cp "$W/table.md" "$OUT/tune_cuda_table.md" 2>/dev/null
  (cd "$W" && tar czf "$OUT/tune_cuda_data.tar.gz" $(ls *.json *.jsonl *.txt *.log 2>/dev/null)) 2>/dev/null
fi
log "done; data in $W"
