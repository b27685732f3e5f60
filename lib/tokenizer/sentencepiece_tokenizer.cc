// SentencePiece BPE, implemented here (tokenizer-algorithm core), and the
// ModelProto reader for BPE and Unigram models (Unigram: unigram_tokenizer.cc;
// the normalizer with precompiled_charsmap: spm_normalizer.cc).
//
// Why not Debian's libsentencepiece: libsentencepiece.so.0 (0.1.97) bundles
// its own protobuf-lite 3.14 and exports those symbols; every vocabd binary
// also links libprotobuf.so.32 (3.21), and the two copies interpose each
// other's static initialisers, so the process crashes before main (or, with
// libprotobuf first, sentencepiece's generated code aborts on the version
// check). No static libsentencepiece is packaged and RTLD_DEEPBIND is refused
// by ASan/TSan, so no usable library fits: the BPE encoder and the
// ModelProto reader below are our own. Correctness oracles: llama.cpp's
// llama-spm / phi-3 fixtures (Hugging Face ids) and Debian
// python3-sentencepiece's ids for stories260K (tests/lib/tokenizer).
//
// Algorithm (sentencepiece src/bpe_model.cc, normalizer.cc):
//
//   text ─normalize─► "▁Once▁upon"            (spm_normalizer.h: charsmap
//        │                                      rules, add_dummy_prefix "▁",
//        │                                      remove_extra_whitespaces
//        │                                      trims and collapses ' ',
//        │                                      escape_whitespaces ' '->"▁")
//        ▼
//   symbols = characters; user-defined pieces matched whole (longest first)
//        ▼
//   repeat: among adjacent symbol pairs whose concatenation is a vocabulary
//   piece (NORMAL, USER_DEFINED or UNUSED), merge the one whose piece has
//   the highest score (ties: the leftmost pair)
//        ▼
//   each symbol -> its piece id; an UNUSED piece is split back into the
//   pair it was merged from; a symbol that is no piece -> its bytes as
//   <0xXX> pieces (byte_fallback) or unk (a run of unks is one unk).
//
// ModelProto fields read/written (sentencepiece_model.proto; protobuf wire
// format by hand, lib/ does not include protobuf):
//
//   ModelProto      1 pieces (repeated SentencePiece)  2 trainer_spec
//                   3 normalizer_spec
//   SentencePiece   1 piece (string)  2 score (float)  3 type (enum:
//                   1 NORMAL 2 UNKNOWN 3 CONTROL 4 USER_DEFINED 5 UNUSED 6 BYTE)
//   TrainerSpec     3 model_type (1 UNIGRAM default, 2 BPE, 3 WORD, 4 CHAR)
//                   24 treat_whitespace_as_suffix  35 byte_fallback
//                   40 unk_id  41 bos_id  42 eos_id
//   NormalizerSpec  1 name  2 precompiled_charsmap  3 add_dummy_prefix
//                   4 remove_extra_whitespaces  5 escape_whitespaces
//                   (3, 4, 5 default true)
#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <memory>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "lib/tokenizer/kinds.h"
#include "lib/tokenizer/spm_normalizer.h"
#include "lib/tokenizer/word_cache.h"

namespace vocabd {
namespace tokenizer_internal {
namespace {

// ---- protobuf wire format -------------------------------------------------
bool ReadVarint(std::string_view s, size_t* p, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *p < s.size(); shift += 7) {
    const auto b = static_cast<unsigned char>(s[(*p)++]);
    *v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}
// Calls fn(field, wire, varint, fixed32, bytes) for each field of message
// `s`; false when `s` is not well-formed wire format.
template <typename F>
bool ForEachField(std::string_view s, F fn) {
  size_t p = 0;
  while (p < s.size()) {
    uint64_t tag, v = 0;
    uint32_t f32 = 0;
    if (!ReadVarint(s, &p, &tag)) return false;
    const int wire = static_cast<int>(tag & 7);
    std::string_view bytes;
    if (wire == 0) {
      if (!ReadVarint(s, &p, &v)) return false;
    } else if (wire == 1) {
      if (s.size() - p < 8) return false;
      p += 8;
    } else if (wire == 5) {
      if (s.size() - p < 4) return false;
      std::memcpy(&f32, s.data() + p, 4);
      p += 4;
    } else if (wire == 2) {
      uint64_t len;
      if (!ReadVarint(s, &p, &len) || len > s.size() - p) return false;
      bytes = s.substr(p, len);
      p += len;
    } else {
      return false;
    }
    if ((tag >> 3) == 0) return false;
    if (!fn(static_cast<int>(tag >> 3), wire, v, f32, bytes)) return false;
  }
  return true;
}

// The model settings the encoder uses.
struct SpmSpec {
  bool byte_fallback = false;
  bool escape_whitespaces = true;
};

class SentencePieceTokenizer final : public VocabTokenizer {
 public:
  SentencePieceTokenizer(Vocab vocab, SpmSpec spec, SpmNormalizer normalizer)
      : VocabTokenizer(std::move(vocab)), spec_(spec), normalizer_(std::move(normalizer)) {
    strip_leading_space_ = normalizer_.options().add_dummy_prefix;
  }
  void set_strip_while_empty(bool v) { strip_while_empty_ = v; }
  std::string kind() const override { return "sentencepiece"; }

