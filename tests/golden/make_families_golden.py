#!/usr/bin/python3
"""Golden values for the model family table (lib/checkpoint/families.h), for
tests/lib/checkpoint/families_test.cc.

Run with Debian's NumPy: /usr/bin/python3 tests/golden/make_families_golden.py
Reads tests/data/families/<case>/config.json (each copied from a public
model, tests/data/families/SOURCES.md), shrinks it with the overrides below,
draws random weights, and writes tests/golden/families_golden.json with, per
case: the overrides, the tensors of each file form under the family's own
names (HF safetensors names from modeling_<family>.py; GGUF names, arch and
metadata keys as llama.cpp's convert_hf_to_gguf.py writes them), and the
expected Embed rows, logits, tempered log-probs and per-layer RoPE outputs.

Every rule below is implemented from the transformers modeling file named in
its comment (float64 unless the rule says float32), independently of vocabd's
C++ code. RoPE frequencies come from make_rope_scaling_golden.np_inv_freq
(HF modeling_rope_utils, float32 recipe), the rotation from
make_rope_golden.rope_bhsd_cs.
"""

import json
import math
import os

import numpy as np

from make_rope_golden import F32, rope_bhsd_cs, seeded_tensor, f32_list
from make_rope_scaling_golden import np_inv_freq, np_cos_sin

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data", "families")
rng = np.random.default_rng(20261202)

V, H, HEADS, KV, HD, LAYERS = 24, 16, 2, 1, 8, 8
ROWS = 3
TEMPERATURE = 0.7
TOKEN_IDS = [0, 5, 23, 7, 11]
# RoBERTa: one pad token (pad_token_id 1) inside the sequence.
ROBERTA_TOKEN_IDS = [0, 5, 1, 23, 11]
ROPE_POSITIONS = [0, 1, 2, 5]

# Sizes every llama-like text config is shrunk to.
LLAMA_SHRINK = {"vocab_size": V, "hidden_size": H, "num_hidden_layers": LAYERS,
                "num_attention_heads": HEADS, "num_key_value_heads": KV, "head_dim": HD,
                "intermediate_size": 32, "max_position_embeddings": 256,
                # Special token ids inside the shrunk vocabulary.
                "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}


def case(name, **kw):
    c = {"name": name, "dir": name, "overrides": dict(LLAMA_SHRINK), "gguf_arch": None,
         "norm": "rms", "eps_key": "rms_norm_eps", "one_plus": False, "norm_bias": False,
         "layout": "HALF_SPLIT", "gguf_layout": "HALF_SPLIT", "layers": "uniform",
         "embed": "one", "names": "llama", "tie_default": False, "positions": "rope",
         "pair": None, "rope_head_dim_key": "head_dim", "layers_key": "num_hidden_layers",
         "heads_key": "num_attention_heads", "hidden_key": "hidden_size",
         "kv_key": "num_key_value_heads", "eps_default": None,
         "theta_key": "rope_theta", "partial_key": "partial_rotary_factor",
         "embed_extra": None, "head": True, "gguf_key_length": None,
         "gguf_model_type": None, "head_bias": False, "position_ids": "arange",
         "token_ids": TOKEN_IDS}
    extra = kw.pop("extra_overrides", {})
    c.update(kw)
    c["overrides"].update(extra)
    return c


CASES = [
    # LlamaForCausalLM (modeling_llama.py): LlamaRMSNorm, untied lm_head,
    # rotate_half RoPE with llama3 scaling (Llama 3.1).
    case("llama", gguf_arch="llama", gguf_layout="INTERLEAVED",
         extra_overrides={"rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
                                           "high_freq_factor": 4.0,
                                           "original_max_position_embeddings": 64,
                                           "rope_type": "llama3"}}),
    case("mixtral"),  # MixtralForCausalLM: llama ends (MixtralRMSNorm)
    case("qwen2", gguf_arch="qwen2"),
    case("qwen2_moe", gguf_arch="qwen2moe"),
    case("qwen3", gguf_arch="qwen3"),
    case("qwen3_moe", gguf_arch="qwen3moe"),
    case("olmo2", gguf_arch="olmo2"),
    # SmolLM3Model: no RoPE on layers with no_rope_layers[i] == 0
    # (SmolLM3Attention.use_rope); GGUF: n_no_rope_layer_step = 4, NORM.
    case("smollm3", gguf_arch="smollm3", gguf_layout="INTERLEAVED", layers="no_rope",
         tie_default=True, pair=[2, 3]),
    # Llama4ForConditionalGeneration text model: apply_rotary_emb on
    # view_as_complex pairs (interleaved), NoPE every 4th layer
    # (Llama4TextAttention.use_rope); composite text_config.
    case("llama4", gguf_arch="llama4", layout="INTERLEAVED", gguf_layout="INTERLEAVED",
         layers="no_rope", names="composite_legacy", pair=[2, 3],
         extra_overrides={"no_rope_layers": [], "rope_scaling": {
             "factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
             "original_max_position_embeddings": 64, "rope_type": "llama3"}}),
    # GptOssForCausalLM: _apply_rotary_emb (halves), yarn (truncate False);
    # layer_types alternate with one RoPE.
    case("gpt_oss", gguf_arch="gpt-oss", layers="attention_only",
         extra_overrides={"layer_types": ["sliding_attention", "full_attention"] * 4,
                          "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                                           "original_max_position_embeddings": 64,
                                           "rope_type": "yarn", "truncate": False}}),
    # Phi3ForCausalLM (Phi-4-mini): partial_rotary_factor 0.75, longrope.
    case("phi3", gguf_arch=None,
         extra_overrides={"original_max_position_embeddings": 64,
                          "rope_scaling": {"type": "longrope",
                                           "short_factor": [1.0, 1.25, 1.5],
                                           "long_factor": [2.0, 3.0, 5.0]}}),
    # DeepseekV3: RoPE on qk_rope_head_dim (apply_rotary_pos_emb_interleave),
    # yarn with mscale / mscale_all_dim.
    # GGUF deepseek2: attention.key_length = qk_nope + qk_rope (16),
    # rope.dimension_count = qk_rope_head_dim, yarn_log_multiplier (NORM).
    case("deepseek_v3", layout="INTERLEAVED", rope_head_dim_key="qk_rope_head_dim",
         gguf_arch="deepseek2", gguf_layout="INTERLEAVED", gguf_key_length=16,
         extra_overrides={"qk_rope_head_dim": HD, "qk_nope_head_dim": 8, "v_head_dim": 8,
                          "kv_lora_rank": 8, "q_lora_rank": 8, "num_key_value_heads": HEADS,
                          "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40,
                                           "mscale": 1.0, "mscale_all_dim": 1.0,
                                           "original_max_position_embeddings": 64,
                                           "type": "yarn"}}),
    # DeepseekV2 (apply_rotary_emb on view_as_complex): mscale 0.707.
    case("deepseek_v2", layout="INTERLEAVED", rope_head_dim_key="qk_rope_head_dim",
         extra_overrides={"qk_rope_head_dim": HD, "qk_nope_head_dim": 8, "v_head_dim": 8,
                          "kv_lora_rank": 8, "num_key_value_heads": HEADS,
                          "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40,
                                           "mscale": 0.707, "mscale_all_dim": 0.707,
                                           "original_max_position_embeddings": 64,
                                           "type": "yarn"}}),
    # GraniteModel.forward: inputs_embeds * embedding_multiplier;
    # GraniteForCausalLM.forward: logits / logits_scaling.
    case("granite", gguf_arch="granite", gguf_layout="INTERLEAVED", embed="granite",
         tie_default=True),
    case("granitemoe", gguf_arch="granitemoe", gguf_layout="INTERLEAVED", embed="granite",
         tie_default=True),
    # Gemma2Model: embeddings * torch.tensor(sqrt(hidden)) in the dtype;
    # Gemma2RMSNorm x * (1 + w); Gemma2ForCausalLM softcap 30.
    case("gemma2", gguf_arch="gemma2", one_plus=True, embed="sqrt_hidden", tie_default=True,
         layers="attention_only"),
    # Gemma3ForCausalLM (text-only config): sliding layers rotary_emb_local
    # (rope_local_base_freq), full layers rotary_emb (rope_theta).
    case("gemma3_text", gguf_arch="gemma3", one_plus=True, embed="sqrt_hidden",
         tie_default=True, layers="gemma3", pair=[4, 5]),
    # Gemma3ForConditionalGeneration: composite text_config, linear scaling on
    # the full layers only; model.language_model.* names (transformers 4.52+).
    case("gemma3", one_plus=True, embed="sqrt_hidden", tie_default=True, layers="gemma3",
         names="composite_new", pair=[4, 5]),
    # CohereForCausalLM: CohereLayerNorm (no bias), logits * logit_scale,
    # interleaved rotary (CohereRotaryEmbedding + rotate_half on ::2 / 1::2).
    case("cohere", gguf_arch="command-r", gguf_layout="INTERLEAVED", norm="cohere_ln",
         eps_key="layer_norm_eps", layout="INTERLEAVED", tie_default=True),
    # Cohere2: RoPE on sliding layers only (Cohere2Attention).
    case("cohere2", gguf_arch="cohere2", gguf_layout="INTERLEAVED", norm="cohere_ln",
         eps_key="layer_norm_eps", layout="INTERLEAVED", tie_default=True, layers="cohere2",
         pair=[2, 3]),
    # Starcoder2Model: nn.LayerNorm with bias (norm_epsilon).
    case("starcoder2", gguf_arch="starcoder2", norm="ln", eps_key="norm_epsilon",
         norm_bias=True, tie_default=True),
    # StableLmModel: nn.LayerNorm with bias, partial_rotary_factor 0.25.
    case("stablelm", gguf_arch="stablelm", norm="ln", eps_key="layer_norm_eps", norm_bias=True),
    # GPTBigCodeForCausalLM: GPT-2's ends (wte + wpe, ln_f, tied lm_head).
    case("gpt_bigcode", gguf_arch="starcoder", norm="ln", eps_key="layer_norm_epsilon",
         norm_bias=True, names="gpt2", positions="learned", tie_default=True),
]
CASES[-1]["overrides"] = {"vocab_size": V, "n_embd": H, "n_layer": 2, "n_head": HEADS,
                          "n_inner": 32, "n_positions": 32, "bos_token_id": 1, "eos_token_id": 2}

