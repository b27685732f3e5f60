// Tests for lib/checkpoint, lib/llama2c, lib/hf_config and lib/model_config:
// the two bundled forms of stories260K, golden weights from
// tests/golden/make_checkpoint_golden.py, and the error paths.
#include "lib/checkpoint/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/core/dtype.h"
#include "lib/checkpoint/hf_config.h"
#include "lib/checkpoint/llama2c.h"
#include "lib/checkpoint/model_config.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;
using testing::ReadFileBytes;

constexpr char kBinSha[] = "b0a507e7ad0f626624f17112325e66691f9076d622e1d3274d103d00299f2696";
constexpr char kStSha[] = "b9a4b28abe841d11ac0ca747203d67e61b76238bf0c264bf0f44b00f5f4dc53b";
constexpr char kConfigSha[] = "13dfdb165acac83f88be12ad3c7244d85b79a3f41b8f4504a12f5e71b033f478";
// All weight tensors of stories260K (everything but freq_cis) in bytes.
constexpr int64_t kStoriesWeightBytes = 1040128;
// The served tensors of stories260K: embedding [512, 64] F32 (tied head) +
// final norm [64]; the layer tensors are not counted in resident_bytes.
constexpr int64_t kStoriesServedBytes = 512 * 64 * 4 + 64 * 4;

std::unique_ptr<Checkpoint> LoadOrDie(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = LoadCheckpoint(path);
  EXPECT_TRUE(c.ok()) << path << ": " << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// Minimal safetensors writer for synthetic checkpoints.
struct StTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};
std::string MakeSafetensors(const std::vector<StTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::string buffer;
  for (const StTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {buffer.size(), buffer.size() + t.bytes.size()}}};
    buffer += t.bytes;
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  std::string out(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + text + buffer;
}
std::string F32Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}
std::string ConvertedBytes(const std::vector<float>& v, DType dtype) {
  std::string out(v.size() * DTypeSize(dtype), '\0');
  ConvertFromF32(v.data(), v.size(), dtype, out.data());
  return out;
}
std::vector<float> ToVector(const WeightTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.num_elements()));
  ConvertToF32(t.dtype, t.data, out.size(), out.data());
  return out;
}

const SourceFileInfo* FindSource(const Checkpoint& c, const std::string& format) {
  for (const SourceFileInfo& f : c.source_files()) {
    if (f.format == format) return &f;
  }
  return nullptr;
}

std::string StoriesConfigText() { return ReadFileBytes(testing::Stories260KHfDir() + "/config.json"); }

// ---------------------------------------------------------------------------
// The two real forms of stories260K.

TEST(CheckpointTest, BothFormsLoadToTheSameConfig) {
  auto bin = LoadOrDie(testing::Stories260KBin());
  auto hf = LoadOrDie(testing::Stories260KHfDir());
  ASSERT_NE(bin, nullptr);
  ASSERT_NE(hf, nullptr);
  for (const ModelConfig* c : {&bin->config(), &hf->config()}) {
    EXPECT_EQ(c->architecture, "llama");
    EXPECT_EQ(c->vocab_size, 512);
    EXPECT_EQ(c->hidden_size, 64);
    EXPECT_EQ(c->num_hidden_layers, 5);
    EXPECT_EQ(c->num_attention_heads, 8);
    EXPECT_EQ(c->num_key_value_heads, 4);
    EXPECT_EQ(c->head_dim, 8);
    EXPECT_EQ(c->intermediate_size, 172);
    EXPECT_EQ(c->max_position_embeddings, 512);
    EXPECT_EQ(c->position_scheme, PositionScheme::kRope);
    EXPECT_EQ(c->rope.theta, 10000.0);
    EXPECT_EQ(c->rope.head_dim, 8);
    EXPECT_EQ(c->rope.rotary_dim, 8);
    EXPECT_EQ(c->rope.max_position_embeddings, 512);
    EXPECT_EQ(c->rope.scaling.type, RopeScalingType::kDefault);
    EXPECT_EQ(c->final_norm_kind, NormKind::kRmsNorm);
    EXPECT_EQ(c->norm_eps, 1e-5);
    EXPECT_TRUE(c->tie_word_embeddings);
    EXPECT_EQ(c->embedding_scale, 1.0);
    EXPECT_EQ(c->bos_token_id, 1);
    EXPECT_EQ(c->eos_token_id, 2);
  }
  // The one difference: the pair layout.
  EXPECT_EQ(bin->config().rope.pair_layout, RopePairLayout::kInterleaved);
  EXPECT_EQ(hf->config().rope.pair_layout, RopePairLayout::kHalfSplit);
}

