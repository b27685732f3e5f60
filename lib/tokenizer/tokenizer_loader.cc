#include "lib/tokenizer/tokenizer_loader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/checkpoint/gguf.h"
#include "lib/core/json_limits.h"
#include "lib/core/mapped_file.h"
#include "lib/core/status_macros.h"
#include "lib/tokenizer/hf_tokenizer.h"
#include "lib/tokenizer/kinds.h"
#include "lib/tokenizer/split_regex.h"
#include "nlohmann/json.hpp"

namespace vocabd {

using tokenizer_internal::BpeOptions;
using tokenizer_internal::Vocab;

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

bool IsDirectory(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool IsRegularFile(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// ---------------------------------------------------------------- GGUF ----

std::optional<int32_t> GgufId(const GgufFile& g, const std::string& key) {
  const GgufValue* v = g.Find(key);
  if (v == nullptr || !v->is_integer() || v->i < 0 || v->i > INT32_MAX) return std::nullopt;
  return static_cast<int32_t>(v->i);
}
std::optional<bool> GgufBool(const GgufFile& g, const std::string& key) {
  const GgufValue* v = g.Find(key);
  if (v == nullptr || !v->is_integer()) return std::nullopt;
  return v->i != 0;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& g, const std::string& file) {
  const GgufValue* model = g.Find("tokenizer.ggml.model");
  if (model == nullptr) {
    return absl::NotFoundError(absl::StrCat(file, " has no tokenizer.ggml.model metadata"));
  }
  if (model->type != GgufValueType::kString) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": tokenizer.ggml.model is not a string"));
  }
  const GgufValue* tokens = g.Find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != GgufValueType::kArray ||
      tokens->array_type != GgufValueType::kString) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": tokenizer.ggml.tokens missing or not a string array"));
  }
  if (tokens->array_s.size() != tokens->array_count) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": tokenizer.ggml.tokens has ", tokens->array_count, " entries (over the limit of ",
        kMaxGgufKeptArrayCount, ")"));
  }
  const size_t n = tokens->array_s.size();
  Vocab v;
  v.pieces = tokens->array_s;
  if (const GgufValue* s = g.Find("tokenizer.ggml.scores"); s != nullptr) {
    if (s->type != GgufValueType::kArray || s->array_f.size() != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ": tokenizer.ggml.scores has ", s->array_count, " values for ", n, " tokens"));
    }
    v.scores.assign(s->array_f.begin(), s->array_f.end());
  }
  if (const GgufValue* t = g.Find("tokenizer.ggml.token_type"); t != nullptr) {
    if (t->type != GgufValueType::kArray || t->array_i.size() != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ": tokenizer.ggml.token_type has ", t->array_count, " values for ", n, " tokens"));
    }
    v.types.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t x = t->array_i[i];
      if (x < 1 || x > 6) {
        return absl::InvalidArgumentError(absl::StrCat(
            file, ": tokenizer.ggml.token_type[", i, "] = ", x, " (known: 1..6)"));
      }
      v.types[i] = static_cast<TokenType>(x);
    }
  }
  v.bos = GgufId(g, "tokenizer.ggml.bos_token_id");
  v.eos = GgufId(g, "tokenizer.ggml.eos_token_id");
  v.unk = GgufId(g, "tokenizer.ggml.unknown_token_id");
  const std::string& kind = model->s;
  std::string pre;
  if (const GgufValue* p = g.Find("tokenizer.ggml.pre");
      p != nullptr && p->type == GgufValueType::kString) {
    pre = p->s;
  }
  v.source = absl::StrCat(file, " (tokenizer.ggml.*, model ", kind,
                          pre.empty() ? "" : absl::StrCat(", pre ", pre), ")");
  // Tokens matched verbatim in the text: user-defined ones (llama.cpp
  // always matches them). Control tokens (BOS, <|endoftext|>, [CLS]) are
  // never produced from text, as in sentencepiece and llama.cpp's default.
  auto split_user_defined = [&]() {
    if (v.types.empty()) return;
    for (size_t i = 0; i < n; ++i) {
      if (v.types[i] == TokenType::kUserDefined) v.split_tokens.push_back(static_cast<int32_t>(i));
    }
  };

  // tokenizer.ggml.precompiled_charsmap (u8/i8 array, the NormalizerSpec
  // blob; spm_normalizer.h).
  std::string charsmap;
  if (const GgufValue* c = g.Find("tokenizer.ggml.precompiled_charsmap"); c != nullptr) {
    if (c->type != GgufValueType::kArray || c->array_i.size() != c->array_count) {
      return absl::InvalidArgumentError(absl::StrCat(
          file, ": tokenizer.ggml.precompiled_charsmap is not a byte array (or has more than ",
          kMaxGgufKeptArrayCount, " bytes)"));
    }
    charsmap.reserve(c->array_i.size());
    for (int64_t b : c->array_i) charsmap.push_back(static_cast<char>(static_cast<uint8_t>(b)));
  }
  const std::string charsmap_field = absl::StrCat(file, ": tokenizer.ggml.precompiled_charsmap");
  if (kind == "t5") {
    // llama.cpp's UGM defaults (T5: pad 0, eos 1, unk 2, no BOS; EOS added).
    if (!v.eos) v.eos = 1;
    if (!v.unk) v.unk = 2;
    v.add_bos = GgufBool(g, "tokenizer.ggml.add_bos_token").value_or(false);
    v.add_eos = GgufBool(g, "tokenizer.ggml.add_eos_token").value_or(true);
    tokenizer_internal::SentencePieceOptions o;
    o.model = tokenizer_internal::SentencePieceOptions::Model::kUnigram;
    o.add_dummy_prefix = GgufBool(g, "tokenizer.ggml.add_space_prefix").value_or(true);
    o.remove_extra_whitespaces =
        GgufBool(g, "tokenizer.ggml.remove_extra_whitespaces").value_or(false);
    o.precompiled_charsmap = std::move(charsmap);
    o.charsmap_field = charsmap_field;
    return tokenizer_internal::MakeSentencePieceFromVocab(std::move(v), o);
  }
  if (kind == "llama") {
    // llama.cpp defaults for SentencePiece vocabularies.
    if (!v.bos) v.bos = 1;
    if (!v.eos) v.eos = 2;
    if (!v.unk) v.unk = 0;
    v.add_bos = GgufBool(g, "tokenizer.ggml.add_bos_token").value_or(true);
    v.add_eos = GgufBool(g, "tokenizer.ggml.add_eos_token").value_or(false);
    tokenizer_internal::SentencePieceOptions o;
    o.add_dummy_prefix = GgufBool(g, "tokenizer.ggml.add_space_prefix").value_or(true);
    o.remove_extra_whitespaces =
        GgufBool(g, "tokenizer.ggml.remove_extra_whitespaces").value_or(false);
    o.precompiled_charsmap = std::move(charsmap);
    o.charsmap_field = charsmap_field;
    // user-defined pieces are matched by sentencepiece itself
    return tokenizer_internal::MakeSentencePieceFromVocab(std::move(v), o);
  }
  if (kind == "gpt2" || kind == "gemma4" || kind == "whitespace") {
    // llama.cpp: all three are BPE with merges. "gemma4" forces the pre
    // name to gemma4 whatever tokenizer.ggml.pre says; "whitespace" selects
    // the whitespace session (split_regex.h PreTokenizer).
    const GgufValue* merges = g.Find("tokenizer.ggml.merges");
    if (merges == nullptr || merges->array_type != GgufValueType::kString ||
        merges->array_s.size() != merges->array_count) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": tokenizer.ggml.merges missing or not a string array"));
    }
    const std::string pre_name = kind == "gemma4" ? "gemma4" : pre.empty() ? "default" : pre;
    absl::StatusOr<tokenizer_internal::PreTokenizer> pt =
        tokenizer_internal::FindPreTokenizer(pre_name);
    if (!pt.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": tokenizer.ggml.pre: ", pt.status().message()));
    }
    if ((kind == "whitespace") != pt->whitespace_segments) {
      // llama.cpp would run another pre-tokenizer's expressions inside the
      // whitespace session, or \S+ through std::regex outside it.
      return absl::InvalidArgumentError(absl::StrCat(
          file, ": tokenizer.ggml.model \"", kind, "\" with tokenizer.ggml.pre \"", pre,
          "\" is not supported: the whitespace pre-tokenizer is served with tokenizer.ggml.model "
          "\"whitespace\" only, and that model with it only (what convert_hf_to_gguf.py writes)"));
    }
    BpeOptions o;
    o.byte_level = !pt->raw_utf8;
    o.split_regexes = std::move(pt->regexes);
    o.ignore_merges = pt->ignore_merges;
    if (pt->raw_utf8) {
      o.byte_fallback = true;  // <0xAB> pieces are bytes, whatever their type
      o.gguf_raw = true;
      o.metaspace = pt->escape_spaces;
      o.whole_newline_runs = pt->whole_newline_runs;
      o.whitespace_segments = pt->whitespace_segments;
      o.lowercase = pt->whitespace_segments &&
                    GgufBool(g, "tokenizer.ggml.normalizer.lowercase").value_or(false);
    }
    v.add_bos = GgufBool(g, "tokenizer.ggml.add_bos_token").value_or(pt->add_bos_default);
    if (pt->force_add_bos) v.add_bos = true;  // llama.cpp: Gemma 4 always adds BOS
    v.add_eos = GgufBool(g, "tokenizer.ggml.add_eos_token").value_or(false);
    if (pt->raw_utf8) {
      // llama.cpp refuses (gemma4) or falls back to id 11 (gpt2,
      // whitespace) here.
      for (const auto& [add, id, add_key, id_key] :
           {std::tuple{v.add_bos, v.bos, "add_bos_token", "bos_token_id"},
            std::tuple{v.add_eos, v.eos, "add_eos_token", "eos_token_id"}}) {
        if (add && !id) {
          return absl::InvalidArgumentError(absl::StrCat(
              file, ": tokenizer.ggml.", add_key, " is true",
              pt->force_add_bos && std::string_view(add_key) == "add_bos_token"
                  ? " (always, for pre-tokenizer " + pre_name + ")"
                  : "",
              " but tokenizer.ggml.", id_key, " is not set"));
        }
      }
    }
    split_user_defined();
    return tokenizer_internal::MakeBpe(std::move(v), merges->array_s, o);
  }
  if (kind == "bert") {
    // GGUF stores BERT's "word" as "▁word" and "##piece" as "piece"
    // (llama.cpp convert_hf_to_gguf "phantom space"); [CLS]-style tokens as is.
    for (std::string& p : v.pieces) {
      if (p.size() >= 2 && p.front() == '[' && p.back() == ']') continue;
      if (p.compare(0, tokenizer_internal::kMetaSpace.size(), tokenizer_internal::kMetaSpace) == 0) {
        p.erase(0, tokenizer_internal::kMetaSpace.size());
      } else {
        p = absl::StrCat("##", p);
      }
    }
    if (auto cls = GgufId(g, "tokenizer.ggml.cls_token_id")) v.bos = cls;
    if (auto sep = GgufId(g, "tokenizer.ggml.seperator_token_id")) v.eos = sep;
    v.add_bos = GgufBool(g, "tokenizer.ggml.add_bos_token").value_or(true);
    v.add_eos = GgufBool(g, "tokenizer.ggml.add_eos_token").value_or(true);
    split_user_defined();
    return tokenizer_internal::MakeWordPiece(std::move(v), tokenizer_internal::WordPieceOptions{});
  }
  return absl::InvalidArgumentError(absl::StrCat(
      file, ": tokenizer.ggml.model \"", kind, "\" is not supported (supported: llama, t5, gpt2, gemma4, whitespace, bert)"));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadGguf(const MappedFile& f) {
  ASSIGN_OR_RETURN(GgufFile g, ParseGguf(f.data(), f.size(), f.path()));
  return FromGguf(g, f.path());
}

