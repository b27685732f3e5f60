// lib/model serving features on the real stories260K weights: BF16 weights
// (one copy, tied head shared, exact Embed, resident bytes, checkpoint BF16
// served natively, fallback), and the async head path through the dynamic
// batcher (identical to the synchronous calls, per-request options kept,
// cancelled calls never computed, queue full).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <future>
#include <memory>
#include <mutex>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

#include "lib/core/dtype.h"
#include "lib/serving/model.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kServingVocab = 512;
constexpr int64_t kServingHidden = 64;

std::unique_ptr<Model> LoadServingModel(Model::Options o) {
  auto model = Model::Create(o);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

std::vector<float> ServingHidden(int rows, double phase = 0.7) {
  std::vector<float> h(rows * kServingHidden);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>(std::cos(phase * i));
  return h;
}

std::vector<float> TableF32(const Model& m) {
  const WeightTensor& t = m.checkpoint().embedding();
  std::vector<float> out(static_cast<size_t>(t.num_elements()));
  ConvertToF32(t.dtype, t.data, out.size(), out.data());
  return out;
}

TEST(ModelBf16Test, ServesOneBf16CopySharedByTheTiedHead) {
  if (!LmHead::Bf16Supported()) GTEST_SKIP() << "CPU without AVX512-BF16/AMX";
  auto f32 = LoadServingModel({"f32", testing::Stories260KBin()});
  Model::Options o{"bf16", testing::Stories260KBin()};
  o.weights_dtype = WeightsDType::kBF16;
  auto bf16 = LoadServingModel(o);
  ASSERT_NE(f32, nullptr);
  ASSERT_NE(bf16, nullptr);
  EXPECT_EQ(f32->serving_dtype(), DType::kF32);
  EXPECT_EQ(bf16->serving_dtype(), DType::kBF16);
  EXPECT_EQ(bf16->fallback_reason(), "");
  const Checkpoint& c = bf16->checkpoint();
  EXPECT_EQ(c.embedding().dtype, DType::kBF16);
  EXPECT_EQ(c.lm_head().data, c.embedding().data);  // tied: one copy
  EXPECT_EQ(c.embedding().nbytes, static_cast<size_t>(kServingVocab * kServingHidden * 2));
  // The table now takes 64 KiB instead of 128 KiB.
  EXPECT_EQ(f32->checkpoint().resident_bytes() - c.resident_bytes(), kServingVocab * kServingHidden * 2);
  EXPECT_THAT(bf16->lm_head_implementation(), Not(HasSubstr("ref")));

  // Embed serves the bf16 table converted exactly to F32.
  EmbedInput in;
  in.token_ids = {{0, 1, 403, 511}};
  EmbedOutput a, b;
  ASSERT_TRUE(f32->Embed(in, &a).ok());
  ASSERT_TRUE(bf16->Embed(in, &b).ok());
  ASSERT_EQ(a.embeddings.size(), b.embeddings.size());
  for (size_t i = 0; i < a.embeddings.size(); ++i) {
    ASSERT_EQ(b.embeddings[i], BFloat16ToFloat(FloatToBFloat16(a.embeddings[i]))) << i;
  }

  // Logits stay within the documented BF16 bound of the F32 ones:
  // max_j |l_j - ref_j| <= 4e-3 * max_j |ref_j| per row.
  const std::vector<float> h = ServingHidden(3);
  HeadInput head{h.data(), 3, kServingHidden};
  std::vector<float> la, lb;
  ASSERT_TRUE(f32->ComputeLogits(head, false, &la).ok());
  ASSERT_TRUE(bf16->ComputeLogits(head, false, &lb).ok());
  for (int r = 0; r < 3; ++r) {
    double err = 0, scale = 0;
    for (int64_t j = r * kServingVocab; j < (r + 1) * kServingVocab; ++j) {
      err = std::max<double>(err, std::abs(la[j] - lb[j]));
      scale = std::max<double>(scale, std::abs(la[j]));
    }
    EXPECT_LE(err, 4e-3 * scale) << "row " << r;
    EXPECT_GT(err, 0.0);
  }
}

// Writes stories260K as a BF16 safetensors checkpoint (embedding in BF16,
// norm in F32) into a temp dir and returns the dir.
std::string WriteBf16Checkpoint(const std::vector<float>& table, const std::vector<float>& norm) {
  const std::string dir = testing::MakeTempDir();
  std::ifstream cfg(testing::Stories260KHfDir() + "/config.json");
  std::ofstream(dir + "/config.json") << cfg.rdbuf();
  std::vector<uint16_t> bf16(table.size());
  ConvertFromF32(table.data(), table.size(), DType::kBF16, bf16.data());
  const size_t emb_bytes = bf16.size() * 2;
  nlohmann::json header;
  header["model.embed_tokens.weight"] = {
      {"dtype", "BF16"}, {"shape", {kServingVocab, kServingHidden}}, {"data_offsets", {0, emb_bytes}}};
  header["model.norm.weight"] = {{"dtype", "F32"},
                                 {"shape", {kServingHidden}},
                                 {"data_offsets", {emb_bytes, emb_bytes + norm.size() * 4}}};
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  std::ofstream out(dir + "/model.safetensors", std::ios::binary);
  const uint64_t len = text.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << text;
  out.write(reinterpret_cast<const char*>(bf16.data()), emb_bytes);
  out.write(reinterpret_cast<const char*>(norm.data()), norm.size() * 4);
  return dir;
}

TEST(ModelBf16Test, Bf16CheckpointIsServedInBf16ByDefault) {
  if (!LmHead::Bf16Supported()) GTEST_SKIP() << "CPU without AVX512-BF16/AMX";
  auto f32 = LoadServingModel({"f32", testing::Stories260KHfDir()});
  ASSERT_NE(f32, nullptr);
  const WeightTensor* norm = f32->checkpoint().Find(kFinalNorm);
  ASSERT_NE(norm, nullptr);
  const std::string dir =
      WriteBf16Checkpoint(TableF32(*f32), std::vector<float>(norm->f32(), norm->f32() + kServingHidden));
  auto model = LoadServingModel({"bf16ckpt", dir});
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->serving_dtype(), DType::kBF16);
  EXPECT_EQ(model->requested_weights_dtype(), WeightsDType::kAuto);
  EXPECT_EQ(model->checkpoint().embedding().stored_dtype, DType::kBF16);
  // One BF16 copy (the loader's F32 conversion buffer was freed) + norm.
  EXPECT_EQ(model->checkpoint().resident_bytes(), kServingVocab * kServingHidden * 2 + kServingHidden * 4);
  // Asking for F32 keeps the (exact) F32 conversion.
  Model::Options o{"asf32", dir};
  o.weights_dtype = WeightsDType::kF32;
  auto as_f32 = LoadServingModel(o);
  ASSERT_NE(as_f32, nullptr);
  EXPECT_EQ(as_f32->serving_dtype(), DType::kF32);
  EXPECT_EQ(as_f32->checkpoint().resident_bytes(), kServingVocab * kServingHidden * 4 + kServingHidden * 4);
  EXPECT_EQ(TableF32(*as_f32), TableF32(*model));
}

