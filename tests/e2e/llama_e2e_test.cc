// End-to-end check of the service's two ends and RoPE: a test-side tiny Llama
// runner (tests/e2e/tiny_llama.h) whose embedding, RoPE and LM head come either
// from lib/ directly or from the vocabd gRPC service must reproduce the greedy
// stories260K sample (../shared/models/stories260K/greedy_t0_n256.txt, llama2.c
// run.c -t 0 -n 256) byte for byte, from the llama2.c `.bin` (INTERLEAVED RoPE)
// and from the HF safetensors form (HALF_SPLIT RoPE).
// A wrong RoPE pair layout must NOT reproduce it (the test can fail).

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "proto/tensor_codec.h"
#include "client/vocabd_client.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/embedding/embedding.h"
#include "lib/positions/rope.h"
#include "examples/tiny_llama/vocabd_steps.h"
#include "tests/e2e/tiny_llama.h"
#include "tests/e2e/tokenizer.h"
#include "tests/server/server_fixture.h"
#include "tests/test_util.h"

namespace vocabd::testing {
namespace {

constexpr int kSteps = 256;

std::string TokenizerPath() { return SourceDir() + "/models/stories260K/tok512.bin"; }
std::string ExpectedTextPath() { return SharedModelsDir() + "/stories260K/greedy_t0_n256.txt"; }

// Fails with the first differing byte and some context on both sides.
::testing::AssertionResult SameText(const std::string& got, const std::string& want) {
  if (got == want) return ::testing::AssertionSuccess();
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const size_t from = i >= 40 ? i - 40 : 0;
  return ::testing::AssertionFailure()
         << "texts differ first at byte " << i << " (got " << got.size() << " bytes, expected "
         << want.size() << ")\n  got:      ..." << got.substr(from, 100)
         << "\n  expected: ..." << want.substr(from, 100);
}

// ----- LOCAL backend: lib/ only ------------------------------------------

// Embedding via lib/embedding/embedding.h, RoPE via lib/positions/rope.h with `rope`, final
// RMSNorm (model.norm.weight, config eps) + tied-head argmax in plain loops.
LlamaSteps LocalSteps(const Checkpoint& ckpt, const RopeParams& rope) {
  const ModelConfig& c = ckpt.config();
  LlamaSteps steps;
  steps.embed = [&ckpt, &c](int64_t token, int64_t pos) -> absl::StatusOr<std::vector<float>> {
    std::vector<float> out(c.hidden_size);
    const WeightTensor& table = ckpt.embedding();
    absl::Status s = EmbeddingLookup(table.data, table.dtype, c.vocab_size, c.hidden_size,
                                     {token}, "token_ids", out.data());
    if (!s.ok()) return s;
    return out;
  };
  steps.rope = [rope, &c](std::vector<float>& q, std::vector<float>& k,
                          int64_t pos) -> absl::Status {
    QkTensor qt{q.data(), 1, c.num_attention_heads, 1, c.head_dim};
    QkTensor kt{k.data(), 1, c.num_key_value_heads, 1, c.head_dim};
    return ApplyRope(rope, ApplyRopeOptions{}, {pos}, qt, kt).status();
  };
  steps.head = [&ckpt, &c](const std::vector<float>& x) -> absl::StatusOr<int64_t> {
    const WeightTensor* norm = ckpt.Find(kFinalNorm);
    if (norm == nullptr) return absl::FailedPreconditionError("model.norm.weight missing");
    const int64_t n = c.hidden_size;
    float ss = 0.0f;
    for (int64_t j = 0; j < n; ++j) ss += x[j] * x[j];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + static_cast<float>(c.norm_eps));
    std::vector<float> y(n);
    for (int64_t j = 0; j < n; ++j) y[j] = norm->f32()[j] * (inv * x[j]);
    const float* w = ckpt.lm_head().f32();
    int64_t best = 0;
    float best_logit = -INFINITY;
    for (int64_t v = 0; v < c.vocab_size; ++v) {
      float acc = 0.0f;
      for (int64_t j = 0; j < n; ++j) acc += w[v * n + j] * y[j];
      if (acc > best_logit) {  // strict: lowest id wins ties (run.c argmax)
        best_logit = acc;
        best = v;
      }
    }
    return best;
  };
  return steps;
}

class E2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    expected_ = ReadFileBytes(ExpectedTextPath());
    ASSERT_EQ(expected_.size(), 566u) << ExpectedTextPath();
    auto tok = Llama2cTokenizer::Load(TokenizerPath(), 512);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::make_unique<Llama2cTokenizer>(*std::move(tok));
  }

  std::unique_ptr<Checkpoint> Load(const std::string& path) {
    auto ckpt = LoadCheckpoint(path);
    EXPECT_TRUE(ckpt.ok()) << ckpt.status();
    return ckpt.ok() ? *std::move(ckpt) : nullptr;
  }

  // Runs greedy generation; returns "" (after a test failure) on error.
  std::string Generate(const Checkpoint& ckpt, LlamaSteps steps,
                       std::vector<int64_t>* ids = nullptr) {
    auto model = TinyLlama::Create(ckpt, std::move(steps));
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return "";
    auto text = GenerateGreedy(**model, *tokenizer_, kSteps, ids);
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : "";
  }

  std::string expected_;
  std::unique_ptr<Llama2cTokenizer> tokenizer_;
};

