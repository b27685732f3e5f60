// How each model's LM head is served: weights dtype and dynamic batching,
// from the vocabd flags
//   --weights-dtype [NAME=]DTYPE        (repeatable; DTYPE auto|f32|bf16|q8_0;
//                                        no NAME = every model)
//   --tokenizer NAME=PATH               (repeatable; a tokenizer file or
//                                        folder for model NAME instead of the
//                                        one its checkpoint carries)
//   --dynamic-batching=true|false       (false: one GEMM per call)
//   --max-batch-rows N, --max-queue-delay-us N, --max-queue-rows N
//                                       (defaults for every model)
//   --batching NAME:KEY=VALUE           (repeatable per-model override; KEY
//                                        max_batch_rows | max_queue_delay_us |
//                                        max_queue_rows | enabled (true/false))
// See docs/operating.md ("Flags", "Dynamic batching") and docs/performance.md
// ("How the LM head runs").
#ifndef VOCABD_SERVER_MODEL_SERVING_OPTIONS_H_
#define VOCABD_SERVER_MODEL_SERVING_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/serving/compute_pool.h"
#include "lib/serving/dynamic_batcher.h"
#include "lib/serving/model.h"

namespace vocabd {

struct ModelServingOptions {
  struct Override {
    std::optional<bool> enabled;
    std::optional<int64_t> max_batch_rows;
    std::optional<int64_t> max_queue_delay_us;
    std::optional<int64_t> max_queue_rows;
  };
  bool dynamic_batching = true;
  // Defaults for every model (on_batch is ignored; see ForModel).
  DynamicBatcher::Options batching;
  std::map<std::string, Override> per_model;
  // "" = every model without its own entry.
  std::map<std::string, WeightsDType> weights_dtype;
  // --tokenizer NAME=PATH: Model::Options::tokenizer_path per model name.
  std::map<std::string, std::string> tokenizer_paths;
  // Tests and programs that embed VocabdServer: supplies a model's tokenizer
  // (Model::Options::tokenizer_factory) given its name; unset = what the
  // checkpoint carries.
  std::function<absl::StatusOr<std::unique_ptr<Tokenizer>>(const std::string& name,
                                                           const Checkpoint& checkpoint)>
      tokenizer_factory;

  // Parses one --batching "NAME:KEY=VALUE" / --weights-dtype "[NAME=]DTYPE"
  // flag into this. INVALID_ARGUMENT naming the flag and the bad part.
  absl::Status AddBatchingFlag(const std::string& flag);
  absl::Status AddWeightsDTypeFlag(const std::string& flag);
  // Parses one --tokenizer "NAME=PATH" flag (INVALID_ARGUMENT naming it when
  // NAME or PATH is empty or the name repeats).
  absl::Status AddTokenizerFlag(const std::string& flag);
  // INVALID_ARGUMENT for bad values (named like the flags) in the defaults or
  // any override.
  absl::Status Validate() const;

  // Model::Options for model `name` at `path`: its weights dtype and, when
  // batching is on for it, its batcher options with `on_batch` as hook.
  Model::Options ForModel(const std::string& name, const std::string& path, ComputePool* pool,
                          std::function<void(int64_t)> on_batch) const;
};

// "auto" | "f32" | "bf16" (case-insensitive).
absl::StatusOr<WeightsDType> ParseWeightsDType(const std::string& text);
const char* WeightsDTypeName(WeightsDType dtype);

}  // namespace vocabd

#endif  // VOCABD_SERVER_MODEL_SERVING_OPTIONS_H_
