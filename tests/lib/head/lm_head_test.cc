// LmHead (oneDNN matmul) and RmsNorm against the NumPy float64 golden file
// tests/golden/head_golden.json (made by tests/golden/make_head_golden.py
// from the real stories260K weights).
#include "lib/head/lm_head.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/head/norm.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

// F32 weights, every other option at its default.
LmHead::Options F32Head(const void* weights, int64_t vocab_size, int64_t hidden_size) {
  LmHead::Options options;
  options.weights = weights;
  options.vocab_size = vocab_size;
  options.hidden_size = hidden_size;
  return options;
}

using ::vocabd::testing::ReadFileBytes;
using ::vocabd::testing::ReadGolden;
using ::vocabd::testing::Stories260KHfDir;
using ::vocabd::testing::ToFloats;

// Minimal safetensors reader for the test only (independent of lib/'s
// loader): returns the named F32 tensor, checking dtype and shape.
std::vector<float> LoadF32Tensor(const std::string& path, const std::string& name,
                                 const std::vector<int64_t>& shape) {
  const std::string bytes = ReadFileBytes(path);
  EXPECT_GE(bytes.size(), 8u);
  if (bytes.size() < 8) return {};
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  EXPECT_LE(8 + header_len, bytes.size());
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_len));
  const nlohmann::json& info = header.at(name);
  EXPECT_EQ(info.at("dtype"), "F32") << name;
  EXPECT_EQ(info.at("shape").get<std::vector<int64_t>>(), shape) << name;
  const uint64_t begin = info.at("data_offsets")[0].get<uint64_t>();
  const uint64_t end = info.at("data_offsets")[1].get<uint64_t>();
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  EXPECT_EQ(end - begin, static_cast<uint64_t>(count) * 4) << name;
  std::vector<float> out(static_cast<size_t>(count));
  std::memcpy(out.data(), bytes.data() + 8 + header_len + begin, out.size() * 4);
  return out;
}

// Flattens a JSON [rows][cols] array of numbers to row-major floats.
std::vector<float> Flatten(const nlohmann::json& rows) {
  std::vector<float> out;
  for (const auto& row : rows) {
    const std::vector<float> r = ToFloats(row);
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}
std::vector<double> FlattenD(const nlohmann::json& rows) {
  std::vector<double> out;
  for (const auto& row : rows) {
    for (const auto& v : row) out.push_back(v.get<double>());
  }
  return out;
}

class LmHeadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = ReadGolden("head_golden.json");
    vocab_ = golden_.at("vocab_size").get<int64_t>();
    hidden_size_ = golden_.at("hidden_size").get<int64_t>();
    rows_ = static_cast<int64_t>(golden_.at("hidden").size());
    ASSERT_EQ(vocab_, 512);
    ASSERT_EQ(hidden_size_, 64);
    ASSERT_EQ(rows_, 5);
    const std::string st = Stories260KHfDir() + "/model.safetensors";
    embedding_ = LoadF32Tensor(st, "model.embed_tokens.weight", {vocab_, hidden_size_});
    norm_weight_ = LoadF32Tensor(st, "model.norm.weight", {hidden_size_});
    ASSERT_EQ(embedding_.size(), static_cast<size_t>(vocab_ * hidden_size_));
    hidden_ = Flatten(golden_.at("hidden"));
    normed_ = Flatten(golden_.at("normed"));
    logits_ = FlattenD(golden_.at("logits"));
    logits_no_norm_ = FlattenD(golden_.at("logits_no_norm"));
  }

  std::unique_ptr<LmHead> MakeHead() {
    auto head = LmHead::Create(F32Head(embedding_.data(), vocab_, hidden_size_));
    EXPECT_TRUE(head.ok()) << head.status();
    return head.ok() ? std::move(head).value() : nullptr;
  }

  // Each logit within 1e-5 of the row's max |logit| (relative to scale).
  static void ExpectLogitsNear(const std::vector<float>& got, const double* want,
                               int64_t rows, int64_t vocab, const std::string& what) {
    for (int64_t r = 0; r < rows; ++r) {
      double scale = 0;
      for (int64_t j = 0; j < vocab; ++j) scale = std::max(scale, std::abs(want[r * vocab + j]));
      ASSERT_GT(scale, 1.0);
      for (int64_t j = 0; j < vocab; ++j) {
        const double err = std::abs(got[r * vocab + j] - want[r * vocab + j]);
        ASSERT_LE(err / scale, 1e-5)
            << what << " row " << r << " id " << j << ": got " << got[r * vocab + j]
            << " want " << want[r * vocab + j];
      }
    }
  }

  nlohmann::json golden_;
  int64_t vocab_ = 0, hidden_size_ = 0, rows_ = 0;
  std::vector<float> embedding_, norm_weight_, hidden_, normed_;
  std::vector<double> logits_, logits_no_norm_;
};

