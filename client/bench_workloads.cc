#include "client/bench_workloads.h"

#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <random>
#include <type_traits>
#include <utility>

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cli/common.h"
#include "proto/tensor_codec.h"
#include "lib/core/happens_before.h"
#include "lib/core/status_macros.h"
#include "vocabd/v1/embedding.grpc.pb.h"
#include "vocabd/v1/position.grpc.pb.h"
#include "vocabd/v1/scoring.grpc.pb.h"

namespace vocabd {
namespace {

// One unary RPC: Req -> Resp on Stub, with optional reference check.
template <class Stub, class Req, class Resp>
class RpcWorkload : public Workload {
 public:
  using Invoke = std::function<void(Stub*, grpc::ClientContext*, const Req*, Resp*,
                                    std::function<void(grpc::Status)>)>;
  using Check = std::function<absl::Status(const Req&, const Resp&)>;

  RpcWorkload(std::string name, std::vector<Req> payloads, Invoke invoke, Check check)
      : name_(std::move(name)), payloads_(std::move(payloads)), invoke_(std::move(invoke)),
        check_(std::move(check)) {
    for (const Req& r : payloads_) sizes_.push_back(static_cast<int64_t>(r.ByteSizeLong()));
  }

  std::string name() const override { return name_; }
  void Connect(const std::vector<std::shared_ptr<grpc::Channel>>& channels) override {
    stubs_.clear();
    for (const auto& c : channels) stubs_.push_back(std::make_unique<Stub>(c));
  }
  size_t num_payloads() const override { return payloads_.size(); }
  int64_t request_bytes(size_t index) const override { return sizes_[index]; }

  void Start(size_t connection, size_t index, grpc::ClientContext* context, bool keep,
             Done done) override {
    auto* response = new Resp;
    // invoke_ calls HappensBefore(response) just before starting the call;
    // the completion runs on a gRPC thread.
    invoke_(stubs_[connection].get(), context, &payloads_[index], response,
            [this, response, index, keep, done = std::move(done)](grpc::Status status) {
              HappensAfter(response);
              int64_t bytes = 0;
              if (status.ok()) {
                bytes = static_cast<int64_t>(response->ByteSizeLong());
                if (keep) {
                  std::lock_guard<std::mutex> lock(mu_);
                  kept_.emplace_back(index, std::move(*response));
                }
              }
              delete response;
              done(status, bytes);  // last: the generator may return after it
            });
  }

  VerifyReport Verify() override {
    std::vector<std::pair<size_t, Resp>> kept;
    {
      std::lock_guard<std::mutex> lock(mu_);
      kept.swap(kept_);
    }
    VerifyReport report;
    for (const auto& [index, response] : kept) {
      if (!check_) {
        ++report.skipped;
        continue;
      }
      absl::Status s = check_(payloads_[index], response);
      if (absl::IsUnimplemented(s)) {
        ++report.skipped;
        if (report.first_mismatch.empty()) report.first_mismatch = std::string(s.message());
        continue;
      }
      ++report.checked;
      if (!s.ok()) {
        ++report.mismatches;
        if (report.first_mismatch.empty() || report.mismatches == 1) {
          report.first_mismatch = absl::StrCat("payload ", index, ": ", s.message());
        }
      }
    }
    if (report.mismatches == 0 && report.skipped == 0) report.first_mismatch.clear();
    return report;
  }

 private:
  std::string name_;
  std::vector<Req> payloads_;
  std::vector<int64_t> sizes_;
  Invoke invoke_;
  Check check_;
  std::vector<std::unique_ptr<Stub>> stubs_;
  std::mutex mu_;
  std::vector<std::pair<size_t, Resp>> kept_;
};

using cli::RandomNormal;

absl::StatusOr<DType> ParseDTypeOption(const std::string& flag, const std::string& name) {
  absl::StatusOr<DType> dtype = cli::ParseFloatDType(name);
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " = '", name, "': must be f32, f16 or bf16"));
  }
  return dtype;
}

absl::Status CheckPositive(const std::string& flag, int64_t v, int64_t max) {
  if (v < 1 || v > max) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " = ", v, ": must be in [1, ", max, "]"));
  }
  return absl::OkStatus();
}

