// FastDiv (ops/common/fast_div.h): the prep kernels' item decode divides by launch-time divisors
// with a multiply-high; it must agree with integer division for every dividend they can see (< 2^31).
#include "ops/common/fast_div.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace {

using lina::detail::FastDiv;

void expect_exact(std::uint32_t d, std::uint32_t n) {
  const FastDiv f(d);
  ASSERT_EQ(f.div(n), n / d) << "n = " << n << ", d = " << d;
  ASSERT_EQ(f.mod(n), n % d) << "n = " << n << ", d = " << d;
}

TEST(FastDiv, SmallDivisorsAllSmallDividends) {
  for (std::uint32_t d = 1; d <= 300; ++d)
    for (std::uint32_t n = 0; n <= 5000; ++n) expect_exact(d, n);
}

TEST(FastDiv, EdgesAndRandomUpTo2Pow31) {
  std::mt19937_64 rng(7);
  std::vector<std::uint32_t> divisors = {1, 2, 3, 7, 64, 96, 127, 128, 129, 1000, 65535, 65536, 65537,
                                         (1u << 30) - 1, 1u << 30, (1u << 30) + 1, (1u << 31) - 1};
  for (int i = 0; i < 2000; ++i) divisors.push_back(1 + static_cast<std::uint32_t>(rng() % ((1u << 31) - 1)));
  for (std::uint32_t d : divisors) {
    const std::uint32_t top = (1u << 31) - 1;
    for (std::uint32_t n : {0u, 1u, d - 1, d, d + 1, 2 * (d % (1u << 30)), top, top - 1, top - d % top}) expect_exact(d, n);
    for (int j = 0; j < 200; ++j) expect_exact(d, static_cast<std::uint32_t>(rng() % (std::uint64_t{top} + 1)));
  }
}

TEST(FastDiv, ZeroDivisorIsClampedToOne) {
  const FastDiv f(0);
  EXPECT_EQ(f.d, 1u);
  EXPECT_EQ(f.div(12345), 12345u);
  EXPECT_EQ(f.mod(12345), 0u);
}

}  // namespace
