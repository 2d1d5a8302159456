#include "harness/engine/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "harness/engine/workload.h"
#include "lina/error.h"

namespace lina::harness {

double percentile(std::vector<double> s, double q) {
  if (s.empty()) throw_invalid("samples", "an empty sample", "at least one value");
  if (!(q >= 0 && q <= 1)) throw_invalid("q", std::to_string(q), "a quantile in [0, 1]");
  std::sort(s.begin(), s.end());
  const double pos = q * static_cast<double>(s.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (pos - static_cast<double>(lo)) * (s[hi] - s[lo]);
}

double median(std::vector<double> s) { return percentile(std::move(s), 0.5); }

double mean(const std::vector<double>& s) {
  if (s.empty()) throw_invalid("samples", "an empty sample", "at least one value");
  return std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size());
}

double sample_std(const std::vector<double>& s) {
  if (s.size() < 2) return 0;
  const double m = mean(s);
  double acc = 0;
  for (double x : s) acc += (x - m) * (x - m);
  return std::sqrt(acc / static_cast<double>(s.size() - 1));
}

Summary summarize(const std::vector<double>& s) {
  Summary r;
  r.n = s.size();
  r.median = percentile(s, 0.5);
  r.mean = mean(s);
  r.std = sample_std(s);
  r.min = *std::min_element(s.begin(), s.end());
  r.max = *std::max_element(s.begin(), s.end());
  r.p10 = percentile(s, 0.1);
  r.p20 = percentile(s, 0.2);
  r.p80 = percentile(s, 0.8);
  r.p90 = percentile(s, 0.9);
  return r;
}

double geomean(const std::vector<double>& v) {
  if (v.empty()) throw_invalid("values", "an empty list", "at least one value");
  double acc = 0;
  for (double x : v) {
    if (!(x > 0)) throw_invalid("values", std::to_string(x), "positive values");
    acc += std::log(x);
  }
  return std::exp(acc / static_cast<double>(v.size()));
}

}  // namespace lina::harness
