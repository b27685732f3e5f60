// What TokenizerService's RPCs do, on lib/ types: batch tokenization with
// size and UTF-8 checks, batch (incremental) detokenization with id checks,
// and vocabulary pages. Every error names the request field the way the
// RPC spells it (`texts[2]`, `sequences[0].ids[5]`, `start_id`), so the
// server only maps status codes.
#ifndef VOCABD_LIB_TOKENIZER_TOKENIZER_OPS_H_
#define VOCABD_LIB_TOKENIZER_TOKENIZER_OPS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/tokenizer/incremental_decode.h"
#include "lib/tokenizer/tokenizer.h"

namespace vocabd {

struct TokenizeLimits {
  // Largest text, bytes (--max-text-bytes). A request's texts together may
  // hold 4 x this.
  int64_t max_text_bytes = 1 << 20;
  // INVALID_ARGUMENT naming --max-text-bytes when < 1.
  absl::Status Validate() const;
};

// RESOURCE_EXHAUSTED `texts[i] has N bytes; the limit is M (--max-text-bytes)`
// or `texts hold N bytes in all; the limit is 4 x ...`. Cheap: the server
// calls it before queueing work.
absl::Status CheckTextSizes(const std::vector<std::string_view>& texts,
                            const TokenizeLimits& limits);

// Checks sizes, then each text's UTF-8 (INVALID_ARGUMENT `texts[i]:
// invalid UTF-8 at byte offset k`), then encodes it. Encode errors are
// prefixed `texts[i]: `.
absl::StatusOr<std::vector<Encoding>> TokenizeTexts(const Tokenizer& tokenizer,
                                                    const std::vector<std::string_view>& texts,
                                                    bool add_special_tokens,
                                                    const TokenizeLimits& limits);

struct DetokenizeItem {
  std::vector<int64_t> ids;
  std::vector<int64_t> previous_ids;  // incremental mode only
  bool end_of_stream = false;         // incremental mode only
};

// Non-incremental: text = ReplaceInvalidUtf8(Decode(ids)), held back 0.
// Incremental: DecodeIncremental(previous_ids, ids); with end_of_stream,
// its text followed by FlushIncremental(previous_ids + ids) and held back
// 0. INVALID_ARGUMENT `sequences[b].ids[j] = v is outside [0, vocab_size)`
// (or `.previous_ids[j]`), and in non-incremental mode for a non-empty
// previous_ids or end_of_stream.
absl::StatusOr<std::vector<IncrementalText>> DetokenizeSequences(
    const Tokenizer& tokenizer, const std::vector<DetokenizeItem>& sequences,
    bool skip_special_tokens, bool incremental);


struct VocabularyEntry {
  int32_t id = 0;
  std::string piece;
  std::string token_bytes;
  TokenType type = TokenType::kNormal;
  float score = 0;
};

inline constexpr int64_t kDefaultVocabularyPage = 1000;
inline constexpr int64_t kMaxVocabularyPage = 10000;

// Entries start_id .. min(start_id + page, vocab_size) - 1; page_size 0 =
// kDefaultVocabularyPage. INVALID_ARGUMENT `start_id = v is outside [0,
// vocab_size]`, `page_size = v is outside [0, 10000]`.
absl::StatusOr<std::vector<VocabularyEntry>> VocabularyPage(const Tokenizer& tokenizer,
                                                            int64_t start_id, int64_t page_size);

// The longest Piece(id) or TokenBytes(id) of the vocabulary, bytes (the
// request memory bound's P; one pass over the vocabulary, done at load).
int64_t MaxPieceBytes(const Tokenizer& tokenizer);
// Most tokens one byte of input text can become: 3 when the text's spaces
// become U+2581 (SentencePiece, Metaspace BPE) and the vocabulary has no
// "\u2581" piece (3 byte-fallback tokens per space); else 1 (a piece "▁"
// exists, GPT-2 byte-level "Ġ" exists, or WordPiece).
int64_t MaxTokensPerTextByte(const Tokenizer& tokenizer);

// "normal", "unknown", "control", "user_defined", "unused", "byte".
const char* TokenTypeName(TokenType type);

}  // namespace vocabd

#endif  // VOCABD_LIB_TOKENIZER_TOKENIZER_OPS_H_
