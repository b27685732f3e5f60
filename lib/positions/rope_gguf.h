// RoPE configuration from GGUF metadata (llama.cpp `<arch>.rope.*` keys),
// independent of the GGUF parser: the caller passes the metadata as a map
// of simple values (lib/checkpoint/gguf_checkpoint.cc can adapt its GgufValue map).
//
// Keys read (arch = general.architecture):
//   <arch>.context_length                         -> max_position_embeddings
//   <arch>.rope.dimension_count                   -> rotary_dim (default head_dim)
//   <arch>.rope.freq_base                         -> theta (default 10000)
//   <arch>.rope.scaling.type  none|linear|yarn|longrope (absent: longrope
//                             when rope_factors_long is given, else none)
//   <arch>.rope.scale_linear                      -> legacy linear factor
//   <arch>.rope.scaling.factor                    -> factor
//   <arch>.rope.scaling.original_context_length   -> original_max_position_embeddings
//   <arch>.rope.scaling.attn_factor               -> attention_factor (yarn, longrope)
//   <arch>.rope.scaling.yarn_log_multiplier       -> mscale_all_dim = value / 0.1
//                                                    (and mscale = mscale_all_dim,
//                                                    as DeepSeek's conversion does)
//   <arch>.rope.scaling.yarn_beta_fast / yarn_beta_slow -> beta_fast / beta_slow
// Per-pair frequency factors live in GGUF tensors, not keys: pass
// `rope_factors_long` / `rope_factors_short` (Phi-3 longrope tensors
// rope_factors_long.weight / rope_factors_short.weight; without a
// scaling.type key they mean longrope, as in llama.cpp) or `rope_freqs`
// (Llama 3.1 `rope_freqs.weight`: inv_freq[i] = default[i] / rope_freqs[i]),
// which is represented as longrope with short = long = rope_freqs and
// attention_factor 1 (the same frequencies up to float32 rounding order).
#ifndef VOCABD_LIB_POSITIONS_ROPE_GGUF_H_
#define VOCABD_LIB_POSITIONS_ROPE_GGUF_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/positions/rope_params.h"

namespace vocabd {

struct GgufRopeValue {
  enum class Kind { kInt, kFloat, kString };
  Kind kind = Kind::kInt;
  int64_t i = 0;
  double f = 0;
  std::string s;
  static GgufRopeValue Int(int64_t v) { GgufRopeValue x; x.kind = Kind::kInt; x.i = v; return x; }
  static GgufRopeValue Float(double v) { GgufRopeValue x; x.kind = Kind::kFloat; x.f = v; return x; }
  static GgufRopeValue String(std::string v) {
    GgufRopeValue x; x.kind = Kind::kString; x.s = std::move(v); return x;
  }
};

struct GgufRopeInput {
  std::string arch;  // general.architecture, e.g. "llama"
  std::map<std::string, GgufRopeValue> metadata;
  int head_dim = 0;  // from the attention keys / tensor shapes
  // llama.cpp rope type of the architecture: NORM = interleaved, NEOX = half-split.
  RopePairLayout pair_layout = RopePairLayout::kInterleaved;
  std::vector<double> rope_factors_long;
  std::vector<double> rope_factors_short;
  std::vector<double> rope_freqs;
};

// INVALID_ARGUMENT naming the key and value for a wrong type (`key
// "llama.rope.freq_base" must be a number, got string`), an unknown scaling
// type, a missing factor, or parameters RopeParams::Validate refuses.
absl::StatusOr<RopeParams> RopeParamsFromGguf(const GgufRopeInput& input);

}  // namespace vocabd

#endif  // VOCABD_LIB_POSITIONS_ROPE_GGUF_H_
