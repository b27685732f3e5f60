#!/usr/bin/python3
"""Golden pre-tokenizer splits from Debian's python3-regex (the engine of
Hugging Face's Python reference code).

For every entry of vocabd's tokenizer.ggml.pre table (first name of the
entry; lib/tokenizer/split_regex.cc) the expressions below are applied in
order as Hugging Face's pre_tokenizers.Split(behavior="Isolated") does: each
piece becomes its matches and the text between them, empty matches cut, empty
pieces dropped. The expressions are Hugging Face's (tokenizer.json) forms;
kimi-k2's is Moonshot's tiktoken pat_str as written (regex.V1); afmoe's first
stage is a Python restatement of llama.cpp's digit grouping.
sentencepiece_golden_test (PreTokenizerSplitTest) splits the same texts with PCRE2 and
must get the same pieces.

  /usr/bin/python3 tests/lib/tokenizer/make_pretokenizer_golden.py \
      > tests/lib/tokenizer/testdata/pretokenizer_golden.json
"""
import json
import random
import sys

import regex

class V1(str):
    """An expression compiled with regex.V1 (set operations in classes)."""


def afmoe_digits(piece):
    """llama.cpp's AFMoE digit grouping (unicode_regex_split_custom_afmoe),
    restated: scan the piece; every maximal run of \\p{N} characters of
    length n is cut into its first n mod 3 characters (when that is not 0)
    and then groups of 3, each cut measured from the previous cut, so the
    non-digit text before a run stays glued to the run's first group; what
    follows the last run is one more piece."""
    out, prev, pos, n = [], 0, 0, len(piece)

    def cut(end):
        nonlocal prev
        if end > prev:
            out.append(piece[prev:end])
        prev = end

    while pos < n:
        if not IS_NUMBER.match(piece[pos]):
            pos += 1
            continue
        start = pos
        while pos < n and IS_NUMBER.match(piece[pos]):
            pos += 1
        at = start + (pos - start) % 3
        if at > start:
            cut(at)
        while at < pos:
            at += 3
            cut(at)
    cut(n)
    return out


IS_NUMBER = regex.compile(r"\p{N}")


