#include "lib/tokenizer/spm_normalizer.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/tokenizer/incremental_decode.h"
#include "lib/tokenizer/vocab_tokenizer.h"

namespace vocabd {
namespace tokenizer_internal {
namespace {

// darts-clone DoubleArrayUnit accessors.
inline bool HasLeaf(uint32_t u) { return ((u >> 8) & 1) != 0; }
inline uint32_t Value(uint32_t u) { return u & ((1u << 31) - 1); }
inline uint32_t Label(uint32_t u) { return u & ((1u << 31) | 0xFF); }
inline uint32_t Offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

constexpr int kMaxTrieResults = 32;  // sentencepiece kMaxTrieResultsSize

struct Split {
  std::vector<uint32_t> units;
  std::string_view normalized;
};

absl::StatusOr<Split> SplitBlob(std::string_view blob, std::string_view field) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), " (", blob.size(), " bytes) is malformed: ", what));
  };
  if (blob.size() <= 4) return bad("shorter than its 4-byte trie size");
  uint32_t trie_size;
  std::memcpy(&trie_size, blob.data(), 4);  // little-endian hosts only (x86-64, arm64)
  if (trie_size >= blob.size() - 4 + 1 || trie_size % 4 != 0 || trie_size == 0) {
    return bad(absl::StrCat("trie size ", trie_size, " (want a non-zero multiple of 4, at most ",
                            blob.size() - 4, ")"));
  }
  Split s;
  s.units.resize(trie_size / 4);
  std::memcpy(s.units.data(), blob.data() + 4, trie_size);
  s.normalized = blob.substr(4 + trie_size);
  // Every node reachable from the root, each unit once (darts-clone shares
  // identical subtrees, so a unit may be reached from several parents; a
  // malicious blob's cycles end here too).
  std::vector<bool> seen(s.units.size(), false);
  std::vector<uint32_t> stack{0};
  seen[0] = true;
  const size_t n = s.units.size();
  while (!stack.empty()) {
    const uint32_t pos = stack.back();
    stack.pop_back();
    const uint32_t base = pos ^ Offset(s.units[pos]);
    if (pos != 0 && HasLeaf(s.units[pos])) {
      if (base >= n) return bad(absl::StrCat("leaf of node ", pos, " at ", base, " outside the trie"));
      const uint32_t v = Value(s.units[base]);
      if (v >= s.normalized.size()) {
        return bad(absl::StrCat("value ", v, " outside the ", s.normalized.size(),
                                "-byte replacement strings"));
      }
      const size_t nul = s.normalized.find('\0', v);
      if (nul == std::string_view::npos) return bad(absl::StrCat("replacement at ", v, " has no NUL"));
      if (FirstInvalidUtf8(s.normalized.substr(v, nul - v)).has_value()) {
        return bad(absl::StrCat("replacement at ", v, " is not UTF-8"));
      }
    }
    for (uint32_t b = 1; b < 256; ++b) {
      const uint32_t child = base ^ b;
      if (child >= n || Label(s.units[child]) != b) continue;
      if (seen[child]) continue;
      seen[child] = true;
      stack.push_back(child);
    }
  }
  return s;
}

}  // namespace

absl::Status ValidatePrecompiledCharsmap(std::string_view blob, std::string_view field) {
  return SplitBlob(blob, field).status();
}

