// `vocabctl score SOURCE` (ScoringService/Score: per row target log-prob and
// rank, logsumexp, top-k; summed log-prob and perplexity) and
// `vocabctl score-stream` (ScoreStream: one request per --from-ids, all on
// one stream, each response printed as `score` prints it).
#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/commands.h"
#include "client/cli/common.h"
#include "client/cli/hidden_source.h"
#include "client/cli/output.h"
#include "lib/core/status_macros.h"

namespace vocabd::cli {
namespace {

// ScoreRequest options shared by `score` and `score-stream`.
struct ScoreRequestOptions {
  int top_k = 0;
  bool no_final_norm = false;
  float temperature = 0;
  int64_t vocab_limit = 0;
  std::string candidates;  // comma-separated candidate ids
  bool no_pieces = false;
  bool allow_non_finite = false;
};

struct ScoreOptions {
  HiddenSource source;
  std::string targets;
  ScoreRequestOptions request;
};

struct ScoreStreamOptions {
  std::vector<std::string> from_ids;  // one ScoreRequest each
  std::vector<std::string> targets;   // none, or one per --from-ids
  std::string input_dtype = "f32";
  ScoreRequestOptions request;
};

void AddScoreRequestOptions(CLI::App* cmd, ScoreRequestOptions* o) {
  cmd->add_option("--top-k", o->top_k, "best tokens per row (0..1024)")->check(CLI::Range(0, 1024));
  cmd->add_flag("--no-final-norm", o->no_final_norm, "skip the checkpoint's final norm");
  cmd->add_option("--temperature", o->temperature, "divide logits by T (> 0; default 1)")
      ->check(GreaterThanZero());
  cmd->add_option("--vocab-limit", o->vocab_limit, "mask ids >= this (0 = none)");
  cmd->add_option("--candidates", o->candidates,
                  "comma-separated ids whose exact logprobs every row returns")
      ->check(IdListValidator());
  cmd->add_flag("--no-pieces", o->no_pieces,
                "do not ask for token text (by default asked for when the model has a "
                "tokenizer)");
  cmd->add_flag("--allow-non-finite", o->allow_non_finite,
                "score hidden rows holding NaN/Inf (allow_non_finite; default: refused)");
}

// Token text is asked for when the model has a tokenizer (GetModel).
absl::StatusOr<bool> WantPieces(VocabdClient& client, const GlobalOptions& g,
                                const ScoreRequestOptions& o) {
  if (o.no_pieces) return false;
  ASSIGN_OR_RETURN(v1::ModelInfo info, client.GetModel(g.model));
  return info.has_tokenizer();
}

// "403" or `403 " Once"` when the token text came back.
std::string IdWithText(int64_t id, const std::string& bytes, bool pieces) {
  return pieces ? absl::StrCat(id, " ", Quoted(bytes)) : absl::StrCat(id);
}

absl::Status SetScoreOptions(const ScoreRequestOptions& o, const std::vector<int64_t>& targets,
                             bool pieces, v1::ScoreRequest* request) {
  ASSIGN_OR_RETURN(std::vector<int64_t> candidates, ParseIdList(o.candidates));
  request->mutable_candidate_ids()->Assign(candidates.begin(), candidates.end());
  request->set_return_pieces(pieces);
  request->mutable_target_ids()->Assign(targets.begin(), targets.end());
  request->set_top_k(o.top_k);
  if (o.no_final_norm) request->set_apply_final_norm(false);
  request->set_temperature(o.temperature);
  request->set_vocab_limit(o.vocab_limit);
  request->set_allow_non_finite(o.allow_non_finite);
  return absl::OkStatus();
}

double Perplexity(const v1::ScoreResponse& response) {
  return response.num_targets() > 0 ? std::exp(-response.sum_target_logprob() /
                                               static_cast<double>(response.num_targets()))
                                    : std::nan("");
}

// `score --json` document for one response.
json ScoreResponseJson(const v1::ScoreResponse& response, const std::vector<int64_t>& targets,
                       bool pieces) {
  const bool has_targets = !targets.empty();
  json rows = json::array();
  for (int i = 0; i < response.rows_size(); ++i) {
    const v1::RowScore& r = response.rows(i);
    json row = {{"row", i}, {"logsumexp", r.logsumexp()}};
    if (has_targets) {
      row["target_id"] = i < static_cast<int>(targets.size()) ? json(targets[i]) : json();
      row["target_logprob"] = r.target_logprob();
      row["target_rank"] = r.target_rank();
      if (pieces) row["target_text"] = TokenText(r.target_token_bytes());
    }
    auto entries = [pieces](const auto& list) {
      json out = json::array();
      for (const auto& t : list) {
        json e = {{"id", t.token_id()}, {"logprob", t.logprob()}};
        if (pieces) e["text"] = TokenText(t.token_bytes());
        out.push_back(e);
      }
      return out;
    };
    row["top_k"] = entries(r.top_k());
    if (r.candidates_size() > 0) row["candidates"] = entries(r.candidates());
    rows.push_back(row);
  }
  json out = {{"model", response.model()}, {"rows", rows}};
  if (has_targets) {
    out["sum_target_logprob"] = response.sum_target_logprob();
    out["num_targets"] = response.num_targets();
    out["perplexity"] = Perplexity(response);
  }
  return out;
}

// `score` human-readable output for one response.
void PrintScoreResponse(const v1::ScoreResponse& response, const std::vector<int64_t>& targets,
                        int top_k, bool pieces) {
  const bool has_targets = !targets.empty();
  std::cout << "model: " << response.model() << "\n";
  std::vector<std::vector<std::string>> table;
  std::vector<std::string> header = {"ROW"};
  if (has_targets) header.insert(header.end(), {"TARGET", "LOGPROB", "RANK"});
  header.push_back("LOGSUMEXP");
  if (top_k > 0) {
    header.push_back(absl::StrCat("TOP-", top_k, pieces ? " (id \"text\":logprob)" : " (id:logprob)"));
  }
  const bool has_candidates = response.rows_size() > 0 && response.rows(0).candidates_size() > 0;
  if (has_candidates) header.push_back("CANDIDATES (id:logprob)");
  table.push_back(header);
  for (int i = 0; i < response.rows_size(); ++i) {
    const v1::RowScore& r = response.rows(i);
    std::vector<std::string> line = {absl::StrCat(i)};
    if (has_targets) {
      line.push_back(i < static_cast<int>(targets.size())
                         ? IdWithText(targets[i], r.target_token_bytes(), pieces)
                         : "?");
      line.push_back(Num(r.target_logprob()));
      line.push_back(absl::StrCat(r.target_rank()));
    }
    line.push_back(Num(r.logsumexp()));
    if (top_k > 0) {
      std::vector<std::string> items;
      for (const auto& t : r.top_k())
        items.push_back(
            absl::StrCat(IdWithText(t.token_id(), t.token_bytes(), pieces), ":", Num(t.logprob())));
      line.push_back(absl::StrJoin(items, " "));
    }
    if (has_candidates) {
      std::vector<std::string> items;
      for (const auto& t : r.candidates())
        items.push_back(
            absl::StrCat(IdWithText(t.token_id(), t.token_bytes(), pieces), ":", Num(t.logprob())));
      line.push_back(absl::StrJoin(items, " "));
    }
    table.push_back(line);
  }
  PrintTable(table);
  if (has_targets) {
    std::cout << "sum logprob: " << Num(response.sum_target_logprob()) << " over "
              << response.num_targets() << " targets, perplexity " << Num(Perplexity(response))
              << "\n";
  }
}

absl::StatusOr<int> RunScore(VocabdClient& client, const GlobalOptions& g, const ScoreOptions& o) {
  v1::ScoreRequest request;
  request.set_model(g.model);
  ASSIGN_OR_RETURN(*request.mutable_hidden(), BuildHidden(client, g, o.source));
  ASSIGN_OR_RETURN(std::vector<int64_t> targets, ParseIdList(o.targets));
  ASSIGN_OR_RETURN(const bool pieces, WantPieces(client, g, o.request));
  RETURN_IF_ERROR(SetScoreOptions(o.request, targets, pieces, &request));
  ASSIGN_OR_RETURN(v1::ScoreResponse response, client.Score(request));
  if (g.json) {
    PrintJson(ScoreResponseJson(response, targets, pieces));
  } else {
    PrintScoreResponse(response, targets, o.request.top_k, pieces);
  }
  return kExitOk;
}

// One ScoreRequest per --from-ids group (hidden states built as `score
// --from-ids` builds them), all sent on one ScoreStream.
absl::StatusOr<int> RunScoreStream(VocabdClient& client, const GlobalOptions& g,
                                   const ScoreStreamOptions& o) {
  std::vector<v1::ScoreRequest> requests;
  std::vector<std::vector<int64_t>> targets;
  ASSIGN_OR_RETURN(const bool pieces, WantPieces(client, g, o.request));
  for (size_t i = 0; i < o.from_ids.size(); ++i) {
    HiddenSource source;
    source.from_ids = o.from_ids[i];
    source.input_dtype = o.input_dtype;
    v1::ScoreRequest& request = requests.emplace_back();
    request.set_model(g.model);
    ASSIGN_OR_RETURN(*request.mutable_hidden(), BuildHidden(client, g, source));
    ASSIGN_OR_RETURN(targets.emplace_back(),
                     ParseIdList(o.targets.empty() ? std::string() : o.targets[i]));
    RETURN_IF_ERROR(SetScoreOptions(o.request, targets.back(), pieces, &request));
  }
  ASSIGN_OR_RETURN(std::vector<v1::ScoreResponse> responses, client.ScoreStream(requests));
  if (g.json) {
    json out = json::array();
    for (size_t i = 0; i < responses.size(); ++i)
      out.push_back(ScoreResponseJson(responses[i], targets[i], pieces));
    PrintJson({{"responses", out}});
    return kExitOk;
  }
  for (size_t i = 0; i < responses.size(); ++i) {
    std::cout << "response " << i << " (--from-ids " << o.from_ids[i] << "):\n";
    PrintScoreResponse(responses[i], targets[i], o.request.top_k, pieces);
  }
  return kExitOk;
}

// --targets: not at all, or once per --from-ids.
void CheckScoreStream(const ScoreStreamOptions& o) {
  if (!o.targets.empty() && o.targets.size() != o.from_ids.size()) {
    throw CLI::ValidationError(
        "--targets", absl::StrCat("given ", o.targets.size(), " times for ", o.from_ids.size(),
                                  " --from-ids; give it once per --from-ids or not at all"));
  }
}

}  // namespace

void RegisterScoreCommand(CLI::App& app, CommandContext& context) {
  auto [cmd, o] =
      context.AddCommand(app, "score", "hidden states -> target logprobs, ranks, top-k", RunScore);
  AddHiddenSource(cmd, &o->source);
  cmd->add_option("--targets", o->targets, "one comma-separated target id per row")
      ->check(IdListValidator());
  AddScoreRequestOptions(cmd, &o->request);
}

void RegisterScoreStreamCommand(CLI::App& app, CommandContext& context) {
  auto [cmd, o] = context.AddCommand(
      app, "score-stream", "ScoreStream: one ScoreRequest per --from-ids, all on one stream",
      RunScoreStream, CheckScoreStream);
  cmd->add_option("--from-ids", o->from_ids,
                  "embed these ids (comma-separated) as one request's hidden states; repeat "
                  "for more requests")
      ->required()
      ->check(IdListValidator())
      ->allow_extra_args(false);
  cmd->add_option("--targets", o->targets,
                  "one comma-separated target id per row; none, or once per --from-ids")
      ->check(IdListValidator())
      ->allow_extra_args(false);
  cmd->add_option("--input-dtype", o->input_dtype, "dtype the hidden states are sent in")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  AddScoreRequestOptions(cmd, &o->request);
}

}  // namespace vocabd::cli
