// The small-M LM-head kernels (lib/head/lm_head_kernel.h) through LmHead and
// directly: against a float64 reference and against the oneDNN path for
// M = 1..16 (and larger forced M), hidden sizes with tails (not multiples of
// 16 or 32), vocab sizes that are not multiples of the register tile or of
// the per-thread chunk, bit-identity of a row across M, and the vocab-range
// contract of the kernel functions.
#include "lib/head/lm_head_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lib/core/dtype.h"
#include "lib/core/huge_pages.h"
#include "lib/head/lm_head.h"

namespace vocabd {
namespace {

bool HasF32Kernel() { return DetectHeadKernelIsa() != HeadKernelIsa::kNone; }
bool HasBf16Kernel() {
  return DetectHeadKernelIsa() == HeadKernelIsa::kAvx512Bf16 && LmHead::Bf16Supported();
}

std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& e : v) e = dist(rng);
  return v;
}

std::vector<uint16_t> ToBf16(const std::vector<float>& f) {
  std::vector<uint16_t> b(f.size());
  ConvertFromF32(f.data(), f.size(), DType::kBF16, b.data());
  return b;
}
std::vector<float> FromBf16(const std::vector<uint16_t>& b) {
  std::vector<float> f(b.size());
  for (size_t i = 0; i < b.size(); ++i) {
    const uint32_t bits = static_cast<uint32_t>(b[i]) << 16;
    std::memcpy(&f[i], &bits, 4);
  }
  return f;
}

// float64 logits of float inputs.
std::vector<double> Reference(const std::vector<float>& x, int64_t rows, const std::vector<float>& w,
                              int64_t vocab, int64_t d) {
  std::vector<double> out(static_cast<size_t>(rows * vocab));
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t v = 0; v < vocab; ++v) {
      double s = 0;
      for (int64_t k = 0; k < d; ++k) {
        s += static_cast<double>(x[m * d + k]) * static_cast<double>(w[v * d + k]);
      }
      out[m * vocab + v] = s;
    }
  }
  return out;
}

// max_v |got - want| / max_v |want| for row m (the contract's normwise error).
double RowRelError(const float* got, const double* want, int64_t vocab) {
  double scale = 0, err = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    scale = std::max(scale, std::abs(want[v]));
    err = std::max(err, std::abs(static_cast<double>(got[v]) - want[v]));
  }
  return scale == 0 ? err : err / scale;
}

std::unique_ptr<LmHead> MakeHead(const void* w, int64_t vocab, int64_t d, DType dtype,
                                 int64_t small_rows_max, bool dense_pack = true) {
  LmHead::Options o;
  o.weights = w;
  o.vocab_size = vocab;
  o.hidden_size = d;
  o.weights_dtype = dtype;
  o.small_rows_max = small_rows_max;
  o.dense_pack = dense_pack;
  auto head = LmHead::Create(o);
  EXPECT_TRUE(head.ok()) << head.status();
  return head.ok() ? std::move(head).value() : nullptr;
}

struct Shape {
  int64_t vocab;
  int64_t d;
};
// Tails everywhere: d not a multiple of 16 (F32 step) or 32 (BF16 step),
// including d < one step; vocab not a multiple of any tile width (8, 6, 5, 4,
// 3) where possible; the last shape has several per-thread chunks.
const Shape kShapes[] = {{1, 1}, {7, 5}, {13, 16}, {37, 17}, {59, 31}, {101, 33},
                         {211, 100}, {257, 255}, {1009, 1000}, {2053, 2049}};

