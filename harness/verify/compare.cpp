#include "harness/verify/compare.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "harness/engine/stats.h"
#include "lina/error.h"

namespace lina::harness {

// The run statistics (harness/engine/stats.h), with NaN rather than an error for an empty side.
double median_of(std::vector<double> v) { return v.empty() ? NAN : median(std::move(v)); }

double geomean_of(const std::vector<double>& v) { return v.empty() ? NAN : geomean(v); }

std::string speedup_verdict(double ci_low, double ci_high, double speedup_pct, double threshold_pct) {
  if (ci_low > 1.0 && speedup_pct >= threshold_pct) return "faster";
  if (ci_high < 1.0 && -speedup_pct >= threshold_pct) return "slower";
  return "noise";
}

std::vector<double> pooled_samples(const RoundSamples& x) {
  std::vector<double> v;
  for (const auto& r : x) v.insert(v.end(), r.begin(), r.end());
  return v;
}

namespace {
double percentile_sorted(const std::vector<double>& v, double p) {
  const double pos = p * static_cast<double>(v.size() - 1);
  const auto i = static_cast<std::size_t>(pos);
  const double f = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

// The rounds that have samples.
RoundSamples nonempty_rounds(const RoundSamples& x) {
  RoundSamples r;
  for (const auto& v : x)
    if (!v.empty()) r.push_back(v);
  return r;
}

// One bootstrap draw of a side's median: as many rounds as it has, drawn with replacement, then each drawn round's
// samples with replacement. A single round draws no round index (the plain bootstrap's generator sequence).
double resampled_median(const RoundSamples& x, std::vector<double>& scratch, std::mt19937_64& gen) {
  scratch.clear();
  std::uniform_int_distribution<std::size_t> pick_round(0, x.size() - 1);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::vector<double>& v = x.size() == 1 ? x[0] : x[pick_round(gen)];
    std::uniform_int_distribution<std::size_t> pick(0, v.size() - 1);
    for (std::size_t j = 0; j < v.size(); ++j) scratch.push_back(v[pick(gen)]);
  }
  return median_of(scratch);
}
}  // namespace

GeomeanComparison bootstrap_geomean_rounds(const std::vector<std::pair<RoundSamples, RoundSamples>>& cells, std::uint64_t seed,
                                           int resamples) {
  GeomeanComparison g;
  g.cells = static_cast<int>(cells.size());
  if (cells.empty()) {
    g.geomean = g.ci_low = g.ci_high = NAN;
    return g;
  }
  std::vector<std::pair<RoundSamples, RoundSamples>> cs;
  std::vector<double> point;
  for (const auto& [b, h] : cells) {
    RoundSamples bb = nonempty_rounds(b), hh = nonempty_rounds(h);
    if (bb.empty() || hh.empty()) throw_invalid("geomean cells", "a cell without samples", "samples on both sides");
    point.push_back(median_of(pooled_samples(bb)) / median_of(pooled_samples(hh)));
    cs.emplace_back(std::move(bb), std::move(hh));
  }
  g.geomean = geomean_of(point);
  std::mt19937_64 gen(seed);
  std::vector<double> scratch, stats;
  for (int r = 0; r < resamples; ++r) {
    double s = 0;
    for (const auto& [b, h] : cs) s += std::log(resampled_median(b, scratch, gen) / resampled_median(h, scratch, gen));
    stats.push_back(std::exp(s / static_cast<double>(cs.size())));
  }
  std::sort(stats.begin(), stats.end());
  g.ci_low = percentile_sorted(stats, 0.025);
  g.ci_high = percentile_sorted(stats, 0.975);
  return g;
}

GeomeanComparison bootstrap_geomean(const std::vector<std::pair<std::vector<double>, std::vector<double>>>& cells,
                                  std::uint64_t seed, int resamples) {
  std::vector<std::pair<RoundSamples, RoundSamples>> r;
  for (const auto& [b, h] : cells) r.emplace_back(RoundSamples{b}, RoundSamples{h});
  return bootstrap_geomean_rounds(r, seed, resamples);
}

CellComparison compare_rounds(const RoundSamples& base_ms, const RoundSamples& head_ms, std::uint64_t seed,
                              double threshold_pct, int resamples) {
  const RoundSamples b = nonempty_rounds(base_ms), h = nonempty_rounds(head_ms);
  if (b.empty()) throw_invalid("base samples", "none", "at least one timing sample");
  if (h.empty()) throw_invalid("candidate samples", "none", "at least one timing sample");
  CellComparison c;
  c.base_median_ms = median_of(pooled_samples(b));
  c.head_median_ms = median_of(pooled_samples(h));
  c.speedup = c.base_median_ms / c.head_median_ms;
  c.speedup_pct = (c.speedup - 1.0) * 100.0;
  std::mt19937_64 gen(seed);
  std::vector<double> ratios, scratch;
  ratios.reserve(static_cast<std::size_t>(resamples));
  for (int r = 0; r < resamples; ++r) ratios.push_back(resampled_median(b, scratch, gen) / resampled_median(h, scratch, gen));
  std::sort(ratios.begin(), ratios.end());
  c.ci_low = percentile_sorted(ratios, 0.025);
  c.ci_high = percentile_sorted(ratios, 0.975);
  c.verdict = speedup_verdict(c.ci_low, c.ci_high, c.speedup_pct, threshold_pct);
  return c;
}

CellComparison compare_samples(const std::vector<double>& base_ms, const std::vector<double>& head_ms,
                               std::uint64_t seed, double threshold_pct, int resamples) {
  return compare_rounds(RoundSamples{base_ms}, RoundSamples{head_ms}, seed, threshold_pct, resamples);
}

}  // namespace lina::harness
