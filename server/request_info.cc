#include "server/request_info.h"

#include "absl/strings/str_cat.h"
#include "lib/core/shape.h"
#include "vocabd/v1/embedding.pb.h"
#include "vocabd/v1/model.pb.h"
#include "vocabd/v1/position.pb.h"
#include "vocabd/v1/scoring.pb.h"
#include "vocabd/v1/tokenizer.pb.h"

namespace vocabd {
namespace {

int64_t Dim(const v1::Tensor& t, int i) { return t.shape_size() > i ? t.shape(i) : 0; }

}  // namespace

RequestInfo GetRequestInfo(const google::protobuf::Message& request) {
  RequestInfo info;
  if (const auto* r = dynamic_cast<const v1::EmbedRequest*>(&request)) {
    info.request_id = r->request_id();
    info.model = r->model();
    for (const auto& seq : r->sequences()) info.tokens += seq.token_ids_size();
    info.tokens_field = "sequences[*].token_ids";
  } else if (const auto* r = dynamic_cast<const v1::ComputeLogitsRequest*>(&request)) {
    info.request_id = r->request_id();
    info.model = r->model();
    info.tokens = Dim(r->hidden(), 0);
    info.tokens_field = "hidden.shape[0]";
  } else if (const auto* r = dynamic_cast<const v1::ScoreRequest*>(&request)) {
    info.request_id = r->request_id();
    info.model = r->model();
    info.tokens = Dim(r->hidden(), 0);
    info.tokens_field = "hidden.shape[0]";
  } else if (const auto* r = dynamic_cast<const v1::ApplyRopeRequest*>(&request)) {
    info.model = r->model();
    switch (r->layout()) {
      case v1::THD:
        info.tokens = Dim(r->q(), 0);
        info.tokens_field = "q.shape[0]";
        break;
      case v1::BSHD:
        info.tokens = SaturatingMul(Dim(r->q(), 0), Dim(r->q(), 1));
        info.tokens_field = "q batch x seq";
        break;
      default:  // BHSD
        info.tokens = SaturatingMul(Dim(r->q(), 0), Dim(r->q(), 2));
        info.tokens_field = "q batch x seq";
        break;
    }
  } else if (const auto* r = dynamic_cast<const v1::GetRopeCacheRequest*>(&request)) {
    info.model = r->model();  // table sizes are not tokens: no token count
  } else if (const auto* r = dynamic_cast<const v1::GetAlibiSlopesRequest*>(&request)) {
    info.model = r->model();
  } else if (const auto* r = dynamic_cast<const v1::DetokenizeRequest*>(&request)) {
    info.request_id = r->request_id();
    info.model = r->model();
    for (const auto& seq : r->sequences()) {
      info.tokens += seq.ids_size() + seq.previous_ids_size();
    }
    info.tokens_field = "sequences[*].ids + previous_ids";
  } else if (const auto* r = dynamic_cast<const v1::TokenizeRequest*>(&request)) {
    info.request_id = r->request_id();  // text bytes: --max-text-bytes
    info.model = r->model();
  } else if (const auto* r = dynamic_cast<const v1::GetVocabularyRequest*>(&request)) {
    info.model = r->model();
  } else if (const auto* r = dynamic_cast<const v1::GetModelRequest*>(&request)) {
    info.model = r->name();
  } else if (const auto* r = dynamic_cast<const v1::LoadModelRequest*>(&request)) {
    info.model = r->name();  // request logs name the model loaded, not "(default)"
  } else if (const auto* r = dynamic_cast<const v1::UnloadModelRequest*>(&request)) {
    info.model = r->name();
  }
  return info;
}

absl::Status CheckRequestId(std::string_view id, std::string_view name) {
  if (id.size() > kMaxRequestIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(name), " is ", id.size(), " bytes long; at most ", kMaxRequestIdBytes,
        " bytes are accepted (printable ASCII 0x20-0x7E)"));
  }
  for (size_t i = 0; i < id.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(id[i]);
    if (c < 0x20 || c > 0x7E) {
      const char* what = c == 0x09 ? " (TAB)" : c == 0x7F ? " (DEL)" : "";
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(name), " byte ", i, " is 0x", absl::Hex(c, absl::kZeroPad2), what,
          ": a request id must be printable ASCII (0x20-0x7E), at most ", kMaxRequestIdBytes,
          " bytes"));
    }
  }
  return absl::OkStatus();
}

}  // namespace vocabd
