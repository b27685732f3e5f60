#include "server/tokenizer_service.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "lib/core/status_macros.h"
#include "lib/serving/request_memory.h"
#include "lib/tokenizer/tokenizer_ops.h"
#include "server/call_tracker.h"
#include "server/grpc_status.h"
#include "server/response_size.h"

namespace vocabd {
namespace {

v1::TokenType TokenTypeToProto(TokenType type) {
  switch (type) {
    case TokenType::kNormal: return v1::TOKEN_TYPE_NORMAL;
    case TokenType::kUnknown: return v1::TOKEN_TYPE_UNKNOWN;
    case TokenType::kControl: return v1::TOKEN_TYPE_CONTROL;
    case TokenType::kUserDefined: return v1::TOKEN_TYPE_USER_DEFINED;
    case TokenType::kUnused: return v1::TOKEN_TYPE_UNUSED;
    case TokenType::kByte: return v1::TOKEN_TYPE_BYTE;
  }
  return v1::TOKEN_TYPE_UNSPECIFIED;
}

std::vector<std::string_view> Texts(const v1::TokenizeRequest& request) {
  return std::vector<std::string_view>(request.texts().begin(), request.texts().end());
}

std::vector<DetokenizeItem> DetokenizeItems(const v1::DetokenizeRequest& request) {
  std::vector<DetokenizeItem> items(static_cast<size_t>(request.sequences_size()));
  for (int b = 0; b < request.sequences_size(); ++b) {
    const v1::DetokenizeSequence& s = request.sequences(b);
    items[b].ids.assign(s.ids().begin(), s.ids().end());
    items[b].previous_ids.assign(s.previous_ids().begin(), s.previous_ids().end());
    items[b].end_of_stream = s.end_of_stream();
  }
  return items;
}

absl::Status DoTokenize(const Model& model, const Tokenizer& tokenizer,
                        const v1::TokenizeRequest& request, const TokenizeLimits& limits,
                        v1::TokenizeResponse* response) {
  const bool add_special = !request.has_add_special_tokens() || request.add_special_tokens();
  ASSIGN_OR_RETURN(std::vector<Encoding> encodings,
                   TokenizeTexts(tokenizer, Texts(request), add_special, limits));
  for (const Encoding& e : encodings) {
    v1::TokenizedText* out = response->add_results();
    out->mutable_ids()->Assign(e.ids.begin(), e.ids.end());
    if (request.return_pieces()) {
      for (int32_t id : e.ids) {
        out->add_pieces(tokenizer.Piece(id));
        out->add_token_bytes(tokenizer.TokenBytes(id));
      }
    }
    if (request.return_offsets()) {
      for (const auto& [begin, end] : e.offsets) {
        v1::ByteSpan* span = out->add_offsets();
        span->set_begin(begin);
        span->set_end(end);
      }
    }
  }
  response->set_model(model.name());
  response->set_request_id(request.request_id());
  return absl::OkStatus();
}

absl::Status DoDetokenize(const Model& model, const Tokenizer& tokenizer,
                          const v1::DetokenizeRequest& request,
                          const std::vector<DetokenizeItem>& items,
                          v1::DetokenizeResponse* response) {
  ASSIGN_OR_RETURN(std::vector<IncrementalText> texts,
                   DetokenizeSequences(tokenizer, items, request.skip_special_tokens(),
                                       request.incremental()));
  for (IncrementalText& t : texts) {
    v1::DetokenizedText* out = response->add_results();
    out->set_text(std::move(t.text));
    out->set_held_back_bytes(t.held_back_bytes);
  }
  response->set_model(model.name());
  response->set_request_id(request.request_id());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<const Tokenizer*> TokenizerOf(const Model& model) {
  if (model.tokenizer() == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", model.name(), "' has no tokenizer: ",
        absl::StripPrefix(model.tokenizer_missing_reason(), "no tokenizer: ")));
  }
  return model.tokenizer();
}

grpc::ServerUnaryReactor* TokenizerServiceImpl::Tokenize(grpc::CallbackServerContext* context,
                                                         const v1::TokenizeRequest* request,
                                                         v1::TokenizeResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (RejectIfNotAdmitted(context_.tracker, context, *request, reactor)) return reactor;
  auto model = context_.registry->Get(request->model());
  absl::StatusOr<const Tokenizer*> tokenizer =
      model.ok() ? TokenizerOf(**model) : absl::StatusOr<const Tokenizer*>(model.status());
  absl::Status sizes = tokenizer.ok() ? CheckTextSizes(Texts(*request), context_.tokenize_limits)
                                      : tokenizer.status();
  int64_t bytes = 0;
  for (const std::string& t : request->texts()) bytes += static_cast<int64_t>(t.size());
  if (sizes.ok()) {
    sizes = CheckRequestMemory(
        TokenizeMemory(bytes, request->texts_size(), (*model)->max_tokens_per_text_byte(),
                       (*model)->max_piece_bytes(), request->return_pieces(),
                       request->return_offsets()),
        context_.max_request_memory_bytes);
  }
  if (!sizes.ok()) {
    reactor->Finish(ToGrpcStatus(sizes));
    return reactor;
  }
  Run(context, reactor, bytes > kTokenizeInlineMaxBytes, response,
      [model = *model, tokenizer = *tokenizer, request, response,
       limits = context_.tokenize_limits] {
        return DoTokenize(*model, *tokenizer, *request, limits, response);
      });
  return reactor;
}

grpc::ServerUnaryReactor* TokenizerServiceImpl::Detokenize(grpc::CallbackServerContext* context,
                                                           const v1::DetokenizeRequest* request,
                                                           v1::DetokenizeResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (RejectIfNotAdmitted(context_.tracker, context, *request, reactor)) return reactor;
  auto model = context_.registry->Get(request->model());
  absl::StatusOr<const Tokenizer*> tokenizer =
      model.ok() ? TokenizerOf(**model) : absl::StatusOr<const Tokenizer*>(model.status());
  absl::Status checked = tokenizer.status();
  int64_t ids = 0;
  for (const v1::DetokenizeSequence& s : request->sequences()) {
    ids += s.ids_size() + s.previous_ids_size();
  }
  if (checked.ok()) {
    checked = CheckRequestMemory(
        DetokenizeMemory(request->sequences_size(), ids, (*model)->max_piece_bytes()),
                                 context_.max_request_memory_bytes);
  }
  if (!checked.ok()) {
    reactor->Finish(ToGrpcStatus(checked));
    return reactor;
  }
  auto items = std::make_shared<const std::vector<DetokenizeItem>>(DetokenizeItems(*request));
  Run(context, reactor, ids > kDetokenizeInlineMaxIds, response,
      [model = *model, tokenizer = *tokenizer, request, response, items] {
        return DoDetokenize(*model, *tokenizer, *request, *items, response);
      });
  return reactor;
}

grpc::ServerUnaryReactor* TokenizerServiceImpl::GetVocabulary(
    grpc::CallbackServerContext* context, const v1::GetVocabularyRequest* request,
    v1::GetVocabularyResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (RejectIfNotAdmitted(context_.tracker, context, *request, reactor)) return reactor;
  auto work = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::shared_ptr<const Model> model, context_.registry->Get(request->model()));
    ASSIGN_OR_RETURN(const Tokenizer* tokenizer, TokenizerOf(*model));
    const int64_t page = request->page_size() == 0 ? kDefaultVocabularyPage : request->page_size();
    const int64_t left = tokenizer->vocab_size() - std::max<int64_t>(request->start_id(), 0);
    const int64_t page_entries = std::clamp<int64_t>(std::min(page, left), 0, kMaxVocabularyPage);
    RETURN_IF_ERROR(CheckRequestMemory(VocabularyMemory(page_entries, model->max_piece_bytes()),
                                       context_.max_request_memory_bytes));
    ASSIGN_OR_RETURN(std::vector<VocabularyEntry> entries,
                     VocabularyPage(*tokenizer, request->start_id(), request->page_size()));
    for (VocabularyEntry& e : entries) {
      v1::VocabularyEntry* out = response->add_entries();
      out->set_id(e.id);
      out->set_piece(std::move(e.piece));
      out->set_token_bytes(std::move(e.token_bytes));
      out->set_type(TokenTypeToProto(e.type));
      out->set_score(e.score);
    }
    response->set_vocab_size(tokenizer->vocab_size());
    response->set_next_start_id(request->start_id() + static_cast<int64_t>(entries.size()));
    response->set_model(model->name());
    return CheckResponseSize(*response, context_.max_send_message_bytes);
  };
  reactor->Finish(ToGrpcStatus(work()));
  return reactor;
}

void TokenizerServiceImpl::Run(grpc::CallbackServerContext* call,
                               grpc::ServerUnaryReactor* reactor, bool large,
                               const google::protobuf::Message* response,
                               std::function<absl::Status()> work) {
  auto finish = [reactor, response, work = std::move(work),
                 max_send = context_.max_send_message_bytes] {
    absl::Status status = work();
    if (status.ok()) status = CheckResponseSize(*response, max_send);
    reactor->Finish(ToGrpcStatus(status));
  };
  ComputePool* pool =
      context_.tokenize_pool != nullptr ? context_.tokenize_pool : context_.compute_pool;
  if (!large || pool == nullptr) {
    finish();
    return;
  }
  Metrics* metrics = context_.metrics;
  absl::Status submitted =
      pool->Submit([call, reactor, metrics, finish = std::move(finish)] {
        if (absl::Status wanted = CheckCallWanted(call, metrics, "while queued");
            !wanted.ok()) {
          reactor->Finish(ToGrpcStatus(wanted));
          return;
        }
        finish();
      });
  if (!submitted.ok()) reactor->Finish(ToGrpcStatus(submitted));
}

}  // namespace vocabd
