// SentencePiece tokenizers on Debian's libsentencepiece.
//
// A vocabulary without a .model file (GGUF "llama", llama2.c tok*.bin) is
// handed to libsentencepiece as a ModelProto serialized here by hand (lib/
// does not include protobuf). Fields (sentencepiece_model.proto):
//
//   ModelProto      1 pieces (repeated SentencePiece)  2 trainer_spec
//                   3 normalizer_spec
//   SentencePiece   1 piece (string)  2 score (float)  3 type (enum:
//                   1 NORMAL 2 UNKNOWN 3 CONTROL 4 USER_DEFINED 5 UNUSED 6 BYTE)
//   TrainerSpec     3 model_type (2 = BPE)  35 byte_fallback  40 unk_id
//                   41 bos_id  42 eos_id  43 pad_id
//   NormalizerSpec  1 name ("identity")  3 add_dummy_prefix
//                   4 remove_extra_whitespaces  5 escape_whitespaces
#include <array>
#include <cstring>
#include <mutex>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "lib/tokenizer/kinds.h"
#include "lib/tokenizer/spm_processor.h"

namespace vocabd {
namespace tokenizer_internal {
namespace {

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
void PutTag(int field, int wire, std::string* out) {
  PutVarint((static_cast<uint64_t>(field) << 3) | wire, out);
}
void PutBytes(int field, std::string_view b, std::string* out) {
  PutTag(field, 2, out);
  PutVarint(b.size(), out);
  out->append(b);
}
void PutVarintField(int field, int64_t v, std::string* out) {
  PutTag(field, 0, out);
  PutVarint(static_cast<uint64_t>(v), out);
}
void PutFloat(int field, float f, std::string* out) {
  PutTag(field, 5, out);
  char b[4];
  std::memcpy(b, &f, 4);
  out->append(b, 4);
}

// Reads NormalizerSpec.add_dummy_prefix (default true) from a serialized
// ModelProto without a protobuf dependency. Returns true when absent or
// unparsable (libsentencepiece itself validates the proto).
bool ReadVarint(std::string_view s, size_t* p, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *p < s.size(); shift += 7) {
    const auto b = static_cast<unsigned char>(s[(*p)++]);
    *v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}
// Calls fn(field, wire, value, bytes) for each field of message `s`.
template <typename F>
bool ForEachField(std::string_view s, F fn) {
  size_t p = 0;
  while (p < s.size()) {
    uint64_t tag, v = 0;
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
      p += 4;
    } else if (wire == 2) {
      uint64_t len;
      if (!ReadVarint(s, &p, &len) || len > s.size() - p) return false;
      bytes = s.substr(p, len);
      p += len;
    } else {
      return false;
    }
    fn(static_cast<int>(tag >> 3), wire, v, bytes);
  }
  return true;
}
bool ModelAddsDummyPrefix(std::string_view model) {
  bool add = true;
  ForEachField(model, [&](int field, int wire, uint64_t, std::string_view bytes) {
    if (field != 3 || wire != 2) return;
    ForEachField(bytes, [&](int f, int w, uint64_t v, std::string_view) {
      if (f == 3 && w == 0) add = v != 0;
    });
  });
  return add;
}

class SentencePieceTokenizer final : public VocabTokenizer {
 public:
  SentencePieceTokenizer(Vocab vocab, std::unique_ptr<SpmProcessor> spp,
                         bool add_dummy_prefix)
      : VocabTokenizer(std::move(vocab)), spp_(std::move(spp)), add_dummy_prefix_(add_dummy_prefix) {
    strip_leading_space_ = add_dummy_prefix;
  }
  std::string kind() const override { return "sentencepiece"; }

  // Word mode: `word_spp` is the same model without a normalizer (no dummy
  // prefix, no whitespace escaping). Used when no piece has "▁" after
  // another character, so no BPE merge can cross the start of a "▁..."
  // word: the text is cut before every "▁" that follows a non-"▁"
  // character, each word is encoded once (libsentencepiece) and cached.
  // Same ids as encoding the whole text (the fixture tests check both).
  void EnableWordMode(std::unique_ptr<SpmProcessor> word_spp) { word_spp_ = std::move(word_spp); }

 protected:
  absl::Status EncodeSegment(std::string_view segment, int64_t base, std::vector<int32_t>* ids,
                             std::vector<std::pair<int64_t, int64_t>>* offsets) const override {
    if (word_spp_ != nullptr) return EncodeWords(segment, base, ids, offsets);
    std::string error;
    if (!spp_->Encode(segment, ids, offsets, base, &error)) {
      return absl::InternalError(absl::StrCat(vocab().source, ": sentencepiece: ", error));
    }
    return absl::OkStatus();
  }

 private:
  using Pieces = std::vector<std::pair<int32_t, uint32_t>>;  // (id, byte length)
  static constexpr size_t kShards = 16;
  static constexpr size_t kMaxCachedWordBytes = 128;
  // At most 16 x 4096 words cached (a few MB), a shard is cleared when full.
  static constexpr size_t kMaxEntriesPerShard = 1 << 12;
  struct Shard {
    std::mutex mu;
    absl::flat_hash_map<std::string, Pieces> map;
  };

