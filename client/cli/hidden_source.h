// Where `logits`, `score` and `score-stream` take their hidden states
// [N, hidden_size] from: --hidden-file (raw f32 rows), --random N (seeded
// normal rows) or --from-ids (the Embed rows of these ids), sent in
// --input-dtype.
#ifndef VOCABD_CLIENT_CLI_HIDDEN_SOURCE_H_
#define VOCABD_CLIENT_CLI_HIDDEN_SOURCE_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "client/cli/command.h"
#include "client/vocabd_client.h"
#include "vocabd/v1/tensor.pb.h"

namespace vocabd::cli {

// Exactly one of hidden_file, random_rows, from_ids is set.
struct HiddenSource {
  std::string hidden_file;
  int64_t random_rows = 0;
  std::string from_ids;
  uint64_t seed = 0;
  std::string input_dtype = "f32";
};

// Adds the "hidden source" option group (exactly one required), --seed and
// --input-dtype to `sub`.
void AddHiddenSource(CLI::App* sub, HiddenSource* s);

// Builds the hidden tensor [N, hidden] from the chosen source (--from-ids
// calls Embed; the others read hidden_size from GetModel).
absl::StatusOr<v1::Tensor> BuildHidden(VocabdClient& client, const GlobalOptions& g,
                                       const HiddenSource& s);

}  // namespace vocabd::cli

#endif  // VOCABD_CLIENT_CLI_HIDDEN_SOURCE_H_
