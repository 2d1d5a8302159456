// lina's ops as PyTorch operators in the namespace `lina` (torch.ops.lina.*): one schema per op and
// phase, one kernel for CPU and CUDA tensors (lina's front door picks the backend from q's device and
// validates everything), and the autograd of each forward as a C++ autograd function (the backward
// recomputes from the saved inputs through the *_bwd operator). The fake kernels (output shapes for
// torch.compile; in Python they see symbolic shapes as they are) and FLA's keyword interface are in
// python/lina/.
//
// The binding is typed: tensors arrive as at::Tensor and become lina::TensorView directly (no names,
// no JSON), so a call costs the dispatcher plus lina's own host path.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <tuple>
#include <type_traits>

#include "bindings/torch/torch_views.h"
#include "lina/lina.h"

#ifdef LINA_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace {

using namespace lina_torch;

// ---- chunk_gla ----------------------------------------------------------------------------------------

std::tuple<Tensor, Tensor> gla_fwd_outputs(const Tensor& q, const Tensor& v, bool output_final_state,
                                           const OptTensor& cu_seqlens) {
  translate_errors([&] {
    need_rank4(q, "q");
    need_rank4(v, "v");
  });
  Tensor o = at::empty(v.sizes(), v.options());
  Tensor ht = output_final_state
                  ? at::empty({num_seqs(q, cu_seqlens), q.size(2), q.size(3), v.size(3)}, q.options().dtype(at::kFloat))
                  : none_like(q);
  return {o, ht};
}

std::tuple<Tensor, Tensor> chunk_gla_fwd(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& g_,
                                         std::optional<double> scale, const OptTensor& h0_, bool output_final_state,
                                         const OptTensor& cu_, const OptTensor& cu_cpu_, bool training,
                                         Str variant) {
  const Tensor q = dense(q_), k = dense(k_), v = dense(v_), g = dense(g_);
  const OptTensor h0 = dense(h0_), cu = dense(cu_), cu_cpu = dense(cu_cpu_);
  auto [o, ht] = gla_fwd_outputs(q, v, output_final_state, cu);
  run_on(q, variant, [&](const lina::ExecOptions& opts) {
    const lina::ChunkGlaArgs args = gla_args(q, k, v, g, scale, h0, cu, cu_cpu);
    std::optional<lina::TensorView> final_state;
    if (output_final_state) final_state = view_of(ht, "final_state");
    lina::chunk_gla_forward(args, {view_of(o, "o"), final_state},
                            training ? lina::ForwardMode::training : lina::ForwardMode::inference, opts);
  });
  return {o, ht};
}


using GlaGrads = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor>;

GlaGrads gla_grad_outputs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const OptTensor& h0) {
  return {at::empty(q.sizes(), q.options()), at::empty(k.sizes(), k.options()), at::empty(v.sizes(), v.options()),
          at::empty(g.sizes(), g.options()),
          h0.has_value() && h0->defined() ? at::empty(h0->sizes(), h0->options()) : none_like(q)};
}

GlaGrads chunk_gla_bwd(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& g_,
                       std::optional<double> scale, const OptTensor& h0_, const OptTensor& cu_, const OptTensor& cu_cpu_,
                       const Tensor& do_, const OptTensor& dht_, Str variant) {
  const Tensor q = dense(q_), k = dense(k_), v = dense(v_), g = dense(g_), d_o = dense(do_);
  const OptTensor h0 = dense(h0_), cu = dense(cu_), cu_cpu = dense(cu_cpu_), dht = dense(dht_);
  GlaGrads out = gla_grad_outputs(q, k, v, g, h0);
  auto& [dq, dk, dv, dg, dh0] = out;
  run_on(q, variant, [&](const lina::ExecOptions& opts) {
    const lina::ChunkGlaArgs args = gla_args(q, k, v, g, scale, h0, cu, cu_cpu);
    std::optional<lina::TensorView> d_h0;
    if (h0.has_value()) d_h0 = view_of(dh0, "dh0");
    lina::chunk_gla_backward(args, {view_of(d_o, "do"), view_of(dht, "dht")},
                             {view_of(dq, "dq"), view_of(dk, "dk"), view_of(dv, "dv"), view_of(dg, "dg"), d_h0}, opts);
  });
  return out;
}


// ---- chunk_kda / chunk_gdn ----------------------------------------------------------------------------

