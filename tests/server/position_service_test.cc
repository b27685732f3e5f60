// PositionService through the real server: GetRopeCache (model and
// standalone configs, every scaling type via the golden, length policy,
// high precision), GetSinusoidalPositions, GetAlibiSlopes, ApplyRope with
// F16/BF16, high precision and attention scaling, GetModel's trained length
// and scaling, Embed's sinusoidal length policy, and one test per bad input
// (status code + message naming the field; the server keeps serving).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "proto/tensor_codec.h"
#include "tests/server/server_fixture.h"
#include "tests/test_util.h"
#include "vocabd/v1/embedding.grpc.pb.h"
#include "vocabd/v1/model.grpc.pb.h"
#include "vocabd/v1/position.grpc.pb.h"
#include "vocabd/v1/scoring.grpc.pb.h"

namespace vocabd::testing {
namespace {

using ::testing::HasSubstr;

class PositionServiceTest : public ServerTest {
 protected:
  static std::unique_ptr<v1::PositionService::Stub> Stub() {
    return v1::PositionService::NewStub(client().channel());
  }
  static grpc::Status Cache(const v1::GetRopeCacheRequest& req, v1::GetRopeCacheResponse* resp) {
    grpc::ClientContext ctx;
    return Stub()->GetRopeCache(&ctx, req, resp);
  }
  static grpc::Status Sin(const v1::GetSinusoidalPositionsRequest& req,
                          v1::GetSinusoidalPositionsResponse* resp) {
    grpc::ClientContext ctx;
    return Stub()->GetSinusoidalPositions(&ctx, req, resp);
  }
  static grpc::Status Alibi(const v1::GetAlibiSlopesRequest& req,
                            v1::GetAlibiSlopesResponse* resp) {
    grpc::ClientContext ctx;
    return Stub()->GetAlibiSlopes(&ctx, req, resp);
  }
  static void ExpectInvalid(const grpc::Status& s, const std::string& text) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(text));
    // Still serving.
    v1::GetAlibiSlopesRequest ok;
    ok.set_num_heads(4);
    v1::GetAlibiSlopesResponse r;
    EXPECT_TRUE(Alibi(ok, &r).ok());
  }
};

TEST_F(PositionServiceTest, GetRopeCacheForTheModelMatchesTheFormula) {
  v1::GetRopeCacheRequest req;
  req.set_model(kHfModel);
  req.set_start_position(10);
  req.set_num_positions(3);
  v1::GetRopeCacheResponse resp;
  ASSERT_TRUE(Cache(req, &resp).ok());
  auto inv = DecodeFloatTensor(resp.inv_freq(), "inv_freq");
  auto cos = DecodeFloatTensor(resp.cos(), "cos");
  auto sin = DecodeFloatTensor(resp.sin(), "sin");
  ASSERT_TRUE(inv.ok() && cos.ok() && sin.ok());
  const int64_t half = static_cast<int64_t>(inv->size());
  EXPECT_EQ(resp.cos().shape(0), 3);
  EXPECT_EQ(resp.cos().shape(1), half);
  EXPECT_EQ(resp.attention_scaling(), 1.0);
  EXPECT_EQ(resp.rope().pair_layout(), v1::HALF_SPLIT);
  for (int64_t p = 0; p < 3; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = (10 + p) * std::pow(10000.0, -2.0 * i / (2 * half));
      EXPECT_NEAR((*cos)[p * half + i], std::cos(angle), 2e-6);
      EXPECT_NEAR((*sin)[p * half + i], std::sin(angle), 2e-6);
    }
  }
}

