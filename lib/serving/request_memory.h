// The memory bound per RPC (--max-request-memory-bytes): before a handler
// allocates anything sized by the request, it computes from the request's
// declared sizes the bytes the call's work will hold at its peak and refuses
// the call above the budget. The formulas (also in docs/operating.md,
// "Request memory bound"), with saturating int64 arithmetic (a product past
// INT64_MAX is INT64_MAX, so it is always refused):
//
//   Embed / EmbedStream message (T tokens, P explicit position ids,
//   H hidden_size, s output dtype bytes):
//     ids T x 8 x 3 (the request's copy, the flat ids, positions)
//     + explicit positions P x 8
//     + rows T x H x 4 (F32 rows; for F32 output they are the response)
//     + response T x H x s (F16/BF16 output only: the encoded copy)
//     + serialized T x H x s (gRPC's copy of the response on the wire)
//   ComputeLogits (R rows, H hidden_size, V vocab_size, B = the rows one
//   GEMM holds = min(R, slice rows), s output dtype bytes):
//     hidden R x H x 4 + batch B x (H + V) x 4 + response R x V x s x 2
//   Score / ScoreStream message (K = top_k, C = candidate_ids, P = the
//   tokenizer's longest piece or token text in bytes, with return_pieces):
//     hidden R x H x 4 + batch B x (H + V) x 4 + targets R x 8
//     + results R x (64 + K x 16) x 3 (scores, response, serialized)
//     + candidates R x C x 16 x 3
//     + (return_pieces) pieces R x (K + C + 1) x (2 x P + 16) x 3
//   ApplyRope (Nq, Nk elements of q and k, T = batch x seq_len tokens,
//   D = head_dim, s = q's dtype bytes):
//     q, k (Nq + Nk) x 4 + positions T x 8 + cos/sin T x (16 + D x 4)
//     + response (Nq + Nk) x s x 2
//   GetRopeCache (P positions, r rotary_dim):   P x r x 4 x 3
//   GetSinusoidalPositions (P positions, d):     P x d x 4 x 3 + d x 8
//   GetAlibiSlopes (h heads, q x k bias):       h x 4 + h x q x k x 4 x 3
//   Tokenize (N bytes of text in n texts; T = m x N + 5 x n tokens at most,
//   m = the tokenizer's most tokens per text byte (1, or 3 when a space
//   becomes U+2581 and the vocabulary has no such piece), plus dummy
//   prefix, BOS and EOS per text):
//     texts n x 512 + encoder T x 32 + ids T x 8 x 3
//     + (return_offsets) T x 16 x 3
//     + (return_pieces) T x 32 x 3 + N x 8 x 3 + n x 4 x P x 3
//   (pieces and token texts of a text's tokens hold at most 8 bytes per
//   text byte: a byte-fallback piece "<0xAB>" is 6 bytes for 1, its text 1;
//   the specials of each text at most P each.)
//   Detokenize (S sequences, T ids with previous_ids):
//     sequences S x 512 + ids T x 8 x 2 + text T x P x 3
//   (x 512: a text's / sequence's own objects -- request and response
//   messages, the work item, the result -- measured at about 300 bytes.)
//   GetVocabulary (E entries in the page):      E x (2 x P + 48) x 3
// ("x 2" / "x 3": the response message and gRPC's serialized copy of it.)
#ifndef VOCABD_LIB_SERVING_REQUEST_MEMORY_H_
#define VOCABD_LIB_SERVING_REQUEST_MEMORY_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace vocabd {

// Default --max-request-memory-bytes (256 MiB): one call at the budget fits
// the base Kubernetes pod limit (512 MiB: ~64 MiB runtime + the model +
// one full-size call; deploy/k8s/base/deployment.yaml).
inline constexpr int64_t kDefaultMaxRequestMemoryBytes = int64_t{256} << 20;

// Bytes a call will need, with the formula it came from.
class RequestMemory {
 public:
  explicit RequestMemory(std::string rpc) : rpc_(std::move(rpc)) {}
  // Adds product(factors) bytes, described as "<label> f0 x f1 x ..."
  // (negative factors count as 0; overflow saturates).
  RequestMemory& Add(std::string_view label, std::initializer_list<int64_t> factors);
  int64_t bytes() const { return bytes_; }
  const std::string& rpc() const { return rpc_; }
  // "hidden 4096 x 64 x 4 + batch 256 x (64 + 131072) x 4 + ..." (numbers filled in).
  const std::string& formula() const { return formula_; }

 private:
  std::string rpc_;
  int64_t bytes_ = 0;
  std::string formula_;
};

// OK when bytes() <= budget (budget <= 0: no bound). Else RESOURCE_EXHAUSTED
//   "ComputeLogits needs 2181038080 bytes (hidden 4096 x 64 x 4 + ...) >
//    --max-request-memory-bytes = 268435456"
absl::Status CheckRequestMemory(const RequestMemory& need, int64_t budget);

// The per-RPC estimates (formulas above).
RequestMemory EmbedMemory(int64_t tokens, int64_t explicit_positions, int64_t hidden_size,
                          int64_t output_dtype_bytes);
RequestMemory ComputeLogitsMemory(int64_t rows, int64_t hidden_size, int64_t vocab_size,
                                  int64_t slice_rows, int64_t output_dtype_bytes);
// piece_bytes < 0: no pieces asked for (return_pieces false).
RequestMemory ScoreMemory(int64_t rows, int64_t hidden_size, int64_t vocab_size,
                          int64_t slice_rows, int64_t top_k, int64_t candidates = 0,
                          int64_t piece_bytes = -1);
RequestMemory ApplyRopeMemory(int64_t q_elements, int64_t k_elements, int64_t tokens,
                              int64_t head_dim, int64_t dtype_bytes);
RequestMemory RopeCacheMemory(int64_t positions, int64_t rotary_dim);
RequestMemory SinusoidalMemory(int64_t positions, int64_t dim);
RequestMemory AlibiMemory(int64_t heads, int64_t q_len, int64_t k_len, bool include_bias);
// piece_bytes: the tokenizer's longest piece / token text (MaxPieceBytes).
RequestMemory TokenizeMemory(int64_t text_bytes, int64_t texts, int64_t tokens_per_byte,
                             int64_t piece_bytes, bool return_pieces, bool return_offsets);
RequestMemory DetokenizeMemory(int64_t sequences, int64_t ids, int64_t piece_bytes);
RequestMemory VocabularyMemory(int64_t entries, int64_t piece_bytes);

// The status for an allocation that failed anyway (std::bad_alloc caught at
// a handler's edge): RESOURCE_EXHAUSTED "<rpc>: out of memory (the request
// needs about N bytes: <formula>)", or without the estimate when none was
// made (bytes < 0).
absl::Status OutOfMemoryStatus(std::string_view rpc, int64_t bytes, std::string_view formula);

}  // namespace vocabd

#endif  // VOCABD_LIB_SERVING_REQUEST_MEMORY_H_
