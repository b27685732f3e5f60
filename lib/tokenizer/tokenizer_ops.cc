#include "lib/tokenizer/tokenizer_ops.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/core/status_macros.h"

namespace vocabd {
namespace {

// Multiplier of max_text_bytes for a whole request.
constexpr int64_t kTotalTextFactor = 4;

// ids -> int32 after checking each against [0, vocab).
absl::StatusOr<std::vector<int32_t>> CheckedIds(const std::vector<int64_t>& ids, int64_t vocab,
                                                size_t b, const char* field) {
  std::vector<int32_t> out(ids.size());
  for (size_t j = 0; j < ids.size(); ++j) {
    if (ids[j] < 0 || ids[j] >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("sequences[", b, "].", field, "[", j,
                                                     "] = ", ids[j], " is outside [0, ", vocab,
                                                     ")"));
    }
    out[j] = static_cast<int32_t>(ids[j]);
  }
  return out;
}

absl::Status Prefixed(const absl::Status& status, const std::string& prefix) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

}  // namespace

absl::Status TokenizeLimits::Validate() const {
  if (max_text_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-text-bytes = ", max_text_bytes, " must be >= 1"));
  }
  return absl::OkStatus();
}

absl::Status CheckTextSizes(const std::vector<std::string_view>& texts,
                            const TokenizeLimits& limits) {
  int64_t total = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const int64_t n = static_cast<int64_t>(texts[i].size());
    if (n > limits.max_text_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat("texts[", i, "] has ", n,
                                                       " bytes; the limit is ",
                                                       limits.max_text_bytes,
                                                       " (--max-text-bytes)"));
    }
    total += n;
  }
  const int64_t total_limit = kTotalTextFactor * limits.max_text_bytes;
  if (total > total_limit) {
    return absl::ResourceExhaustedError(
        absl::StrCat("texts hold ", total, " bytes in all; the limit is ", total_limit, " (4 x ",
                     "--max-text-bytes)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Encoding>> TokenizeTexts(const Tokenizer& tokenizer,
                                                    const std::vector<std::string_view>& texts,
                                                    bool add_special_tokens,
                                                    const TokenizeLimits& limits) {
  RETURN_IF_ERROR(CheckTextSizes(texts, limits));
  for (size_t i = 0; i < texts.size(); ++i) {
    if (std::optional<int64_t> bad = FirstInvalidUtf8(texts[i]); bad.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("texts[", i, "]: invalid UTF-8 at byte offset ", *bad));
    }
  }
  std::vector<Encoding> out;
  out.reserve(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    absl::StatusOr<Encoding> e = tokenizer.Encode(texts[i], add_special_tokens);
    if (!e.ok()) return Prefixed(e.status(), absl::StrCat("texts[", i, "]: "));
    out.push_back(*std::move(e));
  }
  return out;
}

absl::StatusOr<std::vector<IncrementalText>> DetokenizeSequences(
    const Tokenizer& tokenizer, const std::vector<DetokenizeItem>& sequences,
    bool skip_special_tokens, bool incremental) {
  const int64_t vocab = tokenizer.vocab_size();
  std::vector<IncrementalText> out(sequences.size());
  for (size_t b = 0; b < sequences.size(); ++b) {
    const DetokenizeItem& item = sequences[b];
    ASSIGN_OR_RETURN(std::vector<int32_t> ids, CheckedIds(item.ids, vocab, b, "ids"));
    ASSIGN_OR_RETURN(std::vector<int32_t> previous,
                     CheckedIds(item.previous_ids, vocab, b, "previous_ids"));
    const std::string prefix = absl::StrCat("sequences[", b, "]: ");
    if (!incremental) {
      if (!previous.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sequences[", b, "].previous_ids has ", previous.size(),
            " ids but incremental is false (previous_ids is for incremental mode)"));
      }
      if (item.end_of_stream) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sequences[", b, "].end_of_stream is true but incremental is false (end_of_stream is "
            "for incremental mode)"));
      }
      absl::StatusOr<std::string> text = tokenizer.Decode(ids, skip_special_tokens);
      if (!text.ok()) return Prefixed(text.status(), prefix);
      out[b].text = ReplaceInvalidUtf8(*text);
      continue;
    }
    absl::StatusOr<IncrementalText> text =
        DecodeIncremental(tokenizer, previous, ids, skip_special_tokens, item.end_of_stream);
    if (!text.ok()) return Prefixed(text.status(), prefix);
    out[b] = *std::move(text);
  }
  return out;
}

absl::StatusOr<std::vector<VocabularyEntry>> VocabularyPage(const Tokenizer& tokenizer,
                                                            int64_t start_id, int64_t page_size) {
  const int64_t vocab = tokenizer.vocab_size();
  if (start_id < 0 || start_id > vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("start_id = ", start_id, " is outside [0, ", vocab, "]"));
  }
  if (page_size < 0 || page_size > kMaxVocabularyPage) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size = ", page_size, " is outside [0, ", kMaxVocabularyPage, "]"));
  }
  const int64_t n = std::min(page_size == 0 ? kDefaultVocabularyPage : page_size, vocab - start_id);
  std::vector<VocabularyEntry> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(start_id + i);
    VocabularyEntry& e = out[static_cast<size_t>(i)];
    e.id = id;
    e.piece = tokenizer.Piece(id);
    e.token_bytes = tokenizer.TokenBytes(id);
    e.type = tokenizer.Type(id);
    e.score = tokenizer.Score(id);
  }
  return out;
}

int64_t MaxPieceBytes(const Tokenizer& tokenizer) {
  size_t longest = 0;
  for (int64_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const auto i = static_cast<int32_t>(id);
    longest = std::max({longest, tokenizer.Piece(i).size(), tokenizer.TokenBytes(i).size()});
  }
  return static_cast<int64_t>(longest);
}

int64_t MaxTokensPerTextByte(const Tokenizer& tokenizer) {
  if (tokenizer.kind() == "wordpiece") return 1;
  for (int64_t id = 0; id < tokenizer.vocab_size(); ++id) {
    const std::string piece = tokenizer.Piece(static_cast<int32_t>(id));
    if (piece == "\xE2\x96\x81" || piece == "\xC4\xA0") return 1;  // "▁", "Ġ"
  }
  return 3;
}

const char* TokenTypeName(TokenType type) {
  switch (type) {
    case TokenType::kNormal: return "normal";
    case TokenType::kUnknown: return "unknown";
    case TokenType::kControl: return "control";
    case TokenType::kUserDefined: return "user_defined";
    case TokenType::kUnused: return "unused";
    case TokenType::kByte: return "byte";
  }
  return "unknown_type";
}

}  // namespace vocabd
