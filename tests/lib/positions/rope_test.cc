// Tests for lib/rope.{h,cc} against tests/golden/rope_golden.json (made by
// tests/golden/make_rope_golden.py, NumPy float32 HF recipe) and against the
// freq_cis tables llama2.c stored in stories260K.bin (PyTorch float32).
//
// Tolerance vs the NumPy golden, per rotated element with pair inputs (a, b):
//   |got - want| <= 1e-6 * max(1, |a| + |b|)
// Why: inv_freq and the fp32 angle are bit-identical on both sides (checked
// below), so the only differences are cos/sin (NumPy SIMD vs glibc cosf/sinf,
// each within ~2 ULP = 2.4e-7 of the true value for |v| <= 1) and the
// rounding of two products and one sum (3 half-ULPs of |a| + |b|): about
// 6e-7 * (|a| + |b|) in the worst case (observed: 1.6e-7), so 1e-6 is safe. Using a
// float64 angle instead of fp32 moves cos by ~2e-3 at position 100000
// (asserted by the golden script), and an off-by-one position by O(1): both
// are caught. Pass-through coordinates must be bit-exact.
#include "lib/positions/rope.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/checkpoint/model_config.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;

constexpr double kRelTol = 1e-6;

struct GoldenCase {
  std::string name;
  RopeParams params;
  ApplyRopeOptions options;
  int64_t batch = 0, seq = 0, hq = 0, hk = 0;
  std::vector<int64_t> positions;
  std::vector<int64_t> offsets;
  bool has_offsets = false;
  std::vector<float> inv_freq, q, k, q_out, k_out;
};

std::vector<GoldenCase> LoadCases() {
  const nlohmann::json golden = testing::ReadGolden("rope_golden.json");
  std::vector<GoldenCase> cases;
  for (const auto& c : golden.at("rope_cases")) {
    GoldenCase g;
    g.name = c.at("name").get<std::string>();
    g.params.theta = c.at("theta").get<double>();
    g.params.head_dim = c.at("head_dim").get<int>();
    g.params.rotary_dim = c.at("rotary_dim").get<int>();
    g.params.pair_layout = c.at("pair_layout").get<std::string>() == "INTERLEAVED"
                               ? RopePairLayout::kInterleaved
                               : RopePairLayout::kHalfSplit;
    if (c.at("scaling").get<std::string>() == "linear") {
      g.params.scaling.type = RopeScalingType::kLinear;
      g.params.scaling.factor = c.at("factor").get<double>();
    }
    g.params.max_position_embeddings = c.at("max_position_embeddings").get<int64_t>();
    g.options.allow_beyond_trained_length = c.at("allow_beyond_trained_length").get<bool>();
    g.batch = c.at("batch").get<int64_t>();
    g.seq = c.at("seq_len").get<int64_t>();
    g.hq = c.at("q_heads").get<int64_t>();
    g.hk = c.at("k_heads").get<int64_t>();
    g.positions = c.at("positions").get<std::vector<int64_t>>();
    if (c.contains("offsets")) {
      g.has_offsets = true;
      g.offsets = c.at("offsets").get<std::vector<int64_t>>();
    }
    g.inv_freq = testing::ToFloats(c.at("inv_freq"));
    g.q = testing::ToFloats(c.at("q"));
    g.k = testing::ToFloats(c.at("k"));
    g.q_out = testing::ToFloats(c.at("q_out"));
    g.k_out = testing::ToFloats(c.at("k_out"));
    cases.push_back(std::move(g));
  }
  return cases;
}

// BHSD [B, H, S, D] -> BSHD [B, S, H, D].
std::vector<float> BhsdToBshd(const std::vector<float>& x, int64_t b_n, int64_t h_n, int64_t s_n,
                              int64_t d_n) {
  std::vector<float> y(x.size());
  for (int64_t b = 0; b < b_n; ++b)
    for (int64_t h = 0; h < h_n; ++h)
      for (int64_t s = 0; s < s_n; ++s)
        for (int64_t d = 0; d < d_n; ++d)
          y[((b * s_n + s) * h_n + h) * d_n + d] = x[((b * h_n + h) * s_n + s) * d_n + d];
  return y;
}

QkTensor Tensor(std::vector<float>& data, int64_t b, int64_t h, int64_t s, int64_t d) {
  QkTensor t;
  t.data = data.data();
  t.batch = b;
  t.num_heads = h;
  t.seq_len = s;
  t.head_dim = d;
  return t;
}

// Index of the pair partner of coordinate j (< r) inside one head.
int Partner(int j, int r, RopePairLayout layout) {
  if (layout == RopePairLayout::kInterleaved) return j ^ 1;
  return j < r / 2 ? j + r / 2 : j - r / 2;
}

