#!/usr/bin/python3
"""Golden values for every RoPE scaling type (lib/positions/rope_freq.cc, lib/positions/rope.cc).

Run with Debian's NumPy (+ python3-torch for the cross-check):
    /usr/bin/python3 tests/golden/make_rope_scaling_golden.py
Writes tests/golden/rope_scaling_golden.json next to this script.

Reference semantics: Hugging Face transformers `modeling_rope_utils.py`
(_compute_{default,linear_scaling,dynamic_ntk,yarn,longrope,llama3}_parameters
and the `dynamic_rope_update` forward hook), LlamaRotaryEmbedding.forward
(cos/sin times attention_scaling) and apply_rotary_pos_emb.

Two implementations live here:
  * `hf_torch_*`: a line-by-line PyTorch transcription of the HF functions
    (config given as a dict; float32 tensors, Python float64 scalars), used
    only as a cross-check when torch is importable;
  * `np_*`: the same steps in NumPy float32 with correctly rounded pow
    (float64 pow of the float32 operands, rounded once), which is what the
    golden stores and what lib/positions/rope_freq.cc implements.
The script asserts both agree on inv_freq within 1 ULP and prints how many
entries differ at all (PyTorch's vectorized pow is not correctly rounded).

Stored per case: inv_freq, attention_scaling, cos/sin rows of each position
(times attention_scaling), q/k in BHSD order and their rotation.
The high-precision block stores float64 cos/sin (default scaling, d = 128,
theta = 10000) at positions 2^14 .. 2^20, plus the float32-recipe values.
"""

import json
import math
import os

import numpy as np

from make_rope_golden import F32, rope_bhsd_cs, seeded_tensor, f32_list

try:
    import torch
except ImportError:  # the golden does not need torch
    torch = None


def cr_pow(base_f32, exps_f32):
    return np.power(np.float64(base_f32), np.asarray(exps_f32, dtype=np.float64)).astype(F32)


def exps(dim):
    return np.arange(0, dim, 2, dtype=np.int64).astype(F32) / F32(dim)


# ---------------- NumPy float32 recipe (the golden) ----------------

