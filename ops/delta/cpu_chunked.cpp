// CPU backend of chunk_kda / chunk_gdn: preprocessing, the chunked WY/UT algorithm (cpu_kernels) per
// (sequence, head), and the preprocessing backward. Forward work items are (sequence, value head);
// backward items are (sequence, q/k head) so that the GVA group-sum of dq/dk needs no shared writes.
#include <algorithm>
#include <cstring>
#include <vector>

#include "lina/error.h"
#include "ops/common/backends.h"
#include "ops/common/host_io.h"
#include "ops/common/parallel.h"
#include "ops/delta/cpu_kernels.h"
#include "ops/delta/preprocess.h"

namespace lina::detail::cpu {
namespace {

using i64 = std::int64_t;
using Buf = std::vector<float>;
namespace prep = lina::detail::delta;

// Reads n consecutive elements starting at flat offset `off`, converting to fp32.
void load_row(const TensorView& t, i64 off, i64 n, float* dst) {
  const auto* base = static_cast<const std::byte*>(t.data) + off * static_cast<i64>(dtype_size(t.dtype));
  switch (t.dtype) {
    case DType::f32: std::memcpy(dst, base, static_cast<std::size_t>(n) * 4); return;
    case DType::bf16:
      for (i64 i = 0; i < n; ++i) { std::uint16_t u; std::memcpy(&u, base + 2 * i, 2); dst[i] = bf16_bits_to_float(u); }
      return;
    case DType::f16:
      for (i64 i = 0; i < n; ++i) { std::uint16_t u; std::memcpy(&u, base + 2 * i, 2); dst[i] = f16_bits_to_float(u); }
      return;
    default:
      for (i64 i = 0; i < n; ++i) dst[i] = static_cast<float>(load_element(t, off + i));
  }
}

// Writes n fp32 values at flat offset `off`, rounding to the tensor's dtype.
void store_row(const TensorView& t, i64 off, i64 n, const float* src) {
  auto* base = static_cast<std::byte*>(t.data) + off * static_cast<i64>(dtype_size(t.dtype));
  switch (t.dtype) {
    case DType::f32: std::memcpy(base, src, static_cast<std::size_t>(n) * 4); return;
    case DType::bf16:
      for (i64 i = 0; i < n; ++i) { const std::uint16_t u = float_to_bf16_bits(src[i]); std::memcpy(base + 2 * i, &u, 2); }
      return;
    case DType::f16:
      for (i64 i = 0; i < n; ++i) { const std::uint16_t u = float_to_f16_bits(src[i]); std::memcpy(base + 2 * i, &u, 2); }
      return;
    default:
      for (i64 i = 0; i < n; ++i) store_element(t, off + i, src[i]);
  }
}

Buf load_all(const std::optional<TensorView>& t) {
  if (!t) return {};
  Buf out(static_cast<std::size_t>(t->numel()));
  load_row(*t, 0, t->numel(), out.data());
  return out;
}

// Everything about one call that is the same for every work item.
struct Setup {
  const Problem& p;
  const DeltaRuleArgs& a;
  bool kda;
  i64 Kg;  // gate width per token and head: K (KDA) or 1 (GDN)
  prep::GateForm form = prep::GateForm::none;
  float lower_bound = 0.0f;
  Buf A_log, dt_bias;  // f32 copies of the in-kernel gate parameters

  Setup(const Problem& p_, const DeltaRuleArgs& a_, bool kda_, std::optional<double> lb)
      : p(p_), a(a_), kda(kda_), Kg(kda_ ? p_.K : 1) {
    if (a.use_gate_in_kernel) {
      form = (kda && lb) ? prep::GateForm::lower_bound : prep::GateForm::softplus;
      if (lb) lower_bound = static_cast<float>(*lb);
      A_log = load_all(a.A_log);
      dt_bias = load_all(a.dt_bias);
    }
  }

