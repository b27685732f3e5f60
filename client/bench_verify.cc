#include "client/bench_verify.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/tensor_codec.h"
#include "lib/core/dtype.h"
#include "lib/core/shape.h"
#include "lib/core/status_macros.h"
#include "lib/quant/dequantize.h"
#include "lib/quant/quantize.h"

namespace vocabd {
namespace {

absl::Status Mismatch(const std::string& what) { return absl::DataLossError(what); }

// Relative rounding of the wire dtype (0 for F32).
double RoundingOf(v1::DType dtype) {
  if (dtype == v1::BF16) return std::ldexp(1.0, -8);
  if (dtype == v1::F16) return std::ldexp(1.0, -11);
  return 0.0;
}

// Largest |l - ref| accepted for a logit whose terms sum to `abs_sum`.
double LogitTolerance(double abs_sum) { return 2e-5 * (1.0 + abs_sum); }

// The type a table is served in under --weights-dtype auto without bf16
// dot products: quantized tables as stored, float tables as F32.
quant::GgmlType DefaultServedType(const WeightTensor& t) {
  return t.quant_type.has_value() ? *t.quant_type : quant::GgmlType::kF32;
}

// f rounded to `dtype` (BF16/F16: nearest even; F32: f).
float RoundTo(float f, DType dtype) {
  if (dtype != DType::kBF16 && dtype != DType::kF16) return f;
  uint16_t bits = 0;
  ConvertFromF32(&f, 1, dtype, &bits);
  float out = 0;
  ConvertToF32(dtype, &bits, 1, &out);
  return out;
}

// How far the server's float32 final norm may move y relative to the
// reference's float64 one before it could round differently: a bf16 or an
// int8 code boundary within this relative distance of y makes y
// ambiguous (both roundings accepted).
constexpr double kNormRelativeError = 2e-5;

}  // namespace

struct BenchReference::RowLogits {
  std::vector<double> logits;  // masked ids: -inf
  std::vector<double> abs_sum;  // sum_k |y_k W_jk| / T
  std::vector<double> tolerance;  // accepted |logit_j - ref_j| (before output rounding)
  double logsumexp = 0;
  double max_tolerance = 0;
};

absl::StatusOr<std::unique_ptr<BenchReference>> BenchReference::Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, LoadCheckpoint(path));
  return std::make_unique<BenchReference>(std::move(checkpoint));
}

BenchReference::BenchReference(std::unique_ptr<Checkpoint> checkpoint)
    : checkpoint_(std::move(checkpoint)),
      embedding_type_(DefaultServedType(checkpoint_->embedding())),
      head_type_(DefaultServedType(checkpoint_->lm_head())) {}

absl::Status BenchReference::ServeAs(const v1::ModelInfo& info) {
  const bool tied = checkpoint_->Find(kLmHead) == nullptr;
  const int64_t hidden = checkpoint_->config().hidden_size;
  bool have_embedding = false, have_head = false;
  for (const v1::ServedTensor& t : info.served_tensors()) {
    const bool is_embedding = t.name() == kEmbedTokens;
    const bool is_head = t.name() == kLmHead;
    if (!is_embedding && !is_head) continue;
    if (is_head && tied) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--verify: model '", info.name(), "' serves ", kLmHead,
          " but the checkpoint has a tied head (not the file the server loaded?)"));
    }
    const std::optional<quant::GgmlType> type = quant::ParseGgmlTypeName(t.ggml_type());
    if (!type.has_value() || !quant::IsServedType(*type) || quant::RowBytes(*type, hidden) < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--verify: model '", info.name(), "' serves ", t.name(), " as \"", t.ggml_type(),
          "\", which the reference cannot read for hidden_size ", hidden));
    }
    if (is_embedding) {
      embedding_type_ = *type;
      have_embedding = true;
      if (tied) {
        head_type_ = *type;
        have_head = true;
      }
    } else {
      head_type_ = *type;
      have_head = true;
    }
  }
  if (!have_embedding || !have_head) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--verify: model '", info.name(), "' lists no served type for ",
        have_embedding ? kLmHead : kEmbedTokens));
  }
  return absl::OkStatus();
}