TEST(LmHeadKernelTest, ReportsTheSmallPathAndValidatesOptions) {
  std::vector<float> w(64 * 8, 0.5f);
  auto dflt = MakeHead(w.data(), 64, 8, DType::kF32, -1);
  ASSERT_NE(dflt, nullptr);
  auto off = MakeHead(w.data(), 64, 8, DType::kF32, 0);
  ASSERT_NE(off, nullptr);
  EXPECT_EQ(off->small_rows_max(), 0);
  EXPECT_EQ(off->implementation().find("vocabd:"), std::string::npos) << off->implementation();
  if (HasF32Kernel()) {
    EXPECT_EQ(dflt->small_rows_max(), LmHead::DefaultSmallRowsMax(DType::kF32, false));
    EXPECT_NE(dflt->implementation().find("vocabd:avx512"), std::string::npos)
        << dflt->implementation();
  } else {
    EXPECT_EQ(dflt->small_rows_max(), 0);  // falls back to oneDNN for every M
  }
  LmHead::Options bad;
  bad.weights = w.data();
  bad.vocab_size = 64;
  bad.hidden_size = 8;
  bad.small_rows_max = -2;
  EXPECT_EQ(LmHead::Create(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LmHeadKernelTest, DetectsTheCpuFeatures) {
  __builtin_cpu_init();
  const HeadKernelIsa isa = DetectHeadKernelIsa();
  EXPECT_EQ(isa != HeadKernelIsa::kNone, __builtin_cpu_supports("avx512f") != 0);
  if (isa == HeadKernelIsa::kAvx512Bf16) {
    EXPECT_TRUE(__builtin_cpu_supports("avx512bf16"));
    EXPECT_TRUE(__builtin_cpu_supports("avx512bw"));
  }
  std::printf("head kernel ISA: %s\n", HeadKernelIsaName(isa));
}

// F32: every M from 1 to 16 on every shape, against float64 (the 1e-5
// contract, measured ~1e-7) and against oneDNN (same problem, other summation
// order); the packed kernel and the row-major one.
TEST(LmHeadKernelTest, F32MatchesFloat64AndOneDnnForM1To16) {
  if (!HasF32Kernel()) GTEST_SKIP() << "CPU without AVX512F";
  for (const bool pack : {true, false})
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(pack ? "packed" : "row-major");
    const std::vector<float> w = RandomFloats(static_cast<size_t>(s.vocab * s.d), 11, 0.1f);
    const std::vector<float> x = RandomFloats(static_cast<size_t>(16 * s.d), 12, 2.0f);
    const std::vector<double> ref = Reference(x, 16, w, s.vocab, s.d);
    auto small = MakeHead(w.data(), s.vocab, s.d, DType::kF32, 16, pack);
    ASSERT_NE(small, nullptr);
    EXPECT_EQ(small->packed_bytes() > 0, pack) << small->implementation();
    auto onednn = MakeHead(w.data(), s.vocab, s.d, DType::kF32, 0);
    ASSERT_NE(small, nullptr);
    ASSERT_NE(onednn, nullptr);
    for (int64_t m = 1; m <= 16; ++m) {
      SCOPED_TRACE("vocab " + std::to_string(s.vocab) + " d " + std::to_string(s.d) + " M " +
                   std::to_string(m));
      std::vector<float> a(static_cast<size_t>(m * s.vocab)), b(a.size());
      ASSERT_TRUE(small->Compute(x.data(), m, a.data()).ok());
      ASSERT_TRUE(onednn->Compute(x.data(), m, b.data()).ok());
      for (int64_t r = 0; r < m; ++r) {
        const double* want = ref.data() + r * s.vocab;
        ASSERT_LE(RowRelError(a.data() + r * s.vocab, want, s.vocab), 1e-5) << "row " << r;
        std::vector<double> bd(b.begin() + r * s.vocab, b.begin() + (r + 1) * s.vocab);
        ASSERT_LE(RowRelError(a.data() + r * s.vocab, bd.data(), s.vocab), 2e-6) << "row " << r;
      }
    }
  }
}

// BF16: the kernel's products are exact (bf16 x bf16 fits F32) and sums are
// F32, so against a float64 reference of the bf16-rounded inputs it is as
// good as F32; against oneDNN's bf16 matmul it differs only in order.
TEST(LmHeadKernelTest, Bf16MatchesFloat64OfRoundedInputsAndOneDnnForM1To16) {
  if (!HasBf16Kernel()) GTEST_SKIP() << "CPU without AVX512_BF16";
  for (const bool pack : {true, false})
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(pack ? "packed" : "row-major");
    const std::vector<uint16_t> w =
        ToBf16(RandomFloats(static_cast<size_t>(s.vocab * s.d), 21, 0.1f));
    const std::vector<float> x = RandomFloats(static_cast<size_t>(16 * s.d), 22, 2.0f);
    const std::vector<double> ref = Reference(FromBf16(ToBf16(x)), 16, FromBf16(w), s.vocab, s.d);
    LmHead::Options o;
    o.weights = w.data();
    o.vocab_size = s.vocab;
    o.hidden_size = s.d;
    o.weights_dtype = DType::kBF16;
    o.small_rows_max = 16;
    o.allow_amx = false;  // the AVX512_BF16 kernels (AMX has its own test)
    o.dense_pack = pack;
    auto created = LmHead::Create(o);
    ASSERT_TRUE(created.ok()) << created.status();
    auto small = std::move(created).value();
    // BF16 packs pairs of k: an odd hidden_size stays row-major.
    EXPECT_EQ(small->packed_bytes() > 0, pack && s.d % 2 == 0) << small->implementation();
    auto onednn = MakeHead(w.data(), s.vocab, s.d, DType::kBF16, 0);
    ASSERT_NE(small, nullptr);
    ASSERT_NE(onednn, nullptr);
    for (int64_t m = 1; m <= 16; ++m) {
      SCOPED_TRACE("vocab " + std::to_string(s.vocab) + " d " + std::to_string(s.d) + " M " +
                   std::to_string(m));
      std::vector<float> a(static_cast<size_t>(m * s.vocab)), b(a.size());
      ASSERT_TRUE(small->Compute(x.data(), m, a.data()).ok());
      ASSERT_TRUE(onednn->Compute(x.data(), m, b.data()).ok());
      for (int64_t r = 0; r < m; ++r) {
        const double* want = ref.data() + r * s.vocab;
        ASSERT_LE(RowRelError(a.data() + r * s.vocab, want, s.vocab), 1e-5) << "row " << r;
        std::vector<double> bd(b.begin() + r * s.vocab, b.begin() + (r + 1) * s.vocab);
        ASSERT_LE(RowRelError(a.data() + r * s.vocab, bd.data(), s.vocab), 1e-5) << "row " << r;
      }
    }
  }
}

// Larger M forced through the kernel (row-major row groups of unequal size:
// 17 = 6+6+5, 23 = 6+6+6+5, 40 = 6+6+6+6+6+5+5; packed: 17 = 6+6+5,
// 23 = 8+8+7, 40 = 8+8+8+8+8 in one pass) still matches float64.
TEST(LmHeadKernelTest, ForcedLargerMUsesRowGroupsCorrectly) {
  if (!HasF32Kernel()) GTEST_SKIP() << "CPU without AVX512F";
  const int64_t vocab = 523, d = 129;
  const std::vector<float> w = RandomFloats(static_cast<size_t>(vocab * d), 31, 0.1f);
  const std::vector<float> x = RandomFloats(static_cast<size_t>(40 * d), 32, 2.0f);
  const std::vector<double> ref = Reference(x, 40, w, vocab, d);
  for (const bool pack : {true, false}) {
  auto head = MakeHead(w.data(), vocab, d, DType::kF32, 64, pack);
  ASSERT_NE(head, nullptr);
  for (int64_t m : {17, 23, 40}) {
    std::vector<float> a(static_cast<size_t>(m * vocab));
    ASSERT_TRUE(head->Compute(x.data(), m, a.data()).ok());
    for (int64_t r = 0; r < m; ++r) {
      ASSERT_LE(RowRelError(a.data() + r * vocab, ref.data() + r * vocab, vocab), 1e-5)
          << "M " << m << " row " << r << (pack ? " packed" : " row-major");
    }
  }
  }
}

