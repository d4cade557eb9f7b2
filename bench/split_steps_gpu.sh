#!/usr/bin/env bash
# Where splitting K starts to pay (issue 20; bench/RESULTS.md, session 26), one GPU call from the
# repo root after `source .devdeps/setup.sh`: the library bf16 matmul at M = 1 on the wgmma path
# (64 x BLOCK_N x 64 tiles), `tessera bench` medians with split_k forced to 1 (never), 2, 3 and 4
# ways, over K = 256 .. 7168 (4 .. 112 k steps), at N = 4608 and 1536 (36 and 12 programs of
# 64 x 128) and N = 4608 at BLOCK_N 256 (18 programs). The k steps a slice gets at the fastest
# split are what the runtime's rule (split_k_factor) weighs.
set -uo pipefail
B=${BUILD:-build-gpu}
if [ -z "${TESSERA:-}" ]; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_TESTS=OFF > /tmp/split_cmake.log 2>&1 ||
    { tail -20 /tmp/split_cmake.log; exit 1; }
  timeout 300 cmake --build "$B" -j16 --target tessera 2>&1 | tail -1
  T="$B/bin/tessera"
else
  T=$TESSERA
fi
KS=${KS:-256 512 1024 2048 3584 7168}
SPLITS=${SPLITS:-1 2 3 4 0}
python3 -c 'import torch; a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16); [a @ a for _ in range(300)]; torch.cuda.synchronize()'
for nb in "4608 128" "1536 128" "4608 256"; do
  set -- $nb
  for k in $KS; do
    row="N=$1 BLOCK_N=$2 K=$k steps=$((k / 64)):"
    for sk in $SPLITS; do
      ms=$($T bench matmul -b cuda --dtype bf16 --size M=1,N=$1,K=$k --config BLOCK_M=64 --config BLOCK_N=$2 \
        --config BLOCK_K=64 --config split_k=$sk --reps 300 2>&1 | tail -1 | grep -o 'median_ms=[0-9.e-]*' | cut -d= -f2)
      row="$row split$sk=${ms:-fail}"
    done
    echo "$row"
  done
done
