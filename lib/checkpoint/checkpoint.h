// A loaded checkpoint: the model description plus named weight tensors that
// point into memory-mapped files (or into owned buffers after conversion).
#ifndef VOCABD_LIB_CHECKPOINT_CHECKPOINT_H_
#define VOCABD_LIB_CHECKPOINT_CHECKPOINT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/core/dtype.h"
#include "lib/core/huge_pages.h"
#include "lib/core/mapped_file.h"
#include "lib/checkpoint/model_config.h"
#include "lib/quant/ggml_types.h"

namespace vocabd {

// A read-only view of one tensor. Row-major; `data` stays valid as long as
// the Checkpoint that owns it.
//
// Quantized tensors (quant_type set; GGUF token_embd/output of a served
// ggml type, or a table quantized at load by --weights-dtype q8_0): each
// row of shape.back() elements is quant::RowBytes(*quant_type,
// shape.back()) bytes of ggml blocks (lib/quant/ggml_blocks.h), rows
// consecutive:
//
//   data -> | row 0: block 0 | block 1 | ... | row 1: block 0 | ...
//
// `dtype` is then kF32 and says nothing; read rows with
// quant::DequantizeRow(ggml_type(), ...).
struct WeightTensor {
  DType dtype = DType::kF32;
  // The float dtype of the values in the file (F32 for a quantized tensor:
  // ggml dequantizes to F32); differs from `dtype` when the loader or the
  // model converted the tensor. Decides the default serving dtype and the
  // dtype Gemma's embedding scale is applied in.
  DType stored_dtype = DType::kF32;
  // Set for ggml block-quantized data (see above).
  std::optional<quant::GgmlType> quant_type;
  // The ggml type of the data in the file (what GetModel calls the stored
  // type): quant types, f32/f16/bf16.
  quant::GgmlType stored_type = quant::GgmlType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
  int64_t num_elements() const;
  const float* f32() const { return static_cast<const float*>(data); }
  // The served ggml type: *quant_type, else F32/F16/BF16 for dtype
  // (integer tensors report kF32; see type_name()).
  quant::GgmlType ggml_type() const;
  // ggml's name of the served type: "q4_K", "q8_0", "bf16", "f32"; "i32" /
  // "i64" for integer tensors.
  std::string type_name() const;
};

// The ggml type of a plain dtype (F32/F16/BF16; integers -> kF32).
quant::GgmlType GgmlTypeOf(DType dtype);

struct SourceFileInfo {
  std::string path;
  // "llama2c", "safetensors", "safetensors.index.json", "config.json", "gguf"
  std::string format;
  int64_t size_bytes = 0;
  // Lowercase hex, computed once at load. With
  // LoadOptions::sha256_in_background it is computed on a background thread
  // after the model is ready: empty (and sha256_pending) until then, see
  // Checkpoint::SourceFilesSnapshot().
  std::string sha256;
  bool sha256_pending = false;
  // True when at least one tensor is served in place from this file's mapping.
  bool memory_mapped = false;
};

// What every loader records of an opened file: path, `format`, size. The
// small JSON files ("config.json", "safetensors.index.json") are hashed now;
// weight files later, by Checkpoint::HashFiles (LoadCheckpoint), possibly in
// the background. memory_mapped is the loader's to set.
SourceFileInfo DescribeSourceFile(const MappedFile& file, std::string format);

// Canonical tensor names (Hugging Face Llama names, whatever the file form):
//   kEmbedTokens  "model.embed_tokens.weight"  [vocab_size, hidden_size]
//   kLmHead       "lm_head.weight"             [vocab_size, hidden_size]
//                 (absent when the head is tied: use the embedding)
//   kFinalNorm    "model.norm.weight"          [hidden_size]
// Per layer N (for the e2e test runner), llama2.c arrays map to:
//   model.layers.N.input_layernorm.weight          [hidden]
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight [out, in]
//   model.layers.N.post_attention_layernorm.weight [hidden]
//   model.layers.N.mlp.{gate,up,down}_proj.weight  [out, in]
// Note: llama2.c q/k rows are in INTERLEAVED rotary order; HF safetensors
// Llama files are permuted for HALF_SPLIT. `config.rope.pair_layout` tells.
// Dtypes: the embedding table and the LM head ("tables") are served from
// the mapping without a copy in their stored type: F32, BF16, F16 (the
// model converts F16 once, straight from the mapping, into its serving
// dtype) or a served ggml quant type (GGUF); Model's LM head then reads
// a huge-page copy of an F32 / BF16 table (Model::Options::head_huge_pages). The
// other canonical tensors
// (norms, biases, learned positions) are small and always F32 after
// loading (F16/BF16/quantized ones converted once into owned buffers).
// Other tensors keep their stored dtype and point into the mapping (copied
// only when misaligned for their element type).
inline constexpr char kEmbedTokens[] = "model.embed_tokens.weight";
inline constexpr char kLmHead[] = "lm_head.weight";
inline constexpr char kFinalNorm[] = "model.norm.weight";
// Optional canonical tensors (F32 after loading, like the three above):
//   kFinalNormBias     "model.norm.bias"         [hidden_size]  LayerNorm bias
//                      (gpt2 ln_f, gpt_neox final_layer_norm, phi
//                      final_layernorm; absent = zero bias)
//   kLmHeadBias        "lm_head.bias"            [vocab_size]   (phi)
//   kPositionEmbeddings "transformer.wpe.weight" [max_positions, hidden_size]
//                      learned absolute positions (gpt2 wpe, GGUF position_embd)
inline constexpr char kFinalNormBias[] = "model.norm.bias";
inline constexpr char kLmHeadBias[] = "lm_head.bias";
inline constexpr char kPositionEmbeddings[] = "transformer.wpe.weight";
// The embedding module's extras (ModelConfig::embedding_token_type /
// embedding_layer_norm; F32 after loading):
//   kTokenTypeEmbeddings "embeddings.token_type_embeddings.weight"
//                        [type_vocab_size, hidden_size] (BERT, RoBERTa, Nomic BERT;
//                        GGUF token_types.weight)
//   kEmbedNorm, kEmbedNormBias "embeddings.LayerNorm.{weight,bias}" [hidden_size]
//                        (BERT embeddings.LayerNorm, Nomic emb_ln, BLOOM
//                        word_embeddings_layernorm; GGUF token_embd_norm)
inline constexpr char kTokenTypeEmbeddings[] = "embeddings.token_type_embeddings.weight";
inline constexpr char kEmbedNorm[] = "embeddings.LayerNorm.weight";
inline constexpr char kEmbedNormBias[] = "embeddings.LayerNorm.bias";
// True for the canonical tensors above (the served ones).
bool IsCanonicalTensor(const std::string& name);
// True for kEmbedTokens and kLmHead (served in their stored type).
bool IsTableTensor(const std::string& name);

class Checkpoint {
 public:
  const ModelConfig& config() const { return config_; }
  // The files as loaded (a pending background sha256 is empty here).
  const std::vector<SourceFileInfo>& source_files() const { return files_; }
  // source_files() with background sha256 results merged in (thread-safe).
  std::vector<SourceFileInfo> SourceFilesSnapshot() const;
  // Blocks until every background sha256 is done (or `timeout` passes);
  // true when done.
  bool WaitForSha256(std::chrono::milliseconds timeout) const;
  // Hashes every mapped file whose sha256 is empty: now, or on a
  // background thread (LoadCheckpoint calls this).
  void HashFiles(bool background);
  Checkpoint() = default;
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;
  // Stops and joins a running background hash.
  ~Checkpoint();
  const std::map<std::string, WeightTensor>& tensors() const { return tensors_; }
  // nullptr if absent.
  const WeightTensor* Find(const std::string& name) const;
  // The embedding table [vocab_size, hidden_size].
  const WeightTensor& embedding() const;
  // The LM head [vocab_size, hidden_size]: the embedding itself when tied.
  const WeightTensor& lm_head() const;
  // OK while every file tensors are served from in place (memory_mapped) is
  // unchanged on disk; FAILED_PRECONDITION naming the file once one was
  // truncated or modified in place (MappedFile::CheckIntact). Model checks
  // this before and after each computation that reads the weights, so a
  // changed file gives an error, never a SIGBUS or a silently wrong answer.
  absl::Status CheckFiles() const;
  // Bytes of the served tensors (the canonical ones: embedding table, LM
  // head, final norm and biases, learned positions), mapped or owned, tied
  // head counted once. Transformer-layer tensors a file also holds are
  // not counted (nothing reads them while serving).
  int64_t resident_bytes() const;
  // The mapping that holds [p, p + n), or nullptr (owned buffer).
  const MappedFile* MappingOf(const void* p, size_t n) const;

