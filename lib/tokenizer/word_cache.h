// WordCache: a bounded, thread-safe map from a pre-tokenized word (its
// bytes) to what a tokenizer model made of it, shared by the compute pool's
// threads.
//
// The subword models (SentencePiece BPE, byte-level / Metaspace BPE from
// GGUF or tokenizer.json) split a text into words and encode each word on
// its own; a word's tokens depend only on the word's bytes and the model,
// and text repeats its words, so each distinct word is encoded once and its
// tokens reused. A cached value must be a function of the key bytes alone:
// offsets in it are relative to the word.
//
// Bounds: words of up to max_word_bytes are cached (longer ones are rare
// and are encoded every time); a word is cached the second time it is
// inserted (Insert: words that occur once do not take the place of those
// that repeat); the map is cut into kShards shards by the key's hash, each
// with its own mutex held only for one lookup or insert (never while a
// word is encoded), and a shard that holds max_entries_per_shard words is
// emptied before the next insert. At most kShards * max_entries_per_shard
// entries of at most max_word_bytes key bytes each are held (16 x 4096 x
// 128 B keys by default, plus the values), and 16 x 4096 fingerprints of
// 4 bytes for admission.
//
// Thread safety: every method may be called from any number of threads at
// once. Two threads that miss the same word both encode it; the second
// insert keeps the first value (both are equal).
#ifndef VOCABD_LIB_TOKENIZER_WORD_CACHE_H_
#define VOCABD_LIB_TOKENIZER_WORD_CACHE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"

namespace vocabd {
namespace tokenizer_internal {

template <typename Value>
class WordCache {
 public:
  static constexpr size_t kShards = 16;
  static constexpr size_t kDefaultMaxWordBytes = 128;
  static constexpr size_t kDefaultMaxEntriesPerShard = 4096;
  static constexpr size_t kDefaultSeenPerShard = 4096;

  // max_entries_per_shard = 0 disables the cache (every Find misses).
  // seen_per_shard > 0: a word is cached at its second Insert (below);
  // 0: at its first.
  explicit WordCache(size_t max_word_bytes = kDefaultMaxWordBytes,
                     size_t max_entries_per_shard = kDefaultMaxEntriesPerShard,
                     size_t seen_per_shard = kDefaultSeenPerShard)
      : max_word_bytes_(max_word_bytes), max_entries_(max_entries_per_shard) {
    for (Shard& s : shards_) s.seen.assign(seen_per_shard, 0);
  }
  WordCache(const WordCache&) = delete;
  WordCache& operator=(const WordCache&) = delete;

  // Whether `word` is short enough to be cached.
  bool Cacheable(std::string_view word) const {
    return max_entries_ > 0 && word.size() <= max_word_bytes_;
  }

  // When `word` is cached: calls use(const Value&) with the shard's lock
  // held (use must only copy out of the value) and returns true.
  template <typename Use>
  bool Find(std::string_view word, Use&& use) const {
    if (!Cacheable(word)) return false;
    const Hashed key = Hash(word);
    const Shard& shard = shards_[ShardIndex(key.hash)];
    std::lock_guard<std::mutex> lock(shard.mu);
    const auto it = shard.map.find(key);
    if (it == shard.map.end()) return false;
    use(it->second);
    return true;
  }

  // Caches `value` for `word`; false when it does not (the word is not
  // Cacheable, is cached already, or is seen for the first time).
  //
  // Admission: with seen_per_shard > 0, a word is cached only when it was
  // inserted before and its hash is still in the shard's `seen` table (one
  // 32-bit fingerprint per slot, a newer word overwrites an older one). A
  // text's words that occur once (numbers, runs of CJK letters, ...) then
  // neither fill the shards, which would empty them of the words that
  // repeat, nor spread the cache over more memory than the CPU caches hold.
  // A full shard is emptied before an insert.
  bool Insert(std::string_view word, Value value) {
    if (!Cacheable(word)) return false;
    const Hashed key = Hash(word);
    Shard& shard = shards_[ShardIndex(key.hash)];
    std::lock_guard<std::mutex> lock(shard.mu);
    if (!shard.seen.empty()) {
      const auto h = static_cast<uint64_t>(key.hash);
      uint32_t& slot = shard.seen[static_cast<size_t>(h >> 16) % shard.seen.size()];
      const uint32_t fingerprint = static_cast<uint32_t>(h >> 32) | 1u;  // 0: empty slot
      if (slot != fingerprint) {
        slot = fingerprint;
        return false;
      }
    }
    if (shard.map.size() >= max_entries_) {
      if (shard.map.find(key) != shard.map.end()) return false;
      shard.map.clear();
    }
    return shard.map.try_emplace(std::string(word), std::move(value)).second;
  }

  // Words cached now (all shards; for tests).
  size_t size() const {
    size_t n = 0;
    for (const Shard& s : shards_) {
      std::lock_guard<std::mutex> lock(s.mu);
      n += s.map.size();
    }
    return n;
  }

 private:
  // A word and its hash, computed once per Find / Insert for both the
  // shard and the shard's map (heterogeneous lookup).
  struct Hashed {
    absl::string_view s;
    size_t hash;
  };
  static Hashed Hash(std::string_view word) {
    const absl::string_view s(word.data(), word.size());
    return {s, absl::HashOf(s)};
  }
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(const std::string& k) const { return absl::HashOf(absl::string_view(k)); }
    size_t operator()(const Hashed& k) const { return k.hash; }
  };
  struct KeyEq {
    using is_transparent = void;
    bool operator()(const std::string& a, const std::string& b) const { return a == b; }
    bool operator()(const Hashed& a, const std::string& b) const { return a.s == b; }
    bool operator()(const std::string& a, const Hashed& b) const { return a == b.s; }
  };
  struct Shard {
    mutable std::mutex mu;
    absl::flat_hash_map<std::string, Value, KeyHash, KeyEq> map;
    std::vector<uint32_t> seen;  // admission fingerprints (Insert)
  };
  // The shard from bits 40.. of the hash (a shard's map places its at most
  // a few thousand keys by the low bits).
  static size_t ShardIndex(size_t hash) { return static_cast<size_t>(static_cast<uint64_t>(hash) >> 40) % kShards; }

  const size_t max_word_bytes_;
  const size_t max_entries_;
  std::array<Shard, kShards> shards_;
};

}  // namespace tokenizer_internal
}  // namespace vocabd

#endif  // VOCABD_LIB_TOKENIZER_WORD_CACHE_H_
