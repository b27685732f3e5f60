// SentencePiece Unigram and BPE models with precompiled_charsmap
// normalization (nmt_nfkc, nmt_nfkc_cf, nfkc, identity) against the golden
// encodings Debian's python3-sentencepiece gives
// (tests/lib/tokenizer/make_unigram_golden.py writes the models and the
// goldens into testdata/).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/tokenizer/incremental_decode.h"
#include "lib/tokenizer/split_regex.h"
#include "lib/tokenizer/spm_normalizer.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/tokenizer/tokenizer_loader.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;

std::string ReadFileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string TestData(const std::string& name) {
  return testing::SourceDir() + "/tests/lib/tokenizer/testdata/" + name;
}

struct GoldenModel {
  const char* name;
  const char* kind;
};

class SentencePieceGoldenTest : public ::testing::TestWithParam<GoldenModel> {};

// Every text: the ids, pieces and offsets sentencepiece gives, and its
// decoded text wherever no unk is produced (vocabd decodes unk as its piece,
// "<unk>", as Hugging Face does; sentencepiece writes " ⁇ ").
// sentencepiece gives a character's byte pieces the offsets (b, b) ...
// (b, b), (b, e); vocabd gives each of them (b, e) (the character's span,
// Hugging Face's convention): the golden offsets are translated so.
// An unk piece's golden "piece" is the text it covers; vocabd's Piece(unk)
// is the vocabulary entry, so unk pieces are compared by id only.
TEST_P(SentencePieceGoldenTest, MatchesPythonSentencePiece) {
  const GoldenModel& m = GetParam();
  const nlohmann::json golden =
      nlohmann::json::parse(ReadFileBytes(TestData(std::string(m.name) + "_golden.json")));
  auto tok = LoadTokenizer(TestData(std::string(m.name) + ".model"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->kind(), m.kind);
  const int32_t unk = golden["unk_id"];
  const auto& cases = golden["cases"];
  ASSERT_GT(cases.size(), 300u);
  int mismatches = 0, decoded_checked = 0, byte_pieces = 0, unks = 0;
  for (const auto& c : cases) {
    const std::string text = c["text"];
    auto enc = (*tok)->Encode(text, /*add_special_tokens=*/false);
    ASSERT_TRUE(enc.ok()) << enc.status();
    const auto want_ids = c["ids"].get<std::vector<int32_t>>();
    const auto want_pieces = c["pieces"].get<std::vector<std::string>>();
    auto want_offsets = c["offsets"].get<std::vector<std::pair<int64_t, int64_t>>>();
    for (size_t i = want_offsets.size(); i-- > 0;) {
      if ((*tok)->Type(want_ids[i]) != TokenType::kByte) continue;
      ++byte_pieces;
      if (want_offsets[i].first == want_offsets[i].second && i + 1 < want_ids.size() &&
          (*tok)->Type(want_ids[i + 1]) == TokenType::kByte &&
          want_offsets[i + 1].first == want_offsets[i].first) {
        want_offsets[i].second = want_offsets[i + 1].second;
      }
    }
    EXPECT_EQ(enc->ids, want_ids) << m.name << " \"" << text << "\"";
    if (enc->ids != want_ids) {
      ++mismatches;
      continue;
    }
    EXPECT_EQ(enc->offsets, want_offsets) << m.name << " \"" << text << "\"";
    bool has_unk = false;
    for (size_t i = 0; i < want_ids.size(); ++i) {
      if (want_ids[i] == unk) {
        has_unk = true;
        ++unks;
        continue;
      }
      EXPECT_EQ((*tok)->Piece(want_ids[i]), want_pieces[i]) << m.name << " \"" << text << "\" #" << i;
    }
    auto ids = (*tok)->EncodeIds(text, false);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(*ids, want_ids);
    if (!has_unk) {
      auto dec = (*tok)->Decode(enc->ids, false);
      ASSERT_TRUE(dec.ok()) << dec.status();
      EXPECT_EQ(*dec, c["decoded"].get<std::string>()) << m.name << " \"" << text << "\"";
      ++decoded_checked;
      // Streaming one id at a time gives the same text.
      std::string streamed;
      for (size_t i = 0; i < enc->ids.size(); ++i) {
        auto piece = DecodeIncremental(**tok, absl::MakeConstSpan(enc->ids.data(), i),
                                       absl::MakeConstSpan(enc->ids.data() + i, 1), false);
        ASSERT_TRUE(piece.ok()) << piece.status();
        streamed += piece->text;
      }
      EXPECT_EQ(streamed, *dec) << m.name << " \"" << text << "\"";
    }
  }
  EXPECT_EQ(mismatches, 0) << m.name;
  EXPECT_GT(decoded_checked, 100) << m.name;
  std::cerr << m.name << ": " << cases.size() << " texts, " << byte_pieces << " byte pieces, " << unks
            << " unk pieces, " << decoded_checked << " decoded\n";
}

INSTANTIATE_TEST_SUITE_P(Models, SentencePieceGoldenTest,
                         ::testing::Values(GoldenModel{"unigram_nmt_nfkc", "unigram"},
                                           GoldenModel{"unigram_nfkc_cf", "unigram"},
                                           GoldenModel{"unigram_identity", "unigram"},
                                           GoldenModel{"unigram_user", "unigram"},
                                           GoldenModel{"bpe_nmt_nfkc", "sentencepiece"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace vocabd

namespace vocabd {
namespace {

// A ModelProto by hand (protobuf wire format): pieces, trainer_spec
// varints, normalizer_spec name + charsmap + varints.
class SpmModelWriter {
 public:
  void Piece(const std::string& piece, float score, int type) {
    std::string sp;
    Bytes(1, piece, &sp);
    V((2 << 3) | 5, &sp);
    sp.append(reinterpret_cast<const char*>(&score), 4);
    Varint(3, type, &sp);
    Bytes(1, sp, &model_);
  }
  void Trainer(int field, int64_t v) { Varint(field, v, &trainer_); }
  void Normalizer(int field, int64_t v) { Varint(field, v, &normalizer_); }
  void NormalizerBytes(int field, const std::string& b) { Bytes(field, b, &normalizer_); }
  std::string Write(const std::string& name) const {
    std::string m = model_;
    Bytes(2, trainer_, &m);
    Bytes(3, normalizer_, &m);
    const std::string path = vocabd::testing::ProcessTempDir() + "/" + name + ".model";
    std::ofstream f(path, std::ios::binary);
    f << m;
    return path;
  }

 private:
  static void V(uint64_t v, std::string* out) {
    while (v >= 0x80) {
      out->push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    out->push_back(static_cast<char>(v));
  }
  static void Varint(int field, int64_t v, std::string* out) {
    V(static_cast<uint64_t>(field) << 3, out);
    V(static_cast<uint64_t>(v), out);
  }
  static void Bytes(int field, const std::string& b, std::string* out) {
    V((static_cast<uint64_t>(field) << 3) | 2, out);
    V(b.size(), out);
    *out += b;
  }
  std::string model_, trainer_, normalizer_;
};

// A darts-clone double array by hand mapping "A" -> "a" and "Bc" -> ""
// (unit layout: spm_normalizer.h):
//   units[0]   root, offset 1                 -> children at 1 ^ byte
//   units[64]  label 'A', has_leaf, offset 1  -> leaf at 64 ^ 1 = 65
//   units[65]  leaf, value 0 ("a")
//   units[67]  label 'B', offset 2            -> children at 67 ^ 2 ^ byte
//   units[34]  label 'c', has_leaf, offset 3  -> leaf at 33
//   units[33]  leaf, value 2 ("")
struct HandTrie {
  std::vector<uint32_t> units = std::vector<uint32_t>(128, 0);
  std::string normalized = std::string("a\0\0", 3);
  HandTrie() {
    units[0] = 1u << 10;                                     // base 1
    units[1 ^ 'A'] = (1u << 10) | (1u << 8) | 'A';           // 64: leaf at 65
    units[(1 ^ 'A') ^ 1] = 0u | (1u << 31);                  // 65: value 0 -> "a"
    units[1 ^ 'B'] = (2u << 10) | 'B';                       // 67: base 65
    units[(1 ^ 'B') ^ 2 ^ 'c'] = (3u << 10) | (1u << 8) | 'c';  // 65 ^ 'c' = 34: leaf at 33
    units[((1 ^ 'B') ^ 2 ^ 'c') ^ 3] = 2u | (1u << 31);      // 33: value 2 -> ""
  }
  std::string Blob() const {
    std::string b;
    const uint32_t size = static_cast<uint32_t>(units.size() * 4);
    b.append(reinterpret_cast<const char*>(&size), 4);
    b.append(reinterpret_cast<const char*>(units.data()), size);
    b += normalized;
    return b;
  }
};

SpmModelWriter TinyUnigram() {
  SpmModelWriter w;
  w.Piece("<unk>", 0, 2);
  w.Piece("<s>", 0, 3);
  w.Piece("</s>", 0, 3);
  w.Piece("\xE2\x96\x81", -1, 1);
  w.Piece("a", -2, 1);
  w.Piece("\xE2\x96\x81" "a", -1.5, 1);
  w.Piece("aa", -10, 5);   // UNUSED: never chosen
  w.Piece("<x>", 0, 4);    // USER_DEFINED: bonus length * FLT_MIN - 0.1
  w.Trainer(3, 1);
  return w;
}

TEST(SentencePieceCharsmapTest, HandBuiltTrieRewritesWithOffsets) {
  HandTrie t;
  SpmModelWriter w = TinyUnigram();
  w.NormalizerBytes(1, "hand");
  w.NormalizerBytes(2, t.Blob());
  auto tok = LoadTokenizer(w.Write("hand_trie"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  // "A" -> "a"; "Bc" -> "" (deleted: its bytes go to the piece before).
  auto enc = (*tok)->Encode("ABcA aa<x>", false);
  ASSERT_TRUE(enc.ok()) << enc.status();
  using P = std::pair<int64_t, int64_t>;
  // normalized "▁aa▁aa<x>": ▁a a ▁a a <x>; "▁a" ends where the second
  // "a" (input "A" at 3) begins, so it covers the deleted "Bc".
  EXPECT_EQ(enc->ids, (std::vector<int32_t>{5, 4, 5, 4, 7}));
  EXPECT_EQ(enc->offsets, (std::vector<P>{{0, 3}, {3, 4}, {4, 6}, {6, 7}, {7, 10}}));
  EXPECT_EQ(*(*tok)->Decode(enc->ids, false), "aa aa<x>");
  // A character no piece covers is one unk, a run of them too.
  auto unk = (*tok)->Encode("a\xC3\xA9\xC3\xA9", false);
  ASSERT_TRUE(unk.ok());
  EXPECT_EQ(unk->ids, (std::vector<int32_t>{5, 0}));
  EXPECT_EQ(unk->offsets, (std::vector<P>{{0, 1}, {1, 5}}));
}

// The identity rule (no charsmap, no user-defined pieces) has a fast path
// in SpmNormalizer::Normalize: it gives what the general per-character rule
// gives (forced here by a user-defined piece the texts never contain), for
// every combination of the three options, offsets included.
TEST(SentencePieceCharsmapTest, IdentityFastPathMatchesTheGeneralRule) {
  using tokenizer_internal::SpmNormalizer;
  using tokenizer_internal::SpmNormalizerOptions;
  const char* units[] = {" ", "  ", "a", "B", "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80", "\t", "\n", "\xE2\x96\x81"};
  uint64_t state = 7;
  auto next = [&state](uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  std::vector<std::string> texts = {"", " ", "   ", "a", " a ", "a  b", "\xE4\xB8\xAD \xE4\xB8\xAD"};
  for (int k = 0; k < 300; ++k) {
    std::string t;
    const uint64_t n = next(12);
    for (uint64_t j = 0; j < n; ++j) t += units[next(sizeof(units) / sizeof(units[0]))];
    texts.push_back(t);
  }
  for (int mask = 0; mask < 8; ++mask) {
    SpmNormalizerOptions o;
    o.add_dummy_prefix = (mask & 1) != 0;
    o.remove_extra_whitespaces = (mask & 2) != 0;
    o.escape_whitespaces = (mask & 4) != 0;
    auto fast = SpmNormalizer::Create(o);
    o.user_defined = {"\x01\x01"};
    auto general = SpmNormalizer::Create(o);
    ASSERT_TRUE(fast.ok() && general.ok());
    for (const std::string& t : texts) {
      std::string n1, n2;
      std::vector<uint32_t> o1, o2;
      fast->Normalize(t, &n1, &o1);
      general->Normalize(t, &n2, &o2);
      EXPECT_EQ(n1, n2) << "options " << mask << " text \"" << absl::CEscape(t) << "\"";
      EXPECT_EQ(o1, o2) << "options " << mask << " text \"" << absl::CEscape(t) << "\"";
    }
  }
}

TEST(SentencePieceCharsmapTest, MalformedCharsmapsAreRefusedNamingTheField) {
  auto refused = [](const std::string& blob, const std::string& what) {
    SpmModelWriter w = TinyUnigram();
    w.NormalizerBytes(1, "bad");
    w.NormalizerBytes(2, blob);
    auto tok = LoadTokenizer(w.Write("bad_trie"));
    ASSERT_FALSE(tok.ok());
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(tok.status().message(),
                HasSubstr("normalizer_spec.precompiled_charsmap (name \"bad\")"));
    EXPECT_THAT(tok.status().message(), HasSubstr(what));
  };
  refused("abc", "shorter than its 4-byte trie size");
  {
    HandTrie t;
    std::string b = t.Blob();
    b[0] = 7;  // not a multiple of 4
    refused(b, "trie size");
  }
  {
    HandTrie t;
    t.units[65] = 99u | (1u << 31);
    refused(t.Blob(), "value 99 outside the 3-byte replacement strings");
  }
  {
    HandTrie t;
    t.normalized = "abc";  // no NUL
    refused(t.Blob(), "has no NUL");
  }
  {
    HandTrie t;
    t.normalized = std::string("\xFF\0\0", 3);
    refused(t.Blob(), "replacement at 0 is not UTF-8");
  }
  {
    HandTrie t;
    t.units[64] = (1000u << 10) | (1u << 8) | 'A';  // leaf at 64 ^ 1000, past 128 units
    refused(t.Blob(), "outside the trie");
  }
}

TEST(SentencePieceCharsmapTest, ModelProtoRulesSentencePieceRefuses) {
  {
    SpmModelWriter w = TinyUnigram();
    w.Piece("a", 0, 1);  // repeats pieces[4]
    auto tok = LoadTokenizer(w.Write("dup_piece"));
    ASSERT_FALSE(tok.ok());
    EXPECT_THAT(tok.status().message(), HasSubstr("pieces[8] = \"a\" repeats pieces[4]"));
  }
  {
    SpmModelWriter w = TinyUnigram();
    w.Piece("<0x41>", 0, 6);
    auto tok = LoadTokenizer(w.Write("byte_no_fallback"));
    ASSERT_FALSE(tok.ok());
    EXPECT_THAT(tok.status().message(),
                HasSubstr("pieces[8] is of type BYTE but trainer_spec.byte_fallback is false"));
  }
}

}  // namespace
}  // namespace vocabd

namespace vocabd {
namespace {

// Every tokenizer.ggml.pre table entry splits the mixed-script texts into
// exactly the pieces python3-regex gives with Hugging Face's expressions
// (make_pretokenizer_golden.py), and every name of the table resolves.
TEST(PreTokenizerSplitTest, EveryEntryMatchesPythonRegex) {
  const nlohmann::json golden =
      nlohmann::json::parse(ReadFileBytes(TestData("pretokenizer_golden.json")));
  const auto texts = golden["texts"].get<std::vector<std::string>>();
  ASSERT_GT(texts.size(), 200u);
  int entries = 0;
  for (const auto& [name, splits] : golden["splits"].items()) {
    auto pt = tokenizer_internal::FindPreTokenizer(name);
    ASSERT_TRUE(pt.ok()) << pt.status();
    std::vector<tokenizer_internal::SplitRegex> res;
    for (const std::string& r : pt->regexes) {
      auto c = tokenizer_internal::SplitRegex::Compile(r, name);
      ASSERT_TRUE(c.ok()) << c.status();
      res.push_back(*std::move(c));
    }
    int mismatches = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string& t = texts[i];
      std::vector<tokenizer_internal::SplitSpan> spans;
      if (!t.empty()) spans.push_back({0, static_cast<uint32_t>(t.size())});
      for (const auto& re : res) ASSERT_TRUE(re.SplitAll(t, &spans).ok()) << name;
      std::vector<std::string> got;
      for (const auto& s : spans) got.push_back(t.substr(s.begin, s.end - s.begin));
      const auto want = splits[i].get<std::vector<std::string>>();
      if (got != want && ++mismatches <= 3) {
        ADD_FAILURE() << name << " text #" << i << " \"" << t << "\": got "
                      << ::testing::PrintToString(got) << " want " << ::testing::PrintToString(want);
      }
    }
    EXPECT_EQ(mismatches, 0) << name;
    ++entries;
  }
  EXPECT_EQ(entries, 30);
  for (const std::string& n : tokenizer_internal::PreTokenizerNames()) {
    EXPECT_TRUE(tokenizer_internal::FindPreTokenizer(n).ok()) << n;
  }
  auto unknown = tokenizer_internal::FindPreTokenizer("foo");
  EXPECT_THAT(unknown.status().message(), HasSubstr("pre-tokenizer \"foo\" is not known (known: default, gpt-2"));
}

// kimi-k2 on long texts: tokenization_kimi.py's cuts (slices of 400,000
// characters; runs of str.isspace() or other characters cut after every
// 25,000) before Moonshot's expression, as the golden script's restatement
// gives them (texts and pieces run-length coded there).
TEST(PreTokenizerSplitTest, KimiK2CutsLongTextsAsTokenizationKimiDoes) {
  const nlohmann::json golden =
      nlohmann::json::parse(ReadFileBytes(TestData("pretokenizer_golden.json")));
  auto pt = tokenizer_internal::FindPreTokenizer("kimi-k2");
  ASSERT_TRUE(pt.ok()) << pt.status();
  std::vector<tokenizer_internal::SplitRegex> res;
  for (const std::string& r : pt->regexes) {
    auto c = tokenizer_internal::SplitRegex::Compile(r, "kimi-k2");
    ASSERT_TRUE(c.ok()) << c.status();
    res.push_back(*std::move(c));
  }
  const auto& cases = golden["long"]["kimi-k2"];
  ASSERT_EQ(cases.size(), 9u);
  for (const auto& c : cases) {
    std::string t;
    for (const auto& run : c["runs"]) {
      const std::string x = run[0];
      for (int i = 0; i < run[1].get<int>(); ++i) t += x;
    }
    std::vector<tokenizer_internal::SplitSpan> spans{{0, static_cast<uint32_t>(t.size())}};
    for (const auto& re : res) ASSERT_TRUE(re.SplitAll(t, &spans).ok());
    std::vector<std::pair<uint32_t, int>> got;  // (piece bytes, repeats)
    for (const auto& s : spans) {
      const uint32_t n = s.end - s.begin;
      if (!got.empty() && got.back().first == n) {
        ++got.back().second;
      } else {
        got.emplace_back(n, 1);
      }
    }
    EXPECT_EQ(got, (c["pieces"].get<std::vector<std::pair<uint32_t, int>>>())) << c["runs"].dump();
  }
}

}  // namespace
}  // namespace vocabd

namespace vocabd {
namespace {

// A GGUF v3 file with tokenizer metadata only.
class TinyGguf {
 public:
  void Str(const std::string& k, const std::string& v) { Key(k, 8); S(v); ++n_; }
  void U32(const std::string& k, uint32_t v) { Key(k, 4); Put(v); ++n_; }
  void Bool(const std::string& k, bool v) { Key(k, 7); Put(static_cast<uint8_t>(v)); ++n_; }
  void Strs(const std::string& k, const std::vector<std::string>& v) {
    Key(k, 9); Put(uint32_t{8}); Put(uint64_t{v.size()});
    for (const auto& x : v) S(x);
    ++n_;
  }
  void F32s(const std::string& k, const std::vector<float>& v) {
    Key(k, 9); Put(uint32_t{6}); Put(uint64_t{v.size()});
    for (float x : v) Put(x);
    ++n_;
  }
  void I32s(const std::string& k, const std::vector<int32_t>& v) {
    Key(k, 9); Put(uint32_t{5}); Put(uint64_t{v.size()});
    for (int32_t x : v) Put(x);
    ++n_;
  }
  void U8s(const std::string& k, const std::string& v) {
    Key(k, 9); Put(uint32_t{0}); Put(uint64_t{v.size()});
    body_ += v;
    ++n_;
  }
  std::string Write(const std::string& name) const {
    std::string head = "GGUF";
    auto put = [&](auto x) { head.append(reinterpret_cast<const char*>(&x), sizeof(x)); };
    put(uint32_t{3});
    put(uint64_t{0});
    put(uint64_t{n_});
    const std::string path = vocabd::testing::ProcessTempDir() + "/" + name + ".gguf";
    std::ofstream f(path, std::ios::binary);
    f << head << body_;
    return path;
  }

 private:
  template <typename T> void Put(T x) { body_.append(reinterpret_cast<const char*>(&x), sizeof(x)); }
  void S(const std::string& v) { Put(uint64_t{v.size()}); body_ += v; }
  void Key(const std::string& k, uint32_t type) { S(k); Put(type); }
  std::string body_;
  uint64_t n_ = 0;
};

// GGUF tokenizer.ggml.model "t5" (llama.cpp UGM): Unigram with the charsmap
// from tokenizer.ggml.precompiled_charsmap; EOS added by default.
TEST(SentencePieceCharsmapTest, GgufT5IsUnigramWithTheCharsmap) {
  auto make = [](const std::string& name, const std::string& charsmap) {
    TinyGguf g;
    g.Str("tokenizer.ggml.model", "t5");
    g.Strs("tokenizer.ggml.tokens", {"<pad>", "</s>", "<unk>", "\xE2\x96\x81", "a",
                                     "\xE2\x96\x81" "a"});
    g.F32s("tokenizer.ggml.scores", {0, 0, 0, -1, -2, -1.5});
    g.I32s("tokenizer.ggml.token_type", {3, 3, 2, 1, 1, 1});
    if (!charsmap.empty()) g.U8s("tokenizer.ggml.precompiled_charsmap", charsmap);
    return g.Write(name);
  };
  auto tok = LoadTokenizer(make("t5_hand", HandTrie().Blob()));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->kind(), "unigram");
  auto enc = (*tok)->Encode("ABcA", /*add_special_tokens=*/true);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->ids, (std::vector<int32_t>{5, 4, 1}));  // "▁a" "a" </s>
  auto bad = LoadTokenizer(make("t5_bad", "xyzzy"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("tokenizer.ggml.precompiled_charsmap (5 bytes) is malformed"));
}

}  // namespace
}  // namespace vocabd

namespace vocabd {
namespace {

// A byte string in GPT-2's byte-level alphabet (openai encoder.py
// bytes_to_unicode): printable Latin-1 bytes stand for themselves, the other
// 68 bytes for U+0100.. in byte order. GGUF "gpt2" vocabularies store their
// tokens so.
std::string ByteLevel(std::string_view raw) {
  auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
  std::string out;
  for (unsigned char b : raw) {
    int cp = b;
    if (!printable(b)) {
      cp = 256;
      for (int c = 0; c < b; ++c) cp += printable(c) ? 0 : 1;
    }
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

// A byte-level GGUF vocabulary with tokenizer.ggml.pre = `pre`: `tokens`
// and `merges` are raw bytes (written in GPT-2's alphabet); returns the
// ids of `text` (no special tokens) as token indices.
std::vector<int32_t> GgufIds(const std::string& pre, const std::vector<std::string>& tokens,
                             const std::vector<std::pair<std::string, std::string>>& merges,
                             const std::string& text) {
  TinyGguf g;
  g.Str("tokenizer.ggml.model", "gpt2");
  g.Str("tokenizer.ggml.pre", pre);
  std::vector<std::string> t, m;
  for (const std::string& x : tokens) t.push_back(ByteLevel(x));
  for (const auto& [a, b] : merges) m.push_back(ByteLevel(a) + " " + ByteLevel(b));
  g.Strs("tokenizer.ggml.tokens", t);
  g.Strs("tokenizer.ggml.merges", m);
  g.I32s("tokenizer.ggml.token_type", std::vector<int32_t>(t.size(), 1));
  auto tok = LoadTokenizer(g.Write("pre_ids_" + pre));
  EXPECT_TRUE(tok.ok()) << pre << ": " << tok.status();
  if (!tok.ok()) return {};
  auto ids = (*tok)->EncodeIds(text, /*add_special_tokens=*/false);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

int32_t IdOf(const std::vector<std::string>& tokens, const std::string& t) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] == t) return static_cast<int32_t>(i);
  }
  ADD_FAILURE() << "no token " << t;
  return -1;
}

// kimi-k2 end to end: Moonshot's split ("get" "User" "Name" " " "中文" "、":
// camel case split, U+3001 not Han) and tiktoken's whole-piece rule (the
// pieces are tokens although no merge builds them).
TEST(PreTokenizerSplitTest, GgufKimiK2GivesTheExpectedIds) {
  const std::vector<std::string> tokens = {
      "g", "e", "t", "U", "s", "r", "N", "a", "m", " ", "\xE4", "\xB8", "\xAD", "\xE6", "\x96",
      "\x87", "\xE3", "\x80", "\x81", "ge", "get", "User", "Name", "\xE4\xB8\xAD\xE6\x96\x87"};
  auto id = [&](const std::string& t) { return IdOf(tokens, t); };
  EXPECT_EQ(GgufIds("kimi-k2", tokens, {{"g", "e"}}, "getUserName \xE4\xB8\xAD\xE6\x96\x87\xE3\x80\x81"),
            (std::vector<int32_t>{id("get"), id("User"), id("Name"), id(" "),
                                  id("\xE4\xB8\xAD\xE6\x96\x87"), id("\xE3"), id("\x80"), id("\x81")}));
}

// Whole pieces skip the merges also when their bytes are written
// differently in GPT-2's alphabet (" " is "Ġ", "é" is "Ã©").
TEST(PreTokenizerSplitTest, GgufIgnoreMergesFindsByteLevelWords) {
  const std::vector<std::string> tokens = {" ", "\n", "h", "i", "\xC3", "\xA9", " hi", "\xC3\xA9hi"};
  auto id = [&](const std::string& t) { return IdOf(tokens, t); };
  EXPECT_EQ(GgufIds("llama-bpe", tokens, {{"h", "i"}}, " hi\n\xC3\xA9hi"),
            (std::vector<int32_t>{id(" hi"), id("\n"), id("\xC3\xA9hi")}));
}

// afmoe end to end: llama.cpp's digit grouping glues "ab  " to "12", so the
// main expression sees "ab  12" and gives " " " " (not "  "); "345" is a
// group; the CJK stage cuts " " from "中文" (otherwise " \xE4" would merge).
TEST(PreTokenizerSplitTest, GgufAfmoeGivesTheExpectedIds) {
  const std::vector<std::string> tokens = {
      "a", "b", " ", "1", "2", "3", "4", "5", "x", "\xE4", "\xB8", "\xAD", "\xE6", "\x96", "\x87",
      "ab", "  ", "12", "123", "34", "345", " \xE4"};
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"a", "b"}, {" ", " "}, {"1", "2"}, {"12", "3"}, {"3", "4"}, {"34", "5"}, {" ", "\xE4"}};
  auto id = [&](const std::string& t) { return IdOf(tokens, t); };
  EXPECT_EQ(GgufIds("afmoe", tokens, merges, "ab  12345 \xE4\xB8\xAD\xE6\x96\x87x"),
            (std::vector<int32_t>{id("ab"), id(" "), id(" "), id("12"), id("345"), id(" "),
                                  id("\xE4"), id("\xB8"), id("\xAD"), id("\xE6"), id("\x96"),
                                  id("\x87"), id("x")}));
}

}  // namespace
}  // namespace vocabd

namespace vocabd {
namespace {

// Carried over: a literal U+2581 in the text is whitespace to the
// normalizer (trailing ones are removed with remove_extra_whitespaces, as
// sentencepiece does); python3-sentencepiece's ids for stories260K-hf.
TEST(SentencePieceCharsmapTest, Stories260KHfLiteralMetaspace) {
  auto tok = LoadTokenizer(testing::SharedModelsDir() + "/stories260K-hf/tokenizer.model");
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<std::pair<std::string, std::vector<int32_t>>> cases = {
      {"hello\xE2\x96\x81", {281, 306, 414}},
      {"hello \xE2\x96\x81", {281, 306, 414}},
      {"\xE2\x96\x81", {}},
      {"a\xE2\x96\x81\xE2\x96\x81 ", {261}},
      {"\xE2\x96\x81hello", {410, 281, 306, 414}}};
  for (const auto& [text, ids] : cases) {
    auto enc = (*tok)->EncodeIds(text, false);
    ASSERT_TRUE(enc.ok());
    EXPECT_EQ(*enc, ids) << text;
  }
  EXPECT_EQ(*(*tok)->Decode(std::vector<int32_t>{410, 281, 306, 414}, false), "hello");
}

// Carried over: the end-of-stream flush returns what DecodeIncremental held
// back (an incomplete character as U+FFFD), so the stream equals the full
// decode with ill-formed bytes replaced.
TEST(SentencePieceCharsmapTest, FlushIncrementalReturnsTheHeldBackTail) {
  auto tok = LoadTokenizer(TestData("unigram_identity.model"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  // "日本語" then the first two byte pieces of an unknown 3-byte character.
  auto enc = (*tok)->EncodeIds("x \xE3\x81\xAE", false);
  ASSERT_TRUE(enc.ok());
  std::vector<int32_t> ids(enc->begin(), enc->end() - 1);  // drop the last byte piece
  std::string streamed;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto piece = DecodeIncremental(**tok, absl::MakeConstSpan(ids.data(), i),
                                   absl::MakeConstSpan(ids.data() + i, 1), false);
    ASSERT_TRUE(piece.ok());
    streamed += piece->text;
  }
  EXPECT_EQ(streamed, "x ");
  auto tail = FlushIncremental(**tok, ids, false);
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(*tail, "\xEF\xBF\xBD");
  EXPECT_EQ(streamed + *tail, ReplaceInvalidUtf8(*(*tok)->Decode(ids, false)));
  EXPECT_EQ(*FlushIncremental(**tok, *enc, false), "");  // nothing held back
  EXPECT_FALSE(FlushIncremental(**tok, std::vector<int32_t>{-1}, false).ok());
}

}  // namespace
}  // namespace vocabd

namespace vocabd {
namespace {

// A GGUF vocabulary with tokenizer.ggml.model "gpt2" and a given
// tokenizer.ggml.pre: llama.cpp's add_bos default for the name (llama3,
// tekken, chameleon: on) applies when tokenizer.ggml.add_bos_token is
// absent; gemma4 and granite-embed-multi-311m add BOS always (raw UTF-8
// BPE, RawBpeGgufTest); "whitespace" needs tokenizer.ggml.model
// "whitespace".
TEST(PreTokenizerSplitTest, GgufNamesCarryLlamaCppDefaults) {
  auto load = [](const std::string& pre) {
    TinyGguf g;
    g.Str("tokenizer.ggml.model", "gpt2");
    g.Str("tokenizer.ggml.pre", pre);
    g.Strs("tokenizer.ggml.tokens", {"a", "b", "ab", "<s>"});
    g.Strs("tokenizer.ggml.merges", {"a b"});
    g.I32s("tokenizer.ggml.token_type", {1, 1, 1, 3});
    g.U32("tokenizer.ggml.bos_token_id", 3);
    return LoadTokenizer(g.Write("pre_" + pre));
  };
  for (const auto& [pre, bos] : std::vector<std::pair<std::string, bool>>{
           {"llama-bpe", true}, {"tekken", true}, {"chameleon", true}, {"qwen2", false},
           {"deepseek-v3", false}, {"tiny_aya", false}, {"youtu", false}, {"gemma4", true},
           {"granite-embed-multi-311m", true}, {"sarvam-moe", false}}) {
    auto t = load(pre);
    ASSERT_TRUE(t.ok()) << pre << ": " << t.status();
    auto ids = (*t)->EncodeIds("ab", /*add_special_tokens=*/true);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(ids->front() == 3, bos) << pre;
  }
  auto t = load("whitespace");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(),
              HasSubstr("tokenizer.ggml.model \"gpt2\" with tokenizer.ggml.pre \"whitespace\" is "
                        "not supported"));
}

}  // namespace
}  // namespace vocabd

namespace vocabd {
namespace {

// GGUF vocabularies llama.cpp runs as BPE over raw UTF-8: tokenizer.ggml.model
// "gemma4" and "whitespace", and "gpt2" with tokenizer.ggml.pre
// granite-embed-multi-311m or sarvam-moe.
struct RawVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  int32_t Id(const std::string& piece) const {
    auto it = std::find(tokens.begin(), tokens.end(), piece);
    return it == tokens.end() ? -1 : static_cast<int32_t>(it - tokens.begin());
  }
};

// <bos> <eos>, <0x00>..<0xFF> without <0xBD>, then ▁ a b ab ▁ab \n \n\n A B AB
// k kk; byte pieces typed `byte_type`.
RawVocab SmallRawVocab(int32_t byte_type) {
  RawVocab v;
  v.tokens = {"<bos>", "<eos>"};
  v.types = {3, 3};
  for (int b = 0; b < 256; ++b) {
    if (b == 0xBD) continue;
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    v.tokens.push_back(buf);
    v.types.push_back(byte_type);
  }
  for (const char* p : {"\xE2\x96\x81", "a", "b", "ab", "\xE2\x96\x81" "ab", "\n", "\n\n", "A", "B",
                        "AB", "k", "kk"}) {
    v.tokens.push_back(p);
    v.types.push_back(1);
  }
  return v;
}

struct RawGgufSpec {
  std::string model = "";
  std::string pre = "";  // empty: no key
  std::optional<bool> add_bos_token = std::nullopt;
  std::optional<bool> lowercase = std::nullopt;
  int32_t byte_type = 6;
  bool bos_id = true;
  std::vector<std::string> merges = {"a b", "\xE2\x96\x81 ab", "A B", "k k"};
};

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadRaw(const std::string& name, const RawGgufSpec& s,
                                                   RawVocab* vocab) {
  *vocab = SmallRawVocab(s.byte_type);
  TinyGguf g;
  g.Str("tokenizer.ggml.model", s.model);
  if (!s.pre.empty()) g.Str("tokenizer.ggml.pre", s.pre);
  g.Strs("tokenizer.ggml.tokens", vocab->tokens);
  g.I32s("tokenizer.ggml.token_type", vocab->types);
  g.Strs("tokenizer.ggml.merges", s.merges);
  if (s.bos_id) g.U32("tokenizer.ggml.bos_token_id", 0);
  g.U32("tokenizer.ggml.eos_token_id", 1);
  if (s.add_bos_token) g.Bool("tokenizer.ggml.add_bos_token", *s.add_bos_token);
  if (s.lowercase) g.Bool("tokenizer.ggml.normalizer.lowercase", *s.lowercase);
  return LoadTokenizer(g.Write("raw_" + name));
}

std::vector<int32_t> Ids(const RawVocab& v, const std::vector<std::string>& pieces) {
  std::vector<int32_t> ids;
  for (const std::string& p : pieces) ids.push_back(v.Id(p));
  return ids;
}

using RawOffsets = std::vector<std::pair<int64_t, int64_t>>;

// Expected ids written by hand from llama.cpp's rules (docs/models.md).
TEST(RawBpeGgufTest, Gemma4EscapesSpacesKeepsNewlineRunsAndAlwaysAddsBos) {
  const std::string ms = "\xE2\x96\x81";
  RawVocab v;
  auto tok = LoadRaw("gemma4", {.model = "gemma4", .add_bos_token = false}, &v);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->kind(), "bpe");
  EXPECT_TRUE((*tok)->add_bos());  // although tokenizer.ggml.add_bos_token = false
  auto enc = (*tok)->Encode("ab ab", true);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->ids, Ids(v, {"<bos>", "ab", ms + "ab"}));
  EXPECT_EQ(enc->offsets, (RawOffsets{{0, 0}, {0, 2}, {2, 5}}));
  // A run of LF that is a token is that token; a longer one is BPE'd (no
  // merge joins LFs here).
  EXPECT_EQ(*(*tok)->EncodeIds("\n\n", false), Ids(v, {"\n\n"}));
  EXPECT_EQ(*(*tok)->EncodeIds("\n\n\n", false), Ids(v, {"\n", "\n", "\n"}));
  EXPECT_EQ(*(*tok)->EncodeIds("a\n\nb", false), Ids(v, {"a", "\n\n", "b"}));
  // Every space is "▁", none prepended; two spaces are two "▁" symbols.
  EXPECT_EQ(*(*tok)->EncodeIds(" a  ab", false), Ids(v, {ms, "a", ms, ms + "ab"}));
  // A character without a token: its byte tokens; a byte without one is
  // dropped ("½" = C2 BD).
  enc = (*tok)->Encode("\xC3\xA9x\xC2\xBD", false);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->ids, Ids(v, {"<0xC3>", "<0xA9>", "<0x78>", "<0xC2>"}));
  EXPECT_EQ(enc->offsets, (RawOffsets{{0, 1}, {1, 2}, {2, 3}, {3, 4}}));
  // Decode: "▁" is a space, byte tokens their bytes.
  EXPECT_EQ(*(*tok)->Decode(Ids(v, {ms + "ab", "<0xC3>", "<0xA9>"}), false), " ab\xC3\xA9");
  EXPECT_EQ((*tok)->Piece(v.Id(ms + "ab")), ms + "ab");
  EXPECT_EQ((*tok)->TokenBytes(v.Id(ms + "ab")), " ab");
  const std::string text = " ab\n\n\nAB  k\xC3\xA9";
  auto ids = (*tok)->EncodeIds(text, true);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*(*tok)->Decode(*ids, true), text);
  EXPECT_EQ(*(*tok)->Decode(*ids, false), "<bos>" + text);
}