// Compares a rotated tensor (any layout whose innermost axis is D) with the
// golden: rotated coordinates within tolerance, the rest bit-exact.
void ExpectMatchesGolden(const std::string& what, const std::vector<float>& in,
                         const std::vector<float>& got, const std::vector<float>& want, int d,
                         int r, RopePairLayout layout) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  double worst = 0.0;
  for (size_t v = 0; v < got.size() / static_cast<size_t>(d); ++v) {
    const size_t base = v * static_cast<size_t>(d);
    for (int j = 0; j < d; ++j) {
      const float g = got[base + j];
      const float w = want[base + j];
      if (j >= r) {
        if (std::memcmp(&g, &w, sizeof(float)) != 0 && bad++ < 5) {
          ADD_FAILURE() << what << " pass-through element " << base + j << ": " << g
                        << " != " << w;
        }
        continue;
      }
      const double scale =
          std::max(1.0, static_cast<double>(std::fabs(in[base + j]) +
                                            std::fabs(in[base + Partner(j, r, layout)])));
      const double err = std::fabs(static_cast<double>(g) - w);
      worst = std::max(worst, err / scale);
      if (err > kRelTol * scale && bad++ < 5) {
        ADD_FAILURE() << what << " element " << base + j << ": got " << g << " want " << w
                      << " err " << err << " > " << kRelTol * scale;
      }
    }
  }
  EXPECT_EQ(bad, 0) << what;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", worst);
  ::testing::Test::RecordProperty(what + "_worst_rel_err", buf);
}

TEST(RopeGoldenTest, InvFreqIsBitExactFp32Recipe) {
  for (const GoldenCase& c : LoadCases()) {
    auto inv = ComputeInvFreq(c.params);
    ASSERT_TRUE(inv.ok()) << c.name << ": " << inv.status();
    ASSERT_EQ(inv->size(), c.inv_freq.size()) << c.name;
    for (size_t i = 0; i < inv->size(); ++i) {
      EXPECT_EQ((*inv)[i], c.inv_freq[i]) << c.name << " inv_freq[" << i << "]";
    }
  }
}

TEST(RopeGoldenTest, BhsdMatchesNumpyReference) {
  for (const GoldenCase& c : LoadCases()) {
    SCOPED_TRACE(c.name);
    const int d = c.params.head_dim;
    std::vector<float> q = c.q, k = c.k;
    ApplyRopeOptions opt = c.options;
    opt.layout = QkvLayout::kBHSD;
    ASSERT_TRUE(ApplyRope(c.params, opt, c.positions, Tensor(q, c.batch, c.hq, c.seq, d),
                          Tensor(k, c.batch, c.hk, c.seq, d))
                    .ok());
    ExpectMatchesGolden(c.name + "_q", c.q, q, c.q_out, d, c.params.rotary_dim,
                        c.params.pair_layout);
    ExpectMatchesGolden(c.name + "_k", c.k, k, c.k_out, d, c.params.rotary_dim,
                        c.params.pair_layout);
  }
}

TEST(RopeGoldenTest, BshdAndThdGiveTheSameBitsAsBhsd) {
  for (const GoldenCase& c : LoadCases()) {
    SCOPED_TRACE(c.name);
    const int d = c.params.head_dim;
    std::vector<float> q = c.q, k = c.k;
    ApplyRopeOptions opt = c.options;
    ASSERT_TRUE(ApplyRope(c.params, opt, c.positions, Tensor(q, c.batch, c.hq, c.seq, d),
                          Tensor(k, c.batch, c.hk, c.seq, d))
                    .ok());
    const std::vector<float> q_ref = BhsdToBshd(q, c.batch, c.hq, c.seq, d);
    const std::vector<float> k_ref = BhsdToBshd(k, c.batch, c.hk, c.seq, d);

    std::vector<float> q2 = BhsdToBshd(c.q, c.batch, c.hq, c.seq, d);
    std::vector<float> k2 = BhsdToBshd(c.k, c.batch, c.hk, c.seq, d);
    opt.layout = QkvLayout::kBSHD;
    ASSERT_TRUE(ApplyRope(c.params, opt, c.positions, Tensor(q2, c.batch, c.hq, c.seq, d),
                          Tensor(k2, c.batch, c.hk, c.seq, d))
                    .ok());
    EXPECT_EQ(q2, q_ref);
    EXPECT_EQ(k2, k_ref);

    // THD: the B sequences concatenated, T = B * S, positions flattened.
    std::vector<float> q3 = BhsdToBshd(c.q, c.batch, c.hq, c.seq, d);
    std::vector<float> k3 = BhsdToBshd(c.k, c.batch, c.hk, c.seq, d);
    opt.layout = QkvLayout::kTHD;
    ASSERT_TRUE(ApplyRope(c.params, opt, c.positions, Tensor(q3, 1, c.hq, c.batch * c.seq, d),
                          Tensor(k3, 1, c.hk, c.batch * c.seq, d))
                    .ok());
    EXPECT_EQ(q3, q_ref);
    EXPECT_EQ(k3, k_ref);
  }
}

