// The LM head on ggml-quantized weights (lib/head/quant_kernel.h through
// LmHead): the numerical contract per type against ggml's own float64
// reference (../shared/models/quant/*.golden.json, `logits_exact_f64`,
// whose `logits_ggml` is ggml's int8-activation mul_mat on the same file),
// every ISA path of this CPU against the scalar path, independence of a
// row's logits from M, and Create's validation.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "lib/checkpoint/gguf.h"
#include "lib/core/dtype.h"
#include "lib/head/lm_head.h"
#include "lib/head/quant_kernel.h"
#include "lib/quant/ggml_blocks.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

using quant::GgmlType;

using testing::ScopedEnv;

// Sets VOCABD_LM_HEAD_KERNEL for the scope (Create reads it).
class ScopedKernelEnv {
 public:
  explicit ScopedKernelEnv(const char* value) { setenv("VOCABD_LM_HEAD_KERNEL", value, 1); }
  ~ScopedKernelEnv() { unsetenv("VOCABD_LM_HEAD_KERNEL"); }
};

constexpr QuantKernelIsa kAllIsas[] = {QuantKernelIsa::kScalar, QuantKernelIsa::kAvx2,
                                       QuantKernelIsa::kAvxVnni, QuantKernelIsa::kAvx512Vnni};

// One golden file: the head's raw blocks and ggml's values.
struct GoldenHead {
  std::string bytes;  // whole GGUF file
  const uint8_t* weights = nullptr;
  GgmlType type = GgmlType::kF32;
  int64_t vocab = 0, hidden = 0;
  std::vector<float> x;                     // [4, hidden]
  std::vector<double> exact, ggml_logits;   // [4, vocab]
};

GoldenHead LoadGolden(const std::string& stem) {
  GoldenHead g;
  const std::string dir = testing::SharedModelsDir() + "/quant/";
  g.bytes = testing::ReadFileBytes(dir + stem + ".gguf");
  const nlohmann::json j =
      nlohmann::json::parse(testing::ReadFileBytes(dir + stem + ".golden.json"));
  absl::StatusOr<GgufFile> f = ParseGguf(reinterpret_cast<const uint8_t*>(g.bytes.data()),
                                         g.bytes.size(), stem);
  EXPECT_TRUE(f.ok()) << f.status();
  if (!f.ok()) return g;
  const GgufTensorInfo* t = f->FindTensor("output.weight");
  if (t == nullptr) t = f->FindTensor("token_embd.weight");  // tied head
  EXPECT_NE(t, nullptr);
  if (t == nullptr) return g;
  g.type = static_cast<GgmlType>(t->type);
  g.vocab = t->shape()[0];
  g.hidden = t->shape()[1];
  g.weights = reinterpret_cast<const uint8_t*>(g.bytes.data()) + t->offset;
  for (const auto& row : j["hidden"])
    for (const auto& v : row) g.x.push_back(v.get<float>());
  for (const auto& row : j["logits_exact_f64"])
    for (const auto& v : row) g.exact.push_back(v.get<double>());
  for (const auto& row : j["logits_ggml"])
    for (const auto& v : row) g.ggml_logits.push_back(v.get<double>());
  EXPECT_EQ(j["vocab_size"].get<int64_t>(), g.vocab);
  EXPECT_EQ(j["hidden_size"].get<int64_t>(), g.hidden);
  return g;
}

// max |a - ref| / max |ref| over all rows (the golden files' measure).
template <typename T>
double RelativeError(const std::vector<T>& a, const std::vector<double>& ref) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::fabs(static_cast<double>(a[i]) - ref[i]);
    if (std::isnan(e)) return e;  // an unwritten (NaN) or NaN logit fails every bound
    err = std::max(err, e);
    scale = std::max(scale, std::fabs(ref[i]));
  }
  return err / scale;
}

// few_rows_max: the crossover between a path's two kernels (fixed here, so
// that which kernel runs each M is known; Create measures it by default).
// pack: Options::quant_pack (the packed kernel where the path has one).
std::vector<float> RunHead(const uint8_t* weights, GgmlType type, int64_t vocab, int64_t hidden,
                           const std::vector<float>& x, int64_t rows,
                           int64_t few_rows_max = kFewRowsLimit, bool pack = false,
                           int prefetch_records = -1) {
  LmHead::Options o;
  o.weights = weights;
  o.vocab_size = vocab;
  o.hidden_size = hidden;
  o.weights_quant = type;
  o.quant_few_rows_max = few_rows_max;
  o.quant_pack = pack;
  o.quant_prefetch_records = prefetch_records;
  absl::StatusOr<std::unique_ptr<LmHead>> head = LmHead::Create(o);
  EXPECT_TRUE(head.ok()) << head.status();
  std::vector<float> logits(static_cast<size_t>(rows * vocab), std::nanf(""));
  if (!head.ok()) return logits;
  EXPECT_TRUE((*head)->Compute(x.data(), rows, logits.data()).ok());
  return logits;
}

// What runs a head: a path of this CPU, and on it the packed kernel for
// every M where the path has one for the type (QuantPackedCovers; few_rows_max
// 0), or the in-place ones (few_rows_max kFewRowsLimit).
struct Variant {
  QuantKernelIsa isa;
  bool pack;
  std::string name;
  int64_t few() const { return pack ? 0 : kFewRowsLimit; }
};
std::vector<Variant> Variants(GgmlType type, int64_t hidden) {
  std::vector<Variant> v;
  for (QuantKernelIsa isa : kAllIsas) {
    if (!QuantKernelIsaSupported(isa)) continue;  // named in GoldenContractPerTypeAndPath
    v.push_back({isa, false, QuantKernelIsaName(isa)});
    if (QuantPackedCovers(isa, type, hidden)) {
      v.push_back({isa, true, std::string(QuantKernelIsaName(isa)) + "-packed"});
    }
  }
  return v;
}

// The asserted bound per type (docs/models.md, "Quantized heads"): relative
// error vs logits_exact_f64 (measured 3.96e-3 .. 4.37e-3 on
// every path; ggml: 4.08e-3 .. 7.28e-3), 4.5e-3 for every type; each is
// also checked to be no worse than ggml's own error on the same file (up to
// 2e-6: for Q8_0 and IQ4_NL the int8 arithmetic is ggml's own, so the two
// differ only by float summation order).
struct TypeCase {
  const char* stem;
  double bound;
};
constexpr TypeCase kTypeCases[] = {
    {"synth-v1024-h512-Q8_0", 4.5e-3},   {"synth-v1024-h512-Q8_0-tied", 4.5e-3},
    {"synth-v1024-h512-Q4_0", 4.5e-3},   {"synth-v1024-h512-Q4_1", 4.5e-3},
    {"synth-v1024-h512-Q5_0", 4.5e-3},   {"synth-v1024-h512-Q5_1", 4.5e-3},
    {"synth-v1024-h512-IQ4_NL", 4.5e-3}, {"synth-v1024-h512-Q2_K", 4.5e-3},
    {"synth-v1024-h512-Q3_K", 4.5e-3},   {"synth-v1024-h512-Q4_K", 4.5e-3},
    {"synth-v1024-h512-Q5_K", 4.5e-3},   {"synth-v1024-h512-Q6_K", 4.5e-3},
    {"synth-v1024-h512-Q4_K_M", 4.5e-3},
};

