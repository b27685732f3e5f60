// Quantized GGUF, the model side: tables served natively (Embed
// bit for bit as ggml through the Model), --weights-dtype q8_0 (one copy,
// tied head shared, error bound), BF16 served from the mapping and F16
// converted once with peak RSS within 1.1x of the served bytes.
//
// Tests named *NeedsQuantHead* create a Model whose LM head is quantized
// too, so they also run lib/head's quantized kernels (lib/head/quant_kernel.h).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/core/dtype.h"
#include "lib/head/lm_head_kernel.h"
#include "lib/quant/dequantize.h"
#include "lib/quant/ggml_types.h"
#include "lib/quant/quantize.h"
#include "lib/serving/model.h"
#include "tests/quant_files.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Model> LoadQuantModel(Model::Options o) {
  auto model = Model::Create(o);
  EXPECT_TRUE(model.ok()) << o.path << ": " << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

// Embeds the golden ids (no scale, no positions) and compares every bit
// with ggml's dequantized rows.
void ExpectGoldenEmbedding(const Model& model, const nlohmann::json& golden) {
  EmbedInput in;
  in.token_ids.push_back(golden["embedding_ids"].get<std::vector<int64_t>>());
  EmbedOutput out;
  ASSERT_TRUE(model.Embed(in, &out).ok());
  const int64_t hidden = golden["hidden_size"];
  int64_t mismatches = 0;
  for (size_t i = 0; i < golden["embedding_rows"].size(); ++i) {
    const auto want = golden["embedding_rows"][i].get<std::vector<double>>();
    for (int64_t j = 0; j < hidden; ++j) {
      if (testing::FloatBits(out.embeddings[i * hidden + j]) !=
          testing::FloatBits(static_cast<float>(want[j]))) {
        ++mismatches;
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

// Passes without the quantized head: the embedding table is the golden
// file's quantized token_embd (copied byte for byte), the head F32.
TEST(ModelQuantTest, EmbedFromQuantizedTableIsGgmlBitForBit) {
  const std::string dir = testing::MakeTempDir();
  for (const std::string& stem : testing::QuantGoldenStems()) {
    SCOPED_TRACE(stem);
    const nlohmann::json golden = testing::QuantGolden(stem);
    const std::string path = testing::WriteQuantEmbeddingGguf(stem, dir);
    auto model = LoadQuantModel({"q", path});
    ASSERT_NE(model, nullptr);
    EXPECT_STREQ(quant::GgmlTypeName(model->embedding_type()),
                 golden["token_embd_type"].get<std::string>().c_str());
    EXPECT_EQ(model->lm_head_type(), quant::GgmlType::kF32);
    const WeightTensor& e = model->checkpoint().embedding();
    // In place from the mapping: the file's bytes, not a copy.
    EXPECT_NE(model->checkpoint().MappingOf(e.data, e.nbytes), nullptr);
    EXPECT_EQ(static_cast<int64_t>(e.nbytes), quant::RowBytes(*e.quant_type, 512) * 1024);
    EXPECT_EQ(model->checkpoint().resident_bytes(),
              static_cast<int64_t>(e.nbytes) + 1024 * 512 * 4 + 512 * 4);
    ExpectGoldenEmbedding(*model, golden);
  }
}

// The golden files themselves (quantized heads): served natively, Embed
// bit-exact, logits within ggml's own error. NEEDS the quantized LM head.
TEST(ModelQuantTest, GoldenFilesServedNativelyNeedsQuantHead) {
  for (const std::string& stem : testing::QuantGoldenStems()) {
    SCOPED_TRACE(stem);
    const nlohmann::json golden = testing::QuantGolden(stem);
    auto model = LoadQuantModel({"q", testing::QuantGoldenPath(stem, ".gguf")});
    ASSERT_NE(model, nullptr);
    EXPECT_STREQ(quant::GgmlTypeName(model->embedding_type()),
                 golden["token_embd_type"].get<std::string>().c_str());
    EXPECT_STREQ(quant::GgmlTypeName(model->lm_head_type()),
                 golden["output_type"].get<std::string>().c_str());
    EXPECT_EQ(model->config().tie_word_embeddings, golden["tied"].get<bool>());
    const Checkpoint& c = model->checkpoint();
    EXPECT_NE(c.MappingOf(c.lm_head().data, c.lm_head().nbytes), nullptr);
    const int64_t head_bytes = golden["tied"].get<bool>() ? 0 : c.lm_head().nbytes;
    EXPECT_EQ(c.resident_bytes(),
              static_cast<int64_t>(c.embedding().nbytes) + head_bytes + 512 * 4);
    ExpectGoldenEmbedding(*model, golden);
    // Logits without the final norm against float64 of ggml's dequantized
    // head: no worse than ggml's own int8-activation path on this file.
    std::vector<float> hidden;
    for (const auto& row : golden["hidden"]) {
      for (double v : row) hidden.push_back(static_cast<float>(v));
    }
    HeadInput in;
    in.hidden = hidden.data();
    in.rows = static_cast<int64_t>(golden["hidden"].size());
    in.width = 512;
    in.apply_final_norm = false;
    std::vector<float> logits;
    ASSERT_TRUE(model->ComputeLogits(in, false, &logits).ok());
    double max_logit = 0, ours = 0, ggml = 0;
    for (int64_t r = 0; r < in.rows; ++r) {
      for (int64_t v = 0; v < 1024; ++v) {
        const double exact = golden["logits_exact_f64"][r][v];
        max_logit = std::max(max_logit, std::fabs(exact));
        ours = std::max(ours, std::fabs(logits[r * 1024 + v] - exact));
        ggml = std::max(ggml, std::fabs(golden["logits_ggml"][r][v].get<double>() - exact));
      }
    }
    EXPECT_LE(ours / max_logit, ggml / max_logit);
  }
}

// A finite row at the edge of float32 (one value FLT_MAX, no final norm):
// every quantized head answers finite logits or refuses the row naming it,
// never inf/NaN with OK (the types with a min overflow their activation
// sums da * sum(codes) there: refused).
TEST(ModelQuantTest, EdgeOfRangeRowIsAnsweredFiniteOrRefusedNeedsQuantHead) {
  int refused = 0, answered = 0;
  for (const std::string& stem : testing::QuantGoldenStems()) {
    SCOPED_TRACE(stem);
    auto model = LoadQuantModel({"q", testing::QuantGoldenPath(stem, ".gguf")});
    ASSERT_NE(model, nullptr);
    for (float edge : {3.4028235e38f, -3.4028235e38f, 1e37f}) {
      std::vector<float> hidden(2 * 512, 0.0f);
      hidden[512 + 5] = edge;
      for (int j = 0; j < 512; ++j) hidden[j] = 0.01f * static_cast<float>(j % 7);
      HeadInput in{hidden.data(), 2, 512};
      in.apply_final_norm = false;
      std::vector<float> logits;
      const absl::Status st = model->ComputeLogits(in, false, &logits);
      if (st.ok()) {
        ++answered;
        for (float v : logits) ASSERT_TRUE(std::isfinite(v)) << edge;
      } else {
        ++refused;
        EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
        EXPECT_THAT(st.message(), HasSubstr("hidden[1] is finite but logits[1, "));
      }
    }
  }
  // Both outcomes occur (Q8_0 answers 1e37; Q4_K's sums overflow at FLT_MAX).
  EXPECT_GT(answered, 0);
  EXPECT_GT(refused, 0);
}

// --weights-dtype q8_0: every weight within the stated bound of the F32
// table (quant::QuantizeRow q8_0, ggml's reference rounding):
//   |w - q8_0(w)| <= max|w of its block of 32| * (1/254 + 1/2048)
// (half a step d/2 = max/254, plus the f16 rounding of d over 127 steps).
TEST(ModelQuantTest, Q8_0BoundOnTheStoriesTable) {
  auto f32 = LoadQuantModel({"f32", testing::Stories260KBin()});
  ASSERT_NE(f32, nullptr);
  const WeightTensor& t = f32->checkpoint().embedding();
  ASSERT_EQ(t.dtype, DType::kF32);
  const int64_t hidden = 64;
  std::vector<uint8_t> blocks(static_cast<size_t>(quant::RowBytes(quant::GgmlType::kQ8_0, hidden)));
  std::vector<float> back(hidden);
  double worst = 0;
  for (int64_t r = 0; r < 512; ++r) {
    const float* row = t.f32() + r * hidden;
    ASSERT_TRUE(quant::QuantizeRow(quant::GgmlType::kQ8_0, row, hidden, blocks.data()));
    ASSERT_TRUE(quant::DequantizeRow(quant::GgmlType::kQ8_0, blocks.data(), hidden, back.data()));
    for (int64_t b = 0; b < hidden; b += 32) {
      double amax = 0;
      for (int64_t j = b; j < b + 32; ++j) amax = std::max(amax, std::fabs(double{row[j]}));
      for (int64_t j = b; j < b + 32; ++j) {
        const double err = std::fabs(double{row[j]} - back[j]);
        EXPECT_LE(err, amax * (1.0 / 254 + 1.0 / 2048) * (1 + 1e-6)) << r << "," << j;
        if (amax > 0) worst = std::max(worst, err / amax);
      }
    }
  }
  std::printf("q8_0 stories260K: max |w - q8_0(w)| / block max = %.5f (bound %.5f)\n", worst,
              1.0 / 254 + 1.0 / 2048);
}

// The flag through the Model: one q8_0 copy shared by the tied head, Embed
// = dequantized q8_0 rows. NEEDS the quantized LM head.
TEST(ModelQuantTest, WeightsDtypeQ8_0NeedsQuantHead) {
  auto f32 = LoadQuantModel({"f32", testing::Stories260KBin()});
  Model::Options o{"q8", testing::Stories260KBin()};
  o.weights_dtype = WeightsDType::kQ8_0;
  auto q8 = LoadQuantModel(o);
  ASSERT_NE(f32, nullptr);
  ASSERT_NE(q8, nullptr);
  const Checkpoint& c = q8->checkpoint();
  EXPECT_EQ(q8->embedding_type(), quant::GgmlType::kQ8_0);
  EXPECT_EQ(q8->lm_head_type(), quant::GgmlType::kQ8_0);
  EXPECT_EQ(c.lm_head().data, c.embedding().data);  // tied: one copy
  EXPECT_EQ(c.resident_bytes(), 512 * (64 / 32) * 34 + 64 * 4);
  EmbedInput in;
  in.token_ids = {{0, 1, 200, 511}};
  EmbedOutput got;
  ASSERT_TRUE(q8->Embed(in, &got).ok());
  std::vector<uint8_t> blocks(static_cast<size_t>(quant::RowBytes(quant::GgmlType::kQ8_0, 64)));
  std::vector<float> want(64);
  for (size_t i = 0; i < in.token_ids[0].size(); ++i) {
    const float* row = f32->checkpoint().embedding().f32() + in.token_ids[0][i] * 64;
    quant::QuantizeRow(quant::GgmlType::kQ8_0, row, 64, blocks.data());
    quant::DequantizeRow(quant::GgmlType::kQ8_0, blocks.data(), 64, want.data());
    EXPECT_EQ(0, std::memcmp(got.embeddings.data() + i * 64, want.data(), 64 * 4));
  }
}

TEST(ModelQuantTest, WeightsDtypeQ8_0RefusesOtherQuantTables) {
  const std::string path =
      testing::WriteQuantEmbeddingGguf("Q4_K", testing::MakeTempDir());
  Model::Options o{"q", path};
  o.weights_dtype = WeightsDType::kQ8_0;
  auto model = Model::Create(o);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), HasSubstr("is already q4_K"));
}

// ---------------------------------------------------------------- memory

int64_t StatusKb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::strlen(key)));
  }
  return -1;
}

