// MergeRopeParams (lib/positions/rope_overrides.h): a request's RoPE fields
// over a model's defaults, the HF partial_rotary_factor rule, the merge's
// own errors, and the field names the merged params are validated under.
#include "lib/positions/rope_overrides.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "lib/positions/rope.h"
#include "lib/positions/rope_freq.h"
#include "lib/positions/rope_params.h"

namespace vocabd {
namespace {

// A Llama-3.1-like model config, here with half of head_dim rotating.
RopeParams Model() {
  RopeParams p;
  p.theta = 500000.0;
  p.head_dim = 128;
  p.rotary_dim = 64;  // partial: 0.5
  p.pair_layout = RopePairLayout::kHalfSplit;
  p.max_position_embeddings = 131072;
  p.scaling.type = RopeScalingType::kLlama3;
  p.scaling.factor = 8.0;
  p.scaling.original_max_position_embeddings = 8192;
  p.scaling.low_freq_factor = 2.0;
  p.scaling.high_freq_factor = 8.0;
  return p;
}

void ExpectSameParams(const RopeParams& a, const RopeParams& b) {
  EXPECT_EQ(a.theta, b.theta);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.rotary_dim, b.rotary_dim);
  EXPECT_EQ(a.pair_layout, b.pair_layout);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.scaling.type, b.scaling.type);
  EXPECT_EQ(a.scaling.factor, b.scaling.factor);
  EXPECT_EQ(a.scaling.original_max_position_embeddings, b.scaling.original_max_position_embeddings);
  EXPECT_EQ(a.scaling.low_freq_factor, b.scaling.low_freq_factor);
  EXPECT_EQ(a.scaling.high_freq_factor, b.scaling.high_freq_factor);
  EXPECT_EQ(a.scaling.beta_fast, b.scaling.beta_fast);
  EXPECT_EQ(a.scaling.beta_slow, b.scaling.beta_slow);
  EXPECT_EQ(a.scaling.mscale, b.scaling.mscale);
  EXPECT_EQ(a.scaling.mscale_all_dim, b.scaling.mscale_all_dim);
  EXPECT_EQ(a.scaling.attention_factor, b.scaling.attention_factor);
  EXPECT_EQ(a.scaling.truncate, b.scaling.truncate);
  EXPECT_EQ(a.scaling.short_factor, b.scaling.short_factor);
  EXPECT_EQ(a.scaling.long_factor, b.scaling.long_factor);
}

TEST(MergeRopeParamsTest, OnlyARequestWithoutModelButWithALayoutStandsAlone) {
  EXPECT_TRUE(RopeRequestStandsAlone(/*names_model=*/false, /*sets_pair_layout=*/true));
  EXPECT_FALSE(RopeRequestStandsAlone(false, false));  // the default model's params
  EXPECT_FALSE(RopeRequestStandsAlone(true, true));    // the named model's params
  EXPECT_FALSE(RopeRequestStandsAlone(true, false));
}

