// Tokenizers against llama.cpp's tokenizer fixtures (../shared/models/vocab:
// vocabulary-only GGUFs, 46 inputs each, the ids Hugging Face `tokenizers`
// produced) and the other files the models carry.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <thread>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "nlohmann/json.hpp"
#include "gtest/gtest.h"
#include "lib/checkpoint/gguf.h"
#include "lib/tokenizer/incremental_decode.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/tokenizer/tokenizer_loader.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// .inp: inputs, each followed by "\n__ggml_vocab_test__\n"; .out: one line
// of space-separated ids per input.
std::vector<Case> ReadCases(const std::string& gguf) {
  const std::string inp = ReadAll(gguf + ".inp");
  const std::string out = ReadAll(gguf + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos = 0;
  while (true) {
    const size_t hit = inp.find(sep, pos);
    if (hit == std::string::npos) break;
    texts.push_back(inp.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  std::vector<std::string> lines = absl::StrSplit(out, '\n');
  std::vector<Case> cases;
  for (size_t i = 0; i < texts.size(); ++i) {
    Case c;
    c.text = texts[i];
    if (i < lines.size()) {
      for (absl::string_view tok : absl::StrSplit(lines[i], ' ', absl::SkipEmpty())) {
        c.ids.push_back(std::stoi(std::string(tok)));
      }
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string VocabPath(const std::string& name) {
  return testing::SharedModelsDir() + "/vocab/ggml-vocab-" + name + ".gguf";
}

struct FixtureParam {
  const char* name;
  const char* kind;
  bool lossless;  // Decode(Encode(text)) == text
};

class VocabFixtureTest : public ::testing::TestWithParam<FixtureParam> {};

TEST_P(VocabFixtureTest, EveryInputGivesTheHuggingFaceIds) {
  const FixtureParam& p = GetParam();
  auto tok = LoadTokenizer(VocabPath(p.name));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->kind(), p.kind);
  const std::vector<Case> cases = ReadCases(VocabPath(p.name));
  ASSERT_EQ(cases.size(), 46u);
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    auto enc = (*tok)->Encode(cases[i].text, /*add_special_tokens=*/false);
    ASSERT_TRUE(enc.ok()) << enc.status();
    EXPECT_THAT(enc->ids, ElementsAreArray(cases[i].ids))
        << p.name << " input #" << i << " \"" << cases[i].text << "\"";
    if (enc->ids != cases[i].ids) ++failures;
    // Same ids without offsets.
    auto ids = (*tok)->EncodeIds(cases[i].text, false);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(*ids, enc->ids);
    // Offsets: one per id, ordered, inside the text.
    ASSERT_EQ(enc->offsets.size(), enc->ids.size());
    int64_t prev = 0;
    for (const auto& [b, e] : enc->offsets) {
      EXPECT_LE(prev, b);
      EXPECT_LE(b, e);
      EXPECT_LE(e, static_cast<int64_t>(cases[i].text.size()));
      prev = b;
    }
    if (p.lossless) {
      auto text = (*tok)->Decode(enc->ids, /*skip_special_tokens=*/false);
      ASSERT_TRUE(text.ok()) << text.status();
      EXPECT_EQ(*text, cases[i].text) << p.name << " input #" << i;
    }
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, VocabFixtureTest,
    ::testing::Values(FixtureParam{"llama-spm", "sentencepiece", true},
                      FixtureParam{"phi-3", "sentencepiece", true},
                      FixtureParam{"gpt-2", "bpe", true}, FixtureParam{"falcon", "bpe", true},
                      FixtureParam{"bert-bge", "wordpiece", false}),
    [](const auto& info) {
      std::string n = info.param.name;
      for (char& c : n) if (c == '-') c = '_';
      return n;
    });

TEST(TokenizerTest, BertDecodeJoinsWordPieces) {
  auto tok = LoadTokenizer(VocabPath("bert-bge"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto enc = (*tok)->Encode("Hello World! Tokenization", /*add_special_tokens=*/true);
  ASSERT_TRUE(enc.ok());
  // [CLS] ... [SEP]
  EXPECT_EQ(enc->ids.front(), 101);
  EXPECT_EQ(enc->ids.back(), 102);
  auto text = (*tok)->Decode(enc->ids, /*skip_special_tokens=*/true);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "hello world! tokenization");
  EXPECT_EQ((*tok)->Piece(101), "[CLS]");
  EXPECT_EQ((*tok)->Type(101), TokenType::kControl);
}

TEST(TokenizerTest, HfGpt2TokenizerJsonMatchesTheGgufFixture) {
  auto json_tok = LoadTokenizer(testing::SharedModelsDir() + "/fake_gpt2");
  ASSERT_TRUE(json_tok.ok()) << json_tok.status();
  EXPECT_EQ((*json_tok)->kind(), "bpe");
  EXPECT_EQ((*json_tok)->vocab_size(), 50257);
  EXPECT_EQ((*json_tok)->eos_id(), 50256);
  for (const Case& c : ReadCases(VocabPath("gpt-2"))) {
    auto enc = (*json_tok)->Encode(c.text, false);
    ASSERT_TRUE(enc.ok()) << enc.status();
    EXPECT_THAT(enc->ids, ElementsAreArray(c.ids)) << "\"" << c.text << "\"";
    auto text = (*json_tok)->Decode(enc->ids, false);
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(*text, c.text);
  }
  // The added token is matched in text and skipped on request.
  auto enc = (*json_tok)->Encode("Hi<|endoftext|>", false);
  ASSERT_TRUE(enc.ok());
  EXPECT_THAT(enc->ids, ElementsAre(17250, 50256));
  EXPECT_EQ(*(*json_tok)->Decode(enc->ids, true), "Hi");
  EXPECT_EQ(*(*json_tok)->Decode(enc->ids, false), "Hi<|endoftext|>");
}

TEST(TokenizerTest, Gpt2PiecesBytesAndOffsets) {
  auto tok = LoadTokenizer(VocabPath("gpt-2"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto enc = (*tok)->Encode("Hello world", false);
  ASSERT_TRUE(enc.ok());
  EXPECT_THAT(enc->ids, ElementsAre(15496, 995));
  EXPECT_EQ((*tok)->Piece(995), "\xC4\xA0world");  // "Ġworld"
  EXPECT_EQ((*tok)->TokenBytes(995), " world");
  EXPECT_EQ(enc->offsets[0], (std::pair<int64_t, int64_t>(0, 5)));
  EXPECT_EQ(enc->offsets[1], (std::pair<int64_t, int64_t>(5, 11)));
  // A partial UTF-8 sequence: "ü" (C3 BC) is two byte-level tokens here?
  // Whatever the split, the bytes concatenate to the text.
  auto e2 = (*tok)->Encode("\xF0\x9F\xA6\x99", false);  // 🦙
  ASSERT_TRUE(e2.ok());
  std::string joined;
  for (int32_t id : e2->ids) joined += (*tok)->TokenBytes(id);
  EXPECT_EQ(joined, "\xF0\x9F\xA6\x99");
}

TEST(TokenizerTest, InvalidUtf8NamesTheOffset) {
  for (const char* name : {"llama-spm", "gpt-2", "bert-bge"}) {
    auto tok = LoadTokenizer(VocabPath(name));
    ASSERT_TRUE(tok.ok()) << tok.status();
    for (const std::string& bad :
         {std::string("ab\xFF"), std::string("ab\xC3"), std::string("ab\xC0\xAF"),
          std::string("ab\xED\xA0\x80"), std::string("ab\xF4\x90\x80\x80")}) {
      auto enc = (*tok)->Encode(bad, false);
      ASSERT_FALSE(enc.ok()) << name;
      EXPECT_EQ(enc.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(enc.status().message(), HasSubstr("text: invalid UTF-8 at byte offset 2"));
    }
  }
}

TEST(TokenizerTest, IdsOutOfRangeNameTheIndex) {
  auto tok = LoadTokenizer(VocabPath("gpt-2"));
  ASSERT_TRUE(tok.ok());
  auto text = (*tok)->Decode(std::vector<int32_t>{15496, 50257}, false);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(), HasSubstr("ids[1] = 50257 is outside [0, vocab_size = 50257)"));
  auto neg = (*tok)->Decode(std::vector<int32_t>{-1}, false);
  ASSERT_FALSE(neg.ok());
  EXPECT_THAT(neg.status().message(), HasSubstr("ids[0] = -1"));
}

// Streaming one id at a time never yields a broken UTF-8 sequence and the
// pieces add up to the text.
TEST(TokenizerTest, DecodeIncrementalStreamsWholeCharacters) {
  const std::string text = "Hello 🦙 world, 你好! \xF0\x9F\x98\x80 caf\xC3\xA9\n";
  for (const char* name : {"gpt-2", "llama-spm"}) {
    auto tok = LoadTokenizer(VocabPath(name));
    ASSERT_TRUE(tok.ok());
    auto enc = (*tok)->EncodeIds(text, false);
    ASSERT_TRUE(enc.ok());
    std::string streamed;
    int empty_steps = 0;
    for (size_t i = 0; i < enc->size(); ++i) {
      const size_t from = i >= 6 ? i - 6 : 0;  // a window of the last 6 ids
      auto piece = DecodeIncremental(**tok, absl::MakeConstSpan(enc->data() + from, i - from),
                                     absl::MakeConstSpan(enc->data() + i, 1), false);
      ASSERT_TRUE(piece.ok()) << piece.status();
      EXPECT_TRUE(ValidateUtf8(piece->text, "piece").ok()) << name << " step " << i;
      if (piece->text.empty()) ++empty_steps;
      streamed += piece->text;
    }
    EXPECT_EQ(streamed, text) << name;
    EXPECT_GT(empty_steps, 0) << name;  // the emoji is split in byte tokens
  }
  auto tok = LoadTokenizer(VocabPath("gpt-2"));
  ASSERT_TRUE(tok.ok());
  auto bad = DecodeIncremental(**tok, {}, std::vector<int32_t>{99999}, false);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("ids[0] = 99999"));
}


// stories260K: the known encoding from SOURCES.md through every form the
// model carries its tokenizer in.
TEST(TokenizerTest, Stories260KKnownEncodingInEveryForm) {
  const std::string dir = testing::SharedModelsDir();
  const std::vector<int32_t> expected = {403, 407, 261, 378, 432, 383, 286, 261,
                                         376, 298, 315, 421, 395, 317, 426};
  const std::string text = "Once upon a time, there was a little girl named Lily.";
  for (const std::string& path :
       {dir + "/stories260K/tok512.model", dir + "/stories260K-hf", dir + "/stories260K/tok512.bin",
        dir + "/stories260K/stories260K.gguf"}) {
    auto tok = LoadTokenizer(path);
    ASSERT_TRUE(tok.ok()) << path << ": " << tok.status();
    EXPECT_EQ((*tok)->kind(), "sentencepiece") << path;
    EXPECT_EQ((*tok)->vocab_size(), 512) << path;
    auto enc = (*tok)->Encode(text, false);
    ASSERT_TRUE(enc.ok()) << enc.status();
    EXPECT_THAT(enc->ids, ElementsAreArray(expected)) << path;
    auto with_bos = (*tok)->Encode(text, true);
    ASSERT_TRUE(with_bos.ok());
    EXPECT_EQ(with_bos->ids.front(), 1) << path;
    EXPECT_EQ(*(*tok)->Decode(with_bos->ids, true), text) << path;
    // skip_special_tokens drops <unk> (0), <s>, </s> as HF's all_special_ids
    // does; without it they are shown as their text.
    const std::vector<int32_t> specials = {0, 1, 403, 2};
    EXPECT_EQ(*(*tok)->Decode(specials, true), "Once") << path;
    EXPECT_EQ(*(*tok)->Decode(specials, false), "<unk><s> Once</s>") << path;
    EXPECT_EQ((*tok)->bos_id(), 1);
    EXPECT_EQ((*tok)->eos_id(), 2);
    EXPECT_EQ((*tok)->Type(3), TokenType::kByte);
    EXPECT_EQ((*tok)->TokenBytes(3 + 0x0A), "\n");
  }
}

// Golden ids from Debian's python3-sentencepiece (make_sentencepiece_golden.py).
TEST(TokenizerTest, Stories260KAgreesWithPythonSentencePiece) {
  const std::string dir = testing::SharedModelsDir();
  const nlohmann::json golden = nlohmann::json::parse(
      ReadAll(testing::SourceDir() + "/tests/lib/tokenizer/testdata/stories260K_sentencepiece_golden.json"));
  const auto& cases = golden["cases"];
  ASSERT_GT(cases.size(), 400u);
  struct Form {
    std::string path;
    bool keeps_whitespace;  // no NormalizerSpec: runs of spaces are kept
  };
  std::vector<std::unique_ptr<Tokenizer>> toks;
  const std::vector<Form> forms = {{dir + "/stories260K/tok512.model", false},
                                   {dir + "/stories260K-hf/tokenizer.model", false},
                                   {dir + "/stories260K/tok512.bin", true},
                                   {dir + "/stories260K/stories260K.gguf", true}};
  for (const Form& f : forms) {
    auto tok = LoadTokenizer(f.path);
    ASSERT_TRUE(tok.ok()) << f.path << ": " << tok.status();
    toks.push_back(*std::move(tok));
  }
  int agree_all = 0;
  for (const auto& c : cases) {
    const std::string text = c["text"];
    std::vector<std::vector<int32_t>> got;
    for (size_t k = 0; k < forms.size(); ++k) {
      const char* ids_key = forms[k].keeps_whitespace ? "ids_keep_ws" : "ids";
      const char* dec_key = forms[k].keeps_whitespace ? "decoded_keep_ws" : "decoded";
      auto enc = toks[k]->Encode(text, false);
      ASSERT_TRUE(enc.ok()) << enc.status();
      EXPECT_EQ(enc->ids, c[ids_key].get<std::vector<int32_t>>()) << forms[k].path << " \"" << text << "\"";
      auto dec = toks[k]->Decode(enc->ids, false);
      ASSERT_TRUE(dec.ok());
      EXPECT_EQ(*dec, c[dec_key].get<std::string>()) << forms[k].path << " \"" << text << "\"";
      got.push_back(enc->ids);
    }
    if (c["ids"] == c["ids_keep_ws"]) {
      for (size_t k = 1; k < got.size(); ++k) EXPECT_EQ(got[k], got[0]) << text;
      ++agree_all;
    }
  }
  EXPECT_GT(agree_all, 100);  // the corpus has plenty of texts all four forms share
}

// Code points of a UTF-8 string, as Python indexes a str.
std::vector<std::string> Chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

// A Hugging Face Llama-style tokenizer.json (Prepend/Replace "▁"
// normalizer, BPE with byte_fallback) made from the llama-spm GGUF the way
// transformers' LlamaConverter makes one from a SentencePiece model: every
// split of a piece into two vocabulary pieces is a merge, ordered by the
// piece's score (higher first). It must give HF's fixture ids.
TEST(TokenizerTest, HfMetaspaceBpeJsonGivesTheFixtureIds) {
  auto spm = LoadTokenizer(VocabPath("llama-spm"));
  ASSERT_TRUE(spm.ok()) << spm.status();
  const Tokenizer& t = **spm;
  nlohmann::json vocab = nlohmann::json::object();
  std::map<std::string, int32_t> ids;
  for (int32_t i = 0; i < t.vocab_size(); ++i) {
    vocab[t.Piece(i)] = i;
    ids[t.Piece(i)] = i;
  }
  struct M { std::string l, r; float score; int32_t piece, lid, rid; };
  std::vector<M> merges;
  for (int32_t i = 0; i < t.vocab_size(); ++i) {
    if (t.Type(i) != TokenType::kNormal) continue;
    const std::vector<std::string> cs = Chars(t.Piece(i));
    std::vector<M> local;
    for (size_t k = 1; k < cs.size(); ++k) {
      std::string l, r;
      for (size_t a = 0; a < k; ++a) l += cs[a];
      for (size_t a = k; a < cs.size(); ++a) r += cs[a];
      auto li = ids.find(l), ri = ids.find(r);
      if (li != ids.end() && ri != ids.end()) local.push_back({l, r, t.Score(i), i, li->second, ri->second});
    }
    std::sort(local.begin(), local.end(), [](const M& a, const M& b) {
      return std::make_pair(a.lid, a.rid) < std::make_pair(b.lid, b.rid);
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(), [](const M& a, const M& b) { return a.score > b.score; });
  nlohmann::json jm = nlohmann::json::array();
  for (const M& m : merges) jm.push_back(m.l + " " + m.r);
  nlohmann::json j = nlohmann::json::parse(R"({
    "version": "1.0",
    "added_tokens": [{"id": 0, "content": "<unk>", "special": true},
                     {"id": 1, "content": "<s>", "special": true},
                     {"id": 2, "content": "</s>", "special": true}],
    "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
    "pre_tokenizer": null,
    "post_processor": {"type": "TemplateProcessing", "single": [
        {"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]},
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true}
  })");
  j["model"]["vocab"] = vocab;
  j["model"]["merges"] = jm;
  const std::string dir = vocabd::testing::ProcessTempDir() + "/llama_hf_json";
  std::filesystem::create_directories(dir);
  { std::ofstream f(dir + "/tokenizer.json"); f << j.dump(); }
  auto hf = LoadTokenizer(dir);
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_EQ((*hf)->kind(), "bpe");
  EXPECT_EQ((*hf)->bos_id(), 1);
  EXPECT_TRUE((*hf)->add_bos());
  for (const Case& c : ReadCases(VocabPath("llama-spm"))) {
    auto enc = (*hf)->Encode(c.text, false);
    ASSERT_TRUE(enc.ok()) << enc.status();
    EXPECT_THAT(enc->ids, ElementsAreArray(c.ids)) << "\"" << c.text << "\"";
    EXPECT_EQ(*(*hf)->Decode(enc->ids, false), c.text);
    auto with_bos = (*hf)->Encode(c.text, true);
    ASSERT_TRUE(with_bos.ok());
    EXPECT_EQ(with_bos->ids.front(), 1);
  }
}

// A BERT tokenizer.json with the bert-bge GGUF's vocabulary in BERT's own
// "##" form gives the same ids as the GGUF (the fixture's HF ids).
TEST(TokenizerTest, HfWordPieceJsonGivesTheFixtureIds) {
  auto gguf = LoadTokenizer(VocabPath("bert-bge"));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  nlohmann::json vocab = nlohmann::json::object();
  for (int32_t i = 0; i < (*gguf)->vocab_size(); ++i) vocab[(*gguf)->Piece(i)] = i;
  nlohmann::json added = nlohmann::json::array();
  for (const auto& [id, s] : std::vector<std::pair<int, std::string>>{
           {0, "[PAD]"}, {100, "[UNK]"}, {101, "[CLS]"}, {102, "[SEP]"}, {103, "[MASK]"}}) {
    added.push_back({{"id", id}, {"content", s}, {"special", true}});
  }
  nlohmann::json j = nlohmann::json::parse(R"({
    "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                   "strip_accents": null, "lowercase": true},
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]},
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
              "max_input_chars_per_word": 100}
  })");
  j["added_tokens"] = added;
  j["model"]["vocab"] = vocab;
  const std::string dir = vocabd::testing::ProcessTempDir() + "/bert_hf_json";
  std::filesystem::create_directories(dir);
  { std::ofstream f(dir + "/tokenizer.json"); f << j.dump(); }
  auto hf = LoadTokenizer(dir + "/tokenizer.json");
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_EQ((*hf)->kind(), "wordpiece");
  for (const Case& c : ReadCases(VocabPath("bert-bge"))) {
    auto enc = (*hf)->Encode(c.text, false);
    ASSERT_TRUE(enc.ok()) << enc.status();
    EXPECT_THAT(enc->ids, ElementsAreArray(c.ids)) << "\"" << c.text << "\"";
  }
  auto enc = (*hf)->Encode("Hello", true);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->ids.front(), 101);
  EXPECT_EQ(enc->ids.back(), 102);
}

// Words longer than 64 symbols take the heap path of the BPE merge loop:
// it must give what a plain reference BPE (rank-ordered merges on strings,
// written here from the GGUF's merges list) gives.
TEST(TokenizerTest, LongWordsMatchAReferenceBpe) {
  auto tok = LoadTokenizer(VocabPath("gpt-2"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string gguf_bytes = ReadAll(VocabPath("gpt-2"));
  auto g = ParseGguf(reinterpret_cast<const uint8_t*>(gguf_bytes.data()), gguf_bytes.size(), "gpt-2");
  ASSERT_TRUE(g.ok()) << g.status();
  std::map<std::pair<std::string, std::string>, int> rank;
  const auto& merges = g->Find("tokenizer.ggml.merges")->array_s;
  for (size_t r = 0; r < merges.size(); ++r) {
    const size_t sp = merges[r].find(' ', 1);
    rank.emplace(std::make_pair(merges[r].substr(0, sp), merges[r].substr(sp + 1)), static_cast<int>(r));
  }
  std::map<std::string, int32_t> ids;
  for (int32_t i = 0; i < (*tok)->vocab_size(); ++i) ids[(*tok)->Piece(i)] = i;
  std::mt19937 rng(14);
  const std::string letters = "etaoinshrdlucmfwypvbgkqjxz";
  for (int trial = 0; trial < 30; ++trial) {
    std::string word;
    const int len = 65 + static_cast<int>(rng() % 300);
    for (int k = 0; k < len; ++k) word += letters[rng() % (trial % 2 ? 6 : letters.size())];
    // Reference: symbols are single letters (ASCII letters map to themselves).
    std::vector<std::string> sym;
    for (char c : word) sym.push_back(std::string(1, c));
    while (true) {
      int best = -1, best_rank = INT32_MAX;
      for (size_t k = 0; k + 1 < sym.size(); ++k) {
        auto it = rank.find({sym[k], sym[k + 1]});
        if (it != rank.end() && it->second < best_rank) { best_rank = it->second; best = static_cast<int>(k); }
      }
      if (best < 0) break;
      sym[best] += sym[best + 1];
      sym.erase(sym.begin() + best + 1);
    }
    std::vector<int32_t> want;
    for (const auto& s : sym) want.push_back(ids.at(s));
    auto enc = (*tok)->EncodeIds(word, false);
    ASSERT_TRUE(enc.ok());
    EXPECT_EQ(*enc, want) << word;
  }
  // A 1 MB word finishes (O(n log n)) and decodes back.
  std::string big(1 << 20, 'a');
  for (size_t k = 0; k < big.size(); k += 7) big[k] = 'b';
  auto enc = (*tok)->EncodeIds(big, false);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(*(*tok)->Decode(*enc, false), big);
}

// Long SentencePiece words (> 64 symbols: the heap path of the merge loop)
// must give what a plain reference gives: sentencepiece's BPE written on
// strings here (merge the adjacent pair whose concatenation is a NORMAL
// piece with the highest score, ties leftmost).
TEST(TokenizerTest, SentencePieceLongWordsMatchAReference) {
  auto tok = LoadTokenizer(VocabPath("llama-spm"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  std::map<std::string, int32_t> ids;
  for (int32_t i = 0; i < (*tok)->vocab_size(); ++i) {
    if ((*tok)->Type(i) == TokenType::kNormal) ids.emplace((*tok)->Piece(i), i);
  }
  std::mt19937 rng(14);
  const std::string letters = "etaoinshrdlucmfwypvbgkqjxz";
  for (int trial = 0; trial < 30; ++trial) {
    std::string word;
    const int len = 65 + static_cast<int>(rng() % 300);
    for (int k = 0; k < len; ++k) word += letters[rng() % (trial % 2 ? 6 : letters.size())];
    std::vector<std::string> sym = {"\xE2\x96\x81"};  // the dummy prefix
    for (char c : word) sym.push_back(std::string(1, c));
    while (true) {
      int best = -1;
      float best_score = 0.0f;
      for (size_t k = 0; k + 1 < sym.size(); ++k) {
        auto it = ids.find(sym[k] + sym[k + 1]);
        if (it == ids.end()) continue;
        const float sc = (*tok)->Score(it->second);
        if (best < 0 || sc > best_score) {
          best_score = sc;
          best = static_cast<int>(k);
        }
      }
      if (best < 0) break;
      sym[best] += sym[best + 1];
      sym.erase(sym.begin() + best + 1);
    }
    std::vector<int32_t> want;
    for (const auto& x : sym) want.push_back(ids.at(x));
    auto enc = (*tok)->EncodeIds(word, false);
    ASSERT_TRUE(enc.ok());
    EXPECT_EQ(*enc, want) << word;
  }
  std::string big(1 << 20, 'a');
  for (size_t k = 0; k < big.size(); k += 7) big[k] = 'b';
  auto enc = (*tok)->EncodeIds(big, false);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(*(*tok)->Decode(*enc, false), big);
}

// Byte-fallback pieces of one character all carry the character's span:
// offsets never split a UTF-8 character.
TEST(TokenizerTest, SentencePieceBytePiecesShareTheCharacterSpan) {
  auto tok = LoadTokenizer(testing::SharedModelsDir() + "/stories260K/tok512.model");
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto enc = (*tok)->Encode("a \xE8\xAA\x9E!", false);  // "a 語!"
  ASSERT_TRUE(enc.ok()) << enc.status();
  using P = std::pair<int64_t, int64_t>;
  std::vector<P> byte_spans;
  for (size_t k = 0; k < enc->ids.size(); ++k) {
    if ((*tok)->Type(enc->ids[k]) == TokenType::kByte) byte_spans.push_back(enc->offsets[k]);
  }
  // "▁a" "▁" <0xE8> <0xAA> <0x9E> "!"
  EXPECT_THAT(enc->ids, ElementsAre(261, 410, 3 + 0xE8, 3 + 0xAA, 3 + 0x9E, 443));
  EXPECT_THAT(byte_spans, ElementsAre(P{2, 5}, P{2, 5}, P{2, 5}));
  EXPECT_EQ(*(*tok)->Decode(enc->ids, false), "a \xE8\xAA\x9E!");
}

// A sentencepiece ModelProto written by hand (protobuf wire format), for
// the .model reader.
class ModelProtoWriter {
 public:
  void Piece(const std::string& piece, float score, int type) {
    std::string sp;
    Bytes(1, piece, &sp);
    Tag(2, 5, &sp);
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
  static void Tag(int field, int wire, std::string* out) { V((uint64_t(field) << 3) | wire, out); }
  static void Varint(int field, int64_t v, std::string* out) {
    Tag(field, 0, out);
    V(static_cast<uint64_t>(v), out);
  }
  static void Bytes(int field, const std::string& b, std::string* out) {
    Tag(field, 2, out);
    V(b.size(), out);
    *out += b;
  }
  std::string model_, trainer_, normalizer_;
};

// <unk> <s> </s> ▁ a b ab(UNUSED) <sep>(USER_DEFINED); BPE, no byte pieces.
ModelProtoWriter SmallModel() {
  ModelProtoWriter w;
  w.Piece("<unk>", 0, 2);
  w.Piece("<s>", 0, 3);
  w.Piece("</s>", 0, 3);
  w.Piece("\xE2\x96\x81", -1, 1);
  w.Piece("a", -2, 1);
  w.Piece("b", -3, 1);
  w.Piece("ab", 5, 5);
  w.Piece("<sep>", 0, 4);
  w.Trainer(3, 2);  // model_type BPE
  return w;
}

TEST(TokenizerTest, SentencePieceModelFileNormalizerUnusedAndUserDefined) {
  ModelProtoWriter w = SmallModel();
  auto tok = LoadTokenizer(w.Write("small_spm"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->kind(), "sentencepiece");
  EXPECT_EQ((*tok)->Type(6), TokenType::kUnused);
  EXPECT_EQ((*tok)->Type(7), TokenType::kUserDefined);
  // NormalizerSpec defaults: dummy prefix, extra spaces removed. "ab" is
  // merged first (score 5) but UNUSED: split back into "a" "b". The
  // user-defined piece is matched whole.
  auto enc = (*tok)->Encode("  ab   b<sep>a  ", false);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_THAT(enc->ids, ElementsAre(3, 4, 5, 3, 5, 7, 4));
  using P = std::pair<int64_t, int64_t>;
  EXPECT_THAT(enc->offsets, ElementsAre(P{2, 2}, P{2, 3}, P{3, 4}, P{4, 7}, P{7, 8}, P{8, 13},
                                        P{13, 14}));
  EXPECT_EQ(*(*tok)->Decode(enc->ids, false), "ab b<sep>a");
  // Only spaces: nothing. Without byte pieces a run of unknown characters
  // is one unk.
  EXPECT_TRUE((*tok)->Encode("   ", false)->ids.empty());
  auto unk = (*tok)->Encode("xy", false);
  ASSERT_TRUE(unk.ok());
  EXPECT_THAT(unk->ids, ElementsAre(3, 0));
  EXPECT_THAT(unk->offsets, ElementsAre(P{0, 0}, P{0, 2}));
  // remove_extra_whitespaces = false, add_dummy_prefix = false: every
  // space is a "▁".
  ModelProtoWriter keep = SmallModel();
  keep.Normalizer(3, 0);
  keep.Normalizer(4, 0);
  auto tok2 = LoadTokenizer(keep.Write("small_spm_keep"));
  ASSERT_TRUE(tok2.ok()) << tok2.status();
  EXPECT_THAT((*tok2)->Encode("a  b ", false)->ids, ElementsAre(4, 3, 3, 5, 3));
}

TEST(TokenizerTest, SentencePieceModelFileRefusesWhatItCannotRun) {
  auto expect_refused = [](const std::string& path, const std::string& what) {
    auto tok = LoadTokenizer(path);
    ASSERT_FALSE(tok.ok()) << path;
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument) << tok.status();
    EXPECT_THAT(tok.status().message(), HasSubstr(what));
  };
  for (int type : {3, 4}) {
    ModelProtoWriter w = SmallModel();
    w.Trainer(3, type);
    expect_refused(w.Write("spm_type" + std::to_string(type)), "trainer_spec.model_type = " + std::to_string(type));
  }
  {
    ModelProtoWriter w;  // no model_type: UNIGRAM, sentencepiece's default
    w.Piece("<unk>", 0, 2);
    w.Piece("a", 0, 1);
    auto tok = LoadTokenizer(w.Write("spm_unigram_default"));
    ASSERT_TRUE(tok.ok()) << tok.status();
    EXPECT_EQ((*tok)->kind(), "unigram");
  }
  {
    ModelProtoWriter w = SmallModel();
    w.NormalizerBytes(1, "nmt_nfkc");
    w.NormalizerBytes(2, std::string(64, '\x01'));
    expect_refused(w.Write("spm_charsmap"),
                   "normalizer_spec.precompiled_charsmap (name \"nmt_nfkc\") (64 bytes) is malformed: "
                   "trie size 16843009");
  }
  {
    ModelProtoWriter w = SmallModel();
    w.Trainer(24, 1);
    expect_refused(w.Write("spm_suffix"), "trainer_spec.treat_whitespace_as_suffix");
  }
  {
    ModelProtoWriter w = SmallModel();
    w.Trainer(40, 99);
    expect_refused(w.Write("spm_unk"), "trainer_spec.unk_id = 99");
  }
  {
    ModelProtoWriter w = SmallModel();
    w.Piece("c", 0, 9);
    expect_refused(w.Write("spm_piece_type"), "pieces[8].type = 9");
  }
  const std::string junk = vocabd::testing::ProcessTempDir() + "/spm_junk.model";
  {
    std::ofstream f(junk, std::ios::binary);
    f << "\x0A\xFF\xFF\xFF\x0F" << "abc";  // a length past the end
  }
  expect_refused(junk, "not a sentencepiece model");
}

// A minimal GGUF v3 writer for tokenizer metadata (no tensors).
class GgufWriter {
 public:
  void Str(const std::string& key, const std::string& v) { Key(key, 8); S(v); ++n_; }
  void U32(const std::string& key, uint32_t v) { Key(key, 4); Put(v); ++n_; }
  void Strs(const std::string& key, const std::vector<std::string>& v) {
    Key(key, 9); Put(uint32_t{8}); Put(uint64_t{v.size()});
    for (const auto& x : v) S(x);
    ++n_;
  }
  void F32s(const std::string& key, const std::vector<float>& v) {
    Key(key, 9); Put(uint32_t{6}); Put(uint64_t{v.size()});
    for (float x : v) Put(x);
    ++n_;
  }
  void I32s(const std::string& key, const std::vector<int32_t>& v) {
    Key(key, 9); Put(uint32_t{5}); Put(uint64_t{v.size()});
    for (int32_t x : v) Put(x);
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

// A tiny SentencePiece-style vocabulary: <unk> <s> </s> <0x00>..<0xFF> ▁ a b ▁a.
void SmallLlamaVocab(GgufWriter* w, std::vector<int32_t> types_override = {}) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
  }
  for (const char* t : {"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a"}) {
    tokens.push_back(t);
    types.push_back(1);
  }
  std::vector<float> scores(tokens.size(), 0.0f);
  scores.back() = 1.0f;
  if (!types_override.empty()) types = types_override;
  w->Str("tokenizer.ggml.model", "llama");
  w->Strs("tokenizer.ggml.tokens", tokens);
  w->F32s("tokenizer.ggml.scores", scores);
  w->I32s("tokenizer.ggml.token_type", types);
}

TEST(TokenizerTest, SmallGgufVocabularyWorks) {
  GgufWriter w;
  SmallLlamaVocab(&w);
  auto tok = LoadTokenizer(w.Write("small_llama"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto enc = (*tok)->Encode("a ab\n", true);
  ASSERT_TRUE(enc.ok()) << enc.status();
  // <s> ▁a ▁a b <0x0A>
  EXPECT_THAT(enc->ids, ElementsAre(1, 262, 262, 261, 3 + 0x0A));
  EXPECT_EQ(*(*tok)->Decode(enc->ids, true), "a ab\n");
}

TEST(TokenizerTest, MalformedGgufTokenizerMetadataNamesTheKey) {
  struct Bad {
    std::string name;
    std::function<void(GgufWriter*)> write;
    std::string message;
  };
  const std::vector<Bad> cases = {
      {"model_not_string", [](GgufWriter* w) { w->U32("tokenizer.ggml.model", 1); },
       "tokenizer.ggml.model is not a string"},
      {"no_tokens", [](GgufWriter* w) { w->Str("tokenizer.ggml.model", "llama"); },
       "tokenizer.ggml.tokens missing"},
      {"unknown_model", [](GgufWriter* w) {
         w->Str("tokenizer.ggml.model", "rwkv");
         w->Strs("tokenizer.ggml.tokens", {"a"});
       }, "tokenizer.ggml.model \"rwkv\" is not supported"},
      {"scores_count", [](GgufWriter* w) {
         w->Str("tokenizer.ggml.model", "llama");
         w->Strs("tokenizer.ggml.tokens", {"<unk>", "a"});
         w->F32s("tokenizer.ggml.scores", {0.0f});
       }, "tokenizer.ggml.scores has 1 values for 2 tokens"},
      {"type_range", [](GgufWriter* w) {
         w->Str("tokenizer.ggml.model", "llama");
         w->Strs("tokenizer.ggml.tokens", {"<unk>", "a"});
         w->I32s("tokenizer.ggml.token_type", {2, 9});
       }, "tokenizer.ggml.token_type[1] = 9"},
      {"bos_range", [](GgufWriter* w) {
         w->Str("tokenizer.ggml.model", "llama");
         w->Strs("tokenizer.ggml.tokens", {"<unk>", "a"});
         w->I32s("tokenizer.ggml.token_type", {2, 1});
         w->U32("tokenizer.ggml.bos_token_id", 7);
       }, "bos id 7 is outside [0, 2)"},
      {"no_unknown", [](GgufWriter* w) {
         w->Str("tokenizer.ggml.model", "llama");
         w->Strs("tokenizer.ggml.tokens", {"<s>", "a"});
         w->I32s("tokenizer.ggml.token_type", {3, 1});
         w->U32("tokenizer.ggml.bos_token_id", 0);
         w->U32("tokenizer.ggml.eos_token_id", 0);
         w->U32("tokenizer.ggml.unknown_token_id", 0);
       }, "no token of type UNKNOWN"},
      {"bad_byte_piece", [](GgufWriter* w) {
         w->Str("tokenizer.ggml.model", "llama");
         w->Strs("tokenizer.ggml.tokens", {"<unk>", "<0xZZ>"});
         w->I32s("tokenizer.ggml.token_type", {2, 6});
         w->U32("tokenizer.ggml.bos_token_id", 0);
         w->U32("tokenizer.ggml.eos_token_id", 0);
       }, "token 1 \"<0xZZ>\" is of type BYTE but not <0xXX>"},
      {"no_merges", [](GgufWriter* w) {
         w->Str("tokenizer.ggml.model", "gpt2");
         w->Strs("tokenizer.ggml.tokens", {"a"});
       }, "tokenizer.ggml.merges missing"},
      {"unknown_pre", [](GgufWriter* w) {
         w->Str("tokenizer.ggml.model", "gpt2");
         w->Str("tokenizer.ggml.pre", "martian");
         w->Strs("tokenizer.ggml.tokens", {"a"});
         w->Strs("tokenizer.ggml.merges", {});
       }, "tokenizer.ggml.pre: pre-tokenizer \"martian\" is not known"},
      {"bad_merge", [](GgufWriter* w) {
         w->Str("tokenizer.ggml.model", "gpt2");
         w->Strs("tokenizer.ggml.tokens", {"a"});
         w->Strs("tokenizer.ggml.merges", {"ab"});
       }, "merges[0] = \"ab\" is not \"left right\""},
  };
  for (const Bad& b : cases) {
    GgufWriter w;
    b.write(&w);
    auto tok = LoadTokenizer(w.Write("bad_" + b.name));
    ASSERT_FALSE(tok.ok()) << b.name;
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument) << b.name << ": " << tok.status();
    EXPECT_THAT(std::string(tok.status().message()), HasSubstr(b.message)) << b.name;
  }
}

TEST(TokenizerTest, UnsupportedTokenizerJsonPartsAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"model": {"type": "WordLevel", "vocab": {}}})", "model.type = \"WordLevel\" is not supported"},
      {R"({"model": {"type": "Unigram", "vocab": {}}})", "model.vocab is not an array of [piece, score]"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "normalizer": {"type": "NFKC2"}})", "normalizer.type = \"NFKC2\" is not supported"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "pre_tokenizer": {"type": "Whitespaces"}})", "pre_tokenizer.type = \"Whitespaces\" is not supported"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [7]}})", "model.merges[0] = 7 is not a merge"},
      {R"({"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []}})", "model.vocab[\"a\"] = \"x\" is not a token id"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "("}, "behavior": "Isolated"}})",
       "split regex \"(\""},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways"}})",
       "pre_tokenizer.behavior = \"Sideways\" is not a behavior"},
      {R"({"model": 3})", "no \"model\" object"},
      {R"(not json)", "not valid JSON"},
  };
  int k = 0;
  for (const auto& [json, message] : cases) {
    const std::string path = vocabd::testing::ProcessTempDir() + "/bad_" + std::to_string(k++) + "_tokenizer.json";
    { std::ofstream f(path); f << json; }
    auto tok = LoadTokenizer(path);
    ASSERT_FALSE(tok.ok()) << json;
    EXPECT_EQ(tok.status().code(), absl::StatusCode::kInvalidArgument) << tok.status();
    EXPECT_THAT(std::string(tok.status().message()), HasSubstr(message)) << json;
    EXPECT_THAT(std::string(tok.status().message()), HasSubstr(path));
  }
}

