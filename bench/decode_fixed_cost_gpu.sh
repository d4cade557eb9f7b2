#!/usr/bin/env bash
# The decode shapes' fixed cost (issue 20; bench/RESULTS.md, session 25), one GPU call from the
# repo root after `source .devdeps/setup.sh`:
#  1. the library matmul at M = 1, N = 4608 over K = 64 .. 3584, timed as the tuner and the
#     50-shape figure time (`tessera tune --exhaustive` over ring_stages at one 64 x 128 x 64 wgmma
#     tile, split_k 0: the runtime's rule), and at BLOCK_M 16 (the mma.sync path, never split);
#  2. cuBLAS (torch.matmul, do_bench) at the same shapes, and an empty kernel (do_bench's floor);
#  3. `tessera bench` at K = 64 and 3584 with split_k 0 (the rule) against 1 (never split).
set -uo pipefail
B=${BUILD:-build-gpu}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release > /tmp/fixed_cmake.log 2>&1 || { tail -20 /tmp/fixed_cmake.log; exit 1; }
timeout 300 cmake --build "$B" -j16 --target tessera 2>&1 | tail -1
T="$B/bin/tessera"
W=$(mktemp -d)
KN="num_warps=0,whole_tile_checks=0,mma_l2_prefetch=0,mma_spread_copies=0,mma_early_last_step=0,epilogue_buffers=2"
KN="$KN,epilogue_overlap=1,tma_store_epilogue=1,tma_hint_a=0,tma_hint_b=0,cluster_m=1,min_blocks=1,stream_k=0"
KN="$KN,BLOCK_N=128,BLOCK_K=64,split_k=0"
KS="64 512 1024 3584"
echo "=== 1. ours (tuner timing: do_bench, L2 flushed, least of 3 rounds)"
for k in $KS; do
  for bm in 64 16; do
    $T tune matmul --dtype bf16 -b cuda --config "$KN,BLOCK_M=$bm" --size M=1,N=4608,K=$k --exhaustive --rounds 3 \
      --finalists 3 --rep 5 --db "$W/f.db" --json 2> "$W/err" | python3 -c '
import json, sys
try:
    d = json.loads(sys.stdin.read().strip().splitlines()[-1])
    print("K=%s BLOCK_M=%s: best %.5f ms (%s)" % (sys.argv[1], sys.argv[2], d["best"]["ms"],
          ",".join("%s=%s" % kv for kv in d["best"]["config"].items() if kv[0] in ("ring_stages",))))
except Exception as e:
    print("K=%s BLOCK_M=%s: no result (%s)" % (sys.argv[1], sys.argv[2], open(sys.argv[3]).read().strip()[-200:]))
' "$k" "$bm" "$W/err"
  done
done
echo "=== 2. cuBLAS and an empty kernel (do_bench, median)"
python3 - $KS <<'PY'
import sys, torch
from triton.testing import do_bench
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
for _ in range(200): a @ a  # out of idle clocks
for k in map(int, sys.argv[1:]):
    x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(k, 4608, device="cuda", dtype=torch.bfloat16)
    print("cuBLAS K=%d: %.5f ms" % (k, do_bench(lambda: x @ w, warmup=10, rep=40, return_mode="median")))
z = torch.empty(1, device="cuda")
print("empty kernel: %.5f ms" % do_bench(lambda: z.zero_(), warmup=10, rep=40, return_mode="median"))
PY
echo "=== 3. tessera bench, split_k 0 (the runtime's rule) against 1 (never), two rounds"
for k in 64 3584; do
  for r in 1 2; do
    for sk in 0 1; do
      echo "K=$k split_k=$sk: $($T bench matmul -b cuda --dtype bf16 --size M=1,N=4608,K=$k --config BLOCK_M=64 \
        --config BLOCK_N=128 --config BLOCK_K=64 --config split_k=$sk --reps 200 2>&1 | tail -1 | grep -o 'median_ms=[0-9.e-]*')"
    done
  done
done
