// Seeded test inputs (FLA's test distributions) and NaN-poisoned outputs.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>

#include "lina/tensor.h"

namespace lina::testing {

struct Rng {
  std::mt19937_64 gen;
  explicit Rng(std::uint64_t seed) : gen(seed) {}
  double uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(gen); }
  double normal() { return std::normal_distribution<double>(0.0, 1.0)(gen); }
};

inline double logsigmoid(double x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

template <class Fn>
HostTensor make(DType dtype, Shape shape, Fn&& value) {
  HostTensor t(dtype, shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, value());
  return t;
}

inline HostTensor uniform(Rng& r, DType dtype, Shape shape) { return make(dtype, shape, [&] { return r.uniform(); }); }
inline HostTensor normal(Rng& r, DType dtype, Shape shape) { return make(dtype, shape, [&] { return r.normal(); }); }
// Outputs start as NaN so that a partial write fails the comparison (FLA's conftest poisons empty()).
inline HostTensor poisoned(DType dtype, Shape shape) { return HostTensor::filled(dtype, shape, NAN); }

}  // namespace lina::testing
