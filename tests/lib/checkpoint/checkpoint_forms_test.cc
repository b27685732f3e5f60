// Every checkpoint form beyond the Llama safetensors/.bin pair: the
// config.json families (gpt2, gpt_neox, phi, gemma, nested text_config),
// GGUF (parser, F32/F16/BF16/Q8_0, tied/untied, metadata), LayerNorm, and
// the real GGUF files in ../shared/models. Golden values come from
// tests/golden/make_checkpoint_forms_golden.py (tiny checkpoints in
// tests/data/forms).
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/checkpoint/checkpoint.h"
#include "lib/checkpoint/gguf.h"
#include "lib/checkpoint/gguf_checkpoint.h"
#include "lib/checkpoint/hf_config.h"
#include "lib/core/mapped_file.h"
#include "lib/serving/model.h"
#include "lib/head/norm.h"
#include "lib/positions/rope_freq.h"
#include "lib/quant/dequantize.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;
using testing::ReadGolden;
using testing::SharedModelsDir;
using testing::SourceDir;
using testing::ToFloats;

std::string FormDir(const std::string& name) { return SourceDir() + "/tests/data/forms/" + name; }

const nlohmann::json& Golden() {
  static const nlohmann::json* const kGolden =
      new nlohmann::json(ReadGolden("checkpoint_forms_golden.json"));
  return *kGolden;
}

// F32 serving, so logits compare with the float64 reference at 2e-5.
std::unique_ptr<Model> CreateModel(const std::string& name, const std::string& path) {
  Model::Options options;
  options.name = name;
  options.path = path;
  options.weights_dtype = WeightsDType::kF32;
  auto model = Model::Create(options);
  EXPECT_TRUE(model.ok()) << path << ": " << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

std::vector<float> Logits(const Model& model, const std::vector<float>& hidden) {
  HeadInput in;
  in.hidden = hidden.data();
  in.width = model.config().hidden_size;
  in.rows = static_cast<int64_t>(hidden.size()) / in.width;
  std::vector<float> logits;
  absl::Status s = model.ComputeLogits(in, /*log_softmax=*/false, &logits);
  EXPECT_TRUE(s.ok()) << s;
  return logits;
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i]))) << "at " << i;
  }
}

// Any served type, widened or dequantized (as ggml) row by row.
std::vector<float> Values(const WeightTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.num_elements()));
  const int64_t cols = t.shape.back(), rows = t.num_elements() / cols;
  const int64_t row_bytes = static_cast<int64_t>(t.nbytes) / rows;
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_TRUE(quant::DequantizeRow(t.ggml_type(), static_cast<const uint8_t*>(t.data) + r * row_bytes,
                                     cols, out.data() + r * cols));
  }
  return out;
}

// ---------------------------------------------------------------- LayerNorm

TEST(LayerNormTest, MatchesNumPy) {
  const nlohmann::json& g = Golden()["layer_norm"];
  const std::vector<float> x = ToFloats(g["x"]), w = ToFloats(g["weight"]), b = ToFloats(g["bias"]);
  const int64_t rows = g["rows"], hidden = g["hidden"];
  std::vector<float> y(x.size());
  LayerNorm(x.data(), rows, hidden, w.data(), b.data(), g["eps"], y.data());
  ExpectNear(y, ToFloats(g["y"]), 2e-6f);
  LayerNorm(x.data(), rows, hidden, w.data(), nullptr, g["eps"], y.data());
  ExpectNear(y, ToFloats(g["y_no_bias"]), 2e-6f);
  // In place.
  std::vector<float> z = x;
  LayerNorm(z.data(), rows, hidden, w.data(), b.data(), g["eps"], z.data());
  ExpectNear(z, ToFloats(g["y"]), 2e-6f);
}

// --------------------------------------------------------- HF families

