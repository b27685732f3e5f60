// Rotary position embedding (RoFormer, arXiv:2104.09864) on q/k tensors.
//
// Angles follow the Hugging Face fp32 recipe (LlamaRotaryEmbedding):
//   inv_freq[i] = 1 / theta^(float(2i) / r)      fp32, i in [0, r/2)
//   angle(p, i) = float(p) * inv_freq[i]        fp32 product
//   cos/sin     = cos(angle), sin(angle)         fp32
// and each pair (a, b) of a head rotates to
//   a' = a cos - b sin,  b' = b cos + a sin.
// Coordinates [r, head_dim) pass through unchanged (partial rotary).
//
// Pair layouts inside one head of width D = head_dim, r = rotary_dim:
//   INTERLEAVED:  [a0 b0 a1 b1 ... a(r/2-1) b(r/2-1) | pass ... ]
//   HALF_SPLIT:   [a0 a1 ... a(r/2-1) b0 b1 ... b(r/2-1) | pass ... ]
//
// Tensor layouts (row-major), H = heads of that tensor:
//   BHSD: [B, H, S, D]    BSHD: [B, S, H, D]    THD: [T, H, D] (== BSHD, B=1)
// q has Hq heads, k has Hk heads, Hq % Hk == 0 (GQA); both use the same
// positions[b * S + s].
#ifndef VOCABD_LIB_ROPE_H_
#define VOCABD_LIB_ROPE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/model_config.h"

namespace vocabd {

enum class QkvLayout { kBHSD, kBSHD, kTHD };

// inv_freq [rotary_dim / 2] (fp32, radians per position) for `params`:
//   kDefault: inv_freq[i] = 1.0f / powf(float(theta), float(2i) / float(r))
//             (powf correctly rounded: pow in double on the float operands,
//             rounded once to float)
//   kLinear:  the same divided by float(scaling.factor) (HF
//             `_compute_linear_scaling_rope_parameters`: positions / factor)
// Other scaling types return UNIMPLEMENTED (the Positions issue adds them).
// INVALID_ARGUMENT naming the params field for theta <= 0, head_dim <= 0 or
// odd, rotary_dim odd or outside [2, head_dim], linear factor <= 0.
// (These checks are local to rope.cc; RopeParams::Validate is not called.)
absl::StatusOr<std::vector<float>> ComputeInvFreq(const RopeParams& params);

// A q or k tensor to rotate in place.
struct QkTensor {
  float* data = nullptr;
  int64_t batch = 0;      // B (1 for THD)
  int64_t num_heads = 0;  // H
  int64_t seq_len = 0;    // S (T for THD)
  int64_t head_dim = 0;   // D
};

struct ApplyRopeOptions {
  QkvLayout layout = QkvLayout::kBHSD;
  // Allow positions >= params.max_position_embeddings (when > 0).
  bool allow_beyond_trained_length = false;
};

// Rotates q and k in place. `positions` has batch * seq_len entries
// (position of token s of batch row b at [b * seq_len + s]); for THD,
// batch must be 1 and seq_len = T. cos/sin are computed once per token and
// shared by every q and k head (GQA: Hq % Hk == 0, same positions).
// INVALID_ARGUMENT (naming the field and value) for: head_dim mismatch
// between q, k and params; odd head_dim/rotary_dim; q heads not a multiple
// of k heads; batch/seq mismatch; negative positions; positions >= the
// trained length unless allowed. Tensor fields are named by their axis in
// the chosen layout, e.g. `q.shape[3] (head_dim) = 7 is odd`,
// `q.shape[1] (num_heads) = 6 is not a multiple of k.shape[1] (num_heads) = 4`,
// `positions[5] = -1 is negative`,
// `positions[2]: position 600 >= max_position_embeddings 512 (set
// allow_beyond_trained_length)`. Nothing is written on error.
absl::Status ApplyRope(const RopeParams& params, const ApplyRopeOptions& options,
                       const std::vector<int64_t>& positions, QkTensor q, QkTensor k);

// Builds positions [batch * seq_len] from per-row offsets (empty = 0):
// positions[b * S + s] = offsets[b] + s. INVALID_ARGUMENT if offsets has
// neither 0 nor `batch` entries, or an offset is negative.
absl::StatusOr<std::vector<int64_t>> PositionsFromOffsets(const std::vector<int64_t>& offsets,
                                                          int64_t batch, int64_t seq_len);

}  // namespace vocabd

#endif  // VOCABD_LIB_ROPE_H_
