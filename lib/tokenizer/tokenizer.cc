#include "lib/tokenizer/tokenizer.h"

#include <algorithm>
#include <utility>

#include <unicode/uchar.h>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "lib/tokenizer/incremental_decode.h"
#include "lib/tokenizer/vocab_tokenizer.h"

namespace vocabd {

absl::Status ValidateUtf8(std::string_view text, std::string_view field) {
  const std::optional<int64_t> bad = FirstInvalidUtf8(text);
  if (!bad.has_value()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(field), ": invalid UTF-8 at byte offset ", *bad, " (byte 0x",
                   absl::Hex(static_cast<uint8_t>(text[*bad]), absl::kZeroPad2), ")"));
}



namespace tokenizer_internal {

uint32_t DecodeUtf8(std::string_view text, size_t* pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  size_t i = *pos;
  const unsigned char c = s[i];
  const int len = Utf8Length(c);
  if (len == 1 || i + len > text.size()) {
    *pos = i + 1;
    return c;
  }
  uint32_t cp = len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < len; ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
  *pos = i + len;
  return cp;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int ParseBytePiece(std::string_view p) {
  if (p.size() != 6 || p.substr(0, 3) != "<0x" || p[5] != '>') return -1;
  int v = 0;
  for (int k = 3; k < 5; ++k) {
    const char c = p[k];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return -1;
    v = v * 16 + d;
  }
  return v;
}

std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = from.empty() ? std::string_view::npos : s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

absl::Status ValidateVocab(Vocab* v) {
  const size_t n = v->pieces.size();
  if (n == 0) return absl::InvalidArgumentError(absl::StrCat(v->source, ": empty vocabulary"));
  if (n > (1u << 30)) {
    return absl::InvalidArgumentError(absl::StrCat(v->source, ": vocabulary of ", n, " tokens"));
  }
  if (v->scores.empty()) v->scores.assign(n, 0.0f);
  if (v->types.empty()) v->types.assign(n, TokenType::kNormal);
  if (v->bytes.empty()) v->bytes = v->pieces;
  if (v->scores.size() != n || v->types.size() != n || v->bytes.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        v->source, ": ", n, " pieces but ", v->scores.size(), " scores, ", v->types.size(),
        " types"));
  }
  for (const auto& [name, id] : {std::pair<const char*, std::optional<int32_t>>{"bos", v->bos},
                                 {"eos", v->eos}, {"unk", v->unk}}) {
    if (id.has_value() && (*id < 0 || static_cast<size_t>(*id) >= n)) {
      return absl::InvalidArgumentError(absl::StrCat(v->source, ": ", name, " id ", *id,
                                                     " is outside [0, ", n, ")"));
    }
  }
  if (v->add_bos && !v->bos) v->add_bos = false;
  if (v->add_eos && !v->eos) v->add_eos = false;
  for (int32_t id : v->split_tokens) {
    if (id < 0 || static_cast<size_t>(id) >= n) {
      return absl::InvalidArgumentError(absl::StrCat(v->source, ": special token id ", id,
                                                     " is outside [0, ", n, ")"));
    }
  }
  return absl::OkStatus();
}

VocabTokenizer::VocabTokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
  absl::flat_hash_map<int32_t, Vocab::SplitRules> rules;
  for (const auto& [id, r] : vocab_.split_rules) rules[id] = r;
  absl::flat_hash_set<int32_t> seen;
  for (int32_t id : vocab_.split_tokens) {
    const std::string& p = vocab_.pieces[id];
    if (p.empty() || !seen.insert(id).second) continue;
    auto it = rules.find(id);
    splits_.Add(p, id, it != rules.end() ? it->second : Vocab::SplitRules{});
  }
  splits_.Finish();
}

void SplitMatcher::Add(std::string pattern, int32_t id, Vocab::SplitRules rules) {
  entries_.push_back({std::move(pattern), id, rules});
}

void SplitMatcher::Finish() {
  for (auto& list : by_first_byte_) list.clear();
  starts_.fill(false);
  for (size_t i = 0; i < entries_.size(); ++i) {
    const auto first = static_cast<unsigned char>(entries_[i].pattern[0]);
    by_first_byte_[first].push_back(static_cast<uint32_t>(i));
    starts_[first] = true;
  }
  for (auto& list : by_first_byte_) {
    std::stable_sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
      return entries_[a].pattern.size() > entries_[b].pattern.size();
    });
  }
}

namespace {

// The code point ending at text[end) / starting at text[begin] (valid UTF-8).
UChar32 CodePointBefore(std::string_view text, size_t end, size_t* begin) {
  size_t b = end - 1;
  while (b > 0 && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) --b;
  size_t pos = b;
  *begin = b;
  return static_cast<UChar32>(DecodeUtf8(text, &pos));
}
UChar32 CodePointAt(std::string_view text, size_t begin, size_t* end) {
  size_t pos = begin;
  const auto c = static_cast<UChar32>(DecodeUtf8(text, &pos));
  *end = pos;
  return c;
}
// Rust regex's Unicode \w (UTS #18), which tokenizers' added-token rules
// use (their \s is IsWhiteSpace).
bool IsWordChar(UChar32 c) {
  return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) ||
         (U_GET_GC_MASK(c) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0 ||
         u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL);
}

}  // namespace

