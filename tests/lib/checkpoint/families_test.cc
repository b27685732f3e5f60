// The model family table (lib/checkpoint/families.h) against
// tests/golden/families_golden.json (tests/golden/make_families_golden.py):
// for every family, its public config.json (tests/data/families/<case>,
// shrunk by the golden's overrides) with random weights written here in
// each form the family has -- HF safetensors under the family's tensor names,
// GGUF with llama.cpp's arch name, keys and tensor names -- must load and
// give the reference Embed rows (bit-exact where the multiplier is 1),
// logits, tempered log-probs and top-k (|diff| <= 2e-5 + 2e-5 |ref|), the
// family's rules in ModelConfig, and per-layer RoPE outputs (|diff| <= 2e-5)
// with the layers' attention scores (|diff| <= 1e-4).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/checkpoint/checkpoint.h"
#include "lib/checkpoint/families.h"
#include "lib/checkpoint/gguf_writer.h"
#include "lib/checkpoint/hf_config.h"
#include "lib/positions/rope.h"
#include "lib/serving/model.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using testing::MakeTempDir;
using testing::ReadGolden;
using testing::SourceDir;
using testing::ToFloats;

const json& FamiliesGolden() {
  static const json* const kGolden = new json(ReadGolden("families_golden.json"));
  return *kGolden;
}

const json& FamilyCase(const std::string& name) {
  for (const json& c : FamiliesGolden()["cases"]) {
    if (c["name"] == name) return c;
  }
  ADD_FAILURE() << "no golden case " << name;
  static const json kEmpty = json::object();
  return kEmpty;
}

