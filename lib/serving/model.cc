#include "lib/serving/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/embedding/embedding.h"
#include "lib/embedding/embedding_scale.h"
#include "lib/head/norm.h"
#include "lib/core/parallel.h"
#include "lib/core/status_macros.h"
#include "lib/positions/sinusoidal.h"

namespace vocabd {

absl::StatusOr<std::unique_ptr<Model>> Model::Create(const Options& options) {
  if (options.name.empty()) return absl::InvalidArgumentError("model name is empty");
  ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, LoadCheckpoint(options.path, LoadOptions{options.sha256_in_background}));
  std::unique_ptr<Model> model(new Model());
  model->name_ = options.name;
  model->checkpoint_ = std::move(checkpoint);
  model->requested_dtype_ = options.weights_dtype;
  model->pool_ = options.compute_pool;
  DType want = DType::kF32;
  switch (options.weights_dtype) {
    case WeightsDType::kAuto: {
      const DType stored = model->checkpoint_->lm_head().stored_dtype;
      want = stored == DType::kBF16 ? DType::kBF16 : DType::kF32;
      break;
    }
    case WeightsDType::kF32: want = DType::kF32; break;
    case WeightsDType::kBF16: want = DType::kBF16; break;
  }
  if (want == DType::kBF16 && !LmHead::Bf16Supported()) {
    model->fallback_reason_ =
        "BF16 weights need a CPU with AVX512-BF16 or AMX (oneDNN effective ISA has neither); "
        "serving F32";
    want = DType::kF32;
  }
  RETURN_IF_ERROR(model->ServeInDType(want));
  const WeightTensor& head = model->checkpoint_->lm_head();
  LmHead::Options head_options;
  head_options.weights = head.data;
  head_options.weights_dtype = head.dtype;
  head_options.vocab_size = model->config().vocab_size;
  head_options.hidden_size = model->config().hidden_size;
  ASSIGN_OR_RETURN(std::unique_ptr<LmHead> lm_head, LmHead::Create(head_options));
  model->lm_head_ = std::shared_ptr<const LmHead>(std::move(lm_head));
  if (options.batching.has_value()) {
    if (options.compute_pool == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("model '", options.name, "': dynamic batching needs a compute pool"));
    }
    auto batcher = DynamicBatcher::Create(*options.batching, model->lm_head_,
                                          options.compute_pool);
    if (!batcher.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("model '", options.name,
                                                     "': batching: ", batcher.status().message()));
    }
    model->batcher_ = std::move(*batcher);
  }
  if (options.tokenizer_factory) {
    auto tokenizer = options.tokenizer_factory(*model->checkpoint_);
    if (!tokenizer.ok()) {
      return absl::Status(tokenizer.status().code(),
                          absl::StrCat("model '", options.name,
                                       "': tokenizer: ", tokenizer.status().message()));
    }
    if (*tokenizer != nullptr) {
      model->tokenizer_ = std::move(*tokenizer);
      model->tokenizer_missing_reason_.clear();
    }
  }
  return model;
}

absl::Status Model::ServeInDType(DType dtype) {
  // Re-encodes the embedding and (untied) head tensors in `dtype`, replacing
  // them in the checkpoint so exactly one copy stays resident.
  for (const char* name : {kEmbedTokens, kLmHead}) {
    const WeightTensor* t = checkpoint_->Find(name);
    if (t == nullptr || t->dtype == dtype) continue;
    if (t->dtype != DType::kF32 || dtype != DType::kBF16) {
      return absl::InternalError(absl::StrCat("model '", name_, "': cannot serve ", name, " (",
                                              std::string(DTypeName(t->dtype)), ") as ",
                                              std::string(DTypeName(dtype))));
    }
    const size_t n = static_cast<size_t>(t->num_elements());
    std::vector<uint8_t> buffer;
    try {
      buffer.resize(n * DTypeSize(dtype));
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "model '", name_, "': cannot allocate ", n * DTypeSize(dtype), " bytes for ", name));
    }
    ConvertFromF32(t->f32(), n, dtype, buffer.data());
    checkpoint_->AdoptBuffer(std::move(buffer));
    WeightTensor converted = *t;
    const void* old_data = t->data;
    converted.dtype = dtype;
    converted.data = checkpoint_->last_buffer().data();
    converted.nbytes = n * DTypeSize(dtype);
    checkpoint_->AddTensor(name, std::move(converted));
    checkpoint_->ReleaseBuffer(old_data);  // no-op for a memory mapping
  }
  return absl::OkStatus();
}

