// ALiBi slopes/bias and sinusoidal tables against tests/golden/alibi_golden.json
// (tests/golden/make_alibi_golden.py), the sinusoidal positions Embed adds
// against tests/golden/rope_golden.json ("sinusoidal_cases", float64 NumPy,
// made by make_rope_golden.py), RoPE params from GGUF keys, the
// GetRopeCache lib entry point, and common position mistakes
// (PositionMistakesTest: each test fails if the mistake is introduced).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/positions/alibi.h"
#include "lib/positions/position_ids.h"
#include "lib/positions/rope.h"
#include "lib/positions/rope_gguf.h"
#include "lib/positions/sinusoidal.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;

const nlohmann::json& Golden() {
  static const nlohmann::json* g = new nlohmann::json(testing::ReadGolden("alibi_golden.json"));
  return *g;
}

TEST(AlibiTest, SlopesMatchPaperForPowerOfTwoAndOtherHeadCounts) {
  int n = 0;
  for (const auto& [heads, want_json] : Golden().at("slopes").items()) {
    auto got = AlibiSlopes(std::stoi(heads));
    ASSERT_TRUE(got.ok());
    const std::vector<float> want = testing::ToFloats(want_json);
    ASSERT_EQ(got->size(), want.size()) << heads;
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ((*got)[i], want[i]) << heads << " " << i;
    ++n;
  }
  EXPECT_GE(n, 20);
  // The paper's examples: 8 heads 1/2 .. 1/256; 12 heads add 2^-0.5, 2^-1.5, ...
  auto s8 = AlibiSlopes(8);
  EXPECT_EQ((*s8)[0], 0.5f);
  EXPECT_EQ((*s8)[7], 1.0f / 256);
  auto s12 = AlibiSlopes(12);
  EXPECT_FLOAT_EQ((*s12)[8], static_cast<float>(std::exp2(-0.5)));
  EXPECT_FLOAT_EQ((*s12)[9], static_cast<float>(std::exp2(-1.5)));
}

TEST(AlibiTest, BiasMatchesGoldenWithCausalConvention) {
  for (const auto& c : Golden().at("biases")) {
    auto slopes = AlibiSlopes(c.at("num_heads").get<int>());
    auto bias = AlibiBias(*slopes, c.at("q_len").get<int64_t>(), c.at("k_len").get<int64_t>(),
                          c.at("causal").get<bool>());
    ASSERT_TRUE(bias.ok());
    const auto& want = c.at("bias");
    ASSERT_EQ(bias->size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      if (want[i].is_null()) {
        EXPECT_EQ((*bias)[i], -std::numeric_limits<float>::infinity()) << i;
      } else {
        EXPECT_EQ((*bias)[i], want[i].get<float>()) << i;
      }
    }
  }
}

TEST(AlibiTest, BadInputsNameTheField) {
  EXPECT_THAT(AlibiSlopes(0).status().message(), HasSubstr("num_heads = 0"));
  auto s = AlibiSlopes(4);
  EXPECT_THAT(AlibiBias(*s, 5, 3, true).status().message(), HasSubstr("q_len = 5 > k_len = 3"));
  EXPECT_THAT(AlibiBias(*s, 0, 3, true).status().message(), HasSubstr("q_len = 0"));
  EXPECT_THAT(AlibiBias(*s, 1, 0, true).status().message(), HasSubstr("k_len = 0"));
  EXPECT_THAT(AlibiBias(*s, 1 << 14, 1 << 14, true).status().message(), HasSubstr("exceeds"));
}

TEST(SinusoidalTest, TablesMatchGoldenInBothLayouts) {
  for (const auto& c : Golden().at("sinusoidal")) {
    auto t = SinusoidalTable(c.at("start").get<int64_t>(), c.at("count").get<int64_t>(),
                             c.at("dim").get<int64_t>(), c.at("base").get<double>(),
                             c.at("layout") == "INTERLEAVED" ? SinusoidalLayout::kInterleaved
                                                             : SinusoidalLayout::kHalfSplit);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(*t, testing::ToFloats(c.at("table")));
  }
}

