#!/usr/bin/python3
"""Golden outputs of Hugging Face tokenizers' normalizers and pre-tokenizers,
computed by this script with Debian's python3-regex and Python's unicodedata
(Debian has no python3-tokenizers). Each component is written here from the
behaviour tokenizers documents and implements (normalizers/*.rs,
pre_tokenizers/*.rs, NormalizedString::split and its five
SplitDelimiterBehavior values, Pattern::find_matches):

  normalize_str      the normalized text
  pre_tokenize_str   [piece, begin, end] per piece, begin/end byte offsets
                     into the input (the input character a byte came from;
                     ByteLevel's prefix space gets the first character's
                     begin for both, Metaspace's prepended replacement the
                     first character's span)

hf_tokenizer_test (HfComponentsTest) runs the same JSON configurations
through vocabd and must get the same outputs for every text. Characters are
taken from Unicode 13 or older, where Python's and ICU's tables agree.

  /usr/bin/python3 tests/lib/tokenizer/make_hf_components_golden.py \\
      > tests/lib/tokenizer/testdata/hf_components_golden.json
"""
import json
import random
import sys
import unicodedata

import regex

WORDS = ["Hello", "world", "don't", "I'LL", "naïve", "Straße", "ÉCOLE", "Ångström", "camelCase",
         "καλημέρα", "ΣΟΦΙΑ", "Москва", "مرحبا", "日本語", "東京タワー", "ひらがな", "カタカナー",
         "한국어", "中文字符", "🦙", "😀👍", "e\u0301", "ﬁ", "Ｆｕｌｌ", "１２３", "½", "x²", "Ⅻ",
         "ｶﾀｶﾅ", "İstanbul", "ǅungla", "12345678", "3.14159", "1,000", "x=y+z", "a/b", "a-b-c",
         "…", "。", "、", "«»", "—", "(paren)", "[x]", "foo_bar", "¿Qué?", "\u00ad", "\u200b",
         "\u0000", "\ufffd", "\u0007", "Cửa", "Việt", "ক্ষ", "नमस्ते", "ไทย"]
SPACES = [" ", " ", " ", "  ", "   ", "\t", "\n", "\r\n", " \n", "\u00a0", "\u3000", "\u2028",
          "\x0b", "\x85", ""]

WHITE = regex.compile(r"\p{White_Space}")
PUNCT = regex.compile(r"\p{P}")


def is_white(c):
    return WHITE.match(c) is not None


def is_punct(c):
    return (c.isascii() and not c.isalnum() and 33 <= ord(c) <= 126) or PUNCT.match(c) is not None


def is_numeric(c):
    return unicodedata.category(c) in ("Nd", "Nl", "No")


def lower(s):
    return "".join(c.lower() for c in s)


def is_chinese(c):
    o = ord(c)
    return (0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0x20000 <= o <= 0x2A6DF or
            0x2A700 <= o <= 0x2B73F or 0x2B740 <= o <= 0x2B81F or 0x2B920 <= o <= 0x2CEAF or
            0xF900 <= o <= 0xFAFF or 0x2F800 <= o <= 0x2FA1F)


# ---- normalizers (on str) ----

def normalize(cfg, s):
    t = cfg["type"]
    if t == "Sequence":
        for n in cfg["normalizers"]:
            s = normalize(n, s)
        return s
    if t in ("NFC", "NFD", "NFKC", "NFKD"):
        return unicodedata.normalize(t, s)
    if t == "Lowercase":
        return lower(s)
    if t == "Strip":
        if cfg.get("strip_left", True):
            while s and is_white(s[0]):
                s = s[1:]
        if cfg.get("strip_right", True):
            while s and is_white(s[-1]):
                s = s[:-1]
        return s
    if t == "StripAccents":
        return "".join(c for c in s if not unicodedata.category(c).startswith("M"))
    if t == "Replace":
        p = cfg["pattern"]
        pat = regex.escape(p["String"]) if "String" in p else p["Regex"]
        return regex.sub(pat, cfg["content"].replace("\\", "\\\\"), s)
    if t == "Prepend":
        return cfg["prepend"] + s if s else s
    if t == "BertNormalizer":
        out = []
        for c in s:
            if cfg.get("clean_text", True):
                cat = unicodedata.category(c)
                control = c not in "\t\n\r" and cat.startswith("C")
                if ord(c) == 0 or ord(c) == 0xFFFD or control:
                    continue
                if c in "\t\n\r" or is_white(c):
                    c = " "
            if cfg.get("handle_chinese_chars", True) and is_chinese(c):
                out.extend([" ", c, " "])
            else:
                out.append(c)
        s = "".join(out)
        lc = cfg.get("lowercase", True)
        sa = cfg.get("strip_accents")
        if sa is None:
            sa = lc
        if sa:
            s = "".join(c for c in unicodedata.normalize("NFD", s) if unicodedata.category(c) != "Mn")
        if lc:
            s = lower(s)
        return s
    raise ValueError(t)


