#!/usr/bin/env bash
# The autotuner's cpu figure (docs/tuning.md, bench/RESULTS.md): f32 matmul at SHAPES, each
# measured over its whole pruned space once (the exhaustive data: bench/data/
# tune_cpu_matmul_exhaustive.jsonl), then tuned with `tessera tune --budget $BUDGET`, the shapes
# in order into one database so that later shapes learn from earlier ones. The tuned config's
# time is read from the exhaustive data, so its distance from the best does not depend on the
# machine's drift between the two runs. Single-threaded by default (OMP_NUM_THREADS=1): on a
# shared 2-core machine, two OpenMP threads descheduled in turn make timings useless.
#
#   bench/tune_cpu_figure.sh            # OUT=/tmp/tessera-tune-figure BUDGET=6
#   REUSE=1 BUDGET=4 bench/tune_cpu_figure.sh   # the tuned runs again over OUT's exhaustive data
set -euo pipefail
cd "$(dirname "$0")/.."
T=${TESSERA:-build/bin/tessera}
OUT=${OUT:-/tmp/tessera-tune-figure}
BUDGET=${BUDGET:-6}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
SHAPES=(M=64,N=1000,K=300 M=300,N=260,K=200 M=1000,N=64,K=250 M=17,N=2000,K=128 M=400,N=400,K=100
        M=128,N=777,K=333 M=999,N=99,K=99 M=250,N=250,K=500 M=33,N=513,K=700 M=700,N=96,K=400)
if [ -z "${REUSE:-}" ]; then
  rm -rf "$OUT"
  mkdir -p "$OUT"
  i=0
  for s in "${SHAPES[@]}"; do
    "$T" tune matmul --size "$s" --budget 100000 --db "$OUT/exhaustive.db" --json > "$OUT/exhaustive_$i.json" 2>/dev/null
    i=$((i + 1))
  done
fi
rm -f "$OUT/tuned.db"
i=0
for s in "${SHAPES[@]}"; do
  "$T" tune matmul --size "$s" --budget "$BUDGET" --db "$OUT/tuned.db" --json > "$OUT/tuned_$i.json" 2>/dev/null
  i=$((i + 1))
done
"$T" tune --db "$OUT/exhaustive.db" --export "$OUT/exhaustive.jsonl"
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