enum class FileFormat { kBinary, kJson, kText };

FileFormat FormatOf(const std::string& path) {
  if (absl::EndsWith(path, ".json")) return FileFormat::kJson;
  if (absl::EndsWith(path, ".txtpb") || absl::EndsWith(path, ".textproto") ||
      absl::EndsWith(path, ".pbtxt")) {
    return FileFormat::kText;
  }
  return FileFormat::kBinary;
}

template <class Req>
absl::StatusOr<Req> ReadPayload(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--payload-file '", path, "': cannot open"));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Req req;
  bool ok = false;
  switch (FormatOf(path)) {
    case FileFormat::kJson:
      ok = google::protobuf::util::JsonStringToMessage(bytes, &req).ok();
      break;
    case FileFormat::kText:
      ok = google::protobuf::TextFormat::ParseFromString(bytes, &req);
      break;
    case FileFormat::kBinary:
      ok = req.ParseFromString(bytes);
      break;
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("--payload-file '", path, "': not a valid ",
                                                   Req::descriptor()->full_name(), " (",
                                                   FormatOf(path) == FileFormat::kJson ? "JSON"
                                                   : FormatOf(path) == FileFormat::kText ? "text format"
                                                                                         : "binary",
                                                   ")"));
  }
  return req;
}

absl::Status WritePayload(const google::protobuf::Message& message, const std::string& path) {
  std::string bytes;
  switch (FormatOf(path)) {
    case FileFormat::kJson: {
      google::protobuf::util::JsonPrintOptions opts;
      opts.add_whitespace = true;
      opts.preserve_proto_field_names = true;
      if (!google::protobuf::util::MessageToJsonString(message, &bytes, opts).ok()) {
        return absl::InternalError("cannot print payload as JSON");
      }
      break;
    }
    case FileFormat::kText:
      google::protobuf::TextFormat::PrintToString(message, &bytes);
      break;
    case FileFormat::kBinary:
      message.SerializeToString(&bytes);
      break;
  }
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  if (!out) return absl::PermissionDeniedError(absl::StrCat("--save-payload '", path, "': cannot write"));
  return absl::OkStatus();
}