TEST(CheckpointTest, SourceFilesCarrySha256AndSize) {
  auto bin = LoadOrDie(testing::Stories260KBin());
  auto hf = LoadOrDie(testing::Stories260KHfDir());
  ASSERT_NE(bin, nullptr);
  ASSERT_NE(hf, nullptr);
  ASSERT_EQ(bin->source_files().size(), 1u);
  const SourceFileInfo& b = bin->source_files()[0];
  EXPECT_EQ(b.format, "llama2c");
  EXPECT_EQ(b.path, testing::Stories260KBin());
  EXPECT_EQ(b.size_bytes, 1056540);
  EXPECT_EQ(b.sha256, kBinSha);
  EXPECT_TRUE(b.memory_mapped);

  ASSERT_EQ(hf->source_files().size(), 2u);
  const SourceFileInfo* st = FindSource(*hf, "safetensors");
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->size_bytes, 1045072);
  EXPECT_EQ(st->sha256, kStSha);
  EXPECT_TRUE(st->memory_mapped);
  EXPECT_THAT(st->path, HasSubstr("stories260K-hf/model.safetensors"));
  const SourceFileInfo* cfg = FindSource(*hf, "config.json");
  ASSERT_NE(cfg, nullptr);
  EXPECT_EQ(cfg->size_bytes, 489);
  EXPECT_EQ(cfg->sha256, kConfigSha);
  EXPECT_FALSE(cfg->memory_mapped);

  // The golden script saw the same files.
  const nlohmann::json golden = testing::ReadGolden("checkpoint_golden.json");
  EXPECT_EQ(golden["bin_sha256"], kBinSha);
  EXPECT_EQ(golden["safetensors_sha256"], kStSha);
}

TEST(CheckpointTest, EmbeddingBitIdenticalAcrossForms) {
  auto bin = LoadOrDie(testing::Stories260KBin());
  auto hf = LoadOrDie(testing::Stories260KHfDir());
  ASSERT_NE(bin, nullptr);
  ASSERT_NE(hf, nullptr);
  const WeightTensor& a = bin->embedding();
  const WeightTensor& b = hf->embedding();
  EXPECT_EQ(a.dtype, DType::kF32);
  EXPECT_EQ(b.dtype, DType::kF32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(b.shape, (std::vector<int64_t>{512, 64}));
  ASSERT_EQ(a.nbytes, 512u * 64u * 4u);
  ASSERT_EQ(b.nbytes, a.nbytes);
  EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0);
  // Served in place from the mapping: 4-byte aligned F32.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data) % 4, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data) % 4, 0u);
  // The .bin embedding starts right after the 28-byte header.
  const std::string raw = ReadFileBytes(testing::Stories260KBin());
  EXPECT_EQ(std::memcmp(raw.data() + 28, a.data, a.nbytes), 0);
}

