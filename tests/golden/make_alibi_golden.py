#!/usr/bin/python3
"""Golden ALiBi slopes and bias (lib/positions/alibi.cc) and sinusoidal tables (lib/positions/sinusoidal.cc).

Run: /usr/bin/python3 tests/golden/make_alibi_golden.py  (NumPy; PyTorch optional)
Writes tests/golden/alibi_golden.json.

Slopes: the ALiBi paper's reference `get_slopes` (Press et al. 2022), as HF
`build_alibi_tensor` (BLOOM) computes them, here in float64 then rounded to
float32; when torch is importable the script also runs a transcription of
HF's float32 torch code and asserts agreement within 32 ULP (HF powers a
float32-rounded base in float32; the exact value is stored).
Bias [heads, q_len, k_len]: queries are the last q_len of k_len positions,
bias = -slope * (qp - j) for j <= qp, -inf above (causal); symmetric
-slope * |qp - j| when not causal.
Sinusoidal: Vaswani et al. 2017 section 3.5 in float64, both layouts.
"""
import json
import math
import os

import numpy as np

try:
    import torch
except ImportError:
    torch = None


def slopes_f64(n):
    cp2 = 2 ** math.floor(math.log2(n))
    base = 2.0 ** (-(2.0 ** -(math.log2(cp2) - 3)))
    s = [base ** p for p in range(1, cp2 + 1)]
    if cp2 != n:
        extra = 2.0 ** (-(2.0 ** -(math.log2(2 * cp2) - 3)))
        rem = min(cp2, n - cp2)
        s += [extra ** p for p in range(1, 1 + 2 * rem, 2)]
    return np.asarray(s, dtype=np.float64)


def slopes_hf_torch(n):
    cp2 = 2 ** math.floor(math.log2(n))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(cp2) - 3))), dtype=torch.float32)
    powers = torch.arange(1, 1 + cp2, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if cp2 != n:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * cp2) - 3))), dtype=torch.float32)
        rem = min(cp2, n - cp2)
        extra_powers = torch.arange(1, 1 + 2 * rem, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    return slopes.numpy()


def bias(slopes, q_len, k_len, causal):
    out = np.zeros((len(slopes), q_len, k_len), dtype=np.float32)
    for h, m in enumerate(slopes.astype(np.float32)):
        for i in range(q_len):
            qp = k_len - q_len + i
            for j in range(k_len):
                if j <= qp:
                    out[h, i, j] = -m * np.float32(qp - j)
                else:
                    out[h, i, j] = -np.inf if causal else -m * np.float32(j - qp)
    return out


def sinusoidal(start, count, d, base, layout):
    pos = np.arange(start, start + count, dtype=np.float64)[:, None]
    div = np.power(base, np.arange(0, d, 2, dtype=np.float64) / d)
    ang = pos / div[None, :]
    t = np.zeros((count, d), dtype=np.float64)
    if layout == "INTERLEAVED":
        t[:, 0::2], t[:, 1::2] = np.sin(ang), np.cos(ang)
    else:
        t[:, : d // 2], t[:, d // 2:] = np.sin(ang), np.cos(ang)
    return t.astype(np.float32)


def main():
    slopes = {}
    max_ulp_vs_hf = 0
    for n in list(range(1, 17)) + [12, 20, 24, 32, 40, 48, 64, 80, 112]:
        s = slopes_f64(n).astype(np.float32)
        if torch is not None:
            t = slopes_hf_torch(n)
            d = np.abs(s.view(np.int32).astype(np.int64) - t.view(np.int32).astype(np.int64))
            # HF raises a float32-rounded base to integer powers in float32,
            # so its extra-head slopes may be a few ULP off the exact value.
            assert d.max() <= 32, (n, d.max())
            max_ulp_vs_hf = max(max_ulp_vs_hf, int(d.max()))
        slopes[str(n)] = [float(v) for v in s]
    biases = []
    for n, q, k, causal in [(8, 4, 4, True), (6, 2, 5, True), (3, 3, 3, False), (12, 1, 7, True)]:
        b = bias(slopes_f64(n), q, k, causal)
        biases.append({"num_heads": n, "q_len": q, "k_len": k, "causal": causal,
                       "bias": [None if math.isinf(v) else float(v) for v in b.reshape(-1)]})
    sins = []
    for start, count, d, base, layout in [(0, 5, 8, 10000.0, "INTERLEAVED"),
                                          (7, 3, 6, 10000.0, "HALF_SPLIT"),
                                          (100000, 2, 16, 500.0, "INTERLEAVED")]:
        sins.append({"start": start, "count": count, "dim": d, "base": base, "layout": layout,
                     "table": [float(v) for v in sinusoidal(start, count, d, base, layout).reshape(-1)]})
    out = {"generator": "tests/golden/make_alibi_golden.py", "slopes": slopes,
           "max_ulp_vs_hf_float32_torch": max_ulp_vs_hf if torch is not None else None, "biases": biases,
           "sinusoidal": sins}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "alibi_golden.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", path, "max ULP vs HF float32 torch slopes:", max_ulp_vs_hf)


if __name__ == "__main__":
    main()
