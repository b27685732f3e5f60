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
// Supported architectures: the gguf_archs of the family table
// (lib/checkpoint/families.h), whose entry gives the norm, multiplier,
// head, pair layout and per-layer rules. Among them: bert, nomic-bert and
// bloom add token_embd_norm.{weight,bias} (the embeddings LayerNorm, eps
// A.attention.layer_norm_epsilon) and bert / nomic-bert token_types.weight;
// bloom and mpt are ALiBi (mpt: A.attention.max_alibi_bias must be 8, a
// power-of-two head count, no position_embd); deepseek2's head_dim is
// A.rope.dimension_count (the MLA key_length is wider).
//
// Tensors: token_embd.weight -> model.embed_tokens.weight, output.weight ->
// lm_head.weight (absent -> tied head), output.bias -> lm_head.bias,
// output_norm.{weight,bias} -> model.norm.{weight,bias},
// position_embd.weight -> transformer.wpe.weight, token_types.weight ->
// embeddings.token_type_embeddings.weight, token_embd_norm.{weight,bias}
// -> embeddings.LayerNorm.{weight,bias}. token_embd and output
// are served in place from the mapping, never copied or dequantized at
// load, in any mix of: f32, bf16, f16 (the model converts f16 once into its
// serving dtype; Model's head reads a huge-page copy of f32 / bf16) and
// the quantized types q4_0, q4_1, q5_0, q5_1, q8_0,
// q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl (WeightTensor::quant_type; rows of
// ggml blocks, lib/quant). Another ggml type there is INVALID_ARGUMENT
// naming the tensor and the type. The small canonical tensors (norms,
// biases, positions) are F32 after loading (f16/bf16/quantized converted
// once, quantized ones dequantized bit-exactly as ggml).
// For llama, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output,
// ffn_norm, ffn_gate, ffn_up, ffn_down}.weight are exposed under the HF
// per-layer names of checkpoint.h (other archs keep GGUF names); other
// F32/F16/BF16 tensors are exposed in place, quantized ones are not exposed.
// Errors: INVALID_ARGUMENT naming the file and the key/tensor/rule,
// FAILED_PRECONDITION for a missing token_embd.weight or output_norm.
absl::StatusOr<std::unique_ptr<Checkpoint>> LoadGguf(const std::string& path);

}  // namespace vocabd

#endif  // VOCABD_LIB_CHECKPOINT_GGUF_CHECKPOINT_H_