TEST(RawBpeGgufTest, GgufModelGemma4NeedsItsBosId) {
  RawVocab v;
  auto tok = LoadRaw("gemma4_nobos", {.model = "gemma4", .bos_id = false}, &v);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tok.status().message(),
              HasSubstr("tokenizer.ggml.add_bos_token is true (always, for pre-tokenizer gemma4) "
                        "but tokenizer.ggml.bos_token_id is not set"));
  // tokenizer.ggml.pre does not matter for model "gemma4" (llama.cpp forces
  // it), nor does tokenizer.ggml.merges' absence go unnoticed.
  auto forced = LoadRaw("gemma4_pre", {.model = "gemma4", .pre = "sarvam-moe"}, &v);
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_EQ(*(*forced)->EncodeIds("\n\n", true), Ids(v, {"<bos>", "\n\n"}));
  auto bad = LoadRaw("gemma4_merge", {.model = "gemma4", .merges = {"a b", "b x"}}, &v);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("merges[1] = \"b x\": \"x\" is not a token of the vocabulary"));
  bad = LoadRaw("gemma4_merge2", {.model = "gemma4", .merges = {"b a"}}, &v);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("merges[0] = \"b a\": \"ba\" is not a token of the vocabulary"));
}

// granite-embed-multi-311m is gemma4's pre-tokenizer under model "gpt2",
// whose byte pieces are typed NORMAL; sarvam-moe lacks the newline-run rule
// and the forced BOS.
TEST(RawBpeGgufTest, GraniteAndSarvamUnderModelGpt2) {
  const std::string ms = "\xE2\x96\x81";
  RawVocab v;
  for (const std::optional<bool> add : {std::optional<bool>(), std::optional<bool>(false)}) {
    auto granite = LoadRaw("granite", {.model = "gpt2", .pre = "granite-embed-multi-311m",
                                       .add_bos_token = add, .byte_type = 1}, &v);
    ASSERT_TRUE(granite.ok()) << granite.status();
    EXPECT_EQ(*(*granite)->EncodeIds("ab ab\n\n\xC3\xA9", true),
              Ids(v, {"<bos>", "ab", ms + "ab", "\n\n", "<0xC3>", "<0xA9>"}));
    EXPECT_EQ((*granite)->Type(v.Id("<0xC3>")), TokenType::kByte);
    EXPECT_EQ((*granite)->TokenBytes(v.Id("<0xC3>")), "\xC3");
    EXPECT_EQ(*(*granite)->Decode(Ids(v, {"<0xC3>", "<0xA9>"}), false), "\xC3\xA9");
  }
  auto sarvam = LoadRaw("sarvam", {.model = "gpt2", .pre = "sarvam-moe", .byte_type = 1}, &v);
  ASSERT_TRUE(sarvam.ok()) << sarvam.status();
  EXPECT_FALSE((*sarvam)->add_bos());
  EXPECT_EQ(*(*sarvam)->EncodeIds("ab ab\n\n\xC3\xA9", true),
            Ids(v, {"ab", ms + "ab", "\n", "\n", "<0xC3>", "<0xA9>"}));
  sarvam = LoadRaw("sarvam_bos", {.model = "gpt2", .pre = "sarvam-moe", .add_bos_token = true,
                                  .byte_type = 1}, &v);
  ASSERT_TRUE(sarvam.ok()) << sarvam.status();
  EXPECT_EQ(*(*sarvam)->EncodeIds("ab", true), Ids(v, {"<bos>", "ab"}));
  auto nobos = LoadRaw("sarvam_nobos", {.model = "gpt2", .pre = "sarvam-moe",
                                        .add_bos_token = true, .bos_id = false}, &v);
  ASSERT_FALSE(nobos.ok());
  EXPECT_THAT(nobos.status().message(),
              HasSubstr("tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is "
                        "not set"));
}

