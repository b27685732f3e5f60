// SentencePiece Unigram (trainer_spec.model_type = UNIGRAM; HF "Unigram";
// GGUF tokenizer.ggml.model = "t5"), own code after sentencepiece
// src/unigram_model.cc (Model::EncodeOptimized, the default encoder) and
// sentencepiece_processor.cc (PopulateSentencePieceText).
//
//   text ─normalize (spm_normalizer.h)─► "▁Hello▁world"
//        ▼
//   Viterbi over byte positions of the normalized text, one character at a
//   time (position s, best[s] the best path score ending at s, best[0] = 0):
//     for every vocabulary piece p (NORMAL, USER_DEFINED; UNUSED pieces are
//     skipped) that starts at s and ends at e:
//       score(p) = log-probability from the model, or for USER_DEFINED
//                  len(p) * max_score - 0.1 (bytes; max_score = the largest
//                  NORMAL score, at least FLT_MIN, as sentencepiece seeds it)
//       best[e] = best[s] + score(p) if larger (computed in double, stored
//                 as float; ties keep the first candidate: shorter pieces,
//                 earlier starts)
//     when no piece is exactly the character at s: unk covers it, with
//       score min_score - 10 (min over NORMAL scores; kUnkPenalty), in float
//   back-track from the end
//        ▼
//   each piece -> its id; an unk piece -> its bytes as <0xAB> pieces
//   (byte_fallback; a missing byte piece is unk) or unk, a run of unks
//   merged into one (sentencepiece merges consecutive unknown pieces).
//
// Offsets: a piece covering normalized bytes [b, e) covers input
// [norm_to_orig[b], norm_to_orig[e]); the byte pieces of a character all
// get the character's span (vocabd's convention for every kind; see
// kinds.h).
#include <algorithm>
#include <cfloat>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/tokenizer/kinds.h"
#include "lib/tokenizer/piece_trie.h"
#include "lib/tokenizer/spm_normalizer.h"

namespace vocabd {
namespace tokenizer_internal {
namespace {

class UnigramTokenizer final : public VocabTokenizer {
 public:
  UnigramTokenizer(Vocab vocab, SpmNormalizer normalizer, bool byte_fallback)
      : VocabTokenizer(std::move(vocab)),
        normalizer_(std::move(normalizer)),
        byte_fallback_(byte_fallback) {
    strip_leading_space_ = normalizer_.options().add_dummy_prefix;
  }
  std::string kind() const override { return "unigram"; }
  void set_strip_while_empty(bool v) { strip_while_empty_ = v; }

  void Init() {
    const Vocab& v = vocab();
    unk_ = *v.unk;
    float min_score = FLT_MAX, max_score = FLT_MIN;
    std::vector<std::pair<std::string, int32_t>> pieces;
    std::fill(byte_token_.begin(), byte_token_.end(), -1);
    for (size_t i = 0; i < v.pieces.size(); ++i) {
      const TokenType t = v.types[i];
      if (t == TokenType::kNormal) {
        min_score = std::min(min_score, v.scores[i]);
        max_score = std::max(max_score, v.scores[i]);
      }
      if (t == TokenType::kByte) {
        const int b = ParseBytePiece(v.pieces[i]);
        if (b >= 0 && byte_token_[b] < 0) byte_token_[b] = static_cast<int32_t>(i);
      }
      if ((t == TokenType::kNormal || t == TokenType::kUserDefined || t == TokenType::kUnused) &&
          !v.pieces[i].empty()) {
        pieces.emplace_back(v.pieces[i], static_cast<int32_t>(i));
      }
    }
    max_score_ = max_score;
    unk_score_ = min_score - 10.0f;  // kUnkPenalty
    trie_.Build(pieces);
    // Each node's piece and its score, so the search reads one array.
    node_.assign(static_cast<size_t>(trie_.node_count()), NodePiece{});
    for (int32_t n = 0; n < trie_.node_count(); ++n) {
      const int32_t id = trie_.Value(n);
      if (id < 0 || v.types[id] == TokenType::kUnused) continue;
      const size_t length = v.pieces[id].size();
      node_[n].id = id;
      node_[n].score = v.types[id] == TokenType::kUserDefined
                           ? static_cast<double>(static_cast<float>(length) * max_score_) - 0.1
                           : static_cast<double>(v.scores[id]);
    }
  }

