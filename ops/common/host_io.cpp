#include "ops/common/host_io.h"

#include <cstring>

namespace lina::detail {

double load_element(const TensorView& t, std::int64_t i) {
  const auto* p = static_cast<const std::byte*>(t.data) + static_cast<std::size_t>(i) * dtype_size(t.dtype);
  switch (t.dtype) {
    case DType::f64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::f32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::bf16: { std::uint16_t v; std::memcpy(&v, p, 2); return bf16_bits_to_float(v); }
    case DType::f16: { std::uint16_t v; std::memcpy(&v, p, 2); return f16_bits_to_float(v); }
    case DType::i32: { std::int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::i64: { std::int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
  }
  return 0;
}

void store_element(const TensorView& t, std::int64_t i, double value) {
  auto* p = static_cast<std::byte*>(t.data) + static_cast<std::size_t>(i) * dtype_size(t.dtype);
  switch (t.dtype) {
    case DType::f64: std::memcpy(p, &value, 8); break;
    case DType::f32: { float v = static_cast<float>(value); std::memcpy(p, &v, 4); break; }
    case DType::bf16: { auto v = float_to_bf16_bits(static_cast<float>(value)); std::memcpy(p, &v, 2); break; }
    case DType::f16: { auto v = float_to_f16_bits(static_cast<float>(value)); std::memcpy(p, &v, 2); break; }
    case DType::i32: { auto v = static_cast<std::int32_t>(value); std::memcpy(p, &v, 4); break; }
    case DType::i64: { auto v = static_cast<std::int64_t>(value); std::memcpy(p, &v, 8); break; }
  }
}

}  // namespace lina::detail