TEST(LmHeadQuant, GoldenContractPerTypeAndPath) {
  for (const TypeCase& c : kTypeCases) {
    SCOPED_TRACE(c.stem);
    const GoldenHead g = LoadGolden(c.stem);
    ASSERT_NE(g.weights, nullptr);
    const double ggml_err = RelativeError(g.ggml_logits, g.exact);
    std::vector<float> scalar;
    for (QuantKernelIsa isa : kAllIsas) {
      if (!QuantKernelIsaSupported(isa)) {
        std::printf("[ SKIPPED  ] %s: this CPU lacks the %s path\n", c.stem,
                    QuantKernelIsaName(isa));
      }
    }
    for (const Variant& k : Variants(g.type, g.hidden)) {
      ScopedKernelEnv env(QuantKernelIsaName(k.isa));
      const char* name = k.name.c_str();
      const std::vector<float> logits =
          RunHead(g.weights, g.type, g.vocab, g.hidden, g.x, 4, k.few(), k.pack);
      const double err = RelativeError(logits, g.exact);
      std::printf("%-28s %-17s relative error %.6g (ggml %.6g)\n", c.stem, name, err, ggml_err);
      EXPECT_LE(err, c.bound) << name;
      EXPECT_LE(err, ggml_err + 2e-6) << name << ": worse than ggml's own path";
      // The same rows three times over: 12 rows (> kFewRowsLimit) run the
      // many-row kernel on the avx512vnni path and the unpacking kernel on
      // the avx2 path (whose fused kernel runs the 4 rows: hidden 512).
      std::vector<float> x3 = g.x;
      x3.insert(x3.end(), g.x.begin(), g.x.end());
      x3.insert(x3.end(), g.x.begin(), g.x.end());
      const std::vector<float> many =
          RunHead(g.weights, g.type, g.vocab, g.hidden, x3, 12, k.few(), k.pack);
      for (int copy = 0; copy < 3; ++copy) {
        const std::vector<float> part(many.begin() + copy * 4 * g.vocab,
                                      many.begin() + (copy + 1) * 4 * g.vocab);
        const double err12 = RelativeError(part, g.exact);
        EXPECT_LE(err12, c.bound) << name << " 12 rows";
        EXPECT_LE(err12, ggml_err + 2e-6) << name << " 12 rows";
      }
      if (k.isa == QuantKernelIsa::kScalar) {
        scalar = logits;
        continue;
      }
      // Every path against the scalar one: the int8 dot products are exact,
      // only the float summation order differs.
      std::vector<double> ref(scalar.begin(), scalar.end());
      EXPECT_LE(RelativeError(logits, ref), 1e-5) << name << " vs scalar";
    }
  }
}

// Random valid blocks of every type (f16 scales in a sane range, random
// codes), for shapes the golden files do not cover.
std::vector<uint8_t> RandomBlocks(const QuantTypeInfo& info, int64_t vocab, int64_t hidden,
                                  uint32_t seed) {
  const int64_t nblocks = vocab * (hidden / info.block_size);
  std::vector<uint8_t> w(static_cast<size_t>(nblocks * info.block_bytes));
  std::mt19937 rng(seed);
  for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  // Overwrite every f16 field with a sane scale (offsets per layout).
  auto put = [&](int64_t block, int offset) {
    const uint16_t h = FloatToHalf(scale(rng));
    std::memcpy(w.data() + block * info.block_bytes + offset, &h, 2);
  };
  for (int64_t b = 0; b < nblocks; ++b) {
    switch (info.type) {
      case GgmlType::kQ4_1: case GgmlType::kQ5_1: case GgmlType::kQ4_K: case GgmlType::kQ5_K:
        put(b, 0); put(b, 2); break;
      case GgmlType::kQ2_K: put(b, 80); put(b, 82); break;
      case GgmlType::kQ3_K: put(b, 108); break;
      case GgmlType::kQ6_K: put(b, 208); break;
      default: put(b, 0); break;
    }
  }
  return w;
}

// LmHead::Create(o) fails with INVALID_ARGUMENT naming `what`.
void ExpectInvalid(const LmHead::Options& o, const std::string& what) {
  absl::StatusOr<std::unique_ptr<LmHead>> h = LmHead::Create(o);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(h.status().message()).find(what), std::string::npos) << h.status();
}

constexpr GgmlType kAllTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                                  GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kIQ4_NL,
                                  GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K,
                                  GgmlType::kQ5_K, GgmlType::kQ6_K};

