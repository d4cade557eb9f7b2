#!/usr/bin/env bash
# Session 55 (issue 16): topk's whole-row kernel (Struct buffers: alloc, async_copy, buffer_read)
# on the layout emitter, which Auto keeps on the planning emitter until this passes: the GPU
# tests that run it (LayoutEmitterLibraryGpu/topk on the layout emitter, LibraryGpu topk on the
# default) and raw code on the layout emitter (LayoutEmitterGpu.RawCodeMatchesTheHost; Auto
# keeps raw code on the planning emitter until it passes too), `run --check` of the whole-row kernel (TESSERA_TOPK_SEGMENT=0: no segmented stages)
# on both emitters at ragged sizes, then its median ms on both (P planning, L layouts).
# From the repo root on the GPU machine:
#   source .devdeps/setup.sh && bash bench/session55_topk_gpu.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_common.sh
R=${OUT:-/tmp}
exec > >(tee -a "$R/session55_topk.log") 2>&1
gpu_build tessera tessera_gpu_tests
timeout 200 ctest --test-dir "$B" -L gpu -R "LayoutEmitterLibraryGpu.*topk|LibraryGpu.*topk|RawCodeMatchesTheHost" -j3 --output-on-failure \
  --timeout 180 > "$R/ctest_topk.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)" "$R/ctest_topk.log"
grep -E -A8 ": Failure$" "$R/ctest_topk.log" | head -40
export TESSERA_TOPK_SEGMENT=0 TESSERA_TOPK_BUCKET_THRESHOLD=0
for dt in f32 bf16; do
  for s in M=37,N=30001,K=64 M=5,N=100001,K=1000 M=64,N=131072,K=64; do
    for e in 0 1; do
      echo "emitter=$e $(TESSERA_CUDA_FROM_LAYOUTS=$e timeout 60 "$B/bin/tessera" run topk -b cuda --check --dtype $dt --size $s 2>&1 | tail -1)"
    done
  done
  line="$dt M=64,N=131072,K=64 median ms"
  for round in 1 2 3; do
    for e in 0 1; do
      ms=$(TESSERA_CUDA_FROM_LAYOUTS=$e timeout 60 "$B/bin/tessera" bench topk -b cuda --dtype $dt --size M=64,N=131072,K=64 \
             --reps 50 --warmup 5 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)
      line="$line $([ $e = 0 ] && echo P || echo L):${ms:-?}"
    done
  done
  echo "$line"
done