  // Builder interface used by the loaders.
  ModelConfig& mutable_config() { return config_; }
  void AddFile(std::unique_ptr<MappedFile> file, SourceFileInfo info);
  void AddSourceInfo(SourceFileInfo info) { files_.push_back(std::move(info)); }
  void AddTensor(std::string name, WeightTensor tensor) {
    tensors_[std::move(name)] = std::move(tensor);
  }
  // Keeps `buffer` alive for tensors that point into it.
  void AdoptBuffer(std::vector<uint8_t> buffer) {
    owned_.push_back(std::make_unique<std::vector<uint8_t>>(std::move(buffer)));
  }
  const std::vector<uint8_t>& last_buffer() const { return *owned_.back(); }
  // Keeps `buffer` alive for tensors that point into it; returns its data.
  const uint8_t* AdoptBuffer(HugePageBuffer buffer) {
    owned_huge_.push_back(std::move(buffer));
    return owned_huge_.back().data();
  }
  // Frees the owned buffer starting at `data` (no-op if `data` is not the
  // start of an owned buffer, e.g. a mapping). Callers first repoint every
  // tensor that used it (the model does, when it re-encodes the table).
  void ReleaseBuffer(const void* data);
  // Checks the canonical tensors exist with the config's shapes and the head
  // rule (untied without lm_head -> FAILED_PRECONDITION naming the tensor).
  // Tables may be F32/F16/BF16 or a served quant type whose block size
  // divides hidden_size; other canonical tensors must be F32/F16/BF16.
  absl::Status Finalize();

