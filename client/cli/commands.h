// vocabctl's subcommands (see client/README.md). Each Register*Command adds
// one subcommand with its options to `app` and registers with `context` how
// it is checked and run; main (client/vocabctl.cc) calls them in the order
// `vocabctl --help` lists them. `bench` is in client/bench_command.h.
#ifndef VOCABD_CLIENT_CLI_COMMANDS_H_
#define VOCABD_CLIENT_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>

#include "client/cli/command.h"

namespace vocabd::cli {

// client/cli/server_commands.cc: `health` (grpc.health.v1 Check) and
// `services` (server reflection).
void RegisterHealthCommand(CLI::App& app, CommandContext& context);
void RegisterServicesCommand(CLI::App& app, CommandContext& context);

// client/cli/model_commands.cc: `models [NAME]`, `load NAME`, `unload NAME`.
void RegisterModelsCommand(CLI::App& app, CommandContext& context);
void RegisterLoadCommand(CLI::App& app, CommandContext& context);
void RegisterUnloadCommand(CLI::App& app, CommandContext& context);

// client/cli/embed_command.cc: `embed --ids ...`.
void RegisterEmbedCommand(CLI::App& app, CommandContext& context);
void RegisterEmbedStreamCommand(CLI::App& app, CommandContext& context);

// client/cli/tokenize_commands.cc: `tokenize TEXT...`, `detokenize IDS...`,
// `vocab`.
void RegisterTokenizeCommand(CLI::App& app, CommandContext& context);
void RegisterDetokenizeCommand(CLI::App& app, CommandContext& context);
void RegisterVocabCommand(CLI::App& app, CommandContext& context);

// client/cli/logits_command.cc: `logits SOURCE`.
void RegisterLogitsCommand(CLI::App& app, CommandContext& context);

// client/cli/score_commands.cc: `score SOURCE` and `score-stream`.
void RegisterScoreCommand(CLI::App& app, CommandContext& context);
void RegisterScoreStreamCommand(CLI::App& app, CommandContext& context);

// client/cli/rope_commands.cc: `rope-cache` (GetRopeCache) and `rope`
// (ApplyRope).
void RegisterRopeCacheCommand(CLI::App& app, CommandContext& context);
void RegisterRopeCommand(CLI::App& app, CommandContext& context);

// client/cli/sinusoidal_command.cc: `sinusoidal --positions N --dim D`.
void RegisterSinusoidalCommand(CLI::App& app, CommandContext& context);

// client/cli/alibi_command.cc: `alibi`.
void RegisterAlibiCommand(CLI::App& app, CommandContext& context);

}  // namespace vocabd::cli

#endif  // VOCABD_CLIENT_CLI_COMMANDS_H_