// Runs only in the ctest entry with DNNL_MAX_CPU_ISA=AVX512_CORE (oneDNN
// then reports no bf16 ISA): BF16 asked, F32 served, reason given.
TEST(ModelBf16FallbackTest, FallsBackToF32WithAReason) {
  if (LmHead::Bf16Supported()) GTEST_SKIP() << "only meaningful without bf16 (see ctest entry)";
  Model::Options o{"bf16", testing::Stories260KBin()};
  o.weights_dtype = WeightsDType::kBF16;
  auto model = LoadServingModel(o);
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->serving_dtype(), DType::kF32);
  EXPECT_EQ(model->requested_weights_dtype(), WeightsDType::kBF16);
  EXPECT_THAT(model->fallback_reason(), HasSubstr("AVX512-BF16"));
  EXPECT_EQ(model->checkpoint().embedding().dtype, DType::kF32);
}

// ---- Async / dynamic batching ----

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, int rows) {
  ASSERT_EQ(got.size(), want.size());
  for (int r = 0; r < rows; ++r) {
    double err = 0, scale = 0;
    for (int64_t j = r * kServingVocab; j < (r + 1) * kServingVocab; ++j) {
      if (std::isinf(want[j])) {
        EXPECT_EQ(got[j], want[j]) << j;  // masked ids stay -inf
        continue;
      }
      err = std::max<double>(err, std::abs(got[j] - want[j]));
      scale = std::max<double>(scale, std::abs(want[j]));
    }
    EXPECT_LE(err, 1e-6 * scale) << "row " << r;
  }
}

class ModelBatchingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pool = ComputePool::Create({1, 64});
    ASSERT_TRUE(pool.ok());
    pool_ = std::move(*pool);
    sync_ = LoadServingModel({"sync", testing::Stories260KBin()});
    Model::Options o{"batched", testing::Stories260KBin()};
    o.compute_pool = pool_.get();
    DynamicBatcher::Options b;
    b.max_batch_rows = 64;
    b.max_queue_rows = 64;
    b.on_batch = [this](int64_t rows) {
      std::lock_guard<std::mutex> lock(mu_);
      batches_.push_back(rows);
    };
    o.batching = b;
    batched_ = LoadServingModel(o);
    ASSERT_NE(batched_, nullptr);
    ASSERT_NE(batched_->batcher(), nullptr);
  }
  void TearDown() override { pool_->Shutdown(); }
  void CloseGate() {
    ASSERT_TRUE(pool_->Submit([f = gate_.get_future().share()] { f.wait(); }).ok());
  }
  std::vector<int64_t> Batches() {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_;
  }

  std::unique_ptr<ComputePool> pool_;
  std::unique_ptr<Model> sync_, batched_;
  std::promise<void> gate_;
  std::mutex mu_;
  std::vector<int64_t> batches_;
};

TEST_F(ModelBatchingTest, MixedRequestsInOneBatchMatchUnbatchedExactly) {
  // Four requests with different options, all in one GEMM.
  const std::vector<float> h1 = ServingHidden(2, 0.3), h2 = ServingHidden(3, 0.9), h3 = ServingHidden(1, 1.7),
                           h4 = ServingHidden(4, 2.1);
  HeadInput logits_a{h1.data(), 2, kServingHidden};
  logits_a.temperature = 0.7f;
  HeadInput logits_b{h2.data(), 3, kServingHidden};
  logits_b.apply_final_norm = false;
  logits_b.vocab_limit = 300;
  ScoreInput score_c;
  score_c.head = HeadInput{h3.data(), 1, kServingHidden};
  score_c.target_ids = {403};
  score_c.top_k = 7;
  ScoreInput score_d;
  score_d.head = HeadInput{h4.data(), 4, kServingHidden};
  score_d.head.temperature = 1.9f;
  score_d.head.vocab_limit = 500;
  score_d.target_ids = {1, 2, 3, 499};
  score_d.top_k = 500;

  std::promise<std::vector<float>> pa, pb;
  std::promise<ScoreOutput> pc, pd;
  CloseGate();
  batched_->ComputeLogitsAsync(logits_a, /*log_softmax=*/false, nullptr,
                               [&](absl::Status st, std::vector<float> l) {
                                 EXPECT_TRUE(st.ok()) << st;
                                 pa.set_value(std::move(l));
                               });
  batched_->ComputeLogitsAsync(logits_b, /*log_softmax=*/true, nullptr,
                               [&](absl::Status st, std::vector<float> l) {
                                 EXPECT_TRUE(st.ok()) << st;
                                 pb.set_value(std::move(l));
                               });
  batched_->ScoreAsync(score_c, nullptr, [&](absl::Status st, ScoreOutput out) {
    EXPECT_TRUE(st.ok()) << st;
    pc.set_value(std::move(out));
  });
  batched_->ScoreAsync(score_d, nullptr, [&](absl::Status st, ScoreOutput out) {
    EXPECT_TRUE(st.ok()) << st;
    pd.set_value(std::move(out));
  });
  EXPECT_EQ(batched_->batcher()->queued_rows(), 10);
  gate_.set_value();
  const std::vector<float> a = pa.get_future().get(), b = pb.get_future().get();
  const ScoreOutput c = pc.get_future().get(), d = pd.get_future().get();
  EXPECT_THAT(Batches(), ElementsAre(10));

  std::vector<float> want_a, want_b;
  ASSERT_TRUE(sync_->ComputeLogits(logits_a, false, &want_a).ok());
  ASSERT_TRUE(sync_->ComputeLogits(logits_b, true, &want_b).ok());
  // Same values up to oneDNN's M-dependent f32 summation order (see
  // dynamic_batcher.h): 1e-6 of the row scale, far inside the 1e-5 contract.
  ExpectClose(a, want_a, 2);
  ExpectClose(b, want_b, 3);
  EXPECT_EQ(b[1 * kServingVocab + 300], -INFINITY);  // vocab_limit kept per request
  for (const auto& [got, input] : {std::pair{&c, &score_c}, std::pair{&d, &score_d}}) {
    ScoreOutput want;
    ASSERT_TRUE(sync_->Score(*input, &want).ok());
    ASSERT_EQ(got->rows.size(), want.rows.size());
    for (size_t r = 0; r < want.rows.size(); ++r) {
      EXPECT_NEAR(got->rows[r].logsumexp, want.rows[r].logsumexp, 1e-5);
      EXPECT_NEAR(got->rows[r].target_logprob, want.rows[r].target_logprob, 1e-5);
      EXPECT_EQ(got->rows[r].target_rank, want.rows[r].target_rank);
      ASSERT_EQ(got->rows[r].top_k.size(), want.rows[r].top_k.size());
      for (size_t k = 0; k < want.rows[r].top_k.size(); ++k) {
        // Batched and unbatched rows may run different kernels (the small-M
        // crossover is per CPU), so near-ties may swap places: then the two
        // ids' log-probs agree within the tolerance.
        if (got->rows[r].top_k[k].first != want.rows[r].top_k[k].first) {
          const auto& w = want.rows[r].top_k;
          // A copy: clang 14 cannot capture a structured binding in a lambda.
          const auto got_id = got->rows[r].top_k[k].first;
          const auto it = std::find_if(w.begin(), w.end(),
                                       [got_id](const auto& e) { return e.first == got_id; });
          if (k + 1 < w.size()) {
            ASSERT_NE(it, w.end()) << "top_k id " << got->rows[r].top_k[k].first;
            EXPECT_NEAR(it->second, w[k].second, 1e-5);
          }
        }
        EXPECT_NEAR(got->rows[r].top_k[k].second, want.rows[r].top_k[k].second, 1e-5);
      }
    }
    EXPECT_NEAR(got->sum_target_logprob, want.sum_target_logprob, 1e-4);
    EXPECT_EQ(got->num_targets, want.num_targets);
  }
  EXPECT_EQ(d.rows[0].top_k.size(), 500u);
  EXPECT_EQ(d.num_targets, 4);
}

