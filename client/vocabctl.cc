// vocabctl: command-line client for vocabd. See client/README.md.
//
// Exit codes: 0 success (for `health`: only when SERVING), 1 an RPC or I/O
// failed (stderr: "error: <CODE>: <message>"), 2 bad command-line usage.
// Human-readable output by default; --json prints one JSON document on
// stdout (non-finite floats print as null, as JSON has no inf/NaN).
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <numbers>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/bench_command.h"
#include "proto/tensor_codec.h"
#include "client/vocabd_client.h"
#include "lib/core/shape.h"
#include "lib/core/status_macros.h"

namespace vocabd {
namespace {

using json = nlohmann::ordered_json;  // keeps field order in output

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

// ---------------------------------------------------------------------------
// Options.

struct GlobalOptions {
  std::string target = "127.0.0.1:50051";
  int64_t timeout_ms = 30000;
  bool json = false;
  std::string model;
  // Connection (see VocabdClient::Options).
  bool tls = false;
  std::string ca, cert, key, tls_server_name, token, token_file, lb_policy;
};

struct HealthOptions {
  std::string service;
};

struct ModelsOptions {
  std::string name;
};

struct EmbedOptions {
  std::vector<std::string> ids;  // one comma-separated sequence each
  std::vector<int64_t> offsets;  // 1 (all sequences) or one per --ids
  std::string dtype = "f32";
  std::string positions = "default";
  std::string scale = "default";
  int show = 8;
};

// Where logits/score take their hidden states from (exactly one).
struct HiddenSource {
  std::string hidden_file;
  int64_t random_rows = 0;
  std::string from_ids;
  uint64_t seed = 0;
  std::string input_dtype = "f32";
};

struct LogitsOptions {
  HiddenSource source;
  bool no_final_norm = false;
  float temperature = 0;
  bool log_softmax = false;
  int top = 5;
  std::string dtype = "f32";
  int64_t vocab_limit = 0;
};

struct ScoreOptions {
  HiddenSource source;
  std::string targets;
  int top_k = 0;
  bool no_final_norm = false;
  float temperature = 0;
  int64_t vocab_limit = 0;
};

struct ScoreStreamOptions {
  std::vector<std::string> from_ids;  // one ScoreRequest each
  std::vector<std::string> targets;   // none, or one per --from-ids
  std::string input_dtype = "f32";
  ScoreOptions score;                 // top_k, no_final_norm, temperature, vocab_limit
};

struct LoadOptions {
  std::string name;
};

struct RopeCacheOptions {
  int64_t positions = 4;
  int64_t start = 0;
  std::string pair_layout;
  double theta = 0;
  int head_dim = 0;
  int rotary_dim = 0;
  bool allow_beyond = false;
  bool high_precision = false;
  int show = 8;
};

struct SinusoidalOptions {
  int64_t positions = 0;
  int64_t dim = 0;
  int64_t start = 0;
  double base = 0;
  std::string layout = "interleaved";
  int show = 8;
};

struct AlibiOptions {
  int heads = 0;
  bool bias = false;
  int64_t q_len = 0;
  int64_t k_len = 0;
  bool bidirectional = false;
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
  std::string pair_layout;
  double theta = 0;
  int rotary_dim = 0;
  bool random = false;
  uint64_t seed = 0;
  bool allow_beyond = false;
  bool high_precision = false;
  int show = 8;
};

// ---------------------------------------------------------------------------
// Helpers.

// "1,403,407" -> {1, 403, 407}. Spaces around items are allowed.
absl::StatusOr<std::vector<int64_t>> ParseIdList(const std::string& text) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    int64_t v;
    if (!absl::SimpleAtoi(item, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("'", item, "' is not an integer"));
    }
    out.push_back(v);
  }
  return out;
}

// CLI11 validator for comma-separated integer lists.
CLI::Validator IdListValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        auto ids = ParseIdList(text);
        if (!ids.ok()) return std::string(ids.status().message());
        if (ids->empty()) return "empty id list";
        return "";
      },
      "ID,ID,...", "IdList");
}

absl::StatusOr<DType> ParseFloatDType(const std::string& name) {
  if (name == "f32") return DType::kF32;
  if (name == "f16") return DType::kF16;
  if (name == "bf16") return DType::kBF16;
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", name, "'"));
}

json ShapeJson(const v1::Tensor& t) { return json(std::vector<int64_t>(t.shape().begin(), t.shape().end())); }

std::string Num(double v) { return absl::StrFormat("%.6g", v); }

// Fixed-width value for columns of numbers.
std::string Cell(double v) { return absl::StrFormat("%10.5f", v); }

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrCat(bytes, " B") : absl::StrFormat("%.1f %s", v, units[u]);
}

// Lowercase enum names without the common prefix.
std::string PairLayoutName(v1::RopePairLayout p) {
  switch (p) {
    case v1::INTERLEAVED:
      return "interleaved";
    case v1::HALF_SPLIT:
      return "half-split";
    default:
      return "-";
  }
}

// Proto message -> JSON value with proto field names. Unlike the canonical
// proto3 JSON mapping, 64-bit integers are JSON numbers (ids, sizes and
// counts here are far below 2^53). Scalars without presence always print;
// unset sub-messages and unset `optional` scalars are omitted; enums print
// their names; bytes fields print as "<n> bytes" (no Tensor is
// printed this way).
json ProtoJson(const google::protobuf::Message& message);

json ProtoScalarJson(const google::protobuf::Message& m, const google::protobuf::FieldDescriptor* f,
                     int index) {
  using FD = google::protobuf::FieldDescriptor;
  const auto* r = m.GetReflection();
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case FD::CPPTYPE_INT32:
      return rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f);
    case FD::CPPTYPE_INT64:
      return rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f);
    case FD::CPPTYPE_UINT32:
      return rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f);
    case FD::CPPTYPE_UINT64:
      return rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f);
    case FD::CPPTYPE_DOUBLE:
      return rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f);
    case FD::CPPTYPE_FLOAT:
      return rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f);
    case FD::CPPTYPE_BOOL:
      return rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f);
    case FD::CPPTYPE_ENUM: {
      const auto* e = rep ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f);
      return e->name();
    }
    case FD::CPPTYPE_STRING: {
      std::string v = rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
      if (f->type() == FD::TYPE_BYTES) return absl::StrCat(v.size(), " bytes");
      return v;
    }
    case FD::CPPTYPE_MESSAGE:
      return ProtoJson(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
  }
  return nullptr;
}

