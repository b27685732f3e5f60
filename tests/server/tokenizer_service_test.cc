// TokenizerService, token pieces in Score/ScoreStream, candidate-token
// scoring and GetModel's tokenizer fields, on a real server (127.0.0.1:0).
//
// Tokenizers: stories260K loads the tok512.bin beside its .bin (llama2.c);
// "flagtok" is the same checkpoint with --tokenizer pointing at
// stories260K-hf/tokenizer.model; "notok" (tests/data/forms/gpt2, no
// tokenizer files) has none. Every id expected below is SentencePiece's own
// (SOURCES.md).
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "client/vocabd_client.h"
#include "proto/tensor_codec.h"
#include "server/server.h"
#include "tests/test_util.h"

namespace vocabd::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr char kStories[] = "stories260K";
constexpr char kNoTok[] = "notok";
constexpr char kFlagTok[] = "flagtok";
constexpr int64_t kMaxTextBytes = 4096;
const char kLily[] = "Once upon a time, there was a little girl named Lily.";
const std::vector<int64_t> kLilyIds = {403, 407, 261, 378, 432, 383, 286, 261,
                                       376, 298, 315, 421, 395, 317, 426};

class TokenizerServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    VocabdServer::Options options;
    options.listen_address = "127.0.0.1:0";
    options.models = {{kStories, Stories260KBin()},
                      {kNoTok, SourceDir() + "/tests/data/forms/gpt2"}};
    options.compute_threads = 2;
    options.max_text_bytes = kMaxTextBytes;
    options.models.push_back({kFlagTok, Stories260KBin()});
    ASSERT_TRUE(options.serving
                    .AddTokenizerFlag(absl::StrCat(kFlagTok, "=", Stories260KHfDir(),
                                                   "/tokenizer.model"))
                    .ok());
    auto server = VocabdServer::Create(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server).release();
    VocabdClient::Options client_options;
    client_options.target = server_->target();
    client_ = std::move(*VocabdClient::Create(client_options)).release();
  }
  static void TearDownTestSuite() {
    delete client_;
    server_->Shutdown();
    delete server_;
  }
  static VocabdClient& client() { return *client_; }

  static absl::StatusOr<v1::TokenizeResponse> Tokenize(std::vector<std::string> texts,
                                                       bool pieces = false,
                                                       const std::string& model = kStories) {
    v1::TokenizeRequest r;
    r.set_model(model);
    for (auto& t : texts) r.add_texts(t);
    r.set_return_pieces(pieces);
    r.set_return_offsets(pieces);
    return client().Tokenize(r);
  }

  // The stories260K embedding rows of `ids` as hidden states [n, 64].
  static v1::Tensor HiddenOf(const std::vector<int64_t>& ids) {
    v1::EmbedRequest e;
    e.set_model(kStories);
    e.add_sequences()->mutable_token_ids()->Assign(ids.begin(), ids.end());
    auto r = client().Embed(e);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->embeddings() : v1::Tensor();
  }

  static VocabdServer* server_;
  static VocabdClient* client_;
};
VocabdServer* TokenizerServiceTest::server_ = nullptr;
VocabdClient* TokenizerServiceTest::client_ = nullptr;

void ExpectStatus(const absl::Status& s, absl::StatusCode code, const std::string& text) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(text));
}