absl::Status Model::Embed(const EmbedInput& input, EmbedOutput* output) const {
  return EmbedInto(
      input,
      [output](int64_t num_floats) {
        output->embeddings.resize(static_cast<size_t>(num_floats));
        return output->embeddings.data();
      },
      &output->sequence_offsets);
}

absl::Status Model::EmbedInto(const EmbedInput& input,
                              absl::FunctionRef<float*(int64_t num_floats)> allocate,
                              std::vector<int64_t>* sequence_offsets) const {
  const ModelConfig& cfg = config();
  const size_t num_seqs = input.token_ids.size();
  if (!input.position_offsets.empty() && input.position_offsets.size() != num_seqs) {
    return absl::InvalidArgumentError(
        absl::StrCat("position_offsets has ", input.position_offsets.size(),
                     " entries for ", num_seqs, " sequences"));
  }
  if (!input.position_ids.empty() && input.position_ids.size() != num_seqs) {
    return absl::InvalidArgumentError(absl::StrCat("position_ids has ", input.position_ids.size(),
                                                   " entries for ", num_seqs, " sequences"));
  }
  // Flatten ids and positions, validating positions per sequence.
  std::vector<int64_t> ids;
  std::vector<int64_t> positions;
  std::vector<bool> explicit_positions(num_seqs, false);
  sequence_offsets->assign(1, 0);
  for (size_t b = 0; b < num_seqs; ++b) {
    const auto& seq = input.token_ids[b];
    const std::vector<int64_t>* explicit_ids =
        input.position_ids.empty() || input.position_ids[b].empty() ? nullptr
                                                                    : &input.position_ids[b];
    explicit_positions[b] = explicit_ids != nullptr;
    const int64_t offset = input.position_offsets.empty() ? 0 : input.position_offsets[b];
    if (explicit_ids == nullptr && offset < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequences[", b, "].position_offset = ", offset, " is negative"));
    }
    if (explicit_ids != nullptr && explicit_ids->size() != seq.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequences[", b, "].position_ids has ", explicit_ids->size(),
          " entries but sequences[", b, "].token_ids has ", seq.size()));
    }
    for (size_t i = 0; i < seq.size(); ++i) {
      const int64_t i64 = static_cast<int64_t>(i);
      int64_t pos = 0;
      if (explicit_ids != nullptr) {
        pos = (*explicit_ids)[i];
      } else if (__builtin_add_overflow(offset, i64, &pos)) {
        // As ApplyRope: no position past INT64_MAX (saturating would give two
        // tokens the same position when allow_beyond_trained_length is set).
        return absl::InvalidArgumentError(absl::StrCat("sequences[", b, "].position_offset = ",
                                                       offset, " + ", i, " overflows int64"));
      }
      if (pos < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequences[", b, "].position_ids[", i, "] = ", pos, " is negative"));
      }
      positions.push_back(pos);
    }
    ids.insert(ids.end(), seq.begin(), seq.end());
    sequence_offsets->push_back(static_cast<int64_t>(ids.size()));
  }
  // Validate ids with their sequence-relative names.
  for (size_t b = 0; b < num_seqs; ++b) {
    const auto& seq = input.token_ids[b];
    for (size_t i = 0; i < seq.size(); ++i) {
      if (seq[i] < 0 || seq[i] >= cfg.vocab_size) {
        return absl::InvalidArgumentError(
            absl::StrCat("sequences[", b, "].token_ids[", i, "] = ", seq[i],
                         " is outside [0, ", cfg.vocab_size, ") (vocab_size of model '", name_,
                         "')"));
      }
    }
  }

  AbsolutePositionsMode positions_mode = input.absolute_positions;
  if (positions_mode == AbsolutePositionsMode::kModelDefault) {
    switch (cfg.position_scheme) {
      case PositionScheme::kLearned: positions_mode = AbsolutePositionsMode::kLearned; break;
      case PositionScheme::kSinusoidal: positions_mode = AbsolutePositionsMode::kSinusoidal; break;
      default: positions_mode = AbsolutePositionsMode::kNone; break;
    }
  }
  const WeightTensor* learned = nullptr;
  const int64_t learned_offset =
      input.learned_position_offset.value_or(cfg.learned_position_offset);
  if (learned_offset < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("learned_position_offset = ", learned_offset, " is negative"));
  }
  // Learned table row of every token.
  std::vector<int64_t> learned_rows;
  if (positions_mode == AbsolutePositionsMode::kLearned) {
    learned = checkpoint_->Find(kPositionEmbeddings);
    if (learned == nullptr || learned->dtype != DType::kF32) {
      return absl::FailedPreconditionError(
          absl::StrCat("absolute_positions = LEARNED but model '", name_,
                       "' has no learned position table"));
    }
    // Length policy: a learned table has no rows past its end, so no flag
    // extends it. RoBERTa-style tables start real tokens at row
    // padding_idx + 1 (learned_position_offset) and, for sequences without
    // explicit position_ids, number only non-pad tokens; pads read row
    // padding_idx (HF create_position_ids_from_input_ids).
    const int64_t table_rows = learned->shape[0];
    const int64_t padding_idx = cfg.learned_position_padding_idx;
    if (padding_idx >= table_rows) {
      return absl::FailedPreconditionError(absl::StrCat(
          "model '", name_, "': padding row ", padding_idx, " is beyond the learned position table (",
          table_rows, " rows)"));
    }
    learned_rows.resize(positions.size());
    for (size_t b = 0; b < num_seqs; ++b) {
      const bool skip_padding = padding_idx >= 0 && !explicit_positions[b];
      const int64_t offset = input.position_offsets.empty() ? 0 : input.position_offsets[b];
      int64_t content = 0;  // non-pad tokens so far (skip_padding)
      for (int64_t t = (*sequence_offsets)[b]; t < (*sequence_offsets)[b + 1]; ++t) {
        const size_t i = static_cast<size_t>(t);
        if (skip_padding) {
          if (ids[i] == padding_idx) {
            learned_rows[i] = padding_idx;
            continue;
          }
          // Saturating: a huge offset fails the table check below.
          positions[i] = content > std::numeric_limits<int64_t>::max() - offset
                             ? std::numeric_limits<int64_t>::max()
                             : offset + content;
          ++content;
        }
        if (positions[i] >= table_rows - learned_offset) {
          return absl::InvalidArgumentError(absl::StrCat(
              "sequences[", b, "].token_ids[", t - (*sequence_offsets)[b], "]: position ",
              positions[i], " of token ", t, " + learned_position_offset ",
              learned_offset, " is beyond the learned position table (", table_rows,
              " rows; learned positions cannot be extended)"));
        }
        learned_rows[i] = positions[i] + learned_offset;
      }
    }
  }
  if (positions_mode == AbsolutePositionsMode::kSinusoidal && cfg.max_position_embeddings > 0 &&
      !input.allow_beyond_trained_length) {
    for (size_t t = 0; t < positions.size(); ++t) {
      if (positions[t] >= cfg.max_position_embeddings) {
        // The request field of flat token t: sequences[b].token_ids[j].
        const auto& offsets = *sequence_offsets;
        const size_t b = static_cast<size_t>(
            std::upper_bound(offsets.begin(), offsets.end(), static_cast<int64_t>(t)) -
            offsets.begin() - 1);
        return absl::InvalidArgumentError(absl::StrCat(
            "sequences[", b, "].token_ids[", static_cast<int64_t>(t) - offsets[b],
            "]: position ", positions[t], " of token ", t, " >= max_position_embeddings ",
            cfg.max_position_embeddings, " (set allow_beyond_trained_length)"));
      }
    }
  }
  if (positions_mode == AbsolutePositionsMode::kSinusoidal && cfg.hidden_size % 2 != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "absolute_positions = SINUSOIDAL needs an even hidden_size, model has ", cfg.hidden_size));
  }

  const int64_t hidden = cfg.hidden_size;
  const int64_t num_floats = static_cast<int64_t>(ids.size()) * hidden;
  float* out = allocate(num_floats);
  // F32 rows copied, BF16 rows widened exactly; ids were validated above.
  const WeightTensor& table = checkpoint_->embedding();
  RETURN_IF_ERROR(
      EmbeddingLookup(table.data, table.dtype, cfg.vocab_size, hidden, ids, "token_ids", out));
  double scale = 1.0;
  switch (input.embedding_scale) {
    case EmbeddingScaleMode::kModelDefault:
      scale = cfg.embedding_scale;
      break;
    case EmbeddingScaleMode::kNone:
      scale = 1.0;
      break;
    case EmbeddingScaleMode::kSqrtHidden:
      scale = std::sqrt(static_cast<double>(hidden));
      break;
  }
  // In the model's dtype (Gemma): see lib/embedding/embedding_scale.h.
  ScaleRowsInDType(out, num_floats, scale, checkpoint_->embedding().stored_dtype);
  if (positions_mode == AbsolutePositionsMode::kSinusoidal) {
    AddSinusoidalPositions(out, static_cast<int64_t>(ids.size()), hidden, positions);
  } else if (positions_mode == AbsolutePositionsMode::kLearned) {
    for (size_t t = 0; t < learned_rows.size(); ++t) {
      float* row = out + t * hidden;
      const float* pos_row = learned->f32() + learned_rows[t] * hidden;
      for (int64_t j = 0; j < hidden; ++j) row[j] += pos_row[j];
    }
  }
  return absl::OkStatus();
}

