#!/usr/bin/env bash
# pingpong-consumers on the H200 (issue 16), one GPU call from the repo root after
# `source .devdeps/setup.sh`: the layout emitter's ping-pong consumers (two consumer warpgroups,
# each a whole 128 x 128 program, taking alternate programs of a persistent CTA) on
# tests/corpus/matmul_bias_gelu.tile in bf16 (GELU, bias only, no epilogue). The pass is opt-in:
# TESSERA_PINGPONG_CONSUMERS=1 here (and once `consumers = 2` written on the K loop).
#  1. which path: the stats say the loop got two consumers;
#  2. checks against the interpreter (`--check`, random inputs): ragged sizes, more programs
#     than SMs (CTAs run several programs, both consumers work, odd counts per CTA), fewer
#     programs than SMs (consumer 1 of most CTAs has none), one K iteration and ragged K;
#  3. compute-sanitizer racecheck, synccheck and memcheck on one case of 225 programs;
#  4. times at 4096^3: each form cooperative at 128 x 256 (today's) and 128 x 128, and ping-pong
#     at 128 x 128, beside the library matmul (planning emitter) and cuBLAS (bench/torch_gemm.py).
# SKIP_SANITIZE=1 leaves out step 3.
set -uo pipefail
source bench/matmul_forms.sh
sed -e 's/%acc = for %c0, %ktiles, %c1, %acc0 :/%acc = for %c0, %ktiles, %c1, %acc0 {consumers = 2} :/' "$D/gelu.tile" > "$D/gelu_written.tile"
grep -q "consumers = 2" "$D/gelu_written.tile" || echo "pingpong_gpu.sh: could not write consumers = 2"
L=(env TESSERA_CUDA_FROM_LAYOUTS=1)
P=(env TESSERA_CUDA_FROM_LAYOUTS=1 TESSERA_PINGPONG_CONSUMERS=1)
C128=(--config BM=128 --config BN=128 --config BK=64)
echo "=== which path (ping-pong, 128 x 128 x 64)"
"${P[@]}" "$T" compile "$D/gelu.tile" -t cuda:sm_90a -e cuda --stats "${C128[@]}" 2>&1 >/dev/null |
  grep -E "note|pingpong|producer|tma-stores|persistent"
echo "=== checks against the interpreter"
# N and K multiples of 8: rows of whole 16-byte chunks, so that the operands and the result
# take TMA (and the kernel its producer and consumers); N = 2900 does not (the fallback: one
# warpgroup per program, no producer).
for sz in "gelu M=3000,N=2904,K=200" "gelu M=2000,N=1800,K=72" "gelu M=1000,N=776,K=336" "gelu M=257,N=304,K=504" \
          "gelu M=1700,N=2104,K=64" "gelu M=130,N=4000,K=104" "bias M=3000,N=2904,K=200" "bias M=257,N=304,K=504" \
          "plain M=2000,N=1800,K=72" "plain M=1000,N=776,K=336" "gelu M=2000,N=2900,K=200"; do
  set -- $sz
  echo -n "ping-pong $1 $2: "
  "${P[@]}" timeout 120 "$T" run "$D/$1.tile" -b cuda --check --size "$2" "${C128[@]}" 2>&1 | tail -1
done
echo -n "written consumers = 2, gelu M=2000,N=3008,K=200: "
"${L[@]}" timeout 120 "$T" run "$D/gelu_written.tile" -b cuda --check --size M=2000,N=3008,K=200 "${C128[@]}" 2>&1 | tail -1
echo -n "cooperative (not asked) gelu M=2000,N=3008,K=200: "
"${L[@]}" timeout 120 "$T" run "$D/gelu.tile" -b cuda --check --size M=2000,N=3008,K=200 "${C128[@]}" 2>&1 | tail -1
if [ "${SKIP_SANITIZE:-0}" != 1 ]; then
  SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in racecheck synccheck memcheck; do
    echo -n "compute-sanitizer $tool, ping-pong gelu M=1800,N=1904,K=136 (225 programs): "
    "${P[@]}" timeout 100 "$SAN" --tool $tool "$T" run "$D/gelu.tile" -b cuda --check --size M=1800,N=1904,K=136 \
      "${C128[@]}" 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL|rror" | head -3 | tr '\n' ' '
    echo
  done
fi
SZ=M=4096,N=4096,K=4096
for round in 1 2; do
  echo "--- round $round (4096^3 bf16)"
  for f in gelu bias plain; do
    echo -n "$f cooperative 128 x 256: "
    "${L[@]}" timeout 60 "$T" bench "$D/$f.tile" -b cuda --size $SZ --config BM=128 --config BN=256 --config BK=64 --reps 30 2>&1 | tail -1
    echo -n "$f cooperative 128 x 128: "
    "${L[@]}" timeout 60 "$T" bench "$D/$f.tile" -b cuda --size $SZ "${C128[@]}" --reps 30 2>&1 | tail -1
    echo -n "$f ping-pong 128 x 128: "
    "${P[@]}" timeout 60 "$T" bench "$D/$f.tile" -b cuda --size $SZ "${C128[@]}" --reps 30 2>&1 | tail -1
  done
  echo -n "library matmul, planning: "
  timeout 60 "$T" bench matmul -b cuda --dtype bf16 --size $SZ --reps 30 2>&1 | tail -1
done
echo "--- cuBLAS bf16 (torch.matmul after ours)"
timeout 60 python3 bench/torch_gemm.py "$D/cublas.json" > /dev/null 2>&1; cat "$D/cublas.json"; echo
