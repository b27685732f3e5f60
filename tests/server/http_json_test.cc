// server/http_json.h without a server: the protobuf JSON mapping round trip
// and the "values" number-array convenience for every dtype, its limits and
// each kind of bad input.
#include "server/http_json.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/core/dtype.h"
#include "proto/tensor_codec.h"
#include "vocabd/v1/position.pb.h"
#include "vocabd/v1/scoring.pb.h"
#include "vocabd/v1/tokenizer.pb.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

TEST(HttpJsonTest, ConversionCostsCountJsonValues) {
  // 1 root + "results" + 1000 x (result + its "text").
  v1::DetokenizeResponse response;
  for (int i = 0; i < 1000; ++i) response.add_results()->set_text("a");
  const int64_t serialized = static_cast<int64_t>(response.ByteSizeLong());
  const absl::Status over = CheckJsonAnswerCost(response, 1000000);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over.message(), "HTTP/JSON answer needs " + std::to_string(2002 * 512 + serialized * 4) +
                                " bytes (values 2002 x 512 + serialized " +
                                std::to_string(serialized) +
                                " x 4) > --max-request-memory-bytes = 1000000");
  EXPECT_TRUE(CheckJsonAnswerCost(response, 2 << 20).ok());
  EXPECT_TRUE(CheckJsonAnswerCost(response, 0).ok());  // no bound
  // Request bodies: '{', '[' and ',' count as values.
  const absl::Status body = CheckJsonRequestCost(R"({"a": [1, 2, 3]})", 100);
  EXPECT_EQ(body.message(),
            "HTTP/JSON request needs 2144 bytes (body 16 x 6 + values 4 x 512) > "
            "--max-request-memory-bytes = 100");
  EXPECT_TRUE(CheckJsonRequestCost(R"({"a": [1, 2, 3]})", 4096).ok());
}

TEST(HttpJsonTest, ValuesEncodeLikeTheTensorCodec) {
  const std::vector<float> x = {0.1f, -2.5f, 3.0e-8f, 65504.0f};
  for (const char* dtype : {"F32", "F16", "BF16"}) {
    SCOPED_TRACE(dtype);
    v1::ScoreRequest request;
    const json body = {{"hidden", {{"dtype", dtype}, {"shape", {2, 2}}, {"values", x}}}};
    ASSERT_TRUE(JsonToMessage(body.dump(), &request).ok());
    v1::DType proto_dtype = v1::DTYPE_UNSPECIFIED;
    ASSERT_TRUE(v1::DType_Parse(dtype, &proto_dtype));
    const v1::Tensor want = EncodeFloatTensor(x, {2, 2}, *DTypeFromProto(proto_dtype, "d"));
    EXPECT_EQ(request.hidden().dtype(), want.dtype());
    EXPECT_EQ(request.hidden().data(), want.data());
    EXPECT_THAT(std::vector<int64_t>(request.hidden().shape().begin(),
                                     request.hidden().shape().end()),
                ::testing::ElementsAre(2, 2));
  }
  // Defaults: F32, shape [len(values)].
  v1::ScoreRequest request;
  ASSERT_TRUE(JsonToMessage(R"({"hidden": {"values": [1, 2, 3]}})", &request).ok());
  EXPECT_EQ(request.hidden().dtype(), v1::F32);
  ASSERT_EQ(request.hidden().shape_size(), 1);
  EXPECT_EQ(request.hidden().shape(0), 3);
  // Integers.
  v1::ApplyRopeRequest rope;
  ASSERT_TRUE(JsonToMessage(R"({"positionIds": {"dtype": "I32", "values": [-1, 2147483647]}})",
                            &rope)
                  .ok());
  ASSERT_EQ(rope.position_ids().data().size(), 8u);
  int32_t got[2];
  std::memcpy(got, rope.position_ids().data().data(), 8);
  EXPECT_EQ(got[0], -1);
  EXPECT_EQ(got[1], 2147483647);
  ASSERT_TRUE(JsonToMessage(R"({"position_ids": {"dtype": "I64", "values": [9007199254740993]}})",
                            &rope)
                  .ok());
  EXPECT_EQ(*DecodeIntTensor(rope.position_ids(), "p"), std::vector<int64_t>{9007199254740993});
}