json ProtoJson(const google::protobuf::Message& message) {
  json out = json::object();
  const auto* d = message.GetDescriptor();
  const auto* r = message.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    if (f->is_repeated()) {
      json items = json::array();
      for (int j = 0; j < r->FieldSize(message, f); ++j) items.push_back(ProtoScalarJson(message, f, j));
      out[f->name()] = std::move(items);
    } else if (!f->has_presence() || r->HasField(message, f)) {
      out[f->name()] = ProtoScalarJson(message, f, 0);
    }
  }
  return out;
}

// Seeded portable standard-normal values (mt19937_64 + Box-Muller), so the
// same --seed gives the same rows on every platform.
std::vector<float> RandomNormal(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&rng]() {  // (0, 1]
    return (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53;
  };
  std::vector<float> out(n);
  for (size_t i = 0; i < n; i += 2) {
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double a = 2.0 * std::numbers::pi * uniform();
    out[i] = static_cast<float>(r * std::cos(a));
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(a));
  }
  return out;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading '", path, "'"));
  return bytes;
}

// Indices of the `n` largest values of row[0, width), highest first, ties by
// lower index (the server's top-k convention). NaN sorts last.
std::vector<int64_t> TopIndices(const float* row, int64_t width, int n) {
  std::vector<int64_t> idx(width);
  std::iota(idx.begin(), idx.end(), 0);
  const int64_t k = std::min<int64_t>(n, width);
  auto better = [row](int64_t a, int64_t b) {
    const float x = row[a], y = row[b];
    if (std::isnan(x) != std::isnan(y)) return std::isnan(y);
    if (x != y) return x > y;
    return a < b;
  };
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), better);
  idx.resize(k);
  return idx;
}

// Small documents print indented; documents carrying tensor data print on
// one line (pipe through `jq` to pretty-print).
void PrintJson(const json& j) { std::cout << j.dump(2) << "\n"; }
void PrintJsonCompact(const json& j) { std::cout << j.dump() << "\n"; }

// ---------------------------------------------------------------------------
// Subcommands. Each returns the process exit code or a non-OK status.

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

void PrintTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()));
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      line += r[c];
      if (c + 1 < r.size()) line += std::string(width[c] - r[c].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

std::string RopeSummary(const v1::ModelInfo& m) {
  if (m.position_scheme() != v1::POSITION_ROPE) {
    std::string scheme = v1::PositionScheme_Name(m.position_scheme());
    return scheme == "POSITION_SCHEME_UNSPECIFIED" ? "-" : scheme;
  }
  return absl::StrCat(Num(m.rope().theta()), "/", PairLayoutName(m.rope().pair_layout()));
}

void PrintModelDetail(const v1::ModelInfo& m) {
  std::vector<std::vector<std::string>> rows = {
      {"name:", m.name() + (m.is_default() ? " (default)" : "")},
      {"state:", v1::ModelState_Name(m.state()) +
                     (m.state_reason().empty() ? "" : " (" + m.state_reason() + ")")},
      {"architecture:", m.architecture()},
      {"vocab_size:", absl::StrCat(m.vocab_size())},
      {"hidden_size:", absl::StrCat(m.hidden_size())},
      {"layers:", absl::StrCat(m.num_hidden_layers())},
      {"heads:", absl::StrCat(m.num_attention_heads(), " q / ", m.num_key_value_heads(),
                              " kv, head_dim ", m.head_dim())},
      {"max_positions:", absl::StrCat(m.max_position_embeddings())},
      {"dtype:", v1::DType_Name(m.dtype())},
      {"tied head:", m.tie_word_embeddings() ? "yes" : "no"},
      {"positions:", v1::PositionScheme_Name(m.position_scheme())},
  };
  if (m.position_scheme() == v1::POSITION_ROPE || m.has_rope()) {
    const v1::RopeConfig& r = m.rope();
    rows.push_back({"rope:", absl::StrCat("theta ", Num(r.theta()), ", rotary_dim ", r.rotary_dim(),
                                          ", head_dim ", r.head_dim(), ", pairs ",
                                          PairLayoutName(r.pair_layout()))});
    if (r.scaling().type() != v1::ROPE_SCALING_TYPE_UNSPECIFIED &&
        r.scaling().type() != v1::ROPE_SCALING_DEFAULT) {
      rows.push_back({"rope scaling:", absl::StrCat(v1::RopeScalingType_Name(r.scaling().type()),
                                                    ", factor ", Num(r.scaling().factor()),
                                                    ", original_max ",
                                                    r.scaling().original_max_position_embeddings())});
    }
  }
  if (m.position_scheme() == v1::POSITION_LEARNED) {
    rows.push_back({"learned positions:",
                    absl::StrCat("row = position + ", m.learned_position_offset(),
                                 m.learned_position_padding_idx() >= 0
                                     ? absl::StrCat(", pads (id ", m.learned_position_padding_idx(),
                                                    ") on row ", m.learned_position_padding_idx())
                                     : "")});
  }
  if (!m.lm_head_unsupported_reason().empty()) {
    rows.push_back({"lm head:", "not served: " + m.lm_head_unsupported_reason()});
  }
  rows.push_back({"final norm:", absl::StrCat(v1::NormKind_Name(m.final_norm().kind()), " eps ",
                                              Num(m.final_norm().eps()))});
  rows.push_back({"embedding scale:", Num(m.embedding_scale())});
  rows.push_back({"bos/eos:", absl::StrCat(m.bos_token_id(), " / ", m.eos_token_id())});
  rows.push_back({"requested dtype:", m.requested_dtype() == v1::DTYPE_UNSPECIFIED
                                          ? std::string("auto")
                                          : v1::DType_Name(m.requested_dtype())});
  if (!m.dtype_fallback_reason().empty()) {
    rows.push_back({"dtype fallback:", m.dtype_fallback_reason()});
  }
  if (!m.lm_head_implementation().empty()) {
    rows.push_back({"lm head kernels:", m.lm_head_implementation()});
  }
  rows.push_back({"batching:", m.has_batching()
                                   ? absl::StrCat("max_batch_rows ", m.batching().max_batch_rows(),
                                                  ", max_queue_delay_us ",
                                                  m.batching().max_queue_delay_us(),
                                                  ", max_queue_rows ",
                                                  m.batching().max_queue_rows())
                                   : std::string("off")});
  rows.push_back({"resident:", absl::StrCat(HumanBytes(m.resident_bytes()), " (",
                                            m.resident_bytes(), " bytes)")});
  for (const auto& f : m.source_files()) {
    rows.push_back({"source:", absl::StrCat(f.path(), " [", f.format(), ", ",
                                            HumanBytes(f.size_bytes()),
                                            f.memory_mapped() ? ", mmap" : "", "]")});
    rows.push_back({"  sha256:", f.sha256()});
  }
  PrintTable(rows);
}

absl::StatusOr<int> RunModels(VocabdClient& client, const GlobalOptions& g,
                              const ModelsOptions& o) {
  if (!o.name.empty()) {
    ASSIGN_OR_RETURN(v1::ModelInfo info, client.GetModel(o.name));
    if (g.json) {
      PrintJson(ProtoJson(info));
    } else {
      PrintModelDetail(info);
    }
    return kExitOk;
  }
  ASSIGN_OR_RETURN(v1::ListModelsResponse list, client.ListModels());
  if (g.json) {
    PrintJson(ProtoJson(list));
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"NAME", "STATE", "ARCH", "VOCAB", "HIDDEN",
                                                 "DTYPE", "TIED", "ROPE(theta/pairs)",
                                                 "RESIDENT"}};
  for (const auto& m : list.models()) {
    std::string state = v1::ModelState_Name(m.state());
    rows.push_back({m.name() + (m.is_default() ? "*" : ""), state, m.architecture(),
                    absl::StrCat(m.vocab_size()), absl::StrCat(m.hidden_size()),
                    v1::DType_Name(m.dtype()), m.tie_word_embeddings() ? "yes" : "no",
                    RopeSummary(m), HumanBytes(m.resident_bytes())});
  }
  PrintTable(rows);
  if (list.models().empty()) std::cout << "(no models)\n";
  return kExitOk;
}

