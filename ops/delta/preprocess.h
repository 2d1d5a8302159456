// In-kernel preprocessing of the delta rules (docs/math.md sections 1 and 4.4), forward and backward, in fp32:
// q/k l2norm, beta sigmoid, and the in-kernel gate forms (GDN/KDA softplus, KDA lower bound).
// Host-side scalar code shared by the CPU backend and the CUDA path's host side.
#pragma once
#include <cstdint>

namespace lina::detail::delta {

// y = x * rstd with rstd = 1 / sqrt(sum x^2 + 1e-6) (eps inside the sqrt, unlike F.normalize).
// Returns rstd. x and y may alias.
float l2norm_forward(const float* x, float* y, std::int64_t n);
// dx = rstd * (dy - (dy . y) y), with y the normalised vector. dx may alias dy.
void l2norm_backward(const float* dy, const float* y, float rstd, float* dx, std::int64_t n);

// beta = c * sigmoid(raw), c = 2 with allow_neg_eigval, else 1.
float beta_sigmoid_forward(float raw, bool allow_neg_eigval);
// d raw = d beta * c * s * (1 - s).
float beta_sigmoid_backward(float raw, float dbeta, bool allow_neg_eigval);

float softplus(float x);  // x if x > 20, else log(1 + exp(x))
float sigmoid(float x);

enum class GateForm {
  none,         // g is already the log decay
  softplus,     // g = -exp(A_log) * softplus(raw + dt_bias)                  (GDN and KDA)
  lower_bound,  // g = lower_bound * sigmoid(e * (raw + dt_bias)), e = exp(A_log) or 1   (KDA)
};

// The gate of one value head. dt_bias points at this head's n entries (n = K for KDA, 1 for GDN).
struct HeadGate {
  GateForm form = GateForm::none;
  bool has_A_log = false;
  float A_log = 0.0f;
  const float* dt_bias = nullptr;  // null: no bias
  float lower_bound = 0.0f;
};

// out[c] = gate(raw[c]) for c < n. out may alias raw.
void gate_forward(const HeadGate& gate, const float* raw, float* out, std::int64_t n);

// Per-head parameter gradient accumulators (double: they sum over every token of a sequence).
struct GateParamGrads {
  double dA_log = 0.0;
  double* ddt_bias = nullptr;  // n entries, or null when the head has no bias
};

// draw[c] = d gate / d raw * dy[c]; accumulates dA_log and ddt_bias. draw may alias dy.
void gate_backward(const HeadGate& gate, const float* raw, const float* dy, float* draw, std::int64_t n,
                   GateParamGrads& acc);

}  // namespace lina::detail::delta
