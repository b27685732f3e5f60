// UTF-8 checks, U+FFFD replacement and incremental detokenization
// (lib/tokenizer/incremental_decode.h) over FakeTokenizer vocabularies with
// byte tokens that split characters, and over stories260K's tok512.bin.
#include "lib/tokenizer/incremental_decode.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/tokenizer/tokenizer_ops.h"
#include "lib/tokenizer/tokenizer_loader.h"
#include "tests/tokenizer/test_tokenizer.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;
using testing::FakeTokenizer;

TEST(Utf8Test, FirstInvalidUtf8) {
  EXPECT_EQ(FirstInvalidUtf8("plain ascii"), std::nullopt);
  EXPECT_EQ(FirstInvalidUtf8("caf\xC3\xA9 \xE2\x96\x81 \xF0\x9F\x98\x80"), std::nullopt);
  EXPECT_EQ(FirstInvalidUtf8("ab\xFF"), 2);
  EXPECT_EQ(FirstInvalidUtf8("ab\xC0\xAF"), 2);          // overlong '/'
  EXPECT_EQ(FirstInvalidUtf8("x\xED\xA0\x80"), 1);        // surrogate D800
  EXPECT_EQ(FirstInvalidUtf8("x\xF4\x90\x80\x80"), 1);    // > U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("abc\xE2\x96"), 3);          // truncated at the end
  EXPECT_EQ(FirstInvalidUtf8("\x80"), 0);                 // lone continuation
}

TEST(Utf8Test, CompleteUtf8Prefix) {
  EXPECT_EQ(CompleteUtf8Prefix(""), 0u);
  EXPECT_EQ(CompleteUtf8Prefix("abc"), 3u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE2"), 2u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE2\x96"), 2u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE2\x96\x81"), 5u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xF0\x9F\x98"), 2u);
  // Ill-formed, not incomplete: nothing is held back.
  EXPECT_EQ(CompleteUtf8Prefix("ab\xFF"), 3u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE2\x41"), 4u);
  EXPECT_EQ(CompleteUtf8Prefix("ab\xE0\x80"), 4u);  // E0 80 can never be completed
}

TEST(Utf8Test, ReplaceInvalidUtf8MaximalSubparts) {
  EXPECT_EQ(ReplaceInvalidUtf8("ok \xC3\xA9"), "ok \xC3\xA9");
  // Unicode 15 §3.9 Table 3-8 example: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64
  // -> a FFFD FFFD FFFD b FFFD c FFFD FFFD d.
  EXPECT_EQ(ReplaceInvalidUtf8("a\xF1\x80\x80\xE1\x80\xC2" "b\x80" "c\x80\xBF" "d"),
            "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c\xEF\xBF\xBD\xEF\xBF\xBD" "d");
  EXPECT_EQ(ReplaceInvalidUtf8("end\xE2\x96"), "end\xEF\xBF\xBD");
}

// ids: 0 "<s>" control, 1 " A", 2 "B", 3..5 the bytes of U+2581 (E2 96 81),
// 6..9 the bytes of U+1F600 (F0 9F 98 80), 10 0xFF, 11 " é".
FakeTokenizer MakeFake() {
  return FakeTokenizer({{"<s>", "", TokenType::kControl},
                        {"\xE2\x96\x81" "A", " A"},
                        {"B", "B"},
                        {"<0xE2>", "\xE2", TokenType::kByte},
                        {"<0x96>", "\x96", TokenType::kByte},
                        {"<0x81>", "\x81", TokenType::kByte},
                        {"<0xF0>", "\xF0", TokenType::kByte},
                        {"<0x9F>", "\x9F", TokenType::kByte},
                        {"<0x98>", "\x98", TokenType::kByte},
                        {"<0x80>", "\x80", TokenType::kByte},
                        {"<0xFF>", "\xFF", TokenType::kByte},
                        {"\xE2\x96\x81\xC3\xA9", " \xC3\xA9"}});
}

// Feeds `ids` one at a time as a generation loop would; returns the texts.
std::vector<std::string> Stream(const Tokenizer& tok, const std::vector<int32_t>& ids,
                                bool skip, std::vector<int64_t>* held = nullptr) {
  std::vector<std::string> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto r = DecodeIncremental(tok, absl::MakeConstSpan(ids.data(), i),
                               absl::MakeConstSpan(ids.data() + i, 1), skip);
    EXPECT_TRUE(r.ok()) << r.status();
    out.push_back(r.ok() ? r->text : "?");
    if (held != nullptr) held->push_back(r.ok() ? r->held_back_bytes : -1);
  }
  return out;
}

TEST(DecodeIncrementalTest, HoldsBackSplitCharacters) {
  const FakeTokenizer tok = MakeFake();
  std::vector<int64_t> held;
  // <s> " A" E2 96 81 "B" F0 9F 98 80 " é"
  const std::vector<int32_t> ids = {0, 1, 3, 4, 5, 2, 6, 7, 8, 9, 11};
  EXPECT_THAT(Stream(tok, ids, /*skip=*/true, &held),
              ::testing::ElementsAre("", "A", "", "", "\xE2\x96\x81", "B", "", "", "",
                                     "\xF0\x9F\x98\x80", " \xC3\xA9"));
  EXPECT_THAT(held, ::testing::ElementsAre(0, 0, 1, 2, 0, 0, 1, 2, 3, 0, 0));
}