TEST(HfFamiliesTest, Gpt2MapsNamesLayerNormLearnedPositionsTied) {
  auto model = CreateModel("gpt2", FormDir("gpt2"));
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.architecture, "gpt2");
  EXPECT_EQ(c.vocab_size, 24);
  EXPECT_EQ(c.hidden_size, 8);
  EXPECT_EQ(c.num_attention_heads, 2);
  EXPECT_EQ(c.intermediate_size, 32);  // n_inner null -> 4 * n_embd
  EXPECT_EQ(c.max_position_embeddings, 16);
  EXPECT_EQ(c.position_scheme, PositionScheme::kLearned);
  EXPECT_EQ(c.final_norm_kind, NormKind::kLayerNorm);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 0);
  const Checkpoint& ck = model->checkpoint();
  ASSERT_NE(ck.Find(kFinalNormBias), nullptr);
  ASSERT_NE(ck.Find(kPositionEmbeddings), nullptr);
  EXPECT_EQ(ck.lm_head().data, ck.embedding().data);  // one copy
  // Conv1D layer weights kept as stored: [in, out].
  const WeightTensor* c_attn = ck.Find("transformer.h.0.attn.c_attn.weight");
  ASSERT_NE(c_attn, nullptr);
  EXPECT_EQ(c_attn->shape, (std::vector<int64_t>{8, 24}));
  const nlohmann::json& g = Golden()["hf"]["gpt2"];
  ExpectNear(Logits(*model, ToFloats(g["hidden"])), ToFloats(g["logits"]), 2e-5f);
  const WeightTensor* wpe = ck.Find(kPositionEmbeddings);
  std::vector<float> row3(wpe->f32() + 3 * 8, wpe->f32() + 4 * 8);
  ExpectNear(row3, ToFloats(g["wpe_row_3"]), 0);
  // Embed adds the learned row of each position by default.
  EmbedInput in;
  in.token_ids = {{5}};
  in.position_offsets = {3};
  EmbedOutput out;
  ASSERT_TRUE(model->Embed(in, &out).ok());
  std::vector<float> want = ToFloats(g["embedding_row_5"]);
  for (size_t j = 0; j < want.size(); ++j) want[j] += row3[j];
  ExpectNear(out.embeddings, want, 1e-6f);
}

TEST(HfFamiliesTest, GptNeoxF16UntiedRotaryPct) {
  auto model = CreateModel("neox", FormDir("gpt_neox"));
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->config();
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.final_norm_kind, NormKind::kLayerNorm);
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_EQ(c.rope.rotary_dim, 2);  // rotary_pct 0.5 of head_dim 4
  EXPECT_DOUBLE_EQ(c.rope.theta, 5000.0);
  EXPECT_EQ(c.rope.pair_layout, RopePairLayout::kHalfSplit);
  EXPECT_NE(model->checkpoint().lm_head().data, model->checkpoint().embedding().data);
  const nlohmann::json& g = Golden()["hf"]["gpt_neox"];
  ExpectNear(Logits(*model, ToFloats(g["hidden"])), ToFloats(g["logits"]), 2e-5f);
}

TEST(HfFamiliesTest, PhiBf16HeadBiasPartialRotary) {
  auto model = CreateModel("phi", FormDir("phi"));
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.rope.rotary_dim, 2);  // partial_rotary_factor 0.5
  EXPECT_EQ(c.final_norm_kind, NormKind::kLayerNorm);
  ASSERT_NE(model->checkpoint().Find(kLmHeadBias), nullptr);
  const nlohmann::json& g = Golden()["hf"]["phi"];
  ExpectNear(Logits(*model, ToFloats(g["hidden"])), ToFloats(g["logits"]), 2e-5f);
}

TEST(HfFamiliesTest, GemmaScaleOnePlusWeightNormTiedDespiteHeadCopy) {
  auto model = CreateModel("gemma", FormDir("gemma"));
  ASSERT_NE(model, nullptr);
  const ModelConfig& c = model->config();
  EXPECT_TRUE(c.tie_word_embeddings);  // GemmaConfig default
  EXPECT_DOUBLE_EQ(c.embedding_scale, std::sqrt(8.0));
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_EQ(model->checkpoint().Find(kLmHead), nullptr);  // the stored copy is dropped
  const nlohmann::json& g = Golden()["hf"]["gemma"];
  ExpectNear(Logits(*model, ToFloats(g["hidden"])), ToFloats(g["logits"]), 2e-5f);
  EmbedInput in;
  in.token_ids = {{5}};
  EmbedOutput out;
  ASSERT_TRUE(model->Embed(in, &out).ok());
  ExpectNear(out.embeddings, ToFloats(g["embedding_row_5"]), 1e-6f);
}

TEST(HfFamiliesTest, NestedTextConfigTieFlagAndPrefixedNames) {
  auto model = CreateModel("llava", FormDir("nested_text_config"));
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->config().architecture, "llama");
  // text_config says tied although the top level says untied.
  EXPECT_TRUE(model->config().tie_word_embeddings);
  const nlohmann::json& g = Golden()["hf"]["nested_text_config"];
  ExpectNear(Logits(*model, ToFloats(g["hidden"])), ToFloats(g["logits"]), 2e-5f);
}

