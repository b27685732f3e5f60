// `vocabctl sinusoidal --positions N --dim D`: PositionService/
// GetSinusoidalPositions, the Transformer's sinusoidal table [N, D].
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "client/cli/commands.h"
#include "client/cli/output.h"
#include "lib/core/shape.h"
#include "lib/core/status_macros.h"

namespace vocabd::cli {
namespace {

struct SinusoidalOptions {
  int64_t positions = 0;
  int64_t dim = 0;
  int64_t start = 0;
  double base = 0;
  std::string layout = "interleaved";
  int show = 8;
};

absl::StatusOr<int> RunSinusoidal(VocabdClient& client, const GlobalOptions& g,
                                  const SinusoidalOptions& o) {
  v1::GetSinusoidalPositionsRequest request;
  request.set_num_positions(o.positions);
  request.set_dim(o.dim);
  request.set_start_position(o.start);
  request.set_base(o.base);
  request.set_layout(o.layout == "half-split" ? v1::HALF_SPLIT : v1::INTERLEAVED);
  ASSIGN_OR_RETURN(v1::GetSinusoidalPositionsResponse response,
                   client.GetSinusoidalPositions(request));
  int64_t rows = 0, cols = 0;
  ASSIGN_OR_RETURN(std::vector<float> table, DecodeMatrix(response.table(), "table", &rows, &cols));
  if (g.json) {
    PrintJsonCompact({{"layout", o.layout},
                      {"start_position", o.start},
                      {"shape", ShapeJson(response.table())},
                      {"table", MatrixJson(table.data(), rows, cols)}});
    return kExitOk;
  }
  std::cout << "table: " << ShapeString(response.table().shape()) << " "
            << v1::DType_Name(response.table().dtype()) << ", layout " << o.layout << "\n";
  PrintMatrix("table", table, rows, cols, o.start, o.show, o.show);
  return kExitOk;
}

}  // namespace

void RegisterSinusoidalCommand(CLI::App& app, CommandContext& context) {
  auto [cmd, o] = context.AddCommand(
      app, "sinusoidal", "the Transformer's sinusoidal position table [P, d]", RunSinusoidal);
  cmd->add_option("--positions", o->positions, "number of positions P")
      ->required()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 26));
  cmd->add_option("--dim", o->dim, "embedding width d (even)")
      ->required()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 26));
  cmd->add_option("--start", o->start, "first position")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--base", o->base, "frequency base (0 = 10000)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--layout", o->layout, "interleaved (sin, cos pairs) or half-split (sin | cos)")
      ->check(CLI::IsMember({"interleaved", "half-split"}))
      ->capture_default_str();
  cmd->add_option("--show", o->show, "rows and values printed")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

}  // namespace vocabd::cli
