#include "lib/tokenizer/split_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/tokenizer/vocab_tokenizer.h"

namespace vocabd {
namespace tokenizer_internal {

namespace {

// PCRE2 limits (see split_regex.h). A pcre2_match call first gets
// kFreeMatchLimit steps; a call that needs more is retried with 4x the
// limit, and every limit so tried is charged to the text's budget.
constexpr uint32_t kFreeMatchLimit = 256;
constexpr uint32_t kDepthLimit = 1000000;  // interpreter backtracking frames
constexpr uint32_t kHeapLimitKiB = 64 << 10;  // interpreter heap, KiB (64 MiB)
constexpr size_t kJitStackBytes = 8 << 20;

struct MatchData {
  pcre2_match_data* md;
  explicit MatchData(const pcre2_code* c) : md(pcre2_match_data_create_from_pattern(c, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(md); }
};

// One per thread: a match context with the depth and heap limits and a JIT
// stack (the match limit is set per call).
struct MatchContext {
  pcre2_match_context* ctx = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* jit = pcre2_jit_stack_create(32 << 10, kJitStackBytes, nullptr);
  MatchContext() {
    pcre2_set_depth_limit(ctx, kDepthLimit);
    pcre2_set_heap_limit(ctx, kHeapLimitKiB);
    if (jit != nullptr) pcre2_jit_stack_assign(ctx, nullptr, jit);
  }
  ~MatchContext() {
    pcre2_match_context_free(ctx);
    if (jit != nullptr) pcre2_jit_stack_free(jit);
  }
};

pcre2_match_context* ThreadMatchContext() {
  thread_local MatchContext context;
  return context.ctx;
}

std::string PcreMessage(int rc) {
  PCRE2_UCHAR msg[256];
  pcre2_get_error_message(rc, msg, sizeof(msg));
  return reinterpret_cast<const char*>(msg);
}

// pcre2_match under the budget `*left` (steps; decreased by what the call
// is charged). PCRE2_ERROR_MATCHLIMIT once the budget is spent.
int BoundedMatch(const pcre2_code* code, PCRE2_SPTR subject, size_t len, size_t pos,
                 pcre2_match_data* md, int64_t* left) {
  pcre2_match_context* ctx = ThreadMatchContext();
  uint32_t options = PCRE2_NO_UTF_CHECK;
  uint64_t limit = kFreeMatchLimit;
  bool charged = false;
  for (;;) {
    pcre2_set_match_limit(ctx, static_cast<uint32_t>(limit));
    // JIT code runs through pcre2_jit_match (pcre2_match's checks skipped:
    // the subject is valid UTF-8 and no option needs them), else the
    // interpreter.
    const bool jit = (options & PCRE2_NO_JIT) == 0;
    const int rc = jit ? pcre2_jit_match(code, subject, len, pos, 0, md, ctx)
                       : pcre2_match(code, subject, len, pos, options, md, ctx);
    if (jit && (rc == PCRE2_ERROR_JIT_STACKLIMIT || rc == PCRE2_ERROR_JIT_BADOPTION)) {
      // Out of JIT stack, or not JIT-compiled: the interpreter, under the
      // depth and heap limits.
      options |= PCRE2_NO_JIT;
      continue;
    }
    if (rc != PCRE2_ERROR_MATCHLIMIT) {
      if (charged) *left -= static_cast<int64_t>(limit);
      return rc;
    }
    *left -= static_cast<int64_t>(limit);
    charged = true;
    if (*left <= 0) return PCRE2_ERROR_MATCHLIMIT;
    limit = std::min<uint64_t>({limit * 4, static_cast<uint64_t>(*left), UINT32_MAX});
  }
}

}  // namespace

struct SplitRegex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

absl::StatusOr<SplitRegex> SplitRegex::Compile(const std::string& pattern, std::string_view where) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* c = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
  if (c == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(where), ": split regex \"", pattern,
                                                   "\" at offset ", off, ": ", PcreMessage(err)));
  }
  pcre2_jit_compile(c, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
  auto code = std::make_shared<Code>();
  code->code = c;
  SplitRegex r;
  r.code_ = std::move(code);
  r.pattern_ = pattern;
  // Patterns that backtrack exponentially on a simple run of one character
  // ("(a+)+$") are refused here rather than at the first text that triggers
  // them (split_regex.h).
  struct Probe {
    const char* name;
    std::string text;
    bool bang;  // ends in "!"
  };
  std::vector<Probe> probes;
  for (const char* unit : {"a", "A", "1", " ", "\n", ".", "'", "\xC3\xA9", "\xE4\xB8\xAD", "a "}) {
    const std::string_view u(unit);
    std::string run;
    while (run.size() < kProbeBytes) run += u;
    probes.push_back({unit, run, false});
    probes.push_back({unit, run.substr(0, run.size() - u.size()) + "!", true});
  }
  for (const Probe& probe : probes) {
    int64_t budget = kRunBudgetBase + kBudgetPerByte * static_cast<int64_t>(probe.text.size());
    std::vector<SplitSpan> spans{{0, static_cast<uint32_t>(probe.text.size())}};
    absl::Status s = r.SplitAllWithin(probe.text, &spans, &budget);
    if (!s.ok()) {
      std::string unit = absl::CEscape(probe.name);
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(where), ": split regex \"", pattern, "\" backtracks pathologically: splitting a run of ",
          probe.text.size(), " bytes of \"", unit, "\"", probe.bang ? " ending in \"!\"" : "", " ",
          s.message(), ". At most ",
          kBudgetPerByte, " PCRE2 match steps per byte + ", kRunBudgetBase,
          " are allowed there; vocabd refuses such patterns"));
    }
  }
  return r;
}