TEST(HfFamiliesTest, FakeGpt2FromSharedModels) {
  auto ckpt = LoadCheckpoint(SharedModelsDir() + "/fake_gpt2");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const ModelConfig& c = (*ckpt)->config();
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_EQ(c.hidden_size, 2);
  EXPECT_EQ(c.position_scheme, PositionScheme::kLearned);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ((*ckpt)->Find(kPositionEmbeddings)->shape, (std::vector<int64_t>{1024, 2}));
  EXPECT_EQ((*ckpt)->Find(kFinalNormBias)->shape, (std::vector<int64_t>{2}));
}

TEST(HfFamiliesTest, UnsupportedModelTypeListsFamilies) {
  auto c = ParseHfConfig(R"({"model_type": "t5", "vocab_size": 3})", "x/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("x/config.json"));
  EXPECT_THAT(c.status().message(),
              HasSubstr("\"t5\" is not supported (llama, mistral, mixtral, qwen2, qwen2_moe, "
                        "qwen3, qwen3_moe, olmo2, smollm3, llama4_text, llama4, gpt_oss, phi3, "
                        "deepseek_v3, deepseek_v2, granite, granitemoe, gemma, gemma2, "
                        "gemma3_text, gemma3, cohere, cohere2, starcoder2, stablelm, phi, "
                        "gpt_neox, gpt2, gpt_bigcode, internlm2, exaone, minicpm, falcon, "
                        "RefinedWebModel, RefinedWeb, bloom, mpt, bert, nomic_bert, roberta, "
                        "xlm-roberta)"));
}

TEST(HfFamiliesTest, Gpt2MissingNEmbdNamesKey) {
  auto c = ParseHfConfig(R"({"model_type": "gpt2", "vocab_size": 3, "n_layer": 1, "n_head": 1, "n_positions": 4})",
                         "g/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("key \"n_embd\" is required but missing"));
}

TEST(HfFamiliesTest, TextConfigWrongType) {
  auto c = ParseHfConfig(R"({"model_type": "llava", "text_config": 3})", "n/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("key \"text_config\" must be an object"));
}

// --------------------------------------------------------------- GGUF

void CheckGgufCase(const std::string& name, bool expect_mapped_head) {
  SCOPED_TRACE(name);
  // The checkpoint alone: the tables' values (served in place, any type).
  {
    auto ckpt = LoadCheckpoint(FormDir(name) + "/" + name + ".gguf");
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    const nlohmann::json& g = Golden()["gguf"][name];
    ExpectNear(Values((*ckpt)->embedding()), ToFloats(g["embedding"]), 0);
    ExpectNear(Values((*ckpt)->lm_head()), ToFloats(g["head"]), 0);
  }
  auto model = CreateModel(name, FormDir(name) + "/" + name + ".gguf");
  ASSERT_NE(model, nullptr);
  const nlohmann::json& g = Golden()["gguf"][name];
  const Checkpoint& ck = model->checkpoint();
  EXPECT_EQ(model->config().tie_word_embeddings, g["tied"].get<bool>());
  EXPECT_EQ(model->config().vocab_size, 16);
  EXPECT_EQ(model->config().hidden_size, 64);
  // Dequantized/converted values are exact.
  ExpectNear(Values(ck.embedding()), ToFloats(g["embedding"]), 0);
  ExpectNear(Values(ck.lm_head()), ToFloats(g["head"]), 0);
  ExpectNear(Logits(*model, ToFloats(g["hidden"])), ToFloats(g["logits"]), 2e-5f);
  EXPECT_EQ(ck.source_files().at(0).format, "gguf");
  EXPECT_EQ(ck.source_files().at(0).memory_mapped, expect_mapped_head);
}