TEST(SinusoidalTest, OddDimAndOtherBadInputs) {
  auto s = SinusoidalTable(0, 4, 7, 10000.0, SinusoidalLayout::kInterleaved).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("dim = 7 must be even"));
  EXPECT_THAT(SinusoidalTable(0, -1, 8, 1e4, SinusoidalLayout::kInterleaved).status().message(),
              HasSubstr("num_positions = -1"));
  EXPECT_THAT(SinusoidalTable(-2, 1, 8, 1e4, SinusoidalLayout::kInterleaved).status().message(),
              HasSubstr("start_position = -2"));
  EXPECT_THAT(SinusoidalTable(0, 1, 8, 0, SinusoidalLayout::kInterleaved).status().message(),
              HasSubstr("base = 0"));
}

// Golden: PE in float64 from NumPy. The C++ side computes PE in double and
// casts once to float, so the result is within half a float ULP (<= 2^-25
// for |PE| < 1, plus a few double ULPs of libm difference): tolerance 6e-8.
TEST(AddSinusoidalPositionsTest, MatchesGoldenTable) {
  const nlohmann::json golden = testing::ReadGolden("rope_golden.json");  // "sinusoidal_cases"
  int cases = 0;
  for (const auto& c : golden.at("sinusoidal_cases")) {
    ++cases;
    const int64_t d = c.at("d").get<int64_t>();
    const double base = c.at("base").get<double>();
    const std::vector<int64_t> positions = c.at("positions").get<std::vector<int64_t>>();
    const std::vector<double> want = testing::ToDoubles(c.at("table"));
    const int64_t n = static_cast<int64_t>(positions.size());
    ASSERT_EQ(want.size(), static_cast<size_t>(n * d));
    std::vector<float> rows(static_cast<size_t>(n * d), 0.0f);
    AddSinusoidalPositions(rows.data(), n, d, positions, base);
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_NEAR(rows[i], want[i], 6e-8) << "d " << d << " base " << base << " row "
                                          << i / d << " col " << i % d;
    }
    // Adding onto existing values: rows + float(PE) in fp32.
    std::vector<float> base_rows = testing::RandomNormal(static_cast<size_t>(n * d), 4);
    std::vector<float> sum = base_rows;
    AddSinusoidalPositions(sum.data(), n, d, positions, base);
    for (size_t i = 0; i < sum.size(); ++i) {
      EXPECT_EQ(sum[i], base_rows[i] + rows[i]) << i;
    }
  }
  EXPECT_EQ(cases, 3);
}

TEST(AddSinusoidalPositionsTest, KnownValues) {
  // Position 0: sin(0) = 0, cos(0) = 1 in every pair. Position 1, d = 2:
  // (sin 1, cos 1).
  std::vector<float> rows(2 * 4, 0.0f);
  AddSinusoidalPositions(rows.data(), 2, 4, {0, 1});
  EXPECT_EQ(rows[0], 0.0f);
  EXPECT_EQ(rows[1], 1.0f);
  EXPECT_EQ(rows[2], 0.0f);
  EXPECT_EQ(rows[3], 1.0f);
  EXPECT_EQ(rows[4], static_cast<float>(std::sin(1.0)));
  EXPECT_EQ(rows[5], static_cast<float>(std::cos(1.0)));
  // Pair 1 of d = 4: angle = 1 / 10000^(2/4) = 0.01.
  EXPECT_EQ(rows[6], static_cast<float>(std::sin(0.01)));
  EXPECT_EQ(rows[7], static_cast<float>(std::cos(0.01)));
}

// The positions Embed adds are the GetSinusoidalPositions table's values,
// bit for bit (one implementation: lib/positions/sinusoidal.cc).
TEST(AddSinusoidalPositionsTest, OntoZerosIsTheInterleavedTable) {
  for (const int64_t d : {2, 6, 64}) {
    const int64_t start = 1000, count = 37;
    auto table = SinusoidalTable(start, count, d, 10000.0, SinusoidalLayout::kInterleaved);
    ASSERT_TRUE(table.ok());
    std::vector<int64_t> positions(static_cast<size_t>(count));
    for (int64_t r = 0; r < count; ++r) positions[static_cast<size_t>(r)] = start + r;
    std::vector<float> rows(static_cast<size_t>(count * d), 0.0f);
    AddSinusoidalPositions(rows.data(), count, d, positions);
    ASSERT_EQ(rows.size(), table->size());
    EXPECT_EQ(std::memcmp(rows.data(), table->data(), rows.size() * sizeof(float)), 0) << d;
  }
}

// ---- GGUF keys ----