TEST(CheckpointTest, WeightsMatchNumPyGolden) {
  const nlohmann::json golden = testing::ReadGolden("checkpoint_golden.json");
  auto bin = LoadOrDie(testing::Stories260KBin());
  auto hf = LoadOrDie(testing::Stories260KHfDir());
  ASSERT_NE(bin, nullptr);
  ASSERT_NE(hf, nullptr);
  int checked = 0;
  for (const auto& pick : golden["values"]) {
    const Checkpoint& c = pick["form"] == "bin" ? *bin : *hf;
    const std::string name = pick["tensor"];
    const WeightTensor* t = c.Find(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_EQ(t->dtype, DType::kF32);
    const int64_t row = pick["row"], col = pick["col"];
    const int64_t cols = t->shape.back();
    const std::vector<float> want = testing::ToFloats(pick["values"]);
    for (size_t i = 0; i < want.size(); ++i) {
      const int64_t index = (row < 0 ? 0 : row * cols) + col + static_cast<int64_t>(i);
      EXPECT_EQ(t->f32()[index], want[i]) << pick["form"] << " " << name << " row " << row
                                          << " col " << col + static_cast<int64_t>(i);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * (8 * 4 + 64 + 8 + 8 + 4 + 8 + 8 + 8 + 8));
  // Whole-tensor float64 sums of every tensor, both forms.
  for (const auto& [form, sums] : golden["sums_f64"].items()) {
    const Checkpoint& c = form == "bin" ? *bin : *hf;
    EXPECT_EQ(sums.size(), c.tensors().size()) << form;
    for (const auto& [name, want] : sums.items()) {
      const WeightTensor* t = c.Find(name);
      ASSERT_NE(t, nullptr) << form << " " << name;
      double sum = 0.0;
      for (int64_t i = 0; i < t->num_elements(); ++i) sum += t->f32()[i];
      EXPECT_NEAR(sum, want.get<double>(), 1e-9) << form << " " << name;
    }
  }
}

// HF q_proj/k_proj rows are the .bin rows permuted per head as the HF Llama
// conversion does (SOURCES.md): HF row h*hd + j*(hd/2) + i == bin row
// h*hd + 2*i + j. Every other tensor is identical.
TEST(CheckpointTest, HfQkRowsArePermutedBinRows) {
  auto bin = LoadOrDie(testing::Stories260KBin());
  auto hf = LoadOrDie(testing::Stories260KHfDir());
  ASSERT_NE(bin, nullptr);
  ASSERT_NE(hf, nullptr);
  ASSERT_EQ(bin->tensors().size(), hf->tensors().size());
  const int hd = 8;
  for (const auto& [name, a] : bin->tensors()) {
    const WeightTensor* b = hf->Find(name);
    ASSERT_NE(b, nullptr) << name;
    ASSERT_EQ(a.shape, b->shape) << name;
    ASSERT_EQ(a.nbytes, b->nbytes) << name;
    const bool is_q = name.find("q_proj") != std::string::npos;
    const bool is_k = name.find("k_proj") != std::string::npos;
    if (!is_q && !is_k) {
      EXPECT_EQ(std::memcmp(a.data, b->data, a.nbytes), 0) << name;
      continue;
    }
    const int64_t rows = a.shape[0], cols = a.shape[1];
    EXPECT_EQ(rows, is_q ? 64 : 32) << name;
    EXPECT_NE(std::memcmp(a.data, b->data, a.nbytes), 0) << name << " should be permuted";
    for (int64_t h = 0; h < rows / hd; ++h) {
      for (int i = 0; i < hd / 2; ++i) {
        for (int j = 0; j < 2; ++j) {
          const int64_t hf_row = h * hd + j * (hd / 2) + i;
          const int64_t bin_row = h * hd + 2 * i + j;
          EXPECT_EQ(std::memcmp(b->f32() + hf_row * cols, a.f32() + bin_row * cols, cols * 4), 0)
              << name << " hf row " << hf_row << " vs bin row " << bin_row;
        }
      }
    }
  }
}

TEST(CheckpointTest, CanonicalAndPerLayerTensors) {
  auto bin = LoadOrDie(testing::Stories260KBin());
  ASSERT_NE(bin, nullptr);
  // 2 canonical (no lm_head: tied) + 9 per layer.
  EXPECT_EQ(bin->tensors().size(), 2u + 5u * 9u);
  struct Want {
    std::string suffix;
    std::vector<int64_t> shape;
  } wants[] = {
      {"input_layernorm.weight", {64}},        {"self_attn.q_proj.weight", {64, 64}},
      {"self_attn.k_proj.weight", {32, 64}},   {"self_attn.v_proj.weight", {32, 64}},
      {"self_attn.o_proj.weight", {64, 64}},   {"post_attention_layernorm.weight", {64}},
      {"mlp.gate_proj.weight", {172, 64}},     {"mlp.up_proj.weight", {172, 64}},
      {"mlp.down_proj.weight", {64, 172}},
  };
  for (int l = 0; l < 5; ++l) {
    for (const Want& w : wants) {
      const std::string name = "model.layers." + std::to_string(l) + "." + w.suffix;
      const WeightTensor* t = bin->Find(name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(t->shape, w.shape) << name;
      EXPECT_EQ(t->dtype, DType::kF32);
    }
  }
  const WeightTensor* norm = bin->Find(kFinalNorm);
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->shape, (std::vector<int64_t>{64}));
  // rms_final sits right before freq_cis_real/imag [512 x 4] x 2 at the end.
  const std::string raw = ReadFileBytes(testing::Stories260KBin());
  EXPECT_EQ(std::memcmp(raw.data() + raw.size() - 2 * 512 * 4 * 4 - 64 * 4, norm->data, 256), 0);
  // The llama2.c layout order: w3 (up) is the last per-layer array before
  // rms_final, so layer 4 up_proj ends where rms_final begins.
  const WeightTensor* up4 = bin->Find("model.layers.4.mlp.up_proj.weight");
  ASSERT_NE(up4, nullptr);
  EXPECT_EQ(static_cast<const uint8_t*>(up4->data) + up4->nbytes,
            static_cast<const uint8_t*>(norm->data));
}

TEST(CheckpointTest, TiedHeadSharesEmbeddingMemory) {
  for (const std::string& path : {testing::Stories260KBin(), testing::Stories260KHfDir()}) {
    auto c = LoadOrDie(path);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->Find(kLmHead), nullptr) << path;
    EXPECT_EQ(&c->lm_head(), &c->embedding()) << path;
    EXPECT_EQ(c->lm_head().data, c->embedding().data) << path;
    EXPECT_EQ(c->lm_head().shape, (std::vector<int64_t>{512, 64}));
    // Tied head counted once; served tensors only (not the layers).
    EXPECT_EQ(c->resident_bytes(), kStoriesServedBytes) << path;
  }
}

TEST(CheckpointTest, LoadForms) {
  // The .safetensors file itself (config.json beside it).
  auto st = LoadOrDie(testing::Stories260KHfDir() + "/model.safetensors");
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->config().rope.pair_layout, RopePairLayout::kHalfSplit);
  // A directory named after the llama2.c file it holds.
  auto dir = LoadOrDie(testing::SourceDir() + "/models/stories260K");
  ASSERT_NE(dir, nullptr);
  EXPECT_EQ(dir->config().rope.pair_layout, RopePairLayout::kInterleaved);
  EXPECT_EQ(dir->source_files()[0].sha256, kBinSha);
  // The shared copies are the same files.
  auto shared = LoadOrDie(testing::SharedModelsDir() + "/stories260K/stories260K.bin");
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(shared->source_files()[0].sha256, kBinSha);
}

