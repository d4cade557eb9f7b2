#!/usr/bin/env bash
# persist-programs and store-epilogues-by-tma on the H200 (issue 16), one GPU call from the repo
# root after `source .devdeps/setup.sh`: the layout emitter's persistent CTAs with the result
# stored by TMA, against one CTA per program storing from registers (`persistent = 0` written
# on the grid's yield, which store-epilogues-by-tma then leaves alone), on tests/corpus/matmul_bias_gelu.tile in bf16
# with 128 x 256 tiles (GELU, bias only, and no epilogue), checked against the interpreter where
# a CTA runs several programs, then timed at 4096^3 beside the library matmul (planning emitter)
# and cuBLAS (bench/torch_gemm.py, after ours); the GELU form at 128 x 128 tiles too (session
# 19's config). SANITIZE=1 adds compute-sanitizer.
set -uo pipefail
source bench/matmul_forms.sh
for f in gelu bias plain; do
  sed 's/    yield %gm, %gn$/    yield %gm, %gn {persistent = 0}/' "$D/$f.tile" > "$D/${f}_np.tile"
  grep -q "persistent = 0" "$D/${f}_np.tile" || echo "persistent_gpu.sh: could not write persistent = 0 into $f"
done
L=(env TESSERA_CUDA_FROM_LAYOUTS=1)
echo "=== which path"
"${L[@]}" "$T" compile "$D/gelu.tile" -t cuda:sm_90a -e cuda --stats --config BM=128 --config BN=256 --config BK=64 2>&1 >/dev/null | grep -E "note|persist|producer"
echo "=== checks (several programs per CTA where the programs outnumber the SMs)"
for sz in "M=2000,N=1800,K=72 BM=128 BN=128" "M=2000,N=3000,K=200 BM=128 BN=256" "M=1000,N=776,K=336 BM=128 BN=256" "M=257,N=304,K=504 BM=128 BN=128"; do
  set -- $sz
  for f in gelu bias plain gelu_np; do
    echo -n "$f $1 $2 $3: "
    "${L[@]}" timeout 120 "$T" run "$D/$f.tile" -b cuda --check --size "$1" --config "$2" --config "$3" --config BK=64 2>&1 | tail -1
  done
done
for sz in M=3000,N=2900,K=1000 M=2200,N=2200,K=200 M=100,N=300,K=64; do
  echo -n "library matmul bf16, layouts, $sz: "
  "${L[@]}" timeout 120 "$T" run matmul -b cuda --dtype bf16 --check --size "$sz" 2>&1 | tail -1
done
if [ "${SANITIZE:-0}" = 1 ] && command -v compute-sanitizer > /dev/null; then
  for tool in racecheck synccheck memcheck; do
    echo -n "compute-sanitizer $tool, library matmul layouts M=2200,N=2200,K=128 (162 programs): "
    "${L[@]}" timeout 150 compute-sanitizer --tool $tool "$T" run matmul -b cuda --dtype bf16 --check \
      --size M=2200,N=2200,K=128 2>&1 | grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASS|FAIL" | tr '\n' ' '
    echo
  done
fi
SZ=M=4096,N=4096,K=4096
for round in 1 2; do
  echo "--- round $round (4096^3 bf16, 128 x 256 x 64)"
  for f in gelu gelu_np bias bias_np plain plain_np; do
    echo -n "layouts $f: "
    "${L[@]}" timeout 120 "$T" bench "$D/$f.tile" -b cuda --size $SZ --config BM=128 --config BN=256 --config BK=64 --reps 30 2>&1 | tail -1
  done
  echo -n "layouts gelu, 128 x 128 x 64 tiles: "
  "${L[@]}" timeout 120 "$T" bench "$D/gelu.tile" -b cuda --size $SZ --config BM=128 --config BN=128 --config BK=64 --reps 30 2>&1 | tail -1
  echo -n "library matmul, layouts: "
  "${L[@]}" timeout 120 "$T" bench matmul -b cuda --dtype bf16 --size $SZ --reps 30 2>&1 | tail -1
  echo -n "library matmul, planning: "
  timeout 120 "$T" bench matmul -b cuda --dtype bf16 --size $SZ --reps 30 2>&1 | tail -1
done
echo "--- cuBLAS bf16 (torch.matmul after ours)"
python3 bench/torch_gemm.py "$D/cublas.json" > /dev/null 2>&1; cat "$D/cublas.json"; echo
