#include "lib/tokenizer/incremental_decode.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/core/status_macros.h"

namespace vocabd {
namespace {

enum class Kind { kValid, kInvalid, kTruncated };

struct Step {
  Kind kind;
  // kValid: bytes of the character; kInvalid: bytes of the maximal subpart
  // (>= 1); kTruncated: bytes left in the text (a valid prefix).
  size_t len;
};

// The UTF-8 sequence starting at text[i] (table in the header).
Step Next(std::string_view text, size_t i) {
  const auto b = static_cast<uint8_t>(text[i]);
  if (b < 0x80) return {Kind::kValid, 1};
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b == 0xE0) {
    need = 2;
    lo = 0xA0;
  } else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) {
    need = 2;
  } else if (b == 0xED) {
    need = 2;
    hi = 0x9F;
  } else if (b == 0xF0) {
    need = 3;
    lo = 0x90;
  } else if (b >= 0xF1 && b <= 0xF3) {
    need = 3;
  } else if (b == 0xF4) {
    need = 3;
    hi = 0x8F;
  } else {
    return {Kind::kInvalid, 1};  // 80..C1, F5..FF
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= text.size()) return {Kind::kTruncated, k};
    const auto c = static_cast<uint8_t>(text[i + k]);
    const uint8_t l = k == 1 ? lo : 0x80;
    const uint8_t h = k == 1 ? hi : 0xBF;
    if (c < l || c > h) return {Kind::kInvalid, k};
  }
  return {Kind::kValid, need + 1};
}

bool IsContinuationByte(char c) { return (static_cast<uint8_t>(c) & 0xC0) == 0x80; }

absl::Status CheckIds(absl::Span<const int32_t> ids, int64_t vocab_size, const char* field) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(field, "[", i, "] = ", ids[i],
                                                     " is outside [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<int64_t> FirstInvalidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    // ASCII fast path, 8 bytes at a time (Tokenize validates every text).
    while (i + 8 <= text.size()) {
      uint64_t w;
      std::memcpy(&w, text.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= text.size()) break;
    const Step s = Next(text, i);
    if (s.kind != Kind::kValid) return static_cast<int64_t>(i);
    i += s.len;
  }
  return std::nullopt;
}

size_t CompleteUtf8Prefix(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const Step s = Next(text, i);
    if (s.kind == Kind::kTruncated) return i;
    i += s.len;
  }
  return text.size();
}

std::string ReplaceInvalidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const Step s = Next(text, i);
    if (s.kind == Kind::kValid) {
      out.append(text.data() + i, s.len);
    } else {
      out.append("\xEF\xBF\xBD");
    }
    i += s.len;
  }
  return out;
}

absl::StatusOr<IncrementalText> DecodeIncremental(const Tokenizer& tokenizer,
                                                  absl::Span<const int32_t> previous_ids,
                                                  absl::Span<const int32_t> new_ids,
                                                  bool skip_special_tokens, bool end_of_stream) {
  const int64_t vocab = tokenizer.vocab_size();
  RETURN_IF_ERROR(CheckIds(previous_ids, vocab, "previous_ids"));
  RETURN_IF_ERROR(CheckIds(new_ids, vocab, "ids"));
  const int64_t n = static_cast<int64_t>(previous_ids.size());
  // The window starts kIncrementalContextTokens back, and further back while
  // its text would start inside a character (the bytes before it would
  // still be held back) or is empty (so its first byte is unknown).
  int64_t s = std::max<int64_t>(0, n - kIncrementalContextTokens);
  std::string before;
  while (true) {
    ASSIGN_OR_RETURN(before, tokenizer.Decode(previous_ids.subspan(static_cast<size_t>(s)),
                                              skip_special_tokens));
    if (s == 0 || (!before.empty() && !IsContinuationByte(before[0]))) break;
    --s;
  }
  std::vector<int32_t> window(previous_ids.begin() + s, previous_ids.end());
  window.insert(window.end(), new_ids.begin(), new_ids.end());
  ASSIGN_OR_RETURN(std::string after, tokenizer.Decode(window, skip_special_tokens));
  const size_t sent = CompleteUtf8Prefix(before);
  const size_t complete = CompleteUtf8Prefix(after);
  IncrementalText out;
  out.held_back_bytes = static_cast<int64_t>(after.size() - complete);
  if (complete > sent) {
    out.text = ReplaceInvalidUtf8(std::string_view(after).substr(sent, complete - sent));
  }
  if (end_of_stream) {
    // The held-back tail (after a character boundary, so it is the same
    // bytes however far back the window starts).
    out.text += ReplaceInvalidUtf8(std::string_view(after).substr(std::max(sent, complete)));
    out.held_back_bytes = 0;
  }
  return out;
}

absl::StatusOr<std::string> FlushIncremental(const Tokenizer& tokenizer,
                                             absl::Span<const int32_t> previous_ids,
                                             bool skip_special_tokens) {
  RETURN_IF_ERROR(CheckIds(previous_ids, tokenizer.vocab_size(), "previous_ids"));
  // The held-back tail is at most 3 bytes: a window that starts on a
  // character boundary (as in DecodeIncremental) decodes it.
  int64_t s = std::max<int64_t>(0, static_cast<int64_t>(previous_ids.size()) - kIncrementalContextTokens);
  std::string text;
  while (true) {
    ASSIGN_OR_RETURN(text, tokenizer.Decode(previous_ids.subspan(static_cast<size_t>(s)),
                                            skip_special_tokens));
    if (s == 0 || (!text.empty() && !IsContinuationByte(text[0]))) break;
    --s;
  }
  const size_t complete = CompleteUtf8Prefix(text);
  return ReplaceInvalidUtf8(std::string_view(text).substr(complete));
}

}  // namespace vocabd
