#include "harness/accuracy.h"

#include <cmath>
#include <cstdio>

#include "lina/error.h"

namespace lina::harness {

std::string Closeness::str() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "err_ratio=%.3e (tol %.3g) max_abs=%.3e%s -> %s", err_ratio, tolerance, max_abs,
                has_nan ? " NaN/inf" : "", pass ? "pass" : "FAIL");
  return buf;
}

Closeness assert_close(const std::vector<double>& ref, const std::vector<double>& out, double tolerance) {
  if (ref.size() != out.size())
    throw_invalid("out", std::to_string(out.size()) + " elements", std::to_string(ref.size()) + " (the reference's)");
  Closeness c;
  c.tolerance = tolerance;
  double sq_diff = 0, sq_ref = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double r = ref[i], o = out[i];
    if (!std::isfinite(r) || !std::isfinite(o)) {
      c.has_nan = true;
      c.max_abs = INFINITY;
      continue;
    }
    const double d = r - o;
    c.max_abs = std::max(c.max_abs, std::abs(d));
    sq_diff += d * d;
    sq_ref += r * r;
  }
  const double n = ref.empty() ? 1.0 : static_cast<double>(ref.size());
  c.err_ratio = c.has_nan ? INFINITY : std::sqrt(sq_diff / n) / (std::sqrt(sq_ref / n) + 1e-8);
  c.pass = !c.has_nan && (c.max_abs <= 1e-6 || c.err_ratio < tolerance);
  return c;
}

Closeness assert_close(const HostTensor& ref, const HostTensor& out, double tolerance) {
  if (ref.shape() != out.shape()) throw_invalid("out", "shape " + out.shape().str(), "shape " + ref.shape().str());
  return assert_close(ref.to_f64(), out.to_f64(), tolerance);
}

}  // namespace lina::harness
