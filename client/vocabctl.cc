// vocabctl: command-line client for vocabd. See client/README.md.
//
// main only registers the subcommands (client/cli/commands.h, one file per
// subcommand or small group in client/cli/; `bench` in
// client/bench_command.h) and dispatches through CommandContext
// (client/cli/command.h: global options, parsing, exit codes).
#include <CLI/CLI.hpp>

#include "client/bench_command.h"
#include "client/cli/command.h"
#include "client/cli/commands.h"

int main(int argc, char** argv) {
  using namespace vocabd::cli;  // NOLINT(build/namespaces)
  CLI::App app{"vocabctl: command-line client for vocabd (embeddings, LM head, RoPE)"};
  CommandContext context(app);
  RegisterHealthCommand(app, context);
  RegisterServicesCommand(app, context);
  RegisterModelsCommand(app, context);
  RegisterTokenizeCommand(app, context);
  RegisterDetokenizeCommand(app, context);
  RegisterVocabCommand(app, context);
  RegisterEmbedCommand(app, context);
  RegisterEmbedStreamCommand(app, context);
  RegisterLogitsCommand(app, context);
  RegisterScoreCommand(app, context);
  RegisterScoreStreamCommand(app, context);
  RegisterLoadCommand(app, context);
  RegisterUnloadCommand(app, context);
  RegisterRopeCacheCommand(app, context);
  RegisterSinusoidalCommand(app, context);
  RegisterAlibiCommand(app, context);
  RegisterRopeCommand(app, context);
  RegisterBenchCommand(app, context);
  return context.Main(argc, argv);
}
