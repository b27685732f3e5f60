// Internal to lib/tokenizer: what every tokenizer kind shares.
//
// VocabTokenizer holds the vocabulary table (piece, decoded bytes, type,
// score per id), BOS/EOS and add_bos/add_eos, validates inputs, splits the
// text on special tokens, and calls the kind's EncodeSegment on the text in
// between:
//
//   text ──ValidateUtf8──► [BOS] seg0 <special> seg1 ... [EOS]
//                                │                │
//                         EncodeSegment     EncodeSegment      (kind: SPM,
//                                                               BPE, WordPiece)
//
// Decode checks the ids, drops control tokens when asked, and joins the
// tokens' bytes (DecodeTokens; WordPiece overrides it).
#ifndef VOCABD_LIB_TOKENIZER_VOCAB_TOKENIZER_H_
#define VOCABD_LIB_TOKENIZER_VOCAB_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/tokenizer/tokenizer.h"

namespace vocabd {
namespace tokenizer_internal {

// The vocabulary a loader hands to a tokenizer kind.
struct Vocab {
  std::vector<std::string> pieces;  // as stored ("▁the", "Ġthe", "##ing")
  std::vector<std::string> bytes;   // decoded bytes of each piece
  std::vector<float> scores;        // empty: all 0
  std::vector<TokenType> types;     // empty: all kNormal
  std::optional<int32_t> bos, eos, unk;
  bool add_bos = false;
  bool add_eos = false;
  // Tokens matched verbatim in the input before the model runs (HF added
  // tokens, GGUF control / user-defined tokens).
  std::vector<int32_t> split_tokens;
  // Hugging Face added tokens' matching rules (tokenizers' AddedToken, its
  // AddedVocabulary::find_matches); a split token without an entry has them
  // all false. Matches are found leftmost-longest, then:
  //   single_word  a match preceded or followed by a word character (regex
  //                \w: Alphabetic, M, Nd, Pc, Join_Control) is dropped
  //   lstrip       the token's span takes the White_Space run before it
  //                (not past the previous token's end)
  //   rstrip       ... and the White_Space run after it
  // (`normalized` added tokens are not split tokens: HfTokenizer matches them
  // in the normalized text.)
  struct SplitRules {
    bool single_word = false;
    bool lstrip = false;
    bool rstrip = false;
  };
  std::vector<std::pair<int32_t, SplitRules>> split_rules;
  std::string source;
};

// Checks sizes, ids and duplicate-free pieces; fills defaults.
absl::Status ValidateVocab(Vocab* vocab);

// One split-token span or the text between ([begin, end) bytes of the
// searched text; id -1 = text).
struct SplitPart {
  size_t begin, end;
  int32_t id;
};

// Finds split tokens in a text: leftmost-longest matches of the patterns,
// then each token's SplitRules (HF AddedVocabulary::find_matches).
class SplitMatcher {
 public:
  // `pattern` non-empty; call Finish() after the last Add.
  void Add(std::string pattern, int32_t id, Vocab::SplitRules rules);
  void Finish();
  bool empty() const { return entries_.empty(); }
  // Appends the tokens found in text[begin, end) and the text between them
  // to *out (a dropped single_word match is skipped over, as tokenizers'
  // non-overlapping search does).
  void Find(std::string_view text, size_t begin, size_t end, std::vector<SplitPart>* out) const;

 private:
  struct Entry {
    std::string pattern;
    int32_t id;
    Vocab::SplitRules rules;
  };
  std::vector<Entry> entries_;
  // Entry indices by the pattern's first byte, longest pattern first, and
  // whether any pattern starts with the byte (one load per input byte).
  std::array<std::vector<uint32_t>, 256> by_first_byte_;
  std::array<bool, 256> starts_ = {};
};

class VocabTokenizer : public Tokenizer {
 public:
  std::string source() const override { return vocab_.source; }
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.pieces.size()); }
  absl::StatusOr<Encoding> Encode(std::string_view text, bool add_special_tokens) const override;
  absl::StatusOr<std::vector<int32_t>> EncodeIds(std::string_view text,
                                                 bool add_special_tokens) const override;
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     bool skip_special_tokens) const override;
  std::string Piece(int32_t id) const override;
  std::string TokenBytes(int32_t id) const override;
  TokenType Type(int32_t id) const override;
  float Score(int32_t id) const override;
  std::optional<int32_t> bos_id() const override { return vocab_.bos; }
  std::optional<int32_t> eos_id() const override { return vocab_.eos; }
  bool add_bos() const override { return vocab_.add_bos; }
  bool add_eos() const override { return vocab_.add_eos; }

 protected:
  explicit VocabTokenizer(Vocab vocab);
  const Vocab& vocab() const { return vocab_; }

  // Appends the ids of `segment` (text between special tokens) to out->ids,
  // and when `offsets` is set, their [begin, end) byte offsets plus `base`.
  virtual absl::Status EncodeSegment(std::string_view segment, int64_t base,
                                     std::vector<int32_t>* ids,
                                     std::vector<std::pair<int64_t, int64_t>>* offsets) const = 0;
  // Joins the (already filtered) tokens' text. Default: their bytes, then
  // one leading space dropped when strip_leading_space_ (the dummy prefix
  // of SentencePiece / Metaspace).
  virtual std::string DecodeTokens(const std::vector<int32_t>& ids) const;

  bool strip_leading_space_ = false;
  // With strip_leading_space_: keep dropping the leading space of the
  // following pieces while the decoded text is still empty (sentencepiece's
  // Decode: "▁" "▁a" -> "a"); otherwise only the first visible piece's
  // (llama.cpp, Hugging Face Metaspace).
  bool strip_while_empty_ = false;

 private:
  absl::Status EncodeImpl(std::string_view text, bool add_special_tokens,
                          std::vector<int32_t>* ids,
                          std::vector<std::pair<int64_t, int64_t>>* offsets) const;

  Vocab vocab_;
  SplitMatcher splits_;  // vocab_.split_tokens with their rules
};

// UTF-8 helpers.
// Length of the UTF-8 sequence starting with lead byte `c` (1 for invalid
// lead bytes, so loops always advance).
inline int Utf8Length(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c >> 5) == 0x6) return 2;
  if ((c >> 4) == 0xE) return 3;
  if ((c >> 3) == 0x1E) return 4;
  return 1;
}
// Decodes the code point at text[*pos] (text must be valid UTF-8) and
// advances *pos.
uint32_t DecodeUtf8(std::string_view text, size_t* pos);
void AppendUtf8(uint32_t cp, std::string* out);
// Unicode White_Space (regex \s in tokenizers' Rust regexes; ICU).
bool IsWhiteSpace(uint32_t cp);

// "<0x0A>" -> 0x0A; -1 when `piece` is not a byte piece.
int ParseBytePiece(std::string_view piece);

// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's whitespace marker.
inline constexpr std::string_view kMetaSpace = "\xE2\x96\x81";
std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to);

}  // namespace tokenizer_internal
}  // namespace vocabd

#endif  // VOCABD_LIB_TOKENIZER_VOCAB_TOKENIZER_H_