TEST_F(TokenizerServiceTest, TokenizeKnownSentenceWithPiecesAndOffsets) {
  auto r = Tokenize({kLily, "Lily"}, /*pieces=*/true);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->results_size(), 2);
  EXPECT_EQ(r->model(), kStories);
  const v1::TokenizedText& t = r->results(0);
  std::vector<int64_t> want = {1};  // BOS: add_special_tokens unset = true
  want.insert(want.end(), kLilyIds.begin(), kLilyIds.end());
  EXPECT_THAT(t.ids(), ElementsAreArray(want));
  ASSERT_EQ(t.token_bytes_size(), t.ids_size());
  ASSERT_EQ(t.offsets_size(), t.ids_size());
  EXPECT_EQ(t.token_bytes(1), " Once");
  // BOS: its text as Detokenize without skip_special_tokens shows it (no
  // input bytes: offsets [0, 0)).
  EXPECT_EQ(t.token_bytes(0), "<s>");
  EXPECT_EQ(t.offsets(0).begin(), 0);
  EXPECT_EQ(t.offsets(0).end(), 0);
  // Every text token's span is the input it came from (the dummy-prefix
  // space of the first piece is not in the input).
  const std::string text = kLily;
  std::string rebuilt;
  for (int i = 1; i < t.ids_size(); ++i) {
    rebuilt += text.substr(t.offsets(i).begin(), t.offsets(i).end() - t.offsets(i).begin());
  }
  EXPECT_EQ(rebuilt, text);
  EXPECT_EQ(t.offsets(2).begin(), 4);  // " upon"
  EXPECT_EQ(t.offsets(2).end(), 9);
}

TEST_F(TokenizerServiceTest, TokenizeWithoutSpecialTokens) {
  v1::TokenizeRequest req;
  req.set_model(kStories);
  req.add_texts(kLily);
  req.set_add_special_tokens(false);
  auto r = client().Tokenize(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->results(0).ids(), ElementsAreArray(kLilyIds));
  EXPECT_EQ(r->results(0).pieces_size(), 0);  // not asked for
}

TEST_F(TokenizerServiceTest, TokenizeRejectsInvalidUtf8NamingTheText) {
  auto r = Tokenize({"fine", std::string("caf\xC3") + "("});
  ExpectStatus(r.status(), absl::StatusCode::kInvalidArgument,
               "texts[1]: invalid UTF-8 at byte offset 3");
}

TEST_F(TokenizerServiceTest, TokenizeRejectsTextOverTheLimit) {
  auto r = Tokenize({"ok", std::string(kMaxTextBytes + 1, 'a')});
  ExpectStatus(r.status(), absl::StatusCode::kResourceExhausted,
               absl::StrCat("texts[1] has ", kMaxTextBytes + 1, " bytes; the limit is ",
                            kMaxTextBytes));
  std::vector<std::string> many(5, std::string(kMaxTextBytes, 'a'));
  ExpectStatus(Tokenize(many).status(), absl::StatusCode::kResourceExhausted,
               "texts hold 20480 bytes in all");
}

TEST_F(TokenizerServiceTest, DetokenizeBatchAndSpecialTokens) {
  v1::DetokenizeRequest req;
  req.set_model(kStories);
  req.set_skip_special_tokens(true);
  auto* s = req.add_sequences();
  s->add_ids(1);
  for (int64_t id : kLilyIds) s->add_ids(id);
  s->add_ids(2);
  req.add_sequences()->add_ids(403);
  req.add_sequences();  // empty
  auto r = client().Detokenize(req);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->results_size(), 3);
  EXPECT_EQ(r->results(0).text(), kLily);
  EXPECT_EQ(r->results(1).text(), "Once");
  EXPECT_EQ(r->results(2).text(), "");
  // Not skipped: the control tokens show up.
  req.set_skip_special_tokens(false);
  r = client().Detokenize(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NE(r->results(0).text(), kLily);
  EXPECT_THAT(r->results(0).text(), HasSubstr("Lily."));
}

TEST_F(TokenizerServiceTest, DetokenizeRejectsIdsOutOfRange) {
  v1::DetokenizeRequest req;
  req.set_model(kStories);
  auto* s = req.add_sequences();
  s->add_ids(1);
  s->add_ids(403);
  s->add_ids(512);
  ExpectStatus(client().Detokenize(req).status(), absl::StatusCode::kInvalidArgument,
               "sequences[0].ids[2] = 512 is outside [0, 512)");
  req.set_incremental(true);
  s->set_ids(2, 5);
  s->add_previous_ids(-1);
  ExpectStatus(client().Detokenize(req).status(), absl::StatusCode::kInvalidArgument,
               "sequences[0].previous_ids[0] = -1 is outside [0, 512)");
}

