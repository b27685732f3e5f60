// `vocabctl alibi`: PositionService/GetAlibiSlopes, one slope per head, and
// with --bias the bias tensor [heads, q_len, k_len] (causal or
// bidirectional).
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/commands.h"
#include "client/cli/output.h"
#include "lib/core/shape.h"
#include "lib/core/status_macros.h"
#include "proto/tensor_codec.h"

namespace vocabd::cli {
namespace {

struct AlibiOptions {
  int heads = 0;
  bool bias = false;
  int64_t q_len = 0;
  int64_t k_len = 0;
  bool bidirectional = false;
  int show = 8;
};

absl::StatusOr<int> RunAlibi(VocabdClient& client, const GlobalOptions& g, const AlibiOptions& o) {
  v1::GetAlibiSlopesRequest request;
  request.set_model(g.model);
  request.set_num_heads(o.heads);
  request.set_include_bias(o.bias);
  request.set_q_len(o.q_len);
  request.set_k_len(o.k_len);
  request.set_bidirectional(o.bidirectional);
  ASSIGN_OR_RETURN(v1::GetAlibiSlopesResponse response, client.GetAlibiSlopes(request));
  ASSIGN_OR_RETURN(std::vector<float> slopes, DecodeFloatTensor(response.slopes(), "slopes"));
  std::vector<float> bias;
  const int64_t heads = static_cast<int64_t>(slopes.size());
  if (o.bias) {
    ASSIGN_OR_RETURN(bias, DecodeFloatTensor(response.bias(), "bias"));
    if (response.bias().shape_size() != 3 || response.bias().shape(0) != heads ||
        static_cast<int64_t>(bias.size()) != heads * o.q_len * o.k_len) {
      return absl::InternalError(absl::StrCat("server returned bias of shape ",
                                              ShapeString(response.bias().shape()), " for ", heads,
                                              " heads, q_len ", o.q_len, ", k_len ", o.k_len));
    }
  }
  if (g.json) {
    json out = {{"num_heads", heads}, {"slopes", slopes}};
    if (o.bias) {
      json b = json::array();
      for (int64_t h = 0; h < heads; ++h) {
        b.push_back(MatrixJson(bias.data() + h * o.q_len * o.k_len, o.q_len, o.k_len));
      }
      out["bias_shape"] = ShapeJson(response.bias());
      out["bias"] = b;
    }
    PrintJsonCompact(out);
    return kExitOk;
  }
  std::cout << "slopes: " << ShapeString(response.slopes().shape()) << "\n";
  for (int64_t h = 0; h < heads; ++h) {
    std::cout << absl::StrFormat("  head %3d: %s\n", h, Num(slopes[h]));
  }
  if (o.bias) {
    std::cout << "bias: " << ShapeString(response.bias().shape())
              << (o.bidirectional ? " (bidirectional)" : " (causal)") << "\n";
    const int64_t show_heads = std::min<int64_t>(o.show, heads);
    for (int64_t h = 0; h < show_heads; ++h) {
      std::cout << "  head " << h << ":\n";
      for (int64_t i = 0; i < std::min<int64_t>(o.show, o.q_len); ++i) {
        std::string line = "   ";
        for (int64_t j = 0; j < std::min<int64_t>(o.show, o.k_len); ++j) {
          // + 0 prints the diagonal's -0 as 0.
          line += " " + Cell(bias[(h * o.q_len + i) * o.k_len + j] + 0.0f);
        }
        if (o.show < o.k_len) line += " ...";
        std::cout << line << "\n";
      }
      if (o.show < o.q_len) std::cout << "    ...\n";
    }
  }
  return kExitOk;
}

// --bias needs 1 <= --q-len <= --k-len.
void CheckAlibi(const AlibiOptions& o) {
  if (o.bias && (o.q_len < 1 || o.k_len < o.q_len)) {
    throw CLI::ValidationError("--bias", absl::StrCat("needs 1 <= --q-len <= --k-len (got ",
                                                      o.q_len, " and ", o.k_len, ")"));
  }
}

}  // namespace

void RegisterAlibiCommand(CLI::App& app, CommandContext& context) {
  auto [cmd, o] = context.AddCommand(app, "alibi", "ALiBi slopes, optionally the bias tensor",
                                     RunAlibi, CheckAlibi);
  cmd->add_option("--heads", o->heads, "heads (0 = the model's num_attention_heads)")
      ->check(CLI::Range(0, 65536))
      ->capture_default_str();
  cmd->add_flag("--bias", o->bias, "also return the bias [heads, q_len, k_len]");
  cmd->add_option("--q-len", o->q_len, "queries: the last q_len of the k_len keys")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--k-len", o->k_len, "key positions")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--bidirectional", o->bidirectional,
                "symmetric -slope * |i - j| instead of causal (-inf after the query)");
  cmd->add_option("--show", o->show, "bias heads, rows and values printed")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

}  // namespace vocabd::cli
