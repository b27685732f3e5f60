#include "lib/serving/request_memory.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/core/shape.h"

namespace vocabd {
namespace {

int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? std::numeric_limits<int64_t>::max() : out;
}

}  // namespace

RequestMemory& RequestMemory::Add(std::string_view label, std::initializer_list<int64_t> factors) {
  int64_t product = 1;
  for (int64_t f : factors) product = SaturatingMul(product, f);
  bytes_ = SaturatingAdd(bytes_, product);
  if (!formula_.empty()) absl::StrAppend(&formula_, " + ");
  absl::StrAppend(&formula_, std::string(label), " ", absl::StrJoin(factors, " x "));
  return *this;
}

absl::Status CheckRequestMemory(const RequestMemory& need, int64_t budget) {
  if (budget <= 0 || need.bytes() <= budget) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat(need.rpc(), " needs ", need.bytes(), " bytes (", need.formula(),
                   ") > --max-request-memory-bytes = ", budget));
}

RequestMemory EmbedMemory(int64_t tokens, int64_t explicit_positions, int64_t hidden_size,
                          int64_t output_dtype_bytes) {
  RequestMemory m("Embed");
  m.Add("ids", {tokens, 8, 3}).Add("explicit positions", {explicit_positions, 8});
  m.Add("rows", {tokens, hidden_size, 4});
  if (output_dtype_bytes != 4) m.Add("response", {tokens, hidden_size, output_dtype_bytes});
  m.Add("serialized", {tokens, hidden_size, output_dtype_bytes});
  return m;
}

RequestMemory ComputeLogitsMemory(int64_t rows, int64_t hidden_size, int64_t vocab_size,
                                  int64_t slice_rows, int64_t output_dtype_bytes) {
  RequestMemory m("ComputeLogits");
  const int64_t batch = std::min(rows, slice_rows);
  m.Add("hidden", {rows, hidden_size, 4});
  m.Add("batch", {batch, SaturatingAdd(hidden_size, vocab_size), 4});
  m.Add("response", {rows, vocab_size, output_dtype_bytes, 2});
  return m;
}

RequestMemory ScoreMemory(int64_t rows, int64_t hidden_size, int64_t vocab_size,
                          int64_t slice_rows, int64_t top_k, int64_t candidates,
                          int64_t piece_bytes) {
  RequestMemory m("Score");
  const int64_t batch = std::min(rows, slice_rows);
  const int64_t k = std::max<int64_t>(top_k, 0);
  m.Add("hidden", {rows, hidden_size, 4});
  m.Add("batch", {batch, SaturatingAdd(hidden_size, vocab_size), 4});
  m.Add("targets", {rows, 8});
  m.Add("results", {rows, SaturatingAdd(64, SaturatingMul(k, 16)), 3});
  if (candidates > 0) m.Add("candidates", {rows, candidates, 16, 3});
  if (piece_bytes >= 0) {
    m.Add("pieces", {rows, SaturatingAdd(SaturatingAdd(k, std::max<int64_t>(candidates, 0)), 1),
                     SaturatingAdd(SaturatingMul(piece_bytes, 2), 16), 3});
  }
  return m;
}

RequestMemory ApplyRopeMemory(int64_t q_elements, int64_t k_elements, int64_t tokens,
                              int64_t head_dim, int64_t dtype_bytes) {
  RequestMemory m("ApplyRope");
  const int64_t qk = SaturatingAdd(std::max<int64_t>(q_elements, 0), std::max<int64_t>(k_elements, 0));
  m.Add("q, k", {qk, 4});
  m.Add("positions", {tokens, 8});
  m.Add("cos/sin", {tokens, SaturatingAdd(16, SaturatingMul(head_dim, 4))});
  m.Add("response", {qk, dtype_bytes, 2});
  return m;
}

RequestMemory RopeCacheMemory(int64_t positions, int64_t rotary_dim) {
  RequestMemory m("GetRopeCache");
  m.Add("cos/sin", {positions, rotary_dim, 4, 3});
  return m;
}

RequestMemory SinusoidalMemory(int64_t positions, int64_t dim) {
  RequestMemory m("GetSinusoidalPositions");
  m.Add("table", {positions, dim, 4, 3}).Add("frequencies", {dim, 8});
  return m;
}

RequestMemory AlibiMemory(int64_t heads, int64_t q_len, int64_t k_len, bool include_bias) {
  RequestMemory m("GetAlibiSlopes");
  m.Add("slopes", {heads, 4});
  if (include_bias) m.Add("bias", {SaturatingMul(heads, q_len, k_len), 4, 3});
  return m;
}

RequestMemory TokenizeMemory(int64_t text_bytes, int64_t texts, int64_t tokens_per_byte,
                             int64_t piece_bytes, bool return_pieces, bool return_offsets) {
  RequestMemory m("Tokenize");
  const int64_t tokens =
      SaturatingAdd(SaturatingMul(text_bytes, tokens_per_byte), SaturatingMul(texts, 5));
  m.Add("texts", {texts, 512}).Add("encoder", {tokens, 32}).Add("ids", {tokens, 8, 3});
  if (return_offsets) m.Add("offsets", {tokens, 16, 3});
  if (return_pieces) {
    m.Add("pieces", {tokens, 32, 3}).Add("piece bytes", {text_bytes, 8, 3});
    m.Add("special pieces", {texts, 4, piece_bytes, 3});
  }
  return m;
}

RequestMemory DetokenizeMemory(int64_t sequences, int64_t ids, int64_t piece_bytes) {
  RequestMemory m("Detokenize");
  m.Add("sequences", {sequences, 512}).Add("ids", {ids, 8, 2}).Add("text", {ids, piece_bytes, 3});
  return m;
}

RequestMemory VocabularyMemory(int64_t entries, int64_t piece_bytes) {
  RequestMemory m("GetVocabulary");
  m.Add("entries", {entries, SaturatingAdd(SaturatingMul(piece_bytes, 2), 48), 3});
  return m;
}

absl::Status OutOfMemoryStatus(std::string_view rpc, int64_t bytes, std::string_view formula) {
  if (bytes < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat(std::string(rpc), ": out of memory while serving the request"));
  }
  return absl::ResourceExhaustedError(absl::StrCat(std::string(rpc), ": out of memory (the request needs about ",
                                                   bytes, " bytes: ", std::string(formula), ")"));
}

}  // namespace vocabd