template <class Req>
absl::StatusOr<std::vector<Req>> ReadPayloads(const std::vector<std::string>& files) {
  std::vector<Req> out;
  for (const auto& f : files) {
    ASSIGN_OR_RETURN(Req r, ReadPayload<Req>(f));
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<std::vector<v1::EmbedRequest>> GenerateEmbed(const BenchPayloadOptions& o,
                                                            const v1::ModelInfo& m) {
  RETURN_IF_ERROR(CheckPositive("--tokens", o.tokens, int64_t{1} << 24));
  RETURN_IF_ERROR(CheckPositive("--rows", o.rows, int64_t{1} << 20));
  ASSIGN_OR_RETURN(DType dtype, ParseDTypeOption("--dtype", o.dtype));
  if (m.vocab_size() < 1) return absl::FailedPreconditionError("model has vocab_size 0");
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int64_t> id(0, m.vocab_size() - 1);
  std::vector<v1::EmbedRequest> out;
  for (int p = 0; p < o.payloads; ++p) {
    v1::EmbedRequest r;
    r.set_model(o.model);
    r.set_output_dtype(DTypeToProto(dtype));
    r.set_absolute_positions(v1::ABSOLUTE_POSITIONS_NONE);
    r.set_embedding_scale(v1::EMBEDDING_SCALE_NONE);
    for (int64_t s = 0; s < o.rows; ++s) {
      auto* seq = r.add_sequences();
      for (int64_t t = 0; t < o.tokens; ++t) seq->add_token_ids(id(rng));
    }
    out.push_back(std::move(r));
  }
  return out;
}

// Hidden [rows, width] in the input dtype.
absl::StatusOr<v1::Tensor> GenerateHidden(const BenchPayloadOptions& o, const v1::ModelInfo& m,
                                          std::mt19937_64& rng) {
  ASSIGN_OR_RETURN(DType in_dtype, ParseDTypeOption("--input-dtype", o.input_dtype));
  const int64_t width = o.hidden > 0 ? o.hidden : m.hidden_size();
  if (width < 1) return absl::FailedPreconditionError("model has hidden_size 0; pass --hidden");
  std::vector<float> values = RandomNormal(static_cast<size_t>(o.rows * width), rng);
  return EncodeFloatTensor(values, {o.rows, width}, in_dtype);
}

template <class Req>
absl::StatusOr<std::vector<Req>> GenerateHead(const BenchPayloadOptions& o, const v1::ModelInfo& m) {
  RETURN_IF_ERROR(CheckPositive("--rows", o.rows, int64_t{1} << 20));
  if (o.hidden < 0) return absl::InvalidArgumentError(absl::StrCat("--hidden = ", o.hidden, ": must be >= 0"));
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int64_t> id(0, std::max<int64_t>(0, m.vocab_size() - 1));
  std::vector<Req> out;
  for (int p = 0; p < o.payloads; ++p) {
    Req r;
    r.set_model(o.model);
    ASSIGN_OR_RETURN(*r.mutable_hidden(), GenerateHidden(o, m, rng));
    if constexpr (std::is_same_v<Req, v1::ComputeLogitsRequest>) {
      ASSIGN_OR_RETURN(DType dtype, ParseDTypeOption("--dtype", o.dtype));
      r.set_output_dtype(DTypeToProto(dtype));
    } else {
      if (o.top_k < 0 || o.top_k > 1024) {
        return absl::InvalidArgumentError(absl::StrCat("--top-k = ", o.top_k, ": must be in [0, 1024]"));
      }
      r.set_top_k(o.top_k);
      if (o.targets) {
        for (int64_t i = 0; i < o.rows; ++i) r.add_target_ids(id(rng));
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<std::vector<v1::ApplyRopeRequest>> GenerateRope(const BenchPayloadOptions& o,
                                                               const v1::ModelInfo& m) {
  RETURN_IF_ERROR(CheckPositive("--tokens", o.tokens, int64_t{1} << 20));
  RETURN_IF_ERROR(CheckPositive("--rows", o.rows, int64_t{1} << 16));
  ASSIGN_OR_RETURN(DType in_dtype, ParseDTypeOption("--input-dtype", o.input_dtype));
  const int64_t hq = m.num_attention_heads(), hk = m.num_key_value_heads(), d = m.head_dim();
  if (hq < 1 || hk < 1 || d < 1) {
    return absl::FailedPreconditionError(absl::StrCat("model '", m.name(), "' has heads ", hq,
                                                      ", kv heads ", hk, ", head_dim ", d,
                                                      ": cannot shape q/k"));
  }
  std::mt19937_64 rng(o.seed);
  std::vector<v1::ApplyRopeRequest> out;
  for (int p = 0; p < o.payloads; ++p) {
    v1::ApplyRopeRequest r;
    r.set_model(o.model);
    r.set_layout(v1::BHSD);
    for (int64_t b = 0; b < o.rows; ++b) r.add_position_offsets(p + b);  // varied positions
    auto q = RandomNormal(static_cast<size_t>(o.rows * hq * o.tokens * d), rng);
    auto k = RandomNormal(static_cast<size_t>(o.rows * hk * o.tokens * d), rng);
    *r.mutable_q() = EncodeFloatTensor(q, {o.rows, hq, o.tokens, d}, in_dtype);
    *r.mutable_k() = EncodeFloatTensor(k, {o.rows, hk, o.tokens, d}, in_dtype);
    out.push_back(std::move(r));
  }
  return out;
}

template <class Req>
absl::StatusOr<std::vector<Req>> Payloads(const BenchPayloadOptions& o, const v1::ModelInfo& m) {
  if (!o.payload_files.empty()) return ReadPayloads<Req>(o.payload_files);
  if (o.payloads < 1 || o.payloads > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("--payloads = ", o.payloads, ": must be in [1, 4096]"));
  }
  if constexpr (std::is_same_v<Req, v1::EmbedRequest>) return GenerateEmbed(o, m);
  if constexpr (std::is_same_v<Req, v1::ApplyRopeRequest>) return GenerateRope(o, m);
  if constexpr (std::is_same_v<Req, v1::ComputeLogitsRequest> || std::is_same_v<Req, v1::ScoreRequest>) {
    return GenerateHead<Req>(o, m);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Workload>> MakeBenchWorkload(
    const BenchPayloadOptions& o, const v1::ModelInfo& model,
    std::shared_ptr<const BenchReference> ref) {
  if (o.rpc == "embed") {
    using W = RpcWorkload<v1::EmbeddingService::Stub, v1::EmbedRequest, v1::EmbedResponse>;
    ASSIGN_OR_RETURN(auto payloads, Payloads<v1::EmbedRequest>(o, model));
    W::Check check;
    if (ref) check = [ref](const auto& q, const auto& a) { return ref->CheckEmbed(q, a); };
    return std::make_unique<W>(
        "embed", std::move(payloads),
        [](auto* stub, auto* ctx, const auto* req, auto* resp, auto cb) {
          HappensBefore(resp);
          stub->async()->Embed(ctx, req, resp, std::move(cb));
        },
        check);
  }
  if (o.rpc == "logits") {
    using W = RpcWorkload<v1::ScoringService::Stub, v1::ComputeLogitsRequest, v1::ComputeLogitsResponse>;
    ASSIGN_OR_RETURN(auto payloads, Payloads<v1::ComputeLogitsRequest>(o, model));
    W::Check check;
    if (ref) check = [ref](const auto& q, const auto& a) { return ref->CheckLogits(q, a); };
    return std::make_unique<W>(
        "logits", std::move(payloads),
        [](auto* stub, auto* ctx, const auto* req, auto* resp, auto cb) {
          HappensBefore(resp);
          stub->async()->ComputeLogits(ctx, req, resp, std::move(cb));
        },
        check);
  }
  if (o.rpc == "score") {
    using W = RpcWorkload<v1::ScoringService::Stub, v1::ScoreRequest, v1::ScoreResponse>;
    ASSIGN_OR_RETURN(auto payloads, Payloads<v1::ScoreRequest>(o, model));
    W::Check check;
    if (ref) check = [ref](const auto& q, const auto& a) { return ref->CheckScore(q, a); };
    return std::make_unique<W>(
        "score", std::move(payloads),
        [](auto* stub, auto* ctx, const auto* req, auto* resp, auto cb) {
          HappensBefore(resp);
          stub->async()->Score(ctx, req, resp, std::move(cb));
        },
        check);
  }
  if (o.rpc == "rope") {
    using W = RpcWorkload<v1::PositionService::Stub, v1::ApplyRopeRequest, v1::ApplyRopeResponse>;
    ASSIGN_OR_RETURN(auto payloads, Payloads<v1::ApplyRopeRequest>(o, model));
    W::Check check;
    if (ref) check = [ref](const auto& q, const auto& a) { return ref->CheckRope(q, a); };
    return std::make_unique<W>(
        "rope", std::move(payloads),
        [](auto* stub, auto* ctx, const auto* req, auto* resp, auto cb) {
          HappensBefore(resp);
          stub->async()->ApplyRope(ctx, req, resp, std::move(cb));
        },
        check);
  }
  return absl::InvalidArgumentError(absl::StrCat("rpc '", o.rpc, "': must be embed, logits, score or rope"));
}

absl::Status SaveBenchPayload(const BenchPayloadOptions& options, const v1::ModelInfo& model,
                              const std::string& path) {
  BenchPayloadOptions o = options;
  o.payload_files.clear();
  o.payloads = 1;
  if (o.rpc == "embed") {
    ASSIGN_OR_RETURN(auto p, Payloads<v1::EmbedRequest>(o, model));
    return WritePayload(p[0], path);
  }
  if (o.rpc == "logits") {
    ASSIGN_OR_RETURN(auto p, Payloads<v1::ComputeLogitsRequest>(o, model));
    return WritePayload(p[0], path);
  }
  if (o.rpc == "score") {
    ASSIGN_OR_RETURN(auto p, Payloads<v1::ScoreRequest>(o, model));
    return WritePayload(p[0], path);
  }
  if (o.rpc == "rope") {
    ASSIGN_OR_RETURN(auto p, Payloads<v1::ApplyRopeRequest>(o, model));
    return WritePayload(p[0], path);
  }
  return absl::InvalidArgumentError(absl::StrCat("rpc '", o.rpc, "': must be embed, logits, score or rope"));
}

}  // namespace vocabd