absl::Status SplitRegex::Split(std::string_view text, SplitSpan w, std::vector<SplitSpan>* out,
                               int64_t* budget) const {
  MatchData m(code_->code);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + w.begin);
  const size_t len = w.end - w.begin;
  size_t pos = 0, last = 0;
  auto piece = [&](size_t b, size_t e) {
    if (e > b) out->push_back({static_cast<uint32_t>(w.begin + b), static_cast<uint32_t>(w.begin + e)});
  };
  while (pos <= len) {
    const int rc = BoundedMatch(code_->code, subject, len, pos, m.md, budget);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc == PCRE2_ERROR_MATCHLIMIT) {
      return absl::ResourceExhaustedError(
          absl::StrCat("needed more PCRE2 match steps than its budget (at byte ", w.begin + pos,
                       ")"));
    }
    if (rc < 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("stopped at byte ", w.begin + pos, ": PCRE2 ", PcreMessage(rc)));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(m.md);
    const size_t mb = ov[0], me = ov[1];
    piece(last, mb);
    piece(mb, me);
    last = me;
    if (me == mb) {  // empty match: a boundary; go on one character later
      if (mb >= len) break;
      pos = mb + Utf8Length(static_cast<unsigned char>(text[w.begin + mb]));
    } else {
      pos = me;
    }
  }
  piece(last, len);
  return absl::OkStatus();
}