TEST(RopeGgufTest, ReadsEveryRopeKey) {
  GgufRopeInput in;
  in.arch = "deepseek2";
  in.head_dim = 64;
  in.pair_layout = RopePairLayout::kHalfSplit;
  in.metadata["deepseek2.context_length"] = GgufRopeValue::Int(163840);
  in.metadata["deepseek2.rope.dimension_count"] = GgufRopeValue::Int(32);
  in.metadata["deepseek2.rope.freq_base"] = GgufRopeValue::Float(10000.0);
  in.metadata["deepseek2.rope.scaling.type"] = GgufRopeValue::String("yarn");
  in.metadata["deepseek2.rope.scaling.factor"] = GgufRopeValue::Float(40.0);
  in.metadata["deepseek2.rope.scaling.original_context_length"] = GgufRopeValue::Int(4096);
  in.metadata["deepseek2.rope.scaling.yarn_log_multiplier"] = GgufRopeValue::Float(0.0707);
  in.metadata["deepseek2.rope.scaling.yarn_beta_fast"] = GgufRopeValue::Float(16.0);
  auto p = RopeParamsFromGguf(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->max_position_embeddings, 163840);
  EXPECT_EQ(p->rotary_dim, 32);
  EXPECT_EQ(p->head_dim, 64);
  EXPECT_EQ(p->scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(p->scaling.factor, 40.0);
  EXPECT_EQ(p->scaling.original_max_position_embeddings, 4096);
  EXPECT_NEAR(p->scaling.mscale_all_dim, 0.707, 1e-12);
  EXPECT_EQ(p->scaling.beta_fast, 16.0);
  EXPECT_EQ(p->pair_layout, RopePairLayout::kHalfSplit);
}

TEST(RopeGgufTest, LegacyLinearDefaultsAndFactorTensors) {
  GgufRopeInput in;
  in.arch = "llama";
  in.head_dim = 8;
  in.metadata["llama.rope.scale_linear"] = GgufRopeValue::Float(4.0);
  auto p = RopeParamsFromGguf(in);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->scaling.type, RopeScalingType::kLinear);
  EXPECT_EQ(p->scaling.factor, 4.0);
  EXPECT_EQ(p->theta, 10000.0);
  EXPECT_EQ(p->rotary_dim, 8);
  EXPECT_EQ(p->pair_layout, RopePairLayout::kInterleaved);
  // Llama 3.1 rope_freqs tensor: inv = default / rope_freqs.
  GgufRopeInput l3;
  l3.arch = "llama";
  l3.head_dim = 8;
  l3.rope_freqs = {1, 1, 2, 8};
  p = RopeParamsFromGguf(l3);
  ASSERT_TRUE(p.ok()) << p.status();
  auto f = ComputeInvFreq(*p);
  RopeParams plain;
  plain.head_dim = plain.rotary_dim = 8;
  auto d = ComputeInvFreq(plain);
  EXPECT_EQ((*f)[0], (*d)[0]);
  EXPECT_FLOAT_EQ((*f)[3], (*d)[3] / 8);
  // Phi-3 longrope tensors.
  GgufRopeInput phi;
  phi.arch = "phi3";
  phi.head_dim = 4;
  phi.metadata["phi3.rope.scaling.type"] = GgufRopeValue::String("longrope");
  phi.metadata["phi3.context_length"] = GgufRopeValue::Int(131072);
  phi.metadata["phi3.rope.scaling.original_context_length"] = GgufRopeValue::Int(4096);
  phi.metadata["phi3.rope.scaling.attn_factor"] = GgufRopeValue::Float(1.19);
  phi.rope_factors_long = {2, 3};
  phi.rope_factors_short = {1, 1};
  p = RopeParamsFromGguf(phi);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->scaling.type, RopeScalingType::kLongrope);
  EXPECT_EQ(p->scaling.attention_factor, 1.19);
  EXPECT_EQ(p->scaling.long_factor, (std::vector<double>{2, 3}));
}