TEST(RawBpeGgufTest, WhitespaceModelDropsWhiteSpaceAndLowercasesOnRequest) {
  RawVocab v;
  auto plain = LoadRaw("ws", {.model = "whitespace", .pre = "whitespace", .byte_type = 1}, &v);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE((*plain)->add_bos());
  auto enc = (*plain)->Encode("AB  ab\tAB", true);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->ids, Ids(v, {"AB", "ab", "AB"}));
  EXPECT_EQ(enc->offsets, (RawOffsets{{0, 2}, {4, 6}, {7, 9}}));
  // White_Space never reaches BPE (no <0x20>, <0x0A>, <0xC2><0xA0>);
  // U+180E is not White_Space.
  EXPECT_EQ(*(*plain)->EncodeIds(" \n\xC2\xA0\xE3\x80\x80", false), std::vector<int32_t>{});
  EXPECT_EQ(*(*plain)->EncodeIds("a\xE1\xA0\x8E" "b", false),
            Ids(v, {"a", "<0xE1>", "<0xA0>", "<0x8E>", "b"}));
  // KELVIN SIGN K (U+212A) stays itself without lowercase.
  EXPECT_EQ(*(*plain)->EncodeIds("\xE2\x84\xAA", false), Ids(v, {"<0xE2>", "<0x84>", "<0xAA>"}));
  // Decode: the pieces' text.
  EXPECT_EQ(*(*plain)->Decode(Ids(v, {"ab", "AB", "<0xC3>", "<0xA9>"}), false), "abAB\xC3\xA9");

  auto lower = LoadRaw("ws_lower", {.model = "whitespace", .pre = "whitespace", .lowercase = true,
                                    .byte_type = 1}, &v);
  ASSERT_TRUE(lower.ok()) << lower.status();
  EXPECT_EQ(*(*lower)->EncodeIds("AB  ab\tAB", false), Ids(v, {"ab", "ab", "ab"}));
  // U+212A lower-cases to "k" (3 bytes -> 1): the offsets still cover the
  // input's characters.
  enc = (*lower)->Encode("x\xE2\x84\xAA\xE2\x84\xAAK", false);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->ids, Ids(v, {"<0x78>", "kk", "k"}));
  EXPECT_EQ(enc->offsets, (RawOffsets{{0, 1}, {1, 7}, {7, 8}}));
  auto off = LoadRaw("ws_lower_off", {.model = "whitespace", .pre = "whitespace",
                                      .lowercase = false, .byte_type = 1}, &v);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(*(*off)->EncodeIds("AB", false), Ids(v, {"AB"}));

  // The whitespace session goes with the whitespace pre-tokenizer only.
  for (const std::string& pre : {std::string("gpt-2"), std::string()}) {
    auto bad = LoadRaw("ws_pre" + pre, {.model = "whitespace", .pre = pre}, &v);
    ASSERT_FALSE(bad.ok()) << pre;
    EXPECT_THAT(bad.status().message(), HasSubstr("tokenizer.ggml.model \"whitespace\" with "
                                                  "tokenizer.ggml.pre \"" + pre + "\" is not supported"));
  }
}

