"""Which kernel cuBLAS runs (torch.matmul, bf16, a [M, K] @ b [K, N]) at each shape, and its time
(triton's do_bench, median): the name tells the tile, cluster and split that cuBLAS picked
(e.g. nvjet_sm90_tst_128x192_64x4_2x1_v_bz_...). One GPU call:
  python3 bench/cublas_kernels.py 1024x1536x7168 128x3584x3584"""
import sys

import torch
from torch.profiler import ProfilerActivity, profile
from triton.testing import do_bench

a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
for _ in range(200):
    a @ a  # out of idle clocks
for s in sys.argv[1:]:
    m, n, k = (int(v) for v in s.split("x"))
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    ms = do_bench(lambda: x @ w, warmup=10, rep=40, return_mode="median")
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(3):
            x @ w
        torch.cuda.synchronize()
    names = sorted({e.key for e in p.key_averages() if e.device_type.name == "CUDA"})
    tf = 2 * m * n * k / ms / 1e9
    print(f"{s}: {ms * 1000:.1f} us ({tf:.0f} TFLOP/s): " + "; ".join(names))
