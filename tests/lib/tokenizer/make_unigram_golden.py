#!/usr/bin/python3
"""Small SentencePiece models and their golden encodings, from Debian's
python3-sentencepiece (the reference implementation).

Trains five models on a generated mixed-script corpus (seeded: Latin with
accents, Greek, Cyrillic, Arabic, CJK, kana, Hangul, emoji, full-width forms,
ligatures, combining marks, compatibility characters, runs of spaces, tabs
and newlines) and writes, into the output directory:

  <name>.model         the trained ModelProto (small vocabulary; the
                       normalizer's precompiled_charsmap is the full one)
  <name>_golden.json   for a few hundred texts: the ids, pieces and byte
                       offsets [begin, end) into the text that
                       SentencePieceProcessor.encode gives (no BOS/EOS), and
                       decode(ids)

  name                  model_type  normalization_rule_name  byte_fallback
  unigram_nmt_nfkc      UNIGRAM     nmt_nfkc (the default)   no
  unigram_nfkc_cf       UNIGRAM     nmt_nfkc_cf              yes
  unigram_identity      UNIGRAM     identity                 yes
  unigram_user          UNIGRAM     nfkc, user-defined and   no
                                    control symbols, spaces
                                    kept, no dummy prefix
  bpe_nmt_nfkc          BPE         nmt_nfkc                 yes

sentencepiece's Python wrapper reports offsets in code points of the str;
they are converted to UTF-8 byte offsets here. tokenizer_test
(SentencePieceGolden*) loads each model with vocabd and must give exactly
these ids, pieces and offsets (byte pieces: see the test for the one
documented difference), and the decoded text wherever no unk is produced.

Run with Debian's interpreter:
  /usr/bin/python3 tests/lib/tokenizer/make_unigram_golden.py tests/lib/tokenizer/testdata
"""
import io
import json
import os
import random
import sys

import sentencepiece as spm

LATIN = ("the of and to in is was for on that with as by at from his her it an were "
         "are which this be or has had one first new after who been their its time "
         "people year city world music film school house water light small great").split()
ACCENTED = ["café", "naïve", "Ärger", "über", "straße", "façade", "résumé", "Ωmega",
            "señor", "crème", "brûlée", "Łódź", "Øresund", "İstanbul", "ŞAHİN"]
GREEK = "καλημέρα κόσμε ελληνικά γλώσσα Αθήνα".split()
CYRILLIC = "привет мир русский язык Москва Київ".split()
ARABIC = "مرحبا بالعالم العربية لغة".split()
CJK = ["日本語", "東京", "你好世界", "中文", "漢字", "北京大学", "学生", "電車"]
KANA = ["ひらがな", "カタカナ", "ありがとう", "ｶﾀｶﾅ", "ﾊﾞｰｶﾞｰ"]
HANGUL = ["한국어", "안녕하세요", "서울"]
EMOJI = ["😀", "👍", "🦙", "👩\u200d👩\u200d👧", "🇯🇵", "❤️", "✨"]
FULLWIDTH = ["Ｆｕｌｌ", "ｗｉｄｔｈ", "ＡＢＣ", "１２３", "！", "？", "（ｘ）", "\u3000"]
LIGATURES = ["ﬁnance", "ﬂow", "æon", "œuvre", "ﬀ", "ﬆ"]
COMBINING = ["e\u0301", "a\u0308", "n\u0303", "o\u0302\u0323", "\u0301x", "A\u030a"]
COMPAT = ["①", "②", "⑩", "㎏", "㎞", "™", "½", "¼", "Å", "Ω", "ℌ", "ⅸ", "²", "ｰ",
          "\u00a0", "\u200b", "\ufeff", "\u2028", "…", "‥", "ſ", "Ǆ", "㈱", "㍿"]
PUNCT = [".", ",", "!", "?", ";", ":", "\"", "'", "(", ")", "-", "—", "“", "”", "«", "»"]
SPACES = [" ", " ", " ", " ", " ", "  ", "   ", "\t", "\n", " \n ", "\r\n"]
GROUPS = [(LATIN, 0.45), (ACCENTED, 0.06), (GREEK, 0.04), (CYRILLIC, 0.04), (ARABIC, 0.03),
          (CJK, 0.06), (KANA, 0.03), (HANGUL, 0.03), (EMOJI, 0.04), (FULLWIDTH, 0.04),
          (LIGATURES, 0.03), (COMBINING, 0.03), (COMPAT, 0.04), (PUNCT, 0.08)]


