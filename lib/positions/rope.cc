#include "lib/positions/rope.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <thread>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "lib/core/finite.h"
#include "lib/core/shape.h"
#include "lib/core/status_macros.h"
#include "lib/positions/position_ids.h"

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

}  // namespace

const char* QkvLayoutName(QkvLayout layout) {
  switch (layout) {
    case QkvLayout::kBHSD:
      return "BHSD";
    case QkvLayout::kBSHD:
      return "BSHD";
    case QkvLayout::kTHD:
      return "THD";
  }
  return "BHSD";
}

absl::StatusOr<QkTensor> QkTensorFromShape(const std::vector<int64_t>& shape, QkvLayout layout,
                                           std::string_view field) {
  const size_t want_dims = layout == QkvLayout::kTHD ? 3 : 4;
  if (shape.size() != want_dims) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ".shape = ",
                                                   ShapeString(shape), " must have ", want_dims,
                                                   " dims for layout ", QkvLayoutName(layout)));
  }
  const AxisNames ax = AxesOf(layout);
  QkTensor t;
  t.batch = ax.batch < 0 ? 1 : shape[ax.batch];
  t.num_heads = shape[ax.heads];
  t.seq_len = shape[ax.seq];
  t.head_dim = shape[ax.dim];
  return t;
}

namespace {

// "q.shape[3] (head_dim)"
std::string AxisField(const char* tensor, int axis, const char* what) {
  return absl::StrCat(tensor, ".shape[", axis, "] (", what, ")");
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
  return absl::OkStatus();
}

absl::Status ValidateTensorData(const char* name, const QkTensor& t) {
  if (t.data == nullptr && t.batch > 0 && t.seq_len > 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, ".data is null"));
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT naming the first NaN/Inf element of `t` by its index in
// the layout's shape: "q[0, 1, 2, 3] = nan is not finite ...".
absl::Status CheckQkFinite(const char* name, const QkTensor& t, QkvLayout layout) {
  const int64_t n = t.batch * t.seq_len * t.num_heads * t.head_dim;
  const int64_t bad = FirstNonFinite(t.data, n);
  if (bad < 0) return absl::OkStatus();
  // Row-major index -> coordinates of the tensor as sent.
  std::vector<int64_t> dims;
  if (layout == QkvLayout::kBHSD) dims = {t.batch, t.num_heads, t.seq_len, t.head_dim};
  if (layout == QkvLayout::kBSHD) dims = {t.batch, t.seq_len, t.num_heads, t.head_dim};
  if (layout == QkvLayout::kTHD) dims = {t.seq_len, t.num_heads, t.head_dim};
  return absl::InvalidArgumentError(absl::StrCat(name, NonFiniteIndex(dims, bad), " = ",
                                                 t.data[bad],
                                                 " is not finite (set allow_non_finite to "
                                                 "accept NaN/Inf)"));
}

}  // namespace

absl::StatusOr<std::vector<float>> ComputeInvFreq(const RopeParams& params) {
  ASSIGN_OR_RETURN(RopeFrequencies f, ComputeRopeFrequencies(params, 0, false));
  return std::move(f.inv_freq);
}

absl::Status CheckPositions(const std::vector<int64_t>& positions, int64_t max_trained,
                            bool allow_beyond_trained_length, const char* field) {
  for (size_t i = 0; i < positions.size(); ++i) {
    const int64_t p = positions[i];
    if (p < 0) {
      return absl::InvalidArgumentError(absl::StrCat(field, "[", i, "] = ", p, " is negative"));
    }
    if (max_trained > 0 && p >= max_trained && !allow_beyond_trained_length) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, "[", i, "]: position ", p, " >= max_position_embeddings ", max_trained,
          " (set allow_beyond_trained_length)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RopeCacheOutput> ComputeRopeCache(const RopeParams& params, int64_t start,
                                                 int64_t count, bool allow_beyond_trained_length,
                                                 bool high_precision,
                                                 std::string_view params_name) {
  RETURN_IF_ERROR(ValidatePositionRange(start, count));
  const int64_t last = count > 0 ? start + count - 1 : start;
  if (count > 0 && params.max_position_embeddings > 0 && last >= params.max_position_embeddings &&
      !allow_beyond_trained_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "start_position + num_positions - 1 = ", last, " >= max_position_embeddings ",
        params.max_position_embeddings, " (set allow_beyond_trained_length)"));
  }
  ASSIGN_OR_RETURN(RopeFrequencies f, ComputeRopeFrequencies(params, count > 0 ? start + count : 0,
                                                            high_precision, params_name));
  constexpr int64_t kMaxValues = int64_t{1} << 24;
  if (count > kMaxValues / std::max(f.half, 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_positions = ", count, " x rotary_dim / 2 = ", f.half, " exceeds ", kMaxValues,
        " values per table"));
  }
  RopeCacheOutput out;
  out.attention_scaling = f.attention_scaling;
  out.used_long_factor = f.used_long_factor;
  if (high_precision) {
    out.inv_freq.assign(f.inv_freq_f64.begin(), f.inv_freq_f64.end());
  } else {
    out.inv_freq = f.inv_freq;
  }
  const size_t h = static_cast<size_t>(f.half);
  out.cos.resize(static_cast<size_t>(count) * h);
  out.sin.resize(static_cast<size_t>(count) * h);
  for (int64_t i = 0; i < count; ++i) {
    f.CosSin(start + i, out.cos.data() + static_cast<size_t>(i) * h,
             out.sin.data() + static_cast<size_t>(i) * h);
  }
  return out;
}

