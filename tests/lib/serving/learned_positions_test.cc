// Learned absolute positions in Embed, on real checkpoint files:
//   - GPT-2 (tests/data/forms/gpt2, `wpe`): Embed = wte[id] + wpe[position]
//     bit for bit, with default positions, position_offset, explicit
//     position_ids and learned_position_offset. The reference rows are read
//     here from the safetensors file with a parser of this test (not the
//     loader under test).
//   - RoBERTa / XLM-R (tests/data/forms/roberta, xlm_roberta, made by
//     tests/golden/make_checkpoint_forms_golden.py): positions numbered as
//     HF's create_position_ids_from_input_ids (pads on row padding_idx,
//     content from padding_idx + 1); Embed = RobertaEmbeddings.forward for
//     token_type_ids = 0, LayerNorm(word + token_type[0] + position), against
//     the NumPy golden (|diff| <= 2e-6 + 2e-6 |ref|, the fp32 LayerNorm
//     against float64); the LM head is refused with FAILED_PRECONDITION.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/checkpoint/checkpoint.h"
#include "lib/checkpoint/hf_config.h"
#include "lib/serving/model.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;
using testing::ReadFileBytes;
using testing::ReadGolden;
using testing::SourceDir;
using testing::ToFloats;

std::string FormDir(const std::string& name) { return SourceDir() + "/tests/data/forms/" + name; }

// F32 tensors of a safetensors file, read independently of lib/safetensors:
// u64 header length, JSON header {name: {dtype, shape, data_offsets}}, data.
struct RawTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};
std::map<std::string, RawTensor> ReadF32Safetensors(const std::string& path) {
  const std::string bytes = ReadFileBytes(path);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_len));
  const size_t data_start = 8 + header_len;
  std::map<std::string, RawTensor> out;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__" || it.value().at("dtype") != "F32") continue;
    RawTensor t;
    t.shape = it.value().at("shape").get<std::vector<int64_t>>();
    const auto offsets = it.value().at("data_offsets").get<std::vector<size_t>>();
    t.values.resize((offsets[1] - offsets[0]) / sizeof(float));
    std::memcpy(t.values.data(), bytes.data() + data_start + offsets[0], offsets[1] - offsets[0]);
    out[it.key()] = std::move(t);
  }
  return out;
}

std::unique_ptr<Model> CreateModel(const std::string& name, const std::string& path) {
  Model::Options options(name, path);
  options.weights_dtype = WeightsDType::kF32;
  auto model = Model::Create(options);
  EXPECT_TRUE(model.ok()) << path << ": " << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

// Bitwise comparison of float vectors (reports the first difference).
void ExpectBitEqual(const std::vector<float>& got, const std::vector<float>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(&got[i], &want[i], sizeof(float)))
        << what << " element " << i << ": got " << got[i] << " want " << want[i];
  }
}

// |got - want| <= 2e-6 + 2e-6 |want| element-wise: an fp32 LayerNorm against
// the float64 reference.
void ExpectLayerNormNear(const std::vector<float>& got, const std::vector<float>& want,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::fabs(static_cast<double>(got[i]) - want[i]),
              2e-6 + 2e-6 * std::fabs(static_cast<double>(want[i])))
        << what << " element " << i << ": got " << got[i] << " want " << want[i];
  }
}

// ------------------------------------------------------------------- GPT-2

class Gpt2LearnedPositionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = CreateModel("gpt2", FormDir("gpt2"));
    ASSERT_NE(model_, nullptr);
    const auto tensors = ReadF32Safetensors(FormDir("gpt2") + "/model.safetensors");
    wte_ = tensors.at("transformer.wte.weight");
    wpe_ = tensors.at("transformer.wpe.weight");
    hidden_ = wte_.shape[1];
    ASSERT_EQ(wpe_.shape, (std::vector<int64_t>{16, hidden_}));
  }
  // wte[id] + wpe[row], one float32 add per element (what GPT-2 computes).
  std::vector<float> Want(const std::vector<int64_t>& ids, const std::vector<int64_t>& rows) const {
    std::vector<float> out;
    for (size_t t = 0; t < ids.size(); ++t) {
      for (int64_t j = 0; j < hidden_; ++j) {
        out.push_back(wte_.values[ids[t] * hidden_ + j] + wpe_.values[rows[t] * hidden_ + j]);
      }
    }
    return out;
  }
  std::vector<float> Embed(const EmbedInput& input) const {
    EmbedOutput out;
    absl::Status s = model_->Embed(input, &out);
    EXPECT_TRUE(s.ok()) << s;
    return out.embeddings;
  }

  std::unique_ptr<Model> model_;
  RawTensor wte_, wpe_;
  int64_t hidden_ = 0;
};