SPECIAL = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
CASES += [
    # InternLM2ForCausalLM (modeling_internlm2.py, internlm/internlm2_5-7b-chat):
    # model.tok_embeddings / model.norm (InternLM2RMSNorm) / output;
    # InternLM2RotaryEmbedding + rotate_half, dynamic NTK scaling
    # (InternLM2DynamicNTKScalingRotaryEmbedding; no change below
    # max_position_embeddings). GGUF internlm2: q/k permuted (NORM).
    case("internlm2", gguf_arch="internlm2", gguf_layout="INTERLEAVED", names="internlm2"),
    # ExaoneForCausalLM (modeling_exaone.py): transformer.wte /
    # transformer.ln_f (ExaoneRMSNorm, layer_norm_epsilon) / lm_head;
    # num_layers; rotate_half RoPE. GGUF exaone (NEOX).
    case("exaone", gguf_arch="exaone", names="exaone", eps_key="layer_norm_epsilon",
         layers_key="num_layers", tie_default=True),
    # MiniCPMForCausalLM (modeling_minicpm.py, openbmb/MiniCPM-2B-sft-bf16):
    # MiniCPMModel.forward embed_tokens(ids) * scale_emb; forward
    # lm_head(hidden / (hidden_size / dim_model_base)). GGUF minicpm:
    # embedding_scale, logit_scale (llm_build_granite divides by it), NORM.
    case("minicpm", gguf_arch="minicpm", gguf_layout="INTERLEAVED", embed="minicpm",
         tie_default=True),
    # FalconForCausalLM (modeling_falcon.py) from the RefinedWeb config of
    # tiiuae/falcon-7b: transformer.word_embeddings / transformer.ln_f
    # (nn.LayerNorm with bias) / lm_head (tied); FalconRotaryEmbedding +
    # rotate_half (alibi false); multi_query: one KV head. GGUF falcon (NEOX).
    case("falcon", gguf_arch="falcon", names="falcon", norm="ln", eps_key="layer_norm_epsilon",
         norm_bias=True, tie_default=True, layers_key="n_layer", heads_key="n_head",
         kv_key=None),
    # BloomForCausalLM (modeling_bloom.py): BloomModel.forward
    # word_embeddings_layernorm(word_embeddings(ids)); ln_f with bias; tied
    # lm_head; ALiBi (build_alibi_tensor). GGUF bloom: token_embd_norm.
    case("bloom", gguf_arch="bloom", names="bloom", norm="ln", eps_key="layer_norm_epsilon",
         norm_bias=True, tie_default=True, positions="alibi", embed_extra="bloom",
         layers_key="n_layer", heads_key="num_attention_heads", hidden_key="n_embed",
         kv_key=None),
    # MptForCausalLM (modeling_mpt.py): transformer.wte / transformer.norm_f
    # (LayerNorm, bias set to None) / tied lm_head; ALiBi
    # (build_mpt_alibi_tensor, alibi_bias_max 8). GGUF mpt.
    case("mpt", gguf_arch="mpt", names="mpt", norm="ln_nobias", eps_key="layer_norm_epsilon",
         tie_default=True, positions="alibi", layers_key="n_layers", heads_key="n_heads",
         hidden_key="d_model", kv_key=None),
    # BertModel (modeling_bert.py): BertEmbeddings.forward word +
    # token_type(0) + position (absolute, arange) then LayerNorm
    # (layer_norm_eps); Embed only. GGUF bert: token_types, position_embd,
    # token_embd_norm.
    case("bert", gguf_arch="bert", names="bert", norm="none", eps_key="layer_norm_eps",
         tie_default=True, positions="learned", embed_extra="bert", head=False, kv_key=None),
    # NomicBertModel (modeling_hf_nomic_bert.py, nomic-ai/nomic-embed-text-v1.5):
    # NomicBertEmbeddings word + token_type(0) (rotary: no position table),
    # emb_ln; rotary (rotary_emb_base, rotary_emb_fraction, half-split).
    # Embed only. GGUF nomic-bert (NEOX).
    case("nomic_bert", gguf_arch="nomic-bert", names="nomic", norm="none",
         eps_key="layer_norm_epsilon", tie_default=True, embed_extra="nomic", head=False,
         layers_key="n_layer", heads_key="n_head", hidden_key="n_embd", kv_key=None,
         theta_key="rotary_emb_base", partial_key="rotary_emb_fraction"),
]
for _c in CASES:
    _o = {"internlm2": None, "minicpm": None,
          "exaone": dict(LLAMA_SHRINK, num_layers=LAYERS),
          "falcon": dict(SPECIAL, vocab_size=V, hidden_size=H, n_head=HEADS, n_layer=LAYERS),
          # bloom-560m's config.json names its sizes n_embed and
          # num_attention_heads (BloomConfig's aliases).
          "bloom": dict(SPECIAL, vocab_size=V, n_embed=H, num_attention_heads=HEADS, n_layer=2),
          "mpt": dict(SPECIAL, vocab_size=V, d_model=H, n_heads=HEADS, n_layers=2,
                      max_seq_len=64),
          "bert": dict(SPECIAL, vocab_size=V, hidden_size=H, num_attention_heads=HEADS,
                       num_hidden_layers=2, intermediate_size=32, max_position_embeddings=32),
          "nomic_bert": dict(SPECIAL, vocab_size=V, n_embd=H, n_head=HEADS, n_layer=LAYERS,
                             n_inner=32, n_positions=256)}.get(_c["name"], "keep")
    if _o is None or _o == "keep":
        continue
    _c["overrides"] = _o
    if _c["name"] == "exaone":
        del _c["overrides"]["num_hidden_layers"]

