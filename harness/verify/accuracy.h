// FLA's closeness metric (fla/utils/_testing.py assert_close), used by the gate and per-cell checks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lina/tensor.h"

namespace lina::harness {

struct Closeness {
  double err_ratio = 0;   // RMS(ref - out) / (RMS(ref) + 1e-8)
  double max_abs = 0;     // max |ref - out|
  double tolerance = 0;   // err_ratio limit (strict <)
  bool has_nan = false;   // NaN or inf in either tensor
  bool pass = false;      // max_abs <= 1e-6, or (no NaN and err_ratio < tolerance)
  std::string str() const;
};

Closeness assert_close(const std::vector<double>& ref, const std::vector<double>& out, double tolerance);
Closeness assert_close(const HostTensor& ref, const HostTensor& out, double tolerance);

}  // namespace lina::harness
