// Loading a model's tokenizer from what its checkpoint carries.
//
//   path given to LoadTokenizer          what is read
//   ---------------------------------    -----------------------------------
//   *.gguf (magic "GGUF")                tokenizer.ggml.* metadata: model
//                                        "llama" -> SentencePiece BPE built in
//                                        memory (scores, byte fallback,
//                                        add_space_prefix); "gpt2" -> byte-
//                                        level BPE (merges, split regexes of
//                                        tokenizer.ggml.pre, as llama.cpp's
//                                        llama-vocab.cpp names them); "bert"
//                                        -> WordPiece (GGUF's "▁word" /
//                                        "piece" vocabulary mapped back to
//                                        BERT's "word" / "##piece").
//                                        Weights are not needed: a
//                                        vocabulary-only GGUF loads.
//   a folder (Hugging Face)              tokenizer.json (+ tokenizer_config
//                                        .json), else tokenizer.model
//   tokenizer.json                       HF `tokenizers`, every normalizer,
//                                        pre-tokenizer, model (BPE,
//                                        WordPiece, Unigram), post-processor
//                                        and decoder kind (hf_tokenizer.h);
//                                        added_tokens
//   *.model                              sentencepiece ModelProto
//   anything else                        llama2.c tokenizer: u32
//                                        max_token_length, then per token
//                                        {f32 score, i32 len, len bytes}
//
// Special tokens in the input text: a tokenizer.json's added_tokens are
// matched verbatim (as Hugging Face does); for SentencePiece models, GGUF
// and llama2.c only user-defined tokens are (as sentencepiece and llama.cpp
// do): control tokens (BOS, <|endoftext|>, [CLS]) never come from text
// there, only from add_special_tokens.
//
// Errors: NOT_FOUND for a missing file; INVALID_ARGUMENT naming the file and
// the field for a malformed one or an unsupported tokenizer kind.
#ifndef VOCABD_LIB_TOKENIZER_TOKENIZER_LOADER_H_
#define VOCABD_LIB_TOKENIZER_TOKENIZER_LOADER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "lib/tokenizer/tokenizer.h"

namespace vocabd {

// Loads a tokenizer from one path (see the table above).
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);

// The tokenizer that goes with a checkpoint (Model::Create uses this).
// tokenizer_path non-empty: exactly that path (LoadTokenizer).
// Otherwise, by checkpoint kind:
//   *.gguf                 its tokenizer.ggml.* metadata
//   HF folder / a file in  <folder>/tokenizer.json, else <folder>/tokenizer.model
//   it (not *.bin)
//   llama2.c .bin          tok*.bin beside it (with several, the one with
//                          `vocab_size` tokens when given)
// NOT_FOUND "no tokenizer: looked for ..." naming every place looked at
// when the checkpoint carries none; a tokenizer that exists but does not
// load returns its own error.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerForCheckpoint(
    const std::string& checkpoint_path, const std::string& tokenizer_path,
    std::optional<int64_t> vocab_size = std::nullopt);

}  // namespace vocabd

#endif  // VOCABD_LIB_TOKENIZER_TOKENIZER_LOADER_H_
