// GGUF (v2/v3) -> Checkpoint.
#ifndef VOCABD_LIB_CHECKPOINT_GGUF_CHECKPOINT_H_
#define VOCABD_LIB_CHECKPOINT_GGUF_CHECKPOINT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/checkpoint/gguf.h"

namespace vocabd {

// Memory-maps and parses `path` (lib/checkpoint/gguf.h rules), then maps it:
//
// Metadata (A = general.architecture, required string):
//   A.embedding_length -> hidden_size (required)
//   A.context_length -> max_position_embeddings (required)
//   A.block_count -> num_hidden_layers (required)
//   A.attention.head_count (required), A.attention.head_count_kv (= heads)
//   A.attention.key_length -> head_dim (default hidden / heads)
//   A.feed_forward_length -> intermediate_size (default 0)
//   A.attention.layer_norm_rms_epsilon -> RMSNorm eps, or
//   A.attention.layer_norm_epsilon -> LayerNorm eps (with output_norm.bias)
//   RoPE (A with rotary positions): every A.rope.* key, A.context_length
//   and the rope factor tensors (rope_factors_long.weight,
//   rope_factors_short.weight, rope_freqs.weight; 1-D F32/F16/BF16) go
//   through RopeParamsFromGguf (lib/positions/rope_gguf.h, which lists the keys:
//   dimension_count, freq_base, scaling.type none/linear/yarn/longrope,
//   scaling.factor, original_context_length, attn_factor,
//   yarn_log_multiplier, yarn_beta_fast/slow, legacy scale_linear); its
//   errors are INVALID_ARGUMENT prefixed with the file path.
//   tokenizer.ggml.bos_token_id / eos_token_id -> bos/eos (default -1)
//   vocab_size = rows of token_embd (A.vocab_size, if present, must agree).
// Pair layout follows llama.cpp's rope type per architecture: llama
// (also Mistral files) -> INTERLEAVED ("NORM": llama.cpp's converter undoes
// HF's q/k permutation); qwen2, gemma, gptneox, phi2, phi3 -> HALF_SPLIT
// ("NEOX").
// gpt2: learned positions (position_embd.weight), no RoPE. gemma:
// embedding scale sqrt(hidden) (its norm weights are stored +1 already).
// Supported architectures: llama, qwen2, gemma, gptneox, phi2, phi3, gpt2.
//
// Tensors: token_embd.weight -> model.embed_tokens.weight, output.weight ->
// lm_head.weight (absent -> tied head), output.bias -> lm_head.bias,
// output_norm.{weight,bias} -> model.norm.{weight,bias},
// position_embd.weight -> transformer.wpe.weight. These canonical tensors
// may be F32 (served in place from the mapping), F16 or BF16 (converted to
// F32 once) or Q8_0 (dequantized to F32 at load: block = f16 scale d +
// 32 int8 q, value = d * q, exactly as ggml's dequantize_row_q8_0).
// For llama, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output,
// ffn_norm, ffn_gate, ffn_up, ffn_down}.weight are exposed under the HF
// per-layer names of checkpoint.h (other archs keep GGUF names); other
// F32/F16/BF16 tensors are exposed in place, quantized ones are not exposed.
// Errors: INVALID_ARGUMENT naming the file and the key/tensor/rule,
// FAILED_PRECONDITION for a missing token_embd.weight or output_norm.
absl::StatusOr<std::unique_ptr<Checkpoint>> LoadGguf(const std::string& path);

// Dequantizes `n` Q8_0 values (n a multiple of 32) at `src` to F32.
void DequantizeQ8_0(const uint8_t* src, size_t n, float* dst);

}  // namespace vocabd

#endif  // VOCABD_LIB_CHECKPOINT_GGUF_CHECKPOINT_H_