  // Builds the piece table; *unk is the unknown id.
  absl::Status Init(int32_t unk) {
    const Vocab& v = vocab();
    unk_ = unk;
    std::fill(byte_token_.begin(), byte_token_.end(), -1);
    for (size_t i = 0; i < v.pieces.size(); ++i) {
      const TokenType t = v.types[i];
      const std::string& p = v.pieces[i];
      if (t == TokenType::kByte) {
        const int b = ParseBytePiece(p);
        if (b >= 0 && byte_token_[b] < 0) byte_token_[b] = static_cast<int32_t>(i);
        continue;
      }
      if (p.empty()) continue;
      if (t != TokenType::kNormal && t != TokenType::kUserDefined && t != TokenType::kUnused) continue;
      const auto [it, inserted] = piece_to_id_.emplace(p, static_cast<int32_t>(i));
      if (!inserted) continue;  // first id wins
      if (t == TokenType::kUnused) has_unused_ = true;
      if (t == TokenType::kUserDefined) {
        user_defined_[static_cast<unsigned char>(p[0])].push_back(static_cast<int32_t>(i));
      }
    }
    for (auto& list : user_defined_) {
      std::stable_sort(list.begin(), list.end(), [&](int32_t a, int32_t b) {
        return v.pieces[a].size() > v.pieces[b].size();
      });
    }
    // Word mode: when no piece has "▁" after another character, no merge
    // crosses the start of a "▁..." word, so the normalized text is cut
    // before every "▁" that follows a non-"▁" character and each distinct
    // word is encoded once and cached. Same ids as encoding the whole text
    // (the fixture and golden tests run texts with many words).
    word_mode_ = spec_.escape_whitespaces;
    for (size_t i = 0; i < v.pieces.size() && word_mode_; ++i) {
      const std::string& p = v.pieces[i];
      bool seen_other = false;
      for (size_t j = 0; j < p.size();) {
        if (p.compare(j, 3, kMetaSpace.data(), 3) == 0) {
          if (seen_other) word_mode_ = false;
          j += 3;
        } else {
          seen_other = true;
          ++j;
        }
      }
    }
    return absl::OkStatus();
  }

 protected:
  absl::Status EncodeSegment(std::string_view segment, int64_t base, std::vector<int32_t>* ids,
                             std::vector<std::pair<int64_t, int64_t>>* offsets) const override {
    std::string norm;
    std::vector<uint32_t> orig;  // normalized byte -> segment byte (size()+1 entries), for offsets
    normalizer_.Normalize(segment, &norm, offsets != nullptr ? &orig : nullptr);
    Pieces pieces;
    const size_t first = ids->size();
    auto emit = [&](size_t start) {
      size_t at = start;
      for (const Out& p : pieces) {
        const int32_t id = p.id;
        const size_t b = at, e = std::min<size_t>(at + p.span, norm.size());
        at += p.advance;
        // A run of unknown symbols is one unk (sentencepiece does so).
        if (id == unk_ && !spec_.byte_fallback && ids->size() > first && ids->back() == unk_) {
          if (offsets) offsets->back().second = base + orig[e];
          continue;
        }
        ids->push_back(id);
        if (offsets) offsets->emplace_back(base + orig[b], base + orig[e]);
      }
    };
    if (!word_mode_) {
      EncodeNormalized(norm, &pieces);
      emit(0);
      return absl::OkStatus();
    }
    size_t start = 0;
    auto flush = [&](size_t end) {
      if (end <= start) return;
      EncodeWordCached(std::string_view(norm).substr(start, end - start), &pieces);
      emit(start);
      start = end;
    };
    size_t k = 0;
    bool prev_meta = true;
    const size_t n = norm.size();
    while (k < n) {
      if (norm[k] == kMetaSpace[0] && k + 2 < n && norm[k + 1] == kMetaSpace[1] && norm[k + 2] == kMetaSpace[2]) {
        if (!prev_meta) flush(k);
        prev_meta = true;
        k += 3;
      } else {
        // On to the next byte 0xE2 (only a "▁" can cut; in UTF-8 0xE2 only
        // starts a character).
        prev_meta = false;
        const void* next = std::memchr(norm.data() + k + 1, kMetaSpace[0], n - k - 1);
        k = next != nullptr ? static_cast<size_t>(static_cast<const char*>(next) - norm.data()) : n;
      }
    }
    flush(norm.size());
    return absl::OkStatus();
  }

