// A served model: a loaded checkpoint plus its LM head, with the operations
// the RPCs call. All methods are const and thread-safe.
#ifndef VOCABD_LIB_SERVING_MODEL_H_
#define VOCABD_LIB_SERVING_MODEL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/core/huge_pages.h"
#include "lib/serving/compute_pool.h"
#include "lib/serving/dynamic_batcher.h"
#include "lib/head/lm_head.h"
#include "lib/head/scoring.h"
#include "lib/tokenizer/tokenizer.h"

namespace vocabd {

// Type the embedding table and LM head are served in.
//   kAuto: the checkpoint's own. Quantized GGUF tables (q4_0 .. q6_K,
//          iq4_nl) are served as stored, in place from the mapping, each
//          table in its own type (any mix, e.g. Q4_K_M's q4_K embedding
//          with a q6_K head). Float tables: BF16-stored ones in BF16 (in
//          place; the head: Options::head_huge_pages), F32 and F16 ones in F32 (F16 -> F32 is exact; F16 ->
//          BF16 would drop 3 mantissa bits, so it is only done when asked
//          for); which of the two follows the head (the embedding when the
//          head is quantized).
//   kF32 / kBF16: every table as asked (quantized tables dequantized once,
//          exactly as ggml). BF16 falls back to F32 (with
//          fallback_reason()) where LmHead::Bf16Supported() is false.
//   kQ8_0: F32/BF16/F16 tables quantized at load to ggml q8_0 (one copy,
//          per block of 32: d = max|x| / 127, q = round(x / d); a tied
//          head shares the embedding's copy), like llama.cpp's
//          --output-tensor-type q8_0. Each weight moves by at most half a
//          step plus the f16 rounding of d over up to 127 steps:
//          |w - q8_0(w)| <= max|w of its block| * (1/254 + 1/2048);
//          tests/lib/serving/model_quant_test.cc checks it. Tables already q8_0 are kept;
//          other quantized tables are INVALID_ARGUMENT (re-quantizing would
//          stack two roundings).
// F16 tables are converted once, straight from the file mapping into the
// serving type; the source pages are dropped from RSS as they are read
// (MappedFile::DropResidentPages), so loading peaks near the served bytes.
enum class WeightsDType { kAuto, kF32, kBF16, kQ8_0 };

enum class AbsolutePositionsMode { kModelDefault, kNone, kSinusoidal, kLearned };
enum class EmbeddingScaleMode { kModelDefault, kNone, kSqrtHidden };

struct EmbedInput {
  // One entry per sequence.
  std::vector<std::vector<int64_t>> token_ids;
  // Per sequence: start position (used when position_ids[b] is empty).
  // Learned positions of a RoBERTa-style model
  // (ModelConfig::learned_position_padding_idx >= 0): HF's
  // past_key_values_length; pads are not counted (see Embed).
  std::vector<int64_t> position_offsets;
  // Per sequence: explicit positions (empty or one per token).
  std::vector<std::vector<int64_t>> position_ids;
  AbsolutePositionsMode absolute_positions = AbsolutePositionsMode::kModelDefault;
  EmbeddingScaleMode embedding_scale = EmbeddingScaleMode::kModelDefault;
  // Learned positions read table row position + this (RoBERTa:
  // padding_idx + 1); unset = ModelConfig::learned_position_offset.
  std::optional<int64_t> learned_position_offset;
  // Sinusoidal positions >= max_position_embeddings are refused unless set.
  bool allow_beyond_trained_length = false;
};

struct EmbedOutput {
  std::vector<float> embeddings;           // [total_tokens, hidden_size]
  std::vector<int64_t> sequence_offsets;   // [num_sequences + 1]
};

struct HeadInput {
  const float* hidden = nullptr;  // [rows, hidden_size] F32
  int64_t rows = 0;
  int64_t width = 0;              // must equal hidden_size
  bool apply_final_norm = true;
  float temperature = 1.0f;       // > 0
  int64_t vocab_limit = 0;        // 0 = none
  // Accept NaN/Inf hidden values. false: the first one is INVALID_ARGUMENT
  // `hidden[r, c] = nan is not finite (set allow_non_finite to accept NaN/Inf)`.
  bool allow_non_finite = false;
};

struct ScoreInput {
  HeadInput head;
  std::vector<int64_t> target_ids;  // empty or [rows]
  int top_k = 0;                    // 0..kMaxTopK
  // Ids whose logprobs every row returns (RowScoreResult::candidate_logprobs),
  // each in [0, vocab_size or vocab_limit); at most kMaxCandidateIds.
  std::vector<int64_t> candidate_ids;
};

// Rows of logits the unbatched head path and the synchronous Score compute
// at a time (with dynamic batching: DynamicBatcher::Options::max_batch_rows).
inline constexpr int64_t kDefaultHeadSliceRows = 256;

// Largest top_k a Score request may ask for.
inline constexpr int kMaxTopK = 1024;
// Most candidate ids a Score request may name.
inline constexpr int64_t kMaxCandidateIds = 4096;

struct ScoreOutput {
  std::vector<RowScoreResult> rows;
  double sum_target_logprob = 0;
  int64_t num_targets = 0;
};

class Model {
 public:
  // F32 / BF16 heads of up to this many bytes read from the mapping are
  // packed (LmHead::Options::dense_pack) before Create returns; larger ones
  // on the background thread (Options::head_huge_pages).
  static constexpr size_t kInlinePackBytes = size_t{16} << 20;

