#!/usr/bin/python3
"""Golden pre-tokenizer splits from Debian's python3-regex (the engine of
Hugging Face's Python reference code).

For every entry of vocabd's tokenizer.ggml.pre table (first name of the
entry; lib/tokenizer/split_regex.cc) the expressions below are applied in
order as Hugging Face's pre_tokenizers.Split(behavior="Isolated") does: each
piece becomes its matches and the text between them, empty matches cut, empty
pieces dropped. The expressions are Hugging Face's (tokenizer.json) forms.
sentencepiece_golden_test (PreTokenizerSplitTest) splits the same texts with PCRE2 and
must get the same pieces.

  /usr/bin/python3 tests/lib/tokenizer/make_pretokenizer_golden.py \
      > tests/lib/tokenizer/testdata/pretokenizer_golden.json
"""
import json
import random
import sys

import regex

PATTERNS = {
    'default': [
        '[\\p{P}\\$\\+<=>\\^~\\|]+',
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
        '\\p{N}+',
        '[0-9][0-9][0-9]',
    ],
    'gpt-2': [
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
    ],
    'llama3': [
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ],
    'dbrx': [
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ],
    'deepseek-llm': [
        '[\r\n]',
        '\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝ\\x{1F5F}-\\x{1F7D}ᾀ-ᾴᾶ-ᾼ\\x{1FBE}ῂ-ῄῆ-ῌῐ-\\x{1FD3}ῖ-\\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\\x{2126}ℨ\\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+',
        '\\s?[!-/:-~！-／：-～‘-‟\u3000-。]+',
        '\\s+$',
        '[一-龥ࠀ-一가-\ud7ff]+',
        '\\p{N}+',
    ],
    'deepseek-coder': [
        '[\r\n]',
        '\\s?\\p{L}+',
        '\\s?\\p{P}+',
        '[一-龥ࠀ-一가-\ud7ff]+',
        '\\p{N}',
    ],
    'deepseek-v3': [
        '\\p{N}{1,3}',
        '[一-龥\u3040-ゟ゠-ヿ]+',
        '[!"#$%&\'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+',
    ],
    'falcon': [
        '[\\p{P}\\$\\+<=>\\^~\\|`]+',
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
        '[0-9][0-9][0-9]',
    ],
    'starcoder': [
        '\\p{N}',
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    ],
    'qwen2': [
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ],
    'poro-chat': [
        ' ?[^(\\s|.,!?…。，、।۔،)]+',
    ],
    'viking': [
        ' ?[^(\\s|.,!?…。，、।۔،)]+',
        '\\p{N}',
    ],
    'tekken': [
        '[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+',
    ],
    'chameleon': [
        '<sentinel:[0-9]+>',
        '(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z',
        '([\\t\\n]|    |  )',
        '\\p{N}',
        '[\\p{P}!-/:-@\\[-`{-~]',
        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    ],
    'gpt-4o': [
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ],
    'superbpe': [
        '\\p{N}+',
        '(?=(\\d{3})+(?!\\d))',
    ],
    'bailingmoe': [
        "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    ],
    'seed-coder': [
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ],
    'spark2_5': [
        '\\p{N}{1,3}',
        '[一-龥\u3040-ゟ゠-ヿ]+',
        '[!"#$%&\'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\\r\\n]|\\s+(?!\\S)|\\s+',
        '\\p{N}',
    ],
    'qwen35': [
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ],
    'minicpm5': [
        '\\p{N}{1,3}',
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ],
    'jais-2': [
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
    ],
    'ufakzeka': [
        '[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+',
    ],
    'laguna': [
        '[^\\n]+|[\\n]+',
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ],
    'exaone-moe': [
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
    ],
    'granite-embed-multi-97m': [
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ],
    'tiny_aya': [
        '\\d{1,3}(?=(?:\\d{3})*\\b)',
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ],
    'youtu': [
        '[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+',
        "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    ],
}

WORDS = ["Hello", "world", "don't", "I'LL", "we've", "it'S", "'ſ", "naïve", "Straße", "ÉCOLE",
         "camelCase", "HTTPServer", "iPhone", "καλημέρα", "Москва", "مرحبا", "日本語", "東京タワー",
         "ひらがな", "カタカナ", "한국어", "中文字符", "🦙", "😀👍", "e\u0301", "ﬁ", "Ｆｕｌｌ", "１２３",
         "12345678", "3.14159", "1,000,000", "x=y+z", "a/b", "<sentinel:12>", "IMGIMGABZ", "$^~|`",
         "…", "。", "、", "«»", "—", "(paren)", "[x]", "{y}", "#tag", "@user", "foo_bar", "¿Qué?",
         "١٢٣٤٥", "Türkiye'de", "e\u0301te\u0301", "ℌ𝔢𝔩𝔩𝔬", "ǅungla", "x²", "Ⅻ", "ｶﾀｶﾅ", "ㄅㄆ", "ㄱㄴ", "“q”"]
SPACES = [" ", " ", " ", "  ", "   ", "\t", "\n", "\r\n", " \n", "\n\n", "\u00a0", "\u3000",
          "\u2028", "\x0b", "\x0c", "\x85", "    "]


def split_isolated(pattern, pieces):
    out = []
    for p in pieces:
        last = 0
        for m in pattern.finditer(p):
            b, e = m.span()
            if b > last:
                out.append(p[last:b])
            if e > b:
                out.append(p[b:e])
            last = max(last, e)
        if last < len(p):
            out.append(p[last:])
    return out


def main():
    rng = random.Random(23)
    texts = ["", " ", "a", "  leading", "trailing  ", "1234567", "12345 678901"]
    for _ in range(200):
        parts = []
        for _ in range(rng.randint(1, 12)):
            parts.append(rng.choice(WORDS))
            parts.append(rng.choice(SPACES) if rng.random() < 0.8 else "")
        texts.append("".join(parts))
    out = {"generator": "tests/lib/tokenizer/make_pretokenizer_golden.py",
           "regex_version": regex.__version__, "texts": texts, "splits": {}}
    for name, exprs in PATTERNS.items():
        # PCRE2's \x{HHHH} (used where a literal would be rewritten by
        # Unicode normalization) is the code point itself here.
        compiled = [regex.compile(regex.sub(r"\\x\{([0-9A-Fa-f]+)\}",
                                            lambda m: chr(int(m.group(1), 16)), e))
                    for e in exprs]
        res = []
        for t in texts:
            pieces = [t] if t else []
            for c in compiled:
                pieces = split_isolated(c, pieces)
            res.append(pieces)
        out["splits"][name] = res
    json.dump(out, sys.stdout, ensure_ascii=False, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