// A generation loop: one id per call, previous_ids = every id before. The
// emoji is 4 byte-fallback tokens in tok512; no call returns part
// of a character, and the texts add up to the input.
TEST_F(TokenizerServiceTest, IncrementalDetokenizeNeverSplitsCharacters) {
  const std::string text = "Lily saw \xF0\x9F\x90\xB1 and caf\xC3\xA9.";
  auto tok = Tokenize({text});
  ASSERT_TRUE(tok.ok()) << tok.status();
  const auto& ids = tok->results(0).ids();
  std::string joined;
  int held_steps = 0;
  for (int i = 0; i < ids.size(); ++i) {
    v1::DetokenizeRequest req;
    req.set_model(kStories);
    req.set_incremental(true);
    req.set_skip_special_tokens(true);
    auto* s = req.add_sequences();
    s->mutable_previous_ids()->Assign(ids.begin(), ids.begin() + i);
    s->add_ids(ids[i]);
    auto r = client().Detokenize(req);
    ASSERT_TRUE(r.ok()) << r.status();
    held_steps += r->results(0).held_back_bytes() > 0;
    joined += r->results(0).text();
  }
  EXPECT_GE(held_steps, 3);  // the emoji's first 3 byte tokens (é is a piece of its own)
  EXPECT_EQ(joined, text);
}

// More than kDetokenizeInlineMaxIds ids: runs on the compute pool.
TEST_F(TokenizerServiceTest, LargeDetokenizeRunsOnThePool) {
  v1::DetokenizeRequest req;
  req.set_model(kStories);
  req.set_skip_special_tokens(true);
  auto* s = req.add_sequences();
  for (int i = 0; i < 20000; ++i) s->add_ids(403);
  auto r = client().Detokenize(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->results(0).text().size(), 4u + 5u * 19999u);  // "Once" + " Once" x 19999
}

TEST_F(TokenizerServiceTest, GetVocabularyPages) {
  int64_t start = 0;
  int pages = 0;
  std::vector<v1::VocabularyEntry> all;
  while (true) {
    v1::GetVocabularyRequest req;
    req.set_model(kStories);
    req.set_start_id(start);
    req.set_page_size(200);
    auto r = client().GetVocabulary(req);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->vocab_size(), 512);
    if (r->entries_size() == 0) break;
    ++pages;
    for (const auto& e : r->entries()) all.push_back(e);
    start = r->next_start_id();
  }
  EXPECT_EQ(pages, 3);
  ASSERT_EQ(all.size(), 512u);
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i].id(), static_cast<int64_t>(i));
  EXPECT_EQ(all[1].type(), v1::TOKEN_TYPE_CONTROL);
  EXPECT_EQ(all[13].type(), v1::TOKEN_TYPE_BYTE);
  EXPECT_EQ(all[13].token_bytes(), "\n");
  EXPECT_EQ(all[13].piece(), "<0x0A>");
  EXPECT_EQ(all[403].token_bytes(), " Once");
  EXPECT_EQ(all[403].type(), v1::TOKEN_TYPE_NORMAL);
  EXPECT_LT(all[403].score(), 0.0f);

  v1::GetVocabularyRequest bad;
  bad.set_model(kStories);
  bad.set_start_id(513);
  ExpectStatus(client().GetVocabulary(bad).status(), absl::StatusCode::kInvalidArgument,
               "start_id = 513 is outside [0, 512]");
  bad.set_start_id(0);
  bad.set_page_size(10001);
  ExpectStatus(client().GetVocabulary(bad).status(), absl::StatusCode::kInvalidArgument,
               "page_size = 10001");
}