// ------------------------------------------------------------ llama2.c ----

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadLlama2c(const MappedFile& f,
                                                       std::optional<int64_t> want) {
  const uint8_t* p = f.data();
  const size_t size = f.size();
  const std::string& file = f.path();
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": not a llama2.c tokenizer (u32 max_token_length, then {f32 "
                           "score, i32 len, bytes} per token): ",
                     what));
  };
  if (size < 4) return bad("shorter than 4 bytes");
  uint32_t max_len;
  std::memcpy(&max_len, p, 4);
  if (max_len == 0 || max_len > 4096) return bad(absl::StrCat("max_token_length ", max_len));
  size_t pos = 4;
  Vocab v;
  while (pos < size) {
    if (size - pos < 8) return bad(absl::StrCat("token ", v.pieces.size(), " header truncated"));
    float score;
    int32_t len;
    std::memcpy(&score, p + pos, 4);
    std::memcpy(&len, p + pos + 4, 4);
    pos += 8;
    if (len < 0 || static_cast<uint32_t>(len) > max_len || static_cast<size_t>(len) > size - pos) {
      return bad(absl::StrCat("token ", v.pieces.size(), " length ", len));
    }
    v.scores.push_back(score);
    v.pieces.emplace_back(reinterpret_cast<const char*>(p + pos), len);
    pos += len;
    if (want && static_cast<int64_t>(v.pieces.size()) > *want) break;
  }
  if (want && static_cast<int64_t>(v.pieces.size()) != *want) {
    return bad(absl::StrCat(pos < size ? "more than " : "", v.pieces.size(),
                            " tokens, the model's vocab_size is ", *want));
  }
  const size_t n = v.pieces.size();
  if (n < 3) return bad(absl::StrCat(n, " tokens"));
  // llama2.c's export (tokenizer.py): ids 0/1/2 are <unk>, "\n<s>\n" (BOS),
  // "\n</s>\n" (EOS); "▁" was written as " ". Back to SentencePiece form.
  v.types.assign(n, TokenType::kNormal);
  for (size_t i = 0; i < n; ++i) {
    std::string& piece = v.pieces[i];
    if (tokenizer_internal::ParseBytePiece(piece) >= 0) {
      v.types[i] = TokenType::kByte;
    } else {
      piece = tokenizer_internal::ReplaceAll(piece, " ", tokenizer_internal::kMetaSpace);
    }
  }
  v.types[0] = TokenType::kUnknown;
  v.types[1] = TokenType::kControl;
  v.types[2] = TokenType::kControl;
  v.pieces[1] = "<s>";
  v.pieces[2] = "</s>";
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  v.add_bos = true;
  v.source = absl::StrCat(file, " (llama2.c tokenizer)");
  auto t = tokenizer_internal::MakeSentencePieceFromVocab(std::move(v), {});
  if (!t.ok()) return t.status();
  return t;
}