absl::Status SplitRegex::Matches(std::string_view text, SplitSpan w,
                                 std::vector<SplitSpan>* out) const {
  MatchData m(code_->code);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + w.begin);
  const size_t len = w.end - w.begin;
  int64_t budget = kRunBudgetBase + kBudgetPerByte * static_cast<int64_t>(len);
  size_t pos = 0;
  std::optional<size_t> last_end;
  while (pos <= len) {
    const int rc = BoundedMatch(code_->code, subject, len, pos, m.md, &budget);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "split regex \"", pattern_, "\" on a text of ", len, " bytes: ",
          rc == PCRE2_ERROR_MATCHLIMIT ? "needed more PCRE2 match steps than its budget"
                                       : absl::StrCat("PCRE2 ", PcreMessage(rc)),
          " (at byte ", w.begin + pos, "; budget: ", kRunBudgetBase, " + ", kBudgetPerByte,
          " steps per byte); the pattern backtracks too much on this text"));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(m.md);
    const size_t mb = ov[0], me = ov[1];
    // An empty match right where the previous match ended is not one
    // (Oniguruma's and python3-regex's iteration).
    if (!(me == mb && last_end == mb)) {
      out->push_back({static_cast<uint32_t>(w.begin + mb), static_cast<uint32_t>(w.begin + me)});
      last_end = me;
    }
    if (me == mb) {
      if (mb >= len) break;
      pos = mb + Utf8Length(static_cast<unsigned char>(text[w.begin + mb]));
    } else {
      pos = me;
    }
  }
  return absl::OkStatus();
}

absl::Status SplitRegex::SplitAllWithin(std::string_view text, std::vector<SplitSpan>* spans,
                                        int64_t* budget) const {
  std::vector<SplitSpan> next;
  next.reserve(spans->size() * 2);
  for (const SplitSpan& w : *spans) {
    if (absl::Status s = Split(text, w, &next, budget); !s.ok()) return s;
  }
  spans->swap(next);
  return absl::OkStatus();
}

absl::Status SplitRegex::SplitAll(std::string_view text, std::vector<SplitSpan>* spans) const {
  int64_t budget = kRunBudgetBase + kBudgetPerByte * static_cast<int64_t>(text.size());
  absl::Status s = SplitAllWithin(text, spans, &budget);
  if (s.ok()) return s;
  return absl::Status(
      s.code(), absl::StrCat("split regex \"", pattern_, "\" on a text of ", text.size(),
                             " bytes: ", s.message(), " (budget: ", kRunBudgetBase, " + ",
                             kBudgetPerByte,
                             " steps per byte); the pattern backtracks too much on this text"));
}

