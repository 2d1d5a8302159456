// The single front door for argument checks (docs/architecture.md section 3): everything is refused before any work.
#include <cstdint>
#include <algorithm>
#include <cmath>
#include <string>

#include "lina/error.h"
#include "ops/common/host_io.h"
#include "ops/common/checks.h"
#include "ops/common/problem.h"

namespace lina::detail {

std::string device_str(const TensorView& t) {
  return t.device == Device::cpu ? "cpu" : "cuda:" + std::to_string(t.device_index);
}

void require_defined(const std::string& name, const TensorView& t) {
  if (t.data == nullptr && t.shape.numel() != 0) throw_invalid(name, "a null data pointer", "a tensor");
  if (t.shape.rank == 0 && t.data == nullptr) throw_invalid(name, "an empty (unset) tensor", "a tensor");
}

void require_layout(const std::string& name, const TensorView& t, const Problem& p) {
  if (!t.is_contiguous()) throw_invalid(name, "strides " + t.strides.str() + " for shape " + t.shape.str(),
                                        "a contiguous (row-major) tensor");
  if (t.device != p.device || t.device_index != p.device_index)
    throw_invalid(name, "device " + device_str(t),
                  std::string("the device of q (") + (p.device == Device::cpu ? "cpu" : "cuda:" + std::to_string(p.device_index)) + ")");
}

void require_shape(const std::string& name, const TensorView& t, const Shape& expected, const std::string& meaning) {
  if (t.shape != expected) throw_invalid(name, "shape " + t.shape.str(), "shape " + expected.str() + " " + meaning);
}

void require_dtype(const std::string& name, const TensorView& t, std::initializer_list<DType> allowed) {
  std::string list;
  for (auto it = allowed.begin(); it != allowed.end(); ++it) {
    if (*it == t.dtype) return;
    if (std::find(allowed.begin(), it, *it) != it) continue;  // {q.dtype, f32} with f32 q: name it once
    list += (list.empty() ? "" : " or ") + std::string(dtype_name(*it));
  }
  throw_invalid(name, "dtype " + std::string(dtype_name(t.dtype)), "dtype " + list);
}

void require_float_out(const std::string& name, const TensorView& t, DType exact, OutputDTypes rule) {
  if (rule == OutputDTypes::exact) require_dtype(name, t, {exact});
  else require_dtype(name, t, {DType::f32, DType::f64});
}

namespace {

// Reads and checks cu_seqlens; fills p.sequences for both the dense and the varlen case.
void set_sequences(Problem& p, const std::optional<TensorView>& cu, const std::optional<TensorView>& cu_cpu) {
  p.sequences.clear();
  if (!cu) {
    if (cu_cpu) throw_invalid("cu_seqlens_cpu", "a tensor without cu_seqlens", "cu_seqlens to be given too");
    p.varlen = false;
    p.N = p.B;
    for (std::int64_t b = 0; b < p.B; ++b) p.sequences.push_back({b * p.T, p.T});
    return;
  }
  p.varlen = true;
  require_defined("cu_seqlens", *cu);
  if (cu->shape.rank != 1) throw_invalid("cu_seqlens", "rank " + std::to_string(cu->shape.rank), "rank 1 ([N+1])");
  require_dtype("cu_seqlens", *cu, {DType::i32, DType::i64});
  if (cu->shape[0] < 2) throw_invalid("cu_seqlens", "length " + std::to_string(cu->shape[0]), "length N+1 >= 2");
  require_layout("cu_seqlens", *cu, p);
  if (p.B != 1) throw_invalid("q", "batch size B = " + std::to_string(p.B) + " with cu_seqlens", "B = 1 (varlen inputs are packed)");
  std::vector<std::int64_t> values;
  if (cu_cpu) {
    if (cu_cpu->device != Device::cpu) throw_invalid("cu_seqlens_cpu", "device " + device_str(*cu_cpu), "cpu");
    require_dtype("cu_seqlens_cpu", *cu_cpu, {DType::i32, DType::i64});
    if (cu_cpu->shape != cu->shape) throw_invalid("cu_seqlens_cpu", "shape " + cu_cpu->shape.str(), "the shape of cu_seqlens " + cu->shape.str());
    values = read_index_tensor(*cu_cpu);
  } else {
    values = read_index_tensor(*cu);
  }
  if (values.front() != 0) throw_invalid("cu_seqlens", "cu_seqlens[0] = " + std::to_string(values.front()), "0");
  for (std::size_t i = 1; i < values.size(); ++i) {
    if (values[i] < values[i - 1])
      throw_invalid("cu_seqlens", "a decrease at index " + std::to_string(i) + " (" + std::to_string(values[i - 1]) + " -> " + std::to_string(values[i]) + ")",
                    "non-decreasing offsets");
  }
  if (values.back() != p.T)
    throw_invalid("cu_seqlens", "cu_seqlens[N] = " + std::to_string(values.back()), "the token count T = " + std::to_string(p.T));
  p.N = static_cast<std::int64_t>(values.size()) - 1;
  for (std::size_t i = 0; i + 1 < values.size(); ++i) p.sequences.push_back({values[i], values[i + 1] - values[i]});
}

void set_scale(Problem& p, const std::optional<double>& scale) {
  p.scale = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(p.K));
  if (!std::isfinite(p.scale)) throw_invalid("scale", std::to_string(p.scale), "a finite number");
}

// q, k, v and the device; sets B, T, H, HV, K, V.
void check_qkv(Problem& p, const TensorView& q, const TensorView& k, const TensorView& v, bool gva, std::int64_t max_head_dim) {
  require_defined("q", q);
  if (q.shape.rank != 4) throw_invalid("q", "rank " + std::to_string(q.shape.rank) + " (shape " + q.shape.str() + ")", "rank 4 [B,T,H,K]");
  p.device = q.device;
  p.device_index = q.device_index;
  require_dtype("q", q, {DType::bf16, DType::f16, DType::f32});
  require_layout("q", q, p);
  p.B = q.shape[0]; p.T = q.shape[1]; p.H = q.shape[2]; p.K = q.shape[3];
  if (p.B < 1 || p.T < 0 || p.H < 1) throw_invalid("q", "shape " + q.shape.str(), "B >= 1, T >= 0, H >= 1");
  if (p.K < 1 || p.K > max_head_dim) throw_unsupported("q", "head dim K = " + std::to_string(p.K), "1 <= K <= " + std::to_string(max_head_dim));
  require_defined("k", k);
  require_shape("k", k, q.shape, "(the shape of q)");
  require_dtype("k", k, {q.dtype});
  require_layout("k", k, p);
  require_defined("v", v);
  if (v.shape.rank != 4) throw_invalid("v", "rank " + std::to_string(v.shape.rank) + " (shape " + v.shape.str() + ")", gva ? "rank 4 [B,T,HV,V]" : "rank 4 [B,T,H,V]");
  if (v.shape[0] != p.B || v.shape[1] != p.T)
    throw_invalid("v", "shape " + v.shape.str(), "leading dims [B, T] = [" + std::to_string(p.B) + ", " + std::to_string(p.T) + "] of q");
  p.HV = v.shape[2];
  p.V = v.shape[3];
  if (!gva && p.HV != p.H) throw_invalid("v", "H = " + std::to_string(p.HV), "the head count of q, H = " + std::to_string(p.H) + " (GLA has no GVA)");
  if (gva && (p.HV < p.H || p.HV % p.H != 0))
    throw_invalid("v", "HV = " + std::to_string(p.HV) + " value heads", "a multiple of H = " + std::to_string(p.H) + " (GVA)");
  if (p.V < 1 || p.V > max_head_dim) throw_unsupported("v", "head dim V = " + std::to_string(p.V), "1 <= V <= " + std::to_string(max_head_dim));
  require_dtype("v", v, {q.dtype});
  require_layout("v", v, p);
}

void check_state(const Problem& p, const std::string& name, const std::optional<TensorView>& s, bool f32_only) {
  if (!s) return;
  require_defined(name, *s);
  require_shape(name, *s, Shape{p.N, p.HV, p.K, p.V}, "[N, HV, K, V]");
  if (f32_only) require_dtype(name, *s, {DType::f32});
  else require_dtype(name, *s, {DType::f32, DType::bf16, DType::f16});
  require_layout(name, *s, p);
}

void check_float_param(const Problem& p, const std::string& name, const TensorView& t, const Shape& shape, const std::string& meaning) {
  require_defined(name, t);
  require_shape(name, t, shape, meaning);
  require_dtype(name, t, {DType::f32});
  require_layout(name, t, p);
}

// Host-side values of the raw in-kernel gate parameters are never read here: they are data.
void check_delta_common(Problem& p, const DeltaRuleArgs& a, bool kda) {
  check_qkv(p, a.q, a.k, a.v, /*gva=*/true, 256);
  set_sequences(p, a.cu_seqlens, a.cu_seqlens_cpu);
  set_scale(p, a.scale);
  require_defined("g", a.g);
  if (kda) require_shape("g", a.g, Shape{p.B, p.T, p.HV, p.K}, "[B, T, HV, K]");
  else require_shape("g", a.g, Shape{p.B, p.T, p.HV}, "[B, T, HV]");
  require_dtype("g", a.g, {a.q.dtype, DType::f32});
  require_layout("g", a.g, p);
  require_defined("beta", a.beta);
  require_shape("beta", a.beta, Shape{p.B, p.T, p.HV}, "[B, T, HV]");
  require_dtype("beta", a.beta, {a.q.dtype, DType::f32});
  require_layout("beta", a.beta, p);
  check_state(p, "initial_state", a.initial_state, kda);
  if (a.allow_neg_eigval && !a.use_beta_sigmoid_in_kernel)
    throw_invalid("allow_neg_eigval", "true with use_beta_sigmoid_in_kernel = false", "use_beta_sigmoid_in_kernel = true");
  if (!a.use_gate_in_kernel) {
    if (a.A_log) throw_invalid("A_log", "a tensor with use_gate_in_kernel = false", "no A_log (or use_gate_in_kernel = true)");
    if (a.dt_bias) throw_invalid("dt_bias", "a tensor with use_gate_in_kernel = false", "no dt_bias (or use_gate_in_kernel = true)");
    return;
  }
  if (a.A_log) check_float_param(p, "A_log", *a.A_log, Shape{p.HV}, "[HV]");
  if (a.dt_bias) {
    if (kda) {
      const bool flat = a.dt_bias->shape == Shape{p.HV * p.K};
      if (!flat) check_float_param(p, "dt_bias", *a.dt_bias, Shape{p.HV, p.K}, "[HV*K] or [HV, K]");
      else check_float_param(p, "dt_bias", *a.dt_bias, Shape{p.HV * p.K}, "[HV*K]");
    } else {
      check_float_param(p, "dt_bias", *a.dt_bias, Shape{p.HV}, "[HV]");
    }
  }
}

}  // namespace

