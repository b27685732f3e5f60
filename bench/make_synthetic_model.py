#!/usr/bin/python3
"""Writes a synthetic Hugging Face Llama checkpoint for load tests.

    /usr/bin/python3 bench/make_synthetic_model.py OUT_DIR [--vocab 1024] [--hidden 4096]

OUT_DIR gets config.json + model.safetensors holding only what vocabd serves:
model.embed_tokens.weight [vocab, hidden] (N(0, 0.02), seed 0), model.norm.weight
[hidden] (1 + N(0, 0.01)), tied LM head. F32, 16 MiB at the defaults. Generated
data: never commit it (bench/e2e.sh writes it under /tmp).
"""
import argparse
import json
import os
import struct

import numpy as np


def write_safetensors(path, tensors):
    header = {}
    offset = 0
    for name, array in tensors.items():
        nbytes = array.nbytes
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * ((8 - len(blob) % 8) % 8)  # keep tensor data 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for array in tensors.values():
            f.write(np.ascontiguousarray(array, dtype="<f4").tobytes())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--vocab", type=int, default=1024)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    rng = np.random.default_rng(0)
    embed = (rng.standard_normal((args.vocab, args.hidden)) * 0.02).astype(np.float32)
    norm = (1.0 + rng.standard_normal(args.hidden) * 0.01).astype(np.float32)
    write_safetensors(os.path.join(args.out_dir, "model.safetensors"),
                      {"model.embed_tokens.weight": embed, "model.norm.weight": norm})
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": args.vocab, "hidden_size": args.hidden,
        "intermediate_size": 4 * args.hidden, "num_hidden_layers": 1,
        "num_attention_heads": args.heads, "num_key_value_heads": args.kv_heads,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2,
        "torch_dtype": "float32",
    }
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    print(f"wrote {args.out_dir}: vocab {args.vocab} x hidden {args.hidden} F32")


if __name__ == "__main__":
    main()
