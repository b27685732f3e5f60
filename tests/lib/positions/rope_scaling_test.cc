// Every RoPE scaling type against tests/golden/rope_scaling_golden.json
// (tests/golden/make_rope_scaling_golden.py: NumPy float32 transcription of
// HF modeling_rope_utils, cross-checked bit for bit against a PyTorch
// transcription), the high-precision mode, the cos/sin cache and the kernel
// ISAs (the position mistakes callers make: PositionMistakesTest in
// positions_test.cc).
//
// Tolerances: inv_freq and attention_scaling are exact (same float32 steps).
// cos/sin: glibc cosf/sinf vs NumPy differ by <= 2 ULP, times attention
// scaling (<= 1.6 here): |diff| <= 1e-6. Rotated values: 1e-6 * max(1, |a|+|b|)
// as in rope_test.cc. Different ISAs and cached vs direct rows: bit-exact.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/positions/rope_params.h"
#include "lib/positions/rope.h"
#include "lib/positions/rope_cache.h"
#include "lib/positions/rope_freq.h"
#include "lib/positions/rope_kernel.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;

RopeParams ParamsFromJson(const nlohmann::json& c, const std::string& layout) {
  RopeParams p;
  p.theta = c.at("rope_theta").get<double>();
  p.head_dim = c.at("head_dim").get<int>();
  p.rotary_dim = c.at("rotary_dim").get<int>();
  p.max_position_embeddings = c.at("max_position_embeddings").get<int64_t>();
  p.pair_layout =
      layout == "INTERLEAVED" ? RopePairLayout::kInterleaved : RopePairLayout::kHalfSplit;
  if (!c.contains("rope_scaling")) return p;
  const nlohmann::json& s = c.at("rope_scaling");
  const std::string type = s.at("rope_type").get<std::string>();
  RopeScaling& r = p.scaling;
  if (type == "linear") r.type = RopeScalingType::kLinear;
  if (type == "dynamic") r.type = RopeScalingType::kDynamic;
  if (type == "yarn") r.type = RopeScalingType::kYarn;
  if (type == "llama3") r.type = RopeScalingType::kLlama3;
  if (type == "longrope") r.type = RopeScalingType::kLongrope;
  if (s.contains("factor")) r.factor = s.at("factor").get<double>();
  if (s.contains("original_max_position_embeddings")) {
    r.original_max_position_embeddings = s.at("original_max_position_embeddings").get<int64_t>();
  }
  if (s.contains("low_freq_factor")) r.low_freq_factor = s.at("low_freq_factor").get<double>();
  if (s.contains("high_freq_factor")) r.high_freq_factor = s.at("high_freq_factor").get<double>();
  if (s.contains("beta_fast")) r.beta_fast = s.at("beta_fast").get<double>();
  if (s.contains("beta_slow")) r.beta_slow = s.at("beta_slow").get<double>();
  if (s.contains("mscale")) r.mscale = s.at("mscale").get<double>();
  if (s.contains("mscale_all_dim")) r.mscale_all_dim = s.at("mscale_all_dim").get<double>();
  if (s.contains("attention_factor")) r.attention_factor = s.at("attention_factor").get<double>();
  if (s.contains("truncate")) r.truncate = s.at("truncate").get<bool>();
  if (s.contains("short_factor")) r.short_factor = s.at("short_factor").get<std::vector<double>>();
  if (s.contains("long_factor")) r.long_factor = s.at("long_factor").get<std::vector<double>>();
  return p;
}

QkTensor ScalingView(std::vector<float>& v, int64_t b, int64_t h, int64_t s, int64_t d) {
  QkTensor t;
  t.data = v.data();
  t.batch = b;
  t.num_heads = h;
  t.seq_len = s;
  t.head_dim = d;
  return t;
}