TEST(RopeGoldenTest, OffsetsGiveTheGoldenPositions) {
  int with_offsets = 0;
  for (const GoldenCase& c : LoadCases()) {
    if (!c.has_offsets) continue;
    ++with_offsets;
    auto pos = PositionsFromOffsets(c.offsets, c.batch, c.seq);
    ASSERT_TRUE(pos.ok()) << pos.status();
    EXPECT_EQ(*pos, c.positions) << c.name;
    const int d = c.params.head_dim;
    std::vector<float> q = c.q, k = c.k;
    ASSERT_TRUE(ApplyRope(c.params, c.options, *pos, Tensor(q, c.batch, c.hq, c.seq, d),
                          Tensor(k, c.batch, c.hk, c.seq, d))
                    .ok());
    ExpectMatchesGolden(c.name + "_q_offsets", c.q, q, c.q_out, d, c.params.rotary_dim,
                        c.params.pair_layout);
  }
  EXPECT_EQ(with_offsets, 2);
}

// llama2.c's export stored freq_cis_real/imag [seq_len=512, head_dim/2=4] =
// torch.cos/sin(torch.outer(arange(512), inv_freq).float()) for theta 10000,
// head_dim 8: an independent PyTorch fp32 reference. Rotating the unit pair
// (1, 0) at position p gives (cos, sin).
TEST(RopeReferenceTest, MatchesLlama2cFreqCisTables) {
  std::ifstream in(testing::Stories260KBin(), std::ios::binary);
  ASSERT_TRUE(in) << testing::Stories260KBin();
  // 7 int32 header, then (in floats) tok_embeddings 512x64, rms_att 5x64,
  // wq 5x64x64, wk 5x32x64, wv 5x32x64, wo 5x64x64, rms_ffn 5x64,
  // w1/w2/w3 3x5x172x64, rms_final 64, then freq_cis_real, freq_cis_imag.
  const int64_t floats_before = 512 * 64 + 5 * 64 + 5 * 64 * 64 + 2 * 5 * 32 * 64 +
                                5 * 64 * 64 + 5 * 64 + 3 * 5 * 172 * 64 + 64;
  in.seekg(28 + 4 * floats_before);
  std::vector<float> fc(512 * 4), fs(512 * 4);
  in.read(reinterpret_cast<char*>(fc.data()), 4 * 2048);
  in.read(reinterpret_cast<char*>(fs.data()), 4 * 2048);
  ASSERT_TRUE(in);
  in.get();
  ASSERT_TRUE(in.eof()) << "file is longer than expected";

  RopeParams p;
  p.theta = 10000.0;
  p.head_dim = 8;
  p.rotary_dim = 8;
  p.pair_layout = RopePairLayout::kInterleaved;
  p.max_position_embeddings = 512;
  std::vector<float> q(512 * 8), k(512 * 8);
  for (int s = 0; s < 512; ++s)
    for (int i = 0; i < 4; ++i) q[s * 8 + 2 * i] = 1.0f, k[s * 8 + 2 * i + 1] = 1.0f;
  auto pos = PositionsFromOffsets({}, 1, 512);
  ASSERT_TRUE(pos.ok());
  ApplyRopeOptions opt;
  opt.layout = QkvLayout::kTHD;
  ASSERT_TRUE(ApplyRope(p, opt, *pos, Tensor(q, 1, 1, 512, 8), Tensor(k, 1, 1, 512, 8)).ok());
  // 2 ULP of values <= 1 (torch's Sleef cos/sin vs glibc cosf/sinf).
  constexpr float kTol = 2.4e-7f;
  for (int s = 0; s < 512; ++s) {
    for (int i = 0; i < 4; ++i) {
      const float c = fc[s * 4 + i], sn = fs[s * 4 + i];
      ASSERT_NEAR(q[s * 8 + 2 * i], c, kTol) << "pos " << s << " pair " << i;
      ASSERT_NEAR(q[s * 8 + 2 * i + 1], sn, kTol) << "pos " << s << " pair " << i;
      // (0, 1) -> (-sin, cos)
      ASSERT_NEAR(k[s * 8 + 2 * i], -sn, kTol) << "pos " << s << " pair " << i;
      ASSERT_NEAR(k[s * 8 + 2 * i + 1], c, kTol) << "pos " << s << " pair " << i;
    }
  }
}

RopeParams Params(int head_dim, int rotary_dim, RopePairLayout layout, double theta = 10000.0,
                  int64_t max_pos = 0) {
  RopeParams p;
  p.theta = theta;
  p.head_dim = head_dim;
  p.rotary_dim = rotary_dim;
  p.pair_layout = layout;
  p.max_position_embeddings = max_pos;
  return p;
}