TEST(RopeGgufTest, BadKeysNameKeyAndValue) {
  GgufRopeInput in;
  in.arch = "llama";
  in.head_dim = 8;
  in.metadata["llama.rope.freq_base"] = GgufRopeValue::String("big");
  EXPECT_THAT(RopeParamsFromGguf(in).status().message(),
              HasSubstr("key \"llama.rope.freq_base\" must be a number, got string \"big\""));
  in.metadata.clear();
  in.metadata["llama.rope.scaling.type"] = GgufRopeValue::String("weird");
  EXPECT_THAT(RopeParamsFromGguf(in).status().message(), HasSubstr("= \"weird\" is not supported"));
  in.metadata["llama.rope.scaling.type"] = GgufRopeValue::String("yarn");
  EXPECT_THAT(RopeParamsFromGguf(in).status().message(),
              HasSubstr("\"llama.rope.scaling.factor\" is required"));
  in.metadata["llama.rope.scaling.factor"] = GgufRopeValue::Float(4.0);
  in.metadata["llama.rope.dimension_count"] = GgufRopeValue::Int(9);
  EXPECT_THAT(RopeParamsFromGguf(in).status().message(), HasSubstr("rope.rotary_dim = 9"));
  in.metadata["llama.rope.dimension_count"] = GgufRopeValue::Float(8.0);
  EXPECT_THAT(RopeParamsFromGguf(in).status().message(), HasSubstr("must be an integer"));
}

// ---- GetRopeCache (lib) ----

TEST(RopeCacheOutputTest, LengthPolicyAndLimits) {
  RopeParams p;
  p.head_dim = p.rotary_dim = 8;
  p.max_position_embeddings = 100;
  auto ok = ComputeRopeCache(p, 98, 2, false, false);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->cos.size(), 8u);
  auto refused = ComputeRopeCache(p, 98, 3, false, false);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("start_position + num_positions - 1 = 100 >= max_position_embeddings 100 "
                        "(set allow_beyond_trained_length)"));
  EXPECT_TRUE(ComputeRopeCache(p, 98, 3, true, false).ok());
  EXPECT_THAT(ComputeRopeCache(p, -1, 3, true, false).status().message(),
              HasSubstr("start_position = -1"));
  EXPECT_THAT(ComputeRopeCache(p, 0, -3, true, false).status().message(),
              HasSubstr("num_positions = -3"));
  EXPECT_THAT(ComputeRopeCache(p, 0, int64_t{1} << 30, true, false).status().message(),
              HasSubstr("exceeds"));
}

// ---- the six mistakes ----

QkTensor View(std::vector<float>& v, int64_t b, int64_t h, int64_t s, int64_t d) {
  QkTensor t;
  t.data = v.data();
  t.batch = b;
  t.num_heads = h;
  t.seq_len = s;
  t.head_dim = d;
  return t;
}

std::vector<float> Ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>((i * 7919) % 97) / 97.0f - 0.5f;
  return v;
}

RopeParams SmallParams() {
  RopeParams p;
  p.head_dim = p.rotary_dim = 16;
  p.max_position_embeddings = 64;
  return p;
}

// 1. Off-by-one cache positions: a decode step at offset n must use
// position n (the row n of the full prefill), not n - 1 or n + 1.
TEST(PositionMistakesTest, DecodeStepAtOffsetNUsesPositionN) {
  const RopeParams p = SmallParams();
  const int64_t n = 9, d = 16;
  std::vector<float> q_full = Ramp((n + 1) * d, 1.0f), k_full = Ramp((n + 1) * d, 2.0f);
  std::vector<float> q_step(q_full.end() - d, q_full.end()), k_step(k_full.end() - d, k_full.end());
  ApplyRopeOptions o;
  auto full_pos = PositionsFromOffsets({0}, 1, n + 1);
  ASSERT_TRUE(ApplyRope(p, o, *full_pos, View(q_full, 1, 1, n + 1, d), View(k_full, 1, 1, n + 1, d)).ok());
  auto step_pos = PositionsFromOffsets({n}, 1, 1);
  ASSERT_EQ(*step_pos, std::vector<int64_t>{n});
  ASSERT_TRUE(ApplyRope(p, o, *step_pos, View(q_step, 1, 1, 1, d), View(k_step, 1, 1, 1, d)).ok());
  EXPECT_EQ(0, std::memcmp(q_step.data(), q_full.data() + n * d, d * 4));
  EXPECT_EQ(0, std::memcmp(k_step.data(), k_full.data() + n * d, d * 4));
  // n - 1 and n + 1 give different rows.
  for (int64_t wrong : {n - 1, n + 1}) {
    const std::vector<float> q_in = Ramp((n + 1) * d, 1.0f), k_in = Ramp((n + 1) * d, 2.0f);
    std::vector<float> q2(q_in.end() - d, q_in.end()), k2(k_in.end() - d, k_in.end());
    ASSERT_TRUE(ApplyRope(p, o, {wrong}, View(q2, 1, 1, 1, d), View(k2, 1, 1, 1, d)).ok());
    EXPECT_NE(0, std::memcmp(q2.data(), q_full.data() + n * d, d * 4)) << wrong;
  }
}