void ExpectRotated(const std::string& what, const std::vector<float>& in,
                   const std::vector<float>& got, const std::vector<float>& want, int d, int r,
                   bool interleaved) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const int j = static_cast<int>(i % d);
    if (j >= r) {
      if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && ++bad < 5) {
        ADD_FAILURE() << what << " pass-through [" << i << "] " << got[i] << " vs " << want[i];
      }
      continue;
    }
    const int partner = interleaved ? (j ^ 1) : (j < r / 2 ? j + r / 2 : j - r / 2);
    const float a = in[i];
    const float b = in[i - j + partner];
    const double tol = 1e-6 * std::max(1.0, 1.6 * (std::fabs(a) + std::fabs(b)));
    if (std::fabs(static_cast<double>(got[i]) - want[i]) > tol && ++bad < 5) {
      ADD_FAILURE() << what << " [" << i << "] got " << got[i] << " want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

const nlohmann::json& ScalingGolden() {
  static const nlohmann::json* g =
      new nlohmann::json(testing::ReadGolden("rope_scaling_golden.json"));
  return *g;
}

TEST(RopeScalingGoldenTest, InvFreqAndAttentionScalingAreExact) {
  int n = 0;
  for (const auto& c : ScalingGolden().at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    const RopeParams p = ParamsFromJson(c.at("config"), c.at("pair_layout").get<std::string>());
    const auto positions = c.at("positions").get<std::vector<int64_t>>();
    const int64_t seq_len = *std::max_element(positions.begin(), positions.end()) + 1;
    auto f = ComputeRopeFrequencies(p, seq_len, false);
    ASSERT_TRUE(f.ok()) << name << ": " << f.status();
    const std::vector<float> want = testing::ToFloats(c.at("inv_freq"));
    ASSERT_EQ(f->inv_freq.size(), want.size()) << name;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(f->inv_freq[i], want[i]) << name << " inv_freq[" << i << "]";
    }
    EXPECT_EQ(f->attention_scaling, c.at("attention_scaling").get<double>()) << name;
    EXPECT_EQ(f->used_long_factor, c.at("used_long_factor").get<bool>()) << name;
    ++n;
  }
  EXPECT_EQ(n, 26);
}

TEST(RopeScalingGoldenTest, CosSinRowsAndGetRopeCacheMatch) {
  for (const auto& c : ScalingGolden().at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    const RopeParams p = ParamsFromJson(c.at("config"), c.at("pair_layout").get<std::string>());
    const auto positions = c.at("positions").get<std::vector<int64_t>>();
    const int64_t seq_len = *std::max_element(positions.begin(), positions.end()) + 1;
    auto f = ComputeRopeFrequencies(p, seq_len, false);
    ASSERT_TRUE(f.ok()) << name;
    const std::vector<float> want_cos = testing::ToFloats(c.at("cos"));
    const std::vector<float> want_sin = testing::ToFloats(c.at("sin"));
    const int half = f->half;
    std::vector<float> cs(static_cast<size_t>(2 * half));
    for (size_t t = 0; t < positions.size(); ++t) {
      f->CosSin(positions[t], cs.data(), cs.data() + half);
      for (int i = 0; i < half; ++i) {
        EXPECT_NEAR(cs[i], want_cos[t * half + i], 1e-6) << name << " pos " << positions[t];
        EXPECT_NEAR(cs[half + i], want_sin[t * half + i], 1e-6) << name << " pos " << positions[t];
      }
    }
    // GetRopeCache over [last, last + 1) uses seq_len = last + 1 too.
    const int64_t last = positions.back();
    auto cache = ComputeRopeCache(p, last, 1, /*allow_beyond=*/true, false);
    ASSERT_TRUE(cache.ok()) << name << ": " << cache.status();
    EXPECT_EQ(cache->attention_scaling, c.at("attention_scaling").get<double>());
    for (int i = 0; i < half; ++i) {
      EXPECT_NEAR(cache->cos[i], want_cos[(positions.size() - 1) * half + i], 1e-6) << name;
    }
  }
}