// A row's logits are the same bits alone and at any position of any batch
// up to the crossover (so dynamic batching changes nothing in this range).
TEST(LmHeadKernelTest, RowIsBitIdenticalForEveryM) {
  for (const bool pack : {true, false})
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    if (dtype == DType::kF32 ? !HasF32Kernel() : !HasBf16Kernel()) continue;
    const int64_t vocab = 2053, d = 1001;
    const std::vector<float> wf = RandomFloats(static_cast<size_t>(vocab * d), 41, 0.1f);
    const std::vector<uint16_t> wb = ToBf16(wf);
    const void* w = dtype == DType::kF32 ? static_cast<const void*>(wf.data()) : wb.data();
    const std::vector<float> x = RandomFloats(static_cast<size_t>(16 * d), 42, 2.0f);
    auto head = MakeHead(w, vocab, d, dtype, 16, pack);
    ASSERT_NE(head, nullptr);
    std::vector<float> batch(static_cast<size_t>(16 * vocab));
    ASSERT_TRUE(head->Compute(x.data(), 16, batch.data()).ok());
    for (int64_t m = 1; m <= 16; ++m) {
      for (int64_t start : {int64_t{0}, 16 - m}) {
        std::vector<float> part(static_cast<size_t>(m * vocab));
        ASSERT_TRUE(head->Compute(x.data() + start * d, m, part.data()).ok());
        ASSERT_EQ(0, std::memcmp(part.data(), batch.data() + start * vocab,
                                 part.size() * sizeof(float)))
            << DTypeName(dtype) << " M " << m << " start " << start << " pack " << pack;
      }
    }
  }
}

// The kernel functions write exactly out[m * ldo + v] for v in [v0, v1).
TEST(LmHeadKernelTest, KernelsWriteOnlyTheirVocabRange) {
  const int64_t vocab = 50, d = 37, rows = 5, ldo = 61, v0 = 3, v1 = 47;
  const std::vector<float> w = RandomFloats(static_cast<size_t>(vocab * d), 51, 0.1f);
  const std::vector<float> x = RandomFloats(static_cast<size_t>(rows * d), 52, 2.0f);
  const float sentinel = -12345.0f;
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    if (dtype == DType::kF32 ? !HasF32Kernel() : !HasBf16Kernel()) continue;
    std::vector<float> out(static_cast<size_t>(rows * ldo), sentinel);
    std::vector<double> ref;
    if (dtype == DType::kF32) {
      HeadKernelF32(x.data(), rows, w.data(), d, v0, v1, out.data(), ldo, false);
      ref = Reference(x, rows, w, vocab, d);
    } else {
      const std::vector<uint16_t> wb = ToBf16(w), xb = ToBf16(x);
      HeadKernelBf16(xb.data(), rows, wb.data(), d, v0, v1, out.data(), ldo);
      ref = Reference(FromBf16(xb), rows, FromBf16(wb), vocab, d);
    }
    for (int64_t m = 0; m < rows; ++m) {
      for (int64_t v = 0; v < ldo; ++v) {
        const float got = out[m * ldo + v];
        if (v < v0 || v >= v1) {
          ASSERT_EQ(got, sentinel) << DTypeName(dtype) << " m " << m << " v " << v;
        } else {
          ASSERT_NEAR(got, ref[m * vocab + v], 1e-5) << DTypeName(dtype) << " m " << m << " v " << v;
        }
      }
    }
    // Empty ranges and zero rows write nothing.
    std::vector<float> untouched(static_cast<size_t>(rows * ldo), sentinel);
    if (dtype == DType::kF32) {
      HeadKernelF32(x.data(), rows, w.data(), d, 10, 10, untouched.data(), ldo, false);
      HeadKernelF32(x.data(), 0, w.data(), d, 0, vocab, untouched.data(), ldo, true);
    }
    for (float v : untouched) ASSERT_EQ(v, sentinel);
  }
}

// Non-finite inputs propagate as in any dot product (the masked tail loads
// zeros for both operands, so padding never makes 0 * inf).
TEST(LmHeadKernelTest, NonFiniteInputsPropagate) {
  if (!HasF32Kernel()) GTEST_SKIP() << "CPU without AVX512F";
  const int64_t vocab = 9, d = 19;
  std::vector<float> w(static_cast<size_t>(vocab * d), 1.0f);
  std::vector<float> x(static_cast<size_t>(2 * d), 0.5f);
  x[d - 1] = std::numeric_limits<float>::infinity();   // row 0, in the tail
  x[d + 3] = std::numeric_limits<float>::quiet_NaN();  // row 1
  auto head = MakeHead(w.data(), vocab, d, DType::kF32, 16);
  ASSERT_NE(head, nullptr);
  std::vector<float> out(static_cast<size_t>(2 * vocab));
  ASSERT_TRUE(head->Compute(x.data(), 2, out.data()).ok());
  for (int64_t v = 0; v < vocab; ++v) {
    EXPECT_EQ(out[v], std::numeric_limits<float>::infinity()) << v;
    EXPECT_TRUE(std::isnan(out[vocab + v])) << v;
  }
}