// The sizes of q/k per layout, and the rank error naming the field.
TEST(QkTensorFromShapeTest, ReadsEachLayoutsAxes) {
  auto bhsd = QkTensorFromShape({2, 8, 5, 64}, QkvLayout::kBHSD, "q");
  ASSERT_TRUE(bhsd.ok()) << bhsd.status();
  EXPECT_EQ(bhsd->batch, 2);
  EXPECT_EQ(bhsd->num_heads, 8);
  EXPECT_EQ(bhsd->seq_len, 5);
  EXPECT_EQ(bhsd->head_dim, 64);
  EXPECT_EQ(bhsd->data, nullptr);
  auto bshd = QkTensorFromShape({2, 5, 8, 64}, QkvLayout::kBSHD, "q");
  ASSERT_TRUE(bshd.ok()) << bshd.status();
  EXPECT_EQ(bshd->batch, 2);
  EXPECT_EQ(bshd->num_heads, 8);
  EXPECT_EQ(bshd->seq_len, 5);
  EXPECT_EQ(bshd->head_dim, 64);
  auto thd = QkTensorFromShape({7, 4, 16}, QkvLayout::kTHD, "k");
  ASSERT_TRUE(thd.ok()) << thd.status();
  EXPECT_EQ(thd->batch, 1);
  EXPECT_EQ(thd->num_heads, 4);
  EXPECT_EQ(thd->seq_len, 7);
  EXPECT_EQ(thd->head_dim, 16);
  EXPECT_EQ(QkTensorFromShape({2, 8}, QkvLayout::kBHSD, "q").status().message(),
            "q.shape = [2, 8] must have 4 dims for layout BHSD");
  EXPECT_EQ(QkTensorFromShape({1, 2, 3, 4}, QkvLayout::kTHD, "k").status().message(),
            "k.shape = [1, 2, 3, 4] must have 3 dims for layout THD");
  EXPECT_EQ(QkTensorFromShape({}, QkvLayout::kBSHD, "q").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MergeRopeParamsTest, NoOverridesKeepTheModelDefaults) {
  const RopeParams model = Model();
  auto merged = MergeRopeParams(&model, {}, /*tensor_head_dim=*/128);
  ASSERT_TRUE(merged.ok()) << merged.status();
  ExpectSameParams(*merged, model);
  // The tensors' head_dim only matters without a model (a mismatch is
  // ApplyRope's error, not the merge's).
  merged = MergeRopeParams(&model, {}, /*tensor_head_dim=*/64);
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(merged->head_dim, 128);
}

TEST(MergeRopeParamsTest, RequestFieldsOverrideTheModel) {
  const RopeParams model = Model();
  RopeOverrides request;
  request.theta = 10000.0;
  request.max_position_embeddings = 4096;
  request.pair_layout = RopePairLayout::kInterleaved;
  auto merged = MergeRopeParams(&model, request, 128);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->theta, 10000.0);
  EXPECT_EQ(merged->max_position_embeddings, 4096);
  EXPECT_EQ(merged->pair_layout, RopePairLayout::kInterleaved);
  // Untouched fields stay the model's.
  EXPECT_EQ(merged->head_dim, 128);
  EXPECT_EQ(merged->rotary_dim, 64);
  EXPECT_EQ(merged->scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(merged->scaling.low_freq_factor, 2.0);
}

// HF rope_scaling is one dict: a request's block replaces the model's, its
// unset fields at the HF defaults (not the model's llama3 values).
TEST(MergeRopeParamsTest, ScalingBlockReplacesTheModelsWholeBlock) {
  const RopeParams model = Model();
  RopeOverrides request;
  RopeScaling& yarn = request.scaling.emplace();
  yarn.type = RopeScalingType::kYarn;
  yarn.factor = 4.0;
  auto merged = MergeRopeParams(&model, request, 128);
  ASSERT_TRUE(merged.ok()) << merged.status();
  const RopeScaling defaults;
  EXPECT_EQ(merged->scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(merged->scaling.factor, 4.0);
  EXPECT_EQ(merged->scaling.original_max_position_embeddings, 0);
  EXPECT_EQ(merged->scaling.low_freq_factor, defaults.low_freq_factor);
  EXPECT_EQ(merged->scaling.high_freq_factor, defaults.high_freq_factor);
  EXPECT_EQ(merged->scaling.beta_fast, defaults.beta_fast);
  // A default block clears the model's scaling.
  request.scaling = RopeScaling{};
  merged = MergeRopeParams(&model, request, 128);
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(merged->scaling.type, RopeScalingType::kDefault);
  EXPECT_EQ(merged->scaling.factor, 1.0);
}

TEST(MergeRopeParamsTest, RotaryDimPrecedence) {
  const RopeParams model = Model();
  // rotary_dim wins over partial_rotary_factor (which is then not read,
  // not even range-checked).
  RopeOverrides request;
  request.rotary_dim = 32;
  request.partial_rotary_factor = 7.0;
  auto merged = MergeRopeParams(&model, request, 128);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->rotary_dim, 32);
  // A new head_dim alone rotates all of it (the model's 0.5 is not carried).
  request = {};
  request.head_dim = 64;
  merged = MergeRopeParams(&model, request, 64);
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(merged->head_dim, 64);
  EXPECT_EQ(merged->rotary_dim, 64);
  // partial_rotary_factor applies to the merged head_dim.
  request.partial_rotary_factor = 0.25;
  merged = MergeRopeParams(&model, request, 64);
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(merged->rotary_dim, 16);
  // ... and to the model's head_dim when the request has none.
  request = {};
  request.partial_rotary_factor = 1.0;
  merged = MergeRopeParams(&model, request, 128);
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(merged->rotary_dim, 128);
}

// HF: dim = int(head_dim * partial_rotary_factor), a float64 product
// truncated toward zero (Python int()).
TEST(MergeRopeParamsTest, PartialRotaryFactorTruncatesLikePythonInt) {
  struct Case {
    int head_dim;
    double factor;
    int rotary_dim;  // int(head_dim * factor) in Python
  };
  const Case cases[] = {
      {64, 0.5, 32},    // 32.0
      {80, 0.4, 32},    // 32.0
      {100, 0.29, 28},  // 28.999999999999996
      {96, 0.7, 67},    // 67.19999999999999
      {10, 0.25, 2},    // 2.5
      {8, 0.375, 3},    // odd: RopeParams::Validate refuses it
      {8, 1e-9, 0},     // 8e-09
  };
  for (const Case& c : cases) {
    EXPECT_EQ(RotaryDimFromPartialFactor(c.head_dim, c.factor), c.rotary_dim)
        << c.head_dim << " x " << c.factor;
    RopeParams model;
    model.head_dim = model.rotary_dim = c.head_dim;
    RopeOverrides request;
    request.partial_rotary_factor = c.factor;
    auto merged = MergeRopeParams(&model, request, c.head_dim);
    ASSERT_TRUE(merged.ok()) << merged.status();
    EXPECT_EQ(merged->rotary_dim, c.rotary_dim) << c.head_dim << " x " << c.factor;
  }
}

TEST(MergeRopeParamsTest, PartialRotaryFactorOutsideUnitIntervalIsRefused) {
  const RopeParams model = Model();
  for (double f : {1.5, -0.5, 1.0000001, std::numeric_limits<double>::quiet_NaN(),
                   std::numeric_limits<double>::infinity()}) {
    RopeOverrides request;
    request.partial_rotary_factor = f;
    auto merged = MergeRopeParams(&model, request, 128);
    EXPECT_EQ(merged.status().code(), absl::StatusCode::kInvalidArgument) << f;
  }
  RopeOverrides request;
  request.partial_rotary_factor = 1.5;
  EXPECT_EQ(MergeRopeParams(&model, request, 128).status().message(),
            "rope.partial_rotary_factor = 1.5 is outside (0, 1]");
  request.partial_rotary_factor = -0.25;
  EXPECT_EQ(MergeRopeParams(&model, request, 128).status().message(),
            "rope.partial_rotary_factor = -0.25 is outside (0, 1]");
  // Named after the caller's name for the params.
  EXPECT_EQ(MergeRopeParams(&model, request, 128, "params").status().message(),
            "params.partial_rotary_factor = -0.25 is outside (0, 1]");
}

TEST(MergeRopeParamsTest, WithoutAModelTheRequestStandsAlone) {
  RopeOverrides request;
  request.pair_layout = RopePairLayout::kInterleaved;
  auto merged = MergeRopeParams(nullptr, request, /*tensor_head_dim=*/16);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->theta, 10000.0);
  EXPECT_EQ(merged->head_dim, 16);  // from the tensors
  EXPECT_EQ(merged->rotary_dim, 16);
  EXPECT_EQ(merged->pair_layout, RopePairLayout::kInterleaved);
  EXPECT_EQ(merged->max_position_embeddings, 0);
  EXPECT_EQ(merged->scaling.type, RopeScalingType::kDefault);
  // The request's head_dim wins over the tensors'.
  request.head_dim = 8;
  merged = MergeRopeParams(nullptr, request, 16);
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(merged->head_dim, 8);
  EXPECT_EQ(merged->rotary_dim, 8);
  request.partial_rotary_factor = 0.5;
  merged = MergeRopeParams(nullptr, request, 16);
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(merged->rotary_dim, 4);
  // No pair layout and no model.
  EXPECT_EQ(MergeRopeParams(nullptr, RopeOverrides{}, 16).status().message(),
            "rope.pair_layout is unset and no model gives one (set INTERLEAVED or HALF_SPLIT)");
  // The partial factor is checked first.
  RopeOverrides both;
  both.partial_rotary_factor = 2.0;
  EXPECT_EQ(MergeRopeParams(nullptr, both, 16).status().message(),
            "rope.partial_rotary_factor = 2 is outside (0, 1]");
}

