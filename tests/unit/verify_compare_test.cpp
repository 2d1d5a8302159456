// Verdict logic on synthetic timing samples: clear win, clear loss, noise, threshold, geomean.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "harness/verify/compare.h"
#include "lina/error.h"

namespace lina::harness {
namespace {

std::vector<double> samples(double center, double rel_noise, int n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> d(0.0, rel_noise);
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(center * (1.0 + d(g)));
  return v;
}

TEST(VerifyCompare, MedianAndGeomean) {
  EXPECT_DOUBLE_EQ(median_of({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median_of({4, 1, 3, 2}), 2.5);
  EXPECT_TRUE(std::isnan(median_of({})));
  EXPECT_NEAR(geomean_of({2.0, 0.5}), 1.0, 1e-12);
  EXPECT_NEAR(geomean_of({1.0, 4.0, 16.0}), 4.0, 1e-12);
  EXPECT_THROW(geomean_of({1.0, 0.0}), Error);
}

TEST(VerifyCompare, ClearWinIsFasterWithIntervalAboveOne) {
  const auto c = compare_samples(samples(2.0, 0.01, 30, 1), samples(1.0, 0.01, 30, 2), 7);
  EXPECT_EQ(c.verdict, "faster");
  EXPECT_NEAR(c.speedup, 2.0, 0.05);
  EXPECT_GT(c.ci_low, 1.0);
  EXPECT_LE(c.ci_low, c.speedup);
  EXPECT_GE(c.ci_high, c.speedup);
  EXPECT_NEAR(c.speedup_pct, (c.speedup - 1) * 100, 1e-9);
  EXPECT_NEAR(c.latency_change_pct(), (1 / c.speedup - 1) * 100, 1e-9);
  EXPECT_LT(c.latency_change_pct(), -45);
}

TEST(VerifyCompare, ClearLossIsSlower) {
  const auto c = compare_samples(samples(1.0, 0.01, 30, 3), samples(1.25, 0.01, 30, 4), 7);
  EXPECT_EQ(c.verdict, "slower");
  EXPECT_LT(c.ci_high, 1.0);
  EXPECT_LT(c.speedup_pct, -15);
  EXPECT_GT(c.latency_change_pct(), 20);
}

TEST(VerifyCompare, SameDistributionIsNoise) {
  // Two runs of one distribution: the candidate's samples are the baseline's, reordered.
  const auto base = samples(1.0, 0.05, 31, 5);
  const std::vector<double> head(base.rbegin(), base.rend());
  const auto c = compare_samples(base, head, 7);
  EXPECT_EQ(c.verdict, "noise");
  EXPECT_DOUBLE_EQ(c.speedup, 1.0);
  EXPECT_LT(c.ci_low, 1.0);
  EXPECT_GT(c.ci_high, 1.0);
}

TEST(VerifyCompare, TinyButCertainChangeStaysBelowTheThreshold) {
  // 1 % faster with almost no noise: the interval excludes 1, but 1 % < the 2 % threshold.
  const auto c = compare_samples(samples(1.01, 0.0005, 40, 8), samples(1.0, 0.0005, 40, 9), 7);
  EXPECT_GT(c.ci_low, 1.0);
  EXPECT_EQ(c.verdict, "noise");
  EXPECT_EQ(compare_samples(samples(1.01, 0.0005, 40, 8), samples(1.0, 0.0005, 40, 9), 7, 0.5).verdict, "faster");
}

TEST(VerifyCompare, BootstrapIsSeededAndReproducible) {
  const auto b = samples(1.1, 0.05, 20, 10), h = samples(1.0, 0.05, 20, 11);
  const auto a1 = compare_samples(b, h, 123), a2 = compare_samples(b, h, 123), a3 = compare_samples(b, h, 124);
  EXPECT_EQ(a1.ci_low, a2.ci_low);
  EXPECT_EQ(a1.ci_high, a2.ci_high);
  EXPECT_TRUE(a1.ci_low != a3.ci_low || a1.ci_high != a3.ci_high);
}

TEST(VerifyCompare, VerdictRules) {
  EXPECT_EQ(speedup_verdict(1.05, 1.2, 10, 2), "faster");
  EXPECT_EQ(speedup_verdict(0.99, 1.2, 10, 2), "noise");   // interval touches 1
  EXPECT_EQ(speedup_verdict(0.8, 0.95, -10, 2), "slower");
  EXPECT_EQ(speedup_verdict(0.97, 0.99, -1.5, 2), "noise");  // below threshold
}

TEST(VerifyCompare, GeomeanSpeedupAndInterval) {
  std::vector<std::pair<std::vector<double>, std::vector<double>>> cells = {
      {samples(2.0, 0.01, 20, 12), samples(1.0, 0.01, 20, 13)},   // 2x
      {samples(1.0, 0.01, 20, 14), samples(2.0, 0.01, 20, 15)}};  // 0.5x
  const auto g = bootstrap_geomean(cells, 3);
  EXPECT_EQ(g.cells, 2);
  EXPECT_NEAR(g.geomean, 1.0, 0.03);
  EXPECT_LT(g.ci_low, g.geomean + 1e-12);
  EXPECT_GT(g.ci_high, g.geomean - 1e-12);
  cells[1] = {samples(1.5, 0.01, 20, 16), samples(1.0, 0.01, 20, 17)};  // now 2x and 1.5x
  const auto w = bootstrap_geomean(cells, 3);
  EXPECT_NEAR(w.geomean, std::sqrt(3.0), 0.05);
  EXPECT_GT(w.ci_low, 1.0);
  EXPECT_THROW(compare_samples({}, {1.0}, 1), Error);
}

// An A/A verify on the H200, in miniature: identical kernels, but one of the baseline's two
// rounds (processes) ran 4.7 % slow throughout. Pooled, its 1,000 samples look like 1,000 independent draws and the
// plain bootstrap calls a win; resampling rounds first, the interval spans both rounds and the verdict is noise.
TEST(VerifyCompare, OneSlowRoundIsNoiseNotAWin) {
  const RoundSamples base = {samples(1.047, 0.002, 600, 20), samples(1.0, 0.002, 400, 21)};
  const RoundSamples head = {samples(1.0, 0.002, 500, 22), samples(1.0, 0.002, 500, 23)};
  std::vector<double> pooled_base = base[0];
  pooled_base.insert(pooled_base.end(), base[1].begin(), base[1].end());
  std::vector<double> pooled_head = head[0];
  pooled_head.insert(pooled_head.end(), head[1].begin(), head[1].end());
  const auto flat = compare_samples(pooled_base, pooled_head, 7);
  EXPECT_EQ(flat.verdict, "faster");  // what the pooled bootstrap said
  const auto c = compare_rounds(base, head, 7);
  EXPECT_EQ(c.verdict, "noise");
  EXPECT_DOUBLE_EQ(c.speedup, flat.speedup);  // the point estimate is the pooled medians' ratio either way
  EXPECT_LT(c.ci_low, 1.0);
  EXPECT_GT(c.ci_high, 1.04);
  // the geomean over such a cell and a clean one is not a win either
  const std::vector<std::pair<RoundSamples, RoundSamples>> cells = {
      {base, head}, {{samples(1.0, 0.002, 300, 24), samples(1.0, 0.002, 300, 25)}, {samples(1.0, 0.002, 300, 26), samples(1.0, 0.002, 300, 27)}}};
  EXPECT_LT(bootstrap_geomean_rounds(cells, 3).ci_low, 1.0);
}

TEST(VerifyCompare, AWinInEveryRoundStaysAWin) {
  const RoundSamples base = {samples(1.05, 0.01, 200, 30), samples(1.052, 0.01, 200, 31), samples(1.049, 0.01, 200, 32)};
  const RoundSamples head = {samples(1.0, 0.01, 200, 33), samples(1.001, 0.01, 200, 34), samples(0.999, 0.01, 200, 35)};
  const auto c = compare_rounds(base, head, 7);
  EXPECT_EQ(c.verdict, "faster");
  EXPECT_GT(c.ci_low, 1.03);
  const std::vector<std::pair<RoundSamples, RoundSamples>> cells = {{base, head}, {head, base}};
  const auto g = bootstrap_geomean_rounds(cells, 3);
  EXPECT_NEAR(g.geomean, 1.0, 0.01);
}

TEST(VerifyCompare, OneRoundIsThePlainBootstrap) {
  const auto b = samples(1.1, 0.05, 25, 40), h = samples(1.0, 0.05, 25, 41);
  const auto flat = compare_samples(b, h, 99), r = compare_rounds({b}, {h}, 99);
  EXPECT_EQ(flat.ci_low, r.ci_low);
  EXPECT_EQ(flat.ci_high, r.ci_high);
  // empty rounds are ignored; a side with no samples at all is refused by name
  const auto e = compare_rounds({{}, b}, {h, {}}, 99);
  EXPECT_EQ(e.ci_low, r.ci_low);
  try {
    compare_rounds({{}, {}}, {h}, 1);
    FAIL() << "no base samples accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("base samples"), std::string::npos) << err.what();
  }
  EXPECT_THROW(compare_rounds({b}, {}, 1), Error);
  EXPECT_THROW(bootstrap_geomean_rounds({{{b}, {{}}}}, 1), Error);
}

}  // namespace
}  // namespace lina::harness
