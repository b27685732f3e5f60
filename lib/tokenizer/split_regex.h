// Internal to lib/tokenizer: the one place split patterns are compiled and
// matched (PCRE2, UTF + Unicode properties, JIT when available), and the
// one table of llama.cpp's tokenizer.ggml.pre names.
//
// Split semantics: Hugging Face pre_tokenizers.Split with behavior
// "Isolated" (what llama.cpp's unicode_regex_split does with each of its
// expressions): a piece becomes its matches and the text between them;
// empty matches split too (a zero-width lookahead such as superbpe's
// "(?=(\d{3})+(?!\d))" cuts "1234567" into "1" "234" "567"); empty pieces
// are dropped.
#ifndef VOCABD_LIB_TOKENIZER_SPLIT_REGEX_H_
#define VOCABD_LIB_TOKENIZER_SPLIT_REGEX_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace vocabd {
namespace tokenizer_internal {

struct SplitSpan {
  uint32_t begin, end;
};

// Bounded matching: a pattern from a tokenizer.json may backtrack
// exponentially or quadratically. Every pcre2_match call runs under a match
// limit that starts small and grows 4x while the call needs more; the steps
// of every grown limit are charged to a budget per text (SplitAll):
// kRunBudgetBase + kBudgetPerByte x text bytes. The interpreter (used when
// JIT is unavailable or its 8 MiB stack is not enough) also has a depth
// limit (1,000,000) and a heap limit (64 MiB).
inline constexpr int64_t kRunBudgetBase = int64_t{16} << 20;
inline constexpr int64_t kBudgetPerByte = 64;
// Compile probes each pattern on runs of kProbeBytes bytes of one character
// ("a", "A", "1", " ", "\n", ".", "'", "é", "中", "a "), each also with "!"
// as its last byte, under the budget any text of that size gets: a pattern
// that backtracks exponentially ("(a+)+$") is refused at load. A quadratic
// one (superbpe's "(?=(\d{3})+(?!\d))" on a run of digits) passes and is
// bounded per text.
inline constexpr size_t kProbeBytes = 4096;

class SplitRegex {
 public:
  // INVALID_ARGUMENT "<where>: split regex "<pattern>" at offset N: <PCRE2
  // message>" when the pattern does not compile, or "...backtracks
  // pathologically: splitting a run of 4096 bytes of "a" ..." when a probe
  // (above) exceeds its budget.
  static absl::StatusOr<SplitRegex> Compile(const std::string& pattern, std::string_view where);

  // Appends every match in text[w.begin, w.end) to *out (offsets into
  // text), empty matches included, left to right, non-overlapping (after an
  // empty match the search goes on one character later; an empty match
  // where the previous match ended is skipped). text must be valid UTF-8.
  // The span gets the budget of a text of its size (above);
  // RESOURCE_EXHAUSTED as SplitAll when it is spent.
  absl::Status Matches(std::string_view text, SplitSpan w, std::vector<SplitSpan>* out) const;
  // Every span of `in`, split; the result replaces *spans. text must be
  // valid UTF-8. RESOURCE_EXHAUSTED "split regex "<pattern>" on a text of N
  // bytes: needed more PCRE2 match steps than its budget ..." when the
  // text's budget (above) is spent, or a PCRE2 depth / heap limit is hit.
  absl::Status SplitAll(std::string_view text, std::vector<SplitSpan>* spans) const;

  const std::string& pattern() const { return pattern_; }

 private:
  // Appends the pieces of text[w.begin, w.end) to *out (offsets into text),
  // charging *budget.
  absl::Status Split(std::string_view text, SplitSpan w, std::vector<SplitSpan>* out,
                     int64_t* budget) const;
  absl::Status SplitAllWithin(std::string_view text, std::vector<SplitSpan>* spans,
                              int64_t* budget) const;
  struct Code;
  std::shared_ptr<const Code> code_;
  std::string pattern_;
};

// A tokenizer.ggml.pre name: the split expressions (in order) and whether
// whole words found in the vocabulary skip the merges (llama.cpp
// ignore_merges).
struct PreTokenizer {
  std::vector<std::string> regexes;
  bool ignore_merges = false;
  // llama.cpp's add_bos default for the name (llama3, tekken, chameleon:
  // true), used when the GGUF has no tokenizer.ggml.add_bos_token.
  bool add_bos_default = false;
  // BPE over raw UTF-8 (llama.cpp byte_encode = false: gemma4,
  // granite-embed-multi-311m, sarvam-moe, whitespace) rather than GPT-2
  // byte-level: pieces are UTF-8 text, symbols start as characters, a
  // character without a token becomes its <0xAB> byte tokens, and a byte
  // without one is dropped.
  bool raw_utf8 = false;
  // Every U+0020 becomes U+2581 before splitting, no prefix (llama.cpp
  // escape_whitespaces; decode turns U+2581 back into spaces).
  bool escape_spaces = false;
  // llama.cpp's GEMMA4 rules: a word made only of '\n' that is itself a
  // vocabulary entry is that token; BOS is added even when
  // tokenizer.ggml.add_bos_token is false.
  bool whole_newline_runs = false;
  bool force_add_bos = false;
  // Instead of `regexes`: words are the maximal runs of non-White_Space code
  // points (White_Space is dropped), lower-cased when the GGUF's
  // tokenizer.ggml.normalizer.lowercase is true (llama.cpp's session for
  // tokenizer.ggml.model "whitespace").
  bool whitespace_segments = false;
};
// NOT_FOUND naming `pre` and listing the known names when it is not in the
// table.
absl::StatusOr<PreTokenizer> FindPreTokenizer(const std::string& pre);
// Every name in the table, in table order (for tests and docs).
std::vector<std::string> PreTokenizerNames();

}  // namespace tokenizer_internal
}  // namespace vocabd

#endif  // VOCABD_LIB_TOKENIZER_SPLIT_REGEX_H_
