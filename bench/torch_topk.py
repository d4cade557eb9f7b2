#!/usr/bin/env python3
"""torch.topk, the top-k anchor (issue 18), timed with triton's do_bench (median, L2 flushed) on the
GPU. Each argument is DTYPE:MxN:K (f32 or bf16); none: the issue's shapes in both dtypes. Prints
`torch.topk DTYPE MxN k=K: T ms` per shape, the lines the bench/*topk*_gpu.sh scripts keep."""
import sys

import torch
from triton.testing import do_bench

ISSUE = [f"{d}:{s}" for d in ("f32", "bf16") for s in ("64x131072:64", "64x131072:256", "64x131072:1024", "1x16777216:1024")]
for spec in sys.argv[1:] or ISSUE:
    dt, shape, k = spec.split(":")
    m, n = (int(v) for v in shape.split("x"))
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dt]
    x = torch.randn(m, n, device="cuda").to(dtype)
    ms = do_bench(lambda: torch.topk(x, int(k), dim=1), return_mode="median")
    print("torch.topk %s %dx%d k=%d: %.4f ms" % (str(dtype)[6:], m, n, int(k), ms))
