#!/usr/bin/env python3
"""A warm cpu compile-cache hit against the interpreter's start-up, in fresh processes.

    bench/cpu_startup.py [TESSERA] [RUNS]

Runs `tessera run KERNEL --size <tiny> -b interp` and `... -b cpu` alternately (the cpu
kernel is compiled once first, so every timed cpu run is a warm disk-cache hit) and prints the
median wall time of each and their difference, per library kernel. The machine is shared:
alternating the two keeps a change in load from favouring either side.
"""
import statistics
import subprocess
import sys
import time

tessera = sys.argv[1] if len(sys.argv) > 1 else "build-rel/bin/tessera"
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 21
cases = [("softmax", "M=4,N=16"), ("layernorm", "M=4,N=16"), ("rmsnorm", "M=4,N=16"),
         ("matmul", "M=16,N=16,K=16"), ("vector_add", "N=16")]


def wall(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


for name, size in cases:
    base = [tessera, "run", name, "--size", size]
    subprocess.run(base + ["-b", "cpu"], check=True, stdout=subprocess.DEVNULL)  # fill the cache
    ti, tc = [], []
    for _ in range(runs):
        ti.append(wall(base + ["-b", "interp"]))
        tc.append(wall(base + ["-b", "cpu"]))
    mi, mc = statistics.median(ti), statistics.median(tc)
    print(f"{name:12s} interp {mi * 1e3:6.1f} ms   cpu warm hit {mc * 1e3:6.1f} ms   "
          f"difference {(mc - mi) * 1e3:5.1f} ms (target <= 5 ms)")