TEST(CheckpointTest, MissingPathIsNotFound) {
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = LoadCheckpoint("/nonexistent/model.bin");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("/nonexistent/model.bin"));
}

// A folder holding exactly one checkpoint file loads it whatever its name
// (e.g. tiny/llama-2-tiny-random.gguf); two are refused, both named.
TEST(CheckpointTest, FolderWithOneCheckpointFileOfAnyName) {
  const std::string dir = testing::MakeTempDir() + "/tiny";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  WriteFile(dir + "/llama-2-tiny-random.gguf",
            ReadFileBytes(testing::SharedModelsDir() + "/llama-2-tiny-random/llama-2-tiny-random.gguf"));
  WriteFile(dir + "/README.txt", "not a checkpoint");
  auto c = LoadCheckpoint(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->config().vocab_size, 32000);
  EXPECT_EQ((*c)->config().hidden_size, 8);

  const std::string two = testing::MakeTempDir() + "/two";
  ASSERT_EQ(::mkdir(two.c_str(), 0755), 0);
  WriteFile(two + "/a.bin", ReadFileBytes(testing::Stories260KBin()));
  WriteFile(two + "/b.gguf", "GGUF");
  c = LoadCheckpoint(two);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("2 .bin/.gguf files (a.bin, b.gguf)"));
  ::unlink((two + "/b.gguf").c_str());
  c = LoadCheckpoint(two);  // now a.bin alone: the llama2.c checkpoint
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->config().vocab_size, 512);
}

TEST(CheckpointTest, UnknownFormsAreRejected) {
  const std::string dir = testing::MakeTempDir();
  WriteFile(dir + "/weights.pt", "xx");
  auto c = LoadCheckpoint(dir + "/weights.pt");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("unknown checkpoint format"));
  // A directory without config.json or <dir>.bin.
  c = LoadCheckpoint(dir);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("has no config.json"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("no .bin or .gguf file"));
  // A .safetensors without config.json beside it.
  WriteFile(dir + "/m.safetensors",
            ReadFileBytes(testing::Stories260KHfDir() + "/model.safetensors"));
  c = LoadCheckpoint(dir + "/m.safetensors");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("no config.json beside it"));
  // config.json without weights.
  WriteFile(dir + "/config.json", StoriesConfigText());
  c = LoadCheckpoint(dir);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("neither model.safetensors"));
}

// ---------------------------------------------------------------------------
// Head rules and dtype conversion on synthetic safetensors checkpoints.

TEST(CheckpointTest, UntiedWithoutHeadIsFailedPrecondition) {
  const std::string dir = testing::MakeTempDir();
  nlohmann::json cfg = nlohmann::json::parse(StoriesConfigText());
  cfg["tie_word_embeddings"] = false;
  WriteFile(dir + "/config.json", cfg.dump());
  WriteFile(dir + "/model.safetensors",
            ReadFileBytes(testing::Stories260KHfDir() + "/model.safetensors"));
  absl::StatusOr<std::unique_ptr<Checkpoint>> c = LoadCheckpoint(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("\"lm_head.weight\" is missing"));
  // A config.json without the key is untied for llama (HF LlamaConfig
  // default), so the same refusal applies.
  cfg.erase("tie_word_embeddings");
  WriteFile(dir + "/config.json", cfg.dump());
  c = LoadCheckpoint(dir);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
}

// vocab 4, hidden 2: embedding F16, untied head BF16, norm F32, plus an F16
// per-layer-like tensor left in its stored dtype.
std::string TinyConfig(bool tied) {
  nlohmann::json cfg = {{"model_type", "llama"},
                        {"vocab_size", 4},
                        {"hidden_size", 2},
                        {"num_hidden_layers", 0},
                        {"num_attention_heads", 1},
                        {"intermediate_size", 4},
                        {"max_position_embeddings", 16},
                        {"rms_norm_eps", 1e-6},
                        {"tie_word_embeddings", tied},
                        {"bos_token_id", 1},
                        {"eos_token_id", {3, 2}}};
  return cfg.dump();
}
const std::vector<float> kTinyEmb = {0.5f, -1.0f, 0.1f, 2.0f, 3.0f, -0.25f, 1e-3f, 7.0f};
const std::vector<float> kTinyHead = {1.0f, 2.0f, 3.0f, 4.0f, 1.0f / 3.0f, 6.0f, -7.0f, 8.0f};

