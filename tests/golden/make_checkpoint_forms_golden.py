#!/usr/bin/python3
"""Tiny checkpoints of every config.json family and GGUF dtype, plus golden
values, for tests/lib/checkpoint/checkpoint_forms_test.cc.

Run with Debian's NumPy: /usr/bin/python3 tests/golden/make_checkpoint_forms_golden.py
Writes tests/data/forms/<case>/... and tests/golden/checkpoint_forms_golden.json.
RoBERTa forms (roberta, xlm_roberta): golden embeddings as HF's
modeling_roberta.RobertaEmbeddings.forward with token_type_ids = 0,
  LayerNorm(word[id] + token_type[0] + pos[row]) (layer_norm_eps, float64),
with rows from HF's create_position_ids_from_input_ids,
  row = (cumsum(ids != pad) + past_key_values_length) * (ids != pad) + pad.

Reference math (NumPy, float64 then rounded to float32 for comparison):
  RMSNorm   y = x / sqrt(mean(x^2) + eps) * w            (gemma: * (1 + w))
  LayerNorm y = (x - mean) / sqrt(var + eps) * w + b     (biased var)
  logits    = y @ head.T (+ lm_head.bias for phi)
  Q8_0      value = float16(d) * int8(q), blocks of 32 along a row
"""
import json
import os
import struct

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "data", "forms")
rng = np.random.default_rng(20240605)

ST_DTYPES = {"F32": np.float32, "F16": np.float16}


def to_bf16_bytes(a):
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16  # round to nearest even
    return rounded.astype(np.uint16).tobytes()


def bf16_values(a):
    b = np.frombuffer(to_bf16_bytes(a), np.uint16).astype(np.uint32) << 16
    return b.view(np.float32)


def write_safetensors(path, tensors):
    """tensors: list of (name, dtype_name, np.array float32)."""
    header = {"__metadata__": {"format": "pt", "source": "make_checkpoint_forms_golden.py"}}
    buf = b""
    for name, dt, arr in tensors:
        if dt == "BF16":
            raw = to_bf16_bytes(arr)
        else:
            raw = np.asarray(arr, ST_DTYPES[dt]).tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape),
                        "data_offsets": [len(buf), len(buf) + len(raw)]}
        buf += raw
    text = json.dumps(header).encode()
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + buf)


def stored_values(arr, dt):
    if dt == "BF16":
        return bf16_values(arr).reshape(np.asarray(arr).shape)
    return np.asarray(arr, ST_DTYPES[dt]).astype(np.float32)