// q8_0 tables are served in place (no dequantization at load). The model
// part (logits through a q8_0 head) needs the quantized LM-head kernels.
TEST(GgufTest, Q8_0ServedInPlace) {
  auto ckpt = LoadCheckpoint(FormDir("gguf_q8_0") + "/gguf_q8_0.gguf");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ((*ckpt)->embedding().quant_type, quant::GgmlType::kQ8_0);
  EXPECT_EQ((*ckpt)->embedding().type_name(), "q8_0");
  EXPECT_EQ((*ckpt)->embedding().nbytes, 16u * 64 / 32 * 34);
  EXPECT_TRUE((*ckpt)->source_files().at(0).memory_mapped);
  CheckGgufCase("gguf_q8_0", /*mapped*/ true);
}
TEST(GgufTest, Bf16InPlace) {
  CheckGgufCase("gguf_bf16", true);
  auto ckpt = LoadCheckpoint(FormDir("gguf_bf16") + "/gguf_bf16.gguf");
  ASSERT_TRUE(ckpt.ok());
  EXPECT_EQ((*ckpt)->embedding().dtype, DType::kBF16);  // zero copies
}
TEST(GgufTest, F32InPlace) {
  CheckGgufCase("gguf_f32", true);
  auto ckpt = LoadCheckpoint(FormDir("gguf_f32") + "/gguf_f32.gguf");
  ASSERT_TRUE(ckpt.ok());
  // F32 served in place: embedding and head point into one mapping, at the
  // distance of their data offsets (token_embd at 0, output_norm at 4096,
  // output at 4096 + 256).
  const auto* e = static_cast<const uint8_t*>((*ckpt)->embedding().data);
  const auto* h = static_cast<const uint8_t*>((*ckpt)->lm_head().data);
  EXPECT_EQ(h - e, 4352);
}

TEST(GgufTest, F16OutputAbsentIsTiedAndRopeScalingKeys) {
  CheckGgufCase("gguf_f16_tied", true);
  auto ckpt = LoadCheckpoint(FormDir("gguf_f16_tied"));  // directory X holding X.gguf
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const ModelConfig& c = (*ckpt)->config();
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ((*ckpt)->lm_head().data, (*ckpt)->embedding().data);
  EXPECT_EQ(c.rope.scaling.type, RopeScalingType::kLinear);
  EXPECT_DOUBLE_EQ(c.rope.scaling.factor, 4.0);
  EXPECT_EQ(c.rope.scaling.original_max_position_embeddings, 32);
  EXPECT_DOUBLE_EQ(c.rope.theta, 500000.0);
  EXPECT_EQ(c.rope.rotary_dim, 16);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
}

// The RoPE params a config.json with this rope_scaling gives (model
// vocab 16 x hidden 64, 4 heads: head_dim 16 like the GGUF forms).
RopeParams HfRope(const nlohmann::json& rope_scaling, double theta, int64_t max_positions) {
  const nlohmann::json cfg = {{"model_type", "llama"},     {"vocab_size", 16},
                              {"hidden_size", 64},          {"num_hidden_layers", 0},
                              {"num_attention_heads", 4},   {"intermediate_size", 0},
                              {"max_position_embeddings", max_positions},
                              {"rope_theta", theta},        {"rope_scaling", rope_scaling}};
  auto c = ParseHfConfig(cfg.dump(), "equivalent config.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? c->rope : RopeParams();
}

// Same inv_freq bits and attention scaling at `seq_len`.
void ExpectSameFrequencies(const RopeParams& gguf, const RopeParams& hf, int64_t seq_len) {
  auto a = ComputeRopeFrequencies(gguf, seq_len, false);
  auto b = ComputeRopeFrequencies(hf, seq_len, false);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->inv_freq.size(), b->inv_freq.size());
  EXPECT_EQ(0, std::memcmp(a->inv_freq.data(), b->inv_freq.data(), a->inv_freq.size() * 4))
      << "seq_len " << seq_len;
  EXPECT_EQ(a->attention_scaling, b->attention_scaling) << "seq_len " << seq_len;
  EXPECT_EQ(a->used_long_factor, b->used_long_factor) << "seq_len " << seq_len;
}

