#include "lib/rope.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "lib/status_macros.h"

namespace vocabd {
namespace {

// Shape indices of B, H, S, D for each layout (THD has no B axis).
struct AxisNames {
  int batch;  // -1 for THD
  int heads;
  int seq;
  int dim;
};

AxisNames AxesOf(QkvLayout layout) {
  switch (layout) {
    case QkvLayout::kBHSD:
      return {0, 1, 2, 3};
    case QkvLayout::kBSHD:
      return {0, 2, 1, 3};
    case QkvLayout::kTHD:
      return {-1, 1, 0, 2};
  }
  return {0, 1, 2, 3};
}

// "q.shape[3] (head_dim)"
std::string AxisField(const char* tensor, int axis, const char* what) {
  return absl::StrCat(tensor, ".shape[", axis, "] (", what, ")");
}

// Checks the parts of RopeParams this file uses (self-contained, so the
// messages name the params field).
absl::Status ValidateParams(const RopeParams& params) {
  if (!std::isfinite(params.theta) || params.theta <= 0.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("params.theta = ", params.theta, " must be a finite number > 0"));
  }
  if (params.head_dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("params.head_dim = ", params.head_dim, " must be > 0"));
  }
  if (params.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("params.head_dim = ", params.head_dim, " is odd"));
  }
  if (params.rotary_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("params.rotary_dim = ", params.rotary_dim, " is odd"));
  }
  if (params.rotary_dim <= 0 || params.rotary_dim > params.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat("params.rotary_dim = ", params.rotary_dim,
                                                   " is outside [2, params.head_dim = ",
                                                   params.head_dim, "]"));
  }
  if (params.max_position_embeddings < 0) {
    return absl::InvalidArgumentError(absl::StrCat("params.max_position_embeddings = ",
                                                   params.max_position_embeddings,
                                                   " is negative"));
  }
  return absl::OkStatus();
}

const char* ScalingName(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kDefault:
      return "default";
    case RopeScalingType::kLinear:
      return "linear";
    case RopeScalingType::kDynamic:
      return "dynamic";
    case RopeScalingType::kYarn:
      return "yarn";
    case RopeScalingType::kLlama3:
      return "llama3";
    case RopeScalingType::kLongrope:
      return "longrope";
  }
  return "unknown";
}

// Validates one tensor's shape for `layout`; `name` is "q" or "k".
absl::Status ValidateTensorShape(const char* name, const QkTensor& t, QkvLayout layout) {
  const AxisNames ax = AxesOf(layout);
  if (layout == QkvLayout::kTHD) {
    if (t.batch != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ".batch = ", t.batch, " must be 1 for layout THD"));
    }
  } else if (t.batch < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(AxisField(name, ax.batch, "batch"), " = ", t.batch, " is negative"));
  }
  if (t.seq_len < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(AxisField(name, ax.seq, "seq_len"), " = ", t.seq_len, " is negative"));
  }
  if (t.num_heads <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(AxisField(name, ax.heads, "num_heads"), " = ", t.num_heads, " must be > 0"));
  }
  if (t.head_dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(AxisField(name, ax.dim, "head_dim"), " = ", t.head_dim, " must be > 0"));
  }
  if (t.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(AxisField(name, ax.dim, "head_dim"), " = ", t.head_dim, " is odd"));
  }
  if (t.data == nullptr && t.batch > 0 && t.seq_len > 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ".data is null"));
  }
  return absl::OkStatus();
}