static void check_lower_bound(const ChunkKdaArgs& a) {
  if (a.lower_bound && !std::isfinite(*a.lower_bound))
    throw_invalid("lower_bound", std::to_string(*a.lower_bound), "a finite number");
  if (a.safe_gate) {
    if (a.use_gate_in_kernel && !a.lower_bound)
      throw_invalid("lower_bound", "none with safe_gate and use_gate_in_kernel", "a value in [-5, 0)");
    if (a.lower_bound && !(*a.lower_bound >= -5.0 && *a.lower_bound < 0.0))
      throw_invalid("lower_bound", std::to_string(*a.lower_bound) + " with safe_gate", "a value in [-5, 0)");
  }
  if (a.use_gate_in_kernel && !a.A_log && !a.lower_bound)
    throw_invalid("A_log", "none with use_gate_in_kernel and no lower_bound", "A_log [HV] (it may be omitted only when lower_bound is set)");
  if (!a.use_gate_in_kernel && a.lower_bound && !a.safe_gate)
    throw_invalid("lower_bound", "a value without use_gate_in_kernel or safe_gate", "lower_bound only with the in-kernel gate or safe_gate");
}

Problem validate_gla(const ChunkGlaArgs& a) {
  Problem p;
  p.op = OpKind::gla;
  check_qkv(p, a.q, a.k, a.v, /*gva=*/false, 1024);
  set_sequences(p, a.cu_seqlens, a.cu_seqlens_cpu);
  set_scale(p, a.scale);
  require_defined("g", a.g);
  require_shape("g", a.g, a.q.shape, "(the shape of q, [B, T, H, K])");
  require_dtype("g", a.g, {a.q.dtype, DType::f32});
  require_layout("g", a.g, p);
  check_state(p, "initial_state", a.initial_state, /*f32_only=*/true);
  return p;
}