TEST_F(Gpt2LearnedPositionsTest, DefaultPositionsAreZeroBasedPerSequence) {
  EmbedInput in;
  in.token_ids = {{5, 7, 23, 0}, {11, 3}};
  EXPECT_EQ(model_->config().learned_position_offset, 0);
  ExpectBitEqual(Embed(in), Want({5, 7, 23, 0, 11, 3}, {0, 1, 2, 3, 0, 1}), "default");
  // Explicitly LEARNED is the same as the model default.
  in.absolute_positions = AbsolutePositionsMode::kLearned;
  ExpectBitEqual(Embed(in), Want({5, 7, 23, 0, 11, 3}, {0, 1, 2, 3, 0, 1}), "learned");
  // NONE: the bare rows.
  in.absolute_positions = AbsolutePositionsMode::kNone;
  std::vector<float> bare;
  for (int64_t id : {5, 7, 23, 0, 11, 3}) {
    bare.insert(bare.end(), wte_.values.begin() + id * hidden_,
                wte_.values.begin() + (id + 1) * hidden_);
  }
  ExpectBitEqual(Embed(in), bare, "none");
}

TEST_F(Gpt2LearnedPositionsTest, PositionOffsetsContinueACachedPrefix) {
  EmbedInput in;
  in.token_ids = {{9, 4}, {2}, {1, 2, 3}};
  in.position_offsets = {7, 15, 0};
  ExpectBitEqual(Embed(in), Want({9, 4, 2, 1, 2, 3}, {7, 8, 15, 0, 1, 2}), "offsets");
}

TEST_F(Gpt2LearnedPositionsTest, ExplicitPositionIdsLeftPaddedBatch) {
  // Left-padded batch with mask-cumsum position ids (pads at 1 as HF does
  // after masked_fill_(mask == 0, 1)); the second sequence uses its offset.
  EmbedInput in;
  in.token_ids = {{0, 0, 6, 8}, {10, 12}};
  in.position_ids = {{1, 1, 0, 1}, {}};
  in.position_offsets = {0, 4};
  ExpectBitEqual(Embed(in), Want({0, 0, 6, 8, 10, 12}, {1, 1, 0, 1, 4, 5}), "position_ids");
}

TEST_F(Gpt2LearnedPositionsTest, LearnedPositionOffsetShiftsTheRowAndTheTableEnds) {
  EmbedInput in;
  in.token_ids = {{3, 4}};
  in.position_offsets = {5};
  in.learned_position_offset = 2;
  ExpectBitEqual(Embed(in), Want({3, 4}, {7, 8}), "offset 2");
  // Rows 14 and 15 (the last) are reachable.
  in.position_offsets = {12};
  ExpectBitEqual(Embed(in), Want({3, 4}, {14, 15}), "last rows");
  // Row 16 is not: a learned table cannot be extended, whatever the flag.
  in.position_offsets = {13};
  in.allow_beyond_trained_length = true;
  EmbedOutput out;
  absl::Status s = model_->Embed(in, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("sequences[0].token_ids[1]: position 14 of token 1 + "
                                     "learned_position_offset 2 is beyond "
                                     "the learned position table (16 rows"));
}

// ----------------------------------------------------------------- RoBERTa

struct RobertaCase {
  std::vector<int64_t> ids;
  int64_t past = 0;
  std::vector<int64_t> rows;
  std::vector<float> embeddings;
};

std::vector<RobertaCase> RobertaCases(const std::string& form, int64_t* padding_idx) {
  const nlohmann::json golden = ReadGolden("checkpoint_forms_golden.json").at("roberta").at(form);
  *padding_idx = golden.at("padding_idx").get<int64_t>();
  std::vector<RobertaCase> cases;
  for (const auto& c : golden.at("cases")) {
    RobertaCase r;
    r.ids = c.at("ids").get<std::vector<int64_t>>();
    r.past = c.at("past").get<int64_t>();
    r.rows = c.at("rows").get<std::vector<int64_t>>();
    r.embeddings = ToFloats(c.at("embeddings"));
    cases.push_back(std::move(r));
  }
  return cases;
}

