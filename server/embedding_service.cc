#include "server/embedding_service.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "proto/tensor_codec.h"
#include "lib/core/dtype.h"
#include "lib/core/happens_before.h"
#include "lib/core/shape.h"
#include "lib/core/status_macros.h"
#include "server/call_tracker.h"
#include "server/embed_stream_reactor.h"
#include "server/grpc_status.h"
#include "server/handler_guard.h"
#include "lib/serving/request_memory.h"
#include "server/output_dtype.h"
#include "server/proto_convert.h"
#include "server/response_size.h"

namespace vocabd {

grpc::ServerUnaryReactor* EmbeddingServiceImpl::Embed(grpc::CallbackServerContext* context,
                                                      const v1::EmbedRequest* request,
                                                      v1::EmbedResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (RejectIfNotAdmitted(context_.tracker, context, *request, reactor)) return reactor;
  absl::Status status = CatchAll("Embed", nullptr, [&] { return DoEmbed(*request, response); });
  if (!status.ok()) response->Clear();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

absl::Status EmbeddingServiceImpl::DoEmbed(const v1::EmbedRequest& request,
                                           v1::EmbedResponse* response) {
  ASSIGN_OR_RETURN(std::shared_ptr<const Model> model, context_.registry->Get(request.model()));
  ASSIGN_OR_RETURN(DType output_dtype, OutputDType(request.output_dtype()));
  const int64_t hidden = model->config().hidden_size;
  int64_t total_tokens = 0;
  int64_t explicit_positions = 0;
  for (const auto& seq : request.sequences()) {
    total_tokens += seq.token_ids_size();
    explicit_positions += seq.position_ids_size();
  }
  // Both bounds before the ids are copied anywhere.
  RETURN_IF_ERROR(CheckResponseBytes(
      SaturatingMul(total_tokens, hidden, static_cast<int64_t>(DTypeSize(output_dtype))),
      absl::StrCat(total_tokens, " tokens x hidden_size ", hidden, " x ",
                   std::string(DTypeName(output_dtype))),
      context_.max_send_message_bytes));
  RETURN_IF_ERROR(CheckRequestMemory(
      EmbedMemory(total_tokens, explicit_positions, hidden,
                  static_cast<int64_t>(DTypeSize(output_dtype))),
      context_.max_request_memory_bytes));
  ASSIGN_OR_RETURN(EmbedInput input, EmbedInputFromProto(request));
  if (output_dtype == DType::kF32) {
    // F32: the lookup writes straight into the response bytes (no copy).
    v1::Tensor* tensor = response->mutable_embeddings();
    std::vector<int64_t> offsets;
    RETURN_IF_ERROR(model->EmbedInto(
        input,
        [tensor](int64_t num_floats) {
          std::string* data = tensor->mutable_data();
          data->resize(static_cast<size_t>(num_floats) * sizeof(float));
          return reinterpret_cast<float*>(data->data());
        },
        &offsets));
    const int64_t tokens = offsets.back();
    tensor->set_dtype(v1::F32);
    tensor->clear_shape();
    tensor->add_shape(tokens);
    tensor->add_shape(hidden);
    response->mutable_sequence_offsets()->Assign(offsets.begin(), offsets.end());
  } else {
    EmbedOutput output;
    RETURN_IF_ERROR(model->Embed(input, &output));
    const int64_t tokens = static_cast<int64_t>(output.embeddings.size()) / hidden;
    *response->mutable_embeddings() =
        EncodeFloatTensor(output.embeddings, {tokens, hidden}, output_dtype);
    response->mutable_sequence_offsets()->Assign(output.sequence_offsets.begin(),
                                                 output.sequence_offsets.end());
  }
  response->set_model(model->name());
  response->set_request_id(request.request_id());
  return CheckResponseSize(*response, context_.max_send_message_bytes);
}

grpc::ServerBidiReactor<v1::EmbedRequest, v1::EmbedResponse>* EmbeddingServiceImpl::EmbedStream(
    grpc::CallbackServerContext* context) {
  auto* reactor = new EmbedStreamReactor(this, context);
  HappensBefore(reactor);  // gRPC runs its callbacks on other threads
  return reactor;
}

}  // namespace vocabd