absl::StatusOr<SpmNormalizer> SpmNormalizer::Create(SpmNormalizerOptions options) {
  SpmNormalizer n;
  if (!options.precompiled_charsmap.empty()) {
    absl::StatusOr<Split> s = SplitBlob(options.precompiled_charsmap, options.field);
    if (!s.ok()) return s.status();
    n.units_ = std::move(s->units);
    n.normalized_ = std::string(s->normalized);
  }
  for (const std::string& u : options.user_defined) {
    if (!u.empty()) n.user_by_first_byte_[static_cast<unsigned char>(u[0])].push_back(u);
    if (!u.empty()) n.has_user_defined_ = true;
  }
  for (auto& list : n.user_by_first_byte_) {
    std::stable_sort(list.begin(), list.end(),
                     [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  }
  options.precompiled_charsmap.clear();  // kept split above
  n.o_ = std::move(options);
  return n;
}

std::pair<std::string_view, size_t> SpmNormalizer::NormalizePrefix(std::string_view in) const {
  for (const std::string& u : user_by_first_byte_[static_cast<unsigned char>(in[0])]) {
    if (in.size() >= u.size() && in.compare(0, u.size(), u) == 0) return {in.substr(0, u.size()), u.size()};
  }
  if (!units_.empty()) {
    const size_t n = units_.size();
    uint32_t pos = Offset(units_[0]);
    size_t longest = 0;
    uint32_t value = 0;
    int results = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const auto b = static_cast<unsigned char>(in[i]);
      pos ^= b;
      if (pos >= n) break;
      const uint32_t u = units_[pos];
      if (Label(u) != b) break;
      pos ^= Offset(u);
      if (HasLeaf(u)) {
        if (results < kMaxTrieResults) {
          longest = i + 1;
          value = Value(units_[pos]);  // checked by Create
        }
        ++results;
      }
    }
    if (longest > 0) {
      const char* s = normalized_.data() + value;
      return {std::string_view(s, std::strlen(s)), longest};
    }
  }
  const size_t len = std::min<size_t>(Utf8Length(static_cast<unsigned char>(in[0])), in.size());
  return {in.substr(0, len), len};
}

bool SpmNormalizer::ShortestPrefixReplacement(std::string_view in,
                                              std::string_view* replacement) const {
  if (units_.empty()) return false;
  const size_t n = units_.size();
  uint32_t pos = Offset(units_[0]);
  for (size_t i = 0; i < in.size(); ++i) {
    const auto b = static_cast<unsigned char>(in[i]);
    pos ^= b;
    if (pos >= n) return false;
    const uint32_t u = units_[pos];
    if (Label(u) != b) return false;
    pos ^= Offset(u);
    if (HasLeaf(u)) {
      const char* s = normalized_.data() + Value(units_[pos]);  // checked by Create
      *replacement = std::string_view(s, std::strlen(s));
      return true;
    }
  }
  return false;
}

void SpmNormalizer::Normalize(std::string_view in, std::string* norm,
                              std::vector<uint32_t>* orig) const {
  norm->clear();
  norm->reserve(in.size() + 8);
  if (orig != nullptr) {
    orig->clear();
    orig->reserve(in.size() + 9);
  }
  // Appends `count` entries `at` to *orig when it is wanted.
  auto map = [orig](size_t count, uint32_t at) {
    if (orig == nullptr) return;
    if (count == 1) {
      orig->push_back(at);
    } else {
      orig->insert(orig->end(), count, at);
    }
  };
  uint32_t consumed = 0;
  if (o_.remove_extra_whitespaces) {
    while (!in.empty()) {
      const auto [sp, len] = NormalizePrefix(in);
      if (sp != " ") break;
      in.remove_prefix(len);
      consumed += static_cast<uint32_t>(len);
    }
  }
  if (in.empty()) {
    map(1, consumed);
    return;
  }
  auto add_space = [&]() {
    if (o_.escape_whitespaces) {
      norm->append(kMetaSpace);
      map(kMetaSpace.size(), consumed);
    } else {
      norm->push_back(' ');
      map(1, consumed);
    }
  };
  if (o_.add_dummy_prefix) add_space();
  bool prev_space = o_.remove_extra_whitespaces;
  if (units_.empty() && !has_user_defined_) {
    // The identity rule (no charsmap, no user-defined pieces): each
    // character is copied, a ' ' is a space; the same output as the loop
    // below, without a NormalizePrefix call per character.
    const size_t n = in.size();
    size_t i = 0;
    while (i < n) {
      const auto c = static_cast<unsigned char>(in[i]);
      const auto at = consumed + static_cast<uint32_t>(i);
      if (c == ' ') {
        if (!prev_space) {
          if (o_.escape_whitespaces) {
            norm->append(kMetaSpace);
            map(kMetaSpace.size(), at);
          } else {
            norm->push_back(' ');
            map(1, at);
          }
        }
        prev_space = o_.remove_extra_whitespaces;
        ++i;
        continue;
      }
      // The characters up to the next ' ' are copied at once (in valid
      // UTF-8, which Tokenizer::Encode checks, no character holds a ' ').
      const void* space = std::memchr(in.data() + i, ' ', n - i);
      const size_t j = space != nullptr ? static_cast<size_t>(static_cast<const char*>(space) - in.data()) : n;
      norm->append(in.data() + i, j - i);
      if (orig != nullptr) {
        for (size_t k = i; k < j;) {
          const size_t len = std::min<size_t>(Utf8Length(static_cast<unsigned char>(in[k])), j - k);
          map(len, consumed + static_cast<uint32_t>(k));
          k += len;
        }
      }
      prev_space = false;
      i = j;
    }
    consumed += static_cast<uint32_t>(n);
    in = {};
  }
  while (!in.empty()) {
    auto [sp, len] = NormalizePrefix(in);
    if (prev_space) {
      while (!sp.empty() && sp[0] == ' ') sp.remove_prefix(1);
    }
    if (!sp.empty()) {
      for (char c : sp) {
        if (c == ' ' && o_.escape_whitespaces) {
          norm->append(kMetaSpace);
          map(kMetaSpace.size(), consumed);
        } else {
          norm->push_back(c);
          map(1, consumed);
        }
      }
      prev_space = sp.back() == ' ';
    }
    consumed += static_cast<uint32_t>(len);
    in.remove_prefix(len);
    if (!o_.remove_extra_whitespaces) prev_space = false;
  }
  if (o_.remove_extra_whitespaces) {
    const std::string_view space = o_.escape_whitespaces ? kMetaSpace : std::string_view(" ");
    while (norm->size() >= space.size() &&
           norm->compare(norm->size() - space.size(), space.size(), space.data(), space.size()) == 0) {
      const size_t keep = norm->size() - space.size();
      norm->resize(keep);
      if (orig != nullptr) {
        consumed = (*orig)[keep];
        orig->resize(keep);
      }
    }
  }
  map(1, consumed);
}

}  // namespace tokenizer_internal
}  // namespace vocabd