TEST_F(TokenizerServiceTest, ModelWithoutTokenizerIsFailedPrecondition) {
  ExpectStatus(Tokenize({"hi"}, false, kNoTok).status(), absl::StatusCode::kFailedPrecondition,
               "model 'notok' has no tokenizer: ");
  v1::DetokenizeRequest d;
  d.set_model(kNoTok);
  d.add_sequences()->add_ids(1);
  ExpectStatus(client().Detokenize(d).status(), absl::StatusCode::kFailedPrecondition,
               "has no tokenizer");
  v1::GetVocabularyRequest v;
  v.set_model(kNoTok);
  ExpectStatus(client().GetVocabulary(v).status(), absl::StatusCode::kFailedPrecondition,
               "has no tokenizer");
  auto info = client().GetModel(kNoTok);
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->has_tokenizer());
  EXPECT_FALSE(info->tokenizer_missing_reason().empty());
  ExpectStatus(Tokenize({"hi"}, false, "absent").status(), absl::StatusCode::kNotFound, "absent");
}

TEST_F(TokenizerServiceTest, GetModelNamesTheTokenizer) {
  auto info = client().GetModel(kStories);
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_TRUE(info->has_tokenizer());
  EXPECT_FALSE(info->tokenizer().kind().empty());
  EXPECT_THAT(info->tokenizer().source(), HasSubstr("tok512"));
  EXPECT_EQ(info->tokenizer().vocab_size(), 512);
  EXPECT_EQ(info->tokenizer().bos_token_id(), 1);
  EXPECT_EQ(info->tokenizer().eos_token_id(), 2);
  EXPECT_TRUE(info->tokenizer_missing_reason().empty());
  auto health = client().HealthCheck("vocabd.v1.TokenizerService");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(*health, "SERVING");
}

TEST_F(TokenizerServiceTest, ScorePiecesForTopKAndTarget) {
  v1::ScoreRequest req;
  req.set_model(kStories);
  *req.mutable_hidden() = HiddenOf({1, 403, 407});
  req.add_target_ids(403);
  req.add_target_ids(407);
  req.add_target_ids(261);
  req.set_top_k(3);
  auto plain = client().Score(req);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->rows(0).target_token_bytes().empty());
  req.set_return_pieces(true);
  auto r = client().Score(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows(0).target_token_bytes(), " Once");
  EXPECT_EQ(r->rows(1).target_token_bytes(), " upon");
  EXPECT_EQ(r->rows(2).target_token_bytes(), " a");
  v1::GetVocabularyRequest v;
  v.set_model(kStories);
  v.set_page_size(512);
  auto vocab = client().GetVocabulary(v);
  ASSERT_TRUE(vocab.ok());
  for (const auto& row : r->rows()) {
    ASSERT_EQ(row.top_k_size(), 3);
    for (const auto& t : row.top_k()) {
      EXPECT_EQ(t.token_bytes(), vocab->entries(t.token_id()).token_bytes());
      EXPECT_EQ(t.piece(), vocab->entries(t.token_id()).piece());
    }
  }
  // Same numbers with and without pieces.
  EXPECT_EQ(r->rows(1).top_k(0).logprob(), plain->rows(1).top_k(0).logprob());

  req.set_model(kNoTok);
  v1::Tensor h;
  *req.mutable_hidden() = EncodeFloatTensor(std::vector<float>(8, 0.5f), {1, 8});
  ExpectStatus(client().Score(req).status(), absl::StatusCode::kFailedPrecondition,
               "has no tokenizer");
}

