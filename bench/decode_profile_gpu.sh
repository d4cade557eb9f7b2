#!/usr/bin/env bash
# Where the decode and small-M shapes lose to cuBLAS (issue 20), and what cuBLAS's own fused
# GELU costs (issue 16): one GPU call from the repo root after `source .devdeps/setup.sh`.
#  1. Nsight Compute on the library matmul at the exhaustive sweep's best config of six shapes
#     (bench/data/tune_cuda_matmul_exhaustive_50_splitk.jsonl.xz) and on cuBLAS's kernels at the
#     same shapes (torch.matmul in an NVTX range): kernel, grid, cluster, duration, DRAM
#     throughput. ncu flushes the caches before each kernel, as do_bench's timing does.
#  2. tessera bench at those configs (median ms), for the same kernels timed without ncu.
#  3. cuBLAS(Lt) at 4096^3 bf16: plain, bias only, fused bias + tanh-GELU, unfused; beside the
#     library matmul and matmul + bias + GELU (layout emitter, 128 x 256) timed in the same call.
# PARTS (default "1a 1b 2 3") picks the parts; WARPSTATE=1 adds ncu's warp-state and scheduler
# sections to the ncu parts (1a and 1b).
set -uo pipefail
PARTS=" ${PARTS:-1a 1b 2 3} "
part() { [[ "$PARTS" == *" $1 "* ]]; }
B=${BUILD:-build-gpu}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null &&
  timeout 400 cmake --build "$B" -j16 --target tessera 2>&1 | tail -1
T="$B/bin/tessera"
R=${OUT:-$(mktemp -d)}
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
SECTIONS=(--section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis)
KEYS="Duration|Warp Cycles Per Issued|No Eligible|DRAM Throughput|Memory Throughput|Grid Size|Block Size|Cluster Size|Registers Per Thread|Dynamic Shared Memory Per Block|Waves Per SM|Achieved Occupancy|L2 Hit Rate"
CASES=(
  "M=1,N=1536,K=7168 BLOCK_M=64 BLOCK_N=64 BLOCK_K=64 cluster_m=2 min_blocks=2"
  "M=1,N=7168,K=2048 BLOCK_M=16 BLOCK_N=128 BLOCK_K=128"
  "M=1,N=4608,K=3584 BLOCK_M=64 BLOCK_N=128 BLOCK_K=64 min_blocks=2 split_k=3"
  "M=16,N=4608,K=3584 BLOCK_M=64 BLOCK_N=128 BLOCK_K=64 cluster_m=2 min_blocks=2 split_k=2"
  "M=128,N=3584,K=3584 BLOCK_M=64 BLOCK_N=128 BLOCK_K=64 min_blocks=2 split_k=2"
  "M=1024,N=1536,K=7168 BLOCK_M=128 BLOCK_N=128 BLOCK_K=64 min_blocks=2 stream_k=1"
)
[ "${WARPSTATE:-0}" = 1 ] && SECTIONS+=(--section WarpStateStats --section SchedulerStats)
part 1a && echo "=== 1a. ours under ncu"
part 1a && for c in "${CASES[@]}"; do
  set -- $c
  sz=$1; shift
  cfg=(); for kv in "$@"; do cfg+=(--config "$kv"); done
  echo "--- $sz $*"
  timeout 120 "$NCU" --clock-control none -k regex:tessera_ --launch-skip 3 --launch-count 2 "${SECTIONS[@]}" \
    "$T" bench matmul -b cuda --dtype bf16 --size "$sz" "${cfg[@]}" --reps 3 > "$R/ours_${sz//[=,]/_}.txt" 2>&1
  grep -E "^  [a-z_]+.*\(|$KEYS" "$R/ours_${sz//[=,]/_}.txt" | grep -v "^    ---" | head -40
done
if part 1b; then
echo "=== 1b. cuBLAS under ncu (torch.matmul, three calls a shape)"
timeout 200 "$NCU" --clock-control none --nvtx --nvtx-include "gemm/" "${SECTIONS[@]}" \
  python3 bench/torch_decode_gelu.py profile > "$R/cublas.txt" 2>&1
grep -E "^  [A-Za-z_].*\(|shape .* done|$KEYS" "$R/cublas.txt" | head -150
fi
part 2 && echo "=== 2. tessera bench at the same configs (median ms, two rounds)"
part 2 && for round in 1 2; do
  for c in "${CASES[@]}"; do
    set -- $c
    sz=$1; shift
    cfg=(); for kv in "$@"; do cfg+=(--config "$kv"); done
    echo -n "$sz $*: "
    timeout 60 "$T" bench matmul -b cuda --dtype bf16 --size "$sz" "${cfg[@]}" --reps 50 2>&1 | tail -1
  done
done
part 3 || exit 0
echo "=== 3. fused GELU: cuBLASLt and ours at 4096^3 bf16"
D=$(mktemp -d)
sed -e 's/f16/bf16/g' tests/corpus/matmul_bias_gelu.tile > "$D/gelu.tile"
for round in 1 2; do
  echo -n "ours matmul + bias + GELU, layout emitter 128 x 256: "
  TESSERA_CUDA_FROM_LAYOUTS=1 timeout 60 "$T" bench "$D/gelu.tile" -b cuda --size M=4096,N=4096,K=4096 \
    --config BM=128 --config BN=256 --config BK=64 --reps 30 2>&1 | tail -1
  echo -n "ours library matmul: "
  timeout 60 "$T" bench matmul -b cuda --dtype bf16 --size M=4096,N=4096,K=4096 --reps 30 2>&1 | tail -1
done
timeout 120 python3 bench/torch_decode_gelu.py gelu
