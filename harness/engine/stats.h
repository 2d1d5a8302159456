// Sample statistics for timing rows and comparisons. Percentiles use linear interpolation between
// order statistics (numpy's default "linear" method: position q * (n - 1) in the sorted samples).
#pragma once
#include <cstdint>
#include <vector>

namespace lina::harness {

struct Summary {
  std::size_t n = 0;
  double median = 0, mean = 0, std = 0, min = 0, max = 0;  // std: sample (n - 1) standard deviation
  double p10 = 0, p20 = 0, p80 = 0, p90 = 0;
  double noise() const { return mean > 0 ? std / mean : 0; }  // relative noise, nvbench's criterion
};

// q in [0, 1]; throws lina::Error on an empty sample or q outside [0, 1].
double percentile(std::vector<double> samples, double q);
double median(std::vector<double> samples);
double mean(const std::vector<double>& samples);
double sample_std(const std::vector<double>& samples);  // 0 for n < 2
Summary summarize(const std::vector<double>& samples);

// Geometric mean of positive values; throws on empty input or a value <= 0.
double geomean(const std::vector<double>& values);

}  // namespace lina::harness
