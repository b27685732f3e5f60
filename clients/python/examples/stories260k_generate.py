#!/usr/bin/env python3
"""Greedy stories260K generation: NumPy transformer blocks, vocabd for the rest.

The 5 Llama blocks (RMSNorm, GQA attention with a KV cache, SwiGLU) run here in
NumPy float32 on weights read from the llama2.c checkpoint; vocabd does the
token-embedding lookup (Embed), RoPE on q and k (ApplyRope, the model's own
adjacent-pair layout and theta), the final RMSNorm + tied LM head (Score,
top_k=1 = greedy) and the text: the prompt goes through the model's own
tokenizer (Tokenize, BOS added) and every token comes back as text through
Detokenize's incremental mode (IncrementalDecoder: a character split over
byte tokens is printed once complete, never half of it). Like llama2.c's
run.c, the prompt's tokens run through the model one position at a time and
are printed too; generation stops at BOS or after --steps positions.
256 steps from BOS (empty prompt) reproduce llama2.c's documented sample
(../shared/models/stories260K/greedy_t0_n256.txt) byte for byte:

    deploy/dev.sh run        # vocabd on 127.0.0.1:50051 serving stories260K
    python3 clients/python/examples/stories260k_generate.py \
        --target 127.0.0.1:50051 --checkpoint models/stories260K/stories260K.bin > story.txt
    python3 clients/python/examples/stories260k_generate.py --prompt "Once upon a time" --steps 64

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


def generate(client, ckpt, prompt="", steps=256, model="", out=None):
    """Greedy text after the prompt (tokenized by vocabd, BOS first) for
    `steps` positions (stops early at BOS), plus the final newline run.c
    prints; bytes. Each piece of text is also written to `out` (a binary
    stream) as soon as it is complete."""
    prompt_ids = client.tokenize(prompt, model=model) if prompt else [BOS]
    if len(prompt_ids) > steps:
        raise ValueError(f"the prompt has {len(prompt_ids)} tokens; --steps is {steps}")
    gen = Generator(client, ckpt, model)
    # Text of every token after BOS, as run.c prints it (BOS itself is skipped).
    decoder = client.incremental_decoder(prompt_ids[:1], skip_special_tokens=True, model=model)
    text = bytearray()

    def emit(ids):
        piece = decoder.push(ids).encode("utf-8")
        text.extend(piece)
        if out is not None:
            out.write(piece)
            out.flush()

    emit(prompt_ids[1:])
    token = prompt_ids[0]
    for pos in range(steps):
        nxt = gen.step(token, pos)
        if pos + 1 < len(prompt_ids):
            token = prompt_ids[pos + 1]  # prefill: force the prompt's next token
            continue
        if nxt == BOS:
            break
        emit([nxt])
        token = nxt
    text += b"\n"
    if out is not None:
        out.write(b"\n")
        out.flush()
    return bytes(text)


def default_checkpoint():
    """stories260K.bin beside this script: <prefix>/share/vocabd/models/ when
    installed (this file in <prefix>/share/vocabd/examples/), models/ at the
    root of a source checkout (this file in clients/python/examples/). The
    first that exists; else the installed path (named in the error)."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, "..", "models", "stories260K", "stories260K.bin"),
                  os.path.join(here, "..", "..", "..", "models", "stories260K", "stories260K.bin")]
    for c in candidates:
        if os.path.isfile(c):
            return os.path.normpath(c)
    return os.path.normpath(candidates[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default=os.environ.get("VOCABD_TARGET", "127.0.0.1:50051"))
    ap.add_argument("--model", default="", help="served model name (default: the server's)")
    ap.add_argument("--checkpoint", default=default_checkpoint(),
                    help="llama2.c checkpoint (default: the stories260K.bin installed or in the checkout)")
    ap.add_argument("--prompt", default="",
                    help="text to continue (tokenized by vocabd; default: start from BOS)")
    ap.add_argument("--steps", type=int, default=256,
                    help="positions to run, prompt included (llama2.c's -n)")
    args = ap.parse_args()

    from vocabd import VocabdClient, VocabdError
    if not os.path.isfile(args.checkpoint):
        print(f"stories260k_generate.py: --checkpoint {args.checkpoint}: no such file",
              file=sys.stderr)
        return 2
    ckpt = Checkpoint(args.checkpoint)
    try:
        with VocabdClient(args.target, timeout=60) as client:
            generate(client, ckpt, args.prompt, args.steps, args.model, out=sys.stdout.buffer)
    except VocabdError as e:
        print(f"vocabd: {e}", file=sys.stderr)
        return 1
    except ValueError as e:
        print(f"stories260k_generate.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