def np_inv_freq(cfg, seq_len, dtype=F32):
    """inv_freq, attention_scaling, used_long. dtype F32 = HF fp32 recipe,
    np.float64 = high-precision mode (same formulas in float64)."""
    t = dtype
    s = cfg.get("rope_scaling") or {"rope_type": "default"}
    typ = s["rope_type"]
    theta = cfg["rope_theta"]
    dim = cfg["rotary_dim"]
    maxpos = cfg.get("max_position_embeddings", 0)
    e = (np.arange(0, dim, 2, dtype=np.int64).astype(t) / t(dim))

    def base_pow(b):
        if t is F32:
            return cr_pow(t(b), e)
        return np.power(np.float64(b), e)

    one = t(1)
    if typ in ("default", "linear"):
        inv = one / base_pow(theta)
        if typ == "linear":
            inv = inv / t(s["factor"])
        return inv.astype(t), 1.0, False
    if typ == "dynamic":
        length = maxpos if maxpos > 0 else s["original_max_position_embeddings"]
        base = t(theta)
        if seq_len > length:
            x = t(s["factor"]) * t(seq_len)
            x = t(x / t(length))
            x = t(x - t(s["factor"] - 1))
            ex = t(dim / (dim - 2))
            if t is F32:
                p = F32(np.power(np.float64(x), np.float64(ex)))
            else:
                p = np.power(x, ex)
            base = t(t(theta) * p)
        return (one / base_pow(base)).astype(t), 1.0, False
    if typ == "yarn":
        orig = s.get("original_max_position_embeddings") or maxpos
        factor = s["factor"]

        def get_mscale(scale, m=1.0):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

        att = s.get("attention_factor")
        if att is None:
            if s.get("mscale") and s.get("mscale_all_dim"):
                att = get_mscale(factor, s["mscale"]) / get_mscale(factor, s["mscale_all_dim"])
            else:
                att = get_mscale(factor)
        bf = s.get("beta_fast") or 32
        bs = s.get("beta_slow") or 1

        def corr(n):
            return (dim * math.log(orig / (n * 2 * math.pi))) / (2 * math.log(theta))

        low, high = corr(bf), corr(bs)
        if s.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        pf = base_pow(theta)
        extrap = one / pf
        interp = one / (t(factor) * pf)
        ramp = (np.arange(dim // 2).astype(t) - t(low)) / t(high - low)
        ramp = np.clip(ramp, t(0), t(1)).astype(t)
        ex = (one - ramp).astype(t)
        inv = interp * (one - ex) + extrap * ex
        return inv.astype(t), att, False
    if typ == "llama3":
        inv = one / base_pow(theta)
        factor = s["factor"]
        lo_f, hi_f = s["low_freq_factor"], s["high_freq_factor"]
        old = s["original_max_position_embeddings"]
        lw, hw = t(old / lo_f), t(old / hi_f)
        wl = (t(2 * math.pi) / inv).astype(t)
        il = np.where(wl > lw, inv / t(factor), inv).astype(t)
        sm = ((t(old) / wl - t(lo_f)) / t(hi_f - lo_f)).astype(t)
        smoothed = (((one - sm) * il) / t(factor) + sm * il).astype(t)
        med = ~(wl < hw) & ~(wl > lw)
        return np.where(med, smoothed, il).astype(t), 1.0, False
    if typ == "longrope":
        orig = s.get("original_max_position_embeddings") or 0
        factor = s.get("factor", 1.0)
        if orig and maxpos:
            factor = maxpos / orig
        if not orig:
            orig = maxpos
        att = s.get("attention_factor")
        if att is None:
            att = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(orig))
        use_long = seq_len > orig
        ext = np.asarray(s["long_factor"] if use_long else s["short_factor"], dtype=np.float64).astype(t)
        inv = one / (ext * base_pow(theta))
        return inv.astype(t), att, use_long
    raise ValueError(typ)


def np_cos_sin(positions, inv, att, dtype=F32):
    if dtype is F32:
        angle = np.asarray(positions, dtype=np.int64).astype(F32)[:, None] * inv[None, :]
        c, s = np.cos(angle), np.sin(angle)
        if att != 1.0:
            c, s = c * F32(att), s * F32(att)
        return c.astype(F32), s.astype(F32)
    angle = np.asarray(positions, dtype=np.float64)[:, None] * inv[None, :]
    return (np.cos(angle) * att).astype(F32), (np.sin(angle) * att).astype(F32)


# ---------------- PyTorch transcription of HF (cross-check) ----------------

def hf_torch_inv_freq(cfg, seq_len):
    s = cfg.get("rope_scaling") or {"rope_type": "default"}
    typ = s["rope_type"]
    base = cfg["rope_theta"]
    dim = cfg["rotary_dim"]
    maxpos = cfg.get("max_position_embeddings", 0)

    def default():
        return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dtype=torch.float) / dim))

    if typ == "default":
        return default(), 1.0
    if typ == "linear":
        inv = default()
        inv /= s["factor"]
        return inv, 1.0
    if typ == "dynamic":
        factor = s["factor"]
        sl = torch.tensor(seq_len)
        if seq_len <= maxpos:
            return default(), 1.0
        sl = torch.maximum(sl, torch.tensor(maxpos, dtype=sl.dtype))
        b = base * ((factor * sl / maxpos) - (factor - 1)) ** (dim / (dim - 2))
        return 1.0 / (b ** (torch.arange(0, dim, 2, dtype=torch.int64).to(dtype=torch.float) / dim)), 1.0
    if typ == "yarn":
        inv, att, _ = np_inv_freq(cfg, seq_len)  # formulas above are the transcription
        factor = s["factor"]
        orig = s.get("original_max_position_embeddings") or maxpos
        bf = s.get("beta_fast") or 32
        bs = s.get("beta_slow") or 1

        def fcd(n):
            return (dim * math.log(orig / (n * 2 * math.pi))) / (2 * math.log(base))

        low, high = fcd(bf), fcd(bs)
        if s.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001
        pos_freqs = base ** (torch.arange(0, dim, 2).to(dtype=torch.float) / dim)
        inv_ex = 1.0 / pos_freqs
        inv_in = 1.0 / (factor * pos_freqs)
        ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
        exf = 1 - ramp
        return inv_in * (1 - exf) + inv_ex * exf, att
    if typ == "llama3":
        inv = default()
        factor, lo_f, hi_f = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
        old = s["original_max_position_embeddings"]
        lw, hw = old / lo_f, old / hi_f
        wl = 2 * math.pi / inv
        il = torch.where(wl > lw, inv / factor, inv)
        sm = (old / wl - lo_f) / (hi_f - lo_f)
        smoothed = (1 - sm) * il / factor + sm * il
        med = ~(wl < hw) * ~(wl > lw)
        return torch.where(med, smoothed, il), 1.0
    if typ == "longrope":
        _, att, use_long = np_inv_freq(cfg, seq_len)
        ext = torch.tensor(s["long_factor"] if use_long else s["short_factor"], dtype=torch.float32)
        shape = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
        return 1.0 / (ext * base ** shape), att
    raise ValueError(typ)