// Attention-mask cumsum position ids (HF generate): (cumsum(mask) - 1),
// pads set to 1 (any value; they are masked out).
std::vector<int64_t> CumsumPositions(const std::vector<int>& mask) {
  std::vector<int64_t> out;
  int64_t c = 0;
  for (int m : mask) {
    c += m;
    out.push_back(m ? c - 1 : 1);
  }
  return out;
}

// 2. + 3. Padding treated as content / left-padding position ids: a
// left-padded row's real tokens get positions 0, 1, ... (mask cumsum), so
// they rotate exactly like the same tokens unpadded; naive arange ids
// (counting pads) do not.
TEST(PositionMistakesTest, LeftPaddingFollowsMaskCumsumAndPadsDoNotShiftTokens) {
  const RopeParams p = SmallParams();
  const int64_t d = 16, s = 6, pads = 2;
  const std::vector<int> mask = {0, 0, 1, 1, 1, 1};
  const std::vector<int64_t> ids = CumsumPositions(mask);
  EXPECT_EQ(ids, (std::vector<int64_t>{1, 1, 0, 1, 2, 3}));
  // Row 0: left-padded; row 1: the same 4 real tokens, right-padded.
  std::vector<float> real_q = Ramp(4 * d, 1.0f), real_k = Ramp(4 * d, 3.0f);
  std::vector<float> q(2 * s * d, 0.0f), k(2 * s * d, 0.0f);
  std::copy(real_q.begin(), real_q.end(), q.begin() + pads * d);
  std::copy(real_k.begin(), real_k.end(), k.begin() + pads * d);
  std::copy(real_q.begin(), real_q.end(), q.begin() + s * d);
  std::copy(real_k.begin(), real_k.end(), k.begin() + s * d);
  std::vector<int64_t> positions = ids;
  for (int64_t i = 0; i < s; ++i) positions.push_back(i < 4 ? i : 0);
  ApplyRopeOptions o;
  o.layout = QkvLayout::kBSHD;
  ASSERT_TRUE(ApplyRope(p, o, positions, View(q, 2, 1, s, d), View(k, 2, 1, s, d)).ok());
  EXPECT_EQ(0, std::memcmp(q.data() + pads * d, q.data() + s * d, 4 * d * 4));
  EXPECT_EQ(0, std::memcmp(k.data() + pads * d, k.data() + s * d, 4 * d * 4));
  // The mistake: positions 0..5 including pads shift the real tokens by 2.
  std::vector<float> q2(2 * s * d, 0.0f), k2(2 * s * d, 0.0f);
  std::copy(real_q.begin(), real_q.end(), q2.begin() + pads * d);
  std::copy(real_k.begin(), real_k.end(), k2.begin() + pads * d);
  auto naive = PositionsFromOffsets({0, 0}, 2, s);
  ASSERT_TRUE(ApplyRope(p, o, *naive, View(q2, 2, 1, s, d), View(k2, 2, 1, s, d)).ok());
  EXPECT_NE(0, std::memcmp(q2.data() + pads * d, q.data() + s * d, 4 * d * 4));
}

// 4. Double application: rotating twice equals rotating once by 2p, never
// by p: a pipeline that applies RoPE twice is detectable, and ApplyRope
// rotates exactly once per call.
TEST(PositionMistakesTest, DoubleApplicationIsDetectable) {
  const RopeParams p = SmallParams();
  const int64_t d = 16;
  std::vector<float> once_q = Ramp(d, 1.0f), once_k = Ramp(d, 2.0f);
  std::vector<float> twice_q = once_q, twice_k = once_k;
  std::vector<float> by2p_q = once_q, by2p_k = once_k;
  ApplyRopeOptions o;
  ASSERT_TRUE(ApplyRope(p, o, {5}, View(once_q, 1, 1, 1, d), View(once_k, 1, 1, 1, d)).ok());
  ASSERT_TRUE(ApplyRope(p, o, {5}, View(twice_q, 1, 1, 1, d), View(twice_k, 1, 1, 1, d)).ok());
  ASSERT_TRUE(ApplyRope(p, o, {5}, View(twice_q, 1, 1, 1, d), View(twice_k, 1, 1, 1, d)).ok());
  ASSERT_TRUE(ApplyRope(p, o, {10}, View(by2p_q, 1, 1, 1, d), View(by2p_k, 1, 1, 1, d)).ok());
  double diff_once = 0, diff_2p = 0;
  for (int64_t i = 0; i < d; ++i) {
    diff_once = std::max(diff_once, static_cast<double>(std::fabs(twice_q[i] - once_q[i])));
    diff_2p = std::max(diff_2p, static_cast<double>(std::fabs(twice_q[i] - by2p_q[i])));
  }
  EXPECT_GT(diff_once, 0.1);  // twice != once
  EXPECT_LT(diff_2p, 1e-5);   // twice == rotation by 2p
  // Position 0 is the identity, so "double" application there is harmless.
  std::vector<float> z = Ramp(d, 1.0f), zk = Ramp(d, 1.0f), z0 = z;
  ASSERT_TRUE(ApplyRope(p, o, {0}, View(z, 1, 1, 1, d), View(zk, 1, 1, 1, d)).ok());
  EXPECT_EQ(z, z0);
}