// AMX (BF16, hidden_size % 32 == 0): blocks of 32 and 16 vocabulary rows on
// tiles, the last < 16 rows through the AVX512_BF16 kernel; 16-row input
// groups in pairs. Against float64 of the rounded inputs, the AVX512_BF16
// kernel and oneDNN, for M = 1..16 and larger (odd groups, padded groups).
TEST(LmHeadKernelTest, AmxMatchesFloat64AndTheOtherPaths) {
  if (!HasBf16Kernel() || !HeadKernelAmxAvailable()) GTEST_SKIP() << "no AMX";
  const Shape shapes[] = {{15, 32}, {16, 64}, {47, 32}, {1000, 96}, {2053, 2048}};
  std::vector<int64_t> ms;
  for (int64_t m = 1; m <= 16; ++m) ms.push_back(m);
  for (int64_t m : {17, 31, 32, 33, 48, 64, 75}) ms.push_back(m);
  for (const Shape& s : shapes) {
    const std::vector<uint16_t> w =
        ToBf16(RandomFloats(static_cast<size_t>(s.vocab * s.d), 61, 0.1f));
    const std::vector<float> x = RandomFloats(static_cast<size_t>(75 * s.d), 62, 2.0f);
    const std::vector<double> ref = Reference(FromBf16(ToBf16(x)), 75, FromBf16(w), s.vocab, s.d);
    auto amx = MakeHead(w.data(), s.vocab, s.d, DType::kBF16, 128);
    LmHead::Options o;
    o.weights = w.data();
    o.vocab_size = s.vocab;
    o.hidden_size = s.d;
    o.weights_dtype = DType::kBF16;
    o.small_rows_max = 128;
    o.allow_amx = false;
    auto avx = LmHead::Create(o);
    ASSERT_TRUE(avx.ok()) << avx.status();
    auto onednn = MakeHead(w.data(), s.vocab, s.d, DType::kBF16, 0);
    ASSERT_NE(amx, nullptr);
    ASSERT_NE(onednn, nullptr);
    EXPECT_NE(amx->implementation().find("amx_bf16"), std::string::npos) << amx->implementation();
    // vocabd's kernel is the vdpbf16ps one (oneDNN's own part may use AMX).
    EXPECT_NE((*avx)->implementation().find("vocabd:avx512_bf16"), std::string::npos)
        << (*avx)->implementation();
    std::vector<float> full(static_cast<size_t>(75 * s.vocab));
    ASSERT_TRUE(amx->Compute(x.data(), 75, full.data()).ok());
    for (int64_t m : ms) {
      SCOPED_TRACE("vocab " + std::to_string(s.vocab) + " d " + std::to_string(s.d) + " M " +
                   std::to_string(m));
      std::vector<float> a(static_cast<size_t>(m * s.vocab)), b(a.size()), c(a.size());
      ASSERT_TRUE(amx->Compute(x.data(), m, a.data()).ok());
      ASSERT_TRUE((*avx)->Compute(x.data(), m, b.data()).ok());
      ASSERT_TRUE(onednn->Compute(x.data(), m, c.data()).ok());
      // A row's logits do not depend on M on the AMX path either.
      ASSERT_EQ(0, std::memcmp(a.data(), full.data(), a.size() * sizeof(float)));
      for (int64_t r = 0; r < m; ++r) {
        const float* got = a.data() + r * s.vocab;
        ASSERT_LE(RowRelError(got, ref.data() + r * s.vocab, s.vocab), 1e-5) << "row " << r;
        std::vector<double> bd(b.begin() + r * s.vocab, b.begin() + (r + 1) * s.vocab);
        std::vector<double> cd(c.begin() + r * s.vocab, c.begin() + (r + 1) * s.vocab);
        ASSERT_LE(RowRelError(got, bd.data(), s.vocab), 1e-5) << "row " << r;
        ASSERT_LE(RowRelError(got, cd.data(), s.vocab), 1e-5) << "row " << r;
      }
    }
  }
}

TEST(LmHeadKernelTest, AmxPackingLayout) {
  // packed[g][kb][kk][n][2] = x[16 g + n][32 kb + 2 kk + (0|1)], zero padded.
  const int64_t rows = 17, d = 64;
  std::vector<uint16_t> x(static_cast<size_t>(rows * d));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint16_t>(i + 1);
  std::vector<uint16_t> packed(static_cast<size_t>(PackedBf16ForAmxSize(rows, d)), 0xFFFF);
  ASSERT_EQ(packed.size(), static_cast<size_t>(32 * d));
  PackBf16ForAmx(x.data(), rows, d, packed.data());
  for (int64_t g = 0; g < 2; ++g) {
    for (int64_t kb = 0; kb < 2; ++kb) {
      for (int64_t kk = 0; kk < 16; ++kk) {
        for (int64_t n = 0; n < 16; ++n) {
          for (int64_t i = 0; i < 2; ++i) {
            const int64_t m = 16 * g + n;
            const uint16_t want = m < rows ? x[m * d + 32 * kb + 2 * kk + i] : 0;
            ASSERT_EQ(packed[((g * 2 + kb) * 16 + kk) * 32 + 2 * n + i], want)
                << g << " " << kb << " " << kk << " " << n << " " << i;
          }
        }
      }
    }
  }
}

