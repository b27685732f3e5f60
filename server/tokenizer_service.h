// vocabd.v1.TokenizerService: Tokenize, Detokenize, GetVocabulary on the
// model's own tokenizer (Model::tokenizer()). Handlers validate, call
// lib/tokenizer/tokenizer_ops.h, map status. Small calls run inline on the
// reactor thread; a Tokenize of more than kTokenizeInlineMaxBytes of text or
// a Detokenize of more than kDetokenizeInlineMaxIds ids runs on the
// tokenization pool (--tokenize-threads; its own, so Score and
// ComputeLogits never wait behind text work; RESOURCE_EXHAUSTED when its
// queue of --max-queue-size is full; dropped unrun when cancelled or expired
// while queued). A split pattern that backtracks too much on a text fails
// the call with RESOURCE_EXHAUSTED (lib/tokenizer/split_regex.h).
#ifndef VOCABD_SERVER_TOKENIZER_SERVICE_H_
#define VOCABD_SERVER_TOKENIZER_SERVICE_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "lib/serving/model.h"
#include "server/service_context.h"
#include "vocabd/v1/tokenizer.grpc.pb.h"

namespace vocabd {

// 64 KiB of text: well under a millisecond of tokenization.
inline constexpr int64_t kTokenizeInlineMaxBytes = 64 << 10;
inline constexpr int64_t kDetokenizeInlineMaxIds = 16384;

// The model's tokenizer, or FAILED_PRECONDITION `model 'M' has no
// tokenizer: <Model::tokenizer_missing_reason()>`.
absl::StatusOr<const Tokenizer*> TokenizerOf(const Model& model);

class TokenizerServiceImpl final : public v1::TokenizerService::CallbackService {
 public:
  explicit TokenizerServiceImpl(const ServiceContext& context) : context_(context) {}

  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* context,
                                       const v1::DetokenizeRequest* request,
                                       v1::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* GetVocabulary(grpc::CallbackServerContext* context,
                                          const v1::GetVocabularyRequest* request,
                                          v1::GetVocabularyResponse* response) override;

 private:
  // Runs `work` inline when `large` is false (or there is no pool), else on
  // the compute pool; finishes the reactor with its status (after the
  // response size check).
  void Run(grpc::CallbackServerContext* call, grpc::ServerUnaryReactor* reactor, bool large,
           const google::protobuf::Message* response, std::function<absl::Status()> work);
  ServiceContext context_;
};

}  // namespace vocabd

#endif  // VOCABD_SERVER_TOKENIZER_SERVICE_H_
