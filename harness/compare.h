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
  double change_pct = 0;        // (speedup - 1) * 100
  std::string verdict;          // "faster", "slower", "noise"
};

// Percentile bootstrap: both sample sets are resampled with replacement, `resamples` times, from a
// generator seeded with `seed`; the same inputs and seed always give the same interval.
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

// Verdict from an interval and a change (exposed for tests and for reports).
std::string speedup_verdict(double ci_low, double ci_high, double change_pct, double threshold_pct);

}  // namespace lina::harness