absl::Status BenchReference::ServedRow(const WeightTensor& table, quant::GgmlType type,
                                       int64_t row, float* out) const {
  const int64_t hidden = checkpoint_->config().hidden_size;
  const quant::GgmlType stored = table.ggml_type();
  const int64_t row_bytes = quant::RowBytes(stored, hidden);
  if (row_bytes < 0 || table.shape.empty() || row < 0 || row >= table.shape[0] ||
      static_cast<size_t>((row + 1) * row_bytes) > table.nbytes) {
    return absl::UnimplementedError(absl::StrCat("verify: cannot read row ", row, " of a ",
                                                 table.type_name(), " table"));
  }
  const auto* src = static_cast<const uint8_t*>(table.data) + row * row_bytes;
  if (!quant::DequantizeRow(stored, src, hidden, out)) {
    return absl::UnimplementedError(absl::StrCat("verify: cannot dequantize ", table.type_name()));
  }
  if (type != stored) {  // converted at load (--weights-dtype, F16 -> F32)
    std::vector<uint8_t> blocks(static_cast<size_t>(quant::RowBytes(type, hidden)));
    if (!quant::QuantizeRow(type, out, hidden, blocks.data()) ||
        !quant::DequantizeRow(type, blocks.data(), hidden, out)) {
      return absl::UnimplementedError(
          absl::StrCat("verify: cannot serve a ", table.type_name(), " table as ",
                       quant::GgmlTypeName(type)));
    }
  }
  return absl::OkStatus();
}

