#!/usr/bin/env bash
# Does a deeper TMA ring help the decode shapes (issue 20)? One GPU call from the repo root after
# `source .devdeps/setup.sh`: at the 11 shapes of the 50-shape figure where the tuned matmul was
# under cuBLAS (session 25), `tessera tune --exhaustive` over BLOCK_N x ring_stages {0, 6, 8}
# (BLOCK_M 64, BLOCK_K 64 and 128, split_k 0 (the runtime's rule), no cluster, the figure's other knobs) with
# the figure's timing (do_bench, rep 5, 8 finalists in 3 rounds; at the shapes the runtime
# splits, the split compilation's ring is 8 stages whatever the knob), then cuBLAS through torch at the
# same shapes as the figure times it. Prints, per shape, the best time at each ring depth and
# cuBLAS's. Rows to $OUT/ring_stages.jsonl when $OUT is set.
set -uo pipefail
B=${BUILD:-build-gpu}
S0=$(date +%s)
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/ring_cmake.log 2>&1 || { tail -20 /tmp/ring_cmake.log; exit 1; }
timeout 300 cmake --build "$B" -j16 --target tessera 2>&1 | tail -1
T="$B/bin/tessera"
W=$(mktemp -d)
KN="num_warps=0,whole_tile_checks=0,mma_l2_prefetch=0,mma_spread_copies=0,mma_early_last_step=0,epilogue_buffers=2"
KN="$KN,epilogue_overlap=1,tma_store_epilogue=1,tma_hint_a=0,tma_hint_b=0,BLOCK_M=64,cluster_m=1,min_blocks=1,stream_k=0"
SHAPES=(M=1,N=4608,K=3584 M=1,N=3584,K=3584 M=1,N=1536,K=7168 M=1,N=7168,K=2048 M=16,N=6144,K=4096
        M=16,N=4608,K=3584 M=16,N=3584,K=3584 M=16,N=1536,K=7168 M=16,N=7168,K=2048 M=128,N=3584,K=3584
        M=128,N=1536,K=7168)
for s in "${SHAPES[@]}"; do
  for bk in 64 128; do
    for sk in 0; do
      [ $(( $(date +%s) - S0 )) -gt "${UNTIL:-330}" ] && break 3
      timeout 100 "$T" tune matmul --dtype bf16 -b cuda --config "$KN,BLOCK_K=$bk,split_k=$sk" --size "$s" --exhaustive \
        --rounds 3 --finalists 8 --rep 5 --timeout 20 --db "$W/rs.db" --json > /dev/null 2>> "$W/tune.err" ||
        echo "tune $s BLOCK_K=$bk split_k=$sk: failed ($(tail -1 "$W/tune.err"))"
    done
  done
  echo "[$(( $(date +%s) - S0 )) s] $s"
done
"$T" tune --db "$W/rs.db" --export - > "$W/rows.jsonl"
[ -n "${OUT:-}" ] && cp "$W/rows.jsonl" "$OUT/ring_stages.jsonl"
python3 - "$W/rows.jsonl" "${SHAPES[@]}" <<'PY'
import json, sys
from triton.testing import do_bench
import torch
rows = [json.loads(l) for l in open(sys.argv[1])]
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
for _ in range(200): a @ a  # out of idle clocks
print("| shape | ring 0 (annotation) | ring 6 | ring 8 | cuBLAS | best ring vs cuBLAS |")
print("|---|---|---|---|---|---|")
for s in sys.argv[2:]:
    d = dict(kv.split("=") for kv in s.split(","))
    key = ",".join(f"{k}={d[k]}" for k in sorted(d))
    x = torch.randn(int(d["M"]), int(d["K"]), device="cuda", dtype=torch.bfloat16)
    w = torch.randn(int(d["K"]), int(d["N"]), device="cuda", dtype=torch.bfloat16)
    cb = do_bench(lambda: x @ w, warmup=10, rep=40, return_mode="median")
    best = {}
    for r in rows:
        # The least over every row of the config (sweep rows and finalists' rounds alike).
        if r["shape"] != key or r["status"] != "ok": continue
        c = r["config"]; rs = c.get("ring_stages", 0)
        tag = f'{c["BLOCK_N"]}x{c["BLOCK_K"]} sk{c["split_k"]}'
        if rs not in best or r["ms"] < best[rs][0]: best[rs] = (r["ms"], tag)
    cells = [f"{best[v][0]:.5f} ({best[v][1]})" if v in best else "-" for v in (0, 6, 8)]
    top = min(v[0] for v in best.values()) if best else None
    print(f"| {s} | " + " | ".join(cells) + f" | {cb:.5f} | " + (f"{cb / top:.2f}x |" if top else "- |"))
PY
echo "[$(( $(date +%s) - S0 )) s] done"
