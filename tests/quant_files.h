// Test helpers for quantized GGUF: the shared golden quantized files
// (../shared/models/quant, SOURCES.md) and GGUF files built from them.
#ifndef VOCABD_TESTS_QUANT_FILES_H_
#define VOCABD_TESTS_QUANT_FILES_H_

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "lib/checkpoint/gguf.h"
#include "lib/checkpoint/gguf_writer.h"
#include "lib/core/mapped_file.h"
#include "lib/quant/ggml_types.h"
#include "tests/test_util.h"

namespace vocabd::testing {

// Every golden file stem (synth-v1024-h512-<X>).
inline const std::vector<std::string>& QuantGoldenStems() {
  static const std::vector<std::string> kStems = {
      "Q8_0", "Q8_0-tied", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K",
      "Q3_K", "Q4_K", "Q4_K_M", "Q5_K", "Q6_K", "IQ4_NL"};
  return kStems;
}

inline std::string QuantGoldenPath(const std::string& stem, const std::string& ext) {
  return SharedModelsDir() + "/quant/synth-v1024-h512-" + stem + ext;
}

// The golden JSON; "-0" kept a float (a JSON parser reads it as integer 0).
inline nlohmann::json QuantGolden(const std::string& stem) {
  std::ifstream in(QuantGoldenPath(stem, ".golden.json"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t p = 0; (p = text.find("-0", p)) != std::string::npos; p += 2) {
    if (p + 2 < text.size() && (text[p + 2] == ',' || text[p + 2] == ']')) text.insert(p + 2, ".0");
  }
  return nlohmann::json::parse(text);
}

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Writes `dir`/<stem>-embd.gguf: the golden file's token_embd blocks byte
// for byte, an F32 output head (zeros, so the file tests the quantized
// embedding alone) and output_norm of ones, llama metadata as the golden file.
// Returns the path ("" on failure, with a test failure added).
inline std::string WriteQuantEmbeddingGguf(const std::string& stem, const std::string& dir) {
  const std::string src = QuantGoldenPath(stem, ".gguf");
  auto file = MappedFile::Open(src);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return "";
  auto gguf = ParseGguf((*file)->data(), (*file)->size(), src);
  EXPECT_TRUE(gguf.ok()) << gguf.status();
  if (!gguf.ok()) return "";
  const GgufTensorInfo* embd = gguf->FindTensor("token_embd.weight");
  const std::vector<float> head(1024 * 512, 0.0f), norm(512, 1.0f);
  const std::string out = dir + "/" + stem + "-embd.gguf";
  const absl::Status s = WriteGguf(
      out,
      {{"general.architecture", std::string("llama")},
       {"llama.context_length", uint32_t{2048}},
       {"llama.embedding_length", uint32_t{512}},
       {"llama.block_count", uint32_t{0}},
       {"llama.attention.head_count", uint32_t{4}},
       {"llama.attention.layer_norm_rms_epsilon", 1e-5f}},
      {{"token_embd.weight", {1024, 512}, static_cast<quant::GgmlType>(embd->type),
        (*file)->data() + embd->offset, static_cast<size_t>(embd->nbytes)},
       {"output.weight", {1024, 512}, quant::GgmlType::kF32, head.data(), head.size() * 4},
       {"output_norm.weight", {512}, quant::GgmlType::kF32, norm.data(), norm.size() * 4}});
  EXPECT_TRUE(s.ok()) << s;
  return s.ok() ? out : "";
}

}  // namespace vocabd::testing

#endif  // VOCABD_TESTS_QUANT_FILES_H_
