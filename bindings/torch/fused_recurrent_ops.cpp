// The decode ops as PyTorch operators: torch.ops.lina.fused_recurrent_{gla,kda,gdn}, one kernel for CPU and
// CUDA tensors through lina's front door (include/lina/fused_recurrent.h), forward only.
//
// Where the state goes (the schema says what may be written: initial_state(a!), out(b!)):
//   inplace_final_state = false: the state is read; with output_final_state a fresh final state is returned,
//     [N,HV,K,V] (dense) or [B*T,HV,K,V] (state_indices given: the state after every token, as FLA does).
//   inplace_final_state = true: initial_state is written: the pool's slots named by state_indices, or, without
//     state_indices, the dense state itself (FLA's fused_recurrent_kda_fwd default). It must be contiguous
//     (it is written where it is, never a copy). The returned final_state is then empty (shape [0]): a custom
//     op's outputs may not alias its inputs, so the Python wrapper returns initial_state itself.
//   out given: o is written there (contiguous, [B,T,HV,V], q's dtype) and the returned o is empty.
// Decode has no backward: the Autograd kernel refuses inputs that require grad under grad mode (RuntimeError
// naming the op and the input) and otherwise runs the op below autograd, bumping the version of what it wrote.
#include <torch/csrc/autograd/variable.h>
#include <torch/library.h>

#include <initializer_list>
#include <string>
#include <tuple>
#include <utility>

#include "bindings/torch/torch_views.h"

namespace {

using namespace lina_torch;

// The decode call's memory: what is read and written, and what the op returns.
struct DecodeIo {
  OptTensor h0;           // the state read (the pool with state_indices); written with inplace_final_state
  OptTensor indices, accepted;
  bool pooled = false, inplace = false;
  Tensor o;               // where o is written: `out`, or a fresh tensor
  OptTensor final_state;  // where the final state is written: fresh, initial_state itself (dense, in place), none
  Tensor o_ret, ht_ret;   // returned: fresh tensors, or empty ones where the caller's memory was written

