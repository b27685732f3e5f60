// The vocabd RPCs as load-generator workloads (client/load_generator.h):
// request payloads generated from a shape or read from files, async
// callback-API calls on per-connection stubs, and optional verification
// of kept responses against a BenchReference (client/bench_verify.h).
#ifndef VOCABD_CLIENT_BENCH_WORKLOADS_H_
#define VOCABD_CLIENT_BENCH_WORKLOADS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/bench_verify.h"
#include "client/load_generator.h"
#include "vocabd/v1/model.pb.h"

namespace vocabd {

struct BenchPayloadOptions {
  // "embed", "logits", "score" or "rope".
  std::string rpc = "embed";
  std::string model;  // request.model ("" = server default)
  // embed: tokens per sequence; rope: positions per sequence (S).
  int64_t tokens = 128;
  // embed: sequences; logits/score: hidden rows; rope: batch (B).
  int64_t rows = 1;
  // logits/score: hidden width sent (0 = the model's hidden_size).
  int64_t hidden = 0;
  // embed/logits: output dtype; "f32", "f16", "bf16".
  std::string dtype = "f32";
  // logits/score/rope: dtype of the hidden / q / k tensors sent.
  std::string input_dtype = "f32";
  // score: top-k per row (0..1024) and whether to send one target per row.
  int top_k = 0;
  bool targets = true;
  // Distinct generated payloads, used round-robin.
  int payloads = 8;
  uint64_t seed = 1;
  // When non-empty, payloads are read from these files instead: ".json"
  // (protobuf JSON mapping), ".txtpb"/".textproto"/".pbtxt" (text format),
  // anything else binary wire format. One request message per file.
  std::vector<std::string> payload_files;
};

// Builds the workload. `model` supplies vocab_size / hidden_size / heads /
// head_dim for generated payloads; `reference` (may be null) enables
// Verify(). INVALID_ARGUMENT naming the option for bad shapes / files.
absl::StatusOr<std::unique_ptr<Workload>> MakeBenchWorkload(
    const BenchPayloadOptions& options, const v1::ModelInfo& model,
    std::shared_ptr<const BenchReference> reference);

// Writes generated payload 0 of `options` to `path` (format by extension as
// for payload_files), so it can be edited and replayed with --payload-file.
absl::Status SaveBenchPayload(const BenchPayloadOptions& options, const v1::ModelInfo& model,
                              const std::string& path);

}  // namespace vocabd

#endif  // VOCABD_CLIENT_BENCH_WORKLOADS_H_