TEST(CheckpointTest, UntiedHalfTypeTablesServedInPlace) {
  const std::string dir = testing::MakeTempDir();
  WriteFile(dir + "/config.json", TinyConfig(/*tied=*/false));
  WriteFile(dir + "/model.safetensors",
            MakeSafetensors({
                {"model.embed_tokens.weight", "F16", {4, 2}, ConvertedBytes(kTinyEmb, DType::kF16)},
                {"lm_head.weight", "BF16", {4, 2}, ConvertedBytes(kTinyHead, DType::kBF16)},
                {"model.norm.weight", "F32", {2}, F32Bytes({1.0f, 0.5f})},
                {"extra.weight", "F16", {3}, ConvertedBytes({1, 2, 3}, DType::kF16)},
            }));
  auto c = LoadOrDie(dir);
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->config().tie_word_embeddings);
  EXPECT_EQ(c->config().eos_token_id, 3);  // first of the list
  const WeightTensor& emb = c->embedding();
  const WeightTensor& head = c->lm_head();
  EXPECT_NE(emb.data, head.data);
  // Served from the mapping in their stored dtypes (no widening at load).
  ASSERT_EQ(emb.dtype, DType::kF16);
  ASSERT_EQ(head.dtype, DType::kBF16);
  EXPECT_EQ(emb.nbytes, 16u);
  EXPECT_TRUE(c->source_files().back().memory_mapped);
  // Exact values after F16 / BF16 rounding.
  std::vector<float> want_emb, want_head;
  for (float v : kTinyEmb) want_emb.push_back(HalfToFloat(FloatToHalf(v)));
  for (float v : kTinyHead) want_head.push_back(BFloat16ToFloat(FloatToBFloat16(v)));
  EXPECT_EQ(ToVector(emb), want_emb);
  EXPECT_EQ(ToVector(head), want_head);
  EXPECT_EQ(ToVector(head)[4], 0.333984375f);  // bf16(1/3)
  EXPECT_EQ(ToVector(emb)[2], 0.0999755859375f);  // f16(0.1)
  // Non-canonical tensors keep their stored dtype.
  const WeightTensor* extra = c->Find("extra.weight");
  ASSERT_NE(extra, nullptr);
  EXPECT_EQ(extra->dtype, DType::kF16);
  EXPECT_EQ(ToVector(*extra), (std::vector<float>{1, 2, 3}));
  // emb 16 (F16) + head 16 (BF16) + norm 8; extra.weight is not served.
  EXPECT_EQ(c->resident_bytes(), 16 + 16 + 8);
}

TEST(CheckpointTest, TiedConfigIgnoresStoredHeadCopy) {
  const std::string dir = testing::MakeTempDir();
  WriteFile(dir + "/config.json", TinyConfig(/*tied=*/true));
  WriteFile(dir + "/model.safetensors",
            MakeSafetensors({
                {"model.embed_tokens.weight", "F32", {4, 2}, F32Bytes(kTinyEmb)},
                {"lm_head.weight", "F32", {4, 2}, F32Bytes(kTinyHead)},
                {"model.norm.weight", "F32", {2}, F32Bytes({1.0f, 0.5f})},
            }));
  auto c = LoadOrDie(dir);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Find(kLmHead), nullptr);
  EXPECT_EQ(c->lm_head().data, c->embedding().data);
  EXPECT_EQ(ToVector(c->lm_head()), kTinyEmb);
  EXPECT_EQ(c->resident_bytes(), 32 + 8);
}

TEST(CheckpointTest, WrongShapesAndMissingTensors) {
  const std::string dir = testing::MakeTempDir();
  WriteFile(dir + "/config.json", TinyConfig(/*tied=*/true));
  WriteFile(dir + "/model.safetensors",
            MakeSafetensors({
                {"model.embed_tokens.weight", "F32", {2, 4}, F32Bytes(kTinyEmb)},
                {"model.norm.weight", "F32", {2}, F32Bytes({1.0f, 0.5f})},
            }));
  auto c = LoadCheckpoint(dir);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("tensor \"model.embed_tokens.weight\" has shape [2, 4] but the config "
                        "needs [4, 2]"));
  WriteFile(dir + "/model.safetensors",
            MakeSafetensors({{"model.embed_tokens.weight", "F32", {4, 2}, F32Bytes(kTinyEmb)}}));
  c = LoadCheckpoint(dir);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("required tensor \"model.norm.weight\" is missing"));
  // Malformed safetensors bubble up as INVALID_ARGUMENT naming the file.
  WriteFile(dir + "/model.safetensors", "short");
  c = LoadCheckpoint(dir);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(dir + "/model.safetensors"));
}