 private:
  // One output id: its offsets are normalized bytes [at, at + span), then
  // `at` moves by `advance`. The byte pieces of a character all get the
  // character's span (as Hugging Face's byte fallback does), so offsets
  // never split a character.
  struct Out {
    int32_t id;
    uint32_t span, advance;
  };
  using Pieces = std::vector<Out>;
  struct Symbol {
    uint32_t begin, end;  // in the normalized text
    bool frozen;          // a user-defined piece: never merged
  };
  struct Cand {
    float score;
    uint32_t left;  // symbol index
    bool operator<(const Cand& o) const {  // max-heap: higher score, then leftmost
      return score != o.score ? score < o.score : left > o.left;
    }
  };

  // A word's pieces (offsets relative to the word) from the shared word
  // cache, encoded and cached on a miss.
  void EncodeWordCached(std::string_view word, Pieces* out) const {
    if (cache_.Find(word, [out](const CachedPieces& p) { out->assign(p.begin(), p.end()); })) return;
    EncodeNormalized(word, out);
    if (cache_.Cacheable(word)) cache_.Insert(word, CachedPieces(out->begin(), out->end()));
  }

  // Vocabulary id of norm[begin, end) as a mergeable piece, -1 if none.
  int32_t Find(std::string_view s) const {
    auto it = piece_to_id_.find(absl::string_view(s.data(), s.size()));
    return it == piece_to_id_.end() ? -1 : it->second;
  }

  void EncodeNormalized(std::string_view norm, Pieces* out) const {
    out->clear();
    std::vector<Symbol> syms;
    syms.reserve(norm.size());
    for (size_t i = 0; i < norm.size();) {
      size_t len = 0;
      for (int32_t id : user_defined_[static_cast<unsigned char>(norm[i])]) {
        const std::string& p = vocab().pieces[id];
        if (norm.compare(i, p.size(), p) == 0) {
          len = p.size();
          break;
        }
      }
      const bool frozen = len > 0;
      if (!frozen) len = std::min<size_t>(Utf8Length(static_cast<unsigned char>(norm[i])), norm.size() - i);
      syms.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(i + len), frozen});
      i += len;
    }
    // UNUSED pieces merged into: piece -> the two symbols it came from.
    absl::flat_hash_map<std::string, std::pair<std::string, std::string>> rev_merge;
    if (syms.size() > 1) {
      if (syms.size() <= 64 && !has_unused_) {
        MergeScan(norm, &syms);
      } else {
        MergeHeap(norm, &syms, has_unused_ ? &rev_merge : nullptr);
      }
    }
    for (const Symbol& s : syms) {
      Output(norm.substr(s.begin, s.end - s.begin), rev_merge, out);
    }
  }

  void Output(std::string_view piece,
              const absl::flat_hash_map<std::string, std::pair<std::string, std::string>>& rev_merge,
              Pieces* out) const {
    const int32_t id = Find(piece);
    if (id >= 0 && vocab().types[id] == TokenType::kUnused) {
      auto it = rev_merge.find(absl::string_view(piece.data(), piece.size()));
      if (it != rev_merge.end()) {
        Output(it->second.first, rev_merge, out);
        Output(it->second.second, rev_merge, out);
        return;
      }
    }
    const auto n = static_cast<uint32_t>(piece.size());
    if (id >= 0) {
      out->push_back({id, n, n});
    } else if (spec_.byte_fallback) {
      for (uint32_t k = 0; k < n; ++k) {
        const int32_t b = byte_token_[static_cast<unsigned char>(piece[k])];
        out->push_back({b >= 0 ? b : unk_, n, k + 1 == n ? n : 0u});
      }
    } else {
      out->push_back({unk_, n, n});
    }
  }