# Families served before the table existed (their first tests used the
# hand-written tiny configs of tests/data/forms/), now from public configs.
# Appended last so the random draws of the cases above stay as they were.
CASES += [
    # MistralForCausalLM (modeling_mistral.py): llama ends (MistralRMSNorm,
    # untied lm_head, rotate_half RoPE); MistralConfig rms_norm_eps 1e-6.
    # GGUF: convert_hf_to_gguf.py registers MistralForCausalLM under
    # LlamaModel: arch "llama", q/k permuted (NORM); served as family llama.
    case("mistral", gguf_arch="llama", gguf_layout="INTERLEAVED", gguf_model_type="llama"),
    # GemmaForCausalLM (modeling_gemma.py): GemmaModel.forward normalizer
    # (sqrt(hidden_size) in the dtype), GemmaRMSNorm x * (1 + w), tied
    # lm_head (GemmaConfig tie_word_embeddings True). GGUF gemma (NEOX):
    # convert_hf_to_gguf.py GemmaModel stores norm weights + 1 and writes no
    # rope.* keys (freq_base 10000, dimension_count = key_length).
    case("gemma", gguf_arch="gemma", one_plus=True, embed="sqrt_hidden", tie_default=True),
    # PhiForCausalLM (modeling_phi.py, Phi-1.5 / Phi-2): PhiModel.final_layernorm
    # (nn.LayerNorm with bias, layer_norm_eps), lm_head = nn.Linear(...,
    # bias=True), rotate_half on the first int(head_dim * partial_rotary_factor)
    # dims (PhiConfig default 0.5). GGUF phi2 (NEOX): output.bias,
    # rope.dimension_count = int(partial_rotary_factor * n_embd) // n_head,
    # no rope.freq_base (llama.cpp default 10000).
    case("phi", gguf_arch="phi2", names="phi", norm="ln", eps_key="layer_norm_eps",
         norm_bias=True, head_bias=True),
    # GPT2LMHeadModel (modeling_gpt2.py): GPT2Model.forward wte(ids) +
    # wpe(position_ids = arange), ln_f (layer_norm_epsilon), lm_head tied to
    # wte; the hub checkpoints store GPT2Model names (wte.weight, no
    # transformer. prefix). GGUF gpt2 (convert_hf_to_gguf.py GPT2Model:
    # context_length = n_ctx, feed_forward_length = 4 * n_embd).
    case("gpt2", gguf_arch="gpt2", norm="ln", eps_key="layer_norm_epsilon", norm_bias=True,
         names="gpt2_bare", positions="learned", tie_default=True, layers_key="n_layer",
         heads_key="n_head", hidden_key="n_embd", kv_key=None),
    # GPTNeoXForCausalLM (modeling_gpt_neox.py, Pythia): gpt_neox.embed_in /
    # gpt_neox.final_layer_norm (nn.LayerNorm with bias, layer_norm_eps) /
    # embed_out (untied); rotate_half on int(head_size * rotary_pct) dims,
    # theta rotary_emb_base (GPTNeoXConfig: rope_theta = rotary_emb_base,
    # partial_rotary_factor = rotary_pct, default 0.25). GGUF gptneox
    # (NEOX): rope.dimension_count = int(rotary_pct * (hidden_size //
    # num_attention_heads)), no rope.freq_base.
    case("gpt_neox", gguf_arch="gptneox", names="gpt_neox", norm="ln",
         eps_key="layer_norm_eps", norm_bias=True, kv_key=None,
         theta_key="rotary_emb_base", partial_key="rotary_pct"),
    # RobertaForMaskedLM (modeling_roberta.py): RobertaEmbeddings.forward
    # word + token_type(0) + position, then LayerNorm (layer_norm_eps), with
    # position ids from create_position_ids_from_input_ids (padding_idx =
    # pad_token_id: real tokens count from padding_idx + 1, pad tokens read
    # row padding_idx); Embed only. No GGUF form in vocabd (llama.cpp's
    # converter writes RoBERTa models as arch "bert" with the first
    # padding_idx + 1 position rows dropped).
    case("roberta", names="roberta", norm="none", eps_key="layer_norm_eps", tie_default=True,
         positions="learned", embed_extra="bert", head=False, kv_key=None,
         position_ids="roberta", token_ids=ROBERTA_TOKEN_IDS),
    # XLMRobertaForMaskedLM (modeling_xlm_roberta.py): XLMRobertaEmbeddings,
    # the same rules as RobertaEmbeddings (roberta. tensor prefix).
    case("xlm_roberta", names="roberta", norm="none", eps_key="layer_norm_eps",
         tie_default=True, positions="learned", embed_extra="bert", head=False, kv_key=None,
         position_ids="roberta", token_ids=ROBERTA_TOKEN_IDS),
]
_NO_HEAD_DIM = {k: v for k, v in LLAMA_SHRINK.items() if k not in ("head_dim",)}
for _c in CASES:
    _o = {
        # PhiConfig / GPTNeoXConfig have no head_dim key (hidden_size //
        # num_attention_heads); every head is a key/value head. Phi: one
        # head, so int(16 * 0.4) = 6 rotary dims (phi-2's factor).
        "phi": dict(_NO_HEAD_DIM, num_attention_heads=1, num_key_value_heads=1),
        "gpt_neox": {k: v for k, v in _NO_HEAD_DIM.items() if k != "num_key_value_heads"},
        "gpt2": {"vocab_size": V, "n_embd": H, "n_layer": 2, "n_head": HEADS,
                 "n_positions": 32, "n_ctx": 32, "bos_token_id": 1, "eos_token_id": 2},
        # pad_token_id stays the published 1 (the padding_idx under test).
        "roberta": dict(vocab_size=V, hidden_size=H, num_attention_heads=HEADS,
                        num_hidden_layers=2, intermediate_size=32, max_position_embeddings=32),
    }.get(_c["name"])
    if _c["name"] == "xlm_roberta":
        _o = dict(vocab_size=V, hidden_size=H, num_attention_heads=HEADS, num_hidden_layers=2,
                  intermediate_size=32, max_position_embeddings=32)
    if _o is not None:
        _c["overrides"] = _o