  struct Options {
    Options() = default;
    Options(std::string name_in, std::string path_in)
        : name(std::move(name_in)), path(std::move(path_in)) {}
    std::string name;
    // Checkpoint path (see LoadCheckpoint).
    std::string path;
    // Tokenizer file or folder (LoadTokenizer); empty: the one the
    // checkpoint carries (LoadTokenizerForCheckpoint), if any. An explicit
    // path that does not load fails Create; a checkpoint without a
    // tokenizer still serves everything else (tokenizer() == nullptr).
    std::string tokenizer_path;
    // Hash the checkpoint files on a background thread (LoadOptions): the
    // model serves as soon as it is mapped.
    bool sha256_in_background = false;
    WeightsDType weights_dtype = WeightsDType::kAuto;
    // Serve an F32 or BF16 LM head (the embedding table when tied) read
    // from the file's mapping from a copy in memory advised for transparent
    // huge pages (lib/core/huge_pages.h): every head call streams the whole
    // table, and from 4 KiB pages the one-row F32 / BF16 kernels ran 1.29x /
    // 1.33x their read-only floor, from the copy 1.00-1.17x / 1.05-1.13x
    // (a Zen 5 VM; docs/performance.md). The copy is made on a background
    // thread after Create returns (the model serves from the mapping
    // meanwhile, so time-to-serving does not change), 4 MiB at a time, each
    // copied piece of the mapping dropped from RSS; then the head switches
    // to it (LmHead::SwitchWeights: same bytes, same results). Embed keeps
    // reading the mapping. resident_bytes is unchanged (the table is held
    // once: the copy instead of the mapping's pages). head_memory() and
    // WaitForHeadCopy() tell where the head reads. Tables converted at load
    // (F16 -> F32, --weights-dtype) always land in such memory; quantized
    // heads are packed into it (LmHead::Options::quant_pack). Where the
    // head's kernel reads a packed copy (F32 / BF16 on vocabd's AVX-512
    // kernels: LmHead::Options::dense_pack), the background thread packs
    // the table into it instead of copying it (the same 4 MiB pieces, each
    // dropped from RSS) and the head then runs every M on the packed copy
    // (LmHead::SwitchToPacked): logits computed before and after the switch
    // differ in summation order only. A head of up to kInlinePackBytes is
    // packed before Create returns instead, so every call reads the packed
    // copy. VOCABD_DENSE_PACK=0 keeps the row-major copy. false:
    // read the mapping in place (file pages shared with other processes). The
    // environment variable VOCABD_HEAD_HUGE_PAGES = 0 | 1 overrides it for
    // operators; another value makes Create fail (INVALID_ARGUMENT).
    bool head_huge_pages = true;
    // Runs the async head calls (not owned; must outlive the model's
    // in-flight calls). Null: the async calls run inline on the caller.
    ComputePool* compute_pool = nullptr;
    // Set: ComputeLogitsAsync/ScoreAsync go through a DynamicBatcher with
    // these options (needs compute_pool). Unset: one pool task per call.
    std::optional<DynamicBatcher::Options> batching;
    // Tests and programs that embed vocabd: when set, called once at load;
    // a non-null tokenizer it returns replaces what the checkpoint carries
    // (null: keep it). An error fails the load.
    std::function<absl::StatusOr<std::unique_ptr<Tokenizer>>(const Checkpoint&)>
        tokenizer_factory;
  };
  // Loads the checkpoint, re-encodes the embedding/head in the serving dtype
  // (one copy: a tied head stays the embedding table; a converted source
  // buffer is freed) and builds the LM head primitive.
  static absl::StatusOr<std::unique_ptr<Model>> Create(const Options& options);