// Vocab sizes that are not multiples of the tiles (4, 16) or the thread
// chunk, hidden sizes with a 32-code tail (legacy types), M across the tile
// sizes, the 64-row blocks and the many-row kernel; every path vs scalar,
// and each row's logits bit-identical whatever M it is computed in as long
// as the same kernel runs (M <= few_rows_max = 8; above it on every M).
// Under TSan the vocabulary is 3x smaller (1283 rows: still no multiple of
// a tile, still two thread chunks for the widest rows, Q6_K at hidden 1024,
// 1248 rows per chunk): the instrumented scalar path made this one test
// take 388 s there. The plain build, which CI runs first, checks all 4099.
// Every row of `got` (rows x vocab logits) within 1e-5 of the same row of
// the scalar path's `scalar` (RelativeError: of the row's largest |logit|).
::testing::AssertionResult RowsAgreeWithScalar(const std::vector<float>& got,
                                               const std::vector<float>& scalar, int64_t rows,
                                               int64_t vocab) {
  for (int64_t m = 0; m < rows; ++m) {
    std::vector<double> ref(scalar.begin() + m * vocab, scalar.begin() + (m + 1) * vocab);
    std::vector<float> row(got.begin() + m * vocab, got.begin() + (m + 1) * vocab);
    const double error = RelativeError(row, ref);
    if (!(error <= 1e-5)) {
      return ::testing::AssertionFailure() << "row " << m << ": relative error " << error;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(LmHeadQuant, PathsAgreeAndRowsDoNotDependOnM) {
  for (GgmlType type : kAllTypes) {
    const QuantTypeInfo& info = *FindQuantTypeInfo(type);
    std::vector<int64_t> hiddens = {info.block_size * 3, info.block_size * 4};
    // The 32-code types also at a multiple of 256 (the k-quants are at 768
    // and 1024): the avx2 path's fused few-row kernel.
    if (info.block_size == 32) hiddens.push_back(512);
    for (int64_t hidden : hiddens) {
      const int64_t vocab = testing::kThreadSanitizer ? 1283 : 4099;
      SCOPED_TRACE(std::string(info.name) + " hidden " + std::to_string(hidden));
      const std::vector<uint8_t> w = RandomBlocks(info, vocab, hidden, 7);
      // 83: the packed kernel's second block of 64 rows has three tiles, the
      // last partial.
      const int64_t rows = 83;
      const std::vector<float> x = testing::RandomNormal(static_cast<size_t>(rows * hidden), 3);
      std::vector<float> scalar;
      for (const Variant& k : Variants(type, hidden)) {
        const QuantKernelIsa isa = k.isa;
        ScopedKernelEnv env(QuantKernelIsaName(isa));
        const std::vector<float> all =
            RunHead(w.data(), type, vocab, hidden, x, rows, k.few(), k.pack);
        // Two kernels, one up to kFewRowsLimit rows and one above: the
        // avx512vnni path always (unless packed: one kernel), the avx2 and
        // avxvnni paths where the avx2 fused few-row kernel covers the type
        // and hidden size.
        const bool gemm = !k.pack && QuantKernelHasCrossover(isa, type, hidden);
        const std::vector<float> small =
            RunHead(w.data(), type, vocab, hidden, x, 7, k.few(), k.pack);
        // 4 and 6 as well where a fused few-row kernel runs (on avx2 its
        // tiles change at M = 2, 3 and 5).
        std::vector<int64_t> ms = {1, 2, 3, 5, 8, 13};
        if (gemm) ms.insert(ms.end(), {4, 6});
        for (int64_t m : ms) {
          const std::vector<float> part =
              RunHead(w.data(), type, vocab, hidden, x, m, k.few(), k.pack);
          const bool same_kernel = !gemm || m > kFewRowsLimit;
          const std::vector<float>& ref = same_kernel ? all : small;
          ASSERT_EQ(0, std::memcmp(part.data(), ref.data(),
                                   std::min(part.size(), ref.size()) * sizeof(float)))
              << k.name << " M = " << m;
        }
        if (gemm) {  // the two kernels agree to float rounding
          for (int64_t m = 0; m < 7; ++m) {
            std::vector<double> ref(all.begin() + m * vocab, all.begin() + (m + 1) * vocab);
            std::vector<float> got(small.begin() + m * vocab, small.begin() + (m + 1) * vocab);
            ASSERT_LE(RelativeError(got, ref), 1e-5) << "small vs many-row kernel, row " << m;
          }
        }
        if (isa == QuantKernelIsa::kScalar) {
          scalar = all;
          continue;
        }
        ASSERT_TRUE(RowsAgreeWithScalar(all, scalar, rows, vocab)) << k.name;
      }
    }
  }
}

// The k-quants with scales per 16 codes at the edges of their integer
// ranges: every code at its lowest or highest value, the sub-block scales
// at their largest magnitude (Q6_K -128 and 127 in turn, Q3_K -32 / 31,
// Q2_K 15 with min 15 or 0), d = dmin = 1, and input rows of one value
// (every activation code +127 or -127), so each 16-code sum is as large as
// the type allows: the packed kernel combines two of them in int16 pairs
// (Q2_K, Q3_K) or int32 (Q6_K). A carry from one int16 half into the other
// shows here as a relative error of about 6e-5 against the scalar path's
// exact integer sums (PathsAgreeAndRowsDoNotDependOnM, with random scales,
// also catches swapped halves).
TEST(LmHeadQuant, SixteenCodeSumsAtTheirBoundsAgreeWithScalar) {
  struct Edge {
    GgmlType type;
    int d_offset, dmin_offset;  // -1: none
    // The block's bytes before d, for even and odd vocabulary rows.
    std::vector<uint8_t> (*bytes)(bool odd);
  };
  const Edge edges[] = {
      {GgmlType::kQ6_K, 208, -1,
       [](bool odd) {  // ql[128] qh[64] scales[16]: u = 0 (-32) or 63 (31)
         std::vector<uint8_t> b(208, odd ? 0xFF : 0x00);
         for (int j = 0; j < 16; ++j) b[192 + j] = (j + odd) % 2 == 0 ? 0x80 : 0x7F;
         return b;
       }},
      {GgmlType::kQ3_K, 108, -1,
       [](bool odd) {  // hmask[32] qs[64] scales[12]: u = 0 (-4) or 7 (3); scales -32 or 31
         return std::vector<uint8_t>(108, odd ? 0xFF : 0x00);
       }},
      {GgmlType::kQ2_K, 80, 82,
       [](bool odd) {  // scales[16] qs[64]: u = 3; scale 15, min 15 or 0
         std::vector<uint8_t> b(80, 0xFF);
         std::fill(b.begin(), b.begin() + 16, odd ? 0x0F : 0xFF);
         return b;
       }},
  };
  const int64_t vocab = 48, hidden = 1024, rows = 11;
  std::vector<float> x(static_cast<size_t>(rows * hidden));
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t k = 0; k < hidden; ++k) {
      // Rows 0, 1: one value throughout. The others: runs of 16, 32 or 64
      // values of v, then as many of -v / 2 (the halves of a unit of
      // opposite signs, one of them at the extreme).
      float v = m % 2 == 0 ? 1.0f : -1.0f;
      if (m >= 2 && (k / (16 << (m % 3))) % 2 == 1) v = -v / 2;
      x[static_cast<size_t>(m * hidden + k)] = v;
    }
  }
  const uint16_t one = FloatToHalf(1.0f);
  for (const Edge& e : edges) {
    const QuantTypeInfo& info = *FindQuantTypeInfo(e.type);
    SCOPED_TRACE(info.name);
    std::vector<uint8_t> w;
    for (int64_t v = 0; v < vocab; ++v) {
      for (int64_t b = 0; b < hidden / 256; ++b) {
        std::vector<uint8_t> block = e.bytes(v % 2 == 1);
        block.resize(static_cast<size_t>(info.block_bytes));
        std::memcpy(block.data() + e.d_offset, &one, 2);
        if (e.dmin_offset >= 0) std::memcpy(block.data() + e.dmin_offset, &one, 2);
        w.insert(w.end(), block.begin(), block.end());
      }
    }
    std::vector<float> scalar;
    for (const Variant& k : Variants(e.type, hidden)) {
      ScopedKernelEnv env(QuantKernelIsaName(k.isa));
      const std::vector<float> got = RunHead(w.data(), e.type, vocab, hidden, x, rows, k.few(), k.pack);
      if (k.isa == QuantKernelIsa::kScalar) {
        scalar = got;
        continue;
      }
      ASSERT_TRUE(RowsAgreeWithScalar(got, scalar, rows, vocab)) << k.name;
    }
  }
}

TEST(LmHeadQuant, ImplementationNamesTypeAndPath) {
  const QuantTypeInfo& info = *FindQuantTypeInfo(GgmlType::kQ4_K);
  const std::vector<uint8_t> w = RandomBlocks(info, 8, 256, 1);
  LmHead::Options o;
  o.weights = w.data();
  o.vocab_size = 8;
  o.hidden_size = 256;
  o.weights_quant = GgmlType::kQ4_K;
  o.quant_few_rows_max = 5;
  o.quant_pack = false;  // packed heads: PackedHeadIsChosenByDefaultAndOverridable
  auto expected = [](QuantKernelIsa isa) {
    return std::string("vocabd:q4_k-") + QuantKernelIsaName(isa) +
           (QuantKernelHasCrossover(isa, GgmlType::kQ4_K, 256)
                ? " (every M; few-row kernel for rows <= 5)"
                : " (every M)");
  };
  for (QuantKernelIsa isa : kAllIsas) {
    ScopedKernelEnv env(QuantKernelIsaName(isa));
    absl::StatusOr<std::unique_ptr<LmHead>> head = LmHead::Create(o);
    if (!QuantKernelIsaSupported(isa)) {
      std::printf("[ SKIPPED  ] %s path: not on this CPU\n", QuantKernelIsaName(isa));
      EXPECT_EQ(head.status().code(), absl::StatusCode::kFailedPrecondition);
      continue;
    }
    ASSERT_TRUE(head.ok()) << head.status();
    EXPECT_EQ((*head)->implementation(), expected(isa));
    EXPECT_EQ((*head)->weight_bytes(), 8 * 144);
    EXPECT_EQ((*head)->weights_quant(), GgmlType::kQ4_K);
  }
  absl::StatusOr<std::unique_ptr<LmHead>> head = LmHead::Create(o);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ((*head)->implementation(), expected(DetectQuantKernelIsa()));
}

// The packed kernel: chosen by default where the path has one
// (QuantPackedCovers), told by implementation() with the bytes of the copy
// (whole groups of 16 rows) and the crossover with the in-place few-row
// kernel (measured by default, in [0, 8]; rows above it run packed, with
// the packed kernel's bits); Options::quant_pack = false or
// VOCABD_QUANT_PACK = 0 read the weights in place, VOCABD_QUANT_PACK = 1
// packs whatever the option says, any other value is refused naming it.
TEST(LmHeadQuant, PackedHeadIsChosenByDefaultAndOverridable) {
  const QuantTypeInfo& info = *FindQuantTypeInfo(GgmlType::kQ8_0);
  const int64_t vocab = 40, hidden = 256;
  const std::vector<uint8_t> w = RandomBlocks(info, vocab, hidden, 3);
  LmHead::Options o;
  o.weights = w.data();
  o.vocab_size = vocab;
  o.hidden_size = hidden;
  o.weights_quant = GgmlType::kQ8_0;
  for (QuantKernelIsa isa : kAllIsas) {
    if (!QuantKernelIsaSupported(isa)) continue;  // named in ImplementationNamesTypeAndPath
    SCOPED_TRACE(QuantKernelIsaName(isa));
    ScopedKernelEnv env(QuantKernelIsaName(isa));
    const bool covered = QuantPackedCovers(isa, GgmlType::kQ8_0, hidden);
    const std::string packed =
        std::string("vocabd:q8_0-") + QuantKernelIsaName(isa) +
        " (every M; weights packed at Create, 13056 bytes, prefetched 1 records ahead at <= 8 "
        "rows, 1 above; in-place few-row kernel for rows <= 2; codes cut by gf2p8affineqb in "
        "tiles of <= " +
        (QuantCpuHasGfni() ? "1 rows)" : "0 rows, no GFNI)");  // 3 x 4352 bytes
    o.quant_pack = true;
    o.quant_few_rows_max = 2;
    o.quant_prefetch_records = 1;
    o.quant_gf_rows_max = 1;
    absl::StatusOr<std::unique_ptr<LmHead>> h = LmHead::Create(o);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ((*h)->weight_bytes(), vocab * 8 * 34);
    if (!covered) {
      std::printf("[ SKIPPED  ] %s path: no packed kernel for Q8_0\n", QuantKernelIsaName(isa));
      EXPECT_EQ((*h)->implementation().find("packed"), std::string::npos);
      continue;
    }
    EXPECT_EQ((*h)->implementation(), packed);
    EXPECT_EQ((*h)->quant_few_rows_max(), 2);
    {
      // Rows 3 and up run packed: the bits of a head packed for every M.
      const std::vector<float> x = testing::RandomNormal(static_cast<size_t>(4 * hidden), 2);
      const std::vector<float> two = RunHead(w.data(), GgmlType::kQ8_0, vocab, hidden, x, 4, 2, true);
      const std::vector<float> all = RunHead(w.data(), GgmlType::kQ8_0, vocab, hidden, x, 4, 0, true);
      const std::vector<float> none = RunHead(w.data(), GgmlType::kQ8_0, vocab, hidden, x, 2, 8, true);
      EXPECT_EQ(0, std::memcmp(two.data(), all.data(), two.size() * sizeof(float)));
      const std::vector<float> two2 = RunHead(w.data(), GgmlType::kQ8_0, vocab, hidden, x, 2, 2, true);
      EXPECT_EQ(0, std::memcmp(two2.data(), none.data(), two2.size() * sizeof(float)));
      o.quant_few_rows_max = -1;
      absl::StatusOr<std::unique_ptr<LmHead>> measured = LmHead::Create(o);
      ASSERT_TRUE(measured.ok()) << measured.status();
      EXPECT_GE((*measured)->quant_few_rows_max(), 0);
      EXPECT_LE((*measured)->quant_few_rows_max(), kFewRowsLimit);
      EXPECT_NE((*measured)->implementation().find("measured on 40 weight rows"), std::string::npos)
          << (*measured)->implementation();
      EXPECT_NE((*measured)->implementation().find(" ms, packed "), std::string::npos)
          << (*measured)->implementation();
      std::printf("%s: packed, measured few_rows_max %lld\n", QuantKernelIsaName(isa),
                  static_cast<long long>((*measured)->quant_few_rows_max()));
      o.quant_few_rows_max = 2;
    }
    {
      ScopedEnv pack("VOCABD_QUANT_PACK", "0");
      h = LmHead::Create(o);
      ASSERT_TRUE(h.ok()) << h.status();
      EXPECT_EQ((*h)->implementation().find("packed"), std::string::npos) << (*h)->implementation();
      EXPECT_GE((*h)->quant_few_rows_max(), 0);
    }
    o.quant_pack = false;
    h = LmHead::Create(o);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ((*h)->implementation().find("packed"), std::string::npos);
    {
      ScopedEnv pack("VOCABD_QUANT_PACK", "1");
      h = LmHead::Create(o);
      ASSERT_TRUE(h.ok()) << h.status();
      EXPECT_EQ((*h)->implementation(), packed);
    }
  }
  ScopedEnv pack("VOCABD_QUANT_PACK", "yes");
  absl::StatusOr<std::unique_ptr<LmHead>> bad = LmHead::Create(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("VOCABD_QUANT_PACK = 'yes' (want 0 or 1)"),
            std::string::npos) << bad.status();
}

// The packed kernels cut the codes two ways: gf2p8affineqb in tiles of one
// or two input rows on a CPU with GFNI, word shifts and masks in every
// other tile and on AVX512-VNNI CPUs without GFNI. Avx512PackedKernel with
// gfni = false runs the shifts in every tile (the path of such a CPU); it
// agrees bit for bit with gfni = true (where this CPU has GFNI) and with
// QuantPackedKernel at M = 1, 2 (the tiles that differ) and 9 (8 + 1),
// every type, a partial last group of 16 rows.
TEST(LmHeadQuant, PackedCodeCutsAgreeWithAndWithoutGfni) {
  if (!QuantPackedCovers(QuantKernelIsa::kAvx512Vnni, GgmlType::kQ8_0, 256)) {
    std::printf("[ SKIPPED  ] no packed kernel on this CPU (avx512vnni)\n");
    GTEST_SKIP();
  }
  const bool gfni = QuantCpuHasGfni();
  if (!gfni) std::printf("[ SKIPPED  ] part: gf2p8affineqb tiles (no GFNI on this CPU)\n");
  const int64_t vocab = 70, hidden = 512;
  auto aligned = [](std::vector<uint8_t>& v) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(v.data()) + 63) & ~uintptr_t{63});
  };
  for (GgmlType type : kAllTypes) {
    const QuantTypeInfo& info = *FindQuantTypeInfo(type);
    SCOPED_TRACE(info.name);
    const std::vector<uint8_t> w = RandomBlocks(info, vocab, hidden, 13);
    std::vector<uint8_t> packed_buf(static_cast<size_t>(QuantPackedBytes(info, vocab, hidden)) + 64);
    uint8_t* packed = aligned(packed_buf);
    const int64_t groups = (vocab + kPackedGroupRows - 1) / kPackedGroupRows;
    QuantPackGroups(QuantKernelIsa::kAvx512Vnni, info, w.data(), vocab, hidden, 0, groups, packed);
    for (int64_t rows : {1, 2, 9}) {
      const std::vector<float> x = testing::RandomNormal(static_cast<size_t>(rows * hidden), 7);
      std::vector<uint8_t> acts_buf(static_cast<size_t>(rows * QuantActRowBytes(hidden)) + 64);
      uint8_t* acts = aligned(acts_buf);
      QuantizeActivations(x.data(), rows, hidden, acts);
      std::vector<uint8_t> panel(static_cast<size_t>(QuantPackedPanelBytes(rows, hidden)));
      QuantBuildPackedPanel(QuantKernelIsa::kAvx512Vnni, info, acts, rows, hidden, panel.data());
      // gf_rows_max: tiles of up to that many rows use gf2p8affineqb;
      // internal: Avx512PackedKernel itself (no GFNI check), else
      // QuantPackedKernel (0 without GFNI).
      auto run = [&](int gf_rows_max, bool internal) {
        std::vector<float> out(static_cast<size_t>(rows * vocab),
                               std::numeric_limits<float>::quiet_NaN());
        if (internal) {
          quant_kernel_internal::Avx512PackedKernel(info, panel.data(), rows, packed, hidden, 0,
                                                    vocab, out.data(), vocab, 0, gf_rows_max);
        } else {
          QuantPackedKernel(QuantKernelIsa::kAvx512Vnni, info, panel.data(), rows, packed, vocab,
                            hidden, 0, vocab, out.data(), vocab, 0, gf_rows_max);
        }
        return out;
      };
      const std::vector<float> shifts = run(0, true);
      // The packed kernel on the panel agrees with the scalar path's
      // in-place kernel on the file's rows (to float summation order).
      std::vector<uint8_t> scratch(static_cast<size_t>(QuantUnpackScratchBytes(hidden)) + 64);
      std::vector<float> scalar(static_cast<size_t>(rows * vocab));
      QuantHeadKernel(QuantKernelIsa::kScalar, info, acts, rows, w.data(), hidden, 0, vocab,
                      scalar.data(), vocab, aligned(scratch), 0);
      for (int64_t m = 0; m < rows; ++m) {
        std::vector<double> ref(scalar.begin() + m * vocab, scalar.begin() + (m + 1) * vocab);
        std::vector<float> got(shifts.begin() + m * vocab, shifts.begin() + (m + 1) * vocab);
        ASSERT_LE(RelativeError(got, ref), 1e-5) << "rows " << rows << ", row " << m;
      }
      for (int gf_rows_max : {0, 1, kPackedGfRowsMax}) {
        const std::vector<float> public_path = run(gf_rows_max, false);
        EXPECT_EQ(0, std::memcmp(shifts.data(), public_path.data(), shifts.size() * sizeof(float)))
            << "rows " << rows << " QuantPackedKernel gf_rows_max " << gf_rows_max;
      }
      if (gfni) {
        for (int gf_rows_max : {1, kPackedGfRowsMax}) {
          const std::vector<float> gf = run(gf_rows_max, true);
          EXPECT_EQ(0, std::memcmp(shifts.data(), gf.data(), shifts.size() * sizeof(float)))
              << "rows " << rows << " gf_rows_max " << gf_rows_max;
        }
      }
      for (float v : shifts) ASSERT_TRUE(std::isfinite(v)) << "rows " << rows;  // every logit written
    }
  }
}

