// Quantized GGUF tables through the real server: Embed RPC on quantized
// tables bit for bit as ggml, GetModel/ListModels reporting each served
// tensor's ggml type and the served resident_bytes, and --weights-dtype q8_0
// parsing. *NeedsQuantHead* tests load files whose LM head is quantized too
// (lib/head/quant_kernel.h serves it).
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "lib/head/quant_kernel.h"
#include "server/model_serving_options.h"
#include "server/server.h"
#include "tests/quant_files.h"
#include "tests/test_util.h"
#include "vocabd/v1/embedding.grpc.pb.h"
#include "vocabd/v1/model.grpc.pb.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;

struct Running {
  std::unique_ptr<VocabdServer> server;
  std::unique_ptr<v1::ModelService::Stub> models;
  std::unique_ptr<v1::EmbeddingService::Stub> embed;
};

Running Start(std::vector<std::pair<std::string, std::string>> models) {
  VocabdServer::Options options;
  options.listen_address = "127.0.0.1:0";
  for (auto& [name, path] : models) options.models.push_back({name, path});
  auto server = VocabdServer::Create(options);
  EXPECT_TRUE(server.ok()) << server.status();
  Running r;
  if (!server.ok()) return r;
  r.server = std::move(*server);
  auto channel = grpc::CreateChannel(r.server->target(), grpc::InsecureChannelCredentials());
  r.models = v1::ModelService::NewStub(channel);
  r.embed = v1::EmbeddingService::NewStub(channel);
  return r;
}

// Bytes of the LM head's packed copy on this CPU (lib/head/lm_head.h,
// Options::quant_pack): resident_bytes counts it.
int64_t PackedHeadBytes(quant::GgmlType type, int64_t vocab, int64_t hidden) {
  if (!QuantPackedCovers(DetectQuantKernelIsa(), type, hidden)) return 0;
  return QuantPackedBytes(*FindQuantTypeInfo(type), vocab, hidden);
}

const v1::ServedTensor* Served(const v1::ModelInfo& info, const std::string& name) {
  for (const auto& t : info.served_tensors()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

// Embed RPC rows equal ggml's dequantization bit for bit (the table is the
// golden file's token_embd, byte for byte; the head F32).
TEST(QuantServingTest, EmbedRpcIsGgmlBitForBit) {
  const std::string dir = testing::MakeTempDir();
  std::vector<std::pair<std::string, std::string>> models;
  for (const std::string& stem : testing::QuantGoldenStems()) {
    models.push_back({stem, testing::WriteQuantEmbeddingGguf(stem, dir)});
  }
  Running r = Start(models);
  ASSERT_NE(r.server, nullptr);
  for (const std::string& stem : testing::QuantGoldenStems()) {
    SCOPED_TRACE(stem);
    const nlohmann::json golden = testing::QuantGolden(stem);
    grpc::ClientContext ctx;
    v1::EmbedRequest req;
    req.set_model(stem);
    auto* seq = req.add_sequences();
    for (int64_t id : golden["embedding_ids"]) seq->add_token_ids(id);
    v1::EmbedResponse resp;
    grpc::Status s = r.embed->Embed(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    const std::string& data = resp.embeddings().data();
    ASSERT_EQ(data.size(), 8u * 512 * 4);
    int64_t mismatches = 0;
    for (size_t i = 0; i < 8; ++i) {
      const auto want = golden["embedding_rows"][i].get<std::vector<double>>();
      for (size_t j = 0; j < 512; ++j) {
        float got;
        std::memcpy(&got, data.data() + (i * 512 + j) * 4, 4);
        if (testing::FloatBits(got) != testing::FloatBits(static_cast<float>(want[j]))) ++mismatches;
      }
    }
    EXPECT_EQ(mismatches, 0);
    // GetModel: the served types and bytes.
    grpc::ClientContext mctx;
    v1::GetModelRequest get;
    get.set_name(stem);
    v1::ModelInfo info;
    ASSERT_TRUE(r.models->GetModel(&mctx, get, &info).ok());
    const v1::ServedTensor* e = Served(info, "model.embed_tokens.weight");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->ggml_type(), golden["token_embd_type"].get<std::string>());
    EXPECT_EQ(e->stored_ggml_type(), golden["token_embd_type"].get<std::string>());
    const v1::ServedTensor* h = Served(info, "lm_head.weight");
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->ggml_type(), "f32");
    EXPECT_EQ(info.resident_bytes(), e->bytes() + 1024 * 512 * 4 + 512 * 4);
    EXPECT_EQ(info.requested_weights_type(), "auto");
    EXPECT_TRUE(info.source_files(0).memory_mapped());
  }
}

// ListModels on the golden Q4_K_M mix (q4_K embedding, q6_K head) and the
// tied q8_0 file. NEEDS the quantized LM head.
TEST(QuantServingTest, ListModelsReportsGgmlTypesNeedsQuantHead) {
  Running r = Start({{"q4km", testing::QuantGoldenPath("Q4_K_M", ".gguf")},
                     {"q8tied", testing::QuantGoldenPath("Q8_0-tied", ".gguf")}});
  ASSERT_NE(r.server, nullptr);
  grpc::ClientContext ctx;
  v1::ListModelsResponse list;
  ASSERT_TRUE(r.models->ListModels(&ctx, v1::ListModelsRequest(), &list).ok());
  for (const auto& m : list.models()) {
    SCOPED_TRACE(m.name());
    if (m.name() == "q4km") {
      EXPECT_EQ(Served(m, "model.embed_tokens.weight")->ggml_type(), "q4_K");
      EXPECT_EQ(Served(m, "lm_head.weight")->ggml_type(), "q6_K");
      EXPECT_EQ(m.resident_bytes(), 1024 * 2 * 144 + 1024 * 2 * 210 + 512 * 4 +
                                        PackedHeadBytes(quant::GgmlType::kQ6_K, 1024, 512));
    } else {
      EXPECT_EQ(Served(m, "model.embed_tokens.weight")->ggml_type(), "q8_0");
      EXPECT_EQ(Served(m, "lm_head.weight"), nullptr);  // tied: one copy
      EXPECT_EQ(m.resident_bytes(), 1024 * 16 * 34 + 512 * 4 +
                                        PackedHeadBytes(quant::GgmlType::kQ8_0, 1024, 512));
    }
  }
}

TEST(QuantServingTest, WeightsDtypeFlagParsesQ8_0) {
  ModelServingOptions serving;
  ASSERT_TRUE(serving.AddWeightsDTypeFlag("llama=q8_0").ok());
  ASSERT_TRUE(serving.AddWeightsDTypeFlag("Q8_0").ok());
  EXPECT_EQ(serving.weights_dtype.at("llama"), WeightsDType::kQ8_0);
  EXPECT_EQ(serving.weights_dtype.at(""), WeightsDType::kQ8_0);
  EXPECT_STREQ(WeightsDTypeName(WeightsDType::kQ8_0), "q8_0");
  absl::Status bad = serving.AddWeightsDTypeFlag("llama=q4_k");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("is not auto, f32, bf16 or q8_0"));
}

}  // namespace
}  // namespace vocabd