TEST(CheckpointTest, ShardedSafetensorsMatchesSingleFile) {
  auto single = LoadOrDie(testing::Stories260KHfDir());
  ASSERT_NE(single, nullptr);
  // Split the real tensors into two shards: embedding + norm, the layers.
  std::vector<StTensor> shard1, shard2;
  nlohmann::json weight_map = nlohmann::json::object();
  for (const auto& [name, t] : single->tensors()) {
    StTensor st{name, "F32", t.shape,
                std::string(static_cast<const char*>(t.data), t.nbytes)};
    const bool first = name.rfind("model.layers.", 0) != 0;
    (first ? shard1 : shard2).push_back(st);
    weight_map[name] = first ? "model-00001-of-00002.safetensors"
                             : "model-00002-of-00002.safetensors";
  }
  const std::string dir = testing::MakeTempDir();
  WriteFile(dir + "/config.json", StoriesConfigText());
  WriteFile(dir + "/model-00001-of-00002.safetensors", MakeSafetensors(shard1));
  WriteFile(dir + "/model-00002-of-00002.safetensors", MakeSafetensors(shard2));
  nlohmann::json index = {{"metadata", {{"total_size", kStoriesWeightBytes}}},
                          {"weight_map", weight_map}};
  WriteFile(dir + "/model.safetensors.index.json", index.dump());
  auto sharded = LoadOrDie(dir);
  ASSERT_NE(sharded, nullptr);
  EXPECT_EQ(sharded->source_files().size(), 4u);  // config, index, 2 shards
  EXPECT_EQ(sharded->resident_bytes(), kStoriesServedBytes);
  ASSERT_EQ(sharded->tensors().size(), single->tensors().size());
  for (const auto& [name, t] : single->tensors()) {
    const WeightTensor* s = sharded->Find(name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_EQ(s->shape, t.shape);
    EXPECT_EQ(std::memcmp(s->data, t.data, t.nbytes), 0) << name;
  }
  // An index that points a tensor at the wrong shard is rejected.
  weight_map["model.norm.weight"] = "model-00002-of-00002.safetensors";
  index["weight_map"] = weight_map;
  WriteFile(dir + "/model.safetensors.index.json", index.dump());
  auto bad = LoadCheckpoint(dir);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("tensor \"model.norm.weight\" is in shard model-00001-of-00002"));
  // Path escapes in the index are refused.
  weight_map["model.norm.weight"] = "../model-00001-of-00002.safetensors";
  index["weight_map"] = weight_map;
  WriteFile(dir + "/model.safetensors.index.json", index.dump());
  bad = LoadCheckpoint(dir);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("not a plain file name"));
}

// ---------------------------------------------------------------------------
// llama2.c specifics.

std::string Llama2cHeader(std::vector<int32_t> h) {
  return std::string(reinterpret_cast<const char*>(h.data()), h.size() * 4);
}

TEST(Llama2cTest, UntiedClassifierFollowsFreqCis) {
  // dim 4, hidden 2, 1 layer, 2 heads, 1 kv head, vocab -3 (untied), seq 2.
  const int dim = 4, hidden = 2, kv_dim = 2, vocab = 3, seq = 2, hs = 2;
  const size_t floats = vocab * dim + dim + dim * dim + 2 * kv_dim * dim + dim * dim + dim +
                        3 * hidden * dim + dim + 2 * seq * (hs / 2) + vocab * dim;
  std::vector<float> body(floats);
  for (size_t i = 0; i < floats; ++i) body[i] = static_cast<float>(i);
  const std::string dir = testing::MakeTempDir();
  WriteFile(dir + "/u.bin", Llama2cHeader({dim, hidden, 1, 2, 1, -vocab, seq}) + F32Bytes(body));
  auto c = LoadOrDie(dir + "/u.bin");
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->config().tie_word_embeddings);
  EXPECT_EQ(c->config().vocab_size, 3);
  EXPECT_EQ(c->config().head_dim, 2);
  const WeightTensor* head = c->Find(kLmHead);
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(&c->lm_head(), head);
  EXPECT_EQ(head->shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(head->f32()[0], static_cast<float>(floats - vocab * dim));
  EXPECT_EQ(c->embedding().f32()[0], 0.0f);
  // w1 (gate) comes before w2 (down) and w3 (up).
  const float gate0 = c->Find("model.layers.0.mlp.gate_proj.weight")->f32()[0];
  EXPECT_EQ(c->Find("model.layers.0.mlp.down_proj.weight")->f32()[0], gate0 + hidden * dim);
  EXPECT_EQ(c->Find("model.layers.0.mlp.up_proj.weight")->f32()[0], gate0 + 2 * hidden * dim);
  // Served tensors only: embedding, final norm, classifier (not the layer).
  EXPECT_EQ(c->resident_bytes(), static_cast<int64_t>((2 * vocab * dim + dim) * sizeof(float)));
}

TEST(Llama2cTest, MalformedFilesAreRejected) {
  const std::string dir = testing::MakeTempDir();
  const std::string raw = ReadFileBytes(testing::Stories260KBin());
  struct Case {
    std::string bytes;
    std::string want;
  } cases[] = {
      {raw.substr(0, 20), "fewer than the 28-byte header"},
      {raw.substr(0, raw.size() - 4), "implies 1056540 bytes but the file has 1056536"},
      {raw + "xxxx", "implies 1056540 bytes but the file has 1056544"},
      {Llama2cHeader({64, 172, 5, 0, 4, 512, 512}), "header n_heads = 0 must be > 0"},
      {Llama2cHeader({64, 172, 5, 7, 7, 512, 512}), "n_heads = 7 does not divide dim = 64"},
      {Llama2cHeader({64, 172, 5, 8, 3, 512, 512}), "n_kv_heads = 3 does not divide n_heads = 8"},
      {Llama2cHeader({64, 172, 5, 8, 4, 0, 512}), "header vocab_size = 0 must be non-zero"},
      {Llama2cHeader({2147483646, 2147483647, 2147483647, 1, 1, 512, 512}),
       "implies more than 2^64 bytes"},
  };
  for (const Case& c : cases) {
    WriteFile(dir + "/bad.bin", c.bytes);
    absl::StatusOr<std::unique_ptr<Checkpoint>> r = LoadCheckpoint(dir + "/bad.bin");
    ASSERT_FALSE(r.ok()) << c.want;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(dir + "/bad.bin"));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.want));
  }
}

