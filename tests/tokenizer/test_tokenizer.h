// TEST-ONLY Tokenizer implementations, so the TokenizerService, scoring
// pieces, vocabctl and the example can be tested before (and independently
// of) the real loaders in lib/tokenizer:
//
//   Llama2cTestTokenizer  over a llama2.c tok*.bin (stories260K tok512.bin):
//     Encode is llama2.c run.c `encode` (dummy-prefix space, one piece per
//     UTF-8 character or byte fallback <0xXX> = id 3 + byte, then merge the
//     adjacent pair whose concatenation has the best score until none is in
//     the vocabulary). For tok512.bin this reproduces SentencePiece's ids for
//     the texts these tests use (SOURCES.md's known encoding included).
//     Decode: control tokens (ids 1, 2) -> "<s>"/"</s>" or nothing when
//     skipped; byte tokens -> the raw byte; the first text piece loses its
//     leading space (SentencePiece's dummy prefix).
//   FakeTokenizer         a list of (piece, token bytes, type) for unit tests.
//
// Not used by vocabd itself: the server gets it through
// ModelServingOptions::tokenizer_factory (see StoriesTokenizerFactory).
#ifndef VOCABD_TESTS_TOKENIZER_TEST_TOKENIZER_H_
#define VOCABD_TESTS_TOKENIZER_TEST_TOKENIZER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/checkpoint/checkpoint.h"
#include "lib/tokenizer/tokenizer.h"

namespace vocabd::testing {

class Llama2cTestTokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Llama2cTestTokenizer>> Load(const std::string& path);

  std::string kind() const override { return "llama2c-test"; }
  std::string source() const override { return path_; }
  int64_t vocab_size() const override { return static_cast<int64_t>(pieces_.size()); }
  absl::StatusOr<Encoding> Encode(std::string_view text, bool add_special_tokens) const override;
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     bool skip_special_tokens) const override;
  std::string Piece(int32_t id) const override { return pieces_[id]; }
  std::string TokenBytes(int32_t id) const override;
  TokenType Type(int32_t id) const override;
  float Score(int32_t id) const override { return scores_[id]; }
  std::optional<int32_t> bos_id() const override { return 1; }
  std::optional<int32_t> eos_id() const override { return 2; }

 private:
  std::string path_;
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::unordered_map<std::string, int32_t> ids_;
};

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

// For ModelServingOptions::tokenizer_factory: models named "stories260K*"
// get Llama2cTestTokenizer(tok512.bin); others keep what they carry.
std::function<absl::StatusOr<std::unique_ptr<Tokenizer>>(const std::string&, const Checkpoint&)>
StoriesTokenizerFactory();

}  // namespace vocabd::testing

#endif  // VOCABD_TESTS_TOKENIZER_TEST_TOKENIZER_H_
