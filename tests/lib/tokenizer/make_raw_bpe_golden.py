#!/usr/bin/python3
"""Golden ids for GGUF vocabularies llama.cpp runs as BPE over raw UTF-8
(tokenizer.ggml.model "gemma4" and "whitespace"; model "gpt2" with
tokenizer.ggml.pre "granite-embed-multi-311m" or "sarvam-moe").

A reference written from llama.cpp's rules (src/llama-vocab.cpp:
llama_vocab::impl::load and tokenize, llm_tokenizer_bpe_session::tokenize,
llm_tokenizer_whitespace_session), independent of vocabd's code:

  fragments  user-defined pieces are cut out of the text first
  gemma4, granite-embed-multi-311m, sarvam-moe
             every U+0020 -> U+2581 (no prefix); words = runs of LF and runs
             of anything else ("[^\\n]+|[\\n]+"); gemma4 and granite-311m
             only: a word made only of LF that is a piece is that token,
             and BOS is added even when tokenizer.ggml.add_bos_token=false
  whitespace words = maximal runs of non-White_Space code points (White_Space
             dropped), lower-cased code point by code point when
             tokenizer.ggml.normalizer.lowercase is true
  per word   symbols = characters; repeatedly merge the adjacent pair with
             the lowest rank in tokenizer.ggml.merges (ties: leftmost); a
             final symbol that is a piece (any type) is its token, otherwise
             one <0xAB> token per byte (uppercase hex), a byte without one
             dropped

The decoded text is vocabd's decode of the ids with control/unknown tokens
skipped: byte pieces are their byte, U+2581 is a space for the three escaping
names, other pieces are their text (llama.cpp's decode for "whitespace" runs
the pieces through the GPT-2 byte map and prints [UNK_BYTE_...] for most of
them; vocabd does not copy that).

One synthetic vocabulary serves all configurations; characters come from
Unicode 6.0 or older, where Python's lower() and ICU's u_tolower agree.
sentencepiece_golden_test (RawBpeGgufTest) writes each configuration as a
GGUF file and must get the same ids and text.

  /usr/bin/python3 tests/lib/tokenizer/make_raw_bpe_golden.py \\
      > tests/lib/tokenizer/testdata/raw_bpe_golden.json
"""
import json
import random
import sys

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6
MS = "\u2581"

# Bytes without a <0xAB> piece: "½" (C2 BD) keeps only <0xC2>, "😀" (F0 9F 98
# 80) loses its last byte.
MISSING_BYTES = {0xBD, 0x80}

SPECIALS = [("<pad>", CONTROL), ("<bos>", CONTROL), ("<eos>", CONTROL), ("<unk>", UNKNOWN),
            ("<mark>", USER_DEFINED), ("\u00a7", CONTROL)]  # "§": a control piece BPE can reach
PIECES = [MS, "a", "b", "c", "d", "e", "h", "l", "o", "k", "\n", "\u00e9", "A", "B", "\u03c9",
          "\u03c3", "ab", MS + "a", MS + "ab", "he", "ll", "hell", "hello", MS + "hello",
          MS + MS, "abc", "cd", "AB", "\u03c9\u03c9", "kk", "aa", "\n\n", "\t"]
MERGES = ["a b", MS + " ab", "h e", "l l", "he ll", "hell o", MS + " hello", MS + " " + MS,
          "ab c", "c d", MS + " a", "A B", "\u03c9 \u03c9", "k k", "a a"]

# White_Space (Unicode PropList.txt; llama.cpp unicode_set_whitespace).
WHITE_SPACE = set(range(0x09, 0x0E)) | {0x20, 0x85, 0xA0, 0x1680} | set(range(0x2000, 0x200B)) | \
    {0x2028, 0x2029, 0x202F, 0x205F, 0x3000}

CONFIGS = [
    # name, model, pre (None: no key), add_bos_token key (None: absent),
    # lowercase key (None: absent), byte piece type
    {"name": "gemma4", "model": "gemma4", "pre": None, "add_bos_token": False,
     "lowercase": None, "byte_type": BYTE},
    {"name": "granite_311m", "model": "gpt2", "pre": "granite-embed-multi-311m",
     "add_bos_token": None, "lowercase": None, "byte_type": NORMAL},
    {"name": "sarvam", "model": "gpt2", "pre": "sarvam-moe", "add_bos_token": None,
     "lowercase": None, "byte_type": NORMAL},
    {"name": "whitespace", "model": "whitespace", "pre": "whitespace", "add_bos_token": None,
     "lowercase": None, "byte_type": NORMAL},
    {"name": "whitespace_lowercase", "model": "whitespace", "pre": "whitespace",
     "add_bos_token": None, "lowercase": True, "byte_type": NORMAL},
]

