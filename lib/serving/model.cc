#include "lib/serving/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/embedding/embedding.h"
#include "lib/embedding/embedding_scale.h"
#include "lib/head/lm_head_kernel.h"
#include "lib/head/norm.h"
#include "lib/core/env_override.h"
#include "lib/core/finite.h"
#include "lib/core/huge_pages.h"
#include "lib/core/parallel.h"
#include "lib/core/shape.h"
#include "lib/core/status_macros.h"
#include "lib/positions/sinusoidal.h"
#include "lib/quant/dequantize.h"
#include "lib/quant/ggml_types.h"
#include "lib/quant/quantize.h"
#include "lib/tokenizer/tokenizer_loader.h"
#include "lib/tokenizer/tokenizer_ops.h"

namespace vocabd {

absl::StatusOr<std::unique_ptr<Model>> Model::Create(const Options& options) {
  if (options.name.empty()) return absl::InvalidArgumentError("model name is empty");
  ASSIGN_OR_RETURN(const int huge_env, SwitchEnv("VOCABD_HEAD_HUGE_PAGES"));
  const bool head_huge_pages = huge_env >= 0 ? huge_env == 1 : options.head_huge_pages;
  ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, LoadCheckpoint(options.path, LoadOptions{options.sha256_in_background}));
  std::unique_ptr<Model> model(new Model());
  model->name_ = options.name;
  model->checkpoint_ = std::move(checkpoint);
  model->requested_dtype_ = options.weights_dtype;
  model->pool_ = options.compute_pool;
  RETURN_IF_ERROR(model->LoadTokenizer(options));
  const bool bf16_ok = LmHead::Bf16Supported();
  const char* const kBf16Fallback =
      "BF16 weights need a CPU with AVX512-BF16 or AMX (oneDNN effective ISA has neither); "
      "serving F32";
  for (const char* name : {kLmHead, kEmbedTokens}) {  // the head first: it decides kAuto
    const WeightTensor* t = model->checkpoint_->Find(name);
    if (t == nullptr) continue;  // tied: the embedding is the head
    const bool is_head = std::string(name) == kLmHead || model->config().tie_word_embeddings;
    quant::GgmlType want = t->ggml_type();
    switch (options.weights_dtype) {
      case WeightsDType::kAuto: {
        if (t->quant_type.has_value()) break;  // served as stored
        // Float tables follow the head's stored dtype (the embedding's when
        // the head is quantized or tied).
        const WeightTensor& head = model->checkpoint_->lm_head();
        const DType rule = head.quant_type.has_value() ? t->stored_dtype : head.stored_dtype;
        want = rule == DType::kBF16 ? quant::GgmlType::kBF16 : quant::GgmlType::kF32;
        break;
      }
      case WeightsDType::kF32: want = quant::GgmlType::kF32; break;
      case WeightsDType::kBF16: want = quant::GgmlType::kBF16; break;
      case WeightsDType::kQ8_0:
        if (t->quant_type.has_value() && *t->quant_type != quant::GgmlType::kQ8_0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "model '", options.name, "': --weights-dtype q8_0 quantizes F32/BF16/F16 tables; "
              "tensor \"", name, "\" is already ", t->type_name(), " (serve it as stored: auto)"));
        }
        want = quant::GgmlType::kQ8_0;
        break;
    }
    // Without native bf16 dot products the head falls back to F32, and so
    // does an embedding served with it (a BF16 embedding beside a
    // quantized head is fine: Embed only widens rows).
    if (want == quant::GgmlType::kBF16 && !bf16_ok &&
        (is_head || !model->checkpoint_->lm_head().quant_type.has_value())) {
      model->fallback_reason_ = kBf16Fallback;
      want = quant::GgmlType::kF32;
    }
    RETURN_IF_ERROR(model->ServeTableAs(name, want));
  }
  const WeightTensor& head = model->checkpoint_->lm_head();
  LmHead::Options head_options;
  head_options.weights = head.data;
  head_options.weights_dtype = head.dtype;
  if (head.quant_type.has_value()) head_options.weights_quant = *head.quant_type;
  head_options.vocab_size = model->config().vocab_size;
  head_options.hidden_size = model->config().hidden_size;
  // An F32 / BF16 head read from the mapping is packed (the copy every M
  // reads, LmHead::Options::dense_pack) by the background copy
  // (StartHeadCopy) instead of copied row-major; a table converted at load
  // stays row-major (a packed copy would be a second one).
  head_options.dense_pack =
      head_huge_pages && model->checkpoint_->MappingOf(head.data, head.nbytes) != nullptr;
  head_options.dense_pack_deferred = true;
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
    if (*tokenizer != nullptr) model->SetTokenizer(*std::move(tokenizer));
  }
  model->StartHeadCopy(head_huge_pages, huge_env >= 0);  // last: nothing fails after it
  return model;
}

