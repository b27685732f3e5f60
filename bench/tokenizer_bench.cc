// Tokenization throughput: MB of text per second per thread for
// Llama SentencePiece (GGUF llama-spm vocabulary; also stories260K's
// tok512.model), SentencePiece Unigram with the nmt_nfkc charsmap
// (tests/lib/tokenizer/testdata/unigram_nmt_nfkc.model) and GPT-2
// byte-level BPE (GGUF and tokenizer.json), on a
// few MB of generated mixed text (ASCII prose, code, CJK, emoji) split into
// ~4 KB documents. Baseline measured in the same run: Debian's
// python3-sentencepiece encoding the same documents with the same model
// (bench/tokenizer_py_sentencepiece.py); the id count and id sum must match.
//
// Targets checked (exit status 1 when one is missed): every BPE row >= 30
// MB/s per thread; every SentencePiece BPE row >= 15x python3-sentencepiece
// per thread, the Unigram row >= 5x; ids identical to python's.
//
//   build/bench/tokenizer_bench [--mb 4] [--python /usr/bin/python3]
//
// Also: the latency of one ~1,000-token text (what Tokenize adds to an
// Embed call).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include <time.h>
#include <unistd.h>
#include <vector>

#include "CLI/CLI.hpp"
#include "lib/tokenizer/tokenizer.h"
#include "lib/tokenizer/tokenizer_loader.h"