TEST(DecodeIncrementalTest, ConcatenationEqualsFullDecode) {
  const FakeTokenizer tok = MakeFake();
  const std::vector<int32_t> ids = {1, 2, 3, 4, 5, 1, 11, 6, 7, 8, 9, 2, 0, 1};
  for (bool skip : {true, false}) {
    std::string joined;
    for (const std::string& t : Stream(tok, ids, skip)) joined += t;
    auto full = tok.Decode(ids, skip);
    ASSERT_TRUE(full.ok());
    EXPECT_EQ(joined, *full) << "skip " << skip;
  }
}

// More ids than the context window: the window steps back over a character
// split across the boundary (E2 | 96 81).
TEST(DecodeIncrementalTest, LongHistoryWindowStartsOnCharacterBoundary) {
  const FakeTokenizer tok = MakeFake();
  std::vector<int32_t> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(2);                  // "B" x 20
  ids.insert(ids.end(), {3, 4, 5, 6, 7, 8, 9, 6, 7, 8, 9, 1});    // split chars, " A"
  std::string joined;
  for (const std::string& t : Stream(tok, ids, true)) joined += t;
  EXPECT_EQ(joined, *tok.Decode(ids, true));
  // Previous = the 20 B's + E2 and 3 more tokens; new = 96 81 completes
  // nothing on its own but the window must not start at 96.
  std::vector<int32_t> prev(ids.begin(), ids.begin() + 21);  // ... B E2
  const std::vector<int32_t> next = {4, 5};
  auto r = DecodeIncremental(tok, prev, next, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text, "\xE2\x96\x81");
}

TEST(DecodeIncrementalTest, IllFormedBytesBecomeReplacementOnce) {
  const FakeTokenizer tok = MakeFake();
  // "B" FF "B": FF is ill-formed at once; E2 followed by "B" is ill-formed
  // when "B" arrives.
  EXPECT_THAT(Stream(tok, {2, 10, 2, 3, 2}, true),
              ::testing::ElementsAre("B", "\xEF\xBF\xBD", "B", "", "\xEF\xBF\xBD" "B"));
}

TEST(DecodeIncrementalTest, FirstTokenLeadingSpaceIsDroppedOnce) {
  const FakeTokenizer tok = MakeFake();
  EXPECT_THAT(Stream(tok, {1, 1, 11}, true), ::testing::ElementsAre("A", " A", " \xC3\xA9"));
}

// end_of_stream: the step's text plus the held-back tail as U+FFFD, the
// same as the step followed by FlushIncremental, for every cut of every
// prefix (held-back tails of 1-3 bytes, none, ill-formed bytes, a window
// longer than the context).
TEST(DecodeIncrementalTest, EndOfStreamEqualsStepThenFlush) {
  const FakeTokenizer tok = MakeFake();
  std::vector<int32_t> ids = {1, 3, 4, 5, 2, 6, 7, 8, 10, 3, 11, 6, 7};
  for (int i = 0; i < 20; ++i) ids.insert(ids.begin(), 2);
  int tails = 0;
  for (size_t end = 1; end <= ids.size(); ++end) {
    for (size_t cut = 0; cut <= end; ++cut) {
      for (bool skip : {true, false}) {
        const auto prev = absl::MakeConstSpan(ids.data(), cut);
        const auto next = absl::MakeConstSpan(ids.data() + cut, end - cut);
        auto step = DecodeIncremental(tok, prev, next, skip);
        auto last = DecodeIncremental(tok, prev, next, skip, /*end_of_stream=*/true);
        auto flush = FlushIncremental(tok, absl::MakeConstSpan(ids.data(), end), skip);
        ASSERT_TRUE(step.ok() && last.ok() && flush.ok());
        EXPECT_EQ(last->text, step->text + *flush) << end << " " << cut;
        EXPECT_EQ(last->held_back_bytes, 0);
        tails += !flush->empty();
      }
    }
  }
  EXPECT_GT(tails, 0);
}

TEST(DecodeIncrementalTest, IdsOutOfRange) {
  const FakeTokenizer tok = MakeFake();
  const std::vector<int32_t> prev = {1, 12};
  const std::vector<int32_t> ok = {1};
  auto r = DecodeIncremental(tok, prev, ok, true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("previous_ids[1] = 12 is outside [0, 12)"));
  const std::vector<int32_t> bad = {-1};
  r = DecodeIncremental(tok, ok, bad, true);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("ids[0] = -1"));
}

