// One validated fused_recurrent call, resolved to pointers, dtypes and flags: what the front door
// (ops/recurrent/api.cpp) hands every backend (the fp64 reference, the CPU backend, the CUDA kernels).
// Backends trust it; it carries no ownership.
#pragma once
#include <cstdint>
#include <string>

#include "lina/fused_recurrent.h"

namespace lina::detail::recurrent {

enum class DecodeOp : int { gla = 0, kda = 1, gdn = 2 };

// How the decay of a token is formed from g (per key channel for GLA / KDA, one scalar for GDN):
//   log_decay:   g is the log decay itself
//   softplus:    -exp(A_log) * softplus(g + dt_bias)                (A_log, dt_bias optional: 0 / none)
//   lower_bound: lower_bound * sigmoid(exp(A_log) * (g + dt_bias))   (KDA only; A_log optional: 1)
enum class GateForm : int { log_decay = 0, softplus = 1, lower_bound = 2 };

// Where a sequence's state is read from and written to.
//   dense:     read initial_state[n] (or zero), write final_state[n] after the last token (if given)
//   pool:      read pool[slot(n)], write pool[...] (in place) per DecodeState's rules
//   per_token: read pool[slot(n)], write final_state[row of token] after every token
enum class StateMode : int { dense = 0, pool = 1, per_token = 2 };

// Index and sequence tensors keep their dtype: code 4 = int32, 8 = int64 (bytes per element).
struct DecodeCall {
  DecodeOp op = DecodeOp::gla;
  std::int64_t B = 0, T = 0, H = 0, HV = 0, K = 0, V = 0;
  std::int64_t N = 0;              // sequences
  std::int64_t R = 0;              // B * T token rows
  bool on_cuda = false;

  // Sequence n's tokens: rows [bos, eos) of the flattened token axis. Dense: bos = n * T, eos = bos + T.
  // Varlen: bos = cu_seqlens[n], eos = cu_seqlens[n + 1] (a pointer on the backend's device).
  const void* cu_seqlens = nullptr;
  int cu_seqlens_bytes = 0;

  // Inputs, row-major: q, k [R,H,K]; v [R,HV,V]; g [R,HV,K] (GLA: H = HV) or [R,HV] (GDN); beta [R,HV]
  // (absent for GLA). Dtype codes as lina::DType.
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* g = nullptr;
  const void* beta = nullptr;
  DType qkv_dtype = DType::bf16, g_dtype = DType::bf16, beta_dtype = DType::bf16;

  GateForm gate = GateForm::log_decay;
  const float* A_log = nullptr;    // [HV]
  const float* dt_bias = nullptr;  // KDA [HV*K], GDN [HV]
  double lower_bound = 0.0;  // double so that the fp64 reference sees the caller's value

  bool l2norm = false;        // q, k <- x / sqrt(sum x^2 + 1e-6), in fp32
  bool beta_sigmoid = false;  // beta <- sigmoid(beta) * beta_scale
  float beta_scale = 1.f;     // 2 with allow_neg_eigval
  double scale = 1.0;        // (kernels round both to f32)
  bool reverse = false;       // GLA: tokens last to first

  // Output o [R,HV,V] in qkv_dtype (host references: o_dtype may be f32 / f64).
  void* o = nullptr;
  DType o_dtype = DType::bf16;

  // State [., HV, K, V] (K rows of V) in state_dtype (f32; the fp64 reference may write f64 outputs).
  StateMode state_mode = StateMode::dense;
  const float* initial_state = nullptr;  // dense: [N,...] or null (zero); pool / per_token: the pool [S,...]
  void* final_state = nullptr;           // dense: [N,...]; per_token: [R,...]; pool: null (written in the pool)
  DType final_state_dtype = DType::f32;
  float* pool_out = nullptr;             // pool mode: the pool itself (initial_state's memory, written)
  std::int64_t pool_slots = 0;           // S
  const void* state_indices = nullptr;   // [N] or [N,L]
  int state_indices_bytes = 0;
  std::int64_t indices_per_seq = 0;      // 0: [N] indices; L: [N,L]
  const void* num_accepted_tokens = nullptr;  // [N]
  int num_accepted_bytes = 0;

  int num_threads = 0;  // CPU backend
  void* stream = nullptr;
};

// The CPU backend (fp32, threads over sequence x value head) and the fp64 reference.
RunInfo run_cpu(const DecodeCall& c);
void run_reference(const DecodeCall& c);
// The CUDA backend (ops/recurrent/cuda/); refuses what it does not instantiate (lina::Error, unsupported).
RunInfo run_cuda(const DecodeCall& c);

}  // namespace lina::detail::recurrent