namespace {

using Clock = std::chrono::steady_clock;

// CPU time of the calling thread: MB per CPU-second of one thread is what
// "MB/s per thread" means on a machine other jobs share (wall time counts
// the time the thread waited for a core).
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void AppendCp(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

const char* kWords[] = {
    "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be",
    "by", "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have",
    "an", "had", "they", "you", "were", "their", "one", "all", "we", "can", "her", "has",
    "there", "been", "if", "more", "when", "will", "would", "who", "so", "no", "model",
    "tokenizer", "embedding", "vocabulary", "Once", "upon", "time", "little", "girl", "named",
    "Lily", "research", "university", "international", "understanding", "performance",
    "however", "government", "development", "between", "information", "September", "London",
    "Wikipedia", "approximately", "characteristics", "don't", "it's", "we'll", "they're"};
const char* kIdents[] = {"i", "n", "sum", "count", "buffer", "result", "value", "index",
                         "tokens", "vocab_size", "hidden", "logits", "ptr", "len", "data"};

// Deterministic mixed corpus of ~`bytes` bytes in documents of ~4 KB.
std::vector<std::string> MakeCorpus(size_t bytes) {
  std::mt19937_64 rng(14);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  std::vector<std::string> docs;
  size_t total = 0;
  while (total < bytes) {
    std::string d;
    while (d.size() < 4096) {
      const size_t kind = pick(100);
      if (kind < 55) {  // prose
        const size_t n = 8 + pick(20);
        for (size_t w = 0; w < n; ++w) {
          std::string word = kWords[pick(sizeof(kWords) / sizeof(kWords[0]))];
          if (w == 0) word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
          d += word;
          if (pick(12) == 0) d += ",";
          if (pick(25) == 0) d += " " + std::to_string(pick(100000));
          d += w + 1 < n ? " " : (pick(3) == 0 ? ".\n" : ". ");
        }
      } else if (kind < 80) {  // code
        const std::string a = kIdents[pick(15)], b = kIdents[pick(15)];
        d += "for (int " + a + " = 0; " + a + " < " + b + "; ++" + a + ") {\n    " + b +
             "[" + a + "] += " + std::to_string(pick(1000)) + " * " + a + ";\n}\n";
        if (pick(2)) d += "\tif (" + a + " != nullptr && " + b + "->size() > 0x1F) return -1;\n";
      } else if (kind < 92) {  // CJK (Han, kana, Hangul)
        const size_t n = 10 + pick(40);
        for (size_t k = 0; k < n; ++k) {
          const size_t s = pick(10);
          AppendCp(s < 7 ? 0x4E00 + pick(0x51A5) : s < 9 ? 0x3041 + pick(0x55) : 0xAC00 + pick(0x2BA4), &d);
          if (pick(15) == 0) AppendCp(0x3002, &d);  // 。
        }
        d += "\n";
      } else {  // emoji, some with ZWJ / skin tones
        const size_t n = 1 + pick(6);
        for (size_t k = 0; k < n; ++k) {
          AppendCp(pick(2) ? 0x1F600 + pick(0x50) : 0x1F300 + pick(0x100), &d);
          if (pick(8) == 0) AppendCp(0x1F3FB + pick(5), &d);
          if (pick(10) == 0) { AppendCp(0x200D, &d); AppendCp(0x1F525, &d); }
        }
        d += " ";
      }
    }
    total += d.size();
    docs.push_back(std::move(d));
  }
  return docs;
}

struct Result {
  double mb_per_s = 0;       // per thread CPU-second
  double wall_mb_per_s = 0;  // per wall second
  int64_t tokens = 0;
  int64_t checksum = 0;
};

// Best of `repeats` single-thread passes over all documents.
Result Measure(const vocabd::Tokenizer& tok, const std::vector<std::string>& docs, bool offsets,
               int repeats) {
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  Result r;
  double best = 1e30, best_wall = 1e30;
  for (int rep = 0; rep < repeats; ++rep) {
    int64_t tokens = 0, checksum = 0;
    const auto t0 = Clock::now();
    const double c0 = ThreadCpuSeconds();
    for (const auto& d : docs) {
      if (offsets) {
        auto e = tok.Encode(d, false);
        if (!e.ok()) { std::fprintf(stderr, "%s\n", e.status().ToString().c_str()); std::exit(1); }
        tokens += static_cast<int64_t>(e->ids.size());
        for (int32_t id : e->ids) checksum += id;
      } else {
        auto e = tok.EncodeIds(d, false);
        if (!e.ok()) { std::fprintf(stderr, "%s\n", e.status().ToString().c_str()); std::exit(1); }
        tokens += static_cast<int64_t>(e->size());
        for (int32_t id : *e) checksum += id;
      }
    }
    best = std::min(best, ThreadCpuSeconds() - c0);
    best_wall = std::min(best_wall, std::chrono::duration<double>(Clock::now() - t0).count());
    r.tokens = tokens;
    r.checksum = checksum;
  }
  r.mb_per_s = static_cast<double>(bytes) / best / 1e6;
  r.wall_mb_per_s = static_cast<double>(bytes) / best_wall / 1e6;
  return r;
}

// Median CPU time (microseconds) of Encode of a text of ~`target` tokens.
double LatencyUs(const vocabd::Tokenizer& tok, const std::vector<std::string>& docs,
                 int target, int* tokens_out) {
  std::string text;
  for (const auto& d : docs) {
    text += d;
    auto e = tok.EncodeIds(text, false);
    if (e.ok() && static_cast<int>(e->size()) >= target) break;
  }
  // Trim to about `target` tokens by offsets.
  auto e = tok.Encode(text, false);
  if (e.ok() && static_cast<int>(e->ids.size()) > target) {
    text = text.substr(0, static_cast<size_t>(e->offsets[target].first));
  }
  std::vector<double> us;
  for (int k = 0; k < 201; ++k) {
    const double c0 = ThreadCpuSeconds();
    auto r = tok.Encode(text, true);
    us.push_back((ThreadCpuSeconds() - c0) * 1e6);
    if (k == 0 && r.ok()) *tokens_out = static_cast<int>(r->ids.size());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

bool RunPython(const std::string& python, const std::string& script, const std::string& model,
               const std::string& corpus, Result* r) {
  const std::string cmd = python + " " + script + " " + model + " " + corpus + " 3";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return false;
  char buf[512] = {0};
  const bool got = std::fgets(buf, sizeof(buf), p) != nullptr;
  const int rc = pclose(p);
  if (!got || rc != 0) return false;
  long long tokens = 0, checksum = 0;
  if (std::sscanf(buf, "mb_per_s=%lf tokens=%lld checksum=%lld", &r->mb_per_s, &tokens, &checksum) != 3) {
    return false;
  }
  r->tokens = tokens;
  r->checksum = checksum;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vocabd tokenization throughput vs python3-sentencepiece"};
  double mb = 4;
  std::string models = std::string(VOCABD_SOURCE_DIR) + "/../shared/models";
  std::string python = "/usr/bin/python3";
  int repeats = 3;
  app.add_option("--mb", mb, "corpus size in MB");
  app.add_option("--models", models, "shared models folder");
  app.add_option("--python", python, "Debian python with python3-sentencepiece");
  app.add_option("--repeats", repeats, "passes (best is reported)");
  std::string only;
  app.add_option("--only", only, "run only the tokenizers whose label contains this");
  CLI11_PARSE(app, argc, argv);

  const std::vector<std::string> docs = MakeCorpus(static_cast<size_t>(mb * 1e6));
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  const std::string corpus_path = "/tmp/vocabd_tokenizer_bench_corpus." + std::to_string(getpid());
  {
    std::ofstream f(corpus_path, std::ios::binary);
    for (const auto& d : docs) f << d << '\0';
  }
  const std::string script = std::string(VOCABD_SOURCE_DIR) + "/bench/tokenizer_py_sentencepiece.py";
  std::printf("corpus: %zu documents, %.2f MB (prose 55%%, code 25%%, CJK 12%%, emoji 8%% of "
              "pieces); %u hardware threads\n\n",
              docs.size(), bytes / 1e6, std::thread::hardware_concurrency());
  std::printf("MB/s/thr = MB per CPU-second of one thread (CPU time, as the python baseline);\n"
              "1st pass = the first pass on a fresh tokenizer (word cache empty);\n"
              "wall = the best pass in wall time\n\n");
  {
    double load[1] = {0};
    if (getloadavg(load, 1) == 1) {
      std::printf("load average (1 min) at the start: %.1f%s\n\n", load[0],
                  load[0] > 1.5 ? " (machine busy: these numbers are not a result)" : "");
    }
  }
  std::printf("%-44s %10s %10s %10s %10s %12s\n", "tokenizer", "MB/s/thr", "1st pass", "+offsets",
              "wall", "tokens");

  struct Entry {
    const char* label;
    std::string path;
    bool python_baseline;
    double target;  // MB/s per thread; 0 = none
    double min_ratio = 1.0;  // vocabd / python3-sentencepiece, per thread
  };
  constexpr double kBpeTarget = 30;      // MB/s per thread
  constexpr double kSpmBpeRatio = 15;    // x python3-sentencepiece
  constexpr double kSpmUnigramRatio = 5;
  const std::vector<Entry> entries = {
      {"Llama SPM (vocab/ggml-vocab-llama-spm.gguf)", models + "/vocab/ggml-vocab-llama-spm.gguf", true, 0,
       kSpmBpeRatio},
      {"stories260K SPM (tok512.model)", models + "/stories260K/tok512.model", true, 0, kSpmBpeRatio},
      // Unigram with sentencepiece's default nmt_nfkc charsmap (trained by
      // tests/lib/tokenizer/make_unigram_golden.py).
      {"Unigram nmt_nfkc (unigram_nmt_nfkc.model)",
       std::string(VOCABD_SOURCE_DIR) + "/tests/lib/tokenizer/testdata/unigram_nmt_nfkc.model", true, 0,
       kSpmUnigramRatio},
      {"GPT-2 BPE (vocab/ggml-vocab-gpt-2.gguf)", models + "/vocab/ggml-vocab-gpt-2.gguf", false, kBpeTarget},
      {"GPT-2 BPE (fake_gpt2/tokenizer.json)", models + "/fake_gpt2/tokenizer.json", false, kBpeTarget},
  };
  int failures = 0;
  std::vector<std::string> notes;
  for (const Entry& e : entries) {
    if (!only.empty() && std::string(e.label).find(only) == std::string::npos) continue;
    auto tok = vocabd::LoadTokenizer(e.path);
    if (!tok.ok()) {
      std::printf("%-44s load failed: %s\n", e.label, tok.status().ToString().c_str());
      ++failures;
      continue;
    }
    // First pass on the fresh tokenizer (word caches empty), then the best of
    // `repeats` passes.
    const Result cold = Measure(**tok, docs, false, 1);
    const Result ids = Measure(**tok, docs, false, repeats);
    const Result offs = Measure(**tok, docs, true, 1);
    std::printf("%-44s %10.2f %10.2f %10.2f %10.2f %12lld\n", e.label, ids.mb_per_s,
                cold.mb_per_s, offs.mb_per_s, ids.wall_mb_per_s, static_cast<long long>(ids.tokens));
    if (e.target > 0) {
      const bool ok = ids.mb_per_s >= e.target;
      char line[256];
      std::snprintf(line, sizeof(line), "%s: %.2f MB/s/thread vs target %.0f  %s", e.label, ids.mb_per_s,
                    e.target, ok ? "OK" : "BELOW TARGET");
      notes.push_back(line);
      if (!ok) ++failures;
    }
    if (e.python_baseline) {
      Result py;
      if (!RunPython(python, script, e.path, corpus_path, &py)) {
        notes.push_back(std::string(e.label) + ": python3-sentencepiece baseline failed to run (" +
                        python + " " + script + ")");
        ++failures;
      } else {
        const bool same = py.tokens == ids.tokens && py.checksum == ids.checksum;
        const bool fast = ids.mb_per_s >= e.min_ratio * py.mb_per_s;
        char line[512];
        std::snprintf(line, sizeof(line),
                      "%s: python3-sentencepiece %.2f MB/s/thread, vocabd %.2f -> ratio %.2fx "
                      "(target %.0fx: %s); ids %s (tokens %lld vs %lld, id sum %lld vs %lld)",
                      e.label, py.mb_per_s, ids.mb_per_s, ids.mb_per_s / py.mb_per_s, e.min_ratio,
                      fast ? "OK" : "BELOW TARGET", same ? "IDENTICAL" : "DIFFER",
                      static_cast<long long>(ids.tokens), static_cast<long long>(py.tokens),
                      static_cast<long long>(ids.checksum), static_cast<long long>(py.checksum));
        notes.push_back(line);
        if (!same || !fast) ++failures;
      }
    }
    int n_tokens = 0;
    const double us = LatencyUs(**tok, docs, 1000, &n_tokens);
    char line[256];
    std::snprintf(line, sizeof(line), "%s: Encode of a %d-token text (with offsets, specials): "
                  "median %.1f us", e.label, n_tokens, us);
    notes.push_back(line);
  }
  std::printf("\n");
  for (const auto& n : notes) std::printf("%s\n", n.c_str());
  std::remove(corpus_path.c_str());
  double load[1] = {0};
  if (getloadavg(load, 1) == 1) std::printf("\nload average (1 min) at the end: %.1f\n", load[0]);
  std::printf("\n%s\n", failures == 0 ? "all targets met" : "SOME TARGETS MISSED");
  return failures == 0 ? 0 : 1;
}
