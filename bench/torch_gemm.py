#!/usr/bin/env python3
"""cuBLAS bf16 GEMM through torch.matmul, timed exactly as .devdeps/bench/anchors_h200.py times
it (triton.testing.do_bench, warmup 25 ms, rep 100 ms, median; inputs torch.randn), at the
anchors' five shapes. tools/gpu-check runs it right after cuda_bench, so that the anchor is
measured in the same thermal state as Tessera's kernels: the anchors script itself runs first,
on a GPU that sat idle during the build, and its GEMMs then measure up to 12% faster than the
same cuBLAS later in the run (bench/RESULTS.md, session 8).

    python3 bench/torch_gemm.py OUT.json    # {"cublas_bf16_TFLOPs_MxNxK": TFLOP/s, ...}
"""
import json
import sys

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (128, 14336, 4096), (16, 4096, 4096)]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: torch_gemm.py OUT.json")
    import torch
    from triton.testing import do_bench

    res = {}
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        ms = do_bench(lambda: a @ b, warmup=25, rep=100, return_mode="median")
        res[f"cublas_bf16_TFLOPs_{m}x{n}x{k}"] = round(2 * m * n * k / ms / 1e9, 1)
        print(f"cublas_bf16_TFLOPs_{m}x{n}x{k:<10d} {res[f'cublas_bf16_TFLOPs_{m}x{n}x{k}']}", flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
