// lib/quant: the ggml type table, dequantization bit for bit against what
// ggml itself computed (../shared/models/quant/*.golden.json
// `embedding_rows`, SOURCES.md), q8_0 quantization exact to ggml's
// reference rounding, and every quantizer's round-trip error bound.
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/checkpoint/gguf.h"
#include "lib/core/dtype.h"
#include "lib/core/mapped_file.h"
#include "lib/quant/dequantize.h"
#include "lib/quant/ggml_types.h"
#include "lib/quant/quantize.h"
#include "tests/test_util.h"

namespace vocabd::quant {
namespace quant_test {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(GgmlTypesTest, TableMatchesGgml) {
  struct Want { GgmlType type; const char* name; int64_t block; int64_t bytes; double bpw; };
  const Want want[] = {
      {GgmlType::kF32, "f32", 1, 4, 32},       {GgmlType::kF16, "f16", 1, 2, 16},
      {GgmlType::kBF16, "bf16", 1, 2, 16},     {GgmlType::kQ4_0, "q4_0", 32, 18, 4.5},
      {GgmlType::kQ4_1, "q4_1", 32, 20, 5},    {GgmlType::kQ5_0, "q5_0", 32, 22, 5.5},
      {GgmlType::kQ5_1, "q5_1", 32, 24, 6},    {GgmlType::kQ8_0, "q8_0", 32, 34, 8.5},
      {GgmlType::kQ2_K, "q2_K", 256, 84, 2.625}, {GgmlType::kQ3_K, "q3_K", 256, 110, 3.4375},
      {GgmlType::kQ4_K, "q4_K", 256, 144, 4.5}, {GgmlType::kQ5_K, "q5_K", 256, 176, 5.5},
      {GgmlType::kQ6_K, "q6_K", 256, 210, 6.5625}, {GgmlType::kIQ4_NL, "iq4_nl", 32, 18, 4.5},
  };
  for (const Want& w : want) {
    SCOPED_TRACE(w.name);
    EXPECT_STREQ(GgmlTypeName(w.type), w.name);
    EXPECT_EQ(TypeInfo(w.type).block_size, w.block);
    EXPECT_EQ(TypeInfo(w.type).type_size, w.bytes);
    EXPECT_EQ(BitsPerWeight(w.type), w.bpw);
    EXPECT_EQ(RowBytes(w.type, 512), 512 / w.block * w.bytes);
    EXPECT_TRUE(IsServedType(w.type));
    EXPECT_EQ(ParseGgmlTypeName(w.name), w.type);
    EXPECT_EQ(FindGgmlType(static_cast<uint32_t>(w.type)), &TypeInfo(w.type));
  }
  EXPECT_EQ(ParseGgmlTypeName("Q8_0"), GgmlType::kQ8_0);
  EXPECT_EQ(ParseGgmlTypeName("Q4_K"), GgmlType::kQ4_K);
  EXPECT_EQ(ParseGgmlTypeName("q4_k_m"), std::nullopt);
  EXPECT_EQ(RowBytes(GgmlType::kQ4_K, 100), -1);
  EXPECT_EQ(FindGgmlType(4), nullptr);   // removed Q4_2
  EXPECT_EQ(FindGgmlType(31), nullptr);
  EXPECT_STREQ(FindGgmlType(23)->name, "iq4_xs");  // known, not served
  EXPECT_FALSE(IsServedType(GgmlType::kQ8_K));
  EXPECT_FALSE(IsServedType(GgmlType::kQ8_1));
}

struct GoldenFile {
  std::string stem;  // e.g. synth-v1024-h512-Q4_K
};

class DequantizeGoldenTest : public ::testing::TestWithParam<std::string> {};

// ggml's own dequantization of 8 token_embd rows (9 significant digits,
// which round-trip float32): ours must give the same bits.
TEST_P(DequantizeGoldenTest, EmbeddingRowsBitForBit) {
  const std::string base = testing::SharedModelsDir() + "/quant/" + GetParam();
  std::ifstream in(base + ".golden.json");
  ASSERT_TRUE(in) << base << ".golden.json";
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // "-0" is an integer to a JSON parser and loses its sign: keep it a float
  // (ggml's -0.0f results are part of the bit-for-bit comparison).
  for (size_t p = 0; (p = text.find("-0", p)) != std::string::npos; p += 2) {
    if (p + 2 < text.size() && (text[p + 2] == ',' || text[p + 2] == ']')) text.insert(p + 2, ".0");
  }
  const nlohmann::json golden = nlohmann::json::parse(text);
  auto file = MappedFile::Open(base + ".gguf");
  ASSERT_TRUE(file.ok()) << file.status();
  auto gguf = ParseGguf((*file)->data(), (*file)->size(), base + ".gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const GgufTensorInfo* embd = gguf->FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  const auto type = static_cast<GgmlType>(embd->type);
  EXPECT_STREQ(GgmlTypeName(type), golden["token_embd_type"].get<std::string>().c_str());
  const int64_t hidden = golden["hidden_size"];
  const int64_t row_bytes = RowBytes(type, hidden);
  ASSERT_GT(row_bytes, 0);
  const auto ids = golden["embedding_ids"].get<std::vector<int64_t>>();
  ASSERT_EQ(ids.size(), 8u);
  std::vector<float> row(static_cast<size_t>(hidden));
  int64_t mismatches = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_TRUE(DequantizeRow(type, (*file)->data() + embd->offset + ids[i] * row_bytes, hidden,
                              row.data()));
    const auto want = golden["embedding_rows"][i].get<std::vector<double>>();
    ASSERT_EQ(want.size(), row.size());
    for (int64_t j = 0; j < hidden; ++j) {
      if (Bits(row[j]) != Bits(static_cast<float>(want[j]))) {
        if (++mismatches < 5) {
          ADD_FAILURE() << "row " << ids[i] << " [" << j << "]: ours " << row[j] << " ggml "
                        << want[j];
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Types, DequantizeGoldenTest,
    ::testing::Values("synth-v1024-h512-Q8_0", "synth-v1024-h512-Q8_0-tied",
                      "synth-v1024-h512-Q4_0", "synth-v1024-h512-Q4_1", "synth-v1024-h512-Q5_0",
                      "synth-v1024-h512-Q5_1", "synth-v1024-h512-Q2_K", "synth-v1024-h512-Q3_K",
                      "synth-v1024-h512-Q4_K", "synth-v1024-h512-Q4_K_M",
                      "synth-v1024-h512-Q5_K", "synth-v1024-h512-Q6_K",
                      "synth-v1024-h512-IQ4_NL"),
    [](const ::testing::TestParamInfo<std::string>& info) {
      std::string name = info.param.substr(std::string("synth-v1024-h512-").size());
      for (char& c : name) {
        if (c == '-') c = '_';
      }
      return name;
    });

// The sign of zero is part of the bit-for-bit promise: ggml's
// dequantizers compute (float)code * d (or d * (float)code), so a zero
// code under a negative scale gives -0.0f. The golden rows hold such -0
// values (Q4_0: 294 of its 4,096 values, beside 201 +0); every one must come
// out with the same sign, and a parse that read "-0" as +0 would fail here.
TEST(DequantizeSignOfZeroTest, GoldenZerosKeepTheirSign) {
  struct Want { const char* stem; int64_t neg_zeros; int64_t pos_zeros; };
  // Counted in the golden text ("-0" / "0" entries of embedding_rows).
  const Want want[] = {
      {"Q4_0", 294, 201}, {"Q5_0", 151, 95}, {"Q3_K", 460, 407}, {"Q6_K", 60, 61},
      {"Q8_0", 0, 35},    {"Q8_0-tied", 0, 32}, {"Q4_1", 0, 0},  {"Q5_1", 0, 0},
      {"Q2_K", 0, 0},     {"Q4_K", 0, 0},   {"Q4_K_M", 0, 0},   {"Q5_K", 0, 0},
      {"IQ4_NL", 0, 0},
  };
  for (const Want& w : want) {
    SCOPED_TRACE(w.stem);
    const std::string base = testing::SharedModelsDir() + "/quant/synth-v1024-h512-" + w.stem;
    std::ifstream in(base + ".golden.json");
    ASSERT_TRUE(in);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (size_t p = 0; (p = text.find("-0", p)) != std::string::npos; p += 2) {
      if (p + 2 < text.size() && (text[p + 2] == ',' || text[p + 2] == ']')) text.insert(p + 2, ".0");
    }
    const nlohmann::json golden = nlohmann::json::parse(text);
    auto file = MappedFile::Open(base + ".gguf");
    ASSERT_TRUE(file.ok()) << file.status();
    auto gguf = ParseGguf((*file)->data(), (*file)->size(), base + ".gguf");
    ASSERT_TRUE(gguf.ok()) << gguf.status();
    const GgufTensorInfo* embd = gguf->FindTensor("token_embd.weight");
    ASSERT_NE(embd, nullptr);
    const auto type = static_cast<GgmlType>(embd->type);
    const int64_t hidden = 512, row_bytes = RowBytes(type, hidden);
    const auto ids = golden["embedding_ids"].get<std::vector<int64_t>>();
    std::vector<float> row(hidden);
    int64_t golden_neg = 0, golden_pos = 0, ours_neg = 0, ours_pos = 0, sign_mismatches = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_TRUE(DequantizeRow(type, (*file)->data() + embd->offset + ids[i] * row_bytes, hidden,
                                row.data()));
      const auto g = golden["embedding_rows"][i].get<std::vector<double>>();
      for (int64_t j = 0; j < hidden; ++j) {
        const uint32_t gb = Bits(static_cast<float>(g[j])), ob = Bits(row[j]);
        golden_neg += gb == 0x80000000u;
        golden_pos += gb == 0u;
        ours_neg += ob == 0x80000000u;
        ours_pos += ob == 0u;
        // == cannot tell the two zeros apart; the bit patterns can.
        sign_mismatches += (row[j] == static_cast<float>(g[j])) && gb != ob;
      }
    }
    EXPECT_EQ(golden_neg, w.neg_zeros);
    EXPECT_EQ(golden_pos, w.pos_zeros);
    EXPECT_EQ(ours_neg, w.neg_zeros);
    EXPECT_EQ(ours_pos, w.pos_zeros);
    EXPECT_EQ(sign_mismatches, 0);
  }
}

// Zero codes under negative and positive scales, by hand from ggml's
// dequantize_row_* formulas (IEEE: the product's sign is the XOR of the
// factors' signs, x - y with x = y gives +0, -0 - +0 gives -0):
//   q4_0 (q - 8) * d, q5_0 (q - 16) * d, q8_0 q * d, q6_K (d * sc) * (q - 32),
//   q3_K (d * (sc - 32)) * q3, q4_1 / q5_1 q * d + m, q2_K (d * sc) * q - (dmin * m).
TEST(DequantizeSignOfZeroTest, ZeroCodesFollowGgmlsFormulas) {
  constexpr uint32_t kNeg = 0x80000000u, kPos = 0u;
  const uint16_t minus_half = FloatToHalf(-0.5f), plus_half = FloatToHalf(0.5f);
  float y[256];
  for (const uint16_t d : {minus_half, plus_half}) {
    const uint32_t want = d == minus_half ? kNeg : kPos;
    BlockQ4_0 q4{};
    q4.d = d;
    std::memset(q4.qs, 0x88, sizeof q4.qs);  // every code 8 -> (8 - 8) * d
    ASSERT_TRUE(DequantizeRow(GgmlType::kQ4_0, &q4, 32, y));
    for (int j = 0; j < 32; ++j) EXPECT_EQ(Bits(y[j]), want) << "q4_0 " << j;

    BlockQ5_0 q5{};
    q5.d = d;
    std::memset(q5.qs, 0x00, sizeof q5.qs);
    std::memset(q5.qh, 0xFF, sizeof q5.qh);  // every code 16
    ASSERT_TRUE(DequantizeRow(GgmlType::kQ5_0, &q5, 32, y));
    for (int j = 0; j < 32; ++j) EXPECT_EQ(Bits(y[j]), want) << "q5_0 " << j;

    BlockQ8_0 q8{};
    q8.d = d;
    ASSERT_TRUE(DequantizeRow(GgmlType::kQ8_0, &q8, 32, y));
    for (int j = 0; j < 32; ++j) EXPECT_EQ(Bits(y[j]), want) << "q8_0 " << j;

    // q6_K: scales +1 and -1 alternate; code 32 (ql nibble 0, qh bits 2).
    BlockQ6_K q6{};
    q6.d = d;
    std::memset(q6.qh, 0xAA, sizeof q6.qh);
    for (int s = 0; s < 16; ++s) q6.scales[s] = static_cast<int8_t>(s % 2 == 0 ? 1 : -1);
    ASSERT_TRUE(DequantizeRow(GgmlType::kQ6_K, &q6, 256, y));
    for (int j = 0; j < 256; ++j) {
      // Element l + 32 k of half h: scale index 8 h + l / 16 + 2 k.
      const int h = j / 128, l = j % 32, k = (j % 128) / 32;
      const int8_t sc = q6.scales[8 * h + l / 16 + 2 * k];
      EXPECT_EQ(Bits(y[j]), (sc < 0) != (d == minus_half) ? kNeg : kPos) << "q6_K " << j;
    }

    // q3_K: 6-bit scales all 33 (sc - 32 = +1) or all 31 (-1); code 4
    // (2 low bits 0, hmask bit set) -> q3 = 0.
    for (const int s6 : {33, 31}) {
      BlockQ3_K q3{};
      q3.d = d;
      std::memset(q3.hmask, 0xFF, sizeof q3.hmask);
      // Low 4 bits of every scale in bytes 0..7, high 2 bits in bytes 8..11.
      const uint8_t lo = static_cast<uint8_t>(s6 & 0x0F), hi = static_cast<uint8_t>(s6 >> 4);
      for (int i = 0; i < 8; ++i) q3.scales[i] = static_cast<uint8_t>(lo | (lo << 4));
      for (int i = 8; i < 12; ++i) {
        q3.scales[i] = static_cast<uint8_t>(hi | (hi << 2) | (hi << 4) | (hi << 6));
      }
      ASSERT_TRUE(DequantizeRow(GgmlType::kQ3_K, &q3, 256, y));
      const bool neg = (s6 < 32) != (d == minus_half);
      for (int j = 0; j < 256; ++j) EXPECT_EQ(Bits(y[j]), neg ? kNeg : kPos) << "q3_K " << j;
    }

    // q4_1: code 0 and m = -0 -> 0 * d + (-0): +0 for d > 0 (+0 + -0),
    // -0 for d < 0 (-0 + -0).
    BlockQ4_1 q41{};
    q41.d = d;
    q41.m = 0x8000;
    ASSERT_TRUE(DequantizeRow(GgmlType::kQ4_1, &q41, 32, y));
    for (int j = 0; j < 32; ++j) EXPECT_EQ(Bits(y[j]), want) << "q4_1 " << j;
  }
  // q2_K: code 0, min 0: (d * sc) * 0 - (dmin * 0); with d < 0 that is
  // -0 - (+0) = -0, with d > 0 +0 - +0 = +0.
  for (const uint16_t d : {minus_half, plus_half}) {
    BlockQ2_K q2{};
    q2.d = d;
    q2.dmin = plus_half;
    std::memset(q2.scales, 0x01, sizeof q2.scales);  // scale 1, min 0
    ASSERT_TRUE(DequantizeRow(GgmlType::kQ2_K, &q2, 256, y));
    for (int j = 0; j < 256; ++j) {
      EXPECT_EQ(Bits(y[j]), d == minus_half ? kNeg : kPos) << "q2_K " << j;
    }
  }
}

// q8_0: ggml's quantize_row_q8_0_ref, by hand. amax 127 -> d = 1 exactly,
// so x * id = x and roundf rounds halves away from zero.
TEST(QuantizeTest, Q8_0RoundsAsGgmlReference) {
  float x[32] = {};
  x[0] = 127.0f;
  x[1] = 2.5f;    // -> 3 (roundf; nearbyint would give 2)
  x[2] = -2.5f;   // -> -3
  x[3] = 0.5f;    // -> 1
  x[4] = -0.49f;  // -> 0
  x[5] = 126.5f;  // -> 127
  BlockQ8_0 b;
  ASSERT_TRUE(QuantizeRow(GgmlType::kQ8_0, x, 32, &b));
  EXPECT_EQ(b.d, 0x3C00);  // f16(1.0)
  EXPECT_EQ(b.qs[0], 127);
  EXPECT_EQ(b.qs[1], 3);
  EXPECT_EQ(b.qs[2], -3);
  EXPECT_EQ(b.qs[3], 1);
  EXPECT_EQ(b.qs[4], 0);
  EXPECT_EQ(b.qs[5], 127);
  // d = amax / 127 rounded to f16 for storage, but q uses the float d.
  float y[32];
  for (int j = 0; j < 32; ++j) y[j] = 0.01f * static_cast<float>(j - 16);
  ASSERT_TRUE(QuantizeRow(GgmlType::kQ8_0, y, 32, &b));
  const float d = 0.16f / 127.0f;
  EXPECT_EQ(b.d, FloatToHalf(d));
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b.qs[j], static_cast<int8_t>(std::roundf(y[j] * (1.0f / d)))) << j;
  // All-zero block: d = 0, q = 0.
  float z[32] = {};
  ASSERT_TRUE(QuantizeRow(GgmlType::kQ8_0, z, 32, &b));
  EXPECT_EQ(b.d, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b.qs[j], 0);
}

// Re-quantizing ggml's dequantized rows gives back ggml's blocks byte for
// byte (q8_0 and the legacy types, whose references we follow exactly).
TEST(QuantizeTest, RequantizingGgmlRowsGivesGgmlBlocks) {
  for (const char* stem : {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"}) {
    SCOPED_TRACE(stem);
    const std::string path =
        testing::SharedModelsDir() + "/quant/synth-v1024-h512-" + stem + ".gguf";
    auto file = MappedFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    auto gguf = ParseGguf((*file)->data(), (*file)->size(), path);
    ASSERT_TRUE(gguf.ok());
    const GgufTensorInfo* t = gguf->FindTensor("token_embd.weight");
    const auto type = static_cast<GgmlType>(t->type);
    const int64_t hidden = 512, row_bytes = RowBytes(type, hidden);
    std::vector<float> row(hidden);
    std::vector<uint8_t> blocks(static_cast<size_t>(row_bytes));
    int64_t differing_rows = 0;
    for (int64_t r = 0; r < 1024; ++r) {
      const uint8_t* src = (*file)->data() + t->offset + r * row_bytes;
      ASSERT_TRUE(DequantizeRow(type, src, hidden, row.data()));
      ASSERT_TRUE(QuantizeRow(type, row.data(), hidden, blocks.data()));
      if (std::memcmp(blocks.data(), src, static_cast<size_t>(row_bytes)) != 0) ++differing_rows;
    }
    EXPECT_EQ(differing_rows, 0);
  }
}

// Round trip of Gaussian rows with 8x outliers: max |x - dq(q(x))| / max |x|
// per row stays under the per-type bound (a few times half a code step).
TEST(QuantizeTest, RoundTripErrorBounds) {
  struct Bound { GgmlType type; double max_rel; };
  const Bound bounds[] = {
      // Legacy symmetric types clamp the side opposite the max at one code
      // short (q4_0: +7 of -8), hence a full step there.
      {GgmlType::kQ8_0, 0.005}, {GgmlType::kQ4_0, 0.13}, {GgmlType::kQ4_1, 0.07},
      {GgmlType::kQ5_0, 0.065}, {GgmlType::kQ5_1, 0.035}, {GgmlType::kIQ4_NL, 0.12},
      {GgmlType::kQ2_K, 0.35},  {GgmlType::kQ3_K, 0.2},  {GgmlType::kQ4_K, 0.1},
      {GgmlType::kQ5_K, 0.05},  {GgmlType::kQ6_K, 0.03}, {GgmlType::kF16, 0.0005},
      {GgmlType::kBF16, 0.004}, {GgmlType::kF32, 0.0},
  };
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  const int64_t n = 1024;
  std::vector<float> x(n), y(n);
  for (const Bound& b : bounds) {
    SCOPED_TRACE(GgmlTypeName(b.type));
    std::vector<uint8_t> q(static_cast<size_t>(RowBytes(b.type, n)));
    double worst = 0;
    for (int rep = 0; rep < 20; ++rep) {
      float amax = 0;
      for (int64_t j = 0; j < n; ++j) {
        x[j] = normal(rng) * (j % 97 == 0 ? 8.0f : 1.0f) * (rep + 1) * 0.01f;
        amax = std::max(amax, std::fabs(x[j]));
      }
      ASSERT_TRUE(QuantizeRow(b.type, x.data(), n, q.data()));
      ASSERT_TRUE(DequantizeRow(b.type, q.data(), n, y.data()));
      // Per block of 32 (or 256) relative to that block's max |x|.
      const int64_t bs = std::max<int64_t>(TypeInfo(b.type).block_size, 32);
      for (int64_t s = 0; s < n; s += bs) {
        double bmax = 0, err = 0;
        for (int64_t j = s; j < s + bs; ++j) {
          bmax = std::max(bmax, static_cast<double>(std::fabs(x[j])));
          err = std::max(err, static_cast<double>(std::fabs(x[j] - y[j])));
        }
        if (bmax > 0) worst = std::max(worst, err / bmax);
      }
    }
    EXPECT_LE(worst, b.max_rel);
    std::printf("%-7s round-trip max error / block max |x| = %.4g\n", GgmlTypeName(b.type), worst);
  }
}

TEST(QuantizeTest, RefusesUnservedTypesAndPartialBlocks) {
  float x[256] = {};
  uint8_t out[512];
  EXPECT_FALSE(QuantizeRow(GgmlType::kQ8_K, x, 256, out));
  EXPECT_FALSE(QuantizeRow(GgmlType::kQ4_K, x, 100, out));
  float y[256];
  EXPECT_FALSE(DequantizeRow(GgmlType::kQ8_1, out, 32, y));
  EXPECT_FALSE(DequantizeRow(GgmlType::kQ6_K, out, 32, y));
}

}  // namespace quant_test
}  // namespace vocabd::quant
