#include "harness/verify/accuracy.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>
#include <cstdio>

#include "lina/error.h"
#include "ops/common/host_io.h"
#include "ops/common/parallel.h"

namespace lina::harness {

std::string Closeness::str() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "err_ratio=%.3e (tol %.3g) max_abs=%.3e%s -> %s", err_ratio, tolerance, max_abs,
                has_nan ? " NaN/inf" : "", pass ? "pass" : "FAIL");
  return buf;
}

namespace {

// Partial sums of one slice; slices are fixed (not per thread) so the result is thread-count free.
struct Partial {
  double sq_diff = 0, sq_ref = 0, max_abs = 0;
  bool has_nan = false;
};

template <class Load>
Closeness close_from(std::int64_t n, double tolerance, Load&& load) {
  constexpr std::int64_t kSlices = 256;
  std::vector<Partial> parts(static_cast<std::size_t>(kSlices));
  // Full-size checks (100M elements) would take seconds on one thread; slices run in parallel.
  detail::parallel_for(kSlices, n > (1 << 20) ? 0 : 1, [&](std::int64_t s) {
    Partial& p = parts[static_cast<std::size_t>(s)];
    const std::int64_t lo = n * s / kSlices, hi = n * (s + 1) / kSlices;
    for (std::int64_t i = lo; i < hi; ++i) {
      const auto [r, o] = load(i);
      if (!std::isfinite(r) || !std::isfinite(o)) {
        p.has_nan = true;
        continue;
      }
      const double d = r - o;
      p.max_abs = std::max(p.max_abs, std::abs(d));
      p.sq_diff += d * d;
      p.sq_ref += r * r;
    }
  });
  Closeness c;
  c.tolerance = tolerance;
  double sq_diff = 0, sq_ref = 0;
  for (const Partial& p : parts) {
    sq_diff += p.sq_diff;
    sq_ref += p.sq_ref;
    c.max_abs = std::max(c.max_abs, p.max_abs);
    c.has_nan = c.has_nan || p.has_nan;
  }
  if (c.has_nan) c.max_abs = INFINITY;
  const double count = n == 0 ? 1.0 : static_cast<double>(n);
  c.err_ratio = c.has_nan ? INFINITY : std::sqrt(sq_diff / count) / (std::sqrt(sq_ref / count) + 1e-8);
  c.pass = !c.has_nan && (c.max_abs <= 1e-6 || c.err_ratio < tolerance);
  return c;
}

}  // namespace

Closeness assert_close(const std::vector<double>& ref, const std::vector<double>& out, double tolerance) {
  if (ref.size() != out.size())
    throw_invalid("out", std::to_string(out.size()) + " elements", std::to_string(ref.size()) + " (the reference's)");
  return close_from(static_cast<std::int64_t>(ref.size()), tolerance, [&](std::int64_t i) {
    return std::pair<double, double>{ref[static_cast<std::size_t>(i)], out[static_cast<std::size_t>(i)]};
  });
}

Closeness assert_close(const HostTensor& ref, const HostTensor& out, double tolerance) {
  if (ref.shape() != out.shape()) throw_invalid("out", "shape " + out.shape().str(), "shape " + ref.shape().str());
  const TensorView r = ref.view(), o = out.view();
  return close_from(ref.numel(), tolerance, [&](std::int64_t i) {
    return std::pair<double, double>{detail::load_element(r, i), detail::load_element(o, i)};
  });
}

}  // namespace lina::harness
