#include "client/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace vocabd {

LatencyHistogram::LatencyHistogram(int precision_bits)
    : bits_(std::clamp(precision_bits, 1, 16)) {
  // Linear range [0, 2^b) plus, for each shift s = 0 .. 62 - b, the 2^b
  // buckets of [2^(b+s), 2^(b+s+1)).
  counts_.assign(static_cast<size_t>(64 - bits_) << bits_, 0);
}

int LatencyHistogram::BucketIndex(int64_t value) const {
  const uint64_t v = value < 0 ? 0 : static_cast<uint64_t>(value);
  const uint64_t sub = uint64_t{1} << bits_;
  if (v < sub) return static_cast<int>(v);
  const int e = std::bit_width(v) - 1;  // floor(log2 v) >= bits_
  const int shift = e - bits_;
  const uint64_t m = v >> shift;  // in [2^b, 2^(b+1))
  return static_cast<int>((static_cast<uint64_t>(shift + 1) << bits_) + (m - sub));
}

int64_t LatencyHistogram::BucketLowest(int index) const {
  const int64_t sub = int64_t{1} << bits_;
  if (index < sub) return index;
  const int shift = (index >> bits_) - 1;
  const int64_t m = sub + (index & (sub - 1));
  return m << shift;
}

int64_t LatencyHistogram::BucketHighest(int index) const {
  const int64_t sub = int64_t{1} << bits_;
  if (index < sub) return index;
  const int shift = (index >> bits_) - 1;
  return BucketLowest(index) + ((int64_t{1} << shift) - 1);
}

double LatencyHistogram::relative_error() const { return std::ldexp(1.0, -(bits_ + 1)); }

void LatencyHistogram::Record(int64_t value) {
  if (value < 0) value = 0;
  ++counts_[static_cast<size_t>(BucketIndex(value))];
  if (count_ == 0) {
    min_ = max_ = value;
  } else {
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }
  ++count_;
  sum_ += static_cast<double>(value);
}

bool LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (other.bits_ != bits_) return false;
  if (other.count_ == 0) return true;
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  if (count_ == 0) {
    min_ = other.min_;
    max_ = other.max_;
  } else {
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
  }
  count_ += other.count_;
  sum_ += other.sum_;
  return true;
}

void LatencyHistogram::Reset() {
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = 0;
  min_ = max_ = 0;
  sum_ = 0;
}

int64_t LatencyHistogram::ValueAtPercentile(double p) const {
  if (count_ == 0) return 0;
  p = std::clamp(p, 0.0, 100.0);
  int64_t rank = static_cast<int64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
  rank = std::clamp<int64_t>(rank, 1, count_);
  if (rank == 1) return min_;  // exact ends
  if (rank == count_) return max_;
  int64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      const int idx = static_cast<int>(i);
      const int64_t lo = BucketLowest(idx), hi = BucketHighest(idx);
      const int64_t mid = lo + (hi - lo) / 2;
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;
}

}  // namespace vocabd