// The merge does not validate; the computation that uses the params does,
// once, naming the request's fields when given the request's name.
TEST(MergeRopeParamsTest, MergedParamsAreValidatedUnderTheRequestsName) {
  const RopeParams model = Model();
  struct Case {
    RopeOverrides request;
    const char* message;
  };
  std::vector<Case> cases(5);
  cases[0].request.theta = -1.0;
  cases[0].message = "rope.theta = -1 must be a finite number > 0";
  cases[1].request.partial_rotary_factor = 0.375;
  cases[1].request.head_dim = 8;
  cases[1].message = "rope.rotary_dim = 3 is odd";
  cases[2].request.rotary_dim = 130;
  cases[2].message = "rope.rotary_dim = 130 is outside [2, rope.head_dim = 128]";
  cases[3].request.max_position_embeddings = -1;
  cases[3].message = "rope.max_position_embeddings = -1 is negative";
  RopeScaling& yarn = cases[4].request.scaling.emplace();
  yarn.type = RopeScalingType::kYarn;
  yarn.factor = 4.0;
  yarn.beta_fast = -1.0;
  cases[4].message = "rope.scaling(yarn).beta_fast = -1 must be finite and > 0";
  for (const Case& c : cases) {
    auto merged = MergeRopeParams(&model, c.request, 128);
    ASSERT_TRUE(merged.ok()) << merged.status();
    EXPECT_EQ(merged->Validate("rope").message(), c.message);
    EXPECT_EQ(ComputeRopeFrequencies(*merged, 1, false, "rope").status().message(), c.message);
    EXPECT_EQ(ComputeRopeCache(*merged, 0, 1, true, false, "rope").status().message(), c.message);
    std::vector<float> q(static_cast<size_t>(merged->head_dim), 1.0f), k = q;
    ApplyRopeOptions options;
    options.params_name = "rope";
    QkTensor qt{q.data(), 1, 1, 1, merged->head_dim};
    QkTensor kt{k.data(), 1, 1, 1, merged->head_dim};
    EXPECT_EQ(ApplyRope(*merged, options, {0}, qt, kt).status().message(), c.message);
  }
}

}  // namespace
}  // namespace vocabd
