// `vocabctl logits SOURCE`: ScoringService/ComputeLogits on hidden states
// from SOURCE (client/cli/hidden_source.h); prints the --top largest values
// of each row (--json: every row plus `top`).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/commands.h"
#include "client/cli/common.h"
#include "client/cli/hidden_source.h"
#include "client/cli/output.h"
#include "lib/core/shape.h"
#include "lib/core/status_macros.h"
#include "proto/tensor_codec.h"

namespace vocabd::cli {
namespace {

struct LogitsOptions {
  HiddenSource source;
  bool no_final_norm = false;
  float temperature = 0;
  bool log_softmax = false;
  int top = 5;
  std::string dtype = "f32";
  int64_t vocab_limit = 0;
  bool allow_non_finite = false;
};

// Indices of the `n` largest values of row[0, width), highest first, ties by
// lower index (the server's top-k convention). NaN sorts last.
std::vector<int64_t> TopIndices(const float* row, int64_t width, int n) {
  std::vector<int64_t> idx(width);
  std::iota(idx.begin(), idx.end(), 0);
  const int64_t k = std::min<int64_t>(n, width);
  auto better = [row](int64_t a, int64_t b) {
    const float x = row[a], y = row[b];
    if (std::isnan(x) != std::isnan(y)) return std::isnan(y);
    if (x != y) return x > y;
    return a < b;
  };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), better);
  idx.resize(k);
  return idx;
}

absl::StatusOr<int> RunLogits(VocabdClient& client, const GlobalOptions& g,
                              const LogitsOptions& o) {
  v1::ComputeLogitsRequest request;
  request.set_model(g.model);
  ASSIGN_OR_RETURN(*request.mutable_hidden(), BuildHidden(client, g, o.source));
  if (o.no_final_norm) request.set_apply_final_norm(false);
  request.set_temperature(o.temperature);
  request.set_log_softmax(o.log_softmax);
  request.set_vocab_limit(o.vocab_limit);
  request.set_allow_non_finite(o.allow_non_finite);
  ASSIGN_OR_RETURN(DType dtype, ParseFloatDType(o.dtype));
  request.set_output_dtype(DTypeToProto(dtype));
  ASSIGN_OR_RETURN(v1::ComputeLogitsResponse response, client.ComputeLogits(request));
  ASSIGN_OR_RETURN(std::vector<float> logits, DecodeFloatTensor(response.logits(), "logits"));
  const auto& shape = response.logits().shape();
  if (shape.size() != 2) {
    return absl::InternalError(
        absl::StrCat("server returned logits of shape ", ShapeString(response.logits().shape())));
  }
  const int64_t rows = shape[0], vocab = shape[1];
  const char* kind = o.log_softmax ? "logprobs" : "logits";
  if (g.json) {
    json top = json::array();
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = logits.data() + r * vocab;
      json t = json::array();
      for (int64_t id : TopIndices(row, vocab, o.top))
        t.push_back({{"id", id}, {"value", row[id]}});
      top.push_back(t);
    }
    PrintJsonCompact({{"model", response.model()},
                      {"kind", kind},
                      {"dtype", v1::DType_Name(response.logits().dtype())},
                      {"shape", ShapeJson(response.logits())},
                      {"top", top},
                      {"logits", MatrixJson(logits.data(), rows, vocab)}});
    return kExitOk;
  }
  std::cout << "model: " << response.model() << "\n"
            << kind << ": " << ShapeString(response.logits().shape()) << " "
            << v1::DType_Name(response.logits().dtype()) << "\n";
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * vocab;
    std::string line = absl::StrFormat("  row %d top %d:", r, std::min<int64_t>(o.top, vocab));
    for (int64_t id : TopIndices(row, vocab, o.top)) {
      line += absl::StrCat("  ", id, " (", Num(row[id]), ")");
    }
    std::cout << line << "\n";
  }
  return kExitOk;
}

}  // namespace

void RegisterLogitsCommand(CLI::App& app, CommandContext& context) {
  auto [cmd, o] = context.AddCommand(app, "logits", "hidden states -> LM-head logits", RunLogits);
  AddHiddenSource(cmd, &o->source);
  cmd->add_flag("--no-final-norm", o->no_final_norm, "skip the checkpoint's final norm");
  cmd->add_option("--temperature", o->temperature, "divide logits by T (> 0; default 1)")
      ->check(GreaterThanZero());
  cmd->add_flag("--log-softmax", o->log_softmax, "return log-softmax(logits)");
  cmd->add_option("--top", o->top, "largest values printed per row")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "output dtype")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--vocab-limit", o->vocab_limit, "mask ids >= this (0 = none)");
  cmd->add_flag("--allow-non-finite", o->allow_non_finite,
                "compute rows holding NaN/Inf (allow_non_finite; default: refused)");
}

}  // namespace vocabd::cli