absl::Status Model::ValidateHead(const HeadInput& input) const {
  const ModelConfig& cfg = config();
  if (!cfg.lm_head_unsupported_reason.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", name_,
        "' has no servable LM head (ComputeLogits/Score): ", cfg.lm_head_unsupported_reason));
  }
  if (input.width != cfg.hidden_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("hidden.shape[1] = ", input.width, " but model '", name_,
                     "' has hidden_size ", cfg.hidden_size));
  }
  if (input.rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat("hidden.shape[0] = ", input.rows));
  }
  if (!(input.temperature > 0.0f) || !std::isfinite(input.temperature)) {
    return absl::InvalidArgumentError(
        absl::StrCat("temperature = ", input.temperature, " must be a finite number > 0"));
  }
  if (input.vocab_limit < 0 || input.vocab_limit > cfg.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_limit = ", input.vocab_limit,
                                                   " is outside [0, ", cfg.vocab_size, "]"));
  }
  if (input.rows > 0 && input.hidden == nullptr) {
    return absl::InvalidArgumentError("hidden has no data");
  }
  return absl::OkStatus();
}

absl::Status Model::PrepareRows(const HeadInput& input, float* dst) const {
  const ModelConfig& cfg = config();
  const size_t count = static_cast<size_t>(input.rows * input.width);
  if (input.apply_final_norm && cfg.final_norm_kind != NormKind::kNone) {
    const WeightTensor* weight = checkpoint_->Find(kFinalNorm);
    if (weight == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("model '", name_, "' has no final norm tensor ", kFinalNorm));
    }
    if (cfg.final_norm_kind == NormKind::kLayerNorm) {
      const WeightTensor* bias = checkpoint_->Find(kFinalNormBias);  // null = zero bias
      LayerNorm(input.hidden, input.rows, input.width, weight->f32(),
                bias != nullptr ? bias->f32() : nullptr, cfg.norm_eps, dst);
    } else {
      RmsNorm(input.hidden, input.rows, input.width, weight->f32(), cfg.norm_eps, dst);
    }
  } else {
    std::memcpy(dst, input.hidden, count * sizeof(float));
  }
  return absl::OkStatus();
}

