// Candidate vs baseline statistics for `lina verify`: per-cell speedup with a seeded bootstrap 95 %
// interval, the faster / slower / noise verdict, and the geomean over cells.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace lina::harness {

// Default |change| a cell must show (besides an interval that excludes 1) to be called faster/slower.
inline constexpr double kDefaultThresholdPct = 2.0;
inline constexpr int kBootstrapResamples = 2000;

double median_of(std::vector<double> v);  // NaN for an empty vector
double geomean_of(const std::vector<double>& v);  // NaN for an empty vector; values must be > 0

struct CellComparison {
  double base_median_ms = 0, head_median_ms = 0;
  double speedup = 0;           // base median / candidate median (> 1: the candidate is faster)
  double ci_low = 0, ci_high = 0;  // bootstrap 95 % interval of the speedup
  double speedup_pct = 0;       // (speedup - 1) * 100: the verdict's threshold applies to it
  std::string verdict;          // "faster", "slower", "noise"
  // The latency change (head / base - 1) * 100, negative = faster: a result file's `change_pct` (docs/json-schema.md).
  double latency_change_pct() const { return (head_median_ms / base_median_ms - 1.0) * 100.0; }
};

// One cell's timing samples grouped by round: one vector per `lina run` process (verify alternates the sides round by
// round). A process's own state (where its buffers landed in memory, the clocks it met) moves all of its samples
// together, so the samples of a round are not independent of each other: an A/A verify of identical kernels on the
// H200 measured the baseline's two rounds of B1_T8192_H96_D128 GDN at a pooled median 4.7 %
// above the candidate's, and the pooled bootstrap's interval [1.046, 1.048] called it a win. The interval therefore
// resamples rounds first (with replacement, as many as there are), then samples within each drawn round; a single
// round is the plain bootstrap over its samples.
using RoundSamples = std::vector<std::vector<double>>;
// Every round's samples in round order, as one vector.
std::vector<double> pooled_samples(const RoundSamples& x);

// Percentile bootstrap of median(base) / median(head) over two levels (rounds, then samples), `resamples` times, from
// a generator seeded with `seed`; the same inputs and seed always give the same interval. The point estimate is the
// ratio of the pooled medians. Empty rounds are ignored; a side without samples is refused.
CellComparison compare_rounds(const RoundSamples& base_ms, const RoundSamples& head_ms, std::uint64_t seed,
                              double threshold_pct = kDefaultThresholdPct, int resamples = kBootstrapResamples);

// The same for one round per side (samples pooled by the caller, e.g. two result files).
CellComparison compare_samples(const std::vector<double>& base_ms, const std::vector<double>& head_ms,
                               std::uint64_t seed, double threshold_pct = kDefaultThresholdPct,
                               int resamples = kBootstrapResamples);

// Geomean of per-cell speedups with its bootstrap 95 % interval (each resample redraws every cell's
// base and candidate samples). cells: (base samples, candidate samples) per cell.
struct GeomeanComparison {
  double geomean = 0, ci_low = 0, ci_high = 0;
  int cells = 0;
};
GeomeanComparison bootstrap_geomean(const std::vector<std::pair<std::vector<double>, std::vector<double>>>& cells,
                                  std::uint64_t seed, int resamples = kBootstrapResamples);
// ... with every cell's samples grouped by round (each resample redraws rounds, then samples, as compare_rounds).
GeomeanComparison bootstrap_geomean_rounds(const std::vector<std::pair<RoundSamples, RoundSamples>>& cells, std::uint64_t seed,
                                           int resamples = kBootstrapResamples);

// Verdict from an interval and a change (exposed for tests and for reports).
std::string speedup_verdict(double ci_low, double ci_high, double speedup_pct, double threshold_pct);

}  // namespace lina::harness
