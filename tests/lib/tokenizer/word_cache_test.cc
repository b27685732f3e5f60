// WordCache (lib/tokenizer/word_cache.h): bounds, eviction, and concurrent
// use, alone and inside the tokenizers that share it (SentencePiece BPE,
// GGUF BPE, tokenizer.json BPE). Linked into vocabd_serving_tests so the
// ThreadSanitizer suite runs the concurrent tests.
#include "lib/tokenizer/word_cache.h"

#include <atomic>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/tokenizer/tokenizer_loader.h"
#include "tests/test_util.h"

namespace vocabd {
namespace word_cache_test {  // unique names in the unity build
namespace {

using tokenizer_internal::WordCache;

// A deterministic stand-in for a model: the word's bytes times its length.
std::vector<int> WordModel(const std::string& word) {
  std::vector<int> v;
  for (unsigned char c : word) v.push_back(static_cast<int>(c) * static_cast<int>(word.size()));
  return v;
}

std::vector<int> Cached(WordCache<std::vector<int>>& cache, const std::string& word, bool* hit) {
  std::vector<int> out;
  *hit = cache.Find(word, [&out](const std::vector<int>& v) { out = v; });
  if (!*hit) {
    out = WordModel(word);
    cache.Insert(word, out);
  }
  return out;
}

TEST(WordCacheTest, FindsWhatWasInsertedAndSkipsLongWords) {
  WordCache<std::vector<int>> cache(/*max_word_bytes=*/8, /*max_entries_per_shard=*/16, /*seen_per_shard=*/0);
  bool hit = true;
  EXPECT_EQ(Cached(cache, "hello", &hit), WordModel("hello"));
  EXPECT_FALSE(hit);
  EXPECT_EQ(Cached(cache, "hello", &hit), WordModel("hello"));
  EXPECT_TRUE(hit);
  EXPECT_EQ(cache.size(), 1u);
  // "hello" and "hello " are different keys.
  EXPECT_EQ(Cached(cache, "hello ", &hit), WordModel("hello "));
  EXPECT_FALSE(hit);
  // 8 bytes are cached, 9 are not.
  EXPECT_TRUE(cache.Cacheable("12345678"));
  EXPECT_FALSE(cache.Cacheable("123456789"));
  Cached(cache, "123456789", &hit);
  EXPECT_EQ(Cached(cache, "123456789", &hit), WordModel("123456789"));
  EXPECT_FALSE(hit);
  EXPECT_EQ(cache.size(), 2u);
  // An empty word is a key like any other.
  Cached(cache, "", &hit);
  Cached(cache, "", &hit);
  EXPECT_TRUE(hit);
  // A second insert of a cached word keeps the first value.
  EXPECT_FALSE(cache.Insert("hello", {1, 2, 3}));
  std::vector<int> got;
  ASSERT_TRUE(cache.Find("hello", [&got](const std::vector<int>& v) { got = v; }));
  EXPECT_EQ(got, WordModel("hello"));
}

// With admission (the default), a word is cached at its second insert.
TEST(WordCacheTest, AWordIsCachedTheSecondTimeItIsSeen) {
  WordCache<std::vector<int>> cache;
  bool hit = true;
  EXPECT_EQ(Cached(cache, "seen", &hit), WordModel("seen"));
  EXPECT_FALSE(hit);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(Cached(cache, "seen", &hit), WordModel("seen"));
  EXPECT_FALSE(hit);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(Cached(cache, "seen", &hit), WordModel("seen"));
  EXPECT_TRUE(hit);
  // Words inserted once each are never cached.
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(cache.Insert(absl::StrCat("once", i), {i}));
  EXPECT_EQ(cache.size(), 1u);
  // Without admission: cached at the first insert.
  WordCache<std::vector<int>> eager(128, 16, 0);
  EXPECT_TRUE(eager.Insert("first", {1}));
  EXPECT_TRUE(eager.Find("first", [](const std::vector<int>& v) { EXPECT_EQ(v, std::vector<int>{1}); }));
}

TEST(WordCacheTest, ZeroEntriesDisablesTheCache) {
  WordCache<std::vector<int>> cache(128, 0);
  EXPECT_FALSE(cache.Cacheable("a"));
  bool hit = true;
  Cached(cache, "a", &hit);
  EXPECT_EQ(Cached(cache, "a", &hit), WordModel("a"));
  EXPECT_FALSE(hit);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(WordCacheTest, AFullShardIsEmptiedAndTheSizeStaysBounded) {
  constexpr size_t kPerShard = 4;
  const size_t bound = WordCache<std::vector<int>>::kShards * kPerShard;
  WordCache<std::vector<int>> cache(32, kPerShard, /*seen_per_shard=*/0);
  size_t max_size = 0;
  bool shrank = false;
  for (int i = 0; i < 2000; ++i) {
    const std::string w = absl::StrCat("w", i);
    const size_t before = cache.size();
    bool hit = true;
    EXPECT_EQ(Cached(cache, w, &hit), WordModel(w));
    EXPECT_FALSE(hit) << w;
    const size_t after = cache.size();
    ASSERT_LE(after, bound);
    if (after < before) shrank = true;
    max_size = std::max(max_size, after);
    // The word just inserted is there.
    EXPECT_TRUE(cache.Find(w, [](const std::vector<int>&) {})) << w;
  }
  EXPECT_TRUE(shrank);
  // The bound is reached: every shard filled up at some point.
  EXPECT_GT(max_size, bound / 2);
  // Evicted words are recomputed with the same value.
  for (int i = 0; i < 2000; ++i) {
    const std::string w = absl::StrCat("w", i);
    bool hit = false;
    EXPECT_EQ(Cached(cache, w, &hit), WordModel(w)) << w;
  }
}

// Threads share a small cache (shards are emptied again and again while
// others read and insert): every lookup gives WordModel's value.
TEST(WordCacheTest, ConcurrentUseGivesTheModelsValue) {
  WordCache<std::vector<int>> cache(64, 8);
  std::vector<std::string> words;
  for (int i = 0; i < 500; ++i) words.push_back(absl::StrCat("word", i % 97, "_", i % 13));
  std::atomic<int> mismatches{0}, hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep) {
        for (size_t k = 0; k < words.size(); ++k) {
          const std::string& w = words[(k * (t + 1) + static_cast<size_t>(rep)) % words.size()];
          bool hit = false;
          if (Cached(cache, w, &hit) != WordModel(w)) ++mismatches;
          if (hit) ++hits;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GT(hits.load(), 0);
  EXPECT_LE(cache.size(), WordCache<std::vector<int>>::kShards * 8);
}

// ---- inside the tokenizers ----------------------------------------------

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// llama.cpp's fixture: .inp inputs separated by "\n__ggml_vocab_test__\n",
// .out one line of Hugging Face ids per input.
std::vector<Case> Fixture(const std::string& name) {
  const std::string gguf = testing::SharedModelsDir() + "/vocab/ggml-vocab-" + name + ".gguf";
  const std::string inp = ReadAll(gguf + ".inp");
  const std::vector<std::string> lines = absl::StrSplit(ReadAll(gguf + ".out"), '\n');
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  size_t pos = 0;
  for (size_t hit = inp.find(sep); hit != std::string::npos; hit = inp.find(sep, pos)) {
    Case c;
    c.text = inp.substr(pos, hit - pos);
    if (cases.size() < lines.size()) {
      for (absl::string_view t : absl::StrSplit(lines[cases.size()], ' ', absl::SkipEmpty())) {
        c.ids.push_back(std::stoi(std::string(t)));
      }
    }
    cases.push_back(std::move(c));
    pos = hit + sep.size();
  }
  return cases;
}

struct TokCase {
  const char* label;
  std::string path;
  const char* fixture;
};

std::vector<TokCase> TokCases() {
  const std::string m = testing::SharedModelsDir();
  return {{"llama-spm gguf (SentencePiece BPE)", m + "/vocab/ggml-vocab-llama-spm.gguf", "llama-spm"},
          {"gpt-2 gguf (BPE)", m + "/vocab/ggml-vocab-gpt-2.gguf", "gpt-2"},
          {"fake_gpt2 tokenizer.json (BPE)", m + "/fake_gpt2", "gpt-2"}};
}

// A cold cache (a fresh tokenizer: a text with long words first, then the
// fixture's texts in reverse order) and a warm one (every word cached: the
// texts again, twice) give the fixture's ids and the same offsets. The long
// words (over the cached length) are encoded every time.
TEST(WordCacheTest, TokenizersGiveTheSameTokensColdAndWarm) {
  for (const TokCase& tc : TokCases()) {
    SCOPED_TRACE(tc.label);
    auto tok = LoadTokenizer(tc.path);
    ASSERT_TRUE(tok.ok()) << tok.status();
    const std::vector<Case> cases = Fixture(tc.fixture);
    ASSERT_GT(cases.size(), 10u);
    const std::string long_word(300, 'x');
    const std::string extra = "Once upon a time " + long_word + " and again " + long_word + "y.";
    auto extra_cold = (*tok)->Encode(extra, false);
    ASSERT_TRUE(extra_cold.ok());
    std::vector<Encoding> cold(cases.size());
    for (size_t k = cases.size(); k-- > 0;) {
      auto e = (*tok)->Encode(cases[k].text, false);
      ASSERT_TRUE(e.ok()) << e.status();
      EXPECT_EQ(e->ids, cases[k].ids) << "\"" << cases[k].text << "\"";
      cold[k] = *std::move(e);
    }
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t k = 0; k < cases.size(); ++k) {
        auto e = (*tok)->Encode(cases[k].text, false);
        ASSERT_TRUE(e.ok()) << e.status();
        EXPECT_EQ(e->ids, cold[k].ids) << "\"" << cases[k].text << "\"";
        EXPECT_EQ(e->offsets, cold[k].offsets) << "\"" << cases[k].text << "\"";
      }
      auto e = (*tok)->Encode(extra, false);
      ASSERT_TRUE(e.ok());
      EXPECT_EQ(e->ids, extra_cold->ids);
      EXPECT_EQ(e->offsets, extra_cold->offsets);
    }
  }
}

// Threads encoding at once through one fresh tokenizer (one word cache,
// filling while they read it) get the fixture's ids and the offsets of a
// single-thread encode.
TEST(WordCacheTest, TokenizersEncodeConcurrently) {
  for (const TokCase& tc : TokCases()) {
    SCOPED_TRACE(tc.label);
    auto tok = LoadTokenizer(tc.path);
    ASSERT_TRUE(tok.ok()) << tok.status();
    const std::vector<Case> cases = Fixture(tc.fixture);
    constexpr int kThreads = 3;
    std::vector<std::vector<Encoding>> got(kThreads, std::vector<Encoding>(cases.size()));
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int rep = 0; rep < 2; ++rep) {
          for (size_t k = 0; k < cases.size(); ++k) {
            const size_t i = (k + static_cast<size_t>(t) * 7) % cases.size();
            auto e = (*tok)->Encode(cases[i].text, false);
            if (!e.ok() || e->ids != cases[i].ids) ++mismatches;
            if (e.ok()) got[t][i] = *std::move(e);
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(mismatches.load(), 0);
    for (size_t i = 0; i < cases.size(); ++i) {
      auto e = (*tok)->Encode(cases[i].text, false);
      ASSERT_TRUE(e.ok());
      for (int t = 0; t < kThreads; ++t) EXPECT_EQ(got[t][i].offsets, e->offsets) << "\"" << cases[i].text << "\"";
    }
  }
}

}  // namespace
}  // namespace word_cache_test
}  // namespace vocabd