TEST_F(LmHeadTest, RmsNormMatchesGolden) {
  std::vector<float> y(hidden_.size());
  RmsNorm(hidden_.data(), rows_, hidden_size_, norm_weight_.data(),
          golden_.at("eps").get<double>(), y.data());
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_NEAR(y[i], normed_[i], 2e-6 * std::max(1.0f, std::abs(normed_[i]))) << "index " << i;
  }
  // In place gives the same bits.
  std::vector<float> in_place = hidden_;
  RmsNorm(in_place.data(), rows_, hidden_size_, norm_weight_.data(),
          golden_.at("eps").get<double>(), in_place.data());
  EXPECT_EQ(0, std::memcmp(in_place.data(), y.data(), y.size() * sizeof(float)));
}

TEST(RmsNormTest, HandComputedRow) {
  // x = [3, 4]: mean(x^2) = 12.5; eps = 0 -> y = x / sqrt(12.5) * w.
  const float x[2] = {3.0f, 4.0f};
  const float w[2] = {1.0f, 2.0f};
  float y[2];
  RmsNorm(x, 1, 2, w, 0.0, y);
  EXPECT_FLOAT_EQ(y[0], 3.0f / std::sqrt(12.5f));
  EXPECT_FLOAT_EQ(y[1], 2.0f * 4.0f / std::sqrt(12.5f));
  // eps matters for a zero row: y = 0, not NaN.
  const float zeros[2] = {0.0f, 0.0f};
  RmsNorm(zeros, 1, 2, w, 1e-5, y);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  // mean(x^2) = 1e40 > FLT_MAX: var = inf, inv = 0, y = +0 / -0 (torch's
  // fp32 gives the same: x.pow(2).mean() is inf, rsqrt(inf) = 0).
  const float huge[2] = {1e20f, -1e20f};
  RmsNorm(huge, 1, 2, w, 1e-5, y);
  EXPECT_EQ(std::signbit(y[0]), false);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(std::signbit(y[1]), true);
  EXPECT_EQ(y[1], 0.0f);
  // Just below: finite and normalized (mean(x^2) = 1e36).
  const float large[2] = {1e18f, -1e18f};
  RmsNorm(large, 1, 2, w, 1e-5, y);
  EXPECT_FLOAT_EQ(y[0], 1.0f);
  EXPECT_FLOAT_EQ(y[1], -2.0f);
}

TEST_F(LmHeadTest, LogitsMatchGoldenWithAndWithoutNorm) {
  auto head = MakeHead();
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->vocab_size(), vocab_);
  EXPECT_EQ(head->hidden_size(), hidden_size_);
  EXPECT_FALSE(head->implementation().empty());
  std::vector<float> out(rows_ * vocab_);
  ASSERT_TRUE(head->Compute(normed_.data(), rows_, out.data()).ok());
  ExpectLogitsNear(out, logits_.data(), rows_, vocab_, "normed");
  ASSERT_TRUE(head->Compute(hidden_.data(), rows_, out.data()).ok());
  ExpectLogitsNear(out, logits_no_norm_.data(), rows_, vocab_, "no norm");
}

