#!/usr/bin/env python3
"""Session 42 (issue 16): the mma.sync matmul's mma instructions in other orders.

Usage: session42h_mma_order.py SRC.cu OUTDIR
Writes OUTDIR/<v>/<basename of SRC> (for TESSERA_CUDA_OVERRIDE_DIR=OUTDIR/<v>): each run of
consecutive `tsr::mma_*(&acc[4 * (j + NT * i)], fa[..][i], fb[..][j])` lines of the layout
emitter's dot (A tile i outer, B tile j inner, as printed) reordered:
  m1  B tile outer, A tile inner (the planning emitter's order: a B fragment reused over A)
  m2  A outer with B serpentine (j backwards on odd i: each row starts on the B fragment the
      row before ended on)
"""
import os
import re
import sys

MMA = re.compile(r"^(\s*)tsr::mma_(?:bf16|f16)_16816\(&\w+\[\d+\], (\w+)\[[^\]]+\]\[(\d+)\], (\w+)\[[^\]]+\]\[(\d+)\]\);$")


def reorder(text, key):
    lines = text.split("\n")
    out, i, runs = [], 0, 0
    while i < len(lines):
        if MMA.match(lines[i]):
            j = i
            while j < len(lines) and MMA.match(lines[j]):
                j += 1
            run = lines[i:j]
            parsed = [(int(MMA.match(l).group(3)), int(MMA.match(l).group(5)), l) for l in run]
            nt = max(p[1] for p in parsed) + 1
            out += [p[2] for p in sorted(parsed, key=lambda p: key(p[0], p[1], nt))]
            runs += 1
            i = j
        else:
            out.append(lines[i])
            i += 1
    assert runs >= 1, "no mma runs found"
    return "\n".join(out), runs


def main():
    src, out = sys.argv[1], sys.argv[2]
    s = open(src).read()
    for v, key in (("m1", lambda a, b, nt: (b, a)), ("m2", lambda a, b, nt: (a, b if a % 2 == 0 else nt - 1 - b))):
        t, runs = reorder(s, key)
        assert t != s
        os.makedirs(os.path.join(out, v), exist_ok=True)
        open(os.path.join(out, v, os.path.basename(src)), "w").write(t)
        print(v, "written,", runs, "runs of mma instructions reordered")


main()