// ----- tokenizer ----------------------------------------------------------

TEST_F(E2eTest, TokenizerDecodesKnownSentence) {
  EXPECT_EQ(tokenizer_->max_token_length(), 7u);
  EXPECT_EQ(tokenizer_->piece(1), "\n<s>\n");
  EXPECT_EQ(tokenizer_->piece(403), " Once");
  // The SentencePiece encoding of this sentence (../shared/models/SOURCES.md),
  // decoded after BOS.
  EXPECT_EQ(tokenizer_->DecodeSequence(
                {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426}),
            "Once upon a time, there was a little girl named Lily.");
  // The leading space is kept when the previous token is not BOS.
  EXPECT_EQ(tokenizer_->Decode(2, 403), " Once");
  // Byte tokens: <0x0A> (id 3 + 10) -> "\n"; <0x41> -> "A";
  // <0x07> (BEL) is dropped by run.c safe_printf, and so is <0xC3> alone.
  EXPECT_EQ(tokenizer_->piece(13), "<0x0A>");
  EXPECT_EQ(tokenizer_->Decode(400, 13), "\n");
  EXPECT_EQ(tokenizer_->Decode(400, 3 + 0x41), "A");
  EXPECT_EQ(tokenizer_->Decode(400, 3 + 0x07), "");
  EXPECT_EQ(tokenizer_->Decode(400, 3 + 0xC3), "");
}

TEST(TokenizerTest, RejectsTruncatedAndWrongSizeFiles) {
  const std::string bytes = ReadFileBytes(TokenizerPath());
  ASSERT_EQ(bytes.size(), 6227u);
  const std::string dir = MakeTempDir();
  const std::string truncated = dir + "/truncated.bin";
  {
    std::ofstream out(truncated, std::ios::binary);
    out << bytes.substr(0, bytes.size() - 3);
  }
  auto t = Llama2cTokenizer::Load(truncated);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()), ::testing::HasSubstr("token 511"));

  auto wrong = Llama2cTokenizer::Load(TokenizerPath(), 32000);
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(std::string(wrong.status().message()), ::testing::HasSubstr("512 tokens"));

  EXPECT_EQ(Llama2cTokenizer::Load(dir + "/absent.bin").status().code(),
            absl::StatusCode::kNotFound);
}

// ----- local backend ------------------------------------------------------

TEST_F(E2eTest, LocalBackendBin) {
  auto ckpt = Load(Stories260KBin());
  ASSERT_NE(ckpt, nullptr);
  ASSERT_EQ(ckpt->config().rope.pair_layout, RopePairLayout::kInterleaved);
  std::vector<int64_t> ids;
  const std::string text = Generate(*ckpt, LocalSteps(*ckpt, ckpt->config().rope), &ids);
  EXPECT_EQ(ids.size(), static_cast<size_t>(kSteps));  // no early BOS stop
  EXPECT_TRUE(SameText(text, expected_));
}