def read_config(c):
    with open(os.path.join(DATA, c["dir"], "config.json")) as f:
        cfg = json.load(f)
    text = cfg.get("text_config")
    t = dict(text) if text is not None else dict(cfg)
    t.update(c["overrides"])
    return cfg, t


def tie(cfg, t, c):
    v = c["tie_default"]
    v = cfg.get("tie_word_embeddings", v)
    if "text_config" in cfg:
        v = cfg["text_config"].get("tie_word_embeddings", v)
    return v


def config_get(t, key, default):
    return t[key] if key in t and t[key] is not None else default


# ---------------- rules (one function per modeling-file rule) ----------------

def eps_of(c, t):
    # Config-class defaults: LlamaConfig rms_norm_eps 1e-6; LayerNorm keys
    # 1e-5 (BertConfig layer_norm_eps 1e-12).
    defaults = {"rms_norm_eps": 1e-6, "layer_norm_eps": 1e-5, "norm_epsilon": 1e-5,
                "layer_norm_epsilon": 1e-5}
    if c["name"] in ("bert", "roberta", "xlm_roberta"):  # BertConfig / RobertaConfig
        defaults["layer_norm_eps"] = 1e-12
    return float(config_get(t, c["eps_key"], defaults[c["eps_key"]]))


def layer_norm(x, w, b, eps):
    """nn.LayerNorm (biased variance) in float64."""
    x = x.astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps) * w.astype(np.float64)
    return y + b.astype(np.float64) if b is not None else y


def final_norm(c, t, x, w, b):
    eps = eps_of(c, t)
    x = x.astype(np.float64)
    if c["norm"] == "rms":
        # LlamaRMSNorm.forward: x * rsqrt(mean(x^2) + eps) * w;
        # GemmaRMSNorm / Gemma2RMSNorm / Gemma3RMSNorm: ... * (1 + w).
        y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
        scale = (1.0 + w.astype(np.float64)) if c["one_plus"] else w.astype(np.float64)
        return y * scale
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps) * w.astype(np.float64)
    if c["norm"] == "ln":  # nn.LayerNorm with bias
        y = y + b.astype(np.float64)
    return y  # CohereLayerNorm, MPT norm_f (bias None): no bias


def position_ids(c, t, ids):
    """Rows of the learned position table for one sequence."""
    if c["position_ids"] == "roberta":
        # modeling_roberta.create_position_ids_from_input_ids (no past):
        # mask = ids != padding_idx; (cumsum(mask) * mask) + padding_idx,
        # padding_idx = config.pad_token_id (RobertaEmbeddings.__init__).
        pad = t["pad_token_id"]
        mask = (np.asarray(ids) != pad).astype(np.int64)
        return np.cumsum(mask) * mask + pad
    # GPT2Model / BertEmbeddings / GPTBigCodeModel: arange(seq_len).
    return np.arange(len(ids))