// ---- tokenizer.ggml.pre ----------------------------------------------------
//
// One entry per pre-tokenizer llama.cpp (src/llama-vocab.cpp,
// llm_tokenizer_bpe) knows: the GGUF names that select it and its split
// expressions. Where llama.cpp rewrote a Hugging Face expression for its own
// regex engine ("original regex from tokenizer.json"), the entry holds the
// Hugging Face original, which PCRE2 runs as written ((?i:...), possessive
// quantifiers, \p{Lu} classes). Checked against python3-regex running the
// same expressions (tests/lib/tokenizer/make_pretokenizer_golden.py).
namespace {

// GPT-2 (openai/gpt-2 encoder.py; HF ByteLevel use_regex).
constexpr char kGpt2[] = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3 tokenizer.json.
constexpr char kLlama3[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2 tokenizer.json (digits one at a time).
constexpr char kQwen2[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// GPT-2's without the final \s+ (identical splits: what it would match is
// left between matches and kept).
constexpr char kGpt2NoTail[] = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr char kBloom[] = R"( ?[^(\s|.,!?…。，、।۔،)]+)";
constexpr char kGpt4o[] =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2's without the English contractions (ufakzeka: Turkish apostrophe
// suffixes stay attached).
constexpr char kQwen2NoContractions[] =
    R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek-V3's main expression (after the digit and CJK stages).
constexpr char kDeepseekV3Main[] =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Kimi-K2 (moonshotai tokenization_kimi.py, pat_str; tiktoken). The
// original intersects classes ("[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]"),
// which PCRE2 10.42 cannot write; each intersection is spelled as the
// complement over General Category (GC partitions the code points, so this
// is exact): (Lu|Lt|Lm|Lo|M) minus Han = [^Han Ll N P S Z C] and
// (Ll|Lm|Lo|M) minus Han = [^Han Lu Lt N P S Z C]. Han is \p{sc:Han}
// (Script): PCRE2 >= 10.40 reads a bare \p{Han} as Script_Extensions
// (which adds e.g. U+3001, U+FF61), Rust's regex and python3-regex as
// Script. llama.cpp replaces this expression with a hand-written scanner
// (unicode_regex_split_custom_kimi_k2) that splits differently (camelCase
// words, combining marks, its own Han ranges); vocabd follows Moonshot's.
constexpr char kKimiK2[] =
    R"(\p{sc:Han}+)"
    R"(|[^\r\n\p{L}\p{N}]?[^\p{sc:Han}\p{Ll}\p{N}\p{P}\p{S}\p{Z}\p{C}]*[^\p{sc:Han}\p{Lu}\p{Lt}\p{N}\p{P}\p{S}\p{Z}\p{C}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[^\p{sc:Han}\p{Ll}\p{N}\p{P}\p{S}\p{Z}\p{C}]+[^\p{sc:Han}\p{Lu}\p{Lt}\p{N}\p{P}\p{S}\p{Z}\p{C}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Before the expression, tokenization_kimi.py's encode() cuts the text into
// slices of 400,000 characters and cuts each slice where a run of
// whitespace or of non-whitespace characters (Python str.isspace) grows
// past 25,000 (_split_whitespaces_or_nonwhitespaces: the cut falls after
// every 25,000 characters of the run, and the text before the run stays in
// the first part). These two stages do the same as Split(Isolated)
// expressions: \G anchors each match where the previous one ended, so the
// matches are the parts and what follows the last cut is one more piece.
// kPyIsSpace lists the code points for which Python 3's str.isspace() is
// true (Zs and the bidi classes WS, B, S; unlike PCRE2's \s it has
// U+001C-U+001F and not U+180E), as class contents.
constexpr char kPyIsSpace[] =
    R"(\t-\r\x{1C}-\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
constexpr char kTiktokenSlices[] = R"(\G(?s:(?:.{50000}){8}))";
// From \G: 25,000 characters of one kind followed by one more (a cut inside
// a run, counting from the last cut), or, lazily further on, the same from
// the start of a run.
std::string TiktokenRuns() {
  const std::string w = absl::StrCat("[", kPyIsSpace, "]"), n = absl::StrCat("[^", kPyIsSpace, "]");
  auto block = [](const std::string& c) { return absl::StrCat(c, "{25000}(?=", c, ")"); };
  return absl::StrCat(R"(\G(?:)", block(w), "|", block(n), R"(|(?s:.)*?(?:(?<!)", w, ")", block(w),
                      "|(?<!", n, ")", block(n), "))");
}

// AFMoE (arcee-ai Trinity), as llama.cpp splits it; Hugging Face's
// tokenizer.json was not available to check against.
// Stage 1 reproduces llama.cpp's unicode_regex_split_custom_afmoe: each
// maximal run of \p{N} (llama.cpp is_number) of length n is cut into its
// first n mod 3 digits (when not 0) and then groups of 3, and the text
// before the run is glued to the run's first group ("ab 1234 c" -> "ab 1",
// "234", " c"). As a Split(Isolated) expression: \G anchors every match
// where the previous one ended (Split passes that offset to pcre2_match,
// and a leading \G makes PCRE2 try that position only), so each match is
// the non-digits since the last cut plus the next group; the text after the
// last group is left as its own piece. The look-behind sees only the
// current piece, as llama.cpp's per-piece scan does. Linear: the
// look-ahead runs once per digit run.
constexpr char kAfmoeDigits[] =
    R"(\G\P{N}*+(?:(?<!\p{N})\p{N}{1,2}(?=(?:\p{N}{3})*+(?!\p{N}))|\p{N}{3}))";
// Stage 2: llama.cpp's run class (literal UTF-8 there): CJK unified and
// compatibility ideographs, Ext A, kana, halfwidth katakana, Kangxi
// radicals, Thai from U+0E40, Lao, Khmer, Myanmar and its extensions,
// Hangul syllables and Jamo. The third range is U+F900-U+FAFF (CJK
// Compatibility Ideographs); copies of llama.cpp's source show U+8C48
// there, the canonical (NFC) equivalent of U+F900, which would extend the
// class over U+A000-U+F8FF (Yi, Vai, Hangul Jamo Extended-B, the Private
// Use Area, ...).
constexpr char kAfmoeCjk[] =
    R"([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{F900}-\x{FAFF}\x{3040}-\x{309F}\x{30A0}-\x{30FF})"
    R"(\x{FF65}-\x{FF9F}\x{2F00}-\x{2FDF}\x{0E40}-\x{0E7F}\x{0E80}-\x{0EFF}\x{1780}-\x{17FF})"
    R"(\x{1000}-\x{109F}\x{AA60}-\x{AA7F}\x{A9E0}-\x{A9FF}\x{AC00}-\x{D7AF}\x{1100}-\x{11FF}]+)";

struct Entry {
  std::vector<std::string> names;
  std::vector<std::string> regexes;
  bool ignore_merges;
  // llama.cpp turns add_bos on for these before reading
  // tokenizer.ggml.add_bos_token (llama3, tekken, chameleon).
  bool add_bos_default = false;
  // BPE over raw UTF-8 (PreTokenizer, split_regex.h).
  bool raw_utf8 = false;
  bool escape_spaces = false;
  bool whole_newline_runs = false;
  bool force_add_bos = false;
  bool whitespace_segments = false;
};

const std::vector<Entry>& Table() {
  static const std::vector<Entry>* t = new std::vector<Entry>{
      // llama.cpp's fallback for BPE vocabularies.
      {{"default"},
       {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2NoTail, R"(\p{N}+)", "[0-9][0-9][0-9]"},
       false},
      {{"gpt-2", "gpt2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
        "a.x-4.0", "mellum", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais",
        "trillion", "granite-docling", "exaone4", "modern-bert"},
       {kGpt2},
       false},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
        "jina-v5-nano"},
       {kLlama3},
       true,
       true},
      {{"dbrx", "smaug-bpe", "glm4", "chatglm-bpe"}, {kLlama3}, false},
      // (code points that Unicode normalization would rewrite are escaped)
      {{"deepseek-llm"},
       {"[\r\n]",
        R"(\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝ\x{1F5F}-\x{1F7D}ᾀ-ᾴᾶ-ᾼ\x{1FBE}ῂ-ῄῆ-ῌῐ-\x{1FD3}ῖ-\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\x{2126}ℨ\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+)",
        R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)", R"(\s+$)", "[一-龥ࠀ-一가-퟿]+", R"(\p{N}+)"},
       false},
      {{"deepseek-coder"},
       {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", "[一-龥ࠀ-一가-퟿]+", R"(\p{N})"},
       false},
      {{"deepseek-v3", "hunyuan-dense", "hy_v4", "joyai-llm"},
       {R"(\p{N}{1,3})", "[一-龥぀-ゟ゠-ヿ]+", kDeepseekV3Main},
       false},
      {{"spark2_5"},
       {R"(\p{N}{1,3})", "[一-龥぀-ゟ゠-ヿ]+",
        R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+)",
        R"(\p{N})"},
       false},
      {{"falcon"},
       {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2NoTail, "[0-9][0-9][0-9]"},
       false},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b",
        "mellum2"},
       {R"(\p{N})", kGpt2NoTail},
       false},
      {{"qwen2", "deepseek-r1-qwen", "kormo", "stablelm2", "hunyuan", "megrez", "grok-2",
        "f2llmv2", "solar-open"},
       {kQwen2},
       false},
      {{"qwen35"},
       {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       false},
      {{"minicpm5"},
       {R"(\p{N}{1,3})",
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true},
      {{"jais-2"},
       {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})"},
       false},
      {{"ufakzeka"}, {kQwen2NoContractions}, false},
      {{"laguna"}, {R"([^\n]+|[\n]+)", kQwen2}, false},
      // BPE over raw UTF-8 with spaces escaped as U+2581; the split is
      // llama.cpp's newline splitter (runs of LF, runs of anything else).
      {.names = {"gemma4", "granite-embed-multi-311m"},
       .regexes = {R"([^\n]+|[\n]+)"},
       .ignore_merges = false,
       .raw_utf8 = true,
       .escape_spaces = true,
       .whole_newline_runs = true,
       .force_add_bos = true},
      {.names = {"sarvam-moe"},
       .regexes = {R"([^\n]+|[\n]+)"},
       .ignore_merges = false,
       .raw_utf8 = true,
       .escape_spaces = true},
      // Split by code (whitespace_segments), not by an expression.
      {.names = {"whitespace"},
       .regexes = {},
       .ignore_merges = false,
       .raw_utf8 = true,
       .whitespace_segments = true},
      {{"exaone-moe"},
       {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)"},
       false},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {kBloom}, false},
      {{"viking"}, {kBloom, R"(\p{N})"}, false},
      {{"tekken"},
       {R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true,
       true},
      {{"chameleon"},
       {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )",
        R"(\p{N})", R"([\p{P}!-/:-@\[-`{-~])", kGpt2NoTail},
       false,
       true},
      {{"gpt-4o", "llama4", "minimax-m2", "kanana2", "talkie"}, {kGpt4o}, false},
      // llama.cpp adds \p{M} to its rewrite of gpt-4o's expression; Hugging
      // Face's is gpt-4o's, which has it.
      {{"granite-embed-multi-97m"}, {kGpt4o}, true},
      // Hugging Face's `\d{1,3}(?=(?:\d{3})*\b)` runs in Oniguruma, whose
      // word characters are L, M, N and Pc; PCRE2 10.42's \b leaves out M
      // and every Pc but `_`. After a digit, \b is "no word character
      // next": written out with Oniguruma's class.
      {{"tiny_aya", "cohere2moe"},
       {R"(\d{1,3}(?=(?:\d{3})*(?![\p{L}\p{M}\p{N}\p{Pc}])))", kGpt4o},
       false},
      {{"youtu"},
       {R"([가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+)",
        R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true},
      {{"superbpe"}, {R"(\p{N}+)", R"((?=(\d{3})+(?!\d)))"}, false},
      {{"bailingmoe", "bailingmoe2", "llada-moe"},
       {R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)"},
       false},
      // tiktoken emits a piece that is itself a token whole (llama.cpp
      // does not set ignore_merges for kimi-k2).
      {{"kimi-k2"}, {kTiktokenSlices, TiktokenRuns(), kKimiK2}, true},
      // Stage 3 is DeepSeek-V3's main expression (digits match none of its
      // branches and stay as the pieces stage 1 cut).
      {{"afmoe"}, {kAfmoeDigits, kAfmoeCjk, kDeepseekV3Main}, false},
      {{"seed-coder"},
       {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       false},
  };
  return *t;
}


}  // namespace

absl::StatusOr<PreTokenizer> FindPreTokenizer(const std::string& pre) {
  for (const Entry& e : Table()) {
    for (const std::string& n : e.names) {
      if (n == pre) {
        return PreTokenizer{e.regexes,       e.ignore_merges,      e.add_bos_default,
                            e.raw_utf8,      e.escape_spaces,      e.whole_newline_runs,
                            e.force_add_bos, e.whitespace_segments};
      }
    }
  }
  return absl::NotFoundError(absl::StrCat("pre-tokenizer \"", pre, "\" is not known (known: ",
                                          absl::StrJoin(PreTokenizerNames(), ", "), ")"));
}

std::vector<std::string> PreTokenizerNames() {
  std::vector<std::string> out;
  for (const Entry& e : Table()) out.insert(out.end(), e.names.begin(), e.names.end());
  return out;
}

}  // namespace tokenizer_internal
}  // namespace vocabd