def rms_norm(x, w, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def layer_norm(x, w, b, eps):
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


golden = {"hf": {}, "gguf": {}, "layer_norm": {}}

# ---------------------------------------------------------------- LayerNorm
x = rng.standard_normal((3, 16)).astype(np.float32) * 3 + 1
w = rng.standard_normal(16).astype(np.float32)
b = rng.standard_normal(16).astype(np.float32)
golden["layer_norm"] = {
    "x": x.ravel().tolist(), "weight": w.tolist(), "bias": b.tolist(), "eps": 1e-5,
    "rows": 3, "hidden": 16,
    "y": layer_norm(x, w, b, 1e-5).astype(np.float32).ravel().tolist(),
    "y_no_bias": layer_norm(x, w, 0.0, 1e-5).astype(np.float32).ravel().tolist()}

# ------------------------------------------------------------ HF families
V, H = 24, 8
hidden_in = rng.standard_normal((2, H)).astype(np.float32)


def family(name, config, tensors, embed, head, norm_fn, head_bias=None, scale=1.0,
           learned=None):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    write_safetensors(os.path.join(d, "model.safetensors"), tensors)
    y = norm_fn(hidden_in)
    logits = y @ head.astype(np.float64).T
    if head_bias is not None:
        logits = logits + head_bias
    golden["hf"][name] = {
        "hidden": hidden_in.ravel().tolist(),
        "logits": logits.astype(np.float32).ravel().tolist(),
        "embedding_row_5": (embed[5].astype(np.float64) * scale).astype(np.float32).tolist(),
        "embedding_scale": scale,
    }
    if learned is not None:
        golden["hf"][name]["wpe_row_3"] = learned[3].tolist()


def rnd(*shape):
    return (rng.standard_normal(shape) * 0.5).astype(np.float32)


# gpt2: F32, tied, LayerNorm with bias, learned positions, Conv1D layer weights.
wte, wpe, lnw, lnb = rnd(V, H), rnd(16, H), rnd(H) + 1, rnd(H)
family("gpt2", {"model_type": "gpt2", "vocab_size": V, "n_embd": H, "n_layer": 1, "n_head": 2,
                "n_positions": 16, "n_inner": None, "layer_norm_epsilon": 1e-5,
                "bos_token_id": 0, "eos_token_id": 1},
       [("transformer.wte.weight", "F32", wte), ("transformer.wpe.weight", "F32", wpe),
        ("transformer.ln_f.weight", "F32", lnw), ("transformer.ln_f.bias", "F32", lnb),
        ("transformer.h.0.attn.c_attn.weight", "F32", rnd(H, 3 * H))],
       wte, wte, lambda h: layer_norm(h, lnw, lnb, 1e-5), learned=wpe)

# gpt_neox: F16, untied embed_out, LayerNorm with bias, rotary_pct 0.25.
emb, out, lnw, lnb = rnd(V, H), rnd(V, H), rnd(H) + 1, rnd(H)
family("gpt_neox", {"model_type": "gpt_neox", "vocab_size": V, "hidden_size": H,
                    "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32,
                    "max_position_embeddings": 64, "layer_norm_eps": 1e-5, "rotary_pct": 0.5,
                    "rotary_emb_base": 5000, "tie_word_embeddings": False},
       [("gpt_neox.embed_in.weight", "F16", emb), ("embed_out.weight", "F16", out),
        ("gpt_neox.final_layer_norm.weight", "F16", lnw),
        ("gpt_neox.final_layer_norm.bias", "F16", lnb)],
       stored_values(emb, "F16"), stored_values(out, "F16"),
       lambda h: layer_norm(h, stored_values(lnw, "F16"), stored_values(lnb, "F16"), 1e-5))

# phi: BF16, untied head with bias, LayerNorm, partial_rotary_factor 0.5.
emb, out, ob, lnw, lnb = rnd(V, H), rnd(V, H), rnd(V), rnd(H) + 1, rnd(H)
family("phi", {"model_type": "phi", "vocab_size": V, "hidden_size": H, "num_hidden_layers": 1,
               "num_attention_heads": 2, "intermediate_size": 32,
               "max_position_embeddings": 64, "layer_norm_eps": 1e-5,
               "partial_rotary_factor": 0.5, "rope_theta": 10000.0,
               "tie_word_embeddings": False},
       [("model.embed_tokens.weight", "BF16", emb), ("lm_head.weight", "BF16", out),
        ("lm_head.bias", "BF16", ob), ("model.final_layernorm.weight", "BF16", lnw),
        ("model.final_layernorm.bias", "BF16", lnb)],
       stored_values(emb, "BF16"), stored_values(out, "BF16"),
       lambda h: layer_norm(h, stored_values(lnw, "BF16"), stored_values(lnb, "BF16"), 1e-5),
       head_bias=stored_values(ob, "BF16"))

# gemma: F32, tied, RMSNorm * (1 + w), embeddings * sqrt(hidden).
emb, nw = rnd(V, H), rnd(H)
family("gemma", {"model_type": "gemma", "vocab_size": V, "hidden_size": H,
                 "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
                 "head_dim": 4, "intermediate_size": 32, "max_position_embeddings": 64,
                 "rms_norm_eps": 1e-6},
       [("model.embed_tokens.weight", "F32", emb), ("model.norm.weight", "F32", nw),
        ("lm_head.weight", "F32", emb.copy())],  # HF may save a copy of the tied head
       emb, emb, lambda h: rms_norm(h, 1.0 + nw.astype(np.float64), 1e-6),
       scale=float(np.sqrt(H)))

# llava-style composite: tie flag only in text_config, prefixed tensor names.
emb, nw = rnd(V, H), rnd(H) + 1
family("nested_text_config", {"model_type": "llava", "tie_word_embeddings": False,
                              "text_config": {"model_type": "llama", "vocab_size": V,
                                              "hidden_size": H, "num_hidden_layers": 1,
                                              "num_attention_heads": 2, "intermediate_size": 32,
                                              "max_position_embeddings": 64,
                                              "rms_norm_eps": 1e-5,
                                              "tie_word_embeddings": True}},
       [("language_model.model.embed_tokens.weight", "F32", emb),
        ("language_model.model.norm.weight", "F32", nw)],
       emb, emb, lambda h: rms_norm(h, nw, 1e-5))

# ------------------------------------------------------------------- GGUF
def gguf_string(s):
    s = s.encode()
    return struct.pack("<Q", len(s)) + s


def gguf_kv(key, vtype, value):
    out = gguf_string(key) + struct.pack("<I", vtype)
    fmt = {4: "<I", 5: "<i", 6: "<f", 10: "<Q"}
    if vtype == 8:
        return out + gguf_string(value)
    return out + struct.pack(fmt[vtype], value)


def q8_0(arr):
    """ggml quantize_row_q8_0_ref: d = amax / 127, q = round(x / d)."""
    flat = arr.astype(np.float32).reshape(-1, 32)
    raw, values = b"", []
    for blk in flat:
        amax = float(np.abs(blk).max())
        d = amax / 127.0
        idd = 1.0 / d if d else 0.0
        q = np.round(blk * np.float32(idd)).astype(np.int8)
        d16 = np.float16(d)
        raw += d16.tobytes() + q.tobytes()
        values.append(q.astype(np.float32) * np.float32(d16))
    return raw, np.concatenate(values).reshape(arr.shape)


def write_gguf(path, kvs, tensors, alignment=32, version=3):
    """tensors: list of (name, ggml_type, row-major shape, raw bytes)."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for kv in kvs:
        head += kv
    data, infos = b"", b""
    for name, gtype, shape, raw in tensors:
        data += b"\0" * ((alignment - len(data) % alignment) % alignment)
        ne = list(reversed(shape))
        infos += gguf_string(name) + struct.pack("<I", len(ne)) + struct.pack(
            "<%dQ" % len(ne), *ne) + struct.pack("<IQ", gtype, len(data))
        data += raw
    body = head + infos
    body += b"\0" * ((alignment - len(body) % alignment) % alignment)
    with open(path, "wb") as f:
        f.write(body + data)


GV, GH = 16, 64
base_kvs = [gguf_kv("general.architecture", 8, "llama"), gguf_kv("llama.context_length", 4, 128),
            gguf_kv("llama.embedding_length", 4, GH), gguf_kv("llama.block_count", 4, 0),
            gguf_kv("llama.attention.head_count", 4, 4),
            gguf_kv("llama.attention.head_count_kv", 4, 2),
            gguf_kv("llama.rope.dimension_count", 4, 16),
            gguf_kv("llama.rope.freq_base", 6, 500000.0),
            gguf_kv("llama.attention.layer_norm_rms_epsilon", 6, 1e-5),
            gguf_kv("tokenizer.ggml.bos_token_id", 4, 1), gguf_kv("tokenizer.ggml.eos_token_id", 4, 2)]
hidden_g = rng.standard_normal((2, GH)).astype(np.float32)
norm_g = (rnd(GH) + 1).astype(np.float32)


def gguf_case(name, embd_type, out_type, extra_kvs=()):
    emb, out = rnd(GV, GH), rnd(GV, GH)

    def enc(arr, t):
        if t == 0:
            return arr.tobytes(), arr
        if t == 1:
            return arr.astype(np.float16).tobytes(), arr.astype(np.float16).astype(np.float32)
        if t == 30:
            return to_bf16_bytes(arr), bf16_values(arr).reshape(arr.shape)
        if t == 8:
            return q8_0(arr)
        raise ValueError(t)
    e_raw, e_val = enc(emb, embd_type)
    tensors = [("token_embd.weight", embd_type, [GV, GH], e_raw),
               ("output_norm.weight", 0, [GH], norm_g.tobytes())]
    head = e_val
    if out_type is not None:
        o_raw, head = enc(out, out_type)
        tensors.append(("output.weight", out_type, [GV, GH], o_raw))
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    write_gguf(os.path.join(d, name + ".gguf"), base_kvs + list(extra_kvs), tensors)
    logits = rms_norm(hidden_g, norm_g, np.float64(np.float32(1e-5))) @ head.astype(np.float64).T
    golden["gguf"][name] = {"hidden": hidden_g.ravel().tolist(),
                            "embedding": e_val.astype(np.float32).ravel().tolist(),
                            "head": head.astype(np.float32).ravel().tolist(),
                            "logits": logits.astype(np.float32).ravel().tolist(),
                            "tied": out_type is None}


gguf_case("gguf_q8_0", 8, 8)
gguf_case("gguf_bf16", 30, 30)
gguf_case("gguf_f16_tied", 1, None,
          [gguf_kv("llama.rope.scaling.type", 8, "linear"),
           gguf_kv("llama.rope.scaling.factor", 6, 4.0),
           gguf_kv("llama.rope.scaling.original_context_length", 4, 32)])
gguf_case("gguf_f32", 0, 0)


# GGUF RoPE scaling keys and factor tensors, read by RopeParamsFromGguf
# (tests/lib/checkpoint/checkpoint_forms_test.cc compares them with the equivalent
# config.json rope_scaling). Written after the cases above so their bytes
# do not change.
def rope_gguf(name, arch, kvs, extra_tensors=()):
    emb = rnd(GV, GH)
    tensors = [("token_embd.weight", 0, [GV, GH], emb.tobytes()),
               ("output_norm.weight", 0, [GH], norm_g.tobytes())] + list(extra_tensors)
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    base = [gguf_kv("general.architecture", 8, arch), gguf_kv(arch + ".embedding_length", 4, GH),
            gguf_kv(arch + ".block_count", 4, 0), gguf_kv(arch + ".attention.head_count", 4, 4),
            gguf_kv(arch + ".attention.layer_norm_rms_epsilon", 6, 1e-5)]
    write_gguf(os.path.join(d, name + ".gguf"), base + kvs, tensors)


# yarn with every key llama.cpp writes (head_dim 16).
rope_gguf("gguf_yarn", "llama",
          [gguf_kv("llama.context_length", 4, 128), gguf_kv("llama.rope.freq_base", 6, 10000.0),
           gguf_kv("llama.rope.dimension_count", 4, 16),
           gguf_kv("llama.rope.scaling.type", 8, "yarn"),
           gguf_kv("llama.rope.scaling.factor", 6, 4.0),
           gguf_kv("llama.rope.scaling.original_context_length", 4, 32),
           gguf_kv("llama.rope.scaling.attn_factor", 6, 1.25),
           gguf_kv("llama.rope.scaling.yarn_beta_fast", 6, 24.0),
           gguf_kv("llama.rope.scaling.yarn_beta_slow", 6, 2.0),
           gguf_kv("llama.rope.scaling.yarn_log_multiplier", 6, 0.125)])
# Phi-3 longrope: factor tensors, no scaling.type key (as llama.cpp writes).
LONG = np.array([1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0], np.float32)
SHORT = np.array([1.0, 1.0, 1.0, 1.25, 1.5, 1.5, 2.0, 2.0], np.float32)
rope_gguf("gguf_phi3_longrope", "phi3",
          [gguf_kv("phi3.context_length", 4, 256), gguf_kv("phi3.rope.freq_base", 6, 10000.0),
           gguf_kv("phi3.rope.dimension_count", 4, 16),
           gguf_kv("phi3.rope.scaling.original_context_length", 4, 64),
           gguf_kv("phi3.rope.scaling.attn_factor", 6, 1.5)],
          [("rope_factors_long.weight", 0, [8], LONG.tobytes()),
           ("rope_factors_short.weight", 0, [8], SHORT.tobytes())])


# ------------------------------------------------- RoBERTa learned positions
def roberta_position_rows(ids, padding_idx, past):
    """HF modeling_roberta.create_position_ids_from_input_ids (NumPy)."""
    mask = (ids != padding_idx).astype(np.int64)
    incremental = (np.cumsum(mask, axis=1) + past) * mask
    return incremental + padding_idx


def roberta_form(name, model_type, prefix, pad, max_pos, cases):
    word, pos = rnd(V, H), rnd(max_pos, H)
    ttype, lnw, lnb = rnd(1, H), rnd(H) + 1, rnd(H)
    config = {"model_type": model_type, "architectures": ["RobertaForMaskedLM"],
              "vocab_size": V, "hidden_size": H, "num_hidden_layers": 1,
              "num_attention_heads": 2, "intermediate_size": 32,
              "max_position_embeddings": max_pos, "type_vocab_size": 1,
              "layer_norm_eps": 1e-5, "pad_token_id": pad, "bos_token_id": 0,
              "eos_token_id": 2, "position_embedding_type": "absolute"}
    tensors = [(prefix + "embeddings.word_embeddings.weight", "F32", word),
               (prefix + "embeddings.position_embeddings.weight", "F32", pos),
               (prefix + "embeddings.token_type_embeddings.weight", "F32", ttype),
               (prefix + "embeddings.LayerNorm.weight", "F32", lnw),
               (prefix + "embeddings.LayerNorm.bias", "F32", lnb)]
    if prefix:  # RobertaForMaskedLM: the MLM head vocabd does not serve
        tensors += [("lm_head.dense.weight", "F32", rnd(H, H)), ("lm_head.dense.bias", "F32", rnd(H)),
                    ("lm_head.layer_norm.weight", "F32", rnd(H) + 1),
                    ("lm_head.layer_norm.bias", "F32", rnd(H)), ("lm_head.bias", "F32", rnd(V))]
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    write_safetensors(os.path.join(d, "model.safetensors"), tensors)
    out = []
    for ids, past in cases:
        a = np.array([ids], np.int64)
        rows = roberta_position_rows(a, pad, past)[0]
        # RobertaEmbeddings.forward: inputs_embeds + token_type_embeddings(0)
        # + position_embeddings(position_ids), then self.LayerNorm.
        x = (word[a[0]].astype(np.float64) + ttype[0].astype(np.float64) +
             pos[rows].astype(np.float64))
        emb = layer_norm(x, lnw.astype(np.float64), lnb.astype(np.float64),
                         config["layer_norm_eps"])
        out.append({"ids": ids, "past": past, "rows": rows.tolist(),
                    "embeddings": emb.astype(np.float32).ravel().tolist()})
    golden["roberta"][name] = {"padding_idx": pad, "cases": out}


golden["roberta"] = {}
# Right padding, left padding, a pad inside, past_key_values_length 3, and a
# sequence filling the table (rows up to max_pos - 1).
roberta_form("roberta", "roberta", "roberta.", 1, 12,
             [([0, 5, 7, 2, 1, 1], 0), ([1, 1, 0, 9, 2], 0), ([5, 1, 6], 3),
              ([0, 3, 4, 5, 6, 7, 8, 9, 10, 2], 0)])
roberta_form("xlm_roberta", "xlm-roberta", "", 3, 10,
             [([0, 5, 3, 2], 0), ([3, 3, 4, 5], 2)])

with open(os.path.join(ROOT, "golden", "checkpoint_forms_golden.json"), "w") as f:
    json.dump(golden, f)
print("wrote", OUT)