std::vector<float> RandomVec(size_t n, uint32_t seed) { return testing::RandomNormal(n, seed); }

// A decode step (seq 1 at offset n) must equal row n of a full-sequence
// rotation, bit for bit, and must differ from rows n - 1 and n + 1.
TEST(RopeTest, DecodeStepAtOffsetEqualsRowOfFullSequence) {
  for (RopePairLayout layout : {RopePairLayout::kInterleaved, RopePairLayout::kHalfSplit}) {
    const RopeParams p = Params(16, 16, layout, 10000.0, 64);
    const int64_t s_len = 12, hq = 4, hk = 2, d = 16;
    const std::vector<float> q0 = RandomVec(s_len * hq * d, 1), k0 = RandomVec(s_len * hk * d, 2);
    std::vector<float> q = q0, k = k0;
    ApplyRopeOptions opt;
    opt.layout = QkvLayout::kBSHD;
    auto pos = PositionsFromOffsets({}, 1, s_len);
    ASSERT_TRUE(pos.ok());
    ASSERT_TRUE(ApplyRope(p, opt, *pos, Tensor(q, 1, hq, s_len, d), Tensor(k, 1, hk, s_len, d))
                    .ok());
    const int64_t n = 7;
    auto row = [&](const std::vector<float>& x, int64_t heads, int64_t s) {
      return std::vector<float>(x.begin() + s * heads * d, x.begin() + (s + 1) * heads * d);
    };
    std::vector<float> qs = row(q0, hq, n), ks = row(k0, hk, n);
    auto dpos = PositionsFromOffsets({n}, 1, 1);
    ASSERT_TRUE(dpos.ok());
    ASSERT_EQ(*dpos, std::vector<int64_t>{n});
    ASSERT_TRUE(ApplyRope(p, opt, *dpos, Tensor(qs, 1, hq, 1, d), Tensor(ks, 1, hk, 1, d)).ok());
    EXPECT_EQ(qs, row(q, hq, n));
    EXPECT_EQ(ks, row(k, hk, n));
    // The same input token rotated at n - 1 or n + 1 is different.
    for (int64_t wrong : {n - 1, n + 1}) {
      std::vector<float> qw = row(q0, hq, n), kw = row(k0, hk, n);
      ASSERT_TRUE(
          ApplyRope(p, opt, {wrong}, Tensor(qw, 1, hq, 1, d), Tensor(kw, 1, hk, 1, d)).ok());
      EXPECT_NE(qw, qs) << "position " << wrong;
      float max_diff = 0;
      for (size_t i = 0; i < qw.size(); ++i) max_diff = std::max(max_diff, std::fabs(qw[i] - qs[i]));
      EXPECT_GT(max_diff, 0.05f) << "position " << wrong;
    }
  }
}

// Permuting head coordinates (interleaved pair i = (2i, 2i+1) -> half-split
// pair i = (i, i + r/2)) maps one layout onto the other exactly.
TEST(RopeTest, InterleavedAndHalfSplitAreRelatedByAPermutation) {
  for (int r : {8, 6}) {  // full and partial rotary (head_dim 8)
    const int d = 8, heads = 3, s_len = 5;
    const std::vector<float> x = RandomVec(heads * s_len * d, 3);
    std::vector<float> perm(x.size());
    for (size_t v = 0; v < x.size() / d; ++v) {
      for (int i = 0; i < r / 2; ++i) {
        perm[v * d + i] = x[v * d + 2 * i];
        perm[v * d + i + r / 2] = x[v * d + 2 * i + 1];
      }
      for (int j = r; j < d; ++j) perm[v * d + j] = x[v * d + j];
    }
    const std::vector<int64_t> pos = {0, 3, 17, 200, 511};
    std::vector<float> a = x, ak = x, b = perm, bk = perm;
    ApplyRopeOptions opt;  // BHSD
    ASSERT_TRUE(ApplyRope(Params(d, r, RopePairLayout::kInterleaved), opt, pos,
                          Tensor(a, 1, heads, s_len, d), Tensor(ak, 1, heads, s_len, d))
                    .ok());
    ASSERT_TRUE(ApplyRope(Params(d, r, RopePairLayout::kHalfSplit), opt, pos,
                          Tensor(b, 1, heads, s_len, d), Tensor(bk, 1, heads, s_len, d))
                    .ok());
    for (size_t v = 0; v < x.size() / d; ++v) {
      for (int i = 0; i < r / 2; ++i) {
        EXPECT_EQ(b[v * d + i], a[v * d + 2 * i]) << "r " << r << " vec " << v << " pair " << i;
        EXPECT_EQ(b[v * d + i + r / 2], a[v * d + 2 * i + 1]) << "r " << r << " vec " << v;
      }
    }
    EXPECT_NE(a, x);  // something rotated
  }
}

