// Test-side reader and decoder for llama2.c tokenizer files (tok512.bin).
//
// File format (llama2.c `tokenizer.py` export, little-endian):
//   uint32 max_token_length
//   then per token id 0 .. vocab_size-1:
//     float32 score, int32 len, `len` bytes of the piece (no terminator)
// The file does not store vocab_size: tokens are read until end of file.
//
// Decoding follows llama2.c run.c `decode` + `safe_printf`:
//   - after BOS (prev token id 1) a leading ' ' of the piece is dropped;
//   - a piece "<0xXX>" (byte-fallback token) becomes the single raw byte XX;
//   - a single-byte piece that is neither printable nor whitespace
//     (isprint/isspace in the C locale) is not printed.
#ifndef VOCABD_TESTS_E2E_TOKENIZER_H_
#define VOCABD_TESTS_E2E_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace vocabd::testing {

class Llama2cTokenizer {
 public:
  // Reads `path`. INVALID_ARGUMENT (naming the file, token id and offset)
  // for a truncated file or a negative length; NOT_FOUND if unreadable.
  // When `expected_vocab_size` > 0 the token count must equal it.
  static absl::StatusOr<Llama2cTokenizer> Load(const std::string& path,
                                               int64_t expected_vocab_size = 0);

  int64_t vocab_size() const { return static_cast<int64_t>(pieces_.size()); }
  uint32_t max_token_length() const { return max_token_length_; }
  // Raw piece bytes of `id` (as stored). Precondition: 0 <= id < vocab_size.
  const std::string& piece(int64_t id) const { return pieces_[id]; }
  float score(int64_t id) const { return scores_[id]; }

  // run.c decode(prev_token, token): the bytes of `token` as printed after
  // `prev_token`, with run.c safe_printf's filter applied (so the result
  // may be empty). Precondition: 0 <= token < vocab_size.
  std::string Decode(int64_t prev_token, int64_t token) const;

  // Decodes a whole id sequence whose first element is the previous token
  // (e.g. BOS): concatenates Decode(ids[i-1], ids[i]) for i >= 1.
  std::string DecodeSequence(const std::vector<int64_t>& ids) const;

  static constexpr int64_t kBosId = 1;

 private:
  uint32_t max_token_length_ = 0;
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
};

}  // namespace vocabd::testing

#endif  // VOCABD_TESTS_E2E_TOKENIZER_H_
