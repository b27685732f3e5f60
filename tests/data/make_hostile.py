#!/usr/bin/python3
"""Hostile and broken checkpoint files, one model folder per case, for
tests/lib/checkpoint/hostile_files_test.cc and tests/server/model_repository_server_test.cc.

Run with Debian's NumPy: /usr/bin/python3 tests/data/make_hostile.py
Writes tests/data/hostile/<case>/ (a model repository: each folder is a
model) and tests/data/hostile/manifest.json:
  [{"case", "file" (relative to the case folder), "code" (absl code name),
    "expect": [substrings the error message must hold]}]
Every message must also name the file (the test checks the path).
"""
import json
import os
import shutil
import struct

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile")
V, H = 16, 8
CONFIG = {"model_type": "llama", "vocab_size": V, "hidden_size": H, "num_hidden_layers": 0,
          "num_attention_heads": 2, "num_key_value_heads": 2, "intermediate_size": 16,
          "max_position_embeddings": 32, "rms_norm_eps": 1e-5, "tie_word_embeddings": True}
rng = np.random.default_rng(7)
EMB = rng.standard_normal((V, H)).astype(np.float32)
NORM = np.ones(H, np.float32)
manifest = []


def case(name, file, code, expect):
    manifest.append({"case": name, "file": file, "code": code, "expect": expect})
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    return d


def st_bytes(header, buf, pad=True):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    if pad:
        text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + buf


def good_header():
    return {"model.embed_tokens.weight": {"dtype": "F32", "shape": [V, H],
                                          "data_offsets": [0, V * H * 4]},
            "model.norm.weight": {"dtype": "F32", "shape": [H],
                                  "data_offsets": [V * H * 4, V * H * 4 + H * 4]}}


GOOD_BUF = EMB.tobytes() + NORM.tobytes()


def st_case(name, code, expect, data, config=CONFIG):
    d = case(name, "model.safetensors", code, expect)
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write(config if isinstance(config, str) else json.dumps(config))
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(data)


def cfg_case(name, code, expect, config):
    st_case(name, code, expect, st_bytes(good_header(), GOOD_BUF), config)
    manifest[-1]["file"] = "config.json"


shutil.rmtree(ROOT, ignore_errors=True)

# ------------------------------------------------------------ safetensors
st_case("st_shorter_than_8_bytes", "INVALID_ARGUMENT", ["fewer than the 8-byte header length"],
        b"\x10\x00\x00")
st_case("st_header_len_beyond_file", "INVALID_ARGUMENT", ["goes beyond the end of the file"],
        struct.pack("<Q", 4096) + b"{}")
st_case("st_header_len_over_100mb", "INVALID_ARGUMENT", ["exceeds the limit of 104857600 bytes"],
        struct.pack("<Q", 200 << 20) + b"{}")
st_case("st_header_not_json", "INVALID_ARGUMENT", ["header is not valid JSON"],
        st_bytes(b"{\"a\": [1, 2", b""))
st_case("st_header_not_object", "INVALID_ARGUMENT", ["header is a JSON array, not an object"],
        st_bytes(b"[1, 2, 3]", b""))
dup = (b'{"model.embed_tokens.weight": {"dtype": "F32", "shape": [16, 8], "data_offsets": [0, 512]},'
       b' "model.embed_tokens.weight": {"dtype": "F32", "shape": [8], "data_offsets": [512, 544]}}')
st_case("st_duplicate_tensor_names", "INVALID_ARGUMENT",
        ["duplicate tensor name \"model.embed_tokens.weight\""], st_bytes(dup, GOOD_BUF))
h = good_header(); h["model.norm.weight"]["dtype"] = "F8_E4M3"
st_case("st_unknown_dtype", "INVALID_ARGUMENT", ["dtype = \"F8_E4M3\" is not supported"],
        st_bytes(h, GOOD_BUF))
