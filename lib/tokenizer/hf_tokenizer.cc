#include "lib/tokenizer/hf_tokenizer.h"

#include <unicode/ubrk.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/uscript.h>
#include <unicode/ustring.h>
#include <unicode/utext.h>
#include <unicode/utf16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/tokenizer/kinds.h"
#include "lib/tokenizer/piece_trie.h"
#include "lib/tokenizer/split_regex.h"
#include "lib/tokenizer/spm_normalizer.h"
#include "lib/tokenizer/vocab_tokenizer.h"
#include "lib/tokenizer/word_cache.h"

namespace vocabd {
namespace tokenizer_internal {
namespace {

using json = nlohmann::json;

constexpr int kMaxSequenceDepth = 16;

const json& Field(const json& j, const char* key) {
  static const json* null_json = new json();
  auto it = j.find(key);
  return it == j.end() ? *null_json : *it;
}

// ---------------------------------------------------------------- JSON ----

// Reads optional typed fields of a component, naming `path.key` when a
// field has the wrong type.
class Node {
 public:
  Node(const json& j, std::string path, const std::string& file) : j_(j), path_(std::move(path)), file_(file) {}
  const json& j() const { return j_; }
  const std::string& path() const { return path_; }
  std::string At(const std::string& key) const { return path_.empty() ? key : absl::StrCat(path_, ".", key); }
  absl::Status Error(const std::string& key, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ": ", At(key), " ", what));
  }
  absl::Status Bool(const char* key, bool* out) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_boolean()) return Error(key, absl::StrCat("= ", it->dump().substr(0, 80), " is not a boolean"));
    *out = it->get<bool>();
    return absl::OkStatus();
  }
  absl::Status String(const char* key, std::string* out, bool* present = nullptr) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_string()) return Error(key, absl::StrCat("= ", it->dump().substr(0, 80), " is not a string"));
    *out = it->get<std::string>();
    if (present) *present = true;
    return absl::OkStatus();
  }
  absl::Status Int(const char* key, int64_t* out) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return absl::OkStatus();
    if (!it->is_number_integer()) return Error(key, absl::StrCat("= ", it->dump().substr(0, 80), " is not an integer"));
    *out = it->get<int64_t>();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Type() const {
    if (!j_.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(file_, ": ", path_, " = ", j_.dump().substr(0, 80), " is not an object"));
    }
    auto it = j_.find("type");
    if (it == j_.end() || !it->is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(file_, ": ", At("type"), " is missing"));
    }
    return it->get<std::string>();
  }
  absl::Status Unsupported(const std::string& type, const char* supported) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ": ", At("type"), " = \"", type,
                                                   "\" is not supported (supported: ", supported, ")"));
  }
  const std::string& file() const { return file_; }
  absl::Status Deep() const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ": ", path_, " is a Sequence nested more than ",
                                                   kMaxSequenceDepth, " levels deep"));
  }

 private:
  const json& j_;
  std::string path_;
  const std::string& file_;
};

