// lib/model: the operations the RPCs call, on the real stories260K files.
#include "lib/model.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Model> Load(const std::string& name, const std::string& path) {
  auto model = Model::Create({name, path});
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

std::vector<float> Hidden(int rows) {
  std::vector<float> h(rows * 64);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>(std::cos(0.7 * i));
  return h;
}

TEST(ModelTest, MissingPathIsNotFound) {
  auto model = Model::Create({"x", "/nonexistent/model.bin"});
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound) << model.status();
}

TEST(ModelTest, TiedHeadIsTheEmbeddingMemory) {
  auto model = Load("bin", testing::Stories260KBin());
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->checkpoint().lm_head().data, model->checkpoint().embedding().data);
}

TEST(ModelTest, BothFilesGiveIdenticalLogits) {
  auto bin = Load("bin", testing::Stories260KBin());
  auto hf = Load("hf", testing::Stories260KHfDir());
  ASSERT_NE(bin, nullptr);
  ASSERT_NE(hf, nullptr);
  const std::vector<float> h = Hidden(3);
  HeadInput input{h.data(), 3, 64};
  std::vector<float> a, b;
  ASSERT_TRUE(bin->ComputeLogits(input, false, &a).ok());
  ASSERT_TRUE(hf->ComputeLogits(input, false, &b).ok());
  ASSERT_EQ(a.size(), 3u * 512u);
  EXPECT_EQ(a, b);
}

TEST(ModelTest, ScoreAgreesWithLogSoftmax) {
  auto model = Load("bin", testing::Stories260KBin());
  ASSERT_NE(model, nullptr);
  const std::vector<float> h = Hidden(2);
  ScoreInput input;
  input.head = HeadInput{h.data(), 2, 64};
  input.target_ids = {10, 300};
  input.top_k = 3;
  ScoreOutput out;
  ASSERT_TRUE(model->Score(input, &out).ok());
  std::vector<float> logprobs;
  ASSERT_TRUE(model->ComputeLogits(input.head, true, &logprobs).ok());
  ASSERT_EQ(out.rows.size(), 2u);
  EXPECT_NEAR(out.rows[0].target_logprob, logprobs[10], 1e-5);
  EXPECT_NEAR(out.rows[1].target_logprob, logprobs[512 + 300], 1e-5);
  EXPECT_NEAR(out.sum_target_logprob, logprobs[10] + logprobs[512 + 300], 1e-5);
  EXPECT_EQ(out.num_targets, 2);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(out.rows[r].top_k.size(), 3u);
    const float* row = logprobs.data() + r * 512;
    const int64_t best = std::max_element(row, row + 512) - row;
    EXPECT_EQ(out.rows[r].top_k[0].first, best);
    EXPECT_NEAR(out.rows[r].top_k[0].second, row[best], 1e-5);
  }
}

TEST(ModelTest, EmbedSinusoidalAddsTheVaswaniTable) {
  auto model = Load("bin", testing::Stories260KBin());
  ASSERT_NE(model, nullptr);
  EmbedInput input;
  input.token_ids = {{5, 6}};
  input.position_offsets = {100};
  input.position_ids = {{}};
  input.absolute_positions = AbsolutePositionsMode::kSinusoidal;
  EmbedOutput out;
  ASSERT_TRUE(model->Embed(input, &out).ok());
  const float* table = model->checkpoint().embedding().f32();
  for (int t = 0; t < 2; ++t) {
    const double pos = 100 + t;
    for (int j = 0; j < 64; ++j) {
      const int i = j / 2;
      const double angle = pos / std::pow(10000.0, 2.0 * i / 64);
      const double pe = j % 2 == 0 ? std::sin(angle) : std::cos(angle);
      EXPECT_NEAR(out.embeddings[t * 64 + j], table[(5 + t) * 64 + j] + pe, 1e-6) << t << "," << j;
    }
  }
}

TEST(ModelTest, EmbedLearnedPositionsNeedATable) {
  auto model = Load("bin", testing::Stories260KBin());
  ASSERT_NE(model, nullptr);
  EmbedInput input;
  input.token_ids = {{5}};
  input.absolute_positions = AbsolutePositionsMode::kLearned;
  EmbedOutput out;
  absl::Status status = model->Embed(input, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("no learned position table"));
}

TEST(ModelTest, EmbedRejectsNegativeOffset) {
  auto model = Load("bin", testing::Stories260KBin());
  ASSERT_NE(model, nullptr);
  EmbedInput input;
  input.token_ids = {{5}, {6}};
  input.position_offsets = {0, -4};
  EmbedOutput out;
  absl::Status status = model->Embed(input, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("sequences[1].position_offset = -4"));
}

}  // namespace
}  // namespace vocabd