TEST_F(LmHeadTest, NormThenHeadMatchesGolden) {
  auto head = MakeHead();
  ASSERT_NE(head, nullptr);
  std::vector<float> x = hidden_;
  RmsNorm(x.data(), rows_, hidden_size_, norm_weight_.data(), 1e-5, x.data());
  std::vector<float> out(rows_ * vocab_);
  ASSERT_TRUE(head->Compute(x.data(), rows_, out.data()).ok());
  ExpectLogitsNear(out, logits_.data(), rows_, vocab_, "norm+head");
}

TEST_F(LmHeadTest, ZeroRowsIsNoOp) {
  auto head = MakeHead();
  ASSERT_NE(head, nullptr);
  std::vector<float> out(4, 123.0f);
  EXPECT_TRUE(head->Compute(nullptr, 0, nullptr).ok());
  EXPECT_TRUE(head->Compute(normed_.data(), 0, out.data()).ok());
  EXPECT_EQ(out, std::vector<float>(4, 123.0f));
}

// Every path of Compute: the small-M kernel (1, 5, 16 rows where the CPU has
// it), one fixed-M oneDNN primitive (17, 64, 256), and chunks of
// kFixedRowsMax rows with a fixed-M (300 = 256 + 44) or kernel (517 = 256 +
// 256 + 5) last chunk.
TEST_F(LmHeadTest, RowCountsAcrossEveryPath) {
  auto head = MakeHead();
  ASSERT_NE(head, nullptr);
  for (int64_t m : {int64_t{1}, int64_t{5}, int64_t{16}, int64_t{17}, int64_t{64},
                    LmHead::kFixedRowsMax, int64_t{300}, 2 * LmHead::kFixedRowsMax + 5}) {
    // Row r is golden row r % 5.
    std::vector<float> x(m * hidden_size_);
    std::vector<double> want(m * vocab_);
    for (int64_t r = 0; r < m; ++r) {
      std::copy_n(normed_.begin() + (r % rows_) * hidden_size_, hidden_size_,
                  x.begin() + r * hidden_size_);
      std::copy_n(logits_.begin() + (r % rows_) * vocab_, vocab_, want.begin() + r * vocab_);
    }
    std::vector<float> out(m * vocab_, std::numeric_limits<float>::quiet_NaN());
    ASSERT_TRUE(head->Compute(x.data(), m, out.data()).ok()) << "rows " << m;
    ExpectLogitsNear(out, want.data(), m, vocab_, "rows " + std::to_string(m));
  }
}

TEST_F(LmHeadTest, ConcurrentComputeGivesIdenticalResults) {
  auto head = MakeHead();
  ASSERT_NE(head, nullptr);
  const std::vector<int64_t> sizes = {1, 5, 64, 37};
  std::vector<std::vector<float>> inputs, reference;
  for (int64_t m : sizes) {
    std::vector<float> x(m * hidden_size_);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < hidden_size_; ++j) {
        // Distinct rows: golden row scaled by a per-row factor.
        x[r * hidden_size_ + j] =
            normed_[(r % rows_) * hidden_size_ + j] * (1.0f + 0.01f * static_cast<float>(r));
      }
    }
    std::vector<float> out(m * vocab_);
    ASSERT_TRUE(head->Compute(x.data(), m, out.data()).ok());
    inputs.push_back(std::move(x));
    reference.push_back(std::move(out));
  }
  constexpr int kThreads = 4;
  constexpr int kIterations = 25;
  std::vector<int> mismatches(kThreads, 0), failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) {
        const size_t s = static_cast<size_t>(t + i) % sizes.size();
        std::vector<float> out(reference[s].size(), -1.0f);
        if (!head->Compute(inputs[s].data(), sizes[s], out.data()).ok()) {
          ++failures[t];
          continue;
        }
        if (std::memcmp(out.data(), reference[s].data(), out.size() * sizeof(float)) != 0) {
          ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[t], 0) << "thread " << t;
    EXPECT_EQ(mismatches[t], 0) << "thread " << t;
  }
}