TEST(RopeScalingGoldenTest, ApplyRopeMatchesReferenceInEveryLayoutAndIsa) {
  for (const auto& c : ScalingGolden().at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    const std::string layout = c.at("pair_layout").get<std::string>();
    const RopeParams p = ParamsFromJson(c.at("config"), layout);
    const auto positions = c.at("positions").get<std::vector<int64_t>>();
    const int64_t s = static_cast<int64_t>(positions.size());
    const int64_t hq = c.at("q_heads").get<int64_t>(), hk = c.at("k_heads").get<int64_t>();
    const int d = p.head_dim;
    const std::vector<float> q_in = testing::ToFloats(c.at("q"));
    const std::vector<float> k_in = testing::ToFloats(c.at("k"));
    std::vector<float> q_ref, k_ref;
    for (RopeIsa isa : {RopeIsa::kScalar, RopeIsa::kAvx2, RopeIsa::kAvx512}) {
      for (bool use_cache : {false, true}) {
        std::vector<float> q = q_in, k = k_in;
        ApplyRopeOptions o;
        o.allow_beyond_trained_length = c.at("allow_beyond_trained_length").get<bool>();
        o.isa = isa;
        o.use_cache = use_cache;
        auto applied = ApplyRope(p, o, positions, ScalingView(q, 1, hq, s, d), ScalingView(k, 1, hk, s, d));
        ASSERT_TRUE(applied.ok()) << name << ": " << applied.status();
        EXPECT_EQ(applied->attention_scaling, c.at("attention_scaling").get<double>()) << name;
        EXPECT_EQ(applied->used_long_factor, c.at("used_long_factor").get<bool>()) << name;
        if (q_ref.empty()) {
          ExpectRotated(name + "_q", q_in, q, testing::ToFloats(c.at("q_out")), d, p.rotary_dim,
                        layout == "INTERLEAVED");
          ExpectRotated(name + "_k", k_in, k, testing::ToFloats(c.at("k_out")), d, p.rotary_dim,
                        layout == "INTERLEAVED");
          q_ref = q;
          k_ref = k;
        } else {
          EXPECT_EQ(0, std::memcmp(q.data(), q_ref.data(), q.size() * 4))
              << name << " isa " << RopeIsaName(isa) << " cache " << use_cache;
          EXPECT_EQ(0, std::memcmp(k.data(), k_ref.data(), k.size() * 4)) << name;
        }
      }
    }
  }
}

// ApplyRope reports the attention scaling of the frequency set it rotated
// with: ComputeRopeFrequencies(params, max(positions) + 1, high_precision),
// in both precisions, also with no tokens (seq_len 0) and for a longrope
// call that crosses to long_factor.
TEST(RopeScalingTest, ApplyRopeReturnsTheAttentionScalingOfItsFrequencies) {
  int n = 0;
  for (const auto& c : ScalingGolden().at("cases")) {
    const std::string name = c.at("name").get<std::string>();
    if (name.rfind("yarn", 0) != 0 && name.rfind("longrope", 0) != 0 &&
        name.rfind("partial_yarn", 0) != 0) {
      continue;
    }
    const RopeParams p = ParamsFromJson(c.at("config"), c.at("pair_layout").get<std::string>());
    const auto positions = c.at("positions").get<std::vector<int64_t>>();
    const int64_t s = static_cast<int64_t>(positions.size());
    const int64_t seq_len = *std::max_element(positions.begin(), positions.end()) + 1;
    const int d = p.head_dim;
    for (bool high_precision : {false, true}) {
      auto freqs = ComputeRopeFrequencies(p, seq_len, high_precision);
      ASSERT_TRUE(freqs.ok()) << name << ": " << freqs.status();
      std::vector<float> q(static_cast<size_t>(s * d), 0.5f), k = q;
      ApplyRopeOptions o;
      o.allow_beyond_trained_length = true;
      o.high_precision = high_precision;
      auto applied = ApplyRope(p, o, positions, ScalingView(q, 1, 1, s, d), ScalingView(k, 1, 1, s, d));
      ASSERT_TRUE(applied.ok()) << name << ": " << applied.status();
      EXPECT_EQ(applied->attention_scaling, freqs->attention_scaling) << name;
      EXPECT_EQ(applied->used_long_factor, freqs->used_long_factor) << name;
      EXPECT_NE(applied->attention_scaling, 1.0) << name;  // yarn / longrope scale
      // No tokens: the frequencies of seq_len 0.
      auto empty_freqs = ComputeRopeFrequencies(p, 0, high_precision);
      ASSERT_TRUE(empty_freqs.ok()) << name;
      auto empty = ApplyRope(p, o, {}, ScalingView(q, 1, 1, 0, d), ScalingView(k, 1, 1, 0, d));
      ASSERT_TRUE(empty.ok()) << name << ": " << empty.status();
      EXPECT_EQ(empty->attention_scaling, empty_freqs->attention_scaling) << name;
      EXPECT_FALSE(empty->used_long_factor) << name;
    }
    ++n;
  }
  EXPECT_EQ(n, 14);
  // Yarn's default formula (factor 4, no mscale): 0.1 ln 4 + 1.
  RopeParams yarn;
  yarn.head_dim = yarn.rotary_dim = 8;
  yarn.scaling.type = RopeScalingType::kYarn;
  yarn.scaling.factor = 4.0;
  yarn.scaling.original_max_position_embeddings = 128;
  std::vector<float> q(8, 1.0f), k(8, 1.0f);
  auto y = ApplyRope(yarn, {}, {3}, ScalingView(q, 1, 1, 1, 8), ScalingView(k, 1, 1, 1, 8));
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_DOUBLE_EQ(y->attention_scaling, 0.1 * std::log(4.0) + 1.0);
  // Default RoPE: 1.
  RopeParams plain;
  plain.head_dim = plain.rotary_dim = 8;
  auto one = ApplyRope(plain, {}, {3}, ScalingView(q, 1, 1, 1, 8), ScalingView(k, 1, 1, 1, 8));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->attention_scaling, 1.0);
  EXPECT_FALSE(one->used_long_factor);
}