// Which packed tiles cut their codes with gf2p8affineqb: measured at Create
// on a CPU with GFNI (0..2, the times in implementation()), 0 without; set
// by Options::quant_gf_rows_max or VOCABD_QUANT_GF_ROWS (the option wins);
// out-of-range values refused naming the option or variable; -1 for a head
// that is not packed. Either way the logits are the same bits.
TEST(LmHeadQuant, PackedGfRowsAreMeasuredOrSetAndChangeNoBit) {
  if (!QuantPackedCovers(QuantKernelIsa::kAvx512Vnni, GgmlType::kQ8_0, 256)) {
    std::printf("[ SKIPPED  ] no packed kernel on this CPU (avx512vnni)\n");
    GTEST_SKIP();
  }
  const int64_t vocab = 70, hidden = 512;
  const QuantTypeInfo& info = *FindQuantTypeInfo(GgmlType::kQ3_K);
  const std::vector<uint8_t> w = RandomBlocks(info, vocab, hidden, 14);
  LmHead::Options o;
  o.weights = w.data();
  o.vocab_size = vocab;
  o.hidden_size = hidden;
  o.weights_quant = GgmlType::kQ3_K;
  absl::StatusOr<std::unique_ptr<LmHead>> h = LmHead::Create(o);
  ASSERT_TRUE(h.ok()) << h.status();
  const int measured = (*h)->quant_gf_rows_max();
  if (QuantCpuHasGfni()) {
    EXPECT_TRUE(measured >= 0 && measured <= kPackedGfRowsMax) << measured;
    EXPECT_NE((*h)->implementation().find(absl::StrCat(
                  "codes cut by gf2p8affineqb in tiles of <= ", measured,
                  " rows, measured from L3 on 70 weight rows: M = 1 gf2p8affineqb ")),
              std::string::npos)
        << (*h)->implementation();
  } else {
    std::printf("[ SKIPPED  ] part: the measurement (no GFNI on this CPU)\n");
    EXPECT_EQ(measured, 0);
    EXPECT_NE((*h)->implementation().find("tiles of <= 0 rows, no GFNI"), std::string::npos)
        << (*h)->implementation();
  }
  const std::vector<float> x = testing::RandomNormal(static_cast<size_t>(2 * hidden), 8);
  std::vector<float> ref(static_cast<size_t>(2 * vocab)), out(ref.size());
  ASSERT_TRUE((*h)->Compute(x.data(), 2, ref.data()).ok());
  {
    ScopedEnv env("VOCABD_QUANT_GF_ROWS", "1");
    h = LmHead::Create(o);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ((*h)->quant_gf_rows_max(), QuantCpuHasGfni() ? 1 : 0);
    o.quant_gf_rows_max = 2;  // the option wins over the variable
    h = LmHead::Create(o);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ((*h)->quant_gf_rows_max(), QuantCpuHasGfni() ? 2 : 0);
    ASSERT_TRUE((*h)->Compute(x.data(), 2, out.data()).ok());
    EXPECT_EQ(0, std::memcmp(out.data(), ref.data(), out.size() * sizeof(float)));
    o.quant_gf_rows_max = 0;
    h = LmHead::Create(o);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ((*h)->quant_gf_rows_max(), 0);
    ASSERT_TRUE((*h)->Compute(x.data(), 2, out.data()).ok());
    EXPECT_EQ(0, std::memcmp(out.data(), ref.data(), out.size() * sizeof(float)));
  }
  for (int bad : {-2, 3}) {
    o.quant_gf_rows_max = bad;
    ExpectInvalid(o, absl::StrCat("quant_gf_rows_max = ", bad, " must be in [-1, 2]"));
  }
  o.quant_gf_rows_max = -1;
  for (const char* bad : {"3", "-1", "one"}) {
    ScopedEnv env("VOCABD_QUANT_GF_ROWS", bad);
    ExpectInvalid(o, absl::StrCat("VOCABD_QUANT_GF_ROWS = '", bad, "' (want an integer in [0, 2])"));
  }
  o.quant_pack = false;
  h = LmHead::Create(o);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ((*h)->quant_gf_rows_max(), -1);
  EXPECT_EQ((*h)->implementation().find("gf2p8affineqb"), std::string::npos);
}