void Model::FinishLogits(const HeadInput& input, bool log_softmax, float* logits) const {
  const int64_t vocab = config().vocab_size;
  const WeightTensor* head_bias = checkpoint_->Find(kLmHeadBias);  // phi: lm_head.bias
  const float* bias = head_bias != nullptr ? head_bias->f32() : nullptr;
  // Several rows: in parallel over rows (one parallel region; each row is then
  // serial). One row: PrepareLogits/LogSoftmaxInPlace parallelise over its
  // vocab chunks. Same results either way (lib/head/scoring.h).
  ParallelFor(input.rows, [&](int64_t r) {
    float* row = logits + r * vocab;
    PrepareLogits(row, vocab, input.temperature, input.vocab_limit, bias);
    if (log_softmax) LogSoftmaxInPlace(row, vocab);
  });
}

absl::Status Model::ComputeLogits(const HeadInput& input, bool log_softmax,
                                  std::vector<float>* logits) const {
  RETURN_IF_ERROR(ValidateHead(input));
  const int64_t vocab = config().vocab_size;
  logits->resize(static_cast<size_t>(input.rows * vocab));
  if (input.rows == 0) return absl::OkStatus();
  std::vector<float> rows(static_cast<size_t>(input.rows * input.width));
  RETURN_IF_ERROR(PrepareRows(input, rows.data()));
  RETURN_IF_ERROR(lm_head_->Compute(rows.data(), input.rows, logits->data()));
  FinishLogits(input, log_softmax, logits->data());
  return absl::OkStatus();
}

