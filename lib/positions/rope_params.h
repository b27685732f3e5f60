// RoPE configuration: pair layout, HF scaling parameters and the one
// validity check. Shared by the RoPE math (lib/positions) and the checkpoint
// loaders that read it from config.json / GGUF (lib/checkpoint).
#ifndef VOCABD_LIB_POSITIONS_ROPE_PARAMS_H_
#define VOCABD_LIB_POSITIONS_ROPE_PARAMS_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace vocabd {

// Pair layout of RoPE; see proto/vocabd/v1/rope.proto for the drawings.
//   kInterleaved: pairs (2i, 2i+1)   (Meta Llama, GPT-J, llama2.c, ggml NORM)
//   kHalfSplit:   pairs (i, i + r/2) (HF rotate_half, GPT-NeoX, ggml NEOX)
enum class RopePairLayout { kInterleaved, kHalfSplit };

// HF `rope_scaling.rope_type`.
enum class RopeScalingType { kDefault, kLinear, kDynamic, kYarn, kLlama3, kLongrope };

// "default", "linear", ... (HF rope_type names).
const char* RopeScalingTypeName(RopeScalingType type);

// HF rope_scaling parameters; defaults are the HF defaults.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kDefault;
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  double beta_fast = 32.0;        // yarn
  double beta_slow = 1.0;         // yarn
  double mscale = 0.0;            // yarn (0 = unset)
  double mscale_all_dim = 0.0;    // yarn (0 = unset)
  double attention_factor = 0.0;  // yarn/longrope (0 = HF default formula)
  bool truncate = true;           // yarn
  std::vector<double> short_factor;  // longrope, [rotary_dim / 2]
  std::vector<double> long_factor;   // longrope, [rotary_dim / 2]
};

// Largest head_dim a RoPE config may have (published models use <= 512).
// Bounds the work a config alone can ask for: a request with an empty q/k
// or num_positions = 0 still computes rotary_dim / 2 frequencies.
inline constexpr int kMaxRopeHeadDim = 1 << 16;

// A complete RoPE configuration (HF `rope_theta`, `head_dim`,
// `partial_rotary_factor`, `rope_scaling`, `max_position_embeddings`).
struct RopeParams {
  double theta = 10000.0;
  int head_dim = 0;
  // Leading coordinates of each head that rotate; even, <= head_dim.
  int rotary_dim = 0;
  RopePairLayout pair_layout = RopePairLayout::kHalfSplit;
  RopeScaling scaling;
  // Trained context length; positions >= it are refused unless allowed.
  int64_t max_position_embeddings = 0;

  // The one validity check of a RoPE configuration (model loaders, the
  // RoPE kernels and the server all call it). INVALID_ARGUMENT
  // "<name>.<field> = <value> <rule>", fields named under `name` (the
  // caller's name for the params: "rope" for a model config or request,
  // "params" inside lib/rope*.cc), e.g.
  //   rope.theta = 0 must be a finite number > 0
  //   params.head_dim = 7 is odd        (also <= 0: must be > 0;
  //                                      > kMaxRopeHeadDim: must be <= 65536)
  //   params.rotary_dim = 5 is odd
  //   params.rotary_dim = 10 is outside [2, params.head_dim = 8]
  //   rope.max_position_embeddings = -1 is negative
  //   rope.scaling(yarn).beta_fast = -1 must be finite and > 0
  // Scaling rules: factor finite > 0 and attention_factor finite >= 0 for
  // every type but default; dynamic needs rotary_dim > 2 and a length
  // (max_position_embeddings or original_max_position_embeddings); yarn
  // needs a length, beta_fast/slow > 0, mscale/mscale_all_dim >= 0; llama3
  // needs original_max_position_embeddings > 0 and 0 < low_freq_factor <
  // high_freq_factor; longrope needs short/long_factor of rotary_dim / 2
  // positive entries and a length unless both factor lists are equal and
  // attention_factor is set (GGUF rope_freqs).
  absl::Status Validate(std::string_view name = "rope") const;
};

// HF `partial_rotary_factor` -> rotary_dim, as transformers
// modeling_rope_utils._compute_default_rope_parameters does:
//   dim = int(head_dim * partial_rotary_factor)
// (float64 product, truncated toward zero: head_dim 8 x 0.375 = 3, which
// RopeParams::Validate then refuses as odd). Meaningful for factors in
// (0, 1] (PartialRotaryFactorInRange; callers word their own error).
inline bool PartialRotaryFactorInRange(double factor) { return factor > 0.0 && factor <= 1.0; }
inline int RotaryDimFromPartialFactor(int head_dim, double partial_rotary_factor) {
  return static_cast<int>(static_cast<double>(head_dim) * partial_rotary_factor);
}

}  // namespace vocabd

#endif  // VOCABD_LIB_POSITIONS_ROPE_PARAMS_H_