// ------------------------------------------------------ Hugging Face ----

// tokenizer.json / tokenizer_config.json nest a few levels (a Sequence of
// pre-tokenizers holding a Split holding a pattern: 4); the parser, the
// tree's destructor and the Parse* functions below recurse per level, so
// deeper files are refused before parsing (a 100,000-level file overflowed
// the stack).
constexpr int64_t kMaxTokenizerJsonDepth = 128;
absl::StatusOr<json> ReadJson(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> f, MappedFile::Open(path));
  const char* b = reinterpret_cast<const char*>(f->data());
  RETURN_IF_ERROR(CheckJsonDepth(std::string_view(b, f->size()), kMaxTokenizerJsonDepth, path));
  json j = json::parse(b, b + f->size(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  return j;
}

// tokenizer.json (+ tokenizer_config.json beside it): hf_tokenizer.h.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHfJson(const std::string& path) {
  ASSIGN_OR_RETURN(json j, ReadJson(path));
  json cfg;
  const std::string cfg_path = (fs::path(path).parent_path() / "tokenizer_config.json").string();
  if (IsRegularFile(cfg_path)) {
    ASSIGN_OR_RETURN(cfg, ReadJson(cfg_path));
  }
  return tokenizer_internal::MakeHfTokenizer(j, cfg, path);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePieceModel(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> f, MappedFile::Open(path));
  // HF tokenizer_config.json beside it may switch add_bos/add_eos (Llama
  // defaults: BOS yes, EOS no).
  bool add_bos = true, add_eos = false;
  const std::string cfg_path = (fs::path(path).parent_path() / "tokenizer_config.json").string();
  if (IsRegularFile(cfg_path)) {
    ASSIGN_OR_RETURN(json cfg, ReadJson(cfg_path));
    if (cfg.is_object()) {
      add_bos = cfg.value("add_bos_token", add_bos);
      add_eos = cfg.value("add_eos_token", add_eos);
    }
  }
  return tokenizer_internal::MakeSentencePieceFromModelFile(
      std::string(reinterpret_cast<const char*>(f->data()), f->size()), path, add_bos, add_eos);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHfFolder(const std::string& dir,
                                                        std::vector<std::string>* looked) {
  const std::string json_path = (fs::path(dir) / "tokenizer.json").string();
  const std::string model_path = (fs::path(dir) / "tokenizer.model").string();
  if (IsRegularFile(json_path)) return LoadHfJson(json_path);
  if (IsRegularFile(model_path)) return LoadSentencePieceModel(model_path);
  looked->push_back(json_path);
  looked->push_back(model_path);
  return absl::NotFoundError("");
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFile(const std::string& path,
                                                    std::optional<int64_t> vocab_size) {
  if (IsDirectory(path)) {
    std::vector<std::string> looked;
    auto t = LoadHfFolder(path, &looked);
    if (t.ok() || !looked.size()) return t;
    return absl::NotFoundError(absl::StrCat("no tokenizer: looked for ", absl::StrJoin(looked, ", ")));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> f, MappedFile::Open(path));
  if (f->size() >= 4 && std::memcmp(f->data(), "GGUF", 4) == 0) return LoadGguf(*f);
  if (absl::EndsWith(path, ".json")) return LoadHfJson(path);
  if (absl::EndsWith(path, ".model")) return LoadSentencePieceModel(path);
  return LoadLlama2c(*f, vocab_size);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  return LoadFile(path, std::nullopt);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerForCheckpoint(
    const std::string& checkpoint_path, const std::string& tokenizer_path,
    std::optional<int64_t> vocab_size) {
  if (!tokenizer_path.empty()) return LoadFile(tokenizer_path, vocab_size);
  std::vector<std::string> looked;
  if (IsDirectory(checkpoint_path)) {
    auto t = LoadHfFolder(checkpoint_path, &looked);
    if (t.ok() || looked.empty()) return t;
  } else {
    ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> f, MappedFile::Open(checkpoint_path));
    if (f->size() >= 4 && std::memcmp(f->data(), "GGUF", 4) == 0) {
      ASSIGN_OR_RETURN(GgufFile g, ParseGguf(f->data(), f->size(), f->path()));
      auto t = FromGguf(g, f->path());
      if (!absl::IsNotFound(t.status())) return t;
      looked.push_back(absl::StrCat(checkpoint_path, " tokenizer.ggml.* metadata"));
    } else {
      const fs::path dir = fs::path(checkpoint_path).parent_path();
      if (!absl::EndsWith(checkpoint_path, ".bin")) {  // .safetensors, .index.json ...
        auto t = LoadHfFolder(dir.empty() ? "." : dir.string(), &looked);
        if (t.ok() || looked.empty()) return t;
      } else {
        // llama2.c: tok*.bin beside the checkpoint.
        std::vector<std::string> candidates;
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec)) {
          const std::string name = e.path().filename().string();
          if (absl::StartsWith(name, "tok") && absl::EndsWith(name, ".bin") &&
              e.path() != fs::path(checkpoint_path) && e.is_regular_file()) {
            candidates.push_back(e.path().string());
          }
        }
        std::sort(candidates.begin(), candidates.end());
        absl::Status first_error;
        for (const std::string& c : candidates) {
          ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> tf, MappedFile::Open(c));
          auto t = LoadLlama2c(*tf, vocab_size);
          if (t.ok()) return t;
          if (first_error.ok()) first_error = t.status();
        }
        if (!first_error.ok()) return first_error;
        looked.push_back(absl::StrCat((dir.empty() ? fs::path(".") : dir).string(), "/tok*.bin"));
      }
    }
  }
  return absl::NotFoundError(absl::StrCat("no tokenizer: looked for ", absl::StrJoin(looked, ", "),
                                          " (--tokenizer names one explicitly)"));
}

}  // namespace vocabd
