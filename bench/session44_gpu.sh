#!/usr/bin/env bash
# For the next session with a GPU (issue 16), from the repo root (about 2 minutes):
#   source .devdeps/setup.sh && bash bench/session44_gpu.sh
# Where the layout emitter's two remaining gaps to the planning emitter sit (session 43, H100):
# the segmented top-k in f32 (1.05-1.075x its time; bf16 0.90x) and the mma.sync matmul (1.07x).
# SASS (cuobjdump) of both emitters' kernels into $OUT, for a side-by-side reading of the hot
# loops (the f32 segment kernel's 12-byte spill: where its STL/LDL sit), and each top-k
# kernel's duration under Nsight Compute (which of segments / merge holds the f32 gap).
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session44.log") 2>&1
gpu_build tessera
T=$B/bin/tessera
mkdir -p /tmp/s44
for em in 0 1; do
  TESSERA_CUDA_FROM_LAYOUTS=$em $T compile matmul -t cuda:sm_90 --dtype bf16 -e ptx > /tmp/s44/mm_l$em.ptx 2>/dev/null
  for dt in f32 bf16; do
    TESSERA_CUDA_FROM_LAYOUTS=$em $T compile topk -t cuda:sm_90a --dtype $dt --size M=64,N=131072,K=64 -e ptx 2>/dev/null |
      awk -v b="/tmp/s44/topk_${dt}_l$em" '/^\.version/{n++} n{print > (b "_" n ".ptx")}'
  done
done
for f in /tmp/s44/*.ptx; do
  a=sm_90a; [[ $(basename $f) == mm* ]] && a=sm_90
  ptxas -arch=$a -v "$f" -o "${f%.ptx}.cubin" 2>&1 | grep -E "registers|spill" | tr '\n' ' '; echo " $(basename $f)"
  cuobjdump -sass "${f%.ptx}.cubin" > "$R/$(basename ${f%.ptx}).sass" 2>&1
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for em in 0 1; do for dt in f32 bf16; do
  echo "== ncu layouts=$em $dt"
  TESSERA_CUDA_FROM_LAYOUTS=$em timeout 120 $NCU --metrics gpu__time_duration.sum -c 6 $T bench topk -b cuda --dtype $dt \
    --size M=64,N=131072,K=64 --reps 3 --warmup 0 2>&1 | grep -E "tessera_topk|gpu__time_duration" | head -12
done; done
echo "[$(( $(date +%s) - S0 )) s] done"
