// `vocabctl embed-stream --ids 1,403,407 [--ids ...]`: EmbeddingService/
// EmbedStream, one EmbedRequest (one sequence) per --ids, all on one stream;
// each response printed as `embed` prints it.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/commands.h"
#include "client/cli/common.h"
#include "client/cli/output.h"
#include "lib/core/shape.h"
#include "lib/core/status_macros.h"
#include "proto/tensor_codec.h"

namespace vocabd::cli {
namespace {

struct EmbedStreamOptions {
  std::vector<std::string> ids;  // one request each
  std::string dtype = "f32";
  int show = 8;
};

absl::StatusOr<int> RunEmbedStream(VocabdClient& client, const GlobalOptions& g,
                                   const EmbedStreamOptions& o) {
  ASSIGN_OR_RETURN(DType dtype, ParseFloatDType(o.dtype));
  std::vector<v1::EmbedRequest> requests;
  std::vector<std::vector<int64_t>> ids;
  for (const std::string& list : o.ids) {
    ASSIGN_OR_RETURN(ids.emplace_back(), ParseIdList(list));
    v1::EmbedRequest& request = requests.emplace_back();
    request.set_model(g.model);
    request.set_output_dtype(DTypeToProto(dtype));
    request.add_sequences()->mutable_token_ids()->Assign(ids.back().begin(), ids.back().end());
  }
  ASSIGN_OR_RETURN(std::vector<v1::EmbedResponse> responses, client.EmbedStream(requests));
  json out = json::array();
  for (size_t i = 0; i < responses.size(); ++i) {
    const v1::EmbedResponse& response = responses[i];
    ASSIGN_OR_RETURN(std::vector<float> values,
                     DecodeFloatTensor(response.embeddings(), "embeddings"));
    const auto& shape = response.embeddings().shape();
    if (shape.size() != 2) {
      return absl::InternalError(absl::StrCat("server returned embeddings of shape ",
                                              ShapeString(shape), "; expected [tokens, hidden]"));
    }
    const int64_t rows = shape[0], width = shape[1];
    if (g.json) {
      out.push_back({{"model", response.model()},
                     {"dtype", v1::DType_Name(response.embeddings().dtype())},
                     {"shape", ShapeJson(response.embeddings())},
                     {"token_ids", ids[i]},
                     {"embeddings", MatrixJson(values.data(), rows, width)}});
      continue;
    }
    std::cout << "response " << i << " (--ids " << o.ids[i] << "):\n"
              << "model: " << response.model() << "\n"
              << "shape: " << ShapeString(shape) << " "
              << v1::DType_Name(response.embeddings().dtype()) << "\n";
    const int64_t show = std::min<int64_t>(o.show, width);
    for (int64_t r = 0; r < rows; ++r) {
      const std::string id =
          r < static_cast<int64_t>(ids[i].size()) ? absl::StrCat(ids[i][r]) : "?";
      std::cout << absl::StrFormat("  [%d] id %5s:", r, id)
                << CellRow(values.data() + r * width, show, width) << "\n";
    }
  }
  if (g.json) PrintJsonCompact({{"responses", out}});
  return kExitOk;
}

}  // namespace

void RegisterEmbedStreamCommand(CLI::App& app, CommandContext& context) {
  auto [cmd, o] = context.AddCommand(
      app, "embed-stream", "EmbedStream: one EmbedRequest per --ids, all on one stream",
      RunEmbedStream);
  cmd->add_option("--ids", o->ids, "comma-separated token ids of one request; repeat for more")
      ->required()
      ->check(IdListValidator())
      ->allow_extra_args(false);
  cmd->add_option("--dtype", o->dtype, "output dtype")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--show", o->show, "values printed per token")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

}  // namespace vocabd::cli