// ---------------------------------------------------------------------------
// config.json parsing.

absl::Status ParseError(const nlohmann::json& cfg) {
  return ParseHfConfig(cfg.dump(), "/models/x/config.json").status();
}

TEST(HfConfigTest, ParsesStoriesConfig) {
  absl::StatusOr<ModelConfig> c = ParseHfConfig(StoriesConfigText(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->rope.pair_layout, RopePairLayout::kHalfSplit);
  EXPECT_EQ(c->norm_eps, 1e-5);
}

TEST(HfConfigTest, MissingRequiredKeys) {
  for (const char* key : {"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                          "intermediate_size", "max_position_embeddings"}) {
    nlohmann::json cfg = nlohmann::json::parse(StoriesConfigText());
    cfg.erase(key);
    const absl::Status s = ParseError(cfg);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_THAT(std::string(s.message()), HasSubstr("/models/x/config.json")) << key;
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(std::string("key \"") + key + "\" is required but missing"));
  }
}

TEST(HfConfigTest, WrongTypes) {
  struct Case {
    const char* key;
    nlohmann::json value;
    std::string want;
  } cases[] = {
      {"hidden_size", "64", "key \"hidden_size\" must be an integer, got string \"64\""},
      {"vocab_size", 512.5, "key \"vocab_size\" must be an integer, got number 512.5"},
      {"num_key_value_heads", true, "key \"num_key_value_heads\" must be an integer"},
      {"rms_norm_eps", "1e-5", "key \"rms_norm_eps\" must be a number, got string"},
      {"rope_theta", nlohmann::json::array(), "key \"rope_theta\" must be a number"},
      {"tie_word_embeddings", "true", "key \"tie_word_embeddings\" must be a boolean"},
      {"model_type", 3, "key \"model_type\" must be a string"},
      {"rope_scaling", "linear", "key \"rope_scaling\" must be an object or null"},
      {"rope_scaling", {{"rope_type", "linear"}, {"factor", "2"}},
       "key \"rope_scaling.factor\" must be a number"},
      {"rope_scaling", {{"rope_type", "linear"}}, "key \"rope_scaling.factor\" is required"},
      {"rope_scaling", {{"rope_type", "ntk"}, {"factor", 2.0}},
       "key \"rope_scaling.rope_type\" = \"ntk\" is not supported"},
      {"rope_scaling", {{"type", "longrope"}, {"short_factor", {1, "x"}}},
       "key \"rope_scaling.short_factor[1]\" must be a number"},
      {"eos_token_id", "2", "key \"eos_token_id\" must be an integer"},
      {"model_type", "t5", "key \"model_type\" = \"t5\" is not supported"},
  };
  for (const Case& c : cases) {
    nlohmann::json cfg = nlohmann::json::parse(StoriesConfigText());
    cfg[c.key] = c.value;
    const absl::Status s = ParseError(cfg);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.key;
    EXPECT_THAT(std::string(s.message()), HasSubstr("/models/x/config.json: ")) << c.key;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.want)) << c.key;
  }
  EXPECT_THAT(std::string(ParseHfConfig("{", "c.json").status().message()),
              HasSubstr("c.json: not valid JSON"));
  EXPECT_THAT(std::string(ParseHfConfig("[]", "c.json").status().message()),
              HasSubstr("c.json: top level is a JSON array"));
}

TEST(HfConfigTest, InvalidValuesNameTheField) {
  nlohmann::json cfg = nlohmann::json::parse(StoriesConfigText());
  cfg["num_key_value_heads"] = 3;
  EXPECT_THAT(std::string(ParseError(cfg).message()),
              HasSubstr("config.json: num_key_value_heads = 3 does not divide "
                        "num_attention_heads = 8"));
  cfg = nlohmann::json::parse(StoriesConfigText());
  cfg["vocab_size"] = 0;
  EXPECT_THAT(std::string(ParseError(cfg).message()), HasSubstr("vocab_size = 0 must be > 0"));
  cfg = nlohmann::json::parse(StoriesConfigText());
  cfg["rope_theta"] = -1.0;
  EXPECT_THAT(std::string(ParseError(cfg).message()), HasSubstr("rope.theta = -1"));
  cfg = nlohmann::json::parse(StoriesConfigText());
  cfg["partial_rotary_factor"] = 0.25;  // int(8 * 0.25) = 2 rotary dims: fine
  absl::StatusOr<ModelConfig> ok = ParseHfConfig(cfg.dump(), "config.json");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->rope.rotary_dim, 2);
  cfg["partial_rotary_factor"] = 0.375;  // int(8 * 0.375) = 3: odd
  EXPECT_THAT(std::string(ParseError(cfg).message()), HasSubstr("rope.rotary_dim = 3"));
  cfg = nlohmann::json::parse(StoriesConfigText());
  cfg["eos_token_id"] = 512;
  EXPECT_THAT(std::string(ParseError(cfg).message()),
              HasSubstr("eos_token_id = 512 must be -1 (none) or in [0, vocab_size = 512)"));
}