TEST(HttpJsonTest, BadValuesNameTheFieldAndTheValue) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"hidden": {"values": 3}})", "hidden.values must be an array"},
      {R"({"hidden": {"values": [1], "data": ""}})", "not both"},
      {R"({"hidden": {"dtype": "F8", "values": [1]}})", "hidden.dtype = 'F8' is not a known"},
      {R"({"hidden": {"dtype": 42, "values": [1]}})", "hidden.dtype = 42 is not a known"},
      {R"({"hidden": {"dtype": "DTYPE_UNSPECIFIED", "values": [1]}})", "hidden.dtype"},
      {R"({"hidden": {"shape": "x", "values": [1]}})", "hidden.shape must be an array"},
      {R"({"hidden": {"shape": [1.5], "values": [1]}})", "hidden.shape[0] = 1.5 is not"},
      {R"({"hidden": {"shape": [2, 2], "values": [1]}})",
       "hidden.values has 1 numbers but shape [2, 2] needs 4"},
      {R"({"hidden": {"shape": [-1], "values": [1]}})", "needs ?"},
      {R"({"hidden": {"shape": [4611686018427387904, 4], "values": [1]}})", "needs ?"},
      {R"({"hidden": {"values": [true]}})", "hidden.values[0] = true is not a number"},
      {R"({"hidden": {"values": [1, 2, 3}})", "not valid JSON"},
      {R"({"hidden": {"values": [1]}, "nope": 1})", "nope"},
  };
  for (const auto& [body, message] : cases) {
    SCOPED_TRACE(body);
    v1::ScoreRequest request;
    const absl::Status s = JsonToMessage(body, &request);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr(message));
  }
  v1::ApplyRopeRequest rope;
  const absl::Status range =
      JsonToMessage(R"({"positionIds": {"dtype": "I32", "values": [2147483648]}})", &rope);
  EXPECT_THAT(std::string(range.message()),
              HasSubstr("positionIds.values[0] = 2147483648 is out of range for I32"));
  const absl::Status big =
      JsonToMessage(R"({"positionIds": {"dtype": "I64", "values": [18446744073709551615]}})",
                    &rope);
  EXPECT_THAT(std::string(big.message()), HasSubstr("is not an integer"));
}

// Texts are proto bytes, so base64 in JSON; plain text is refused with the
// field, the value and how to send it.
TEST(HttpJsonTest, PlainTextForABytesFieldNamesBase64) {
  v1::TokenizeRequest request;
  const absl::Status s = JsonToMessage(R"({"texts": ["hello world"]})", &request);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("texts[0]"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("hello world"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("are base64 in JSON"));
  ASSERT_TRUE(JsonToMessage(R"({"texts": ["aGVsbG8="]})", &request).ok());
  ASSERT_EQ(request.texts_size(), 1);
  EXPECT_EQ(request.texts(0), "hello");
  // Other mistakes get no base64 hint.
  const absl::Status other = JsonToMessage(R"({"texts": "aGVsbG8=", "nope": 1})", &request);
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(other.message()), ::testing::Not(HasSubstr("base64")));
}

TEST(HttpJsonTest, OutputValuesRoundTripAndLargeTensorsKeepData) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {0.1f, 1.0f / 3.0f, -inf, inf, 1e-45f};
  v1::ComputeLogitsResponse response;
  *response.mutable_logits() = EncodeFloatTensor(x, {1, 5});
  auto text = MessageToJson(response, /*tensor_values=*/true);
  ASSERT_TRUE(text.ok()) << text.status();
  const json j = json::parse(*text);
  EXPECT_FALSE(j["logits"].contains("data"));
  EXPECT_EQ(j["logits"]["values"][0].dump(), "0.1");  // shortest form
  EXPECT_EQ(j["logits"]["values"][1].get<float>(), 1.0f / 3.0f);
  EXPECT_EQ(j["logits"]["values"][2], "-Infinity");
  EXPECT_EQ(j["logits"]["values"][3], "Infinity");
  EXPECT_EQ(j["logits"]["values"][4].get<float>(), 1e-45f);
  // ... and reads back to the same bytes.
  v1::ScoreRequest back;
  json request = {{"hidden", j["logits"]}};
  ASSERT_TRUE(JsonToMessage(request.dump(), &back).ok());
  EXPECT_EQ(back.hidden().data(), response.logits().data());
  // NaN.
  *response.mutable_logits() =
      EncodeFloatTensor({std::numeric_limits<float>::quiet_NaN()}, {1, 1});
  EXPECT_EQ(json::parse(*MessageToJson(response, true))["logits"]["values"][0], "NaN");
  // Without tensor_values: the canonical mapping (base64, int64 as strings).
  const json canonical = json::parse(*MessageToJson(response, false));
  EXPECT_EQ(canonical["logits"]["shape"], json::array({"1", "1"}));
  EXPECT_TRUE(canonical["logits"]["data"].is_string());
  // Above kMaxValuesElements: base64 kept.
  *response.mutable_logits() =
      EncodeFloatTensor(std::vector<float>(kMaxValuesElements + 1, 1.0f),
                        {1, kMaxValuesElements + 1});
  const json large = json::parse(*MessageToJson(response, true));
  EXPECT_TRUE(large["logits"].contains("data"));
  EXPECT_FALSE(large["logits"].contains("values"));
}

}  // namespace
}  // namespace vocabd