  // F32 or BF16: the dtype the LM head is served in when it is a float
  // table (F32 for a quantized head: see lm_head_type()).
  DType serving_dtype() const;
  // The served ggml types of the LM head and the embedding table ("the
  // served type": f32, bf16, or a quant type such as q8_0, q4_K).
  quant::GgmlType lm_head_type() const { return checkpoint_->lm_head().ggml_type(); }
  quant::GgmlType embedding_type() const { return checkpoint_->embedding().ggml_type(); }
  // What Options::weights_dtype asked for.
  WeightsDType requested_weights_dtype() const { return requested_dtype_; }
  // Why BF16 was asked for but F32 is served (empty when no fallback).
  const std::string& fallback_reason() const { return fallback_reason_; }
  // The model's tokenizer, or nullptr when the checkpoint carries none;
  // tokenizer_missing_reason() then says what was looked for.
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const std::string& tokenizer_missing_reason() const { return tokenizer_missing_reason_; }
  // The tokenizer's longest piece or token text, bytes (0 without one): P
  // in the tokenizer RPCs' request memory bound (request_memory.h).
  int64_t max_piece_bytes() const { return max_piece_bytes_; }
  // Most tokens one byte of text can become (MaxTokensPerTextByte): m in
  // Tokenize's bound.
  int64_t max_tokens_per_text_byte() const { return max_tokens_per_text_byte_; }
  // oneDNN implementation of the head matmul (e.g. "brg:avx512_core_bf16").
  std::string lm_head_implementation() const { return lm_head_->implementation(); }
  // The head itself (kernel choice, crossover, sizes).
  const LmHead& lm_head() const { return *lm_head_; }
  // Where the head's weights are read from (Options::head_huge_pages), for
  // logs and tests: "huge pages (packed at load)" (LmHead::Options::
  // dense_pack), "huge pages (copied at load)", "file mapping, copying to
  // huge pages" (the background copy is running), "file mapping
  // (VOCABD_HEAD_HUGE_PAGES=0)", "file mapping (head_huge_pages off)",
  // "file mapping (the huge-page copy failed: ...)", "huge pages (converted
  // at load)", "packed copy (quantized)", "in place (quantized)".
  std::string head_memory() const;
  // Blocks until the background copy (if any) is done; returns head_memory().
  std::string WaitForHeadCopy() const;
  // Null when dynamic batching is off.
  const DynamicBatcher* batcher() const { return batcher_.get(); }

  const std::string& name() const { return name_; }
  const ModelConfig& config() const { return checkpoint_->config(); }
  const Checkpoint& checkpoint() const { return *checkpoint_; }
  // Bytes the model holds for serving: the served tensors
  // (Checkpoint::resident_bytes) plus the LM head's packed copy, if any
  // (LmHead::packed_bytes).
  int64_t resident_bytes() const;