// The F32 kernel's one-group prefetch: measured at Create by default (the
// choice and both times in implementation()), set by Options::f32_prefetch
// or VOCABD_F32_PREFETCH (the option wins), bad values refused naming the
// option or variable whatever the CPU; it never changes a bit (kernel and
// head, M = 1 and 5, a partial last tile), and BF16 heads do not mention it.
TEST(LmHeadKernelTest, F32OneGroupPrefetchIsMeasuredOrSetAndChangesNoBit) {
  const int64_t vocab = 53, d = 200;
  const std::vector<float> w = RandomFloats(static_cast<size_t>(vocab * d), 61, 0.1f);
  const std::vector<float> x = RandomFloats(static_cast<size_t>(5 * d), 62, 2.0f);
  LmHead::Options o;
  o.weights = w.data();
  o.vocab_size = vocab;
  o.hidden_size = d;
  o.weights_dtype = DType::kF32;
  o.dense_pack = false;  // the prefetch is the row-major kernel's
  for (int bad : {-2, 2}) {
    o.f32_prefetch = bad;
    auto h = LmHead::Create(o);
    ASSERT_FALSE(h.ok());
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(h.status().message().find("f32_prefetch = " + std::to_string(bad) +
                                        " must be -1, 0 or 1"),
              std::string::npos)
        << h.status();
  }
  o.f32_prefetch = -1;
  ASSERT_EQ(setenv("VOCABD_F32_PREFETCH", "yes", 1), 0);
  auto bad_env = LmHead::Create(o);
  ASSERT_EQ(unsetenv("VOCABD_F32_PREFETCH"), 0);
  ASSERT_FALSE(bad_env.ok());
  EXPECT_EQ(bad_env.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_env.status().message().find("VOCABD_F32_PREFETCH = 'yes' (want 0 or 1)"),
            std::string::npos)
      << bad_env.status();
  if (!HasF32Kernel()) GTEST_SKIP() << "no F32 kernel on this CPU (no AVX-512)";
  for (int64_t rows : {1, 5}) {
    std::vector<float> off(static_cast<size_t>(rows * vocab)), on(off.size());
    HeadKernelF32(x.data(), rows, w.data(), d, 0, vocab, off.data(), vocab, false);
    HeadKernelF32(x.data(), rows, w.data(), d, 0, vocab, on.data(), vocab, true);
    EXPECT_EQ(0, std::memcmp(off.data(), on.data(), off.size() * sizeof(float))) << rows;
  }
  auto measured = LmHead::Create(o);
  ASSERT_TRUE(measured.ok()) << measured.status();
  const std::string impl = (*measured)->implementation();
  EXPECT_NE(impl.find("; one-group prefetch o"), std::string::npos) << impl;
  EXPECT_NE(impl.find(", measured at M = 1 on 53 weight rows: off "), std::string::npos) << impl;
  std::vector<float> results[2];
  for (int on : {0, 1}) {
    o.f32_prefetch = on;
    auto h = LmHead::Create(o);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_NE((*h)->implementation().find(on ? "; one-group prefetch on); "
                                             : "; one-group prefetch off); "),
              std::string::npos)
        << (*h)->implementation();
    results[on].resize(static_cast<size_t>(5 * vocab));
    ASSERT_TRUE((*h)->Compute(x.data(), 5, results[on].data()).ok());
  }
  EXPECT_EQ(0, std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)));
  o.f32_prefetch = -1;
  ASSERT_EQ(setenv("VOCABD_F32_PREFETCH", "1", 1), 0);
  auto env_on = LmHead::Create(o);
  o.f32_prefetch = 0;
  auto option_wins = LmHead::Create(o);
  ASSERT_EQ(unsetenv("VOCABD_F32_PREFETCH"), 0);
  ASSERT_TRUE(env_on.ok() && option_wins.ok());
  EXPECT_NE((*env_on)->implementation().find("; one-group prefetch on); "), std::string::npos)
      << (*env_on)->implementation();
  EXPECT_NE((*option_wins)->implementation().find("; one-group prefetch off); "),
            std::string::npos)
      << (*option_wins)->implementation();
  if (HasBf16Kernel()) {
    const std::vector<uint16_t> wb = ToBf16(w);
    auto bf16 = MakeHead(wb.data(), vocab, d, DType::kBF16, -1);
    ASSERT_NE(bf16, nullptr);
    EXPECT_EQ(bf16->implementation().find("prefetch"), std::string::npos) << bf16->implementation();
  }
}

// The packed layout (lm_head_kernel.h): F32 element (k, i) of block b at
// b * (16 d + 16) + 16 k + i, BF16 at b * (16 d + 32) + 32 (k / 2) + 2 i +
// k % 2; rows past vocab and the 64 bytes after each block are zeros.
TEST(LmHeadKernelTest, PackedLayout) {
  const int64_t vocab = 21, d = 6;  // two blocks, the second with 5 rows
  EXPECT_EQ(PackedHeadBlocks(vocab), 2);
  EXPECT_EQ(PackedHeadBlocks(16), 1);
  EXPECT_EQ(PackedF32BlockStride(d), 16 * d + 16);
  EXPECT_EQ(PackedBf16BlockStride(d), 16 * d + 32);
  std::vector<float> wf(static_cast<size_t>(vocab * d));
  std::vector<uint16_t> wb(wf.size());
  for (size_t i = 0; i < wf.size(); ++i) {
    wf[i] = static_cast<float>(i + 1);
    wb[i] = static_cast<uint16_t>(i + 1);
  }
  std::vector<float> pf(static_cast<size_t>(2 * PackedF32BlockStride(d)), -1.0f);
  std::vector<uint16_t> pb(static_cast<size_t>(2 * PackedBf16BlockStride(d)), 0xFFFF);
  PackF32Blocks(wf.data(), vocab, d, 1, 2, pf.data());  // block ranges fill independently
  PackF32Blocks(wf.data(), vocab, d, 0, 1, pf.data());
  PackBf16Blocks(wb.data(), vocab, d, 0, 2, pb.data());
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t k = 0; k < d; ++k) {
      for (int64_t i = 0; i < 16; ++i) {
        const int64_t v = 16 * b + i;
        const float want = v < vocab ? wf[v * d + k] : 0.0f;
        ASSERT_EQ(pf[b * PackedF32BlockStride(d) + 16 * k + i], want) << b << " " << k << " " << i;
        ASSERT_EQ(pb[b * PackedBf16BlockStride(d) + 32 * (k / 2) + 2 * i + k % 2],
                  v < vocab ? wb[v * d + k] : 0)
            << b << " " << k << " " << i;
      }
    }
    for (int64_t e = 16 * d; e < PackedF32BlockStride(d); ++e) {
      ASSERT_EQ(pf[b * PackedF32BlockStride(d) + e], 0.0f) << b << " " << e;
    }
    for (int64_t e = 16 * d; e < PackedBf16BlockStride(d); ++e) {
      ASSERT_EQ(pb[b * PackedBf16BlockStride(d) + e], 0) << b << " " << e;
    }
  }
}