// Writes an HF folder: config.json (llama, tied, no layers) and a
// model.safetensors with embed [vocab, hidden] of `dtype` (F32, BF16 or F16;
// generated in 2 MiB pieces, never held whole) and an F32 norm.
std::string WriteBigCheckpoint(const std::string& dtype, int64_t vocab, int64_t hidden) {
  const std::string dir = testing::MakeTempDir();
  nlohmann::json cfg = {{"model_type", "llama"}, {"vocab_size", vocab}, {"hidden_size", hidden},
                        {"num_hidden_layers", 0}, {"num_attention_heads", hidden / 128},
                        {"num_key_value_heads", hidden / 128}, {"intermediate_size", 0},
                        {"max_position_embeddings", 4096}, {"rms_norm_eps", 1e-5},
                        {"tie_word_embeddings", true}};
  std::ofstream(dir + "/config.json") << cfg.dump();
  const int64_t elem = dtype == "F32" ? 4 : 2;
  const int64_t table = vocab * hidden * elem;
  nlohmann::json header = {
      {"model.embed_tokens.weight",
       {{"dtype", dtype}, {"shape", {vocab, hidden}}, {"data_offsets", {0, table}}}},
      {"model.norm.weight",
       {{"dtype", "F32"}, {"shape", {hidden}}, {"data_offsets", {table, table + hidden * 4}}}}};
  std::string text = header.dump();
  text.resize((text.size() + 8 + 63) / 64 * 64 - 8, ' ');  // data 64-byte aligned
  std::ofstream out(dir + "/model.safetensors", std::ios::binary);
  const uint64_t len = text.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << text;
  std::vector<uint8_t> piece(size_t{1} << 21);
  uint32_t state = 12345;
  for (int64_t done = 0; done < table; done += static_cast<int64_t>(piece.size())) {
    for (size_t i = 0; i < piece.size(); i += static_cast<size_t>(elem)) {
      state = state * 1664525u + 1013904223u;
      const float f = static_cast<float>(static_cast<int32_t>(state >> 8) - (1 << 23)) / (1 << 26);
      const uint16_t h = dtype == "BF16" ? FloatToBFloat16(f) : FloatToHalf(f);
      if (elem == 4) {
        std::memcpy(piece.data() + i, &f, 4);
      } else {
        std::memcpy(piece.data() + i, &h, 2);
      }
    }
    out.write(reinterpret_cast<const char*>(piece.data()),
              std::min<int64_t>(table - done, static_cast<int64_t>(piece.size())));
  }
  const std::vector<float> norm(static_cast<size_t>(hidden), 1.0f);
  out.write(reinterpret_cast<const char*>(norm.data()), hidden * 4);
  return dir;
}