  // Ragged lookup: out[t] = table[id] * scale (+ absolute position). Learned
  // positions add row `position + learned_position_offset` of the table;
  // on a RoBERTa-style model (config().learned_position_padding_idx = P >= 0)
  // a sequence without explicit position_ids is numbered as HF's
  // create_position_ids_from_input_ids: tokens with id P add row P, the
  // others row learned_position_offset + position_offset + (non-pad tokens
  // before them) -- with the default offset P + 1 exactly HF's
  // (cumsum(mask) + past) * mask + P. Explicit position_ids are used as
  // given (row = position + offset, pads included).
  // Families with an embedding module (config().embedding_token_type /
  // embedding_layer_norm: BERT, RoBERTa / XLM-R, Nomic BERT, BLOOM) return its output for
  // token_type_ids = 0: table[id] * scale + token_type_embeddings[0] (+ the
  // position row), then LayerNorm(weight, bias, embedding_norm_eps) in fp32
  // (lib/head/norm.h), as BertEmbeddings.forward orders them.
  // INVALID_ARGUMENT names `sequences[b].token_ids[i]` or
  // `sequences[b].position_ids` with the bad value, or the position beyond
  // a learned table; FAILED_PRECONDITION for learned positions on a model
  // without a table.
  absl::Status Embed(const EmbedInput& input, EmbedOutput* output) const;

  // Embed writing the rows straight into caller memory (the server passes
  // the response tensor's bytes, saving a [total_tokens, hidden_size] copy).
  // `allocate(num_floats)` is called once, after validation succeeds, and
  // returns storage for num_floats = total_tokens * hidden_size F32 values;
  // on error it is not called and nothing is written.
  absl::Status EmbedInto(const EmbedInput& input,
                         absl::FunctionRef<float*(int64_t num_floats)> allocate,
                         std::vector<int64_t>* sequence_offsets) const;

  // Rows of logits one slice of a head call holds (the batcher's
  // max_batch_rows, else kDefaultHeadSliceRows): a call never holds more
  // logits than this many rows (lib/serving/request_memory.h counts it).
  int64_t head_slice_rows() const;

  // logits [rows, vocab_size] (tempered, masked; log-softmax if asked).
  // INVALID_ARGUMENT names `hidden.shape` / `temperature` / `vocab_limit`,
  // or the first finite row whose logits are not finite before log-softmax
  // ("hidden[r] is finite but logits[r, j] = inf: the row's logits leave
  // float32's range ..."; huge hidden values, a tiny temperature; masked
  // ids excepted), or FAILED_PRECONDITION when that logit's head row or
  // bias holds NaN/Inf;
  // FAILED_PRECONDITION naming the model and the reason when its LM head is
  // not served (config().lm_head_unsupported_reason, e.g. RoBERTa).
  absl::Status ComputeLogits(const HeadInput& input, bool log_softmax,
                             std::vector<float>* logits) const;

  // Per-row scores, computed slice by slice (one slice of logits held at a
  // time). INVALID_ARGUMENT names `target_ids[i]` / `top_k` /
  // `candidate_ids[i]` / `candidate_ids` (count), and finite rows whose
  // logits are not finite as ComputeLogits; FAILED_PRECONDITION as
  // ComputeLogits.
  absl::Status Score(const ScoreInput& input, ScoreOutput* output) const;

  // Asynchronous forms for servers: validate now, run the GEMM on the
  // compute pool (through the dynamic batcher when enabled), then call
  // `done` exactly once: on a compute thread, or inline before returning
  // when the input is invalid, the queue is full (RESOURCE_EXHAUSTED) or
  // rows == 0. `check` (optional) runs just before compute; a non-OK status
  // drops the call without computing it and is passed to `done`.
  // input.hidden must stay valid until `done` runs. Results are identical
  // to ComputeLogits/Score (batching never changes a value).
  //
  // Both compute in slices of head_slice_rows() rows (the batcher splits
  // larger calls, lib/serving/dynamic_batcher.h), so one call holds at most
  // one slice of logits at a time.
  using LogitsDone = std::function<void(absl::Status, std::vector<float> logits)>;
  using ScoreDone = std::function<void(absl::Status, ScoreOutput output)>;
  // `sink(first_row, rows, logits)` receives the finished logits rows
  // [first_row, first_row + rows) ([rows, vocab_size] F32, valid only during
  // the call), in row order on a compute thread, before done(OK); the
  // server encodes them straight into the response (no whole-call copy).
  // `done` is called exactly once. sink must not throw.
  using LogitsRowsSink = std::function<void(int64_t first_row, int64_t rows, const float* logits)>;
  using StatusDone = std::function<void(absl::Status)>;
  void ComputeLogitsAsync(const HeadInput& input, bool log_softmax,
                          std::function<absl::Status()> check, LogitsRowsSink sink,
                          StatusDone done) const;
  // The same, collecting all rows into one vector (tests, small callers).
  void ComputeLogitsAsync(const HeadInput& input, bool log_softmax,
                          std::function<absl::Status()> check, LogitsDone done) const;
  void ScoreAsync(const ScoreInput& input, std::function<absl::Status()> check,
                  ScoreDone done) const;