// Rotates the first `half` pairs of one head vector in place.
// a' = a cos - b sin,  b' = b cos + a sin   (fp32; no FMA on the x86-64
// baseline, so each product and the sum round separately as in HF).
inline void RotateHead(float* x, int half, bool interleaved, const float* cos_v,
                       const float* sin_v) {
  if (interleaved) {
    for (int i = 0; i < half; ++i) {
      const float a = x[2 * i];
      const float b = x[2 * i + 1];
      x[2 * i] = a * cos_v[i] - b * sin_v[i];
      x[2 * i + 1] = b * cos_v[i] + a * sin_v[i];
    }
  } else {
    float* lo = x;
    float* hi = x + half;
    for (int i = 0; i < half; ++i) {
      const float a = lo[i];
      const float b = hi[i];
      lo[i] = a * cos_v[i] - b * sin_v[i];
      hi[i] = b * cos_v[i] + a * sin_v[i];
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<float>> ComputeInvFreq(const RopeParams& params) {
  RETURN_IF_ERROR(ValidateParams(params));
  const RopeScaling& scaling = params.scaling;
  if (scaling.type != RopeScalingType::kDefault && scaling.type != RopeScalingType::kLinear) {
    return absl::UnimplementedError(absl::StrCat(
        "params.scaling.type = ", ScalingName(scaling.type),
        " is not implemented yet (only default and linear; the Positions issue adds dynamic, "
        "yarn, llama3 and longrope)"));
  }
  float linear_factor = 1.0f;
  if (scaling.type == RopeScalingType::kLinear) {
    if (!std::isfinite(scaling.factor) || scaling.factor <= 0.0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "params.scaling.factor = ", scaling.factor, " must be a finite number > 0 for linear"));
    }
    linear_factor = static_cast<float>(scaling.factor);
  }
  const int r = params.rotary_dim;
  const float base = static_cast<float>(params.theta);
  const float r_f = static_cast<float>(r);
  std::vector<float> inv_freq(static_cast<size_t>(r / 2));
  for (int i = 0; i < r / 2; ++i) {
    // HF: arange(0, r, 2, int64).float() / r, then base ** that, then 1 / it,
    // every step in float32.
    const float exponent = static_cast<float>(2 * i) / r_f;
    // float32 pow, correctly rounded: evaluated in double on the float
    // operands and rounded once (independent of the libm's powf quality;
    // equals glibc powf on all tested inputs).
    const float denom = static_cast<float>(
        std::pow(static_cast<double>(base), static_cast<double>(exponent)));
    float v = 1.0f / denom;
    // HF linear: inv_freq /= factor (float32 tensor / python float).
    if (scaling.type == RopeScalingType::kLinear) v = v / linear_factor;
    inv_freq[static_cast<size_t>(i)] = v;
  }
  return inv_freq;
}

absl::Status ApplyRope(const RopeParams& params, const ApplyRopeOptions& options,
                       const std::vector<int64_t>& positions, QkTensor q, QkTensor k) {
  const QkvLayout layout = options.layout;
  if (layout != QkvLayout::kBHSD && layout != QkvLayout::kBSHD && layout != QkvLayout::kTHD) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.layout = ", static_cast<int>(layout), " is not a known layout"));
  }
  const AxisNames ax = AxesOf(layout);

  // Tensor shapes first (their messages name the tensor axis), then params.
  RETURN_IF_ERROR(ValidateTensorShape("q", q, layout));
  RETURN_IF_ERROR(ValidateTensorShape("k", k, layout));
  if (k.head_dim != q.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(AxisField("k", ax.dim, "head_dim"), " = ",
                                                   k.head_dim, " != ",
                                                   AxisField("q", ax.dim, "head_dim"), " = ",
                                                   q.head_dim));
  }
  if (params.head_dim != q.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat("params.head_dim = ", params.head_dim, " != ",
                                                   AxisField("q", ax.dim, "head_dim"), " = ",
                                                   q.head_dim));
  }
  if (q.num_heads % k.num_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(AxisField("q", ax.heads, "num_heads"), " = ", q.num_heads,
                     " is not a multiple of ", AxisField("k", ax.heads, "num_heads"), " = ",
                     k.num_heads));
  }
  if (layout != QkvLayout::kTHD && k.batch != q.batch) {
    return absl::InvalidArgumentError(absl::StrCat(AxisField("k", ax.batch, "batch"), " = ",
                                                   k.batch, " != ",
                                                   AxisField("q", ax.batch, "batch"), " = ",
                                                   q.batch));
  }
  if (k.seq_len != q.seq_len) {
    return absl::InvalidArgumentError(absl::StrCat(AxisField("k", ax.seq, "seq_len"), " = ",
                                                   k.seq_len, " != ",
                                                   AxisField("q", ax.seq, "seq_len"), " = ",
                                                   q.seq_len));
  }
  ASSIGN_OR_RETURN(std::vector<float> inv_freq, ComputeInvFreq(params));

  const int64_t batch = q.batch;
  const int64_t seq = q.seq_len;
  int64_t tokens = 0;
  if (__builtin_mul_overflow(batch, seq, &tokens)) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch * seq_len = ", batch, " * ", seq, " overflows int64"));
  }
  if (static_cast<int64_t>(positions.size()) != tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("positions has ", positions.size(), " entries, expected batch * seq_len = ",
                     batch, " * ", seq, " = ", tokens));
  }
  const int64_t max_pos = params.max_position_embeddings;
  for (size_t i = 0; i < positions.size(); ++i) {
    const int64_t p = positions[i];
    if (p < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("positions[", i, "] = ", p, " is negative"));
    }
    if (max_pos > 0 && p >= max_pos && !options.allow_beyond_trained_length) {
      return absl::InvalidArgumentError(absl::StrCat(
          "positions[", i, "]: position ", p, " >= max_position_embeddings ", max_pos,
          " (set allow_beyond_trained_length)"));
    }
  }

  const int half = params.rotary_dim / 2;
  const bool interleaved = params.pair_layout == RopePairLayout::kInterleaved;
  const int64_t d = q.head_dim;
  std::vector<float> cos_v(static_cast<size_t>(half));
  std::vector<float> sin_v(static_cast<size_t>(half));

  // Offset of the head vector (b, h, s) in a tensor with `heads` heads.
  auto offset = [&](int64_t b, int64_t h, int64_t s, int64_t heads) -> int64_t {
    if (layout == QkvLayout::kBHSD) return ((b * heads + h) * seq + s) * d;
    return ((b * seq + s) * heads + h) * d;  // BSHD, THD (b == 0)
  };

  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < seq; ++s) {
      // HF: position_ids.float() @ inv_freq (K = 1, one fp32 product), then
      // cos/sin in fp32. Computed once per token, shared by all q and k heads.
      const float pos_f = static_cast<float>(positions[static_cast<size_t>(b * seq + s)]);
      for (int i = 0; i < half; ++i) {
        const float angle = pos_f * inv_freq[static_cast<size_t>(i)];
        cos_v[static_cast<size_t>(i)] = std::cos(angle);  // float overload: cosf
        sin_v[static_cast<size_t>(i)] = std::sin(angle);  // float overload: sinf
      }
      for (int64_t h = 0; h < q.num_heads; ++h) {
        RotateHead(q.data + offset(b, h, s, q.num_heads), half, interleaved, cos_v.data(),
                   sin_v.data());
      }
      for (int64_t h = 0; h < k.num_heads; ++h) {
        RotateHead(k.data + offset(b, h, s, k.num_heads), half, interleaved, cos_v.data(),
                   sin_v.data());
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> PositionsFromOffsets(const std::vector<int64_t>& offsets,
                                                          int64_t batch, int64_t seq_len) {
  if (batch < 0) {
    return absl::InvalidArgumentError(absl::StrCat("batch = ", batch, " is negative"));
  }
  if (seq_len < 0) {
    return absl::InvalidArgumentError(absl::StrCat("seq_len = ", seq_len, " is negative"));
  }
  if (!offsets.empty() && static_cast<int64_t>(offsets.size()) != batch) {
    return absl::InvalidArgumentError(absl::StrCat("position_offsets has ", offsets.size(),
                                                   " entries, expected 0 or batch = ", batch));
  }
  for (size_t b = 0; b < offsets.size(); ++b) {
    if (offsets[b] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("position_offsets[", b, "] = ", offsets[b], " is negative"));
    }
    if (seq_len > 0 && offsets[b] > std::numeric_limits<int64_t>::max() - (seq_len - 1)) {
      return absl::InvalidArgumentError(absl::StrCat("position_offsets[", b, "] = ", offsets[b],
                                                     " + seq_len overflows int64"));
    }
  }
  int64_t count = 0;
  if (__builtin_mul_overflow(batch, seq_len, &count) ||
      static_cast<uint64_t>(count) > std::vector<int64_t>().max_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch * seq_len = ", batch, " * ", seq_len, " is too large"));
  }
  std::vector<int64_t> positions(static_cast<size_t>(count));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t base = offsets.empty() ? 0 : offsets[static_cast<size_t>(b)];
    for (int64_t s = 0; s < seq_len; ++s) {
      positions[static_cast<size_t>(b * seq_len + s)] = base + s;
    }
  }
  return positions;
}

}  // namespace vocabd