// Peak RSS while creating the model, over the RSS before, against the bytes
// it serves (resident_bytes). VmHWM is reset first (clear_refs 5).
std::unique_ptr<Model> ExpectPeakWithin(const std::string& dir, WeightsDType dtype,
                                        quant::GgmlType want_type, bool head_huge_pages = true) {
  { std::ofstream("/proc/self/clear_refs") << "5"; }
  const int64_t before_kb = StatusKb("VmRSS:");
  Model::Options o{"big", dir};
  o.weights_dtype = dtype;
  o.head_huge_pages = head_huge_pages;
  auto model = LoadQuantModel(o);
  EXPECT_NE(model, nullptr);
  if (model == nullptr) return nullptr;
  model->WaitForHeadCopy();  // the background huge-page copy is part of the load
  const int64_t peak_kb = StatusKb("VmHWM:");
  EXPECT_GT(before_kb, 0);
  EXPECT_GT(peak_kb, 0);
  EXPECT_EQ(model->embedding_type(), want_type);
  const double served = static_cast<double>(model->checkpoint().resident_bytes());
  const double peak = static_cast<double>(peak_kb - before_kb) * 1024;
  std::printf("%s%s: peak RSS while loading %.1f MB over %.1f MB served = %.3fx\n",
              quant::GgmlTypeName(want_type), head_huge_pages ? "" : " (in place)", peak / 1e6,
              served / 1e6, peak / served);
  EXPECT_RSS_LE(peak, 1.1 * served);
  return model;
}