TEST(RopeTest, NonFiniteQkIsInvalidArgumentNamingTheFirstElement) {
  const int d = 8, hq = 2, hk = 1, s_len = 3;
  std::vector<float> q = RandomVec(hq * s_len * d, 6), k = RandomVec(hk * s_len * d, 7);
  q[(1 * s_len + 2) * d + 5] = std::numeric_limits<float>::infinity();  // q[0, 1, 2, 5] BHSD
  ApplyRopeOptions opt;
  absl::StatusOr<ApplyRopeResult> r = ApplyRope(Params(d, d, RopePairLayout::kHalfSplit), opt,
                                                {0, 1, 2}, Tensor(q, 1, hq, s_len, d),
                                                Tensor(k, 1, hk, s_len, d));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "q[0, 1, 2, 5] = inf is not finite (set allow_non_finite to accept NaN/Inf)");
  opt.allow_non_finite = true;
  EXPECT_TRUE(ApplyRope(Params(d, d, RopePairLayout::kHalfSplit), opt, {0, 1, 2},
                        Tensor(q, 1, hq, s_len, d), Tensor(k, 1, hk, s_len, d))
                  .ok());
}

TEST(RopeTest, ValidateQkShapesRefusesZeroHeadsBeforeAnyData) {
  QkTensor q{nullptr, 32768, 0, 32768, 8}, k{nullptr, 32768, 0, 32768, 8};
  absl::Status st = ValidateQkShapes(q, k, QkvLayout::kBHSD);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "q.shape[1] (num_heads) = 0 must be > 0");
  QkTensor big{nullptr, int64_t{1} << 40, 8, int64_t{1} << 40, 8};
  EXPECT_THAT(ValidateQkShapes(big, big, QkvLayout::kBHSD).message(),
              ::testing::HasSubstr("overflows int64"));
}

TEST(RopeTest, PartialRotaryLeavesTailBitExact) {
  for (RopePairLayout layout : {RopePairLayout::kInterleaved, RopePairLayout::kHalfSplit}) {
    const int d = 64, r = 32, hq = 2, hk = 1, s_len = 4;
    std::vector<float> q = RandomVec(hq * s_len * d, 4), k = RandomVec(hk * s_len * d, 5);
    // Unusual bit patterns in the tail: -0.0, a NaN payload, a denormal.
    const uint32_t nan_bits = 0x7fc01234u;
    float nan_payload;
    std::memcpy(&nan_payload, &nan_bits, 4);
    q[r] = -0.0f;
    q[r + 1] = nan_payload;
    q[d - 1] = 1e-40f;
    const std::vector<float> q0 = q, k0 = k;
    ApplyRopeOptions opt;
    opt.allow_non_finite = true;  // the NaN payload must pass through untouched
    ASSERT_TRUE(ApplyRope(Params(d, r, layout), opt, {1, 2, 3, 4000},
                          Tensor(q, 1, hq, s_len, d), Tensor(k, 1, hk, s_len, d))
                    .ok());
    bool rotated_changed = false;
    for (size_t v = 0; v < q.size() / d; ++v) {
      EXPECT_EQ(std::memcmp(&q[v * d + r], &q0[v * d + r], (d - r) * sizeof(float)), 0) << v;
      rotated_changed |= std::memcmp(&q[v * d], &q0[v * d], r * sizeof(float)) != 0;
    }
    for (size_t v = 0; v < k.size() / d; ++v) {
      EXPECT_EQ(std::memcmp(&k[v * d + r], &k0[v * d + r], (d - r) * sizeof(float)), 0) << v;
    }
    EXPECT_TRUE(rotated_changed);
  }
}

TEST(RopeTest, PositionZeroIsIdentity) {
  const int d = 8;
  std::vector<float> q = RandomVec(2 * d, 6), k = RandomVec(d, 7);
  const std::vector<float> q0 = q, k0 = k;
  ASSERT_TRUE(ApplyRope(Params(d, d, RopePairLayout::kHalfSplit), {}, {0},
                        Tensor(q, 1, 2, 1, d), Tensor(k, 1, 1, 1, d))
                  .ok());
  EXPECT_EQ(q, q0);
  EXPECT_EQ(k, k0);
}

