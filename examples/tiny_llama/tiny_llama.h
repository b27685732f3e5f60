// A tiny Llama-2 decoder (stories260K-sized models) in plain C++ loops: the
// part of a model a vocabd CALLER runs (the transformer blocks). Its three
// vocabd-owned steps are pluggable: the token embedding, RoPE and the LM
// head (final norm + argmax) run locally (lib/, the e2e tests) or through
// the vocabd gRPC service (examples/tiny_llama/vocabd_steps.h). Shared by
// examples/generate_text.cc and tests/e2e.
//
// One decode step for token t at position p (Llama-2; llama2.c run.c
// `forward`; HF LlamaDecoderLayer), all fp32:
//   x = embed(t, p)                                            [hidden]
//   for each layer l:
//     h  = rmsnorm(x, input_layernorm)                          eps = config.norm_eps
//     q  = Wq h  [Hq*D],  k = Wk h  [Hkv*D],  v = Wv h  [Hkv*D]  (W: [out, in])
//     q, k = rope(q as [1, Hq, 1, D], k as [1, Hkv, 1, D], p)    (BHSD)
//     cache k, v at position p
//     for query head i (kv head g = i / (Hq / Hkv)):
//       a[s] = softmax_s( q_i . k_g[s] / sqrt(D) ),  s in [0, p]
//       o_i  = sum_s a[s] v_g[s]
//     x += Wo o
//     h  = rmsnorm(x, post_attention_layernorm)
//     x += W_down( silu(W_gate h) * (W_up h) ),  silu(z) = z / (1 + exp(-z))
//   next = head(x)   (x is the last block's output, BEFORE the final norm)
// rmsnorm(x, w)[j] = x[j] / sqrt(mean(x^2) + eps) * w[j].
#ifndef VOCABD_EXAMPLES_TINY_LLAMA_TINY_LLAMA_H_
#define VOCABD_EXAMPLES_TINY_LLAMA_TINY_LLAMA_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/checkpoint/checkpoint.h"

namespace vocabd::tiny_llama {

// The pluggable steps. Each returns an error status rather than crashing.
struct LlamaSteps {
  // token id, position -> the input embedding [hidden_size] F32.
  std::function<absl::StatusOr<std::vector<float>>(int64_t token, int64_t pos)> embed;
  // Rotates in place q [1, Hq, 1, D] and k [1, Hkv, 1, D] (BHSD, F32) for
  // the single token at position `pos`.
  std::function<absl::Status(std::vector<float>& q, std::vector<float>& k, int64_t pos)> rope;
  // The last block's output [hidden_size] (final norm NOT applied) -> the
  // greedy next token id (argmax, lowest id on ties).
  std::function<absl::StatusOr<int64_t>(const std::vector<float>& hidden)> head;
};

class TinyLlama {
 public:
  // Copies the per-layer weights (canonical names, see lib/checkpoint/checkpoint.h)
  // out of `checkpoint` as F32. The KV cache holds config.max_position_embeddings
  // positions. FAILED_PRECONDITION naming the tensor when one is missing or
  // has the wrong shape; INVALID_ARGUMENT for a non-F32 tensor or steps
  // left empty.
  static absl::StatusOr<std::unique_ptr<TinyLlama>> Create(const Checkpoint& checkpoint,
                                                           LlamaSteps steps);

  // Feeds `token` at position `pos` (must equal the number of tokens fed
  // since the last Reset()) and returns head(x).
  absl::StatusOr<int64_t> Step(int64_t token, int64_t pos);
  // Clears the KV cache.
  void Reset() { num_cached_ = 0; }

  int64_t hidden_size() const { return hidden_; }
  int num_heads() const { return n_heads_; }
  int num_kv_heads() const { return n_kv_; }
  int head_dim() const { return head_dim_; }

 private:
  struct Layer {
    std::vector<float> attn_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down;
  };
  TinyLlama() = default;

  LlamaSteps steps_;
  int64_t hidden_ = 0;
  int64_t ffn_ = 0;
  int n_heads_ = 0;
  int n_kv_ = 0;
  int head_dim_ = 0;
  int64_t max_positions_ = 0;
  double eps_ = 1e-5;
  std::vector<Layer> layers_;
  // [layer][pos][Hkv * D]
  std::vector<std::vector<float>> k_cache_, v_cache_;
  int64_t num_cached_ = 0;
};

}  // namespace vocabd::tiny_llama

#endif  // VOCABD_EXAMPLES_TINY_LLAMA_TINY_LLAMA_H_