// Encode/Decode are const and thread-safe: threads encoding at once get the
// fixture ids (run under TSan in CI).
TEST(TokenizerTest, ConcurrentEncodeGivesTheSameIds) {
  for (const char* name : {"llama-spm", "gpt-2", "bert-bge"}) {
    auto tok = LoadTokenizer(VocabPath(name));
    ASSERT_TRUE(tok.ok());
    const std::vector<Case> cases = ReadCases(VocabPath(name));
    std::vector<std::thread> threads;
    std::atomic<int> mismatches{0};
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int rep = 0; rep < 3; ++rep) {
          for (const Case& c : cases) {
            auto enc = (*tok)->Encode(c.text, false);
            if (!enc.ok() || enc->ids != c.ids) ++mismatches;
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(mismatches.load(), 0) << name;
  }
}

TEST(TokenizerTest, CheckpointLookup) {
  const std::string dir = testing::SharedModelsDir();
  // llama2.c: tok512.bin beside stories260K.bin.
  auto t = LoadTokenizerForCheckpoint(dir + "/stories260K/stories260K.bin", "", 512);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT((*t)->source(), HasSubstr("tok512.bin"));
  // HF folder: tokenizer.model.
  t = LoadTokenizerForCheckpoint(dir + "/stories260K-hf", "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT((*t)->source(), HasSubstr("tokenizer.model"));
  // A safetensors file: its folder's tokenizer.json.
  t = LoadTokenizerForCheckpoint(dir + "/fake_gpt2/model.safetensors", "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT((*t)->source(), HasSubstr("tokenizer.json"));
  // GGUF: embedded.
  t = LoadTokenizerForCheckpoint(dir + "/llama-2-tiny-random/llama-2-tiny-random.gguf", "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab_size(), 32000);
  // Explicit path wins.
  t = LoadTokenizerForCheckpoint(dir + "/stories260K/stories260K.bin",
                                 dir + "/stories260K/tok512.model");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT((*t)->source(), HasSubstr("tok512.model"));
  // A GGUF without tokenizer metadata names what was looked for.
  auto q = LoadTokenizerForCheckpoint(dir + "/quant/synth-v1024-h512-Q8_0.gguf", "");
  if (!q.ok()) {
    EXPECT_EQ(q.status().code(), absl::StatusCode::kNotFound) << q.status();
    EXPECT_THAT(q.status().message(), HasSubstr("tokenizer.ggml"));
  }
  // A llama2.c checkpoint with a vocab size no tok*.bin has.
  auto wrong = LoadTokenizerForCheckpoint(dir + "/stories260K/stories260K.bin", "", 1000);
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("vocab_size is 1000"));
}

TEST(TokenizerTest, MissingAndMalformedFiles) {
  auto missing = LoadTokenizer("/nonexistent/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  const std::string tmp = vocabd::testing::ProcessTempDir() + "/bad_tokenizer.json";
  {
    std::ofstream f(tmp);
    f << "{\"model\": {\"type\": \"Unigram\", \"vocab\": {}}}";
  }
  auto bad = LoadTokenizer(tmp);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string junk = vocabd::testing::ProcessTempDir() + "/tokjunk.bin";
  {
    std::ofstream f(junk, std::ios::binary);
    f << "\x07\x00\x00\x00\x00\x00\x00\x00\xFF\xFF\xFF\x7F";
  }
  auto j = LoadTokenizer(junk);
  ASSERT_FALSE(j.ok());
  EXPECT_THAT(j.status().message(), HasSubstr("not a llama2.c tokenizer"));
}

}  // namespace
}  // namespace vocabd