Model::~Model() {
  stop_head_copy_.store(true, std::memory_order_relaxed);
  if (head_copier_.joinable()) head_copier_.join();
}

void Model::StartHeadCopy(bool wanted, bool by_env) {
  const WeightTensor& head = checkpoint_->lm_head();
  const MappedFile* mapping = checkpoint_->MappingOf(head.data, head.nbytes);
  std::unique_lock<std::mutex> lock(head_copy_mu_);
  if (head.quant_type.has_value()) {
    head_memory_ = lm_head_->packed_bytes() > 0 ? "packed copy (quantized)" : "in place (quantized)";
    return;
  }
  if (mapping == nullptr) {
    head_memory_ = "huge pages (converted at load)";
    return;
  }
  if (!wanted) {
    head_memory_ = by_env ? "file mapping (VOCABD_HEAD_HUGE_PAGES=0)"
                          : "file mapping (head_huge_pages off)";
    return;
  }
  head_memory_ = "file mapping, copying to huge pages";
  head_copy_running_ = true;
  if (lm_head_->dense_pack_bytes() > 0 && head.nbytes <= kInlinePackBytes) {
    // A small head is packed before Create returns (one read of it: ms from
    // the page cache, about 0.1 s for 16 MiB from a disk), so no call
    // runs on the row-major kernels first.
    lock.unlock();
    CopyHeadToHugePages(mapping);
    return;
  }
  try {
    head_copier_ = std::thread([this, mapping] { CopyHeadToHugePages(mapping); });
  } catch (const std::system_error& e) {  // no thread to be had: keep the mapping
    head_copy_running_ = false;
    head_memory_ = absl::StrCat("file mapping (no thread for the huge-page copy: ", e.what(), ")");
  }
}

void Model::CopyHeadToHugePages(const MappedFile* mapping) {
  const WeightTensor& head = checkpoint_->lm_head();
  // Packed for the head's kernels (LmHead::PackDenseBlocks) where it reads
  // a packed copy, else the same bytes.
  const bool packed = lm_head_->dense_pack_bytes() > 0;
  std::string memory;
  absl::StatusOr<HugePageBuffer> buffer = HugePageBuffer::Allocate(
      packed ? static_cast<size_t>(lm_head_->dense_pack_bytes()) : head.nbytes,
      packed ? "the packed lm_head" : "lm_head");
  if (!buffer.ok()) {
    memory = absl::StrCat("file mapping (the huge-page copy failed: ", buffer.status().message(), ")");
  } else {
    // One thread, about 4 MiB of the table at a time, in whole blocks of 16
    // vocabulary rows (serving goes on meanwhile on the mapping); each
    // copied piece of the mapping is dropped from RSS.
    const auto* src = static_cast<const uint8_t*>(head.data);
    const int64_t vocab = config().vocab_size;
    const int64_t row_bytes = static_cast<int64_t>(head.nbytes) / vocab;
    const int64_t blocks = PackedHeadBlocks(vocab);
    const int64_t piece = std::max<int64_t>(1, (int64_t{4} << 20) / (16 * row_bytes));
    bool stopped = false;
    for (int64_t b0 = 0; b0 < blocks; b0 += piece) {
      if (stop_head_copy_.load(std::memory_order_relaxed)) {
        stopped = true;
        break;
      }
      const int64_t b1 = std::min(blocks, b0 + piece);
      const size_t from = static_cast<size_t>(16 * b0 * row_bytes);
      const size_t n = static_cast<size_t>((std::min(vocab, 16 * b1) - 16 * b0) * row_bytes);
      if (packed) {
        lm_head_->PackDenseBlocks(head.data, b0, b1, buffer->data());
      } else {
        std::memcpy(buffer->data() + from, src + from, n);
      }
      mapping->DropResidentPages(src + from, n);
    }
    if (stopped) {
      memory = "file mapping (the huge-page copy was stopped)";
    } else {
      auto copy = std::make_shared<const HugePageBuffer>(std::move(*buffer));
      const absl::Status switched =
          packed ? lm_head_->SwitchToPacked(std::move(copy)) : lm_head_->SwitchWeights(std::move(copy));
      memory = !switched.ok() ? absl::StrCat("file mapping (", switched.message(), ")")
               : packed       ? "huge pages (packed at load)"
                              : "huge pages (copied at load)";
      // Calls that ran during the copy faulted copied pieces back in: drop
      // the whole table's pages once more (Embed faults in what it reads).
      if (switched.ok()) mapping->DropResidentPages(src, head.nbytes);
    }
  }
  std::lock_guard<std::mutex> lock(head_copy_mu_);
  head_memory_ = memory;
  head_copy_running_ = false;
  head_copy_cv_.notify_all();
}

