// The typed binding's shared pieces: torch tensors as lina::TensorView, lina's errors as Python's, the call on
// q's device and stream, and the chunk ops' argument structs (which the decode ops extend). Used by
// torch_ops.cpp (chunk ops) and fused_recurrent_ops.cpp (decode ops).
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <optional>
#include <string>
#include <type_traits>

#include "lina/lina.h"

#ifdef LINA_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace lina_torch {

using at::Tensor;
using OptTensor = std::optional<Tensor>;
using Str = c10::string_view;

inline lina::DType dtype_of(const Tensor& t, const char* name) {
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
inline lina::TensorView view_of(const Tensor& t, const char* name) {
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

inline std::optional<lina::TensorView> view_of(const OptTensor& t, const char* name) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return view_of(*t, name);
}

inline Tensor dense(const Tensor& t) { return t.contiguous(); }
inline OptTensor dense(const OptTensor& t) {
  if (!t.has_value() || !t->defined()) return std::nullopt;
  return t->contiguous();
}

// An absent optional output crosses the schema as an empty tensor.
inline Tensor none_like(const Tensor& like) { return at::empty({0}, like.options().dtype(at::kFloat)); }
inline bool present(const Tensor& t) { return t.numel() > 0 || t.dim() > 1; }

inline std::int64_t num_seqs(const Tensor& q, const OptTensor& cu_seqlens) {
  return cu_seqlens.has_value() && cu_seqlens->defined() ? cu_seqlens->size(0) - 1 : q.size(0);
}

inline void need_rank4(const Tensor& t, const char* name) {
  if (t.dim() != 4)
    lina::throw_invalid(name, "rank " + std::to_string(t.dim()), "rank 4 [B, T, heads, head dim]");
}

// lina's errors as Python's: bad input -> ValueError, a valid call the backend cannot serve ->
// NotImplementedError, anything else -> RuntimeError; the message names the argument either way.
template <class F>
inline auto translate_errors(F&& f) -> decltype(f()) {
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
inline void run_on(const Tensor& q, Str variant, F&& f) {
  lina::ExecOptions opts;
  opts.variant = std::string(variant);
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

// chunk_gla's arguments as lina's views, for the forward, the backward and the reference.
inline lina::ChunkGlaArgs gla_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                            std::optional<double> scale, const OptTensor& h0, const OptTensor& cu,
                            const OptTensor& cu_cpu) {
  return {view_of(q, "q"), view_of(k, "k"), view_of(v, "v"), view_of(g, "g"), scale,
          view_of(h0, "initial_state"), view_of(cu, "cu_seqlens"), view_of(cu_cpu, "cu_seqlens_cpu")};
}

// The delta rules' inputs, made contiguous, and the flags both share.
struct DeltaFlags {
  bool use_qk_l2norm_in_kernel, use_gate_in_kernel, use_beta_sigmoid_in_kernel, allow_neg_eigval;
};

struct DeltaInputs {
  Tensor q, k, v, g, beta;
  OptTensor h0, A_log, dt_bias, cu, cu_cpu;
  std::optional<double> scale;
  DeltaFlags flags;
};

inline DeltaInputs dense_delta(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                        std::optional<double> scale, const OptTensor& h0, const DeltaFlags& flags,
                        const OptTensor& A_log, const OptTensor& dt_bias, const OptTensor& cu, const OptTensor& cu_cpu) {
  return {dense(q),     dense(k),       dense(v),  dense(g),      dense(beta), dense(h0), dense(A_log),
          dense(dt_bias), dense(cu), dense(cu_cpu), scale, flags};
}

// KDA's arguments beyond GDN's; GDN passes none.
struct KdaGate {
  bool safe_gate = false;
  std::optional<double> lower_bound;
};

template <class Args>
inline Args delta_args(const DeltaInputs& in, const KdaGate& kda) {
  Args a;
  a.q = view_of(in.q, "q");
  a.k = view_of(in.k, "k");
  a.v = view_of(in.v, "v");
  a.g = view_of(in.g, "g");
  a.beta = view_of(in.beta, "beta");
  a.scale = in.scale;
  a.initial_state = view_of(in.h0, "initial_state");
  a.cu_seqlens = view_of(in.cu, "cu_seqlens");
  a.cu_seqlens_cpu = view_of(in.cu_cpu, "cu_seqlens_cpu");
  a.use_qk_l2norm_in_kernel = in.flags.use_qk_l2norm_in_kernel;
  a.use_gate_in_kernel = in.flags.use_gate_in_kernel;
  a.use_beta_sigmoid_in_kernel = in.flags.use_beta_sigmoid_in_kernel;
  a.allow_neg_eigval = in.flags.allow_neg_eigval;
  a.A_log = view_of(in.A_log, "A_log");
  a.dt_bias = view_of(in.dt_bias, "dt_bias");
  if constexpr (std::is_same_v<Args, lina::ChunkKdaArgs>) {
    a.safe_gate = kda.safe_gate;
    a.lower_bound = kda.lower_bound;
  }
  return a;
}

// An operator of this library by name, for a kernel that calls another (autograd -> the op below it).
template <class Sig>
c10::TypedOperatorHandle<Sig> op_handle(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Sig>();
}

}  // namespace lina_torch