  // Short words: scan an array of pair scores (no UNUSED pieces).
  void MergeScan(std::string_view norm, std::vector<Symbol>* syms) const {
    std::vector<Symbol>& s = *syms;
    constexpr float kNone = -std::numeric_limits<float>::infinity();
    std::vector<float> score(s.size() - 1);
    std::vector<bool> has(s.size() - 1);
    auto lookup = [&](size_t i) {
      has[i] = false;
      if (s[i].frozen || s[i + 1].frozen) return;
      const int32_t id = Find(norm.substr(s[i].begin, s[i + 1].end - s[i].begin));
      if (id < 0) return;
      has[i] = true;
      score[i] = vocab().scores[id];
    };
    for (size_t i = 0; i + 1 < s.size(); ++i) lookup(i);
    while (s.size() > 1) {
      size_t best = 0;
      bool found = false;
      float best_score = kNone;
      for (size_t i = 0; i < score.size(); ++i) {
        if (has[i] && (!found || score[i] > best_score)) {
          best_score = score[i];
          best = i;
          found = true;
        }
      }
      if (!found) break;
      s[best].end = s[best + 1].end;
      s.erase(s.begin() + best + 1);
      score.erase(score.begin() + best);
      has.erase(has.begin() + best);
      if (best + 1 < s.size()) lookup(best);
      if (best > 0) lookup(best - 1);
    }
  }

  // Long words (and UNUSED pieces): a heap over a linked list, O(n log n).
  void MergeHeap(std::string_view norm, std::vector<Symbol>* syms,
                 absl::flat_hash_map<std::string, std::pair<std::string, std::string>>* rev_merge) const {
    std::vector<Symbol>& s = *syms;
    const int n = static_cast<int>(s.size());
    std::vector<int> prev(n), next(n);
    for (int i = 0; i < n; ++i) {
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
    }
    struct Entry {
      Cand c;
      uint32_t size;  // byte size of the pair when pushed: stale if changed
      bool operator<(const Entry& o) const { return c < o.c; }
    };
    std::priority_queue<Entry> heap;
    auto push = [&](int l) {
      if (l < 0 || next[l] < 0) return;
      const int r = next[l];
      if (s[l].frozen || s[r].frozen) return;
      const std::string_view piece = norm.substr(s[l].begin, s[r].end - s[l].begin);
      const int32_t id = Find(piece);
      if (id < 0) return;
      heap.push({{vocab().scores[id], static_cast<uint32_t>(l)}, static_cast<uint32_t>(piece.size())});
      if (rev_merge != nullptr && vocab().types[id] == TokenType::kUnused) {
        (*rev_merge)[std::string(piece)] = {
            std::string(norm.substr(s[l].begin, s[l].end - s[l].begin)),
            std::string(norm.substr(s[r].begin, s[r].end - s[r].begin))};
      }
    };
    for (int i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
      const Entry e = heap.top();
      heap.pop();
      const int l = static_cast<int>(e.c.left);
      if (s[l].end == s[l].begin) continue;  // merged away
      const int r = next[l];
      if (r < 0 || s[r].end - s[l].begin != e.size) continue;  // stale
      s[l].end = s[r].end;
      s[r].end = s[r].begin;  // dead
      next[l] = next[r];
      if (next[r] >= 0) prev[next[r]] = l;
      push(prev[l]);
      push(l);
    }
    size_t w = 0;
    for (int i = 0; i < n; ++i) {
      if (s[i].end > s[i].begin) s[w++] = s[i];
    }
    s.resize(w);
  }