std::string Model::head_memory() const {
  std::lock_guard<std::mutex> lock(head_copy_mu_);
  return head_memory_;
}

std::string Model::WaitForHeadCopy() const {
  std::unique_lock<std::mutex> lock(head_copy_mu_);
  head_copy_cv_.wait(lock, [this] { return !head_copy_running_; });
  return head_memory_;
}

void Model::SetTokenizer(std::unique_ptr<Tokenizer> tokenizer) {
  tokenizer_ = std::move(tokenizer);
  tokenizer_missing_reason_.clear();
  max_piece_bytes_ = MaxPieceBytes(*tokenizer_);
  max_tokens_per_text_byte_ = MaxTokensPerTextByte(*tokenizer_);
}

absl::Status Model::LoadTokenizer(const Options& options) {
  const int64_t vocab_size = config().vocab_size;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      LoadTokenizerForCheckpoint(options.path, options.tokenizer_path, vocab_size);
  // A folder that holds one llama2.c or GGUF checkpoint (a repository's
  // NAME/NAME.bin, NAME/NAME.gguf, or its only .bin/.gguf file: the file
  // LoadCheckpoint chose, source_files()[0]) and no tokenizer.json /
  // tokenizer.model: the tokenizer is found as for that file given itself
  // (tok*.bin beside it, the GGUF's tokenizer.ggml.* metadata), so
  // --model-repository and --model FILE serve the same files alike.
  const std::vector<SourceFileInfo>& files = checkpoint_->source_files();
  if (absl::IsNotFound(tokenizer.status()) && options.tokenizer_path.empty() &&
      !files.empty() && (files[0].format == "llama2c" || files[0].format == "gguf") &&
      files[0].path != options.path) {
    absl::StatusOr<std::unique_ptr<Tokenizer>> from_file =
        LoadTokenizerForCheckpoint(files[0].path, "", vocab_size);
    if (!absl::IsNotFound(from_file.status())) {
      tokenizer = std::move(from_file);
    } else {
      tokenizer = absl::NotFoundError(
          absl::StrCat(tokenizer.status().message(), "; ", from_file.status().message()));
    }
  }
  if (tokenizer.ok() && (*tokenizer)->vocab_size() > vocab_size) {
    tokenizer = absl::InvalidArgumentError(absl::StrCat(
        (*tokenizer)->source(), " has ", (*tokenizer)->vocab_size(),
        " tokens, more than the model's vocab_size ", vocab_size));
  }
  if (tokenizer.ok()) {
    SetTokenizer(*std::move(tokenizer));
    return absl::OkStatus();
  }
  if (!options.tokenizer_path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("model '", options.name, "': tokenizer ",
                                                   options.tokenizer_path, ": ",
                                                   tokenizer.status().message()));
  }
  tokenizer_missing_reason_ = std::string(tokenizer.status().message());
  return absl::OkStatus();
}

DType Model::serving_dtype() const {
  const WeightTensor& head = checkpoint_->lm_head();
  return head.quant_type.has_value() ? DType::kF32 : head.dtype;
}