std::tuple<Tensor, Tensor> delta_fwd_outputs(const Tensor& q, const Tensor& v, bool output_final_state,
                                             const OptTensor& cu_seqlens) {
  translate_errors([&] {
    need_rank4(q, "q");
    need_rank4(v, "v");
  });
  Tensor o = at::empty(v.sizes(), q.options());  // o is in q's dtype, [B, T, HV, V]
  Tensor ht = output_final_state ? at::empty({num_seqs(q, cu_seqlens), v.size(2), q.size(3), v.size(3)},
                                             q.options().dtype(at::kFloat))
                                 : none_like(q);
  return {o, ht};
}

using DeltaGrads = std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor>;

DeltaGrads delta_grad_outputs(const DeltaInputs& in, bool need_dA_log, bool need_ddt_bias) {
  const auto like = [&](const OptTensor& t, bool need) {
    return need && t.has_value() && t->defined() ? at::empty(t->sizes(), t->options()) : none_like(in.q);
  };
  return {at::empty(in.q.sizes(), in.q.options()),       at::empty(in.k.sizes(), in.k.options()),
          at::empty(in.v.sizes(), in.v.options()),       at::empty(in.g.sizes(), in.g.options()),
          at::empty(in.beta.sizes(), in.beta.options()), like(in.h0, true),
          like(in.A_log, need_dA_log),                   like(in.dt_bias, need_ddt_bias)};
}

lina::DeltaRuleGrads delta_grad_views(const DeltaGrads& out) {
  const auto& [dq, dk, dv, dg, dbeta, dh0, dA, ddt] = out;
  lina::DeltaRuleGrads grads{view_of(dq, "dq"), view_of(dk, "dk"), view_of(dv, "dv"), view_of(dg, "dg"),
                             view_of(dbeta, "dbeta"), std::nullopt, std::nullopt, std::nullopt};
  if (present(dh0)) grads.d_initial_state = view_of(dh0, "dh0");
  if (present(dA)) grads.d_A_log = view_of(dA, "dA_log");
  if (present(ddt)) grads.d_dt_bias = view_of(ddt, "ddt_bias");
  return grads;
}

// One forward and one backward for both rules; Kda picks the args type and the entry points.
template <bool Kda>
std::tuple<Tensor, Tensor> delta_fwd(const DeltaInputs& in, const KdaGate& kda, bool output_final_state, bool training,
                                     Str variant) {
  using Args = std::conditional_t<Kda, lina::ChunkKdaArgs, lina::ChunkGdnArgs>;
  auto [o, ht] = delta_fwd_outputs(in.q, in.v, output_final_state, in.cu);
  run_on(in.q, variant, [&](const lina::ExecOptions& opts) {
    const Args a = delta_args<Args>(in, kda);
    std::optional<lina::TensorView> final_state;
    if (output_final_state) final_state = view_of(ht, "final_state");
    const lina::AttentionOutputs outs{view_of(o, "o"), final_state};
    const auto mode = training ? lina::ForwardMode::training : lina::ForwardMode::inference;
    if constexpr (Kda) lina::chunk_kda_forward(a, outs, mode, opts);
    else lina::chunk_gdn_forward(a, outs, mode, opts);
  });
  return {o, ht};
}

template <bool Kda>
DeltaGrads delta_bwd(const DeltaInputs& in, const KdaGate& kda, const Tensor& do_, const OptTensor& dht_,
                     bool need_dA_log, bool need_ddt_bias, Str variant) {
  using Args = std::conditional_t<Kda, lina::ChunkKdaArgs, lina::ChunkGdnArgs>;
  const Tensor d_o = dense(do_);
  const OptTensor dht = dense(dht_);
  DeltaGrads out = delta_grad_outputs(in, need_dA_log, need_ddt_bias);
  run_on(in.q, variant, [&](const lina::ExecOptions& opts) {
    const Args a = delta_args<Args>(in, kda);
    const lina::AttentionGradInputs grad_in{view_of(d_o, "do"), view_of(dht, "dht")};
    if constexpr (Kda) lina::chunk_kda_backward(a, grad_in, delta_grad_views(out), opts);
    else lina::chunk_gdn_backward(a, grad_in, delta_grad_views(out), opts);
  });
  return out;
}