// A "Sequence" component: `parse(element, depth + 1)` for each element of
// n[key] (its path "<path>.<key>[i]"), at most kMaxSequenceDepth levels deep.
template <typename Parse>
absl::Status ParseSequence(const Node& n, const char* key, int depth, Parse parse) {
  if (depth >= kMaxSequenceDepth) return n.Deep();
  auto it = n.j().find(key);
  if (it == n.j().end() || !it->is_array()) return n.Error(key, "is missing or not an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const Node element((*it)[i], absl::StrCat(n.At(key), "[", i, "]"), n.file());
    if (absl::Status s = parse(element, depth + 1); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// A single character given as a JSON string (Metaspace replacement,
// CharDelimiterSplit delimiter, Strip content).
absl::Status OneChar(const Node& n, const char* key, uint32_t* cp) {
  std::string s;
  bool present = false;
  if (absl::Status st = n.String(key, &s, &present); !st.ok()) return st;
  if (!present) return n.Error(key, "is missing");
  if (absl::Status st = ValidateUtf8(s, n.At(key)); !st.ok()) return st;
  size_t pos = 0;
  if (s.empty()) return n.Error(key, "= \"\" is not one character");
  *cp = DecodeUtf8(s, &pos);
  if (pos != s.size()) return n.Error(key, absl::StrCat("= \"", s, "\" is not one character"));
  return absl::OkStatus();
}

std::string EscapeRegex(std::string_view s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// A Split / Replace "pattern": {"String": s} or {"Regex": r}. An empty
// String pattern never matches (tokenizers' behaviour).
absl::StatusOr<std::optional<SplitRegex>> Pattern(const Node& n, const char* key) {
  auto it = n.j().find(key);
  if (it == n.j().end() || !it->is_object()) return n.Error(key, "is missing or not an object");
  const std::string where = n.At(key);
  if (it->contains("Regex") && (*it)["Regex"].is_string()) {
    absl::StatusOr<SplitRegex> re = SplitRegex::Compile((*it)["Regex"].get<std::string>(), n.file() + ": " + where);
    if (!re.ok()) return re.status();
    return std::optional<SplitRegex>(*std::move(re));
  }
  if (it->contains("String") && (*it)["String"].is_string()) {
    const std::string s = (*it)["String"].get<std::string>();
    if (s.empty()) return std::optional<SplitRegex>();
    absl::StatusOr<SplitRegex> re = SplitRegex::Compile(EscapeRegex(s), n.file() + ": " + where);
    if (!re.ok()) return re.status();
    return std::optional<SplitRegex>(*std::move(re));
  }
  return n.Error(key, absl::StrCat("= ", it->dump().substr(0, 80), " is neither {\"String\": ...} nor {\"Regex\": ...}"));
}

// ------------------------------------------------------------- Unicode ----

struct NChar {
  uint32_t cp;
  uint32_t ob, oe;  // input bytes [ob, oe) this character came from
};

bool IsAsciiPunct(uint32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
}
bool IsPunct(uint32_t c) {
  return IsAsciiPunct(c) || (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_P_MASK) != 0;
}
bool IsNumeric(uint32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_N_MASK) != 0; }
bool IsMark(uint32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_M_MASK) != 0; }

void AppendLower(uint32_t c, std::vector<uint32_t>* out) {
  if (c < 0x80) {
    out->push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return;
  }
  UChar src[2];
  int32_t n = 0;
  U16_APPEND_UNSAFE(src, n, c);
  UChar dst[16];
  UErrorCode err = U_ZERO_ERROR;
  const int32_t m = u_strToLower(dst, 16, src, n, "", &err);
  if (U_FAILURE(err)) {
    out->push_back(c);
    return;
  }
  for (int32_t k = 0; k < m;) {
    UChar32 x;
    U16_NEXT(dst, k, m, x);
    out->push_back(static_cast<uint32_t>(x));
  }
}

std::vector<NChar> CharsOf(std::string_view t) {
  std::vector<NChar> out;
  out.reserve(t.size());
  size_t p = 0;
  while (p < t.size()) {
    const auto b = static_cast<uint32_t>(p);
    const uint32_t cp = DecodeUtf8(t, &p);
    out.push_back({cp, b, static_cast<uint32_t>(p)});
  }
  return out;
}

// UTF-8 of chars; at[i] = byte where chars[i] starts (at[n] = size).
void Utf8Of(const std::vector<NChar>& chars, std::string* s, std::vector<uint32_t>* at) {
  s->clear();
  at->clear();
  for (const NChar& c : chars) {
    at->push_back(static_cast<uint32_t>(s->size()));
    AppendUtf8(c.cp, s);
  }
  at->push_back(static_cast<uint32_t>(s->size()));
}

absl::Status UnicodeNormalize(const UNormalizer2* n, std::vector<NChar>* chars) {
  const std::vector<NChar>& c = *chars;
  std::vector<NChar> out;
  out.reserve(c.size());
  std::vector<UChar> src, dst;
  size_t i = 0;
  while (i < c.size()) {
    size_t j = i + 1;
    while (j < c.size() && !unorm2_hasBoundaryBefore(n, static_cast<UChar32>(c[j].cp))) ++j;
    src.clear();
    for (size_t k = i; k < j; ++k) {
      UChar buf[2];
      int32_t len = 0;
      U16_APPEND_UNSAFE(buf, len, c[k].cp);
      src.insert(src.end(), buf, buf + len);
    }
    UErrorCode err = U_ZERO_ERROR;
    const UBool normalized = unorm2_isNormalized(n, src.data(), static_cast<int32_t>(src.size()), &err);
    if (U_SUCCESS(err) && normalized) {
      out.insert(out.end(), c.begin() + static_cast<ptrdiff_t>(i), c.begin() + static_cast<ptrdiff_t>(j));
    } else {
      err = U_ZERO_ERROR;
      dst.resize(src.size() * 4 + 16);
      int32_t m = unorm2_normalize(n, src.data(), static_cast<int32_t>(src.size()), dst.data(),
                                   static_cast<int32_t>(dst.size()), &err);
      if (err == U_BUFFER_OVERFLOW_ERROR) {
        err = U_ZERO_ERROR;
        dst.resize(static_cast<size_t>(m));
        m = unorm2_normalize(n, src.data(), static_cast<int32_t>(src.size()), dst.data(), m, &err);
      }
      if (U_FAILURE(err)) return absl::InternalError(absl::StrCat("ICU normalization: ", u_errorName(err)));
      for (int32_t k = 0; k < m;) {
        UChar32 x;
        U16_NEXT(dst.data(), k, m, x);
        out.push_back({static_cast<uint32_t>(x), c[i].ob, c[j - 1].oe});
      }
    }
    i = j;
  }
  chars->swap(out);
  return absl::OkStatus();
}

// ------------------------------------------------------------ normalizer ----

struct NormOp {
  enum Kind { kNfc, kNfd, kNfkc, kNfkd, kLowercase, kStrip, kStripAccents, kReplace, kPrepend, kPrecompiled, kBert };
  Kind kind;
  bool left = false, right = false;  // Strip
  std::optional<SplitRegex> pattern;  // Replace
  std::string content;                // Replace; Prepend
  std::shared_ptr<const SpmNormalizer> charsmap;
  bool clean_text = true, chinese = true, strip_accents = true, lowercase = true;  // BertNormalizer
};

const UNormalizer2* Normalizer2(NormOp::Kind k) {
  UErrorCode err = U_ZERO_ERROR;
  switch (k) {
    case NormOp::kNfc: return unorm2_getNFCInstance(&err);
    case NormOp::kNfd: return unorm2_getNFDInstance(&err);
    case NormOp::kNfkc: return unorm2_getNFKCInstance(&err);
    default: return unorm2_getNFKDInstance(&err);
  }
}

bool IsChineseChar(uint32_t c) {
  // tokenizers' BertNormalizer ranges (its fifth range starts at 0x2B920).
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void Lowercase(std::vector<NChar>* chars) {
  std::vector<NChar> out;
  out.reserve(chars->size());
  std::vector<uint32_t> low;
  for (const NChar& c : *chars) {
    low.clear();
    AppendLower(c.cp, &low);
    for (uint32_t x : low) out.push_back({x, c.ob, c.oe});
  }
  chars->swap(out);
}

absl::Status ReplaceChars(const SplitRegex& re, const std::string& content,
                          std::vector<NChar>* chars) {
  std::string s;
  std::vector<uint32_t> at;
  Utf8Of(*chars, &s, &at);
  std::vector<SplitSpan> m;
  if (absl::Status st = re.Matches(s, {0, static_cast<uint32_t>(s.size())}, &m); !st.ok()) {
    return st;
  }
  if (m.empty()) return absl::OkStatus();
  // byte -> char index (bytes are char starts at match boundaries)
  std::vector<uint32_t> ci(s.size() + 1, 0);
  for (size_t i = 0; i < chars->size(); ++i) {
    for (uint32_t b = at[i]; b < at[i + 1]; ++b) ci[b] = static_cast<uint32_t>(i);
  }
  ci[s.size()] = static_cast<uint32_t>(chars->size());
  const std::vector<NChar> content_chars = CharsOf(content);
  std::vector<NChar> out;
  size_t next = 0;  // next char to copy
  for (const SplitSpan& sp : m) {
    const size_t cb = ci[sp.begin], ce = ci[sp.end];
    out.insert(out.end(), chars->begin() + static_cast<ptrdiff_t>(next), chars->begin() + static_cast<ptrdiff_t>(cb));
    uint32_t ob, oe;
    if (ce > cb) {
      ob = (*chars)[cb].ob;
      oe = (*chars)[ce - 1].oe;
    } else if (cb < chars->size()) {
      ob = oe = (*chars)[cb].ob;
    } else {
      ob = oe = chars->empty() ? 0 : chars->back().oe;
    }
    for (const NChar& c : content_chars) out.push_back({c.cp, ob, oe});
    next = ce;
  }
  out.insert(out.end(), chars->begin() + static_cast<ptrdiff_t>(next), chars->end());
  chars->swap(out);
  return absl::OkStatus();
}

absl::Status Precompiled(const SpmNormalizer& cm, std::vector<NChar>* chars) {
  if (chars->empty()) return absl::OkStatus();
  std::string s;
  std::vector<uint32_t> at;
  Utf8Of(*chars, &s, &at);
  std::vector<uint32_t> ci(s.size() + 1, 0);
  for (size_t i = 0; i < chars->size(); ++i) {
    for (uint32_t b = at[i]; b < at[i + 1]; ++b) ci[b] = static_cast<uint32_t>(i);
  }
  ci[s.size()] = static_cast<uint32_t>(chars->size());
  UErrorCode err = U_ZERO_ERROR;
  UText* ut = utext_openUTF8(nullptr, s.data(), static_cast<int64_t>(s.size()), &err);
  UBreakIterator* bi = ubrk_open(UBRK_CHARACTER, "", nullptr, 0, &err);
  if (U_SUCCESS(err)) ubrk_setUText(bi, ut, &err);
  if (U_FAILURE(err)) {
    if (bi) ubrk_close(bi);
    if (ut) utext_close(ut);
    return absl::InternalError(absl::StrCat("ICU grapheme break iterator: ", u_errorName(err)));
  }
  std::vector<NChar> out;
  out.reserve(chars->size());
  auto emit = [&](std::string_view rep, uint32_t ob, uint32_t oe) {
    size_t p = 0;
    while (p < rep.size()) out.push_back({DecodeUtf8(rep, &p), ob, oe});
  };
  int32_t start = ubrk_first(bi);
  for (int32_t end = ubrk_next(bi); end != UBRK_DONE; start = end, end = ubrk_next(bi)) {
    const size_t cb = ci[start], ce = ci[end];
    std::string_view rep;
    if (end - start < 6 && cm.ShortestPrefixReplacement(std::string_view(s).substr(start, end - start), &rep)) {
      emit(rep, (*chars)[cb].ob, (*chars)[ce - 1].oe);
      continue;
    }
    for (size_t k = cb; k < ce; ++k) {
      if (cm.ShortestPrefixReplacement(std::string_view(s).substr(at[k], at[k + 1] - at[k]), &rep)) {
        emit(rep, (*chars)[k].ob, (*chars)[k].oe);
      } else {
        out.push_back((*chars)[k]);
      }
    }
  }
  ubrk_close(bi);
  utext_close(ut);
  chars->swap(out);
  return absl::OkStatus();
}

absl::Status ApplyNorm(const NormOp& op, std::vector<NChar>* chars) {
  switch (op.kind) {
    case NormOp::kNfc: case NormOp::kNfd: case NormOp::kNfkc: case NormOp::kNfkd:
      return UnicodeNormalize(Normalizer2(op.kind), chars);
    case NormOp::kLowercase:
      Lowercase(chars);
      return absl::OkStatus();
    case NormOp::kStrip: {
      size_t b = 0, e = chars->size();
      if (op.left) while (b < e && IsWhiteSpace((*chars)[b].cp)) ++b;
      if (op.right) while (e > b && IsWhiteSpace((*chars)[e - 1].cp)) --e;
      chars->erase(chars->begin() + static_cast<ptrdiff_t>(e), chars->end());
      chars->erase(chars->begin(), chars->begin() + static_cast<ptrdiff_t>(b));
      return absl::OkStatus();
    }
    case NormOp::kStripAccents:
      chars->erase(std::remove_if(chars->begin(), chars->end(), [](const NChar& c) { return IsMark(c.cp); }),
                   chars->end());
      return absl::OkStatus();
    case NormOp::kReplace:
      if (op.pattern) return ReplaceChars(*op.pattern, op.content, chars);
      return absl::OkStatus();
    case NormOp::kPrepend:
      if (!chars->empty() && !op.content.empty()) {
        std::vector<NChar> pre = CharsOf(op.content);
        for (NChar& c : pre) c.ob = (*chars)[0].ob, c.oe = (*chars)[0].oe;
        chars->insert(chars->begin(), pre.begin(), pre.end());
      }
      return absl::OkStatus();
    case NormOp::kPrecompiled:
      return Precompiled(*op.charsmap, chars);
    case NormOp::kBert: {
      if (op.clean_text) {
        std::vector<NChar> out;
        out.reserve(chars->size());
        for (NChar c : *chars) {
          const uint32_t x = c.cp;
          const bool control = x != '\t' && x != '\n' && x != '\r' &&
                               (U_GET_GC_MASK(static_cast<UChar32>(x)) & U_GC_C_MASK) != 0;
          if (x == 0 || x == 0xFFFD || control) continue;
          if (x == '\t' || x == '\n' || x == '\r' || IsWhiteSpace(x)) c.cp = ' ';
          out.push_back(c);
        }
        chars->swap(out);
      }
      if (op.chinese) {
        std::vector<NChar> out;
        out.reserve(chars->size());
        for (const NChar& c : *chars) {
          if (IsChineseChar(c.cp)) {
            out.push_back({' ', c.ob, c.oe});
            out.push_back(c);
            out.push_back({' ', c.ob, c.oe});
          } else {
            out.push_back(c);
          }
        }
        chars->swap(out);
      }
      if (op.strip_accents) {
        if (absl::Status s = UnicodeNormalize(Normalizer2(NormOp::kNfd), chars); !s.ok()) return s;
        chars->erase(std::remove_if(chars->begin(), chars->end(),
                                    [](const NChar& c) {
                                      return u_charType(static_cast<UChar32>(c.cp)) == U_NON_SPACING_MARK;
                                    }),
                     chars->end());
      }
      if (op.lowercase) Lowercase(chars);
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::Status ParseNormalizer(const Node& n, int depth, std::vector<NormOp>* ops) {
  if (n.j().is_null()) return absl::OkStatus();
  absl::StatusOr<std::string> type = n.Type();
  if (!type.ok()) return type.status();
  const std::string& t = *type;
  if (t == "Sequence") {
    return ParseSequence(n, "normalizers", depth, [ops](const Node& e, int d) { return ParseNormalizer(e, d, ops); });
  }
  NormOp op;
  if (t == "NFC") op.kind = NormOp::kNfc;
  else if (t == "NFD") op.kind = NormOp::kNfd;
  else if (t == "NFKC") op.kind = NormOp::kNfkc;
  else if (t == "NFKD") op.kind = NormOp::kNfkd;
  else if (t == "Lowercase") op.kind = NormOp::kLowercase;
  else if (t == "StripAccents") op.kind = NormOp::kStripAccents;
  else if (t == "Strip") {
    op.kind = NormOp::kStrip;
    op.left = op.right = true;
    if (absl::Status s = n.Bool("strip_left", &op.left); !s.ok()) return s;
    if (absl::Status s = n.Bool("strip_right", &op.right); !s.ok()) return s;
  } else if (t == "Replace") {
    op.kind = NormOp::kReplace;
    absl::StatusOr<std::optional<SplitRegex>> p = Pattern(n, "pattern");
    if (!p.ok()) return p.status();
    op.pattern = *std::move(p);
    bool present = false;
    if (absl::Status s = n.String("content", &op.content, &present); !s.ok()) return s;
    if (!present) return n.Error("content", "is missing");
  } else if (t == "Prepend") {
    op.kind = NormOp::kPrepend;
    bool present = false;
    if (absl::Status s = n.String("prepend", &op.content, &present); !s.ok()) return s;
    if (!present) return n.Error("prepend", "is missing");
  } else if (t == "Precompiled") {
    op.kind = NormOp::kPrecompiled;
    std::string b64;
    bool present = false;
    if (absl::Status s = n.String("precompiled_charsmap", &b64, &present); !s.ok()) return s;
    if (!present) return n.Error("precompiled_charsmap", "is missing");
    std::string blob;
    if (!absl::Base64Unescape(b64, &blob)) return n.Error("precompiled_charsmap", "is not base64");
    if (blob.empty()) return n.Error("precompiled_charsmap", "is empty");
    SpmNormalizerOptions o;
    o.precompiled_charsmap = std::move(blob);
    o.field = absl::StrCat(n.file(), ": ", n.At("precompiled_charsmap"));
    absl::StatusOr<SpmNormalizer> cm = SpmNormalizer::Create(std::move(o));
    if (!cm.ok()) return cm.status();
    op.charsmap = std::make_shared<const SpmNormalizer>(*std::move(cm));
  } else if (t == "BertNormalizer") {
    op.kind = NormOp::kBert;
    if (absl::Status s = n.Bool("clean_text", &op.clean_text); !s.ok()) return s;
    if (absl::Status s = n.Bool("handle_chinese_chars", &op.chinese); !s.ok()) return s;
    if (absl::Status s = n.Bool("lowercase", &op.lowercase); !s.ok()) return s;
    op.strip_accents = op.lowercase;  // null: follows lowercase
    if (absl::Status s = n.Bool("strip_accents", &op.strip_accents); !s.ok()) return s;
  } else {
    return n.Unsupported(t, "NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, "
                            "Precompiled, BertNormalizer, Sequence");
  }
  ops->push_back(std::move(op));
  return absl::OkStatus();
}

// -------------------------------------------------------- pre_tokenizer ----

// The text being pre-tokenized: bytes, the input span of each byte's
// character, and the pieces (spans of s, in order).
struct PreState {
  std::string s;
  // Empty when !offsets.
  std::vector<uint32_t> ob, oe;
  std::vector<SplitSpan> pieces;
  // false: ob / oe are not kept (ids only; KeepSpans allows it when no
  // pre-tokenizer reads them: Rebuild needs them).
  bool offsets = true;
  // The first split pattern that ran out of its PCRE2 budget
  // (SplitRegex::Matches); the pieces are then not used.
  absl::Status error;
};

void InitState(std::string_view text, PreState* st) {
  st->s.assign(text.data(), text.size());
  st->pieces.clear();
  if (!text.empty()) st->pieces.push_back({0, static_cast<uint32_t>(text.size())});
  if (!st->offsets) {
    st->ob.clear();
    st->oe.clear();
    return;
  }
  st->ob.resize(text.size());
  st->oe.resize(text.size());
  size_t p = 0;
  while (p < text.size()) {
    const size_t b = p;
    p += std::min<size_t>(Utf8Length(static_cast<unsigned char>(text[p])), text.size() - p);
    for (size_t k = b; k < p; ++k) st->ob[k] = static_cast<uint32_t>(b), st->oe[k] = static_cast<uint32_t>(p);
  }
}

void InitState(const std::vector<NChar>& chars, PreState* st) {
  st->s.clear();
  st->ob.clear();
  st->oe.clear();
  for (const NChar& c : chars) {
    const size_t before = st->s.size();
    AppendUtf8(c.cp, &st->s);
    if (!st->offsets) continue;
    st->ob.insert(st->ob.end(), st->s.size() - before, c.ob);
    st->oe.insert(st->oe.end(), st->s.size() - before, c.oe);
  }
  st->pieces.clear();
  if (!st->s.empty()) st->pieces.push_back({0, static_cast<uint32_t>(st->s.size())});
}

// Rewrites every piece with fn(old state, piece, emitter); each piece
// becomes what fn emits (dropped when empty).
class Emitter {
 public:
  Emitter(const PreState& old, PreState* next) : old_(old), next_(next) {}
  void Copy(uint32_t b, uint32_t e) {
    next_->s.append(old_.s, b, e - b);
    next_->ob.insert(next_->ob.end(), old_.ob.begin() + b, old_.ob.begin() + e);
    next_->oe.insert(next_->oe.end(), old_.oe.begin() + b, old_.oe.begin() + e);
  }
  void Add(std::string_view bytes, uint32_t ob, uint32_t oe) {
    next_->s.append(bytes);
    for (size_t k = 0; k < bytes.size(); ++k) {
      next_->ob.push_back(ob);
      next_->oe.push_back(oe);
    }
  }

 private:
  const PreState& old_;
  PreState* next_;
};

template <typename F>
void Rebuild(PreState* st, F fn) {
  PreState next;
  next.s.reserve(st->s.size() + 8);
  next.ob.reserve(st->s.size() + 8);
  next.oe.reserve(st->s.size() + 8);
  next.pieces.reserve(st->pieces.size());
  Emitter em(*st, &next);
  for (const SplitSpan& p : st->pieces) {
    const auto b = static_cast<uint32_t>(next.s.size());
    fn(*st, p, em);
    const auto e = static_cast<uint32_t>(next.s.size());
    if (e > b) next.pieces.push_back({b, e});
  }
  next.error = std::move(st->error);  // a split's error is kept (the pieces are then not used)
  *st = std::move(next);
}

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Seg {
  uint32_t b, e;
  bool match;
};

// *matches: scratch.
void RegexSegs(const SplitRegex& re, const std::string& s, SplitSpan w, std::vector<Seg>* out,
               std::vector<SplitSpan>* matches, absl::Status* error) {
  std::vector<SplitSpan>& m = *matches;
  m.clear();
  if (absl::Status st = re.Matches(s, w, &m); !st.ok()) {
    if (error->ok()) *error = st;
    m.clear();
  }
  uint32_t prev = w.begin;
  for (const SplitSpan& x : m) {
    if (x.begin != prev) out->push_back({prev, x.begin, false});
    out->push_back({x.begin, x.end, true});
    prev = x.end;
  }
  if (prev != w.end) out->push_back({prev, w.end, false});
}

template <typename Pred>
void PredSegs(Pred pred, const std::string& s, SplitSpan w, std::vector<Seg>* out) {
  uint32_t last = w.begin;
  size_t p = w.begin;
  while (p < w.end) {
    const size_t b = p;
    const uint32_t c = DecodeUtf8(s, &p);
    if (pred(c)) {
      if (last < b) out->push_back({last, static_cast<uint32_t>(b), false});
      out->push_back({static_cast<uint32_t>(b), static_cast<uint32_t>(p), true});
      last = static_cast<uint32_t>(p);
    }
  }
  if (w.end > last) out->push_back({last, w.end, false});
}

// Appends the pieces `segs` make under `behavior` to *out; *scratch is
// scratch.
void ApplyBehavior(std::vector<Seg>* segs, Behavior behavior, bool invert, std::vector<Seg>* scratch,
                   std::vector<SplitSpan>* out) {
  if (behavior == Behavior::kIsolated || behavior == Behavior::kRemoved) {
    // Every segment a piece (Isolated), or the segments that are not
    // (inverted) matches (Removed).
    for (const Seg& s : *segs) {
      if (s.e > s.b && (behavior == Behavior::kIsolated || s.match == invert)) out->push_back({s.b, s.e});
    }
    return;
  }
  if (invert) for (Seg& s : *segs) s.match = !s.match;
  std::vector<Seg>& acc = *scratch;
  acc.clear();
  bool prev = false;
  switch (behavior) {
    case Behavior::kIsolated:
    case Behavior::kRemoved:
      break;
    case Behavior::kContiguous:
      for (const Seg& s : *segs) {
        if (s.match == prev && !acc.empty()) acc.back().e = s.e;
        else acc.push_back({s.b, s.e, false});
        prev = s.match;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const Seg& s : *segs) {
        if (s.match && !prev && !acc.empty()) acc.back().e = s.e;
        else acc.push_back({s.b, s.e, false});
        prev = s.match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = segs->rbegin(); it != segs->rend(); ++it) {
        if (it->match && !prev && !acc.empty()) acc.back().b = it->b;
        else acc.push_back({it->b, it->e, false});
        prev = it->match;
      }
      std::reverse(acc.begin(), acc.end());
      break;
  }
  for (const Seg& s : acc) {
    if (!s.match && s.e > s.b) out->push_back({s.b, s.e});
  }
}

// GPT-2's byte <-> character map (openai/gpt-2 encoder.py bytes_to_unicode).
struct ByteChars {
  // UTF-8 of byte b's character (all below U+0800: 1 or 2 bytes).
  char utf8[256][2];
  uint8_t len[256];
  int cp_to_byte[324];
  ByteChars() {
    std::fill(cp_to_byte, cp_to_byte + 324, -1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const int cp = keep ? b : 256 + extra++;
      cp_to_byte[cp] = b;
      std::string u;
      AppendUtf8(static_cast<uint32_t>(cp), &u);
      len[b] = static_cast<uint8_t>(u.size());
      std::memcpy(utf8[b], u.data(), u.size());
    }
  }
};
const ByteChars& Gpt2Bytes() {
  static const ByteChars* m = new ByteChars();
  return *m;
}

// ByteLevel's mapping: every byte of every piece becomes its GPT-2
// character, which keeps the byte's input span.
void ByteLevelMap(PreState* st) {
  const ByteChars& bc = Gpt2Bytes();
  const std::string& s = st->s;
  size_t total = 0;
  for (const SplitSpan& p : st->pieces) {
    for (uint32_t k = p.begin; k < p.end; ++k) total += bc.len[static_cast<unsigned char>(s[k])];
  }
  PreState next;
  next.offsets = st->offsets;
  // One byte of slack: both bytes of a character are written whatever its
  // length (no branch on it); the next one overwrites the second.
  next.s.resize(total + 1);
  next.pieces.reserve(st->pieces.size());
  char* out = next.s.data();
  uint32_t at = 0;
  if (!st->offsets) {
    for (const SplitSpan& p : st->pieces) {
      const uint32_t begin = at;
      for (uint32_t k = p.begin; k < p.end; ++k) {
        const auto b = static_cast<unsigned char>(s[k]);
        out[at] = bc.utf8[b][0];
        out[at + 1] = bc.utf8[b][1];
        at += bc.len[b];
      }
      if (at > begin) next.pieces.push_back({begin, at});
    }
    next.s.resize(total);
  } else {
    next.s.resize(total);
    next.ob.resize(total);
    next.oe.resize(total);
    uint32_t* ob = next.ob.data();
    uint32_t* oe = next.oe.data();
    for (const SplitSpan& p : st->pieces) {
      const uint32_t begin = at;
      for (uint32_t k = p.begin; k < p.end; ++k) {
        const auto b = static_cast<unsigned char>(s[k]);
        out[at] = bc.utf8[b][0];
        ob[at] = st->ob[k];
        oe[at] = st->oe[k];
        if (bc.len[b] == 2) {
          out[at + 1] = bc.utf8[b][1];
          ob[at + 1] = st->ob[k];
          oe[at + 1] = st->oe[k];
        }
        at += bc.len[b];
      }
      if (at > begin) next.pieces.push_back({begin, at});
    }
  }
  next.error = std::move(st->error);
  *st = std::move(next);
}

struct PreOp {
  enum Kind { kSplit, kByteLevel, kMetaspace, kWhitespace, kWhitespaceSplit, kDigits, kPunctuation, kCharDelimiter, kUnicodeScripts, kBert };
  Kind kind;
  std::optional<SplitRegex> re;
  Behavior behavior = Behavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false, use_regex = true;  // ByteLevel
  std::string replacement;                          // Metaspace
  enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
  bool split = true;
  bool individual_digits = false;
  uint32_t delimiter = 0;
};

int FixedScript(uint32_t c) {
  constexpr int kAny = -2;
  if (c == 0x30FC) return USCRIPT_HAN;
  if (c == ' ') return kAny;
  UErrorCode err = U_ZERO_ERROR;
  const UScriptCode s = uscript_getScript(static_cast<UChar32>(c), &err);
  if (s == USCRIPT_HIRAGANA || s == USCRIPT_KATAKANA) return USCRIPT_HAN;
  return static_cast<int>(s);
}

// map_bytes = false: ByteLevel splits but leaves its mapping to the model
// (HfModel::TokenizeByteLevel).
void ApplyPre(const PreOp& op, int64_t base, PreState* st, bool map_bytes = true) {
  const std::string& s = st->s;
  std::vector<SplitSpan> out, matches;
  std::vector<Seg> segs, scratch;
  auto split_each = [&](auto make_segs, Behavior b, bool invert) {
    out.clear();
    out.reserve(st->pieces.size());
    for (const SplitSpan& p : st->pieces) {
      segs.clear();
      make_segs(p, &segs);
      ApplyBehavior(&segs, b, invert, &scratch, &out);
    }
    st->pieces.swap(out);
  };
  switch (op.kind) {
    case PreOp::kSplit:
      if (op.re) {
        split_each([&](SplitSpan p, std::vector<Seg>* o) { RegexSegs(*op.re, s, p, o, &matches, &st->error); }, op.behavior, op.invert);
      } else {
        split_each([&](SplitSpan p, std::vector<Seg>* o) { o->push_back({p.begin, p.end, false}); }, op.behavior, op.invert);
      }
      return;
    case PreOp::kWhitespace:
    case PreOp::kByteLevel:
      if (op.kind == PreOp::kByteLevel) {
        if (op.add_prefix_space) {
          Rebuild(st, [](const PreState& old, SplitSpan p, Emitter& em) {
            if (old.s[p.begin] != ' ') em.Add(" ", old.ob[p.begin], old.ob[p.begin]);
            em.Copy(p.begin, p.end);
          });
        }
        if (op.use_regex) {
          split_each([&](SplitSpan p, std::vector<Seg>* o) { RegexSegs(*op.re, st->s, p, o, &matches, &st->error); }, Behavior::kIsolated, false);
        }
        if (map_bytes) ByteLevelMap(st);
      } else {
        split_each([&](SplitSpan p, std::vector<Seg>* o) { RegexSegs(*op.re, s, p, o, &matches, &st->error); }, Behavior::kRemoved, true);
      }
      return;
    case PreOp::kMetaspace: {
      const std::string& rep = op.replacement;
      Rebuild(st, [&](const PreState& old, SplitSpan p, Emitter& em) {
        const bool starts = old.s.compare(p.begin, rep.size(), rep) == 0 || old.s[p.begin] == ' ';
        const bool prepend = op.prepend == PreOp::Prepend::kAlways ||
                             (op.prepend == PreOp::Prepend::kFirst && base + old.ob[p.begin] == 0);
        if (prepend && !starts) em.Add(rep, old.ob[p.begin], old.oe[p.begin]);
        uint32_t run = p.begin;
        for (uint32_t k = p.begin; k < p.end; ++k) {
          if (old.s[k] == ' ') {
            em.Copy(run, k);
            em.Add(rep, old.ob[k], old.oe[k]);
            run = k + 1;
          }
        }
        em.Copy(run, p.end);
      });
      if (op.split) {
        size_t pos = 0;
        const uint32_t rc = DecodeUtf8(rep, &pos);
        split_each([&](SplitSpan p, std::vector<Seg>* o) { PredSegs([rc](uint32_t c) { return c == rc; }, st->s, p, o); },
                   Behavior::kMergedWithNext, false);
      }
      return;
    }
    case PreOp::kWhitespaceSplit:
      split_each([&](SplitSpan p, std::vector<Seg>* o) { PredSegs(IsWhiteSpace, s, p, o); }, Behavior::kRemoved, false);
      return;
    case PreOp::kDigits:
      split_each([&](SplitSpan p, std::vector<Seg>* o) { PredSegs(IsNumeric, s, p, o); },
                 op.individual_digits ? Behavior::kIsolated : Behavior::kContiguous, false);
      return;
    case PreOp::kPunctuation:
      split_each([&](SplitSpan p, std::vector<Seg>* o) { PredSegs(IsPunct, s, p, o); }, op.behavior, false);
      return;
    case PreOp::kCharDelimiter: {
      const uint32_t d = op.delimiter;
      split_each([&](SplitSpan p, std::vector<Seg>* o) { PredSegs([d](uint32_t c) { return c == d; }, s, p, o); },
                 Behavior::kRemoved, false);
      return;
    }
    case PreOp::kBert:
      split_each([&](SplitSpan p, std::vector<Seg>* o) { PredSegs(IsWhiteSpace, s, p, o); }, Behavior::kRemoved, false);
      split_each([&](SplitSpan p, std::vector<Seg>* o) { PredSegs(IsPunct, s, p, o); }, Behavior::kIsolated, false);
      return;
    case PreOp::kUnicodeScripts: {
      constexpr int kAny = -2;
      out.clear();
      for (const SplitSpan& p : st->pieces) {
        std::vector<uint32_t> cuts;
        std::optional<int> last;
        size_t q = p.begin;
        while (q < p.end) {
          const size_t b = q;
          const int script = FixedScript(DecodeUtf8(s, &q));
          if (script != kAny && last != kAny && last != script) cuts.push_back(static_cast<uint32_t>(b));
          if (script != kAny) last = script;
        }
        cuts.push_back(p.end);
        for (size_t k = 0; k + 1 < cuts.size(); ++k) {
          if (cuts[k + 1] > cuts[k]) out.push_back({cuts[k], cuts[k + 1]});
        }
      }
      st->pieces.swap(out);
      return;
    }
  }
}

absl::StatusOr<Behavior> ParseBehavior(const Node& n, const char* key, Behavior def) {
  std::string b;
  bool present = false;
  if (absl::Status s = n.String(key, &b, &present); !s.ok()) return s;
  if (!present) return def;
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  return n.Error(key, absl::StrCat("= \"", b, "\" is not a behavior (Removed, Isolated, MergedWithPrevious, "
                                             "MergedWithNext, Contiguous)"));
}

absl::Status ParsePreTokenizer(const Node& n, int depth, std::vector<PreOp>* ops) {
  if (n.j().is_null()) return absl::OkStatus();
  absl::StatusOr<std::string> type = n.Type();
  if (!type.ok()) return type.status();
  const std::string& t = *type;
  if (t == "Sequence") {
    return ParseSequence(n, "pretokenizers", depth, [ops](const Node& e, int d) { return ParsePreTokenizer(e, d, ops); });
  }
  PreOp op;
  if (t == "Split") {
    op.kind = PreOp::kSplit;
    absl::StatusOr<std::optional<SplitRegex>> p = Pattern(n, "pattern");
    if (!p.ok()) return p.status();
    op.re = *std::move(p);
    absl::StatusOr<Behavior> b = ParseBehavior(n, "behavior", Behavior::kIsolated);
    if (!b.ok()) return b.status();
    op.behavior = *b;
    if (absl::Status s = n.Bool("invert", &op.invert); !s.ok()) return s;
  } else if (t == "ByteLevel") {
    op.kind = PreOp::kByteLevel;
    if (absl::Status s = n.Bool("add_prefix_space", &op.add_prefix_space); !s.ok()) return s;
    if (absl::Status s = n.Bool("use_regex", &op.use_regex); !s.ok()) return s;
    absl::StatusOr<SplitRegex> re = SplitRegex::Compile(kGpt2SplitRegex, n.path());
    if (!re.ok()) return re.status();
    op.re = *std::move(re);
  } else if (t == "Metaspace") {
    op.kind = PreOp::kMetaspace;
    uint32_t cp = 0x2581;
    if (n.j().contains("replacement")) {
      if (absl::Status s = OneChar(n, "replacement", &cp); !s.ok()) return s;
    }
    AppendUtf8(cp, &op.replacement);
    bool add_prefix_space = true;
    if (absl::Status s = n.Bool("add_prefix_space", &add_prefix_space); !s.ok()) return s;
    op.prepend = add_prefix_space ? PreOp::Prepend::kAlways : PreOp::Prepend::kNever;
    std::string scheme;
    bool present = false;
    if (absl::Status s = n.String("prepend_scheme", &scheme, &present); !s.ok()) return s;
    if (present) {
      if (scheme == "always") op.prepend = PreOp::Prepend::kAlways;
      else if (scheme == "first") op.prepend = PreOp::Prepend::kFirst;
      else if (scheme == "never") op.prepend = PreOp::Prepend::kNever;
      else return n.Error("prepend_scheme", absl::StrCat("= \"", scheme, "\" is not always, first or never"));
    }
    if (absl::Status s = n.Bool("split", &op.split); !s.ok()) return s;
  } else if (t == "Whitespace") {
    op.kind = PreOp::kWhitespace;
    absl::StatusOr<SplitRegex> re =
        SplitRegex::Compile(R"([\p{L}\p{M}\p{N}\p{Pc}]+|[^\p{L}\p{M}\p{N}\p{Pc}\s]+)", n.path());
    if (!re.ok()) return re.status();
    op.re = *std::move(re);
  } else if (t == "WhitespaceSplit") {
    op.kind = PreOp::kWhitespaceSplit;
  } else if (t == "Digits") {
    op.kind = PreOp::kDigits;
    if (absl::Status s = n.Bool("individual_digits", &op.individual_digits); !s.ok()) return s;
  } else if (t == "Punctuation") {
    op.kind = PreOp::kPunctuation;
    absl::StatusOr<Behavior> b = ParseBehavior(n, "behavior", Behavior::kIsolated);
    if (!b.ok()) return b.status();
    op.behavior = *b;
  } else if (t == "CharDelimiterSplit") {
    op.kind = PreOp::kCharDelimiter;
    if (absl::Status s = OneChar(n, "delimiter", &op.delimiter); !s.ok()) return s;
  } else if (t == "UnicodeScripts") {
    op.kind = PreOp::kUnicodeScripts;
  } else if (t == "BertPreTokenizer") {
    op.kind = PreOp::kBert;
  } else {
    return n.Unsupported(t, "Split, ByteLevel, Metaspace, Whitespace, WhitespaceSplit, Digits, Punctuation, "
                            "CharDelimiterSplit, UnicodeScripts, BertPreTokenizer, Sequence");
  }
  ops->push_back(std::move(op));
  return absl::OkStatus();
}

// ---------------------------------------------------------------- models ----

struct MTok {
  int32_t id;
  uint32_t b, e;  // bytes of the word
};

// A byte-level word: each byte of `raw` as its GPT-2 character (ByteLevel's
// mapping) in *mapped, and for each byte of *mapped plus its end the byte
// of `raw` it came from, in *raw_at (mapped.size() + 1 entries).
void MapByteLevelWord(std::string_view raw, std::string* mapped, std::vector<uint32_t>* raw_at) {
  const ByteChars& bc = Gpt2Bytes();
  mapped->clear();
  raw_at->clear();
  for (size_t k = 0; k < raw.size(); ++k) {
    const auto b = static_cast<unsigned char>(raw[k]);
    mapped->append(bc.utf8[b], bc.len[b]);
    raw_at->insert(raw_at->end(), bc.len[b], static_cast<uint32_t>(k));
  }
  raw_at->push_back(static_cast<uint32_t>(raw.size()));
}

// Runs tokenize(mapped, out) on ByteLevel's mapping of `raw` and moves the
// new tokens' offsets to bytes of raw. A token is whole GPT-2 characters
// except byte_fallback's byte tokens, which may cut a 2-byte character:
// their offsets collapse onto that character's raw byte (ids-only encodes
// do not read them). The thread's scratch is released when it has grown
// past 64 KiB (one long word), so it does not stay that large.
template <class Fn>
absl::Status TokenizeMapped(std::string_view raw, std::vector<MTok>* out, Fn&& tokenize) {
  thread_local std::string mapped;
  thread_local std::vector<uint32_t> raw_at;
  MapByteLevelWord(raw, &mapped, &raw_at);
  const size_t first = out->size();
  absl::Status s = tokenize(std::string_view(mapped), out);
  const auto end = static_cast<uint32_t>(mapped.size());
  for (size_t i = first; i < out->size(); ++i) {
    MTok& t = (*out)[i];
    t.b = raw_at[std::min(t.b, end)];
    t.e = raw_at[std::min(t.e, end)];
  }
  if (mapped.capacity() > (size_t{64} << 10)) {
    std::string().swap(mapped);
    std::vector<uint32_t>().swap(raw_at);
  }
  return s;
}

class HfModel {
 public:
  virtual ~HfModel() = default;
  // word: a pre-tokenized piece; appends its tokens with word-relative
  // byte offsets.
  virtual absl::Status Tokenize(std::string_view word, std::vector<MTok>* out) const = 0;
  // The tokens of ByteLevel's mapping of `raw` (Tokenize of the word in
  // GPT-2's alphabet), with offsets in bytes of `raw` (TokenizeMapped).
  // Used when ByteLevel is the last pre-tokenizer and no offsets are kept,
  // so a model with a cache (BPE) never builds the mapped text for words it
  // has seen.
  virtual absl::Status TokenizeByteLevel(std::string_view raw, std::vector<MTok>* out) const {
    return TokenizeMapped(raw, out, [this](std::string_view w, std::vector<MTok>* o) { return Tokenize(w, o); });
  }
};

std::string BytePiece(unsigned char b) {
  static const char* hex = "0123456789ABCDEF";
  return std::string{'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
}

class BpeModel final : public HfModel {
 public:
  absl::flat_hash_map<std::string, int32_t> vocab;
  absl::flat_hash_map<uint64_t, std::pair<int32_t, int32_t>> merges;  // (a, b) -> (rank, new id)
  std::optional<int32_t> unk;
  std::optional<std::string> missing_unk;  // unk_token named but not in model.vocab
  std::optional<std::string> prefix, suffix;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
  // Without affixes: the id of each BMP character's token (-1: none), so
  // the common case skips a string lookup per character.
  std::vector<int32_t> char_id;

  void BuildCharCache() {
    char_id.clear();
    if ((prefix && !prefix->empty()) || (suffix && !suffix->empty())) return;
    char_id.assign(0x10000, -1);
    for (const auto& [piece, id] : vocab) {
      size_t p = 0;
      if (piece.empty()) continue;
      const uint32_t cp = DecodeUtf8(piece, &p);
      if (p == piece.size() && cp < 0x10000) char_id[cp] = id;
    }
  }

  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  // A word's tokens come from the word cache when it holds the word (they
  // depend on the word's bytes only; offsets are word-relative).
  absl::Status Tokenize(std::string_view word, std::vector<MTok>* out) const override {
    if (word.empty()) return absl::OkStatus();
    if (cache_.Find(word, [out](const CachedToks& t) { out->insert(out->end(), t.begin(), t.end()); })) {
      return absl::OkStatus();
    }
    const size_t first = out->size();
    absl::Status s = TokenizeWord(word, out);
    if (s.ok() && cache_.Cacheable(word)) {
      cache_.Insert(word, CachedToks(out->begin() + static_cast<ptrdiff_t>(first), out->end()));
    }
    return s;
  }

  // As HfModel's, with a cache of its own keyed by the raw bytes.
  absl::Status TokenizeByteLevel(std::string_view raw, std::vector<MTok>* out) const override {
    if (raw.empty()) return absl::OkStatus();
    if (raw_cache_.Find(raw, [out](const CachedToks& t) { out->insert(out->end(), t.begin(), t.end()); })) {
      return absl::OkStatus();
    }
    const size_t first = out->size();
    absl::Status s = TokenizeMapped(raw, out, [this](std::string_view w, std::vector<MTok>* o) { return TokenizeWord(w, o); });
    if (!s.ok()) return s;
    if (raw_cache_.Cacheable(raw)) {
      raw_cache_.Insert(raw, CachedToks(out->begin() + static_cast<ptrdiff_t>(first), out->end()));
    }
    return s;
  }

 private:
  absl::Status TokenizeWord(std::string_view word, std::vector<MTok>* out) const {
    if (ignore_merges) {
      if (auto it = vocab.find(absl::string_view(word.data(), word.size())); it != vocab.end()) {
        out->push_back({it->second, 0, static_cast<uint32_t>(word.size())});
        return absl::OkStatus();
      }
    }
    Syms syms;
    // A pending unk: its id and byte length (fuse_unk grows it).
    bool pending = false;
    int32_t pending_id = 0;
    uint32_t pending_len = 0;
    uint32_t at = 0;  // running offset, as tokenizers' Word accumulates symbol lengths
    auto add = [&](int32_t id, uint32_t len) {
      syms.push_back({id, at, at + len});
      at += len;
    };
    size_t i = 0;
    std::string s;
    while (i < word.size()) {
      const size_t len = std::min<size_t>(Utf8Length(static_cast<unsigned char>(word[i])), word.size() - i);
      if (!char_id.empty()) {
        size_t q = i;
        const uint32_t cp = DecodeUtf8(word, &q);
        if (cp < 0x10000 && char_id[cp] >= 0) {
          if (pending) add(pending_id, pending_len), pending = false;
          add(char_id[cp], static_cast<uint32_t>(len));
          i += len;
          continue;
        }
      }
      const bool first = i == 0, last = i + len == word.size();
      s.assign(word.substr(i, len));
      if (!first && prefix) s = *prefix + s;
      if (last && suffix) s += *suffix;
      i += len;
      if (auto it = vocab.find(s); it != vocab.end()) {
        if (pending) add(pending_id, pending_len), pending = false;
        add(it->second, static_cast<uint32_t>(len));
        continue;
      }
      if (byte_fallback) {
        std::vector<int32_t> ids;
        for (char c : s) {
          auto it = vocab.find(BytePiece(static_cast<unsigned char>(c)));
          if (it == vocab.end()) break;
          ids.push_back(it->second);
        }
        if (ids.size() == s.size()) {
          for (int32_t id : ids) add(id, 1);
          continue;
        }
      }
      if (missing_unk) {
        return absl::FailedPreconditionError(
            absl::StrCat("model.unk_token \"", *missing_unk, "\" is not in model.vocab (needed for \"", s, "\")"));
      }
      if (unk) {
        if (pending && fuse_unk) {
          pending_len += static_cast<uint32_t>(len);
        } else {
          if (pending) add(pending_id, pending_len);
          pending = true;
          pending_id = *unk;
          pending_len = static_cast<uint32_t>(len);
        }
      }
    }
    if (pending) add(pending_id, pending_len);
    MergeAll(&syms);
    for (MTok t : syms) {
      t.b = std::min<uint32_t>(t.b, static_cast<uint32_t>(word.size()));
      t.e = std::min<uint32_t>(t.e, static_cast<uint32_t>(word.size()));
      out->push_back(t);
    }
    return absl::OkStatus();
  }

  std::pair<int32_t, int32_t> Lookup(const MTok& a, const MTok& b) const {
    auto it = merges.find(Key(a.id, b.id));
    return it == merges.end() ? std::pair<int32_t, int32_t>{INT32_MAX, -1} : it->second;
  }
  // The lowest-ranked adjacent pair first, the leftmost on ties (tokenizers'
  // Word::merge_all).
  // A word's symbols: up to 64 (the array scan's limit) on the stack.
  using Syms = absl::InlinedVector<MTok, 64>;
  void MergeAll(Syms* syms) const {
    Syms& s = *syms;
    if (s.size() < 2) return;
    if (s.size() <= 64) {
      absl::InlinedVector<std::pair<int32_t, int32_t>, 63> pair(s.size() - 1);
      for (size_t i = 0; i + 1 < s.size(); ++i) pair[i] = Lookup(s[i], s[i + 1]);
      while (s.size() > 1) {
        size_t best = 0;
        int32_t best_rank = INT32_MAX;
        for (size_t i = 0; i < pair.size(); ++i) {
          if (pair[i].first < best_rank) best_rank = pair[i].first, best = i;
        }
        if (best_rank == INT32_MAX) break;
        s[best].id = pair[best].second;
        s[best].e = s[best + 1].e;
        s.erase(s.begin() + static_cast<ptrdiff_t>(best) + 1);
        pair.erase(pair.begin() + static_cast<ptrdiff_t>(best));
        if (best + 1 < s.size()) pair[best] = Lookup(s[best], s[best + 1]);
        if (best > 0) pair[best - 1] = Lookup(s[best - 1], s[best]);
      }
      return;
    }
    const int n = static_cast<int>(s.size());
    std::vector<int> prev(n), next(n);
    std::vector<bool> alive(n, true);
    for (int i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1;
    struct Cand {
      int32_t rank;
      int left;
      int32_t new_id;
      bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    auto push = [&](int l) {
      if (l < 0 || next[l] < 0) return;
      const auto m = Lookup(s[l], s[next[l]]);
      if (m.first != INT32_MAX) heap.push({m.first, l, m.second});
    };
    for (int i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
      const Cand c = heap.top();
      heap.pop();
      const int l = c.left;
      if (!alive[l] || next[l] < 0) continue;
      const int r = next[l];
      const auto m = Lookup(s[l], s[r]);
      if (m.second != c.new_id || m.first != c.rank) continue;  // stale
      s[l].id = m.second;
      s[l].e = s[r].e;
      alive[r] = false;
      next[l] = next[r];
      if (next[r] >= 0) prev[next[r]] = l;
      push(prev[l]);
      push(l);
    }
    size_t w = 0;
    for (int i = 0; i < n; ++i) {
      if (alive[i]) s[w++] = s[i];
    }
    s.resize(w);
  }

  // Most words are one or two tokens: those live in the cache's slot.
  // Words of up to 256 bytes are cached: a byte-level word is written in
  // GPT-2's alphabet, up to 2 bytes per input byte, so this caches the
  // words of up to 128 input bytes, as the GGUF BPE tokenizer does.
  using CachedToks = absl::InlinedVector<MTok, 2>;
  mutable WordCache<CachedToks> cache_{2 * WordCache<CachedToks>::kDefaultMaxWordBytes};
  // TokenizeByteLevel's: words of up to 128 raw bytes.
  mutable WordCache<CachedToks> raw_cache_;
};

class WordPieceModel final : public HfModel {
 public:
  absl::flat_hash_map<std::string, int32_t> vocab;
  std::string prefix = "##";
  int64_t max_chars = 100;
  std::optional<int32_t> unk;
  std::string unk_token;

  absl::Status Tokenize(std::string_view word, std::vector<MTok>* out) const override {
    auto unk_all = [&]() -> absl::Status {
      if (!unk) return absl::FailedPreconditionError(absl::StrCat("WordPiece unk_token \"", unk_token, "\" is not in model.vocab"));
      out->push_back({*unk, 0, static_cast<uint32_t>(word.size())});
      return absl::OkStatus();
    };
    int64_t chars = 0;
    for (size_t p = 0; p < word.size(); p += Utf8Length(static_cast<unsigned char>(word[p]))) ++chars;
    if (chars > max_chars) return unk_all();
    const size_t first = out->size();
    size_t start = 0;
    std::string cand;
    while (start < word.size()) {
      size_t end = word.size();
      int32_t found = -1;
      while (start < end) {
        cand.clear();
        if (start > 0) cand = prefix;
        cand.append(word.substr(start, end - start));
        if (auto it = vocab.find(cand); it != vocab.end()) {
          found = it->second;
          break;
        }
        // back off one character
        size_t k = end - 1;
        while (k > start && (static_cast<unsigned char>(word[k]) & 0xC0) == 0x80) --k;
        end = k;
      }
      if (found < 0) {
        out->resize(first);
        return unk_all();
      }
      out->push_back({found, static_cast<uint32_t>(start), static_cast<uint32_t>(end)});
      start = end;
    }
    return absl::OkStatus();
  }
};

class UnigramModel final : public HfModel {
 public:
  std::vector<std::pair<std::string, double>> pieces;
  absl::flat_hash_map<std::string, int32_t> ids;
  std::optional<int32_t> unk;
  bool byte_fallback = false;
  double min_score = 0;
  PieceTrie trie;  // every piece -> its id (the last of repeated pieces)

  absl::Status Tokenize(std::string_view text, std::vector<MTok>* out) const override {
    const size_t n = text.size();
    if (n == 0) return absl::OkStatus();
    struct Best {
      double score = 0;
      int64_t start = -1;
      int32_t id = -1;
    };
    std::vector<Best> best(n + 1);
    const double unk_score = min_score - 10.0;
    size_t s = 0;
    while (s < n) {
      const double here = best[s].score;
      const size_t mblen = std::min<size_t>(Utf8Length(static_cast<unsigned char>(text[s])), n - s);
      bool single = false;
      int32_t node = 0;
      for (size_t k = s; k < n; ++k) {
        node = trie.Child(node, static_cast<uint8_t>(text[k]));
        if (node < 0) break;
        const int32_t id = trie.Value(node);
        if (id < 0) continue;
        const size_t len = k + 1 - s;
        Best& t = best[s + len];
        const double cand = pieces[id].second + here;
        if (t.start < 0 || cand > t.score) t = {cand, static_cast<int64_t>(s), id};
        if (len == mblen) single = true;
      }
      if (!single) {
        Best& t = best[s + mblen];
        const double cand = unk_score + here;
        if (t.start < 0 || cand > t.score) t = {cand, static_cast<int64_t>(s), unk.value_or(-1)};
      }
      s += mblen;
    }
    // Back-track; runs of unknown pieces fuse into one string.
    std::vector<std::pair<size_t, size_t>> spans;  // reversed
    size_t e = n;
    std::optional<std::pair<size_t, size_t>> fused;
    while (e > 0) {
      const Best& b = best[e];
      const auto st = static_cast<size_t>(b.start);
      if (unk && b.id == *unk) {
        fused = fused ? std::make_pair(st, fused->second) : std::make_pair(st, e);
      } else {
        if (fused) spans.push_back(*fused), fused.reset();
        spans.push_back({st, e});
      }
      e = st;
    }
    if (fused) spans.push_back(*fused);
    std::reverse(spans.begin(), spans.end());
    for (const auto& [b, en] : spans) {
      const std::string_view piece = text.substr(b, en - b);
      if (auto it = ids.find(absl::string_view(piece.data(), piece.size())); it != ids.end()) {
        out->push_back({it->second, static_cast<uint32_t>(b), static_cast<uint32_t>(en)});
        continue;
      }
      if (byte_fallback) {
        std::vector<int32_t> bytes;
        for (char c : piece) {
          auto it = ids.find(BytePiece(static_cast<unsigned char>(c)));
          if (it == ids.end()) break;
          bytes.push_back(it->second);
        }
        if (bytes.size() == piece.size()) {
          for (int32_t id : bytes) out->push_back({id, static_cast<uint32_t>(b), static_cast<uint32_t>(en)});
          continue;
        }
      }
      if (!unk) return absl::FailedPreconditionError("Unigram model without unk_id met an unknown character");
      out->push_back({*unk, static_cast<uint32_t>(b), static_cast<uint32_t>(en)});
    }
    return absl::OkStatus();
  }
};

// -------------------------------------------------------------- decoders ----

struct DecOp {
  enum Kind { kByteLevel, kMetaspace, kWordPiece, kBpe, kByteFallback, kFuse, kStrip, kReplace, kCtc };
  Kind kind;
  std::string a, b;  // Metaspace replacement; WordPiece prefix; BPE suffix; Replace content; CTC pad, delimiter
  bool flag = true;  // Metaspace: prepend (not never); WordPiece / CTC cleanup
  std::optional<SplitRegex> pattern;
  uint32_t content = 0;
  int64_t start = 0, stop = 0;
};

std::string Cleanup(std::string t) {
  for (const auto& [from, to] : std::vector<std::pair<const char*, const char*>>{
           {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
           {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}}) {
    t = ReplaceAll(t, from, to);
  }
  return t;
}

// A match over its PCRE2 budget leaves t as it is and sets *error (the
// first one). Every vocabulary piece goes through the decoders when the
// tokenizer loads (HfTokenizer's token bytes), which refuses the tokenizer
// on such an error.
std::string ReplaceRegex(const SplitRegex& re, const std::string& t, const std::string& content,
                         absl::Status* error) {
  std::vector<SplitSpan> m;
  if (absl::Status st = re.Matches(t, {0, static_cast<uint32_t>(t.size())}, &m); !st.ok()) {
    if (error != nullptr && error->ok()) *error = st;
    return t;
  }
  std::string out;
  uint32_t last = 0;
  for (const SplitSpan& x : m) {
    out.append(t, last, x.begin - last);
    out.append(content);
    last = x.end;
  }
  out.append(t, last, std::string::npos);
  return out;
}

// `first` is the index the first of `tokens` has in the whole sequence
// (decoders that treat token 0 specially look at it).
void ApplyDec(const DecOp& op, size_t first, std::vector<std::string>* tokens,
              absl::Status* error) {
  std::vector<std::string>& t = *tokens;
  switch (op.kind) {
    case DecOp::kByteLevel:
      for (std::string& x : t) {
        std::string bytes;
        if (ByteLevelDecode(x, &bytes)) x = std::move(bytes);
      }
      return;
    case DecOp::kMetaspace:
      for (size_t i = 0; i < t.size(); ++i) {
        t[i] = ReplaceAll(t[i], op.a, (first + i == 0 && op.flag) ? "" : " ");
      }
      return;
    case DecOp::kWordPiece:
      for (size_t i = 0; i < t.size(); ++i) {
        if (first + i != 0) {
          if (absl::StartsWith(t[i], op.a)) t[i] = t[i].substr(op.a.size());
          else t[i] = " " + t[i];
        }
        if (op.flag) t[i] = Cleanup(t[i]);
      }
      return;
    case DecOp::kBpe:
      for (size_t i = 0; i < t.size(); ++i) t[i] = ReplaceAll(t[i], op.a, i + 1 == t.size() ? "" : " ");
      return;
    case DecOp::kByteFallback: {
      std::vector<std::string> out;
      std::string run;
      bool in_run = false;
      for (std::string& x : t) {
        const int b = ParseBytePiece(x);
        if (b >= 0) {
          run.push_back(static_cast<char>(b));
          in_run = true;
          continue;
        }
        if (in_run) out.push_back(std::move(run)), run.clear(), in_run = false;
        out.push_back(std::move(x));
      }
      if (in_run) out.push_back(std::move(run));
      t.swap(out);
      return;
    }
    case DecOp::kFuse: {
      std::string all = absl::StrJoin(t, "");
      t.assign(1, std::move(all));
      return;
    }
    case DecOp::kStrip:
      for (std::string& x : t) {
        std::vector<std::pair<uint32_t, size_t>> cs;  // (cp, byte start)
        size_t p = 0;
        while (p < x.size()) {
          const size_t b = p;
          cs.push_back({DecodeUtf8(x, &p), b});
        }
        size_t sc = 0;
        for (int64_t i = 0; i < op.start && static_cast<size_t>(i) < cs.size(); ++i) {
          if (cs[i].first == op.content) sc = i + 1;
          else break;
        }
        size_t ec = cs.size();
        for (int64_t i = 0; i < op.stop && static_cast<size_t>(i) < cs.size(); ++i) {
          const size_t idx = cs.size() - i - 1;
          if (cs[idx].first == op.content) ec = idx;
          else break;
        }
        if (ec < sc) ec = sc;
        const size_t bb = sc < cs.size() ? cs[sc].second : x.size();
        const size_t be = ec < cs.size() ? cs[ec].second : x.size();
        x = x.substr(bb, be - bb);
      }
      return;
    case DecOp::kReplace:
      if (op.pattern) for (std::string& x : t) x = ReplaceRegex(*op.pattern, x, op.a, error);
      return;
    case DecOp::kCtc: {
      std::vector<std::string> out;
      for (size_t i = 0; i < t.size(); ++i) {
        if (i > 0 && t[i] == t[i - 1]) continue;  // dedup
        if (t[i] == op.a) continue;                // pad
        std::string x = ReplaceAll(t[i], op.b, " ");
        if (op.flag) x = Cleanup(x);
        out.push_back(std::move(x));
      }
      t.swap(out);
      return;
    }
  }
}

absl::Status ParseDecoder(const Node& n, int depth, std::vector<DecOp>* ops) {
  if (n.j().is_null()) return absl::OkStatus();
  absl::StatusOr<std::string> type = n.Type();
  if (!type.ok()) return type.status();
  const std::string& t = *type;
  if (t == "Sequence") {
    return ParseSequence(n, "decoders", depth, [ops](const Node& e, int d) { return ParseDecoder(e, d, ops); });
  }
  DecOp op;
  if (t == "ByteLevel") {
    op.kind = DecOp::kByteLevel;
  } else if (t == "Metaspace") {
    op.kind = DecOp::kMetaspace;
    uint32_t cp = 0x2581;
    if (n.j().contains("replacement")) {
      if (absl::Status s = OneChar(n, "replacement", &cp); !s.ok()) return s;
    }
    AppendUtf8(cp, &op.a);
    bool add_prefix_space = true;
    if (absl::Status s = n.Bool("add_prefix_space", &add_prefix_space); !s.ok()) return s;
    op.flag = add_prefix_space;
    std::string scheme;
    bool present = false;
    if (absl::Status s = n.String("prepend_scheme", &scheme, &present); !s.ok()) return s;
    if (present) {
      if (scheme != "always" && scheme != "first" && scheme != "never") {
        return n.Error("prepend_scheme", absl::StrCat("= \"", scheme, "\" is not always, first or never"));
      }
      op.flag = scheme != "never";
    }
  } else if (t == "WordPiece") {
    op.kind = DecOp::kWordPiece;
    op.a = "##";
    if (absl::Status s = n.String("prefix", &op.a); !s.ok()) return s;
    if (absl::Status s = n.Bool("cleanup", &op.flag); !s.ok()) return s;
  } else if (t == "BPEDecoder") {
    op.kind = DecOp::kBpe;
    op.a = "</w>";
    if (absl::Status s = n.String("suffix", &op.a); !s.ok()) return s;
  } else if (t == "ByteFallback") {
    op.kind = DecOp::kByteFallback;
  } else if (t == "Fuse") {
    op.kind = DecOp::kFuse;
  } else if (t == "Strip") {
    op.kind = DecOp::kStrip;
    if (absl::Status s = OneChar(n, "content", &op.content); !s.ok()) return s;
    if (absl::Status s = n.Int("start", &op.start); !s.ok()) return s;
    if (absl::Status s = n.Int("stop", &op.stop); !s.ok()) return s;
  } else if (t == "Replace") {
    op.kind = DecOp::kReplace;
    absl::StatusOr<std::optional<SplitRegex>> p = Pattern(n, "pattern");
    if (!p.ok()) return p.status();
    op.pattern = *std::move(p);
    bool present = false;
    if (absl::Status s = n.String("content", &op.a, &present); !s.ok()) return s;
    if (!present) return n.Error("content", "is missing");
  } else if (t == "CTC") {
    op.kind = DecOp::kCtc;
    op.a = "<pad>";
    op.b = "|";
    if (absl::Status s = n.String("pad_token", &op.a); !s.ok()) return s;
    if (absl::Status s = n.String("word_delimiter_token", &op.b); !s.ok()) return s;
    if (absl::Status s = n.Bool("cleanup", &op.flag); !s.ok()) return s;
  } else {
    return n.Unsupported(t, "ByteLevel, Metaspace, WordPiece, BPEDecoder, ByteFallback, Fuse, Strip, Replace, CTC, "
                            "Sequence");
  }
  ops->push_back(std::move(op));
  return absl::OkStatus();
}

std::string RunDecoders(const std::vector<DecOp>& ops, bool has_decoder, std::vector<std::string> tokens,
                        size_t first, absl::Status* error = nullptr) {
  if (!has_decoder) return absl::StrJoin(tokens, " ");
  for (const DecOp& op : ops) ApplyDec(op, first, &tokens, error);
  return absl::StrJoin(tokens, "");
}

// ------------------------------------------------------- post_processor ----

struct Post {
  std::vector<int32_t> prefix, suffix;  // ids around the single sequence
  bool trim_offsets = false;
  bool trim_add_prefix_space = false;
};

absl::Status ParsePost(const Node& n, int depth, const std::function<std::optional<int32_t>(const std::string&)>& find,
                       Post* post) {
  if (n.j().is_null()) return absl::OkStatus();
  absl::StatusOr<std::string> type = n.Type();
  if (!type.ok()) return type.status();
  const std::string& t = *type;
  auto pair = [&](const char* key, int32_t* id) -> absl::Status {
    auto it = n.j().find(key);
    if (it == n.j().end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_integer()) {
      return n.Error(key, "is not [token, id]");
    }
    *id = (*it)[1].get<int32_t>();
    return absl::OkStatus();
  };
  if (t == "Sequence") {
    return ParseSequence(n, "processors", depth, [&](const Node& e, int d) { return ParsePost(e, d, find, post); });
  }
  if (t == "BertProcessing" || t == "RobertaProcessing") {
    int32_t cls = 0, sep = 0;
    if (absl::Status s = pair("cls", &cls); !s.ok()) return s;
    if (absl::Status s = pair("sep", &sep); !s.ok()) return s;
    post->prefix = {cls};
    post->suffix = {sep};
    if (t == "RobertaProcessing") {
      post->trim_offsets = true;
      post->trim_add_prefix_space = true;
      if (absl::Status s = n.Bool("trim_offsets", &post->trim_offsets); !s.ok()) return s;
      if (absl::Status s = n.Bool("add_prefix_space", &post->trim_add_prefix_space); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (t == "ByteLevel") {
    post->trim_offsets = true;
    post->trim_add_prefix_space = true;
    if (absl::Status s = n.Bool("trim_offsets", &post->trim_offsets); !s.ok()) return s;
    if (absl::Status s = n.Bool("add_prefix_space", &post->trim_add_prefix_space); !s.ok()) return s;
    return absl::OkStatus();
  }
  if (t == "TemplateProcessing") {
    auto single = n.j().find("single");
    if (single == n.j().end() || !single->is_array()) return n.Error("single", "is missing or not an array");
    const json& specials = Field(n.j(), "special_tokens");
    post->prefix.clear();
    post->suffix.clear();
    bool seen_a = false;
    for (size_t i = 0; i < single->size(); ++i) {
      const json& e = (*single)[i];
      const std::string where = absl::StrCat(n.At("single"), "[", i, "]");
      if (e.contains("Sequence")) {
        const std::string id = e["Sequence"].value("id", "A");
        if (id != "A" || seen_a) {
          return absl::InvalidArgumentError(absl::StrCat(n.file(), ": ", where, " = ", e.dump().substr(0, 80),
                                                         " (a single-sequence template holds sequence A once)"));
        }
        seen_a = true;
      } else if (e.contains("SpecialToken") && e["SpecialToken"].contains("id") && e["SpecialToken"]["id"].is_string()) {
        const std::string name = e["SpecialToken"]["id"].get<std::string>();
        std::vector<int32_t> ids;
        if (specials.is_object() && specials.contains(name) && specials[name].contains("ids") &&
            specials[name]["ids"].is_array()) {
          for (const json& x : specials[name]["ids"]) {
            if (!x.is_number_integer()) {
              return absl::InvalidArgumentError(absl::StrCat(n.file(), ": ", n.At("special_tokens"), "[\"", name, "\"].ids holds ", x.dump()));
            }
            ids.push_back(x.get<int32_t>());
          }
        } else if (auto id = find(name)) {
          ids.push_back(*id);
        } else {
          return absl::InvalidArgumentError(absl::StrCat(n.file(), ": ", where, " names special token \"", name,
                                                         "\", which special_tokens does not define"));
        }
        auto& dst = seen_a ? post->suffix : post->prefix;
        dst.insert(dst.end(), ids.begin(), ids.end());
      } else {
        return absl::InvalidArgumentError(absl::StrCat(n.file(), ": ", where, " = ", e.dump().substr(0, 80),
                                                       " is neither {\"SpecialToken\": ...} nor {\"Sequence\": ...}"));
      }
    }
    return absl::OkStatus();
  }
  return n.Unsupported(t, "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence");
}

// ------------------------------------------------------------ tokenizer ----

struct Pipeline {
  std::vector<NormOp> norm;
  // Added tokens with `normalized`: patterns are their normalized contents,
  // matched in each segment's normalized text before pre-tokenization.
  SplitMatcher normalized_tokens;
  std::vector<PreOp> pre;
  std::unique_ptr<HfModel> model;
  std::string kind;
  std::vector<DecOp> dec;
  bool has_decoder = false;
  Post post;
};

// The segment through the normalizers: st->s, with each byte's source
// span in st->ob / st->oe, and one piece (all of it).
absl::Status Normalize(const std::vector<NormOp>& norm, std::string_view segment, PreState* st) {
  if (norm.empty()) {
    InitState(segment, st);
    return absl::OkStatus();
  }
  std::vector<NChar> chars = CharsOf(segment);
  for (const NormOp& op : norm) {
    if (absl::Status s = ApplyNorm(op, &chars); !s.ok()) return s;
  }
  InitState(chars, st);
  return absl::OkStatus();
}

absl::Status NormalizeText(const std::vector<NormOp>& norm, std::string_view text, std::string* out) {
  PreState st;
  if (absl::Status s = Normalize(norm, text, &st); !s.ok()) return s;
  *out = std::move(st.s);
  return absl::OkStatus();
}

// Whether an encode keeps each byte's input span (PreState::offsets):
// when the caller wants offsets, a pre-tokenizer reads the spans
// (Metaspace, ByteLevel's add_prefix_space: Rebuild), or `normalized` added
// tokens cut the normalized text by them.
bool KeepSpans(const Pipeline& p, bool want_offsets) {
  if (want_offsets || !p.normalized_tokens.empty()) return true;
  for (const PreOp& op : p.pre) {
    if (op.kind == PreOp::kMetaspace || (op.kind == PreOp::kByteLevel && op.add_prefix_space)) return true;
  }
  return false;
}

// Whether an encode leaves the last pre-tokenizer's ByteLevel mapping to
// the model (HfModel::TokenizeByteLevel): when no offsets are kept, which
// would have to follow the mapped bytes.
bool DeferByteLevel(const Pipeline& p, const PreState& st) {
  return !st.offsets && !p.pre.empty() && p.pre.back().kind == PreOp::kByteLevel;
}

// Runs the pre-tokenizers over st's pieces (the last one's ByteLevel
// mapping left out when DeferByteLevel).
absl::Status PreTokenize(const Pipeline& p, int64_t base, PreState* st) {
  const bool defer = DeferByteLevel(p, *st);
  for (size_t i = 0; i < p.pre.size(); ++i) {
    const PreOp& op = p.pre[i];
    ApplyPre(op, base, st, !(defer && i + 1 == p.pre.size()));
    if (!st->error.ok()) return st->error;
  }
  return absl::OkStatus();
}

class HfTokenizer final : public VocabTokenizer {
 public:
  HfTokenizer(Vocab v, Pipeline p, std::optional<int32_t> bos, std::optional<int32_t> eos)
      : VocabTokenizer(std::move(v)), p_(std::move(p)), bos_(bos), eos_(eos) {}

  std::string kind() const override { return p_.kind; }
  std::optional<int32_t> bos_id() const override { return bos_; }
  std::optional<int32_t> eos_id() const override { return eos_; }
  bool add_bos() const override { return !p_.post.prefix.empty(); }
  bool add_eos() const override { return !p_.post.suffix.empty(); }

  absl::StatusOr<Encoding> Encode(std::string_view text, bool add_special_tokens) const override {
    absl::StatusOr<Encoding> e = VocabTokenizer::Encode(text, false);
    if (!e.ok()) return e;
    if (p_.post.trim_offsets) TrimOffsets(&*e);
    if (add_special_tokens) {
      const auto n = static_cast<int64_t>(text.size());
      Encoding out;
      for (int32_t id : p_.post.prefix) out.ids.push_back(id), out.offsets.emplace_back(0, 0);
      out.ids.insert(out.ids.end(), e->ids.begin(), e->ids.end());
      out.offsets.insert(out.offsets.end(), e->offsets.begin(), e->offsets.end());
      for (int32_t id : p_.post.suffix) out.ids.push_back(id), out.offsets.emplace_back(n, n);
      return out;
    }
    return e;
  }
  absl::StatusOr<std::vector<int32_t>> EncodeIds(std::string_view text, bool add_special_tokens) const override {
    absl::StatusOr<std::vector<int32_t>> ids = VocabTokenizer::EncodeIds(text, false);
    if (!ids.ok() || !add_special_tokens) return ids;
    std::vector<int32_t> out = p_.post.prefix;
    out.insert(out.end(), ids->begin(), ids->end());
    out.insert(out.end(), p_.post.suffix.begin(), p_.post.suffix.end());
    return out;
  }

  std::string DecodeOne(const std::string& piece) const {
    return RunDecoders(p_.dec, p_.has_decoder, {piece}, 1);
  }

 protected:
  // segment: the text between two split tokens. Normalized, then cut at
  // the `normalized` added tokens; each part between them is pre-tokenized
  // and run through the model on its own (tokenizers' PreTokenizedString
  // splits). Offsets map back through the normalizer's alignment.
  absl::Status EncodeSegment(std::string_view segment, int64_t base, std::vector<int32_t>* ids,
                             std::vector<std::pair<int64_t, int64_t>>* offsets) const override {
    PreState st;
    st.offsets = KeepSpans(p_, offsets != nullptr);
    if (absl::Status s = Normalize(p_.norm, segment, &st); !s.ok()) return s;
    if (p_.normalized_tokens.empty()) return EncodeNormalized(base, &st, ids, offsets);
    std::vector<SplitPart> parts;
    p_.normalized_tokens.Find(st.s, 0, st.s.size(), &parts);
    if (parts.size() == 1 && parts[0].id < 0) return EncodeNormalized(base, &st, ids, offsets);
    PreState part;
    for (const SplitPart& sp : parts) {
      if (sp.id >= 0) {
        ids->push_back(sp.id);
        if (offsets) offsets->emplace_back(base + st.ob[sp.begin], base + st.oe[sp.end - 1]);
        continue;
      }
      part.s.assign(st.s, sp.begin, sp.end - sp.begin);
      part.ob.assign(st.ob.begin() + sp.begin, st.ob.begin() + sp.end);
      part.oe.assign(st.oe.begin() + sp.begin, st.oe.begin() + sp.end);
      part.pieces.assign(1, SplitSpan{0, static_cast<uint32_t>(part.s.size())});
      if (absl::Status s = EncodeNormalized(base, &part, ids, offsets); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  std::string DecodeTokens(const std::vector<int32_t>& ids) const override {
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (int32_t id : ids) tokens.push_back(vocab().pieces[id]);
    return RunDecoders(p_.dec, p_.has_decoder, std::move(tokens), 0);
  }

 private:
  // Pre-tokenizes normalized text (one piece) and runs the model on each
  // piece.
  absl::Status EncodeNormalized(int64_t base, PreState* st, std::vector<int32_t>* ids,
                                std::vector<std::pair<int64_t, int64_t>>* offsets) const {
    const bool raw_bytes = DeferByteLevel(p_, *st);
    if (absl::Status s = PreTokenize(p_, base, st); !s.ok()) return s;
    std::vector<MTok> toks;
    for (const SplitSpan& w : st->pieces) {
      toks.clear();
      const std::string_view word = std::string_view(st->s).substr(w.begin, w.end - w.begin);
      if (absl::Status s = raw_bytes ? p_.model->TokenizeByteLevel(word, &toks) : p_.model->Tokenize(word, &toks); !s.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(vocab().source, ": ", s.message()));
      }
      for (const MTok& t : toks) {
        ids->push_back(t.id);
        if (offsets) {
          const uint32_t b = w.begin + t.b, e = w.begin + t.e;
          if (e > b) {
            offsets->emplace_back(base + st->ob[b], base + st->oe[e - 1]);
          } else {
            const int64_t at = b < st->ob.size() ? st->ob[b] : (st->oe.empty() ? 0 : st->oe.back());
            offsets->emplace_back(base + at, base + at);
          }
        }
      }
    }
    return absl::OkStatus();
  }

  // tokenizers' ByteLevel / RobertaProcessing trim_offsets: leading and
  // trailing spaces ("Ġ" or White_Space characters) of a token's piece are
  // left out of its offsets (one space per character), except the single
  // prefix space of the first token when add_prefix_space.
  void TrimOffsets(Encoding* e) const {
    for (size_t i = 0; i < e->ids.size(); ++i) {
      const std::string& piece = vocab().pieces[e->ids[i]];
      std::vector<uint32_t> cs;
      size_t p = 0;
      while (p < piece.size()) cs.push_back(DecodeUtf8(piece, &p));
      auto space = [](uint32_t c) { return c == 0x120 || IsWhiteSpace(c); };
      int64_t lead = 0, trail = 0;
      while (lead < static_cast<int64_t>(cs.size()) && space(cs[lead])) ++lead;
      while (trail < static_cast<int64_t>(cs.size()) && space(cs[cs.size() - 1 - trail])) ++trail;
      auto& [b, en] = e->offsets[i];
      if (lead > 0) {
        const bool is_first = i == 0 || b == 0;
        if (is_first && p_.post.trim_add_prefix_space && lead == 1) lead = 0;
        b = std::min(b + lead, en);
      }
      if (trail > 0 && en >= trail) en = std::max(en - trail, b);
    }
  }

  Pipeline p_;
  std::optional<int32_t> bos_, eos_;
};

absl::StatusOr<int32_t> TokenId(const Node& n, const json& v, const std::string& key) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= (int64_t{1} << 24)) {
    return n.Error(key, absl::StrCat("= ", v.dump().substr(0, 40), " is not a token id"));
  }
  return v.get<int32_t>();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeHfTokenizer(const json& j, const json& config, const std::string& path) {
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  auto mit = j.find("model");
  if (mit == j.end() || !mit->is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": no \"model\" object"));
  const json& m = *mit;
  const Node mn(m, "model", path);
  std::string type = m.contains("merges") ? "BPE" : "";
  if (absl::Status s = mn.String("type", &type); !s.ok()) return s;
  if (type != "BPE" && type != "WordPiece" && type != "Unigram") {
    return mn.Error("type", absl::StrCat("= \"", type, "\" is not supported (supported: BPE, WordPiece, Unigram)"));
  }
  Vocab v;
  v.source = path;
  // Model vocabulary: {piece: id} (BPE, WordPiece) or [[piece, score], ...]
  // (Unigram, id = position).
  const json& mv = Field(m, "vocab");
  std::vector<std::pair<std::string, int32_t>> model_vocab;
  std::vector<std::pair<std::string, double>> unigram;
  if (type == "Unigram") {
    if (!mv.is_array()) return mn.Error("vocab", "is not an array of [piece, score]");
    for (size_t i = 0; i < mv.size(); ++i) {
      const json& e = mv[i];
      if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number()) {
        return mn.Error(absl::StrCat("vocab[", i, "]"), absl::StrCat("= ", e.dump().substr(0, 80), " is not [piece, score]"));
      }
      unigram.emplace_back(e[0].get<std::string>(), e[1].get<double>());
      model_vocab.emplace_back(e[0].get<std::string>(), static_cast<int32_t>(i));
    }
  } else {
    if (!mv.is_object()) return mn.Error("vocab", "is not an object");
    for (auto it = mv.begin(); it != mv.end(); ++it) {
      absl::StatusOr<int32_t> id = TokenId(mn, it.value(), absl::StrCat("vocab[\"", it.key(), "\"]"));
      if (!id.ok()) return id.status();
      model_vocab.emplace_back(it.key(), *id);
    }
  }
  int64_t n = 0;
  for (const auto& [piece, id] : model_vocab) n = std::max<int64_t>(n, int64_t{id} + 1);
  static const json* no_added = new json(json::array());
  const json& added = Field(j, "added_tokens").is_array() ? Field(j, "added_tokens") : *no_added;
  const Node root(j, "", path);
  for (size_t i = 0; i < added.size(); ++i) {
    if (!added[i].is_object() || !added[i].contains("id")) return root.Error(absl::StrCat("added_tokens[", i, "]"), "has no id");
    absl::StatusOr<int32_t> id = TokenId(root, added[i]["id"], absl::StrCat("added_tokens[", i, "].id"));
    if (!id.ok()) return id.status();
    n = std::max<int64_t>(n, int64_t{*id} + 1);
  }
  if (n <= 0) return absl::InvalidArgumentError(absl::StrCat(path, ": empty vocabulary"));
  v.pieces.assign(n, "");
  v.types.assign(n, TokenType::kUnused);
  v.scores.assign(n, 0.0f);
  for (const auto& [piece, id] : model_vocab) {
    v.pieces[id] = piece;
    v.types[id] = TokenType::kNormal;
  }
  for (size_t i = 0; i < unigram.size(); ++i) v.scores[i] = static_cast<float>(unigram[i].second);
  std::map<std::string, int32_t> added_by_content;
  struct NormalizedToken {
    std::string content;
    int32_t id;
    Vocab::SplitRules rules;
    size_t index;  // in added_tokens
  };
  std::vector<NormalizedToken> normalized_tokens;
  for (size_t i = 0; i < added.size(); ++i) {
    const int32_t id = added[i]["id"].get<int32_t>();
    const Node an(added[i], absl::StrCat("added_tokens[", i, "]"), path);
    std::string content;
    bool present = false, special = false;
    if (absl::Status s = an.String("content", &content, &present); !s.ok()) return s;
    if (!present || content.empty()) return an.Error("content", "is missing or empty");
    if (absl::Status s = an.Bool("special", &special); !s.ok()) return s;
    // tokenizers' AddedToken rules. tokenizers requires every flag (the
    // files it writes carry them all); one left out here counts as false.
    Vocab::SplitRules rules;
    bool normalized = false;
    for (const auto& [key, out] : {std::pair<const char*, bool*>{"single_word", &rules.single_word},
                                   {"lstrip", &rules.lstrip},
                                   {"rstrip", &rules.rstrip},
                                   {"normalized", &normalized}}) {
      if (absl::Status s = an.Bool(key, out); !s.ok()) return s;
    }
    if (rules.single_word || rules.lstrip || rules.rstrip) v.split_rules.emplace_back(id, rules);
    v.pieces[id] = content;
    v.types[id] = special ? TokenType::kControl : TokenType::kUserDefined;
    if (normalized) {
      // Matched in the normalized text of what lies between the other added
      // tokens (tokenizers' AddedVocabulary::extract_and_normalize).
      normalized_tokens.push_back({content, id, rules, i});
    } else {
      v.split_tokens.push_back(id);
    }
    added_by_content[content] = id;
  }
  absl::flat_hash_map<std::string, int32_t> model_ids;
  for (const auto& [piece, id] : model_vocab) model_ids[piece] = id;  // last wins, as tokenizers' maps
  auto find_token = [&](const std::string& s) -> std::optional<int32_t> {
    if (auto it = added_by_content.find(s); it != added_by_content.end()) return it->second;
    if (auto it = model_ids.find(s); it != model_ids.end()) return it->second;
    return std::nullopt;
  };

  Pipeline p;
  if (absl::Status s = ParseNormalizer(Node(Field(j, "normalizer"), "normalizer", path), 0, &p.norm); !s.ok()) return s;
  // A `normalized` token's pattern is its content through the normalizer
  // (tokenizers' AddedVocabulary::refresh_added_tokens).
  for (const NormalizedToken& t : normalized_tokens) {
    std::string pattern;
    if (absl::Status s = NormalizeText(p.norm, t.content, &pattern); !s.ok()) return s;
    if (pattern.empty()) {
      return root.Error(absl::StrCat("added_tokens[", t.index, "].content"),
                        absl::StrCat("= \"", t.content,
                                     "\" is normalized to the empty string (normalized = true)"));
    }
    p.normalized_tokens.Add(std::move(pattern), t.id, t.rules);
  }
  p.normalized_tokens.Finish();
  if (absl::Status s = ParsePreTokenizer(Node(Field(j, "pre_tokenizer"), "pre_tokenizer", path), 0, &p.pre); !s.ok()) return s;
  const json& dec = Field(j, "decoder");
  p.has_decoder = !dec.is_null();
  if (absl::Status s = ParseDecoder(Node(dec, "decoder", path), 0, &p.dec); !s.ok()) return s;
  if (absl::Status s = ParsePost(Node(Field(j, "post_processor"), "post_processor", path), 0, find_token, &p.post); !s.ok()) return s;

  if (type == "BPE") {
    auto bpe = std::make_unique<BpeModel>();
    bpe->vocab.reserve(model_ids.size());
    for (const auto& [piece, id] : model_ids) bpe->vocab.emplace(piece, id);
    std::string unk_token, prefix, suffix;
    bool has_unk = false, has_prefix = false, has_suffix = false;
    if (absl::Status s = mn.String("unk_token", &unk_token, &has_unk); !s.ok()) return s;
    if (absl::Status s = mn.String("continuing_subword_prefix", &prefix, &has_prefix); !s.ok()) return s;
    if (absl::Status s = mn.String("end_of_word_suffix", &suffix, &has_suffix); !s.ok()) return s;
    if (has_prefix) bpe->prefix = prefix;
    if (has_suffix) bpe->suffix = suffix;
    if (has_unk) {
      // As tokenizers: an unk_token missing from the vocabulary is an error
      // only when an unknown character needs it.
      if (auto it = model_ids.find(unk_token); it != model_ids.end()) {
        bpe->unk = it->second;
        v.unk = it->second;
      } else {
        bpe->missing_unk = unk_token;
      }
    }
    if (absl::Status s = mn.Bool("fuse_unk", &bpe->fuse_unk); !s.ok()) return s;
    if (absl::Status s = mn.Bool("byte_fallback", &bpe->byte_fallback); !s.ok()) return s;
    if (absl::Status s = mn.Bool("ignore_merges", &bpe->ignore_merges); !s.ok()) return s;
    if (m.contains("dropout") && !m["dropout"].is_null() &&
        !(m["dropout"].is_number() && m["dropout"].get<double>() == 0.0)) {
      return mn.Error("dropout", absl::StrCat("= ", m["dropout"].dump(), " is not supported (random merges; want null)"));
    }
    const json& merges = Field(m, "merges");
    if (!merges.is_array() && !merges.is_null()) return mn.Error("merges", "is not an array");
    if (!merges.is_null()) bpe->merges.reserve(merges.size());
    for (size_t r = 0; merges.is_array() && r < merges.size(); ++r) {
      const json& e = merges[r];
      std::string a, b;
      if (e.is_string()) {
        const std::string s = e.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
          return mn.Error(absl::StrCat("merges[", r, "]"), absl::StrCat("= \"", s, "\" is not \"left right\""));
        }
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        a = e[0].get<std::string>();
        b = e[1].get<std::string>();
      } else {
        return mn.Error(absl::StrCat("merges[", r, "]"), absl::StrCat("= ", e.dump().substr(0, 80), " is not a merge"));
      }
      const size_t plen = has_prefix ? prefix.size() : 0;
      const std::string merged = a + (b.size() >= plen ? b.substr(plen) : std::string());
      auto ia = model_ids.find(a), ib = model_ids.find(b), im = model_ids.find(merged);
      if (ia == model_ids.end() || ib == model_ids.end() || im == model_ids.end() || b.size() < plen) {
        return mn.Error(absl::StrCat("merges[", r, "]"),
                        absl::StrCat("= \"", a, " ", b, "\": \"", ia == model_ids.end() ? a : ib == model_ids.end() ? b : merged,
                                     "\" is not in model.vocab"));
      }
      bpe->merges[BpeModel::Key(ia->second, ib->second)] = {static_cast<int32_t>(r), im->second};  // last wins
    }
    if (bpe->byte_fallback) {
      for (int b = 0; b < 256; ++b) {
        auto it = model_ids.find(BytePiece(static_cast<unsigned char>(b)));
        if (it != model_ids.end() && v.types[it->second] == TokenType::kNormal) v.types[it->second] = TokenType::kByte;
      }
    }
    bpe->BuildCharCache();
    p.model = std::move(bpe);
    p.kind = "bpe";
  } else if (type == "WordPiece") {
    auto wp = std::make_unique<WordPieceModel>();
    for (const auto& [piece, id] : model_ids) wp->vocab.emplace(piece, id);
    wp->unk_token = "[UNK]";
    if (absl::Status s = mn.String("unk_token", &wp->unk_token); !s.ok()) return s;
    if (absl::Status s = mn.String("continuing_subword_prefix", &wp->prefix); !s.ok()) return s;
    if (absl::Status s = mn.Int("max_input_chars_per_word", &wp->max_chars); !s.ok()) return s;
    if (auto it = model_ids.find(wp->unk_token); it != model_ids.end()) wp->unk = v.unk = it->second;
    p.model = std::move(wp);
    p.kind = "wordpiece";
  } else {
    auto ug = std::make_unique<UnigramModel>();
    ug->pieces = unigram;
    ug->min_score = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < unigram.size(); ++i) {
      ug->ids[unigram[i].first] = static_cast<int32_t>(i);
      ug->min_score = std::min(ug->min_score, unigram[i].second);
    }
    {
      std::vector<std::pair<std::string, int32_t>> entries;
      entries.reserve(ug->ids.size());
      for (const auto& [piece, id] : ug->ids) {
        if (!piece.empty()) entries.emplace_back(piece, id);
      }
      ug->trie.Build(entries);
    }
    if (unigram.empty()) ug->min_score = 0;
    int64_t unk_id = -1;
    if (absl::Status s = mn.Int("unk_id", &unk_id); !s.ok()) return s;
    if (unk_id >= 0) {
      if (unk_id >= static_cast<int64_t>(unigram.size())) {
        return mn.Error("unk_id", absl::StrCat("= ", unk_id, " is outside model.vocab (", unigram.size(), " pieces)"));
      }
      ug->unk = v.unk = static_cast<int32_t>(unk_id);
    }
    if (absl::Status s = mn.Bool("byte_fallback", &ug->byte_fallback); !s.ok()) return s;
    if (ug->byte_fallback) {
      for (int b = 0; b < 256; ++b) {
        auto it = ug->ids.find(BytePiece(static_cast<unsigned char>(b)));
        if (it != ug->ids.end() && v.types[it->second] == TokenType::kNormal) v.types[it->second] = TokenType::kByte;
      }
    }
    p.model = std::move(ug);
    p.kind = "unigram";
  }
  if (v.unk && v.types[*v.unk] == TokenType::kNormal) v.types[*v.unk] = TokenType::kUnknown;

  // BOS / EOS: the template's first special token before / after the
  // sequence; tokenizer_config.json may name them and switch them on or off.
  std::optional<int32_t> bos = p.post.prefix.empty() ? std::nullopt : std::optional<int32_t>(p.post.prefix.front());
  std::optional<int32_t> eos = p.post.suffix.empty() ? std::nullopt : std::optional<int32_t>(p.post.suffix.front());
  if (config.is_object()) {
    auto token = [&](const char* key) -> std::optional<int32_t> {
      auto it = config.find(key);
      if (it == config.end()) return std::nullopt;
      if (it->is_string()) return find_token(it->get<std::string>());
      if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
        return find_token((*it)["content"].get<std::string>());
      }
      return std::nullopt;
    };
    if (auto b = token("bos_token")) bos = b;
    if (auto e = token("eos_token")) eos = e;
    if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean()) {
      if (!config["add_bos_token"].get<bool>()) p.post.prefix.clear();
      else if (p.post.prefix.empty() && bos) p.post.prefix = {*bos};
    }
    if (config.contains("add_eos_token") && config["add_eos_token"].is_boolean()) {
      if (!config["add_eos_token"].get<bool>()) p.post.suffix.clear();
      else if (p.post.suffix.empty() && eos) p.post.suffix = {*eos};
    }
    v.source = absl::StrCat(path, " + tokenizer_config.json");
  }
  for (int32_t id : p.post.prefix) {
    if (id < 0 || id >= n) return absl::InvalidArgumentError(absl::StrCat(path, ": post_processor token id ", id, " is outside [0, ", n, ")"));
  }
  for (int32_t id : p.post.suffix) {
    if (id < 0 || id >= n) return absl::InvalidArgumentError(absl::StrCat(path, ": post_processor token id ", id, " is outside [0, ", n, ")"));
  }
  v.bos = bos;
  v.eos = eos;
  v.add_bos = v.add_eos = false;  // the template's ids are added by HfTokenizer
  if (absl::Status s = ValidateVocab(&v); !s.ok()) return s;
  // Each token's bytes: what it adds to decoded text after another token
  // (Decode({"\x01", piece}) less Decode({"\x01"})), or its piece through
  // the decoder alone when that is not a prefix.
  std::vector<std::string> bytes(v.pieces.size());
  absl::Status decode_error;
  const std::string lead = RunDecoders(p.dec, p.has_decoder, {"\x01"}, 0, &decode_error);
  for (size_t i = 0; i < v.pieces.size(); ++i) {
    if (v.types[i] == TokenType::kControl || v.types[i] == TokenType::kUserDefined) {
      bytes[i] = v.pieces[i];
      continue;
    }
    std::string both = RunDecoders(p.dec, p.has_decoder, {"\x01", v.pieces[i]}, 0, &decode_error);
    bytes[i] = absl::StartsWith(both, lead)
                   ? both.substr(lead.size())
                   : RunDecoders(p.dec, p.has_decoder, {v.pieces[i]}, 1, &decode_error);
  }
  if (!decode_error.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("decoder: a Replace pattern fails on a vocabulary piece: ",
                     decode_error.message()));
  }
  v.bytes = std::move(bytes);
  return std::unique_ptr<Tokenizer>(new HfTokenizer(std::move(v), std::move(p), bos, eos));
}

absl::StatusOr<std::string> HfNormalizeStr(const json& normalizer, std::string_view text) {
  static const std::string file = "normalizer";
  std::vector<NormOp> ops;
  if (absl::Status s = ParseNormalizer(Node(normalizer, "normalizer", file), 0, &ops); !s.ok()) return s;
  std::string out;
  if (absl::Status s = NormalizeText(ops, text, &out); !s.ok()) return s;
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>>> HfPreTokenizeStr(
    const json& pre_tokenizer, std::string_view text) {
  static const std::string file = "pre_tokenizer";
  std::vector<PreOp> ops;
  if (absl::Status s = ParsePreTokenizer(Node(pre_tokenizer, "pre_tokenizer", file), 0, &ops); !s.ok()) return s;
  PreState st;
  InitState(text, &st);
  for (const PreOp& op : ops) {
    ApplyPre(op, 0, &st);
    if (!st.error.ok()) return st.error;
  }
  std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> out;
  for (const SplitSpan& w : st.pieces) {
    out.push_back({st.s.substr(w.begin, w.end - w.begin), {st.ob[w.begin], st.oe[w.end - 1]}});
  }
  return out;
}

absl::StatusOr<std::string> HfDecode(const json& decoder, const std::vector<std::string>& tokens) {
  static const std::string file = "decoder";
  std::vector<DecOp> ops;
  if (absl::Status s = ParseDecoder(Node(decoder, "decoder", file), 0, &ops); !s.ok()) return s;
  absl::Status error;
  std::string text = RunDecoders(ops, !decoder.is_null(), tokens, 0, &error);
  if (!error.ok()) return error;
  return text;
}

}  // namespace tokenizer_internal
}  // namespace vocabd
