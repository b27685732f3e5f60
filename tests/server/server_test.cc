// Integration tests: the real VocabdServer on 127.0.0.1:0, called over gRPC
// through the client library. References are computed here independently
// (float64 loops over the checkpoint weights) or read from the checkpoint.
#include <cmath>
#include <cstring>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "proto/tensor_codec.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/core/dtype.h"
#include "tests/server/server_fixture.h"
#include "tests/test_util.h"

namespace vocabd::testing {
namespace {

using ::testing::Contains;

constexpr int64_t kServerVocab = 512;
constexpr int64_t kServerHidden = 64;

class ServerIntegrationTest : public ServerTest {
 protected:
  static void SetUpTestSuite() {
    ServerTest::SetUpTestSuite();
    auto ckpt = LoadCheckpoint(Stories260KBin());
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    checkpoint_ = std::move(*ckpt).release();
  }
  static void TearDownTestSuite() {
    delete checkpoint_;
    checkpoint_ = nullptr;
    ServerTest::TearDownTestSuite();
  }
  static const float* EmbeddingRow(int64_t id) {
    return checkpoint_->embedding().f32() + id * kServerHidden;
  }
  // float64 reference: logits = W . rmsnorm(h) (or W . h).
  static std::vector<double> ReferenceLogits(const std::vector<float>& h, bool norm) {
    std::vector<double> x(h.begin(), h.end());
    if (norm) {
      double ss = 0;
      for (double v : x) ss += v * v;
      const double inv = 1.0 / std::sqrt(ss / kServerHidden + 1e-5);
      const float* w = checkpoint_->Find(kFinalNorm)->f32();
      for (int64_t j = 0; j < kServerHidden; ++j) x[j] = x[j] * inv * w[j];
    }
    std::vector<double> logits(kServerVocab);
    for (int64_t v = 0; v < kServerVocab; ++v) {
      double acc = 0;
      for (int64_t j = 0; j < kServerHidden; ++j) acc += static_cast<double>(EmbeddingRow(v)[j]) * x[j];
      logits[v] = acc;
    }
    return logits;
  }
  static std::vector<float> SomeHidden(int rows) {
    std::vector<float> h(rows * kServerHidden);
    for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>(std::sin(0.37 * i + 0.1));
    return h;
  }
  static Checkpoint* checkpoint_;
};

Checkpoint* ServerIntegrationTest::checkpoint_ = nullptr;

TEST_F(ServerIntegrationTest, ReflectionListsEveryService) {
  auto services = client().ListServices();
  ASSERT_TRUE(services.ok()) << services.status();
  for (const char* name : {"vocabd.v1.ModelService", "vocabd.v1.EmbeddingService",
                           "vocabd.v1.ScoringService", "vocabd.v1.PositionService",
                           "vocabd.v1.TokenizerService", "grpc.health.v1.Health"}) {
    EXPECT_THAT(*services, Contains(std::string(name)));
  }
}

TEST_F(ServerIntegrationTest, HealthIsServingOverallAndPerService) {
  for (const char* name : {"", "vocabd.v1.ModelService", "vocabd.v1.EmbeddingService",
                           "vocabd.v1.ScoringService", "vocabd.v1.PositionService"}) {
    auto status = client().HealthCheck(name);
    ASSERT_TRUE(status.ok()) << name << ": " << status.status();
    EXPECT_EQ(*status, "SERVING") << name;
  }
  auto unknown = client().HealthCheck("vocabd.v1.NoSuchService");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ServerIntegrationTest, ListModelsDescribesBothForms) {
  auto list = client().ListModels();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->models_size(), 2);
  for (const v1::ModelInfo& m : list->models()) {
    SCOPED_TRACE(m.name());
    EXPECT_EQ(m.state(), v1::READY);
    EXPECT_EQ(m.architecture(), "llama");
    EXPECT_EQ(m.vocab_size(), 512);
    EXPECT_EQ(m.hidden_size(), 64);
    EXPECT_EQ(m.num_hidden_layers(), 5);
    EXPECT_EQ(m.num_attention_heads(), 8);
    EXPECT_EQ(m.num_key_value_heads(), 4);
    EXPECT_EQ(m.head_dim(), 8);
    EXPECT_EQ(m.max_position_embeddings(), 512);
    EXPECT_EQ(m.dtype(), v1::F32);
    EXPECT_TRUE(m.tie_word_embeddings());
    EXPECT_EQ(m.position_scheme(), v1::POSITION_ROPE);
    EXPECT_DOUBLE_EQ(m.rope().theta(), 10000.0);
    EXPECT_EQ(m.rope().rotary_dim(), 8);
    EXPECT_EQ(m.final_norm().kind(), v1::RMS_NORM);
    EXPECT_NEAR(m.final_norm().eps(), 1e-5, 1e-12);
    EXPECT_EQ(m.bos_token_id(), 1);
    EXPECT_EQ(m.eos_token_id(), 2);
    // Tied head counted once: at least the embedding table.
    EXPECT_GE(m.resident_bytes(), 512 * 64 * 4);
    EXPECT_FALSE(m.source_files().empty());
  }
  const v1::ModelInfo& bin = list->models(0).name() == kBinModel ? list->models(0) : list->models(1);
  const v1::ModelInfo& hf = list->models(0).name() == kHfModel ? list->models(0) : list->models(1);
  EXPECT_TRUE(bin.is_default());
  EXPECT_FALSE(hf.is_default());
  EXPECT_EQ(bin.rope().pair_layout(), v1::INTERLEAVED);
  EXPECT_EQ(hf.rope().pair_layout(), v1::HALF_SPLIT);
  EXPECT_EQ(bin.source_files(0).sha256(),
            "b0a507e7ad0f626624f17112325e66691f9076d622e1d3274d103d00299f2696");
}

TEST_F(ServerIntegrationTest, GetModelByNameAndDefault) {
  auto by_name = client().GetModel(kHfModel);
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->name(), kHfModel);
  auto default_model = client().GetModel("");
  ASSERT_TRUE(default_model.ok()) << default_model.status();
  EXPECT_EQ(default_model->name(), kBinModel);
}

