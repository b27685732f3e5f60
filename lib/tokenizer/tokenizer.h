// A model's tokenizer: text <-> token ids, and the vocabulary itself.
//
// Loaded with the model from what the checkpoint carries:
//   GGUF tokenizer.ggml.*  model "llama" (SentencePiece-style, scores, byte
//                          fallback), "t5" (SentencePiece Unigram),
//                          "gpt2" (byte-level BPE, merges,
//                          pre-tokenizer named by tokenizer.ggml.pre;
//                          BPE over raw UTF-8 for the pre names
//                          granite-embed-multi-311m, sarvam-moe, gemma4),
//                          "gemma4", "whitespace" (BPE over raw UTF-8,
//                          as llama.cpp runs them), "bert" (WordPiece)
//   HF folder              tokenizer.json (+ tokenizer_config.json), else
//                          tokenizer.model (SentencePiece)
//   llama2.c               tok*.bin beside the .bin, or an explicit path
//
// Thread-safe: every const method may be called concurrently.
#ifndef VOCABD_LIB_TOKENIZER_TOKENIZER_H_
#define VOCABD_LIB_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace vocabd {

// Token types (SentencePiece ModelProto.SentencePiece.Type, the values GGUF's
// tokenizer.ggml.token_type uses).
enum class TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct Encoding {
  std::vector<int32_t> ids;
  // Byte offsets [begin, end) into the input text, one per id (special
  // tokens added by add_special_tokens get {0, 0} / {size, size}).
  std::vector<std::pair<int64_t, int64_t>> offsets;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // "sentencepiece" (BPE), "unigram", "bpe", "wordpiece" ...
  virtual std::string kind() const = 0;
  // Where it was loaded from, e.g. "/m/tokenizer.json" or
  // "/m/model.gguf (tokenizer.ggml.*, model gpt2, pre llama-bpe)".
  virtual std::string source() const = 0;
  virtual int64_t vocab_size() const = 0;

  // text must be valid UTF-8 (INVALID_ARGUMENT naming the byte offset of
  // the first bad sequence otherwise). add_special_tokens: BOS/EOS/CLS/SEP
  // as the tokenizer's config says.
  virtual absl::StatusOr<Encoding> Encode(std::string_view text,
                                          bool add_special_tokens) const = 0;
  // Encode without the offsets (same ids, less work; what the benchmark and
  // Embed-from-text use). The default calls Encode.
  virtual absl::StatusOr<std::vector<int32_t>> EncodeIds(std::string_view text,
                                                         bool add_special_tokens) const {
    absl::StatusOr<Encoding> e = Encode(text, add_special_tokens);
    if (!e.ok()) return e.status();
    return std::move(e->ids);
  }
  // INVALID_ARGUMENT naming the index and value of an id outside
  // [0, vocab_size). The result may end in an incomplete UTF-8 sequence
  // only when the ids do (byte tokens); see DecodeIncremental
  // (incremental_decode.h) for streams.
  // skip_special_tokens drops control and unknown tokens (IsSpecial).
  virtual absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                             bool skip_special_tokens) const = 0;

  // The vocabulary entry as stored (e.g. "▁the", "Ġthe", "<0x0A>", "##ing").
  virtual std::string Piece(int32_t id) const = 0;
  // The bytes this token contributes to decoded text (may be partial UTF-8).
  virtual std::string TokenBytes(int32_t id) const = 0;
  virtual TokenType Type(int32_t id) const = 0;
  virtual float Score(int32_t id) const = 0;

  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::optional<int32_t> eos_id() const = 0;
  // Whether Encode(..., add_special_tokens=true) adds BOS / EOS (BERT-style
  // tokenizers add CLS/SEP: bos_id()=CLS, eos_id()=SEP, both true).
  virtual bool add_bos() const { return false; }
  virtual bool add_eos() const { return false; }
  // Control / special tokens (BOS, EOS, <|endoftext|>, [CLS] ...) and the
  // unknown token (<unk>, [UNK]): what Decode(skip_special_tokens=true)
  // drops, as Hugging Face's decode drops all_special_ids (unk_token is one).
  bool IsSpecial(int32_t id) const {
    const TokenType type = Type(id);
    return type == TokenType::kControl || type == TokenType::kUnknown;
  }
};

// INVALID_ARGUMENT "<field>: invalid UTF-8 at byte offset N" when `text` is
// not valid UTF-8 (overlong forms, surrogates and code points above
// U+10FFFF are invalid, as in RFC 3629).
absl::Status ValidateUtf8(std::string_view text, std::string_view field);
// CompleteUtf8Prefix, FirstInvalidUtf8 and DecodeIncremental (text completed
// by new ids for callers generating one token at a time):
// lib/tokenizer/incremental_decode.h.

}  // namespace vocabd

#endif  // VOCABD_LIB_TOKENIZER_TOKENIZER_H_
