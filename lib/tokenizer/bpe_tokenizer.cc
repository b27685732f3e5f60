// BPE tokenizers: GPT-2 byte-level BPE (GGUF "gpt2", HF ByteLevel) and
// SentencePiece-style BPE over characters with byte fallback (HF Metaspace;
// GGUF vocabularies llama.cpp runs over raw UTF-8: gemma4,
// granite-embed-multi-311m, sarvam-moe, whitespace).
//
// Encode of one segment:
//   1. (Metaspace) " " -> "▁", "▁" prepended; (lowercase) every code point
//      lower-cased; a byte map keeps offsets into the input.
//   2. Pre-tokenize: each split regex (PCRE2, UTF + Unicode properties, JIT)
//      splits every piece into its matches and the text between them; or
//      (whitespace_segments) the words are the runs of non-White_Space.
//   3. Per word: a word that is a vocabulary entry is that token when
//      ignore_merges (or, with whole_newline_runs, when it is only '\n');
//      otherwise symbols = one token per byte (byte-level: the token of the
//      byte's GPT-2 character) or per character (unknown characters -> their
//      <0xAB> byte tokens, or unk; gguf_raw: bytes without one dropped); then
//      repeatedly merge the adjacent pair with the lowest merge rank (the
//      merges list's order; ties: leftmost) until none is left. Merge ranks
//      are keyed by the pair's token ids. A word's tokens depend on its
//      bytes only: each distinct word is encoded once and its tokens kept in
//      the shared word cache (word_cache.h).
#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include <unicode/uchar.h>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/tokenizer/kinds.h"
#include "lib/tokenizer/split_regex.h"
#include "lib/tokenizer/word_cache.h"

namespace vocabd {
namespace tokenizer_internal {

const char kGpt2SplitRegex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

namespace {

// GPT-2's byte <-> character map (openai/gpt-2 encoder.py bytes_to_unicode):
// printable Latin-1 bytes map to themselves, the other 68 to U+0100.. in
// byte order.
struct ByteMap {
  uint32_t byte_to_cp[256];
  int cp_to_byte[324];  // -1: not a byte character
  ByteMap() {
    std::fill(cp_to_byte, cp_to_byte + 324, -1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      byte_to_cp[b] = keep ? b : 256 + extra++;
      cp_to_byte[byte_to_cp[b]] = b;
    }
  }
};
const ByteMap& Bytes() {
  static const ByteMap* m = new ByteMap();
  return *m;
}

class BpeTokenizer final : public VocabTokenizer {
 public:
  BpeTokenizer(Vocab vocab, BpeOptions options)
      : VocabTokenizer(std::move(vocab)), o_(std::move(options)) {
    strip_leading_space_ = o_.metaspace && o_.prepend_metaspace;
  }
  std::string kind() const override { return "bpe"; }

  absl::Status Init(const std::vector<std::string>& merges) {
    const Vocab& v = vocab();
    const size_t n = v.pieces.size();
    token_to_id_.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (v.pieces[i].empty()) continue;
      if (v.types[i] == TokenType::kControl && !o_.byte_level && !o_.gguf_raw) continue;
      token_to_id_.emplace(v.pieces[i], static_cast<int32_t>(i));  // first id wins
    }
    std::fill(std::begin(byte_token_), std::end(byte_token_), -1);
    for (int b = 0; b < 256; ++b) {
      std::string s;
      if (o_.byte_level) {
        AppendUtf8(Bytes().byte_to_cp[b], &s);
      } else {
        s = absl::StrCat("<0x", absl::Hex(b, absl::kZeroPad2), ">");
        for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        s[2] = 'x';
      }
      if (auto it = token_to_id_.find(s); it != token_to_id_.end()) byte_token_[b] = it->second;
    }
    // A byte-level vocabulary may lack a few control bytes (Falcon has no
    // token for 0x03): such bytes are dropped from the input, as llama.cpp
    // does.
    merges_.reserve(merges.size());
    for (size_t r = 0; r < merges.size(); ++r) {
      const std::string& m = merges[r];
      // "left right"; pieces never contain a plain space (it is Ġ or ▁),
      // but a left piece may start with one in odd vocabularies: split at
      // the first space after the first byte.
      const size_t sp = m.find(' ', 1);
      if (sp == std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat(v.source, ": merges[", r, "] = \"", m, "\" is not \"left right\""));
      }
      const std::string left = m.substr(0, sp), right = m.substr(sp + 1);
      auto l = token_to_id_.find(left), rr = token_to_id_.find(right),
           mm = token_to_id_.find(left + right);
      if (l == token_to_id_.end() || rr == token_to_id_.end() || mm == token_to_id_.end()) {
        if (o_.gguf_raw) {
          const std::string& missing = l == token_to_id_.end()    ? left
                                       : rr == token_to_id_.end() ? right
                                                                  : left + right;
          return absl::InvalidArgumentError(absl::StrCat(
              v.source, ": merges[", r, "] = \"", m, "\": \"", missing,
              "\" is not a token of the vocabulary (llama.cpp would merge the text anyway; "
              "Hugging Face refuses such a merges list)"));
        }
        continue;  // a merge whose tokens are not all in the vocabulary never applies
      }
      merges_.emplace(Key(l->second, rr->second),
                      Merge{static_cast<int32_t>(r), mm->second});  // first rank wins
    }
    std::vector<std::string> regexes;
    if (o_.metaspace && o_.metaspace_split) regexes.push_back("\xE2\x96\x81[^\xE2\x96\x81]*|[^\xE2\x96\x81]+");
    for (const std::string& r : o_.split_regexes) regexes.push_back(r);
    for (const std::string& r : regexes) {
      absl::StatusOr<SplitRegex> re = SplitRegex::Compile(r, v.source);
      if (!re.ok()) return re.status();
      regexes_.push_back(*std::move(re));
    }
    return absl::OkStatus();
  }