TEST_F(ModelBatchingTest, CancelledCallIsNeverComputed) {
  const std::vector<float> h = ServingHidden(5);
  std::promise<absl::Status> p1, p2;
  CloseGate();
  batched_->ComputeLogitsAsync(
      HeadInput{h.data(), 5, kServingHidden}, false,
      [] { return absl::CancelledError("call cancelled before compute"); },
      [&](absl::Status st, std::vector<float>) { p1.set_value(st); });
  batched_->ComputeLogitsAsync(HeadInput{h.data(), 2, kServingHidden}, false, nullptr,
                               [&](absl::Status st, std::vector<float>) { p2.set_value(st); });
  gate_.set_value();
  EXPECT_EQ(p1.get_future().get().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(p2.get_future().get().ok());
  EXPECT_THAT(Batches(), ElementsAre(2));
}

TEST_F(ModelBatchingTest, FullQueueAndBadInputAnswerInline) {
  const std::vector<float> h = ServingHidden(40);
  CloseGate();
  std::promise<absl::Status> p1;
  batched_->ComputeLogitsAsync(HeadInput{h.data(), 40, kServingHidden}, false, nullptr,
                               [&](absl::Status st, std::vector<float>) { p1.set_value(st); });
  absl::Status full, bad;
  batched_->ComputeLogitsAsync(HeadInput{h.data(), 30, kServingHidden}, false, nullptr,
                               [&](absl::Status st, std::vector<float>) { full = st; });
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_THAT(full.message(), HasSubstr("max_queue_rows = 64"));
  ScoreInput s;
  s.head = HeadInput{h.data(), 1, kServingHidden};
  s.top_k = 1025;
  batched_->ScoreAsync(s, nullptr, [&](absl::Status st, ScoreOutput) { bad = st; });
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("top_k = 1025"));
  gate_.set_value();
  EXPECT_TRUE(p1.get_future().get().ok());
}

// stories260K served through a one-thread compute pool, unbatched.
struct PoolModel {
  std::unique_ptr<ComputePool> pool;
  std::unique_ptr<Model> model;
  void Load() {
    auto p = ComputePool::Create({1, 8});
    ASSERT_TRUE(p.ok());
    pool = std::move(*p);
    Model::Options o{"pool", testing::Stories260KBin()};
    o.compute_pool = pool.get();
    model = LoadServingModel(o);
    ASSERT_NE(model, nullptr);
  }
};

