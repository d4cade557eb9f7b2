#!/usr/bin/env bash
# The autotuner's cpu figure (docs/tuning.md, bench/RESULTS.md): f32 matmul at SHAPES, each
# measured over its whole pruned space once (the exhaustive data, $OUT/exhaustive.jsonl; kept
# in bench/data/), then tuned with `tessera tune` (--budget $BUDGET when set), the shapes in
# order into one database so that later shapes learn from earlier ones. The tuned config's
# time is read from the exhaustive data, so its distance from the best does not depend on the
# machine's drift between the two runs. Single-threaded by default (OMP_NUM_THREADS=1): on a
# shared 2-core machine, two OpenMP threads descheduled in turn make timings useless.
#
#   bench/tune_cpu_figure.sh            # OUT=/tmp/tessera-tune-figure; 20 shapes; tune's default budget
#   REUSE=1 BUDGET=12 bench/tune_cpu_figure.sh          # the tuned runs again over OUT's exhaustive data
#   SHAPES="M=64,N=1000,K=300 M=300,N=260,K=200" bench/tune_cpu_figure.sh
set -euo pipefail
cd "$(dirname "$0")/.."
T=${TESSERA:-build/bin/tessera}
OUT=${OUT:-/tmp/tessera-tune-figure}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# BUDGET unset: tune's default, 5% of the pruned space (at least 8).
budget=()
[ -n "${BUDGET:-}" ] && budget=(--budget "$BUDGET")
if [ -n "${SHAPES:-}" ]; then
  read -r -a SHAPES <<< "$SHAPES"
else
  SHAPES=(M=64,N=1000,K=300 M=300,N=260,K=200 M=1000,N=64,K=250 M=17,N=2000,K=128 M=400,N=400,K=100
          M=128,N=777,K=333 M=999,N=99,K=99 M=250,N=250,K=500 M=33,N=513,K=700 M=700,N=96,K=400
          M=80,N=1500,K=200 M=1500,N=80,K=200 M=256,N=256,K=256 M=100,N=100,K=1000 M=48,N=700,K=600
          M=600,N=48,K=600 M=160,N=480,K=300 M=512,N=128,K=128 M=129,N=129,K=129 M=40,N=4000,K=64)
fi
if [ -z "${REUSE:-}" ]; then
  rm -rf "$OUT"
  mkdir -p "$OUT"
  # One database per shape: the exhaustive search needs no history, and its model refits stay small.
  i=0
  for s in "${SHAPES[@]}"; do
    "$T" tune matmul --size "$s" --budget 100000 --db "$OUT/exhaustive_$i.db" --json > "$OUT/exhaustive_$i.json" 2>/dev/null
    "$T" tune --db "$OUT/exhaustive_$i.db" --export - >> "$OUT/exhaustive.jsonl"
    echo "exhaustive $s: $(date -u +%T)" >&2
    i=$((i + 1))
  done
fi
rm -f "$OUT/tuned.db"
i=0
for s in "${SHAPES[@]}"; do
  "$T" tune matmul --size "$s" "${budget[@]}" --db "$OUT/tuned.db" --json > "$OUT/tuned_$i.json" 2>/dev/null
  i=$((i + 1))
done
python3 - "$OUT" "${#SHAPES[@]}" <<'PY'
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
best_of = {}  # (shape, config) -> least ms in the exhaustive data
for line in open(f"{out}/exhaustive.jsonl"):
    r = json.loads(line)
    if r["status"] != "ok": continue
    key = (r["shape"], json.dumps(r["config"], sort_keys=True))
    best_of[key] = min(best_of.get(key, 1e30), r["ms"])
print("| shape | space (pruned) | measured | tuning s | exhaustive best ms | tuned config | its ms (exhaustive data) | within | default ms | tuned / default |")
print("|---|---|---|---|---|---|---|---|---|---|")
within = []
for i in range(n):
    t = json.load(open(f"{out}/tuned_{i}.json"))
    shape = ",".join(f"{k}={v}" for k, v in sorted(t["sizes"].items()))
    times = {c: ms for (s, c), ms in best_of.items() if s == shape}
    best = min(times.values())
    cfg = json.dumps(t["best"]["config"], sort_keys=True)
    mine = times.get(cfg)
    dflt = times.get(json.dumps(t["default"]["config"], sort_keys=True))
    w = mine / best - 1 if mine else float("nan")
    within.append(w)
    print(f"| {shape} | {t['pruned']} | {t['measured']} ({100 * t['measured'] / t['pruned']:.0f}%) | {t['seconds']} | "
          f"{best:.4g} | {','.join(f'{k}={v}' for k, v in sorted(t['best']['config'].items()))} | "
          f"{mine:.4g} | {100 * w:.1f}% | {dflt:.4g} | {dflt / mine:.2f}x |")
ok = sum(1 for w in within if w <= 0.02)
print(f"\nwithin 2% of the exhaustive best: {ok} of {n}; worst {100 * max(within):.1f}%")
PY
