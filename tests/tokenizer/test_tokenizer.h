// TEST-ONLY Tokenizer for unit tests of code over the Tokenizer interface
// (incremental detokenization): FakeTokenizer, a list of (piece, token
// bytes, type). Tests of real vocabularies load them with
// lib/tokenizer/tokenizer_loader.h.
#ifndef VOCABD_TESTS_TOKENIZER_TEST_TOKENIZER_H_
#define VOCABD_TESTS_TOKENIZER_TEST_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/tokenizer/tokenizer.h"

namespace vocabd::testing {

class FakeTokenizer final : public Tokenizer {
 public:
  struct Entry {
    std::string piece;
    std::string bytes;
    TokenType type = TokenType::kNormal;
  };
  explicit FakeTokenizer(std::vector<Entry> entries) : entries_(std::move(entries)) {}
  std::string kind() const override { return "fake"; }
  std::string source() const override { return "tests"; }
  int64_t vocab_size() const override { return static_cast<int64_t>(entries_.size()); }
  // Greedy longest match of token bytes (no special tokens).
  absl::StatusOr<Encoding> Encode(std::string_view text, bool add_special_tokens) const override;
  // Concatenated token bytes; control tokens give their piece, or nothing
  // when skipped; the first text piece loses a leading space.
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     bool skip_special_tokens) const override;
  std::string Piece(int32_t id) const override { return entries_[id].piece; }
  std::string TokenBytes(int32_t id) const override { return entries_[id].bytes; }
  TokenType Type(int32_t id) const override { return entries_[id].type; }
  float Score(int32_t id) const override { return 0; }
  std::optional<int32_t> bos_id() const override { return std::nullopt; }
  std::optional<int32_t> eos_id() const override { return std::nullopt; }

 private:
  std::vector<Entry> entries_;
};

// <repo>/models/stories260K/tok512.bin.
std::string Tok512Path();

}  // namespace vocabd::testing

#endif  // VOCABD_TESTS_TOKENIZER_TEST_TOKENIZER_H_