// A finite row whose logits leave float32's range is refused, naming the
// row and the logit; other rows and calls are unaffected.
std::vector<float> OverflowingRows(const Model& m, int rows, int bad_row) {
  // bad_row: +-3e38 with the signs of token 0's head weights, so logit 0
  // is 3e38 * sum_j |w[0, j]| (> FLT_MAX when that sum is > 1.14).
  const WeightTensor& head = m.checkpoint().lm_head();
  std::vector<float> table(static_cast<size_t>(kServingHidden));
  ConvertToF32(head.dtype, head.data, table.size(), table.data());
  double sum_abs = 0;
  for (int64_t j = 0; j < kServingHidden; ++j) sum_abs += std::fabs(table[j]);
  EXPECT_GT(sum_abs, 2.0);
  std::vector<float> h = ServingHidden(rows);
  for (int64_t j = 0; j < kServingHidden; ++j) {
    h[bad_row * kServingHidden + j] = std::copysign(3e38f, table[j]);
  }
  return h;
}

TEST(ModelLogitRangeTest, FiniteRowWithOverflowingLogitsIsRefused) {
  auto m = LoadServingModel({"m", testing::Stories260KBin()});
  ASSERT_NE(m, nullptr);
  const std::vector<float> h = OverflowingRows(*m, 3, 1);
  for (bool allow_non_finite : {false, true}) {
    for (bool log_softmax : {false, true}) {
      HeadInput in{h.data(), 3, kServingHidden};
      in.apply_final_norm = false;
      in.allow_non_finite = allow_non_finite;
      std::vector<float> logits;
      const absl::Status st = m->ComputeLogits(in, log_softmax, &logits);
      EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
      EXPECT_THAT(st.message(), HasSubstr("hidden[1] is finite but logits[1, "));
      EXPECT_THAT(st.message(), HasSubstr("leave float32's range"));
    }
  }
  // The final norm brings the row back into range: answered.
  HeadInput normed{h.data(), 3, kServingHidden};
  std::vector<float> logits;
  ASSERT_TRUE(m->ComputeLogits(normed, false, &logits).ok());
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  // Score too, past its first slice of rows.
  std::vector<float> long_h = ServingHidden(kDefaultHeadSliceRows + 10);
  std::copy(h.begin() + kServingHidden, h.begin() + 2 * kServingHidden,
            long_h.begin() + (kDefaultHeadSliceRows + 3) * kServingHidden);
  ScoreInput s;
  s.head = HeadInput{long_h.data(), kDefaultHeadSliceRows + 10, kServingHidden};
  s.head.apply_final_norm = false;
  s.top_k = 3;
  ScoreOutput out;
  const absl::Status st = m->Score(s, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(),
              HasSubstr(absl::StrCat("hidden[", kDefaultHeadSliceRows + 3, "] is finite")));
}

TEST(ModelLogitRangeTest, TinyTemperatureIsRefusedWhereItOverflows) {
  auto m = LoadServingModel({"m", testing::Stories260KBin()});
  ASSERT_NE(m, nullptr);
  const std::vector<float> h = ServingHidden(2);
  HeadInput in{h.data(), 2, kServingHidden};
  in.temperature = 1e-40f;  // subnormal, > 0: accepted, but logits / T overflow
  std::vector<float> logits;
  absl::Status st = m->ComputeLogits(in, false, &logits);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr("hidden[0] is finite but logits[0, "));
  EXPECT_THAT(st.message(), HasSubstr("temperature = "));
  in.temperature = 1e-3f;  // large but finite logits: answered
  ASSERT_TRUE(m->ComputeLogits(in, true, &logits).ok());
}

TEST(ModelLogitRangeTest, NonFiniteRowsAllowedAreStillAnswered) {
  auto m = LoadServingModel({"m", testing::Stories260KBin()});
  ASSERT_NE(m, nullptr);
  std::vector<float> h = ServingHidden(2);
  h[kServingHidden + 5] = std::numeric_limits<float>::quiet_NaN();
  HeadInput in{h.data(), 2, kServingHidden};
  in.allow_non_finite = true;
  std::vector<float> logits;
  ASSERT_TRUE(m->ComputeLogits(in, false, &logits).ok());
  EXPECT_TRUE(std::isfinite(logits[0]));
  EXPECT_TRUE(std::isnan(logits[kServingVocab]));
}

