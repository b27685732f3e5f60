#include "tests/tokenizer/test_tokenizer.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/test_util.h"

namespace vocabd::testing {
namespace {

constexpr int32_t kByteBase = 3;  // <0x00> is id 3

// Bytes of the UTF-8 character starting with `lead` (1 for a bad lead byte).
size_t Utf8Length(unsigned char lead) {
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  if (lead >= 0xE0) return lead <= 0xEF ? 3 : 1;
  if (lead >= 0xC2) return 2;
  return 1;
}

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

absl::StatusOr<std::unique_ptr<Llama2cTestTokenizer>> Llama2cTestTokenizer::Load(
    const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto tok = std::unique_ptr<Llama2cTestTokenizer>(new Llama2cTestTokenizer());
  tok->path_ = path;
  size_t off = 4;  // uint32 max_token_length
  while (off + 8 <= bytes.size()) {
    float score;
    int32_t len;
    std::memcpy(&score, bytes.data() + off, 4);
    std::memcpy(&len, bytes.data() + off + 4, 4);
    off += 8;
    if (len < 0 || off + static_cast<size_t>(len) > bytes.size()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": bad token length ", len));
    }
    tok->ids_.emplace(bytes.substr(off, static_cast<size_t>(len)),
                      static_cast<int32_t>(tok->pieces_.size()));
    tok->pieces_.push_back(bytes.substr(off, static_cast<size_t>(len)));
    tok->scores_.push_back(score);
    off += static_cast<size_t>(len);
  }
  if (tok->pieces_.size() < kByteBase + 256) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": only ", tok->pieces_.size(), " tokens"));
  }
  return tok;
}

absl::StatusOr<Encoding> Llama2cTestTokenizer::Encode(std::string_view text,
                                                      bool add_special_tokens) const {
  struct Tok {
    int32_t id;
    int64_t begin, end;
  };
  std::vector<Tok> toks;
  if (!text.empty()) {
    // run.c: the dummy prefix " " is its own piece before the text.
    toks.push_back({ids_.at(" "), 0, 0});
    size_t i = 0;
    while (i < text.size()) {
      const size_t n = std::min(Utf8Length(static_cast<unsigned char>(text[i])), text.size() - i);
      auto it = ids_.find(std::string(text.substr(i, n)));
      if (it != ids_.end()) {
        toks.push_back({it->second, static_cast<int64_t>(i), static_cast<int64_t>(i + n)});
      } else {
        for (size_t k = 0; k < n; ++k) {
          toks.push_back({kByteBase + static_cast<unsigned char>(text[i + k]),
                          static_cast<int64_t>(i + k), static_cast<int64_t>(i + k + 1)});
        }
      }
      i += n;
    }
  }
  while (true) {  // merge the best-scoring adjacent pair
    float best = -1e10f;
    int best_id = -1;
    size_t best_at = 0;
    for (size_t i = 0; i + 1 < toks.size(); ++i) {
      auto it = ids_.find(pieces_[toks[i].id] + pieces_[toks[i + 1].id]);
      if (it != ids_.end() && scores_[it->second] > best) {
        best = scores_[it->second];
        best_id = it->second;
        best_at = i;
      }
    }
    if (best_id < 0) break;
    toks[best_at] = {best_id, toks[best_at].begin, toks[best_at + 1].end};
    toks.erase(toks.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
  }
  Encoding out;
  if (add_special_tokens) {
    out.ids.push_back(1);
    out.offsets.emplace_back(0, 0);
  }
  for (const Tok& t : toks) {
    out.ids.push_back(t.id);
    out.offsets.emplace_back(t.begin, t.end);
  }
  return out;
}

std::string Llama2cTestTokenizer::TokenBytes(int32_t id) const {
  if (id >= kByteBase && id < kByteBase + 256) return std::string(1, static_cast<char>(id - kByteBase));
  if (id == 1 || id == 2) return "";
  return pieces_[id];
}

TokenType Llama2cTestTokenizer::Type(int32_t id) const {
  if (id == 0) return TokenType::kUnknown;
  if (id == 1 || id == 2) return TokenType::kControl;
  if (id >= kByteBase && id < kByteBase + 256) return TokenType::kByte;
  return TokenType::kNormal;
}

absl::StatusOr<std::string> Llama2cTestTokenizer::Decode(absl::Span<const int32_t> ids,
                                                         bool skip_special_tokens) const {
  if (absl::Status s = CheckIds(ids, vocab_size()); !s.ok()) return s;
  std::string out;
  bool first_text = true;
  for (int32_t id : ids) {
    if (id == 1 || id == 2) {
      if (!skip_special_tokens) out += id == 1 ? "<s>" : "</s>";
      continue;
    }
    std::string b = TokenBytes(id);
    if (first_text && !b.empty() && b[0] == ' ') b.erase(0, 1);
    first_text = false;
    out += b;
  }
  return out;
}

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

std::function<absl::StatusOr<std::unique_ptr<Tokenizer>>(const std::string&, const Checkpoint&)>
StoriesTokenizerFactory() {
  return [](const std::string& name,
            const Checkpoint&) -> absl::StatusOr<std::unique_ptr<Tokenizer>> {
    if (!absl::StartsWith(name, "stories260K")) return std::unique_ptr<Tokenizer>();
    auto tok = Llama2cTestTokenizer::Load(Tok512Path());
    if (!tok.ok()) return tok.status();
    return std::unique_ptr<Tokenizer>(std::move(*tok));
  };
}

}  // namespace vocabd::testing