// The packed kernel's prefetch distance: measured at Create by default (one
// of the candidates 0, 1, 2, 4, with the times in implementation()), set
// by Options::quant_prefetch_records or VOCABD_QUANT_PREFETCH (the option
// wins), out-of-range values refused naming the option or variable; -1
// for a head that is not packed; a second distance, measured at M = 16,
// for calls of more than 8 rows. Prefetching never changes a bit: every
// type, M = 1, 5 (a partial last group) and 20 (the distance of calls of
// more than 8 rows), distances 0, 1 and 8 agree.
TEST(LmHeadQuant, PackedPrefetchIsMeasuredOrSetAndChangesNoBit) {
  if (!QuantPackedCovers(QuantKernelIsa::kAvx512Vnni, GgmlType::kQ8_0, 256)) {
    std::printf("[ SKIPPED  ] no packed kernel on this CPU (avx512vnni)\n");
    GTEST_SKIP();
  }
  const int64_t vocab = 70, hidden = 512;
  for (GgmlType type : kAllTypes) {
    const QuantTypeInfo& info = *FindQuantTypeInfo(type);
    SCOPED_TRACE(info.name);
    const std::vector<uint8_t> w = RandomBlocks(info, vocab, hidden, 11);
    for (int64_t rows : {1, 5, 20}) {
      const std::vector<float> x = testing::RandomNormal(static_cast<size_t>(rows * hidden), 5);
      const std::vector<float> p0 = RunHead(w.data(), type, vocab, hidden, x, rows, 0, true, 0);
      for (int pf : {1, 8}) {
        const std::vector<float> p = RunHead(w.data(), type, vocab, hidden, x, rows, 0, true, pf);
        EXPECT_EQ(0, std::memcmp(p.data(), p0.data(), p.size() * sizeof(float)))
            << "rows " << rows << " prefetch " << pf;
      }
    }
  }
  const QuantTypeInfo& info = *FindQuantTypeInfo(GgmlType::kQ4_K);
  const std::vector<uint8_t> w = RandomBlocks(info, vocab, hidden, 12);
  LmHead::Options o;
  o.weights = w.data();
  o.vocab_size = vocab;
  o.hidden_size = hidden;
  o.weights_quant = GgmlType::kQ4_K;
  absl::StatusOr<std::unique_ptr<LmHead>> h = LmHead::Create(o);
  ASSERT_TRUE(h.ok()) << h.status();
  // A measured distance is one of the candidates, and implementation() names
  // it before its measurement (`before` distance `after` ... 0 <time>).
  auto expect_measured = [&](int records, const char* before, const char* after) {
    EXPECT_TRUE(records == 0 || records == 1 || records == 2 || records == 4) << records;
    EXPECT_NE((*h)->implementation().find(absl::StrCat(before, records, after)), std::string::npos)
        << (*h)->implementation();
  };
  expect_measured((*h)->quant_prefetch_records(), "prefetched ",
                  " records ahead (measured at M = 1 on 70 weight rows: 0 ");
  // Calls of more than one tile of input rows: measured on their own.
  expect_measured((*h)->quant_prefetch_records_many(), " at <= 8 rows, ",
                  " above (measured at M = 16 on 70 weight rows: 0 ");
  {
    ScopedEnv env("VOCABD_QUANT_PREFETCH", "3");
    h = LmHead::Create(o);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ((*h)->quant_prefetch_records(), 3);
    EXPECT_EQ((*h)->quant_prefetch_records_many(), 3);
    EXPECT_NE((*h)->implementation().find("prefetched 3 records ahead at <= 8 rows, 3 above; "),
              std::string::npos)
        << (*h)->implementation();
    o.quant_prefetch_records = 5;  // the option wins over the variable
    h = LmHead::Create(o);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ((*h)->quant_prefetch_records(), 5);
    EXPECT_EQ((*h)->quant_prefetch_records_many(), 5);
  }
  for (int bad : {-2, 9}) {
    o.quant_prefetch_records = bad;
    ExpectInvalid(o, absl::StrCat("quant_prefetch_records = ", bad, " must be in [-1, 8]"));
  }
  o.quant_prefetch_records = -1;
  for (const char* bad : {"9", "-1", "two"}) {
    ScopedEnv env("VOCABD_QUANT_PREFETCH", bad);
    ExpectInvalid(o, absl::StrCat("VOCABD_QUANT_PREFETCH = '", bad, "' (want an integer in [0, 8])"));
  }
  o.quant_pack = false;
  h = LmHead::Create(o);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ((*h)->quant_prefetch_records(), -1);
  EXPECT_EQ((*h)->quant_prefetch_records_many(), -1);
  EXPECT_EQ((*h)->implementation().find("prefetch"), std::string::npos);
}