def embedding_scale(c, t):
    if c["embed"] == "sqrt_hidden":
        # GemmaModel.forward: normalizer = torch.tensor(hidden_size**0.5,
        # dtype=hidden.dtype) (float32 model: float32(sqrt(H))).
        return F32(math.sqrt(t["hidden_size"])), "sqrt(hidden_size)"
    if c["embed"] == "granite":
        # GraniteModel.forward: inputs_embeds * self.embedding_multiplier.
        return F32(t["embedding_multiplier"]), "embedding_multiplier"
    if c["embed"] == "minicpm":
        # MiniCPMModel.forward: self.embed_tokens(input_ids) * self.config.scale_emb.
        return F32(t["scale_emb"]), "scale_emb"
    return F32(1.0), ""


def logit_transform(c, t, logits):
    """(logits after the transform, dict of the rule values)."""
    rules = {"logit_scale": 1.0, "logits_scaling": 1.0, "final_logit_softcapping": 0.0}
    out = logits
    if c["name"] in ("cohere", "cohere2"):
        # CohereForCausalLM.forward: logits = logits * self.logit_scale.
        rules["logit_scale"] = float(config_get(t, "logit_scale", 0.0625))
        out = out * rules["logit_scale"]
    if c["embed"] == "minicpm":
        # MiniCPMForCausalLM.forward: lm_head(hidden_states / (hidden_size /
        # dim_model_base)) (lm_head has no bias: the same as dividing logits).
        rules["logits_scaling"] = t["hidden_size"] / float(config_get(t, "dim_model_base", 1.0))
        out = out / rules["logits_scaling"]
    if c["embed"] == "granite":
        # GraniteForCausalLM.forward: logits = logits / config.logits_scaling.
        rules["logits_scaling"] = float(config_get(t, "logits_scaling", 1.0))
        out = out / rules["logits_scaling"]
    if c["name"].startswith("gemma2") or c["name"].startswith("gemma3"):
        # Gemma2ForCausalLM.forward: logits / cap; tanh; * cap (when not None;
        # Gemma2Config default 30.0, Gemma3TextConfig default None).
        default = 30.0 if c["name"] == "gemma2" else None
        cap = t["final_logit_softcapping"] if "final_logit_softcapping" in t else default
        if cap is not None:
            rules["final_logit_softcapping"] = float(cap)
            out = np.tanh(out / cap) * cap
    return out, rules


def sliding_layers(t, n, default_pattern):
    # Gemma2/Gemma3/Cohere2/GptOss config __init__: layer_types, else
    # "sliding_attention" if (i + 1) % sliding_window_pattern else "full".
    if t.get("layer_types"):
        return [lt == "sliding_attention" for lt in t["layer_types"][:n]]
    p = t.get("sliding_window_pattern", default_pattern)
    return [bool((i + 1) % p) for i in range(n)]


def n_layers(c, t):
    return t[c["layers_key"]]


def base_rope(c, t):
    head_dim = t.get(c["rope_head_dim_key"]) or t[c["hidden_key"]] // t[c["heads_key"]]
    # Config-class defaults: StableLmConfig 0.25, PhiConfig 0.5,
    # GPTNeoXConfig rotary_pct 0.25, else 1.
    partial = t.get(c["partial_key"],
                    {"stablelm": 0.25, "phi": 0.5, "gpt_neox": 0.25}.get(c["name"], 1.0))
    rs = t.get("rope_scaling")
    if rs is not None:
        rs = dict(rs)
        rs.setdefault("rope_type", rs.pop("type", None))
        if rs["rope_type"] == "su":
            rs["rope_type"] = "longrope"
        if rs["rope_type"] == "longrope" and "original_max_position_embeddings" not in rs:
            rs["original_max_position_embeddings"] = t.get("original_max_position_embeddings")
    theta_defaults = {"gemma3": 1e6, "gemma3_text": 1e6, "llama4": 5e5, "gpt_oss": 150000.0,
                      "nomic_bert": 1000.0}
    return {"rope_theta": float(t.get(c["theta_key"], theta_defaults.get(c["name"], 10000.0))),
            "rotary_dim": int(head_dim * partial), "head_dim": head_dim,
            "max_position_embeddings": t.get("max_position_embeddings", t.get("n_positions", 2048)),
            "rope_scaling": rs}


def layer_rope(c, t, i):
    """The RoPE config of layer i (None: no RoPE), from the modeling file."""
    r = base_rope(c, t)
    n = n_layers(c, t)
    if c["layers"] == "no_rope":
        # Llama4TextConfig / SmolLM3Config: no_rope_layers (1 = RoPE), default
        # [int((i + 1) % no_rope_layer_interval != 0)].
        lst = t.get("no_rope_layers") or [
            int((k + 1) % t.get("no_rope_layer_interval", 4) != 0) for k in range(n)]
        return r if lst[i] else None
    if c["layers"] == "gemma3":
        if sliding_layers(t, n, 6)[i]:
            # Gemma3TextModel: rotary_emb_local, theta = rope_local_base_freq,
            # rope_scaling = default.
            r = dict(r, rope_theta=float(t.get("rope_local_base_freq", 10000.0)),
                     rope_scaling=None)
        return r
    if c["layers"] == "cohere2":
        return r if sliding_layers(t, n, 4)[i] else None
    return r


def attention_types(c, t):
    n = n_layers(c, t)
    if c["layers"] in ("gemma3", "cohere2", "attention_only"):
        default = {"gemma3": 6, "cohere2": 4}.get(c["layers"], 2)
        return ["sliding_attention" if s else "full_attention"
                for s in sliding_layers(t, n, default)]
    return [""] * n


def rotate(r, layout, x, positions):
    inv, att, used_long = np_inv_freq(r, max(positions) + 1)
    cos, sin = np_cos_sin(positions, inv, att)
    return rope_bhsd_cs(x, cos, sin, r["rotary_dim"], layout), att, used_long


# ---------------- tensors under each form's names ----------------