TEST_F(PositionServiceTest, GetRopeCacheEveryScalingTypeMatchesGolden) {
  const nlohmann::json golden = ReadGolden("rope_scaling_golden.json");
  int n = 0;
  for (const auto& c : golden.at("cases")) {
    if (c.at("pair_layout") != "HALF_SPLIT") continue;
    const auto& cfg = c.at("config");
    v1::GetRopeCacheRequest req;
    v1::RopeConfig* rope = req.mutable_rope();
    rope->set_pair_layout(v1::HALF_SPLIT);
    rope->set_theta(cfg.at("rope_theta").get<double>());
    rope->set_head_dim(cfg.at("head_dim").get<int>());
    rope->set_rotary_dim(cfg.at("rotary_dim").get<int>());
    rope->set_max_position_embeddings(cfg.at("max_position_embeddings").get<int64_t>());
    if (cfg.contains("rope_scaling")) {
      const auto& s = cfg.at("rope_scaling");
      v1::RopeScaling* rs = rope->mutable_scaling();
      const std::string t = s.at("rope_type").get<std::string>();
      rs->set_type(t == "linear"    ? v1::ROPE_SCALING_LINEAR
                   : t == "dynamic" ? v1::ROPE_SCALING_DYNAMIC
                   : t == "yarn"    ? v1::ROPE_SCALING_YARN
                   : t == "llama3"  ? v1::ROPE_SCALING_LLAMA3
                                    : v1::ROPE_SCALING_LONGROPE);
      if (s.contains("factor")) rs->set_factor(s.at("factor").get<double>());
      if (s.contains("original_max_position_embeddings")) {
        rs->set_original_max_position_embeddings(
            s.at("original_max_position_embeddings").get<int64_t>());
      }
      if (s.contains("low_freq_factor")) rs->set_low_freq_factor(s.at("low_freq_factor").get<double>());
      if (s.contains("high_freq_factor")) rs->set_high_freq_factor(s.at("high_freq_factor").get<double>());
      if (s.contains("beta_fast")) rs->set_beta_fast(s.at("beta_fast").get<double>());
      if (s.contains("beta_slow")) rs->set_beta_slow(s.at("beta_slow").get<double>());
      if (s.contains("mscale")) rs->set_mscale(s.at("mscale").get<double>());
      if (s.contains("mscale_all_dim")) rs->set_mscale_all_dim(s.at("mscale_all_dim").get<double>());
      if (s.contains("attention_factor")) rs->set_attention_factor(s.at("attention_factor").get<double>());
      if (s.contains("truncate")) rs->set_truncate(s.at("truncate").get<bool>());
      for (double f : s.value("short_factor", std::vector<double>{})) rs->add_short_factor(f);
      for (double f : s.value("long_factor", std::vector<double>{})) rs->add_long_factor(f);
    }
    // The last golden position, as a one-position cache (seq_len = p + 1).
    const int64_t p = c.at("positions").back().get<int64_t>();
    req.set_start_position(p);
    req.set_num_positions(1);
    req.set_allow_beyond_trained_length(true);
    v1::GetRopeCacheResponse resp;
    grpc::Status st = Cache(req, &resp);
    ASSERT_TRUE(st.ok()) << c.at("name") << ": " << st.error_message();
    EXPECT_EQ(*DecodeFloatTensor(resp.inv_freq(), "inv_freq"), ToFloats(c.at("inv_freq")))
        << c.at("name");
    EXPECT_EQ(resp.attention_scaling(), c.at("attention_scaling").get<double>()) << c.at("name");
    EXPECT_EQ(resp.used_long_factor(), c.at("used_long_factor").get<bool>()) << c.at("name");
    const std::vector<float> want = ToFloats(c.at("cos"));
    auto cos = DecodeFloatTensor(resp.cos(), "cos");
    const size_t half = cos->size();
    for (size_t i = 0; i < half; ++i) {
      EXPECT_NEAR((*cos)[i], want[want.size() - half + i], 1e-6) << c.at("name");
    }
    ++n;
  }
  EXPECT_EQ(n, 13);
}

