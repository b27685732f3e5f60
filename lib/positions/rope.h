// Rotary position embedding (RoFormer, arXiv:2104.09864) on q/k tensors.
//
// Angles follow the Hugging Face fp32 recipe (LlamaRotaryEmbedding +
// modeling_rope_utils; every scaling type, see lib/positions/rope_freq.h):
//   inv_freq[i] from the scaling type, fp32, i in [0, r/2)
//   angle(p, i) = float(p) * inv_freq[i]        fp32 product
//   cos/sin     = cos(angle) * attn, sin(angle) * attn   fp32 (attn = attention
//                 scaling: yarn / longrope, else 1)
// and each pair (a, b) of a head rotates to
//   a' = a cos - b sin,  b' = b cos + a sin.
// Coordinates [r, head_dim) pass through unchanged (partial rotary).
// high_precision: angles and cos/sin in float64 (rounded once to fp32).
//
// Pair layouts inside one head of width D = head_dim, r = rotary_dim:
//   INTERLEAVED:  [a0 b0 a1 b1 ... a(r/2-1) b(r/2-1) | pass ... ]
//   HALF_SPLIT:   [a0 a1 ... a(r/2-1) b0 b1 ... b(r/2-1) | pass ... ]
//
// Tensor layouts (row-major), H = heads of that tensor:
//   BHSD: [B, H, S, D]    BSHD: [B, S, H, D]    THD: [T, H, D] (== BSHD, B=1)
// q has Hq heads, k has Hk heads, Hq % Hk == 0 (GQA); both use the same
// positions[b * S + s].
//
// Speed: cos/sin rows come from a per-config table cache (lib/positions/rope_cache.h)
// and the rotation is a vectorized kernel (lib/positions/rope_kernel.h, AVX-512/AVX2
// chosen at run time), split over threads for large tensors.
#ifndef VOCABD_LIB_POSITIONS_ROPE_H_
#define VOCABD_LIB_POSITIONS_ROPE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/positions/rope_params.h"
#include "lib/positions/rope_cache.h"
#include "lib/positions/rope_freq.h"
#include "lib/positions/rope_kernel.h"