  SpmSpec spec_;
  SpmNormalizer normalizer_;
  int32_t unk_ = 0;
  bool has_unused_ = false;
  bool word_mode_ = false;
  absl::flat_hash_map<std::string, int32_t> piece_to_id_;
  std::array<int32_t, 256> byte_token_;
  std::array<std::vector<int32_t>, 256> user_defined_;
  // A word's pieces; one or two live in the cache's slot.
  using CachedPieces = absl::InlinedVector<Out, 2>;
  mutable WordCache<CachedPieces> cache_;  // word mode
};

// Common tail of both factories: one UNKNOWN piece, byte pieces well-formed,
// decoded bytes, the normalizer, the tokenizer of options.model.
absl::StatusOr<std::unique_ptr<Tokenizer>> Build(Vocab vocab, const SentencePieceOptions& options) {
  if (absl::Status s = ValidateVocab(&vocab); !s.ok()) return s;
  const size_t n = vocab.pieces.size();
  bool has_byte_pieces = false;
  // SentencePiece allows one UNKNOWN piece: the unk id (else the first);
  // other UNKNOWN-typed tokens (Phi-3's GGUF marks added tokens so) become
  // control tokens.
  int unk = -1;
  if (vocab.unk && vocab.types[*vocab.unk] == TokenType::kUnknown) unk = *vocab.unk;
  for (size_t i = 0; i < n; ++i) {
    if (vocab.types[i] == TokenType::kUnknown) {
      if (unk < 0) unk = static_cast<int>(i);
      if (static_cast<int>(i) != unk) vocab.types[i] = TokenType::kControl;
    }
    if (vocab.types[i] == TokenType::kByte) {
      if (ParseBytePiece(vocab.pieces[i]) < 0) {
        return absl::InvalidArgumentError(absl::StrCat(vocab.source, ": token ", i, " \"",
                                                       vocab.pieces[i],
                                                       "\" is of type BYTE but not <0xXX>"));
      }
      has_byte_pieces = true;
    }
  }
  if (unk < 0) {
    if (vocab.unk && vocab.types[*vocab.unk] != TokenType::kControl) {
      unk = *vocab.unk;
      vocab.types[unk] = TokenType::kUnknown;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(vocab.source, ": no token of type UNKNOWN (SentencePiece needs one)"));
    }
  }
  vocab.unk = unk;
  vocab.bytes.resize(n);
  for (size_t i = 0; i < n; ++i) vocab.bytes[i] = SpmPieceBytes(vocab.pieces[i], vocab.types[i]);
  const bool byte_fallback = options.byte_fallback.value_or(has_byte_pieces);
  if (options.model == SentencePieceOptions::Model::kUnigram) {
    return MakeUnigram(std::move(vocab), options, byte_fallback);
  }
  SpmNormalizerOptions no;
  no.precompiled_charsmap = options.precompiled_charsmap;
  no.field = options.charsmap_field;
  no.add_dummy_prefix = options.add_dummy_prefix;
  no.remove_extra_whitespaces = options.remove_extra_whitespaces;
  no.escape_whitespaces = options.escape_whitespaces;
  for (size_t i = 0; i < n; ++i) {
    if (vocab.types[i] == TokenType::kUserDefined) no.user_defined.push_back(vocab.pieces[i]);
  }
  absl::StatusOr<SpmNormalizer> normalizer = SpmNormalizer::Create(std::move(no));
  if (!normalizer.ok()) return normalizer.status();
  SpmSpec spec;
  spec.byte_fallback = byte_fallback;
  spec.escape_whitespaces = options.escape_whitespaces;
  auto tok = std::make_unique<SentencePieceTokenizer>(std::move(vocab), spec, *std::move(normalizer));
  tok->set_strip_while_empty(options.decode_strip_while_empty);
  if (absl::Status s = tok->Init(unk); !s.ok()) return s;
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace

// Decoded bytes of a SentencePiece piece. Control pieces (<s>) keep their
// text, as every tokenizer kind here does: Detokenize without
// skip_special_tokens shows them (Hugging Face's convention).
std::string SpmPieceBytes(const std::string& piece, TokenType type) {
  if (type == TokenType::kByte) {
    const int b = ParseBytePiece(piece);
    if (b >= 0) return std::string(1, static_cast<char>(b));
  }
  if (type == TokenType::kNormal || type == TokenType::kUserDefined) {
    return ReplaceAll(piece, kMetaSpace, " ");
  }
  return piece;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeSentencePieceFromVocab(
    Vocab vocab, const SentencePieceOptions& options) {
  return Build(std::move(vocab), options);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeSentencePieceFromModelFile(
    std::string serialized, std::string source, bool add_bos, bool add_eos) {
  Vocab v;
  v.source = source;
  int64_t model_type = 1;  // UNIGRAM unless set
  bool whitespace_suffix = false;
  int64_t unk_id = 0, bos_id = 1, eos_id = 2;
  SentencePieceOptions spec;
  spec.remove_extra_whitespaces = true;  // NormalizerSpec defaults
  spec.byte_fallback = false;            // TrainerSpec default
  spec.decode_strip_while_empty = true;  // python3-sentencepiece's decode
  std::string normalizer_name;
  std::string bad;  // first malformed field
  const bool ok = ForEachField(serialized, [&](int field, int wire, uint64_t, uint32_t,
                                               std::string_view bytes) {
    if (field == 1 && wire == 2) {  // pieces
      std::string piece;
      float score = 0.0f;
      int64_t type = 1;
      const bool piece_ok = ForEachField(bytes, [&](int f, int w, uint64_t vv, uint32_t f32,
                                                    std::string_view b) {
        if (f == 1 && w == 2) piece.assign(b);
        if (f == 2 && w == 5) std::memcpy(&score, &f32, 4);
        if (f == 3 && w == 0) type = static_cast<int64_t>(vv);
        return true;
      });
      if (!piece_ok || type < 1 || type > 6) {
        bad = absl::StrCat("pieces[", v.pieces.size(), "]",
                           piece_ok ? absl::StrCat(".type = ", type, " (1..6)") : " is malformed");
        return false;
      }
      v.pieces.push_back(std::move(piece));
      v.scores.push_back(score);
      v.types.push_back(static_cast<TokenType>(type));
      return true;
    }
    if (field == 2 && wire == 2) {  // trainer_spec
      if (!ForEachField(bytes, [&](int f, int w, uint64_t vv, uint32_t, std::string_view) {
            if (w != 0) return true;
            const auto i32 = static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(vv)));
            if (f == 3) model_type = i32;
            if (f == 24) whitespace_suffix = vv != 0;
            if (f == 35) spec.byte_fallback = vv != 0;
            if (f == 40) unk_id = i32;
            if (f == 41) bos_id = i32;
            if (f == 42) eos_id = i32;
            return true;
          })) {
        bad = "trainer_spec is malformed";
        return false;
      }
      return true;
    }
    if (field == 3 && wire == 2) {  // normalizer_spec
      if (!ForEachField(bytes, [&](int f, int w, uint64_t vv, uint32_t, std::string_view b) {
            if (f == 1 && w == 2) normalizer_name.assign(b);
            if (f == 2 && w == 2) spec.precompiled_charsmap.assign(b);
            if (f == 3 && w == 0) spec.add_dummy_prefix = vv != 0;
            if (f == 4 && w == 0) spec.remove_extra_whitespaces = vv != 0;
            if (f == 5 && w == 0) spec.escape_whitespaces = vv != 0;
            return true;
          })) {
        bad = "normalizer_spec is malformed";
        return false;
      }
      return true;
    }
    return true;
  });
  if (!ok || v.pieces.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": not a sentencepiece model: ",
        !bad.empty() ? bad : !ok ? "not protobuf wire format" : "no pieces (ModelProto field 1)"));
  }
  if (model_type != 1 && model_type != 2) {
    const char* names[] = {"?", "UNIGRAM", "BPE", "WORD", "CHAR"};
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": trainer_spec.model_type = ", model_type, " (",
        model_type >= 1 && model_type <= 4 ? names[model_type] : "unknown",
        "; only UNIGRAM (1) and BPE (2) SentencePiece models are supported)"));
  }
  spec.model = model_type == 1 ? SentencePieceOptions::Model::kUnigram
                               : SentencePieceOptions::Model::kBpe;
  if (whitespace_suffix) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": trainer_spec.treat_whitespace_as_suffix = true is not supported"));
  }
  spec.charsmap_field = absl::StrCat(source, ": normalizer_spec.precompiled_charsmap (name \"",
                                     normalizer_name, "\")");
  const int64_t n = static_cast<int64_t>(v.pieces.size());
  auto id_or_none = [&](int64_t id) -> std::optional<int32_t> {
    if (id < 0 || id >= n) return std::nullopt;
    return static_cast<int32_t>(id);
  };
  if (unk_id < 0 || unk_id >= n) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": trainer_spec.unk_id = ", unk_id, " is outside [0, ", n, ")"));
  }
  v.unk = static_cast<int32_t>(unk_id);
  v.bos = id_or_none(bos_id);
  v.eos = id_or_none(eos_id);
  v.add_bos = add_bos;
  v.add_eos = add_eos;
  // sentencepiece refuses a model whose pieces repeat (ModelInterface
  // "is already defined"), and BYTE pieces without byte_fallback.
  {
    absl::flat_hash_map<std::string_view, size_t> seen;
    for (size_t i = 0; i < v.pieces.size(); ++i) {
      const auto [it, inserted] = seen.emplace(v.pieces[i], i);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(source, ": pieces[", i, "] = \"", v.pieces[i],
                                                       "\" repeats pieces[", it->second, "]"));
      }
      if (v.types[i] == TokenType::kByte && !*spec.byte_fallback) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ": pieces[", i, "] is of type BYTE but trainer_spec.byte_fallback is false"));
      }
    }
  }
  return Build(std::move(v), spec);
}

}  // namespace tokenizer_internal
}  // namespace vocabd