absl::Status Model::ServeTableAs(const char* name, quant::GgmlType type) {
  const WeightTensor* t = checkpoint_->Find(name);
  if (t == nullptr || t->ggml_type() == type) return absl::OkStatus();
  if (type != quant::GgmlType::kF32 && type != quant::GgmlType::kBF16 &&
      type != quant::GgmlType::kQ8_0) {
    return absl::InternalError(absl::StrCat("model '", name_, "': cannot serve ", name, " as ",
                                            quant::GgmlTypeName(type)));
  }
  const int64_t rows = t->shape.at(0), cols = t->shape.at(1);
  const int64_t dst_row = quant::RowBytes(type, cols);
  const int64_t src_row = static_cast<int64_t>(t->nbytes) / rows;
  if (dst_row < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", name_, "': ", name, " rows of ", cols, " elements cannot be served as ",
        quant::GgmlTypeName(type), " (block size ", quant::TypeInfo(type).block_size, ")"));
  }
  absl::StatusOr<HugePageBuffer> allocated =
      HugePageBuffer::Allocate(static_cast<size_t>(rows * dst_row), name);
  if (!allocated.ok()) {
    return absl::Status(allocated.status().code(),
                        absl::StrCat("model '", name_, "': ", allocated.status().message()));
  }
  HugePageBuffer buffer = std::move(*allocated);
  // Chunks of ~4 MiB of source rows, each converted in parallel over rows; a
  // mapped source chunk is then dropped from RSS (one copy resident).
  const quant::GgmlType src_type = t->ggml_type();
  const auto* src = static_cast<const uint8_t*>(t->data);
  uint8_t* dst = buffer.data();
  const MappedFile* mapping = checkpoint_->MappingOf(t->data, t->nbytes);
  const int64_t chunk_rows = std::max<int64_t>(1, (int64_t{4} << 20) / std::max<int64_t>(src_row, 1));
  for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
    const int64_t r1 = std::min(rows, r0 + chunk_rows);
    ParallelFor(r1 - r0, [&](int64_t i) {
      const int64_t r = r0 + i;
      std::vector<float> row(static_cast<size_t>(cols));
      quant::DequantizeRow(src_type, src + r * src_row, cols, row.data());
      quant::QuantizeRow(type, row.data(), cols, dst + r * dst_row);
    });
    if (mapping != nullptr) {
      mapping->DropResidentPages(src + r0 * src_row, static_cast<size_t>((r1 - r0) * src_row));
    }
  }
  WeightTensor converted = *t;
  const void* old_data = t->data;
  converted.data = checkpoint_->AdoptBuffer(std::move(buffer));
  converted.nbytes = static_cast<size_t>(rows * dst_row);
  converted.quant_type.reset();
  if (type == quant::GgmlType::kQ8_0) {
    converted.quant_type = type;
    converted.dtype = DType::kF32;
  } else {
    converted.dtype = type == quant::GgmlType::kBF16 ? DType::kBF16 : DType::kF32;
  }
  checkpoint_->AddTensor(name, std::move(converted));
  checkpoint_->ReleaseBuffer(old_data);  // no-op for a memory mapping
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
  RETURN_IF_ERROR(checkpoint_->CheckFiles());
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
  size_t total_tokens = 0;
  for (const auto& seq : input.token_ids) total_tokens += seq.size();
  std::vector<int64_t> ids;
  std::vector<int64_t> positions;
  ids.reserve(total_tokens);  // sized once (no doubling copies)
  positions.reserve(total_tokens);
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
  // F32 rows copied, BF16 rows widened exactly, quantized rows dequantized
  // as ggml (only these rows); ids were validated above.
  const WeightTensor& table = checkpoint_->embedding();
  RETURN_IF_ERROR(EmbeddingLookup(table.data, table.ggml_type(), cfg.vocab_size, hidden, ids,
                                  "token_ids", out));
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
  // In the model's dtype as the family rounds it (ModelConfig::
  // embedding_scale_rounding; lib/embedding/embedding_scale.h).
  const DType stored = checkpoint_->embedding().stored_dtype;
  switch (cfg.embedding_scale_rounding) {
    case EmbeddingScaleRounding::kScaleAndProduct:
      ScaleRowsInDType(out, num_floats, scale, stored);
      break;
    case EmbeddingScaleRounding::kProduct:
      ScaleRowsProductInDType(out, num_floats, scale, stored);
      break;
    case EmbeddingScaleRounding::kFloat32:
      ScaleRowsInDType(out, num_floats, scale, DType::kF32);
      break;
  }
  if (cfg.embedding_token_type) {
    // BertEmbeddings.forward: inputs_embeds + token_type_embeddings(0), then
    // the position row (token_type_ids default to zeros).
    const WeightTensor* types = checkpoint_->Find(kTokenTypeEmbeddings);
    if (types == nullptr || types->dtype != DType::kF32) {
      return absl::FailedPreconditionError(
          absl::StrCat("model '", name_, "' has no token type table ", kTokenTypeEmbeddings));
    }
    const float* type_row = types->f32();
    for (size_t t = 0; t < ids.size(); ++t) {
      float* row = out + t * hidden;
      for (int64_t j = 0; j < hidden; ++j) row[j] += type_row[j];
    }
  }
  if (positions_mode == AbsolutePositionsMode::kSinusoidal) {
    AddSinusoidalPositions(out, static_cast<int64_t>(ids.size()), hidden, positions);
  } else if (positions_mode == AbsolutePositionsMode::kLearned) {
    for (size_t t = 0; t < learned_rows.size(); ++t) {
      float* row = out + t * hidden;
      const float* pos_row = learned->f32() + learned_rows[t] * hidden;
      for (int64_t j = 0; j < hidden; ++j) row[j] += pos_row[j];
    }
  }
  if (cfg.embedding_layer_norm) {
    // BertEmbeddings.LayerNorm / Nomic emb_ln / BLOOM word_embeddings_layernorm
    // (nn.LayerNorm with bias, fp32; lib/head/norm.h).
    const WeightTensor* weight = checkpoint_->Find(kEmbedNorm);
    const WeightTensor* bias = checkpoint_->Find(kEmbedNormBias);
    if (weight == nullptr || bias == nullptr || weight->dtype != DType::kF32 ||
        bias->dtype != DType::kF32) {
      return absl::FailedPreconditionError(
          absl::StrCat("model '", name_, "' has no embedding LayerNorm ", kEmbedNorm));
    }
    LayerNorm(out, static_cast<int64_t>(ids.size()), hidden, weight->f32(), bias->f32(),
              cfg.embedding_norm_eps, out);
  }
  return checkpoint_->CheckFiles();  // a file truncated meanwhile: discard (read zeros)
}

