// chunk_kda (Kimi delta attention) and chunk_gdn (gated delta net): delta rules with a decay gate.
//   S' = decay(g_t) S,  u_t = beta_t (v_t - S'^T k_t),  S_t = S' + k_t u_t^T,  o_t = S_t^T (scale q_t)
// KDA's gate is per key channel ([B,T,HV,K]); GDN's is one scalar per value head ([B,T,HV]).
#pragma once
#include "lina/ops.h"

namespace lina {

struct DeltaRuleArgs {
  TensorView q;     // [B,T,H,K]   bf16 | f16 | f32
  TensorView k;     // [B,T,H,K]   same dtype as q
  TensorView v;     // [B,T,HV,V]  same dtype as q; HV % H == 0 (GVA)
  TensorView g;     // KDA [B,T,HV,K], GDN [B,T,HV]; log decay, or the raw gate with use_gate_in_kernel
  TensorView beta;  // [B,T,HV]; dtype of q or f32; raw logits with use_beta_sigmoid_in_kernel
  std::optional<double> scale;               // default K^-0.5
  std::optional<TensorView> initial_state;   // [N,HV,K,V] f32
  std::optional<TensorView> cu_seqlens;      // [N+1] int32 | int64; requires B == 1
  std::optional<TensorView> cu_seqlens_cpu;  // optional host copy
  bool use_qk_l2norm_in_kernel = false;      // q, k <- x / sqrt(sum x^2 + 1e-6)
  bool use_beta_sigmoid_in_kernel = false;   // beta <- sigmoid(beta) (times 2 with allow_neg_eigval)
  bool allow_neg_eigval = false;             // requires use_beta_sigmoid_in_kernel
  bool use_gate_in_kernel = false;           // g is raw: see A_log / dt_bias / lower_bound
  std::optional<TensorView> A_log;           // [HV] f32
  std::optional<TensorView> dt_bias;         // KDA [HV*K] (or [HV,K]); GDN [HV]; f32
};

struct ChunkKdaArgs : DeltaRuleArgs {
  // With use_gate_in_kernel: unset -> g = -exp(A_log) softplus(g + dt_bias);
  // set -> g = lower_bound * sigmoid(exp(A_log) (g + dt_bias)) (A_log optional).
  std::optional<double> lower_bound;
  bool safe_gate = false;  // promises g >= lower_bound; requires lower_bound in [-5, 0) with the gate
};

struct ChunkGdnArgs : DeltaRuleArgs {};

// Gradients with respect to the raw inputs (before l2norm / sigmoid / in-kernel gate).
// dq, dk [B,T,H,K]; dv [B,T,HV,V]; dg like g; dbeta like beta; d_initial_state f32;
// d_A_log / d_dt_bias are optional: computed when given (only valid when the in-kernel gate uses them).
struct DeltaRuleGrads {
  TensorView dq, dk, dv, dg, dbeta;
  std::optional<TensorView> d_initial_state;
  std::optional<TensorView> d_A_log;
  std::optional<TensorView> d_dt_bias;
};

RunInfo chunk_kda_forward(const ChunkKdaArgs& args, const AttentionOutputs& out,
                          ForwardMode mode = ForwardMode::training, const ExecOptions& opts = {});
RunInfo chunk_kda_backward(const ChunkKdaArgs& args, const AttentionGradInputs& grad_in,
                           const DeltaRuleGrads& grads, const ExecOptions& opts = {});
RunInfo chunk_gdn_forward(const ChunkGdnArgs& args, const AttentionOutputs& out,
                          ForwardMode mode = ForwardMode::training, const ExecOptions& opts = {});
RunInfo chunk_gdn_backward(const ChunkGdnArgs& args, const AttentionGradInputs& grad_in,
                           const DeltaRuleGrads& grads, const ExecOptions& opts = {});

namespace reference {
// fp64 naive recurrences on the host (docs/math.md section 2, step order decay -> update -> read).
void chunk_kda_forward(const ChunkKdaArgs& args, const AttentionOutputs& out);
void chunk_kda_backward(const ChunkKdaArgs& args, const AttentionGradInputs& grad_in,
                        const DeltaRuleGrads& grads);
void chunk_gdn_forward(const ChunkGdnArgs& args, const AttentionOutputs& out);
void chunk_gdn_backward(const ChunkGdnArgs& args, const AttentionGradInputs& grad_in,
                        const DeltaRuleGrads& grads);
}  // namespace reference

}  // namespace lina