TEST(RopeScalingTest, LongropeSwitchesAtOriginalLength) {
  for (const auto& c : ScalingGolden().at("cases")) {
    if (c.at("name") != "longrope_long_half_split") continue;
    const RopeParams p = ParamsFromJson(c.at("config"), "HALF_SPLIT");
    auto below = ComputeRopeFrequencies(p, 4096, false);  // positions up to 4095
    auto above = ComputeRopeFrequencies(p, 4097, false);  // position 4096
    ASSERT_TRUE(below.ok() && above.ok());
    EXPECT_FALSE(below->used_long_factor);
    EXPECT_TRUE(above->used_long_factor);
    EXPECT_NE(below->inv_freq[1], above->inv_freq[1]);
    // Phi-3: factor = 131072 / 4096 = 32 -> sqrt(1 + ln 32 / ln 4096).
    EXPECT_DOUBLE_EQ(below->attention_scaling,
                     std::sqrt(1.0 + std::log(32.0) / std::log(4096.0)));
  }
}

TEST(RopeScalingTest, DynamicEqualsDefaultUpToTrainedLength) {
  RopeParams p;
  p.head_dim = p.rotary_dim = 64;
  p.max_position_embeddings = 2048;
  RopeParams dyn = p;
  dyn.scaling.type = RopeScalingType::kDynamic;
  dyn.scaling.factor = 2.0;
  auto a = ComputeRopeFrequencies(p, 2048, false);
  auto b = ComputeRopeFrequencies(dyn, 2048, false);
  auto c = ComputeRopeFrequencies(dyn, 2049, false);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->inv_freq, b->inv_freq);
  EXPECT_LT(c->inv_freq[10], b->inv_freq[10]);  // base grew
}

TEST(RopeScalingTest, BadScalingParametersNameTheField) {
  RopeParams p;
  p.head_dim = p.rotary_dim = 8;
  p.max_position_embeddings = 100;
  p.scaling.type = RopeScalingType::kLongrope;
  p.scaling.short_factor = {1, 1, 1};
  p.scaling.long_factor = {1, 1, 1, 1};
  auto s = ComputeRopeFrequencies(p, 1, false).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("short_factor.size() = 3"));
  p.scaling = RopeScaling();
  p.scaling.type = RopeScalingType::kYarn;
  p.scaling.factor = -2;
  s = ComputeRopeFrequencies(p, 1, false).status();
  EXPECT_THAT(s.message(), HasSubstr("factor = -2"));
  p.scaling.factor = 2;
  p.max_position_embeddings = 0;
  s = ComputeRopeFrequencies(p, 1, false).status();
  EXPECT_THAT(s.message(), HasSubstr("original_max_position_embeddings = 0"));
  p.max_position_embeddings = 100;
  p.scaling.type = RopeScalingType::kLlama3;
  s = ComputeRopeFrequencies(p, 1, false).status();
  EXPECT_THAT(s.message(), HasSubstr("params.scaling(llama3).original_max_position_embeddings = 0"));
  p.scaling.type = RopeScalingType::kDynamic;
  p.head_dim = p.rotary_dim = 2;
  s = ComputeRopeFrequencies(p, 1, false).status();
  EXPECT_THAT(s.message(), HasSubstr("params.rotary_dim = 2 must be > 2 for dynamic"));
}

