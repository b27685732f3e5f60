// What the per-request log line and the limits need to know about a request
// message, for every vocabd.v1 request type. Messages of other types (health,
// reflection, streaming, future RPCs) give empty fields and 0 tokens.
#ifndef VOCABD_SERVER_REQUEST_INFO_H_
#define VOCABD_SERVER_REQUEST_INFO_H_

#include <cstdint>
#include <string>

#include <google/protobuf/message.h>

namespace vocabd {

struct RequestInfo {
  std::string request_id;  // the message's request_id field ("" if none)
  std::string model;       // the message's model (GetModel: name) field
  // Tokens (= rows) the request asks to process:
  //   Embed: sum of sequences[*].token_ids sizes
  //   ComputeLogits / Score: hidden.shape[0]
  //   ApplyRope: q tokens, batch x seq (BHSD/BSHD; SaturatingMul: a negative
  //              dim counts as 0, overflow gives INT64_MAX) or total tokens (THD)
  int64_t tokens = 0;
  // The request field that `tokens` counts, named in limit errors.
  std::string tokens_field;
};

RequestInfo GetRequestInfo(const google::protobuf::Message& request);

}  // namespace vocabd

#endif  // VOCABD_SERVER_REQUEST_INFO_H_