// HF linear: inv_freq / factor. With factor 4 (a power of two) the angle at
// position 4p equals the unscaled angle at p exactly.
TEST(RopeTest, LinearScalingFactor4AtPosition4pEqualsDefaultAtP) {
  RopeParams lin = Params(64, 64, RopePairLayout::kHalfSplit);
  lin.scaling.type = RopeScalingType::kLinear;
  lin.scaling.factor = 4.0;
  const RopeParams def = Params(64, 64, RopePairLayout::kHalfSplit);
  auto inv_l = ComputeInvFreq(lin);
  auto inv_d = ComputeInvFreq(def);
  ASSERT_TRUE(inv_l.ok() && inv_d.ok());
  for (size_t i = 0; i < inv_d->size(); ++i) EXPECT_EQ((*inv_l)[i], (*inv_d)[i] / 4.0f);
  const std::vector<float> x = RandomVec(3 * 64, 8);
  std::vector<float> a = x, ak = x, b = x, bk = x;
  ASSERT_TRUE(ApplyRope(lin, {}, {4, 2044, 40000}, Tensor(a, 1, 1, 3, 64),
                        Tensor(ak, 1, 1, 3, 64))
                  .ok());
  ASSERT_TRUE(ApplyRope(def, {}, {1, 511, 10000}, Tensor(b, 1, 1, 3, 64),
                        Tensor(bk, 1, 1, 3, 64))
                  .ok());
  EXPECT_EQ(a, b);
}

TEST(RopeTest, EveryScalingTypeIsImplemented) {
  // Values: tests/lib/positions/rope_scaling_test.cc against the HF golden.
  for (RopeScalingType t : {RopeScalingType::kDynamic, RopeScalingType::kYarn,
                            RopeScalingType::kLlama3, RopeScalingType::kLongrope}) {
    RopeParams p = Params(8, 8, RopePairLayout::kHalfSplit);
    p.max_position_embeddings = 64;
    p.scaling.type = t;
    p.scaling.factor = 2.0;
    p.scaling.original_max_position_embeddings = 32;
    p.scaling.short_factor = p.scaling.long_factor = {1, 1, 1, 1};
    auto inv = ComputeInvFreq(p);
    ASSERT_TRUE(inv.ok()) << inv.status();
    std::vector<float> q(8, 1.0f), k(8, 1.0f);
    EXPECT_TRUE(ApplyRope(p, {}, {1}, Tensor(q, 1, 1, 1, 8), Tensor(k, 1, 1, 1, 8)).ok());
    EXPECT_NE(q, std::vector<float>(8, 1.0f));
  }
}

TEST(RopeTest, PositionsFromOffsets) {
  auto p = PositionsFromOffsets({}, 2, 3);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (std::vector<int64_t>{0, 1, 2, 0, 1, 2}));
  p = PositionsFromOffsets({10, 0, 7}, 3, 2);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (std::vector<int64_t>{10, 11, 0, 1, 7, 8}));

  p = PositionsFromOffsets({1, 2, 3}, 2, 4);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p.status().message(), "position_offsets has 3 entries, expected 0 or batch = 2");

  p = PositionsFromOffsets({4, -3}, 2, 4);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(), "position_offsets[1] = -3 is negative");
}

// --- validation -------------------------------------------------------------

class RopeValidationTest : public ::testing::Test {
 protected:
  // Returns the status and checks that nothing was written.
  absl::Status Run(const RopeParams& p, const ApplyRopeOptions& opt,
                   const std::vector<int64_t>& pos, int64_t b, int64_t hq, int64_t hk, int64_t s,
                   int64_t dq, int64_t dk) {
    std::vector<float> q = RandomVec(static_cast<size_t>(b * hq * s * dq), 9);
    std::vector<float> k = RandomVec(static_cast<size_t>(b * hk * s * dk), 10);
    const std::vector<float> q0 = q, k0 = k;
    absl::Status st =
        ApplyRope(p, opt, pos, Tensor(q, b, hq, s, dq), Tensor(k, b, hk, s, dk)).status();
    if (!st.ok()) {
      EXPECT_EQ(q, q0) << "q written on error: " << st;
      EXPECT_EQ(k, k0) << "k written on error: " << st;
    }
    return st;
  }
};

TEST_F(RopeValidationTest, OddHeadDim) {
  absl::Status st = Run(Params(7, 6, RopePairLayout::kHalfSplit), {}, {0, 1}, 1, 2, 1, 2, 7, 7);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "q.shape[3] (head_dim) = 7 is odd");
  ApplyRopeOptions thd;
  thd.layout = QkvLayout::kTHD;
  st = Run(Params(7, 6, RopePairLayout::kHalfSplit), thd, {0, 1}, 1, 2, 1, 2, 7, 7);
  EXPECT_EQ(st.message(), "q.shape[2] (head_dim) = 7 is odd");
}

TEST_F(RopeValidationTest, OddRotaryDim) {
  absl::Status st = Run(Params(8, 5, RopePairLayout::kHalfSplit), {}, {0}, 1, 1, 1, 1, 8, 8);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "params.rotary_dim = 5 is odd");
  st = Run(Params(8, 10, RopePairLayout::kHalfSplit), {}, {0}, 1, 1, 1, 1, 8, 8);
  EXPECT_EQ(st.message(), "params.rotary_dim = 10 is outside [2, params.head_dim = 8]");
}