TEST_F(PositionServiceTest, GetRopeCacheLengthPolicyAndHighPrecision) {
  v1::GetRopeCacheRequest req;
  req.set_model(kBinModel);
  req.set_start_position(510);
  req.set_num_positions(3);  // 510..512, trained length 512
  v1::GetRopeCacheResponse resp;
  ExpectInvalid(Cache(req, &resp),
                "start_position + num_positions - 1 = 512 >= max_position_embeddings 512");
  req.set_allow_beyond_trained_length(true);
  req.set_start_position(1 << 20);
  req.set_num_positions(1);
  ASSERT_TRUE(Cache(req, &resp).ok());
  auto fp32 = *DecodeFloatTensor(resp.cos(), "cos");
  req.set_high_precision(true);
  ASSERT_TRUE(Cache(req, &resp).ok());
  auto hp = *DecodeFloatTensor(resp.cos(), "cos");
  const int64_t half = static_cast<int64_t>(hp.size());
  double err_hp = 0, err_32 = 0;
  for (int64_t i = 0; i < half; ++i) {
    const double exact = std::cos(1048576.0 * std::pow(10000.0, -2.0 * i / (2 * half)));
    err_hp = std::max(err_hp, std::fabs(hp[i] - exact));
    err_32 = std::max(err_32, std::fabs(fp32[i] - exact));
  }
  EXPECT_LT(err_hp, 1e-6);
  EXPECT_GT(err_32, 5e-4);  // head_dim 8: 4 frequencies; ~1e-3 observed
}