namespace {

// Rows [first, first + rows) of `input` as an input of their own.
HeadInput SliceOf(const HeadInput& input, int64_t first, int64_t rows) {
  HeadInput out = input;
  out.hidden = input.hidden + first * input.width;
  out.rows = rows;
  return out;
}

// A call whose finish met an error in one slice (its logits refused, a
// checkpoint file changed) is over: `done` has run. Its later slices are
// dropped before compute (the check below fails) and their finish calls
// return at once, so done runs exactly once. The caller's check (which may
// read the call's server context) runs under `mu`, and finish marks the
// call failed under `mu` before calling done: a check running on another
// thread (a Submit releasing cancelled items) ends before done can free
// what it reads.
struct CallFailure {
  std::mutex mu;
  bool failed = false;
  bool Failed() {
    std::lock_guard<std::mutex> lock(mu);
    return failed;
  }
  void Fail() {
    std::lock_guard<std::mutex> lock(mu);
    failed = true;
  }
};

std::function<absl::Status()> CheckUnlessFailed(std::shared_ptr<CallFailure> failure,
                                                std::function<absl::Status()> check) {
  return [failure = std::move(failure), check = std::move(check)]() -> absl::Status {
    std::lock_guard<std::mutex> lock(failure->mu);
    if (failure->failed) return absl::AbortedError("an earlier slice of this call failed");
    return check ? check() : absl::OkStatus();
  };
}

}  // namespace

absl::Status Model::ValidateHead(const HeadInput& input) const {
  RETURN_IF_ERROR(checkpoint_->CheckFiles());
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
  if (!input.allow_non_finite) {
    const int64_t bad = FirstNonFinite(input.hidden, SaturatingMul(input.rows, input.width));
    if (bad >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "hidden", NonFiniteIndex({input.rows, input.width}, bad), " = ", input.hidden[bad],
          " is not finite (set allow_non_finite to accept NaN/Inf)"));
    }
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

