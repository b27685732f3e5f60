// `vocabctl embed --ids 1,403,407 [--ids ...]` or `embed --text "Once upon"`
// (tokenized first with TokenizerService/Tokenize): EmbeddingService/Embed,
// one sequence per --ids / --text; prints the first --show values of each
// token's row.
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
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

struct EmbedOptions {
  std::vector<std::string> ids;  // one comma-separated sequence each
  std::vector<std::string> texts;  // or: texts, tokenized by the model's tokenizer
  std::vector<int64_t> offsets;  // 1 (all sequences) or one per --ids
  std::string dtype = "f32";
  std::string positions = "default";
  std::string scale = "default";
  bool allow_beyond = false;
  int show = 8;
};

absl::StatusOr<int> RunEmbed(VocabdClient& client, const GlobalOptions& g, const EmbedOptions& o) {
  v1::EmbedRequest request;
  request.set_model(g.model);
  ASSIGN_OR_RETURN(DType dtype, ParseFloatDType(o.dtype));
  request.set_output_dtype(DTypeToProto(dtype));
  static const std::map<std::string, v1::AbsolutePositions> kPositions = {
      {"default", v1::ABSOLUTE_POSITIONS_MODEL_DEFAULT},
      {"none", v1::ABSOLUTE_POSITIONS_NONE},
      {"sinusoidal", v1::ABSOLUTE_POSITIONS_SINUSOIDAL},
      {"learned", v1::ABSOLUTE_POSITIONS_LEARNED}};
  static const std::map<std::string, v1::EmbeddingScale> kScales = {
      {"default", v1::EMBEDDING_SCALE_MODEL_DEFAULT},
      {"none", v1::EMBEDDING_SCALE_NONE},
      {"sqrt-hidden", v1::EMBEDDING_SCALE_SQRT_HIDDEN}};
  request.set_absolute_positions(kPositions.at(o.positions));
  request.set_embedding_scale(kScales.at(o.scale));
  request.set_allow_beyond_trained_length(o.allow_beyond);
  std::vector<std::vector<int64_t>> sequences;
  if (!o.texts.empty()) {
    // --text: TokenizerService/Tokenize first (special tokens as the
    // tokenizer adds them, e.g. BOS).
    v1::TokenizeRequest tokenize;
    tokenize.set_model(g.model);
    for (const std::string& t : o.texts) tokenize.add_texts(t);
    ASSIGN_OR_RETURN(v1::TokenizeResponse tokens, client.Tokenize(tokenize));
    for (const v1::TokenizedText& t : tokens.results()) {
      sequences.emplace_back(t.ids().begin(), t.ids().end());
    }
  }
  for (const std::string& list : o.ids) {
    ASSIGN_OR_RETURN(sequences.emplace_back(), ParseIdList(list));
  }
  std::vector<int64_t> all_ids;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const std::vector<int64_t>& ids = sequences[i];
    v1::TokenSequence* seq = request.add_sequences();
    seq->mutable_token_ids()->Assign(ids.begin(), ids.end());
    if (!o.offsets.empty())
      seq->set_position_offset(o.offsets.size() == 1 ? o.offsets[0] : o.offsets[i]);
    all_ids.insert(all_ids.end(), ids.begin(), ids.end());
  }
  ASSIGN_OR_RETURN(v1::EmbedResponse response, client.Embed(request));
  ASSIGN_OR_RETURN(std::vector<float> values,
                   DecodeFloatTensor(response.embeddings(), "embeddings"));
  const auto& shape = response.embeddings().shape();
  if (shape.size() != 2) {
    return absl::InternalError(absl::StrCat("server returned embeddings of shape ",
                                            ShapeString(response.embeddings().shape()),
                                            "; expected [tokens, hidden]"));
  }
  const int64_t rows = shape[0], width = shape[1];
  std::vector<int64_t> offsets(response.sequence_offsets().begin(),
                               response.sequence_offsets().end());
  if (g.json) {
    PrintJsonCompact({{"model", response.model()},
                      {"dtype", v1::DType_Name(response.embeddings().dtype())},
                      {"shape", ShapeJson(response.embeddings())},
                      {"sequence_offsets", offsets},
                      {"token_ids", all_ids},
                      {"embeddings", MatrixJson(values.data(), rows, width)}});
    return kExitOk;
  }
  std::cout << "model: " << response.model() << "\n"
            << "shape: " << ShapeString(response.embeddings().shape()) << " "
            << v1::DType_Name(response.embeddings().dtype()) << "\n";
  const int64_t show = std::min<int64_t>(o.show, width);
  size_t seq = 0;
  for (int64_t r = 0; r < rows; ++r) {
    while (seq + 1 < offsets.size() && r >= offsets[seq + 1]) ++seq;
    if (offsets.size() > 2 && seq + 1 < offsets.size() && r == offsets[seq]) {
      std::cout << "sequence " << seq << ":\n";
    }
    const std::string id =
        r < static_cast<int64_t>(all_ids.size()) ? absl::StrCat(all_ids[r]) : "?";
    std::cout << absl::StrFormat("  [%d] id %5s:", r, id)
              << CellRow(values.data() + r * width, show, width) << "\n";
  }
  return kExitOk;
}

// Exactly one of --ids / --text; --offset: once, or once per sequence.
void CheckEmbed(const EmbedOptions& o) {
  if (o.ids.empty() == o.texts.empty()) {
    throw CLI::ValidationError("--ids/--text", "give --ids or --text (not both)");
  }
  if (o.offsets.size() > 1 && o.offsets.size() != o.ids.size() + o.texts.size()) {
    throw CLI::ValidationError("--offset",
                               absl::StrCat("given ", o.offsets.size(), " times for ", o.ids.size(),
                                            " --ids; give it once or once per --ids"));
  }
}

}  // namespace

void RegisterEmbedCommand(CLI::App& app, CommandContext& context) {
  auto [cmd, o] =
      context.AddCommand(app, "embed", "token ids -> embedding rows", RunEmbed, CheckEmbed);
  cmd->add_option("--ids", o->ids, "comma-separated token ids; repeat for more sequences")
      ->check(IdListValidator())
      ->allow_extra_args(false);
  cmd->add_option("--text", o->texts,
                  "text to tokenize with the model's tokenizer (Tokenize), then embed; repeat "
                  "for more sequences")
      ->allow_extra_args(false);
  cmd->add_option("--offset", o->offsets,
                  "position offset: once for all sequences or once per --ids")
      ->allow_extra_args(false);
  cmd->add_option("--dtype", o->dtype, "output dtype")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--positions", o->positions, "absolute positions added")
      ->check(CLI::IsMember({"default", "none", "sinusoidal", "learned"}))
      ->capture_default_str();
  cmd->add_option("--scale", o->scale, "embedding scale")
      ->check(CLI::IsMember({"default", "none", "sqrt-hidden"}))
      ->capture_default_str();
  cmd->add_flag("--allow-beyond,--allow-beyond-trained-length", o->allow_beyond,
                "allow sinusoidal positions >= max_position_embeddings "
                "(allow_beyond_trained_length)");
  cmd->add_option("--show", o->show, "values printed per token")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

}  // namespace vocabd::cli
