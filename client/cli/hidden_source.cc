// The hidden-state source of `logits`, `score` and `score-stream` (see
// client/cli/hidden_source.h).
#include "client/cli/hidden_source.h"

#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/cli/common.h"
#include "lib/core/status_macros.h"
#include "proto/tensor_codec.h"

namespace vocabd::cli {

void AddHiddenSource(CLI::App* sub, HiddenSource* s) {
  CLI::App* group = sub->add_option_group("hidden source", "where the hidden states come from");
  group
      ->add_option("--hidden-file", s->hidden_file,
                   "raw little-endian f32 file of [N, hidden_size] rows")
      ->check(CLI::ExistingFile);
  group->add_option("--random", s->random_rows, "N seeded standard-normal rows (see --seed)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  group
      ->add_option("--from-ids", s->from_ids,
                   "embed these ids (comma-separated) and use the rows as hidden states")
      ->check(IdListValidator());
  group->require_option(1);
  sub->add_option("--seed", s->seed, "seed for --random")->capture_default_str();
  sub->add_option("--input-dtype", s->input_dtype, "dtype the hidden states are sent in")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
}

absl::StatusOr<v1::Tensor> BuildHidden(VocabdClient& client, const GlobalOptions& g,
                                       const HiddenSource& s) {
  ASSIGN_OR_RETURN(DType dtype, ParseFloatDType(s.input_dtype));
  if (!s.from_ids.empty()) {
    ASSIGN_OR_RETURN(std::vector<int64_t> ids, ParseIdList(s.from_ids));
    v1::EmbedRequest request;
    request.set_model(g.model);
    request.set_output_dtype(DTypeToProto(dtype));
    request.add_sequences()->mutable_token_ids()->Assign(ids.begin(), ids.end());
    ASSIGN_OR_RETURN(v1::EmbedResponse response, client.Embed(request));
    return response.embeddings();
  }
  ASSIGN_OR_RETURN(v1::ModelInfo info, client.GetModel(g.model));
  const int64_t hidden = info.hidden_size();
  if (hidden <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", info.name(), "' reports hidden_size ", hidden));
  }
  if (!s.hidden_file.empty()) {
    ASSIGN_OR_RETURN(std::string bytes, ReadFile(s.hidden_file));
    const int64_t row_bytes = hidden * static_cast<int64_t>(sizeof(float));
    if (bytes.empty() || static_cast<int64_t>(bytes.size()) % row_bytes != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--hidden-file '", s.hidden_file, "' has ", bytes.size(),
                       " bytes; expected a positive multiple of hidden_size ", hidden,
                       " x 4 (raw little-endian f32 [N, ", hidden, "])"));
    }
    const int64_t n = static_cast<int64_t>(bytes.size()) / row_bytes;
    std::vector<float> values(static_cast<size_t>(n * hidden));
    std::memcpy(values.data(), bytes.data(), bytes.size());
    return EncodeFloatTensor(values, {n, hidden}, dtype);
  }
  const int64_t n = s.random_rows;
  return EncodeFloatTensor(RandomNormal(static_cast<size_t>(n * hidden), s.seed), {n, hidden},
                           dtype);
}

}  // namespace vocabd::cli
