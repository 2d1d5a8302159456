// Small helpers shared by the CUDA sources: error checks, dtype-generic loads, sequence descriptors.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "lina/error.h"
#include "ops/common/cuda/workspace.h"
#include "ops/common/problem.h"

namespace lina::detail::cuda_util {

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(ErrorCode::runtime, "", std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
  }
}

// One sequence as the kernels see it; chunk_off = chunks of 64 before it (checkpoint indexing).
struct SeqDesc {
  std::int64_t row_begin;
  int length;
  int chunk_off;
};

// Device copy of the problem's sequences; freed on the stream (cudaFreeAsync or workspace_free).
struct DeviceSeqs {
  SeqDesc* ptr = nullptr;
  int total_chunks = 0;
  int max_len = 0;
};

inline DeviceSeqs upload_sequences(const Problem& p, cudaStream_t stream) {
  std::vector<SeqDesc> h(static_cast<std::size_t>(p.N));
  DeviceSeqs d;
  for (std::int64_t n = 0; n < p.N; ++n) {
    const auto& s = p.sequences[static_cast<std::size_t>(n)];
    h[static_cast<std::size_t>(n)] = {s.row_begin, static_cast<int>(s.length), d.total_chunks};
    d.total_chunks += static_cast<int>((s.length + 63) / 64);
    d.max_len = std::max(d.max_len, static_cast<int>(s.length));
  }
  if (h.empty()) return d;
  // Pinned staging into lina's pool (ops/common/cuda/workspace.h): no stream sync, no re-mapping.
  d.ptr = static_cast<SeqDesc*>(upload_table(h.data(), h.size() * sizeof(SeqDesc), stream, "sequence table"));
  return d;
}

// DType codes as ints for kernels (lina::DType: f64, f32, bf16, f16).
__device__ __forceinline__ float load_as_float(const void* p, int dtype, std::int64_t i) {
  switch (dtype) {
    case 0: return static_cast<float>(static_cast<const double*>(p)[i]);
    case 1: return static_cast<const float*>(p)[i];
    case 2: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return __half2float(static_cast<const __half*>(p)[i]);
  }
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

}  // namespace lina::detail::cuda_util
