// Internal to lib/tokenizer: Hugging Face `tokenizers` tokenizer.json, every
// component kind its pipeline has (own code after the documented behaviour
// of tokenizers' normalizers, pre_tokenizers, models, processors and
// decoders; Unicode data from ICU):
//
//   text ─split on added_tokens─► segment ─normalizer─► normalized text
//        ─pre_tokenizer─► pieces ─model─► tokens ─post_processor─► ids
//   ids ─► token strings ─decoder─► text
//
// normalizer     NFC, NFD, NFKC, NFKD (ICU, per normalization segment),
//                Lowercase (full per-character lowercase mapping), Strip
//                (White_Space), StripAccents (drops Mark characters),
//                Replace (String or Regex -> content), Prepend (non-empty
//                text only), Precompiled (sentencepiece charsmap, applied
//                per extended grapheme cluster as tokenizers does: a
//                cluster shorter than 6 bytes is replaced whole by the
//                shortest charsmap key prefixing it, else per character),
//                BertNormalizer, Sequence.
// pre_tokenizer  Split (Regex or String; behavior Removed, Isolated,
//                MergedWithPrevious, MergedWithNext, Contiguous; invert),
//                ByteLevel (add_prefix_space, use_regex: GPT-2's
//                expression), Metaspace (replacement, prepend_scheme
//                always / first / never or legacy add_prefix_space, split),
//                Whitespace (\w+|[^\w\s]+ with \w = L, M, N, Pc as
//                Oniguruma has it), WhitespaceSplit, Digits
//                (individual_digits), Punctuation (behavior),
//                CharDelimiterSplit, UnicodeScripts (ICU scripts; Hiragana,
//                Katakana and U+30FC count as Han, ' ' as any script),
//                BertPreTokenizer, Sequence.
// model          BPE (merges as "a b" or ["a", "b"]; unk_token, fuse_unk,
//                byte_fallback, continuing_subword_prefix,
//                end_of_word_suffix, ignore_merges; dropout must be null or
//                0), WordPiece, Unigram (Viterbi over piece scores, unk
//                penalty 10 below the lowest score, unknown runs fused,
//                byte_fallback).
// post_processor TemplateProcessing (the "single" template), BertProcessing,
//                RobertaProcessing (trim_offsets), ByteLevel (trim_offsets),
//                Sequence.
// decoder        ByteLevel, Metaspace, WordPiece (prefix, cleanup),
//                BPEDecoder (suffix), ByteFallback, Fuse, Strip, Replace,
//                CTC, Sequence. Decoded bytes stay raw: an incomplete or
//                ill-formed UTF-8 sequence is left for the caller
//                (DecodeIncremental, ReplaceInvalidUtf8) to replace.
//
// Anything else is INVALID_ARGUMENT naming the JSON path and value, e.g.
// `pre_tokenizer.pretokenizers[2].type = "Foo" is not supported`.
// Offsets map every normalized byte back to the input character it came
// from (a character a normalizer rewrote, or a normalization segment ICU
// rewrote, maps to the whole input span it replaced).
#ifndef VOCABD_LIB_TOKENIZER_HF_TOKENIZER_H_
#define VOCABD_LIB_TOKENIZER_HF_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace vocabd {
namespace tokenizer_internal {

// `tokenizer` is the parsed tokenizer.json, `config` tokenizer_config.json
// beside it (null when there is none: bos_token / eos_token name BOS/EOS,
// add_bos_token / add_eos_token switch the template's). `path` names the
// file in messages and source().
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeHfTokenizer(const nlohmann::json& tokenizer,
                                                           const nlohmann::json& config,
                                                           const std::string& path);

// Single components, for tests (Hugging Face's normalize_str,
// pre_tokenize_str and decoder.decode). Offsets are byte offsets into text.
absl::StatusOr<std::string> HfNormalizeStr(const nlohmann::json& normalizer, std::string_view text);
absl::StatusOr<std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>>> HfPreTokenizeStr(
    const nlohmann::json& pre_tokenizer, std::string_view text);
absl::StatusOr<std::string> HfDecode(const nlohmann::json& decoder,
                                     const std::vector<std::string>& tokens);

}  // namespace tokenizer_internal
}  // namespace vocabd

#endif  // VOCABD_LIB_TOKENIZER_HF_TOKENIZER_H_
