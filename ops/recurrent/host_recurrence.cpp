// The fp64 reference and the fp32 CPU backend of the fused_recurrent ops: one token-by-token
// recurrence (docs/math.md section 2, step order decay -> update -> read) templated on the
// arithmetic type, threads over (sequence, value head). Inputs are read through load_element
// (any float dtype); states are f32 in memory.
#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/common/host_io.h"
#include "ops/common/parallel.h"
#include "ops/recurrent/decode_call.h"

namespace lina::detail::recurrent {
namespace {

using i64 = std::int64_t;

i64 load_index(const void* p, int bytes, i64 i) {
  return bytes == 8 ? static_cast<const std::int64_t*>(p)[i] : static_cast<const std::int32_t*>(p)[i];
}

double load_value(const void* p, DType t, i64 i) {
  return load_element(TensorView::contiguous(const_cast<void*>(p), t, Shape{i + 1}), i);
}

void store_value(void* p, DType t, i64 i, double value) {
  store_element(TensorView::contiguous(p, t, Shape{i + 1}), i, value);
}

template <class Acc>
Acc softplus(Acc x) { return x > Acc(20) ? x : std::log1p(std::exp(x)); }  // FLA's threshold
template <class Acc>
Acc sigmoid(Acc x) { return Acc(1) / (Acc(1) + std::exp(-x)); }

struct SeqRange {
  i64 bos, len;
};
SeqRange sequence(const DecodeCall& c, i64 n) {
  if (!c.cu_seqlens) return {n * c.T, c.T};
  const i64 b = load_index(c.cu_seqlens, c.cu_seqlens_bytes, n), e = load_index(c.cu_seqlens, c.cu_seqlens_bytes, n + 1);
  return {b, e - b};
}

bool valid_slot(const DecodeCall& c, i64 slot) { return slot >= 0 && slot < c.pool_slots; }

// The slot sequence n reads its state from (pool and per_token modes).
i64 read_slot(const DecodeCall& c, i64 n) {
  if (c.indices_per_seq == 0) return load_index(c.state_indices, c.state_indices_bytes, n);
  const i64 col = c.num_accepted_tokens ? load_index(c.num_accepted_tokens, c.num_accepted_bytes, n) - 1 : 0;
  return load_index(c.state_indices, c.state_indices_bytes, n * c.indices_per_seq + col);
}

template <class Acc>
void store_state(void* dst, DType dt, const std::vector<Acc>& S) {
  float* f32 = dt == DType::f32 ? static_cast<float*>(dst) : nullptr;
  for (std::size_t i = 0; i < S.size(); ++i) {
    if (f32) f32[i] = static_cast<float>(S[i]);
    else store_value(dst, dt, static_cast<i64>(i), static_cast<double>(S[i]));
  }
}

template <class Acc>
void run_one(const DecodeCall& c, i64 n, i64 hv) {
  const i64 K = c.K, V = c.V, HV = c.HV, H = c.H, h = hv / (HV / H);
  const SeqRange sr = sequence(c, n);
  const bool pooled = c.state_mode != StateMode::dense;
  const i64 slot = pooled ? read_slot(c, n) : n;
  if (pooled && !valid_slot(c, slot)) {  // padding: o rows zero, no state read or written
    for (i64 s = 0; s < sr.len; ++s)
      for (i64 j = 0; j < V; ++j) store_value(c.o, c.o_dtype, ((sr.bos + s) * HV + hv) * V + j, 0.0);
    return;
  }
  const i64 kv = K * V;
  std::vector<Acc> S(static_cast<std::size_t>(kv), Acc(0));
  if (c.initial_state) {
    const float* src = c.initial_state + (slot * HV + hv) * kv;
    for (i64 i = 0; i < kv; ++i) S[static_cast<std::size_t>(i)] = static_cast<Acc>(src[i]);
  }
  std::vector<Acc> q(K), k(K), g(K), u(V);
  const bool delta = c.op != DecodeOp::gla;
  const i64 gk = c.op == DecodeOp::gdn ? 1 : K;  // gate width
  for (i64 step = 0; step < sr.len; ++step) {
    const i64 t = c.reverse ? sr.bos + sr.len - 1 - step : sr.bos + step;
    Acc qq = 0, kk = 0;
    for (i64 i = 0; i < K; ++i) {
      q[i] = static_cast<Acc>(load_value(c.q, c.qkv_dtype, (t * H + h) * K + i));
      k[i] = static_cast<Acc>(load_value(c.k, c.qkv_dtype, (t * H + h) * K + i));
      qq += q[i] * q[i];
      kk += k[i] * k[i];
    }
    const Acc rq = c.l2norm ? Acc(1) / std::sqrt(qq + Acc(1e-6)) : Acc(1);
    const Acc rk = c.l2norm ? Acc(1) / std::sqrt(kk + Acc(1e-6)) : Acc(1);
    for (i64 i = 0; i < K; ++i) {
      q[i] *= rq * static_cast<Acc>(c.scale);
      k[i] *= rk;
    }
    const Acc A = c.A_log ? static_cast<Acc>(c.A_log[hv]) : Acc(0);
    for (i64 i = 0; i < gk; ++i) {
      Acc x = static_cast<Acc>(load_value(c.g, c.g_dtype, (t * HV + hv) * gk + i));
      if (c.gate != GateForm::log_decay && c.dt_bias) x += static_cast<Acc>(c.dt_bias[hv * gk + i]);
      if (c.gate == GateForm::softplus) x = -std::exp(A) * softplus(x);
      else if (c.gate == GateForm::lower_bound) x = static_cast<Acc>(c.lower_bound) * sigmoid((c.A_log ? std::exp(A) : Acc(1)) * x);
      g[i] = std::exp(x);
    }
    Acc beta = 1;
    if (delta) {
      beta = static_cast<Acc>(load_value(c.beta, c.beta_dtype, t * HV + hv));
      if (c.beta_sigmoid) beta = sigmoid(beta) * static_cast<Acc>(c.beta_scale);
    }
    for (i64 i = 0; i < K; ++i) {
      const Acc d = g[gk == 1 ? 0 : i];
      for (i64 j = 0; j < V; ++j) S[i * V + j] *= d;
    }
    for (i64 j = 0; j < V; ++j) u[j] = static_cast<Acc>(load_value(c.v, c.qkv_dtype, (t * HV + hv) * V + j));
    if (delta) {
      for (i64 j = 0; j < V; ++j) {
        Acc pred = 0;
        for (i64 i = 0; i < K; ++i) pred += S[i * V + j] * k[i];
        u[j] = beta * (u[j] - pred);
      }
    }
    for (i64 i = 0; i < K; ++i)
      for (i64 j = 0; j < V; ++j) S[i * V + j] += k[i] * u[j];
    for (i64 j = 0; j < V; ++j) {
      Acc o = 0;
      for (i64 i = 0; i < K; ++i) o += S[i * V + j] * q[i];
      store_value(c.o, c.o_dtype, (t * HV + hv) * V + j, static_cast<double>(o));
    }
    if (c.state_mode == StateMode::per_token && c.final_state) {
      store_state(static_cast<char*>(c.final_state) + (t * HV + hv) * kv * dtype_size(c.final_state_dtype),
                  c.final_state_dtype, S);
    } else if (c.state_mode == StateMode::pool && c.indices_per_seq > 0) {
      const i64 dst = load_index(c.state_indices, c.state_indices_bytes, n * c.indices_per_seq + step);
      if (valid_slot(c, dst)) store_state(c.pool_out + (dst * HV + hv) * kv, DType::f32, S);
    }
  }
  if (c.state_mode == StateMode::dense && c.final_state) {
    store_state(static_cast<char*>(c.final_state) + (n * HV + hv) * kv * dtype_size(c.final_state_dtype),
                c.final_state_dtype, S);
  } else if (c.state_mode == StateMode::pool && c.indices_per_seq == 0) {
    store_state(c.pool_out + (slot * HV + hv) * kv, DType::f32, S);
  }
}

template <class Acc>
void run_all(const DecodeCall& c, int threads) {
  // In-place updates read and write the same slots: every (sequence, head) owns its own, so the jobs are independent
  // as long as no two sequences name one slot (the caller's contract, as in FLA and vLLM).
  parallel_for(c.N * c.HV, threads, [&](i64 job) { run_one<Acc>(c, job / c.HV, job % c.HV); });
}

}  // namespace

RunInfo run_cpu(const DecodeCall& c) {
  run_all<float>(c, c.num_threads);
  return RunInfo{"cpu", {"fused_recurrent (cpu)"}};
}

void run_reference(const DecodeCall& c) { run_all<double>(c, 0); }

}  // namespace lina::detail::recurrent