// The reference of make_raw_bpe_golden.py (llama.cpp's rules restated in
// Python) on 320 texts, five configurations: ids, decoded text, and the
// contract every tokenizer keeps (EncodeIds = Encode's ids, offsets inside
// the text and ordered, streaming decode = full decode).
TEST(RawBpeGgufTest, EveryConfigurationMatchesThePythonReference) {
  const nlohmann::json golden = nlohmann::json::parse(ReadFileBytes(TestData("raw_bpe_golden.json")));
  const auto texts = golden["texts"].get<std::vector<std::string>>();
  const auto merges = golden["merges"].get<std::vector<std::string>>();
  ASSERT_GT(texts.size(), 300u);
  int configs = 0;
  for (const auto& c : golden["configs"]) {
    const std::string name = c["name"].get<std::string>();
    TinyGguf g;
    g.Str("tokenizer.ggml.model", c["model"].get<std::string>());
    if (!c["pre"].is_null()) g.Str("tokenizer.ggml.pre", c["pre"].get<std::string>());
    g.Strs("tokenizer.ggml.tokens", c["tokens"].get<std::vector<std::string>>());
    g.I32s("tokenizer.ggml.token_type", c["types"].get<std::vector<int32_t>>());
    g.Strs("tokenizer.ggml.merges", merges);
    g.U32("tokenizer.ggml.bos_token_id", c["bos_token_id"].get<uint32_t>());
    if (!c["add_bos_token"].is_null()) g.Bool("tokenizer.ggml.add_bos_token", c["add_bos_token"].get<bool>());
    if (!c["lowercase"].is_null()) g.Bool("tokenizer.ggml.normalizer.lowercase", c["lowercase"].get<bool>());
    auto tok = LoadTokenizer(g.Write("raw_golden_" + name));
    ASSERT_TRUE(tok.ok()) << name << ": " << tok.status();
    int mismatches = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string& t = texts[i];
      const auto want = c["ids"][i].get<std::vector<int32_t>>();
      auto enc = (*tok)->Encode(t, /*add_special_tokens=*/true);
      ASSERT_TRUE(enc.ok()) << enc.status();
      if (enc->ids != want && ++mismatches <= 3) {
        ADD_FAILURE() << name << " text #" << i << " \"" << t << "\": got "
                      << ::testing::PrintToString(enc->ids) << " want " << ::testing::PrintToString(want);
      }
      EXPECT_EQ(*(*tok)->EncodeIds(t, true), enc->ids) << name << " #" << i;
      ASSERT_EQ(enc->offsets.size(), enc->ids.size());
      int64_t prev = 0;
      for (const auto& [b, e] : enc->offsets) {
        EXPECT_LE(prev, b) << name << " #" << i;
        EXPECT_LE(b, e) << name << " #" << i;
        EXPECT_LE(e, static_cast<int64_t>(t.size())) << name << " #" << i;
        prev = b;
      }
      auto text = (*tok)->Decode(enc->ids, /*skip_special_tokens=*/true);
      ASSERT_TRUE(text.ok());
      EXPECT_EQ(absl::BytesToHexString(*text), c["decoded_hex"][i].get<std::string>())
          << name << " #" << i;
      std::string streamed;
      for (size_t k = 0; k < enc->ids.size(); ++k) {
        auto piece = DecodeIncremental(**tok, absl::MakeConstSpan(enc->ids.data(), k),
                                       absl::MakeConstSpan(enc->ids.data() + k, 1), true);
        ASSERT_TRUE(piece.ok());
        streamed += piece->text;
      }
      streamed += *FlushIncremental(**tok, enc->ids, true);
      EXPECT_EQ(streamed, ReplaceInvalidUtf8(*text)) << name << " #" << i;
    }
    EXPECT_EQ(mismatches, 0) << name;
    ++configs;
  }
  EXPECT_EQ(configs, 5);
}

}  // namespace
}  // namespace vocabd
