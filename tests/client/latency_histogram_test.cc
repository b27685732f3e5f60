#include "client/latency_histogram.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace vocabd {
namespace {

// Exact nearest-rank percentile of a sorted sample.
int64_t ExactPercentile(const std::vector<int64_t>& sorted, double p) {
  int64_t rank = static_cast<int64_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  rank = std::clamp<int64_t>(rank, 1, static_cast<int64_t>(sorted.size()));
  return sorted[static_cast<size_t>(rank - 1)];
}

TEST(LatencyHistogramTest, SmallValuesAreExact) {
  LatencyHistogram h(7);
  for (int64_t v = 0; v < 128; ++v) h.Record(v);
  EXPECT_EQ(h.count(), 128);
  EXPECT_EQ(h.min(), 0);
  EXPECT_EQ(h.max(), 127);
  EXPECT_DOUBLE_EQ(h.mean(), 63.5);
  EXPECT_EQ(h.ValueAtPercentile(50), 63);  // rank 64
  EXPECT_EQ(h.ValueAtPercentile(100), 127);
  EXPECT_EQ(h.ValueAtPercentile(0), 0);
}

TEST(LatencyHistogramTest, BucketsTileTheRangeWithBoundedWidth) {
  for (int bits : {1, 3, 7, 10}) {
    LatencyHistogram h(bits);
    const int64_t limit = std::numeric_limits<int64_t>::max();
    int64_t expected_lo = 0;
    for (int i = 0;; ++i) {
      const int64_t lo = h.BucketLowest(i), hi = h.BucketHighest(i);
      ASSERT_EQ(lo, expected_lo) << "bits " << bits << " bucket " << i;
      ASSERT_LE(lo, hi);
      ASSERT_EQ(h.BucketIndex(lo), i);
      ASSERT_EQ(h.BucketIndex(hi), i);
      // Width relative to the lowest value is at most 2^-bits.
      if (hi > lo) {  // the linear buckets (width 1) are exact
        ASSERT_LE(static_cast<double>(hi - lo + 1), std::ldexp(static_cast<double>(lo), -bits));
      }
      if (hi == limit) break;
      expected_lo = hi + 1;
    }
  }
}

TEST(LatencyHistogramTest, PercentilesWithinRelativeErrorBound) {
  for (int bits : {3, 7, 10}) {
    LatencyHistogram h(bits);
    const double bound = h.relative_error();
    EXPECT_DOUBLE_EQ(bound, std::ldexp(1.0, -(bits + 1)));
    std::mt19937_64 rng(42 + bits);
    // Log-uniform between 1 us and 10 s in ns: every bucket size matters.
    std::uniform_real_distribution<double> log_ns(std::log(1e3), std::log(1e10));
    std::vector<int64_t> values;
    for (int i = 0; i < 200000; ++i) values.push_back(static_cast<int64_t>(std::exp(log_ns(rng))));
    for (int64_t v : values) h.Record(v);
    std::sort(values.begin(), values.end());
    double worst = 0;
    for (double p = 0; p <= 100.0; p += 0.1) {
      const double exact = static_cast<double>(ExactPercentile(values, p));
      const double got = static_cast<double>(h.ValueAtPercentile(p));
      const double err = std::abs(got - exact) / exact;
      worst = std::max(worst, err);
      ASSERT_LE(err, bound) << "bits " << bits << " p" << p << " exact " << exact << " got " << got;
    }
    for (double p : {99.9, 99.99, 99.999}) {
      const double exact = static_cast<double>(ExactPercentile(values, p));
      EXPECT_LE(std::abs(static_cast<double>(h.ValueAtPercentile(p)) - exact) / exact, bound);
    }
    // The bound is tight-ish: the worst seen error uses a good part of it
    // (a histogram that rounds far too coarsely or too finely shows here).
    EXPECT_GT(worst, bound / 8) << "bits " << bits;
    EXPECT_EQ(h.min(), values.front());
    EXPECT_EQ(h.max(), values.back());
    EXPECT_EQ(h.ValueAtPercentile(100), values.back());
  }
}

TEST(LatencyHistogramTest, EveryValueIsReportedWithinBound) {
  // The extreme ranks are exact (min / max); the middle one of three
  // values sharing a bucket shows the midpoint.
  LatencyHistogram h(7);
  const int64_t lo = h.BucketLowest(h.BucketIndex(1000000));
  const int64_t hi = h.BucketHighest(h.BucketIndex(1000000));
  ASSERT_GT(hi, lo);
  h.Record(lo);
  h.Record(hi);
  h.Record(hi);
  EXPECT_EQ(h.ValueAtPercentile(0), lo);
  EXPECT_EQ(h.ValueAtPercentile(100), hi);
  const int64_t mid = h.ValueAtPercentile(50);
  EXPECT_EQ(mid, lo + (hi - lo) / 2);
  EXPECT_LE(static_cast<double>(mid - lo), static_cast<double>(lo) * h.relative_error());
  EXPECT_LE(static_cast<double>(hi - mid), static_cast<double>(lo) * h.relative_error() + 1);
}

TEST(LatencyHistogramTest, MergeEqualsRecordingEverything) {
  LatencyHistogram a(7), b(7), all(7);
  std::mt19937_64 rng(7);
  std::exponential_distribution<double> exp_ns(1.0 / 2e6);
  for (int i = 0; i < 5000; ++i) {
    const int64_t v = static_cast<int64_t>(exp_ns(rng));
    (i % 3 ? a : b).Record(v);
    all.Record(v);
  }
  ASSERT_TRUE(a.Merge(b));
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  EXPECT_NEAR(a.mean(), all.mean(), 1e-6 * all.mean());
  for (double p : {1.0, 50.0, 90.0, 99.0, 99.9}) EXPECT_EQ(a.ValueAtPercentile(p), all.ValueAtPercentile(p));
  LatencyHistogram other_precision(5);
  EXPECT_FALSE(a.Merge(other_precision));
}

TEST(LatencyHistogramTest, EmptyNegativeAndHugeValues) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0);
  EXPECT_EQ(h.ValueAtPercentile(99), 0);
  EXPECT_EQ(h.mean(), 0);
  h.Record(-5);
  EXPECT_EQ(h.min(), 0);
  h.Record(std::numeric_limits<int64_t>::max());
  EXPECT_EQ(h.max(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(h.ValueAtPercentile(100), std::numeric_limits<int64_t>::max());
  h.Reset();
  EXPECT_EQ(h.count(), 0);
  EXPECT_EQ(h.ValueAtPercentile(50), 0);
}

}  // namespace
}  // namespace vocabd
