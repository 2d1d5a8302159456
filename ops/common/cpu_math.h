// Small fp32 building blocks for the chunked CPU backend, written so the compiler can vectorise
// them without -ffast-math (plain loops, no libm calls, no float reductions it must keep in order).
#pragma once
#include <bit>
#include <cstdint>

namespace lina::detail::cpu {

// exp(x) in fp32 for x <= 88, about 1 ulp. Results below FLT_MIN flush to 0 (x < -87), which is
// what a decay of exp(-1000) must give; NaN propagates. Callers only pass non-positive arguments
// (docs/math.md section 5), the clamp at 88 just keeps a stray positive gate finite-or-inf, never UB.
inline float fast_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;       // ln2 split so that n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kShifter = 12582912.0f;      // 1.5 * 2^23: adding it rounds to an integer
  const bool nan = !(x == x);
  float xc = x < -87.0f ? -87.0f : x;
  xc = xc > 88.0f ? 88.0f : xc;
  xc = nan ? 0.0f : xc;
  const float n = (xc * kLog2e + kShifter) - kShifter;
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;  // |r| <= ln2 / 2
  // Taylor to degree 7: truncation error < 6e-9 relative on |r| <= 0.347.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;  // 2^n, n in [-126, 127]
  const float result = p * std::bit_cast<float>(bits);
  return nan ? x : (x < -87.0f ? 0.0f : result);
}

// Dot product with eight independent partial sums (vectorisable without reassociation flags).
inline float dot(const float* a, const float* b, std::int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int u = 0; u < 8; ++u) acc[u] += a[i + u] * b[i + u];
  }
  float tail = 0;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

// y += alpha * x
inline void axpy(float* __restrict y, float alpha, const float* __restrict x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

}  // namespace lina::detail::cpu