TEST(RobertaLearnedPositionsTest, ConfigMapsPaddingIdxOffsetAndEmbedOnly) {
  for (const auto& [form, pad, prefix] :
       std::vector<std::tuple<std::string, int64_t, std::string>>{
           {"roberta", 1, "roberta."}, {"xlm_roberta", 3, ""}}) {
    SCOPED_TRACE(form);
    auto model = CreateModel(form, FormDir(form));
    ASSERT_NE(model, nullptr);
    const ModelConfig& c = model->config();
    EXPECT_EQ(c.architecture, form == "roberta" ? "roberta" : "xlm-roberta");
    EXPECT_EQ(c.position_scheme, PositionScheme::kLearned);
    EXPECT_EQ(c.learned_position_padding_idx, pad);
    EXPECT_EQ(c.learned_position_offset, pad + 1);
    EXPECT_EQ(c.final_norm_kind, NormKind::kNone);
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_THAT(c.lm_head_unsupported_reason, HasSubstr("served for Embed only"));
    // RobertaEmbeddings: token-type row 0 and the LayerNorm (layer_norm_eps)
    // are applied by Embed, from the file's [roberta.]embeddings.* tensors
    // under their canonical names.
    EXPECT_TRUE(c.embedding_token_type);
    EXPECT_TRUE(c.embedding_layer_norm);
    EXPECT_EQ(c.embedding_norm_eps, 1e-5);
    EXPECT_EQ(c.embedding_norm_eps_key, "layer_norm_eps");
    EXPECT_EQ(c.family, "roberta" == form ? "roberta" : "xlm-roberta");
    EXPECT_NE(model->checkpoint().Find(kEmbedNorm), nullptr);
    EXPECT_NE(model->checkpoint().Find(kEmbedNormBias), nullptr);
    EXPECT_NE(model->checkpoint().Find(kTokenTypeEmbeddings), nullptr);
    if (!prefix.empty()) {
      EXPECT_EQ(model->checkpoint().Find(prefix + "embeddings.LayerNorm.bias"), nullptr)
          << "renamed to " << kEmbedNormBias;
    }
  }
}

TEST(RobertaLearnedPositionsTest, EmbedMatchesHfCreatePositionIdsFromInputIds) {
  for (const std::string form : {"roberta", "xlm_roberta"}) {
    SCOPED_TRACE(form);
    auto model = CreateModel(form, FormDir(form));
    ASSERT_NE(model, nullptr);
    int64_t pad = -1;
    const std::vector<RobertaCase> cases = RobertaCases(form, &pad);
    ASSERT_FALSE(cases.empty());
    // All cases in one ragged batch (past_key_values_length = position_offset).
    EmbedInput in;
    std::vector<float> want;
    for (const RobertaCase& c : cases) {
      in.token_ids.push_back(c.ids);
      in.position_offsets.push_back(c.past);
      want.insert(want.end(), c.embeddings.begin(), c.embeddings.end());
      // The golden rows themselves: pads on padding_idx, content from
      // padding_idx + 1 + past, counting only non-pad tokens.
      int64_t next = pad + 1 + c.past;
      for (size_t i = 0; i < c.ids.size(); ++i) {
        EXPECT_EQ(c.rows[i], c.ids[i] == pad ? pad : next++) << "token " << i;
      }
    }
    EmbedOutput out;
    absl::Status s = model->Embed(in, &out);
    ASSERT_TRUE(s.ok()) << s;
    ExpectLayerNormNear(out.embeddings, want, form + " default numbering");
    const std::vector<float> numbered = out.embeddings;

    // HF's own position ids passed explicitly with learned_position_offset 0
    // give the same rows (explicit ids are used as given, pads included).
    EmbedInput explicit_in;
    explicit_in.learned_position_offset = 0;
    for (const RobertaCase& c : cases) {
      explicit_in.token_ids.push_back(c.ids);
      explicit_in.position_ids.push_back(c.rows);
    }
    s = model->Embed(explicit_in, &out);
    ASSERT_TRUE(s.ok()) << s;
    ExpectBitEqual(out.embeddings, numbered, form + " explicit HF position ids");
  }
}

