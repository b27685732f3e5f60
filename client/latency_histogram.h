// A log-bucketed latency histogram with a bounded relative error (the idea
// of HdrHistogram, G. Tene; written from the description, no code copied).
//
// Values are non-negative integers (vocabctl bench records nanoseconds).
// With `precision_bits` = b, values below 2^b get one bucket each (exact);
// a value v >= 2^b with e = floor(log2 v) falls in a bucket of width
// 2^(e - b) that starts at or above 2^e. Every bucket is reported by its
// midpoint, so any reported value q for a true value v satisfies
//
//   |q - v| <= v * 2^-(b + 1)        (b = 7: 0.39 %, b = 10: 0.049 %)
//
// Memory: (64 - b) * 2^b int64 counters (b = 7: 57 KiB). count(), min(),
// max() and mean() are exact. Not thread-safe; merge per-thread copies.
#ifndef VOCABD_CLIENT_LATENCY_HISTOGRAM_H_
#define VOCABD_CLIENT_LATENCY_HISTOGRAM_H_

#include <cstdint>
#include <vector>

namespace vocabd {

class LatencyHistogram {
 public:
  // precision_bits in [1, 16]; out-of-range values are clamped.
  explicit LatencyHistogram(int precision_bits = 7);

  // Negative values are recorded as 0.
  void Record(int64_t value);
  // Adds `other`'s counts. Both must have the same precision_bits
  // (otherwise nothing is added and false is returned).
  bool Merge(const LatencyHistogram& other);
  void Reset();

  int64_t count() const { return count_; }
  // 0 when empty.
  int64_t min() const { return count_ ? min_ : 0; }
  int64_t max() const { return count_ ? max_ : 0; }
  double mean() const { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }
  int precision_bits() const { return bits_; }
  // The guaranteed bound on |reported - true| / true: 2^-(b + 1).
  double relative_error() const;

  // Nearest-rank percentile: the recorded value of rank ceil(p/100 * count)
  // (rank 1 for p <= 0), reported as its bucket's midpoint clamped to
  // [min(), max()]; ranks 1 and count() return min() and max() exactly. p is clamped to [0, 100]; 0 when empty.
  int64_t ValueAtPercentile(double p) const;

  // Bucket arithmetic (public for tests): the bucket of `value` and the
  // inclusive value range [lowest, highest] of a bucket.
  int BucketIndex(int64_t value) const;
  int64_t BucketLowest(int index) const;
  int64_t BucketHighest(int index) const;

 private:
  int bits_;
  std::vector<int64_t> counts_;
  int64_t count_ = 0;
  int64_t min_ = 0;
  int64_t max_ = 0;
  double sum_ = 0;
};

}  // namespace vocabd

#endif  // VOCABD_CLIENT_LATENCY_HISTOGRAM_H_