  lina::DecodeState state() const {
    lina::DecodeState s;
    s.state_indices = view_of(indices, "state_indices");
    s.num_accepted_tokens = view_of(accepted, "num_accepted_tokens");
    s.inplace_final_state = inplace && pooled;  // dense in place: final_state is initial_state's memory
    return s;
  }
  lina::AttentionOutputs outputs() const {
    return {view_of(o, "o"), view_of(final_state, "final_state")};
  }
  std::tuple<Tensor, Tensor> results() const { return {o_ret, ht_ret}; }
};

void need_contiguous(const Tensor& t, const char* name, const char* why) {
  if (!t.is_contiguous())
    lina::throw_invalid(name, "a non-contiguous tensor (strides " + c10::str(t.strides()) + ")",
                        std::string("a contiguous tensor: ") + why);
}

DecodeIo decode_io(const Tensor& q, const Tensor& v, const OptTensor& initial_state, const OptTensor& state_indices,
                   const OptTensor& num_accepted_tokens, bool inplace_final_state, bool output_final_state,
                   const OptTensor& cu_seqlens, const OptTensor& out) {
  DecodeIo io;
  translate_errors([&] {
    need_rank4(q, "q");
    need_rank4(v, "v");
    if (inplace_final_state) {
      if (!initial_state.has_value() || !initial_state->defined())
        lina::throw_invalid("initial_state", "absent with inplace_final_state=True",
                            "the state (or state pool) to update in place");
      need_contiguous(*initial_state, "initial_state", "inplace_final_state=True writes it where it is");
    }
    if (out.has_value() && out->defined()) need_contiguous(*out, "out", "o is written where it is");
  });
  io.pooled = state_indices.has_value() && state_indices->defined();
  io.inplace = inplace_final_state;
  io.h0 = dense(initial_state);  // the tensor itself when contiguous (always so in place)
  io.indices = dense(state_indices);
  io.accepted = dense(num_accepted_tokens);
  const bool has_out = out.has_value() && out->defined();
  io.o = has_out ? *out : at::empty(v.sizes(), q.options());  // o: q's dtype, [B, T, HV, V]
  io.o_ret = has_out ? at::empty({0}, q.options()) : io.o;
  io.ht_ret = none_like(q);
  if (inplace_final_state) {
    if (!io.pooled) io.final_state = io.h0;
  } else if (output_final_state) {
    const std::int64_t rows = io.pooled ? q.size(0) * q.size(1) : num_seqs(q, cu_seqlens);
    io.ht_ret = at::empty({rows, v.size(2), q.size(3), v.size(3)}, q.options().dtype(at::kFloat));
    io.final_state = io.ht_ret;
  }
  return io;
}

// ---- the kernels (CPU and CUDA) -----------------------------------------------------------------------

std::tuple<Tensor, Tensor> fused_recurrent_gla(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& g_,
                                               std::optional<double> scale, const OptTensor& initial_state,
                                               const OptTensor& state_indices, const OptTensor& num_accepted_tokens,
                                               bool inplace_final_state, bool output_final_state, bool reverse,
                                               const OptTensor& cu_, const OptTensor& cu_cpu_, const OptTensor& out,
                                               Str variant) {
  const Tensor q = dense(q_), k = dense(k_), v = dense(v_), g = dense(g_);
  const OptTensor cu = dense(cu_), cu_cpu = dense(cu_cpu_);
  const DecodeIo io = decode_io(q, v, initial_state, state_indices, num_accepted_tokens, inplace_final_state,
                                output_final_state, cu, out);
  run_on(q, variant, [&](const lina::ExecOptions& opts) {
    lina::FusedRecurrentGlaArgs a;
    static_cast<lina::ChunkGlaArgs&>(a) = gla_args(q, k, v, g, scale, io.h0, cu, cu_cpu);
    a.decode = io.state();
    a.reverse = reverse;
    lina::fused_recurrent_gla_forward(a, io.outputs(), opts);
  });
  return io.results();
}

// KDA and GDN: the same arguments but KDA's lower_bound (GDN passes none).
template <bool Kda>
std::tuple<Tensor, Tensor> fused_recurrent_delta(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                                 const Tensor& beta, std::optional<double> scale,
                                                 const OptTensor& initial_state, const OptTensor& state_indices,
                                                 const OptTensor& num_accepted_tokens, bool inplace_final_state,
                                                 bool output_final_state, const DeltaFlags& flags,
                                                 std::optional<double> lower_bound, const OptTensor& A_log,
                                                 const OptTensor& dt_bias, const OptTensor& cu,
                                                 const OptTensor& cu_cpu, const OptTensor& out, Str variant) {
  const DecodeIo io = decode_io(q, v, initial_state, state_indices, num_accepted_tokens, inplace_final_state,
                                output_final_state, cu, out);
  const DeltaInputs in = dense_delta(q, k, v, g, beta, scale, io.h0, flags, A_log, dt_bias, cu, cu_cpu);
  run_on(in.q, variant, [&](const lina::ExecOptions& opts) {
    if constexpr (Kda) {
      lina::FusedRecurrentKdaArgs a;
      static_cast<lina::ChunkKdaArgs&>(a) = delta_args<lina::ChunkKdaArgs>(in, {false, lower_bound});
      a.decode = io.state();
      lina::fused_recurrent_kda_forward(a, io.outputs(), opts);
    } else {
      lina::FusedRecurrentGdnArgs a;
      static_cast<lina::ChunkGdnArgs&>(a) = delta_args<lina::ChunkGdnArgs>(in, {});
      a.decode = io.state();
      lina::fused_recurrent_gdn_forward(a, io.outputs(), opts);
    }
  });
  return io.results();
}

std::tuple<Tensor, Tensor> fused_recurrent_kda(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                               const Tensor& beta, std::optional<double> scale,
                                               const OptTensor& initial_state, const OptTensor& state_indices,
                                               const OptTensor& num_accepted_tokens, bool inplace_final_state,
                                               bool output_final_state, bool l2norm, bool gate, bool beta_sigmoid,
                                               bool neg_eigval, std::optional<double> lower_bound,
                                               const OptTensor& A_log, const OptTensor& dt_bias, const OptTensor& cu,
                                               const OptTensor& cu_cpu, const OptTensor& out, Str variant) {
  return fused_recurrent_delta<true>(q, k, v, g, beta, scale, initial_state, state_indices, num_accepted_tokens,
                                     inplace_final_state, output_final_state, {l2norm, gate, beta_sigmoid, neg_eigval},
                                     lower_bound, A_log, dt_bias, cu, cu_cpu, out, variant);
}

std::tuple<Tensor, Tensor> fused_recurrent_gdn(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                               const Tensor& beta, std::optional<double> scale,
                                               const OptTensor& initial_state, const OptTensor& state_indices,
                                               const OptTensor& num_accepted_tokens, bool inplace_final_state,
                                               bool output_final_state, bool l2norm, bool gate, bool beta_sigmoid,
                                               bool neg_eigval, const OptTensor& A_log, const OptTensor& dt_bias,
                                               const OptTensor& cu, const OptTensor& cu_cpu, const OptTensor& out,
                                               Str variant) {
  return fused_recurrent_delta<false>(q, k, v, g, beta, scale, initial_state, state_indices, num_accepted_tokens,
                                      inplace_final_state, output_final_state, {l2norm, gate, beta_sigmoid, neg_eigval},
                                      std::nullopt, A_log, dt_bias, cu, cu_cpu, out, variant);
}

// ---- autograd: forward only -----------------------------------------------------------------------------

void refuse_grad(const char* op, std::initializer_list<std::pair<const char*, const OptTensor*>> inputs) {
  if (!at::GradMode::is_enabled()) return;
  for (const auto& [name, t] : inputs)
    if (t->has_value() && (*t)->defined() && (*t)->requires_grad())
      C10_THROW_ERROR(Error, std::string("lina::") + op + ": argument `" + name +
                                 "` requires grad under grad mode, but decode has no backward; call it under "
                                 "torch.no_grad() or torch.inference_mode(), or pass detached inputs");
}

// What the op wrote gets a new version (autograd's check that saved tensors were not modified sees it).
void bump_written(const OptTensor& initial_state, bool inplace_final_state, const OptTensor& out) {
  if (inplace_final_state && initial_state.has_value() && initial_state->defined())
    torch::autograd::impl::bump_version(*initial_state);
  if (out.has_value() && out->defined()) torch::autograd::impl::bump_version(*out);
}

using GlaSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                         std::optional<double>, const OptTensor&, const OptTensor&, const OptTensor&,
                                         bool, bool, bool, const OptTensor&, const OptTensor&, const OptTensor&, Str);
using KdaSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                         std::optional<double>, const OptTensor&, const OptTensor&, const OptTensor&,
                                         bool, bool, bool, bool, bool, bool, std::optional<double>, const OptTensor&,
                                         const OptTensor&, const OptTensor&, const OptTensor&, const OptTensor&, Str);
using GdnSig = std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                         std::optional<double>, const OptTensor&, const OptTensor&, const OptTensor&,
                                         bool, bool, bool, bool, bool, bool, const OptTensor&, const OptTensor&,
                                         const OptTensor&, const OptTensor&, const OptTensor&, Str);

std::tuple<Tensor, Tensor> fused_recurrent_gla_autograd(const Tensor& q, const Tensor& k, const Tensor& v,
                                                        const Tensor& g, std::optional<double> scale,
                                                        const OptTensor& h0, const OptTensor& indices,
                                                        const OptTensor& accepted, bool inplace, bool output_final_state,
                                                        bool reverse, const OptTensor& cu, const OptTensor& cu_cpu,
                                                        const OptTensor& out, Str variant) {
  const OptTensor tq = q, tk = k, tv = v, tg = g;
  refuse_grad("fused_recurrent_gla", {{"q", &tq}, {"k", &tk}, {"v", &tv}, {"g", &tg}, {"initial_state", &h0}});
  static const auto op = op_handle<GlaSig>("lina::fused_recurrent_gla");
  std::tuple<Tensor, Tensor> r;
  {
    const at::AutoDispatchBelowADInplaceOrView below;
    r = op.call(q, k, v, g, scale, h0, indices, accepted, inplace, output_final_state, reverse, cu, cu_cpu, out,
                variant);
  }
  bump_written(h0, inplace, out);
  return r;
}

std::tuple<Tensor, Tensor> fused_recurrent_kda_autograd(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
    std::optional<double> scale, const OptTensor& h0, const OptTensor& indices, const OptTensor& accepted, bool inplace,
    bool output_final_state, bool l2norm, bool gate, bool beta_sigmoid, bool neg_eigval,
    std::optional<double> lower_bound, const OptTensor& A_log, const OptTensor& dt_bias, const OptTensor& cu,
    const OptTensor& cu_cpu, const OptTensor& out, Str variant) {
  const OptTensor tq = q, tk = k, tv = v, tg = g, tb = beta;
  refuse_grad("fused_recurrent_kda", {{"q", &tq}, {"k", &tk}, {"v", &tv}, {"g", &tg}, {"beta", &tb},
                                      {"initial_state", &h0}, {"A_log", &A_log}, {"dt_bias", &dt_bias}});
  static const auto op = op_handle<KdaSig>("lina::fused_recurrent_kda");
  std::tuple<Tensor, Tensor> r;
  {
    const at::AutoDispatchBelowADInplaceOrView below;
    r = op.call(q, k, v, g, beta, scale, h0, indices, accepted, inplace, output_final_state, l2norm, gate,
                beta_sigmoid, neg_eigval, lower_bound, A_log, dt_bias, cu, cu_cpu, out, variant);
  }
  bump_written(h0, inplace, out);
  return r;
}