TEST(HfConfigTest, DefaultsAndRopeScaling) {
  nlohmann::json cfg = {{"model_type", "llama"},
                        {"vocab_size", 128256},
                        {"hidden_size", 4096},
                        {"num_hidden_layers", 32},
                        {"num_attention_heads", 32},
                        {"num_key_value_heads", 8},
                        {"intermediate_size", 14336},
                        {"max_position_embeddings", 131072},
                        {"rope_theta", 500000.0},
                        {"head_dim", nullptr},
                        {"bos_token_id", 128000},
                        {"eos_token_id", {128001, 128008, 128009}},
                        {"rope_scaling",
                         {{"factor", 8.0},
                          {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0},
                          {"original_max_position_embeddings", 8192},
                          {"rope_type", "llama3"}}}};
  absl::StatusOr<ModelConfig> c = ParseHfConfig(cfg.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->rope.head_dim, 128);
  EXPECT_EQ(c->rope.rotary_dim, 128);
  EXPECT_EQ(c->rope.theta, 500000.0);
  EXPECT_EQ(c->norm_eps, 1e-6);
  EXPECT_FALSE(c->tie_word_embeddings);  // LlamaConfig default
  EXPECT_EQ(c->bos_token_id, 128000);
  EXPECT_EQ(c->eos_token_id, 128001);
  EXPECT_EQ(c->rope.scaling.type, RopeScalingType::kLlama3);
  EXPECT_EQ(c->rope.scaling.factor, 8.0);
  EXPECT_EQ(c->rope.scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c->rope.scaling.high_freq_factor, 4.0);

  // Legacy "type" key, yarn parameters.
  cfg["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"beta_fast", 16.0},
                         {"mscale", 0.707}, {"truncate", false}};
  c = ParseHfConfig(cfg.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope.scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(c->rope.scaling.beta_fast, 16.0);
  EXPECT_EQ(c->rope.scaling.beta_slow, 1.0);
  EXPECT_EQ(c->rope.scaling.mscale, 0.707);
  EXPECT_FALSE(c->rope.scaling.truncate);

  // llama3 with high <= low is refused by Validate, naming the field.
  cfg["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0},
                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  EXPECT_THAT(std::string(ParseError(cfg).message()),
              HasSubstr("rope.scaling(llama3).high_freq_factor = 4"));
  // null = default.
  cfg["rope_scaling"] = nullptr;
  c = ParseHfConfig(cfg.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope.scaling.type, RopeScalingType::kDefault);
}

TEST(ModelConfigTest, ValidateNamesFieldAndValue) {
  ModelConfig c;
  c.architecture = "llama";
  c.vocab_size = 16;
  c.hidden_size = 8;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.rope.head_dim = 4;
  c.rope.rotary_dim = 4;
  EXPECT_TRUE(c.Validate().ok()) << c.Validate();
  ModelConfig bad = c;
  bad.hidden_size = -1;
  EXPECT_EQ(bad.Validate().message(), "hidden_size = -1 must be > 0");
  bad = c;
  bad.rope.head_dim = 8;
  EXPECT_EQ(bad.Validate().message(), "rope.head_dim = 8 differs from head_dim = 4");
  bad = c;
  bad.rope.rotary_dim = 6;
  EXPECT_EQ(bad.Validate().message(), "rope.rotary_dim = 6 is outside [2, rope.head_dim = 4]");
  bad = c;
  bad.norm_eps = 0;
  EXPECT_EQ(bad.Validate().message(), "norm_eps = 0 must be finite and > 0");
  bad = c;
  bad.rope.scaling.type = RopeScalingType::kLongrope;
  bad.rope.scaling.short_factor = {1.0, 1.0};
  bad.rope.scaling.long_factor = {1.0};
  EXPECT_EQ(bad.Validate().message(),
            "rope.scaling(longrope).long_factor.size() = 1 must equal rotary_dim / 2 = 2");
  bad = c;
  bad.rope.scaling.type = RopeScalingType::kLinear;
  bad.rope.scaling.factor = 0;
  EXPECT_EQ(bad.Validate().message(), "rope.scaling(linear).factor = 0 must be finite and > 0");
  bad = c;
  bad.bos_token_id = -2;
  EXPECT_EQ(bad.Validate().code(), absl::StatusCode::kInvalidArgument);
  // A learned-position model needs no RoPE fields.
  ModelConfig learned = c;
  learned.position_scheme = PositionScheme::kLearned;
  learned.rope = RopeParams();
  learned.max_position_embeddings = 1024;
  EXPECT_TRUE(learned.Validate().ok()) << learned.Validate();
}

}  // namespace
}  // namespace vocabd
