#!/usr/bin/python3
"""Golden values for lib/positions/rope.cc and lib/positions/sinusoidal.cc (AddSinusoidalPositions).

Run with Debian's NumPy:  /usr/bin/python3 tests/golden/make_rope_golden.py
Writes tests/golden/rope_golden.json next to this script.

RoPE follows the Hugging Face fp32 recipe (LlamaRotaryEmbedding +
`_compute_default_rope_parameters` / `_compute_linear_scaling_rope_parameters`),
re-implemented here with NumPy float32 arithmetic only:
  inv_freq = 1 / theta ** (arange(0, r, 2, int64).float() / r)     float32
             (pow correctly rounded to float32, see inv_freq_hf)
  linear:   inv_freq = inv_freq / factor                             float32
  angle    = float32(pos) * inv_freq                                 float32
  cos, sin = np.cos(angle), np.sin(angle)                            float32
  HALF_SPLIT:  x * cat(cos, cos) + rotate_half(x) * cat(sin, sin)    (HF apply_rotary_pos_emb)
  INTERLEAVED: pairs (x[2i], x[2i+1]) multiplied as complex numbers by
               cos + i sin (Meta Llama reference apply_rotary_emb / llama2.c)
Coordinates [r, head_dim) pass through unchanged.

q and k are stored in logical BHSD order [B, H, S, D]; positions are [B * S].

The sinusoidal table (Vaswani et al. 2017, section 3.5) is computed in float64:
  PE[p, 2i] = sin(p / base ** (2i / d)),  PE[p, 2i + 1] = cos(p / base ** (2i / d))
and stored as float64 (the C++ side casts to float32).
"""

import json
import os

import numpy as np

F32 = np.float32


def inv_freq_hf(theta, rotary_dim, linear_factor=None):
    exponents = np.arange(0, rotary_dim, 2, dtype=np.int64).astype(F32) / F32(rotary_dim)
    assert exponents.dtype == F32
    # theta ** exponent as a correctly rounded float32 pow: evaluated in
    # float64 on the float32 operands, then rounded once to float32. (NumPy's
    # AVX-512 float32 np.power is off by 1 ULP for some exponents, while glibc
    # powf is correctly rounded on these inputs; one ULP of inv_freq moves the
    # angle at position 100000 by ~4e-3 rad, so the golden pins the rounding.)
    denom = np.power(np.float64(F32(theta)), exponents.astype(np.float64)).astype(F32)
    inv = F32(1.0) / denom
    assert inv.dtype == F32
    if linear_factor is not None:
        inv = inv / F32(linear_factor)
        assert inv.dtype == F32
    return inv


def cos_sin(positions, inv_freq):
    angle = np.asarray(positions, dtype=np.int64).astype(F32)[:, None] * inv_freq[None, :]
    assert angle.dtype == F32
    c, s = np.cos(angle), np.sin(angle)
    assert c.dtype == F32 and s.dtype == F32
    return c, s  # [P, r/2]


