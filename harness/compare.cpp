#include "harness/compare.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "harness/stats.h"
#include "lina/error.h"

namespace lina::harness {

// The run statistics (harness/stats.h), with NaN rather than an error for an empty side.
double median_of(std::vector<double> v) { return v.empty() ? NAN : median(std::move(v)); }

double geomean_of(const std::vector<double>& v) { return v.empty() ? NAN : geomean(v); }

std::string speedup_verdict(double ci_low, double ci_high, double change_pct, double threshold_pct) {
  if (ci_low > 1.0 && change_pct >= threshold_pct) return "faster";
  if (ci_high < 1.0 && -change_pct >= threshold_pct) return "slower";
  return "noise";
}

namespace {
double percentile_sorted(const std::vector<double>& v, double p) {
  const double pos = p * static_cast<double>(v.size() - 1);
  const auto i = static_cast<std::size_t>(pos);
  const double f = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

double resampled_median(const std::vector<double>& x, std::vector<double>& scratch, std::mt19937_64& gen) {
  std::uniform_int_distribution<std::size_t> pick(0, x.size() - 1);
  scratch.resize(x.size());
  for (auto& s : scratch) s = x[pick(gen)];
  return median_of(scratch);
}
}  // namespace

GeomeanComparison bootstrap_geomean(const std::vector<std::pair<std::vector<double>, std::vector<double>>>& cells,
                                  std::uint64_t seed, int resamples) {
  GeomeanComparison g;
  g.cells = static_cast<int>(cells.size());
  if (cells.empty()) {
    g.geomean = g.ci_low = g.ci_high = NAN;
    return g;
  }
  std::vector<double> point;
  for (const auto& [b, h] : cells) {
    if (b.empty() || h.empty()) throw_invalid("geomean cells", "a cell without samples", "samples on both sides");
    point.push_back(median_of(b) / median_of(h));
  }
  g.geomean = geomean_of(point);
  std::mt19937_64 gen(seed);
  std::vector<double> scratch, stats;
  for (int r = 0; r < resamples; ++r) {
    double s = 0;
    for (const auto& [b, h] : cells) s += std::log(resampled_median(b, scratch, gen) / resampled_median(h, scratch, gen));
    stats.push_back(std::exp(s / static_cast<double>(cells.size())));
  }
  std::sort(stats.begin(), stats.end());
  g.ci_low = percentile_sorted(stats, 0.025);
  g.ci_high = percentile_sorted(stats, 0.975);
  return g;
}

CellComparison compare_samples(const std::vector<double>& base_ms, const std::vector<double>& head_ms,
                               std::uint64_t seed, double threshold_pct, int resamples) {
  if (base_ms.empty()) throw_invalid("base samples", "none", "at least one timing sample");
  if (head_ms.empty()) throw_invalid("candidate samples", "none", "at least one timing sample");
  CellComparison c;
  c.base_median_ms = median_of(base_ms);
  c.head_median_ms = median_of(head_ms);
  c.speedup = c.base_median_ms / c.head_median_ms;
  c.change_pct = (c.speedup - 1.0) * 100.0;
  std::mt19937_64 gen(seed);
  std::vector<double> ratios, scratch;
  ratios.reserve(static_cast<std::size_t>(resamples));
  for (int r = 0; r < resamples; ++r) ratios.push_back(resampled_median(base_ms, scratch, gen) / resampled_median(head_ms, scratch, gen));
  std::sort(ratios.begin(), ratios.end());
  c.ci_low = percentile_sorted(ratios, 0.025);
  c.ci_high = percentile_sorted(ratios, 0.975);
  c.verdict = speedup_verdict(c.ci_low, c.ci_high, c.change_pct, threshold_pct);
  return c;
}

}  // namespace lina::harness