TEST(RobertaLearnedPositionsTest, PadsDoNotShiftContentAndPlainNumberingDiffers) {
  auto model = CreateModel("roberta", FormDir("roberta"));
  ASSERT_NE(model, nullptr);
  const auto tensors = ReadF32Safetensors(FormDir("roberta") + "/model.safetensors");
  const RawTensor& word = tensors.at("roberta.embeddings.word_embeddings.weight");
  const RawTensor& pos = tensors.at("roberta.embeddings.position_embeddings.weight");
  const RawTensor& type = tensors.at("roberta.embeddings.token_type_embeddings.weight");
  const RawTensor& ln_w = tensors.at("roberta.embeddings.LayerNorm.weight");
  const RawTensor& ln_b = tensors.at("roberta.embeddings.LayerNorm.bias");
  const int64_t h = word.shape[1];
  // RobertaEmbeddings.forward for token_type_ids = 0, float64:
  // LayerNorm(word[id] + token_type[0] + pos[r]) with layer_norm_eps 1e-5
  // (biased variance); r < 0: no position row.
  auto row = [&](int64_t id, int64_t r) {
    std::vector<double> x(static_cast<size_t>(h));
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < h; ++j) {
      x[j] = static_cast<double>(word.values[id * h + j]) + type.values[j] +
             (r >= 0 ? static_cast<double>(pos.values[r * h + j]) : 0.0);
      mean += x[j] / static_cast<double>(h);
    }
    for (int64_t j = 0; j < h; ++j) var += (x[j] - mean) * (x[j] - mean) / static_cast<double>(h);
    std::vector<float> v(static_cast<size_t>(h));
    for (int64_t j = 0; j < h; ++j) {
      v[j] = static_cast<float>((x[j] - mean) / std::sqrt(var + 1e-5) * ln_w.values[j] +
                                ln_b.values[j]);
    }
    return v;
  };
  // Left-padded [pad, pad, 7, 9] and unpadded [7, 9]: the content tokens get
  // the same rows (2, 3), the pads row 1 (padding_idx).
  EmbedInput in;
  in.token_ids = {{1, 1, 7, 9}, {7, 9}};
  EmbedOutput out;
  ASSERT_TRUE(model->Embed(in, &out).ok());
  std::vector<float> want;
  for (const auto& [id, r] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {1, 1}, {7, 2}, {9, 3}, {7, 2}, {9, 3}}) {
    const std::vector<float> v = row(id, r);
    want.insert(want.end(), v.begin(), v.end());
  }
  ExpectLayerNormNear(out.embeddings, want, "left padded");
  // The content rows of both sequences are the same computation: same bits.
  ExpectBitEqual(std::vector<float>(out.embeddings.begin() + 2 * h, out.embeddings.begin() + 4 * h),
                 std::vector<float>(out.embeddings.begin() + 4 * h, out.embeddings.end()),
                 "padded vs unpadded content");
  // GPT-2-style numbering would have put 7 on row 4: must differ.
  EXPECT_NE(std::vector<float>(out.embeddings.begin() + 2 * h, out.embeddings.begin() + 3 * h),
            row(7, 4));
  // The table has 12 rows: 10 content positions fit, the 11th does not.
  in.token_ids = {std::vector<int64_t>(10, 5)};
  EXPECT_TRUE(model->Embed(in, &out).ok());
  in.token_ids = {{1, 1, 1, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5}};  // 3 pads + 11 content
  absl::Status s = model->Embed(in, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("sequences[0].token_ids[13]: position 10 of token 13 + "
                                     "learned_position_offset 2 is "
                                     "beyond the learned position table (12 rows"));
}