TEST(GgufTest, YarnScalingKeysMatchTheEquivalentConfigJson) {
  auto ckpt = LoadCheckpoint(FormDir("gguf_yarn"));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const RopeParams& p = (*ckpt)->config().rope;
  EXPECT_EQ(p.pair_layout, RopePairLayout::kInterleaved);  // llama: ggml NORM
  EXPECT_EQ(p.head_dim, 16);
  EXPECT_EQ(p.rotary_dim, 16);
  EXPECT_EQ(p.max_position_embeddings, 128);
  EXPECT_EQ(p.scaling.type, RopeScalingType::kYarn);
  EXPECT_DOUBLE_EQ(p.scaling.factor, 4.0);
  EXPECT_EQ(p.scaling.original_max_position_embeddings, 32);
  EXPECT_DOUBLE_EQ(p.scaling.attention_factor, 1.25);  // rope.scaling.attn_factor
  EXPECT_DOUBLE_EQ(p.scaling.beta_fast, 24.0);         // yarn_beta_fast
  EXPECT_DOUBLE_EQ(p.scaling.beta_slow, 2.0);          // yarn_beta_slow
  EXPECT_NEAR(p.scaling.mscale_all_dim, 1.25, 1e-12);  // yarn_log_multiplier / 0.1
  EXPECT_NEAR(p.scaling.mscale, 1.25, 1e-12);
  const RopeParams hf = HfRope({{"rope_type", "yarn"},
                                {"factor", 4.0},
                                {"original_max_position_embeddings", 32},
                                {"attention_factor", 1.25},
                                {"beta_fast", 24.0},
                                {"beta_slow", 2.0},
                                {"mscale", 1.25},
                                {"mscale_all_dim", 1.25}},
                               10000.0, 128);
  ExpectSameFrequencies(p, hf, 100);
  auto f = ComputeRopeFrequencies(p, 1, false);
  ASSERT_TRUE(f.ok());
  EXPECT_DOUBLE_EQ(f->attention_scaling, 1.25);
}

TEST(GgufTest, Phi3LongropeFactorTensorsMatchTheEquivalentConfigJson) {
  auto ckpt = LoadCheckpoint(FormDir("gguf_phi3_longrope") + "/gguf_phi3_longrope.gguf");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const ModelConfig& c = (*ckpt)->config();
  EXPECT_EQ(c.architecture, "phi3");
  const RopeParams& p = c.rope;
  EXPECT_EQ(p.pair_layout, RopePairLayout::kHalfSplit);  // phi3: ggml NEOX
  // No rope.scaling.type key: the factor tensors mean longrope.
  EXPECT_EQ(p.scaling.type, RopeScalingType::kLongrope);
  const std::vector<double> long_factor = {1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0};
  const std::vector<double> short_factor = {1.0, 1.0, 1.0, 1.25, 1.5, 1.5, 2.0, 2.0};
  EXPECT_EQ(p.scaling.long_factor, long_factor);
  EXPECT_EQ(p.scaling.short_factor, short_factor);
  EXPECT_EQ(p.scaling.original_max_position_embeddings, 64);
  EXPECT_DOUBLE_EQ(p.scaling.attention_factor, 1.5);
  EXPECT_EQ(p.max_position_embeddings, 256);
  const RopeParams hf = HfRope({{"rope_type", "longrope"},
                                {"short_factor", short_factor},
                                {"long_factor", long_factor},
                                {"original_max_position_embeddings", 64},
                                {"attention_factor", 1.5}},
                               10000.0, 256);
  ExpectSameFrequencies(p, hf, 64);  // short factors
  ExpectSameFrequencies(p, hf, 65);  // long factors
  auto f = ComputeRopeFrequencies(p, 65, false);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->used_long_factor);
}

TEST(GgufTest, Stories260KGgufBitIdenticalToBin) {
  auto gguf = LoadCheckpoint(SharedModelsDir() + "/stories260K/stories260K.gguf");
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  auto bin = LoadCheckpoint(SharedModelsDir() + "/stories260K/stories260K.bin");
  ASSERT_TRUE(bin.ok()) << bin.status();
  const ModelConfig& c = (*gguf)->config();
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_hidden_layers, 5);
  EXPECT_EQ(c.num_attention_heads, 8);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.max_position_embeddings, 2048);  // the GGUF metadata says 2048
  EXPECT_EQ(c.rope.pair_layout, RopePairLayout::kInterleaved);
  EXPECT_EQ(c.rope.rotary_dim, 8);
  EXPECT_EQ(c.final_norm_kind, NormKind::kRmsNorm);
  EXPECT_FLOAT_EQ(static_cast<float>(c.norm_eps), 1e-5f);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
  // output.weight is a separate tensor (a copy): untied, as llama.cpp treats it.
  EXPECT_FALSE(c.tie_word_embeddings);
  // Every tensor of the .bin (embedding, final norm, 5 x 9 per-layer) is
  // bit-identical in the GGUF (SOURCES.md), and output == token_embd.
  int compared = 0;
  for (const auto& [name, t] : (*bin)->tensors()) {
    const WeightTensor* g = (*gguf)->Find(name);
    ASSERT_NE(g, nullptr) << name;
    ASSERT_EQ(g->shape, t.shape) << name;
    ASSERT_EQ(g->nbytes, t.nbytes) << name;
    EXPECT_EQ(0, std::memcmp(g->data, t.data, t.nbytes)) << name;
    ++compared;
  }
  EXPECT_EQ(compared, 2 + 5 * 9);
  EXPECT_EQ(0, std::memcmp((*gguf)->lm_head().data, (*bin)->embedding().data,
                           (*bin)->embedding().nbytes));
  const SourceFileInfo& f = (*gguf)->source_files().at(0);
  EXPECT_EQ(f.sha256, "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d");
  EXPECT_EQ(f.size_bytes, 1185376);
  EXPECT_TRUE(f.memory_mapped);
}