# ---- pre-tokenizers: a piece is a list of (char, begin, end) ----

def chars_of(text):
    out = []
    b = 0
    for c in text:
        n = len(c.encode("utf-8"))
        out.append((c, b, b + n))
        b += n
    return out


def regex_segs(pat, piece):
    s = "".join(c for c, _, _ in piece)
    segs = []
    prev = 0
    for m in pat.finditer(s):
        st, en = m.span()
        if st != prev:
            segs.append((prev, st, False))
        segs.append((st, en, True))
        prev = en
    if prev != len(s):
        segs.append((prev, len(s), False))
    return segs


def pred_segs(pred, piece):
    segs = []
    last = 0
    for i, (c, _, _) in enumerate(piece):
        if pred(c):
            if last < i:
                segs.append((last, i, False))
            segs.append((i, i + 1, True))
            last = i + 1
    if len(piece) > last:
        segs.append((last, len(piece), False))
    return segs


def behave(segs, behavior, invert=False):
    if invert:
        segs = [(b, e, not m) for b, e, m in segs]
    acc = []
    if behavior == "Isolated":
        acc = [[b, e, False] for b, e, _ in segs]
    elif behavior == "Removed":
        acc = [[b, e, m] for b, e, m in segs]
    elif behavior == "Contiguous":
        prev = False
        for b, e, m in segs:
            if m == prev and acc:
                acc[-1][1] = e
            else:
                acc.append([b, e, False])
            prev = m
    elif behavior == "MergedWithPrevious":
        prev = False
        for b, e, m in segs:
            if m and not prev and acc:
                acc[-1][1] = e
            else:
                acc.append([b, e, False])
            prev = m
    elif behavior == "MergedWithNext":
        prev = False
        for b, e, m in reversed(segs):
            if m and not prev and acc:
                acc[-1][0] = b
            else:
                acc.append([b, e, False])
            prev = m
        acc.reverse()
    return [(b, e) for b, e, m in acc if not m and e > b]


def split(pieces, segs_of, behavior, invert=False):
    out = []
    for p in pieces:
        for b, e in behave(segs_of(p), behavior, invert):
            out.append(p[b:e])
    return out


def byte_chars():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_CHARS = byte_chars()
GPT2 = regex.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+")
WS = regex.compile(r"[\p{L}\p{M}\p{N}\p{Pc}]+|[^\p{L}\p{M}\p{N}\p{Pc}\s]+")


def pre_tokenize(cfg, pieces):
    t = cfg["type"]
    if t == "Sequence":
        for c in cfg["pretokenizers"]:
            pieces = pre_tokenize(c, pieces)
        return pieces
    if t == "Split":
        p = cfg["pattern"]
        pat = regex.compile(regex.escape(p["String"]) if "String" in p else p["Regex"])
        return split(pieces, lambda x: regex_segs(pat, x), cfg.get("behavior", "Isolated"),
                     cfg.get("invert", False))
    if t == "ByteLevel":
        if cfg.get("add_prefix_space", True):
            pieces = [p if p[0][0] == " " else [(" ", p[0][1], p[0][1])] + p for p in pieces]
        if cfg.get("use_regex", True):
            pieces = split(pieces, lambda x: regex_segs(GPT2, x), "Isolated")
        out = []
        for p in pieces:
            q = []
            for c, b, e in p:
                for byte in c.encode("utf-8"):
                    q.append((BYTE_CHARS[byte], b, e))
            out.append(q)
        return out
    if t == "Metaspace":
        rep = cfg.get("replacement", "\u2581")
        scheme = cfg.get("prepend_scheme", "always")
        out = []
        for p in pieces:
            q = [(rep if c == " " else c, b, e) for c, b, e in p]
            if q[0][0] != rep and (scheme == "always" or (scheme == "first" and p[0][1] == 0)):
                q = [(rep, p[0][1], p[0][2])] + q
            out.append(q)
        if cfg.get("split", True):
            out = split(out, lambda x: pred_segs(lambda c: c == rep, x), "MergedWithNext")
        return out
    if t == "Whitespace":
        return split(pieces, lambda x: regex_segs(WS, x), "Removed", True)
    if t == "WhitespaceSplit":
        return split(pieces, lambda x: pred_segs(is_white, x), "Removed")
    if t == "Digits":
        return split(pieces, lambda x: pred_segs(is_numeric, x),
                     "Isolated" if cfg.get("individual_digits") else "Contiguous")
    if t == "Punctuation":
        return split(pieces, lambda x: pred_segs(is_punct, x), cfg.get("behavior", "Isolated"))
    if t == "CharDelimiterSplit":
        d = cfg["delimiter"]
        return split(pieces, lambda x: pred_segs(lambda c: c == d, x), "Removed")
    if t == "BertPreTokenizer":
        pieces = split(pieces, lambda x: pred_segs(is_white, x), "Removed")
        return split(pieces, lambda x: pred_segs(is_punct, x), "Isolated")
    raise ValueError(t)