// The tied-head pattern without a packed copy (dense_pack off): the head
// reads the embedding table in place (one copy in memory), so hidden = E[t]
// gives logit t = |E[t]|^2, and a change to the table after Create is
// visible to the next Compute.
TEST_F(LmHeadTest, TiedHeadReadsEmbeddingInPlace) {
  std::vector<float> table = embedding_;
  LmHead::Options options = F32Head(table.data(), vocab_, hidden_size_);
  options.dense_pack = false;  // a packed copy would not see the change
  auto created = LmHead::Create(options);
  ASSERT_TRUE(created.ok()) << created.status();
  const LmHead& head = **created;
  const std::vector<int64_t> ids = {1, 2, 403, 511};
  std::vector<float> x;
  for (int64_t id : ids) {
    x.insert(x.end(), table.begin() + id * hidden_size_, table.begin() + (id + 1) * hidden_size_);
  }
  std::vector<float> out(ids.size() * vocab_);
  ASSERT_TRUE(head.Compute(x.data(), static_cast<int64_t>(ids.size()), out.data()).ok());
  for (size_t r = 0; r < ids.size(); ++r) {
    for (int64_t j : {int64_t{0}, ids[r], int64_t{300}}) {
      double dot = 0;
      for (int64_t k = 0; k < hidden_size_; ++k) {
        dot += static_cast<double>(table[ids[r] * hidden_size_ + k]) * table[j * hidden_size_ + k];
      }
      EXPECT_NEAR(out[r * vocab_ + j], dot, 1e-5 * std::max(1.0, std::abs(dot)))
          << "row " << r << " id " << j;
    }
  }
  // Overwrite row 7 of the table with 2 * row 1: logit 7 becomes 2 * logit 1.
  for (int64_t k = 0; k < hidden_size_; ++k) {
    table[7 * hidden_size_ + k] = 2.0f * table[1 * hidden_size_ + k];
  }
  ASSERT_TRUE(head.Compute(x.data(), static_cast<int64_t>(ids.size()), out.data()).ok());
  for (size_t r = 0; r < ids.size(); ++r) {
    EXPECT_NEAR(out[r * vocab_ + 7], 2.0f * out[r * vocab_ + 1],
                1e-5 * std::max(1.0f, std::abs(out[r * vocab_ + 1])))
        << "row " << r;
  }
}

TEST_F(LmHeadTest, InvalidArguments) {
  auto null_weights = LmHead::Create(F32Head(nullptr, vocab_, hidden_size_));
  EXPECT_EQ(null_weights.status().code(), absl::StatusCode::kInvalidArgument);
  auto zero_vocab = LmHead::Create(F32Head(embedding_.data(), 0, hidden_size_));
  EXPECT_EQ(zero_vocab.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(zero_vocab.status().message().find("vocab_size = 0"), std::string::npos)
      << zero_vocab.status();
  auto bad_hidden = LmHead::Create(F32Head(embedding_.data(), vocab_, -3));
  EXPECT_EQ(bad_hidden.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_hidden.status().message().find("hidden_size = -3"), std::string::npos)
      << bad_hidden.status();

  auto head = MakeHead();
  ASSERT_NE(head, nullptr);
  std::vector<float> out(vocab_);
  absl::Status negative = head->Compute(normed_.data(), -1, out.data());
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(negative.message().find("rows = -1"), std::string::npos) << negative;
  EXPECT_EQ(head->Compute(nullptr, 1, out.data()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(head->Compute(normed_.data(), 1, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vocabd
