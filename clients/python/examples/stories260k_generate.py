#!/usr/bin/env python3
"""Greedy stories260K generation: NumPy transformer blocks, vocabd for the rest.

The 5 Llama blocks (RMSNorm, GQA attention with a KV cache, SwiGLU) run here in
NumPy float32 on weights read from the llama2.c checkpoint; vocabd does the
token-embedding lookup (Embed), RoPE on q and k (ApplyRope, the model's own
adjacent-pair layout and theta) and the final RMSNorm + tied LM head (Score,
top_k=1 = greedy). 256 steps from BOS reproduce llama2.c's documented sample
(../shared/models/stories260K/greedy_t0_n256.txt) byte for byte:

    deploy/dev.sh run        # vocabd on 127.0.0.1:50051 serving stories260K
    python3 clients/python/examples/stories260k_generate.py \
        --target 127.0.0.1:50051 --checkpoint models/stories260K/stories260K.bin \
        --tokenizer models/stories260K/tok512.bin > story.txt

Checkpoint layout (llama2.c legacy, version 0): 7 int32 (dim, hidden_dim,
n_layers, n_heads, n_kv_heads, vocab_size (positive = tied head), seq_len),
then float32 tok_embeddings[vocab, dim], rms_att[L, dim], wq[L, dim, dim],
wk[L, kv_dim, dim], wv[L, kv_dim, dim], wo[L, dim, dim], rms_ffn[L, dim],
w1[L, hidden, dim], w2[L, dim, hidden], w3[L, hidden, dim], rms_final[dim],
freq_cis_real/imag[seq_len, head_dim/2] (unused here: vocabd does RoPE).
"""
import argparse
import os
import struct
import sys

import numpy as np

BOS = 1
EPS = 1e-5  # llama2.c rmsnorm


class Checkpoint:
    """The stories260K weights as float32 NumPy arrays (layout above)."""

    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        (self.dim, self.hidden_dim, self.n_layers, self.n_heads, self.n_kv_heads,
         vocab, self.seq_len) = struct.unpack_from("<7i", data, 0)
        self.shared_classifier = vocab > 0
        self.vocab_size = abs(vocab)
        self.head_dim = self.dim // self.n_heads
        kv_dim = self.n_kv_heads * self.head_dim
        L, d, h = self.n_layers, self.dim, self.hidden_dim
        offset = 7 * 4

        def take(*shape):
            nonlocal offset
            n = int(np.prod(shape))
            a = np.frombuffer(data, dtype="<f4", count=n, offset=offset).reshape(shape)
            offset += 4 * n
            return a.astype(np.float32)

        self.tok_embeddings = take(self.vocab_size, d)
        self.rms_att = take(L, d)
        self.wq = take(L, d, d)
        self.wk = take(L, kv_dim, d)
        self.wv = take(L, kv_dim, d)
        self.wo = take(L, d, d)
        self.rms_ffn = take(L, d)
        self.w1 = take(L, h, d)
        self.w2 = take(L, d, h)
        self.w3 = take(L, h, d)
        self.rms_final = take(d)


class Tokenizer:
    """llama2.c tokenizer file (tok512.bin) and run.c's decode rules."""

    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        offset = 4  # max_token_length
        self.pieces = []
        while offset < len(data):
            _score, length = struct.unpack_from("<fi", data, offset)
            offset += 8
            self.pieces.append(data[offset:offset + length])
            offset += length

    def decode(self, prev, token):
        piece = self.pieces[token]
        if prev == BOS and piece.startswith(b" "):
            piece = piece[1:]  # run.c: strip the leading space after BOS
        if len(piece) == 6 and piece.startswith(b"<0x") and piece.endswith(b">"):
            piece = bytes([int(piece[3:5], 16)])
        if len(piece) == 1 and not (chr(piece[0]).isprintable() and piece[0] < 0x7F
                                    or chr(piece[0]) in " \t\n\v\f\r"):
            return b""  # run.c safe_printf: skip non-printable lone bytes
        return piece


