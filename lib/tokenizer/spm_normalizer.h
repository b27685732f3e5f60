// Internal to lib/tokenizer: SentencePiece's text normalizer
// (sentencepiece src/normalizer.cc, NormalizerSpec in
// sentencepiece_model.proto), own code.
//
// precompiled_charsmap (NormalizerSpec field 2, HF Precompiled
// "precompiled_charsmap" base64, GGUF tokenizer.ggml.precompiled_charsmap):
//
//   [u32 LE trie_size][trie: trie_size bytes = trie_size/4 u32 units]
//   [normalized: NUL-terminated UTF-8 replacement strings, back to back]
//
// The trie is a darts-clone double array mapping an input byte string (one
// or more characters, e.g. "ﬁ", "Ａ", "e\u0301") to the offset in
// `normalized` of its replacement ("fi", "A", "é"). Unit layout (u32):
//
//   bit 31        has no meaning for inner nodes; leaves: value = bits 0..30
//   bits 10..31   offset (<< 8 when bit 9 is set): child base = pos ^ offset
//   bit 9         offset extension flag
//   bit 8         has_leaf: the node ends a key; its value is the unit at
//                 pos ^ offset (label 0)
//   bits 0..7     label: the byte that led to this node (inner nodes)
//
//   root = units[0]; for each key byte b: pos = (pos ^ offset(unit)) ^ b,
//   unit = units[pos], stop unless label(unit) == b.
//
// Normalize (NormalizerSpec add_dummy_prefix, remove_extra_whitespaces,
// escape_whitespaces; all default true in a .model file):
//   - user-defined pieces are copied unchanged (longest match first);
//   - otherwise the longest trie key that prefixes the rest of the text is
//     replaced (at most the first 32 matches are considered, as
//     sentencepiece's kMaxTrieResultsSize); no key: one character is copied;
//   - remove_extra_whitespaces drops leading spaces, collapses runs of ' '
//     in the replaced text, drops trailing spaces;
//   - add_dummy_prefix prepends one space; escape_whitespaces writes every
//     ' ' as U+2581 "▁".
//   Every normalized byte maps to the byte offset in the input where the
//   input piece it came from begins (norm_to_orig, one entry per normalized
//   byte plus one for the end), so a token spanning normalized [b, e) spans
//   input [norm_to_orig[b], norm_to_orig[e]).
#ifndef VOCABD_LIB_TOKENIZER_SPM_NORMALIZER_H_
#define VOCABD_LIB_TOKENIZER_SPM_NORMALIZER_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace vocabd {
namespace tokenizer_internal {

struct SpmNormalizerOptions {
  // Empty: the identity rule (only ' ' is special).
  std::string precompiled_charsmap;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
  // Copied unchanged, never normalized (sentencepiece's prefix matcher).
  std::vector<std::string> user_defined;
  // For error messages: where the charsmap came from
  // ("m.model: normalizer_spec.precompiled_charsmap").
  std::string field;
};

class SpmNormalizer {
 public:
  // INVALID_ARGUMENT naming options.field when the charsmap is malformed
  // (size header, a node or value outside the blob, a replacement without
  // its NUL). The whole trie is checked here (each unit is visited at most
  // once), so Normalize never reads outside it.
  static absl::StatusOr<SpmNormalizer> Create(SpmNormalizerOptions options);

  // `in` is valid UTF-8 (Tokenizer::Encode checks). norm_to_orig gets
  // norm->size() + 1 entries (see above); nullptr when the offsets are not
  // wanted.
  void Normalize(std::string_view in, std::string* norm, std::vector<uint32_t>* norm_to_orig) const;

  // The replacement and input length for the start of `in` (in non-empty):
  // a user-defined piece, a trie key, or one character.
  std::pair<std::string_view, size_t> NormalizePrefix(std::string_view in) const;

  // Hugging Face's Precompiled lookup (spm_precompiled transform): the
  // replacement of the SHORTEST trie key that prefixes `in`, or false when
  // no key does.
  bool ShortestPrefixReplacement(std::string_view in, std::string_view* replacement) const;

  const SpmNormalizerOptions& options() const { return o_; }
  bool has_charsmap() const { return !units_.empty(); }

 private:
  SpmNormalizerOptions o_;
  std::vector<uint32_t> units_;
  std::string normalized_;
  std::array<std::vector<std::string>, 256> user_by_first_byte_;  // longest first
  bool has_user_defined_ = false;
};

// Checks a charsmap blob's framing and whole trie; `field` names it.
absl::Status ValidatePrecompiledCharsmap(std::string_view blob, std::string_view field);

}  // namespace tokenizer_internal
}  // namespace vocabd

#endif  // VOCABD_LIB_TOKENIZER_SPM_NORMALIZER_H_