TEST_F(RopeValidationTest, QHeadsNotMultipleOfKHeads) {
  absl::Status st = Run(Params(8, 8, RopePairLayout::kHalfSplit), {}, {0, 1}, 1, 6, 4, 2, 8, 8);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "q.shape[1] (num_heads) = 6 is not a multiple of k.shape[1] (num_heads) = 4");
  ApplyRopeOptions bshd;
  bshd.layout = QkvLayout::kBSHD;
  st = Run(Params(8, 8, RopePairLayout::kHalfSplit), bshd, {0, 1}, 1, 6, 4, 2, 8, 8);
  EXPECT_EQ(st.message(),
            "q.shape[2] (num_heads) = 6 is not a multiple of k.shape[2] (num_heads) = 4");
}

TEST_F(RopeValidationTest, HeadDimMismatch) {
  absl::Status st = Run(Params(8, 8, RopePairLayout::kHalfSplit), {}, {0}, 1, 2, 1, 1, 8, 6);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "k.shape[3] (head_dim) = 6 != q.shape[3] (head_dim) = 8");
  st = Run(Params(16, 16, RopePairLayout::kHalfSplit), {}, {0}, 1, 2, 1, 1, 8, 8);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "params.head_dim = 16 != q.shape[3] (head_dim) = 8");
}

TEST_F(RopeValidationTest, BatchAndSeqMismatch) {
  std::vector<float> q(2 * 2 * 8), k(1 * 2 * 8);
  absl::Status st = ApplyRope(Params(8, 8, RopePairLayout::kHalfSplit), {}, {0, 1, 0, 1},
                              Tensor(q, 2, 1, 2, 8), Tensor(k, 1, 1, 2, 8))
                        .status();
  EXPECT_EQ(st.message(), "k.shape[0] (batch) = 1 != q.shape[0] (batch) = 2");
  std::vector<float> k2(2 * 3 * 8);
  st = ApplyRope(Params(8, 8, RopePairLayout::kHalfSplit), {}, {0, 1, 0, 1},
                 Tensor(q, 2, 1, 2, 8), Tensor(k2, 2, 1, 3, 8))
           .status();
  EXPECT_EQ(st.message(), "k.shape[2] (seq_len) = 3 != q.shape[2] (seq_len) = 2");
  ApplyRopeOptions thd;
  thd.layout = QkvLayout::kTHD;
  st = ApplyRope(Params(8, 8, RopePairLayout::kHalfSplit), thd, {0, 1, 0, 1},
                 Tensor(q, 2, 1, 2, 8), Tensor(k, 2, 1, 2, 8))
           .status();
  EXPECT_EQ(st.message(), "q.batch = 2 must be 1 for layout THD");
}

TEST_F(RopeValidationTest, PositionsCountMismatch) {
  absl::Status st =
      Run(Params(8, 8, RopePairLayout::kHalfSplit), {}, {0, 1, 2}, 2, 1, 1, 2, 8, 8);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "positions has 3 entries, expected batch * seq_len = 2 * 2 = 4");
}

TEST_F(RopeValidationTest, NegativePosition) {
  absl::Status st = Run(Params(8, 8, RopePairLayout::kHalfSplit), {}, {0, 1, 2, 3, 4, -1}, 2,
                        1, 1, 3, 8, 8);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "positions[5] = -1 is negative");
}

TEST_F(RopeValidationTest, BeyondTrainedLengthRefusedUnlessAllowed) {
  const RopeParams p = Params(8, 8, RopePairLayout::kInterleaved, 10000.0, 512);
  // 511 is the last trained position.
  EXPECT_TRUE(Run(p, {}, {0, 511}, 1, 1, 1, 2, 8, 8).ok());
  absl::Status st = Run(p, {}, {0, 600}, 1, 1, 1, 2, 8, 8);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "positions[1]: position 600 >= max_position_embeddings 512 (set "
            "allow_beyond_trained_length)");
  st = Run(p, {}, {512, 0}, 1, 1, 1, 2, 8, 8);
  EXPECT_THAT(st.message(), HasSubstr("positions[0]: position 512 >= max_position_embeddings"));

  ApplyRopeOptions allow;
  allow.allow_beyond_trained_length = true;
  std::vector<float> q = RandomVec(16, 11), k = RandomVec(16, 12);
  const std::vector<float> q0 = q;
  ASSERT_TRUE(ApplyRope(p, allow, {0, 600}, Tensor(q, 1, 1, 2, 8), Tensor(k, 1, 1, 2, 8)).ok());
  EXPECT_NE(std::vector<float>(q.begin() + 8, q.end()), std::vector<float>(q0.begin() + 8, q0.end()));
  // max_position_embeddings 0 = unknown: no limit.
  EXPECT_TRUE(Run(Params(8, 8, RopePairLayout::kHalfSplit), {}, {1000000}, 1, 1, 1, 1, 8, 8).ok());
}