def ulp_diff(a, b):
    ai = np.asarray(a, dtype=F32).view(np.int32).astype(np.int64)
    bi = np.asarray(b, dtype=F32).view(np.int32).astype(np.int64)
    return np.abs(ai - bi)


# ---------------- cases ----------------

def make_case(rng, name, cfg, layout, hq, hk, positions, allow_beyond):
    dim = cfg["rotary_dim"]
    head_dim = cfg["head_dim"]
    seq_len = max(positions) + 1
    inv, att, used_long = np_inv_freq(cfg, seq_len)
    c, s = np_cos_sin(positions, inv, att)
    torch_note = None
    if torch is not None:
        tinv, tatt = hf_torch_inv_freq(cfg, seq_len)
        d = ulp_diff(inv, tinv.numpy())
        assert d.max() <= 1, (name, d.max())
        assert abs(tatt - att) == 0.0, (name, tatt, att)
        torch_note = int((d > 0).sum())
    seq = len(positions)
    q = seeded_tensor(rng, (1, hq, seq, head_dim))
    k = seeded_tensor(rng, (1, hk, seq, head_dim))
    q_out = rope_bhsd_cs(q, c, s, dim, layout)
    k_out = rope_bhsd_cs(k, c, s, dim, layout)
    return {
        "name": name, "config": cfg, "pair_layout": layout, "q_heads": hq, "k_heads": hk,
        "positions": positions, "allow_beyond_trained_length": allow_beyond,
        "inv_freq": f32_list(inv), "attention_scaling": att, "used_long_factor": used_long,
        "cos": f32_list(c), "sin": f32_list(s),
        "q": f32_list(q), "k": f32_list(k), "q_out": f32_list(q_out), "k_out": f32_list(k_out),
        "torch_inv_freq_entries_differing_by_1ulp": torch_note,
    }


