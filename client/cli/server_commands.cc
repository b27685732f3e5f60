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

absl::StatusOr<int> RunServices(VocabdClient& client, const GlobalOptions& g, const NoOptions&) {
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
  auto [cmd, o] = context.AddCommand(app, "health",
                                     "grpc.health.v1 Check; exit 0 only when SERVING", RunHealth);
  cmd->add_option("--service", o->service,
                  "service name, e.g. vocabd.v1.ScoringService (default: overall)");
}

void RegisterServicesCommand(CLI::App& app, CommandContext& context) {
  context.AddCommand(app, "services", "list services via server reflection", RunServices);
}

}  // namespace vocabd::cli