TEST_F(ServerIntegrationTest, EmbedReturnsExactRowsForARaggedBatch) {
  v1::EmbedRequest request;
  request.set_request_id("r1");
  const std::vector<std::vector<int64_t>> seqs = {{1, 403, 407}, {}, {511, 0}};
  for (const auto& s : seqs) {
    auto* seq = request.add_sequences();
    for (int64_t id : s) seq->add_token_ids(id);
  }
  for (const char* model : {kBinModel, kHfModel}) {
    request.set_model(model);
    auto response = client().Embed(request);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->model(), model);
    EXPECT_EQ(response->request_id(), "r1");
    ASSERT_EQ(response->embeddings().dtype(), v1::F32);
    ASSERT_THAT(std::vector<int64_t>(response->embeddings().shape().begin(),
                                     response->embeddings().shape().end()),
                ::testing::ElementsAre(5, 64));
    EXPECT_THAT(std::vector<int64_t>(response->sequence_offsets().begin(),
                                     response->sequence_offsets().end()),
                ::testing::ElementsAre(0, 3, 3, 5));
    const std::vector<int64_t> flat = {1, 403, 407, 511, 0};
    const std::string& data = response->embeddings().data();
    for (size_t t = 0; t < flat.size(); ++t) {
      EXPECT_EQ(std::memcmp(data.data() + t * kServerHidden * 4, EmbeddingRow(flat[t]), kServerHidden * 4), 0)
          << "row " << t << " (id " << flat[t] << ") is not bit-exact";
    }
  }
}

