// generate_text: greedy text generation with vocabd doing its part of the
// model and this program doing the rest.
//
//   vocabd (over gRPC)                     this program (the caller)
//   ------------------                     -------------------------
//   Tokenize   prompt -> ids               the transformer blocks: attention
//   Embed      id -> input row                (with a KV cache), MLP, the
//   ApplyRope  q/k of each position           residual stream, RMSNorms
//   Score      last block output ->           (examples/tiny_llama/
//              final norm, LM head, top-1     tiny_llama.h, weights read from
//   Detokenize new ids -> text (incremental,  the checkpoint file)
//              never half a character)
//
// Embed rows are the model's INPUT; they are not hidden states the LM head
// can score meaningfully until the blocks have run (that is what `vocabctl
// score --from-ids` shortcuts, and why its perplexity is huge).
//
// Usage (vocabd serving stories260K on 127.0.0.1:50051):
//   build/examples/generate_text "Once upon a time"
// Options: --target, --model (vocabd's name for it), --steps N (positions,
// prompt included, as llama2.c run.c -n; default 256), --checkpoint PATH
// (default: the file vocabd reports loading, GetModel source_files; a
// relative path is looked up as vocabd does, lib/core/data_path.h). The
// checkpoint's weight files must have the sha256 vocabd reports for the
// model: blocks from another checkpoint would silently produce other text.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <thread>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/vocabd_client.h"
#include "examples/tiny_llama/tiny_llama.h"
#include "examples/tiny_llama/vocabd_steps.h"
#include "absl/strings/str_join.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/core/data_path.h"
#include "lib/core/status_macros.h"