absl::Status Model::ValidateScore(const ScoreInput& input) const {
  RETURN_IF_ERROR(ValidateHead(input.head));
  const int64_t vocab = config().vocab_size;
  const int64_t effective_vocab = input.head.vocab_limit > 0 ? input.head.vocab_limit : vocab;
  if (!input.target_ids.empty() &&
      static_cast<int64_t>(input.target_ids.size()) != input.head.rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("target_ids has ", input.target_ids.size(), " entries but hidden has ",
                     input.head.rows, " rows"));
  }
  for (size_t i = 0; i < input.target_ids.size(); ++i) {
    const int64_t t = input.target_ids[i];
    if (t < 0 || t >= effective_vocab) {
      return absl::InvalidArgumentError(absl::StrCat("target_ids[", i, "] = ", t,
                                                     " is outside [0, ", effective_vocab, ")"));
    }
  }
  if (static_cast<int64_t>(input.candidate_ids.size()) > kMaxCandidateIds) {
    return absl::InvalidArgumentError(absl::StrCat("candidate_ids has ",
                                                   input.candidate_ids.size(),
                                                   " entries; at most ", kMaxCandidateIds));
  }
  for (size_t i = 0; i < input.candidate_ids.size(); ++i) {
    const int64_t c = input.candidate_ids[i];
    if (c < 0 || c >= effective_vocab) {
      return absl::InvalidArgumentError(absl::StrCat("candidate_ids[", i, "] = ", c,
                                                     " is outside [0, ", effective_vocab, ")"));
    }
  }
  if (input.top_k < 0 || input.top_k > kMaxTopK || input.top_k > effective_vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_k = ", input.top_k, " is outside [0, ",
                     std::min<int64_t>(kMaxTopK, effective_vocab), "]"));
  }
  return absl::OkStatus();
}

void Model::FinishScore(const ScoreInput& input, const float* logits,
                        ScoreOutput* output) const {
  const int64_t vocab = config().vocab_size;
  output->rows.assign(static_cast<size_t>(input.head.rows), RowScoreResult{});
  output->sum_target_logprob = 0;
  output->num_targets = 0;
  // In parallel over rows, or over one row's vocab chunks (see FinishLogits).
  ParallelFor(input.head.rows, [&](int64_t r) {
    const int64_t target = input.target_ids.empty() ? -1 : input.target_ids[r];
    output->rows[r] = ScoreRow(logits + r * vocab, vocab, target, input.top_k,
                               input.candidate_ids.empty() ? nullptr : &input.candidate_ids);
  });
  for (int64_t r = 0; r < input.head.rows; ++r) {  // summed in row order
    if (!input.target_ids.empty()) {
      output->sum_target_logprob += output->rows[r].target_logprob;
      ++output->num_targets;
    }
  }
}