absl::StatusOr<int> RunEmbed(VocabdClient& client, const GlobalOptions& g, const EmbedOptions& o) {
  v1::EmbedRequest request;
  request.set_model(g.model);
  ASSIGN_OR_RETURN(DType dtype, ParseFloatDType(o.dtype));
  request.set_output_dtype(DTypeToProto(dtype));
  static const std::map<std::string, v1::AbsolutePositions> kPositions = {
      {"default", v1::ABSOLUTE_POSITIONS_MODEL_DEFAULT},
      {"none", v1::ABSOLUTE_POSITIONS_NONE},
      {"sinusoidal", v1::ABSOLUTE_POSITIONS_SINUSOIDAL},
      {"learned", v1::ABSOLUTE_POSITIONS_LEARNED}};
  static const std::map<std::string, v1::EmbeddingScale> kScales = {
      {"default", v1::EMBEDDING_SCALE_MODEL_DEFAULT},
      {"none", v1::EMBEDDING_SCALE_NONE},
      {"sqrt-hidden", v1::EMBEDDING_SCALE_SQRT_HIDDEN}};
  request.set_absolute_positions(kPositions.at(o.positions));
  request.set_embedding_scale(kScales.at(o.scale));
  std::vector<int64_t> all_ids;
  for (size_t i = 0; i < o.ids.size(); ++i) {
    ASSIGN_OR_RETURN(std::vector<int64_t> ids, ParseIdList(o.ids[i]));
    v1::TokenSequence* seq = request.add_sequences();
    seq->mutable_token_ids()->Assign(ids.begin(), ids.end());
    if (!o.offsets.empty()) seq->set_position_offset(o.offsets.size() == 1 ? o.offsets[0] : o.offsets[i]);
    all_ids.insert(all_ids.end(), ids.begin(), ids.end());
  }
  ASSIGN_OR_RETURN(v1::EmbedResponse response, client.Embed(request));
  ASSIGN_OR_RETURN(std::vector<float> values, DecodeFloatTensor(response.embeddings(), "embeddings"));
  const auto& shape = response.embeddings().shape();
  if (shape.size() != 2) {
    return absl::InternalError(absl::StrCat("server returned embeddings of shape ",
                                            ShapeString(response.embeddings().shape()),
                                            "; expected [tokens, hidden]"));
  }
  const int64_t rows = shape[0], width = shape[1];
  std::vector<int64_t> offsets(response.sequence_offsets().begin(),
                               response.sequence_offsets().end());
  if (g.json) {
    json embeddings = json::array();
    for (int64_t r = 0; r < rows; ++r) {
      embeddings.push_back(std::vector<float>(values.begin() + r * width,
                                              values.begin() + (r + 1) * width));
    }
    PrintJsonCompact({{"model", response.model()},
               {"dtype", v1::DType_Name(response.embeddings().dtype())},
               {"shape", ShapeJson(response.embeddings())},
               {"sequence_offsets", offsets},
               {"token_ids", all_ids},
               {"embeddings", embeddings}});
    return kExitOk;
  }
  std::cout << "model: " << response.model() << "\n"
            << "shape: " << ShapeString(response.embeddings().shape()) << " "
            << v1::DType_Name(response.embeddings().dtype()) << "\n";
  const int64_t show = std::min<int64_t>(o.show, width);
  size_t seq = 0;
  for (int64_t r = 0; r < rows; ++r) {
    while (seq + 1 < offsets.size() && r >= offsets[seq + 1]) ++seq;
    if (offsets.size() > 2 && seq + 1 < offsets.size() && r == offsets[seq]) {
      std::cout << "sequence " << seq << ":\n";
    }
    const std::string id = r < static_cast<int64_t>(all_ids.size()) ? absl::StrCat(all_ids[r]) : "?";
    std::string line = absl::StrFormat("  [%d] id %5s:", r, id);
    for (int64_t c = 0; c < show; ++c) line += " " + Cell(values[r * width + c]);
    if (show < width) line += " ...";
    std::cout << line << "\n";
  }
  return kExitOk;
}

// Builds the hidden tensor [N, hidden] from the chosen source.
absl::StatusOr<v1::Tensor> BuildHidden(VocabdClient& client, const GlobalOptions& g,
                                       const HiddenSource& s) {
  ASSIGN_OR_RETURN(DType dtype, ParseFloatDType(s.input_dtype));
  if (!s.from_ids.empty()) {
    ASSIGN_OR_RETURN(std::vector<int64_t> ids, ParseIdList(s.from_ids));
    v1::EmbedRequest request;
    request.set_model(g.model);
    request.set_output_dtype(DTypeToProto(dtype));
    request.add_sequences()->mutable_token_ids()->Assign(ids.begin(), ids.end());
    ASSIGN_OR_RETURN(v1::EmbedResponse response, client.Embed(request));
    return response.embeddings();
  }
  ASSIGN_OR_RETURN(v1::ModelInfo info, client.GetModel(g.model));
  const int64_t hidden = info.hidden_size();
  if (hidden <= 0) {
    return absl::FailedPreconditionError(absl::StrCat("model '", info.name(),
                                                      "' reports hidden_size ", hidden));
  }
  if (!s.hidden_file.empty()) {
    ASSIGN_OR_RETURN(std::string bytes, ReadFile(s.hidden_file));
    const int64_t row_bytes = hidden * static_cast<int64_t>(sizeof(float));
    if (bytes.empty() || static_cast<int64_t>(bytes.size()) % row_bytes != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--hidden-file '", s.hidden_file, "' has ", bytes.size(),
                       " bytes; expected a positive multiple of hidden_size ", hidden,
                       " x 4 (raw little-endian f32 [N, ", hidden, "])"));
    }
    const int64_t n = static_cast<int64_t>(bytes.size()) / row_bytes;
    std::vector<float> values(static_cast<size_t>(n * hidden));
    std::memcpy(values.data(), bytes.data(), bytes.size());
    return EncodeFloatTensor(values, {n, hidden}, dtype);
  }
  const int64_t n = s.random_rows;
  return EncodeFloatTensor(RandomNormal(static_cast<size_t>(n * hidden), s.seed), {n, hidden},
                           dtype);
}