absl::Status Model::FinishLogits(const HeadInput& input, int64_t first, int64_t rows,
                                 bool log_softmax, float* logits) const {
  const int64_t vocab = config().vocab_size;
  const int64_t scored = input.vocab_limit > 0 ? input.vocab_limit : vocab;  // unmasked ids
  const WeightTensor* head_bias = checkpoint_->Find(kLmHeadBias);  // phi: lm_head.bias
  const float* bias = head_bias != nullptr ? head_bias->f32() : nullptr;
  // In parallel over rows (one parallel region; each row is then serial).
  // The family's transform (Gemma 2 softcap, Cohere logit_scale, Granite
  // logits_scaling) before temperature, as transformers orders them.
  const LogitTransform& t = config().logit_transform;
  LogitTransformValues transform;
  transform.logit_scale = t.logit_scale;
  transform.logits_scaling = t.logits_scaling;
  transform.final_logit_softcapping = t.final_logit_softcapping;
  // A finite row whose logits are not all finite left float32's range on
  // the way (its true logits do, the head's arithmetic did, or the head
  // holds NaN/Inf weights): refused, never answered with inf/NaN. Looked
  // for after the transform and temperature, and in the head's output too
  // when there is a softcap (tanh maps +-inf to +-cap; no family with a
  // softcap has a bias or scale before it). Log-softmax comes after, in
  // float64 (a -inf log-prob there is a rounded underflow).
  const bool softcap = transform.final_logit_softcapping > 0.0;
  struct FirstBad {
    std::mutex mu;
    int64_t row = -1, id = -1;
    float value = 0;
  } first_bad;  // the lowest such row
  ParallelFor(rows, [&](int64_t r) {
    float* row = logits + r * vocab;
    const bool finite_row =
        !input.allow_non_finite || FirstNonFinite(input.hidden + (first + r) * input.width,
                                                  input.width) < 0;
    int64_t id = finite_row && softcap ? FirstNonFinite(row, scored) : -1;
    float value = id >= 0 ? row[id] : 0.0f;
    PrepareLogits(row, vocab, input.temperature, input.vocab_limit, bias, &transform);
    if (finite_row && id < 0) {
      id = FirstNonFinite(row, scored);
      if (id >= 0) value = row[id];
    }
    if (log_softmax) LogSoftmaxInPlace(row, vocab);
    if (id < 0) return;
    std::lock_guard<std::mutex> lock(first_bad.mu);
    if (first_bad.row < 0 || r < first_bad.row) {
      first_bad.row = r;
      first_bad.id = id;
      first_bad.value = value;
    }
  });
  if (first_bad.row < 0) return absl::OkStatus();
  const int64_t r = first + first_bad.row, id = first_bad.id;
  if (HeadRowHasNonFinite(id)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", name_, "' has NaN/Inf weights in lm_head row ", id,
        " (or its lm_head.bias): logits[", r, ", ", id, "] = ", first_bad.value,
        " for a finite hidden[", r, "]; the checkpoint is faulty"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "hidden[", r, "] is finite but logits[", r, ", ", id, "] = ", first_bad.value,
      ": the row's logits leave float32's range (values this large overflow the head, the "
      "logit transform or temperature = ", input.temperature, ")"));
}

bool Model::HeadRowHasNonFinite(int64_t id) const {
  const WeightTensor& head = checkpoint_->lm_head();
  const int64_t d = config().hidden_size;
  const WeightTensor* head_bias = checkpoint_->Find(kLmHeadBias);
  if (head_bias != nullptr && !std::isfinite(head_bias->f32()[id])) return true;
  std::vector<float> row;
  try {
    row.resize(static_cast<size_t>(d));
  } catch (const std::bad_alloc&) {
    return false;
  }
  const auto* data = static_cast<const uint8_t*>(head.data);
  if (head.quant_type.has_value()) {
    const int64_t row_bytes = quant::RowBytes(*head.quant_type, d);
    if (!quant::DequantizeRow(*head.quant_type, data + id * row_bytes, d, row.data())) {
      return false;
    }
  } else {
    ConvertToF32(head.dtype, data + id * d * static_cast<int64_t>(DTypeSize(head.dtype)),
                 static_cast<size_t>(d), row.data());
  }
  return FirstNonFinite(row.data(), d) >= 0;
}

absl::Status Model::ComputeLogits(const HeadInput& input, bool log_softmax,
                                  std::vector<float>* logits) const {
  RETURN_IF_ERROR(ValidateHead(input));
  return ComputeLogitsSlice(input, 0, input.rows, log_softmax, logits);
}