// Through the batcher: the refused call's done runs once, after its first
// slice went through and with its last slice dropped; a call in the same
// batches is answered (as the synchronous call, within ExpectClose: the
// GEMM's row count differs).
TEST(ModelLogitRangeTest, RefusedSliceEndsOnlyItsOwnCall) {
  auto pool = ComputePool::Create({1, 64});
  ASSERT_TRUE(pool.ok());
  Model::Options o{"batched", testing::Stories260KBin()};
  o.compute_pool = pool->get();
  DynamicBatcher::Options b;
  b.max_batch_rows = 16;
  b.max_queue_rows = 256;
  std::vector<int64_t> batches;
  std::mutex mu;
  b.on_batch = [&](int64_t rows) {
    std::lock_guard<std::mutex> lock(mu);
    batches.push_back(rows);
  };
  o.batching = b;
  auto batched = LoadServingModel(o);
  ASSERT_NE(batched, nullptr);
  auto sync = LoadServingModel({"sync", testing::Stories260KBin()});
  ASSERT_NE(sync, nullptr);
  const std::vector<float> bad = OverflowingRows(*sync, 40, 20);  // slices 0-15, 16-31, 32-39
  const std::vector<float> good = ServingHidden(20, 1.3);
  std::promise<void> gate;
  ASSERT_TRUE((*pool)->Submit([f = gate.get_future().share()] { f.wait(); }).ok());
  std::atomic<int> logits_done{0}, score_done{0}, sunk_rows{0};
  absl::Status logits_status, score_status;
  HeadInput bad_in{bad.data(), 40, kServingHidden};
  bad_in.apply_final_norm = false;
  batched->ComputeLogitsAsync(
      bad_in, false, nullptr,
      [&](int64_t, int64_t rows, const float*) { sunk_rows += static_cast<int>(rows); },
      [&](absl::Status st) {
        logits_status = st;
        ++logits_done;
      });
  ScoreInput score_in;
  score_in.head = bad_in;
  score_in.top_k = 2;
  batched->ScoreAsync(score_in, nullptr, [&](absl::Status st, ScoreOutput) {
    score_status = st;
    ++score_done;
  });
  std::promise<std::vector<float>> good_logits;
  batched->ComputeLogitsAsync(HeadInput{good.data(), 20, kServingHidden}, true, nullptr,
                              [&](absl::Status st, std::vector<float> l) {
                                EXPECT_TRUE(st.ok()) << st;
                                good_logits.set_value(std::move(l));
                              });
  gate.set_value();
  // One worker: the good call's answer comes after both refused calls ran.
  const std::vector<float> got = good_logits.get_future().get();
  EXPECT_EQ(logits_done.load(), 1);
  EXPECT_EQ(score_done.load(), 1);
  EXPECT_EQ(sunk_rows.load(), 16);  // the first slice only
  for (const absl::Status& st : {logits_status, score_status}) {
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(st.message(), HasSubstr("hidden[20] is finite but logits[20, "));
  }
  std::vector<float> want;
  ASSERT_TRUE(sync->ComputeLogits(HeadInput{good.data(), 20, kServingHidden}, true, &want).ok());
  ExpectClose(got, want, 20);
  // Each refused call alone, then one row: rows 0-31 are computed, the
  // slice of rows 32-39 is dropped before compute.
  const std::vector<float> one = ServingHidden(1);
  auto rows_computed = [&](const std::function<void()>& refused_call) {
    {
      std::lock_guard<std::mutex> lock(mu);
      batches.clear();
    }
    refused_call();
    std::promise<void> after;
    batched->ComputeLogitsAsync(HeadInput{one.data(), 1, kServingHidden}, false, nullptr,
                                [&](absl::Status st, std::vector<float>) {
                                  EXPECT_TRUE(st.ok()) << st;
                                  after.set_value();
                                });
    after.get_future().wait();
    std::lock_guard<std::mutex> lock(mu);
    int64_t computed = 0;
    for (int64_t rows : batches) computed += rows;
    return computed;
  };
  EXPECT_EQ(rows_computed([&] {
              batched->ComputeLogitsAsync(bad_in, false, nullptr,
                                          [&](absl::Status st, std::vector<float>) {
                                            EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
                                          });
            }),
            32 + 1);
  EXPECT_EQ(rows_computed([&] {
              batched->ScoreAsync(score_in, nullptr, [&](absl::Status st, ScoreOutput) {
                EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
              });
            }),
            32 + 1);
  (*pool)->Shutdown();
}