TEST(GgufTest, LlamaTinyRandomF16Untied) {
  auto ckpt = LoadCheckpoint(SharedModelsDir() + "/llama-2-tiny-random/llama-2-tiny-random.gguf");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const ModelConfig& c = (*ckpt)->config();
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.hidden_size, 8);
  EXPECT_EQ(c.head_dim, 4);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_FALSE(c.tie_word_embeddings);
  const WeightTensor& e = (*ckpt)->embedding();
  const WeightTensor& h = (*ckpt)->lm_head();
  EXPECT_EQ(e.dtype, DType::kF16);  // in place: the model converts it once
  EXPECT_EQ(e.shape, (std::vector<int64_t>{32000, 8}));
  EXPECT_NE(0, std::memcmp(e.data, h.data, e.nbytes));  // untied: different values
  for (int j = 0; j < 8; ++j) EXPECT_EQ(Values(e)[j], 0.0f);  // row 0 all zeros (HF init)
  // Per-layer F16 tensors are exposed in place under HF names.
  const WeightTensor* q = (*ckpt)->Find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype, DType::kF16);
  // F16 values equal the file's: compare against a direct parse.
  auto file = MappedFile::Open(SharedModelsDir() + "/llama-2-tiny-random/llama-2-tiny-random.gguf");
  ASSERT_TRUE(file.ok());
  auto parsed = ParseGguf((*file)->data(), (*file)->size(), "x");
  ASSERT_TRUE(parsed.ok());
  const GgufTensorInfo* out = parsed->FindTensor("output.weight");
  ASSERT_NE(out, nullptr);
  std::vector<float> want(32000 * 8);
  ConvertToF32(DType::kF16, (*file)->data() + out->offset, want.size(), want.data());
  EXPECT_EQ(Values(h), want);
}

TEST(GgufTest, Version1IsRefusedClearly) {
  const std::string path = SharedModelsDir() + "/stories260K/tinyllamas-stories-260k-f32.gguf";
  auto ckpt = LoadCheckpoint(path);
  ASSERT_FALSE(ckpt.ok());
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ckpt.status().message(), HasSubstr(path));
  EXPECT_THAT(ckpt.status().message(), HasSubstr("version 1 (legacy GGUF"));
  EXPECT_THAT(ckpt.status().message(), HasSubstr("supported versions are 2 and 3"));
}

TEST(GgufTest, ParserKeepsMetadata) {
  auto file = MappedFile::Open(SharedModelsDir() + "/stories260K/stories260K.gguf");
  ASSERT_TRUE(file.ok());
  auto g = ParseGguf((*file)->data(), (*file)->size(), "s.gguf");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->version, 3u);
  EXPECT_EQ(g->alignment, 32u);
  EXPECT_EQ(g->tensors.size(), 48u);
  ASSERT_NE(g->Find("tokenizer.ggml.tokens"), nullptr);
  EXPECT_EQ(g->Find("tokenizer.ggml.tokens")->array_count, 512u);
  EXPECT_EQ(g->Find("tokenizer.ggml.scores")->array_f.size(), 512u);
  EXPECT_EQ(g->Find("general.architecture")->s, "llama");
  EXPECT_EQ(g->FindTensor("token_embd.weight")->shape(), (std::vector<int64_t>{512, 64}));
}

TEST(GgufTest, DequantizeQ8_0Block) {
  uint8_t block[34];
  const uint16_t half_half = 0x3800;  // 0.5 in binary16
  std::memcpy(block, &half_half, 2);
  for (int j = 0; j < 32; ++j) block[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
  float out[32];
  ASSERT_TRUE(quant::DequantizeRow(quant::GgmlType::kQ8_0, block, 32, out));
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.5f * static_cast<float>(j - 16));
}

}  // namespace
}  // namespace vocabd