// Whether this CPU's head kernel for `type` reads a packed copy
// (LmHead::Options::dense_pack): F32 on AVX-512, BF16 on AVX512_BF16
// without AMX.
bool PacksDense(quant::GgmlType type) {
  const HeadKernelIsa isa = DetectHeadKernelIsa();
  if (type == quant::GgmlType::kF32) return isa != HeadKernelIsa::kNone;
  return isa == HeadKernelIsa::kAvx512Bf16 && !HeadKernelAmxAvailable();
}

// An F32 / BF16 head (tied: the embedding) is packed in the background after
// load where the CPU's kernel reads a packed copy (LmHead::Options::
// dense_pack), else (and with VOCABD_DENSE_PACK=0) copied into huge pages
// (Model::Options::head_huge_pages), 4 MiB at a time; either way each
// packed or copied piece of the mapping is dropped from RSS: one copy
// resident. Without the copy the head reads the mapping itself.
// Loads `dir` packed (where the CPU packs), copied and in place, each within
// the peak-RSS bound: the copies are outside the mapping (advised for THP),
// in place is not.
void ExpectCopiedAndInPlace(const std::string& dir, quant::GgmlType want_type) {
  testing::ScopedEnv unset("VOCABD_HEAD_HUGE_PAGES", nullptr);
  {
    testing::ScopedEnv unset_pack("VOCABD_DENSE_PACK", nullptr);
    auto packed = ExpectPeakWithin(dir, WeightsDType::kAuto, want_type);
    ASSERT_NE(packed, nullptr);
    if (PacksDense(want_type)) {
      EXPECT_EQ(packed->head_memory(), "huge pages (packed at load)");
      EXPECT_GT(packed->lm_head().dense_pack_bytes(), packed->lm_head().weight_bytes());
      EXPECT_EQ(packed->resident_bytes(), packed->checkpoint().resident_bytes());
      EXPECT_NE(packed->lm_head_implementation().find("(every M; weights packed, "),
                std::string::npos)
          << packed->lm_head_implementation();
    } else {
      EXPECT_EQ(packed->head_memory(), "huge pages (copied at load)");
    }
  }
  testing::ScopedEnv row_major("VOCABD_DENSE_PACK", "0");
  auto copied = ExpectPeakWithin(dir, WeightsDType::kAuto, want_type);
  ASSERT_NE(copied, nullptr);
  EXPECT_EQ(copied->head_memory(), "huge pages (copied at load)");
  EXPECT_EQ(copied->lm_head().packed_bytes(), 0);
  const void* w = copied->lm_head().weights();
  EXPECT_EQ(copied->checkpoint().MappingOf(w, 1), nullptr);
  EXPECT_TRUE(!testing::ThpInKernel() || testing::AdvisedHugePages(w));
  copied.reset();
  auto in_place = ExpectPeakWithin(dir, WeightsDType::kAuto, want_type, /*head_huge_pages=*/false);
  ASSERT_NE(in_place, nullptr);
  EXPECT_NE(in_place->checkpoint().MappingOf(in_place->lm_head().weights(), 1), nullptr);
}