absl::StatusOr<int> RunLogits(VocabdClient& client, const GlobalOptions& g,
                              const LogitsOptions& o) {
  v1::ComputeLogitsRequest request;
  request.set_model(g.model);
  ASSIGN_OR_RETURN(*request.mutable_hidden(), BuildHidden(client, g, o.source));
  if (o.no_final_norm) request.set_apply_final_norm(false);
  request.set_temperature(o.temperature);
  request.set_log_softmax(o.log_softmax);
  request.set_vocab_limit(o.vocab_limit);
  ASSIGN_OR_RETURN(DType dtype, ParseFloatDType(o.dtype));
  request.set_output_dtype(DTypeToProto(dtype));
  ASSIGN_OR_RETURN(v1::ComputeLogitsResponse response, client.ComputeLogits(request));
  ASSIGN_OR_RETURN(std::vector<float> logits, DecodeFloatTensor(response.logits(), "logits"));
  const auto& shape = response.logits().shape();
  if (shape.size() != 2) {
    return absl::InternalError(absl::StrCat("server returned logits of shape ",
                                            ShapeString(response.logits().shape())));
  }
  const int64_t rows = shape[0], vocab = shape[1];
  const char* kind = o.log_softmax ? "logprobs" : "logits";
  if (g.json) {
    json data = json::array(), top = json::array();
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = logits.data() + r * vocab;
      data.push_back(std::vector<float>(row, row + vocab));
      json t = json::array();
      for (int64_t id : TopIndices(row, vocab, o.top)) t.push_back({{"id", id}, {"value", row[id]}});
      top.push_back(t);
    }
    PrintJsonCompact({{"model", response.model()},
               {"kind", kind},
               {"dtype", v1::DType_Name(response.logits().dtype())},
               {"shape", ShapeJson(response.logits())},
               {"top", top},
               {"logits", data}});
    return kExitOk;
  }
  std::cout << "model: " << response.model() << "\n"
            << kind << ": " << ShapeString(response.logits().shape()) << " "
            << v1::DType_Name(response.logits().dtype()) << "\n";
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * vocab;
    std::string line = absl::StrFormat("  row %d top %d:", r, std::min<int64_t>(o.top, vocab));
    for (int64_t id : TopIndices(row, vocab, o.top)) {
      line += absl::StrCat("  ", id, " (", Num(row[id]), ")");
    }
    std::cout << line << "\n";
  }
  return kExitOk;
}

// ScoreRequest options shared by `score` and `score-stream`.
void SetScoreOptions(const ScoreOptions& o, const std::vector<int64_t>& targets,
                     v1::ScoreRequest* request) {
  request->mutable_target_ids()->Assign(targets.begin(), targets.end());
  request->set_top_k(o.top_k);
  if (o.no_final_norm) request->set_apply_final_norm(false);
  request->set_temperature(o.temperature);
  request->set_vocab_limit(o.vocab_limit);
}

double Perplexity(const v1::ScoreResponse& response) {
  return response.num_targets() > 0
             ? std::exp(-response.sum_target_logprob() /
                        static_cast<double>(response.num_targets()))
             : std::nan("");
}

// `score --json` document for one response.
json ScoreResponseJson(const v1::ScoreResponse& response, const std::vector<int64_t>& targets) {
  const bool has_targets = !targets.empty();
  json rows = json::array();
  for (int i = 0; i < response.rows_size(); ++i) {
    const v1::RowScore& r = response.rows(i);
    json row = {{"row", i}, {"logsumexp", r.logsumexp()}};
    if (has_targets) {
      row["target_id"] = i < static_cast<int>(targets.size()) ? json(targets[i]) : json();
      row["target_logprob"] = r.target_logprob();
      row["target_rank"] = r.target_rank();
    }
    json top = json::array();
    for (const auto& t : r.top_k()) top.push_back({{"id", t.token_id()}, {"logprob", t.logprob()}});
    row["top_k"] = top;
    rows.push_back(row);
  }
  json out = {{"model", response.model()}, {"rows", rows}};
  if (has_targets) {
    out["sum_target_logprob"] = response.sum_target_logprob();
    out["num_targets"] = response.num_targets();
    out["perplexity"] = Perplexity(response);
  }
  return out;
}

// `score` human-readable output for one response.
void PrintScoreResponse(const v1::ScoreResponse& response, const std::vector<int64_t>& targets,
                        int top_k) {
  const bool has_targets = !targets.empty();
  std::cout << "model: " << response.model() << "\n";
  std::vector<std::vector<std::string>> table;
  std::vector<std::string> header = {"ROW"};
  if (has_targets) header.insert(header.end(), {"TARGET", "LOGPROB", "RANK"});
  header.push_back("LOGSUMEXP");
  if (top_k > 0) header.push_back(absl::StrCat("TOP-", top_k, " (id:logprob)"));
  table.push_back(header);
  for (int i = 0; i < response.rows_size(); ++i) {
    const v1::RowScore& r = response.rows(i);
    std::vector<std::string> line = {absl::StrCat(i)};
    if (has_targets) {
      line.push_back(i < static_cast<int>(targets.size()) ? absl::StrCat(targets[i]) : "?");
      line.push_back(Num(r.target_logprob()));
      line.push_back(absl::StrCat(r.target_rank()));
    }
    line.push_back(Num(r.logsumexp()));
    if (top_k > 0) {
      std::vector<std::string> items;
      for (const auto& t : r.top_k()) items.push_back(absl::StrCat(t.token_id(), ":", Num(t.logprob())));
      line.push_back(absl::StrJoin(items, " "));
    }
    table.push_back(line);
  }
  PrintTable(table);
  if (has_targets) {
    std::cout << "sum logprob: " << Num(response.sum_target_logprob()) << " over "
              << response.num_targets() << " targets, perplexity " << Num(Perplexity(response))
              << "\n";
  }
}

