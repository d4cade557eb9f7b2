#!/usr/bin/env python3
"""Two anchors for issue 16 and issue 20, run by bench/decode_profile_gpu.sh.

    python3 bench/torch_decode_gelu.py gelu      # cuBLAS(Lt) at 4096^3 bf16: plain, fused bias + GELU
    python3 bench/torch_decode_gelu.py profile   # the decode shapes' cuBLAS kernels, in an NVTX range

`gelu`: torch.matmul against torch._addmm_activation(bias, a, b, use_gelu=True) (cuBLASLt's
fused bias + tanh-GELU epilogue, CUBLASLT_EPILOGUE_GELU_BIAS) and the unfused
gelu(addmm(...), approximate="tanh"), timed by triton's do_bench (median) in three rounds,
alternated: how much the vendor's own fused epilogue costs over its plain matmul.
`profile`: each shape's torch.matmul three times inside an NVTX range named "gemm", for
`ncu --nvtx --nvtx-include gemm/` to profile cuBLAS's own kernels (name, grid, duration).
"""
import sys

DECODE = [(1, 1536, 7168), (1, 7168, 2048), (1, 4608, 3584), (16, 4608, 3584), (128, 3584, 3584), (1024, 1536, 7168)]


def gelu():
    import torch
    from triton.testing import do_bench
    m = n = k = 4096
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    forms = {
        "plain a @ b": lambda: a @ b,
        "fused _addmm_activation(use_gelu)": lambda: torch._addmm_activation(bias, a, b, use_gelu=True),
        "addmm(bias) only": lambda: torch.addmm(bias, a, b),
        "unfused gelu(addmm, tanh)": lambda: torch.nn.functional.gelu(torch.addmm(bias, a, b), approximate="tanh"),
    }
    for _ in range(200):
        a @ b
    torch.cuda.synchronize()
    res = {f: [] for f in forms}
    for _ in range(3):
        for f, fn in forms.items():
            res[f].append(do_bench(fn, warmup=25, rep=100, return_mode="median"))
    for f, v in res.items():
        print(f"cuBLAS 4096^3 bf16 {f:<36s} median ms {sorted(v)[1]:.4f}  (rounds {' / '.join(f'{x:.4f}' for x in v)})")


def profile():
    import torch
    ins = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), torch.randn(k, n, device="cuda", dtype=torch.bfloat16))
           for m, n, k in DECODE]
    torch.cuda.synchronize()
    for (m, n, k), (a, b) in zip(DECODE, ins):
        for _ in range(3):
            torch.cuda.nvtx.range_push("gemm")
            a @ b
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        print(f"shape {m}x{n}x{k} done", flush=True)


if __name__ == "__main__":
    {"gelu": gelu, "profile": profile}[sys.argv[1]]()
