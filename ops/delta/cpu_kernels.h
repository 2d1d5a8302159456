// The chunked WY/UT algorithm for the delta rules (docs/math.md sections 3.2, 3.3, 4.2, 4.3) on one (sequence, value
// head) at a time, in fp32 on host arrays. KDA uses per-channel gates; GDN runs the same code with its
// scalar gate broadcast over K, except that the C x C gated products use one exp per (r, j) pair.
#pragma once
#include <cstdint>

namespace lina::detail::delta::cpu {

inline constexpr std::int64_t kChunk = 64;

// One (sequence, value head): token-major fp32 rows after preprocessing.
struct HeadInputs {
  std::int64_t L = 0, K = 0, V = 0;
  const float* q = nullptr;     // L x K (after the optional l2norm)
  const float* k = nullptr;     // L x K
  const float* v = nullptr;     // L x V
  const float* g = nullptr;     // L x K log decay (GDN: its scalar repeated over K)
  const float* beta = nullptr;  // L
  bool scalar_gate = false;     // GDN: every row of g is constant
  float scale = 1.0f;
};

// state: K x V, the initial state on entry and the final state on return. o: L x V, or null.
void forward_head(const HeadInputs& in, float* state, float* o);

// Gradients of one (sequence, value head), all L x (K|V|1), written (not accumulated) for every row.
struct HeadGrads {
  float* dq = nullptr;     // L x K, with respect to the (normalised) q
  float* dk = nullptr;     // L x K
  float* dv = nullptr;     // L x V
  float* dg = nullptr;     // L x K, with respect to the log decay (GDN callers sum over K)
  float* dbeta = nullptr;  // L, with respect to beta after the optional sigmoid
};

// h0: K x V initial state. d_o: L x V. dstate: dL/d final state on entry (zeros if absent), dL/dh0 on
// return. Recomputes the forward per chunk, then runs the dh recursion in reverse.
void backward_head(const HeadInputs& in, const float* h0, const float* d_o, float* dstate, const HeadGrads& out);

}  // namespace lina::detail::delta::cpu
