#!/usr/bin/python3
"""Writes tests/golden/checkpoint_golden.json for tests/lib/checkpoint/checkpoint_test.cc.

Reads the two bundled forms of stories260K with NumPy only (no vocabd code):
  models/stories260K/stories260K.bin        llama2.c legacy layout
  models/stories260K-hf/model.safetensors   HF Llama layout (q/k permuted)
and records, per form, a few individual weights (exact float32 values) and
the float64 sum of every tensor, under the canonical HF tensor names.

It also asserts the relations the C++ test re-checks: embedding / norms /
v, o, gate, up, down identical between the forms; HF q_proj / k_proj rows
equal the .bin rows after the per-head permutation of SOURCES.md
(w.reshape(heads, head_dim/2, 2, in).transpose(1, 2)).

Run from the repository root:  /usr/bin/python3 tests/golden/make_checkpoint_golden.py
"""
import hashlib
import json
import os
import struct

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "models/stories260K/stories260K.bin")
ST = os.path.join(ROOT, "models/stories260K-hf/model.safetensors")
OUT = os.path.join(ROOT, "tests/golden/checkpoint_golden.json")


def read_llama2c(path):
    raw = open(path, "rb").read()
    dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack("<7i", raw[:28])
    assert vocab > 0, "stories260K has a shared classifier"
    head = dim // heads
    kv_dim = head * kv_heads
    f = np.frombuffer(raw, dtype="<f4", offset=28)
    pos = 0

    def take(*shape):
        nonlocal pos
        n = int(np.prod(shape))
        a = f[pos:pos + n].reshape(shape)
        pos += n
        return a

    emb = take(vocab, dim)
    rms_att = take(layers, dim)
    wq = take(layers, dim, dim)
    wk = take(layers, kv_dim, dim)
    wv = take(layers, kv_dim, dim)
    wo = take(layers, dim, dim)
    rms_ffn = take(layers, dim)
    w1 = take(layers, hidden, dim)
    w2 = take(layers, dim, hidden)
    w3 = take(layers, hidden, dim)
    rms_final = take(dim)
    take(seq_len, head // 2)
    take(seq_len, head // 2)
    assert pos == f.size, (pos, f.size)
    t = {"model.embed_tokens.weight": emb, "model.norm.weight": rms_final}
    for l in range(layers):
        p = "model.layers.%d." % l
        t[p + "input_layernorm.weight"] = rms_att[l]
        t[p + "self_attn.q_proj.weight"] = wq[l]
        t[p + "self_attn.k_proj.weight"] = wk[l]
        t[p + "self_attn.v_proj.weight"] = wv[l]
        t[p + "self_attn.o_proj.weight"] = wo[l]
        t[p + "post_attention_layernorm.weight"] = rms_ffn[l]
        t[p + "mlp.gate_proj.weight"] = w1[l]
        t[p + "mlp.down_proj.weight"] = w2[l]
        t[p + "mlp.up_proj.weight"] = w3[l]
    header = dict(dim=dim, hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads,
                  vocab=vocab, seq_len=seq_len)
    return header, t


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    t = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32"
        b, end = e["data_offsets"]
        t[name] = np.frombuffer(raw[base + b:base + end], dtype="<f4").reshape(e["shape"])
    return t


def permute(w, n_heads):
    # HF convert_llama_weights_to_hf.py permute(): interleaved -> half-split rows.
    out_dim, in_dim = w.shape
    return w.reshape(n_heads, out_dim // n_heads // 2, 2, in_dim).transpose(0, 2, 1, 3).reshape(
        out_dim, in_dim)


def exact(values):
    # float(np.float32) is the exact binary64 value; repr() round-trips it.
    return [float(v) for v in np.asarray(values, dtype=np.float32).ravel()]


def main():
    hdr, bin_t = read_llama2c(BIN)
    hf_t = read_safetensors(ST)
    assert set(bin_t) == set(hf_t), set(bin_t) ^ set(hf_t)
    for name in bin_t:
        a, b = bin_t[name], hf_t[name]
        assert a.shape == b.shape, name
        if name.endswith("q_proj.weight"):
            assert np.array_equal(permute(a, hdr["heads"]), b), name
            assert not np.array_equal(a, b), name
        elif name.endswith("k_proj.weight"):
            assert np.array_equal(permute(a, hdr["kv_heads"]), b), name
        else:
            assert np.array_equal(a, b), name

    # Individual weights: (tensor, row, first column, count).
    picks = [
        ("model.embed_tokens.weight", 0, 0, 8),
        ("model.embed_tokens.weight", 1, 0, 8),
        ("model.embed_tokens.weight", 403, 28, 8),
        ("model.embed_tokens.weight", 511, 56, 8),
        ("model.norm.weight", None, 0, 64),
        ("model.layers.0.input_layernorm.weight", None, 0, 8),
        ("model.layers.2.self_attn.q_proj.weight", 5, 0, 8),
        ("model.layers.2.self_attn.q_proj.weight", 12, 60, 4),
        ("model.layers.3.self_attn.k_proj.weight", 31, 0, 8),
        ("model.layers.4.mlp.down_proj.weight", 63, 164, 8),
        ("model.layers.1.mlp.gate_proj.weight", 171, 0, 8),
        ("model.layers.1.mlp.up_proj.weight", 0, 56, 8),
    ]
    values = []
    for form, t in (("bin", bin_t), ("hf", hf_t)):
        for name, row, col, count in picks:
            a = t[name]
            v = a[col:col + count] if row is None else a[row, col:col + count]
            values.append({"form": form, "tensor": name, "row": -1 if row is None else row,
                           "col": col, "values": exact(v)})
    sums = {form: {name: float(np.sum(a.astype(np.float64))) for name, a in sorted(t.items())}
            for form, t in (("bin", bin_t), ("hf", hf_t))}
    out = {
        "generator": "tests/golden/make_checkpoint_golden.py",
        "bin_header": hdr,
        "bin_sha256": hashlib.sha256(open(BIN, "rb").read()).hexdigest(),
        "safetensors_sha256": hashlib.sha256(open(ST, "rb").read()).hexdigest(),
        "values": values,
        "sums_f64": sums,
    }
    with open(OUT, "w") as fp:
        json.dump(out, fp, indent=1)
        fp.write("\n")
    print("wrote", OUT, len(values), "value picks")


if __name__ == "__main__":
    main()