absl::Status ValidateQkShapes(const QkTensor& q, const QkTensor& k, QkvLayout layout) {
  if (layout != QkvLayout::kBHSD && layout != QkvLayout::kBSHD && layout != QkvLayout::kTHD) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout = ", static_cast<int>(layout), " is not a known layout"));
  }
  const AxisNames ax = AxesOf(layout);

  RETURN_IF_ERROR(ValidateTensorShape("q", q, layout));
  RETURN_IF_ERROR(ValidateTensorShape("k", k, layout));
  if (k.head_dim != q.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(AxisField("k", ax.dim, "head_dim"), " = ",
                                                   k.head_dim, " != ",
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
  // batch * seq_len, and the element count of each tensor, must fit int64
  // (callers size buffers from them).
  int64_t tokens = 0;
  if (__builtin_mul_overflow(q.batch, q.seq_len, &tokens)) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch * seq_len = ", q.batch, " * ", q.seq_len, " overflows int64"));
  }
  for (const auto& [name, t] : {std::pair<const char*, const QkTensor&>{"q", q}, {"k", k}}) {
    int64_t n = 0;
    if (__builtin_mul_overflow(tokens, t.num_heads, &n) ||
        __builtin_mul_overflow(n, t.head_dim, &n)) {
      return absl::InvalidArgumentError(absl::StrCat(name, " has more than 2^63 elements"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ApplyRopeResult> ApplyRope(const RopeParams& params,
                                          const ApplyRopeOptions& options,
                                          const std::vector<int64_t>& positions, QkTensor q,
                                          QkTensor k) {
  const QkvLayout layout = options.layout;
  if (layout != QkvLayout::kBHSD && layout != QkvLayout::kBSHD && layout != QkvLayout::kTHD) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.layout = ", static_cast<int>(layout), " is not a known layout"));
  }
  // Tensor shapes first (their messages name the tensor axis), then params.
  RETURN_IF_ERROR(ValidateQkShapes(q, k, layout));
  RETURN_IF_ERROR(ValidateTensorData("q", q));
  RETURN_IF_ERROR(ValidateTensorData("k", k));
  const AxisNames ax = AxesOf(layout);
  if (params.head_dim != q.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(options.params_name, ".head_dim = ",
                                                   params.head_dim, " != ",
                                                   AxisField("q", ax.dim, "head_dim"), " = ",
                                                   q.head_dim));
  }
  if (!options.allow_non_finite) {
    RETURN_IF_ERROR(CheckQkFinite("q", q, layout));
    RETURN_IF_ERROR(CheckQkFinite("k", k, layout));
  }
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
  RETURN_IF_ERROR(CheckPositions(positions, params.max_position_embeddings,
                                 options.allow_beyond_trained_length, "positions"));
  int64_t max_position = -1;
  for (int64_t p : positions) max_position = std::max(max_position, p);
  // HF dynamic_rope_update: seq_len = max(position_ids) + 1 (also the
  // longrope short/long switch).
  ASSIGN_OR_RETURN(RopeFrequencies freqs,
                   ComputeRopeFrequencies(params, max_position + 1, options.high_precision,
                                          options.params_name));
  ApplyRopeResult result;
  result.attention_scaling = freqs.attention_scaling;
  result.used_long_factor = freqs.used_long_factor;
  if (tokens == 0) return result;

  // cos/sin row of every token: from the cached table when the request is
  // dense enough to be worth one (or one exists), else computed here.
  const int half = freqs.half;
  std::vector<const float*> cos_rows(static_cast<size_t>(tokens));
  std::vector<const float*> sin_rows(static_cast<size_t>(tokens));
  std::shared_ptr<const RopeTable> table;
  std::vector<float> scratch;
  if (options.use_cache) {
    RopeCache& cache = options.cache != nullptr ? *options.cache : RopeCache::Shared();
    const int64_t needed = max_position + 1;
    const bool dense = needed <= 4 * tokens + 4096;
    table = cache.Get(freqs, needed, /*build_if_missing=*/dense);
  }
  if (table != nullptr) {
    for (int64_t t = 0; t < tokens; ++t) {
      const size_t off = static_cast<size_t>(positions[static_cast<size_t>(t)]) * half;
      cos_rows[static_cast<size_t>(t)] = table->cos.data() + off;
      sin_rows[static_cast<size_t>(t)] = table->sin.data() + off;
    }
  } else {
    scratch.resize(static_cast<size_t>(tokens) * 2 * half);
    for (int64_t t = 0; t < tokens; ++t) {
      float* c = scratch.data() + static_cast<size_t>(t) * 2 * half;
      freqs.CosSin(positions[static_cast<size_t>(t)], c, c + half);
      cos_rows[static_cast<size_t>(t)] = c;
      sin_rows[static_cast<size_t>(t)] = c + half;
    }
  }

  const RotateRowsFn rotate =
      GetRotateRows(params.pair_layout == RopePairLayout::kInterleaved, options.isa);
  const int64_t d = q.head_dim;
  // Work units: blocks of kBlock tokens of one batch row; each unit rotates
  // every q and k head of those tokens.
  constexpr int64_t kBlock = 64;
  const int64_t blocks_per_row = (seq + kBlock - 1) / kBlock;
  const int64_t units = batch * blocks_per_row;
  const float* const* cr = cos_rows.data();
  const float* const* sr = sin_rows.data();
  auto run_units = [&](int64_t u_begin, int64_t u_end) {
    for (int64_t u = u_begin; u < u_end; ++u) {
      const int64_t b = u / blocks_per_row;
      const int64_t s0 = (u % blocks_per_row) * kBlock;
      const int64_t n = std::min(kBlock, seq - s0);
      const int64_t t0 = b * seq + s0;
      if (layout == QkvLayout::kBHSD) {
        // Rows of one head are contiguous over s: runs of n rows.
        for (int64_t h = 0; h < q.num_heads; ++h) {
          rotate(q.data + ((b * q.num_heads + h) * seq + s0) * d, n, d, cr + t0, sr + t0, 1, half);
        }
        for (int64_t h = 0; h < k.num_heads; ++h) {
          rotate(k.data + ((b * k.num_heads + h) * seq + s0) * d, n, d, cr + t0, sr + t0, 1, half);
        }
      } else {
        // BSHD / THD: all heads of a token are contiguous and share one row.
        for (int64_t s = 0; s < n; ++s) {
          const int64_t t = t0 + s;
          rotate(q.data + t * q.num_heads * d, q.num_heads, d, cr + t, sr + t, 0, half);
          rotate(k.data + t * k.num_heads * d, k.num_heads, d, cr + t, sr + t, 0, half);
        }
      }
    }
  };
  int threads = options.num_threads;
  if (threads <= 0) {
    const int64_t bytes = tokens * (q.num_heads + k.num_heads) * d * static_cast<int64_t>(sizeof(float));
    threads = bytes >= (int64_t{4} << 20) ? static_cast<int>(std::thread::hardware_concurrency()) : 1;
  }
  threads = static_cast<int>(std::clamp<int64_t>(threads, 1, std::max<int64_t>(units, 1)));
  if (threads == 1) {
    run_units(0, units);
    return result;
  }
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(threads - 1));
  for (int w = 1; w < threads; ++w) {
    workers.emplace_back(run_units, units * w / threads, units * (w + 1) / threads);
  }
  run_units(0, units / threads);
  for (std::thread& w : workers) w.join();
  return result;
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