TEST_F(ServerIntegrationTest, EmbedHalfPrecisionOutputsRoundTheExactRows) {
  v1::EmbedRequest request;
  request.add_sequences()->add_token_ids(403);
  for (v1::DType dtype : {v1::F16, v1::BF16}) {
    request.set_output_dtype(dtype);
    auto response = client().Embed(request);
    ASSERT_TRUE(response.ok()) << response.status();
    ASSERT_EQ(response->embeddings().dtype(), dtype);
    ASSERT_EQ(response->embeddings().data().size(), static_cast<size_t>(kServerHidden * 2));
    for (int64_t j = 0; j < kServerHidden; ++j) {
      uint16_t got;
      std::memcpy(&got, response->embeddings().data().data() + 2 * j, 2);
      const float x = EmbeddingRow(403)[j];
      EXPECT_EQ(got, dtype == v1::F16 ? FloatToHalf(x) : FloatToBFloat16(x)) << j;
    }
  }
}

TEST_F(ServerIntegrationTest, EmbedScaleSqrtHidden) {
  v1::EmbedRequest request;
  request.add_sequences()->add_token_ids(7);
  request.set_embedding_scale(v1::EMBEDDING_SCALE_SQRT_HIDDEN);
  auto response = client().Embed(request);
  ASSERT_TRUE(response.ok()) << response.status();
  auto values = DecodeFloatTensor(response->embeddings(), "embeddings");
  ASSERT_TRUE(values.ok());
  for (int64_t j = 0; j < kServerHidden; ++j) {
    EXPECT_EQ((*values)[j], EmbeddingRow(7)[j] * 8.0f) << j;
  }
}

TEST_F(ServerIntegrationTest, ComputeLogitsMatchesFloat64Reference) {
  const int rows = 3;
  const std::vector<float> h = SomeHidden(rows);
  for (bool norm : {true, false}) {
    v1::ComputeLogitsRequest request;
    *request.mutable_hidden() = EncodeFloatTensor(h, {rows, kServerHidden});
    if (!norm) request.set_apply_final_norm(false);
    auto response = client().ComputeLogits(request);
    ASSERT_TRUE(response.ok()) << response.status();
    auto logits = DecodeFloatTensor(response->logits(), "logits");
    ASSERT_TRUE(logits.ok());
    ASSERT_EQ(logits->size(), static_cast<size_t>(rows * kServerVocab));
    for (int r = 0; r < rows; ++r) {
      std::vector<float> row(h.begin() + r * kServerHidden, h.begin() + (r + 1) * kServerHidden);
      const std::vector<double> want = ReferenceLogits(row, norm);
      double scale = 0;
      for (double v : want) scale = std::max(scale, std::abs(v));
      for (int64_t v = 0; v < kServerVocab; ++v) {
        ASSERT_NEAR((*logits)[r * kServerVocab + v], want[v], 1e-5 * scale) << "row " << r << " id " << v;
      }
    }
  }
}

TEST_F(ServerIntegrationTest, ComputeLogitsLogSoftmaxTemperatureAndMask) {
  const std::vector<float> h = SomeHidden(1);
  v1::ComputeLogitsRequest request;
  *request.mutable_hidden() = EncodeFloatTensor(h, {1, kServerHidden});
  request.set_log_softmax(true);
  request.set_temperature(0.5f);
  request.set_vocab_limit(500);
  auto response = client().ComputeLogits(request);
  ASSERT_TRUE(response.ok()) << response.status();
  auto got = DecodeFloatTensor(response->logits(), "logits");
  ASSERT_TRUE(got.ok());
  std::vector<double> want = ReferenceLogits(h, true);
  double m = -INFINITY;
  for (int64_t v = 0; v < 500; ++v) {
    want[v] /= 0.5;
    m = std::max(m, want[v]);
  }
  double sum = 0;
  for (int64_t v = 0; v < 500; ++v) sum += std::exp(want[v] - m);
  const double lse = m + std::log(sum);
  for (int64_t v = 0; v < kServerVocab; ++v) {
    if (v >= 500) {
      EXPECT_TRUE(std::isinf((*got)[v]) && (*got)[v] < 0) << v;
    } else {
      EXPECT_NEAR((*got)[v], want[v] - lse, 1e-4) << v;
    }
  }
}