 protected:
  absl::Status EncodeSegment(std::string_view segment, int64_t base, std::vector<int32_t>* ids,
                             std::vector<std::pair<int64_t, int64_t>>* offsets) const override {
    // 1. Metaspace / lowercase normalization with an offset map.
    std::string norm_buf;
    // normalized byte -> segment byte (size()+1 entries): the byte itself
    // when the character kept its length, else the character's first byte.
    std::vector<uint32_t> orig;
    std::string_view text = segment;
    const bool normalize = o_.metaspace || o_.lowercase;
    if (normalize) {
      const bool prepend = o_.metaspace && o_.prepend_metaspace && base == 0;
      norm_buf.reserve(segment.size() + 8);
      if (offsets) orig.reserve(segment.size() + 8);
      if (prepend) {
        norm_buf.append(kMetaSpace);
        if (offsets) orig.insert(orig.end(), 3, 0);
      }
      size_t i = 0;
      while (i < segment.size()) {
        const auto at = static_cast<uint32_t>(i);
        if (o_.metaspace && segment[i] == ' ') {
          norm_buf.append(kMetaSpace);
          if (offsets) orig.insert(orig.end(), 3, at);
          ++i;
        } else if (!o_.lowercase) {
          norm_buf.push_back(segment[i]);
          if (offsets) orig.push_back(at);
          ++i;
        } else {
          const uint32_t cp = DecodeUtf8(segment, &i);
          const size_t before = norm_buf.size();
          AppendUtf8(static_cast<uint32_t>(u_tolower(static_cast<UChar32>(cp))), &norm_buf);
          const size_t added = norm_buf.size() - before;
          if (offsets) {
            for (size_t k = 0; k < added; ++k) {
              orig.push_back(added == i - at ? at + static_cast<uint32_t>(k) : at);
            }
          }
        }
      }
      if (offsets) orig.push_back(static_cast<uint32_t>(segment.size()));
      text = norm_buf;
    }
    auto to_orig = [&](uint32_t p) -> int64_t {
      return base + (normalize ? static_cast<int64_t>(orig[p]) : static_cast<int64_t>(p));
    };

    // 2. Pre-tokenize.
    std::vector<SplitSpan> words;
    if (o_.whitespace_segments) {
      // White_Space ends a word and belongs to none (it stays in `text`, so
      // a word's end maps to the end of its last character).
      size_t i = 0;
      int64_t start = -1;
      while (i < text.size()) {
        const auto at = static_cast<uint32_t>(i);
        if (IsWhiteSpace(DecodeUtf8(text, &i))) {
          if (start >= 0) words.push_back({static_cast<uint32_t>(start), at});
          start = -1;
        } else if (start < 0) {
          start = at;
        }
      }
      if (start >= 0) words.push_back({static_cast<uint32_t>(start), static_cast<uint32_t>(text.size())});
    } else {
      words.push_back({0, static_cast<uint32_t>(text.size())});
      for (const SplitRegex& re : regexes_) {
        if (absl::Status s = re.SplitAll(text, &words); !s.ok()) return s;
      }
    }

    // 3. BPE per word (from the word cache when it holds the word).
    std::vector<Symbol> syms;
    std::vector<WordToken> toks;
    std::vector<Merge> pair_scratch;
    std::string mapped;  // a byte-level word in GPT-2's alphabet, as the pieces are written
    for (const SplitSpan& w : words) {
      if (w.end <= w.begin) continue;
      const std::string_view word = text.substr(w.begin, w.end - w.begin);
      toks.clear();
      if (!cache_.Find(word, [&toks](const CachedTokens& c) { toks.assign(c.begin(), c.end()); })) {
        syms.clear();
        EncodeWord(word, &syms, &pair_scratch, &mapped);
        for (const Symbol& s : syms) toks.push_back({s.id, s.begin, s.end});
        if (cache_.Cacheable(word)) cache_.Insert(word, CachedTokens(toks.begin(), toks.end()));
      }
      for (const WordToken& t : toks) {
        ids->push_back(t.id);
        if (offsets) offsets->emplace_back(to_orig(w.begin + t.begin), to_orig(w.begin + t.end));
      }
    }
    return absl::OkStatus();
  }

