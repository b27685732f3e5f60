#include "tests/e2e/tokenizer.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vocabd::testing {
namespace {

// Parses "<0xXX>" (exactly, two hex digits, either case). Returns -1 if the
// piece is not a byte token.
int ParseByteToken(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  int value = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = piece[i];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return -1;
    }
    value = value * 16 + digit;
  }
  return value;
}

template <typename T>
bool ReadPod(const std::string& bytes, size_t* offset, T* out) {
  if (bytes.size() - *offset < sizeof(T)) return false;
  std::memcpy(out, bytes.data() + *offset, sizeof(T));
  *offset += sizeof(T);
  return true;
}

}  // namespace

absl::StatusOr<Llama2cTokenizer> Llama2cTokenizer::Load(const std::string& path,
                                                        int64_t expected_vocab_size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open tokenizer file ", path));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  Llama2cTokenizer tok;
  size_t offset = 0;
  if (!ReadPod(bytes, &offset, &tok.max_token_length_)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": file of ", bytes.size(), " bytes has no max_token_length header"));
  }
  while (offset < bytes.size()) {
    const int64_t id = tok.vocab_size();
    float score = 0;
    int32_t len = 0;
    if (!ReadPod(bytes, &offset, &score) || !ReadPod(bytes, &offset, &len)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": token ", id, " header truncated at offset ", offset, " of ", bytes.size()));
    }
    if (len < 0 || static_cast<size_t>(len) > bytes.size() - offset) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": token ", id, " length ", len,
                                                     " at offset ", offset - 4,
                                                     " exceeds the file (", bytes.size(),
                                                     " bytes)"));
    }
    tok.scores_.push_back(score);
    tok.pieces_.emplace_back(bytes.data() + offset, static_cast<size_t>(len));
    offset += static_cast<size_t>(len);
  }
  if (expected_vocab_size > 0 && tok.vocab_size() != expected_vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": holds ", tok.vocab_size(),
                                                   " tokens, expected vocab_size ",
                                                   expected_vocab_size));
  }
  return tok;
}

std::string Llama2cTokenizer::Decode(int64_t prev_token, int64_t token) const {
  std::string piece = pieces_[token];
  // run.c: "following BOS (1) token, sentencepiece decoder strips any
  // leading whitespace".
  if (prev_token == kBosId && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
  const int byte = ParseByteToken(piece);
  if (byte >= 0) piece = std::string(1, static_cast<char>(byte));
  // run.c safe_printf: skip empty pieces and lone bytes that are neither
  // printable nor whitespace (control codes, invalid UTF-8 fragments).
  if (piece.empty()) return piece;
  if (piece.size() == 1) {
    const unsigned char c = static_cast<unsigned char>(piece[0]);
    if (!(std::isprint(c) || std::isspace(c))) return "";
  }
  return piece;
}

std::string Llama2cTokenizer::DecodeSequence(const std::vector<int64_t>& ids) const {
  std::string out;
  for (size_t i = 1; i < ids.size(); ++i) out += Decode(ids[i - 1], ids[i]);
  return out;
}

}  // namespace vocabd::testing
