// `vocabctl rope-cache` (PositionService/GetRopeCache: the effective RoPE
// config, inv_freq and the first rows of cos/sin) and `vocabctl rope`
// (ApplyRope on generated q/k; prints q before and after rotation). Both
// take the same RoPE config overrides and flags.
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli/commands.h"
#include "client/cli/common.h"
#include "client/cli/output.h"
#include "lib/core/shape.h"
#include "lib/core/status_macros.h"
#include "proto/tensor_codec.h"

namespace vocabd::cli {
namespace {

// Overrides of the model's RoPE config, and the flags both RPCs take.
struct RopeOverrides {
  std::string pair_layout;
  double theta = 0;
  int head_dim = 0;  // rope-cache only (rope's --head-dim is the q/k width)
  int rotary_dim = 0;
  bool allow_beyond = false;
  bool high_precision = false;
};

struct RopeCacheOptions {
  int64_t positions = 4;
  int64_t start = 0;
  RopeOverrides rope;
  int show = 8;
};

struct RopeOptions {
  int batch = 1;
  int heads = 8;
  int kv_heads = 4;
  int head_dim = 8;
  int seq = 4;
  std::string layout = "bhsd";
  std::vector<int64_t> offsets;
  RopeOverrides rope;
  bool random = false;
  uint64_t seed = 0;
  int show = 8;
};

// --pair-layout, --theta, --head-dim (when `head_dim`), --rotary-dim.
void AddRopeConfigOptions(CLI::App* cmd, RopeOverrides* o, const std::string& pair_layout_help,
                          bool head_dim) {
  cmd->add_option("--pair-layout", o->pair_layout, pair_layout_help)
      ->check(CLI::IsMember({"interleaved", "half-split"}));
  cmd->add_option("--theta", o->theta, "override the model's RoPE base")
      ->check(CLI::PositiveNumber);
  if (head_dim) {
    cmd->add_option("--head-dim", o->head_dim, "override the model's head_dim")
        ->check(CLI::PositiveNumber);
  }
  cmd->add_option("--rotary-dim", o->rotary_dim, "rotated leading coordinates (even)")
      ->check(CLI::PositiveNumber);
}

// --allow-beyond, --high-precision.
void AddRopeFlags(CLI::App* cmd, RopeOverrides* o) {
  cmd->add_flag("--allow-beyond,--allow-beyond-trained-length", o->allow_beyond,
                "allow positions >= max_position_embeddings (allow_beyond_trained_length)");
  cmd->add_flag("--high-precision", o->high_precision, "float64 angles");
}

// Sets request.rope (only the overridden fields; no override leaves it
// unset), allow_beyond_trained_length and high_precision.
template <typename Request>
void SetRopeOverrides(const RopeOverrides& o, Request* request) {
  if (o.theta > 0) request->mutable_rope()->set_theta(o.theta);
  if (o.head_dim > 0) request->mutable_rope()->set_head_dim(o.head_dim);
  if (o.rotary_dim > 0) request->mutable_rope()->set_rotary_dim(o.rotary_dim);
  if (o.pair_layout == "interleaved") request->mutable_rope()->set_pair_layout(v1::INTERLEAVED);
  if (o.pair_layout == "half-split") request->mutable_rope()->set_pair_layout(v1::HALF_SPLIT);
  request->set_allow_beyond_trained_length(o.allow_beyond);
  request->set_high_precision(o.high_precision);
}

absl::StatusOr<int> RunRopeCache(VocabdClient& client, const GlobalOptions& g,
                                 const RopeCacheOptions& o) {
  v1::GetRopeCacheRequest request;
  request.set_model(g.model);
  request.set_num_positions(o.positions);
  request.set_start_position(o.start);
  SetRopeOverrides(o.rope, &request);
  ASSIGN_OR_RETURN(v1::GetRopeCacheResponse response, client.GetRopeCache(request));
  ASSIGN_OR_RETURN(std::vector<float> inv_freq, DecodeFloatTensor(response.inv_freq(), "inv_freq"));
  int64_t rows = 0, cols = 0, sin_rows = 0, sin_cols = 0;
  ASSIGN_OR_RETURN(std::vector<float> cos, DecodeMatrix(response.cos(), "cos", &rows, &cols));
  ASSIGN_OR_RETURN(std::vector<float> sin,
                   DecodeMatrix(response.sin(), "sin", &sin_rows, &sin_cols));
  if (sin_rows != rows || sin_cols != cols) {
    return absl::InternalError(absl::StrCat("server returned cos ", ShapeString(response.cos().shape()),
                                            " and sin ", ShapeString(response.sin().shape())));
  }
  if (g.json) {
    PrintJsonCompact({{"model", g.model},
                      {"start_position", o.start},
                      {"num_positions", o.positions},
                      {"attention_scaling", response.attention_scaling()},
                      {"used_long_factor", response.used_long_factor()},
                      {"rope", ProtoJson(response.rope())},
                      {"inv_freq", inv_freq},
                      {"cos", MatrixJson(cos.data(), rows, cols)},
                      {"sin", MatrixJson(sin.data(), rows, cols)}});
    return kExitOk;
  }
  const v1::RopeConfig& r = response.rope();
  std::cout << "rope: theta " << Num(r.theta()) << ", rotary_dim " << r.rotary_dim()
            << ", head_dim " << r.head_dim() << ", pairs " << PairLayoutName(r.pair_layout())
            << ", scaling " << v1::RopeScalingType_Name(r.scaling().type()) << "\n"
            << "attention_scaling: " << Num(response.attention_scaling())
            << (response.used_long_factor() ? "  (long_factor)" : "") << "\n"
            << "cos/sin: " << ShapeString(response.cos().shape()) << "\n";
  const int64_t show = std::min<int64_t>(o.show, static_cast<int64_t>(inv_freq.size()));
  std::cout << absl::StrFormat("inv_freq, first %d of %d:", show, inv_freq.size())
            << CellRow(inv_freq.data(), show, show) << "\n";  // no " ..."
  PrintMatrix("cos", cos, rows, cols, o.start, o.show, o.show);
  PrintMatrix("sin", sin, rows, cols, o.start, o.show, o.show);
  return kExitOk;
}

// Flat index of element (b, h, s, d) of a q/k tensor in `layout`.
int64_t RopeIndex(const std::string& layout, int64_t b, int64_t h, int64_t s, int64_t d,
                  int64_t heads, int64_t seq, int64_t dim) {
  if (layout == "bhsd") return ((b * heads + h) * seq + s) * dim + d;
  return ((b * seq + s) * heads + h) * dim + d;  // bshd and thd (t = b * seq + s)
}

std::vector<int64_t> RopeShape(const std::string& layout, int64_t batch, int64_t heads, int64_t seq,
                               int64_t dim) {
  if (layout == "bhsd") return {batch, heads, seq, dim};
  if (layout == "bshd") return {batch, seq, heads, dim};
  return {batch * seq, heads, dim};
}

absl::StatusOr<int> RunRope(VocabdClient& client, const GlobalOptions& g, const RopeOptions& o) {
  v1::ApplyRopeRequest request;
  request.set_model(g.model);
  static const std::map<std::string, v1::QkvLayout> kLayouts = {
      {"bhsd", v1::BHSD}, {"bshd", v1::BSHD}, {"thd", v1::THD}};
  request.set_layout(kLayouts.at(o.layout));
  SetRopeOverrides(o.rope, &request);
  // One offset for every batch row / sequence, or one each.
  for (int b = 0; b < o.batch && !o.offsets.empty(); ++b) {
    request.add_position_offsets(o.offsets.size() == 1 ? o.offsets[0] : o.offsets[b]);
  }
  if (o.layout == "thd" && o.batch > 1) {
    for (int b = 0; b < o.batch; ++b) request.add_sequence_lengths(o.seq);
  }
  const auto q_shape = RopeShape(o.layout, o.batch, o.heads, o.seq, o.head_dim);
  const auto k_shape = RopeShape(o.layout, o.batch, o.kv_heads, o.seq, o.head_dim);
  const size_t nq = static_cast<size_t>(o.batch) * o.heads * o.seq * o.head_dim;
  const size_t nk = static_cast<size_t>(o.batch) * o.kv_heads * o.seq * o.head_dim;
  std::vector<float> q(nq, 1.0f), k(nk, 1.0f);
  if (o.random) {
    q = RandomNormal(nq, o.seed);
    k = RandomNormal(nk, o.seed + 1);
  }
  *request.mutable_q() = EncodeFloatTensor(q, q_shape);
  *request.mutable_k() = EncodeFloatTensor(k, k_shape);
  ASSIGN_OR_RETURN(v1::ApplyRopeResponse response, client.ApplyRope(request));
  ASSIGN_OR_RETURN(std::vector<float> q_out, DecodeFloatTensor(response.q(), "q"));
  ASSIGN_OR_RETURN(std::vector<float> k_out, DecodeFloatTensor(response.k(), "k"));
  if (q_out.size() != nq || k_out.size() != nk) {
    return absl::InternalError(absl::StrCat(
        "server returned q ", ShapeString(response.q().shape()), " and k ", ShapeString(response.k().shape()),
        " for q ", ShapeString(request.q().shape()), " and k ", ShapeString(request.k().shape())));
  }
  if (g.json) {
    PrintJsonCompact({{"model", g.model},
                      {"layout", o.layout},
                      {"q_shape", q_shape},
                      {"k_shape", k_shape},
                      {"position_offsets", std::vector<int64_t>(request.position_offsets().begin(),
                                                                request.position_offsets().end())},
                      {"q_in", q},
                      {"k_in", k},
                      {"q_out", q_out},
                      {"k_out", k_out}});
    return kExitOk;
  }
  std::cout << "layout: " << o.layout << "  q: " << ShapeString(request.q().shape())
            << "  k: " << ShapeString(request.k().shape()) << "  ->  q: " << ShapeString(response.q().shape())
            << "  k: " << ShapeString(response.k().shape()) << "\n";
  const int64_t show = std::min(o.show, o.head_dim);
  const int64_t offset = o.offsets.empty() ? 0 : o.offsets[0];
  std::cout << "q[batch 0, head 0], first " << show << " of " << o.head_dim << " values:\n";
  for (int64_t s = 0; s < o.seq; ++s) {
    std::string before, after;
    for (int64_t d = 0; d < show; ++d) {
      const int64_t i = RopeIndex(o.layout, 0, 0, s, d, o.heads, o.seq, o.head_dim);
      before += " " + Cell(q[i]);
      after += " " + Cell(q_out[i]);
    }
    std::cout << absl::StrFormat("  pos %3d  before:%s\n           after: %s\n", offset + s, before,
                                 after);
  }
  return kExitOk;
}

// --offset: once, or once per batch row.
void CheckRope(const RopeOptions& o) {
  if (o.offsets.size() > 1 && o.offsets.size() != static_cast<size_t>(o.batch)) {
    throw CLI::ValidationError(
        "--offset", absl::StrCat("given ", o.offsets.size(), " times for --batch ", o.batch,
                                 "; give it once or once per batch row"));
  }
}

}  // namespace

void RegisterRopeCacheCommand(CLI::App& app, CommandContext& context) {
  auto [cmd, o] = context.AddCommand(
      app, "rope-cache", "RoPE inv_freq and cos/sin tables for a position range", RunRopeCache);
  cmd->add_option("--positions", o->positions, "number of positions")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
      ->capture_default_str();
  cmd->add_option("--start", o->start, "first position")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  AddRopeConfigOptions(cmd, &o->rope,
                       "override the model's pair layout (with no model: standalone config)",
                       /*head_dim=*/true);
  AddRopeFlags(cmd, &o->rope);
  cmd->add_option("--show", o->show, "rows and values printed")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

void RegisterRopeCommand(CLI::App& app, CommandContext& context) {
  auto [cmd, o] = context.AddCommand(
      app, "rope", "apply RoPE to generated q/k and show q before/after", RunRope, CheckRope);
  cmd->add_option("--batch", o->batch, "batch size (THD: number of sequences)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--heads", o->heads, "q heads")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--kv-heads", o->kv_heads, "k heads")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--head-dim", o->head_dim, "head dimension")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--seq", o->seq, "tokens per sequence")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--layout", o->layout, "q/k memory layout")
      ->check(CLI::IsMember({"bhsd", "bshd", "thd"}))
      ->capture_default_str();
  cmd->add_option("--offset", o->offsets, "start position: once, or once per batch row")
      ->allow_extra_args(false);
  AddRopeConfigOptions(cmd, &o->rope, "override the model's pair layout", /*head_dim=*/false);
  cmd->add_flag("--random", o->random, "seeded standard-normal q/k (default: all ones)");
  cmd->add_option("--seed", o->seed, "seed for --random")->capture_default_str();
  AddRopeFlags(cmd, &o->rope);
  cmd->add_option("--show", o->show, "values printed per position")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

}  // namespace vocabd::cli
