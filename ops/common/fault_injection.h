// Test hook for the toolkit itself: LINA_FAULT_INJECT=perturb:<fraction> scales every forward output
// `o` written by a backend by (1 + fraction) after the backend returns. It exists so that tests can
// prove the gate and the per-cell checks catch a wrong kernel; it is read once per process, and the
// RunInfo of a perturbed call names it ("fault-injected") so no measurement can pass for clean.
#pragma once
#include "lina/ops.h"

namespace lina::detail {

double fault_perturbation();  // 0 when the variable is unset
void apply_fault_injection(const AttentionOutputs& out, RunInfo& info);

}  // namespace lina::detail
