#!/usr/bin/env bash
# Does the operand swap help the decode shapes (issue 20)? One GPU call from the repo root after
# `source .devdeps/setup.sh`: at decode shapes of the 50-shape figure, `tessera tune --exhaustive`
# over swap_operands {0, 1} x split_k {0 (the runtime's rule), 2, 3, 4} at BLOCK_M {16 (32 at
# M > 16), 64 (swap 0 only: the swap takes M tiles under 64)} x BLOCK_N {64, 128} x BLOCK_K
# {64, 128} (one tune per tile; the figure's other knobs) with the figure's timing (do_bench,
# rep 5, 8 finalists in 3 rounds), then cuBLAS through torch at the same shapes as the figure
# times it. Prints, per shape, the best of BLOCK_M 64 (wgmma, 64-row A tiles), of the small M tile
# on mma.sync (swap 0) and swapped on wgmma (swap 1), and cuBLAS's. Env: SHAPES (space-separated
# M=..,N=..,K=..), UNTIL (seconds of tuning). Rows to $OUT/swap.jsonl when $OUT is set.
set -uo pipefail
B=${BUILD:-build-gpu}
S0=$(date +%s)
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/swap_cmake.log 2>&1 || { tail -20 /tmp/swap_cmake.log; exit 1; }
timeout 300 cmake --build "$B" -j16 --target tessera 2>&1 | tail -1
T="$B/bin/tessera"
W=$(mktemp -d)
KN="num_warps=0,whole_tile_checks=0,mma_l2_prefetch=0,mma_spread_copies=0,mma_early_last_step=0,epilogue_buffers=2"
KN="$KN,epilogue_overlap=1,tma_store_epilogue=1,tma_hint_a=0,tma_hint_b=0,cluster_m=1,min_blocks=1,stream_k=0,ring_stages=0"
read -r -a SH <<< "${SHAPES:-M=1,N=4608,K=3584 M=1,N=7168,K=2048 M=16,N=4608,K=3584 M=1,N=1536,K=7168 M=16,N=1536,K=7168 M=128,N=3584,K=3584}"
for s in "${SH[@]}"; do
  m=${s#M=}; m=${m%%,*}
  small=16; [ "$m" -gt 16 ] && small=32
  for bm in "$small" 64; do
    for bn in 64 128; do
      for bk in 64 128; do
        [ $(( $(date +%s) - S0 )) -gt "${UNTIL:-420}" ] && break 4
        # (BLOCK_M 64: swap_operands changes nothing, fixed at 0)
        sw=""; [ "$bm" = 64 ] && sw=",swap_operands=0"
        timeout 100 "$T" tune matmul --dtype bf16 -b cuda --config "$KN,BLOCK_M=$bm,BLOCK_N=$bn,BLOCK_K=$bk$sw" \
          --size "$s" --exhaustive --rounds 3 --finalists 8 --rep 5 --timeout 20 --db "$W/swap.db" --json \
          > /dev/null 2>> "$W/tune.err" || echo "tune $s ${bm}x${bn}x${bk}: failed ($(tail -1 "$W/tune.err"))"
      done
    done
  done
  echo "[$(( $(date +%s) - S0 )) s] $s"
done
"$T" tune --db "$W/swap.db" --export - > "$W/rows.jsonl"
[ -n "${OUT:-}" ] && cp "$W/rows.jsonl" "$OUT/swap.jsonl"
python3 - "$W/rows.jsonl" "${SH[@]}" <<'PY'
import json, sys
from triton.testing import do_bench
import torch
rows = [json.loads(l) for l in open(sys.argv[1])]
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
for _ in range(200): a @ a  # out of idle clocks
print("| shape | BLOCK_M 64 | small M tile, mma.sync | small M tile, swapped wgmma | cuBLAS | best vs cuBLAS |")
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
        c = r["config"]
        col = "64" if c["BLOCK_M"] == 64 else ("swap" if c.get("swap_operands", 0) == 1 else "mma")
        tag = f'{c["BLOCK_M"]}x{c["BLOCK_N"]}x{c["BLOCK_K"]} sk{c["split_k"]}'
        if col not in best or r["ms"] < best[col][0]: best[col] = (r["ms"], tag)
    cells = [f"{best[v][0]:.5f} ({best[v][1]})" if v in best else "-" for v in ("64", "mma", "swap")]
    top = min(v[0] for v in best.values()) if best else None
    print(f"| {s} | " + " | ".join(cells) + f" | {cb:.5f} | " + (f"{cb / top:.2f}x |" if top else "- |"))
PY
