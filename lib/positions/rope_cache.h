// Bounded LRU cache of RoPE cos/sin tables, one per distinct set of
// frequencies (RopeFrequencies::Key: precision, attention scaling and the
// exact inv_freq bits, which is everything RopeParams decides for a request).
// A table holds positions [0, num_positions) as [num_positions, half] F32
// cos and sin rows (times attention scaling), computed by
// RopeFrequencies::CosSin, so a cached row is bit-identical to a direct one.
// Thread-safe; returned tables are immutable and stay valid while held.
#ifndef VOCABD_LIB_POSITIONS_ROPE_CACHE_H_
#define VOCABD_LIB_POSITIONS_ROPE_CACHE_H_

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/positions/rope_freq.h"

namespace vocabd {

struct RopeTable {
  int half = 0;
  int64_t num_positions = 0;
  std::vector<float> cos;  // [num_positions, half]
  std::vector<float> sin;  // [num_positions, half]
  int64_t bytes() const { return static_cast<int64_t>((cos.size() + sin.size()) * sizeof(float)); }
};

class RopeCache {
 public:
  struct Options {
    // Total bytes of all tables; least recently used tables are dropped
    // beyond it. One table may use at most half of it (larger requests are
    // computed per call, uncached).
    int64_t max_bytes = int64_t{256} << 20;
    // Smallest table built (positions); tables grow by doubling.
    int64_t min_positions = 4096;
  };
  // INVALID_ARGUMENT for max_bytes <= 0 or min_positions <= 0.
  static absl::StatusOr<std::unique_ptr<RopeCache>> Create(const Options& options);
  // The process-wide cache used when ApplyRopeOptions::cache is null
  // (default Options).
  static RopeCache& Shared();

  // A table with num_positions >= needed_positions for `freqs`, or nullptr
  // when such a table would exceed max_bytes / 2, or when none is cached and
  // build_if_missing is false (callers with few tokens at far positions,
  // e.g. decode steps, compute their rows directly instead).
  std::shared_ptr<const RopeTable> Get(const RopeFrequencies& freqs, int64_t needed_positions,
                                       bool build_if_missing = true);

  struct Stats {
    int64_t hits = 0;
    int64_t misses = 0;   // tables built (new or grown)
    int64_t entries = 0;
    int64_t bytes = 0;
  };
  Stats stats() const;

 private:
  explicit RopeCache(const Options& options) : options_(options) {}
  struct Entry {
    std::shared_ptr<const RopeTable> table;
    std::list<std::string>::iterator lru;
  };
  Options options_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> lru_;  // front = most recent
  Stats stats_;
};

}  // namespace vocabd

#endif  // VOCABD_LIB_POSITIONS_ROPE_CACHE_H_
