// Local references for `vocabctl bench --verify`: recompute a response from
// the checkpoint file (lib/checkpoint/checkpoint.h LoadCheckpoint) without the server's
// code paths, so a load test also catches wrong answers (mixed-up rows in a
// batcher, torn buffers, wrong dtype conversion).
//
// Each Check* returns OK when the response matches, DATA_LOSS with a
// message naming the first differing field / index / values otherwise, and
// UNIMPLEMENTED when the request uses options the reference does not model
// (counted as "skipped", never as a pass).
//
// Served weights: the tables are read in the ggml type the server serves
// them in (ModelInfo.served_tensors, see ServeAs): each row is dequantized
// from the file's type to F32 as ggml does (lib/quant/dequantize.h, the
// exact rules the server follows), and, when the served type differs from
// the stored one (--weights-dtype bf16 / q8_0, an F16 table served as F32),
// re-encoded to the served type and dequantized again, as the server does
// once at load (lib/quant/quantize.h). Rows are converted one at a time
// when needed: the reference never holds an F32 copy of a table.
//
// References and tolerances:
//   Embed    served rows times the embedding scale, rounded as the model's
//            family rounds it (ModelConfig::embedding_scale_rounding:
//            float32 product; or the product, and for Gemma also the scale,
//            rounded to the table's stored dtype), converted to the output
//            dtype with round-to-nearest-even: must be bit-identical.
//            Absolute positions other than none (or a RoPE model's default)
//            are skipped.
//   Logits   float64 RMSNorm (HF LlamaRMSNorm: x / sqrt(mean(x^2) + eps) * w)
//            and float64 dot products of the activations the head
//            multiplies with the served lm_head rows:
//              F32 head   the normed row y itself;
//              BF16 head  y rounded to bf16 (nearest even), as the head
//                         rounds its input;
//              ggml head  y quantized as the head's activations
//                         (lib/head/quant_kernel.h: per block of 32,
//                         da = max|y| / 127, a = nearbyint(y * 127 /
//                         max|y|), value da * a).
//            Element j must be within 2e-5 * (1 + S_j) where S_j = sum_k
//            |y_k W_jk| / T (a float32 accumulation bound with margin),
//            plus, with the final norm applied (the server's float32 norm
//            may round y differently where y sits on a bf16 / int8
//            rounding boundary): sum over such k of |W_jk| x the step, and
//            for a ggml head 2e-5 * S_j more (its block scales follow the
//            server's float32 y); plus the output dtype's rounding (2^-8
//            BF16, 2^-11 F16, relative). Heads with lm_head.bias or a
//            family logit transform (softcap, logit_scale) are skipped.
//   Score    the same logits; logsumexp and target log-prob within the
//            largest row tolerance (+1e-6 relative); each top-k id's
//            log-prob within it; the top-1 id's logit within it of the
//            row maximum; target rank consistent with the reference
//            logits up to that tolerance.
//   ApplyRope float64 angles pos / theta^(2i/r), both pair layouts, BHSD /
//            BSHD layouts with position_offsets; each value within
//            (1e-5 + 2.4e-7 * pos) * (|a| + |b|) + 1e-6 (fp32 angle error).
//            Scaling other than default, position_ids tensors and THD are
//            skipped.
#ifndef VOCABD_CLIENT_BENCH_VERIFY_H_
#define VOCABD_CLIENT_BENCH_VERIFY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/quant/ggml_types.h"
#include "vocabd/v1/embedding.pb.h"
#include "vocabd/v1/model.pb.h"
#include "vocabd/v1/position.pb.h"
#include "vocabd/v1/scoring.pb.h"

namespace vocabd {

class BenchReference {
 public:
  // LoadCheckpoint(path); NOT_FOUND / INVALID_ARGUMENT from the loader.
  // Tables are taken as served with --weights-dtype auto on a CPU without
  // bf16 dot products: quantized ones as stored, float ones as F32 (call
  // ServeAs with the server's ModelInfo for what it actually serves).
  static absl::StatusOr<std::unique_ptr<BenchReference>> Load(const std::string& path);
  explicit BenchReference(std::unique_ptr<Checkpoint> checkpoint);

  // Reads the tables in the types `info.served_tensors` names
  // (model.embed_tokens.weight; lm_head.weight unless tied).
  // FAILED_PRECONDITION naming the tensor when a type is not a served ggml
  // type, does not fit the rows, or a table the checkpoint has is missing
  // from `info` (or the other way round: a tie the checkpoint lacks).
  absl::Status ServeAs(const v1::ModelInfo& info);

  const Checkpoint& checkpoint() const { return *checkpoint_; }
  // The ggml types rows are read in.
  quant::GgmlType embedding_type() const { return embedding_type_; }
  quant::GgmlType head_type() const { return head_type_; }

  absl::Status CheckEmbed(const v1::EmbedRequest& request, const v1::EmbedResponse& response) const;
  absl::Status CheckLogits(const v1::ComputeLogitsRequest& request,
                           const v1::ComputeLogitsResponse& response) const;
  absl::Status CheckScore(const v1::ScoreRequest& request, const v1::ScoreResponse& response) const;
  absl::Status CheckRope(const v1::ApplyRopeRequest& request,
                         const v1::ApplyRopeResponse& response) const;

 private:
  struct RowLogits;
  // Reference logits of `rows` hidden rows (after norm, temperature,
  // mask), one RowLogits each; every head row is read once.
  absl::Status ComputeRows(const float* hidden, int64_t rows, bool apply_norm, float temperature,
                           int64_t vocab_limit, std::vector<RowLogits>* out) const;
  // Row `row` of `table` as served in `type`, F32, into out[0, hidden).
  absl::Status ServedRow(const WeightTensor& table, quant::GgmlType type, int64_t row,
                         float* out) const;
  std::unique_ptr<Checkpoint> checkpoint_;
  quant::GgmlType embedding_type_ = quant::GgmlType::kF32;
  quant::GgmlType head_type_ = quant::GgmlType::kF32;
};

}  // namespace vocabd

#endif  // VOCABD_CLIENT_BENCH_VERIFY_H_