// The packed F32 kernel's logit is the FMA chain over k in order from +0.0:
// bit for bit std::fma in that loop (signed zeros and all), for every M
// 1..40 (one group, several groups over k chunks), every shape,
// through the head and directly on sub-ranges of the vocabulary.
TEST(LmHeadKernelTest, PackedF32IsTheFmaChainBitForBit) {
  if (!HasF32Kernel()) GTEST_SKIP() << "CPU without AVX512F";
  auto fma_chain = [](const float* x, const float* w, int64_t d) {
    float acc = 0.0f;
    for (int64_t k = 0; k < d; ++k) acc = std::fma(w[k], x[k], acc);
    return acc;
  };
  for (const Shape& s : kShapes) {
    std::vector<float> w = RandomFloats(static_cast<size_t>(s.vocab * s.d), 71, 0.1f);
    std::vector<float> x = RandomFloats(static_cast<size_t>(40 * s.d), 72, 2.0f);
    // A zero weight row and a zero input row: +0.0 (fma(w, 0, +0) = +0), and
    // a row of -0.0 weights: (-0) * x + (+0) = +0 as well.
    for (int64_t k = 0; k < s.d; ++k) {
      w[k] = 0.0f;
      x[3 * s.d + k] = 0.0f;
      if (s.vocab > 1) w[s.d + k] = -0.0f;
    }
    auto head = MakeHead(w.data(), s.vocab, s.d, DType::kF32, 40, true);
    ASSERT_NE(head, nullptr);
    ASSERT_GT(head->packed_bytes(), 0);
    EXPECT_EQ(head->packed_bytes(),
              PackedHeadBlocks(s.vocab) * PackedF32BlockStride(s.d) * int64_t{4});
    EXPECT_NE(head->implementation().find("(every M; weights packed, "), std::string::npos)
        << head->implementation();
    std::vector<uint32_t> want(static_cast<size_t>(40 * s.vocab));
    for (int64_t m = 0; m < 40; ++m) {
      for (int64_t v = 0; v < s.vocab; ++v) {
        const float f = fma_chain(x.data() + m * s.d, w.data() + v * s.d, s.d);
        std::memcpy(&want[m * s.vocab + v], &f, 4);
      }
    }
    for (int64_t m : {1, 2, 3, 5, 7, 8, 9, 12, 16, 17, 23, 32, 33, 40}) {
      std::vector<uint32_t> got(static_cast<size_t>(m * s.vocab));
      ASSERT_TRUE(head->Compute(x.data(), m, reinterpret_cast<float*>(got.data())).ok());
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i], want[i]) << "vocab " << s.vocab << " d " << s.d << " M " << m
                                   << " row " << i / s.vocab << " v " << i % s.vocab;
      }
    }
    // Directly: [v0, v1) with v0 a multiple of 16, writing nothing else.
    std::vector<float> packed(
        static_cast<size_t>(PackedHeadBlocks(s.vocab) * PackedF32BlockStride(s.d)));
    PackF32Blocks(w.data(), s.vocab, s.d, 0, PackedHeadBlocks(s.vocab), packed.data());
    const float sentinel = -12345.0f;
    for (int64_t v0 = 0; v0 < s.vocab; v0 += 48) {
      const int64_t v1 = std::min(s.vocab, v0 + 37);
      const int64_t rows = 9, ldo = s.vocab + 3;
      std::vector<float> out(static_cast<size_t>(rows * ldo), sentinel);
      std::vector<float> acc(static_cast<size_t>(PackedAccFloats(rows)));
      HeadKernelF32Packed(x.data(), rows, packed.data(), s.d, v0, v1, out.data(), ldo, acc.data());
      for (int64_t m = 0; m < rows; ++m) {
        for (int64_t v = 0; v < ldo; ++v) {
          uint32_t bits;
          std::memcpy(&bits, &out[m * ldo + v], 4);
          if (v < v0 || v >= v1) {
            ASSERT_EQ(out[m * ldo + v], sentinel) << m << " " << v;
          } else {
            ASSERT_EQ(bits, want[m * s.vocab + v]) << m << " " << v;
          }
        }
      }
    }
  }
}

// More rows than one pass over the packed weights takes (kFixedRowsMax):
// passes of 256 rows, each row still its FMA chain bit for bit.
TEST(LmHeadKernelTest, PackedF32ManyRowsRunInPassesBitForBit) {
  if (!HasF32Kernel()) GTEST_SKIP() << "CPU without AVX512F";
  const int64_t vocab = 37, d = 17, rows = 2 * LmHead::kFixedRowsMax + 91;
  const std::vector<float> w = RandomFloats(static_cast<size_t>(vocab * d), 75, 0.1f);
  const std::vector<float> x = RandomFloats(static_cast<size_t>(rows * d), 76, 2.0f);
  auto head = MakeHead(w.data(), vocab, d, DType::kF32, -1, true);
  ASSERT_NE(head, nullptr);
  ASSERT_GT(head->packed_bytes(), 0);
  std::vector<float> out(static_cast<size_t>(rows * vocab));
  ASSERT_TRUE(head->Compute(x.data(), rows, out.data()).ok());
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t v = 0; v < vocab; ++v) {
      float acc = 0.0f;
      for (int64_t k = 0; k < d; ++k) acc = std::fma(w[v * d + k], x[m * d + k], acc);
      ASSERT_EQ(0, std::memcmp(&acc, &out[m * vocab + v], 4)) << m << " " << v;
    }
  }
}