 private:
  Model() = default;

 public:
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

 private:
  absl::Status ValidateHead(const HeadInput& input) const;
  absl::Status ValidateScore(const ScoreInput& input) const;
  // Writes the GEMM input rows (final norm applied if asked) to dst.
  absl::Status PrepareRows(const HeadInput& input, float* dst) const;
  // ComputeLogits of rows [first, first + rows) of a validated `input`.
  absl::Status ComputeLogitsSlice(const HeadInput& input, int64_t first, int64_t rows,
                                  bool log_softmax, std::vector<float>* logits) const;
  // The head's logits of rows [first, first + rows) of `input` ([rows,
  // vocab_size], in place): bias, the family's transform, temperature, vocab
  // mask, log-softmax. INVALID_ARGUMENT naming the first row whose hidden
  // values are finite but whose logits are not (before log-softmax):
  // "hidden[r] is finite but logits[r, j] = inf: ...".
  // FAILED_PRECONDITION instead when the head's row of that logit (or its
  // bias) holds NaN/Inf: the checkpoint, not the request, is at fault.
  absl::Status FinishLogits(const HeadInput& input, int64_t first, int64_t rows,
                            bool log_softmax, float* logits) const;
  // True when row `id` of the served head or lm_head.bias[id] is NaN/Inf.
  bool HeadRowHasNonFinite(int64_t id) const;
  // Scores of rows [first, first + rows) from their prepared-and-finished
  // logits [rows, vocab] into output->rows (sized by the caller).
  void ScoreRows(const ScoreInput& input, int64_t first, int64_t rows, const float* logits,
                 ScoreOutput* output) const;
  // sum_target_logprob / num_targets from output->rows, in row order.
  void SumTargets(const ScoreInput& input, ScoreOutput* output) const;
  // Runs `item` through the batcher, or as one pool task, or inline.
  void RunHead(DynamicBatcher::Item item) const;
  // Re-encodes table `name` (kEmbedTokens / kLmHead) into `type` (F32,
  // BF16 or Q8_0) in a HugePageBuffer, replacing it in the checkpoint so
  // one copy stays (mapped source pages are dropped as they are read). A
  // table already of `type` is left as it is.
  absl::Status ServeTableAs(const char* name, quant::GgmlType type);
  // Options::head_huge_pages: sets head_memory_ and, for an F32 / BF16 head
  // read from a mapping when `wanted`, starts head_copier_.
  void StartHeadCopy(bool wanted, bool by_env);
  // head_copier_'s body: the copy, then LmHead::SwitchWeights (the head
  // owns the copy from then on).
  void CopyHeadToHugePages(const MappedFile* mapping);
  // Fills tokenizer_ or tokenizer_missing_reason_.
  absl::Status LoadTokenizer(const Options& options);
  void SetTokenizer(std::unique_ptr<Tokenizer> tokenizer);

  std::string name_;
  std::unique_ptr<Checkpoint> checkpoint_;
  std::shared_ptr<const LmHead> lm_head_;
  WeightsDType requested_dtype_ = WeightsDType::kAuto;
  std::string fallback_reason_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::string tokenizer_missing_reason_;
  int64_t max_piece_bytes_ = 0;
  int64_t max_tokens_per_text_byte_ = 3;
  ComputePool* pool_ = nullptr;
  std::unique_ptr<DynamicBatcher> batcher_;
  // The background huge-page copy of the head (StartHeadCopy); joined by
  // ~Model, which stops it between pieces.
  mutable std::mutex head_copy_mu_;
  mutable std::condition_variable head_copy_cv_;
  bool head_copy_running_ = false;  // guarded by head_copy_mu_
  std::string head_memory_;         // guarded by head_copy_mu_
  std::atomic<bool> stop_head_copy_{false};
  std::thread head_copier_;
};

}  // namespace vocabd

#endif  // VOCABD_LIB_SERVING_MODEL_H_