// 5. Dimension mismatch with partial rotary: exactly the first rotary_dim
// coordinates rotate (pairs inside them), the rest are bit-exact; rotating
// the whole head or pairing across rotary_dim changes the result.
TEST(PositionMistakesTest, PartialRotaryRotatesOnlyTheRotarySubDimension) {
  RopeParams p = SmallParams();
  p.head_dim = 16;
  p.rotary_dim = 8;
  const std::vector<float> q0 = Ramp(16, 1.0f);
  std::vector<float> q = q0, k = q0;
  ApplyRopeOptions o;
  ASSERT_TRUE(ApplyRope(p, o, {7}, View(q, 1, 1, 1, 16), View(k, 1, 1, 1, 16)).ok());
  for (int i = 8; i < 16; ++i) EXPECT_EQ(q[i], q0[i]) << i;
  // Reference: a head_dim 8 rotation of the first 8 coordinates.
  RopeParams r8 = p;
  r8.head_dim = r8.rotary_dim = 8;
  std::vector<float> h8(q0.begin(), q0.begin() + 8), k8 = h8;
  ASSERT_TRUE(ApplyRope(r8, o, {7}, View(h8, 1, 1, 1, 8), View(k8, 1, 1, 1, 8)).ok());
  EXPECT_EQ(0, std::memcmp(q.data(), h8.data(), 8 * 4));
  // The mistake: rotating all 16 coordinates.
  RopeParams full = p;
  full.rotary_dim = 16;
  std::vector<float> qf = q0, kf = q0;
  ASSERT_TRUE(ApplyRope(full, o, {7}, View(qf, 1, 1, 1, 16), View(kf, 1, 1, 1, 16)).ok());
  EXPECT_NE(0, std::memcmp(qf.data(), q.data(), 16 * 4));
  // A tensor whose head_dim is not the config's is refused, not silently rotated.
  std::vector<float> q12(12), k12(12);
  absl::Status s = ApplyRope(p, o, {7}, View(q12, 1, 1, 1, 12), View(k12, 1, 1, 1, 12)).status();
  EXPECT_THAT(s.message(), HasSubstr("params.head_dim = 16 != q.shape[3] (head_dim) = 12"));
}

// 6. Unsupported extension: beyond the trained length without the flag is
// refused (nothing written), with the flag it rotates.
TEST(PositionMistakesTest, BeyondTrainedLengthNeedsTheExplicitFlag) {
  const RopeParams p = SmallParams();  // 64 positions
  std::vector<float> q = Ramp(16, 1.0f), k = Ramp(16, 1.0f);
  const std::vector<float> q0 = q;
  ApplyRopeOptions o;
  absl::Status s = ApplyRope(p, o, {64}, View(q, 1, 1, 1, 16), View(k, 1, 1, 1, 16)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("positions[0]: position 64 >= max_position_embeddings 64 "
                                     "(set allow_beyond_trained_length)"));
  EXPECT_EQ(q, q0);
  EXPECT_TRUE(ApplyRope(p, o, {63}, View(q, 1, 1, 1, 16), View(k, 1, 1, 1, 16)).ok());
  o.allow_beyond_trained_length = true;
  std::vector<float> q2 = q0, k2 = q0;
  EXPECT_TRUE(ApplyRope(p, o, {64}, View(q2, 1, 1, 1, 16), View(k2, 1, 1, 1, 16)).ok());
  EXPECT_NE(q2, q0);
}

}  // namespace
}  // namespace vocabd