h = good_header(); h["model.norm.weight"]["data_offsets"] = [V * H * 4 - 16, V * H * 4 + H * 4 - 16]
st_case("st_offsets_overlap", "INVALID_ARGUMENT", ["overlap tensor"], st_bytes(h, GOOD_BUF))
h = good_header(); h["model.norm.weight"]["data_offsets"] = [V * H * 4 + 8, V * H * 4 + H * 4 + 8]
st_case("st_offsets_gap", "INVALID_ARGUMENT", ["gap of 8 bytes"], st_bytes(h, GOOD_BUF + bytes(8)))
h = good_header(); h["model.norm.weight"]["data_offsets"] = [V * H * 4, V * H * 4 + H * 4 + 64]
h["model.norm.weight"]["shape"] = [H + 16]
st_case("st_offsets_out_of_bounds", "INVALID_ARGUMENT", ["is out of bounds"], st_bytes(h, GOOD_BUF))
h = good_header(); h["model.norm.weight"]["shape"] = [H - 1]
st_case("st_size_not_shape_times_dtype", "INVALID_ARGUMENT", ["needs 28 bytes"],
        st_bytes(h, GOOD_BUF))
h = good_header(); h["model.norm.weight"]["shape"] = [2 ** 62, 2 ** 62]
st_case("st_shape_product_overflow", "INVALID_ARGUMENT", ["element count overflows int64"],
        st_bytes(h, GOOD_BUF))
st_case("st_buffer_longer_than_last_tensor", "INVALID_ARGUMENT", ["(12 trailing bytes)"],
        st_bytes(good_header(), GOOD_BUF + bytes(12)))


# ------------------------------------------------------------------ GGUF
def s(x):
    x = x.encode() if isinstance(x, str) else x
    return struct.pack("<Q", len(x)) + x


def kv_u32(k, v):
    return s(k) + struct.pack("<II", 4, v)


def kv_f32(k, v):
    return s(k) + struct.pack("<If", 6, v)


def kv_str(k, v):
    return s(k) + struct.pack("<I", 8) + s(v)


BASE_KV = [kv_str("general.architecture", "llama"), kv_u32("llama.context_length", 32),
           kv_u32("llama.embedding_length", H), kv_u32("llama.block_count", 0),
           kv_u32("llama.attention.head_count", 2),
           kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5)]


def tinfo(name, ne, gtype, offset, n_dims=None):
    n_dims = len(ne) if n_dims is None else n_dims
    return s(name) + struct.pack("<I", n_dims) + b"".join(struct.pack("<Q", d) for d in ne) + \
        struct.pack("<IQ", gtype, offset)


def gguf(kvs=None, tinfos=None, data=None, version=3, magic=b"GGUF", n_tensors=None, n_kv=None,
         alignment=32):
    kvs = BASE_KV if kvs is None else kvs
    if tinfos is None:
        tinfos = [tinfo("token_embd.weight", [H, V], 0, 0),
                  tinfo("output_norm.weight", [H], 0, V * H * 4)]
    data = GOOD_BUF if data is None else data
    out = magic + struct.pack("<IQQ", version, len(tinfos) if n_tensors is None else n_tensors,
                              len(kvs) if n_kv is None else n_kv)
    out += b"".join(kvs) + b"".join(tinfos)
    out += bytes((alignment - len(out) % alignment) % alignment)
    return out + data


def gguf_case(name, code, expect, data):
    d = case(name, name + ".gguf", code, expect)
    with open(os.path.join(d, name + ".gguf"), "wb") as f:
        f.write(data)


gguf_case("gguf_bad_magic", "INVALID_ARGUMENT", ["bad magic [0x47 0x47 0x4d 0x4c]"],
          gguf(magic=b"GGML"))
gguf_case("gguf_version_1", "INVALID_ARGUMENT", ["version 1 (legacy GGUF"], gguf(version=1))
gguf_case("gguf_unknown_version", "INVALID_ARGUMENT", ["unknown version 7"], gguf(version=7))
gguf_case("gguf_kv_count_beyond_file", "INVALID_ARGUMENT", ["metadata_kv_count 1000000000"],
          gguf(n_kv=10 ** 9))
gguf_case("gguf_tensor_count_beyond_file", "INVALID_ARGUMENT", ["tensor_count 4294967296"],
          gguf(n_tensors=2 ** 32))
gguf_case("gguf_string_length_beyond_file", "INVALID_ARGUMENT",
          ["metadata \"general.architecture\" value length 1099511627776",
           "larger than the"],
          gguf(kvs=[s("general.architecture") + struct.pack("<IQ", 8, 2 ** 40) + b"llama"] +
               BASE_KV[1:]))