std::tuple<Tensor, Tensor> chunk_kda_fwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                         const Tensor& beta, std::optional<double> scale, const OptTensor& h0,
                                         bool output_final_state, bool l2norm, bool gate, bool beta_sigmoid,
                                         bool neg_eigval, bool safe_gate, std::optional<double> lower_bound,
                                         const OptTensor& A_log, const OptTensor& dt_bias, const OptTensor& cu,
                                         const OptTensor& cu_cpu, bool training, Str variant) {
  const DeltaInputs in = dense_delta(q, k, v, g, beta, scale, h0, {l2norm, gate, beta_sigmoid, neg_eigval}, A_log,
                                     dt_bias, cu, cu_cpu);
  return delta_fwd<true>(in, {safe_gate, lower_bound}, output_final_state, training, variant);
}

DeltaGrads chunk_kda_bwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                         std::optional<double> scale, const OptTensor& h0, bool l2norm, bool gate, bool beta_sigmoid,
                         bool neg_eigval, bool safe_gate, std::optional<double> lower_bound, const OptTensor& A_log,
                         const OptTensor& dt_bias, const OptTensor& cu, const OptTensor& cu_cpu, const Tensor& d_o,
                         const OptTensor& dht, bool need_dA_log, bool need_ddt_bias, Str variant) {
  const DeltaInputs in = dense_delta(q, k, v, g, beta, scale, h0, {l2norm, gate, beta_sigmoid, neg_eigval}, A_log,
                                     dt_bias, cu, cu_cpu);
  return delta_bwd<true>(in, {safe_gate, lower_bound}, d_o, dht, need_dA_log, need_ddt_bias, variant);
}

std::tuple<Tensor, Tensor> chunk_gdn_fwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                         const Tensor& beta, std::optional<double> scale, const OptTensor& h0,
                                         bool output_final_state, bool l2norm, bool gate, bool beta_sigmoid,
                                         bool neg_eigval, const OptTensor& A_log, const OptTensor& dt_bias,
                                         const OptTensor& cu, const OptTensor& cu_cpu, bool training, Str variant) {
  const DeltaInputs in = dense_delta(q, k, v, g, beta, scale, h0, {l2norm, gate, beta_sigmoid, neg_eigval}, A_log,
                                     dt_bias, cu, cu_cpu);
  return delta_fwd<false>(in, {}, output_final_state, training, variant);
}

DeltaGrads chunk_gdn_bwd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                         std::optional<double> scale, const OptTensor& h0, bool l2norm, bool gate, bool beta_sigmoid,
                         bool neg_eigval, const OptTensor& A_log, const OptTensor& dt_bias, const OptTensor& cu,
                         const OptTensor& cu_cpu, const Tensor& d_o, const OptTensor& dht, bool need_dA_log,
                         bool need_ddt_bias, Str variant) {
  const DeltaInputs in = dense_delta(q, k, v, g, beta, scale, h0, {l2norm, gate, beta_sigmoid, neg_eigval}, A_log,
                                     dt_bias, cu, cu_cpu);
  return delta_bwd<false>(in, {}, d_o, dht, need_dA_log, need_ddt_bias, variant);
}

// ---- references ---------------------------------------------------------------------------------------
// lina's naive recurrences, the ground truth its results are checked against: on CUDA tensors the fp32 GPU
// recurrence (lina::gpu_reference), on CPU tensors the fp64 host recurrence (lina::reference). Outputs are
// float32 on CUDA and float64 on the CPU. No autograd: a check of values, not a training path.

at::ScalarType reference_dtype(const Tensor& q) { return q.is_cuda() ? at::kFloat : at::kDouble; }

std::tuple<Tensor, Tensor> reference_outputs(const Tensor& q, const Tensor& v, std::int64_t state_heads,
                                             bool output_final_state, const OptTensor& cu) {
  translate_errors([&] {
    need_rank4(q, "q");
    need_rank4(v, "v");
  });
  const auto opts = q.options().dtype(reference_dtype(q));
  Tensor o = at::empty(v.sizes(), opts);
  Tensor ht = output_final_state ? at::empty({num_seqs(q, cu), state_heads, q.size(3), v.size(3)}, opts) : none_like(q);
  return {o, ht};
}

// Runs the reference of `a` on q's device into (o, ht).
template <class Args, class Gpu, class Host>
void run_reference(const Tensor& q, const Args& a, const Tensor& o, const Tensor& ht, bool output_final_state,
                   Gpu&& gpu, Host&& host) {
  std::optional<lina::TensorView> final_state;
  run_on(q, "", [&](const lina::ExecOptions& opts) {
    if (output_final_state) final_state = view_of(ht, "final_state");
    const lina::AttentionOutputs outs{view_of(o, "o"), final_state};
    if (q.is_cuda()) gpu(a, outs, opts.stream);
    else host(a, outs);
  });
}

