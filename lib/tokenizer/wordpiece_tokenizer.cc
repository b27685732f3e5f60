// WordPiece (BERT), as Hugging Face `tokenizers` runs it:
//   BertNormalizer   clean_text (drop NUL, U+FFFD and Other-category
//                    characters; whitespace -> " "), CJK ideographs
//                    surrounded by spaces, strip_accents (NFD, drop
//                    non-spacing marks), lowercase
//   BertPreTokenizer split on whitespace; every punctuation character
//                    (ASCII punctuation or Unicode P*) is its own word
//   WordPiece        per word: greedy longest match from the left, pieces
//                    after the first carry the "##" prefix; a word with a
//                    character no piece covers, or longer than
//                    max_input_chars_per_word characters, is [UNK].
// Unicode properties come from ICU (libicu). Offsets map every normalized
// character back to the input character it came from.
#include <unicode/uchar.h>
#include <unicode/unorm2.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "lib/tokenizer/kinds.h"

namespace vocabd {
namespace tokenizer_internal {
namespace {

struct NormChar {
  uint32_t cp;
  uint32_t begin, end;  // input bytes this character came from
};

bool IsChineseChar(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}
bool IsWhitespace(uint32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || u_isUWhiteSpace(static_cast<UChar32>(c));
}
bool IsOther(uint32_t c) {
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR: case U_FORMAT_CHAR: case U_UNASSIGNED: case U_PRIVATE_USE_CHAR:
    case U_SURROGATE:
      return true;
    default:
      return false;
  }
}
bool IsPunctuation(uint32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
      (c >= 123 && c <= 126)) {
    return true;
  }
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_DASH_PUNCTUATION: case U_START_PUNCTUATION: case U_END_PUNCTUATION:
    case U_CONNECTOR_PUNCTUATION: case U_OTHER_PUNCTUATION: case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

class WordPieceTokenizer final : public VocabTokenizer {
 public:
  WordPieceTokenizer(Vocab vocab, WordPieceOptions o) : VocabTokenizer(std::move(vocab)), o_(std::move(o)) {
    const Vocab& v = this->vocab();
    for (size_t i = 0; i < v.pieces.size(); ++i) {
      if (!v.pieces[i].empty()) token_to_id_.emplace(v.pieces[i], static_cast<int32_t>(i));
    }
    UErrorCode err = U_ZERO_ERROR;
    nfd_ = unorm2_getNFDInstance(&err);
    if (U_FAILURE(err)) nfd_ = nullptr;
  }
  std::string kind() const override { return "wordpiece"; }

 protected:
  absl::Status EncodeSegment(std::string_view segment, int64_t base, std::vector<int32_t>* ids,
                             std::vector<std::pair<int64_t, int64_t>>* offsets) const override {
    if (!vocab().unk) {
      return absl::FailedPreconditionError(absl::StrCat(vocab().source, ": no [UNK] token"));
    }
    // Normalize.
    std::vector<NormChar> chars;
    chars.reserve(segment.size());
    size_t pos = 0;
    while (pos < segment.size()) {
      const auto b = static_cast<uint32_t>(pos);
      uint32_t c = DecodeUtf8(segment, &pos);
      const auto e = static_cast<uint32_t>(pos);
      if (o_.clean_text) {
        if (c == 0 || c == 0xFFFD) continue;
        if (IsWhitespace(c)) {
          c = ' ';
        } else if (IsOther(c)) {
          continue;
        }
      }
      if (o_.handle_chinese_chars && IsChineseChar(c)) {
        chars.push_back({' ', b, e});
        chars.push_back({c, b, e});
        chars.push_back({' ', b, e});
        continue;
      }
      UChar decomposed[32];
      int32_t len = -1;
      if (o_.strip_accents && nfd_ != nullptr && c >= 0x80) {
        UErrorCode err = U_ZERO_ERROR;
        len = unorm2_getDecomposition(nfd_, static_cast<UChar32>(c), decomposed, 32, &err);
        if (U_FAILURE(err)) len = -1;
      }
      auto emit = [&](uint32_t x) {
        if (o_.strip_accents && u_charType(static_cast<UChar32>(x)) == U_NON_SPACING_MARK) return;
        if (o_.lowercase) x = static_cast<uint32_t>(u_tolower(static_cast<UChar32>(x)));
        chars.push_back({x, b, e});
      };
      if (len < 0) {
        emit(c);
      } else {
        int32_t k = 0;
        while (k < len) {
          UChar32 x;
          U16_NEXT(decomposed, k, len, x);
          emit(static_cast<uint32_t>(x));
        }
      }
    }
    // Pre-tokenize and run WordPiece on each word.
    size_t i = 0;
    while (i < chars.size()) {
      if (IsWhitespace(chars[i].cp)) {
        ++i;
        continue;
      }
      size_t j = i + 1;
      if (!IsPunctuation(chars[i].cp)) {
        while (j < chars.size() && !IsWhitespace(chars[j].cp) && !IsPunctuation(chars[j].cp)) ++j;
      }
      EncodeWord(chars, i, j, base, ids, offsets);
      i = j;
    }
    return absl::OkStatus();
  }