Problem validate_kda(const ChunkKdaArgs& a) {
  Problem p;
  p.op = OpKind::kda;
  check_delta_common(p, a, /*kda=*/true);
  check_lower_bound(a);
  return p;
}

Problem validate_gdn(const ChunkGdnArgs& a) {
  Problem p;
  p.op = OpKind::gdn;
  check_delta_common(p, a, /*kda=*/false);
  if (a.use_gate_in_kernel && !a.A_log)
    throw_invalid("A_log", "none with use_gate_in_kernel", "A_log [HV] (GDN's in-kernel gate needs it)");
  return p;
}

void validate_outputs(const Problem& p, const AttentionOutputs& out, DType o_dtype, OutputDTypes rule) {
  require_defined("o", out.o);
  require_shape("o", out.o, Shape{p.B, p.T, p.HV, p.V}, "[B, T, HV, V]");
  require_float_out("o", out.o, o_dtype, rule);
  require_layout("o", out.o, p);
  if (out.final_state) {
    require_defined("final_state", *out.final_state);
    require_shape("final_state", *out.final_state, Shape{p.N, p.HV, p.K, p.V}, "[N, HV, K, V]");
    require_float_out("final_state", *out.final_state, DType::f32, rule);
    require_layout("final_state", *out.final_state, p);
  }
}

