#include "lina/dtype.h"

#include <cmath>

namespace lina {

float f16_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  const int exp = (h >> 10) & 0x1f;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
      u = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    u = sign | (static_cast<std::uint32_t>(exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::uint16_t float_to_f16_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal or zero in f16
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal
    const int e = static_cast<int>(abs >> 23);
    const std::uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const int shift = 126 - e;  // value / 2^-24 = mant * 2^(e - 150 + 24)
    // Round to nearest even on the bits shifted out.
    const std::uint32_t shifted = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1);
    std::uint32_t r = shifted;
    if (rem > half || (rem == half && (shifted & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  std::uint32_t r = abs + 0xfffu + ((abs >> 13) & 1u);  // round mantissa to 10 bits
  r -= (127u - 15u) << 23;
  return static_cast<std::uint16_t>(sign | (r >> 13));
}

float round_to_dtype(float f, DType t) {
  switch (t) {
    case DType::bf16: return bf16_bits_to_float(float_to_bf16_bits(f));
    case DType::f16: return f16_bits_to_float(float_to_f16_bits(f));
    default: return f;
  }
}

}  // namespace lina