// The unbatched pool path (slices of kDefaultHeadSliceRows): the same.
TEST(ModelLogitRangeTest, RefusedSliceEndsTheCallOnThePoolPath) {
  PoolModel pm;
  ASSERT_NO_FATAL_FAILURE(pm.Load());
  std::unique_ptr<ComputePool>& pool = pm.pool;
  const std::unique_ptr<Model>& model = pm.model;
  const int64_t rows = 2 * kDefaultHeadSliceRows + 40;  // 3 slices; the 2nd is refused
  const std::vector<float> bad = OverflowingRows(*model, rows, kDefaultHeadSliceRows + 5);
  HeadInput in{bad.data(), rows, kServingHidden};
  in.apply_final_norm = false;
  std::atomic<int> done_calls{0}, checks{0};
  std::atomic<int64_t> sunk{0};
  std::promise<absl::Status> status;
  model->ComputeLogitsAsync(
      in, false,
      [&] {
        ++checks;
        return absl::OkStatus();
      },
      [&](int64_t, int64_t n, const float*) { sunk += n; },
      [&](absl::Status st) {
        if (++done_calls == 1) status.set_value(st);
      });
  const absl::Status st = status.get_future().get();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(st.message(), HasSubstr(absl::StrCat("hidden[", kDefaultHeadSliceRows + 5,
                                                   "] is finite but logits[")));
  pool->Shutdown();
  pool.reset();  // joins the worker: every slice has run
  EXPECT_EQ(done_calls.load(), 1);
  EXPECT_EQ(sunk.load(), kDefaultHeadSliceRows);
  EXPECT_EQ(checks.load(), 2);  // the 3rd slice was dropped before its check and compute
}

// NaN in the checkpoint's head is the checkpoint's fault: FAILED_PRECONDITION
// naming the head row; vocab_limit below it masks it.
TEST(ModelLogitRangeTest, NonFiniteHeadWeightsAreFailedPrecondition) {
  auto f32 = LoadServingModel({"f32", testing::Stories260KBin()});
  ASSERT_NE(f32, nullptr);
  std::vector<float> table = TableF32(*f32);
  table[300 * kServingHidden + 7] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> norm(kServingHidden, 1.0f);
  auto m = LoadServingModel({"nan", WriteBf16Checkpoint(table, norm)});
  ASSERT_NE(m, nullptr);
  const std::vector<float> h = ServingHidden(2);
  HeadInput in{h.data(), 2, kServingHidden};
  std::vector<float> logits;
  absl::Status st = m->ComputeLogits(in, false, &logits);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(st.message(), HasSubstr("has NaN/Inf weights in lm_head row 300"));
  EXPECT_THAT(st.message(), HasSubstr("logits[0, 300] = nan"));
  in.vocab_limit = 300;
  EXPECT_TRUE(m->ComputeLogits(in, false, &logits).ok());
}

TEST(ModelAsyncTest, UnbatchedPoolPathMatchesSync) {
  PoolModel pm;
  ASSERT_NO_FATAL_FAILURE(pm.Load());
  const std::unique_ptr<Model>& model = pm.model;
  EXPECT_EQ(model->batcher(), nullptr);
  const std::vector<float> h = ServingHidden(3);
  std::promise<std::vector<float>> p;
  model->ComputeLogitsAsync(HeadInput{h.data(), 3, kServingHidden}, true, nullptr,
                            [&](absl::Status st, std::vector<float> l) {
                              EXPECT_TRUE(st.ok());
                              p.set_value(std::move(l));
                            });
  std::vector<float> want;
  ASSERT_TRUE(model->ComputeLogits(HeadInput{h.data(), 3, kServingHidden}, true, &want).ok());
  EXPECT_EQ(p.get_future().get(), want);
}

TEST(ModelAsyncTest, BatchingWithoutPoolIsRejected) {
  Model::Options o{"x", testing::Stories260KBin()};
  o.batching = DynamicBatcher::Options{};
  auto model = Model::Create(o);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("needs a compute pool"));
  o.compute_pool = reinterpret_cast<ComputePool*>(0x1);  // never used: options fail first
  o.batching->max_batch_rows = 0;
  model = Model::Create(o);
  EXPECT_THAT(model.status().message(), HasSubstr("max_batch_rows = 0"));
}

}  // namespace
}  // namespace vocabd
