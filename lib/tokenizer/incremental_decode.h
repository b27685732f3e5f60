// UTF-8 checks for tokenizer text, and incremental detokenization for
// callers that generate one token at a time.
//
// UTF-8 (RFC 3629 / Unicode 15 §3.9 Table 3-7, "well-formed UTF-8 byte
// sequences"):
//   U+0000..U+007F     00..7F
//   U+0080..U+07FF     C2..DF 80..BF
//   U+0800..U+0FFF     E0     A0..BF 80..BF
//   U+1000..U+CFFF     E1..EC 80..BF 80..BF
//   U+D000..U+D7FF     ED     80..9F 80..BF      (no surrogates)
//   U+E000..U+FFFF     EE..EF 80..BF 80..BF
//   U+10000..U+3FFFF   F0     90..BF 80..BF 80..BF
//   U+40000..U+FFFFF   F1..F3 80..BF 80..BF 80..BF
//   U+100000..U+10FFFF F4     80..8F 80..BF 80..BF
// Anything else is ill-formed. Replacement follows Unicode's "U+FFFD
// substitution of maximal subparts" (§3.9, also Python's and Hugging Face
// tokenizers' errors="replace"): each maximal prefix of a well-formed
// sequence that cannot be completed, or each lone bad byte, becomes one
// U+FFFD.
//
// Incremental detokenization (the problem vLLM's detokenize_incrementally
// and TGI's decode_token solve): token pieces may end inside a UTF-8
// character (byte-fallback tokens <0xE2> <0x96> <0x81>; byte-level BPE
// pieces), and some decoders treat the first token of a text specially
// (SentencePiece drops the leading space of the first piece). So the text a
// new token adds is not its piece alone:
//
//   previous ids  P = p0 .. p(n-1)        new ids N = q0 .. q(m-1)
//   window start  s (a few tokens back, on a character boundary)
//   before = Decode(P[s:])                 after = Decode(P[s:] + N)
//   already sent  = before[0, Complete(before))
//   newly complete= after[Complete(before), Complete(after))
//
// Complete(t) = length of t without a trailing incomplete-but-valid UTF-8
// sequence (held back until later ids complete it). Ill-formed bytes are
// sent as U+FFFD as soon as they are known to be ill-formed. Concatenating
// the texts of a stream of calls (each with previous = every id before it)
// gives ReplaceInvalidUtf8(Decode(all ids)) without its trailing incomplete
// sequence, and never splits a character.
#ifndef VOCABD_LIB_TOKENIZER_INCREMENTAL_DECODE_H_
#define VOCABD_LIB_TOKENIZER_INCREMENTAL_DECODE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/tokenizer/tokenizer.h"

namespace vocabd {

// Byte offset of the first ill-formed UTF-8 sequence in `text` (a trailing
// incomplete sequence counts as ill-formed), or nullopt when all of it is
// well-formed.
std::optional<int64_t> FirstInvalidUtf8(std::string_view text);

// Length of `text` without a trailing incomplete sequence: a lead byte
// followed by fewer continuation bytes than it needs, every byte so far
// allowed by the table above (so more bytes could complete it). Equals
// text.size() when there is none. Ill-formed bytes before the end do not
// shorten it.
size_t CompleteUtf8Prefix(std::string_view text);

// `text` with every ill-formed sequence replaced by U+FFFD (EF BF BD),
// maximal subparts as above. Well-formed text is returned unchanged.
std::string ReplaceInvalidUtf8(std::string_view text);

// Token ids before the window start that DecodeIncremental looks back
// (at least; it goes further back while the window would start inside a
// character).
inline constexpr int64_t kIncrementalContextTokens = 6;

struct IncrementalText {
  // The newly completed text (well-formed UTF-8; ill-formed bytes as
  // U+FFFD). Empty when the new ids only extend an incomplete character or
  // add nothing visible.
  std::string text;
  // Bytes at the end of Decode(previous + new) held back because they are
  // an incomplete UTF-8 sequence (0..3).
  int64_t held_back_bytes = 0;
};

// The text `new_ids` complete after `previous_ids` (see above).
// INVALID_ARGUMENT `previous_ids[i] = v is outside [0, vocab_size)` or
// `ids[j] = ...` for an id out of range. Decoders that rewrite earlier text
// when more tokens arrive (WordPiece cleanup such as " ." -> ".") never
// retract what was sent: only bytes past it are returned. With
// `end_of_stream` (the stream's last call) the text also ends with what
// would be held back, each incomplete sequence as U+FFFD, and
// held_back_bytes is 0: the same as appending FlushIncremental(previous +
// new) but from the same two decodes.
absl::StatusOr<IncrementalText> DecodeIncremental(const Tokenizer& tokenizer,
                                                  absl::Span<const int32_t> previous_ids,
                                                  absl::Span<const int32_t> new_ids,
                                                  bool skip_special_tokens,
                                                  bool end_of_stream = false);

// End of stream: the text DecodeIncremental held back after `previous_ids`
// (the stream's ids so far), each incomplete sequence as U+FFFD, so that
// the concatenated stream equals ReplaceInvalidUtf8(Decode(all ids)).
// Empty when nothing is held back. Errors as DecodeIncremental.
absl::StatusOr<std::string> FlushIncremental(const Tokenizer& tokenizer,
                                             absl::Span<const int32_t> previous_ids,
                                             bool skip_special_tokens);

}  // namespace vocabd

#endif  // VOCABD_LIB_TOKENIZER_INCREMENTAL_DECODE_H_