TEST_F(ServerIntegrationTest, ScoreTargetsTopKAndSequenceLogLikelihood) {
  const int rows = 4;
  const std::vector<float> h = SomeHidden(rows);
  const std::vector<int64_t> targets = {403, 0, 511, 17};
  v1::ScoreRequest request;
  request.set_model(kHfModel);
  request.set_request_id("s1");
  *request.mutable_hidden() = EncodeFloatTensor(h, {rows, kServerHidden});
  for (int64_t t : targets) request.add_target_ids(t);
  request.set_top_k(5);
  auto response = client().Score(request);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->rows_size(), rows);
  EXPECT_EQ(response->request_id(), "s1");
  EXPECT_EQ(response->num_targets(), rows);
  double sum = 0;
  for (int r = 0; r < rows; ++r) {
    std::vector<float> row(h.begin() + r * kServerHidden, h.begin() + (r + 1) * kServerHidden);
    const std::vector<double> logits = ReferenceLogits(row, true);
    double m = -INFINITY;
    for (double v : logits) m = std::max(m, v);
    double s = 0;
    for (double v : logits) s += std::exp(v - m);
    const double lse = m + std::log(s);
    const v1::RowScore& got = response->rows(r);
    EXPECT_NEAR(got.logsumexp(), lse, 1e-4);
    EXPECT_NEAR(got.target_logprob(), logits[targets[r]] - lse, 1e-4);
    int64_t rank = 1;
    for (int64_t v = 0; v < kServerVocab; ++v) rank += logits[v] > logits[targets[r]];
    EXPECT_EQ(got.target_rank(), rank);
    std::vector<int64_t> order(kServerVocab);
    for (int64_t v = 0; v < kServerVocab; ++v) order[v] = v;
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
    ASSERT_EQ(got.top_k_size(), 5);
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(got.top_k(i).token_id(), order[i]) << "row " << r << " rank " << i;
      EXPECT_NEAR(got.top_k(i).logprob(), logits[order[i]] - lse, 1e-4);
    }
    sum += got.target_logprob();
  }
  EXPECT_NEAR(response->sum_target_logprob(), sum, 1e-4);
}

TEST_F(ServerIntegrationTest, ApplyRopeRotatesLikeTheFormulaForBothModels) {
  // q [1, 8, 2, 8], k [1, 4, 2, 8] at positions 5, 6.
  const int64_t hq = 8, hk = 4, s = 2, d = 8;
  std::vector<float> q(hq * s * d), k(hk * s * d);
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(std::cos(0.11 * i));
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>(std::sin(0.23 * i));
  for (const char* model : {kBinModel, kHfModel}) {
    SCOPED_TRACE(model);
    const bool interleaved = std::string(model) == kBinModel;
    v1::ApplyRopeRequest request;
    request.set_model(model);
    request.set_layout(v1::BHSD);
    *request.mutable_q() = EncodeFloatTensor(q, {1, hq, s, d});
    *request.mutable_k() = EncodeFloatTensor(k, {1, hk, s, d});
    request.add_position_offsets(5);
    auto response = client().ApplyRope(request);
    ASSERT_TRUE(response.ok()) << response.status();
    auto got_q = DecodeFloatTensor(response->q(), "q");
    auto got_k = DecodeFloatTensor(response->k(), "k");
    ASSERT_TRUE(got_q.ok() && got_k.ok());
    auto check = [&](const std::vector<float>& in, const std::vector<float>& out, int64_t heads) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t t = 0; t < s; ++t) {
          const double pos = 5 + t;
          const float* x = in.data() + (h * s + t) * d;
          const float* y = out.data() + (h * s + t) * d;
          for (int64_t i = 0; i < d / 2; ++i) {
            const double angle = pos * std::pow(10000.0, -2.0 * i / d);
            const int64_t a = interleaved ? 2 * i : i;
            const int64_t b = interleaved ? 2 * i + 1 : i + d / 2;
            EXPECT_NEAR(y[a], x[a] * std::cos(angle) - x[b] * std::sin(angle), 2e-6);
            EXPECT_NEAR(y[b], x[b] * std::cos(angle) + x[a] * std::sin(angle), 2e-6);
          }
        }
      }
    };
    check(q, *got_q, hq);
    check(k, *got_k, hk);
  }
}