  prep::HeadGate gate(i64 hv) const {
    prep::HeadGate g;
    g.form = form;
    g.has_A_log = !A_log.empty();
    g.A_log = A_log.empty() ? 0.0f : A_log[static_cast<std::size_t>(hv)];
    g.dt_bias = dt_bias.empty() ? nullptr : dt_bias.data() + hv * Kg;
    g.lower_bound = lower_bound;
    return g;
  }
};

// q or k rows of one (sequence, q/k head), l2-normalised when asked; rstd per row (1 otherwise).
void load_qk(const Setup& s, const TensorView& t, const Sequence& seq, i64 h, Buf& x, Buf& rstd) {
  const i64 K = s.p.K, L = seq.length;
  x.resize(L * K);
  rstd.assign(L, 1.0f);
  for (i64 t0 = 0; t0 < L; ++t0) {
    float* row = x.data() + t0 * K;
    load_row(t, ((seq.row_begin + t0) * s.p.H + h) * K, K, row);
    if (s.a.use_qk_l2norm_in_kernel) rstd[t0] = prep::l2norm_forward(row, row, K);
  }
}

// v, gate (activated, broadcast to K), raw gate and beta of one (sequence, value head).
struct ValueHead {
  Buf v, g, graw, beta, braw;
};

void load_value_head(const Setup& s, const Sequence& seq, i64 hv, ValueHead& d) {
  const i64 K = s.p.K, V = s.p.V, HV = s.p.HV, L = seq.length, Kg = s.Kg;
  d.v.resize(L * V);
  d.g.resize(L * K);
  d.graw.resize(L * Kg);
  d.beta.resize(L);
  d.braw.resize(L);
  const prep::HeadGate gate = s.gate(hv);
  for (i64 t = 0; t < L; ++t) {
    const i64 row = (seq.row_begin + t) * HV + hv;
    load_row(s.a.v, row * V, V, d.v.data() + t * V);
    float* graw = d.graw.data() + t * Kg;
    load_row(s.a.g, row * Kg, Kg, graw);
    float* gt = d.g.data() + t * K;
    prep::gate_forward(gate, graw, gt, Kg);
    if (!s.kda) std::fill(gt + 1, gt + K, gt[0]);
    load_row(s.a.beta, row, 1, d.braw.data() + t);
    d.beta[t] = s.a.use_beta_sigmoid_in_kernel ? prep::beta_sigmoid_forward(d.braw[t], s.a.allow_neg_eigval) : d.braw[t];
  }
}

void load_state(const std::optional<TensorView>& t, i64 s, i64 hv, const Problem& p, Buf& out) {
  out.assign(p.K * p.V, 0.0f);
  if (t) load_row(*t, (s * p.HV + hv) * p.K * p.V, p.K * p.V, out.data());
}

RunInfo forward(const Setup& s, const AttentionOutputs& out, const ExecOptions& opts) {
  const Problem& p = s.p;
  const i64 K = p.K, V = p.V, HV = p.HV, G = p.group();
  parallel_for(p.N * HV, opts.num_threads, [&](i64 item) {
    const i64 si = item / HV, hv = item % HV;
    const Sequence& seq = p.sequences[static_cast<std::size_t>(si)];
    Buf q, k, rq, rk, state, o;
    ValueHead d;
    load_qk(s, s.a.q, seq, hv / G, q, rq);
    load_qk(s, s.a.k, seq, hv / G, k, rk);
    load_value_head(s, seq, hv, d);
    load_state(s.a.initial_state, si, hv, p, state);
    delta::cpu::HeadInputs in{seq.length, K, V, q.data(), k.data(), d.v.data(), d.g.data(), d.beta.data(),
                              !s.kda, static_cast<float>(p.scale)};
    o.resize(seq.length * V);
    delta::cpu::forward_head(in, state.data(), o.data());
    for (i64 t = 0; t < seq.length; ++t) store_row(out.o, ((seq.row_begin + t) * HV + hv) * V, V, o.data() + t * V);
    if (out.final_state) store_row(*out.final_state, (si * HV + hv) * K * V, K * V, state.data());
  });
  return RunInfo{"cpu", {"delta_preprocess", "delta_chunk_fwd"}};
}

RunInfo backward(const Setup& s, const AttentionGradInputs& gin, const DeltaRuleGrads& gr, const ExecOptions& opts) {
  const Problem& p = s.p;
  const i64 K = p.K, V = p.V, H = p.H, HV = p.HV, G = p.group(), Kg = s.Kg;
  const bool params = s.form != prep::GateForm::none;
  // Per (sequence, value head) partials of the parameter gradients, reduced in a fixed order below.
  std::vector<double> dA_part(params ? p.N * HV : 0, 0.0), ddt_part(params ? p.N * HV * Kg : 0, 0.0);

  parallel_for(p.N * H, opts.num_threads, [&](i64 item) {
    const i64 si = item / H, h = item % H;
    const Sequence& seq = p.sequences[static_cast<std::size_t>(si)];
    const i64 L = seq.length;
    Buf q, k, rq, rk, h0, dstate, d_o(L * V);
    load_qk(s, s.a.q, seq, h, q, rq);
    load_qk(s, s.a.k, seq, h, k, rk);
    Buf dq_sum(L * K, 0.0f), dk_sum(L * K, 0.0f);
    Buf dq(L * K), dkk(L * K), dv(L * V), dg(L * K), dbeta(L), tmp(K);
    ValueHead d;
    for (i64 hv = h * G; hv < (h + 1) * G; ++hv) {
      load_value_head(s, seq, hv, d);
      load_state(s.a.initial_state, si, hv, p, h0);
      load_state(gin.d_final_state, si, hv, p, dstate);
      for (i64 t = 0; t < L; ++t) load_row(gin.d_o, ((seq.row_begin + t) * HV + hv) * V, V, d_o.data() + t * V);
      delta::cpu::HeadInputs in{L, K, V, q.data(), k.data(), d.v.data(), d.g.data(), d.beta.data(),
                                !s.kda, static_cast<float>(p.scale)};
      delta::cpu::HeadGrads hg{dq.data(), dkk.data(), dv.data(), dg.data(), dbeta.data()};
      delta::cpu::backward_head(in, h0.data(), d_o.data(), dstate.data(), hg);
      for (i64 x = 0; x < L * K; ++x) {
        dq_sum[x] += dq[x];
        dk_sum[x] += dkk[x];
      }
      const prep::HeadGate gate = s.gate(hv);
      prep::GateParamGrads acc;
      if (params && !s.dt_bias.empty()) acc.ddt_bias = ddt_part.data() + (si * HV + hv) * Kg;
      for (i64 t = 0; t < L; ++t) {
        const i64 row = (seq.row_begin + t) * HV + hv;
        store_row(gr.dv, row * V, V, dv.data() + t * V);
        float* dgt = dg.data() + t * K;
        if (!s.kda) {  // GDN's scalar gate: the gradient is the sum over the broadcast channels
          float sum = 0.0f;
          for (i64 c = 0; c < K; ++c) sum += dgt[c];
          dgt[0] = sum;
        }
        prep::gate_backward(gate, d.graw.data() + t * Kg, dgt, tmp.data(), Kg, acc);
        store_row(gr.dg, row * Kg, Kg, tmp.data());
        float db = dbeta[t];
        if (s.a.use_beta_sigmoid_in_kernel) db = prep::beta_sigmoid_backward(d.braw[t], db, s.a.allow_neg_eigval);
        store_row(gr.dbeta, row, 1, &db);
      }
      if (params) dA_part[si * HV + hv] = acc.dA_log;
      if (gr.d_initial_state) store_row(*gr.d_initial_state, (si * HV + hv) * K * V, K * V, dstate.data());
    }
    for (i64 t = 0; t < L; ++t) {
      const i64 off = ((seq.row_begin + t) * H + h) * K;
      float* a = dq_sum.data() + t * K;
      float* b = dk_sum.data() + t * K;
      if (s.a.use_qk_l2norm_in_kernel) {
        prep::l2norm_backward(a, q.data() + t * K, rq[t], a, K);
        prep::l2norm_backward(b, k.data() + t * K, rk[t], b, K);
      }
      store_row(gr.dq, off, K, a);
      store_row(gr.dk, off, K, b);
    }
  });

  if (gr.d_A_log) {
    Buf v(HV, 0.0f);
    for (i64 hv = 0; hv < HV; ++hv) {
      double sum = 0.0;
      for (i64 si = 0; si < p.N; ++si) sum += dA_part[si * HV + hv];
      v[hv] = static_cast<float>(sum);
    }
    store_row(*gr.d_A_log, 0, HV, v.data());
  }
  if (gr.d_dt_bias) {
    Buf v(HV * Kg, 0.0f);
    for (i64 x = 0; x < HV * Kg; ++x) {
      double sum = 0.0;
      for (i64 si = 0; si < p.N; ++si) sum += ddt_part[si * HV * Kg + x];
      v[x] = static_cast<float>(sum);
    }
    store_row(*gr.d_dt_bias, 0, HV * Kg, v.data());
  }
  return RunInfo{"cpu", {"delta_preprocess", "delta_chunk_recompute_fwd", "delta_chunk_bwd", "delta_preprocess_bwd"}};
}

}  // namespace

RunInfo chunk_kda_forward(const Problem& p, const ChunkKdaArgs& a, const AttentionOutputs& out, ForwardMode,
                          const ExecOptions& opts) {
  return forward(Setup(p, a, true, a.lower_bound), out, opts);
}
RunInfo chunk_kda_backward(const Problem& p, const ChunkKdaArgs& a, const AttentionGradInputs& in, const DeltaRuleGrads& g,
                           const ExecOptions& opts) {
  return backward(Setup(p, a, true, a.lower_bound), in, g, opts);
}
RunInfo chunk_gdn_forward(const Problem& p, const ChunkGdnArgs& a, const AttentionOutputs& out, ForwardMode,
                          const ExecOptions& opts) {
  return forward(Setup(p, a, false, std::nullopt), out, opts);
}
RunInfo chunk_gdn_backward(const Problem& p, const ChunkGdnArgs& a, const AttentionGradInputs& in, const DeltaRuleGrads& g,
                           const ExecOptions& opts) {
  return backward(Setup(p, a, false, std::nullopt), in, g, opts);
}

}  // namespace lina::detail::cpu