gguf_case("gguf_array_count_beyond_file", "INVALID_ARGUMENT",
          ["\"tokenizer.ggml.scores\" array count 100000000000"],
          gguf(kvs=BASE_KV + [s("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, 10 ** 11)]))
gguf_case("gguf_unknown_value_type", "INVALID_ARGUMENT", ["unknown value type 13"],
          gguf(kvs=BASE_KV + [s("x.y") + struct.pack("<II", 13, 0)]))
gguf_case("gguf_dim_zero", "INVALID_ARGUMENT", ["tensor \"token_embd.weight\" ne[1] = 0"],
          gguf(tinfos=[tinfo("token_embd.weight", [H, 0], 0, 0)]))
gguf_case("gguf_dims_overflow", "INVALID_ARGUMENT", ["dims overflow int64"],
          gguf(tinfos=[tinfo("token_embd.weight", [2 ** 40, 2 ** 40], 0, 0)]))
gguf_case("gguf_unknown_type_id", "INVALID_ARGUMENT",
          ["tensor \"output_norm.weight\" has unknown ggml type id 99"],
          gguf(tinfos=[tinfo("token_embd.weight", [H, V], 0, 0),
                       tinfo("output_norm.weight", [H], 99, V * H * 4)]))
gguf_case("gguf_alignment_not_power_of_two", "INVALID_ARGUMENT",
          ["general.alignment = 24 is not a power of two"],
          gguf(kvs=BASE_KV + [kv_u32("general.alignment", 24)]))
gguf_case("gguf_offset_out_of_bounds", "INVALID_ARGUMENT",
          ["tensor \"output_norm.weight\" [offset 4096", "is out of bounds"],
          gguf(tinfos=[tinfo("token_embd.weight", [H, V], 0, 0),
                       tinfo("output_norm.weight", [H], 0, 4096)]))
gguf_case("gguf_offset_misaligned", "INVALID_ARGUMENT",
          ["offset 4 is not a multiple of the alignment 32"],
          gguf(tinfos=[tinfo("token_embd.weight", [H, V], 0, 4)]))
gguf_case("gguf_n_dims_5", "INVALID_ARGUMENT", ["n_dims = 5 is outside [1, 4]"],
          gguf(tinfos=[tinfo("token_embd.weight", [H, V, 1, 1, 1], 0, 0)]))
gguf_case("gguf_tensors_overlap", "INVALID_ARGUMENT", ["overlaps tensor \"token_embd.weight\""],
          gguf(tinfos=[tinfo("token_embd.weight", [H, V], 0, 0),
                       tinfo("output_norm.weight", [H], 0, 480)]))
gguf_case("gguf_truncated", "INVALID_ARGUMENT", ["metadata_kv_count 6 is larger than the 16 bytes left"],
          gguf()[:40])
# Quantized tables: the row/block rules, truncated block data,
# unknown and unserved ggml types. Each message names the tensor, the type
# and the rule.
NORM_T = tinfo("output_norm.weight", [H], 0, 0)
gguf_case("gguf_quant_row_not_multiple_of_block", "INVALID_ARGUMENT",
          ["tensor \"token_embd.weight\" of type q4_K has a row length ne[0] = 8",
           "not a multiple of the q4_K block size 256"],
          gguf(tinfos=[NORM_T, tinfo("token_embd.weight", [H, V], 12, 64)],
               data=NORM.tobytes() + bytes(32) + bytes(V * H)))
gguf_case("gguf_quant_blocks_straddle_rows", "INVALID_ARGUMENT",
          ["tensor \"token_embd.weight\" of type q8_0: its 3 blocks of 32 elements do not "
           "divide into its 2 rows of ne[0] = 48 elements"],
          gguf(tinfos=[NORM_T, tinfo("token_embd.weight", [48, 2], 8, 64)],
               data=NORM.tobytes() + bytes(32) + bytes(3 * 34)))
gguf_case("gguf_quant_truncated", "INVALID_ARGUMENT",
          ["tensor \"token_embd.weight\"", "truncated data", "q8_0 data (16 blocks of 34 bytes)",
           "needs 544 bytes"],
          gguf(tinfos=[NORM_T, tinfo("token_embd.weight", [32, V], 8, 64)],
               data=NORM.tobytes() + bytes(32) + bytes(300)))
gguf_case("gguf_removed_type_id_4", "INVALID_ARGUMENT",
          ["tensor \"token_embd.weight\" has unknown ggml type id 4"],
          gguf(tinfos=[NORM_T, tinfo("token_embd.weight", [H, V], 4, 64)],
               data=NORM.tobytes() + bytes(32) + bytes(V * H * 4)))
gguf_case("gguf_table_unserved_type", "INVALID_ARGUMENT",
          ["tensor \"token_embd.weight\" has ggml type iq2_xxs, which vocabd does not serve"],
          gguf(kvs=[kv_str("general.architecture", "llama"), kv_u32("llama.context_length", 32),
                    kv_u32("llama.embedding_length", 256), kv_u32("llama.block_count", 0),
                    kv_u32("llama.attention.head_count", 2),
                    kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5)],
               tinfos=[tinfo("output_norm.weight", [256], 0, 0),
                       tinfo("token_embd.weight", [256, V], 16, 1024)],
               data=np.ones(256, np.float32).tobytes() + bytes(V * 66)))
# RoPE keys go through RopeParamsFromGguf (lib/positions/rope_gguf.h); errors name
# the file and the key or parameter.
gguf_case("gguf_rope_freq_base_string", "INVALID_ARGUMENT",
          ["key \"llama.rope.freq_base\" must be a number, got string \"big\""],
          gguf(kvs=BASE_KV + [kv_str("llama.rope.freq_base", "big")]))
gguf_case("gguf_rope_scaling_type_unknown", "INVALID_ARGUMENT",
          ["key \"llama.rope.scaling.type\" = \"weird\" is not supported"],
          gguf(kvs=BASE_KV + [kv_str("llama.rope.scaling.type", "weird")]))
gguf_case("gguf_rope_yarn_without_factor", "INVALID_ARGUMENT",
          ["key \"llama.rope.scaling.factor\" is required for rope.scaling.type \"yarn\""],
          gguf(kvs=BASE_KV + [kv_str("llama.rope.scaling.type", "yarn")]))
gguf_case("gguf_rope_yarn_negative_beta", "INVALID_ARGUMENT",
          ["rope.scaling(yarn).beta_fast = -1 must be finite and > 0"],
          gguf(kvs=BASE_KV + [kv_str("llama.rope.scaling.type", "yarn"),
                              kv_f32("llama.rope.scaling.factor", 4.0),
                              kv_f32("llama.rope.scaling.yarn_beta_fast", -1.0)]))

# ------------------------------------------------------------ config.json
def cfg(**changes):
    c = dict(CONFIG)
    for k, v in changes.items():
        if v is None:
            c.pop(k)
        else:
            c[k] = v
    return c


cfg_case("cfg_missing_vocab_size", "INVALID_ARGUMENT", ["key \"vocab_size\" is required but missing"],
         cfg(vocab_size=None))
cfg_case("cfg_missing_hidden_size", "INVALID_ARGUMENT",
         ["key \"hidden_size\" is required but missing"], cfg(hidden_size=None))
cfg_case("cfg_missing_model_type", "INVALID_ARGUMENT", ["key \"model_type\" is required but missing"],
         cfg(model_type=None))
cfg_case("cfg_hidden_size_string", "INVALID_ARGUMENT",
         ["key \"hidden_size\" must be an integer, got string \"8\""], cfg(hidden_size="8"))
cfg_case("cfg_tie_not_bool", "INVALID_ARGUMENT",
         ["key \"tie_word_embeddings\" must be a boolean, got string"],
         cfg(tie_word_embeddings="yes"))
cfg_case("cfg_rope_theta_string", "INVALID_ARGUMENT", ["key \"rope_theta\" must be a number"],
         cfg(rope_theta="1e4"))
cfg_case("cfg_rope_scaling_list", "INVALID_ARGUMENT",
         ["key \"rope_scaling\" must be an object or null"], cfg(rope_scaling=[1]))
cfg_case("cfg_not_json", "INVALID_ARGUMENT", ["not valid JSON"], "{\"model_type\": ")
cfg_case("cfg_top_level_array", "INVALID_ARGUMENT", ["top level is a JSON array"], "[]")
cfg_case("cfg_unsupported_model_type", "INVALID_ARGUMENT", ["\"t5\" is not supported"],
         cfg(model_type="t5"))
cfg_case("cfg_heads_not_dividing", "INVALID_ARGUMENT",
         ["num_key_value_heads = 3 does not divide num_attention_heads = 2"],
         cfg(num_key_value_heads=3))
cfg_case("cfg_untied_without_head", "FAILED_PRECONDITION",
         ["tensor \"lm_head.weight\" is missing"], cfg(tie_word_embeddings=False))
manifest[-1]["file"] = "model.safetensors"  # the weights lack the head

with open(os.path.join(ROOT, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)
print(len(manifest), "cases in", ROOT)