 protected:
  absl::Status EncodeSegment(std::string_view segment, int64_t base, std::vector<int32_t>* ids,
                             std::vector<std::pair<int64_t, int64_t>>* offsets) const override {
    std::string norm;
    std::vector<uint32_t> orig;  // for offsets only
    normalizer_.Normalize(segment, &norm, offsets != nullptr ? &orig : nullptr);
    const size_t size = norm.size();
    if (size == 0) return absl::OkStatus();
    struct Best {
      float score = 0.0f;
      int32_t start = -1;
      int32_t id = -1;
    };
    std::vector<Best> best(size + 1);
    for (size_t s = 0; s < size;) {
      const float till = best[s].score;
      const size_t mblen = std::min<size_t>(Utf8Length(static_cast<unsigned char>(norm[s])), size - s);
      bool has_single = false;
      int32_t node = 0;
      for (size_t k = s; k < size;) {
        node = trie_.Child(node, static_cast<uint8_t>(norm[k]));
        if (node < 0) break;
        ++k;
        const NodePiece& piece = node_[static_cast<size_t>(node)];
        if (piece.id < 0) continue;
        const int32_t id = piece.id;
        const size_t length = k - s;
        const double cand = piece.score + static_cast<double>(till);
        Best& target = best[k];
        if (target.start == -1 || cand > static_cast<double>(target.score)) {
          target.score = static_cast<float>(cand);
          target.start = static_cast<int32_t>(s);
          target.id = id;
        }
        if (length == mblen) has_single = true;
      }
      if (!has_single) {
        Best& target = best[s + mblen];
        const float cand = unk_score_ + till;
        if (target.start == -1 || cand > target.score) {
          target.score = cand;
          target.start = static_cast<int32_t>(s);
          target.id = unk_;
        }
      }
      s += mblen;
    }
    // Back-track, then emit left to right.
    std::vector<std::pair<uint32_t, int32_t>> path;  // (start, id), end = next start
    for (size_t e = size; e > 0;) {
      path.emplace_back(static_cast<uint32_t>(best[e].start), best[e].id);
      e = static_cast<size_t>(best[e].start);
    }
    std::reverse(path.begin(), path.end());
    bool prev_unk = false;
    for (size_t k = 0; k < path.size(); ++k) {
      const uint32_t b = path[k].first;
      const uint32_t e = k + 1 < path.size() ? path[k + 1].first : static_cast<uint32_t>(size);
      const int32_t id = path[k].second;
      const bool is_unk = id == unk_;
      const int64_t ob = offsets != nullptr ? base + orig[b] : 0;
      const int64_t oe = offsets != nullptr ? base + orig[e] : 0;
      if (is_unk && byte_fallback_) {
        for (uint32_t i = b; i < e; ++i) {
          const int32_t bid = byte_token_[static_cast<unsigned char>(norm[i])];
          ids->push_back(bid >= 0 ? bid : unk_);
          if (offsets) offsets->emplace_back(ob, oe);
        }
      } else if (is_unk && prev_unk) {
        if (offsets) offsets->back().second = oe;
      } else {
        ids->push_back(id);
        if (offsets) offsets->emplace_back(ob, oe);
      }
      prev_unk = is_unk;
    }
    return absl::OkStatus();
  }

 private:
  SpmNormalizer normalizer_;
  bool byte_fallback_;
  int32_t unk_ = 0;
  float max_score_ = FLT_MIN;
  float unk_score_ = 0.0f;
  std::array<int32_t, 256> byte_token_;
  PieceTrie trie_;
  // Per trie node: the NORMAL / USER_DEFINED piece ending there (id -1:
  // none, or UNUSED) and its score: the model's, or for USER_DEFINED
  // len * max_score - 0.1 (sentencepiece's).
  struct NodePiece {
    int32_t id = -1;
    double score = 0.0;
  };
  std::vector<NodePiece> node_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeUnigram(Vocab vocab, const SentencePieceOptions& options,
                                                       bool byte_fallback) {
  SpmNormalizerOptions no;
  no.precompiled_charsmap = options.precompiled_charsmap;
  no.field = options.charsmap_field.empty() ? absl::StrCat(vocab.source, ": precompiled_charsmap")
                                            : options.charsmap_field;
  no.add_dummy_prefix = options.add_dummy_prefix;
  no.remove_extra_whitespaces = options.remove_extra_whitespaces;
  no.escape_whitespaces = options.escape_whitespaces;
  for (size_t i = 0; i < vocab.pieces.size(); ++i) {
    if (vocab.types[i] == TokenType::kUserDefined) no.user_defined.push_back(vocab.pieces[i]);
  }
  absl::StatusOr<SpmNormalizer> normalizer = SpmNormalizer::Create(std::move(no));
  if (!normalizer.ok()) return normalizer.status();
  auto tok = std::make_unique<UnigramTokenizer>(std::move(vocab), *std::move(normalizer), byte_fallback);
  tok->set_strip_while_empty(options.decode_strip_while_empty);
  tok->Init();
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace tokenizer_internal
}  // namespace vocabd