 private:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  struct Symbol {
    int32_t id;
    uint32_t begin, end;  // in the word
    bool mergeable;
  };
  // A token of a word (offsets relative to the word), as cached.
  struct WordToken {
    int32_t id;
    uint32_t begin, end;
  };
  // Most words are one or two tokens: those live in the cache's slot.
  using CachedTokens = absl::InlinedVector<WordToken, 2>;
  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  // The tokens of one word, offsets relative to the word: a function of
  // the word's bytes only (what the word cache relies on).
  void EncodeWord(std::string_view word, std::vector<Symbol>* syms, std::vector<Merge>* pair_scratch,
                  std::string* mapped) const {
    if (o_.ignore_merges ||
        (o_.whole_newline_runs && word.find_first_not_of('\n') == std::string_view::npos)) {
      absl::string_view key(word.data(), word.size());
      if (o_.byte_level) {
        mapped->clear();
        for (unsigned char b : word) AppendUtf8(Bytes().byte_to_cp[b], mapped);
        key = *mapped;
      }
      if (auto it = token_to_id_.find(key); it != token_to_id_.end()) {
        syms->push_back({it->second, 0, static_cast<uint32_t>(word.size()), true});
        return;
      }
    }
    InitialSymbols(word, 0, syms);
    MergeSymbols(syms, pair_scratch);
  }

  void InitialSymbols(std::string_view word, uint32_t at, std::vector<Symbol>* syms) const {
    if (o_.byte_level) {
      for (size_t i = 0; i < word.size(); ++i) {
        if (byte_token_[static_cast<unsigned char>(word[i])] < 0) continue;
        syms->push_back({byte_token_[static_cast<unsigned char>(word[i])],
                         static_cast<uint32_t>(at + i), static_cast<uint32_t>(at + i + 1), true});
      }
      return;
    }
    size_t i = 0;
    while (i < word.size()) {
      const size_t len = std::min<size_t>(Utf8Length(static_cast<unsigned char>(word[i])), word.size() - i);
      const std::string_view ch = word.substr(i, len);
      const uint32_t b = at + static_cast<uint32_t>(i);
      if (auto it = token_to_id_.find(absl::string_view(ch.data(), ch.size())); it != token_to_id_.end()) {
        syms->push_back({it->second, b, static_cast<uint32_t>(b + len), true});
      } else if (o_.byte_fallback &&
                 (o_.gguf_raw || byte_token_[static_cast<unsigned char>(ch[0])] >= 0)) {
        for (size_t k = 0; k < len; ++k) {
          int32_t id = byte_token_[static_cast<unsigned char>(ch[k])];
          if (id < 0) {
            if (o_.gguf_raw) continue;  // llama.cpp drops a byte without a <0xAB> token
            id = vocab().unk.value_or(0);
          }
          syms->push_back({id, static_cast<uint32_t>(b + k), static_cast<uint32_t>(b + k + 1), false});
        }
      } else {
        // HF BPE fuses consecutive unknown characters into one unk.
        if (!syms->empty() && !syms->back().mergeable && vocab().unk &&
            syms->back().id == *vocab().unk && syms->back().end == b) {
          syms->back().end = static_cast<uint32_t>(b + len);
        } else {
          syms->push_back({vocab().unk.value_or(0), b, static_cast<uint32_t>(b + len), false});
        }
      }
      i += len;
    }
  }