std::tuple<Tensor, Tensor> chunk_gla_reference(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& g_,
                                               std::optional<double> scale, const OptTensor& h0_,
                                               bool output_final_state, const OptTensor& cu_, const OptTensor& cu_cpu_) {
  const Tensor q = dense(q_), k = dense(k_), v = dense(v_), g = dense(g_);
  const OptTensor h0 = dense(h0_), cu = dense(cu_), cu_cpu = dense(cu_cpu_);
  auto [o, ht] = reference_outputs(q, v, q.size(2), output_final_state, cu);
  const lina::ChunkGlaArgs a = gla_args(q, k, v, g, scale, h0, cu, cu_cpu);
  run_reference(q, a, o, ht, output_final_state,
                [](const auto& a, const auto& out, void* st) { lina::gpu_reference::chunk_gla_forward(a, out, st); },
                [](const auto& a, const auto& out) { lina::reference::chunk_gla_forward(a, out); });
  return {o, ht};
}

template <bool Kda>
std::tuple<Tensor, Tensor> delta_reference(const DeltaInputs& in, const KdaGate& kda, bool output_final_state) {
  using Args = std::conditional_t<Kda, lina::ChunkKdaArgs, lina::ChunkGdnArgs>;
  auto [o, ht] = reference_outputs(in.q, in.v, in.v.size(2), output_final_state, in.cu);
  const Args a = delta_args<Args>(in, kda);
  if constexpr (Kda)
    run_reference(in.q, a, o, ht, output_final_state,
                  [](const auto& a, const auto& out, void* st) { lina::gpu_reference::chunk_kda_forward(a, out, st); },
                  [](const auto& a, const auto& out) { lina::reference::chunk_kda_forward(a, out); });
  else
    run_reference(in.q, a, o, ht, output_final_state,
                  [](const auto& a, const auto& out, void* st) { lina::gpu_reference::chunk_gdn_forward(a, out, st); },
                  [](const auto& a, const auto& out) { lina::reference::chunk_gdn_forward(a, out); });
  return {o, ht};
}

std::tuple<Tensor, Tensor> chunk_kda_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                               const Tensor& beta, std::optional<double> scale, const OptTensor& h0,
                                               bool output_final_state, bool l2norm, bool gate, bool beta_sigmoid,
                                               bool neg_eigval, bool safe_gate, std::optional<double> lower_bound,
                                               const OptTensor& A_log, const OptTensor& dt_bias, const OptTensor& cu,
                                               const OptTensor& cu_cpu) {
  const DeltaInputs in = dense_delta(q, k, v, g, beta, scale, h0, {l2norm, gate, beta_sigmoid, neg_eigval}, A_log,
                                     dt_bias, cu, cu_cpu);
  return delta_reference<true>(in, {safe_gate, lower_bound}, output_final_state);
}

std::tuple<Tensor, Tensor> chunk_gdn_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                               const Tensor& beta, std::optional<double> scale, const OptTensor& h0,
                                               bool output_final_state, bool l2norm, bool gate, bool beta_sigmoid,
                                               bool neg_eigval, const OptTensor& A_log, const OptTensor& dt_bias,
                                               const OptTensor& cu, const OptTensor& cu_cpu) {
  const DeltaInputs in = dense_delta(q, k, v, g, beta, scale, h0, {l2norm, gate, beta_sigmoid, neg_eigval}, A_log,
                                     dt_bias, cu, cu_cpu);
  return delta_reference<false>(in, {}, output_final_state);
}

// ---- autograd ------------------------------------------------------------------------------------------
// Each forward's Autograd kernel: the forward runs below autograd through the dispatcher (so fake tensors
// reach the fake kernel), the inputs are saved, and the backward calls the *_bwd operator the same way.
// Non-tensor arguments and inputs without a gradient get an undefined tensor.

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
Tensor opt_or_undefined(const OptTensor& t) { return t.has_value() ? *t : Tensor(); }
OptTensor undefined_to_opt(const Tensor& t) { return t.defined() ? OptTensor(t) : std::nullopt; }
// The final state's gradient only where it was asked for (else its materialised zeros mean nothing).
OptTensor final_state_grad(AutogradContext* ctx, const Tensor& dht) {
  return ctx->saved_data["output_final_state"].toBool() && dht.defined() ? OptTensor(dht) : std::nullopt;
}
Tensor grad_if(bool present, const Tensor& g) { return present ? g : Tensor(); }

using GlaFwdSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                            std::optional<double>, const OptTensor&, bool, const OptTensor&,
                                            const OptTensor&, bool, Str);
using GlaBwdSig = GlaGrads(const Tensor&, const Tensor&, const Tensor&, const Tensor&, std::optional<double>,
                           const OptTensor&, const OptTensor&, const OptTensor&, const Tensor&, const OptTensor&, Str);

struct GlaFunction : torch::autograd::Function<GlaFunction> {
  static variable_list forward(AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& g, std::optional<double> scale, const OptTensor& h0,
                               bool output_final_state, const OptTensor& cu, const OptTensor& cu_cpu, bool training,
                               Str variant) {
    static const auto fwd = op_handle<GlaFwdSig>("lina::chunk_gla_fwd");
    const at::AutoDispatchBelowADInplaceOrView below;
    auto [o, ht] = fwd.call(q, k, v, g, scale, h0, output_final_state, cu, cu_cpu, training, variant);
    ctx->save_for_backward({q, k, v, g, opt_or_undefined(h0), opt_or_undefined(cu), opt_or_undefined(cu_cpu)});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["output_final_state"] = output_final_state;
    ctx->saved_data["variant"] = std::string(variant);
    return {o, ht};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto bwd = op_handle<GlaBwdSig>("lina::chunk_gla_bwd");
    const auto s = ctx->get_saved_variables();
    const OptTensor h0 = undefined_to_opt(s[4]);
    const std::string variant = ctx->saved_data["variant"].toStringRef();
    auto [dq, dk, dv, dg, dh0] =
        bwd.call(s[0], s[1], s[2], s[3], ctx->saved_data["scale"].toOptional<double>(), h0, undefined_to_opt(s[5]),
                 undefined_to_opt(s[6]), grads[0], final_state_grad(ctx, grads[1]), variant);
    return {dq, dk, dv, dg, Tensor(), grad_if(h0.has_value(), dh0), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

std::tuple<Tensor, Tensor> chunk_gla_fwd_autograd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                                  std::optional<double> scale, const OptTensor& h0,
                                                  bool output_final_state, const OptTensor& cu, const OptTensor& cu_cpu,
                                                  bool training, Str variant) {
  auto out = GlaFunction::apply(q, k, v, g, scale, h0, output_final_state, cu, cu_cpu, training, variant);
  return {out[0], out[1]};
}

// The delta rules: KDA's schema is GDN's with safe_gate and lower_bound after the four shared flags.
using KdaFwdSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                            std::optional<double>, const OptTensor&, bool, bool, bool, bool, bool,
                                            bool, std::optional<double>, const OptTensor&, const OptTensor&,
                                            const OptTensor&, const OptTensor&, bool, Str);
using KdaBwdSig = DeltaGrads(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                             std::optional<double>, const OptTensor&, bool, bool, bool, bool, bool,
                             std::optional<double>, const OptTensor&, const OptTensor&, const OptTensor&,
                             const OptTensor&, const Tensor&, const OptTensor&, bool, bool, Str);
using GdnFwdSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                            std::optional<double>, const OptTensor&, bool, bool, bool, bool, bool,
                                            const OptTensor&, const OptTensor&, const OptTensor&, const OptTensor&,
                                            bool, Str);
using GdnBwdSig = DeltaGrads(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                             std::optional<double>, const OptTensor&, bool, bool, bool, bool, const OptTensor&,
                             const OptTensor&, const OptTensor&, const OptTensor&, const Tensor&, const OptTensor&, bool,
                             bool, Str);