void validate_grad_inputs(const Problem& p, const AttentionGradInputs& in) {
  require_defined("do", in.d_o);
  require_shape("do", in.d_o, Shape{p.B, p.T, p.HV, p.V}, "[B, T, HV, V] (the shape of o)");
  require_dtype("do", in.d_o, {DType::bf16, DType::f16, DType::f32, DType::f64});
  require_layout("do", in.d_o, p);
  if (in.d_final_state) {
    require_defined("dht", *in.d_final_state);
    require_shape("dht", *in.d_final_state, Shape{p.N, p.HV, p.K, p.V}, "[N, HV, K, V]");
    require_dtype("dht", *in.d_final_state, {DType::f32, DType::f64});
    require_layout("dht", *in.d_final_state, p);
  }
}

namespace {
void check_grad_like(const Problem& p, const std::string& name, const TensorView& grad, const TensorView& input, OutputDTypes rule) {
  require_defined(name, grad);
  require_shape(name, grad, input.shape, "(the shape of its input)");
  require_float_out(name, grad, input.dtype, rule);
  require_layout(name, grad, p);
}

void check_dh0(const Problem& p, const std::optional<TensorView>& dh0, OutputDTypes rule) {
  if (!dh0) return;
  require_defined("d_initial_state", *dh0);
  require_shape("d_initial_state", *dh0, Shape{p.N, p.HV, p.K, p.V}, "[N, HV, K, V]");
  require_float_out("d_initial_state", *dh0, DType::f32, rule);
  require_layout("d_initial_state", *dh0, p);
}
}  // namespace

void validate_gla_grads(const Problem& p, const ChunkGlaArgs& a, const ChunkGlaGrads& g, OutputDTypes rule) {
  check_grad_like(p, "dq", g.dq, a.q, rule);
  check_grad_like(p, "dk", g.dk, a.k, rule);
  check_grad_like(p, "dv", g.dv, a.v, rule);
  check_grad_like(p, "dg", g.dg, a.g, rule);
  check_dh0(p, g.d_initial_state, rule);
}

void validate_delta_grads(const Problem& p, const DeltaRuleArgs& a, const DeltaRuleGrads& g, OutputDTypes rule) {
  check_grad_like(p, "dq", g.dq, a.q, rule);
  check_grad_like(p, "dk", g.dk, a.k, rule);
  check_grad_like(p, "dv", g.dv, a.v, rule);
  check_grad_like(p, "dg", g.dg, a.g, rule);
  check_grad_like(p, "dbeta", g.dbeta, a.beta, rule);
  check_dh0(p, g.d_initial_state, rule);
  if (g.d_A_log && !(a.use_gate_in_kernel && a.A_log))
    throw_invalid("d_A_log", "a tensor", "none: A_log is not an input of this call");
  if (g.d_A_log) check_grad_like(p, "d_A_log", *g.d_A_log, *a.A_log, rule);
  if (g.d_dt_bias && !(a.use_gate_in_kernel && a.dt_bias))
    throw_invalid("d_dt_bias", "a tensor", "none: dt_bias is not an input of this call");
  if (g.d_dt_bias) check_grad_like(p, "d_dt_bias", *g.d_dt_bias, *a.dt_bias, rule);
}

void require_host(const Problem& p) {
  if (p.device != Device::cpu) throw_invalid("q", "a cuda tensor", "host tensors (the fp64 reference runs on the CPU)");
}

bool cuda_head_dim_supported(std::int64_t d) { return d == 64 || d == 128 || d == 256; }

void require_aligned16(std::initializer_list<NamedTensor> tensors, const std::string& kernel) {
  for (const auto& [name, t] : tensors)
    if (t && reinterpret_cast<std::uintptr_t>(t->data) % 16 != 0)
      throw_unsupported(name, "a data pointer not aligned to 16 bytes", "16-byte aligned tensors" + kernel);
}

}  // namespace lina::detail
