#include "lib/positions/rope_cache.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vocabd {

absl::StatusOr<std::unique_ptr<RopeCache>> RopeCache::Create(const Options& options) {
  if (options.max_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("RopeCache::Options.max_bytes = ", options.max_bytes, " must be > 0"));
  }
  if (options.min_positions <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RopeCache::Options.min_positions = ", options.min_positions, " must be > 0"));
  }
  return std::unique_ptr<RopeCache>(new RopeCache(options));
}

RopeCache& RopeCache::Shared() {
  static RopeCache* cache = new RopeCache(Options());
  return *cache;
}

std::shared_ptr<const RopeTable> RopeCache::Get(const RopeFrequencies& freqs,
                                                int64_t needed_positions,
                                                bool build_if_missing) {
  if (freqs.half <= 0 || needed_positions <= 0) return nullptr;
  const int64_t row_bytes = int64_t{2} * freqs.half * static_cast<int64_t>(sizeof(float));
  const int64_t max_table_positions = options_.max_bytes / 2 / row_bytes;
  if (needed_positions > max_table_positions) return nullptr;
  const std::string key = freqs.Key();
  std::shared_ptr<const RopeTable> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      if (it->second.table->num_positions >= needed_positions) {
        ++stats_.hits;
        return it->second.table;
      }
      old = it->second.table;
    }
    if (!build_if_missing) return nullptr;
  }
  // Build outside the lock (two threads may build the same table; the last
  // one wins, both are correct).
  int64_t n = std::max(options_.min_positions, int64_t{1});
  while (n < needed_positions) n *= 2;
  n = std::min(n, max_table_positions);
  auto table = std::make_shared<RopeTable>();
  table->half = freqs.half;
  table->num_positions = n;
  const size_t h = static_cast<size_t>(freqs.half);
  table->cos.resize(static_cast<size_t>(n) * h);
  table->sin.resize(static_cast<size_t>(n) * h);
  int64_t from = 0;
  if (old != nullptr) {  // rows are deterministic: keep the computed prefix
    from = old->num_positions;
    std::memcpy(table->cos.data(), old->cos.data(), old->cos.size() * sizeof(float));
    std::memcpy(table->sin.data(), old->sin.data(), old->sin.size() * sizeof(float));
  }
  for (int64_t p = from; p < n; ++p) {
    freqs.CosSin(p, table->cos.data() + static_cast<size_t>(p) * h,
                 table->sin.data() + static_cast<size_t>(p) * h);
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.misses;
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    stats_.bytes -= it->second.table->bytes();
    lru_.erase(it->second.lru);
    entries_.erase(it);
  }
  lru_.push_front(key);
  entries_[key] = Entry{table, lru_.begin()};
  stats_.bytes += table->bytes();
  while (stats_.bytes > options_.max_bytes && lru_.size() > 1) {
    auto victim = entries_.find(lru_.back());
    stats_.bytes -= victim->second.table->bytes();
    entries_.erase(victim);
    lru_.pop_back();
  }
  stats_.entries = static_cast<int64_t>(entries_.size());
  return table;
}

RopeCache::Stats RopeCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  s.entries = static_cast<int64_t>(entries_.size());
  return s;
}

}  // namespace vocabd