// candidate_ids: exact log-probs for every row, equal to ComputeLogits'
// log-softmax at those ids (same kernels, float64 logsumexp).
TEST_F(TokenizerServiceTest, ScoreCandidateIds) {
  const std::vector<int64_t> candidates = {261, 511, 3, 261, 0};
  v1::ScoreRequest req;
  req.set_model(kStories);
  *req.mutable_hidden() = HiddenOf({1, 403, 407, 261});
  req.mutable_candidate_ids()->Assign(candidates.begin(), candidates.end());
  req.set_return_pieces(true);
  auto r = client().Score(req);
  ASSERT_TRUE(r.ok()) << r.status();
  v1::ComputeLogitsRequest lr;
  lr.set_model(kStories);
  *lr.mutable_hidden() = req.hidden();
  lr.set_log_softmax(true);
  auto logits = client().ComputeLogits(lr);
  ASSERT_TRUE(logits.ok()) << logits.status();
  auto lp = DecodeFloatTensor(logits->logits(), "logits");
  ASSERT_TRUE(lp.ok());
  ASSERT_EQ(r->rows_size(), 4);
  for (int row = 0; row < 4; ++row) {
    ASSERT_EQ(r->rows(row).candidates_size(), 5);
    for (int c = 0; c < 5; ++c) {
      const auto& got = r->rows(row).candidates(c);
      EXPECT_EQ(got.token_id(), candidates[c]);
      EXPECT_NEAR(got.logprob(), (*lp)[row * 512 + candidates[c]], 2e-6) << row << "," << c;
    }
    EXPECT_EQ(r->rows(row).candidates(0).token_bytes(), " a");
  }
  // Bad candidates name the field.
  req.set_candidate_ids(1, 512);
  ExpectStatus(client().Score(req).status(), absl::StatusCode::kInvalidArgument,
               "candidate_ids[1] = 512 is outside [0, 512)");
  req.set_candidate_ids(1, 300);
  req.set_vocab_limit(300);
  ExpectStatus(client().Score(req).status(), absl::StatusCode::kInvalidArgument,
               "candidate_ids[1] = 300 is outside [0, 300)");
  req.set_vocab_limit(0);
  req.clear_candidate_ids();
  for (int i = 0; i < 4097; ++i) req.add_candidate_ids(i % 512);
  ExpectStatus(client().Score(req).status(), absl::StatusCode::kInvalidArgument,
               "candidate_ids has 4097 entries; at most 4096");
}

TEST_F(TokenizerServiceTest, ScoreStreamCarriesPiecesAndCandidates) {
  std::vector<v1::ScoreRequest> reqs(2);
  for (auto& req : reqs) {
    req.set_model(kStories);
    *req.mutable_hidden() = HiddenOf({1, 403});
    req.set_top_k(2);
    req.add_candidate_ids(407);
    req.set_return_pieces(true);
  }
  auto r = client().ScoreStream(reqs);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].rows(1).candidates(0).token_bytes(), " upon");
  EXPECT_FALSE((*r)[0].rows(0).top_k(0).piece().empty());
  reqs[1].set_model(kNoTok);
  *reqs[1].mutable_hidden() = EncodeFloatTensor(std::vector<float>(8, 0.5f), {1, 8});
  reqs[1].clear_candidate_ids();
  ExpectStatus(client().ScoreStream(reqs).status(), absl::StatusCode::kFailedPrecondition,
               "requests[1]: model 'notok' has no tokenizer");
}

}  // namespace
}  // namespace vocabd::testing

namespace vocabd::testing {
namespace {

// --tokenizer NAME=PATH replaces the tokenizer a checkpoint carries; the
// flag's bad forms are named.
TEST_F(TokenizerServiceTest, TokenizerFlagNamesTheTokenizerPerModel) {
  auto info = client().GetModel(kFlagTok);
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_TRUE(info->has_tokenizer());
  EXPECT_THAT(info->tokenizer().source(), HasSubstr("tokenizer.model"));
  EXPECT_EQ(info->tokenizer().kind(), "sentencepiece");
  auto ids = Tokenize({kLily}, false, kFlagTok);
  ASSERT_TRUE(ids.ok()) << ids.status();
  auto reference = Tokenize({kLily}, false, kStories);
  ASSERT_TRUE(reference.ok()) << reference.status();
  EXPECT_THAT(ids->results(0).ids(), ElementsAreArray(reference->results(0).ids()));

  ModelServingOptions serving;
  for (const char* bad : {"nopath", "=x.model", "m="}) {
    absl::Status s = serving.AddTokenizerFlag(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.message()), HasSubstr("expected NAME=PATH")) << bad;
  }
  ASSERT_TRUE(serving.AddTokenizerFlag("m=a.model").ok());
  EXPECT_THAT(std::string(serving.AddTokenizerFlag("m=b.model").message()),
              HasSubstr("already has a --tokenizer"));
}

}  // namespace
}  // namespace vocabd::testing
