// chunk_gla: gated linear attention with a per-key-channel gate (FLA's chunk_gla).
//   S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T,   o_t = S_t^T (scale * q_t)
#pragma once
#include "lina/ops.h"

namespace lina {

struct ChunkGlaArgs {
  TensorView q;  // [B,T,H,K]  bf16 | f16 | f32
  TensorView k;  // [B,T,H,K]  same dtype as q
  TensorView v;  // [B,T,H,V]  same dtype as q
  TensorView g;  // [B,T,H,K]  log forget gate (<= 0); dtype of q or f32
  std::optional<double> scale;                // default K^-0.5
  std::optional<TensorView> initial_state;    // [N,H,K,V] f32
  std::optional<TensorView> cu_seqlens;       // [N+1] int32 | int64 on q's device; requires B == 1
  std::optional<TensorView> cu_seqlens_cpu;   // optional host copy (avoids a device read for checks)
};

// dq, dk, dv, dg in the dtypes of q, k, v, g; d_initial_state [N,H,K,V] f32.
struct ChunkGlaGrads {
  TensorView dq, dk, dv, dg;
  std::optional<TensorView> d_initial_state;
};

// Head dims K, V in {64, 128, 256} for the CUDA backend; the CPU backend takes any K, V >= 1.
RunInfo chunk_gla_forward(const ChunkGlaArgs& args, const AttentionOutputs& out,
                          ForwardMode mode = ForwardMode::training, const ExecOptions& opts = {});
RunInfo chunk_gla_backward(const ChunkGlaArgs& args, const AttentionGradInputs& grad_in,
                           const ChunkGlaGrads& grads, const ExecOptions& opts = {});

namespace reference {
// fp64 naive recurrence on the host (docs/math.md section 2); outputs/grads may be f64 or f32 host tensors.
void chunk_gla_forward(const ChunkGlaArgs& args, const AttentionOutputs& out);
void chunk_gla_backward(const ChunkGlaArgs& args, const AttentionGradInputs& grad_in,
                        const ChunkGlaGrads& grads);
}  // namespace reference

}  // namespace lina
