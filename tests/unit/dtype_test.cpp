#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "lina/dtype.h"
#include "lina/tensor.h"

namespace lina {
namespace {

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly half way between two bf16 values: ties go to the even mantissa (1.0).
  EXPECT_EQ(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, F16RoundTripsNormalsSubnormalsAndSpecials) {
  for (float x : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.9604644775390625e-08f, 1e-5f}) {
    const float y = f16_bits_to_float(float_to_f16_bits(x));
    EXPECT_NEAR(y, x, std::abs(x) * 1e-3 + 3e-8) << x;
  }
  EXPECT_EQ(float_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16_bits(65520.0f), 0x7c00);  // rounds up to inf
  EXPECT_TRUE(std::isinf(f16_bits_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(f16_bits_to_float(float_to_f16_bits(std::nanf("")))));
  EXPECT_EQ(f16_bits_to_float(0x0001), std::ldexp(1.0f, -24));
}

TEST(HostTensor, StoresThroughItsDtype) {
  HostTensor t(DType::bf16, Shape{2, 3});
  t.set(4, 1.00390625);  // needs 9 mantissa bits: bf16 keeps 1.0
  EXPECT_EQ(t.get(4), 1.0);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_TRUE(t.view().is_contiguous());
}

}  // namespace
}  // namespace lina
