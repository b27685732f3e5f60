#!/usr/bin/python3
"""The PyTorch HF recipe on the rope_bench shapes (docs/performance.md, RoPE).

Run: /usr/bin/python3 bench/rope_torch.py [iters]   (Debian python3-torch)
q [1, 32, 4096, 128] + k [1, 8, 4096, 128] float32, positions 0..4095,
theta 500000. Times what HF LlamaRotaryEmbedding.forward +
apply_rotary_pos_emb do per layer call (rotate_half formula):
  freqs = (inv_freq[None, :, None] @ position_ids[:, None, :].float()).transpose(1, 2)
  emb = cat(freqs, freqs); cos, sin = emb.cos(), emb.sin()
  q_embed = q * cos + rotate_half(q) * sin   (same for k)
and, separately, only the apply step with cos/sin precomputed.
Prints the median time and GiB/s over the same 80 MiB as rope_bench.
"""
import sys
import time

import torch


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def main():
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    torch.manual_seed(0)
    q = torch.randn(1, 32, 4096, 128)
    k = torch.randn(1, 8, 4096, 128)
    dim, theta = 128, 500000.0
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    position_ids = torch.arange(4096)[None, :]

    def cos_sin():
        inv = inv_freq[None, :, None].float().expand(1, -1, 1)
        pos = position_ids[:, None, :].float()
        freqs = (inv @ pos).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos()[:, None], emb.sin()[:, None]

    def apply(cos, sin):
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    def median(f):
        ts = []
        for _ in range(iters):
            a = time.perf_counter()
            f()
            ts.append(time.perf_counter() - a)
        ts.sort()
        return ts[len(ts) // 2]

    nbytes = (q.numel() + k.numel()) * 4
    with torch.inference_mode():
        cos, sin = cos_sin()
        apply(cos, sin)
        t_full = median(lambda: apply(*cos_sin()))
        t_apply = median(lambda: apply(cos, sin))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {iters}")
    for name, t in (("HF forward (cos/sin + rotate_half)", t_full), ("HF apply only (rotate_half)", t_apply)):
        print(f"{name:40s} {t * 1e3:8.2f} ms {nbytes / t / 2**30:7.2f} GiB/s")


if __name__ == "__main__":
    main()