POOL = ["a", "b", "ab", "abc", "abcd", "aaa", "hello", "he", "l", " ", "  ", "   ", "\n", "\n\n",
        "\n\n\n", "\t", "\r", "\r\n", "\u00e9", "\u00bd", "\u4e2d", "\U0001F600", "\u20ac", "A",
        "B", "AB", "K", "\u212a", "\u03a3", "\u03c9", "\u2126", "\u00a0", "\u3000", "\u001c",
        "\u180e", "\u200b", "<mark>", "\u00a7", "x", "\u00c9", "Hello", "HELLO"]


def vocabulary(byte_type):
    tokens, types = [], []
    for p, t in SPECIALS:
        tokens.append(p)
        types.append(t)
    for b in range(256):
        if b not in MISSING_BYTES:
            tokens.append("<0x%02X>" % b)
            types.append(byte_type)
    for p in PIECES:
        tokens.append(p)
        types.append(NORMAL)
    assert len(set(tokens)) == len(tokens)
    return tokens, types


def bpe_word(word, tok2id, ranks, newline_rule):
    if newline_rule and word.strip("\n") == "" and word in tok2id:
        return [tok2id[word]]
    syms = list(word)
    while len(syms) > 1:
        best, best_rank = -1, None
        for i in range(len(syms) - 1):
            r = ranks.get((syms[i], syms[i + 1]))
            if r is not None and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best < 0:
            break
        syms[best:best + 2] = [syms[best] + syms[best + 1]]
    out = []
    for s in syms:
        if s in tok2id:
            out.append(tok2id[s])
            continue
        for b in s.encode("utf-8"):
            piece = "<0x%02X>" % b
            if piece in tok2id:
                out.append(tok2id[piece])
    return out


def encode(text, cfg, tokens, types):
    tok2id = {p: i for i, p in enumerate(tokens)}
    ranks = {}
    for r, m in enumerate(MERGES):
        sp = m.find(" ", 1)
        ranks.setdefault((m[:sp], m[sp + 1:]), r)
    gemma = cfg["model"] == "gemma4" or cfg["pre"] == "granite-embed-multi-311m"
    add_bos = cfg["add_bos_token"] if cfg["add_bos_token"] is not None else False
    if gemma:
        add_bos = True
    out = [tok2id["<bos>"]] if add_bos else []
    user = [i for i, t in enumerate(types) if t == USER_DEFINED]
    fragments = [text]
    for u in user:
        piece = tokens[u]
        nxt = []
        for f in fragments:
            if isinstance(f, int):
                nxt.append(f)
                continue
            parts = f.split(piece)
            for k, p in enumerate(parts):
                if k:
                    nxt.append(u)
                if p:
                    nxt.append(p)
        fragments = nxt
    for f in fragments:
        if isinstance(f, int):
            out.append(f)
            continue
        if cfg["model"] == "whitespace":
            words, cur = [], ""
            for ch in f:
                if ord(ch) in WHITE_SPACE:
                    if cur:
                        words.append(cur)
                    cur = ""
                else:
                    low = ch.lower() if cfg["lowercase"] else ch
                    assert len(low) == 1, ch
                    cur += low
            if cur:
                words.append(cur)
        else:
            t = f.replace(" ", MS)
            words, k = [], 0
            while k < len(t):
                j = k
                nl = t[k] == "\n"
                while j < len(t) and (t[j] == "\n") == nl:
                    j += 1
                words.append(t[k:j])
                k = j
        for w in words:
            out.extend(bpe_word(w, tok2id, ranks, gemma))
    return out


def decode(ids, cfg, tokens, types):
    out = b""
    for i in ids:
        t, p = types[i], tokens[i]
        if t in (CONTROL, UNKNOWN):
            continue
        if len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
            out += bytes([int(p[3:5], 16)])
        elif cfg["model"] != "whitespace" and t == NORMAL:
            out += p.replace(MS, " ").encode("utf-8")
        else:
            out += p.encode("utf-8")
    return out


def main():
    rng = random.Random(23)
    texts = ["", " ", "ab ab", " hello", "hello  hello", "\n\n", "\n\n\n", "a\n\nb", "aaa",
             "\u00bd", "\U0001F600", "\u00e9", "x", "AB  ab\tAB", "\u212a\u212aK", "\u03a3\u2126",
             "a<mark> b", "\u00a7", "a\u00a0b", "a\u180eb"]
    for _ in range(300):
        texts.append("".join(rng.choice(POOL) for _ in range(rng.randint(1, 10))))
    out = {"generator": "tests/lib/tokenizer/make_raw_bpe_golden.py", "merges": MERGES,
           "texts": texts, "configs": []}
    for cfg in CONFIGS:
        tokens, types = vocabulary(cfg["byte_type"])
        c = dict(cfg)
        c["tokens"] = tokens
        c["types"] = types
        c["bos_token_id"] = tokens.index("<bos>")
        c["ids"] = [encode(t, cfg, tokens, types) for t in texts]
        c["decoded_hex"] = [decode(ids, cfg, tokens, types).hex() for ids in c["ids"]]
        out["configs"].append(c)
    json.dump(out, sys.stdout, ensure_ascii=False, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
