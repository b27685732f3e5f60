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

#include "absl/status/statusor.h"

namespace vocabd {
namespace tokenizer_internal {

struct SplitSpan {
  uint32_t begin, end;
};

class SplitRegex {
 public:
  // INVALID_ARGUMENT "<where>: split regex "<pattern>" at offset N: <PCRE2
  // message>" when the pattern does not compile.
  static absl::StatusOr<SplitRegex> Compile(const std::string& pattern, std::string_view where);

  // Appends the pieces of text[w.begin, w.end) to *out (offsets into text).
  // text must be valid UTF-8.
  void Split(std::string_view text, SplitSpan w, std::vector<SplitSpan>* out) const;
  // Appends every match in text[w.begin, w.end) to *out (offsets into
  // text), empty matches included, left to right, non-overlapping (after an
  // empty match the search goes on one character later; an empty match
  // where the previous match ended is skipped).
  void Matches(std::string_view text, SplitSpan w, std::vector<SplitSpan>* out) const;
  // Every span of `in`, split; the result replaces *spans.
  void SplitAll(std::string_view text, std::vector<SplitSpan>* spans) const;

  const std::string& pattern() const { return pattern_; }

 private:
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
};
// NOT_FOUND naming `pre` and listing the known names when it is not in the
// table.
absl::StatusOr<PreTokenizer> FindPreTokenizer(const std::string& pre);
// Every name in the table, in table order (for tests and docs).
std::vector<std::string> PreTokenizerNames();

}  // namespace tokenizer_internal
}  // namespace vocabd

#endif  // VOCABD_LIB_TOKENIZER_SPLIT_REGEX_H_