// Saved: q k v g beta h0 A_log dt_bias cu cu_cpu; flags and options in saved_data.
template <bool Kda>
struct DeltaFunction : torch::autograd::Function<DeltaFunction<Kda>> {
  static variable_list forward(AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                               const Tensor& g, const Tensor& beta, std::optional<double> scale, const OptTensor& h0,
                               bool output_final_state, bool l2norm, bool gate, bool beta_sigmoid, bool neg_eigval,
                               bool safe_gate, std::optional<double> lower_bound, const OptTensor& A_log,
                               const OptTensor& dt_bias, const OptTensor& cu, const OptTensor& cu_cpu, bool training,
                               Str variant) {
    const at::AutoDispatchBelowADInplaceOrView below;
    std::tuple<Tensor, Tensor> out;
    if constexpr (Kda) {
      static const auto fwd = op_handle<KdaFwdSig>("lina::chunk_kda_fwd");
      out = fwd.call(q, k, v, g, beta, scale, h0, output_final_state, l2norm, gate, beta_sigmoid, neg_eigval,
                     safe_gate, lower_bound, A_log, dt_bias, cu, cu_cpu, training, variant);
    } else {
      static const auto fwd = op_handle<GdnFwdSig>("lina::chunk_gdn_fwd");
      out = fwd.call(q, k, v, g, beta, scale, h0, output_final_state, l2norm, gate, beta_sigmoid, neg_eigval, A_log,
                     dt_bias, cu, cu_cpu, training, variant);
    }
    ctx->save_for_backward({q, k, v, g, beta, opt_or_undefined(h0), opt_or_undefined(A_log),
                            opt_or_undefined(dt_bias), opt_or_undefined(cu), opt_or_undefined(cu_cpu)});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["output_final_state"] = output_final_state;
    ctx->saved_data["flags"] = c10::List<bool>({l2norm, gate, beta_sigmoid, neg_eigval, safe_gate});
    ctx->saved_data["lower_bound"] = lower_bound;
    ctx->saved_data["variant"] = std::string(variant);
    // dA_log / ddt_bias only where the in-kernel gate uses them and a gradient is wanted
    ctx->saved_data["need_dA_log"] = gate && A_log.has_value() && A_log->requires_grad();
    ctx->saved_data["need_ddt_bias"] = gate && dt_bias.has_value() && dt_bias->requires_grad();
    return {std::get<0>(out), std::get<1>(out)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const auto flags = ctx->saved_data["flags"].toBoolList();
    const bool need_dA = ctx->saved_data["need_dA_log"].toBool(), need_ddt = ctx->saved_data["need_ddt_bias"].toBool();
    const std::optional<double> scale = ctx->saved_data["scale"].toOptional<double>();
    const std::string variant = ctx->saved_data["variant"].toStringRef();
    const OptTensor h0 = undefined_to_opt(s[5]), A_log = undefined_to_opt(s[6]), dt_bias = undefined_to_opt(s[7]),
                    cu = undefined_to_opt(s[8]), cu_cpu = undefined_to_opt(s[9]);
    const OptTensor dht = final_state_grad(ctx, grads[1]);
    DeltaGrads d;
    if constexpr (Kda) {
      static const auto bwd = op_handle<KdaBwdSig>("lina::chunk_kda_bwd");
      d = bwd.call(s[0], s[1], s[2], s[3], s[4], scale, h0, flags[0], flags[1], flags[2], flags[3], flags[4],
                   ctx->saved_data["lower_bound"].toOptional<double>(), A_log, dt_bias, cu, cu_cpu, grads[0], dht,
                   need_dA, need_ddt, variant);
    } else {
      static const auto bwd = op_handle<GdnBwdSig>("lina::chunk_gdn_bwd");
      d = bwd.call(s[0], s[1], s[2], s[3], s[4], scale, h0, flags[0], flags[1], flags[2], flags[3], A_log, dt_bias, cu,
                   cu_cpu, grads[0], dht, need_dA, need_ddt, variant);
    }
    auto& [dq, dk, dv, dg, dbeta, dh0, dA, ddt] = d;
    // one entry per forward argument (20), in order
    return {dq,       dk,       dv,       dg,       dbeta,    Tensor(), grad_if(h0.has_value(), dh0),
            Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(),
            grad_if(need_dA, dA),         grad_if(need_ddt, ddt),       Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

std::tuple<Tensor, Tensor> chunk_kda_fwd_autograd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                                  const Tensor& beta, std::optional<double> scale, const OptTensor& h0,
                                                  bool output_final_state, bool l2norm, bool gate, bool beta_sigmoid,
                                                  bool neg_eigval, bool safe_gate, std::optional<double> lower_bound,
                                                  const OptTensor& A_log, const OptTensor& dt_bias, const OptTensor& cu,
                                                  const OptTensor& cu_cpu, bool training, Str variant) {
  auto out = DeltaFunction<true>::apply(q, k, v, g, beta, scale, h0, output_final_state, l2norm, gate, beta_sigmoid,
                                        neg_eigval, safe_gate, lower_bound, A_log, dt_bias, cu, cu_cpu, training,
                                        variant);
  return {out[0], out[1]};
}

std::tuple<Tensor, Tensor> chunk_gdn_fwd_autograd(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                                  const Tensor& beta, std::optional<double> scale, const OptTensor& h0,
                                                  bool output_final_state, bool l2norm, bool gate, bool beta_sigmoid,
                                                  bool neg_eigval, const OptTensor& A_log, const OptTensor& dt_bias,
                                                  const OptTensor& cu, const OptTensor& cu_cpu, bool training,
                                                  Str variant) {
  // GDN has no safe_gate / lower_bound: they travel as false / nullopt through the shared function
  auto out = DeltaFunction<false>::apply(q, k, v, g, beta, scale, h0, output_final_state, l2norm, gate, beta_sigmoid,
                                         neg_eigval, false, std::nullopt, A_log, dt_bias, cu, cu_cpu, training,
                                         variant);
  return {out[0], out[1]};
}

std::string version() { return lina::kVersion; }
// The torch this extension was compiled against: python/lina/_library.py refuses another minor version.
std::string torch_version() { return LINA_TORCH_BUILT_WITH; }

#ifdef LINA_TORCH_CUDA
// lina's scratch from PyTorch's caching allocator: it shows in torch.cuda.max_memory_allocated, is shared
// with the model's own cache, and lives in the graph's private pool under CUDA-graph capture.
void* torch_allocate(std::size_t bytes, void* stream, void*) {
  try {
    return c10::cuda::CUDACachingAllocator::raw_alloc_with_stream(bytes, static_cast<cudaStream_t>(stream));
  } catch (const c10::Error&) {
    return nullptr;  // lina reports the failure, naming the buffer
  }
}
void torch_release(void* ptr, void*, void*) { c10::cuda::CUDACachingAllocator::raw_delete(ptr); }

const bool kScratchFromTorch = [] {
  lina::set_workspace_allocator({torch_allocate, torch_release, nullptr});
  return true;
}();
#endif

}  // namespace

// Schemas. Absent optional outputs are empty tensors (shape [0]); `training` = a forward whose
// results feed a backward; `variant` = a kernel variant by name ("" = lina's choice).
TORCH_LIBRARY(lina, m) {
  m.def("version() -> str", version);
  m.def("torch_version() -> str", torch_version);
  m.def(
      "chunk_gla_fwd(Tensor q, Tensor k, Tensor v, Tensor g, float? scale, Tensor? initial_state, "
      "bool output_final_state, Tensor? cu_seqlens, Tensor? cu_seqlens_cpu, bool training, str variant) "
      "-> (Tensor o, Tensor final_state)");
  m.def(
      "chunk_gla_bwd(Tensor q, Tensor k, Tensor v, Tensor g, float? scale, Tensor? initial_state, "
      "Tensor? cu_seqlens, Tensor? cu_seqlens_cpu, Tensor do, Tensor? dht, str variant) "
      "-> (Tensor dq, Tensor dk, Tensor dv, Tensor dg, Tensor dh0)");
  m.def(
      "chunk_kda_fwd(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, float? scale, Tensor? initial_state, "
      "bool output_final_state, bool use_qk_l2norm_in_kernel, bool use_gate_in_kernel, "
      "bool use_beta_sigmoid_in_kernel, bool allow_neg_eigval, bool safe_gate, float? lower_bound, Tensor? A_log, "
      "Tensor? dt_bias, Tensor? cu_seqlens, Tensor? cu_seqlens_cpu, bool training, str variant) "
      "-> (Tensor o, Tensor final_state)");
  m.def(
      "chunk_kda_bwd(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, float? scale, Tensor? initial_state, "
      "bool use_qk_l2norm_in_kernel, bool use_gate_in_kernel, bool use_beta_sigmoid_in_kernel, "
      "bool allow_neg_eigval, bool safe_gate, float? lower_bound, Tensor? A_log, Tensor? dt_bias, "
      "Tensor? cu_seqlens, Tensor? cu_seqlens_cpu, Tensor do, Tensor? dht, bool need_dA_log, bool need_ddt_bias, "
      "str variant) -> (Tensor dq, Tensor dk, Tensor dv, Tensor dg, Tensor dbeta, Tensor dh0, Tensor dA_log, "
      "Tensor ddt_bias)");
  m.def(
      "chunk_gdn_fwd(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, float? scale, Tensor? initial_state, "
      "bool output_final_state, bool use_qk_l2norm_in_kernel, bool use_gate_in_kernel, "
      "bool use_beta_sigmoid_in_kernel, bool allow_neg_eigval, Tensor? A_log, Tensor? dt_bias, Tensor? cu_seqlens, "
      "Tensor? cu_seqlens_cpu, bool training, str variant) -> (Tensor o, Tensor final_state)");
  m.def(
      "chunk_gdn_bwd(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, float? scale, Tensor? initial_state, "
      "bool use_qk_l2norm_in_kernel, bool use_gate_in_kernel, bool use_beta_sigmoid_in_kernel, "
      "bool allow_neg_eigval, Tensor? A_log, Tensor? dt_bias, Tensor? cu_seqlens, Tensor? cu_seqlens_cpu, "
      "Tensor do, Tensor? dht, bool need_dA_log, bool need_ddt_bias, str variant) "
      "-> (Tensor dq, Tensor dk, Tensor dv, Tensor dg, Tensor dbeta, Tensor dh0, Tensor dA_log, Tensor ddt_bias)");
  // The naive recurrences (fp32 on CUDA, fp64 on the CPU): the forward's arguments without training / variant.
  m.def(
      "chunk_gla_reference(Tensor q, Tensor k, Tensor v, Tensor g, float? scale, Tensor? initial_state, "
      "bool output_final_state, Tensor? cu_seqlens, Tensor? cu_seqlens_cpu) -> (Tensor o, Tensor final_state)");
  m.def(
      "chunk_kda_reference(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, float? scale, Tensor? initial_state, "
      "bool output_final_state, bool use_qk_l2norm_in_kernel, bool use_gate_in_kernel, "
      "bool use_beta_sigmoid_in_kernel, bool allow_neg_eigval, bool safe_gate, float? lower_bound, Tensor? A_log, "
      "Tensor? dt_bias, Tensor? cu_seqlens, Tensor? cu_seqlens_cpu) -> (Tensor o, Tensor final_state)");
  m.def(
      "chunk_gdn_reference(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, float? scale, Tensor? initial_state, "
      "bool output_final_state, bool use_qk_l2norm_in_kernel, bool use_gate_in_kernel, "
      "bool use_beta_sigmoid_in_kernel, bool allow_neg_eigval, Tensor? A_log, Tensor? dt_bias, Tensor? cu_seqlens, "
      "Tensor? cu_seqlens_cpu) -> (Tensor o, Tensor final_state)");
}

// One kernel for CPU and CUDA: lina's front door picks the backend from q's device.
#define LINA_TORCH_IMPLS(m)                           \
  m.impl("chunk_gla_fwd", chunk_gla_fwd);             \
  m.impl("chunk_gla_bwd", chunk_gla_bwd);             \
  m.impl("chunk_kda_fwd", chunk_kda_fwd);             \
  m.impl("chunk_kda_bwd", chunk_kda_bwd);             \
  m.impl("chunk_gdn_fwd", chunk_gdn_fwd);             \
  m.impl("chunk_gdn_bwd", chunk_gdn_bwd);             \
  m.impl("chunk_gla_reference", chunk_gla_reference); \
  m.impl("chunk_kda_reference", chunk_kda_reference); \
  m.impl("chunk_gdn_reference", chunk_gdn_reference);

TORCH_LIBRARY_IMPL(lina, CPU, m) { LINA_TORCH_IMPLS(m) }
TORCH_LIBRARY_IMPL(lina, CUDA, m) { LINA_TORCH_IMPLS(m) }

TORCH_LIBRARY_IMPL(lina, Autograd, m) {
  m.impl("chunk_gla_fwd", chunk_gla_fwd_autograd);
  m.impl("chunk_kda_fwd", chunk_kda_fwd_autograd);
  m.impl("chunk_gdn_fwd", chunk_gdn_fwd_autograd);
  // The backwards (no double backward) and the references have no derivative: differentiating one raises,
  // naming the op.
  for (const char* op : {"chunk_gla_bwd", "chunk_kda_bwd", "chunk_gdn_bwd", "chunk_gla_reference", "chunk_kda_reference",
                         "chunk_gdn_reference"})
    m.impl(op, torch::autograd::autogradNotImplementedFallback());
}