TEST(ModelLoadMemoryTest, Bf16CopiedOnceFromTheMappingOrServedInPlace) {
  if (!LmHead::Bf16Supported()) GTEST_SKIP() << "CPU without AVX512-BF16/AMX: BF16 falls back";
  ExpectCopiedAndInPlace(WriteBigCheckpoint("BF16", 32768, 4096), quant::GgmlType::kBF16);  // 256 MiB
}

// The same for an F32 head, on every CPU (plain build: the bound is skipped
// under the sanitizers, and 256 MiB of shadow memory is not worth it there).
TEST(ModelLoadMemoryTest, F32CopiedOnceFromTheMappingOrServedInPlace) {
  if (!testing::kRssBoundsHold) GTEST_SKIP() << "sanitizer build: the plain build checks RSS";
  ExpectCopiedAndInPlace(WriteBigCheckpoint("F32", 16384, 4096), quant::GgmlType::kF32);  // 256 MiB
}

// Two hidden rows of 1,024 for the head-copy tests.
std::vector<float> CopyTestHidden() {
  std::vector<float> hidden(2 * 1024);
  for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = static_cast<float>(std::sin(0.37 * i));
  return hidden;
}

// `dir` loaded with the head read in place (head_huge_pages off) into
// *mapped, and its logits of `in`.
void InPlaceLogits(const std::string& dir, const HeadInput& in, std::unique_ptr<Model>* mapped,
                   std::vector<float>* want) {
  Model::Options off{"mapped", dir};
  off.head_huge_pages = false;
  *mapped = LoadQuantModel(off);
  ASSERT_NE(*mapped, nullptr);
  ASSERT_TRUE((*mapped)->ComputeLogits(in, false, want).ok());
}

