#include "ops/delta/preprocess.h"

#include <cmath>

namespace lina::detail::delta {

float l2norm_forward(const float* x, float* y, std::int64_t n) {
  float ss = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float rstd = 1.0f / std::sqrt(ss + 1e-6f);
  for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] * rstd;
  return rstd;
}

void l2norm_backward(const float* dy, const float* y, float rstd, float* dx, std::int64_t n) {
  float dot = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) dot += dy[i] * y[i];
  for (std::int64_t i = 0; i < n; ++i) dx[i] = rstd * (dy[i] - dot * y[i]);
}

float sigmoid(float x) {
  // Both branches only exponentiate non-positive numbers.
  if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

float beta_sigmoid_forward(float raw, bool allow_neg_eigval) {
  return (allow_neg_eigval ? 2.0f : 1.0f) * sigmoid(raw);
}

float beta_sigmoid_backward(float raw, float dbeta, bool allow_neg_eigval) {
  const float s = sigmoid(raw);
  return dbeta * (allow_neg_eigval ? 2.0f : 1.0f) * s * (1.0f - s);
}

void gate_forward(const HeadGate& gate, const float* raw, float* out, std::int64_t n) {
  switch (gate.form) {
    case GateForm::none:
      for (std::int64_t c = 0; c < n; ++c) out[c] = raw[c];
      return;
    case GateForm::softplus: {
      const float a = std::exp(gate.A_log);
      for (std::int64_t c = 0; c < n; ++c) {
        const float x = raw[c] + (gate.dt_bias ? gate.dt_bias[c] : 0.0f);
        out[c] = -a * softplus(x);
      }
      return;
    }
    case GateForm::lower_bound: {
      const float e = gate.has_A_log ? std::exp(gate.A_log) : 1.0f;
      for (std::int64_t c = 0; c < n; ++c) {
        const float x = raw[c] + (gate.dt_bias ? gate.dt_bias[c] : 0.0f);
        out[c] = gate.lower_bound * sigmoid(e * x);
      }
      return;
    }
  }
}

void gate_backward(const HeadGate& gate, const float* raw, const float* dy, float* draw, std::int64_t n,
                   GateParamGrads& acc) {
  switch (gate.form) {
    case GateForm::none:
      for (std::int64_t c = 0; c < n; ++c) draw[c] = dy[c];
      return;
    case GateForm::softplus: {
      // y = -a softplus(x): dy/dx = -a sigmoid(x), dy/dA_log = y.
      const float a = std::exp(gate.A_log);
      for (std::int64_t c = 0; c < n; ++c) {
        const float x = raw[c] + (gate.dt_bias ? gate.dt_bias[c] : 0.0f);
        const float d = dy[c];
        const float y = -a * softplus(x);
        const float dx = -a * sigmoid(x) * d;
        acc.dA_log += static_cast<double>(d) * y;
        if (acc.ddt_bias) acc.ddt_bias[c] += dx;
        draw[c] = dx;
      }
      return;
    }
    case GateForm::lower_bound: {
      // y = lb sigmoid(e x): dy/dx = lb s (1-s) e, dy/dA_log = (dy/dx) x (since de/dA_log = e).
      const float e = gate.has_A_log ? std::exp(gate.A_log) : 1.0f;
      for (std::int64_t c = 0; c < n; ++c) {
        const float x = raw[c] + (gate.dt_bias ? gate.dt_bias[c] : 0.0f);
        const float s = sigmoid(e * x);
        const float dx = dy[c] * gate.lower_bound * s * (1.0f - s) * e;
        if (gate.has_A_log) acc.dA_log += static_cast<double>(dx) * x;
        if (acc.ddt_bias) acc.ddt_bias[c] += dx;
        draw[c] = dx;
      }
      return;
    }
  }
}

}  // namespace lina::detail::delta
