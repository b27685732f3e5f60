// vocabd_make_gguf: writes a head-and-embedding GGUF file (arch llama, no
// transformer blocks) whose token_embd / output tensors are of any ggml type
// vocabd serves, quantized with lib/quant's quantizers (q8_0 bit-identical
// to ggml's reference; the others simple per-block rounding, see
// lib/quant/quantize.h). For benchmarks (bench/head_bench) and users.
//
//   vocabd_make_gguf --from CHECKPOINT --embd-type q4_K --output-type q6_K -o out.gguf
//       CHECKPOINT: anything LoadCheckpoint reads (HF safetensors folder,
//       .safetensors with config.json beside it, .gguf, llama2.c .bin);
//       its embedding, LM head (or tied), final norm and llama metadata.
//   vocabd_make_gguf --random 128256x4096 --seed 1 --embd-type q8_0 --tied -o out.gguf
//       Gaussian rows with per-row scales (a Llama-3-shaped head).
// --tied writes no output.weight (the head is token_embd). Prints the
// tensors written and their bytes.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/checkpoint/gguf_writer.h"
#include "lib/core/parallel.h"
#include "lib/quant/dequantize.h"
#include "lib/quant/ggml_types.h"
#include "lib/quant/quantize.h"

namespace {

using vocabd::quant::GgmlType;

// rows x cols values from `row_f32(r, out)` into `type` rows.
std::vector<uint8_t> Encode(GgmlType type, int64_t rows, int64_t cols,
                            const std::function<void(int64_t, float*)>& row_f32) {
  const int64_t row_bytes = vocabd::quant::RowBytes(type, cols);
  std::vector<uint8_t> out(static_cast<size_t>(rows * row_bytes));
  vocabd::ParallelFor(rows, [&](int64_t r) {
    std::vector<float> row(static_cast<size_t>(cols));
    row_f32(r, row.data());
    vocabd::quant::QuantizeRow(type, row.data(), cols, out.data() + r * row_bytes);
  });
  return out;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "vocabd_make_gguf: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Write a GGUF head/embedding file of any served ggml type"};
  std::string from, random_shape, out_path, embd_name = "f32", output_name = "";
  uint32_t seed = 1;
  bool tied = false;
  app.add_option("--from", from, "Checkpoint to read (safetensors folder/file, gguf, llama2.c)");
  app.add_option("--random", random_shape, "VOCABxHIDDEN: random Gaussian rows instead");
  app.add_option("--seed", seed, "Seed for --random")->capture_default_str();
  app.add_option("--embd-type", embd_name,
                 "ggml type of token_embd: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_K q3_K "
                 "q4_K q5_K q6_K iq4_nl")
      ->capture_default_str();
  app.add_option("--output-type", output_name, "ggml type of output (default: --embd-type)");
  app.add_flag("--tied", tied, "No output.weight: the head is token_embd");
  app.add_option("-o,--out", out_path, "GGUF file to write")->required();
  CLI11_PARSE(app, argc, argv);
  if (from.empty() == random_shape.empty()) return Fail("give exactly one of --from, --random");
  if (output_name.empty()) output_name = embd_name;
  const auto embd_type = vocabd::quant::ParseGgmlTypeName(embd_name);
  const auto output_type = vocabd::quant::ParseGgmlTypeName(output_name);
  for (const auto& [flag, name, type] : {std::tuple{"--embd-type", embd_name, embd_type},
                                         std::tuple{"--output-type", output_name, output_type}}) {
    if (!type.has_value() || !vocabd::quant::IsServedType(*type)) {
      return Fail(absl::StrCat(flag, " ", name, " is not a served ggml type"));
    }
  }