  // Lowest-rank adjacent pair first; ties go to the leftmost pair. Short
  // words (almost all) scan an array of pair ranks; long ones (a 100 KB
  // run of letters is one GPT-2 word) use a heap over a linked list, so a
  // word costs O(n log n), never O(n^2).
  void MergeSymbols(std::vector<Symbol>* syms, std::vector<Merge>* scratch) const {
    if (syms->size() < 2) return;
    if (syms->size() > 64) return MergeSymbolsHeap(syms);
    std::vector<Symbol>& s = *syms;
    std::vector<Merge>& pair = *scratch;
    pair.resize(s.size() - 1);
    for (size_t i = 0; i + 1 < s.size(); ++i) pair[i] = Lookup(s[i], s[i + 1]);
    while (s.size() > 1) {
      size_t best = 0;
      int32_t best_rank = kNoRank;
      for (size_t i = 0; i < pair.size(); ++i) {
        if (pair[i].rank < best_rank) {
          best_rank = pair[i].rank;
          best = i;
        }
      }
      if (best_rank == kNoRank) break;
      s[best].id = pair[best].id;
      s[best].end = s[best + 1].end;
      s.erase(s.begin() + best + 1);
      pair.erase(pair.begin() + best);
      if (best + 1 < s.size()) pair[best] = Lookup(s[best], s[best + 1]);
      if (best > 0) pair[best - 1] = Lookup(s[best - 1], s[best]);
    }
  }

  void MergeSymbolsHeap(std::vector<Symbol>* syms) const {
    std::vector<Symbol>& s = *syms;
    const int n = static_cast<int>(s.size());
    std::vector<int> prev(n), next(n);
    std::vector<bool> alive(n, true);
    for (int i = 0; i < n; ++i) {
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
    }
    struct Cand {
      int32_t rank;
      int left;
      int32_t left_id, right_id;  // to detect stale entries
      bool operator>(const Cand& o) const {
        return rank != o.rank ? rank > o.rank : left > o.left;
      }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    auto push = [&](int l) {
      if (l < 0 || next[l] < 0) return;
      const Merge m = Lookup(s[l], s[next[l]]);
      if (m.rank != kNoRank) heap.push({m.rank, l, s[l].id, s[next[l]].id});
    };
    for (int i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
      const Cand c = heap.top();
      heap.pop();
      const int l = c.left;
      if (!alive[l] || next[l] < 0) continue;
      const int r = next[l];
      if (s[l].id != c.left_id || s[r].id != c.right_id) continue;  // stale
      const Merge m = Lookup(s[l], s[r]);
      s[l].id = m.id;
      s[l].end = s[r].end;
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

  static constexpr int32_t kNoRank = INT32_MAX;
  Merge Lookup(const Symbol& a, const Symbol& b) const {
    if (!a.mergeable || !b.mergeable) return {kNoRank, -1};
    auto it = merges_.find(Key(a.id, b.id));
    return it == merges_.end() ? Merge{kNoRank, -1} : it->second;
  }

  BpeOptions o_;
  absl::flat_hash_map<std::string, int32_t> token_to_id_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  int32_t byte_token_[256];
  std::vector<SplitRegex> regexes_;
  mutable WordCache<CachedTokens> cache_;
};

}  // namespace

bool ByteLevelDecode(std::string_view piece, std::string* bytes) {
  bytes->clear();
  size_t i = 0;
  while (i < piece.size()) {
    const uint32_t cp = DecodeUtf8(piece, &i);
    if (cp >= 324 || Bytes().cp_to_byte[cp] < 0) return false;
    bytes->push_back(static_cast<char>(Bytes().cp_to_byte[cp]));
  }
  return true;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeBpe(Vocab vocab,
                                                   const std::vector<std::string>& merges,
                                                   const BpeOptions& options) {
  if (absl::Status s = ValidateVocab(&vocab); !s.ok()) return s;
  const size_t n = vocab.pieces.size();
  for (size_t i = 0; i < n; ++i) {
    const std::string& p = vocab.pieces[i];
    std::string b;
    if (vocab.types[i] == TokenType::kControl || vocab.types[i] == TokenType::kUserDefined) {
      b = p;  // added tokens are stored as text
    } else if (options.byte_level) {
      if (!ByteLevelDecode(p, &b)) b = p;
    } else {
      const int byte = options.byte_fallback ? ParseBytePiece(p) : -1;
      if (byte >= 0) {
        b.assign(1, static_cast<char>(byte));
        if (vocab.types[i] == TokenType::kNormal) vocab.types[i] = TokenType::kByte;
      } else {
        b = options.metaspace ? ReplaceAll(p, kMetaSpace, " ") : p;
      }
    }
    vocab.bytes[i] = std::move(b);
  }
  auto t = std::make_unique<BpeTokenizer>(std::move(vocab), options);
  if (absl::Status s = t->Init(merges); !s.ok()) return s;
  return std::unique_ptr<Tokenizer>(std::move(t));
}

}  // namespace tokenizer_internal
}  // namespace vocabd