// The Embed options on an embedding-LayerNorm family: absolute_positions =
// NONE leaves out the position row only (token type row and LayerNorm are
// still applied); LEARNED is the default; embedding_scale multiplies the
// word rows before the sum.
TEST(RobertaLearnedPositionsTest, EmbedOptionsKeepTokenTypeAndLayerNorm) {
  auto model = CreateModel("roberta", FormDir("roberta"));
  ASSERT_NE(model, nullptr);
  const auto tensors = ReadF32Safetensors(FormDir("roberta") + "/model.safetensors");
  const RawTensor& word = tensors.at("roberta.embeddings.word_embeddings.weight");
  const RawTensor& type = tensors.at("roberta.embeddings.token_type_embeddings.weight");
  const RawTensor& ln_w = tensors.at("roberta.embeddings.LayerNorm.weight");
  const RawTensor& ln_b = tensors.at("roberta.embeddings.LayerNorm.bias");
  const int64_t h = word.shape[1];
  auto no_position_row = [&](int64_t id, double scale) {
    std::vector<double> x(static_cast<size_t>(h));
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < h; ++j) {
      x[j] = static_cast<double>(static_cast<float>(word.values[id * h + j] * scale)) +
             type.values[j];
      mean += x[j] / static_cast<double>(h);
    }
    for (int64_t j = 0; j < h; ++j) var += (x[j] - mean) * (x[j] - mean) / static_cast<double>(h);
    std::vector<float> v(static_cast<size_t>(h));
    for (int64_t j = 0; j < h; ++j) {
      v[j] = static_cast<float>((x[j] - mean) / std::sqrt(var + 1e-5) * ln_w.values[j] +
                                ln_b.values[j]);
    }
    return v;
  };
  EmbedInput in;
  in.token_ids = {{0, 5, 7}};
  in.absolute_positions = AbsolutePositionsMode::kNone;
  EmbedOutput out;
  ASSERT_TRUE(model->Embed(in, &out).ok());
  std::vector<float> want;
  for (int64_t id : {0, 5, 7}) {
    const std::vector<float> v = no_position_row(id, 1.0);
    want.insert(want.end(), v.begin(), v.end());
  }
  ExpectLayerNormNear(out.embeddings, want, "absolute_positions NONE");
  in.embedding_scale = EmbeddingScaleMode::kSqrtHidden;
  ASSERT_TRUE(model->Embed(in, &out).ok());
  want.clear();
  for (int64_t id : {0, 5, 7}) {
    const std::vector<float> v = no_position_row(id, std::sqrt(static_cast<double>(h)));
    want.insert(want.end(), v.begin(), v.end());
  }
  ExpectLayerNormNear(out.embeddings, want, "absolute_positions NONE, sqrt(hidden_size)");
  // LEARNED asked explicitly = the model default.
  EmbedInput by_default;
  by_default.token_ids = {{0, 5, 7}};
  EmbedOutput default_out;
  ASSERT_TRUE(model->Embed(by_default, &default_out).ok());
  by_default.absolute_positions = AbsolutePositionsMode::kLearned;
  ASSERT_TRUE(model->Embed(by_default, &out).ok());
  ExpectBitEqual(out.embeddings, default_out.embeddings, "LEARNED = default");
}

TEST(RobertaLearnedPositionsTest, ScoreAndLogitsAreFailedPreconditionNamingModelAndReason) {
  auto model = CreateModel("my-roberta", FormDir("roberta"));
  ASSERT_NE(model, nullptr);
  std::vector<float> hidden(2 * 8, 0.5f);
  HeadInput head{hidden.data(), 2, 8};
  std::vector<float> logits;
  absl::Status s = model->ComputeLogits(head, false, &logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("model 'my-roberta' has no servable LM head"));
  EXPECT_THAT(s.message(), HasSubstr("masked-LM head applies lm_head.dense + gelu"));
  ScoreInput score;
  score.head = head;
  ScoreOutput score_out;
  EXPECT_EQ(model->Score(score, &score_out).code(), absl::StatusCode::kFailedPrecondition);
  absl::Status async_status;
  model->ScoreAsync(score, nullptr, [&](absl::Status st, ScoreOutput) { async_status = st; });
  EXPECT_EQ(async_status.code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RobertaLearnedPositionsTest, ConfigRulesNameTheKey) {
  nlohmann::json cfg = nlohmann::json::parse(ReadFileBytes(FormDir("roberta") + "/config.json"));
  cfg["position_embedding_type"] = "relative_key";
  auto c = ParseHfConfig(cfg.dump(), "config.json");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(),
              HasSubstr("key \"position_embedding_type\" = \"relative_key\" is not supported"));
  cfg.erase("position_embedding_type");
  cfg.erase("pad_token_id");  // RobertaConfig default: 1
  c = ParseHfConfig(cfg.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->learned_position_padding_idx, 1);
  EXPECT_EQ(c->learned_position_offset, 2);
  cfg["pad_token_id"] = 11;  // row 11 exists, position 0 would need row 12
  c = ParseHfConfig(cfg.dump(), "config.json");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("learned_position_offset = 12 must be in [0, "
                                              "max_position_embeddings = 12)"));
  cfg["pad_token_id"] = 30;  // not a token id (vocab 24)
  c = ParseHfConfig(cfg.dump(), "config.json");
  EXPECT_THAT(c.status().message(), HasSubstr("learned_position_offset = 31"));
  cfg["pad_token_id"] = -1;
  c = ParseHfConfig(cfg.dump(), "config.json");
  EXPECT_THAT(c.status().message(), HasSubstr("key \"pad_token_id\" = -1 must be >= 0"));
  // Architecture names without model_type.
  cfg.erase("model_type");
  cfg["pad_token_id"] = 1;
  cfg["architectures"] = {"XLMRobertaForMaskedLM"};
  c = ParseHfConfig(cfg.dump(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "xlm-roberta");
}

}  // namespace
}  // namespace vocabd