def rotate_half(x):
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def rope_bhsd(x, positions, inv_freq, rotary_dim, layout):
    """x: [B, H, S, D] float32; positions: [B * S]."""
    b, h, s, d = x.shape
    c, sn = cos_sin(positions, inv_freq)
    c = c.reshape(b, 1, s, rotary_dim // 2)
    sn = sn.reshape(b, 1, s, rotary_dim // 2)
    rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    if layout == "HALF_SPLIT":
        cos_full = np.concatenate([c, c], axis=-1)
        sin_full = np.concatenate([sn, sn], axis=-1)
        out = rot * cos_full + rotate_half(rot) * sin_full
    elif layout == "INTERLEAVED":
        pairs = rot.reshape(b, h, s, rotary_dim // 2, 2)
        a, bb = pairs[..., 0], pairs[..., 1]
        out = np.stack([a * c - bb * sn, bb * c + a * sn], axis=-1).reshape(b, h, s, rotary_dim)
    else:
        raise ValueError(layout)
    assert out.dtype == F32
    return np.concatenate([out, rest], axis=-1)


def rope_bhsd_cs(x, c, sn, rotary_dim, layout):
    """x: [1, H, S, D] float32; c, sn: [S, rotary_dim / 2] float32 rows."""
    b, h, s, d = x.shape
    assert b == 1
    c = c.reshape(1, 1, s, rotary_dim // 2)
    sn = sn.reshape(1, 1, s, rotary_dim // 2)
    rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    if layout == "HALF_SPLIT":
        out = rot * np.concatenate([c, c], axis=-1) + rotate_half(rot) * np.concatenate([sn, sn], axis=-1)
    else:
        pairs = rot.reshape(b, h, s, rotary_dim // 2, 2)
        a, bb = pairs[..., 0], pairs[..., 1]
        out = np.stack([a * c - bb * sn, bb * c + a * sn], axis=-1).reshape(b, h, s, rotary_dim)
    assert out.dtype == F32
    return np.concatenate([out, rest], axis=-1)


def seeded_tensor(rng, shape):
    # Values on a 1/64 grid (exact in float32, short in JSON), |x| up to ~8.
    return (np.round(rng.standard_normal(shape) * 2.0 * 64.0) / 64.0).astype(F32)


def f32_list(a):
    return [float(v) for v in np.asarray(a, dtype=F32).reshape(-1)]


def make_case(rng, name, layout, theta, head_dim, rotary_dim, hq, hk, batch, seq,
              positions=None, offsets=None, linear_factor=None, max_pos=0, allow_beyond=False):
    if positions is None:
        offs = offsets if offsets else [0] * batch
        positions = [offs[bi] + si for bi in range(batch) for si in range(seq)]
    assert len(positions) == batch * seq
    inv = inv_freq_hf(theta, rotary_dim, linear_factor)
    q = seeded_tensor(rng, (batch, hq, seq, head_dim))
    k = seeded_tensor(rng, (batch, hk, seq, head_dim))
    q_out = rope_bhsd(q, positions, inv, rotary_dim, layout)
    k_out = rope_bhsd(k, positions, inv, rotary_dim, layout)
    if max_pos > 0 and not allow_beyond:
        assert max(positions) < max_pos
    case = {
        "name": name,
        "pair_layout": layout,
        "theta": theta,
        "head_dim": head_dim,
        "rotary_dim": rotary_dim,
        "scaling": "linear" if linear_factor is not None else "default",
        "factor": linear_factor if linear_factor is not None else 1.0,
        "max_position_embeddings": max_pos,
        "allow_beyond_trained_length": allow_beyond,
        "batch": batch,
        "seq_len": seq,
        "q_heads": hq,
        "k_heads": hk,
        "positions": [int(p) for p in positions],
        "inv_freq": f32_list(inv),
        "q": f32_list(q),
        "k": f32_list(k),
        "q_out": f32_list(q_out),
        "k_out": f32_list(k_out),
    }
    if offsets is not None:
        case["offsets"] = offsets
    return case


def check_fp32_recipe_matters(case):
    """The float32 angle must matter at large positions: a float64 angle gives
    a result far outside the test tolerance (so the C++ test can tell)."""
    inv = np.asarray(case["inv_freq"], dtype=np.float64)
    pos = np.asarray(case["positions"], dtype=np.float64)
    a32 = (pos.astype(F32)[:, None] * inv.astype(F32)[None, :]).astype(np.float64)
    a64 = pos[:, None] * inv[None, :]
    return float(np.max(np.abs(np.cos(a32) - np.cos(a64))))


def sinusoidal(positions, d, base):
    pos = np.asarray(positions, dtype=np.float64)[:, None]
    i2 = np.arange(0, d, 2, dtype=np.float64)
    div = np.power(base, i2 / d)  # base^(2i/d)
    angle = pos / div[None, :]
    pe = np.zeros((len(positions), d), dtype=np.float64)
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe


def main():
    rng = np.random.default_rng(20240607)
    big = [0, 1, 511, 4095, 100000]
    cases = [
        make_case(rng, "half_split_theta1e4_d8", "HALF_SPLIT", 10000.0, 8, 8, 2, 1, 1, 4,
                  positions=[0, 1, 2, 3], max_pos=512),
        make_case(rng, "interleaved_theta1e4_d8", "INTERLEAVED", 10000.0, 8, 8, 2, 1, 1, 4,
                  positions=[0, 1, 2, 3], max_pos=512),
        make_case(rng, "half_split_theta5e5_d64_b2", "HALF_SPLIT", 500000.0, 64, 64, 2, 1, 2, 3,
                  positions=[0, 1, 511, 4095, 100000, 7], max_pos=8192, allow_beyond=True),
        make_case(rng, "interleaved_theta5e5_d64_b2", "INTERLEAVED", 500000.0, 64, 64, 2, 1, 2, 3,
                  positions=[0, 1, 511, 4095, 100000, 7], max_pos=8192, allow_beyond=True),
        make_case(rng, "half_split_theta1e4_d128", "HALF_SPLIT", 10000.0, 128, 128, 1, 1, 1, 5,
                  positions=big, max_pos=4096, allow_beyond=True),
        make_case(rng, "interleaved_theta5e5_d128", "INTERLEAVED", 500000.0, 128, 128, 1, 1, 1, 5,
                  positions=big, max_pos=4096, allow_beyond=True),
        make_case(rng, "half_split_partial_r32_d64", "HALF_SPLIT", 10000.0, 64, 32, 2, 2, 1, 5,
                  positions=big, max_pos=0),
        make_case(rng, "interleaved_partial_r32_d64", "INTERLEAVED", 10000.0, 64, 32, 2, 2, 1, 5,
                  positions=big, max_pos=0),
        make_case(rng, "half_split_partial_r4_d8", "HALF_SPLIT", 10000.0, 8, 4, 1, 1, 1, 5,
                  positions=big, max_pos=0),
        make_case(rng, "interleaved_partial_r4_d8", "INTERLEAVED", 10000.0, 8, 4, 1, 1, 1, 5,
                  positions=big, max_pos=0),
        make_case(rng, "gqa_8q_2kv_half_split_offsets", "HALF_SPLIT", 500000.0, 16, 16, 8, 2, 2, 3,
                  offsets=[5, 4094], max_pos=8192),
        make_case(rng, "gqa_8q_2kv_interleaved_offsets", "INTERLEAVED", 10000.0, 8, 8, 8, 2, 2, 3,
                  offsets=[0, 509], max_pos=512),
        make_case(rng, "linear_factor4_half_split_d64", "HALF_SPLIT", 10000.0, 64, 64, 2, 1, 1, 5,
                  positions=big, linear_factor=4.0, max_pos=16384, allow_beyond=True),
        make_case(rng, "linear_factor4_interleaved_d8", "INTERLEAVED", 10000.0, 8, 8, 1, 1, 1, 5,
                  positions=big, linear_factor=4.0, max_pos=0),
    ]
    # Self-check: at position 100000 a float64 angle would move cos by far
    # more than the C++ tolerance (2e-6 relative), so the golden pins fp32.
    diff = check_fp32_recipe_matters(cases[4])
    assert diff > 1e-4, diff

    sin_cases = []
    for d, base, positions in [(16, 10000.0, [0, 1, 2, 511, 4095, 100000]),
                               (6, 10000.0, [0, 3, 1000]),
                               (8, 500.0, [0, 1, 77])]:
        pe = sinusoidal(positions, d, base)
        sin_cases.append({"d": d, "base": base, "positions": positions,
                          "table": [float(v) for v in pe.reshape(-1)]})

    out = {
        "generator": "tests/golden/make_rope_golden.py (NumPy %s, float32 HF recipe)" % np.__version__,
        "layout_note": "q, k, q_out, k_out in BHSD order [B, H, S, D]; positions [B * S]",
        "rope_cases": cases,
        "sinusoidal_cases": sin_cases,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rope_golden.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", path, "fp32-vs-fp64 cos difference at 100000:", diff)


if __name__ == "__main__":
    main()
