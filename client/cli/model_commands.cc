// `vocabctl models [NAME]` (ListModels table, or every field of one model),
// `vocabctl load NAME` (LoadModel; prints the model as `models NAME` does)
// and `vocabctl unload NAME` (UnloadModel).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/commands.h"
#include "client/cli/output.h"
#include "lib/core/status_macros.h"

namespace vocabd::cli {
namespace {

// The NAME argument of `models` (empty: list all), `load` and `unload`.
struct ModelNameOptions {
  std::string name;
};

std::string RopeSummary(const v1::ModelInfo& m) {
  if (m.position_scheme() != v1::POSITION_ROPE) {
    std::string scheme = v1::PositionScheme_Name(m.position_scheme());
    return scheme == "POSITION_SCHEME_UNSPECIFIED" ? "-" : scheme;
  }
  return absl::StrCat(Num(m.rope().theta()), "/", PairLayoutName(m.rope().pair_layout()));
}

void PrintModelDetail(const v1::ModelInfo& m) {
  std::vector<std::vector<std::string>> rows = {
      {"name:", m.name() + (m.is_default() ? " (default)" : "")},
      {"state:", v1::ModelState_Name(m.state()) +
                     (m.state_reason().empty() ? "" : " (" + m.state_reason() + ")")},
      {"architecture:", m.architecture()},
      {"vocab_size:", absl::StrCat(m.vocab_size())},
      {"hidden_size:", absl::StrCat(m.hidden_size())},
      {"layers:", absl::StrCat(m.num_hidden_layers())},
      {"heads:", absl::StrCat(m.num_attention_heads(), " q / ", m.num_key_value_heads(),
                              " kv, head_dim ", m.head_dim())},
      {"max_positions:", absl::StrCat(m.max_position_embeddings())},
      {"dtype:", v1::DType_Name(m.dtype())},
      {"tied head:", m.tie_word_embeddings() ? "yes" : "no"},
      {"positions:", v1::PositionScheme_Name(m.position_scheme())},
  };
  if (m.position_scheme() == v1::POSITION_ROPE || m.has_rope()) {
    const v1::RopeConfig& r = m.rope();
    rows.push_back({"rope:", absl::StrCat("theta ", Num(r.theta()), ", rotary_dim ", r.rotary_dim(),
                                          ", head_dim ", r.head_dim(), ", pairs ",
                                          PairLayoutName(r.pair_layout()))});
    if (r.scaling().type() != v1::ROPE_SCALING_TYPE_UNSPECIFIED &&
        r.scaling().type() != v1::ROPE_SCALING_DEFAULT) {
      rows.push_back(
          {"rope scaling:", absl::StrCat(v1::RopeScalingType_Name(r.scaling().type()), ", factor ",
                                         Num(r.scaling().factor()), ", original_max ",
                                         r.scaling().original_max_position_embeddings())});
    }
  }
  if (m.position_scheme() == v1::POSITION_LEARNED) {
    rows.push_back({"learned positions:",
                    absl::StrCat("row = position + ", m.learned_position_offset(),
                                 m.learned_position_padding_idx() >= 0
                                     ? absl::StrCat(", pads (id ", m.learned_position_padding_idx(),
                                                    ") on row ", m.learned_position_padding_idx())
                                     : "")});
  }
  if (!m.lm_head_unsupported_reason().empty()) {
    rows.push_back({"lm head:", "not served: " + m.lm_head_unsupported_reason()});
  }
  rows.push_back({"final norm:", absl::StrCat(v1::NormKind_Name(m.final_norm().kind()), " eps ",
                                              Num(m.final_norm().eps()))});
  rows.push_back({"embedding scale:", Num(m.embedding_scale())});
  // The embedding module of BERT-style encoders and BLOOM, in Embed's order.
  if (m.embedding_token_type() || m.embedding_norm().kind() == v1::LAYER_NORM) {
    std::vector<std::string> parts;
    if (m.embedding_token_type()) parts.push_back("+ token_type_embeddings[0]");
    if (m.embedding_norm().kind() == v1::LAYER_NORM) {
      parts.push_back(absl::StrCat("then LAYER_NORM eps ", Num(m.embedding_norm().eps()), " (",
                                   m.embedding_norm().eps_key(), ")"));
    }
    rows.push_back({"embed module:", absl::StrJoin(parts, ", ")});
  }
  rows.push_back({"bos/eos:", absl::StrCat(m.bos_token_id(), " / ", m.eos_token_id())});
  rows.push_back({"requested dtype:", !m.requested_weights_type().empty()
                                          ? m.requested_weights_type()
                                      : m.requested_dtype() == v1::DTYPE_UNSPECIFIED
                                          ? std::string("auto")
                                          : v1::DType_Name(m.requested_dtype())});
  for (const auto& t : m.served_tensors()) {
    std::string shape;
    for (int64_t d : t.shape()) absl::StrAppend(&shape, shape.empty() ? "" : ", ", d);
    rows.push_back({"served:", absl::StrCat(t.name(), " ", t.ggml_type(), " [", shape, "] ",
                                            HumanBytes(t.bytes()),
                                            t.stored_ggml_type() != t.ggml_type()
                                                ? absl::StrCat(" (stored ", t.stored_ggml_type(), ")")
                                                : "")});
  }
  if (!m.dtype_fallback_reason().empty()) {
    rows.push_back({"dtype fallback:", m.dtype_fallback_reason()});
  }
  rows.push_back({"tokenizer:", m.has_tokenizer()
                                    ? absl::StrCat(m.tokenizer().kind(), " (", m.tokenizer().source(),
                                                   ", vocab_size ", m.tokenizer().vocab_size(), ")")
                                    : absl::StrCat("none: ", m.tokenizer_missing_reason())});
  if (!m.lm_head_implementation().empty()) {
    rows.push_back({"lm head kernels:", m.lm_head_implementation()});
  }
  if (!m.lm_head_memory().empty()) rows.push_back({"lm head memory:", m.lm_head_memory()});
  rows.push_back(
      {"batching:", m.has_batching()
                        ? absl::StrCat("max_batch_rows ", m.batching().max_batch_rows(),
                                       ", max_queue_delay_us ", m.batching().max_queue_delay_us(),
                                       ", max_queue_rows ", m.batching().max_queue_rows())
                        : std::string("off")});
  rows.push_back({"resident:", absl::StrCat(HumanBytes(m.resident_bytes()), " (",
                                            m.resident_bytes(), " bytes)")});
  for (const auto& f : m.source_files()) {
    rows.push_back(
        {"source:", absl::StrCat(f.path(), " [", f.format(), ", ", HumanBytes(f.size_bytes()),
                                 f.memory_mapped() ? ", mmap" : "", "]")});
    rows.push_back({"  sha256:", f.sha256()});
  }
  PrintTable(rows);
}

// The ggml type the LM head is served in ("q8_0", "q4_K", ...) when it is
// quantized, else ModelInfo.dtype's name ("F32", "BF16").
std::string HeadWeightType(const v1::ModelInfo& m) {
  for (const auto& t : m.served_tensors()) {
    const bool head = t.name() == "lm_head.weight" ||
                      (m.tie_word_embeddings() && t.name() == "model.embed_tokens.weight");
    if (head && t.ggml_type() != "f32" && t.ggml_type() != "bf16" && !t.ggml_type().empty()) {
      return t.ggml_type();
    }
  }
  return v1::DType_Name(m.dtype());
}

// ModelInfo as JSON without requested_dtype when it is DTYPE_UNSPECIFIED:
// that value stands for both auto and q8_0 (which DType cannot name);
// requested_weights_type always says which.
json ModelJson(const v1::ModelInfo& info) {
  json j = ProtoJson(info);
  if (info.requested_dtype() == v1::DTYPE_UNSPECIFIED) j.erase("requested_dtype");
  return j;
}

// `models NAME` and `load NAME`: every field of one model.
int PrintModel(const v1::ModelInfo& info, const GlobalOptions& g) {
  if (g.json) {
    PrintJson(ModelJson(info));
  } else {
    PrintModelDetail(info);
  }
  return kExitOk;
}

absl::StatusOr<int> RunModels(VocabdClient& client, const GlobalOptions& g,
                              const ModelNameOptions& o) {
  if (!o.name.empty()) {
    ASSIGN_OR_RETURN(v1::ModelInfo info, client.GetModel(o.name));
    return PrintModel(info, g);
  }
  ASSIGN_OR_RETURN(v1::ListModelsResponse list, client.ListModels());
  if (g.json) {
    json models = json::array();
    for (const auto& m : list.models()) models.push_back(ModelJson(m));
    PrintJson({{"models", models}});
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"NAME", "STATE", "ARCH", "VOCAB", "HIDDEN",
                                                 "DTYPE", "TIED", "ROPE(theta/pairs)", "HEAD",
                                                 "TOKENIZER", "RESIDENT"}};
  // Models that are not loaded (FAILED, AVAILABLE repository folders,
  // LOADING) have no architecture or sizes; FAILED rows get their reason
  // on a line below the table.
  std::vector<std::string> reasons;
  for (const auto& m : list.models()) {
    std::string state = v1::ModelState_Name(m.state());
    const std::string name = m.name() + (m.is_default() ? "*" : "");
    if (m.vocab_size() == 0 && m.state() != v1::READY) {
      rows.push_back({name, state, "-", "-", "-", "-", "-", "-", "-", "-", "-"});
      if (m.state() == v1::FAILED && !m.state_reason().empty()) {
        reasons.push_back(m.name() + ": " + m.state_reason());
      }
      continue;
    }
    rows.push_back({name, state, m.architecture(),
                    absl::StrCat(m.vocab_size()), absl::StrCat(m.hidden_size()),
                    HeadWeightType(m), m.tie_word_embeddings() ? "yes" : "no",
                    RopeSummary(m),
                    m.head_variant().name().empty() ? "plain" : m.head_variant().name(),
                    m.has_tokenizer() ? m.tokenizer().kind() : "none",
                    HumanBytes(m.resident_bytes())});
  }
  PrintTable(rows);
  for (const std::string& r : reasons) std::cout << "  " << r << "\n";
  if (list.models().empty()) std::cout << "(no models)\n";
  return kExitOk;
}

absl::StatusOr<int> RunLoad(VocabdClient& client, const GlobalOptions& g,
                            const ModelNameOptions& o) {
  ASSIGN_OR_RETURN(v1::ModelInfo info, client.LoadModel(o.name));
  return PrintModel(info, g);
}

absl::StatusOr<int> RunUnload(VocabdClient& client, const GlobalOptions& g,
                              const ModelNameOptions& o) {
  ASSIGN_OR_RETURN(v1::UnloadModelResponse response, client.UnloadModel(o.name));
  (void)response;  // empty message
  if (g.json) {
    PrintJson({{"name", o.name}, {"state", "UNLOADED"}});
  } else {
    std::cout << o.name << ": unloaded\n";
  }
  return kExitOk;
}

}  // namespace

void RegisterModelsCommand(CLI::App& app, CommandContext& context) {
  auto [cmd, o] =
      context.AddCommand(app, "models", "list models, or show one model's full info", RunModels);
  cmd->add_option("name", o->name, "model to describe");
}

void RegisterLoadCommand(CLI::App& app, CommandContext& context) {
  auto [cmd, o] = context.AddCommand(
      app, "load", "load a model-repository subfolder by name; waits until READY or failed",
      RunLoad);
  cmd->add_option("name", o->name, "repository subfolder")->required();
}

void RegisterUnloadCommand(CLI::App& app, CommandContext& context) {
  auto [cmd, o] = context.AddCommand(
      app, "unload", "unload a model by name; waits until its in-flight calls end", RunUnload);
  cmd->add_option("name", o->name, "model to unload")->required();
}

}  // namespace vocabd::cli