absl::StatusOr<int> RunScore(VocabdClient& client, const GlobalOptions& g, const ScoreOptions& o) {
  v1::ScoreRequest request;
  request.set_model(g.model);
  ASSIGN_OR_RETURN(*request.mutable_hidden(), BuildHidden(client, g, o.source));
  ASSIGN_OR_RETURN(std::vector<int64_t> targets, ParseIdList(o.targets));
  SetScoreOptions(o, targets, &request);
  ASSIGN_OR_RETURN(v1::ScoreResponse response, client.Score(request));
  if (g.json) {
    PrintJson(ScoreResponseJson(response, targets));
  } else {
    PrintScoreResponse(response, targets, o.top_k);
  }
  return kExitOk;
}

// One ScoreRequest per --from-ids group (hidden states built as `score
// --from-ids` builds them), all sent on one ScoreStream.
absl::StatusOr<int> RunScoreStream(VocabdClient& client, const GlobalOptions& g,
                                   const ScoreStreamOptions& o) {
  std::vector<v1::ScoreRequest> requests;
  std::vector<std::vector<int64_t>> targets;
  for (size_t i = 0; i < o.from_ids.size(); ++i) {
    HiddenSource source;
    source.from_ids = o.from_ids[i];
    source.input_dtype = o.input_dtype;
    v1::ScoreRequest& request = requests.emplace_back();
    request.set_model(g.model);
    ASSIGN_OR_RETURN(*request.mutable_hidden(), BuildHidden(client, g, source));
    ASSIGN_OR_RETURN(targets.emplace_back(),
                     ParseIdList(o.targets.empty() ? std::string() : o.targets[i]));
    SetScoreOptions(o.score, targets.back(), &request);
  }
  ASSIGN_OR_RETURN(std::vector<v1::ScoreResponse> responses, client.ScoreStream(requests));
  if (g.json) {
    json out = json::array();
    for (size_t i = 0; i < responses.size(); ++i) out.push_back(ScoreResponseJson(responses[i], targets[i]));
    PrintJson({{"responses", out}});
    return kExitOk;
  }
  for (size_t i = 0; i < responses.size(); ++i) {
    std::cout << "response " << i << " (--from-ids " << o.from_ids[i] << "):\n";
    PrintScoreResponse(responses[i], targets[i], o.score.top_k);
  }
  return kExitOk;
}

absl::StatusOr<int> RunLoad(VocabdClient& client, const GlobalOptions& g, const LoadOptions& o) {
  ASSIGN_OR_RETURN(v1::ModelInfo info, client.LoadModel(o.name));
  if (g.json) {
    PrintJson(ProtoJson(info));
  } else {
    PrintModelDetail(info);
  }
  return kExitOk;
}

absl::StatusOr<int> RunUnload(VocabdClient& client, const GlobalOptions& g,
                              const LoadOptions& o) {
  ASSIGN_OR_RETURN(v1::UnloadModelResponse response, client.UnloadModel(o.name));
  (void)response;  // empty message
  if (g.json) {
    PrintJson({{"name", o.name}, {"state", "UNLOADED"}});
  } else {
    std::cout << o.name << ": unloaded\n";
  }
  return kExitOk;
}

// Prints the first `show_rows` x `show_cols` values of a [rows, cols] matrix,
// one labelled line per row.
void PrintMatrix(const std::string& title, const std::vector<float>& values, int64_t rows,
                 int64_t cols, int64_t first_label, int64_t show_rows, int64_t show_cols) {
  show_rows = std::min(show_rows, rows);
  show_cols = std::min(show_cols, cols);
  std::cout << title << ", first " << show_rows << " of " << rows << " rows, " << show_cols
            << " of " << cols << " values:\n";
  for (int64_t r = 0; r < show_rows; ++r) {
    std::string line = absl::StrFormat("  pos %3d:", first_label + r);
    for (int64_t c = 0; c < show_cols; ++c) {
      absl::StrAppend(&line, " ", Cell(values[r * cols + c]));
    }
    if (show_cols < cols) line += " ...";
    std::cout << line << "\n";
  }
}

// [rows, cols] F32 tensor -> values, checking the shape.
absl::StatusOr<std::vector<float>> DecodeMatrix(const v1::Tensor& t, const char* name,
                                                int64_t* rows, int64_t* cols) {
  ASSIGN_OR_RETURN(std::vector<float> values, DecodeFloatTensor(t, name));
  if (t.shape_size() != 2 || static_cast<int64_t>(values.size()) != t.shape(0) * t.shape(1)) {
    return absl::InternalError(absl::StrCat("server returned ", name, " of shape ",
                                            ShapeString(t.shape()), "; expected [positions, n]"));
  }
  *rows = t.shape(0);
  *cols = t.shape(1);
  return values;
}

json MatrixJson(const std::vector<float>& values, int64_t rows, int64_t cols) {
  json out = json::array();
  for (int64_t r = 0; r < rows; ++r) {
    out.push_back(std::vector<float>(values.begin() + r * cols, values.begin() + (r + 1) * cols));
  }
  return out;
}

absl::StatusOr<int> RunRopeCache(VocabdClient& client, const GlobalOptions& g,
                                 const RopeCacheOptions& o) {
  v1::GetRopeCacheRequest request;
  request.set_model(g.model);
  request.set_num_positions(o.positions);
  request.set_start_position(o.start);
  if (o.theta > 0) request.mutable_rope()->set_theta(o.theta);
  if (o.head_dim > 0) request.mutable_rope()->set_head_dim(o.head_dim);
  if (o.rotary_dim > 0) request.mutable_rope()->set_rotary_dim(o.rotary_dim);
  if (o.pair_layout == "interleaved") request.mutable_rope()->set_pair_layout(v1::INTERLEAVED);
  if (o.pair_layout == "half-split") request.mutable_rope()->set_pair_layout(v1::HALF_SPLIT);
  request.set_allow_beyond_trained_length(o.allow_beyond);
  request.set_high_precision(o.high_precision);
  ASSIGN_OR_RETURN(v1::GetRopeCacheResponse response, client.GetRopeCache(request));
  ASSIGN_OR_RETURN(std::vector<float> inv_freq, DecodeFloatTensor(response.inv_freq(), "inv_freq"));
  int64_t rows = 0, cols = 0, sin_rows = 0, sin_cols = 0;
  ASSIGN_OR_RETURN(std::vector<float> cos, DecodeMatrix(response.cos(), "cos", &rows, &cols));
  ASSIGN_OR_RETURN(std::vector<float> sin, DecodeMatrix(response.sin(), "sin", &sin_rows, &sin_cols));
  if (sin_rows != rows || sin_cols != cols) {
    return absl::InternalError(absl::StrCat("server returned cos ",
                                            ShapeString(response.cos().shape()), " and sin ",
                                            ShapeString(response.sin().shape())));
  }
  if (g.json) {
    PrintJsonCompact({{"model", g.model},
                      {"start_position", o.start},
                      {"num_positions", o.positions},
                      {"attention_scaling", response.attention_scaling()},
                      {"used_long_factor", response.used_long_factor()},
                      {"rope", ProtoJson(response.rope())},
                      {"inv_freq", inv_freq},
                      {"cos", MatrixJson(cos, rows, cols)},
                      {"sin", MatrixJson(sin, rows, cols)}});
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
  std::string line = absl::StrFormat("inv_freq, first %d of %d:", show, inv_freq.size());
  for (int64_t i = 0; i < show; ++i) line += " " + Cell(inv_freq[i]);
  std::cout << line << "\n";
  PrintMatrix("cos", cos, rows, cols, o.start, o.show, o.show);
  PrintMatrix("sin", sin, rows, cols, o.start, o.show, o.show);
  return kExitOk;
}

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
                      {"table", MatrixJson(table, rows, cols)}});
    return kExitOk;
  }
  std::cout << "table: " << ShapeString(response.table().shape()) << " "
            << v1::DType_Name(response.table().dtype()) << ", layout " << o.layout << "\n";
  PrintMatrix("table", table, rows, cols, o.start, o.show, o.show);
  return kExitOk;
}

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
        b.push_back(MatrixJson(std::vector<float>(bias.begin() + h * o.q_len * o.k_len,
                                                  bias.begin() + (h + 1) * o.q_len * o.k_len),
                               o.q_len, o.k_len));
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