namespace vocabd {

enum class QkvLayout { kBHSD, kBSHD, kTHD };

// inv_freq [rotary_dim / 2] (fp32, radians per position) for `params` at
// the trained length (ComputeRopeFrequencies(params, 0, false).inv_freq;
// dynamic: the unscaled frequencies, longrope: short_factor).
// INVALID_ARGUMENT from params.Validate("params") (RopeParams::Validate:
// `params.theta`, `params.rotary_dim`, `params.scaling(yarn).factor`, ...).
absl::StatusOr<std::vector<float>> ComputeInvFreq(const RopeParams& params);

// A q or k tensor to rotate in place.
struct QkTensor {
  float* data = nullptr;
  int64_t batch = 0;      // B (1 for THD)
  int64_t num_heads = 0;  // H
  int64_t seq_len = 0;    // S (T for THD)
  int64_t head_dim = 0;   // D
};

// "BHSD", "BSHD" or "THD".
const char* QkvLayoutName(QkvLayout layout);

// The B, H, S, D sizes of a q or k tensor of `shape` in `layout` (data left
// null for the caller to set):
//   BHSD [B, H, S, D]   BSHD [B, S, H, D]   THD [T, H, D] (B = 1, S = T)
// INVALID_ARGUMENT when the rank does not fit the layout, naming `field`:
//   "q.shape = [2, 8] must have 4 dims for layout BHSD".
// Sizes are not checked here (ApplyRope does, naming the axis).
absl::StatusOr<QkTensor> QkTensorFromShape(const std::vector<int64_t>& shape, QkvLayout layout,
                                           std::string_view field);

struct ApplyRopeOptions {
  QkvLayout layout = QkvLayout::kBHSD;
  // Allow positions >= params.max_position_embeddings (when > 0).
  bool allow_beyond_trained_length = false;
  // float64 angles (see lib/positions/rope_freq.h) instead of the HF fp32 recipe.
  bool high_precision = false;
  // Kernel ISA; kAuto = the best the CPU has (all give the same bits).
  RopeIsa isa = RopeIsa::kAuto;
  // Worker threads; 0 = auto (all hardware threads when q + k >= 4 MiB,
  // else 1). Threads are spawned per call.
  int num_threads = 0;
  // cos/sin table cache; nullptr = RopeCache::Shared(). use_cache = false
  // computes every row directly (same bits).
  RopeCache* cache = nullptr;
  bool use_cache = true;
  // Accept NaN/Inf in q and k (rotated like any value). false: the first
  // non-finite element is INVALID_ARGUMENT, e.g.
  // `q[0, 1, 2, 3] = nan is not finite (set allow_non_finite to accept NaN/Inf)`.
  bool allow_non_finite = false;
  // Name of `params` in error messages (`<params_name>.theta = ...`); the
  // server passes "rope", the request field the params come from.
  std::string params_name = "params";
};

// The shape checks ApplyRope starts with, on q and k alone (data may be
// null): rank-independent sizes (batch >= 0, seq_len >= 0, num_heads > 0,
// head_dim > 0 and even), q/k agreement (head_dim, batch, seq_len, q heads a
// multiple of k heads) and batch * seq_len * heads * head_dim fitting int64.
// Callers that build anything sized from the shapes (positions tables,
// decoded copies) call this first, so a request like q.shape =
// [32768, 0, 32768, 8] is refused before batch x seq_len positions exist.
// INVALID_ARGUMENT naming the axis as ApplyRope does.
absl::Status ValidateQkShapes(const QkTensor& q, const QkTensor& k, QkvLayout layout);

// The length policy shared by every position consumer: INVALID_ARGUMENT
// `<field>[i]: position P >= max_position_embeddings M (set
// allow_beyond_trained_length)` when max_trained > 0, P >= M and not allowed;
// `<field>[i] = P is negative` for P < 0.
absl::Status CheckPositions(const std::vector<int64_t>& positions, int64_t max_trained,
                            bool allow_beyond_trained_length, const char* field);

// GetRopeCache: frequencies and cos/sin for positions
// start .. start + count - 1 (seq_len for dynamic/longrope = start + count).
struct RopeCacheOutput {
  std::vector<float> inv_freq;  // [r/2] (high precision: float(inv_freq_f64))
  std::vector<float> cos;       // [count, r/2], times attention_scaling
  std::vector<float> sin;       // [count, r/2]
  double attention_scaling = 1.0;
  bool used_long_factor = false;
};
// INVALID_ARGUMENT naming `num_positions` (< 0 or count * r/2 > 2^24) /
// `start_position` (< 0) / the length policy / params (as
// params.Validate(params_name)).
absl::StatusOr<RopeCacheOutput> ComputeRopeCache(const RopeParams& params, int64_t start,
                                                 int64_t count, bool allow_beyond_trained_length,
                                                 bool high_precision,
                                                 std::string_view params_name = "params");

// What ApplyRope rotated with: read from the one frequency set it computed
// (ComputeRopeFrequencies(params, max(positions) + 1, high_precision), so
// equal to that call's fields; seq_len 0 when there are no positions).
struct ApplyRopeResult {
  // The factor cos and sin were multiplied by (HF `attention_scaling`:
  // yarn / longrope, see lib/positions/rope_freq.h; 1 otherwise).
  double attention_scaling = 1.0;
  // longrope: long_factor was used (max position + 1 > original length).
  bool used_long_factor = false;
};

// Rotates q and k in place. `positions` has batch * seq_len entries
// (position of token s of batch row b at [b * seq_len + s]); for THD,
// batch must be 1 and seq_len = T. cos/sin are computed once per token and
// shared by every q and k head (GQA: Hq % Hk == 0, same positions).
// INVALID_ARGUMENT (naming the field and value) for: head_dim mismatch
// between q, k and params; odd head_dim; q heads not a multiple of k heads;
// batch/seq mismatch; negative positions; positions >= the trained length
// unless allowed; params that params.Validate(options.params_name) refuses
// (checked once, by ComputeRopeFrequencies). Tensor fields are named by their axis in
// the chosen layout, e.g. `q.shape[3] (head_dim) = 7 is odd`,
// `q.shape[1] (num_heads) = 6 is not a multiple of k.shape[1] (num_heads) = 4`,
// `positions[5] = -1 is negative`,
// `positions[2]: position 600 >= max_position_embeddings 512 (set
// allow_beyond_trained_length)`. Nothing is written on error. On success,
// the attention scaling it applied (ApplyRopeResult; callers need not
// compute the frequencies again to report it).
absl::StatusOr<ApplyRopeResult> ApplyRope(const RopeParams& params,
                                          const ApplyRopeOptions& options,
                                          const std::vector<int64_t>& positions, QkTensor q,
                                          QkTensor k);

// Builds positions [batch * seq_len] from per-row offsets (empty = 0):
// positions[b * S + s] = offsets[b] + s. INVALID_ARGUMENT if offsets has
// neither 0 nor `batch` entries, or an offset is negative.
absl::StatusOr<std::vector<int64_t>> PositionsFromOffsets(const std::vector<int64_t>& offsets,
                                                          int64_t batch, int64_t seq_len);

}  // namespace vocabd

#endif  // VOCABD_LIB_POSITIONS_ROPE_H_
