#include "examples/tiny_llama/tiny_llama.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/core/status_macros.h"

namespace vocabd::tiny_llama {
namespace {

// Copies tensor `name` (F32, shape `shape`) out of the checkpoint.
absl::StatusOr<std::vector<float>> CopyWeight(const Checkpoint& checkpoint,
                                              const std::string& name,
                                              const std::vector<int64_t>& shape) {
  const auto it = checkpoint.tensors().find(name);
  if (it == checkpoint.tensors().end()) {
    return absl::FailedPreconditionError(absl::StrCat("tensor ", name, " is missing"));
  }
  const WeightTensor& t = it->second;
  if (t.shape != shape) {
    return absl::FailedPreconditionError(absl::StrCat("tensor ", name, " has shape [",
                                                      absl::StrJoin(t.shape, ", "),
                                                      "], expected [",
                                                      absl::StrJoin(shape, ", "), "]"));
  }
  if (t.dtype != DType::kF32) {
    return absl::InvalidArgumentError(absl::StrCat("tensor ", name, " has dtype ",
                                                   std::string(DTypeName(t.dtype)),
                                                   ", the runner needs F32"));
  }
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (t.data == nullptr || t.nbytes != static_cast<size_t>(n) * sizeof(float)) {
    return absl::FailedPreconditionError(
        absl::StrCat("tensor ", name, " holds ", t.nbytes, " bytes, expected ", n * 4));
  }
  std::vector<float> out(static_cast<size_t>(n));
  std::memcpy(out.data(), t.data, t.nbytes);
  return out;
}

void RmsNormRow(const float* x, const float* w, int64_t n, double eps, float* y) {
  float ss = 0.0f;
  for (int64_t j = 0; j < n; ++j) ss += x[j] * x[j];
  ss /= static_cast<float>(n);
  ss += static_cast<float>(eps);
  const float inv = 1.0f / std::sqrt(ss);
  for (int64_t j = 0; j < n; ++j) y[j] = w[j] * (inv * x[j]);
}

// y[o] = sum_i W[o, i] x[i], W: [out, in].
void MatVec(const std::vector<float>& w, const float* x, int64_t out, int64_t in, float* y) {
  for (int64_t o = 0; o < out; ++o) {
    const float* row = w.data() + o * in;
    float acc = 0.0f;
    for (int64_t i = 0; i < in; ++i) acc += row[i] * x[i];
    y[o] = acc;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<TinyLlama>> TinyLlama::Create(const Checkpoint& checkpoint,
                                                            LlamaSteps steps) {
  if (!steps.embed || !steps.rope || !steps.head) {
    return absl::InvalidArgumentError("LlamaSteps: embed, rope and head must all be set");
  }
  const ModelConfig& c = checkpoint.config();
  if (c.hidden_size <= 0 || c.num_attention_heads <= 0 || c.num_key_value_heads <= 0 ||
      c.head_dim <= 0 || c.num_attention_heads % c.num_key_value_heads != 0 ||
      c.intermediate_size <= 0 || c.num_hidden_layers <= 0 || c.max_position_embeddings <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unusable config: hidden_size=", c.hidden_size, " heads=", c.num_attention_heads,
        " kv_heads=", c.num_key_value_heads, " head_dim=", c.head_dim,
        " intermediate_size=", c.intermediate_size, " layers=", c.num_hidden_layers,
        " max_position_embeddings=", c.max_position_embeddings));
  }
  std::unique_ptr<TinyLlama> m(new TinyLlama());
  m->steps_ = std::move(steps);
  m->hidden_ = c.hidden_size;
  m->ffn_ = c.intermediate_size;
  m->n_heads_ = c.num_attention_heads;
  m->n_kv_ = c.num_key_value_heads;
  m->head_dim_ = c.head_dim;
  m->max_positions_ = c.max_position_embeddings;
  m->eps_ = c.norm_eps;
  const int64_t h = m->hidden_, q_dim = int64_t{m->n_heads_} * m->head_dim_,
                kv_dim = int64_t{m->n_kv_} * m->head_dim_, f = m->ffn_;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = absl::StrCat("model.layers.", l, ".");
    Layer layer;
    ASSIGN_OR_RETURN(layer.attn_norm, CopyWeight(checkpoint, p + "input_layernorm.weight", {h}));
    ASSIGN_OR_RETURN(layer.wq, CopyWeight(checkpoint, p + "self_attn.q_proj.weight", {q_dim, h}));
    ASSIGN_OR_RETURN(layer.wk, CopyWeight(checkpoint, p + "self_attn.k_proj.weight", {kv_dim, h}));
    ASSIGN_OR_RETURN(layer.wv, CopyWeight(checkpoint, p + "self_attn.v_proj.weight", {kv_dim, h}));
    ASSIGN_OR_RETURN(layer.wo, CopyWeight(checkpoint, p + "self_attn.o_proj.weight", {h, q_dim}));
    ASSIGN_OR_RETURN(layer.ffn_norm,
                     CopyWeight(checkpoint, p + "post_attention_layernorm.weight", {h}));
    ASSIGN_OR_RETURN(layer.w_gate, CopyWeight(checkpoint, p + "mlp.gate_proj.weight", {f, h}));
    ASSIGN_OR_RETURN(layer.w_up, CopyWeight(checkpoint, p + "mlp.up_proj.weight", {f, h}));
    ASSIGN_OR_RETURN(layer.w_down, CopyWeight(checkpoint, p + "mlp.down_proj.weight", {h, f}));
    m->layers_.push_back(std::move(layer));
  }
  const size_t cache_size = static_cast<size_t>(m->max_positions_ * kv_dim);
  m->k_cache_.assign(m->layers_.size(), std::vector<float>(cache_size));
  m->v_cache_.assign(m->layers_.size(), std::vector<float>(cache_size));
  return m;
}

absl::StatusOr<int64_t> TinyLlama::Step(int64_t token, int64_t pos) {
  if (pos != num_cached_) {
    return absl::InvalidArgumentError(
        absl::StrCat("pos = ", pos, " but ", num_cached_, " positions are cached"));
  }
  if (pos >= max_positions_) {
    return absl::OutOfRangeError(
        absl::StrCat("pos = ", pos, " is outside the KV cache [0, ", max_positions_, ")"));
  }
  const int64_t D = head_dim_, q_dim = int64_t{n_heads_} * D, kv_dim = int64_t{n_kv_} * D;
  const int group = n_heads_ / n_kv_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));

  ASSIGN_OR_RETURN(std::vector<float> x, steps_.embed(token, pos));
  if (static_cast<int64_t>(x.size()) != hidden_) {
    return absl::InternalError(absl::StrCat("embed returned ", x.size(),
                                            " values, expected hidden_size ", hidden_));
  }
  std::vector<float> h(hidden_), q(q_dim), k(kv_dim), att_out(q_dim), proj(hidden_),
      gate(ffn_), up(ffn_), scores(pos + 1);

  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    RmsNormRow(x.data(), L.attn_norm.data(), hidden_, eps_, h.data());
    MatVec(L.wq, h.data(), q_dim, hidden_, q.data());
    MatVec(L.wk, h.data(), kv_dim, hidden_, k.data());
    float* k_row = k_cache_[l].data() + pos * kv_dim;
    float* v_row = v_cache_[l].data() + pos * kv_dim;
    MatVec(L.wv, h.data(), kv_dim, hidden_, v_row);
    // q [1, Hq, 1, D] and k [1, Hkv, 1, D] in BHSD are just the
    // head-major projections.
    RETURN_IF_ERROR(steps_.rope(q, k, pos));
    if (static_cast<int64_t>(q.size()) != q_dim || static_cast<int64_t>(k.size()) != kv_dim) {
      return absl::InternalError(absl::StrCat("rope returned q of ", q.size(), " and k of ",
                                              k.size(), " values, expected ", q_dim, " and ",
                                              kv_dim));
    }
    std::memcpy(k_row, k.data(), kv_dim * sizeof(float));

    for (int head = 0; head < n_heads_; ++head) {
      const int g = head / group;
      const float* qh = q.data() + head * D;
      float max_score = -INFINITY;
      for (int64_t s = 0; s <= pos; ++s) {
        const float* ks = k_cache_[l].data() + s * kv_dim + g * D;
        float dot = 0.0f;
        for (int64_t d = 0; d < D; ++d) dot += qh[d] * ks[d];
        scores[s] = dot * scale;
        if (scores[s] > max_score) max_score = scores[s];
      }
      float sum = 0.0f;
      for (int64_t s = 0; s <= pos; ++s) {
        scores[s] = std::exp(scores[s] - max_score);
        sum += scores[s];
      }
      float* oh = att_out.data() + head * D;
      for (int64_t d = 0; d < D; ++d) oh[d] = 0.0f;
      for (int64_t s = 0; s <= pos; ++s) {
        const float a = scores[s] / sum;
        const float* vs = v_cache_[l].data() + s * kv_dim + g * D;
        for (int64_t d = 0; d < D; ++d) oh[d] += a * vs[d];
      }
    }
    MatVec(L.wo, att_out.data(), hidden_, q_dim, proj.data());
    for (int64_t j = 0; j < hidden_; ++j) x[j] += proj[j];

    RmsNormRow(x.data(), L.ffn_norm.data(), hidden_, eps_, h.data());
    MatVec(L.w_gate, h.data(), ffn_, hidden_, gate.data());
    MatVec(L.w_up, h.data(), ffn_, hidden_, up.data());
    for (int64_t j = 0; j < ffn_; ++j) {
      const float z = gate[j];
      gate[j] = z / (1.0f + std::exp(-z)) * up[j];
    }
    MatVec(L.w_down, gate.data(), hidden_, ffn_, proj.data());
    for (int64_t j = 0; j < hidden_; ++j) x[j] += proj[j];
  }
  ++num_cached_;
  return steps_.head(x);
}

}  // namespace vocabd::tiny_llama