  int64_t vocab = 0, hidden = 0;
  uint32_t heads = 1, kv_heads = 1, context = 8192;
  float eps = 1e-5f, rope_base = 500000.0f;
  std::unique_ptr<vocabd::Checkpoint> ckpt;
  std::function<void(int64_t, float*)> embd_row, head_row;
  std::vector<float> norm;
  std::vector<float> row_scale;
  if (!from.empty()) {
    auto loaded = vocabd::LoadCheckpoint(from);
    if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
    ckpt = std::move(*loaded);
    const vocabd::ModelConfig& c = ckpt->config();
    vocab = c.vocab_size;
    hidden = c.hidden_size;
    heads = static_cast<uint32_t>(c.num_attention_heads);
    kv_heads = static_cast<uint32_t>(c.num_key_value_heads);
    context = static_cast<uint32_t>(std::min<int64_t>(c.max_position_embeddings, UINT32_MAX));
    eps = static_cast<float>(c.norm_eps);
    rope_base = static_cast<float>(c.rope.theta);
    auto reader = [hidden](const vocabd::WeightTensor& t) {
      const int64_t row_bytes = static_cast<int64_t>(t.nbytes) / t.shape[0];
      return [&t, row_bytes, hidden](int64_t r, float* out) {
        vocabd::quant::DequantizeRow(t.ggml_type(),
                                     static_cast<const uint8_t*>(t.data) + r * row_bytes, hidden,
                                     out);
      };
    };
    embd_row = reader(ckpt->embedding());
    head_row = reader(ckpt->lm_head());
    norm.assign(static_cast<size_t>(hidden), 1.0f);
    if (const vocabd::WeightTensor* n = ckpt->Find(vocabd::kFinalNorm); n != nullptr) {
      norm.assign(n->f32(), n->f32() + hidden);
    }
  } else {
    if (std::sscanf(random_shape.c_str(), "%ldx%ld", &vocab, &hidden) != 2 || vocab <= 0 ||
        hidden <= 0) {
      return Fail(absl::StrCat("--random ", random_shape, " is not VOCABxHIDDEN"));
    }
    heads = hidden % 128 == 0 ? static_cast<uint32_t>(hidden / 128) : 1;
    kv_heads = heads;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uni(0.5f, 1.5f);
    row_scale.resize(static_cast<size_t>(2 * vocab));
    for (float& s : row_scale) s = uni(rng) * 0.02f;
    norm.assign(static_cast<size_t>(hidden), 1.0f);
    auto gen = [seed, hidden, &row_scale](int64_t offset) {
      return [seed, hidden, offset, &row_scale](int64_t r, float* out) {
        std::mt19937 row_rng(seed * 1000003u + static_cast<uint32_t>(offset + r));
        std::normal_distribution<float> normal;
        for (int64_t j = 0; j < hidden; ++j) {
          out[j] = normal(row_rng) * row_scale[offset + r] * (j % 251 == 7 ? 8.0f : 1.0f);
        }
      };
    };
    embd_row = gen(0);
    head_row = gen(vocab);
  }
  for (GgmlType t : {*embd_type, *output_type}) {
    if (vocabd::quant::RowBytes(t, hidden) < 0) {
      return Fail(absl::StrCat("hidden size ", hidden, " is not a multiple of the ",
                               vocabd::quant::GgmlTypeName(t), " block size ",
                               vocabd::quant::TypeInfo(t).block_size));
    }
  }
  const std::vector<uint8_t> embd = Encode(*embd_type, vocab, hidden, embd_row);
  std::vector<uint8_t> head;
  if (!tied) head = Encode(*output_type, vocab, hidden, head_row);
  std::vector<std::pair<std::string, vocabd::GgufWriteValue>> meta = {
      {"general.architecture", std::string("llama")},
      {"general.name", std::string(from.empty() ? "vocabd random head" : from)},
      {"llama.context_length", context},
      {"llama.embedding_length", static_cast<uint32_t>(hidden)},
      {"llama.block_count", uint32_t{0}},
      {"llama.attention.head_count", heads},
      {"llama.attention.head_count_kv", kv_heads},
      {"llama.attention.layer_norm_rms_epsilon", eps},
      {"llama.rope.freq_base", rope_base},
  };
  std::vector<vocabd::GgufWriteTensor> tensors = {
      {"token_embd.weight", {vocab, hidden}, *embd_type, embd.data(), embd.size()},
      {"output_norm.weight", {hidden}, GgmlType::kF32, norm.data(), norm.size() * 4},
  };
  if (!tied) tensors.push_back({"output.weight", {vocab, hidden}, *output_type, head.data(), head.size()});
  if (absl::Status s = vocabd::WriteGguf(out_path, meta, tensors); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  for (const auto& t : tensors) {
    // The shape as written, one entry per dimension ([64] for a norm).
    std::printf("%-20s %-7s [%s] %zu bytes\n", t.name.c_str(),
                vocabd::quant::GgmlTypeName(t.type), absl::StrJoin(t.shape, ", ").c_str(),
                t.nbytes);
  }
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}
