// `vocabctl bench`: the load-generator subcommand (see client/README.md).
#ifndef VOCABD_CLIENT_BENCH_COMMAND_H_
#define VOCABD_CLIENT_BENCH_COMMAND_H_

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "client/cli/command.h"

namespace vocabd {

// "1,4,16,64" -> {1, 4, 16, 64}; INVALID_ARGUMENT naming --concurrency.
absl::StatusOr<std::vector<int>> ParseConcurrencyList(const std::string& text);

namespace cli {

// Adds the `bench` subcommand and its options to `app` and registers it with
// `context`. It uses the global --target, --timeout, --json and --model; its
// exit code is 0, or 1 when a call failed (unless --allow-errors) or
// --verify found a mismatch.
void RegisterBenchCommand(CLI::App& app, CommandContext& context);

}  // namespace cli
}  // namespace vocabd

#endif  // VOCABD_CLIENT_BENCH_COMMAND_H_
