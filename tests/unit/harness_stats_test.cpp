#include <gtest/gtest.h>

#include <cmath>

#include "harness/verify/compare.h"
#include "harness/engine/stats.h"
#include "lina/error.h"

namespace lina::harness {
namespace {

TEST(HarnessStats, OddSampleByHand) {
  // Sorted 1..5; linear interpolation at q*(n-1): p10 -> 0.4 -> 1.4, p20 -> 1.8, p80 -> 4.2, p90 -> 4.6.
  const Summary s = summarize({4, 1, 5, 3, 2});
  EXPECT_EQ(s.n, 5u);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_NEAR(s.std, std::sqrt(2.5), 1e-12);  // sum of squares 10 / (n - 1)
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_NEAR(s.p10, 1.4, 1e-12);
  EXPECT_NEAR(s.p20, 1.8, 1e-12);
  EXPECT_NEAR(s.p80, 4.2, 1e-12);
  EXPECT_NEAR(s.p90, 4.6, 1e-12);
  EXPECT_NEAR(s.noise(), std::sqrt(2.5) / 3, 1e-12);
}

TEST(HarnessStats, EvenSampleByHand) {
  const std::vector<double> v{10, 1, 3, 2};
  EXPECT_DOUBLE_EQ(median(v), 2.5);
  EXPECT_DOUBLE_EQ(mean(v), 4);
  EXPECT_NEAR(sample_std(v), std::sqrt(50.0 / 3.0), 1e-12);  // deviations -3 -2 -1 6
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 1), 10);
  EXPECT_NEAR(percentile(v, 0.9), 3 + 0.7 * 7, 1e-12);  // pos 2.7 between 3 and 10
  EXPECT_DOUBLE_EQ(sample_std({7}), 0);
}

TEST(HarnessStats, ErrorsOnEmptyAndBadQuantile) {
  EXPECT_THROW(median({}), Error);
  EXPECT_THROW(percentile({1, 2}, 1.5), Error);
  EXPECT_THROW(geomean({}), Error);
  EXPECT_THROW(geomean({1, -2}), Error);
}

TEST(HarnessStats, Geomean) {
  EXPECT_NEAR(geomean({1, 4, 16}), 4, 1e-12);
  EXPECT_NEAR(geomean({2, 8}), 4, 1e-12);
  EXPECT_NEAR(geomean({3}), 3, 1e-12);
}

TEST(HarnessStats, BootstrapOfConstantSamplesIsExact) {
  // The one speedup bootstrap (harness/verify/compare.h), used by verify and compare alike.
  const CellComparison ci = compare_samples({2, 2, 2, 2}, {1, 1, 1}, 7);
  EXPECT_DOUBLE_EQ(ci.speedup, 2);
  EXPECT_DOUBLE_EQ(ci.ci_low, 2);
  EXPECT_DOUBLE_EQ(ci.ci_high, 2);
}

TEST(HarnessStats, BootstrapIsSeededAndBracketsTheRatio) {
  const std::vector<double> base{2.0, 2.1, 1.9, 2.3, 2.05, 1.95, 2.2, 1.8, 2.0, 2.15};
  const std::vector<double> head{1.0, 1.1, 0.95, 1.05, 1.2, 0.9, 1.0, 1.02, 0.98, 1.1};
  const CellComparison a = compare_samples(base, head, 1);
  const CellComparison b = compare_samples(base, head, 1);
  const CellComparison c = compare_samples(base, head, 2);
  EXPECT_DOUBLE_EQ(a.ci_low, b.ci_low);
  EXPECT_DOUBLE_EQ(a.ci_high, b.ci_high);
  EXPECT_TRUE(a.ci_low != c.ci_low || a.ci_high != c.ci_high);
  EXPECT_NEAR(a.speedup, median(base) / median(head), 1e-12);
  EXPECT_LT(a.ci_low, a.speedup);
  EXPECT_GT(a.ci_high, a.speedup);
  EXPECT_GT(a.ci_low, 1.0);  // clearly faster: the interval excludes 1
}

}  // namespace
}  // namespace lina::harness
