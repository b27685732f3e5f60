#!/usr/bin/python3
"""Golden tokenizer values for test_tokenizer.py, from Debian python3-sentencepiece.

    /usr/bin/python3 clients/python/tests/make_tokenizer_golden.py > \
        clients/python/tests/tokenizer_golden.json

Reads models/stories260K-hf/tokenizer.model (the SentencePiece BPE model of
llama2.c's stories260K, 512 pieces, byte fallback, remove_extra_whitespaces)
and writes, as JSON:

  bos_token_id, eos_token_id, vocab_size
  texts: per text, `ids` (sp.encode, no BOS), `pieces` (sp.id_to_piece),
    `token_bytes` (hex: a <0xXX> piece is that byte, else the piece with
    U+2581 as a space), `offsets` (byte [begin, end) per id; sentencepiece
    reports character offsets and gives the byte tokens of one character
    empty spans but the last; vocabd gives each of them the character's byte
    span, so the bytes of a split character share it), `decoded` (sp.decode)
  cut: `ids` ending in the first byte token of a 4-byte character and
    `decoded` (sp.decode: the lone byte becomes U+FFFD)
  vocabulary: per listed id, `piece`, `token_bytes` (hex), `type` (from
    is_unknown / is_control / is_byte / is_unused, else NORMAL) and `score`

The texts have no runs of spaces (the .model collapses them; see docs/models.md,
"Tokenizers").
"""
import json
import os
import re
import sys

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.normpath(os.path.join(HERE, "..", "..", "..", "models", "stories260K-hf",
                                      "tokenizer.model"))

TEXTS = [
    "Once upon a time",
    "Hi \U0001F600 there",                     # 4-byte emoji: 4 byte-fallback tokens
    "Lily and Tom played in the park.\nThey were happy!",
    "caf\u00e9 \u2615 \u65e5\u672c",           # 2-, 3-byte characters
]
VOCAB_IDS = list(range(0, 6)) + list(range(400, 405)) + [509, 510, 511]


def token_bytes(piece):
    m = re.fullmatch(r"<0x([0-9A-F]{2})>", piece)
    if m:
        return bytes([int(m.group(1), 16)])
    return piece.replace("\u2581", " ").encode("utf-8")


def token_type(sp, i):
    if sp.is_unknown(i):
        return "UNKNOWN"
    if sp.is_control(i):
        return "CONTROL"
    if sp.is_byte(i):
        return "BYTE"
    if sp.is_unused(i):
        return "UNUSED"
    return "NORMAL"


def byte_offsets(sp, text):
    """vocabd's offsets: sentencepiece's character spans in UTF-8 bytes; a
    run of byte tokens (one character) shares the character's span."""
    def to_byte(c):
        return len(text[:c].encode("utf-8"))

    pieces = sp.encode(text, out_type="immutable_proto").pieces
    spans = [[to_byte(p.begin), to_byte(p.end)] for p in pieces]
    i = 0
    while i < len(pieces):
        if sp.is_byte(pieces[i].id):
            j = i
            while sp.is_byte(pieces[j].id) and pieces[j].begin == pieces[j].end:
                j += 1  # sentencepiece: empty spans until the character's last byte
            for k in range(i, j + 1):
                spans[k] = list(spans[j])
            i = j + 1
        else:
            i += 1
    return spans


def main():
    sp = spm.SentencePieceProcessor(model_file=MODEL)
    out = {"model": "models/stories260K-hf/tokenizer.model",
           "sentencepiece_version": spm.__version__,
           "bos_token_id": sp.bos_id(), "eos_token_id": sp.eos_id(),
           "vocab_size": sp.vocab_size(), "texts": [], "cut": None, "vocabulary": []}
    for text in TEXTS:
        ids = sp.encode(text)
        pieces = [sp.id_to_piece(i) for i in ids]
        out["texts"].append({"text": text, "ids": ids, "pieces": pieces,
                             "token_bytes": [token_bytes(p).hex() for p in pieces],
                             "offsets": byte_offsets(sp, text), "decoded": sp.decode(ids)})
    emoji = sp.encode("\U0001F600 \U0001F600")
    cut = emoji[:-3]  # drop the last 3 of the second emoji's 4 byte tokens
    out["cut"] = {"ids": cut, "decoded": sp.decode(cut)}
    for i in VOCAB_IDS:
        p = sp.id_to_piece(i)
        out["vocabulary"].append({"id": i, "piece": p, "token_bytes": token_bytes(p).hex(),
                                  "type": token_type(sp, i), "score": sp.get_score(i)})
    # One line per text / vocabulary entry.
    lines = []
    for key, value in out.items():
        if isinstance(value, list):
            items = ",\n  ".join(json.dumps(v, ensure_ascii=False) for v in value)
            lines.append(f"{json.dumps(key)}: [\n  {items}]")
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    sys.stdout.write("{\n" + ",\n".join(lines) + "\n}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
