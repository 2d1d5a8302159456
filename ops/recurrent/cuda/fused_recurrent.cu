// run_cuda for fused_recurrent_{gla,kda,gdn}: one launch of fused_recurrent_kernel (fused_recurrent_kernel.cuh)
// on the call's stream; the kernel takes the DecodeCall itself (pointers, sizes and flags, all trivially
// copyable). Nothing is allocated, uploaded or read back (cu_seqlens, state_indices and
// num_accepted_tokens are read by the kernel), so a decode step is asynchronous and graph capturable.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "lina/error.h"
#include "ops/common/cuda/launch_setup.h"
#include "ops/recurrent/cuda/fused_recurrent_kernel.cuh"
#include "ops/recurrent/decode_call.h"

namespace lina::detail::recurrent {
namespace {

using cuda::fused_recurrent_kernel;
using cuda::kThreads;

bool head_dim_supported(std::int64_t d) { return d == 64 || d == 128 || d == 256; }

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// State columns per CTA: the widest tile whose grid still puts a few CTAs on every SM (a wide tile
// reads 128-byte row pieces; a narrow one keeps batch 1 spread over the SMs). K = 256 stops at 16
// columns (64 state registers per thread at 32).
int pick_bv(std::int64_t heads, std::int64_t V, std::int64_t K, int sms) {
  if (K <= 128 && heads * (V / 32) >= 4LL * sms) return 32;
  if (heads * (V / 16) >= 2LL * sms) return 16;
  return 8;
}

template <bool DELTA, int K, int BV>
std::string launch(const DecodeCall& c, std::int64_t ctas, cudaStream_t st) {
  fused_recurrent_kernel<DELTA, K, BV><<<static_cast<unsigned>(ctas), kThreads, 0, st>>>(c);
  return std::string(DELTA ? "fused_recurrent_delta_kernel" : "fused_recurrent_gla_kernel") + "<K" +
         std::to_string(K) + ",BV" + std::to_string(BV) + ">";
}

template <bool DELTA, int K>
std::string launch_k(const DecodeCall& c, std::int64_t heads, int bv, cudaStream_t st) {
  const std::int64_t ctas = heads * (c.V / bv);
  if constexpr (K <= 128) {
    if (bv == 32) return launch<DELTA, K, 32>(c, ctas, st);
  }
  if (bv == 16) return launch<DELTA, K, 16>(c, ctas, st);
  return launch<DELTA, K, 8>(c, ctas, st);
}

template <bool DELTA>
std::string launch_op(const DecodeCall& c, std::int64_t heads, int bv, cudaStream_t st) {
  if (c.K == 64) return launch_k<DELTA, 64>(c, heads, bv, st);
  if (c.K == 128) return launch_k<DELTA, 128>(c, heads, bv, st);
  return launch_k<DELTA, 256>(c, heads, bv, st);
}

std::string dtype_seen(DType d) { return "dtype " + std::string(dtype_name(d)); }

bool float_dtype(DType d) { return d == DType::f32 || d == DType::bf16 || d == DType::f16; }

}  // namespace

RunInfo run_cuda(const DecodeCall& c) {
  if (!head_dim_supported(c.K)) throw_unsupported("q", "key head dim K = " + std::to_string(c.K), "K in {64, 128, 256}");
  if (!head_dim_supported(c.V)) throw_unsupported("v", "value head dim V = " + std::to_string(c.V), "V in {64, 128, 256}");
  if (!float_dtype(c.qkv_dtype)) throw_unsupported("q", dtype_seen(c.qkv_dtype), "bf16, f16 or f32");
  if (c.g_dtype != c.qkv_dtype && c.g_dtype != DType::f32)
    throw_unsupported("g", dtype_seen(c.g_dtype), "q's dtype or f32");
  if (c.op != DecodeOp::gla && c.beta_dtype != c.qkv_dtype && c.beta_dtype != DType::f32)
    throw_unsupported("beta", dtype_seen(c.beta_dtype), "q's dtype or f32");
  if (c.o_dtype != c.qkv_dtype) throw_unsupported("o", dtype_seen(c.o_dtype), "q's dtype");
  if (c.final_state && c.final_state_dtype != DType::f32)
    throw_unsupported("final_state", dtype_seen(c.final_state_dtype), "f32");
  // The state moves as float4 rows and o as 4-element groups.
  if (!aligned16(c.initial_state) || !aligned16(c.final_state) || !aligned16(c.pool_out))
    throw_unsupported(c.initial_state && !aligned16(c.initial_state) ? "initial_state" : "final_state",
                      "a state pointer that is not 16-byte aligned", "16-byte aligned f32 state");
  if ((reinterpret_cast<std::uintptr_t>(c.o) & (c.qkv_dtype == DType::f32 ? 15u : 7u)) != 0)
    throw_unsupported("o", "a pointer not aligned to four elements", "o aligned to four elements");

  const std::int64_t heads = c.N * c.HV;
  const int bv = pick_bv(heads, c.V, c.K, cuda_util::sm_count());
  RunInfo info{"cuda", {}, ""};
  if (heads * (c.V / bv) == 0) return info;  // no sequences or no heads: nothing to launch
  if (heads * (c.V / bv) > INT32_MAX)
    throw_unsupported("q", std::to_string(heads) + " (sequence, value head) pairs", "fewer sequence-heads");
  auto st = static_cast<cudaStream_t>(c.stream);
  info.kernels.push_back(c.op == DecodeOp::gla ? launch_op<false>(c, heads, bv, st) : launch_op<true>(c, heads, bv, st));
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw Error(ErrorCode::runtime, "", std::string("fused_recurrent cuda: kernel launch: ") + cudaGetErrorString(e));
  return info;
}

}  // namespace lina::detail::recurrent
