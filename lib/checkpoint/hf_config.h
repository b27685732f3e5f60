// Hugging Face config.json -> ModelConfig.
#ifndef VOCABD_LIB_CHECKPOINT_HF_CONFIG_H_
#define VOCABD_LIB_CHECKPOINT_HF_CONFIG_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/checkpoint/model_config.h"

namespace vocabd {

// Maps a config.json text to a ModelConfig. Families (HF `model_type`; a
// file without it may name LlamaForCausalLM / GPT2LMHeadModel /
// GPTNeoXForCausalLM / (XLM)RobertaForMaskedLM / (XLM)RobertaModel in
// `architectures`):
//   llama, mistral, qwen2: RMSNorm (`rms_norm_eps`, 1e-6), RoPE half-split,
//     tie default false.
//   gemma: as llama, plus head_dim default 256, tie default true, embedding
//     scale sqrt(hidden_size) (GemmaModel multiplies embeddings by
//     hidden_size**0.5); its RMSNorm multiplies by (1 + weight), which the
//     loader folds into the served final-norm weight.
//   gpt2: n_embd, n_layer, n_head, n_positions, n_inner (null = 4 n_embd),
//     LayerNorm with bias (`layer_norm_epsilon`, 1e-5), LEARNED absolute
//     positions (wpe), no RoPE, tie default true. Its per-layer Conv1D
//     weights are stored [in, out] (transposed vs nn.Linear) and are kept as
//     stored; the embedding/head are [vocab, hidden] like every family.
//   gpt_neox: LayerNorm with bias (`layer_norm_eps`, 1e-5), rotary_pct
//     (0.25) of head_dim rotated, theta `rotary_emb_base` (or rope_theta,
//     10000), half-split, tie default false.
//   phi: LayerNorm with bias (`layer_norm_eps`), partial_rotary_factor (0.5),
//     half-split, tie default false, LM head with bias.
//   roberta, xlm-roberta (RobertaForMaskedLM / XLMRobertaForMaskedLM with
//     `roberta.` tensor prefix, or RobertaModel / XLMRobertaModel without):
//     LEARNED absolute positions (embeddings.position_embeddings, whose
//     rows = max_position_embeddings, 514 for roberta-base) numbered as HF's
//     create_position_ids_from_input_ids: padding_idx = `pad_token_id`
//     (default 1) -> learned_position_padding_idx, learned_position_offset =
//     padding_idx + 1; `position_embedding_type` must be "absolute". Embed
//     returns RobertaEmbeddings.forward's output for token_type_ids = 0:
//     LayerNorm(word_embeddings[id] + token_type_embeddings[0] +
//     position_embeddings[row]) with `layer_norm_eps` (default 1e-12), as
//     BERT. No final norm; tie default true. The LM head
//     is not served (ModelConfig::lm_head_unsupported_reason): the MLM head's
//     dense + gelu + layer_norm before the decoder is not implemented, so
//     ComputeLogits / Score answer FAILED_PRECONDITION.
// The other families (qwen3, gemma2/3, phi3, deepseek, granite, cohere,
// starcoder2, internlm2, exaone, minicpm, falcon, bloom, mpt, bert,
// nomic_bert, ...) and their keys, defaults and rules are the entries of
// lib/checkpoint/families.h; docs/models.md has the table.
// A nested `text_config` object (composite models) is read instead of the
// top level; its tie_word_embeddings wins over a top-level one.
//
// Required integer keys (llama names; gpt2 uses its n_* names): vocab_size,
// hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
// max_position_embeddings.
// Optional keys and their defaults (HF LlamaConfig defaults):
//   num_key_value_heads = num_attention_heads, head_dim = hidden / heads
//   (null counts as absent), rms_norm_eps = 1e-6, rope_theta = 10000,
//   partial_rotary_factor = 1 (rotary_dim = int(head_dim * factor)),
//   tie_word_embeddings = false (LlamaConfig/MistralConfig/Qwen2Config set
//   False; HF always writes the key, so this only matters for hand-written
//   files -- an untied config without lm_head.weight is then refused rather
//   than served with random weights), bos/eos_token_id = -1 (a list, as in
//   Llama 3, gives its first id).
// `rope_scaling`: null/absent = default; otherwise `rope_type` (or legacy
// `type`; "su" = longrope) and the HF parameters (factor, original_max_...,
// low/high_freq_factor, beta_fast/slow, mscale, mscale_all_dim,
// attention_factor, truncate, short/long_factor; Phi-3's top-level
// original_max_position_embeddings is used when the object lacks it).
// Pair layout is HALF_SPLIT (HF rotate_half); final norm RMSNorm.
//
// Errors: INVALID_ARGUMENT naming `file_name` and the key for invalid JSON,
// missing required keys, wrong JSON types, unsupported model_type or
// rope_type, and for values ModelConfig::Validate() rejects.
absl::StatusOr<ModelConfig> ParseHfConfig(const std::string& json_text,
                                          const std::string& file_name);

// (tensor name in the file, canonical name of lib/checkpoint/checkpoint.h) pairs for a
// family (ModelConfig::architecture), including the "language_model."
// prefixed forms of composite checkpoints. E.g. gpt2: transformer.wte.weight
// (or wte.weight) -> model.embed_tokens.weight, transformer.ln_f.{weight,
// bias} -> model.norm.{weight,bias}, transformer.wpe.weight kept; gpt_neox:
// gpt_neox.embed_in.weight -> embedding, embed_out.weight -> lm_head.weight,
// gpt_neox.final_layer_norm.* -> model.norm.*; phi: model.final_layernorm.*
// -> model.norm.*, lm_head.bias kept; roberta / xlm-roberta:
// [roberta.]embeddings.word_embeddings.weight -> embedding,
// [roberta.]embeddings.position_embeddings.weight -> transformer.wpe.weight,
// [roberta.]embeddings.{token_type_embeddings,LayerNorm}.* ->
// embeddings.{token_type_embeddings,LayerNorm}.*, lm_head.decoder.weight ->
// lm_head.weight. Tensors not listed keep their
// names.
std::vector<std::pair<std::string, std::string>> HfCanonicalTensorNames(
    const std::string& architecture);

}  // namespace vocabd

#endif  // VOCABD_LIB_CHECKPOINT_HF_CONFIG_H_