namespace {

using vocabd::VocabdClient;
namespace v1 = vocabd::v1;

bool IsWeightFile(const std::string& format) {
  return format == "llama2c" || format == "safetensors" || format == "gguf";
}

// GetModel, waiting (up to a minute) for sha256 values the server still
// computes in the background.
absl::StatusOr<v1::ModelInfo> GetModelWithSha256(VocabdClient& client, const std::string& model) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (true) {
    ASSIGN_OR_RETURN(v1::ModelInfo info, client.GetModel(model));
    bool pending = false;
    for (const auto& f : info.source_files()) pending = pending || f.sha256_pending();
    if (!pending || std::chrono::steady_clock::now() > deadline) return info;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// Prints the prompt, then each newly completed piece of text as it is
// generated; ends with a newline.
absl::Status Generate(VocabdClient& client, const std::string& model, std::string checkpoint,
                      const std::string& prompt, int steps) {
  ASSIGN_OR_RETURN(v1::ModelInfo info, GetModelWithSha256(client, model));
  if (!info.has_tokenizer()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", info.name(), "' has no tokenizer: ", info.tokenizer_missing_reason()));
  }
  std::vector<std::string> served_sha256;
  for (const auto& f : info.source_files()) {
    if (!IsWeightFile(f.format())) continue;
    if (checkpoint.empty()) {  // the file vocabd loaded (an HF folder: the folder)
      checkpoint = f.format() == "safetensors" ? f.path().substr(0, f.path().rfind('/') + 1)
                                               : f.path();
    }
    served_sha256.push_back(f.sha256());
  }
  if (checkpoint.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", info.name(), "' reports no checkpoint file: pass --checkpoint"));
  }
  ASSIGN_OR_RETURN(checkpoint, vocabd::ResolveDataPath(checkpoint, "--checkpoint"));
  // The blocks' weights come from the same checkpoint vocabd serves.
  ASSIGN_OR_RETURN(std::unique_ptr<vocabd::Checkpoint> ckpt, vocabd::LoadCheckpoint(checkpoint));
  if (ckpt->config().vocab_size != info.vocab_size() ||
      ckpt->config().hidden_size != info.hidden_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        checkpoint, " does not match vocabd's model '", info.name(), "' (vocab_size ",
        info.vocab_size(), ", hidden_size ", info.hidden_size(), ")"));
  }
  std::vector<std::string> local_sha256;
  for (const auto& f : ckpt->source_files()) {
    if (IsWeightFile(f.format)) local_sha256.push_back(f.sha256);
  }
  std::sort(served_sha256.begin(), served_sha256.end());
  std::sort(local_sha256.begin(), local_sha256.end());
  if (local_sha256 != served_sha256) {
    return absl::FailedPreconditionError(absl::StrCat(
        checkpoint, " does not match vocabd's model '", info.name(), "': its weight files have "
        "sha256 [", absl::StrJoin(local_sha256, ", "), "], the server's [",
        absl::StrJoin(served_sha256, ", "), "]; pass --checkpoint with the file the server "
        "loaded (vocabctl models ", info.name(), " lists it)"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<vocabd::tiny_llama::TinyLlama> llama,
                   vocabd::tiny_llama::TinyLlama::Create(
                       *ckpt, vocabd::tiny_llama::VocabdSteps(client, info.name(), ckpt->config())));

  v1::TokenizeRequest tokenize;
  tokenize.set_model(info.name());
  tokenize.add_texts(prompt);  // add_special_tokens unset = true: BOS first
  ASSIGN_OR_RETURN(v1::TokenizeResponse tokens, client.Tokenize(tokenize));
  std::vector<int64_t> ids(tokens.results(0).ids().begin(), tokens.results(0).ids().end());
  if (ids.empty()) return absl::InvalidArgumentError("the prompt tokenized to no ids");
  const int64_t bos = info.tokenizer().bos_token_id();
  const int64_t eos = info.tokenizer().eos_token_id();
  std::cout << prompt << std::flush;

  // As llama2.c run.c: position pos feeds ids[pos] (the prompt, then each
  // generated id); once past the prompt, the step's top-1 is the next id.
  const int64_t prompt_len = static_cast<int64_t>(ids.size());
  for (int64_t pos = 0; pos < steps; ++pos) {
    ASSIGN_OR_RETURN(const int64_t next, llama->Step(ids[pos], pos));
    if (pos + 1 < prompt_len) continue;
    if (next == bos || next == eos) break;  // run.c stops at BOS
    // Incremental Detokenize: only the text this id completes.
    v1::DetokenizeRequest detokenize;
    detokenize.set_model(info.name());
    detokenize.set_incremental(true);
    detokenize.set_skip_special_tokens(true);
    v1::DetokenizeSequence* seq = detokenize.add_sequences();
    seq->mutable_previous_ids()->Assign(ids.begin(), ids.end());
    seq->add_ids(next);
    ASSIGN_OR_RETURN(v1::DetokenizeResponse text, client.Detokenize(detokenize));
    std::cout << text.results(0).text() << std::flush;
    ids.push_back(next);
  }
  std::cout << "\n";
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"greedy generation: vocabd embeds, rotates, scores and detokenizes; this "
               "program runs the transformer blocks"};
  std::string target = "127.0.0.1:50051";
  std::string model;
  std::string checkpoint;
  std::string prompt;
  int steps = 256;
  app.add_option("prompt", prompt, "text to continue (may be empty)");
  app.add_option("--target", target, "vocabd address")->capture_default_str()->envname("VOCABD_TARGET");
  app.add_option("--model", model, "vocabd's model name (empty = its default model)");
  app.add_option("--checkpoint", checkpoint,
                 "the checkpoint vocabd serves, for the block weights (default: the file the "
                 "server reports loading; its sha256 must match)");
  app.add_option("--steps", steps, "positions, prompt included (llama2.c run.c -n)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  VocabdClient::Options options;
  options.target = target;
  auto client = VocabdClient::Create(options);
  absl::Status status = client.ok() ? Generate(**client, model, checkpoint, prompt, steps)
                                    : client.status();
  if (!status.ok()) {
    std::cerr << "\nerror: " << absl::StatusCodeToString(status.code()) << ": "
              << status.message() << "\n";
    return 1;
  }
  return 0;
}
