#!/usr/bin/python3
"""Writes synthetic Llama-3-shape LM-head checkpoints for the benchmarks.

    /usr/bin/python3 bench/make_llama3_head.py [OUT_DIR]   (default /tmp/vocabd-bench)

Creates OUT_DIR/llama3-f32 (2.1 GB) and OUT_DIR/llama3-bf16 (1.05 GB): each a
Hugging Face folder with config.json (Llama-3-8B head shape: vocab_size
128256, hidden_size 4096, tied head) and model.safetensors holding
model.embed_tokens.weight [128256, 4096] (N(0, 0.02) values: one seeded
block of 8192 rows, rotated and rescaled per block) and
model.norm.weight [4096]. Never written inside the repository. Existing
files of the right size are kept.
"""
import json
import os
import struct
import sys

import numpy as np

VOCAB = 128256
HIDDEN = 4096
CHUNK_ROWS = 8192


def config():
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": HIDDEN, "intermediate_size": 14336, "num_attention_heads": 32,
        "num_key_value_heads": 8, "num_hidden_layers": 32, "vocab_size": VOCAB,
        "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
        "tie_word_embeddings": True, "bos_token_id": 128000, "eos_token_id": 128001,
        "torch_dtype": "float32",
    }


def to_bf16_bits(a):
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def write(folder, dtype):
    os.makedirs(folder, exist_ok=True)
    elem = 4 if dtype == "F32" else 2
    emb_bytes = VOCAB * HIDDEN * elem
    header = {
        "model.embed_tokens.weight": {"dtype": dtype, "shape": [VOCAB, HIDDEN],
                                      "data_offsets": [0, emb_bytes]},
        "model.norm.weight": {"dtype": "F32", "shape": [HIDDEN],
                              "data_offsets": [emb_bytes, emb_bytes + HIDDEN * 4]},
    }
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path = os.path.join(folder, "model.safetensors")
    total = 8 + len(text) + emb_bytes + HIDDEN * 4
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config(), f, indent=1)
    if os.path.exists(path) and os.path.getsize(path) == total:
        print("kept", path)
        return
    # One random block, written with a different row rotation and scale per
    # chunk: the values only need to be realistic, not independent (the
    # benchmark times the GEMM), and this keeps generation I/O-bound.
    rng = np.random.default_rng(20240607)
    base = rng.standard_normal((CHUNK_ROWS, HIDDEN), dtype=np.float32) * np.float32(0.02)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for i, start in enumerate(range(0, VOCAB, CHUNK_ROWS)):
            rows = min(CHUNK_ROWS, VOCAB - start)
            block = np.roll(base, i * 97, axis=1)[:rows] * np.float32(1 + 0.01 * i)
            f.write(block.tobytes() if dtype == "F32" else to_bf16_bits(block).tobytes())
        f.write(np.ones(HIDDEN, dtype="<f4").tobytes())
    print("wrote", path, total, "bytes")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/vocabd-bench"
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.abspath(out).startswith(repo + os.sep):
        sys.exit("refusing to write benchmark checkpoints inside the repository")
    write(os.path.join(out, "llama3-f32"), "F32")
    write(os.path.join(out, "llama3-bf16"), "BF16")


if __name__ == "__main__":
    main()