  absl::Status EncodeWord(std::string_view word, Pieces* out) const {
    const size_t h = absl::Hash<absl::string_view>()(absl::string_view(word.data(), word.size()));
    const bool cacheable = word.size() <= kMaxCachedWordBytes;
    Shard& shard = shards_[h % kShards];
    if (cacheable) {
      std::lock_guard<std::mutex> lock(shard.mu);
      auto it = shard.map.find(absl::string_view(word.data(), word.size()));
      if (it != shard.map.end()) {
        *out = it->second;
        return absl::OkStatus();
      }
    }
    std::vector<int32_t> wids;
    std::vector<std::pair<int64_t, int64_t>> woffs;
    std::string error;
    if (!word_spp_->Encode(word, &wids, &woffs, 0, &error)) {
      return absl::InternalError(absl::StrCat(vocab().source, ": sentencepiece: ", error));
    }
    out->clear();
    for (size_t k = 0; k < wids.size(); ++k) {
      out->emplace_back(wids[k], static_cast<uint32_t>(woffs[k].second - woffs[k].first));
    }
    if (cacheable) {
      std::lock_guard<std::mutex> lock(shard.mu);
      if (shard.map.size() >= kMaxEntriesPerShard) shard.map.clear();
      shard.map.emplace(std::string(word), *out);
    }
    return absl::OkStatus();
  }

  absl::Status EncodeWords(std::string_view segment, int64_t base, std::vector<int32_t>* ids,
                           std::vector<std::pair<int64_t, int64_t>>* offsets) const {
    // Normalize: [▁] + text with " " -> "▁"; orig[k] = segment byte of
    // normalized byte k.
    std::string norm;
    std::vector<uint32_t> orig;
    norm.reserve(segment.size() + 8);
    orig.reserve(segment.size() + 8);
    if (add_dummy_prefix_) {
      norm.append(kMetaSpace);
      orig.insert(orig.end(), 3, 0);
    }
    for (size_t i = 0; i < segment.size(); ++i) {
      if (segment[i] == ' ') {
        norm.append(kMetaSpace);
        orig.insert(orig.end(), 3, static_cast<uint32_t>(i));
      } else {
        norm.push_back(segment[i]);
        orig.push_back(static_cast<uint32_t>(i));
      }
    }
    orig.push_back(static_cast<uint32_t>(segment.size()));
    Pieces pieces;
    size_t start = 0;
    auto is_meta = [&](size_t k) {
      return k + 3 <= norm.size() && norm.compare(k, 3, kMetaSpace.data(), 3) == 0;
    };
    auto flush = [&](size_t end) -> absl::Status {
      if (end <= start) return absl::OkStatus();
      if (absl::Status s = EncodeWord(std::string_view(norm).substr(start, end - start), &pieces); !s.ok()) {
        return s;
      }
      size_t at = start;
      for (const auto& [id, len] : pieces) {
        ids->push_back(id);
        if (offsets) offsets->emplace_back(base + orig[at], base + orig[std::min(at + len, norm.size())]);
        at += len;
      }
      start = end;
      return absl::OkStatus();
    };
    size_t k = 0;
    bool prev_meta = true;
    while (k < norm.size()) {
      if (is_meta(k)) {
        if (!prev_meta) {
          if (absl::Status s = flush(k); !s.ok()) return s;
        }
        prev_meta = true;
        k += 3;
      } else {
        prev_meta = false;
        k += Utf8Length(static_cast<unsigned char>(norm[k]));
      }
    }
    return flush(norm.size());
  }

