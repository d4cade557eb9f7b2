#!/usr/bin/env python3
# Rows for the top-k GPU scripts (bench/topk_radix_gpu.sh, bench/topk_seg_gpu.sh): 3 x 70001
# drawn mostly from a handful of values (NaN, +-inf, both zeros, ties), as .npy files written by
# hand (DIR/x_f32.npy, and DIR/x_bf16.npy as bf16's raw bits, <u2), so that no NumPy is needed.
# Usage: topk_ties_npy.py DIR
import math, random, struct, sys
d = sys.argv[1]
M, N = 3, 70001
few = [-1.5, -0.0, 0.0, 2.0, math.inf, -math.inf, math.nan, 0.5]
rng = random.Random(7)
vals = [few[rng.randrange(len(few))] if rng.random() < 0.7 else rng.randint(-500, 500) / 64 for _ in range(M * N)]
def npy(path, descr, data):
    h = "{'descr': '%s', 'fortran_order': False, 'shape': (%d, %d), }" % (descr, M, N)
    h += " " * (63 - (10 + len(h)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + data)
f32 = struct.pack("<%df" % len(vals), *vals)
npy(d + "/x_f32.npy", "<f4", f32)
bits = struct.unpack("<%dI" % len(vals), f32)
npy(d + "/x_bf16.npy", "<u2", struct.pack("<%dH" % len(vals), *[(0x7FC0 if (b & 0x7FFFFFFF) > 0x7F800000 else b >> 16) for b in bits]))