NORMALIZERS = [
    {"type": "NFC"}, {"type": "NFD"}, {"type": "NFKC"}, {"type": "NFKD"},
    {"type": "Lowercase"},
    {"type": "Strip", "strip_left": True, "strip_right": True},
    {"type": "Strip", "strip_left": False, "strip_right": True},
    {"type": "StripAccents"},
    {"type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "StripAccents"}, {"type": "Lowercase"}]},
    {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
    {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
    {"type": "Replace", "pattern": {"Regex": "\\p{N}+"}, "content": "<num>"},
    {"type": "Prepend", "prepend": "\u2581"},
    {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None, "lowercase": True},
    {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": False, "strip_accents": True, "lowercase": False},
    {"type": "BertNormalizer", "clean_text": False, "handle_chinese_chars": True, "strip_accents": False, "lowercase": True},
    {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                         {"type": "Strip"}, {"type": "Prepend", "prepend": "@"}]},
]

PRE_TOKENIZERS = [{"type": "Split", "pattern": {"Regex": r"\s+"}, "behavior": b, "invert": inv}
                  for b in ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]
                  for inv in [False, True]] + [
    {"type": "Split", "pattern": {"String": "-"}, "behavior": "MergedWithPrevious", "invert": False},
    {"type": "Split", "pattern": {"Regex": r"\p{P}"}, "behavior": "Contiguous", "invert": False},
    {"type": "Split", "pattern": {"Regex": r"(?=(\d{3})+(?!\d))"}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
    {"type": "ByteLevel", "add_prefix_space": True, "use_regex": True},
    {"type": "ByteLevel", "add_prefix_space": True, "use_regex": False},
    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
    {"type": "Metaspace", "replacement": "_", "prepend_scheme": "never", "split": True},
    {"type": "Whitespace"},
    {"type": "WhitespaceSplit"},
    {"type": "Digits", "individual_digits": True},
    {"type": "Digits", "individual_digits": False},
    {"type": "Punctuation", "behavior": "Isolated"},
    {"type": "Punctuation", "behavior": "Contiguous"},
    {"type": "Punctuation", "behavior": "MergedWithNext"},
    {"type": "CharDelimiterSplit", "delimiter": "-"},
    {"type": "BertPreTokenizer"},
    {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Digits", "individual_digits": True},
                                           {"type": "Metaspace", "prepend_scheme": "always", "split": False}]},
    {"type": "Sequence", "pretokenizers": [{"type": "Punctuation", "behavior": "Removed"},
                                           {"type": "ByteLevel", "add_prefix_space": True, "use_regex": False}]},
]


def main():
    rng = random.Random(2323)
    texts = ["", " ", "a", "  leading", "trailing  ", "1234567", "a - b", "--x--", "ΣΟΦΙΑ ΣΑΣ"]
    for _ in range(80):
        parts = []
        for _ in range(rng.randint(1, 10)):
            parts.append(rng.choice(WORDS))
            parts.append(rng.choice(SPACES))
        texts.append("".join(parts))
    out = {"generator": "tests/lib/tokenizer/make_hf_components_golden.py",
           "regex_version": regex.__version__, "unicodedata_version": unicodedata.unidata_version,
           "texts": texts, "normalizers": [], "pre_tokenizers": []}
    for cfg in NORMALIZERS:
        out["normalizers"].append({"config": cfg, "out": [normalize(cfg, t) for t in texts]})
    for cfg in PRE_TOKENIZERS:
        res = []
        for t in texts:
            pieces = [chars_of(t)] if t else []
            pieces = pre_tokenize(cfg, pieces)
            res.append([["".join(c for c, _, _ in p), p[0][1], p[-1][2]] for p in pieces])
        out["pre_tokenizers"].append({"config": cfg, "out": res})
    json.dump(out, sys.stdout, ensure_ascii=False, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