TEST_F(PositionServiceTest, GetRopeCacheBadInputs) {
  v1::GetRopeCacheRequest req;
  v1::GetRopeCacheResponse resp;
  req.set_num_positions(-1);
  ExpectInvalid(Cache(req, &resp), "num_positions = -1");
  req.set_num_positions(1);
  req.set_start_position(-5);
  ExpectInvalid(Cache(req, &resp), "start_position = -5");
  req.set_start_position(0);
  req.mutable_rope()->set_pair_layout(v1::HALF_SPLIT);  // standalone without head_dim
  ExpectInvalid(Cache(req, &resp), "head_dim = 0");
  req.mutable_rope()->set_head_dim(8);
  req.mutable_rope()->mutable_scaling()->set_type(v1::ROPE_SCALING_YARN);
  req.mutable_rope()->mutable_scaling()->set_factor(-1);
  ExpectInvalid(Cache(req, &resp), "factor = -1");
  req.mutable_rope()->mutable_scaling()->set_type(v1::ROPE_SCALING_LONGROPE);
  req.mutable_rope()->mutable_scaling()->set_factor(2);
  req.mutable_rope()->set_max_position_embeddings(64);
  ExpectInvalid(Cache(req, &resp), "short_factor.size() = 0");
  req.Clear();
  req.set_model("nope");
  req.set_num_positions(1);
  grpc::Status s = Cache(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
}

// The request's rope fields over the model's (lib/positions/rope_overrides.h):
// partial_rotary_factor -> int(head_dim * factor), errors named rope.<field>.
TEST_F(PositionServiceTest, GetRopeCacheRequestOverridesTheModel) {
  v1::GetRopeCacheRequest req;
  req.set_model(kHfModel);  // head_dim 8, theta 10000
  req.set_num_positions(2);
  req.mutable_rope()->set_partial_rotary_factor(0.5);
  req.mutable_rope()->set_theta(500000.0);
  v1::GetRopeCacheResponse resp;
  ASSERT_TRUE(Cache(req, &resp).ok());
  EXPECT_EQ(resp.rope().head_dim(), 8);
  EXPECT_EQ(resp.rope().rotary_dim(), 4);
  EXPECT_EQ(resp.rope().theta(), 500000.0);
  EXPECT_EQ(resp.rope().pair_layout(), v1::HALF_SPLIT);  // the model's
  EXPECT_EQ(resp.inv_freq().shape(0), 2);
  req.mutable_rope()->set_partial_rotary_factor(1.5);
  ExpectInvalid(Cache(req, &resp), "rope.partial_rotary_factor = 1.5 is outside (0, 1]");
  req.mutable_rope()->set_partial_rotary_factor(0.375);  // int(8 * 0.375) = 3
  ExpectInvalid(Cache(req, &resp), "rope.rotary_dim = 3 is odd");
  req.mutable_rope()->set_rotary_dim(6);  // rotary_dim wins over the factor
  ASSERT_TRUE(Cache(req, &resp).ok());
  EXPECT_EQ(resp.rope().rotary_dim(), 6);
}

// A layer index on a model whose layers share one RoPE gives the model's
// tables; bad layers name the field (per-layer patterns: families_test).
TEST_F(PositionServiceTest, GetRopeCacheLayerIndex) {
  v1::GetRopeCacheRequest req;
  req.set_model(kHfModel);
  req.set_num_positions(3);
  v1::GetRopeCacheResponse plain, layered;
  ASSERT_TRUE(Cache(req, &plain).ok());
  req.set_layer(0);
  ASSERT_TRUE(Cache(req, &layered).ok());
  EXPECT_FALSE(layered.layer_without_rope());
  EXPECT_EQ(layered.cos().data(), plain.cos().data());
  EXPECT_EQ(layered.sin().data(), plain.sin().data());
  req.set_layer(1000);
  v1::GetRopeCacheResponse resp;
  ExpectInvalid(Cache(req, &resp), "layer = 1000 is outside [0, num_hidden_layers = ");
  req.set_layer(-1);
  ExpectInvalid(Cache(req, &resp), "layer = -1 is outside");
  v1::GetRopeCacheRequest standalone;
  standalone.set_num_positions(2);
  standalone.mutable_rope()->set_pair_layout(v1::HALF_SPLIT);
  standalone.mutable_rope()->set_head_dim(8);
  standalone.set_layer(0);
  ExpectInvalid(Cache(standalone, &resp), "layer = 0 needs a model");
}

TEST_F(PositionServiceTest, SinusoidalTableAndOddDim) {
  const nlohmann::json golden = ReadGolden("alibi_golden.json");
  for (const auto& c : golden.at("sinusoidal")) {
    v1::GetSinusoidalPositionsRequest req;
    req.set_start_position(c.at("start").get<int64_t>());
    req.set_num_positions(c.at("count").get<int64_t>());
    req.set_dim(c.at("dim").get<int64_t>());
    req.set_base(c.at("base").get<double>());
    req.set_layout(c.at("layout") == "INTERLEAVED" ? v1::INTERLEAVED : v1::HALF_SPLIT);
    v1::GetSinusoidalPositionsResponse resp;
    ASSERT_TRUE(Sin(req, &resp).ok());
    EXPECT_EQ(resp.table().shape(0), req.num_positions());
    EXPECT_EQ(resp.table().shape(1), req.dim());
    EXPECT_EQ(*DecodeFloatTensor(resp.table(), "table"), ToFloats(c.at("table")));
  }
  v1::GetSinusoidalPositionsRequest req;
  req.set_num_positions(4);
  req.set_dim(7);
  v1::GetSinusoidalPositionsResponse resp;
  ExpectInvalid(Sin(req, &resp), "dim = 7 must be even");
  req.set_dim(8);
  req.set_base(-3);
  ExpectInvalid(Sin(req, &resp), "base = -3");
  req.set_base(0);  // = 10000
  req.set_num_positions(int64_t{1} << 40);
  ExpectInvalid(Sin(req, &resp), "exceeds");
}

TEST_F(PositionServiceTest, AlibiSlopesAndBias) {
  const nlohmann::json golden = ReadGolden("alibi_golden.json");
  for (int heads : {8, 12, 16, 24}) {
    v1::GetAlibiSlopesRequest req;
    req.set_num_heads(heads);
    v1::GetAlibiSlopesResponse resp;
    ASSERT_TRUE(Alibi(req, &resp).ok());
    EXPECT_EQ(*DecodeFloatTensor(resp.slopes(), "slopes"),
              ToFloats(golden.at("slopes").at(std::to_string(heads))));
    EXPECT_FALSE(resp.has_bias());
  }
  for (const auto& c : golden.at("biases")) {
    v1::GetAlibiSlopesRequest req;
    req.set_num_heads(c.at("num_heads").get<int>());
    req.set_include_bias(true);
    req.set_q_len(c.at("q_len").get<int64_t>());
    req.set_k_len(c.at("k_len").get<int64_t>());
    req.set_bidirectional(!c.at("causal").get<bool>());
    v1::GetAlibiSlopesResponse resp;
    ASSERT_TRUE(Alibi(req, &resp).ok());
    ASSERT_EQ(resp.bias().shape_size(), 3);
    auto bias = *DecodeFloatTensor(resp.bias(), "bias");
    const auto& want = c.at("bias");
    ASSERT_EQ(bias.size(), want.size());
    for (size_t i = 0; i < bias.size(); ++i) {
      if (want[i].is_null()) {
        EXPECT_EQ(bias[i], -std::numeric_limits<float>::infinity());
      } else {
        EXPECT_EQ(bias[i], want[i].get<float>());
      }
    }
  }
  // num_heads = 0: the model's heads (stories260K: 8).
  v1::GetAlibiSlopesRequest req;
  v1::GetAlibiSlopesResponse resp;
  ASSERT_TRUE(Alibi(req, &resp).ok());
  EXPECT_EQ(resp.slopes().shape(0), 8);
  req.set_num_heads(-3);
  ExpectInvalid(Alibi(req, &resp), "num_heads = -3");
  req.set_num_heads(4);
  req.set_include_bias(true);
  req.set_q_len(5);
  req.set_k_len(2);
  ExpectInvalid(Alibi(req, &resp), "q_len = 5 > k_len = 2");
  req.set_q_len(0);
  ExpectInvalid(Alibi(req, &resp), "q_len = 0");
}

TEST_F(PositionServiceTest, ApplyRopeBf16F16HighPrecisionAndAttentionScaling) {
  const int64_t h = 2, s = 3, d = 8;
  std::vector<float> q(h * s * d), k(h * s * d);
  for (size_t i = 0; i < q.size(); ++i) q[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  k = q;
  v1::ApplyRopeRequest f32;
  f32.set_model(kHfModel);
  *f32.mutable_q() = EncodeFloatTensor(q, {1, h, s, d});
  *f32.mutable_k() = EncodeFloatTensor(k, {1, h, s, d});
  f32.add_position_offsets(7);
  auto ref = client().ApplyRope(f32);
  ASSERT_TRUE(ref.ok());
  const auto ref_q = *DecodeFloatTensor(ref->q(), "q");
  for (DType dt : {DType::kBF16, DType::kF16}) {
    v1::ApplyRopeRequest r = f32;
    *r.mutable_q() = EncodeFloatTensor(q, {1, h, s, d}, dt);  // inputs exact in both
    *r.mutable_k() = EncodeFloatTensor(k, {1, h, s, d}, dt);
    auto got = client().ApplyRope(r);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->q().dtype(), r.q().dtype());
    // Computed in F32, rounded once to the dtype.
    auto want = EncodeFloatTensor(ref_q, {1, h, s, d}, dt);
    EXPECT_EQ(got->q().data(), want.data());
  }
  // Yarn through the request: attention scaling reported and applied.
  v1::ApplyRopeRequest yarn = f32;
  v1::RopeScaling* sc = yarn.mutable_rope()->mutable_scaling();
  sc->set_type(v1::ROPE_SCALING_YARN);
  sc->set_factor(4.0);
  sc->set_original_max_position_embeddings(128);
  auto y = client().ApplyRope(yarn);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_DOUBLE_EQ(y->attention_scaling(), 0.1 * std::log(4.0) + 1.0);
  // high_precision is accepted and changes far positions only slightly.
  v1::ApplyRopeRequest hp = f32;
  hp.set_high_precision(true);
  auto got = client().ApplyRope(hp);
  ASSERT_TRUE(got.ok()) << got.status();
  const auto hp_q = *DecodeFloatTensor(got->q(), "q");
  for (size_t i = 0; i < hp_q.size(); ++i) EXPECT_NEAR(hp_q[i], ref_q[i], 1e-5);
}

TEST_F(PositionServiceTest, GetModelReportsTrainedLengthAndScaling) {
  auto stub = v1::ModelService::NewStub(client().channel());
  grpc::ClientContext ctx;
  v1::GetModelRequest req;
  req.set_name(kHfModel);
  v1::ModelInfo info;
  ASSERT_TRUE(stub->GetModel(&ctx, req, &info).ok());
  EXPECT_EQ(info.max_position_embeddings(), 512);
  EXPECT_EQ(info.rope().max_position_embeddings(), 512);
  EXPECT_EQ(info.rope().scaling().type(), v1::ROPE_SCALING_DEFAULT);
  EXPECT_EQ(info.rope().rotary_dim(), info.head_dim());
  EXPECT_EQ(info.learned_position_offset(), 0);
}

TEST_F(PositionServiceTest, EmbedSinusoidalLengthPolicy) {
  auto stub = v1::EmbeddingService::NewStub(client().channel());
  v1::EmbedRequest req;
  req.set_model(kBinModel);
  req.set_absolute_positions(v1::ABSOLUTE_POSITIONS_SINUSOIDAL);
  v1::TokenSequence* seq = req.add_sequences();
  seq->add_token_ids(5);
  seq->add_token_ids(6);
  seq->set_position_offset(511);  // positions 511, 512
  v1::EmbedResponse resp;
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->Embed(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(),
                HasSubstr("sequences[0].token_ids[1]: position 512 of token 1 >= "
                          "max_position_embeddings 512 "
                          "(set allow_beyond_trained_length)"));
  }
  req.set_allow_beyond_trained_length(true);
  grpc::ClientContext ctx;
  EXPECT_TRUE(stub->Embed(&ctx, req, &resp).ok());
  // Learned positions on a model without a table: FAILED_PRECONDITION.
  req.set_absolute_positions(v1::ABSOLUTE_POSITIONS_LEARNED);
  req.set_learned_position_offset(2);
  grpc::ClientContext ctx2;
  EXPECT_EQ(stub->Embed(&ctx2, req, &resp).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

// A RoBERTa checkpoint (tests/data/forms/roberta) through a real server:
// GetModel / ListModels report its learned-position numbering, its
// embedding module (token type row 0, LayerNorm eps and key; GPT-2 beside it
// has none) and that its LM head is not served; Embed follows HF's
// create_position_ids_from_input_ids and RobertaEmbeddings.forward (NumPy
// golden); ComputeLogits / Score / ScoreStream answer FAILED_PRECONDITION
// naming the model and the reason.
TEST(RobertaServingTest, EmbedOnlyModelWithHfPositionNumbering) {
  VocabdServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.models = {{"roberta", SourceDir() + "/tests/data/forms/roberta"},
                    {"gpt2", SourceDir() + "/tests/data/forms/gpt2"}};
  auto server = VocabdServer::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  VocabdClient::Options client_options;
  client_options.target = (*server)->target();
  auto client = VocabdClient::Create(client_options);
  ASSERT_TRUE(client.ok()) << client.status();
  VocabdClient& c = **client;

  auto info = c.GetModel("roberta");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->architecture(), "roberta");
  EXPECT_EQ(info->position_scheme(), v1::POSITION_LEARNED);
  EXPECT_EQ(info->learned_position_padding_idx(), 1);
  EXPECT_EQ(info->learned_position_offset(), 2);
  EXPECT_THAT(info->lm_head_unsupported_reason(), HasSubstr("served for Embed only"));
  // The embedding module's rules (tests/data/forms/roberta/config.json
  // layer_norm_eps 1e-5).
  EXPECT_EQ(info->family(), "roberta");
  EXPECT_TRUE(info->embedding_token_type());
  EXPECT_EQ(info->embedding_norm().kind(), v1::LAYER_NORM);
  EXPECT_EQ(info->embedding_norm().eps(), 1e-5);
  EXPECT_EQ(info->embedding_norm().eps_key(), "layer_norm_eps");
  EXPECT_EQ(info->final_norm().kind(), v1::NORM_NONE);
  // ListModels says the same; GPT-2 (learned positions too) has no
  // embedding module: Embed is wte + wpe.
  auto listed = c.ListModels();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->models_size(), 2);
  for (const v1::ModelInfo& m : listed->models()) {
    SCOPED_TRACE(m.name());
    const bool roberta = m.name() == "roberta";
    EXPECT_EQ(m.embedding_token_type(), roberta);
    EXPECT_EQ(m.embedding_norm().kind(), roberta ? v1::LAYER_NORM : v1::NORM_NONE);
    EXPECT_EQ(m.embedding_norm().eps(), roberta ? 1e-5 : 0.0);
    EXPECT_EQ(m.embedding_norm().eps_key(), roberta ? "layer_norm_eps" : "");
  }

  const nlohmann::json golden =
      ReadGolden("checkpoint_forms_golden.json").at("roberta").at("roberta").at("cases");
  v1::EmbedRequest embed;
  embed.set_model("roberta");
  std::vector<float> want;
  for (const auto& g : golden) {
    v1::TokenSequence* seq = embed.add_sequences();
    for (int64_t id : g.at("ids").get<std::vector<int64_t>>()) seq->add_token_ids(id);
    seq->set_position_offset(g.at("past").get<int64_t>());
    const std::vector<float> e = ToFloats(g.at("embeddings"));
    want.insert(want.end(), e.begin(), e.end());
  }
  auto embedded = c.Embed(embed);
  ASSERT_TRUE(embedded.ok()) << embedded.status();
  auto got = DecodeFloatTensor(embedded->embeddings(), "embeddings");
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), want.size());
  // RobertaEmbeddings.forward: LayerNorm(word + token_type[0] + position),
  // fp32 against the float64 golden.
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_LE(std::fabs(static_cast<double>((*got)[i]) - want[i]),
              2e-6 + 2e-6 * std::fabs(static_cast<double>(want[i])))
        << "element " << i;
  }

  v1::ScoreRequest score;
  score.set_model("roberta");
  *score.mutable_hidden() = EncodeFloatTensor(std::vector<float>(8, 0.5f), {1, 8});
  absl::Status s = c.Score(score).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("model 'roberta' has no servable LM head"));
  EXPECT_THAT(s.message(), HasSubstr("masked-LM head"));
  v1::ComputeLogitsRequest logits;
  logits.set_model("roberta");
  *logits.mutable_hidden() = score.hidden();
  s = c.ComputeLogits(logits).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  auto scoring = v1::ScoringService::NewStub(c.channel());
  grpc::ClientContext stream_context;
  auto stream = scoring->ScoreStream(&stream_context);
  ASSERT_TRUE(stream->Write(score));
  stream->WritesDone();
  v1::ScoreResponse ignored;
  while (stream->Read(&ignored)) {
  }
  grpc::Status stream_status = stream->Finish();
  EXPECT_EQ(stream_status.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << stream_status.error_message();
  EXPECT_THAT(stream_status.error_message(), HasSubstr("model 'roberta' has no servable LM head"));
  // Still serving Embed.
  EXPECT_TRUE(c.Embed(embed).ok());
  (*server)->Shutdown();
}

}  // namespace
}  // namespace vocabd::testing
