# The attention anchors alone (torch SDPA's FlashAttention-2 and cuDNN backends), for a GPU call
# that times Tessera's attention kernels beside them without the whole anchors_h200.py run.
#   python3 bench/sdpa_anchor.py B,H,S,D [B,H,S,D ...]   (bf16, not causal; TFLOP/s = 4 B H S^2 D / t)
import sys
import torch
from torch.nn.attention import sdpa_kernel, SDPBackend
from triton.testing import do_bench

for spec in sys.argv[1:] or ["4,32,4096,128"]:
    B, H, S, D = (int(x) for x in spec.split(","))
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    fl = 4 * B * H * S * S * D
    for be in [SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION]:
        with sdpa_kernel(be):
            ms = do_bench(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v), warmup=25, rep=100,
                          return_mode="median")
        print(f"sdpa_{be.name} B{B} H{H} S{S} D{D}: {ms:.3f} ms {fl / ms / 1e9:.1f} TFLOP/s", flush=True)
