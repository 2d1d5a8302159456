// fused_recurrent_* front doors: one validation point per call, which resolves the call into a DecodeCall
// and hands it to a backend. Everything is refused before any write.
#include <algorithm>
#include <cstdint>
#include <string>

#include "lina/error.h"
#include "lina/fused_recurrent.h"
#include "ops/common/backends.h"
#include "ops/common/checks.h"
#include "ops/common/problem.h"
#include "ops/recurrent/decode_call.h"

namespace lina {
namespace {

using detail::OutputDTypes;
using detail::Problem;
using detail::recurrent::DecodeCall;
using detail::recurrent::DecodeOp;
using detail::recurrent::GateForm;
using detail::recurrent::StateMode;

int index_bytes(const TensorView& t) { return t.dtype == DType::i64 ? 8 : 4; }

void check_index_tensor(const Problem& p, const std::string& name, const TensorView& t) {
  detail::require_defined(name, t);
  detail::require_dtype(name, t, {DType::i32, DType::i64});
  detail::require_layout(name, t, p);
}

// The state side of the call (DecodeState, initial_state, final_state) into c.
void resolve_state(const Problem& p, const std::optional<TensorView>& initial, const DecodeState& d,
                   const AttentionOutputs& out, OutputDTypes rule, DecodeCall& c) {
  const Shape dense{p.N, p.HV, p.K, p.V};
  if (!d.state_indices) {
    if (d.num_accepted_tokens)
      throw_invalid("num_accepted_tokens", "a tensor without state_indices", "state_indices [N, L] to be given too");
    c.state_mode = StateMode::dense;
    if (initial) {  // shape and device were checked with the chunk op's arguments
      detail::require_dtype("initial_state", *initial, {DType::f32});
      c.initial_state = initial->ptr<const float>();
    }
    if (d.inplace_final_state) {
      if (!initial) throw_invalid("inplace_final_state", "true without initial_state", "an initial_state to update in place");
      if (out.final_state)
        throw_invalid("final_state", "a tensor with inplace_final_state", "none: the state is written into initial_state");
      c.final_state = initial->data;
      c.final_state_dtype = DType::f32;
      return;
    }
    if (out.final_state) {
      detail::require_defined("final_state", *out.final_state);
      detail::require_shape("final_state", *out.final_state, dense, "[N, HV, K, V]");
      detail::require_float_out("final_state", *out.final_state, DType::f32, rule);
      detail::require_layout("final_state", *out.final_state, p);
      c.final_state = out.final_state->data;
      c.final_state_dtype = out.final_state->dtype;
    }
    return;
  }

  // Continuous batching: initial_state is the pool.
  const TensorView& idx = *d.state_indices;
  check_index_tensor(p, "state_indices", idx);
  if (!initial) throw_invalid("initial_state", "none with state_indices", "the state pool [S, HV, K, V] f32");
  const TensorView& pool = *initial;
  detail::require_defined("initial_state", pool);
  if (pool.shape.rank != 4 || pool.shape[0] < 1 || pool.shape[1] != p.HV || pool.shape[2] != p.K || pool.shape[3] != p.V)
    throw_invalid("initial_state", "shape " + pool.shape.str() + " with state_indices",
                  "a state pool [S, HV, K, V] = [S >= 1, " + std::to_string(p.HV) + ", " + std::to_string(p.K) + ", " +
                      std::to_string(p.V) + "]");
  detail::require_dtype("initial_state", pool, {DType::f32});
  detail::require_layout("initial_state", pool, p);
  const std::int64_t S = pool.shape[0];
  std::int64_t longest = 0;
  for (const auto& s : p.sequences) longest = std::max(longest, s.length);
  std::int64_t per_seq = 0;
  if (idx.shape.rank == 1) {
    detail::require_shape("state_indices", idx, Shape{p.N}, "[N] (one slot per sequence)");
  } else if (idx.shape.rank == 2) {
    if (idx.shape[0] != p.N || idx.shape[1] < std::max<std::int64_t>(longest, 1))
      throw_invalid("state_indices", "shape " + idx.shape.str(),
                    "[N, L] with N = " + std::to_string(p.N) + " and L >= the longest sequence (" + std::to_string(longest) + " tokens)");
    per_seq = idx.shape[1];
  } else {
    throw_invalid("state_indices", "rank " + std::to_string(idx.shape.rank), "rank 1 [N] or rank 2 [N, L]");
  }
  if (d.num_accepted_tokens) {
    const TensorView& na = *d.num_accepted_tokens;
    if (per_seq == 0) throw_invalid("num_accepted_tokens", "a tensor with [N] state_indices", "state_indices [N, L]");
    check_index_tensor(p, "num_accepted_tokens", na);
    detail::require_shape("num_accepted_tokens", na, Shape{p.N}, "[N]");
    if (na.device == Device::cpu) {
      const auto vals = detail::read_index_tensor(na);
      for (std::size_t n = 0; n < vals.size(); ++n)
        if (vals[n] < 1 || vals[n] > per_seq)
          throw_invalid("num_accepted_tokens", "num_accepted_tokens[" + std::to_string(n) + "] = " + std::to_string(vals[n]),
                        "a value in [1, L = " + std::to_string(per_seq) + "]");
    }
    c.num_accepted_tokens = na.data;
    c.num_accepted_bytes = index_bytes(na);
  }
  // Host-visible slots are checked here; device slots are not read back (the kernel skips a slot >= S).
  if (idx.device == Device::cpu) {
    const auto vals = detail::read_index_tensor(idx);
    for (std::size_t i = 0; i < vals.size(); ++i)
      if (vals[i] >= S) {
        const std::string at = per_seq ? "[" + std::to_string(static_cast<std::int64_t>(i) / per_seq) + "][" +
                                             std::to_string(static_cast<std::int64_t>(i) % per_seq) + "]"
                                       : "[" + std::to_string(i) + "]";
        throw_invalid("state_indices", "state_indices" + at + " = " + std::to_string(vals[i]),
                      "a slot of the pool, < S = " + std::to_string(S) + " (negative = padding)");
      }
  }
  c.state_indices = idx.data;
  c.state_indices_bytes = index_bytes(idx);
  c.indices_per_seq = per_seq;
  c.pool_slots = S;
  c.initial_state = pool.ptr<const float>();
  if (d.inplace_final_state) {
    if (out.final_state)
      throw_invalid("final_state", "a tensor with inplace_final_state", "none: the states are written into the pool");
    c.state_mode = StateMode::pool;
    c.pool_out = pool.ptr<float>();
    return;
  }
  c.state_mode = StateMode::per_token;
  if (out.final_state) {
    detail::require_defined("final_state", *out.final_state);
    detail::require_shape("final_state", *out.final_state, Shape{p.B * p.T, p.HV, p.K, p.V},
                          "[B*T, HV, K, V] (the state after every token, without inplace_final_state)");
    detail::require_float_out("final_state", *out.final_state, DType::f32, rule);
    detail::require_layout("final_state", *out.final_state, p);
    c.final_state = out.final_state->data;
    c.final_state_dtype = out.final_state->dtype;
  }
}

// Everything but the state, from the chunk op's validated arguments.
DecodeCall base_call(const Problem& p, DecodeOp op, const TensorView& q, const TensorView& k, const TensorView& v,
                     const TensorView& g, const AttentionOutputs& out, OutputDTypes rule, const ExecOptions& opts) {
  detail::validate_outputs(p, AttentionOutputs{out.o, std::nullopt}, q.dtype, rule);  // the state is resolve_state's
  DecodeCall c;
  c.op = op;
  c.B = p.B; c.T = p.T; c.H = p.H; c.HV = p.HV; c.K = p.K; c.V = p.V; c.N = p.N;
  c.R = p.B * p.T;
  c.on_cuda = p.device == Device::cuda;
  c.q = q.data; c.k = k.data; c.v = v.data; c.g = g.data;
  c.qkv_dtype = q.dtype;
  c.g_dtype = g.dtype;
  c.scale = p.scale;
  c.o = out.o.data;
  c.o_dtype = out.o.dtype;
  c.num_threads = opts.num_threads;
  c.stream = opts.stream;
  return c;
}

void set_sequences(DecodeCall& c, const std::optional<TensorView>& cu) {
  if (!cu) return;
  c.cu_seqlens = cu->data;
  c.cu_seqlens_bytes = index_bytes(*cu);
}

void set_delta_options(DecodeCall& c, const DeltaRuleArgs& a) {
  c.beta = a.beta.data;
  c.beta_dtype = a.beta.dtype;
  c.l2norm = a.use_qk_l2norm_in_kernel;
  c.beta_sigmoid = a.use_beta_sigmoid_in_kernel;
  c.beta_scale = a.allow_neg_eigval ? 2.f : 1.f;
  c.A_log = a.A_log ? a.A_log->ptr<const float>() : nullptr;
  c.dt_bias = a.dt_bias ? a.dt_bias->ptr<const float>() : nullptr;
  c.gate = a.use_gate_in_kernel ? GateForm::softplus : GateForm::log_decay;
}

// The pool case validates the chunk arguments without initial_state (its leading dim is S, not N).
template <class Args>
Args without_pool(const Args& a, const DecodeState& d) {
  Args copy = a;
  if (d.state_indices) copy.initial_state.reset();
  return copy;
}

DecodeCall gla_call(const FusedRecurrentGlaArgs& a, const AttentionOutputs& out, OutputDTypes rule, const ExecOptions& opts) {
  const Problem p = detail::validate_gla(without_pool(static_cast<const ChunkGlaArgs&>(a), a.decode));
  DecodeCall c = base_call(p, DecodeOp::gla, a.q, a.k, a.v, a.g, out, rule, opts);
  set_sequences(c, a.cu_seqlens);
  c.reverse = a.reverse;
  resolve_state(p, a.initial_state, a.decode, out, rule, c);
  return c;
}

DecodeCall kda_call(const FusedRecurrentKdaArgs& a, const AttentionOutputs& out, OutputDTypes rule, const ExecOptions& opts) {
  const Problem p = detail::validate_kda(without_pool(static_cast<const ChunkKdaArgs&>(a), a.decode));
  DecodeCall c = base_call(p, DecodeOp::kda, a.q, a.k, a.v, a.g, out, rule, opts);
  set_sequences(c, a.cu_seqlens);
  set_delta_options(c, a);
  if (a.use_gate_in_kernel && a.lower_bound) {
    c.gate = GateForm::lower_bound;
    c.lower_bound = *a.lower_bound;
  }
  resolve_state(p, a.initial_state, a.decode, out, rule, c);
  return c;
}

DecodeCall gdn_call(const FusedRecurrentGdnArgs& a, const AttentionOutputs& out, OutputDTypes rule, const ExecOptions& opts) {
  const Problem p = detail::validate_gdn(without_pool(static_cast<const ChunkGdnArgs&>(a), a.decode));
  DecodeCall c = base_call(p, DecodeOp::gdn, a.q, a.k, a.v, a.g, out, rule, opts);
  set_sequences(c, a.cu_seqlens);
  set_delta_options(c, a);
  resolve_state(p, a.initial_state, a.decode, out, rule, c);
  return c;
}

RunInfo run(const DecodeCall& c, const char* site, const ExecOptions& opts) {
  if (!opts.variant.empty())
    throw_invalid("variant", "'" + opts.variant + "'", std::string("no variant name: ") + site + " has one implementation per backend");
  Problem dev;
  dev.device = c.on_cuda ? Device::cuda : Device::cpu;
  const Backend backend = detail::pick_backend(dev, opts);  // refuses cuda where this build has none
#ifdef LINA_WITH_CUDA
  if (backend == Backend::cuda) return detail::recurrent::run_cuda(c);
#else
  (void)backend;
#endif
  return detail::recurrent::run_cpu(c);
}

void require_host(const DecodeCall& c) {
  if (c.on_cuda) throw_invalid("q", "a cuda tensor", "host tensors (the fp64 reference runs on the CPU)");
}

}  // namespace

RunInfo fused_recurrent_gla_forward(const FusedRecurrentGlaArgs& args, const AttentionOutputs& out, const ExecOptions& opts) {
  return run(gla_call(args, out, OutputDTypes::exact, opts), "fused_recurrent_gla", opts);
}
RunInfo fused_recurrent_kda_forward(const FusedRecurrentKdaArgs& args, const AttentionOutputs& out, const ExecOptions& opts) {
  return run(kda_call(args, out, OutputDTypes::exact, opts), "fused_recurrent_kda", opts);
}
RunInfo fused_recurrent_gdn_forward(const FusedRecurrentGdnArgs& args, const AttentionOutputs& out, const ExecOptions& opts) {
  return run(gdn_call(args, out, OutputDTypes::exact, opts), "fused_recurrent_gdn", opts);
}

namespace reference {
void fused_recurrent_gla_forward(const FusedRecurrentGlaArgs& args, const AttentionOutputs& out) {
  const DecodeCall c = gla_call(args, out, OutputDTypes::reference, {});
  require_host(c);
  detail::recurrent::run_reference(c);
}
void fused_recurrent_kda_forward(const FusedRecurrentKdaArgs& args, const AttentionOutputs& out) {
  const DecodeCall c = kda_call(args, out, OutputDTypes::reference, {});
  require_host(c);
  detail::recurrent::run_reference(c);
}
void fused_recurrent_gdn_forward(const FusedRecurrentGdnArgs& args, const AttentionOutputs& out) {
  const DecodeCall c = gdn_call(args, out, OutputDTypes::reference, {});
  require_host(c);
  detail::recurrent::run_reference(c);
}
}  // namespace reference

}  // namespace lina