bool IsWhiteSpace(uint32_t cp) {
  return u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_WHITE_SPACE);
}

void SplitMatcher::Find(std::string_view text, size_t begin, size_t end,
                        std::vector<SplitPart>* out) const {
  size_t start_offset = begin;  // end of the last split emitted
  size_t i = begin;
  while (i < end) {
    if (!starts_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    const Entry* hit = nullptr;
    for (uint32_t k : by_first_byte_[static_cast<unsigned char>(text[i])]) {
      const std::string& p = entries_[k].pattern;
      if (end - i >= p.size() && text.compare(i, p.size(), p) == 0) {
        hit = &entries_[k];
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    size_t start = i, stop = i + hit->pattern.size();
    i = stop;  // the next match starts after this one, kept or not
    const Vocab::SplitRules& r = hit->rules;
    size_t b = 0, e = 0;
    if (r.single_word && ((start > begin && IsWordChar(CodePointBefore(text, start, &b))) ||
                          (stop < end && IsWordChar(CodePointAt(text, stop, &e))))) {
      continue;
    }
    if (r.lstrip) {
      size_t s = start;
      while (s > begin && IsWhiteSpace(CodePointBefore(text, s, &b))) s = b;
      start = std::max(s, start_offset);
    }
    if (r.rstrip) {
      while (stop < end && IsWhiteSpace(CodePointAt(text, stop, &e))) stop = e;
    }
    if (start_offset < start) out->push_back({start_offset, start, -1});
    out->push_back({start, stop, hit->id});
    start_offset = stop;
  }
  if (start_offset < end) out->push_back({start_offset, end, -1});
}

absl::Status VocabTokenizer::EncodeImpl(std::string_view text, bool add_special_tokens,
                                        std::vector<int32_t>* ids,
                                        std::vector<std::pair<int64_t, int64_t>>* offsets) const {
  if (absl::Status s = ValidateUtf8(text, "text"); !s.ok()) return s;
  const auto n = static_cast<int64_t>(text.size());
  if (add_special_tokens && vocab_.add_bos) {
    ids->push_back(*vocab_.bos);
    if (offsets) offsets->emplace_back(0, 0);
  }
  std::vector<SplitPart> splits;
  splits_.Find(text, 0, text.size(), &splits);
  for (const SplitPart& sp : splits) {
    if (sp.id >= 0) {
      ids->push_back(sp.id);
      if (offsets) {
        offsets->emplace_back(static_cast<int64_t>(sp.begin), static_cast<int64_t>(sp.end));
      }
    } else if (absl::Status s = EncodeSegment(text.substr(sp.begin, sp.end - sp.begin),
                                              static_cast<int64_t>(sp.begin), ids, offsets);
               !s.ok()) {
      return s;
    }
  }
  if (add_special_tokens && vocab_.add_eos) {
    ids->push_back(*vocab_.eos);
    if (offsets) offsets->emplace_back(n, n);
  }
  return absl::OkStatus();
}

absl::StatusOr<Encoding> VocabTokenizer::Encode(std::string_view text,
                                                bool add_special_tokens) const {
  Encoding e;
  if (absl::Status s = EncodeImpl(text, add_special_tokens, &e.ids, &e.offsets); !s.ok()) {
    return s;
  }
  return e;
}

absl::StatusOr<std::vector<int32_t>> VocabTokenizer::EncodeIds(std::string_view text,
                                                               bool add_special_tokens) const {
  std::vector<int32_t> ids;
  if (absl::Status s = EncodeImpl(text, add_special_tokens, &ids, nullptr); !s.ok()) return s;
  return ids;
}

absl::StatusOr<std::string> VocabTokenizer::Decode(absl::Span<const int32_t> ids,
                                                   bool skip_special_tokens) const {
  std::vector<int32_t> kept;
  kept.reserve(ids.size());
  const auto n = static_cast<int64_t>(vocab_.pieces.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("ids[", i, "] = ", id, " is outside [0, vocab_size = ", n, ")"));
    }
    if (skip_special_tokens && IsSpecial(id)) continue;
    kept.push_back(id);
  }
  return DecodeTokens(kept);
}

std::string VocabTokenizer::DecodeTokens(const std::vector<int32_t>& ids) const {
  std::string out;
  bool at_start = true;
  for (int32_t id : ids) {
    const std::string& b = vocab_.bytes[id];
    if (at_start && vocab_.types[id] != TokenType::kControl) {
      at_start = false;
      if (strip_leading_space_ && !b.empty() && b[0] == ' ' &&
          vocab_.types[id] != TokenType::kByte) {
        out.append(b, 1, std::string::npos);
        at_start = strip_while_empty_ && out.empty();
        continue;
      }
    }
    out.append(b);
  }
  return out;
}

std::string VocabTokenizer::Piece(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_.pieces.size()) return "";
  return vocab_.pieces[id];
}
std::string VocabTokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_.bytes.size()) return "";
  return vocab_.bytes[id];
}
TokenType VocabTokenizer::Type(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_.types.size()) return TokenType::kUnused;
  return vocab_.types[id];
}
float VocabTokenizer::Score(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_.scores.size()) return 0.0f;
  return vocab_.scores[id];
}

}  // namespace tokenizer_internal
}  // namespace vocabd