def rmsnorm(x, w):
    ms = np.mean(x * x, dtype=np.float32)
    return (x / np.sqrt(ms + np.float32(EPS))).astype(np.float32) * w


def silu(z):
    return z / (np.float32(1) + np.exp(-z))


class Generator:
    """One greedy decode: NumPy blocks, vocabd for embedding, RoPE and head."""

    def __init__(self, client, ckpt, model=""):
        self.c, self.w, self.model = client, ckpt, model
        kv_dim = ckpt.n_kv_heads * ckpt.head_dim
        self.k_cache = np.zeros((ckpt.n_layers, ckpt.seq_len, kv_dim), np.float32)
        self.v_cache = np.zeros_like(self.k_cache)

    def step(self, token, pos):
        w, c = self.w, self.c
        D, Hq, Hkv = w.head_dim, w.n_heads, w.n_kv_heads
        group = Hq // Hkv
        x = c.embed([token], model=self.model, position_offset=pos)[0]
        for l in range(w.n_layers):
            h = rmsnorm(x, w.rms_att[l])
            q = w.wq[l] @ h
            k = w.wk[l] @ h
            self.v_cache[l, pos] = w.wv[l] @ h
            q, k = c.apply_rope(q.reshape(1, Hq, 1, D), k.reshape(1, Hkv, 1, D),
                                layout="bhsd", position_offsets=[pos], model=self.model)
            self.k_cache[l, pos] = k.reshape(-1)
            keys = self.k_cache[l, :pos + 1].reshape(pos + 1, Hkv, D)
            vals = self.v_cache[l, :pos + 1].reshape(pos + 1, Hkv, D)
            q = q.reshape(Hq, D)
            att = np.empty((Hq, D), np.float32)
            for head in range(Hq):
                g = head // group
                s = (keys[:, g, :] @ q[head]) / np.sqrt(np.float32(D))
                p = np.exp(s - s.max())
                att[head] = (p / p.sum()) @ vals[:, g, :]
            x = x + w.wo[l] @ att.reshape(-1)
            h = rmsnorm(x, w.rms_ffn[l])
            x = x + w.w2[l] @ (silu(w.w1[l] @ h) * (w.w3[l] @ h))
        # Final RMSNorm + tied LM head on the server; top_k=1 is the argmax
        # (ties to the lower id, as llama2.c's argmax).
        best = c.score(x.reshape(1, -1), top_k=1, model=self.model)
        return best.rows[0].top_k[0].token_id


def generate(client, ckpt, tokenizer, steps=256, model=""):
    """Greedy text from BOS for `steps` positions (stops early at BOS), plus
    the final newline run.c prints; bytes."""
    gen = Generator(client, ckpt, model)
    out = bytearray()
    token = BOS
    for pos in range(steps):
        nxt = gen.step(token, pos)
        if nxt == BOS:
            break
        out += tokenizer.decode(token, nxt)
        token = nxt
    return bytes(out) + b"\n"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    models = os.path.normpath(os.path.join(here, "..", "..", "..", "models", "stories260K"))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=os.environ.get("VOCABD_TARGET", "127.0.0.1:50051"))
    ap.add_argument("--model", default="", help="served model name (default: the server's)")
    ap.add_argument("--checkpoint", default=os.path.join(models, "stories260K.bin"))
    ap.add_argument("--tokenizer", default=os.path.join(models, "tok512.bin"))
    ap.add_argument("--steps", type=int, default=256)
    args = ap.parse_args()

    from vocabd import VocabdClient, VocabdError
    ckpt = Checkpoint(args.checkpoint)
    tok = Tokenizer(args.tokenizer)
    try:
        with VocabdClient(args.target, timeout=60) as client:
            text = generate(client, ckpt, tok, args.steps, args.model)
    except VocabdError as e:
        print(f"vocabd: {e}", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