// The golden's case names, in its order. INSTANTIATE_TEST_SUITE_P runs at
// static initialization in every test process (ctest runs each TEST in its
// own): parsing the 1.4 MB golden there cost 0.5 s per process under ASan.
// CaseListMatchesTheGolden keeps this list and the golden in step.
const std::vector<std::string>& CaseNames() {
  static const std::vector<std::string>* const kNames = new std::vector<std::string>{
    "llama", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "olmo2", "smollm3", "llama4",
    "gpt_oss", "phi3", "deepseek_v3", "deepseek_v2", "granite", "granitemoe", "gemma2",
    "gemma3_text", "gemma3", "cohere", "cohere2", "starcoder2", "stablelm", "gpt_bigcode",
    "internlm2", "exaone", "minicpm", "falcon", "bloom", "mpt", "bert", "nomic_bert",
    "mistral", "gemma", "phi", "gpt2", "gpt_neox", "roberta", "xlm_roberta"};
  return *kNames;
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// The public config.json with the golden's overrides applied to its text
// config (the nested text_config of composite configs).
json ShrunkConfig(const json& c) {
  std::ifstream in(SourceDir() + "/tests/data/families/" + c["dir"].get<std::string>() +
                   "/config.json");
  json cfg = json::parse(in);
  json& text = c["text_config"].get<bool>() ? cfg["text_config"] : cfg;
  for (auto it = c["overrides"].begin(); it != c["overrides"].end(); ++it) {
    text[it.key()] = it.value();
  }
  return cfg;
}

// An F32 safetensors file of `tensors` ({name: {shape, values}}).
void WriteSafetensors(const std::string& path, const json& tensors) {
  json header = json::object();
  std::string data;
  for (auto it = tensors.begin(); it != tensors.end(); ++it) {
    const std::vector<float> values = ToFloats(it.value()["values"]);
    const size_t begin = data.size();
    data.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
    header[it.key()] = {{"dtype", "F32"},
                        {"shape", it.value()["shape"]},
                        {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  const uint64_t n = text.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  WriteText(path, out + text + data);
}

std::string WriteHfForm(const json& c) {
  const std::string dir = MakeTempDir();
  WriteText(dir + "/config.json", ShrunkConfig(c).dump(2));
  WriteSafetensors(dir + "/model.safetensors", c["hf_tensors"]);
  return dir;
}

std::string WriteGgufForm(const json& c) {
  const std::string path = MakeTempDir() + "/model.gguf";
  std::vector<std::pair<std::string, GgufWriteValue>> metadata;
  for (const json& m : c["gguf"]["metadata"]) {
    const std::string type = m[1];
    if (type == "u32") metadata.emplace_back(m[0], m[2].get<uint32_t>());
    if (type == "f32") metadata.emplace_back(m[0], m[2].get<float>());
    if (type == "string") metadata.emplace_back(m[0], m[2].get<std::string>());
  }
  std::vector<std::vector<float>> storage;
  std::vector<GgufWriteTensor> tensors;
  const json& ts = c["gguf"]["tensors"];
  for (auto it = ts.begin(); it != ts.end(); ++it) storage.push_back(ToFloats(it.value()["values"]));
  size_t i = 0;
  for (auto it = ts.begin(); it != ts.end(); ++it, ++i) {
    GgufWriteTensor t;
    t.name = it.key();
    t.shape = it.value()["shape"].get<std::vector<int64_t>>();
    t.data = storage[i].data();
    t.nbytes = storage[i].size() * sizeof(float);
    tensors.push_back(t);
  }
  EXPECT_TRUE(WriteGguf(path, metadata, tensors).ok());
  return path;
}

std::unique_ptr<Model> Load(const std::string& path) {
  Model::Options options("m", path);
  options.weights_dtype = WeightsDType::kF32;
  auto model = Model::Create(options);
  EXPECT_TRUE(model.ok()) << path << ": " << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

bool Near(double got, double want, double abs_tol, double rel_tol) {
  return std::fabs(got - want) <= abs_tol + rel_tol * std::fabs(want);
}

// Embed, ComputeLogits and Score (temperature, targets, top-3, candidates)
// against the golden.
void CheckEnds(const Model& model, const json& c, const std::string& form) {
  SCOPED_TRACE(form);
  const ModelConfig& cfg = model.config();
  // Embed: bit-exact F32 when the multiplier is 1.
  EmbedInput in;
  in.token_ids = {c["token_ids"].get<std::vector<int64_t>>()};
  EmbedOutput out;
  ASSERT_TRUE(model.Embed(in, &out).ok());
  const std::vector<float> want_embed = ToFloats(c["embed"]);
  ASSERT_EQ(out.embeddings.size(), want_embed.size());
  for (size_t i = 0; i < want_embed.size(); ++i) {
    if (c["embed_bit_exact"].get<bool>()) {
      uint32_t a = 0, b = 0;
      std::memcpy(&a, &out.embeddings[i], 4);
      std::memcpy(&b, &want_embed[i], 4);
      ASSERT_EQ(a, b) << "embed[" << i << "]";
    } else if (!c["embedding_norm_eps"].is_null()) {
      // Embedding LayerNorm: fp32 against the float64 reference.
      ASSERT_TRUE(Near(out.embeddings[i], want_embed[i], 2e-6, 2e-6))
          << "embed[" << i << "] " << out.embeddings[i] << " vs " << want_embed[i];
    } else {
      ASSERT_TRUE(Near(out.embeddings[i], want_embed[i], 0, 1e-7))
          << "embed[" << i << "] " << out.embeddings[i] << " vs " << want_embed[i];
    }
  }
  if (!c["head"].get<bool>()) {
    // Embed-only encoder: every head call names the reason.
    const std::vector<float> hidden = ToFloats(c["hidden"]);
    HeadInput head;
    head.hidden = hidden.data();
    head.rows = c["rows"];
    head.width = cfg.hidden_size;
    std::vector<float> logits;
    absl::Status s = model.ComputeLogits(head, /*log_softmax=*/false, &logits);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("is served for Embed only"));
    return;
  }
  // Raw logits (the family's transform applied).
  const std::vector<float> hidden = ToFloats(c["hidden"]);
  HeadInput head;
  head.hidden = hidden.data();
  head.rows = c["rows"];
  head.width = cfg.hidden_size;
  std::vector<float> logits;
  ASSERT_TRUE(model.ComputeLogits(head, /*log_softmax=*/false, &logits).ok());
  const std::vector<double> want_logits = testing::ToDoubles(c["logits"]);
  ASSERT_EQ(logits.size(), want_logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    ASSERT_TRUE(Near(logits[i], want_logits[i], 2e-5, 2e-5))
        << "logits[" << i << "] " << logits[i] << " vs " << want_logits[i];
  }
  // Log-softmax after temperature, through ComputeLogits and Score.
  head.temperature = c["temperature"].get<float>();
  std::vector<float> logprobs;
  ASSERT_TRUE(model.ComputeLogits(head, /*log_softmax=*/true, &logprobs).ok());
  const std::vector<double> want_lp = testing::ToDoubles(c["logprobs"]);
  for (size_t i = 0; i < logprobs.size(); ++i) {
    ASSERT_TRUE(Near(logprobs[i], want_lp[i], 2e-5, 2e-5))
        << "logprobs[" << i << "] " << logprobs[i] << " vs " << want_lp[i];
  }
  ScoreInput score;
  score.head = head;
  score.target_ids = c["targets"].get<std::vector<int64_t>>();
  score.top_k = 3;
  score.candidate_ids = {1, 2};
  ScoreOutput scored;
  ASSERT_TRUE(model.Score(score, &scored).ok());
  const int64_t vocab = cfg.vocab_size;
  for (int64_t r = 0; r < head.rows; ++r) {
    const double* row = want_lp.data() + r * vocab;
    EXPECT_TRUE(Near(scored.rows[r].target_logprob, row[score.target_ids[r]], 2e-5, 2e-5));
    EXPECT_TRUE(Near(scored.rows[r].candidate_logprobs[1], row[2], 2e-5, 2e-5));
    // top-3: the three best reference ids (ties broken by id).
    std::vector<int64_t> order(static_cast<size_t>(vocab));
    for (int64_t j = 0; j < vocab; ++j) order[j] = j;
    std::stable_sort(order.begin(), order.end(),
                     [row](int64_t a, int64_t b) { return row[a] > row[b]; });
    ASSERT_EQ(scored.rows[r].top_k.size(), 3u);
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(scored.rows[r].top_k[k].first, order[k]) << "row " << r << " top " << k;
      EXPECT_TRUE(Near(scored.rows[r].top_k[k].second, row[order[k]], 2e-5, 2e-5));
    }
  }
}

// The family's rules as ModelConfig reports them (GetModel's source). The
// HF form is served by the family of the config's model_type, the GGUF form
// by the family of the golden's gguf_model_type (mistral files are arch
// llama).
void CheckRules(const ModelConfig& cfg, const json& c, bool gguf) {
  const json& r = c["rules"];
  const std::string norm = r["norm"];
  const FamilyRules* family =
      FindHfFamily(gguf ? c["gguf_model_type"].get<std::string>()
                        : ShrunkConfig(c)["model_type"].get<std::string>());
  ASSERT_NE(family, nullptr);
  EXPECT_EQ(cfg.family, family->name);
  EXPECT_EQ(cfg.final_norm_kind, norm == "none" ? NormKind::kNone
                                 : norm == "rms" ? NormKind::kRmsNorm
                                                 : NormKind::kLayerNorm);
  EXPECT_EQ(cfg.norm_without_bias, norm == "cohere_ln" || norm == "ln_nobias");
  if (norm != "none") {
    EXPECT_FLOAT_EQ(static_cast<float>(cfg.norm_eps), r["eps"].get<float>());
    if (!gguf) {
      EXPECT_EQ(cfg.norm_eps_key, r["eps_key"].get<std::string>());
    }
  }
  if (!gguf) {
    EXPECT_EQ(cfg.norm_one_plus_weight, r["norm_one_plus_weight"].get<bool>());
  }
  // The embedding module (BERT, Nomic BERT, BLOOM LayerNorm after the lookup).
  EXPECT_EQ(cfg.embedding_layer_norm, !c["embedding_norm_eps"].is_null());
  if (cfg.embedding_layer_norm) {
    EXPECT_FLOAT_EQ(static_cast<float>(cfg.embedding_norm_eps),
                    c["embedding_norm_eps"].get<float>());
  }
  const std::string positions = c["positions"];
  EXPECT_EQ(cfg.position_scheme, positions == "rope"      ? PositionScheme::kRope
                                 : positions == "alibi"   ? PositionScheme::kAlibi
                                                          : PositionScheme::kLearned);
  EXPECT_EQ(cfg.lm_head_unsupported_reason.empty(), c["head"].get<bool>());
  EXPECT_FLOAT_EQ(static_cast<float>(cfg.embedding_scale), r["embedding_scale"].get<float>());
  EXPECT_DOUBLE_EQ(cfg.logit_transform.logit_scale, r["logit_scale"].get<double>());
  EXPECT_DOUBLE_EQ(cfg.logit_transform.logits_scaling, r["logits_scaling"].get<double>());
  EXPECT_DOUBLE_EQ(cfg.logit_transform.final_logit_softcapping,
                   r["final_logit_softcapping"].get<double>());
  EXPECT_EQ(cfg.tie_word_embeddings, c["tied"].get<bool>());
}

// Every layer's RoPE: rotary or not, its theta and rotary_dim; with
// `outputs`, ApplyRope with that layer's params gives the golden q/k.
void CheckLayers(const ModelConfig& cfg, const json& c, bool outputs) {
  if (!c.contains("rope_layers")) return;
  for (const json& l : c["rope_layers"]) {
    const int layer = l["layer"];
    SCOPED_TRACE(::testing::Message() << "layer " << layer);
    absl::StatusOr<LayerRope> lr = cfg.RopeOfLayer(layer);
    ASSERT_TRUE(lr.ok()) << lr.status();
    ASSERT_EQ(lr->rotary, l["rotary"].get<bool>());
    if (!l["attention_type"].get<std::string>().empty()) {
      EXPECT_EQ(lr->attention_type, l["attention_type"].get<std::string>());
    }
    if (!lr->rotary) continue;
    EXPECT_DOUBLE_EQ(static_cast<float>(lr->rope.theta), l["theta"].get<float>());
    EXPECT_EQ(lr->rope.rotary_dim, l["rotary_dim"].get<int>());
    if (!outputs) continue;
    EXPECT_EQ(lr->rope.pair_layout, l["layout"] == "INTERLEAVED" ? RopePairLayout::kInterleaved
                                                                  : RopePairLayout::kHalfSplit);
    std::vector<float> q = ToFloats(l["q"]), k = ToFloats(l["k"]);
    const std::vector<int64_t> qs = l["q_shape"], ks = l["k_shape"];
    QkTensor qt{q.data(), qs[0], qs[1], qs[2], qs[3]};
    QkTensor kt{k.data(), ks[0], ks[1], ks[2], ks[3]};
    ApplyRopeOptions options;
    options.layout = QkvLayout::kBHSD;
    auto applied = ApplyRope(lr->rope, options, l["positions"].get<std::vector<int64_t>>(), qt, kt);
    ASSERT_TRUE(applied.ok()) << applied.status();
    EXPECT_NEAR(applied->attention_scaling, l["attention_scaling"].get<double>(), 1e-6);
    const std::vector<float> want_q = ToFloats(l["q_out"]), want_k = ToFloats(l["k_out"]);
    for (size_t i = 0; i < q.size(); ++i) ASSERT_NEAR(q[i], want_q[i], 2e-5) << "q[" << i << "]";
    for (size_t i = 0; i < k.size(); ++i) ASSERT_NEAR(k[i], want_k[i], 2e-5) << "k[" << i << "]";
  }
}

class FamiliesTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FamiliesTest, HfFormMatchesReference) {
  const json& c = FamilyCase(GetParam());
  std::unique_ptr<Model> model = Load(WriteHfForm(c));
  ASSERT_NE(model, nullptr);
  CheckRules(model->config(), c, /*gguf=*/false);
  CheckEnds(*model, c, "hf");
  CheckLayers(model->config(), c, /*outputs=*/true);
}

TEST_P(FamiliesTest, GgufFormMatchesReference) {
  const json& c = FamilyCase(GetParam());
  if (!c.contains("gguf")) GTEST_SKIP() << GetParam() << " has no GGUF form in vocabd";
  std::unique_ptr<Model> model = Load(WriteGgufForm(c));
  ASSERT_NE(model, nullptr);
  CheckRules(model->config(), c, /*gguf=*/true);
  CheckEnds(*model, c, "gguf");
  // llama.cpp's per-layer rules give the same pattern for these configs; q/k
  // pair layouts differ between the forms (llama-arch GGUF files are
  // permuted for NORM), so only the structure is compared.
  CheckLayers(model->config(), c, /*outputs=*/false);
}

// One end-to-end check per RoPE pattern: two layers with different
// configurations give the reference attention scores through ApplyRope with
// each layer's params.
TEST_P(FamiliesTest, TwoLayerAttentionScores) {
  const json& c = FamilyCase(GetParam());
  if (!c.contains("attention_pair")) GTEST_SKIP() << GetParam() << ": one RoPE for every layer";
  std::unique_ptr<Model> model = Load(WriteHfForm(c));
  ASSERT_NE(model, nullptr);
  const json& pair = c["attention_pair"];
  for (size_t p = 0; p < 2; ++p) {
    const int layer = pair["layers"][p];
    const json& l = c["rope_layers"][static_cast<size_t>(layer)];
    auto lr = model->config().RopeOfLayer(layer);
    ASSERT_TRUE(lr.ok());
    std::vector<float> q = ToFloats(l["q"]), k = ToFloats(l["k"]);
    const std::vector<int64_t> qs = l["q_shape"], ks = l["k_shape"];
    if (lr->rotary) {
      QkTensor qt{q.data(), qs[0], qs[1], qs[2], qs[3]};
      QkTensor kt{k.data(), ks[0], ks[1], ks[2], ks[3]};
      ASSERT_TRUE(ApplyRope(lr->rope, ApplyRopeOptions(), l["positions"].get<std::vector<int64_t>>(),
                            qt, kt)
                      .ok());
    }
    const int64_t hq = qs[1], hk = ks[1], s = qs[2], d = qs[3];
    const std::vector<double> want = testing::ToDoubles(pair["scores"][p]);
    for (int64_t h = 0; h < hq; ++h) {
      for (int64_t i = 0; i < s; ++i) {
        for (int64_t j = 0; j < s; ++j) {
          double dot = 0;
          const float* qi = q.data() + (h * s + i) * d;
          const float* kj = k.data() + ((h / (hq / hk)) * s + j) * d;
          for (int64_t x = 0; x < d; ++x) dot += static_cast<double>(qi[x]) * kj[x];
          dot /= std::sqrt(static_cast<double>(d));
          ASSERT_NEAR(dot, want[static_cast<size_t>((h * s + i) * s + j)], 1e-4)
              << "layer " << layer << " head " << h << " (" << i << ", " << j << ")";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, FamiliesTest, ::testing::ValuesIn(CaseNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(FamilyTableTest, CaseListMatchesTheGolden) {
  std::vector<std::string> golden;
  for (const json& c : FamiliesGolden()["cases"]) golden.push_back(c["name"]);
  EXPECT_EQ(golden, CaseNames()) << "add a new golden case's name to CaseNames()";
}

TEST(FamilyTableTest, EveryEntryIsFoundByItsNames) {
  for (const FamilyRules& f : AllFamilies()) {
    for (const std::string& t : f.hf_model_types) EXPECT_EQ(FindHfFamily(t), &f) << t;
    for (const std::string& a : f.gguf_archs) EXPECT_EQ(FindGgufFamily(a), &f) << a;
    EXPECT_EQ(FindFamily(f.name), &f);
    EXPECT_FALSE(f.hf_tensors.empty()) << f.name;
  }
}

TEST(FamilyTableTest, UnknownGgufArchListsTheKnownOnes) {
  const json& c = FamilyCase("qwen3");
  json bad = c;
  bad["gguf"]["metadata"][0][2] = "rwkv6";
  for (json& m : bad["gguf"]["metadata"]) {
    std::string key = m[0];
    if (key.rfind("qwen3.", 0) == 0) m[0] = "rwkv6." + key.substr(6);
  }
  auto model = Model::Create(Model::Options("m", WriteGgufForm(bad)));
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(model.status().message(),
              HasSubstr("GGUF key \"general.architecture\" = \"rwkv6\" is not supported (llama"));
  EXPECT_THAT(model.status().message(), HasSubstr("command-r"));
}

TEST(FamilyTableTest, RefusalsNameTheKeyValueAndRule) {
  const json& c = FamilyCase("gemma3_text");
  json cfg = ShrunkConfig(c);
  cfg["layer_types"] = json::array({"sliding_attention", "chunked_attention"});
  auto parsed = ParseHfConfig(cfg.dump(), "g/config.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("layer_types"));

  cfg = ShrunkConfig(c);
  cfg["layer_types"] = json::array({"sliding_attention", "full_attention", "full_attention",
                                    "full_attention", "full_attention", "full_attention",
                                    "full_attention", "chunked_attention"});
  parsed = ParseHfConfig(cfg.dump(), "g/config.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("key \"layer_types[7]\" = \"chunked_attention\" is not supported"));

  cfg = ShrunkConfig(FamilyCase("smollm3"));
  cfg["no_rope_layers"] = json::array({1, 1, 2, 0, 1, 1, 1, 0});
  parsed = ParseHfConfig(cfg.dump(), "s/config.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("key \"no_rope_layers[2]\" = 2 must be 0 (NoPE) or 1 (RoPE)"));

  cfg = ShrunkConfig(FamilyCase("granite"));
  cfg["embedding_multiplier"] = -1.0;
  parsed = ParseHfConfig(cfg.dump(), "gr/config.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("key \"embedding_multiplier\" = -1 must be finite and > 0"));

  cfg = ShrunkConfig(FamilyCase("gemma2"));
  cfg["final_logit_softcapping"] = -3.0;
  parsed = ParseHfConfig(cfg.dump(), "g2/config.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("key \"final_logit_softcapping\" = -3"));
}

// The families added with embedding LayerNorms, ALiBi and aliases: each
// unsupported value is refused naming the key, the value and the rule.
TEST(FamilyTableTest, EncoderAlibiAndAliasRefusals) {
  auto refused = [](const json& cfg, const std::string& want) {
    auto parsed = ParseHfConfig(cfg.dump(), "x/config.json");
    ASSERT_FALSE(parsed.ok()) << want;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(want));
  };
  json cfg = ShrunkConfig(FamilyCase("mpt"));
  cfg["attn_config"]["alibi"] = false;
  refused(cfg, "key \"attn_config.alibi\" = false is not supported");
  cfg = ShrunkConfig(FamilyCase("mpt"));
  cfg["attn_config"]["alibi_bias_max"] = 16;
  refused(cfg, "key \"attn_config.alibi_bias_max\" = 16 is not supported (only 8");
  cfg = ShrunkConfig(FamilyCase("mpt"));
  cfg["n_heads"] = 4;  // power of two: accepted
  EXPECT_TRUE(ParseHfConfig(cfg.dump(), "x/config.json").ok());
  cfg["d_model"] = 24;
  cfg["n_heads"] = 6;
  refused(cfg, "key \"n_heads\" = 6 is not supported for MPT");

  cfg = ShrunkConfig(FamilyCase("nomic_bert"));
  cfg["rotary_emb_fraction"] = 0.0;
  refused(cfg, "key \"rotary_emb_fraction\" = 0 is not supported");
  cfg = ShrunkConfig(FamilyCase("nomic_bert"));
  cfg["rotary_scaling_factor"] = 2.0;
  refused(cfg, "key \"rotary_scaling_factor\" = 2.0 is not supported");
  cfg = ShrunkConfig(FamilyCase("nomic_bert"));
  cfg["prenorm"] = true;
  refused(cfg, "key \"prenorm\" = true is not supported");

  cfg = ShrunkConfig(FamilyCase("bert"));
  cfg["position_embedding_type"] = "relative_key";
  refused(cfg, "key \"position_embedding_type\" = \"relative_key\" is not supported");
  cfg = ShrunkConfig(FamilyCase("bert"));
  cfg["type_vocab_size"] = 0;
  refused(cfg, "key \"type_vocab_size\" = 0 must be > 0");
  cfg = ShrunkConfig(FamilyCase("bert"));
  cfg["layer_norm_eps"] = -1.0;
  refused(cfg, "key \"layer_norm_eps\" = -1 must be finite and > 0");

  cfg = ShrunkConfig(FamilyCase("minicpm"));
  cfg["dim_model_base"] = 0;
  refused(cfg, "key \"dim_model_base\" = 0 must be finite and > 0");

  // Falcon: the RefinedWeb aliases n_layer / n_head; a missing size names
  // the primary key.
  cfg = ShrunkConfig(FamilyCase("falcon"));
  cfg.erase("n_head");
  refused(cfg, "key \"num_attention_heads\" is required but missing");
  // Falcon with alibi: ALiBi positions (build_alibi_tensor), no RoPE.
  cfg = ShrunkConfig(FamilyCase("falcon"));
  cfg["alibi"] = true;
  auto parsed = ParseHfConfig(cfg.dump(), "f/config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->position_scheme, PositionScheme::kAlibi);
  cfg["new_decoder_architecture"] = true;
  cfg["num_kv_heads"] = 2;
  parsed = ParseHfConfig(cfg.dump(), "f/config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->num_key_value_heads, 2);
  cfg.erase("num_kv_heads");
  cfg["n_head_kv"] = 1;
  parsed = ParseHfConfig(cfg.dump(), "f/config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->num_key_value_heads, 1);
  cfg["n_head_kv"] = 0;
  refused(cfg, "key \"n_head_kv\" = 0 must be in [1, 2^31)");

  // BLOOM: bloom-560m's config.json has n_embed and num_attention_heads
  // (BloomConfig's other names); one size under both names must agree.
  cfg = ShrunkConfig(FamilyCase("bloom"));
  ASSERT_TRUE(cfg.contains("n_embed") && !cfg.contains("hidden_size"));
  parsed = ParseHfConfig(cfg.dump(), "b/config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->hidden_size, cfg["n_embed"].get<int>());
  cfg["hidden_size"] = cfg["n_embed"];
  EXPECT_TRUE(ParseHfConfig(cfg.dump(), "b/config.json").ok());
  cfg["hidden_size"] = 1024;
  refused(cfg, "key \"hidden_size\" = 1024 disagrees with key \"n_embed\" = 16");
  cfg = ShrunkConfig(FamilyCase("bloom"));
  cfg["n_head"] = 4;
  refused(cfg, "key \"n_head\" = 4 disagrees with key \"num_attention_heads\" = 2");
}

// transformers 5's rope_parameters (theta and scaling inside it) is
// refused, not served with the family's default theta.
TEST(FamilyTableTest, Transformers5RopeParametersAreRefused) {
  json cfg = ShrunkConfig(FamilyCase("qwen3"));
  ASSERT_TRUE(ParseHfConfig(cfg.dump(), "q/config.json").ok());
  cfg.erase("rope_theta");
  cfg["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  auto parsed = ParseHfConfig(cfg.dump(), "q/config.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(parsed.status().message()),
              HasSubstr("key \"rope_parameters\" = {\"rope_theta\":1000000.0,\"rope_type\":"
                        "\"default\"} is not supported (the transformers 5 RoPE layout"));
}

TEST(FamilyTableTest, GgufEncoderAndAlibiRefusals) {
  auto refused = [](json c, const std::string& key, const std::string& want) {
    for (json& m : c["gguf"]["metadata"]) {
      if (m[0] == key) m[2] = 16.0;
    }
    auto model = Model::Create(Model::Options("m", WriteGgufForm(c)));
    ASSERT_FALSE(model.ok()) << want;
    EXPECT_THAT(std::string(model.status().message()), HasSubstr(want));
  };
  refused(FamilyCase("mpt"), "mpt.attention.max_alibi_bias",
          "GGUF key \"mpt.attention.max_alibi_bias\" = 16 is not supported (only 8");
  // mpt with a learned position table (llama.cpp's non-ALiBi MPT).
  json mpt = FamilyCase("mpt");
  mpt["gguf"]["tensors"]["position_embd.weight"] = mpt["gguf"]["tensors"]["token_embd.weight"];
  auto with_positions = Model::Create(Model::Options("m", WriteGgufForm(mpt)));
  ASSERT_FALSE(with_positions.ok());
  EXPECT_THAT(std::string(with_positions.status().message()),
              HasSubstr("tensor \"position_embd.weight\" is present but mpt is served with ALiBi"));
  // bert without its embedding LayerNorm eps.
  json c = FamilyCase("bert");
  json kept = json::array();
  for (const json& m : c["gguf"]["metadata"]) {
    if (m[0] != "bert.attention.layer_norm_epsilon") kept.push_back(m);
  }
  c["gguf"]["metadata"] = kept;
  auto model = Model::Create(Model::Options("m", WriteGgufForm(c)));
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(std::string(model.status().message()),
              HasSubstr("GGUF key \"bert.attention.layer_norm_epsilon\" is required but missing "
                        "(bert applies a LayerNorm to the embeddings)"));
  // nomic-bert without token_types.weight.
  c = FamilyCase("nomic_bert");
  c["gguf"]["tensors"].erase("token_types.weight");
  model = Model::Create(Model::Options("m", WriteGgufForm(c)));
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(std::string(model.status().message()),
              HasSubstr("required tensor \"embeddings.token_type_embeddings.weight\" is missing"));
}

TEST(FamilyTableTest, Gemma2SoftcapNullMeansNoneAndAbsentMeansClassDefault) {
  json cfg = ShrunkConfig(FamilyCase("gemma2"));
  cfg["final_logit_softcapping"] = nullptr;
  auto parsed = ParseHfConfig(cfg.dump(), "g2/config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->logit_transform.final_logit_softcapping, 0.0);
  cfg.erase("final_logit_softcapping");
  parsed = ParseHfConfig(cfg.dump(), "g2/config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->logit_transform.final_logit_softcapping, 30.0);  // Gemma2Config default
}

TEST(FamilyTableTest, CohereNormBiasIsRefused) {
  json c = FamilyCase("cohere");
  c["hf_tensors"]["model.norm.bias"] = c["hf_tensors"]["model.norm.weight"];
  auto model = Model::Create(Model::Options("m", WriteHfForm(c)));
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(std::string(model.status().message()),
              HasSubstr("\"model.norm.bias\" is present but family \"cohere\" has a LayerNorm "
                        "without bias"));
}

TEST(FamilyTableTest, LayerIndexOutsideTheModelIsRefused) {
  auto parsed = ParseHfConfig(ShrunkConfig(FamilyCase("qwen3")).dump(), "q/config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->RopeOfLayer(7).ok());
  auto bad = parsed->RopeOfLayer(8);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("layer = 8 is outside [0, num_hidden_layers = 8)"));
  EXPECT_FALSE(parsed->RopeOfLayer(-1).ok());
}

}  // namespace
}  // namespace vocabd