TEST_F(RopeValidationTest, BadParams) {
  RopeParams p = Params(8, 8, RopePairLayout::kHalfSplit);
  p.theta = 0.0;
  EXPECT_EQ(Run(p, {}, {0}, 1, 1, 1, 1, 8, 8).message(),
            "params.theta = 0 must be a finite number > 0");
  p = Params(8, 8, RopePairLayout::kHalfSplit);
  p.scaling.type = RopeScalingType::kLinear;
  p.scaling.factor = -2.0;
  EXPECT_EQ(Run(p, {}, {0}, 1, 1, 1, 1, 8, 8).message(),
            "params.scaling(linear).factor = -2 must be finite and > 0");
}

// RopeParams::Validate is the only RoPE-params check: ApplyRope,
// ComputeRopeCache and ComputeRopeFrequencies give exactly its message
// (named by the caller: "params" by default, the server's "rope"), and a
// model config gives the same rule under "rope".
TEST_F(RopeValidationTest, OneValidatorServesEveryEntryPoint) {
  std::vector<std::pair<std::string, RopeParams>> bad;
  auto add = [&](const std::string& what, auto change) {
    RopeParams p = Params(8, 8, RopePairLayout::kHalfSplit, 10000.0, 64);
    change(p);
    bad.emplace_back(what, p);
  };
  add("theta", [](RopeParams& p) { p.theta = -1.0; });
  add("odd rotary", [](RopeParams& p) { p.rotary_dim = 3; });
  add("rotary > head", [](RopeParams& p) { p.rotary_dim = 10; });
  add("max positions", [](RopeParams& p) { p.max_position_embeddings = -4; });
  add("linear factor", [](RopeParams& p) {
    p.scaling.type = RopeScalingType::kLinear;
    p.scaling.factor = 0.0;
  });
  add("yarn beta", [](RopeParams& p) {
    p.scaling.type = RopeScalingType::kYarn;
    p.scaling.factor = 2.0;
    p.scaling.beta_slow = -1.0;
  });
  add("yarn length", [](RopeParams& p) {
    p.scaling.type = RopeScalingType::kYarn;
    p.scaling.factor = 2.0;
    p.max_position_embeddings = 0;
  });
  add("dynamic rotary", [](RopeParams& p) {
    p.scaling.type = RopeScalingType::kDynamic;
    p.scaling.factor = 2.0;
    p.rotary_dim = 2;
  });
  add("llama3 length", [](RopeParams& p) {
    p.scaling.type = RopeScalingType::kLlama3;
    p.scaling.factor = 8.0;
  });
  add("longrope sizes", [](RopeParams& p) {
    p.scaling.type = RopeScalingType::kLongrope;
    p.scaling.short_factor = {1, 1};
    p.scaling.long_factor = {1, 1, 1, 1};
  });
  for (const auto& [what, p] : bad) {
    SCOPED_TRACE(what);
    const absl::Status want = p.Validate("params");
    ASSERT_EQ(want.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(want.message()), ::testing::StartsWith("params."));
    EXPECT_EQ(Run(p, {}, {0, 1}, 1, 1, 1, 2, 8, 8), want);
    EXPECT_EQ(ComputeRopeCache(p, 0, 2, false, false).status(), want);
    EXPECT_EQ(ComputeRopeFrequencies(p, 2, true).status(), want);
    // Named by the caller: the server names the request field `rope`.
    ApplyRopeOptions named;
    named.params_name = "rope";
    const absl::Status as_rope = p.Validate("rope");
    EXPECT_THAT(std::string(as_rope.message()), ::testing::StartsWith("rope."));
    EXPECT_EQ(Run(p, named, {0, 1}, 1, 1, 1, 2, 8, 8), as_rope);
    EXPECT_EQ(ComputeRopeCache(p, 0, 2, false, false, "rope").status(), as_rope);
    // A model config with these params refuses them with the same message.
    ModelConfig c;
    c.vocab_size = 4;
    c.hidden_size = 8;
    c.num_attention_heads = c.num_key_value_heads = 1;
    c.head_dim = 8;
    c.rope = p;
    EXPECT_EQ(c.Validate(), as_rope);
  }
  // The messages name the field and the value.
  EXPECT_EQ(bad[0].second.Validate("params").message(),
            "params.theta = -1 must be a finite number > 0");
  EXPECT_EQ(bad[3].second.Validate("rope").message(),
            "rope.max_position_embeddings = -4 is negative");
  EXPECT_EQ(bad[5].second.Validate("rope").message(),
            "rope.scaling(yarn).beta_slow = -1 must be finite and > 0");
  EXPECT_EQ(bad[7].second.Validate("params").message(),
            "params.rotary_dim = 2 must be > 2 for dynamic scaling (exponent r / (r - 2))");
}

}  // namespace
}  // namespace vocabd