HF_NAMES = {
    "llama": {"embed": "model.embed_tokens.weight", "norm": "model.norm.weight",
              "norm_bias": "model.norm.bias", "head": "lm_head.weight"},
    # Llama4ForConditionalGeneration (language_model.model.*, language_model.lm_head).
    "composite_legacy": {"embed": "language_model.model.embed_tokens.weight",
                         "norm": "language_model.model.norm.weight",
                         "head": "language_model.lm_head.weight"},
    # Gemma3ForConditionalGeneration, transformers >= 4.52.
    "composite_new": {"embed": "model.language_model.embed_tokens.weight",
                      "norm": "model.language_model.norm.weight", "head": "lm_head.weight"},
    "internlm2": {"embed": "model.tok_embeddings.weight", "norm": "model.norm.weight",
                  "head": "output.weight"},
    "exaone": {"embed": "transformer.wte.weight", "norm": "transformer.ln_f.weight",
               "head": "lm_head.weight"},
    "falcon": {"embed": "transformer.word_embeddings.weight", "norm": "transformer.ln_f.weight",
               "norm_bias": "transformer.ln_f.bias", "head": "lm_head.weight"},
    # bloom-560m stores BloomModel names (no transformer. prefix).
    "bloom": {"embed": "word_embeddings.weight", "emb_norm": "word_embeddings_layernorm.weight",
              "emb_norm_bias": "word_embeddings_layernorm.bias", "norm": "ln_f.weight",
              "norm_bias": "ln_f.bias", "head": "lm_head.weight"},
    "mpt": {"embed": "transformer.wte.weight", "norm": "transformer.norm_f.weight",
            "head": "lm_head.weight"},
    # BertForMaskedLM (bert. prefix).
    "bert": {"embed": "bert.embeddings.word_embeddings.weight",
             "pos": "bert.embeddings.position_embeddings.weight",
             "types": "bert.embeddings.token_type_embeddings.weight",
             "emb_norm": "bert.embeddings.LayerNorm.weight",
             "emb_norm_bias": "bert.embeddings.LayerNorm.bias"},
    "nomic": {"embed": "embeddings.word_embeddings.weight",
              "types": "embeddings.token_type_embeddings.weight",
              "emb_norm": "emb_ln.weight", "emb_norm_bias": "emb_ln.bias"},
    # PhiForCausalLM: model.final_layernorm, lm_head with bias.
    "phi": {"embed": "model.embed_tokens.weight", "norm": "model.final_layernorm.weight",
            "norm_bias": "model.final_layernorm.bias", "head": "lm_head.weight",
            "head_bias": "lm_head.bias"},
    # GPTNeoXForCausalLM.
    "gpt_neox": {"embed": "gpt_neox.embed_in.weight", "norm": "gpt_neox.final_layer_norm.weight",
                 "norm_bias": "gpt_neox.final_layer_norm.bias", "head": "embed_out.weight"},
    # GPT2Model names, as the openai-community/gpt2* checkpoints store them.
    "gpt2_bare": {"embed": "wte.weight", "pos": "wpe.weight", "norm": "ln_f.weight",
                  "norm_bias": "ln_f.bias", "head": "lm_head.weight"},
    # RobertaForMaskedLM / XLMRobertaForMaskedLM (roberta. prefix).
    "roberta": {"embed": "roberta.embeddings.word_embeddings.weight",
                "pos": "roberta.embeddings.position_embeddings.weight",
                "types": "roberta.embeddings.token_type_embeddings.weight",
                "emb_norm": "roberta.embeddings.LayerNorm.weight",
                "emb_norm_bias": "roberta.embeddings.LayerNorm.bias"},
    "gpt2": {"embed": "transformer.wte.weight", "pos": "transformer.wpe.weight",
             "norm": "transformer.ln_f.weight", "norm_bias": "transformer.ln_f.bias",
             "head": "lm_head.weight"},
}