 private:
  ModelConfig config_;
  std::vector<SourceFileInfo> files_;
  std::vector<std::unique_ptr<MappedFile>> mappings_;
  std::vector<const MappedFile*> served_mappings_;  // those with memory_mapped
  std::vector<std::unique_ptr<std::vector<uint8_t>>> owned_;
  std::vector<HugePageBuffer> owned_huge_;  // data() stays put when moved
  std::map<std::string, WeightTensor> tensors_;
  // (index in files_, mapping) of files still to hash.
  std::vector<std::pair<size_t, const MappedFile*>> to_hash_;
  mutable std::mutex hash_mu_;
  mutable std::condition_variable hash_cv_;
  std::map<size_t, std::string> hashed_;  // background results by files_ index
  bool hashing_ = false;
  std::atomic<bool> cancel_hash_{false};
  std::thread hasher_;
};

struct LoadOptions {
  // Compute the weight files' sha256 on a background thread so the model
  // serves as soon as it is mapped (GetModel shows sha256_pending until
  // done). false: computed before LoadCheckpoint returns.
  bool sha256_in_background = false;
};

// Loads `path`:
//   - a directory holding config.json + model.safetensors (HF form), or
//     config.json + model.safetensors.index.json and its shards (every
//     tensor must sit in the shard the index names; shard names are plain
//     file names in the directory),
//   - a directory X without config.json holding X.bin (llama2.c),
//   - a file ending in ".bin" (llama2.c legacy checkpoint),
//   - a file ending in ".safetensors" or ".safetensors.index.json" with
//     config.json beside it.
//   - a file ending in ".gguf" (GGUF v2/v3, see lib/checkpoint/gguf_checkpoint.h),
//   - a directory X without config.json holding X.gguf,
//   - a directory without config.json, X.bin or X.gguf holding exactly one
//     *.gguf or *.bin file, whatever its name (INVALID_ARGUMENT listing
//     the files when there are several).
// Hugging Face tensor names are mapped to the canonical names above per
// config.json family (lib/checkpoint/hf_config.h HfCanonicalTensorNames).
// Errors: NOT_FOUND for a missing path, INVALID_ARGUMENT for malformed
// files (message names the file and the rule broken), FAILED_PRECONDITION
// for a missing required tensor.
absl::StatusOr<std::unique_ptr<Checkpoint>> LoadCheckpoint(const std::string& path,
                                                           const LoadOptions& options = {});

}  // namespace vocabd

#endif  // VOCABD_LIB_CHECKPOINT_CHECKPOINT_H_