absl::Status Model::Score(const ScoreInput& input, ScoreOutput* output) const {
  RETURN_IF_ERROR(ValidateScore(input));
  std::vector<float> logits;
  RETURN_IF_ERROR(ComputeLogits(input.head, /*log_softmax=*/false, &logits));
  FinishScore(input, logits.data(), output);
  return absl::OkStatus();
}

void Model::RunHead(DynamicBatcher::Item item) const {
  if (batcher_ != nullptr) {
    // Submit does not call finish when it refuses the item; we do.
    auto finish = item.finish;
    absl::Status st = batcher_->Submit(std::move(item));
    if (!st.ok()) finish(std::move(st), nullptr);
    return;
  }
  // Unbatched: one GEMM per call, on the pool (or inline without one).
  auto task = [this, item]() {
    if (item.check) {
      absl::Status st = item.check();
      if (!st.ok()) {
        item.finish(std::move(st), nullptr);
        return;
      }
    }
    std::vector<float> rows;
    std::vector<float> logits;
    try {
      rows.resize(static_cast<size_t>(item.rows * lm_head_->hidden_size()));
      logits.resize(static_cast<size_t>(item.rows * lm_head_->vocab_size()));
    } catch (const std::bad_alloc&) {
      item.finish(absl::ResourceExhaustedError(
                      absl::StrCat("out of memory for ", item.rows, " rows of logits")),
                  nullptr);
      return;
    }
    absl::Status st = item.prepare(rows.data());
    if (st.ok()) st = lm_head_->Compute(rows.data(), item.rows, logits.data());
    item.finish(st, st.ok() ? logits.data() : nullptr);
  };
  if (pool_ == nullptr) {
    task();
    return;
  }
  absl::Status st = pool_->Submit(task);
  if (!st.ok()) item.finish(std::move(st), nullptr);
}

void Model::ComputeLogitsAsync(const HeadInput& input, bool log_softmax,
                               std::function<absl::Status()> check, LogitsDone done) const {
  absl::Status valid = ValidateHead(input);
  if (!valid.ok()) {
    done(std::move(valid), {});
    return;
  }
  if (input.rows == 0) {
    done(absl::OkStatus(), {});
    return;
  }
  DynamicBatcher::Item item;
  item.rows = input.rows;
  item.check = std::move(check);
  item.prepare = [this, input](float* dst) { return PrepareRows(input, dst); };
  auto shared_done = std::make_shared<LogitsDone>(std::move(done));
  item.finish = [this, input, log_softmax, shared_done](absl::Status st, float* logits) {
    if (!st.ok()) {
      (*shared_done)(std::move(st), {});
      return;
    }
    FinishLogits(input, log_softmax, logits);
    std::vector<float> out(logits, logits + input.rows * config().vocab_size);
    (*shared_done)(absl::OkStatus(), std::move(out));
  };
  RunHead(std::move(item));
}

void Model::ScoreAsync(const ScoreInput& input, std::function<absl::Status()> check,
                       ScoreDone done) const {
  absl::Status valid = ValidateScore(input);
  if (!valid.ok()) {
    done(std::move(valid), {});
    return;
  }
  if (input.head.rows == 0) {
    done(absl::OkStatus(), {});
    return;
  }
  auto shared_input = std::make_shared<const ScoreInput>(input);
  DynamicBatcher::Item item;
  item.rows = input.head.rows;
  item.check = std::move(check);
  item.prepare = [this, shared_input](float* dst) { return PrepareRows(shared_input->head, dst); };
  auto shared_done = std::make_shared<ScoreDone>(std::move(done));
  item.finish = [this, shared_input, shared_done](absl::Status st, float* logits) {
    if (!st.ok()) {
      (*shared_done)(std::move(st), {});
      return;
    }
    FinishLogits(shared_input->head, /*log_softmax=*/false, logits);
    ScoreOutput output;
    FinishScore(*shared_input, logits, &output);
    (*shared_done)(absl::OkStatus(), std::move(output));
  };
  RunHead(std::move(item));
}

}  // namespace vocabd
