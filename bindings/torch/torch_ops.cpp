// lina's ops as PyTorch operators in the namespace `lina` (torch.ops.lina.*): one schema per op and
// phase and one kernel for CPU and CUDA tensors (lina's front door picks the backend from q's device and
// validates everything). The fake kernels (output shapes for torch.compile), autograd and FLA's keyword
// interface are in python/lina/ (fake kernels in Python see symbolic shapes as they are).
//
// The binding is typed: tensors arrive as at::Tensor and become lina::TensorView directly (no names,
// no JSON), so a call costs the dispatcher plus lina's own host path.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <tuple>

#include "lina/lina.h"

#ifdef LINA_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace {

using at::Tensor;
using OptTensor = std::optional<Tensor>;

lina::DType dtype_of(const Tensor& t, const char* name) {
  switch (t.scalar_type()) {
    case at::kDouble: return lina::DType::f64;
    case at::kFloat: return lina::DType::f32;
    case at::kBFloat16: return lina::DType::bf16;
    case at::kHalf: return lina::DType::f16;
    case at::kInt: return lina::DType::i32;
    case at::kLong: return lina::DType::i64;
    default:
      lina::throw_invalid(name, std::string("dtype ") + c10::toString(t.scalar_type()),
                          "float64, float32, bfloat16, float16, int32 or int64");
  }
}

// The view of a contiguous tensor (the caller made it contiguous: FLA does the same for its inputs).
lina::TensorView view_of(const Tensor& t, const char* name) {
  if (t.dim() > lina::kMaxRank)
    lina::throw_invalid(name, "rank " + std::to_string(t.dim()), "at most " + std::to_string(lina::kMaxRank));
  lina::Shape shape;
  shape.rank = static_cast<int>(t.dim());
  for (int i = 0; i < shape.rank; ++i) shape.dims[static_cast<std::size_t>(i)] = t.size(i);
  lina::Device device = lina::Device::cpu;
  if (t.is_cuda()) device = lina::Device::cuda;
  else if (!t.is_cpu()) lina::throw_invalid(name, "device " + t.device().str(), "a CPU or CUDA tensor");
  return lina::TensorView::contiguous(t.data_ptr(), dtype_of(t, name), shape, device,
                                      t.is_cuda() ? t.get_device() : 0);
}

std::optional<lina::TensorView> view_of(const OptTensor& t, const char* name) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return view_of(*t, name);
}

Tensor dense(const Tensor& t) { return t.contiguous(); }
OptTensor dense(const OptTensor& t) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return t->contiguous();
}

// An absent optional output crosses the schema as an empty tensor.
Tensor none_like(const Tensor& like) { return at::empty({0}, like.options().dtype(at::kFloat)); }
bool present(const Tensor& t) { return t.numel() > 0 || t.dim() > 1; }

std::int64_t num_seqs(const Tensor& q, const OptTensor& cu_seqlens) {
  return cu_seqlens.has_value() && cu_seqlens->defined() ? cu_seqlens->size(0) - 1 : q.size(0);
}

void need_rank4(const Tensor& t, const char* name) {
  if (t.dim() != 4)
    lina::throw_invalid(name, "rank " + std::to_string(t.dim()), "rank 4 [B, T, heads, head dim]");
}

// lina's errors as Python's: bad input -> ValueError, a valid call the backend cannot serve ->
// NotImplementedError, anything else -> RuntimeError; the message names the argument either way.
template <class F>
auto translate_errors(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const lina::Error& e) {
    if (e.code() == lina::ErrorCode::invalid_argument) C10_THROW_ERROR(ValueError, std::string("lina: ") + e.what());
    if (e.code() == lina::ErrorCode::unsupported)
      C10_THROW_ERROR(NotImplementedError, std::string("lina: ") + e.what());
    C10_THROW_ERROR(Error, std::string("lina: ") + e.what());
  }
}