TEST_F(ServerIntegrationTest, ApplyRopeLayoutsAgree) {
  // The same logical q/k in BHSD, BSHD and THD with explicit position ids.
  const int64_t hq = 2, hk = 1, s = 3, d = 8;
  std::vector<float> bhsd_q(hq * s * d), bhsd_k(hk * s * d);
  for (size_t i = 0; i < bhsd_q.size(); ++i) bhsd_q[i] = 0.01f * i - 0.2f;
  for (size_t i = 0; i < bhsd_k.size(); ++i) bhsd_k[i] = 0.5f - 0.02f * i;
  auto to_bshd = [&](const std::vector<float>& x, int64_t heads) {
    std::vector<float> y(x.size());
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t t = 0; t < s; ++t)
        std::memcpy(&y[(t * heads + h) * d], &x[(h * s + t) * d], d * 4);
    return y;
  };
  const std::vector<int64_t> positions = {3, 9, 4};
  v1::ApplyRopeRequest request;
  request.set_layout(v1::BHSD);
  *request.mutable_q() = EncodeFloatTensor(bhsd_q, {1, hq, s, d});
  *request.mutable_k() = EncodeFloatTensor(bhsd_k, {1, hk, s, d});
  *request.mutable_position_ids() = EncodeInt64Tensor(positions, {1, s});
  auto a = client().ApplyRope(request);
  ASSERT_TRUE(a.ok()) << a.status();
  request.set_layout(v1::BSHD);
  *request.mutable_q() = EncodeFloatTensor(to_bshd(bhsd_q, hq), {1, s, hq, d});
  *request.mutable_k() = EncodeFloatTensor(to_bshd(bhsd_k, hk), {1, s, hk, d});
  auto b = client().ApplyRope(request);
  ASSERT_TRUE(b.ok()) << b.status();
  request.set_layout(v1::THD);
  *request.mutable_q() = EncodeFloatTensor(to_bshd(bhsd_q, hq), {s, hq, d});
  *request.mutable_k() = EncodeFloatTensor(to_bshd(bhsd_k, hk), {s, hk, d});
  *request.mutable_position_ids() = EncodeInt64Tensor(positions, {s});
  auto c = client().ApplyRope(request);
  ASSERT_TRUE(c.ok()) << c.status();
  auto qa = *DecodeFloatTensor(a->q(), "q");
  EXPECT_EQ(to_bshd(qa, hq), *DecodeFloatTensor(b->q(), "q"));
  EXPECT_EQ(to_bshd(qa, hq), *DecodeFloatTensor(c->q(), "q"));
  auto ka = *DecodeFloatTensor(a->k(), "k");
  EXPECT_EQ(to_bshd(ka, hk), *DecodeFloatTensor(b->k(), "k"));
  EXPECT_EQ(to_bshd(ka, hk), *DecodeFloatTensor(c->k(), "k"));
}


// A second server on a taken --listen port fails to start (gRPC's default
// SO_REUSEPORT would let it share the port silently).
TEST(ServerListenTest, TakenPortFailsTheStartNamingTheAddress) {
  VocabdServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.models = {{"stories260K", Stories260KBin()}};
  auto first = VocabdServer::Create(options);
  ASSERT_TRUE(first.ok()) << first.status();
  options.listen_address = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = VocabdServer::Create(options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()),
              ::testing::HasSubstr("cannot listen on " + options.listen_address));
  (*first)->Shutdown();
}

}  // namespace
}  // namespace vocabd::testing
