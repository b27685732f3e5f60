#!/usr/bin/python3
"""Baseline for bench/tokenizer_bench: Debian python3-sentencepiece on the
same documents, one thread.

  tokenizer_py_sentencepiece.py MODEL CORPUS [REPEATS]

MODEL: a sentencepiece .model, or a GGUF whose tokenizer.ggml.model is
"llama" (its tokens/scores/token_type become a ModelProto here, the way
lib/tokenizer builds one in C++: BPE, byte_fallback, identity normalizer,
add_dummy_prefix, whitespace runs kept). CORPUS: documents separated by
"\\0". Time is this thread's CPU time (time.thread_time), as in the C++
bench. Prints one line: "mb_per_s=<float> tokens=<int> checksum=<int>".
"""
import struct
import sys
import time

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2


def gguf_tokenizer(path):
    f = open(path, "rb").read()
    pos = 8
    _, nkv = struct.unpack_from("<QQ", f, pos)
    pos += 16
    fmt = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
           12: "d"}

    def read(t):
        nonlocal pos
        if t == 8:
            (n,) = struct.unpack_from("<Q", f, pos)
            pos += 8
            s = f[pos:pos + n]
            pos += n
            return s.decode("utf-8", "surrogateescape")
        if t == 9:
            et, n = struct.unpack_from("<IQ", f, pos)
            pos += 12
            return [read(et) for _ in range(n)]
        (v,) = struct.unpack_from("<" + fmt[t], f, pos)
        pos += struct.calcsize(fmt[t])
        return v

    kv = {}
    for _ in range(nkv):
        key = read(8)
        (t,) = struct.unpack_from("<I", f, pos)
        pos += 4
        kv[key] = read(t)
    m = sentencepiece_model_pb2.ModelProto()
    types = kv["tokenizer.ggml.token_type"]
    unk_seen = False
    for piece, score, typ in zip(kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.scores"], types):
        if typ == 2:
            typ = 3 if unk_seen else 2
            unk_seen = True
        p = m.pieces.add()
        p.piece, p.score, p.type = piece, score, typ
    m.trainer_spec.model_type = sentencepiece_model_pb2.TrainerSpec.BPE
    m.trainer_spec.byte_fallback = True
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = bool(kv.get("tokenizer.ggml.add_space_prefix", True))
    m.normalizer_spec.remove_extra_whitespaces = False
    m.normalizer_spec.escape_whitespaces = True
    return spm.SentencePieceProcessor(model_proto=m.SerializeToString())


def main():
    model, corpus = sys.argv[1], sys.argv[2]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    sp = gguf_tokenizer(model) if model.endswith(".gguf") else spm.SentencePieceProcessor(
        model_file=model)
    raw = open(corpus, "rb").read()
    docs = [d.decode("utf-8") for d in raw.split(b"\0") if d]
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    best = None
    tokens = checksum = 0
    for _ in range(repeats):
        t0 = time.thread_time()  # CPU time of this thread, as the C++ side
        tokens = checksum = 0
        for d in docs:
            ids = sp.encode(d)
            tokens += len(ids)
            checksum += sum(ids)
        dt = time.thread_time() - t0
        best = dt if best is None else min(best, dt)
    print(f"mb_per_s={nbytes / best / 1e6:.3f} tokens={tokens} checksum={checksum}")


if __name__ == "__main__":
    main()
