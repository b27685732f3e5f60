// `vocabctl health` (grpc.health.v1 Check; exit 0 only when SERVING) and
// `vocabctl services` (services listed by server reflection).
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "client/cli/commands.h"
#include "client/cli/output.h"
#include "lib/core/status_macros.h"

namespace vocabd::cli {
namespace {

struct HealthOptions {
  std::string service;
};

absl::StatusOr<int> RunHealth(VocabdClient& client, const GlobalOptions& g,
                              const HealthOptions& o) {
  ASSIGN_OR_RETURN(std::string status, client.HealthCheck(o.service));
  if (g.json) {
    PrintJson({{"service", o.service}, {"status", status}});
  } else {
    std::cout << status << "\n";
  }
  return status == "SERVING" ? kExitOk : kExitError;
}

absl::StatusOr<int> RunServices(VocabdClient& client, const GlobalOptions& g) {
  ASSIGN_OR_RETURN(std::vector<std::string> services, client.ListServices());
  std::sort(services.begin(), services.end());
  if (g.json) {
    PrintJson({{"services", services}});
  } else {
    for (const auto& s : services) std::cout << s << "\n";
  }
  return kExitOk;
}

}  // namespace

void RegisterHealthCommand(CLI::App& app, CommandContext& context) {
  auto o = std::make_shared<HealthOptions>();
  CLI::App* cmd = app.add_subcommand("health", "grpc.health.v1 Check; exit 0 only when SERVING");
  cmd->add_option("--service", o->service,
                  "service name, e.g. vocabd.v1.ScoringService (default: overall)");
  context.Add(cmd, [o](VocabdClient& c, const GlobalOptions& g) { return RunHealth(c, g, *o); });
}

void RegisterServicesCommand(CLI::App& app, CommandContext& context) {
  CLI::App* cmd = app.add_subcommand("services", "list services via server reflection");
  context.Add(cmd, RunServices);
}

}  // namespace vocabd::cli
