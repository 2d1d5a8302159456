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

// The sequences as kernels see them: a device table (varlen), or for dense inputs no table at all
// (sequence n is rows [n T, (n + 1) T)), so a dense call copies nothing to the device.
struct SeqTable {
  const SeqDesc* table = nullptr;
  int uniform_len = 0;  // dense: T
  __host__ __device__ SeqDesc at(int n) const {
    if (table) return table[n];
    return {static_cast<std::int64_t>(n) * uniform_len, uniform_len, n * ((uniform_len + 63) / 64)};
  }
  // The sequence holding global chunk gc (64-row chunks counted over all sequences, 0 <= gc < total)
  // and the chunk's index within it; N: the sequence count. Varlen: the last sequence whose first
  // chunk is <= gc (an empty sequence shares its successor's chunk_off and is skipped).
  __device__ int2 chunk(int gc, int N) const {
    if (!table) {
      const int nch = (uniform_len + 63) / 64;
      return make_int2(gc / nch, gc % nch);
    }
    int lo = 0, hi = N - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (table[mid].chunk_off <= gc) lo = mid;
      else hi = mid - 1;
    }
    return make_int2(lo, gc - table[lo].chunk_off);
  }
};

// The problem's sequences for the kernels; `ptr` (when a table was uploaded) is freed on the stream
// with workspace_free.
struct DeviceSeqs {
  SeqDesc* ptr = nullptr;  // owned device table, or nullptr
  SeqTable view;
  int total_chunks = 0;
  int max_len = 0;
};

// Dense: no table (the kernels compute each sequence); varlen (or `always_table`): a copy of the
// descriptors through pinned staging into lina's pool (ops/common/cuda/workspace.h).
inline DeviceSeqs upload_sequences(const Problem& p, cudaStream_t stream, bool always_table = false) {
  const bool table = p.N > 0 && (p.varlen || always_table);
  std::vector<SeqDesc> h;  // built only when it is uploaded
  if (table) h.reserve(static_cast<std::size_t>(p.N));
  DeviceSeqs d;
  for (std::int64_t n = 0; n < p.N; ++n) {
    const auto& s = p.sequences[static_cast<std::size_t>(n)];
    if (table) h.push_back({s.row_begin, static_cast<int>(s.length), d.total_chunks});
    d.total_chunks += static_cast<int>((s.length + 63) / 64);
    d.max_len = std::max(d.max_len, static_cast<int>(s.length));
  }
  d.view.uniform_len = static_cast<int>(p.T);
  if (!table) return d;
  d.ptr = static_cast<SeqDesc*>(upload_table(h.data(), h.size() * sizeof(SeqDesc), stream, "sequence table"));
  d.view.table = d.ptr;
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
