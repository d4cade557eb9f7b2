#!/usr/bin/env python3
"""cuBLAS bf16 GEMM through torch.matmul, timed exactly as .devdeps/bench/anchors_h200.py times
it (triton.testing.do_bench, warmup 25 ms, rep 100 ms, median; inputs torch.randn), at the
anchors' five shapes. tools/gpu-check runs it right after cuda_bench, so that the anchor is
measured in the same thermal state as Tessera's kernels: the anchors script itself runs first,
on a GPU that sat idle during the build, and its GEMMs then measure up to 12% faster than the
same cuBLAS later in the run (bench/RESULTS.md, session 8). Even so, its first shape measured
780 TFLOP/s at 4096^3 against 710-726 for the same GEMM elsewhere in that run (session 9):
python's start leaves the GPU idle for seconds, and the first kernels after a pause run at
boost clocks. So it first runs GEMMs for about half a second, then times the five shapes in
three rounds and reports each shape's median round, as cuda_bench does with its rounds.

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

    inputs = {}
    for m, n, k in SHAPES:
        inputs[(m, n, k)] = (torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
                             torch.randn(k, n, device="cuda", dtype=torch.bfloat16))
    # Out of idle: about half a second of the largest GEMM before anything is timed.
    a, b = inputs[(8192, 8192, 8192)]
    for _ in range(300):
        a @ b
    torch.cuda.synchronize()
    rounds = {shape: [] for shape in SHAPES}
    for _ in range(3):
        for shape, (a, b) in inputs.items():
            rounds[shape].append(do_bench(lambda: a @ b, warmup=25, rep=100, return_mode="median"))
    res = {}
    for (m, n, k), ms_list in rounds.items():
        ms = sorted(ms_list)[len(ms_list) // 2]
        key = f"cublas_bf16_TFLOPs_{m}x{n}x{k}"
        res[key] = round(2 * m * n * k / ms / 1e9, 1)
        per_round = " / ".join(f"{2 * m * n * k / x / 1e9:.1f}" for x in ms_list)
        print(f"{key:<40s} {res[key]}  (rounds {per_round})", flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