std::tuple<Tensor, Tensor> fused_recurrent_gdn_autograd(
    const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
    std::optional<double> scale, const OptTensor& h0, const OptTensor& indices, const OptTensor& accepted, bool inplace,
    bool output_final_state, bool l2norm, bool gate, bool beta_sigmoid, bool neg_eigval, const OptTensor& A_log,
    const OptTensor& dt_bias, const OptTensor& cu, const OptTensor& cu_cpu, const OptTensor& out, Str variant) {
  const OptTensor tq = q, tk = k, tv = v, tg = g, tb = beta;
  refuse_grad("fused_recurrent_gdn", {{"q", &tq}, {"k", &tk}, {"v", &tv}, {"g", &tg}, {"beta", &tb},
                                      {"initial_state", &h0}, {"A_log", &A_log}, {"dt_bias", &dt_bias}});
  static const auto op = op_handle<GdnSig>("lina::fused_recurrent_gdn");
  std::tuple<Tensor, Tensor> r;
  {
    const at::AutoDispatchBelowADInplaceOrView below;
    r = op.call(q, k, v, g, beta, scale, h0, indices, accepted, inplace, output_final_state, l2norm, gate,
                beta_sigmoid, neg_eigval, A_log, dt_bias, cu, cu_cpu, out, variant);
  }
  bump_written(h0, inplace, out);
  return r;
}

}  // namespace

// Schemas: the chunk forward's arguments plus the state's place (state_indices, num_accepted_tokens,
// inplace_final_state) and `out`; `variant` = a kernel variant by name ("" = lina's choice).
TORCH_LIBRARY_FRAGMENT(lina, m) {
  m.def(
      "fused_recurrent_gla(Tensor q, Tensor k, Tensor v, Tensor g, float? scale, Tensor(a!)? initial_state, "
      "Tensor? state_indices, Tensor? num_accepted_tokens, bool inplace_final_state, bool output_final_state, "
      "bool reverse, Tensor? cu_seqlens, Tensor? cu_seqlens_cpu, Tensor(b!)? out, str variant) "
      "-> (Tensor o, Tensor final_state)");
  m.def(
      "fused_recurrent_kda(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, float? scale, "
      "Tensor(a!)? initial_state, Tensor? state_indices, Tensor? num_accepted_tokens, bool inplace_final_state, "
      "bool output_final_state, bool use_qk_l2norm_in_kernel, bool use_gate_in_kernel, "
      "bool use_beta_sigmoid_in_kernel, bool allow_neg_eigval, float? lower_bound, Tensor? A_log, Tensor? dt_bias, "
      "Tensor? cu_seqlens, Tensor? cu_seqlens_cpu, Tensor(b!)? out, str variant) -> (Tensor o, Tensor final_state)");
  m.def(
      "fused_recurrent_gdn(Tensor q, Tensor k, Tensor v, Tensor g, Tensor beta, float? scale, "
      "Tensor(a!)? initial_state, Tensor? state_indices, Tensor? num_accepted_tokens, bool inplace_final_state, "
      "bool output_final_state, bool use_qk_l2norm_in_kernel, bool use_gate_in_kernel, "
      "bool use_beta_sigmoid_in_kernel, bool allow_neg_eigval, Tensor? A_log, Tensor? dt_bias, Tensor? cu_seqlens, "
      "Tensor? cu_seqlens_cpu, Tensor(b!)? out, str variant) -> (Tensor o, Tensor final_state)");
}

#define LINA_TORCH_DECODE_IMPLS(m)                    \
  m.impl("fused_recurrent_gla", fused_recurrent_gla); \
  m.impl("fused_recurrent_kda", fused_recurrent_kda); \
  m.impl("fused_recurrent_gdn", fused_recurrent_gdn);

TORCH_LIBRARY_IMPL(lina, CPU, m) { LINA_TORCH_DECODE_IMPLS(m) }
TORCH_LIBRARY_IMPL(lina, CUDA, m) { LINA_TORCH_DECODE_IMPLS(m) }

TORCH_LIBRARY_IMPL(lina, Autograd, m) {
  m.impl("fused_recurrent_gla", fused_recurrent_gla_autograd);
  m.impl("fused_recurrent_kda", fused_recurrent_kda_autograd);
  m.impl("fused_recurrent_gdn", fused_recurrent_gdn_autograd);
}
