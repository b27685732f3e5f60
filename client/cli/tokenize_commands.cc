// `vocabctl tokenize "text" ...` (TokenizerService/Tokenize: ids, pieces,
// byte offsets), `vocabctl detokenize 1,403,407 ...` (Detokenize; with
// --previous, incremental mode) and `vocabctl vocab` (GetVocabulary pages).
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/commands.h"
#include "client/cli/common.h"
#include "client/cli/output.h"
#include "lib/core/status_macros.h"

namespace vocabd::cli {
namespace {

struct TokenizeOptions {
  std::vector<std::string> texts;
  bool no_special = false;
  bool ids_only = false;
};

struct DetokenizeOptions {
  std::vector<std::string> ids;  // one comma-separated sequence each
  bool skip_special = false;
  std::string previous;          // incremental mode
  bool end_of_stream = false;    // incremental mode, last step
};

struct VocabOptions {
  int64_t start = 0;
  int32_t count = 20;
};

absl::StatusOr<int> RunTokenize(VocabdClient& client, const GlobalOptions& g,
                                const TokenizeOptions& o) {
  v1::TokenizeRequest request;
  request.set_model(g.model);
  for (const std::string& t : o.texts) request.add_texts(t);
  if (o.no_special) request.set_add_special_tokens(false);
  request.set_return_pieces(true);
  request.set_return_offsets(true);
  ASSIGN_OR_RETURN(v1::TokenizeResponse response, client.Tokenize(request));
  if (g.json) {
    json results = json::array();
    for (const v1::TokenizedText& t : response.results()) {
      json tokens = json::array();
      for (int i = 0; i < t.ids_size(); ++i) {
        tokens.push_back({{"id", t.ids(i)},
                          {"piece", TokenText(t.pieces(i))},
                          {"text", TokenText(t.token_bytes(i))},
                          {"offsets", {t.offsets(i).begin(), t.offsets(i).end()}}});
      }
      results.push_back({{"ids", std::vector<int64_t>(t.ids().begin(), t.ids().end())},
                         {"tokens", tokens}});
    }
    PrintJson({{"model", response.model()}, {"results", results}});
    return kExitOk;
  }
  for (int r = 0; r < response.results_size(); ++r) {
    const v1::TokenizedText& t = response.results(r);
    std::vector<std::string> ids;
    for (int64_t id : t.ids()) ids.push_back(absl::StrCat(id));
    if (o.ids_only) {
      std::cout << absl::StrJoin(ids, ",") << "\n";
      continue;
    }
    if (r == 0) std::cout << "model: " << response.model() << "\n";
    std::cout << "text " << r << ": " << t.ids_size() << " tokens: " << absl::StrJoin(ids, ",")
              << "\n";
    std::vector<std::vector<std::string>> table = {{"#", "ID", "PIECE", "TEXT", "BYTES"}};
    for (int i = 0; i < t.ids_size(); ++i) {
      table.push_back({absl::StrCat(i), absl::StrCat(t.ids(i)), Quoted(t.pieces(i)),
                       Quoted(t.token_bytes(i)),
                       absl::StrCat(t.offsets(i).begin(), "..", t.offsets(i).end())});
    }
    PrintTable(table);
  }
  return kExitOk;
}

absl::StatusOr<int> RunDetokenize(VocabdClient& client, const GlobalOptions& g,
                                  const DetokenizeOptions& o) {
  v1::DetokenizeRequest request;
  request.set_model(g.model);
  request.set_skip_special_tokens(o.skip_special);
  std::vector<int64_t> previous;
  if (!o.previous.empty()) {
    ASSIGN_OR_RETURN(previous, ParseIdList(o.previous));
    request.set_incremental(true);
  }
  if (o.end_of_stream) request.set_incremental(true);
  // The stream's last call may bring no new ids (it only flushes what the
  // previous ids held back): one sequence with none.
  std::vector<std::string> lists = o.ids;
  if (lists.empty()) lists.push_back("");
  for (const std::string& list : lists) {
    ASSIGN_OR_RETURN(std::vector<int64_t> ids, ParseIdList(list));
    v1::DetokenizeSequence* s = request.add_sequences();
    s->mutable_ids()->Assign(ids.begin(), ids.end());
    s->mutable_previous_ids()->Assign(previous.begin(), previous.end());
    s->set_end_of_stream(o.end_of_stream);
  }
  ASSIGN_OR_RETURN(v1::DetokenizeResponse response, client.Detokenize(request));
  if (g.json) {
    json results = json::array();
    for (const v1::DetokenizedText& t : response.results()) {
      json item = {{"text", t.text()}};
      if (request.incremental()) item["held_back_bytes"] = t.held_back_bytes();
      results.push_back(item);
    }
    PrintJson({{"model", response.model()}, {"results", results}});
    return kExitOk;
  }
  for (const v1::DetokenizedText& t : response.results()) {
    std::cout << t.text() << "\n";
    if (t.held_back_bytes() > 0) {
      std::cerr << "(" << t.held_back_bytes() << " bytes held back: incomplete character)\n";
    }
  }
  return kExitOk;
}

absl::StatusOr<int> RunVocab(VocabdClient& client, const GlobalOptions& g, const VocabOptions& o) {
  v1::GetVocabularyRequest request;
  request.set_model(g.model);
  request.set_start_id(o.start);
  request.set_page_size(o.count);
  ASSIGN_OR_RETURN(v1::GetVocabularyResponse response, client.GetVocabulary(request));
  if (g.json) {
    json entries = json::array();
    for (const v1::VocabularyEntry& e : response.entries()) {
      entries.push_back({{"id", e.id()},
                         {"piece", TokenText(e.piece())},
                         {"text", TokenText(e.token_bytes())},
                         {"type", v1::TokenType_Name(e.type())},
                         {"score", e.score()}});
    }
    PrintJson({{"model", response.model()},
               {"vocab_size", response.vocab_size()},
               {"next_start_id", response.next_start_id()},
               {"entries", entries}});
    return kExitOk;
  }
  std::cout << "model: " << response.model() << " (vocab_size " << response.vocab_size()
            << ")\n";
  std::vector<std::vector<std::string>> table = {{"ID", "PIECE", "TEXT", "TYPE", "SCORE"}};
  for (const v1::VocabularyEntry& e : response.entries()) {
    std::string type = v1::TokenType_Name(e.type());
    table.push_back({absl::StrCat(e.id()), Quoted(e.piece()), Quoted(e.token_bytes()),
                     type.substr(type.rfind('_') + 1), Num(e.score())});
  }
  PrintTable(table);
  return kExitOk;
}

// ids may be left out only on the stream's last call (--end-of-stream).
void CheckDetokenize(const DetokenizeOptions& o) {
  if (o.ids.empty() && !o.end_of_stream) {
    throw CLI::ValidationError("ids", "give at least one id list (only --end-of-stream, the "
                                      "stream's last call, may have no new ids)");
  }
}

}  // namespace

void RegisterTokenizeCommand(CLI::App& app, CommandContext& context) {
  auto [cmd, o] = context.AddCommand(
      app, "tokenize", "texts -> token ids, pieces and byte offsets (the model's tokenizer)",
      RunTokenize);
  cmd->add_option("texts", o->texts, "UTF-8 texts, one request each")->required();
  cmd->add_flag("--no-special", o->no_special, "do not add BOS/EOS/CLS/SEP");
  cmd->add_flag("--ids-only", o->ids_only,
                "print only the comma-separated ids (for --ids / detokenize)");
}

void RegisterDetokenizeCommand(CLI::App& app, CommandContext& context) {
  auto [cmd, o] =
      context.AddCommand(app, "detokenize", "token ids -> text", RunDetokenize, CheckDetokenize);
  cmd->add_option("ids", o->ids,
                  "comma-separated token ids; several lists = several texts (none with "
                  "--end-of-stream: flush what --previous held back)")
      ->check(IdListValidator());
  cmd->add_flag("--skip-special", o->skip_special, "drop BOS/EOS and other control tokens");
  cmd->add_option("--previous", o->previous,
                  "incremental mode: the ids generated before; prints only the text the new "
                  "ids complete")
      ->check(IdListValidator());
  cmd->add_flag("--end-of-stream", o->end_of_stream,
                "incremental mode, the stream's last call: also print the text held back "
                "(an incomplete character as U+FFFD)");
}

void RegisterVocabCommand(CLI::App& app, CommandContext& context) {
  auto [cmd, o] = context.AddCommand(app, "vocab", "a page of the vocabulary", RunVocab);
  cmd->add_option("--start", o->start, "first id")->capture_default_str();
  cmd->add_option("--count", o->count, "entries (0..10000)")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
}

}  // namespace vocabd::cli