// Flat index of element (b, h, s, d) of a q/k tensor in `layout`.
int64_t RopeIndex(const std::string& layout, int64_t b, int64_t h, int64_t s, int64_t d,
                  int64_t heads, int64_t seq, int64_t dim) {
  if (layout == "bhsd") return ((b * heads + h) * seq + s) * dim + d;
  return ((b * seq + s) * heads + h) * dim + d;  // bshd and thd (t = b * seq + s)
}

std::vector<int64_t> RopeShape(const std::string& layout, int64_t batch, int64_t heads,
                               int64_t seq, int64_t dim) {
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
  if (o.theta > 0) request.mutable_rope()->set_theta(o.theta);
  if (o.rotary_dim > 0) request.mutable_rope()->set_rotary_dim(o.rotary_dim);
  if (o.pair_layout == "interleaved") request.mutable_rope()->set_pair_layout(v1::INTERLEAVED);
  if (o.pair_layout == "half-split") request.mutable_rope()->set_pair_layout(v1::HALF_SPLIT);
  request.set_allow_beyond_trained_length(o.allow_beyond);
  request.set_high_precision(o.high_precision);
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
    return absl::InternalError(absl::StrCat("server returned q ", ShapeString(response.q().shape()),
                                            " and k ", ShapeString(response.k().shape()),
                                            " for q ", ShapeString(request.q().shape()), " and k ",
                                            ShapeString(request.k().shape())));
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
            << "  k: " << ShapeString(request.k().shape())
            << "  ->  q: " << ShapeString(response.q().shape())
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

void AddHiddenSource(CLI::App* sub, HiddenSource* s) {
  CLI::App* group = sub->add_option_group("hidden source", "where the hidden states come from");
  group->add_option("--hidden-file", s->hidden_file,
                    "raw little-endian f32 file of [N, hidden_size] rows")
      ->check(CLI::ExistingFile);
  group->add_option("--random", s->random_rows, "N seeded standard-normal rows (see --seed)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  group->add_option("--from-ids", s->from_ids,
                    "embed these ids (comma-separated) and use the rows as hidden states")
      ->check(IdListValidator());
  group->require_option(1);
  sub->add_option("--seed", s->seed, "seed for --random")->capture_default_str();
  sub->add_option("--input-dtype", s->input_dtype, "dtype the hidden states are sent in")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
}

int Main(int argc, char** argv) {
  CLI::App app{"vocabctl: command-line client for vocabd (embeddings, LM head, RoPE)"};
  app.fallthrough();  // global options are accepted after the subcommand too
  app.require_subcommand(1);
  GlobalOptions g;
  app.add_option("--target", g.target, "server address host:port or gRPC URI")
      ->envname("VOCABD_TARGET")
      ->capture_default_str();
  app.add_option("--timeout", g.timeout_ms, "per-call deadline in milliseconds (0 = none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--json", g.json, "machine-readable JSON output");
  app.add_option("--model", g.model, "model name (default: the server's default model)");
  app.add_flag("--tls", g.tls, "connect with TLS (implied by --ca/--cert/--key)")
      ->envname("VOCABD_TLS");
  app.add_option("--ca", g.ca, "PEM CA bundle that verifies the server (default: system roots)")
      ->envname("VOCABD_CA");
  app.add_option("--cert", g.cert, "PEM client certificate for mutual TLS (with --key)")
      ->envname("VOCABD_CERT");
  app.add_option("--key", g.key, "PEM private key for --cert")->envname("VOCABD_KEY");
  app.add_option("--tls-server-name", g.tls_server_name,
                 "name checked against the server certificate (default: the target host)")
      ->envname("VOCABD_TLS_SERVER_NAME");
  app.add_option("--token-file", g.token_file,
                 "file whose first line is a bearer token sent as 'authorization: Bearer' "
                 "(needs TLS)")
      ->envname("VOCABD_TOKEN_FILE");
  app.add_option("--token", g.token,
                 "bearer token (needs TLS); prefer env VOCABD_TOKEN or --token-file, which "
                 "do not show in `ps`")
      ->envname("VOCABD_TOKEN");
  app.add_option("--lb-policy", g.lb_policy,
                 "client-side load balancing: round_robin (with a dns:/// target) or "
                 "pick_first")
      ->check(CLI::IsMember({"round_robin", "pick_first"}))
      ->envname("VOCABD_LB_POLICY");

  HealthOptions health;
  CLI::App* health_cmd = app.add_subcommand("health", "grpc.health.v1 Check; exit 0 only when SERVING");
  health_cmd->add_option("--service", health.service,
                         "service name, e.g. vocabd.v1.ScoringService (default: overall)");

  CLI::App* services_cmd = app.add_subcommand("services", "list services via server reflection");

  ModelsOptions models;
  CLI::App* models_cmd = app.add_subcommand("models", "list models, or show one model's full info");
  models_cmd->add_option("name", models.name, "model to describe");

  EmbedOptions embed;
  CLI::App* embed_cmd = app.add_subcommand("embed", "token ids -> embedding rows");
  embed_cmd->add_option("--ids", embed.ids, "comma-separated token ids; repeat for more sequences")
      ->required()
      ->check(IdListValidator())
      ->allow_extra_args(false);
  embed_cmd->add_option("--offset", embed.offsets,
                        "position offset: once for all sequences or once per --ids")
      ->allow_extra_args(false);
  embed_cmd->add_option("--dtype", embed.dtype, "output dtype")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  embed_cmd->add_option("--positions", embed.positions, "absolute positions added")
      ->check(CLI::IsMember({"default", "none", "sinusoidal", "learned"}))
      ->capture_default_str();
  embed_cmd->add_option("--scale", embed.scale, "embedding scale")
      ->check(CLI::IsMember({"default", "none", "sqrt-hidden"}))
      ->capture_default_str();
  embed_cmd->add_option("--show", embed.show, "values printed per token")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();

  LogitsOptions logits;
  CLI::App* logits_cmd = app.add_subcommand("logits", "hidden states -> LM-head logits");
  AddHiddenSource(logits_cmd, &logits.source);
  logits_cmd->add_flag("--no-final-norm", logits.no_final_norm, "skip the checkpoint's final norm");
  logits_cmd->add_option("--temperature", logits.temperature, "divide logits by T (> 0)");
  logits_cmd->add_flag("--log-softmax", logits.log_softmax, "return log-softmax(logits)");
  logits_cmd->add_option("--top", logits.top, "largest values printed per row")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  logits_cmd->add_option("--dtype", logits.dtype, "output dtype")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  logits_cmd->add_option("--vocab-limit", logits.vocab_limit, "mask ids >= this (0 = none)");

  ScoreOptions score;
  CLI::App* score_cmd = app.add_subcommand("score", "hidden states -> target logprobs, ranks, top-k");
  AddHiddenSource(score_cmd, &score.source);
  score_cmd->add_option("--targets", score.targets, "one comma-separated target id per row")
      ->check(IdListValidator());
  score_cmd->add_option("--top-k", score.top_k, "best tokens per row (0..1024)")
      ->check(CLI::Range(0, 1024));
  score_cmd->add_flag("--no-final-norm", score.no_final_norm, "skip the checkpoint's final norm");
  score_cmd->add_option("--temperature", score.temperature, "divide logits by T (> 0)");
  score_cmd->add_option("--vocab-limit", score.vocab_limit, "mask ids >= this (0 = none)");

  ScoreStreamOptions score_stream;
  CLI::App* score_stream_cmd = app.add_subcommand(
      "score-stream", "ScoreStream: one ScoreRequest per --from-ids, all on one stream");
  score_stream_cmd
      ->add_option("--from-ids", score_stream.from_ids,
                   "embed these ids (comma-separated) as one request's hidden states; repeat "
                   "for more requests")
      ->required()
      ->check(IdListValidator())
      ->allow_extra_args(false);
  score_stream_cmd
      ->add_option("--targets", score_stream.targets,
                   "one comma-separated target id per row; none, or once per --from-ids")
      ->check(IdListValidator())
      ->allow_extra_args(false);
  score_stream_cmd->add_option("--input-dtype", score_stream.input_dtype,
                               "dtype the hidden states are sent in")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  score_stream_cmd->add_option("--top-k", score_stream.score.top_k, "best tokens per row (0..1024)")
      ->check(CLI::Range(0, 1024));
  score_stream_cmd->add_flag("--no-final-norm", score_stream.score.no_final_norm,
                             "skip the checkpoint's final norm");
  score_stream_cmd->add_option("--temperature", score_stream.score.temperature,
                               "divide logits by T (> 0)");
  score_stream_cmd->add_option("--vocab-limit", score_stream.score.vocab_limit,
                               "mask ids >= this (0 = none)");

  LoadOptions load;
  CLI::App* load_cmd = app.add_subcommand(
      "load", "load a model-repository subfolder by name; waits until READY or failed");
  load_cmd->add_option("name", load.name, "repository subfolder")->required();

  LoadOptions unload;
  CLI::App* unload_cmd = app.add_subcommand(
      "unload", "unload a model by name; waits until its in-flight calls end");
  unload_cmd->add_option("name", unload.name, "model to unload")->required();

  RopeCacheOptions rope_cache;
  CLI::App* rope_cache_cmd =
      app.add_subcommand("rope-cache", "RoPE inv_freq and cos/sin tables for a position range");
  rope_cache_cmd->add_option("--positions", rope_cache.positions, "number of positions")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
      ->capture_default_str();
  rope_cache_cmd->add_option("--start", rope_cache.start, "first position")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  rope_cache_cmd->add_option("--pair-layout", rope_cache.pair_layout,
                             "override the model's pair layout (with no model: standalone config)")
      ->check(CLI::IsMember({"interleaved", "half-split"}));
  rope_cache_cmd->add_option("--theta", rope_cache.theta, "override the model's RoPE base")
      ->check(CLI::PositiveNumber);
  rope_cache_cmd->add_option("--head-dim", rope_cache.head_dim, "override the model's head_dim")
      ->check(CLI::PositiveNumber);
  rope_cache_cmd->add_option("--rotary-dim", rope_cache.rotary_dim,
                             "rotated leading coordinates (even)")
      ->check(CLI::PositiveNumber);
  rope_cache_cmd->add_flag("--allow-beyond", rope_cache.allow_beyond,
                           "allow positions >= max_position_embeddings");
  rope_cache_cmd->add_flag("--high-precision", rope_cache.high_precision, "float64 angles");
  rope_cache_cmd->add_option("--show", rope_cache.show, "rows and values printed")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();

  SinusoidalOptions sinusoidal;
  CLI::App* sinusoidal_cmd =
      app.add_subcommand("sinusoidal", "the Transformer's sinusoidal position table [P, d]");
  sinusoidal_cmd->add_option("--positions", sinusoidal.positions, "number of positions P")
      ->required()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 26));
  sinusoidal_cmd->add_option("--dim", sinusoidal.dim, "embedding width d (even)")
      ->required()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 26));
  sinusoidal_cmd->add_option("--start", sinusoidal.start, "first position")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sinusoidal_cmd->add_option("--base", sinusoidal.base, "frequency base (0 = 10000)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sinusoidal_cmd->add_option("--layout", sinusoidal.layout,
                             "interleaved (sin, cos pairs) or half-split (sin | cos)")
      ->check(CLI::IsMember({"interleaved", "half-split"}))
      ->capture_default_str();
  sinusoidal_cmd->add_option("--show", sinusoidal.show, "rows and values printed")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();

  AlibiOptions alibi;
  CLI::App* alibi_cmd = app.add_subcommand("alibi", "ALiBi slopes, optionally the bias tensor");
  alibi_cmd->add_option("--heads", alibi.heads, "heads (0 = the model's num_attention_heads)")
      ->check(CLI::Range(0, 65536))
      ->capture_default_str();
  alibi_cmd->add_flag("--bias", alibi.bias, "also return the bias [heads, q_len, k_len]");
  alibi_cmd->add_option("--q-len", alibi.q_len, "queries: the last q_len of the k_len keys")
      ->check(CLI::NonNegativeNumber);
  alibi_cmd->add_option("--k-len", alibi.k_len, "key positions")->check(CLI::NonNegativeNumber);
  alibi_cmd->add_flag("--bidirectional", alibi.bidirectional,
                      "symmetric -slope * |i - j| instead of causal (-inf after the query)");
  alibi_cmd->add_option("--show", alibi.show, "bias heads, rows and values printed")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();

  RopeOptions rope;
  CLI::App* rope_cmd = app.add_subcommand("rope", "apply RoPE to generated q/k and show q before/after");
  rope_cmd->add_option("--batch", rope.batch, "batch size (THD: number of sequences)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  rope_cmd->add_option("--heads", rope.heads, "q heads")->check(CLI::Range(1, 1 << 16))->capture_default_str();
  rope_cmd->add_option("--kv-heads", rope.kv_heads, "k heads")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  rope_cmd->add_option("--head-dim", rope.head_dim, "head dimension")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  rope_cmd->add_option("--seq", rope.seq, "tokens per sequence")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  rope_cmd->add_option("--layout", rope.layout, "q/k memory layout")
      ->check(CLI::IsMember({"bhsd", "bshd", "thd"}))
      ->capture_default_str();
  rope_cmd->add_option("--offset", rope.offsets, "start position: once, or once per batch row")
      ->allow_extra_args(false);
  rope_cmd->add_option("--pair-layout", rope.pair_layout, "override the model's pair layout")
      ->check(CLI::IsMember({"interleaved", "half-split"}));
  rope_cmd->add_option("--theta", rope.theta, "override the model's RoPE base")->check(CLI::PositiveNumber);
  rope_cmd->add_option("--rotary-dim", rope.rotary_dim, "rotated leading coordinates (even)")
      ->check(CLI::PositiveNumber);
  rope_cmd->add_flag("--random", rope.random, "seeded standard-normal q/k (default: all ones)");
  rope_cmd->add_option("--seed", rope.seed, "seed for --random")->capture_default_str();
  rope_cmd->add_flag("--allow-beyond", rope.allow_beyond, "allow positions >= max_position_embeddings");
  rope_cmd->add_flag("--high-precision", rope.high_precision, "float64 angles");
  rope_cmd->add_option("--show", rope.show, "values printed per position")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();

  BenchOptions bench;
  CLI::App* bench_cmd = AddBenchCommand(app, &bench);

  try {
    app.parse(argc, argv);
    // Cross-option checks CLI11 cannot express; reported as usage errors.
    if (embed_cmd->parsed() && embed.offsets.size() > 1 && embed.offsets.size() != embed.ids.size()) {
      throw CLI::ValidationError("--offset", absl::StrCat("given ", embed.offsets.size(),
                                                          " times for ", embed.ids.size(),
                                                          " --ids; give it once or once per --ids"));
    }
    if (rope_cmd->parsed() && rope.offsets.size() > 1 &&
        rope.offsets.size() != static_cast<size_t>(rope.batch)) {
      throw CLI::ValidationError("--offset", absl::StrCat("given ", rope.offsets.size(),
                                                          " times for --batch ", rope.batch,
                                                          "; give it once or once per batch row"));
    }
    if (score_stream_cmd->parsed() && !score_stream.targets.empty() &&
        score_stream.targets.size() != score_stream.from_ids.size()) {
      throw CLI::ValidationError(
          "--targets", absl::StrCat("given ", score_stream.targets.size(), " times for ",
                                    score_stream.from_ids.size(),
                                    " --from-ids; give it once per --from-ids or not at all"));
    }
    if (alibi_cmd->parsed() && alibi.bias && (alibi.q_len < 1 || alibi.k_len < alibi.q_len)) {
      throw CLI::ValidationError("--bias", absl::StrCat("needs 1 <= --q-len <= --k-len (got ",
                                                        alibi.q_len, " and ", alibi.k_len, ")"));
    }
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }

  VocabdClient::Options client_options;
  client_options.target = g.target;
  client_options.timeout = std::chrono::milliseconds(g.timeout_ms);
  client_options.tls = g.tls;
  client_options.ca_file = g.ca;
  client_options.cert_file = g.cert;
  client_options.key_file = g.key;
  client_options.tls_server_name = g.tls_server_name;
  client_options.token_file = g.token_file;
  client_options.lb_policy = g.lb_policy;
  client_options.token = g.token;
  auto client = VocabdClient::Create(client_options);
  absl::StatusOr<int> result = kExitUsage;
  if (!client.ok()) {
    result = client.status();
  } else {
    VocabdClient& c = **client;
    if (health_cmd->parsed()) {
      result = RunHealth(c, g, health);
    } else if (services_cmd->parsed()) {
      result = RunServices(c, g);
    } else if (models_cmd->parsed()) {
      result = RunModels(c, g, models);
    } else if (embed_cmd->parsed()) {
      result = RunEmbed(c, g, embed);
    } else if (logits_cmd->parsed()) {
      result = RunLogits(c, g, logits);
    } else if (score_cmd->parsed()) {
      result = RunScore(c, g, score);
    } else if (score_stream_cmd->parsed()) {
      result = RunScoreStream(c, g, score_stream);
    } else if (load_cmd->parsed()) {
      result = RunLoad(c, g, load);
    } else if (unload_cmd->parsed()) {
      result = RunUnload(c, g, unload);
    } else if (rope_cache_cmd->parsed()) {
      result = RunRopeCache(c, g, rope_cache);
    } else if (sinusoidal_cmd->parsed()) {
      result = RunSinusoidal(c, g, sinusoidal);
    } else if (alibi_cmd->parsed()) {
      result = RunAlibi(c, g, alibi);
    } else if (rope_cmd->parsed()) {
      result = RunRope(c, g, rope);
    } else if (bench_cmd->parsed()) {
      result = RunBench(c, g.target, g.timeout_ms, g.json, g.model, bench);
    }
  }
  if (!result.ok()) {
    std::cerr << "error: " << absl::StatusCodeToString(result.status().code()) << ": "
              << result.status().message() << "\n";
    return kExitError;
  }
  return *result;
}

}  // namespace
}  // namespace vocabd

int main(int argc, char** argv) { return vocabd::Main(argc, argv); }