  std::unique_ptr<SpmProcessor> spp_;
  std::unique_ptr<SpmProcessor> word_spp_;
  bool add_dummy_prefix_;
  mutable std::array<Shard, kShards> shards_;
};

// Decoded bytes of a SentencePiece piece.
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

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeSentencePieceFromVocab(
    Vocab vocab, const SentencePieceOptions& options) {
  if (absl::Status s = ValidateVocab(&vocab); !s.ok()) return s;
  const size_t n = vocab.pieces.size();
  // SentencePiece allows one UNKNOWN piece: the unk id (else the first);
  // other UNKNOWN-typed tokens (Phi-3's GGUF marks added tokens so) become
  // control tokens.
  int unk = -1;
  if (vocab.unk && vocab.types[*vocab.unk] == TokenType::kUnknown) unk = *vocab.unk;
  bool byte_fallback = false;
  for (size_t i = 0; i < n; ++i) {
    if (vocab.types[i] == TokenType::kUnknown) {
      if (unk < 0) unk = static_cast<int>(i);
      if (static_cast<int>(i) != unk) {
        vocab.types[i] = TokenType::kControl;
      }
    }
    if (vocab.types[i] == TokenType::kByte) {
      if (ParseBytePiece(vocab.pieces[i]) < 0) {
        return absl::InvalidArgumentError(absl::StrCat(vocab.source, ": token ", i, " \"",
                                                       vocab.pieces[i],
                                                       "\" is of type BYTE but not <0xXX>"));
      }
      byte_fallback = true;
    }
  }
  if (unk < 0) {
    // SentencePiece needs an unknown piece: the vocabulary's unk id if set.
    if (vocab.unk && vocab.types[*vocab.unk] != TokenType::kControl) {
      unk = *vocab.unk;
      vocab.types[unk] = TokenType::kUnknown;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(vocab.source, ": no token of type UNKNOWN (SentencePiece needs one)"));
    }
  }
  std::string model;
  model.reserve(n * 24);
  for (size_t i = 0; i < n; ++i) {
    std::string sp;
    PutBytes(1, vocab.pieces[i], &sp);
    PutFloat(2, vocab.scores[i], &sp);
    PutVarintField(3, static_cast<int>(vocab.types[i]), &sp);
    PutBytes(1, sp, &model);
  }
  std::string trainer;
  PutVarintField(3, 2, &trainer);  // BPE
  PutVarintField(35, byte_fallback ? 1 : 0, &trainer);
  PutVarintField(40, unk, &trainer);
  PutVarintField(41, vocab.bos ? *vocab.bos : -1, &trainer);
  PutVarintField(42, vocab.eos ? *vocab.eos : -1, &trainer);
  PutVarintField(43, -1, &trainer);
  PutBytes(2, trainer, &model);
  const std::string pieces_and_trainer = model;
  std::string normalizer;
  PutBytes(1, "identity", &normalizer);
  PutVarintField(3, options.add_dummy_prefix ? 1 : 0, &normalizer);
  PutVarintField(4, options.remove_extra_whitespaces ? 1 : 0, &normalizer);
  PutVarintField(5, 1, &normalizer);
  PutBytes(3, normalizer, &model);

  std::string error;
  std::unique_ptr<SpmProcessor> spp = SpmProcessor::Load(model, &error);
  if (spp == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(vocab.source, ": sentencepiece refused the vocabulary: ", error));
  }
  // Word mode (see SentencePieceTokenizer::EnableWordMode) when no piece
  // has "▁" after another character and spaces are not collapsed.
  bool word_mode = !options.remove_extra_whitespaces;
  for (size_t i = 0; i < n && word_mode; ++i) {
    const std::string& p = vocab.pieces[i];
    size_t k = p.find(kMetaSpace.data(), 0, 3);
    bool seen_other = false;
    for (size_t j = 0; j < p.size();) {
      if (p.compare(j, 3, kMetaSpace.data(), 3) == 0) {
        if (seen_other) word_mode = false;
        j += 3;
      } else {
        seen_other = true;
        ++j;
      }
    }
    (void)k;
  }
  std::unique_ptr<SpmProcessor> word_spp;
  if (word_mode) {
    std::string word_model = pieces_and_trainer;
    std::string plain;
    PutBytes(1, "identity", &plain);
    PutVarintField(3, 0, &plain);
    PutVarintField(4, 0, &plain);
    PutVarintField(5, 0, &plain);
    PutBytes(3, plain, &word_model);
    word_spp = SpmProcessor::Load(word_model, &error);
  }
  vocab.bytes.resize(n);
  for (size_t i = 0; i < n; ++i) vocab.bytes[i] = SpmPieceBytes(vocab.pieces[i], vocab.types[i]);
  auto tok = std::make_unique<SentencePieceTokenizer>(std::move(vocab), std::move(spp),
                                                      options.add_dummy_prefix);
  if (word_spp != nullptr) tok->EnableWordMode(std::move(word_spp));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeSentencePieceFromModelFile(
    std::string serialized, std::string source, bool add_bos, bool add_eos) {
  std::string error;
  std::unique_ptr<SpmProcessor> spp = SpmProcessor::Load(serialized, &error);
  if (spp == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a sentencepiece model: ", error));
  }
  Vocab v;
  v.source = std::move(source);
  const int n = spp->size();
  v.pieces.resize(n);
  v.scores.resize(n);
  v.types.resize(n);
  for (int i = 0; i < n; ++i) {
    v.pieces[i] = spp->piece(i);
    v.scores[i] = spp->score(i);
    const TokenType t = static_cast<TokenType>(spp->type(i));
    v.types[i] = t;
  }
  if (spp->bos_id() >= 0) v.bos = spp->bos_id();
  if (spp->eos_id() >= 0) v.eos = spp->eos_id();
  if (spp->unk_id() >= 0) v.unk = spp->unk_id();
  v.add_bos = add_bos;
  v.add_eos = add_eos;
  if (absl::Status s = ValidateVocab(&v); !s.ok()) return s;
  v.bytes.resize(n);
  for (int i = 0; i < n; ++i) v.bytes[i] = SpmPieceBytes(v.pieces[i], v.types[i]);
  const bool dummy = ModelAddsDummyPrefix(serialized);
  return std::unique_ptr<Tokenizer>(new SentencePieceTokenizer(std::move(v), std::move(spp), dummy));
}

}  // namespace tokenizer_internal
}  // namespace vocabd
