#!/usr/bin/python3
"""Golden values for the LM head, final RMSNorm and scoring (float64 NumPy).

Reads the real stories260K weights (tied head: the LM head is the embedding
table) from models/stories260K-hf/model.safetensors, parsing the safetensors
header itself (no dependency on the C++ code), and writes
tests/golden/head_golden.json.

Reference formulas (all in float64 from float32 inputs):
  rmsnorm(x)   = x / sqrt(mean(x^2) + eps) * weight        (HF LlamaRMSNorm)
  logits       = x @ E^T                                   E: [vocab, hidden]
  logsumexp    = m + log(sum(exp(l - m))),  m = max(l)
  logprob      = l - logsumexp
  rank(t)      = 1 + #{j: l_j > l_t} + #{j < t: l_j == l_t}
  top_k        = k best by (logprob desc, id asc)
  temperature  : l / T before scoring
  vocab_limit  : ids >= vocab_limit get l = -inf (excluded from top-k)

Run with Debian's numpy:  /usr/bin/python3 tests/golden/make_head_golden.py
"""
import hashlib
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODEL = os.path.join(ROOT, "models", "stories260K-hf", "model.safetensors")
OUT = os.path.join(HERE, "head_golden.json")

NUM_ROWS = 5
SEED = 20240607
EPS = 1e-5
TOP_K = 5
TEMPERATURE = 0.7
VOCAB_LIMIT = 500


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (name, info["dtype"])
        begin, end = info["data_offsets"]
        arr = np.frombuffer(data[base + begin:base + end], dtype="<f4")
        tensors[name] = arr.reshape(info["shape"])
    return tensors, hashlib.sha256(data).hexdigest()


def rmsnorm(x, w, eps):
    x = x.astype(np.float64)
    var = np.mean(x * x, axis=-1, keepdims=True)
    return x / np.sqrt(var + eps) * w.astype(np.float64)


def logsumexp(l):
    m = np.max(l)
    return float(m + np.log(np.sum(np.exp(l - m))))


def rank(l, t):
    return int(1 + np.sum(l > l[t]) + np.sum(l[:t] == l[t]))


def top_k(l, k):
    lse = logsumexp(l)
    ids = [j for j in range(len(l)) if np.isfinite(l[j])]
    ids.sort(key=lambda j: (-l[j], j))
    return [[int(j), float(l[j] - lse)] for j in ids[:k]]


def score(logits, targets, k):
    rows = []
    for r, l in enumerate(logits):
        lse = logsumexp(l)
        t = targets[r]
        rows.append({
            "logsumexp": lse,
            "target_id": int(t),
            "target_logprob": float(l[t] - lse),
            "target_rank": rank(l, t),
            "top_k": top_k(l, k),
        })
    return rows


def main():
    tensors, sha = load_safetensors(MODEL)
    emb = tensors["model.embed_tokens.weight"]  # [vocab, hidden]
    norm_w = tensors["model.norm.weight"]       # [hidden]
    vocab, hidden = emb.shape
    e64 = emb.astype(np.float64)

    rng = np.random.default_rng(SEED)
    h = rng.standard_normal((NUM_ROWS, hidden)).astype(np.float32)

    normed = rmsnorm(h, norm_w, EPS)
    logits_raw = h.astype(np.float64) @ e64.T
    logits = normed @ e64.T  # the default path: final norm, T = 1
    lse = np.array([logsumexp(l) for l in logits])
    log_softmax = logits - lse[:, None]

    # Row 0 targets its argmax (rank 1); the others fixed ids incl. <unk> (0).
    targets = [int(np.argmax(logits[0])), 403, 0, 499, 260]

    tempered = logits / TEMPERATURE
    masked = logits.copy()
    masked[:, VOCAB_LIMIT:] = -np.inf

    golden = {
        "source": "tests/golden/make_head_golden.py",
        "model": "models/stories260K-hf/model.safetensors",
        "model_sha256": sha,
        "embedding_tensor": "model.embed_tokens.weight",
        "norm_tensor": "model.norm.weight",
        "vocab_size": int(vocab),
        "hidden_size": int(hidden),
        "eps": EPS,
        "seed": SEED,
        "hidden": h.astype(np.float64).tolist(),
        "normed": normed.tolist(),
        "logits_no_norm": logits_raw.tolist(),
        "logits": logits.tolist(),
        "log_softmax": log_softmax.tolist(),
        "logsumexp": lse.tolist(),
        "target_ids": targets,
        "top_k": TOP_K,
        "scores": score(logits, targets, TOP_K),
        "temperature": TEMPERATURE,
        "scores_temperature": score(tempered, targets, TOP_K),
        "vocab_limit": VOCAB_LIMIT,
        "scores_vocab_limit": score(masked, targets, TOP_K),
    }
    with open(OUT, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