absl::Status Model::ComputeLogitsSlice(const HeadInput& input, int64_t first, int64_t rows,
                                       bool log_softmax, std::vector<float>* logits) const {
  const int64_t vocab = config().vocab_size;
  logits->resize(static_cast<size_t>(rows * vocab));
  if (rows == 0) return absl::OkStatus();
  std::vector<float> prepared(static_cast<size_t>(rows * input.width));
  RETURN_IF_ERROR(PrepareRows(SliceOf(input, first, rows), prepared.data()));
  RETURN_IF_ERROR(lm_head_->Compute(prepared.data(), rows, logits->data()));
  RETURN_IF_ERROR(checkpoint_->CheckFiles());
  return FinishLogits(input, first, rows, log_softmax, logits->data());
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

void Model::ScoreRows(const ScoreInput& input, int64_t first, int64_t rows, const float* logits,
                      ScoreOutput* output) const {
  const int64_t vocab = config().vocab_size;
  // In parallel over rows, or over one row's vocab chunks (see FinishLogits).
  ParallelFor(rows, [&](int64_t r) {
    const int64_t row = first + r;
    const int64_t target = input.target_ids.empty() ? -1 : input.target_ids[row];
    output->rows[row] = ScoreRow(logits + r * vocab, vocab, target, input.top_k,
                                 input.candidate_ids.empty() ? nullptr : &input.candidate_ids);
  });
}

void Model::SumTargets(const ScoreInput& input, ScoreOutput* output) const {
  output->sum_target_logprob = 0;
  output->num_targets = 0;
  if (input.target_ids.empty()) return;
  for (int64_t r = 0; r < input.head.rows; ++r) {  // summed in row order
    output->sum_target_logprob += output->rows[r].target_logprob;
    ++output->num_targets;
  }
}

absl::Status Model::Score(const ScoreInput& input, ScoreOutput* output) const {
  RETURN_IF_ERROR(ValidateScore(input));
  output->rows.assign(static_cast<size_t>(input.head.rows), RowScoreResult{});
  // One slice of logits at a time (as ScoreAsync).
  std::vector<float> logits;
  for (int64_t first = 0; first < input.head.rows; first += kDefaultHeadSliceRows) {
    const int64_t n = std::min(kDefaultHeadSliceRows, input.head.rows - first);
    RETURN_IF_ERROR(ComputeLogitsSlice(input.head, first, n, /*log_softmax=*/false, &logits));
    ScoreRows(input, first, n, logits.data(), output);
  }
  SumTargets(input, output);
  return absl::OkStatus();
}

int64_t Model::resident_bytes() const {
  return checkpoint_->resident_bytes() + lm_head_->packed_bytes();
}

int64_t Model::head_slice_rows() const {
  return batcher_ != nullptr ? batcher_->options().max_batch_rows : kDefaultHeadSliceRows;
}

void Model::RunHead(DynamicBatcher::Item item) const {
  if (batcher_ != nullptr) {
    // Submit does not call finish when it refuses the item; we do.
    auto finish = item.finish;
    absl::Status st;
    try {
      st = batcher_->Submit(std::move(item));
    } catch (const std::bad_alloc&) {
      st = absl::ResourceExhaustedError("out of memory queueing the LM-head call");
    }
    if (!st.ok()) finish(std::move(st), 0, 0, nullptr);
    return;
  }
  // Unbatched: one pool task per call (or inline without a pool), computing
  // the rows in slices of kDefaultHeadSliceRows (one slice of logits held at
  // a time), calling finish per slice as the batcher does.
  auto task = [this, item]() {
    const int64_t slice = kDefaultHeadSliceRows;
    for (int64_t first = 0; first < item.rows; first += slice) {
      const int64_t n = std::min(slice, item.rows - first);
      if (item.check) {
        absl::Status st = item.check();
        if (!st.ok()) {
          item.finish(std::move(st), first, 0, nullptr);
          return;
        }
      }
      std::vector<float> rows;
      std::vector<float> logits;
      try {
        rows.resize(static_cast<size_t>(n * lm_head_->hidden_size()));
        logits.resize(static_cast<size_t>(n * lm_head_->vocab_size()));
      } catch (const std::bad_alloc&) {
        item.finish(absl::ResourceExhaustedError(absl::StrCat(
                        "out of memory for ", n, " rows x vocab_size ", lm_head_->vocab_size(),
                        " of logits")),
                    first, 0, nullptr);
        return;
      }
      absl::Status st = item.prepare(first, n, rows.data());
      if (st.ok()) st = lm_head_->Compute(rows.data(), n, logits.data());
      if (!st.ok()) {
        item.finish(std::move(st), first, 0, nullptr);
        return;
      }
      item.finish(absl::OkStatus(), first, n, logits.data());
    }
  };
  if (pool_ == nullptr) {
    task();
    return;
  }
  absl::Status st = pool_->Submit(task);
  if (!st.ok()) item.finish(std::move(st), 0, 0, nullptr);
}


void Model::ComputeLogitsAsync(const HeadInput& input, bool log_softmax,
                               std::function<absl::Status()> check, LogitsRowsSink sink,
                               StatusDone done) const {
  absl::Status valid = ValidateHead(input);
  if (!valid.ok()) {
    done(std::move(valid));
    return;
  }
  if (input.rows == 0) {
    done(absl::OkStatus());
    return;
  }
  auto shared_done = std::make_shared<StatusDone>(std::move(done));
  DynamicBatcher::Item item;
  std::shared_ptr<LogitsRowsSink> shared_sink;
  std::shared_ptr<CallFailure> failed;
  try {
    shared_sink = std::make_shared<LogitsRowsSink>(std::move(sink));
    failed = std::make_shared<CallFailure>();
  } catch (const std::bad_alloc&) {
    (*shared_done)(absl::ResourceExhaustedError("out of memory starting the LM-head call"));
    return;
  }
  item.rows = input.rows;
  item.check = CheckUnlessFailed(failed, std::move(check));
  item.prepare = [this, input](int64_t first, int64_t rows, float* dst) {
    return PrepareRows(SliceOf(input, first, rows), dst);
  };
  item.finish = [this, input, log_softmax, shared_done, shared_sink, failed](
                    absl::Status st, int64_t first, int64_t rows, float* logits) {
    if (failed->Failed()) return;
    if (st.ok()) st = checkpoint_->CheckFiles();
    if (st.ok()) st = FinishLogits(input, first, rows, log_softmax, logits);
    if (!st.ok()) {
      failed->Fail();
      (*shared_done)(std::move(st));
      return;
    }
    (*shared_sink)(first, rows, logits);
    if (first + rows == input.rows) (*shared_done)(absl::OkStatus());
  };
  RunHead(std::move(item));
}

void Model::ComputeLogitsAsync(const HeadInput& input, bool log_softmax,
                               std::function<absl::Status()> check, LogitsDone done) const {
  // Collects the slices into one [rows, vocab_size] vector.
  auto out = std::make_shared<std::vector<float>>();
  auto failed = std::make_shared<bool>(false);
  const int64_t vocab = config().vocab_size;
  auto shared_done = std::make_shared<LogitsDone>(std::move(done));
  ComputeLogitsAsync(
      input, log_softmax, std::move(check),
      [out, failed, vocab, rows = input.rows](int64_t first, int64_t n, const float* logits) {
        if (*failed) return;
        try {
          if (out->empty()) out->resize(static_cast<size_t>(rows * vocab));
        } catch (const std::bad_alloc&) {
          *failed = true;
          return;
        }
        std::copy(logits, logits + n * vocab, out->data() + first * vocab);
      },
      [out, failed, shared_done, rows = input.rows](absl::Status st) {
        if (st.ok() && *failed) {
          st = absl::ResourceExhaustedError(
              absl::StrCat("out of memory for ", rows, " rows of logits"));
        }
        (*shared_done)(st, st.ok() ? std::move(*out) : std::vector<float>());
      });
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
  // Per-row results fill in slice by slice; only one slice of logits exists
  // at a time.
  std::shared_ptr<const ScoreInput> shared_input;
  std::shared_ptr<ScoreOutput> output;
  std::shared_ptr<CallFailure> failed;
  try {
    failed = std::make_shared<CallFailure>();
    shared_input = std::make_shared<const ScoreInput>(input);
    output = std::make_shared<ScoreOutput>();
    output->rows.resize(static_cast<size_t>(input.head.rows));
  } catch (const std::bad_alloc&) {
    done(absl::ResourceExhaustedError(
             absl::StrCat("out of memory for ", input.head.rows, " rows of scores")),
         {});
    return;
  }
  DynamicBatcher::Item item;
  item.rows = input.head.rows;
  item.check = CheckUnlessFailed(failed, std::move(check));
  item.prepare = [this, shared_input](int64_t first, int64_t rows, float* dst) {
    return PrepareRows(SliceOf(shared_input->head, first, rows), dst);
  };
  auto shared_done = std::make_shared<ScoreDone>(std::move(done));
  item.finish = [this, shared_input, shared_done, output, failed](
                    absl::Status st, int64_t first, int64_t rows, float* logits) {
    if (failed->Failed()) return;
    if (st.ok()) st = checkpoint_->CheckFiles();
    if (st.ok()) {
      st = FinishLogits(shared_input->head, first, rows, /*log_softmax=*/false, logits);
    }
    if (!st.ok()) {
      failed->Fail();
      (*shared_done)(std::move(st), {});
      return;
    }
    ScoreRows(*shared_input, first, rows, logits, output.get());
    if (first + rows == shared_input->head.rows) {
      SumTargets(*shared_input, output.get());
      (*shared_done)(absl::OkStatus(), std::move(*output));
    }
  };
  RunHead(std::move(item));
}

}  // namespace vocabd
