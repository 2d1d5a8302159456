// Element types and host conversions (bf16 / f16 are stored as raw 16-bit patterns).
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>

namespace lina {

enum class DType : std::uint8_t { f64, f32, bf16, f16, i32, i64 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f64: case DType::i64: return 8;
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: case DType::f16: return 2;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f64: return "float64";
    case DType::f32: return "float32";
    case DType::bf16: return "bfloat16";
    case DType::f16: return "float16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
  }
  return "?";
}

constexpr bool is_floating(DType t) { return t == DType::f64 || t == DType::f32 || t == DType::bf16 || t == DType::f16; }

// Round-to-nearest-even float -> bf16, NaN preserved (quiet).
inline std::uint16_t float_to_bf16_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

inline float bf16_bits_to_float(std::uint16_t b) {
  std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16 conversions (round to nearest even, subnormals and inf/NaN handled).
float f16_bits_to_float(std::uint16_t h);
std::uint16_t float_to_f16_bits(float f);

// Value of `f` after a round trip through `t` (identity for f32 / f64).
float round_to_dtype(float f, DType t);

}  // namespace lina