// The row-major copy (VOCABD_DENSE_PACK=0): calls made while the background
// copy runs (32 MiB: 8 pieces) and after it give the in-place head's logits
// bit for bit; a model destroyed while it copies stops and joins the copy.
TEST(ModelHeadCopyTest, CallsDuringTheCopyMatchTheMappingBitForBit) {
  testing::ScopedEnv unset("VOCABD_HEAD_HUGE_PAGES", nullptr);
  testing::ScopedEnv row_major("VOCABD_DENSE_PACK", "0");  // the row-major copy
  const std::string dir = WriteBigCheckpoint("F32", 8192, 1024);
  const std::vector<float> hidden = CopyTestHidden();
  const HeadInput in{hidden.data(), 2, 1024};
  std::unique_ptr<Model> mapped;
  std::vector<float> want;
  ASSERT_NO_FATAL_FAILURE(InPlaceLogits(dir, in, &mapped, &want));

  auto copying = LoadQuantModel({"copying", dir});
  ASSERT_NE(copying, nullptr);
  std::atomic<int> mismatches{0}, calls{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 2; ++t) {
    callers.emplace_back([&] {
      // At least 3 calls each, and on while the copy runs.
      for (int i = 0; i < 3 || copying->head_memory() == "file mapping, copying to huge pages";
           ++i) {
        std::vector<float> got;
        if (!copying->ComputeLogits(in, false, &got).ok() || got != want) ++mismatches;
        ++calls;
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(copying->WaitForHeadCopy(), "huge pages (copied at load)");
  std::vector<float> after;
  ASSERT_TRUE(copying->ComputeLogits(in, false, &after).ok());
  EXPECT_EQ(after, want);
  EXPECT_EQ(mismatches.load(), 0) << "of " << calls.load() << " calls";
  EXPECT_NE(copying->lm_head().weights(), mapped->lm_head().weights());

  for (int i = 0; i < 3; ++i) {
    auto dropped = LoadQuantModel({"dropped", dir});  // destroyed at once
    ASSERT_NE(dropped, nullptr);
  }
}

// The packed copy (the default where the CPU's kernel reads one) of a head
// larger than Model::kInlinePackBytes: calls made while the background
// packing runs give the in-place head's logits bit for bit, calls after the
// switch the packed head's (the same up to summation order), none anything
// else; a model destroyed while it packs stops and joins the packing.
TEST(ModelHeadCopyTest, CallsDuringThePackingGiveTheMappingOrThePackedBits) {
  testing::ScopedEnv unset("VOCABD_HEAD_HUGE_PAGES", nullptr);
  testing::ScopedEnv unset_pack("VOCABD_DENSE_PACK", nullptr);
  if (!PacksDense(quant::GgmlType::kF32)) GTEST_SKIP() << "no AVX-512 head kernel";
  // Above Model::kInlinePackBytes, so the packing runs in the background.
  const int64_t vocab = static_cast<int64_t>(Model::kInlinePackBytes / (1024 * 4)) * 5 / 4;
  const std::string dir = WriteBigCheckpoint("F32", vocab, 1024);
  const std::vector<float> hidden = CopyTestHidden();
  const HeadInput in{hidden.data(), 2, 1024};
  std::unique_ptr<Model> mapped;
  std::vector<float> want;
  ASSERT_NO_FATAL_FAILURE(InPlaceLogits(dir, in, &mapped, &want));

  auto packing = LoadQuantModel({"packing", dir});
  ASSERT_NE(packing, nullptr);
  std::mutex mu;
  std::vector<std::vector<float>> during;
  std::vector<std::thread> callers;
  for (int t = 0; t < 2; ++t) {
    callers.emplace_back([&] {
      for (int i = 0; i < 3 || packing->head_memory() == "file mapping, copying to huge pages";
           ++i) {
        std::vector<float> got;
        if (!packing->ComputeLogits(in, false, &got).ok()) got.clear();
        std::lock_guard<std::mutex> lock(mu);
        during.push_back(std::move(got));
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(packing->WaitForHeadCopy(), "huge pages (packed at load)");
  std::vector<float> after;
  ASSERT_TRUE(packing->ComputeLogits(in, false, &after).ok());
  ASSERT_EQ(after.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(after[i], want[i], 1e-5 * std::max(1.0f, std::abs(want[i]))) << i;
  }
  for (const std::vector<float>& got : during) EXPECT_TRUE(got == want || got == after);
  for (int i = 0; i < 3; ++i) {
    auto dropped = LoadQuantModel({"dropped", dir});  // destroyed while it packs
    ASSERT_NE(dropped, nullptr);
  }
}

TEST(ModelLoadMemoryTest, F16ConvertedOnceFromTheMapping) {
  const std::string dir = WriteBigCheckpoint("F16", 16384, 4096);  // 128 MiB -> 256 MiB F32
  ExpectPeakWithin(dir, WeightsDType::kAuto, quant::GgmlType::kF32);
  if (LmHead::Bf16Supported()) ExpectPeakWithin(dir, WeightsDType::kBF16, quant::GgmlType::kBF16);
}

}  // namespace
}  // namespace vocabd