def gguf_metadata_converter(c, t):
    """The keys convert_hf_to_gguf.py's class for the family writes (None:
    the generic llama-like set below)."""
    a = c["gguf_arch"]
    head = [["general.architecture", "string", a]]
    if c["name"] == "gpt2":  # GPT2Model.set_gguf_parameters
        return head + [[a + ".block_count", "u32", t["n_layer"]],
                       [a + ".context_length", "u32", t["n_ctx"]],
                       [a + ".embedding_length", "u32", t["n_embd"]],
                       [a + ".feed_forward_length", "u32", 4 * t["n_embd"]],
                       [a + ".attention.head_count", "u32", t["n_head"]],
                       [a + ".attention.layer_norm_epsilon", "f32", eps_of(c, t)]]
    if c["name"] == "phi":  # Phi2Model.set_gguf_parameters
        n_embd, n_head = t["hidden_size"], t["num_attention_heads"]
        return head + [[a + ".context_length", "u32", t["max_position_embeddings"]],
                       [a + ".embedding_length", "u32", n_embd],
                       [a + ".feed_forward_length", "u32", 4 * n_embd],
                       [a + ".block_count", "u32", t["num_hidden_layers"]],
                       [a + ".attention.head_count", "u32", n_head],
                       [a + ".attention.head_count_kv", "u32", n_head],
                       [a + ".attention.layer_norm_epsilon", "f32", eps_of(c, t)],
                       [a + ".rope.dimension_count", "u32",
                        int(t["partial_rotary_factor"] * n_embd) // n_head]]
    if c["name"] == "gpt_neox":  # GPTNeoXModel.set_gguf_parameters
        # (also <arch>.use_parallel_residual, a bool vocabd does not read)
        n_embd, n_head = t["hidden_size"], t["num_attention_heads"]
        return head + [[a + ".context_length", "u32", t["max_position_embeddings"]],
                       [a + ".embedding_length", "u32", n_embd],
                       [a + ".block_count", "u32", t["num_hidden_layers"]],
                       [a + ".feed_forward_length", "u32", t["intermediate_size"]],
                       [a + ".rope.dimension_count", "u32",
                        int(t["rotary_pct"] * (n_embd // n_head))],
                       [a + ".attention.head_count", "u32", n_head],
                       [a + ".attention.layer_norm_epsilon", "f32", eps_of(c, t)]]
    if c["name"] == "gemma":  # GemmaModel.set_gguf_parameters
        return head + [[a + ".context_length", "u32", t["max_position_embeddings"]],
                       [a + ".embedding_length", "u32", t["hidden_size"]],
                       [a + ".block_count", "u32", t["num_hidden_layers"]],
                       [a + ".feed_forward_length", "u32", t["intermediate_size"]],
                       [a + ".attention.head_count", "u32", t["num_attention_heads"]],
                       [a + ".attention.head_count_kv", "u32", t["num_key_value_heads"]],
                       [a + ".attention.layer_norm_rms_epsilon", "f32", eps_of(c, t)],
                       [a + ".attention.key_length", "u32", t["head_dim"]],
                       [a + ".attention.value_length", "u32", t["head_dim"]]]
    return None


def gguf_metadata(c, t, rules):
    a = c["gguf_arch"]
    md = gguf_metadata_converter(c, t)
    if md is not None:
        return md
    if c["name"] == "gpt_bigcode":
        md = [["general.architecture", "string", a], [a + ".context_length", "u32", t["n_positions"]],
              [a + ".embedding_length", "u32", H], [a + ".block_count", "u32", t["n_layer"]],
              [a + ".feed_forward_length", "u32", t["n_inner"]],
              [a + ".attention.head_count", "u32", HEADS],
              [a + ".attention.layer_norm_epsilon", "f32", eps_of(c, t)]]
        return md
    heads = t[c["heads_key"]]
    kv = t[c["kv_key"]] if c["kv_key"] else (1 if c["name"] == "falcon" else heads)
    md = [["general.architecture", "string", a],
          [a + ".embedding_length", "u32", H], [a + ".block_count", "u32", n_layers(c, t)],
          [a + ".attention.head_count", "u32", heads],
          [a + ".attention.head_count_kv", "u32", kv]]
    if c["name"] == "mpt":
        md += [[a + ".context_length", "u32", t["max_seq_len"]],
               [a + ".feed_forward_length", "u32", 4 * H],
               [a + ".attention.max_alibi_bias", "f32", 8.0]]
    elif c["name"] == "bloom":
        md += [[a + ".context_length", "u32", 2048], [a + ".feed_forward_length", "u32", 4 * H]]
    elif c["name"] == "falcon":
        md += [[a + ".context_length", "u32", 2048], [a + ".feed_forward_length", "u32", 4 * H]]
    elif c["name"] in ("bert", "nomic_bert"):
        ctx = t["max_position_embeddings"] if c["name"] == "bert" else t["n_positions"]
        ff = t["intermediate_size"] if c["name"] == "bert" else t["n_inner"]
        md += [[a + ".context_length", "u32", ctx], [a + ".feed_forward_length", "u32", ff]]
    else:
        md += [[a + ".context_length", "u32", t["max_position_embeddings"]],
               [a + ".feed_forward_length", "u32", t["intermediate_size"]]]
    if c["positions"] == "rope":
        r = base_rope(c, t)
        key_length = c["gguf_key_length"] or r["head_dim"]
        md += [[a + ".attention.key_length", "u32", key_length],
               [a + ".attention.value_length", "u32", key_length],
               [a + ".rope.dimension_count", "u32", r["rotary_dim"]],
               [a + ".rope.freq_base", "f32", r["rope_theta"]]]
        rs = r["rope_scaling"]
        if rs is not None and rs["rope_type"] == "yarn":
            md += [[a + ".rope.scaling.type", "string", "yarn"],
                   [a + ".rope.scaling.factor", "f32", float(rs["factor"])],
                   [a + ".rope.scaling.original_context_length", "u32",
                    rs["original_max_position_embeddings"]]]
            if c["name"] == "deepseek_v3":  # DeepseekV2Model: 0.1 * mscale_all_dim
                md.append([a + ".rope.scaling.yarn_log_multiplier", "f32",
                           0.1 * float(rs["mscale_all_dim"])])
    if c["norm"] == "rms":
        md.append([a + ".attention.layer_norm_rms_epsilon", "f32", eps_of(c, t)])
    else:  # final LayerNorm and / or the embedding LayerNorm
        md.append([a + ".attention.layer_norm_epsilon", "f32", eps_of(c, t)])
    if c["embed"] == "granite":  # convert_hf_to_gguf.py GraniteModel
        md += [[a + ".embedding_scale", "f32", float(t["embedding_multiplier"])],
               [a + ".logit_scale", "f32", float(t["logits_scaling"])]]
    if c["embed"] == "minicpm":  # MiniCPMModel
        md += [[a + ".embedding_scale", "f32", float(t["scale_emb"])],
               [a + ".logit_scale", "f32", rules["logits_scaling"]]]
    if c["name"] in ("cohere", "cohere2"):  # CommandR2Model / Cohere2Model
        md.append([a + ".logit_scale", "f32", rules["logit_scale"]])
    if c["name"] == "gemma2":  # Gemma2Model
        md.append([a + ".final_logit_softcapping", "f32", rules["final_logit_softcapping"]])
    return md


def make_case(c):
    cfg, t = read_config(c)
    tied = tie(cfg, t, c)
    names = HF_NAMES[c["names"]]
    embed = seeded_tensor(rng, (V, H)) / F32(4)
    norm_w = (seeded_tensor(rng, (H,)) / F32(8)).astype(F32)
    norm_b = (seeded_tensor(rng, (H,)) / F32(8)).astype(F32)
    head = embed if tied else (seeded_tensor(rng, (V, H)) / F32(4)).astype(F32)
    hf = {names["embed"]: embed}
    if c["norm"] != "none":
        hf[names["norm"]] = norm_w
    gguf = {"token_embd.weight": embed}
    if c["norm"] != "none":
        # convert_hf_to_gguf.py Gemma*Model: norm weights stored as 1 + w.
        gguf["output_norm.weight"] = (F32(1) + norm_w).astype(F32) if c["one_plus"] else norm_w
    if c["norm_bias"]:
        hf[names["norm_bias"]] = norm_b
        gguf["output_norm.bias"] = norm_b
    if not tied and c["head"]:
        hf[names["head"]] = head
        gguf["output.weight"] = head
    head_bias = None
    if c["head_bias"]:
        # PhiForCausalLM.__init__: lm_head = nn.Linear(hidden_size, vocab_size,
        # bias=True) (transformers 4.48.0 dropped it; restored in 4.48.1).
        head_bias = (seeded_tensor(rng, (V,)) / F32(4)).astype(F32)
        hf[names["head_bias"]] = head_bias
        gguf["output.bias"] = head_bias
    pos = None
    if c["positions"] == "learned":
        rows_pos = (t["n_positions"] if c["name"] in ("gpt_bigcode", "gpt2")
                    else t["max_position_embeddings"])
        pos = (seeded_tensor(rng, (rows_pos, H)) / F32(4)).astype(F32)
        hf[names["pos"]] = pos
        gguf["position_embd.weight"] = pos
    types = emb_w = emb_b = None
    if c["embed_extra"] in ("bert", "nomic"):
        types = (seeded_tensor(rng, (t["type_vocab_size"], H)) / F32(4)).astype(F32)
        hf[names["types"]] = types
        gguf["token_types.weight"] = types
    if c["embed_extra"] is not None:
        emb_w = (F32(1) + seeded_tensor(rng, (H,)) / F32(8)).astype(F32)
        emb_b = (seeded_tensor(rng, (H,)) / F32(8)).astype(F32)
        hf[names["emb_norm"]] = emb_w
        hf[names["emb_norm_bias"]] = emb_b
        gguf["token_embd_norm.weight"] = emb_w
        gguf["token_embd_norm.bias"] = emb_b

    # Embed: table rows * multiplier (float32 product) + token type row 0 +
    # learned positions (float32 sums, BertEmbeddings.forward order), then
    # the embedding LayerNorm (float64 reference).
    token_ids = c["token_ids"]
    scale, scale_source = embedding_scale(c, t)
    rows = embed[token_ids] * scale if scale != F32(1) else embed[token_ids].copy()
    if types is not None:
        rows = (rows + types[0]).astype(F32)
    if pos is not None:
        rows = (rows + pos[position_ids(c, t, token_ids)]).astype(F32)
    emb_eps = None
    if c["embed_extra"] is not None:
        # BertEmbeddings.LayerNorm (layer_norm_eps 1e-12); NomicBertModel
        # emb_ln and BloomModel word_embeddings_layernorm (layer_norm_epsilon).
        emb_eps = eps_of(c, t)
        rows = layer_norm(rows, emb_w, emb_b, emb_eps)

    # Head: final norm, lm_head, the family's transform, then temperature.
    hidden = seeded_tensor(rng, (ROWS, H))
    if c["head"]:
        y = final_norm(c, t, hidden, norm_w, norm_b if c["norm_bias"] else None)
        raw = y @ head.astype(np.float64).T
        if head_bias is not None:
            raw = raw + head_bias.astype(np.float64)
        logits, rules = logit_transform(c, t, raw)
        tempered = logits / TEMPERATURE
        lse = (np.log(np.sum(np.exp(tempered - tempered.max(-1, keepdims=True)), -1)) +
               tempered.max(-1))
        logprobs = tempered - lse[:, None]
    else:  # Embed-only encoder: ComputeLogits / Score are refused
        logits = logprobs = np.zeros((0,))
        rules = {"logit_scale": 1.0, "logits_scaling": 1.0, "final_logit_softcapping": 0.0}
    targets = [int(x) for x in rng.integers(0, V, ROWS)]

    out = {"name": c["name"], "dir": c["dir"], "overrides": c["overrides"],
           "text_config": "text_config" in cfg, "tied": tied,
           "hf_tensors": {k: {"shape": list(v.shape), "values": f32_list(v)} for k, v in hf.items()},
           "token_ids": token_ids, "embed": f32_list(rows),
           "embed_bit_exact": bool(scale == F32(1) and c["embed_extra"] is None),
           "head": c["head"], "positions": c["positions"],
           "embedding_norm_eps": emb_eps,
           "hidden": f32_list(hidden), "rows": ROWS,
           "logits": [float(v) for v in logits.reshape(-1)],
           "temperature": TEMPERATURE, "targets": targets,
           "logprobs": [float(v) for v in logprobs.reshape(-1)],
           "rules": dict(rules, norm=c["norm"], eps=eps_of(c, t), eps_key=c["eps_key"],
                         embedding_scale=float(scale), embedding_scale_source=scale_source,
                         norm_one_plus_weight=c["one_plus"])}
    if c["gguf_arch"] is not None:
        # The model_type whose family the GGUF file is served as (mistral
        # files are arch llama).
        out["gguf_model_type"] = c["gguf_model_type"] or cfg["model_type"]
        out["gguf"] = {"metadata": gguf_metadata(c, t, rules),
                       "tensors": {k: {"shape": list(v.shape), "values": f32_list(v)}
                                   for k, v in gguf.items()}}
    if c["positions"] == "rope":
        layers = []
        n = n_layers(c, t)
        types = attention_types(c, t)
        hd = base_rope(c, t)["head_dim"]
        for i in range(n):
            r = layer_rope(c, t, i)
            q = seeded_tensor(rng, (1, HEADS, len(ROPE_POSITIONS), hd))
            kv = KV if c["name"] not in ("deepseek_v3", "deepseek_v2", "nomic_bert") else HEADS
            k = seeded_tensor(rng, (1, kv, len(ROPE_POSITIONS), hd))
            positions = ROPE_POSITIONS if c["name"] != "phi3" else [0, 1, 2, 70]
            entry = {"layer": i, "rotary": r is not None, "attention_type": types[i],
                     "positions": positions, "q_shape": list(q.shape), "k_shape": list(k.shape),
                     "q": f32_list(q), "k": f32_list(k), "layout": c["layout"]}
            if r is None:
                qo, ko, att = q, k, 1.0
            else:
                qo, att, used_long = rotate(r, c["layout"], q, positions)
                ko, _, _ = rotate(r, c["layout"], k, positions)
                entry.update(theta=r["rope_theta"], rotary_dim=r["rotary_dim"],
                             used_long_factor=bool(used_long))
            entry.update(q_out=f32_list(qo), k_out=f32_list(ko), attention_scaling=float(att))
            layers.append((entry, qo, ko))
        out["rope_layers"] = [e for e, _, _ in layers]
        if c["pair"] is not None:
            # Attention scores of the two layers: q_i . k_j / sqrt(head_dim)
            # (float64 over the float32 rotated values; GQA head h uses kv head
            # h // (Hq / Hk)).
            scores = []
            for li in c["pair"]:
                _, qo, ko = layers[li]
                hq, hk = qo.shape[1], ko.shape[1]
                s = np.einsum("hid,hjd->hij", qo[0].astype(np.float64),
                              np.repeat(ko[0].astype(np.float64), hq // hk, axis=0)) / math.sqrt(hd)
                scores.append([float(v) for v in s.reshape(-1)])
            out["attention_pair"] = {"layers": c["pair"], "scores": scores}
    return out


def main():
    golden = {"cases": [make_case(c) for c in CASES]}
    path = os.path.join(ROOT, "golden", "families_golden.json")
    with open(path, "w") as f:
        json.dump(golden, f, separators=(",", ":"))
        f.write("\n")
    print("wrote", path, len(golden["cases"]), "cases")


if __name__ == "__main__":
    main()