absl::Status BenchReference::CheckEmbed(const v1::EmbedRequest& request,
                                        const v1::EmbedResponse& response) const {
  const ModelConfig& cfg = checkpoint_->config();
  const bool positions_none =
      request.absolute_positions() == v1::ABSOLUTE_POSITIONS_NONE ||
      (request.absolute_positions() == v1::ABSOLUTE_POSITIONS_MODEL_DEFAULT &&
       cfg.position_scheme != PositionScheme::kLearned &&
       cfg.position_scheme != PositionScheme::kSinusoidal);
  if (!positions_none) {
    return absl::UnimplementedError("verify: Embed with absolute positions is not modelled");
  }
  double scale = 1.0;
  if (request.embedding_scale() == v1::EMBEDDING_SCALE_MODEL_DEFAULT) scale = cfg.embedding_scale;
  if (request.embedding_scale() == v1::EMBEDDING_SCALE_SQRT_HIDDEN) {
    scale = std::sqrt(static_cast<double>(cfg.hidden_size));
  }
  const float scale_f = static_cast<float>(scale);
  const v1::DType out_dtype =
      request.output_dtype() == v1::DTYPE_UNSPECIFIED ? v1::F32 : request.output_dtype();
  if (response.embeddings().dtype() != out_dtype) {
    return Mismatch(absl::StrCat("embeddings.dtype = ", v1::DType_Name(response.embeddings().dtype()),
                                 ", requested ", v1::DType_Name(out_dtype)));
  }
  ASSIGN_OR_RETURN(std::vector<float> got, DecodeFloatTensor(response.embeddings(), "embeddings"));
  std::vector<int64_t> ids;
  std::vector<int64_t> offsets = {0};
  for (const auto& seq : request.sequences()) {
    ids.insert(ids.end(), seq.token_ids().begin(), seq.token_ids().end());
    offsets.push_back(static_cast<int64_t>(ids.size()));
  }
  const int64_t hidden = cfg.hidden_size;
  const auto& shape = response.embeddings().shape();
  if (shape.size() != 2 || shape[0] != static_cast<int64_t>(ids.size()) || shape[1] != hidden) {
    return Mismatch(absl::StrCat("embeddings.shape = ", ShapeString(shape), ", expected ",
                                 ShapeString({static_cast<int64_t>(ids.size()), hidden})));
  }
  if (!std::equal(offsets.begin(), offsets.end(), response.sequence_offsets().begin(),
                  response.sequence_offsets().end())) {
    return Mismatch(absl::StrCat("sequence_offsets = [", absl::StrJoin(response.sequence_offsets(), ", "),
                                 "], expected [", absl::StrJoin(offsets, ", "), "]"));
  }
  const WeightTensor& table = checkpoint_->embedding();
  const DType wire = out_dtype == v1::BF16 ? DType::kBF16 : out_dtype == v1::F16 ? DType::kF16 : DType::kF32;
  // The scale as the family rounds it (lib/embedding/embedding_scale.h):
  // Gemma rounds the scale and each product to the table's stored dtype,
  // Granite each product, GGUF models neither.
  const DType stored = table.stored_dtype;
  DType product_dtype = stored;
  float factor = scale_f;
  switch (cfg.embedding_scale_rounding) {
    case EmbeddingScaleRounding::kScaleAndProduct: factor = RoundTo(scale_f, stored); break;
    case EmbeddingScaleRounding::kProduct: break;
    case EmbeddingScaleRounding::kFloat32: product_dtype = DType::kF32; break;
  }
  std::vector<float> row(static_cast<size_t>(hidden));
  std::vector<uint8_t> converted(static_cast<size_t>(hidden) * 4);
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] < 0 || ids[t] >= cfg.vocab_size) {
      return absl::UnimplementedError(absl::StrCat("verify: token id ", ids[t], " out of range"));
    }
    RETURN_IF_ERROR(ServedRow(table, embedding_type_, ids[t], row.data()));
    if (factor != 1.0f) {
      for (int64_t c = 0; c < hidden; ++c) row[c] = RoundTo(row[c] * factor, product_dtype);
    }
    // Round through the wire dtype exactly as an encoder would.
    ConvertFromF32(row.data(), row.size(), wire, converted.data());
    ConvertToF32(wire, converted.data(), row.size(), row.data());
    for (int64_t c = 0; c < hidden; ++c) {
      const float g = got[t * hidden + c];
      if (std::memcmp(&g, &row[c], sizeof(float)) != 0 && !(std::isnan(g) && std::isnan(row[c]))) {
        return Mismatch(absl::StrCat("embeddings[", t, ", ", c, "] = ", g, ", expected ", row[c],
                                     " (token id ", ids[t], ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status BenchReference::ComputeRows(const float* x, int64_t rows, bool apply_norm,
                                         float temperature, int64_t vocab_limit,
                                         std::vector<RowLogits>* out) const {
  const ModelConfig& cfg = checkpoint_->config();
  const int64_t hidden = cfg.hidden_size;
  const int64_t vocab = cfg.vocab_size;
  if (!cfg.logit_transform.identity() || checkpoint_->Find(kLmHeadBias) != nullptr) {
    return absl::UnimplementedError("verify: lm_head.bias and logit transforms are not modelled");
  }
  const bool normed = apply_norm && cfg.final_norm_kind != NormKind::kNone;
  const WeightTensor* norm = nullptr;
  if (normed) {
    if (cfg.final_norm_kind != NormKind::kRmsNorm) {
      return absl::UnimplementedError("verify: only RMSNorm final norms are modelled");
    }
    norm = checkpoint_->Find(kFinalNorm);
    if (norm == nullptr || norm->dtype != DType::kF32) {
      return absl::UnimplementedError("verify: checkpoint has no F32 final norm weight");
    }
  }
  const bool quantized_head = quant::IsQuantized(head_type_);
  if (quantized_head && hidden % 32 != 0) {
    return absl::UnimplementedError("verify: a quantized head with hidden_size % 32 != 0");
  }
  // Per row: the activations the served head multiplies, and for each the
  // distance to the other value the server's float32 y could round to
  // (0: none).
  std::vector<std::vector<double>> ys(static_cast<size_t>(rows));
  std::vector<std::vector<double>> ambiguities(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double>& y = ys[r];
    y.assign(x + r * hidden, x + (r + 1) * hidden);
    if (normed) {
      double ss = 0;
      for (double v : y) ss += v * v;
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(hidden) + cfg.norm_eps);
      for (int64_t k = 0; k < hidden; ++k) y[k] = y[k] * inv * norm->f32()[k];
    }
    std::vector<double>& ambiguity = ambiguities[r];
    ambiguity.assign(static_cast<size_t>(hidden), 0.0);
    if (head_type_ == quant::GgmlType::kBF16) {
      for (int64_t k = 0; k < hidden; ++k) {
        if (normed) {
          const double lo = RoundTo(static_cast<float>(y[k] * (1 - kNormRelativeError)), DType::kBF16);
          const double hi = RoundTo(static_cast<float>(y[k] * (1 + kNormRelativeError)), DType::kBF16);
          ambiguity[k] = std::abs(hi - lo);
        }
        y[k] = RoundTo(static_cast<float>(y[k]), DType::kBF16);
      }
    } else if (quantized_head) {
      for (int64_t b = 0; b < hidden; b += 32) {
        float yf[32];
        float amax = 0.0f;
        for (int i = 0; i < 32; ++i) {
          yf[i] = static_cast<float>(y[b + i]);
          amax = std::fmax(amax, std::fabs(yf[i]));
        }
        const float da = amax / 127.0f;
        const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
        for (int i = 0; i < 32; ++i) {
          const float v = yf[i] * inv;
          if (normed) {
            const double slack = 127.0 * kNormRelativeError;
            ambiguity[b + i] = std::abs(std::nearbyint(v + slack) - std::nearbyint(v - slack)) * da;
          }
          y[b + i] = static_cast<double>(da) * std::nearbyint(v);
        }
      }
    }
  }
  const double t = (temperature > 0 && temperature != 1.0f) ? temperature : 1.0;
  out->assign(static_cast<size_t>(rows), RowLogits());
  for (RowLogits& o : *out) {
    o.logits.assign(static_cast<size_t>(vocab), 0.0);
    o.abs_sum.assign(static_cast<size_t>(vocab), 0.0);
    o.tolerance.assign(static_cast<size_t>(vocab), 0.0);
  }
  // Each head row is read (dequantized) once for all rows.
  const WeightTensor& head = checkpoint_->lm_head();
  std::vector<float> wj(static_cast<size_t>(hidden));
  for (int64_t j = 0; j < vocab; ++j) {
    RETURN_IF_ERROR(ServedRow(head, head_type_, j, wj.data()));
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<double>& y = ys[r];
      const std::vector<double>& ambiguity = ambiguities[r];
      double s = 0, a = 0, u = 0;
      for (int64_t k = 0; k < hidden; ++k) {
        const double p = y[k] * wj[k];
        s += p;
        a += std::abs(p);
        u += ambiguity[k] * std::abs(wj[k]);
      }
      RowLogits& o = (*out)[r];
      o.abs_sum[j] = a / t;
      double tol = LogitTolerance(a / t) + u / t;
      if (quantized_head && normed) tol += kNormRelativeError * a / t;
      o.tolerance[j] = tol;
      o.max_tolerance = std::max(o.max_tolerance, tol);
      o.logits[j] = (vocab_limit > 0 && vocab_limit < vocab && j >= vocab_limit)
                        ? -std::numeric_limits<double>::infinity()
                        : s / t;
    }
  }
  for (RowLogits& o : *out) {
    const double m = *std::max_element(o.logits.begin(), o.logits.end());
    double sum = 0;
    for (double l : o.logits) sum += std::exp(l - m);
    o.logsumexp = m + std::log(sum);
  }
  return absl::OkStatus();
}

absl::Status BenchReference::CheckLogits(const v1::ComputeLogitsRequest& request,
                                         const v1::ComputeLogitsResponse& response) const {
  const ModelConfig& cfg = checkpoint_->config();
  ASSIGN_OR_RETURN(std::vector<float> hidden, DecodeFloatTensor(request.hidden(), "hidden"));
  ASSIGN_OR_RETURN(std::vector<float> got, DecodeFloatTensor(response.logits(), "logits"));
  const int64_t rows = static_cast<int64_t>(hidden.size()) / std::max<int64_t>(1, cfg.hidden_size);
  const int64_t vocab = cfg.vocab_size;
  if (static_cast<int64_t>(got.size()) != rows * vocab) {
    return Mismatch(absl::StrCat("logits has ", got.size(), " values, expected ", rows, " x ", vocab));
  }
  const double rounding = RoundingOf(response.logits().dtype());
  const bool apply_norm = !request.has_apply_final_norm() || request.apply_final_norm();
  std::vector<RowLogits> refs;
  RETURN_IF_ERROR(ComputeRows(hidden.data(), rows, apply_norm, request.temperature(),
                              request.vocab_limit(), &refs));
  for (int64_t r = 0; r < rows; ++r) {
    const RowLogits& ref = refs[r];
    for (int64_t j = 0; j < vocab; ++j) {
      double want = ref.logits[j];
      double tol = ref.tolerance[j];
      if (request.log_softmax()) {
        want -= ref.logsumexp;
        tol += ref.max_tolerance;
      }
      const double g = got[r * vocab + j];
      if (std::isinf(want)) {
        if (!(std::isinf(g) && g < 0)) {
          return Mismatch(absl::StrCat("logits[", r, ", ", j, "] = ", g, ", expected -inf (masked)"));
        }
        continue;
      }
      tol += rounding * std::abs(want);
      if (!(std::abs(g - want) <= tol)) {
        return Mismatch(absl::StrCat("logits[", r, ", ", j, "] = ", g, ", expected ", want, " +- ", tol));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status BenchReference::CheckScore(const v1::ScoreRequest& request,
                                        const v1::ScoreResponse& response) const {
  const ModelConfig& cfg = checkpoint_->config();
  ASSIGN_OR_RETURN(std::vector<float> hidden, DecodeFloatTensor(request.hidden(), "hidden"));
  const int64_t rows = static_cast<int64_t>(hidden.size()) / std::max<int64_t>(1, cfg.hidden_size);
  if (response.rows_size() != rows) {
    return Mismatch(absl::StrCat("rows has ", response.rows_size(), " entries, expected ", rows));
  }
  const bool apply_norm = !request.has_apply_final_norm() || request.apply_final_norm();
  const bool has_targets = request.target_ids_size() > 0;
  std::vector<RowLogits> refs;
  RETURN_IF_ERROR(ComputeRows(hidden.data(), rows, apply_norm, request.temperature(),
                              request.vocab_limit(), &refs));
  double sum = 0, sum_tol = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const RowLogits& ref = refs[r];
    const v1::RowScore& got = response.rows(static_cast<int>(r));
    const double tol = 2 * ref.max_tolerance + 1e-6 * std::abs(ref.logsumexp);
    if (!(std::abs(got.logsumexp() - ref.logsumexp) <= tol)) {
      return Mismatch(absl::StrCat("rows[", r, "].logsumexp = ", got.logsumexp(), ", expected ",
                                   ref.logsumexp, " +- ", tol));
    }
    if (has_targets) {
      const int64_t t = request.target_ids(static_cast<int>(r));
      const double want = ref.logits[t] - ref.logsumexp;
      if (!(std::abs(got.target_logprob() - want) <= 2 * tol)) {
        return Mismatch(absl::StrCat("rows[", r, "].target_logprob = ", got.target_logprob(),
                                     ", expected ", want, " +- ", 2 * tol, " (target ", t, ")"));
      }
      int64_t surely_above = 0, maybe_above = 0;
      for (int64_t j = 0; j < cfg.vocab_size; ++j) {
        if (j == t) continue;
        if (ref.logits[j] > ref.logits[t] + 2 * tol) ++surely_above;
        if (ref.logits[j] >= ref.logits[t] - 2 * tol) ++maybe_above;
      }
      if (got.target_rank() < 1 + surely_above || got.target_rank() > 1 + maybe_above) {
        return Mismatch(absl::StrCat("rows[", r, "].target_rank = ", got.target_rank(),
                                     ", expected in [", 1 + surely_above, ", ", 1 + maybe_above,
                                     "] (target ", t, ")"));
      }
      sum += want;
      sum_tol += 2 * tol;
    }
    const double row_max = *std::max_element(ref.logits.begin(), ref.logits.end());
    const int expected_k = static_cast<int>(std::min<int64_t>(request.top_k(), cfg.vocab_size));
    if (got.top_k_size() != expected_k && !(request.vocab_limit() > 0 && got.top_k_size() < expected_k)) {
      return Mismatch(absl::StrCat("rows[", r, "].top_k has ", got.top_k_size(), " entries, expected ",
                                   expected_k));
    }
    for (int i = 0; i < got.top_k_size(); ++i) {
      const int64_t id = got.top_k(i).token_id();
      if (id < 0 || id >= cfg.vocab_size) {
        return Mismatch(absl::StrCat("rows[", r, "].top_k[", i, "].token_id = ", id, " out of range"));
      }
      const double want = ref.logits[id] - ref.logsumexp;
      if (!(std::abs(got.top_k(i).logprob() - want) <= 2 * tol)) {
        return Mismatch(absl::StrCat("rows[", r, "].top_k[", i, "] (id ", id, ").logprob = ",
                                     got.top_k(i).logprob(), ", expected ", want, " +- ", 2 * tol));
      }
      if (i == 0 && ref.logits[id] < row_max - 2 * tol) {
        return Mismatch(absl::StrCat("rows[", r, "].top_k[0] = id ", id, " with reference logit ",
                                     ref.logits[id], ", but the row maximum is ", row_max));
      }
    }
  }
  if (has_targets) {
    if (response.num_targets() != rows) {
      return Mismatch(absl::StrCat("num_targets = ", response.num_targets(), ", expected ", rows));
    }
    if (!(std::abs(response.sum_target_logprob() - sum) <= sum_tol)) {
      return Mismatch(absl::StrCat("sum_target_logprob = ", response.sum_target_logprob(),
                                   ", expected ", sum, " +- ", sum_tol));
    }
  }
  return absl::OkStatus();
}

absl::Status BenchReference::CheckRope(const v1::ApplyRopeRequest& request,
                                       const v1::ApplyRopeResponse& response) const {
  const ModelConfig& cfg = checkpoint_->config();
  RopeParams p = cfg.rope;
  if (request.has_rope()) {
    const v1::RopeConfig& o = request.rope();
    if (o.has_scaling() || o.head_dim() != 0 || o.partial_rotary_factor() != 0 ||
        o.max_position_embeddings() != 0) {
      return absl::UnimplementedError("verify: RoPE overrides other than theta/rotary_dim/pair_layout");
    }
    if (o.theta() > 0) p.theta = o.theta();
    if (o.rotary_dim() > 0) p.rotary_dim = o.rotary_dim();
    if (o.pair_layout() == v1::INTERLEAVED) p.pair_layout = RopePairLayout::kInterleaved;
    if (o.pair_layout() == v1::HALF_SPLIT) p.pair_layout = RopePairLayout::kHalfSplit;
  }
  if (p.scaling.type != RopeScalingType::kDefault) {
    return absl::UnimplementedError("verify: RoPE scaling other than default");
  }
  if (request.has_position_ids() || request.layout() == v1::THD) {
    return absl::UnimplementedError("verify: position_ids / THD layout");
  }
  const bool bshd = request.layout() == v1::BSHD;
  for (const auto* pair : {&request.q(), &request.k()}) {
    const bool is_q = pair == &request.q();
    const v1::Tensor& in_t = *pair;
    const v1::Tensor& out_t = is_q ? response.q() : response.k();
    const std::string name = is_q ? "q" : "k";
    ASSIGN_OR_RETURN(std::vector<float> in, DecodeFloatTensor(in_t, name));
    ASSIGN_OR_RETURN(std::vector<float> out, DecodeFloatTensor(out_t, name));
    if (in_t.shape_size() != 4 || in.size() != out.size()) {
      return Mismatch(absl::StrCat(name, ": response has ", out.size(), " values for ", in.size()));
    }
    const int64_t batch = in_t.shape(0);
    const int64_t heads = bshd ? in_t.shape(2) : in_t.shape(1);
    const int64_t seq = bshd ? in_t.shape(1) : in_t.shape(2);
    const int64_t dim = in_t.shape(3);
    const int r = p.rotary_dim > 0 ? p.rotary_dim : static_cast<int>(dim);
    const int half = r / 2;
    const double rounding = RoundingOf(out_t.dtype());
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t offset = request.position_offsets_size() == 0   ? 0
                             : request.position_offsets_size() == 1 ? request.position_offsets(0)
                                                                    : request.position_offsets(static_cast<int>(b));
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t s = 0; s < seq; ++s) {
          const int64_t base = bshd ? ((b * seq + s) * heads + h) * dim : ((b * heads + h) * seq + s) * dim;
          const double pos = static_cast<double>(offset + s);
          std::vector<double> want(in.begin() + base, in.begin() + base + dim);
          for (int i = 0; i < half; ++i) {
            const double angle = pos / std::pow(p.theta, 2.0 * i / r);
            const int64_t ia = p.pair_layout == RopePairLayout::kInterleaved ? 2 * i : i;
            const int64_t ib = p.pair_layout == RopePairLayout::kInterleaved ? 2 * i + 1 : i + half;
            const double a = in[base + ia], bv = in[base + ib];
            want[ia] = a * std::cos(angle) - bv * std::sin(angle);
            want[ib] = bv * std::cos(angle) + a * std::sin(angle);
          }
          for (int64_t d = 0; d < dim; ++d) {
            const double g = out[base + d];
            // Magnitude of the pair this coordinate belongs to.
            double mag = std::abs(in[base + d]);
            if (d < r) {
              const int64_t i = p.pair_layout == RopePairLayout::kInterleaved ? d / 2 : d % half;
              const int64_t ia = p.pair_layout == RopePairLayout::kInterleaved ? 2 * i : i;
              const int64_t ib = p.pair_layout == RopePairLayout::kInterleaved ? 2 * i + 1 : i + half;
              mag = std::abs(in[base + ia]) + std::abs(in[base + ib]);
            }
            const double tol = (1e-5 + 2.4e-7 * pos) * mag + 1e-6 + rounding * std::abs(want[d]);
            if (!(std::abs(g - want[d]) <= tol)) {
              return Mismatch(absl::StrCat(name, "[", b, ", ", h, ", ", s, ", ", d, "] = ", g,
                                           ", expected ", want[d], " +- ", tol, " (position ", pos, ")"));
            }
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace vocabd
