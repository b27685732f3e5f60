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
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/core/dtype.h"
#include "lib/core/mapped_file.h"
#include "lib/checkpoint/model_config.h"

namespace vocabd {

// A read-only view of one tensor. Row-major; `data` stays valid as long as
// the Checkpoint that owns it.
struct WeightTensor {
  DType dtype = DType::kF32;
  // The dtype in the file; differs from `dtype` when the loader converted the
  // tensor (canonical F16/BF16 -> F32). Decides the default serving dtype.
  DType stored_dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
  int64_t num_elements() const;
  const float* f32() const { return static_cast<const float*>(data); }
};

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
// Dtypes: the three canonical tensors are always F32 after loading (F16/BF16
// safetensors are converted once into owned buffers; F32 is used in place
// from the mapping). Other tensors keep their stored dtype and point into
// the mapping (copied only when misaligned for their element type).
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
// True for the canonical tensors above (served in F32 whatever the stored
// float dtype).
bool IsCanonicalTensor(const std::string& name);

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
  // Bytes of tensor data held (mapped or owned) over all tensors(), tied
  // head counted once.
  int64_t resident_bytes() const;

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
  // Frees the owned buffer starting at `data` (no-op if `data` is not the
  // start of an owned buffer, e.g. a mapping). Callers first repoint every
  // tensor that used it (the model does, when it re-encodes the table).
  void ReleaseBuffer(const void* data);
  // Checks the canonical tensors exist with the config's shapes and the head
  // rule (untied without lm_head -> FAILED_PRECONDITION naming the tensor).
  absl::Status Finalize();

 private:
  ModelConfig config_;
  std::vector<SourceFileInfo> files_;
  std::vector<std::unique_ptr<MappedFile>> mappings_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> owned_;
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
