#include "lib/checkpoint/llama2c.h"

#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/core/status_macros.h"

namespace vocabd {
namespace {

constexpr size_t kHeaderInts = 7;
constexpr size_t kHeaderBytes = kHeaderInts * sizeof(int32_t);

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> LoadLlama2c(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  auto invalid = [&path](const std::string& rule) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": invalid llama2.c checkpoint: ", rule));
  };
  if (file->size() < kHeaderBytes) {
    return invalid(absl::StrCat("the file has ", file->size(), " bytes, fewer than the ",
                                kHeaderBytes, "-byte header"));
  }
  int32_t h[kHeaderInts];
  std::memcpy(h, file->data(), kHeaderBytes);  // little-endian host assumed (x86-64)
  const int32_t dim = h[0], hidden = h[1], layers = h[2], heads = h[3], kv_heads = h[4];
  const int32_t raw_vocab = h[5], seq_len = h[6];
  const char* names[kHeaderInts] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                                    "n_kv_heads", "vocab_size", "seq_len"};
  for (size_t i = 0; i < kHeaderInts; ++i) {
    // vocab_size may be negative (untied classifier); all others must be > 0.
    if (i == 5 ? h[i] == 0 : h[i] <= 0) {
      return invalid(absl::StrCat("header ", names[i], " = ", h[i],
                                  i == 5 ? " must be non-zero" : " must be > 0"));
    }
  }
  if (dim % heads != 0) {
    return invalid(absl::StrCat("n_heads = ", heads, " does not divide dim = ", dim));
  }
  if (heads % kv_heads != 0) {
    return invalid(absl::StrCat("n_kv_heads = ", kv_heads, " does not divide n_heads = ", heads));
  }
  const int64_t head_size = dim / heads;
  if (head_size % 2 != 0) {
    return invalid(absl::StrCat("head size dim / n_heads = ", head_size, " is odd"));
  }
  const bool shared_classifier = raw_vocab > 0;
  const int64_t vocab = shared_classifier ? raw_vocab : -static_cast<int64_t>(raw_vocab);
  const int64_t kv_dim = head_size * kv_heads;
  const int64_t L = layers, D = dim, H = hidden;

  // Expected file size: header + all float arrays. Every factor is < 2^31,
  // so compute with overflow checks in uint64 and compare with the size.
  const uint64_t pair_count = static_cast<uint64_t>(seq_len) * static_cast<uint64_t>(head_size / 2);
  const uint64_t terms[][3] = {
      {static_cast<uint64_t>(vocab), uint64_t(D), 1},  // token_embedding
      {uint64_t(L), uint64_t(D), 1},                   // rms_att
      {uint64_t(L), uint64_t(D), uint64_t(D)},         // wq
      {uint64_t(L), uint64_t(kv_dim), uint64_t(D)},    // wk
      {uint64_t(L), uint64_t(kv_dim), uint64_t(D)},    // wv
      {uint64_t(L), uint64_t(D), uint64_t(D)},         // wo
      {uint64_t(L), uint64_t(D), 1},                   // rms_ffn
      {uint64_t(L), uint64_t(H), uint64_t(D)},         // w1
      {uint64_t(L), uint64_t(D), uint64_t(H)},         // w2
      {uint64_t(L), uint64_t(H), uint64_t(D)},         // w3
      {uint64_t(D), 1, 1},                             // rms_final
      {2, pair_count, 1},                              // freq_cis_real, freq_cis_imag
      {shared_classifier ? 0 : static_cast<uint64_t>(vocab), uint64_t(D), 1},  // wcls
  };
  uint64_t expected = kHeaderBytes;
  bool overflow = false;
  for (const auto& t : terms) {
    uint64_t product = 0;
    overflow = overflow || __builtin_mul_overflow(t[0], t[1], &product) ||
               __builtin_mul_overflow(product, t[2], &product) ||
               __builtin_mul_overflow(product, uint64_t{4}, &product) ||
               __builtin_add_overflow(expected, product, &expected);
  }
  if (overflow || expected != file->size()) {
    return invalid(absl::StrCat("the header (dim ", dim, ", hidden_dim ", hidden, ", n_layers ",
                                layers, ", n_heads ", heads, ", n_kv_heads ", kv_heads,
                                ", vocab_size ", raw_vocab, ", seq_len ", seq_len, ") implies ",
                                overflow ? std::string("more than 2^64") : absl::StrCat(expected),
                                " bytes but the file has ", file->size()));
  }

  auto ckpt = std::make_unique<Checkpoint>();
  ModelConfig& c = ckpt->mutable_config();
  c.architecture = "llama";
  c.family = "llama";
  c.norm_eps_key = "llama2.c (1e-5)";
  c.vocab_size = vocab;
  c.hidden_size = dim;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.head_dim = static_cast<int>(head_size);
  c.intermediate_size = hidden;
  c.max_position_embeddings = seq_len;
  c.position_scheme = PositionScheme::kRope;
  c.rope.theta = 10000.0;
  c.rope.head_dim = static_cast<int>(head_size);
  c.rope.rotary_dim = static_cast<int>(head_size);
  c.rope.pair_layout = RopePairLayout::kInterleaved;
  c.rope.max_position_embeddings = seq_len;
  c.final_norm_kind = NormKind::kRmsNorm;
  c.norm_eps = 1e-5;
  c.tie_word_embeddings = shared_classifier;
  c.embedding_scale = 1.0;
  c.bos_token_id = vocab > 1 ? 1 : -1;
  c.eos_token_id = vocab > 2 ? 2 : -1;

  // Walk the arrays; the header is 28 bytes so every array is 4-aligned in
  // the page-aligned mapping.
  const float* cursor = reinterpret_cast<const float*>(file->data() + kHeaderBytes);
  auto add = [&ckpt](std::string name, const float* data, std::vector<int64_t> shape) {
    WeightTensor t;
    t.dtype = DType::kF32;
    t.shape = std::move(shape);
    t.data = data;
    t.nbytes = static_cast<size_t>(t.num_elements()) * sizeof(float);
    ckpt->AddTensor(std::move(name), std::move(t));
  };
  const float* embedding = cursor;
  add(kEmbedTokens, embedding, {vocab, D});
  cursor += vocab * D;
  const float* rms_att = cursor;
  cursor += L * D;
  const float* wq = cursor;
  cursor += L * D * D;
  const float* wk = cursor;
  cursor += L * kv_dim * D;
  const float* wv = cursor;
  cursor += L * kv_dim * D;
  const float* wo = cursor;
  cursor += L * D * D;
  const float* rms_ffn = cursor;
  cursor += L * D;
  const float* w1 = cursor;
  cursor += L * H * D;
  const float* w2 = cursor;
  cursor += L * D * H;
  const float* w3 = cursor;
  cursor += L * H * D;
  add(kFinalNorm, cursor, {D});
  cursor += D;
  cursor += 2 * seq_len * (head_size / 2);  // freq_cis_real, freq_cis_imag (unused)
  if (!shared_classifier) add(kLmHead, cursor, {vocab, D});

  for (int64_t l = 0; l < L; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    add(p + "input_layernorm.weight", rms_att + l * D, {D});
    add(p + "self_attn.q_proj.weight", wq + l * D * D, {D, D});
    add(p + "self_attn.k_proj.weight", wk + l * kv_dim * D, {kv_dim, D});
    add(p + "self_attn.v_proj.weight", wv + l * kv_dim * D, {kv_dim, D});
    add(p + "self_attn.o_proj.weight", wo + l * D * D, {D, D});
    add(p + "post_attention_layernorm.weight", rms_ffn + l * D, {D});
    add(p + "mlp.gate_proj.weight", w1 + l * H * D, {H, D});  // w1
    add(p + "mlp.down_proj.weight", w2 + l * D * H, {D, H});  // w2
    add(p + "mlp.up_proj.weight", w3 + l * H * D, {H, D});    // w3
  }

  SourceFileInfo info = DescribeSourceFile(*file, "llama2c");
  info.memory_mapped = true;
  ckpt->AddFile(std::move(file), std::move(info));
  RETURN_IF_ERROR(ckpt->Finalize());
  return ckpt;
}

}  // namespace vocabd