  std::string DecodeTokens(const std::vector<int32_t>& ids) const override {
    // HF WordPiece decoder: join with spaces, "##" pieces glue to the left;
    // then clean_up_tokenization_spaces.
    std::string out;
    const std::string& pre = o_.continuing_prefix;
    for (size_t k = 0; k < ids.size(); ++k) {
      const std::string& p = vocab().pieces[ids[k]];
      if (absl::StartsWith(p, pre) && !pre.empty()) {
        out.append(p, pre.size(), std::string::npos);
      } else {
        if (k > 0) out.push_back(' ');
        out.append(p);
      }
    }
    for (const auto& [from, to] : std::vector<std::pair<const char*, const char*>>{
             {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
             {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}}) {
      out = ReplaceAll(out, from, to);
    }
    return out;
  }

 private:
  void EncodeWord(const std::vector<NormChar>& chars, size_t from, size_t to, int64_t base,
                  std::vector<int32_t>* ids,
                  std::vector<std::pair<int64_t, int64_t>>* offsets) const {
    const size_t first_id = ids->size();
    const size_t first_off = offsets ? offsets->size() : 0;
    auto unk = [&] {
      ids->resize(first_id);
      ids->push_back(*vocab().unk);
      if (offsets) {
        offsets->resize(first_off);
        offsets->emplace_back(base + chars[from].begin, base + chars[to - 1].end);
      }
    };
    if (static_cast<int>(to - from) > o_.max_input_chars_per_word) return unk();
    // UTF-8 of the word and the byte position of each character.
    std::string word;
    std::vector<size_t> at;
    for (size_t k = from; k < to; ++k) {
      at.push_back(word.size());
      AppendUtf8(chars[k].cp, &word);
    }
    at.push_back(word.size());
    const size_t n = to - from;
    size_t start = 0;
    std::string candidate;
    while (start < n) {
      size_t end = n;
      int32_t found = -1;
      while (end > start) {
        candidate.clear();
        if (start > 0) candidate = o_.continuing_prefix;
        candidate.append(word, at[start], at[end] - at[start]);
        if (auto it = token_to_id_.find(candidate); it != token_to_id_.end()) {
          found = it->second;
          break;
        }
        --end;
      }
      if (found < 0) return unk();
      ids->push_back(found);
      if (offsets) offsets->emplace_back(base + chars[from + start].begin, base + chars[from + end - 1].end);
      start = end;
    }
  }

  WordPieceOptions o_;
  absl::flat_hash_map<std::string, int32_t> token_to_id_;
  const UNormalizer2* nfd_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeWordPiece(Vocab vocab,
                                                         const WordPieceOptions& options) {
  if (absl::Status s = ValidateVocab(&vocab); !s.ok()) return s;
  if (!vocab.unk) {
    for (size_t i = 0; i < vocab.pieces.size(); ++i) {
      if (vocab.pieces[i] == "[UNK]") vocab.unk = static_cast<int32_t>(i);
    }
  }
  if (!vocab.unk) {
    return absl::InvalidArgumentError(absl::StrCat(vocab.source, ": WordPiece without an unk token"));
  }
  for (size_t i = 0; i < vocab.pieces.size(); ++i) {
    const std::string& p = vocab.pieces[i];
    vocab.bytes[i] = absl::StartsWith(p, options.continuing_prefix) && !options.continuing_prefix.empty()
                         ? p.substr(options.continuing_prefix.size())
                         : p;
  }
  return std::unique_ptr<Tokenizer>(new WordPieceTokenizer(std::move(vocab), options));
}

}  // namespace tokenizer_internal
}  // namespace vocabd