// The real stories260K vocabulary (tok512.bin, read as SentencePiece): the
// emoji has no piece and becomes 4 byte tokens; a literal "▁" in the input is
// SentencePiece's whitespace marker, so it decodes as a space. Golden text from
// python3-sentencepiece 0.1.97 on the same vocabulary (stories260K-hf/
// tokenizer.model): sp.decode(sp.encode(text)) == "... saw a   caté." with
// ids [403, 407, 261, 378, 410, 243, 162, 155, 131, 317, 394, 261, 410, 410,
// 280, 294, 485, 426].
TEST(DecodeIncrementalTest, Tok512StreamMatchesFullDecode) {
  auto tok = LoadTokenizer(testing::Tok512Path());
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::string text = "Once upon a time \xF0\x9F\x98\x80 Lily saw a \xE2\x96\x81 cat\xC3\xA9.";
  auto enc = (*tok)->Encode(text, false);
  ASSERT_TRUE(enc.ok());
  EXPECT_THAT(enc->ids, ::testing::ElementsAre(403, 407, 261, 378, 410, 243, 162, 155, 131, 317,
                                               394, 261, 410, 410, 280, 294, 485, 426));
  int bytes_tokens = 0;
  for (int32_t id : enc->ids) bytes_tokens += (*tok)->Type(id) == TokenType::kByte;
  EXPECT_EQ(bytes_tokens, 4);  // the emoji
  std::string joined;
  for (const std::string& t : Stream(**tok, enc->ids, true)) {
    EXPECT_EQ(FirstInvalidUtf8(t), std::nullopt);
    joined += t;
  }
  EXPECT_EQ(joined, "Once upon a time \xF0\x9F\x98\x80 Lily saw a   cat\xC3\xA9.");
}

TEST(TokenizerOpsTest, TokenizeChecks) {
  const FakeTokenizer tok = MakeFake();
  TokenizeLimits limits;
  limits.max_text_bytes = 8;
  auto r = TokenizeTexts(tok, {"B", "BB\xFF"}, false, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "texts[1]: invalid UTF-8 at byte offset 2");
  r = TokenizeTexts(tok, {"B", "BBBBBBBBB"}, false, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("texts[1] has 9 bytes; the limit is 8"));
  r = TokenizeTexts(tok, {"BBBBBBBB", "BBBBBBBB", "BBBBBBBB", "BBBBBBBB", "B"}, false, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("texts hold 33 bytes in all"));
  r = TokenizeTexts(tok, {"BB", " A"}, false, limits);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT((*r)[0].ids, ::testing::ElementsAre(2, 2));
  EXPECT_THAT((*r)[1].ids, ::testing::ElementsAre(1));
  limits.max_text_bytes = 0;
  EXPECT_EQ(limits.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TokenizerOpsTest, DetokenizeChecksAndReplaces) {
  const FakeTokenizer tok = MakeFake();
  auto r = DetokenizeSequences(tok, {{{1, 2}, {}}, {{2, 12}, {}}}, true, false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "sequences[1].ids[1] = 12 is outside [0, 12)");
  r = DetokenizeSequences(tok, {{{1}, {2}}}, true, false);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("sequences[0].previous_ids has 1 ids"));
  r = DetokenizeSequences(tok, {{{1}, {-5}}}, true, true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "sequences[0].previous_ids[0] = -5 is outside [0, 12)");
  // Non-incremental: a cut-off character becomes U+FFFD.
  r = DetokenizeSequences(tok, {{{1, 3, 4}, {}}}, true, false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].text, "A\xEF\xBF\xBD");
  // Incremental: held back instead.
  r = DetokenizeSequences(tok, {{{4}, {1, 3}}}, true, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].text, "");
  EXPECT_EQ((*r)[0].held_back_bytes, 2);
  // End of stream: the held-back bytes come out as U+FFFD, nothing is held
  // back, and "A" (the step before) + this = the non-incremental text.
  r = DetokenizeSequences(tok, {{{4}, {1, 3}, true}}, true, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].text, "\xEF\xBF\xBD");
  EXPECT_EQ((*r)[0].held_back_bytes, 0);
  // ... with no new ids as well; and nothing to flush adds nothing.
  r = DetokenizeSequences(tok, {{{}, {1, 3, 4}, true}, {{1}, {}, true}}, true, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].text, "\xEF\xBF\xBD");
  EXPECT_EQ((*r)[1].text, "A");
  EXPECT_EQ((*r)[1].held_back_bytes, 0);
  // Refused outside incremental mode, naming the sequence.
  r = DetokenizeSequences(tok, {{{1}, {}}, {{1}, {}, true}}, true, false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("sequences[1].end_of_stream is true but incremental is false"));
}

TEST(TokenizerOpsTest, VocabularyPages) {
  const FakeTokenizer tok = MakeFake();
  auto page = VocabularyPage(tok, 10, 0);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 2u);
  EXPECT_EQ((*page)[0].id, 10);
  EXPECT_EQ((*page)[0].token_bytes, "\xFF");
  EXPECT_EQ((*page)[0].type, TokenType::kByte);
  EXPECT_TRUE(VocabularyPage(tok, 12, 5)->empty());
  EXPECT_EQ(VocabularyPage(tok, 13, 5).status().message(), "start_id = 13 is outside [0, 12]");
  EXPECT_EQ(VocabularyPage(tok, 0, 10001).status().message(),
            "page_size = 10001 is outside [0, 10000]");
  EXPECT_EQ(VocabularyPage(tok, -1, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vocabd
