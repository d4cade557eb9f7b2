#!/usr/bin/env python3
"""Session 43 (issue 16): a one-change variant of the layout emitter's mma.sync matmul source.

Usage: session43_variants.py SRC.cu OUTDIR
Writes OUTDIR/h1/<basename of SRC>, to be compiled in place of the emitted source with
TESSERA_CUDA_OVERRIDE_DIR=OUTDIR/h1 (docs/cuda-backend.md). The edit asserts that it found its
text, so a changed emitter fails here rather than timing the wrong thing.
  h1  the first k step's fragments loaded once before the K loop (as the planning emitter's
      prologue does) instead of under `if (iv == first)` inside it. Session 41 found this
      cost 3% at 254 registers with padded tiles; with swizzled ones nvcc -arch=sm_90 gives
      222 registers (213 as emitted, the planning emitter's 221), no spills.
"""
import os
import re
import sys


def hoist_first_fragments(s):
    loop = re.search(r"  for \(int64_t (iv\d+_) = (v\d+); (v\d+) > 0 && \1 < (v\d+); \1 \+= \3\) \{\n", s)
    assert loop, "the K loop"
    iv, lb, step, ub = loop.groups()
    head = f"      if (({iv} == int64_t({lb}))) {{"
    assert s.count(head) == 1, "the first-fragment branch"
    i = s.index(head)
    j = s.index("      #pragma unroll\n      for (int ks = 0;", i)
    block = s[i:j]
    body = block[block.index("{") + 1: block.rindex("}")]
    s = s[:i] + s[j:]
    pre = (f"  if ({step} > 0 && {lb} < {ub}) {{\n    const int wm_ = tsr_warp / 4, wn_ = tsr_warp % 4;\n" + body + "  }\n")
    k = loop.start()
    return s[:k] + pre + s[k:]


def main():
    src, out = sys.argv[1], sys.argv[2]
    s = open(src).read()
    d = os.path.join(out, "h1")
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, os.path.basename(src)), "w").write(hoist_first_fragments(s))


if __name__ == "__main__":
    main()
