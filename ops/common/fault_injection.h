// LINA_FAULT_INJECT lives in the test-only library (tests/support/testing/fault_injection.cpp), which
// wraps the op forwards of the gate suites at link time; the shipped library has no hook. This no-op
// stays until ops/delta/api.cpp drops its calls.
#pragma once
#include "lina/ops.h"

namespace lina::detail {

inline void apply_fault_injection(const AttentionOutputs&, RunInfo&) {}

}  // namespace lina::detail
