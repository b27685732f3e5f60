#!/usr/bin/python3
"""Golden ids for stories260K's tokenizer from Debian's python3-sentencepiece.

Generates a fixed corpus (seeded; TinyStories-like prose, numbers,
punctuation, runs of spaces/tabs/newlines, accented Latin, CJK, emoji that
need byte fallback, leading/trailing whitespace) and writes, for each text,
the ids `SentencePieceProcessor.encode(text)` gives (no BOS) and the text
`decode(ids)` gives back, twice:

  ids / decoded       tok512.model as it is. Its NormalizerSpec keeps the
                      default remove_extra_whitespaces=true: runs of spaces
                      collapse, leading/trailing spaces go.
  ids_keep_ws /       the same model with remove_extra_whitespaces=false:
  decoded_keep_ws     what the vocabulary means where no NormalizerSpec is
                      carried -- llama2.c's tok512.bin (run.c never
                      collapses spaces) and stories260K.gguf (no
                      tokenizer.ggml.remove_extra_whitespaces key; llama.cpp
                      defaults it to false).

tokenizer_test (Stories260KAgreesWithPythonSentencePiece) checks that
tok512.model and stories260K-hf/tokenizer.model give exactly ids/decoded,
that tok512.bin and stories260K.gguf give exactly ids_keep_ws/
decoded_keep_ws, and that all four agree wherever the text has no
whitespace run to collapse.

Run with Debian's interpreter (python3-sentencepiece is a Debian package):
  /usr/bin/python3 tests/lib/tokenizer/make_sentencepiece_golden.py \
      ../shared/models/stories260K/tok512.model \
      > tests/lib/tokenizer/testdata/stories260K_sentencepiece_golden.json
"""
import json
import random
import sys

import sentencepiece as spm

WORDS = ("once upon a time there was little girl named Lily she loved to play outside "
         "in the park one day saw big red ball wanted with it but too high mom said "
         "let's go sad and didn't know what do I want your can't find sorry Tom dog cat "
         "happy sun tree bird fly jump run ran fast slow friend friends together "
         "Timmy Sue Ben toy toys box blue green yellow because then so very").split()
EXTRA = ["café", "naïve", "Ärger", "über", "日本語", "你好世界", "한국어", "🦙", "😀👍",
         "ßtraße", "Ωmega", "\u00a0", "—", "…", "“quoted”", "<s>x", "a\u0301"]
PUNCT = [".", ",", "!", "?", ";", ":", "\"", "'", "(", ")", "-", "..."]
SPACES = [" ", " ", " ", " ", "  ", "\t", "\n", "\n\n", " \n"]


def make_text(rng):
    parts = []
    if rng.random() < 0.15:
        parts.append(rng.choice(SPACES))
    for _ in range(rng.randint(1, 25)):
        r = rng.random()
        if r < 0.7:
            w = rng.choice(WORDS)
            if rng.random() < 0.15:
                w = w.capitalize()
            parts.append(w)
        elif r < 0.8:
            parts.append(str(rng.randint(0, 100000)))
        elif r < 0.9:
            parts.append(rng.choice(EXTRA))
        else:
            parts.append(rng.choice(PUNCT))
        parts.append(rng.choice(SPACES) if rng.random() < 0.9 else "")
    text = "".join(parts)
    if rng.random() < 0.5:
        text = text.rstrip()
    return text


def main():
    from sentencepiece import sentencepiece_model_pb2
    sp = spm.SentencePieceProcessor(model_file=sys.argv[1])
    proto = sentencepiece_model_pb2.ModelProto()
    with open(sys.argv[1], "rb") as f:
        proto.ParseFromString(f.read())
    proto.normalizer_spec.remove_extra_whitespaces = False
    sp_keep = spm.SentencePieceProcessor(model_proto=proto.SerializeToString())
    rng = random.Random(14)
    texts = ["", " ", "Once upon a time, there was a little girl named Lily."]
    texts += [make_text(rng) for _ in range(400)]
    out = {
        "generator": "tests/lib/tokenizer/make_sentencepiece_golden.py",
        "sentencepiece_version": spm.__version__,
        "model": "stories260K/tok512.model",
        "cases": [],
    }
    for t in texts:
        ids = sp.encode(t)
        keep = sp_keep.encode(t)
        out["cases"].append({"text": t, "ids": ids, "decoded": sp.decode(ids),
                             "ids_keep_ws": keep, "decoded_keep_ws": sp_keep.decode(keep)})
    json.dump(out, sys.stdout, ensure_ascii=False, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
