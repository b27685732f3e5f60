// Model::Create loads the checkpoint's own tokenizer.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lib/serving/model.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Model> MustLoad(Model::Options o) {
  auto m = Model::Create(o);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

TEST(ModelTokenizerTest, EveryStories260KFormCarriesItsTokenizer) {
  const std::string dir = testing::SharedModelsDir();
  for (const std::string& path : {dir + "/stories260K/stories260K.bin",
                                  dir + "/stories260K/stories260K.gguf", dir + "/stories260K-hf"}) {
    auto m = MustLoad({"s", path});
    ASSERT_NE(m, nullptr);
    ASSERT_NE(m->tokenizer(), nullptr) << path << ": " << m->tokenizer_missing_reason();
    EXPECT_TRUE(m->tokenizer_missing_reason().empty());
    auto enc = m->tokenizer()->Encode("Once upon a time", /*add_special_tokens=*/true);
    ASSERT_TRUE(enc.ok());
    EXPECT_THAT(enc->ids, ::testing::ElementsAre(1, 403, 407, 261, 378)) << path;
  }
}

TEST(ModelTokenizerTest, Gpt2SafetensorsFolderAndTinyLlamaGguf) {
  const std::string dir = testing::SharedModelsDir();
  auto gpt2 = MustLoad({"g", dir + "/fake_gpt2"});
  ASSERT_NE(gpt2, nullptr);
  ASSERT_NE(gpt2->tokenizer(), nullptr) << gpt2->tokenizer_missing_reason();
  EXPECT_EQ(gpt2->tokenizer()->vocab_size(), 50257);
  auto llama = MustLoad({"l", dir + "/llama-2-tiny-random/llama-2-tiny-random.gguf"});
  ASSERT_NE(llama, nullptr);
  ASSERT_NE(llama->tokenizer(), nullptr) << llama->tokenizer_missing_reason();
  EXPECT_EQ(llama->tokenizer()->kind(), "sentencepiece");
}

TEST(ModelTokenizerTest, ModelWithoutTokenizerStillServesAndSaysWhatWasLookedFor) {
  const std::string dir = testing::SharedModelsDir();
  auto m = MustLoad({"q", dir + "/quant/synth-v1024-h512-Q8_0.gguf"});
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->tokenizer(), nullptr);
  EXPECT_THAT(m->tokenizer_missing_reason(), HasSubstr("tokenizer.ggml"));
}

TEST(ModelTokenizerTest, ExplicitTokenizerPath) {
  const std::string dir = testing::SharedModelsDir();
  Model::Options o{"s", dir + "/stories260K/stories260K.bin"};
  o.tokenizer_path = dir + "/stories260K/tok512.model";
  auto m = MustLoad(o);
  ASSERT_NE(m, nullptr);
  ASSERT_NE(m->tokenizer(), nullptr);
  EXPECT_THAT(m->tokenizer()->source(), HasSubstr("tok512.model"));
  // An explicit path that does not load fails the model.
  o.tokenizer_path = dir + "/nonexistent.model";
  auto bad = Model::Create(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("nonexistent.model"));
  // A tokenizer larger than the model's vocabulary is refused.
  o.tokenizer_path = dir + "/vocab/ggml-vocab-gpt-2.gguf";
  auto big = Model::Create(o);
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(), HasSubstr("more than the model's vocab_size 512"));
}

}  // namespace
}  // namespace vocabd
