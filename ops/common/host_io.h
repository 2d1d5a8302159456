// Reading and writing host tensors of any floating dtype as float / double arrays (contiguous views).
#pragma once
#include <cstdint>
#include <vector>

#include "lina/tensor.h"

namespace lina::detail {

double load_element(const TensorView& t, std::int64_t flat);
void store_element(const TensorView& t, std::int64_t flat, double value);

template <class T>
std::vector<T> load_as(const TensorView& t) {
  std::vector<T> out(static_cast<std::size_t>(t.numel()));
  for (std::int64_t i = 0; i < t.numel(); ++i) out[static_cast<std::size_t>(i)] = static_cast<T>(load_element(t, i));
  return out;
}

template <class T>
void store_from(const TensorView& t, const std::vector<T>& values) {
  for (std::int64_t i = 0; i < t.numel(); ++i) store_element(t, i, static_cast<double>(values[static_cast<std::size_t>(i)]));
}

}  // namespace lina::detail
