#include "tests/tokenizer/test_tokenizer.h"

#include "absl/strings/str_cat.h"
#include "tests/test_util.h"

namespace vocabd::testing {
namespace {

absl::Status CheckIds(absl::Span<const int32_t> ids, int64_t vocab) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("ids[", i, "] = ", ids[i], " is outside [0, ", vocab, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Encoding> FakeTokenizer::Encode(std::string_view text, bool) const {
  Encoding out;
  size_t i = 0;
  while (i < text.size()) {
    int32_t best = -1;
    size_t best_len = 0;
    for (size_t id = 0; id < entries_.size(); ++id) {
      const std::string& b = entries_[id].bytes;
      if (entries_[id].type != TokenType::kControl && b.size() > best_len &&
          text.substr(i, b.size()) == b) {
        best = static_cast<int32_t>(id);
        best_len = b.size();
      }
    }
    if (best < 0) return absl::InvalidArgumentError(absl::StrCat("no token at byte ", i));
    out.ids.push_back(best);
    out.offsets.emplace_back(static_cast<int64_t>(i), static_cast<int64_t>(i + best_len));
    i += best_len;
  }
  return out;
}

absl::StatusOr<std::string> FakeTokenizer::Decode(absl::Span<const int32_t> ids,
                                                  bool skip_special_tokens) const {
  if (absl::Status s = CheckIds(ids, vocab_size()); !s.ok()) return s;
  std::string out;
  bool first_text = true;
  for (int32_t id : ids) {
    const Entry& e = entries_[id];
    if (e.type == TokenType::kControl) {
      if (!skip_special_tokens) out += e.piece;
      continue;
    }
    std::string b = e.bytes;
    if (first_text && !b.empty() && b[0] == ' ') b.erase(0, 1);
    first_text = false;
    out += b;
  }
  return out;
}

std::string Tok512Path() { return SourceDir() + "/models/stories260K/tok512.bin"; }

}  // namespace vocabd::testing
