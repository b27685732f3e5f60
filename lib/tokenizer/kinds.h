// Internal to lib/tokenizer: the tokenizer kinds the loaders build.
#ifndef VOCABD_LIB_TOKENIZER_KINDS_H_
#define VOCABD_LIB_TOKENIZER_KINDS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/tokenizer/vocab_tokenizer.h"

namespace vocabd {
namespace tokenizer_internal {

// ---- SentencePiece BPE and Unigram (own code, see sentencepiece_tokenizer.cc
// and unigram_tokenizer.cc; normalizer: spm_normalizer.h) ------------------
struct SentencePieceOptions {
  // trainer_spec.model_type: BPE (2; GGUF "llama") or UNIGRAM (1; GGUF "t5").
  enum class Model { kBpe, kUnigram };
  Model model = Model::kBpe;
  // NormalizerSpec: prepend "▁" to the input (Llama: true).
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = false;
  bool escape_whitespaces = true;
  // NormalizerSpec.precompiled_charsmap (empty: the identity rule), and the
  // field it came from for error messages.
  std::string precompiled_charsmap;
  std::string charsmap_field;
  // trainer_spec.byte_fallback; unset: on when the vocabulary has BYTE
  // pieces (GGUF, llama2.c).
  std::optional<bool> byte_fallback;
  // Decode drops the leading space of pieces while the text is still empty
  // (sentencepiece's decoder; .model files); false: of the first piece only
  // (llama.cpp's, for GGUF and llama2.c vocabularies).
  bool decode_strip_while_empty = false;
};
// A SentencePiece model built in memory from a vocabulary (GGUF "llama" /
// "t5", llama2.c tok*.bin): pieces in SentencePiece form ("▁" for space,
// "<0xAB>" byte pieces), scores, types (exactly one kUnknown).
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeSentencePieceFromVocab(
    Vocab vocab, const SentencePieceOptions& options);
// A serialized sentencepiece ModelProto (tokenizer.model, tok512.model),
// read by hand: BPE and UNIGRAM models, any precompiled_charsmap; WORD and
// CHAR models and treat_whitespace_as_suffix are INVALID_ARGUMENT naming
// the field.
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeSentencePieceFromModelFile(
    std::string serialized, std::string source, bool add_bos, bool add_eos);
// The Unigram kind (unigram_tokenizer.cc); `vocab` prepared by
// MakeSentencePieceFromVocab (one UNKNOWN piece = vocab.unk, bytes filled).
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeUnigram(Vocab vocab, const SentencePieceOptions& options,
                                                       bool byte_fallback);
// Decoded bytes of a SentencePiece piece ("▁" -> " ", <0xAB> -> byte).
std::string SpmPieceBytes(const std::string& piece, TokenType type);

// ---- BPE (own code; pre-tokenizer regexes run on PCRE2) --------------------
struct BpeOptions {
  // true: GPT-2 byte-level (pieces spell bytes with the GPT-2 byte->char
  // map, every byte has a token). false: pieces are UTF-8 text, symbols
  // start as characters; characters without a token become <0xAB> tokens
  // (byte_fallback) or unk.
  bool byte_level = true;
  bool byte_fallback = false;
  // Whole pre-tokenized words found in the vocabulary skip the merges
  // (llama-3 "ignore_merges").
  bool ignore_merges = false;
  // Split stages run in order; each splits every piece of the previous
  // stage into matches and the text between them (HF Split "Isolated").
  std::vector<std::string> split_regexes;
  // Applied before splitting (HF Metaspace / Prepend + Replace): spaces
  // become "▁", and "▁" is prepended to the text when prepend_metaspace.
  bool metaspace = false;
  bool prepend_metaspace = false;
  // HF Metaspace split=true: also split before every "▁".
  bool metaspace_split = false;
  // llama.cpp's BPE over raw UTF-8 for GGUF vocabularies (byte_level
  // false, byte_fallback true): control pieces are vocabulary entries like
  // the others, a byte of an unknown character without a <0xAB> token is
  // dropped (not unk), and a merge naming a piece the vocabulary lacks is
  // INVALID_ARGUMENT (llama.cpp would merge the text anyway).
  bool gguf_raw = false;
  // A pre-tokenized word made only of '\n' that is a vocabulary entry is
  // that token (llama.cpp, Gemma 4).
  bool whole_newline_runs = false;
  // Instead of split_regexes: the words are the maximal runs of
  // non-White_Space code points; White_Space is in no word (llama.cpp's
  // whitespace session).
  bool whitespace_segments = false;
  // Every code point lower-cased first (simple 1:1 mapping, ICU u_tolower;
  // llama.cpp unicode_tolower).
  bool lowercase = false;
};
// merges: "left right" in rank order (GGUF tokenizer.ggml.merges, HF
// model.merges).
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeBpe(Vocab vocab,
                                                   const std::vector<std::string>& merges,
                                                   const BpeOptions& options);
// The split regexes of a tokenizer.ggml.pre name: FindPreTokenizer
// (split_regex.h).
// GPT-2's split pattern (HF ByteLevel use_regex=true).
extern const char kGpt2SplitRegex[];
// Byte-level piece ("Ġthe") -> bytes (" the"); false when a character is
// not in the GPT-2 byte map.
bool ByteLevelDecode(std::string_view piece, std::string* bytes);

// ---- WordPiece (BERT; own code, Unicode tables from ICU) -----------------
struct WordPieceOptions {
  bool lowercase = true;
  bool strip_accents = true;
  bool handle_chinese_chars = true;
  bool clean_text = true;
  std::string continuing_prefix = "##";
  int max_input_chars_per_word = 100;
};
// vocab.pieces in HF form ("##ing" continues a word).
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeWordPiece(Vocab vocab,
                                                         const WordPieceOptions& options);

}  // namespace tokenizer_internal
}  // namespace vocabd

#endif  // VOCABD_LIB_TOKENIZER_KINDS_H_