// The packed BF16 kernel directly on sub-ranges: float64 of the rounded
// inputs, nothing written outside [v0, v1), and the same bits as through the
// head (one lane chain whatever the range or M).
TEST(LmHeadKernelTest, PackedBf16KernelWritesOnlyItsRange) {
  if (!HasBf16Kernel()) GTEST_SKIP() << "CPU without AVX512_BF16";
  const int64_t vocab = 83, d = 130, rows = 11, ldo = 90;
  const std::vector<uint16_t> w = ToBf16(RandomFloats(static_cast<size_t>(vocab * d), 81, 0.1f));
  const std::vector<uint16_t> x = ToBf16(RandomFloats(static_cast<size_t>(rows * d), 82, 2.0f));
  const std::vector<double> ref = Reference(FromBf16(x), rows, FromBf16(w), vocab, d);
  std::vector<uint16_t> packed(static_cast<size_t>(PackedHeadBlocks(vocab) * PackedBf16BlockStride(d)));
  PackBf16Blocks(w.data(), vocab, d, 0, PackedHeadBlocks(vocab), packed.data());
  std::vector<float> whole(static_cast<size_t>(rows * ldo));
  std::vector<float> acc(static_cast<size_t>(PackedAccFloats(rows)));
  HeadKernelBf16Packed(x.data(), rows, packed.data(), d, 0, vocab, whole.data(), ldo, acc.data());
  const float sentinel = -12345.0f;
  for (const auto& [v0, v1] : {std::pair<int64_t, int64_t>{16, 47}, {32, 83}, {80, 83}}) {
    std::vector<float> out(static_cast<size_t>(rows * ldo), sentinel);
    HeadKernelBf16Packed(x.data(), rows, packed.data(), d, v0, v1, out.data(), ldo, acc.data());
    for (int64_t m = 0; m < rows; ++m) {
      for (int64_t v = 0; v < ldo; ++v) {
        const float got = out[m * ldo + v];
        if (v < v0 || v >= v1) {
          ASSERT_EQ(got, sentinel) << m << " " << v;
        } else {
          ASSERT_NEAR(got, ref[m * vocab + v], 1e-5 * 8) << m << " " << v;
          ASSERT_EQ(0, std::memcmp(&got, &whole[m * ldo + v], 4)) << m << " " << v;
        }
      }
    }
  }
}

// Options::dense_pack and VOCABD_DENSE_PACK (0 | 1, the variable wins over
// the option as VOCABD_QUANT_PACK does; anything else is refused naming it);
// no packed copy when vocabd's kernel is off.
TEST(LmHeadKernelTest, DensePackIsSetByOptionOrEnvironment) {
  const int64_t vocab = 40, d = 24;
  const std::vector<float> w = RandomFloats(static_cast<size_t>(vocab * d), 91, 0.1f);
  LmHead::Options o;
  o.weights = w.data();
  o.vocab_size = vocab;
  o.hidden_size = d;
  ASSERT_EQ(setenv("VOCABD_DENSE_PACK", "yes", 1), 0);
  auto bad = LmHead::Create(o);
  ASSERT_EQ(unsetenv("VOCABD_DENSE_PACK"), 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("VOCABD_DENSE_PACK = 'yes' (want 0 or 1)"),
            std::string::npos)
      << bad.status();
  if (!HasF32Kernel()) GTEST_SKIP() << "no F32 kernel on this CPU (no AVX-512)";
  const int64_t packed = PackedHeadBlocks(vocab) * PackedF32BlockStride(d) * 4;
  struct Case {
    const char* env;  // null: unset
    bool option;
    int64_t small_rows_max;
    int64_t want_bytes;
  };
  for (const Case& c : {Case{nullptr, true, -1, packed}, Case{nullptr, false, -1, 0},
                        Case{"0", true, -1, 0}, Case{"1", false, -1, packed},
                        Case{nullptr, true, 0, 0}}) {
    if (c.env != nullptr) {
      ASSERT_EQ(setenv("VOCABD_DENSE_PACK", c.env, 1), 0);
    }
    o.dense_pack = c.option;
    o.small_rows_max = c.small_rows_max;
    auto h = LmHead::Create(o);
    ASSERT_EQ(unsetenv("VOCABD_DENSE_PACK"), 0);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ((*h)->packed_bytes(), c.want_bytes)
        << (c.env ? c.env : "unset") << " " << c.option << " " << c.small_rows_max;
    EXPECT_EQ((*h)->implementation().find("(every M; weights packed, ") != std::string::npos,
              c.want_bytes > 0)
        << (*h)->implementation();
  }
}

