// Every kind of bad input answers a clear status naming the field and the
// value, and the server keeps serving (a good call right after succeeds).
#include <cstdint>
#include <limits>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "proto/tensor_codec.h"
#include "tests/server/server_fixture.h"

namespace vocabd::testing {
namespace {

using ::testing::HasSubstr;

class BadInputTest : public ServerTest {
 protected:
  void TearDown() override {
    // The server still answers a good request after each bad one.
    v1::EmbedRequest good;
    good.add_sequences()->add_token_ids(1);
    auto response = client().Embed(good);
    ASSERT_TRUE(response.ok()) << "server stopped serving: " << response.status();
    EXPECT_EQ(response->embeddings().shape(0), 1);
  }
  static void ExpectError(const absl::Status& status, absl::StatusCode code,
                          const std::string& substring) {
    EXPECT_EQ(status.code(), code) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(substring));
  }
  static v1::ScoreRequest ScoreWithHidden(int64_t rows, int64_t width) {
    v1::ScoreRequest request;
    std::vector<float> h(rows * width, 0.25f);
    *request.mutable_hidden() = EncodeFloatTensor(h, {rows, width});
    return request;
  }
  static v1::ApplyRopeRequest Rope(std::vector<int64_t> q_shape, std::vector<int64_t> k_shape) {
    auto count = [](const std::vector<int64_t>& s) {
      int64_t n = 1;
      for (int64_t d : s) n *= d;
      return n;
    };
    v1::ApplyRopeRequest request;
    request.set_layout(v1::BHSD);
    *request.mutable_q() = EncodeFloatTensor(std::vector<float>(count(q_shape), 1.0f), q_shape);
    *request.mutable_k() = EncodeFloatTensor(std::vector<float>(count(k_shape), 1.0f), k_shape);
    return request;
  }
};

TEST_F(BadInputTest, TokenIdAtVocabSize) {
  v1::EmbedRequest request;
  auto* seq = request.add_sequences();
  seq->add_token_ids(3);
  seq->add_token_ids(512);
  ExpectError(client().Embed(request).status(), absl::StatusCode::kInvalidArgument,
              "sequences[0].token_ids[1] = 512 is outside [0, 512)");
}

TEST_F(BadInputTest, NegativeTokenId) {
  v1::EmbedRequest request;
  request.add_sequences()->add_token_ids(5);
  request.add_sequences()->add_token_ids(-3);
  ExpectError(client().Embed(request).status(), absl::StatusCode::kInvalidArgument,
              "sequences[1].token_ids[0] = -3");
}

TEST_F(BadInputTest, UnknownModel) {
  v1::EmbedRequest request;
  request.set_model("gpt-5");
  request.add_sequences()->add_token_ids(1);
  ExpectError(client().Embed(request).status(), absl::StatusCode::kNotFound, "model 'gpt-5'");
  ExpectError(client().GetModel("gpt-5").status(), absl::StatusCode::kNotFound, "gpt-5");
  v1::ScoreRequest score = ScoreWithHidden(1, 64);
  score.set_model("nope");
  ExpectError(client().Score(score).status(), absl::StatusCode::kNotFound, "model 'nope'");
  v1::ApplyRopeRequest rope = Rope({1, 8, 1, 8}, {1, 4, 1, 8});
  rope.set_model("nope");
  ExpectError(client().ApplyRope(rope).status(), absl::StatusCode::kNotFound, "model 'nope'");
}

TEST_F(BadInputTest, HiddenWidthNotHiddenSize) {
  ExpectError(client().Score(ScoreWithHidden(2, 32)).status(), absl::StatusCode::kInvalidArgument,
              "hidden.shape[1] = 32");
  v1::ComputeLogitsRequest request;
  *request.mutable_hidden() = EncodeFloatTensor(std::vector<float>(65, 0.f), {1, 65});
  ExpectError(client().ComputeLogits(request).status(), absl::StatusCode::kInvalidArgument,
              "hidden.shape[1] = 65");
}

TEST_F(BadInputTest, HiddenWithWrongRank) {
  v1::ScoreRequest request;
  *request.mutable_hidden() = EncodeFloatTensor(std::vector<float>(64, 0.f), {64});
  ExpectError(client().Score(request).status(), absl::StatusCode::kInvalidArgument,
              "hidden.shape must be [num_rows, hidden_size]");
}

TEST_F(BadInputTest, TensorDataLengthDisagreesWithShape) {
  v1::ScoreRequest request = ScoreWithHidden(2, 64);
  request.mutable_hidden()->mutable_data()->resize(100);
  ExpectError(client().Score(request).status(), absl::StatusCode::kInvalidArgument,
              "hidden: data has 100 bytes but shape [2, 64] x F32 needs 512");
  v1::ApplyRopeRequest rope = Rope({1, 8, 1, 8}, {1, 4, 1, 8});
  rope.mutable_k()->mutable_data()->append("xy");
  ExpectError(client().ApplyRope(rope).status(), absl::StatusCode::kInvalidArgument, "k: data has");
}

TEST_F(BadInputTest, UnsupportedDtype) {
  v1::ScoreRequest request = ScoreWithHidden(1, 64);
  request.mutable_hidden()->set_dtype(v1::I32);
  request.mutable_hidden()->mutable_data()->resize(64 * 4);
  ExpectError(client().Score(request).status(), absl::StatusCode::kInvalidArgument,
              "hidden.dtype = I32 is not a floating dtype");
  request.mutable_hidden()->set_dtype(v1::DTYPE_UNSPECIFIED);
  ExpectError(client().Score(request).status(), absl::StatusCode::kInvalidArgument,
              "hidden.dtype");
  v1::EmbedRequest embed;
  embed.add_sequences()->add_token_ids(1);
  embed.set_output_dtype(v1::I64);
  ExpectError(client().Embed(embed).status(), absl::StatusCode::kInvalidArgument,
              "output_dtype = I64");
}

TEST_F(BadInputTest, RopeOddHeadDim) {
  ExpectError(client().ApplyRope(Rope({1, 8, 2, 7}, {1, 4, 2, 7})).status(),
              absl::StatusCode::kInvalidArgument, "7");
}

TEST_F(BadInputTest, RopeHeadDimMismatch) {
  ExpectError(client().ApplyRope(Rope({1, 8, 2, 8}, {1, 4, 2, 6})).status(),
              absl::StatusCode::kInvalidArgument, "head_dim");
  // The model's head_dim is 8.
  ExpectError(client().ApplyRope(Rope({1, 8, 2, 16}, {1, 4, 2, 16})).status(),
              absl::StatusCode::kInvalidArgument, "head_dim");
}

TEST_F(BadInputTest, RopeQHeadsNotMultipleOfKvHeads) {
  ExpectError(client().ApplyRope(Rope({1, 6, 2, 8}, {1, 4, 2, 8})).status(),
              absl::StatusCode::kInvalidArgument, "heads");
}

TEST_F(BadInputTest, RopePositionCountNotMatchingTokens) {
  v1::ApplyRopeRequest request = Rope({1, 8, 3, 8}, {1, 4, 3, 8});
  *request.mutable_position_ids() = EncodeInt64Tensor({0, 1}, {1, 2});
  ExpectError(client().ApplyRope(request).status(), absl::StatusCode::kInvalidArgument,
              "position_ids.shape = [1, 2] but q needs [1, 3]");
  v1::ApplyRopeRequest offsets = Rope({2, 8, 3, 8}, {2, 4, 3, 8});
  offsets.add_position_offsets(0);
  offsets.add_position_offsets(1);
  offsets.add_position_offsets(2);
  ExpectError(client().ApplyRope(offsets).status(), absl::StatusCode::kInvalidArgument,
              "position_offsets");
  v1::EmbedRequest embed;
  auto* seq = embed.add_sequences();
  seq->add_token_ids(1);
  seq->add_token_ids(2);
  seq->add_position_ids(0);
  ExpectError(client().Embed(embed).status(), absl::StatusCode::kInvalidArgument,
              "sequences[0].position_ids has 1 entries but sequences[0].token_ids has 2");
}

TEST_F(BadInputTest, RopeNegativeAndBeyondTrainedPositions) {
  v1::ApplyRopeRequest request = Rope({1, 8, 1, 8}, {1, 4, 1, 8});
  request.add_position_offsets(-1);
  ExpectError(client().ApplyRope(request).status(), absl::StatusCode::kInvalidArgument, "-1");
  request.set_position_offsets(0, 512);
  ExpectError(client().ApplyRope(request).status(), absl::StatusCode::kInvalidArgument, "512");
  request.set_allow_beyond_trained_length(true);
  EXPECT_TRUE(client().ApplyRope(request).ok());
}

TEST_F(BadInputTest, ScoreTargetsAndOptions) {
  v1::ScoreRequest request = ScoreWithHidden(2, 64);
  request.add_target_ids(1);
  ExpectError(client().Score(request).status(), absl::StatusCode::kInvalidArgument,
              "target_ids has 1 entries but hidden has 2 rows");
  request.add_target_ids(9999);
  ExpectError(client().Score(request).status(), absl::StatusCode::kInvalidArgument,
              "target_ids[1] = 9999");
  request.set_target_ids(1, 5);
  request.set_top_k(5000);
  ExpectError(client().Score(request).status(), absl::StatusCode::kInvalidArgument,
              "top_k = 5000");
  request.set_top_k(1);
  request.set_temperature(-1.0f);
  ExpectError(client().Score(request).status(), absl::StatusCode::kInvalidArgument,
              "temperature = -1");
  request.set_temperature(1.0f);
  request.set_vocab_limit(513);
  ExpectError(client().Score(request).status(), absl::StatusCode::kInvalidArgument,
              "vocab_limit = 513");
}

TEST_F(BadInputTest, NegativeShapeDim) {
  v1::ScoreRequest request = ScoreWithHidden(1, 64);
  request.mutable_hidden()->set_shape(0, -1);
  ExpectError(client().Score(request).status(), absl::StatusCode::kInvalidArgument,
              "hidden.shape[0] = -1");
}

// An enum value the proto does not define is named by its number (not by its
// empty name: "output_dtype =  is not supported").
TEST_F(BadInputTest, UnknownOutputDtypeValueIsNamed) {
  v1::EmbedRequest embed;
  embed.add_sequences()->add_token_ids(1);
  embed.set_output_dtype(static_cast<v1::DType>(77));
  ExpectError(client().Embed(embed).status(), absl::StatusCode::kInvalidArgument,
              "output_dtype = 77 is not supported");
  v1::ComputeLogitsRequest logits;
  std::vector<float> h(64, 0.25f);
  *logits.mutable_hidden() = EncodeFloatTensor(h, {1, 64});
  logits.set_output_dtype(static_cast<v1::DType>(-1));
  ExpectError(client().ComputeLogits(logits).status(), absl::StatusCode::kInvalidArgument,
              "output_dtype = -1 is not supported");
}

// head_dim comes from the tensor shape, so an empty q/k ([1, 1, 0, D]: no
// data) could ask for D / 2 frequencies: D = 2^28 held a gRPC thread for
// seconds and gigabytes. RoPE configs are bounded at head_dim 65536.
TEST_F(BadInputTest, RopeHeadDimAboveLimitWithEmptyTensors) {
  v1::ApplyRopeRequest request;
  request.mutable_rope()->set_pair_layout(v1::HALF_SPLIT);  // standalone config
  for (v1::Tensor* t : {request.mutable_q(), request.mutable_k()}) {
    t->set_dtype(v1::F32);
    for (int64_t d : {int64_t{1}, int64_t{1}, int64_t{0}, int64_t{1} << 28}) t->add_shape(d);
  }
  ExpectError(client().ApplyRope(request).status(), absl::StatusCode::kInvalidArgument,
              "rope.head_dim = 268435456 must be <= 65536");
}

// position_offset + i past INT64_MAX is refused (as ApplyRope does) instead
// of saturating, which gave the last two tokens the same sinusoidal row.
TEST_F(BadInputTest, EmbedPositionOffsetOverflow) {
  v1::EmbedRequest embed;
  auto* seq = embed.add_sequences();
  seq->add_token_ids(1);
  seq->add_token_ids(2);
  seq->add_token_ids(3);
  seq->set_position_offset(std::numeric_limits<int64_t>::max() - 1);
  embed.set_absolute_positions(v1::ABSOLUTE_POSITIONS_SINUSOIDAL);
  embed.set_allow_beyond_trained_length(true);
  ExpectError(client().Embed(embed).status(), absl::StatusCode::kInvalidArgument,
              "sequences[0].position_offset = 9223372036854775806 + 2 overflows int64");
}

}  // namespace
}  // namespace vocabd::testing