// ---- high precision ----

TEST(RopeHighPrecisionTest, Float64AnglesAtPositions2To14Through2To20) {
  const nlohmann::json& hp = ScalingGolden().at("high_precision");
  const RopeParams p = ParamsFromJson(hp.at("config"), "HALF_SPLIT");
  const auto positions = hp.at("positions").get<std::vector<int64_t>>();
  const std::vector<double> c64 = testing::ToDoubles(hp.at("cos_f64"));
  const std::vector<double> s64 = testing::ToDoubles(hp.at("sin_f64"));
  const std::vector<float> c32 = testing::ToFloats(hp.at("cos_f32_recipe"));
  const std::vector<double> err32 =
      testing::ToDoubles(hp.at("max_abs_error_f32_recipe_per_position"));
  auto fp = ComputeRopeFrequencies(p, 0, /*high_precision=*/true);
  auto f32 = ComputeRopeFrequencies(p, 0, false);
  ASSERT_TRUE(fp.ok() && f32.ok());
  const int half = fp->half;
  std::vector<float> c(half), s(half);
  for (size_t t = 0; t < positions.size(); ++t) {
    fp->CosSin(positions[t], c.data(), s.data());
    double max_hp = 0, max_32 = 0;
    for (int i = 0; i < half; ++i) {
      max_hp = std::max(max_hp, std::fabs(c[i] - c64[t * half + i]));
      max_hp = std::max(max_hp, std::fabs(s[i] - s64[t * half + i]));
    }
    f32->CosSin(positions[t], c.data(), s.data());
    for (int i = 0; i < half; ++i) {
      max_32 = std::max(max_32, std::fabs(c[i] - c64[t * half + i]));
      EXPECT_NEAR(c[i], c32[t * half + i], 1e-6);  // fp32 mode is the HF recipe
    }
    // float64 angles: only the final float32 rounding remains.
    EXPECT_LT(max_hp, 1e-7) << "position " << positions[t];
    // The fp32 recipe's error matches the reference's and grows with p.
    EXPECT_NEAR(max_32, err32[t], 1e-5) << "position " << positions[t];
    EXPECT_GT(max_32, 100 * max_hp) << "position " << positions[t];
  }
  EXPECT_GT(err32.back(), 1e-2);  // at 2^20 the fp32 angle is visibly off
}

TEST(RopeHighPrecisionTest, ApplyRopeUsesIt) {
  RopeParams p;
  p.head_dim = p.rotary_dim = 8;
  std::vector<float> q(8, 1.0f), q2(8, 1.0f), k(8, 1.0f), k2(8, 1.0f);
  ApplyRopeOptions o;
  ASSERT_TRUE(ApplyRope(p, o, {1 << 20}, ScalingView(q, 1, 1, 1, 8), ScalingView(k, 1, 1, 1, 8)).ok());
  o.high_precision = true;
  ASSERT_TRUE(ApplyRope(p, o, {1 << 20}, ScalingView(q2, 1, 1, 1, 8), ScalingView(k2, 1, 1, 1, 8)).ok());
  EXPECT_NE(q, q2);
  // Pair 0 (inv_freq 1): exact angle 2^20 rad.
  const double c = std::cos(1048576.0), s = std::sin(1048576.0);
  EXPECT_NEAR(q2[0], c - s, 2e-7);
  EXPECT_NEAR(q2[4], c + s, 2e-7);
}