// The crossover between a path's two kernels: measured at Create by
// default (a value in [0, 8] on a path with two kernels, -1 on one with
// one), set by Options::quant_few_rows_max or VOCABD_QUANT_FEW_ROWS_MAX,
// out-of-range values refused naming the option; and the rows obey it:
// with few_rows_max = 3, M = 3 gives the few-row kernel's bits (as under 8)
// and M = 5 the other kernel's (as under 0).
TEST(LmHeadQuant, FewRowsCrossoverIsMeasuredOrSetAndObeyed) {
  const QuantTypeInfo& info = *FindQuantTypeInfo(GgmlType::kQ8_0);
  const int64_t vocab = 333, hidden = 512;
  const std::vector<uint8_t> w = RandomBlocks(info, vocab, hidden, 5);
  const std::vector<float> x = testing::RandomNormal(static_cast<size_t>(5 * hidden), 9);
  LmHead::Options o;
  o.weights = w.data();
  o.vocab_size = vocab;
  o.hidden_size = hidden;
  o.weights_quant = GgmlType::kQ8_0;
  o.quant_pack = false;  // the in-place kernels (a packed head has one kernel)
  for (QuantKernelIsa isa : kAllIsas) {
    if (!QuantKernelIsaSupported(isa)) continue;  // named in ImplementationNamesTypeAndPath
    SCOPED_TRACE(QuantKernelIsaName(isa));
    ScopedKernelEnv env(QuantKernelIsaName(isa));
    const bool two = QuantKernelHasCrossover(isa, GgmlType::kQ8_0, hidden);
    o.quant_few_rows_max = -1;
    absl::StatusOr<std::unique_ptr<LmHead>> measured = LmHead::Create(o);
    ASSERT_TRUE(measured.ok()) << measured.status();
    if (!two) {
      EXPECT_EQ((*measured)->quant_few_rows_max(), -1);
      continue;
    }
    EXPECT_GE((*measured)->quant_few_rows_max(), 0);
    EXPECT_LE((*measured)->quant_few_rows_max(), kFewRowsLimit);
    std::printf("%s: measured few_rows_max %lld\n", QuantKernelIsaName(isa),
                static_cast<long long>((*measured)->quant_few_rows_max()));
    {
      ScopedEnv few("VOCABD_QUANT_FEW_ROWS_MAX", "2");
      absl::StatusOr<std::unique_ptr<LmHead>> h = LmHead::Create(o);
      ASSERT_TRUE(h.ok()) << h.status();
      EXPECT_EQ((*h)->quant_few_rows_max(), 2);
      o.quant_few_rows_max = 6;  // the option wins over the environment
      h = LmHead::Create(o);
      ASSERT_TRUE(h.ok()) << h.status();
      EXPECT_EQ((*h)->quant_few_rows_max(), 6);
    }
    for (int64_t m : {3, 5}) {
      const std::vector<float> three = RunHead(w.data(), GgmlType::kQ8_0, vocab, hidden, x, m, 3);
      const std::vector<float> few = RunHead(w.data(), GgmlType::kQ8_0, vocab, hidden, x, m, 8);
      const std::vector<float> other = RunHead(w.data(), GgmlType::kQ8_0, vocab, hidden, x, m, 0);
      const std::vector<float>& want = m <= 3 ? few : other;
      EXPECT_EQ(0, std::memcmp(three.data(), want.data(), three.size() * sizeof(float))) << "M = " << m;
    }
  }
  // Above kFewRowsLimit rows with few_rows_max = kFewRowsLimit, the avx2
  // path runs the fused kernel in groups of 8 rows (the same bits as each
  // group alone); with few_rows_max = 0 its unpacking kernel: the two agree
  // to float rounding. Every type, at a hidden size both kernels take.
  if (QuantKernelIsaSupported(QuantKernelIsa::kAvx2)) {
    ScopedKernelEnv env("avx2");
    for (GgmlType type : kAllTypes) {
      SCOPED_TRACE(FindQuantTypeInfo(type)->name);
      const std::vector<uint8_t> wt = RandomBlocks(*FindQuantTypeInfo(type), vocab, hidden, 11);
      const std::vector<float> x13 = testing::RandomNormal(static_cast<size_t>(13 * hidden), 4);
      const std::vector<float> grouped = RunHead(wt.data(), type, vocab, hidden, x13, 13, 8);
      const std::vector<float> unpacked = RunHead(wt.data(), type, vocab, hidden, x13, 13, 0);
      const std::vector<float> first8 = RunHead(wt.data(), type, vocab, hidden, x13, 8, 8);
      const std::vector<float> last5(x13.begin() + 8 * hidden, x13.end());
      const std::vector<float> tail = RunHead(wt.data(), type, vocab, hidden, last5, 5, 8);
      EXPECT_EQ(0, std::memcmp(grouped.data(), first8.data(), first8.size() * sizeof(float)));
      EXPECT_EQ(0, std::memcmp(grouped.data() + 8 * vocab, tail.data(), tail.size() * sizeof(float)));
      for (int64_t m = 0; m < 13; ++m) {
        std::vector<double> ref(unpacked.begin() + m * vocab, unpacked.begin() + (m + 1) * vocab);
        std::vector<float> got(grouped.begin() + m * vocab, grouped.begin() + (m + 1) * vocab);
        ASSERT_LE(RelativeError(got, ref), 1e-5) << "row " << m;
      }
    }
  }
  o.quant_few_rows_max = 9;
  absl::StatusOr<std::unique_ptr<LmHead>> bad = LmHead::Create(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("quant_few_rows_max = 9 must be in [-1, 8]"),
            std::string::npos) << bad.status();
  o.quant_few_rows_max = -1;
  ScopedEnv few("VOCABD_QUANT_FEW_ROWS_MAX", "many");
  bad = LmHead::Create(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message())
                .find("VOCABD_QUANT_FEW_ROWS_MAX = 'many' (want an integer in [0, 8])"),
            std::string::npos) << bad.status();
}

