#!/usr/bin/env bash
# A short GPU call for sort/top-k (issue 18), run from the repo root on the H200 after
# `source .devdeps/setup.sh`: builds only the CLI (Release), checks the library sort and topk
# on cuda against the interpreter (one ragged top-k), and times topk at 64 x 131072, k = 64
# beside torch.topk in the same call.
set -uo pipefail
B=build-gpu
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_TESTS=OFF > /dev/null 2>&1 || cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
timeout 150 cmake --build $B -j16 --target tessera 2>&1 | tail -1
T=$B/bin/tessera
for k in sort topk; do timeout 20 $T run $k -b cuda --check 2>&1 | tail -1; done
timeout 20 $T run topk -b cuda --check --size M=3,N=5000,K=100 2>&1 | tail -1
timeout 30 $T bench topk -b cuda --size M=64,N=131072,K=64 --reps 5 2>&1 | tail -1
python3 -c "
import torch; from triton.testing import do_bench
x=torch.randn(64,131072,device='cuda')
print('torch.topk 64x131072 k=64: %.3f ms' % do_bench(lambda: torch.topk(x,64,dim=1), return_mode='median'))
" 2>&1 | tail -1