// ---- cache ----

TEST(RopeCacheTest, CachedRowsAreBitIdenticalAndBounded) {
  RopeCache::Options o;
  o.max_bytes = 1 << 20;  // 1 MiB
  o.min_positions = 128;
  auto cache = RopeCache::Create(o);
  ASSERT_TRUE(cache.ok());
  RopeParams p;
  p.head_dim = p.rotary_dim = 64;
  auto f = ComputeRopeFrequencies(p, 0, false);
  ASSERT_TRUE(f.ok());
  auto t1 = (*cache)->Get(*f, 100);
  ASSERT_NE(t1, nullptr);
  EXPECT_EQ(t1->num_positions, 128);
  auto t2 = (*cache)->Get(*f, 50);
  EXPECT_EQ(t1.get(), t2.get());  // hit
  auto t3 = (*cache)->Get(*f, 300);  // grows to 512
  EXPECT_EQ(t3->num_positions, 512);
  std::vector<float> c(32), s(32);
  for (int64_t pos : {0, 1, 127, 128, 511}) {
    f->CosSin(pos, c.data(), s.data());
    EXPECT_EQ(0, std::memcmp(c.data(), t3->cos.data() + pos * 32, 128));
    EXPECT_EQ(0, std::memcmp(s.data(), t3->sin.data() + pos * 32, 128));
  }
  // 0.5 MiB per table at most: 2048 positions x 256 B fits, 2049 does not.
  EXPECT_EQ((*cache)->Get(*f, 2049), nullptr);
  EXPECT_NE((*cache)->Get(*f, 2048), nullptr);
  // Other configs evict the least recently used ones beyond 1 MiB.
  for (int i = 0; i < 8; ++i) {
    RopeParams q = p;
    q.theta = 1000.0 + i;
    auto g = ComputeRopeFrequencies(q, 0, false);
    ASSERT_NE((*cache)->Get(*g, 2048), nullptr);
  }
  EXPECT_LE((*cache)->stats().bytes, o.max_bytes);
  EXPECT_GE((*cache)->stats().hits, 1);
  EXPECT_FALSE(RopeCache::Create(RopeCache::Options{0, 1}).ok());
}

// ---- kernels on odd sizes (vector bodies + scalar tails) ----

TEST(RopeKernelTest, AllIsasAgreeBitForBitOnLargeRandomTensorsWithThreads) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int d : {40, 128, 256}) {
    for (RopePairLayout pl : {RopePairLayout::kInterleaved, RopePairLayout::kHalfSplit}) {
      for (QkvLayout layout : {QkvLayout::kBHSD, QkvLayout::kBSHD}) {
        RopeParams p;
        p.head_dim = d;
        p.rotary_dim = d == 40 ? 36 : d;
        p.pair_layout = pl;
        const int64_t b = 2, s = 300, hq = 4, hk = 2;
        std::vector<float> q0(b * hq * s * d), k0(b * hk * s * d);
        for (float& v : q0) v = nd(rng);
        for (float& v : k0) v = nd(rng);
        std::vector<int64_t> pos(b * s);
        for (int64_t i = 0; i < b * s; ++i) pos[i] = (i * 37) % 5000;
        std::vector<float> qr, kr;
        for (RopeIsa isa : {RopeIsa::kScalar, RopeIsa::kAvx2, RopeIsa::kAvx512}) {
          for (int threads : {1, 3}) {
            std::vector<float> q = q0, k = k0;
            ApplyRopeOptions o;
            o.layout = layout;
            o.isa = isa;
            o.num_threads = threads;
            ASSERT_TRUE(ApplyRope(p, o, pos, ScalingView(q, b, hq, s, d), ScalingView(k, b, hk, s, d)).ok());
            if (qr.empty()) {
              qr = q;
              kr = k;
              continue;
            }
            EXPECT_EQ(0, std::memcmp(q.data(), qr.data(), q.size() * 4))
                << d << " " << RopeIsaName(isa) << " threads " << threads;
            EXPECT_EQ(0, std::memcmp(k.data(), kr.data(), k.size() * 4));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace vocabd