TEST_F(E2eTest, LocalBackendHf) {
  auto ckpt = Load(Stories260KHfDir());
  ASSERT_NE(ckpt, nullptr);
  ASSERT_EQ(ckpt->config().rope.pair_layout, RopePairLayout::kHalfSplit);
  EXPECT_TRUE(SameText(Generate(*ckpt, LocalSteps(*ckpt, ckpt->config().rope)), expected_));
}

// The .bin weights with HALF_SPLIT pairs (and the HF weights with
// INTERLEAVED pairs) must produce different text: the comparison above is
// sensitive to the RoPE pair layout.
TEST_F(E2eTest, LocalBackendWrongPairLayoutDiverges) {
  auto bin = Load(Stories260KBin());
  ASSERT_NE(bin, nullptr);
  RopeParams rope = bin->config().rope;
  rope.pair_layout = RopePairLayout::kHalfSplit;
  const std::string bin_text = Generate(*bin, LocalSteps(*bin, rope));
  ASSERT_FALSE(bin_text.empty());
  EXPECT_NE(bin_text, expected_);
  EXPECT_FALSE(SameText(bin_text, expected_));

  auto hf = Load(Stories260KHfDir());
  ASSERT_NE(hf, nullptr);
  rope = hf->config().rope;
  rope.pair_layout = RopePairLayout::kInterleaved;
  const std::string hf_text = Generate(*hf, LocalSteps(*hf, rope));
  ASSERT_FALSE(hf_text.empty());
  EXPECT_NE(hf_text, expected_);
}

// ----- service backend ------------------------------------------------------

class E2eServiceTest : public ServerTest {
 protected:
  void SetUp() override {
    expected_ = ReadFileBytes(ExpectedTextPath());
    ASSERT_EQ(expected_.size(), 566u);
    auto tok = Llama2cTokenizer::Load(TokenizerPath(), 512);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = std::make_unique<Llama2cTokenizer>(*std::move(tok));
  }

  // Embed / ApplyRope / Score on `model` through the gRPC client
  // (examples/tiny_llama/vocabd_steps.h, which examples/generate_text uses).
  static LlamaSteps ServiceSteps(const std::string& model, const ModelConfig& c,
                                 v1::RopePairLayout layout_override =
                                     v1::ROPE_PAIR_LAYOUT_UNSPECIFIED) {
    return tiny_llama::VocabdSteps(client(), model, c, layout_override);
  }

  std::string Generate(const Checkpoint& ckpt, LlamaSteps steps) {
    auto model = TinyLlama::Create(ckpt, std::move(steps));
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return "";
    auto text = GenerateGreedy(**model, *tokenizer_, kSteps);
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? *text : "";
  }

  std::string expected_;
  std::unique_ptr<Llama2cTokenizer> tokenizer_;
};

// The block weights come from the local checkpoint; embedding, RoPE and the
// head (final norm + tied LM head + top-1) come from the service.
TEST_F(E2eServiceTest, ServiceBin) {
  auto ckpt = LoadCheckpoint(Stories260KBin());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_TRUE(SameText(Generate(**ckpt, ServiceSteps(kBinModel, (*ckpt)->config())), expected_));
}

TEST_F(E2eServiceTest, ServiceHf) {
  auto ckpt = LoadCheckpoint(Stories260KHfDir());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_TRUE(SameText(Generate(**ckpt, ServiceSteps(kHfModel, (*ckpt)->config())), expected_));
}

// Asking the service for the other pair layout breaks the text, so the
// service's RoPE (and the model's layout) is really in the loop.
TEST_F(E2eServiceTest, ServiceWrongPairLayoutDiverges) {
  auto ckpt = LoadCheckpoint(Stories260KBin());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const std::string text =
      Generate(**ckpt, ServiceSteps(kBinModel, (*ckpt)->config(), v1::HALF_SPLIT));
  ASSERT_FALSE(text.empty());
  EXPECT_NE(text, expected_);
}

}  // namespace
}  // namespace vocabd::testing