def word(rng):
    r = rng.random()
    for group, p in GROUPS:
        if r < p:
            w = rng.choice(group)
            if group is LATIN and rng.random() < 0.15:
                w = w.capitalize()
            return w
        r -= p
    return str(rng.randint(0, 99999))


def make_text(rng, max_words):
    parts = []
    if rng.random() < 0.1:
        parts.append(rng.choice(SPACES))
    for _ in range(rng.randint(1, max_words)):
        parts.append(word(rng))
        parts.append(rng.choice(SPACES) if rng.random() < 0.85 else "")
    text = "".join(parts)
    if rng.random() < 0.6:
        text = text.rstrip()
    return text


EDGE = ["", " ", "   ", "\t", "\n", "a", "  a  ", "a  b", "ﬁnance ﬂow", "Ｆｕｌｌ－ｗｉｄｔｈ　ｔｅｘｔ",
        "①②③ ⑩", "㎏㎞™½", "e\u0301 a\u0308", "\u0301", "ｶﾀｶﾅ ﾊﾞｰｶﾞｰ", "\u3000\u3000x",
        "x\u00a0y", "zero\u200bwidth", "\ufeffbom", "a\x01b", "tab\there", "line\r\nbreak",
        "👩\u200d👩\u200d👧 🇯🇵", "日本語のテキスト", "▁literal▁marker", "<sep>a<sep>",
        "x<sep>y [MASK] z", "<ctl>", "ǅ Ǆ ǆ", "ß ẞ", "İi", "ΣΑΣ σας", "\U0001F600" * 3,
        "a" * 60, "the" * 20, "  lead", "trail  ", " \t mixed \n whitespace \t ",
        "Ⅻ ⅻ", "㈱㍿", "…‥", "ſt", "x" + "\u0301" * 5, "1,234.56", "don't", "«»“”"]


def train(name, corpus, **kw):
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_writer=buf,
                                   vocab_size=kw.pop("vocab_size", 700), hard_vocab_limit=False,
                                   num_threads=1, seed_sentencepiece_size=100000,
                                   minloglevel=2, **kw)
    return buf.getvalue()


def golden(name, model, texts):
    sp = spm.SentencePieceProcessor(model_proto=model)
    cases = []
    for t in texts:
        r = sp.encode(t, out_type="immutable_proto")
        ids, pieces, offsets = [], [], []
        for p in r.pieces:
            ids.append(p.id)
            pieces.append(p.piece)
            # code points -> UTF-8 bytes
            offsets.append([len(t[:p.begin].encode("utf-8")), len(t[:p.end].encode("utf-8"))])
        cases.append({"text": t, "ids": ids, "pieces": pieces, "offsets": offsets,
                      "decoded": sp.decode(ids)})
    return {"generator": "tests/lib/tokenizer/make_unigram_golden.py",
            "sentencepiece_version": spm.__version__, "model": name + ".model",
            "unk_id": sp.unk_id(), "cases": cases}


def main():
    out_dir = sys.argv[1]
    rng = random.Random(23)
    corpus = [make_text(rng, 30) for _ in range(4000)]
    trials = random.Random(2323)
    texts = EDGE + [make_text(trials, 12) for _ in range(300)]
    models = {
        "unigram_nmt_nfkc": dict(model_type="unigram", normalization_rule_name="nmt_nfkc"),
        "unigram_nfkc_cf": dict(model_type="unigram", normalization_rule_name="nmt_nfkc_cf",
                                byte_fallback=True),
        "unigram_identity": dict(model_type="unigram", normalization_rule_name="identity",
                                 byte_fallback=True),
        "unigram_user": dict(model_type="unigram", normalization_rule_name="nfkc",
                             user_defined_symbols=["<sep>", "[MASK]", "ab"],
                             control_symbols=["<ctl>"], add_dummy_prefix=False,
                             remove_extra_whitespaces=False),
        "bpe_nmt_nfkc": dict(model_type="bpe", normalization_rule_name="nmt_nfkc",
                             byte_fallback=True),
    }
    for name, kw in models.items():
        model = train(name, corpus, **kw)
        with open(os.path.join(out_dir, name + ".model"), "wb") as f:
            f.write(model)
        with open(os.path.join(out_dir, name + "_golden.json"), "w", encoding="utf-8") as f:
            json.dump(golden(name, model, texts), f, ensure_ascii=False, indent=0)
            f.write("\n")


if __name__ == "__main__":
    main()
