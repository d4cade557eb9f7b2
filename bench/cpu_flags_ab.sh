#!/usr/bin/env bash
# An extra compiler flag for the cpu backend, A/B (issue 19: cold compiles under 0.5 s), on this
# machine from the repo root after a build: for every library kernel and dtype,
#  1. the cold compile of its generated C++ (`cpu_bench --emit K D`, the runtime header beside
#     it) with the backend's flags, without and with EXTRA, user + sys of the compiler, least of
#     ROUNDS alternated runs;
#  2. its speed, `tessera bench K -b cpu --dtype D` (default sizes), without and with EXTRA
#     (through a TESSERA_CXX wrapper, so each has its own cache key), least of ROUNDS medians.
#   EXTRA="--param max-completely-peel-times=4" ROUNDS=3 bash bench/cpu_flags_ab.sh
set -uo pipefail
unset TESSERA_CXX  # (both sides from the same c++; the wrapper adds EXTRA)
B=${BUILD:-build}
EXTRA=${EXTRA:---param max-completely-peel-times=4}
ROUNDS=${ROUNDS:-3}
KERNELS=${KERNELS:-"vector_add:f32 vector_add:bf16 softmax:f32 softmax:bf16 layernorm:f32 layernorm:bf16 rmsnorm:f32 rmsnorm:bf16 matmul:f32 matmul:bf16 matmul_fp8:f32 topk:f32 topk:bf16 sort:f32"}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
python3 - "$W" <<'PY'
import sys
s = open("src/cpu/runtime/tessera_cpu.h.inc").read()
open(sys.argv[1] + "/tessera_cpu.h", "w").write(s[s.index('R"TESSERA_RT(') + 13:s.rindex(')TESSERA_RT"')])
PY
printf '#!/bin/sh\nexec c++ %s "$@"\n' "$EXTRA" > "$W/cxx"
chmod +x "$W/cxx"
F="-O3 -march=native -mprefer-vector-width=512 -fopenmp -fPIC -shared -std=c++20 -w"
command -v ld.gold > /dev/null && F="$F -fuse-ld=gold"
cpu_s() { /usr/bin/time -f "%U %S" -o "$W/time" "$@" > /dev/null 2>&1 && tail -1 "$W/time" | awk '{print $1 + $2}'; }
least() { printf '%s\n' "$@" | grep . | sort -g | head -1; }
echo "| kernel | compile s | with EXTRA | bench ms | with EXTRA | speed ratio (base / with) |"
echo "|---|---|---|---|---|---|"
for kd in $KERNELS; do
  k=${kd%%:*} d=${kd##*:}
  "$B/bin/cpu_bench" --emit "$k" "$d" > "$W/k.cpp" 2> /dev/null || { echo "| $k $d | no source | | | | |"; continue; }
  ca=() cb=() ba=() bb=()
  for r in $(seq "$ROUNDS"); do
    ca+=("$(cpu_s c++ $F "$W/k.cpp" -o "$W/a.so")")
    cb+=("$(cpu_s c++ $F $EXTRA "$W/k.cpp" -o "$W/b.so")")
  done
  for r in $(seq "$ROUNDS"); do
    ba+=("$(TESSERA_CACHE_DIR=$W/ca "$B/bin/tessera" bench "$k" -b cpu --dtype "$d" 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)")
    bb+=("$(TESSERA_CXX=$W/cxx TESSERA_CACHE_DIR=$W/cb "$B/bin/tessera" bench "$k" -b cpu --dtype "$d" 2>&1 | grep -o 'median_ms=[0-9.e+-]*' | cut -d= -f2)")
  done
  a=$(least "${ba[@]}") b=$(least "${bb[@]}")
  echo "| $k $d | $(least "${ca[@]}") | $(least "${cb[@]}") | $a | $b | $(python3 -c "print('%.3f' % ($a / $b))" 2>/dev/null) |"
done