def main():
    rng = np.random.default_rng(4)
    cases = []

    def cfg(theta, head_dim, rotary_dim, maxpos, scaling=None):
        c = {"rope_theta": theta, "head_dim": head_dim, "rotary_dim": rotary_dim,
             "max_position_embeddings": maxpos}
        if scaling is not None:
            c["rope_scaling"] = scaling
        return c

    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096,
            "beta_fast": 32.0, "beta_slow": 1.0}
    yarn_ds = {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
               "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.707}
    yarn_att_notrunc = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 2048,
                        "attention_factor": 1.25, "truncate": False, "beta_fast": 16.0,
                        "beta_slow": 2.0}
    lr_short = [1.0 + 0.05 * i for i in range(16)]
    lr_long = [1.5 + 0.4 * i for i in range(16)]
    longrope = {"rope_type": "longrope", "short_factor": lr_short, "long_factor": lr_long,
                "original_max_position_embeddings": 4096}
    longrope_att = {"rope_type": "longrope", "short_factor": lr_short, "long_factor": lr_long,
                    "factor": 4.0, "attention_factor": 1.1}
    dynamic = {"rope_type": "dynamic", "factor": 2.0}
    linear = {"rope_type": "linear", "factor": 3.0}

    specs = [
        # name, config, layouts, hq, hk, positions, allow
        ("default", cfg(10000.0, 64, 64, 2048), 4, 2, [0, 1, 2047, 100000], True),
        ("linear3", cfg(10000.0, 64, 64, 8192, linear), 2, 1, [0, 1, 8191, 50000], True),
        ("dynamic_short", cfg(10000.0, 64, 64, 2048, dynamic), 2, 1, [0, 1, 2047], False),
        ("dynamic_long", cfg(10000.0, 64, 64, 2048, dynamic), 2, 1, [0, 1, 2047, 6000], True),
        ("yarn4", cfg(10000.0, 64, 64, 16384, yarn), 4, 1, [0, 1, 16383, 70000], True),
        ("yarn_deepseek_mscale", cfg(10000.0, 64, 64, 163840, yarn_ds), 2, 2, [0, 1, 163839, 300000], True),
        ("yarn_attention_no_truncate", cfg(500000.0, 64, 64, 16384, yarn_att_notrunc), 2, 1, [0, 1, 16383, 20000], True),
        ("llama3", cfg(500000.0, 128, 128, 131072, llama3), 4, 1, [0, 1, 131071, 500000], True),
        ("longrope_short", cfg(10000.0, 32, 32, 131072, longrope), 2, 1, [0, 1, 4095], False),
        ("longrope_long", cfg(10000.0, 32, 32, 131072, longrope), 2, 1, [0, 1, 4096, 131071], False),
        ("longrope_attention_factor", cfg(10000.0, 32, 32, 8192, longrope_att), 2, 1, [0, 1, 8191, 9000], True),
        ("partial_yarn_r32_d64", cfg(10000.0, 64, 32, 16384, dict(yarn)), 2, 1, [0, 1, 16383, 70000], True),
        ("partial_llama3_r64_d128", cfg(500000.0, 128, 64, 131072, dict(llama3)), 4, 2, [0, 1, 131071], False),
    ]
    for name, c, hq, hk, positions, allow in specs:
        for layout in ("HALF_SPLIT", "INTERLEAVED"):
            cases.append(make_case(rng, f"{name}_{layout.lower()}", c, layout, hq, hk, positions, allow))

    # High precision: default scaling, d = 128, theta = 10000.
    hp_cfg = cfg(10000.0, 128, 128, 0)
    hp_positions = [2 ** e for e in range(14, 21)]
    inv32, _, _ = np_inv_freq(hp_cfg, 0)
    inv64, _, _ = np_inv_freq(hp_cfg, 0, dtype=np.float64)
    c32, s32 = np_cos_sin(hp_positions, inv32, 1.0)
    angle = np.asarray(hp_positions, dtype=np.float64)[:, None] * inv64[None, :]
    c64, s64 = np.cos(angle), np.sin(angle)
    err32 = np.abs(c32.astype(np.float64) - c64).max(axis=1)
    assert err32[-1] > 1e-2, err32  # the fp32 recipe is far off at 2^20
    high_precision = {
        "config": hp_cfg, "positions": hp_positions,
        "cos_f64": [float(v) for v in c64.reshape(-1)], "sin_f64": [float(v) for v in s64.reshape(-1)],
        "cos_f32_recipe": f32_list(c32), "sin_f32_recipe": f32_list(s32),
        "max_abs_error_f32_recipe_per_position": [float(v) for v in err32],
    }
    out = {
        "generator": "tests/golden/make_rope_scaling_golden.py (NumPy %s%s)" % (
            np.__version__, ", cross-checked with PyTorch %s" % torch.__version__ if torch else ""),
        "layout_note": "q, k, q_out, k_out in BHSD order [1, H, S, D]; cos/sin [S, rotary_dim/2]",
        "cases": cases,
        "high_precision": high_precision,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rope_scaling_golden.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    diffs = {c["name"]: c["torch_inv_freq_entries_differing_by_1ulp"] for c in cases}
    print("wrote", path)
    print("torch inv_freq entries differing by 1 ULP:", diffs)
    print("fp32-recipe max |cos error| at 2^14..2^20:", [f"{v:.2e}" for v in err32])


if __name__ == "__main__":
    main()