// dense_pack_deferred: Create does not pack (packed_bytes() 0, the row-major
// kernel and oneDNN serve); the owner fills dense_pack_bytes() with
// PackDenseBlocks (pieces in any order) and SwitchToPacked makes every M
// read it: then the logits are a Create-packed head's bit for bit. Wrong
// sizes, a second switch and heads without a packed layout are refused.
TEST(LmHeadKernelTest, DeferredPackingSwitchesToThePackedCopy) {
  const int64_t vocab = 70, d = 40;
  const std::vector<float> w = RandomFloats(static_cast<size_t>(vocab * d), 95, 0.1f);
  const std::vector<float> x = RandomFloats(static_cast<size_t>(20 * d), 96, 2.0f);
  LmHead::Options o;
  o.weights = w.data();
  o.vocab_size = vocab;
  o.hidden_size = d;
  o.dense_pack_deferred = true;
  auto deferred = LmHead::Create(o);
  ASSERT_TRUE(deferred.ok()) << deferred.status();
  auto empty = HugePageBuffer::Allocate(64, "test");
  ASSERT_TRUE(empty.ok());
  if (!HasF32Kernel()) {
    EXPECT_EQ((*deferred)->dense_pack_bytes(), 0);
    EXPECT_EQ((*deferred)
                  ->SwitchToPacked(std::make_shared<const HugePageBuffer>(std::move(*empty)))
                  .code(),
              absl::StatusCode::kFailedPrecondition);
    GTEST_SKIP() << "no F32 kernel on this CPU (no AVX-512)";
  }
  const int64_t bytes = PackedHeadBlocks(vocab) * PackedF32BlockStride(d) * 4;
  EXPECT_EQ((*deferred)->dense_pack_bytes(), bytes);
  EXPECT_EQ((*deferred)->packed_bytes(), 0);
  EXPECT_EQ((*deferred)->implementation().find("weights packed"), std::string::npos)
      << (*deferred)->implementation();
  auto packed_at_create = MakeHead(w.data(), vocab, d, DType::kF32, -1, true);
  ASSERT_NE(packed_at_create, nullptr);
  auto row_major = MakeHead(w.data(), vocab, d, DType::kF32, -1, false);
  ASSERT_NE(row_major, nullptr);
  std::vector<float> before(static_cast<size_t>(20 * vocab)), want_row_major(before.size()),
      after(before.size()), want_packed(before.size());
  for (int64_t m : {1, 8, 20}) {
    ASSERT_TRUE((*deferred)->Compute(x.data(), m, before.data()).ok());
    ASSERT_TRUE(row_major->Compute(x.data(), m, want_row_major.data()).ok());
    EXPECT_EQ(0, std::memcmp(before.data(), want_row_major.data(), m * vocab * sizeof(float))) << m;
  }
  EXPECT_EQ((*deferred)
                ->SwitchToPacked(std::make_shared<const HugePageBuffer>(std::move(*empty)))
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*deferred)->SwitchToPacked(nullptr).code(), absl::StatusCode::kInvalidArgument);
  auto buffer = HugePageBuffer::Allocate(static_cast<size_t>(bytes), "test");
  ASSERT_TRUE(buffer.ok());
  (*deferred)->PackDenseBlocks(w.data(), 3, PackedHeadBlocks(vocab), buffer->data());
  (*deferred)->PackDenseBlocks(w.data(), 0, 3, buffer->data());
  auto shared = std::make_shared<const HugePageBuffer>(std::move(*buffer));
  ASSERT_TRUE((*deferred)->SwitchToPacked(shared).ok());
  EXPECT_NE((*deferred)->implementation().find("(every M; weights packed, " +
                                               std::to_string(bytes) + " bytes)"),
            std::string::npos)
      << (*deferred)->implementation();
  EXPECT_EQ((*deferred)->SwitchToPacked(shared).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(packed_at_create->SwitchToPacked(shared).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(row_major->SwitchToPacked(shared).code(), absl::StatusCode::kFailedPrecondition);
  for (int64_t m : {1, 8, 20}) {
    ASSERT_TRUE((*deferred)->Compute(x.data(), m, after.data()).ok());
    ASSERT_TRUE(packed_at_create->Compute(x.data(), m, want_packed.data()).ok());
    EXPECT_EQ(0, std::memcmp(after.data(), want_packed.data(), m * vocab * sizeof(float))) << m;
  }
}

TEST(LmHeadKernelTest, EnvironmentOverride) {
  std::vector<uint16_t> w(64 * 32, 0x3f80);
  LmHead::Options o;
  o.weights = w.data();
  o.vocab_size = 64;
  o.hidden_size = 32;
  o.weights_dtype = DType::kBF16;
  ASSERT_EQ(setenv("VOCABD_LM_HEAD_KERNEL", "onednn", 1), 0);
  auto onednn = LmHead::Create(o);
  ASSERT_EQ(setenv("VOCABD_LM_HEAD_KERNEL", "no-amx", 1), 0);
  auto no_amx = LmHead::Create(o);
  ASSERT_EQ(setenv("VOCABD_LM_HEAD_KERNEL", "fast", 1), 0);
  auto bad = LmHead::Create(o);
  ASSERT_EQ(unsetenv("VOCABD_LM_HEAD_KERNEL"), 0);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("VOCABD_LM_HEAD_KERNEL = 'fast'"), std::string::npos)
      << bad.status();
  if (!LmHead::Bf16Supported()) GTEST_SKIP() << "no BF16 head on this CPU";
  ASSERT_TRUE(onednn.ok()) << onednn.status();
  EXPECT_EQ((*onednn)->small_rows_max(), 0);
  EXPECT_EQ((*onednn)->implementation().find("vocabd"), std::string::npos);
  ASSERT_TRUE(no_amx.ok()) << no_amx.status();
  EXPECT_EQ((*no_amx)->implementation().find("vocabd:amx"), std::string::npos)
      << (*no_amx)->implementation();
  EXPECT_NE((*no_amx)->implementation().find("vocabd:avx512_bf16"), std::string::npos)
      << (*no_amx)->implementation();
}

}  // namespace
}  // namespace vocabd