// A NaN or infinity in a hidden row makes that row's logits NaN on every
// path and kernel (as F32 weights do), and leaves the other rows alone.
TEST(LmHeadQuant, NonFiniteHiddenGivesNaNLogits) {
  const QuantTypeInfo& info = *FindQuantTypeInfo(GgmlType::kQ8_0);
  const int64_t vocab = 37, hidden = 256, rows = 9;
  const std::vector<uint8_t> w = RandomBlocks(info, vocab, hidden, 5);
  std::vector<float> x = testing::RandomNormal(static_cast<size_t>(rows * hidden), 9);
  x[1 * hidden + 3] = std::nanf("");
  x[4 * hidden + 40] = std::numeric_limits<float>::infinity();
  for (const Variant& k : Variants(GgmlType::kQ8_0, hidden)) {
    const QuantKernelIsa isa = k.isa;
    ScopedKernelEnv env(QuantKernelIsaName(isa));
    for (int64_t m : {int64_t{5}, rows}) {  // few-row and many-row kernels
      const std::vector<float> logits =
          RunHead(w.data(), GgmlType::kQ8_0, vocab, hidden, x, m, k.few(), k.pack);
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t v = 0; v < vocab; ++v) {
          const float l = logits[static_cast<size_t>(r * vocab + v)];
          if (r == 1 || r == 4) {
            ASSERT_TRUE(std::isnan(l)) << QuantKernelIsaName(isa) << " row " << r;
          } else {
            ASSERT_TRUE(std::isfinite(l)) << QuantKernelIsaName(isa) << " row " << r;
          }
        }
      }
    }
  }
}