def kimi_chunks(text):
    """tokenization_kimi.py encode(), restated: slices of 400,000
    characters, each cut where a run of str.isspace() or of other characters
    grows past 25,000 (_split_whitespaces_or_nonwhitespaces); tiktoken then
    splits every part with pat_str on its own."""
    out = []
    for i in range(0, len(text), 400_000):
        s = text[i:i + 400_000]
        run, space, start = 0, s[:1].isspace(), 0
        for j, ch in enumerate(s):
            if ch.isspace() != space:
                run, space = 1, ch.isspace()
            else:
                run += 1
                if run > 25_000:
                    out.append(s[start:j])
                    start, run = j, 1
        out.append(s[start:])
    return [p for p in out if p]

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
    # tokenization_kimi.py: its long-text cuts, then Moonshot's pat_str as
    # written (class intersections, "&&", need python3-regex's V1 mode).
    'kimi-k2': [
        kimi_chunks,
        V1("[\\p{Han}]+"
           "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
           "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
           "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"),
    ],
    # llama.cpp's three stages: its digit grouping (afmoe_digits below, a
    # restatement of the algorithm, not an expression), its CJK run class,
    # DeepSeek-V3's main expression.
    'afmoe': [
        afmoe_digits,
        '[\\x{4E00}-\\x{9FFF}\\x{3400}-\\x{4DBF}\\x{F900}-\\x{FAFF}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}'
        '\\x{FF65}-\\x{FF9F}\\x{2F00}-\\x{2FDF}\\x{0E40}-\\x{0E7F}\\x{0E80}-\\x{0EFF}\\x{1780}-\\x{17FF}'
        '\\x{1000}-\\x{109F}\\x{AA60}-\\x{AA7F}\\x{A9E0}-\\x{A9FF}\\x{AC00}-\\x{D7AF}\\x{1100}-\\x{11FF}]+',
        '[!"#$%&\'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+',
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

# Texts that separate kimi-k2's and afmoe's branches: Han (Script=Han:
# 漢 々 〇 〻 ⺀) next to kana, Hangul and ideographic punctuation that is Han
# only by Script_Extensions (、 。 ｡ 〃; 〆 is Common), camel case, combining
# marks, contractions, digit runs of 1..10 after text, spaces, punctuation
# and other scripts, the scripts of afmoe's run class and its edges (escaped
# where Unicode normalization would rewrite a literal). No Unicode 15
# additions and no U+180E: python3-regex and PCRE2 have different Unicode
# tables there.
DIGITS = "1234567890"
EXTRA_TEXTS = [
    "getUserName iPhone XMLHttpRequest HTTPServer eBay McDonald's",
    "中文English中文ENGLISH漢字々〇〆、。｡ｶﾀｶﾅ〃〻",
    "ひらがな漢字カタカナ한국어中文ㄅㄆ⺀⼀⿕",
    "नमस्ते दुनिया ที่นี่ ภาษาไทย e\u0301te\u0301 naïve Ǆemal ǅungla ʰa",
    "I'M HE'LL we'Ve it's don'T 'ſ x'S",
    "Total:  1234567 and 89", "x  42", "１２３４", "½Ⅻ٣٤٥", "12345678901", "123456789012",
    "ກະລຸນາ ខ្មែរ မြန်မာ ꩠꩡ ꧠꧡ ꀀꀁ \ud7b0\ue000 丽\uf900\ufa0e 갂\uac00",
    # Digits before a combining mark or connector punctuation: word characters
    # for Oniguruma (tiny_aya's \b) and python3-regex, not for PCRE2's \b.
    "1234\u0301 12\u0301345 1234\u203f5 12_345 1234\ufe4f",
] + [pre + DIGITS[:n] + post
     for n in range(1, 11)
     for pre, post in [("x", ""), ("x ", " y"), ("x  ", ""), ("(", ")"), ("中", "文"),
                       ("", ""), ("a.", ".b"), ("は", "")]]
# Long texts for tokenization_kimi.py's cuts. U+001C is str.isspace() but
# not \s; U+180E is neither for Python (PCRE2's \s has it): both sit where
# only the cut stage's own class decides.
LONG_TEXTS = [
    [["x", 60001]],
    [["x", 25000]],
    [["ab", 1], [" ", 30000], ["cd", 1]],
    [["x", 20000], ["\x1c", 1], ["x", 20000]],
    [["x", 20000], ["\u180e", 1], ["x", 20000]],
    [["\u4e2d", 26000], ["\u3000", 25001], ["\u3042", 3]],
    [["word ", 80001]],
    [["x", 399999], [" y", 2]],
    [["ab12 ", 20], ["z", 450000], ["\n", 3]],
]
# (No "½" after a digit here: python3-regex's \b (word = Alphabetic, M, Nd, Pc)
# differs there from Oniguruma's (L, M, N, Pc), which Hugging Face runs
# tiny_aya's expression with and vocabd follows.)
MIXED = ["getUserName", "iPhone", "XMLHttp", "中文", "漢字々", "〇", "、", "｡", "ｶﾀ", "ひら",
         "カタ", "한국", "\uac00", "ภาษา", "ที่", "ລາວ", "ខ្មែរ", "မြန်", "नमस्ते", "e\u0301",
         "it's", "I'M", "we'Ve", "1", "12", "123", "1234", "12345", "123456", "1234567",
         "١٢٣", "Ⅻ", "１２", "...", "-", "!?", "'", "_", "#", "@x", "\r\n"]


def split_isolated(pattern, pieces):
    if callable(pattern):
        return [q for p in pieces for q in pattern(p)]
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
    texts += EXTRA_TEXTS
    rng = random.Random(24)
    for _ in range(100):
        parts = []
        for _ in range(rng.randint(1, 10)):
            parts.append(rng.choice(MIXED))
            parts.append(rng.choice(SPACES) if rng.random() < 0.6 else "")
        texts.append("".join(parts))
    out = {"generator": "tests/lib/tokenizer/make_pretokenizer_golden.py",
           "regex_version": regex.__version__, "texts": texts, "splits": {}}
    for name, exprs in PATTERNS.items():
        # PCRE2's \x{HHHH} (used where a literal would be rewritten by
        # Unicode normalization) is the code point itself here.
        compiled = [e if callable(e) else
                    regex.compile(regex.sub(r"\\x\{([0-9A-Fa-f]+)\}",
                                            lambda m: chr(int(m.group(1), 16)), e),
                                  flags=regex.V1 if isinstance(e, V1) else regex.V0)
                    for e in exprs]
        res = []
        for t in texts:
            pieces = [t] if t else []
            for c in compiled:
                pieces = split_isolated(c, pieces)
            res.append(pieces)
        out["splits"][name] = res
    # Long texts for kimi-k2's cuts, as runs [text, count]; the pieces as
    # runs [UTF-8 bytes, count].
    out["long"] = {"kimi-k2": []}
    for runs in LONG_TEXTS:
        t = "".join(x * n for x, n in runs)
        pieces = [t]
        for c in PATTERNS['kimi-k2']:
            pieces = split_isolated(c if callable(c) else regex.compile(c, flags=regex.V1), pieces)
        rle = []
        for p in pieces:
            b = len(p.encode())
            if rle and rle[-1][0] == b:
                rle[-1][1] += 1
            else:
                rle.append([b, 1])
        out["long"]["kimi-k2"].append({"runs": runs, "pieces": rle})
    json.dump(out, sys.stdout, ensure_ascii=False, indent=0)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