// Runs `f(opts)` on q's device and current stream.
template <class F>
void run_on(const Tensor& q, const std::string& variant, F&& f) {
  lina::ExecOptions opts;
  opts.variant = variant;
  if (q.is_cuda()) {
#ifdef LINA_TORCH_CUDA
    const c10::cuda::CUDAGuard guard(q.device());
    opts.stream = c10::cuda::getCurrentCUDAStream(q.get_device()).stream();
    translate_errors([&] { f(opts); });
    return;
#else
    C10_THROW_ERROR(NotImplementedError, "lina: argument `q`: a CUDA tensor, but this lina was built without CUDA");
#endif
  }
  translate_errors([&] { f(opts); });
}

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
                                         const std::string& variant) {
  const Tensor q = dense(q_), k = dense(k_), v = dense(v_), g = dense(g_);
  const OptTensor h0 = dense(h0_), cu = dense(cu_), cu_cpu = dense(cu_cpu_);
  auto [o, ht] = gla_fwd_outputs(q, v, output_final_state, cu);
  run_on(q, variant, [&](const lina::ExecOptions& opts) {
    const lina::ChunkGlaArgs args{view_of(q, "q"), view_of(k, "k"), view_of(v, "v"), view_of(g, "g"), scale,
                                  view_of(h0, "initial_state"), view_of(cu, "cu_seqlens"),
                                  view_of(cu_cpu, "cu_seqlens_cpu")};
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
                       const Tensor& do_, const OptTensor& dht_, const std::string& variant) {
  const Tensor q = dense(q_), k = dense(k_), v = dense(v_), g = dense(g_), d_o = dense(do_);
  const OptTensor h0 = dense(h0_), cu = dense(cu_), cu_cpu = dense(cu_cpu_), dht = dense(dht_);
  GlaGrads out = gla_grad_outputs(q, k, v, g, h0);
  auto& [dq, dk, dv, dg, dh0] = out;
  run_on(q, variant, [&](const lina::ExecOptions& opts) {
    const lina::ChunkGlaArgs args{view_of(q, "q"), view_of(k, "k"), view_of(v, "v"), view_of(g, "g"), scale,
                                  view_of(h0, "initial_state"), view_of(cu, "cu_seqlens"),
                                  view_of(cu_cpu, "cu_seqlens_cpu")};
    std::optional<lina::TensorView> d_h0;
    if (h0.has_value()) d_h0 = view_of(dh0, "dh0");
    lina::chunk_gla_backward(args, {view_of(d_o, "do"), view_of(dht, "dht")},
                             {view_of(dq, "dq"), view_of(dk, "dk"), view_of(dv, "dv"), view_of(dg, "dg"), d_h0}, opts);
  });
  return out;
}


// ---- chunk_kda / chunk_gdn ----------------------------------------------------------------------------

// The arguments both delta rules share, in schema order after (q, k, v, g, beta, scale, initial_state).
struct DeltaFlags {
  bool use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval;
};

template <class Args>
void fill_delta(Args& a, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                std::optional<double> scale, const OptTensor& h0, const DeltaFlags& f, const OptTensor& A_log,
                const OptTensor& dt_bias, const OptTensor& cu, const OptTensor& cu_cpu) {
  a.q = view_of(q, "q");
  a.k = view_of(k, "k");
  a.v = view_of(v, "v");
  a.g = view_of(g, "g");
  a.beta = view_of(beta, "beta");
  a.scale = scale;
  a.initial_state = view_of(h0, "initial_state");
  a.cu_seqlens = view_of(cu, "cu_seqlens");
  a.cu_seqlens_cpu = view_of(cu_cpu, "cu_seqlens_cpu");
  a.use_qk_l2norm_in_kernel = f.use_qk_l2norm_in_kernel;
  a.use_gate_in_kernel = f.use_gate_in_kernel;
  a.use_beta_sigmoid_in_kernel = f.use_beta_sigmoid_in_kernel;
  a.allow_neg_eigval = f.allow_neg_eigval;
  a.A_log = view_of(A_log, "A_log");
  a.dt_bias = view_of(dt_bias, "dt_bias");
}

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

DeltaGrads delta_grad_outputs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                              const OptTensor& h0, const OptTensor& A_log, const OptTensor& dt_bias, bool need_dA_log,
                              bool need_ddt_bias) {
  const auto like = [&](const OptTensor& t, bool need) {
    return need && t.has_value() && t->defined() ? at::empty(t->sizes(), t->options()) : none_like(q);
  };
  return {at::empty(q.sizes(), q.options()),    at::empty(k.sizes(), k.options()),
          at::empty(v.sizes(), v.options()),    at::empty(g.sizes(), g.options()),
          at::empty(beta.sizes(), beta.options()), like(h0, true),
          like(A_log, need_dA_log),             like(dt_bias, need_ddt_bias)};
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

// chunk_kda and chunk_gdn share their schema shape; KDA adds safe_gate and lower_bound.
std::tuple<Tensor, Tensor> chunk_kda_fwd(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& g_,
                                         const Tensor& beta_, std::optional<double> scale, const OptTensor& h0_,
                                         bool output_final_state, bool l2norm, bool gate, bool beta_sigmoid,
                                         bool neg_eigval, bool safe_gate, std::optional<double> lower_bound,
                                         const OptTensor& A_log_, const OptTensor& dt_bias_, const OptTensor& cu_,
                                         const OptTensor& cu_cpu_, bool training, const std::string& variant) {
  const Tensor q = dense(q_), k = dense(k_), v = dense(v_), g = dense(g_), beta = dense(beta_);
  const OptTensor h0 = dense(h0_), A_log = dense(A_log_), dt_bias = dense(dt_bias_), cu = dense(cu_),
                  cu_cpu = dense(cu_cpu_);
  auto [o, ht] = delta_fwd_outputs(q, v, output_final_state, cu);
  run_on(q, variant, [&](const lina::ExecOptions& opts) {
    lina::ChunkKdaArgs a;
    fill_delta(a, q, k, v, g, beta, scale, h0, {l2norm, gate, beta_sigmoid, neg_eigval}, A_log, dt_bias, cu, cu_cpu);
    a.safe_gate = safe_gate;
    a.lower_bound = lower_bound;
    std::optional<lina::TensorView> final_state;
    if (output_final_state) final_state = view_of(ht, "final_state");
    lina::chunk_kda_forward(a, {view_of(o, "o"), final_state},
                            training ? lina::ForwardMode::training : lina::ForwardMode::inference, opts);
  });
  return {o, ht};
}


DeltaGrads chunk_kda_bwd(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& g_, const Tensor& beta_,
                         std::optional<double> scale, const OptTensor& h0_, bool l2norm, bool gate, bool beta_sigmoid,
                         bool neg_eigval, bool safe_gate, std::optional<double> lower_bound, const OptTensor& A_log_,
                         const OptTensor& dt_bias_, const OptTensor& cu_, const OptTensor& cu_cpu_, const Tensor& do_,
                         const OptTensor& dht_, bool need_dA_log, bool need_ddt_bias, const std::string& variant) {
  const Tensor q = dense(q_), k = dense(k_), v = dense(v_), g = dense(g_), beta = dense(beta_), d_o = dense(do_);
  const OptTensor h0 = dense(h0_), A_log = dense(A_log_), dt_bias = dense(dt_bias_), cu = dense(cu_),
                  cu_cpu = dense(cu_cpu_), dht = dense(dht_);
  DeltaGrads out = delta_grad_outputs(q, k, v, g, beta, h0, A_log, dt_bias, need_dA_log, need_ddt_bias);
  run_on(q, variant, [&](const lina::ExecOptions& opts) {
    lina::ChunkKdaArgs a;
    fill_delta(a, q, k, v, g, beta, scale, h0, {l2norm, gate, beta_sigmoid, neg_eigval}, A_log, dt_bias, cu, cu_cpu);
    a.safe_gate = safe_gate;
    a.lower_bound = lower_bound;
    lina::chunk_kda_backward(a, {view_of(d_o, "do"), view_of(dht, "dht")}, delta_grad_views(out), opts);
  });
  return out;
}


std::tuple<Tensor, Tensor> chunk_gdn_fwd(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& g_,
                                         const Tensor& beta_, std::optional<double> scale, const OptTensor& h0_,
                                         bool output_final_state, bool l2norm, bool gate, bool beta_sigmoid,
                                         bool neg_eigval, const OptTensor& A_log_, const OptTensor& dt_bias_,
                                         const OptTensor& cu_, const OptTensor& cu_cpu_, bool training,
                                         const std::string& variant) {
  const Tensor q = dense(q_), k = dense(k_), v = dense(v_), g = dense(g_), beta = dense(beta_);
  const OptTensor h0 = dense(h0_), A_log = dense(A_log_), dt_bias = dense(dt_bias_), cu = dense(cu_),
                  cu_cpu = dense(cu_cpu_);
  auto [o, ht] = delta_fwd_outputs(q, v, output_final_state, cu);
  run_on(q, variant, [&](const lina::ExecOptions& opts) {
    lina::ChunkGdnArgs a;
    fill_delta(a, q, k, v, g, beta, scale, h0, {l2norm, gate, beta_sigmoid, neg_eigval}, A_log, dt_bias, cu, cu_cpu);
    std::optional<lina::TensorView> final_state;
    if (output_final_state) final_state = view_of(ht, "final_state");
    lina::chunk_gdn_forward(a, {view_of(o, "o"), final_state},
                            training ? lina::ForwardMode::training : lina::ForwardMode::inference, opts);
  });
  return {o, ht};
}


DeltaGrads chunk_gdn_bwd(const Tensor& q_, const Tensor& k_, const Tensor& v_, const Tensor& g_, const Tensor& beta_,
                         std::optional<double> scale, const OptTensor& h0_, bool l2norm, bool gate, bool beta_sigmoid,
                         bool neg_eigval, const OptTensor& A_log_, const OptTensor& dt_bias_, const OptTensor& cu_,
                         const OptTensor& cu_cpu_, const Tensor& do_, const OptTensor& dht_, bool need_dA_log,
                         bool need_ddt_bias, const std::string& variant) {
  const Tensor q = dense(q_), k = dense(k_), v = dense(v_), g = dense(g_), beta = dense(beta_), d_o = dense(do_);
  const OptTensor h0 = dense(h0_), A_log = dense(A_log_), dt_bias = dense(dt_bias_), cu = dense(cu_),
                  cu_cpu = dense(cu_cpu_), dht = dense(dht_);
  DeltaGrads out = delta_grad_outputs(q, k, v, g, beta, h0, A_log, dt_bias, need_dA_log, need_ddt_bias);
  run_on(q, variant, [&](const lina::ExecOptions& opts) {
    lina::ChunkGdnArgs a;
    fill_delta(a, q, k, v, g, beta, scale, h0, {l2norm, gate, beta_sigmoid, neg_eigval}, A_log, dt_bias, cu, cu_cpu);
    lina::chunk_gdn_backward(a, {view_of(d_o, "do"), view_of(dht, "dht")}, delta_grad_views(out), opts);
  });
  return out;
}


std::string version() { return lina::kVersion; }

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
}

// One kernel for CPU and CUDA: lina's front door picks the backend from q's device.
#define LINA_TORCH_IMPLS(m)                  \
  m.impl("chunk_gla_fwd", chunk_gla_fwd);    \
  m.impl("chunk_gla_bwd", chunk_gla_bwd);    \
  m.impl("chunk_kda_fwd", chunk_kda_fwd);    \
  m.impl("chunk_kda_bwd", chunk_kda_bwd);    \
  m.impl("chunk_gdn_fwd", chunk_gdn_fwd);    \
  m.impl("chunk_gdn_bwd", chunk_gdn_bwd);

TORCH_LIBRARY_IMPL(lina, CPU, m) { LINA_TORCH_IMPLS(m) }
TORCH_LIBRARY_IMPL(lina, CUDA, m) { LINA_TORCH_IMPLS(m) }