// The activations are quantized 16 lanes at a time on AVX-512 CPUs
// (Avx512QuantizeActivations) and in plain C++ elsewhere: the same bytes,
// on random rows and on blocks made to hit every edge: x * inv exactly
// halfway between two codes (nearest-even), all zeros, -0.0, a NaN or an
// infinity (scale NaN, codes 0), subnormals, the largest floats.
TEST(LmHeadQuant, ActivationQuantizationIsTheSameOnEveryPath) {
  if (!QuantKernelIsaSupported(QuantKernelIsa::kAvx512Vnni)) {
    std::printf("[ SKIPPED  ] Avx512QuantizeActivations: no avx512vnni on this CPU\n");
    GTEST_SKIP();
  }
  const int64_t d = 512, rows = 12;
  std::vector<float> x = testing::RandomNormal(static_cast<size_t>(rows * d), 21);
  float* r = x.data() + d;  // row 1: crafted blocks
  // Blocks 0 and 1: amax 127, so inv is exactly 1 and x + 0.5 are ties.
  for (int i = 0; i < 32; ++i) r[i] = -(static_cast<float>(i) + 0.5f);
  r[31] = -127.0f;
  for (int i = 0; i < 32; ++i) r[32 + i] = static_cast<float>(i) + 0.5f;
  r[63] = 127.0f;
  for (int i = 0; i < 32; ++i) r[64 + i] = 0.0f;
  for (int i = 0; i < 32; ++i) r[96 + i] = -0.0f;
  r[128 + 5] = std::nanf("");
  r[160 + 31] = std::numeric_limits<float>::infinity();
  r[192 + 2] = -std::numeric_limits<float>::infinity();
  // Block 7: all subnormal (127 / amax overflows a float); block 9: a normal
  // amax with subnormal lanes.
  for (int i = 0; i < 32; ++i) r[224 + i] = std::numeric_limits<float>::denorm_min() * static_cast<float>(i);
  for (int i = 0; i < 32; ++i) r[288 + i] = std::numeric_limits<float>::denorm_min() * static_cast<float>(i + 1);
  r[288 + 7] = 1.0f;
  for (int i = 0; i < 32; ++i) r[256 + i] = std::numeric_limits<float>::max() * (i % 2 ? 1.0f : -0.5f);
  const int64_t bytes = QuantActRowBytes(d);
  std::vector<uint8_t> a(static_cast<size_t>(rows * bytes) + 64, 0xAB), b = a;
  auto aligned = [](std::vector<uint8_t>& v) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(v.data()) + 63) & ~uintptr_t{63});
  };
  quant_kernel_internal::QuantizeActivationsScalar(x.data(), rows, d, aligned(a));
  quant_kernel_internal::Avx512QuantizeActivations(x.data(), rows, d, aligned(b));
  EXPECT_EQ(0, std::memcmp(aligned(a), aligned(b), static_cast<size_t>(rows * bytes)));
  // The public entry takes the AVX-512 form here.
  std::vector<uint8_t> c(a.size(), 0x5C);
  QuantizeActivations(x.data(), rows, d, aligned(c));
  EXPECT_EQ(0, std::memcmp(aligned(a), aligned(c), static_cast<size_t>(rows * bytes)));
  // The crafted ties did round to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, and
  // the same below zero.
  const auto* codes = reinterpret_cast<const int8_t*>(aligned(b) + bytes);
  EXPECT_EQ(codes[32 + 0], 0);
  EXPECT_EQ(codes[32 + 1], 2);
  EXPECT_EQ(codes[32 + 2], 2);
  EXPECT_EQ(codes[0], 0);
  EXPECT_EQ(codes[1], -2);
  EXPECT_EQ(codes[2], -2);
  // The all-subnormal block has codes round(x * 127 / amax) as for any other
  // amax (here i * 127 / 31), not the garbage of an infinite inverse.
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(codes[224 + i], static_cast<int8_t>(std::nearbyint(static_cast<float>(i) * (127.0f / 31.0f))))
        << "lane " << i;
  }
  for (int i = 0; i < 32; ++i) EXPECT_EQ(codes[288 + i], i == 7 ? 127 : 0) << "lane " << i;
}

TEST(LmHeadQuant, CreateRejectsBadOptions) {
  std::vector<uint8_t> w(1 << 16);
  LmHead::Options o;
  o.weights = w.data();
  o.vocab_size = 4;
  o.hidden_size = 500;
  o.weights_quant = GgmlType::kQ4_K;
  absl::StatusOr<std::unique_ptr<LmHead>> head = LmHead::Create(o);
  EXPECT_EQ(head.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(head.status().message().find("hidden_size = 500"), std::string::npos);
  EXPECT_NE(head.status().message().find("Q4_K's block size 256"), std::string::npos)
      << head.status();
  o.hidden_size = 48;
  o.weights_quant = GgmlType::kQ8_0;
  head = LmHead::Create(o);
  EXPECT_EQ(head.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(head.status().message().find("Q8_0's block size 32"), std::string::npos);
  o.hidden_size = 64;
  o.weights_quant = GgmlType::kQ8_K;  // activations-only type
  head = LmHead::Create(o);
  EXPECT_EQ(head.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(head.status().message().find("ggml type 15"), std::string::npos) << head.status();
  o.weights_quant = static_cast<GgmlType>(99);
  EXPECT_EQ(LmHead::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.weights_quant = GgmlType::kQ8_0;
  o.vocab_size = 0;
  head = LmHead::Create(o);
  EXPECT_EQ(head.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(head.status().message().find("vocab_size = 0"), std::string::npos);
  o.vocab_size = 4;
  o.weights = nullptr;
  EXPECT_EQ(LmHead::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.weights = w.data();
  {
    ScopedKernelEnv env("avx1024");
    head = LmHead::Create(o);
    EXPECT_EQ(head.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(head.status().message().find("avx1024"), std::string::npos);
  }
  head = LmHead::Create(o);
  ASSERT_TRUE(head.ok()) << head.status();
  std::vector<float> x(64), logits(4);
  EXPECT_EQ((*head)->Compute(x.data(), -1, logits.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*head)->Compute(nullptr, 1, logits.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*head)->Compute(nullptr, 0, nullptr).ok());
}

}  // namespace
}  // namespace vocabd
