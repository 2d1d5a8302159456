// The sequence split of the chunk_kda / chunk_gdn forward on the CUDA backend (ops/delta/sequence_split.h): the
// device side of its steps (buffers from lina's pool, the [I | 0] starts, the combine kernel) around the unsplit
// forward launches.
#include <cuda_runtime.h>

#include <cstdint>

#include "lina/error.h"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/launch_setup.h"
#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/common/cuda/workspace.h"
#include "ops/delta/cuda_launch.h"
#include "ops/delta/sequence_split.h"

namespace lina::detail::cuda {
namespace {

using i64 = std::int64_t;
using delta::CombineArgs;

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

__global__ void identity_states_kernel(float* states, i64 count, int K, i64 width) {
  const i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;  // (state, row) pairs
  if (i < count * K) states[i * width + i % K] = 1.f;
}

// The combine (step 2): one CTA of 256 threads per (sequence, value head, 32 state columns). E [K][32] and the next
// E in shared memory; X streams through in tiles of 32 rows, double-buffered by cp.async across segments (the X_s do
// not depend on E, so tile t + 1 is in flight while tile t is used). Thread (warp w, lane j) owns column j of rows
// r0 + w + 8u of each tile: the warp reads one X row (a broadcast) and 32 consecutive E columns.
constexpr int kCombineCols = 32, kCombineRows = 32, kCombineThreads = 256;

template <int K>
struct CombineSmem {
  float E[2][K][kCombineCols];
  float X[2][kCombineRows][K];
};

template <int K>
__global__ void __launch_bounds__(kCombineThreads) split_combine_kernel(const CombineArgs c) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& s = *reinterpret_cast<CombineSmem<K>*>(smem_raw);
  constexpr int kTiles = K / kCombineRows;
  const int n = blockIdx.x, h = blockIdx.y, v0 = blockIdx.z * kCombineCols, tid = threadIdx.x, j = tid & 31, w = tid >> 5;
  const i64 s0 = c.first[n], s1 = c.first[n + 1];
  const i64 so = (static_cast<i64>(n) * c.HV + h) * K * c.V;
  for (int i = w; i < K; i += 8) s.E[0][i][j] = c.h0 ? c.h0[so + static_cast<i64>(i) * c.V + v0 + j] : 0.f;
  // X tile t of the flat stream (segment s0 + t / kTiles, rows (t % kTiles) * 32 ..) into buffer t & 1
  const i64 total = (s1 - s0) * kTiles;
  const auto issue = [&](i64 t) {
    if (t < total) {
      const i64 seg = s0 + t / kTiles;
      const int r0 = static_cast<int>(t % kTiles) * kCombineRows;
      const float* src = c.X + ((seg * c.HV + h) * K + r0) * c.x_pitch;
      for (int q = tid; q < kCombineRows * K / 4; q += kCombineThreads) {
        const int r = q / (K / 4), c4 = 4 * (q % (K / 4));
        cuda_util::cp_async16(&s.X[t & 1][r][c4], src + static_cast<i64>(r) * c.x_pitch + c4, true);
      }
    }
    cuda_util::cp_async_commit();
  };
  issue(0);
  int cur = 0;
  for (i64 seg = s0; seg < s1; ++seg) {
    __syncthreads();  // E[cur] is complete; the previous segment's reads of E[cur ^ 1] are done
    const i64 blk = (seg * c.HV + h) * K;
    for (int i = w; i < K; i += 8) c.entering[(blk + i) * c.V + v0 + j] = s.E[cur][i][j];
    float acc[kCombineRows / 8];
    for (int tl = 0; tl < kTiles; ++tl) {
      const i64 t = (seg - s0) * kTiles + tl;
      issue(t + 1);
      cuda_util::cp_async_wait<1>();
      __syncthreads();  // tile t has landed everywhere
      const int r0 = tl * kCombineRows;
#pragma unroll
      for (int u = 0; u < kCombineRows / 8; ++u) acc[u] = c.Y[(blk + r0 + w + 8 * u) * c.y_pitch + v0 + j];
#pragma unroll 8
      for (int l = 0; l < K; ++l) {
        const float e = s.E[cur][l][j];
#pragma unroll
        for (int u = 0; u < kCombineRows / 8; ++u) acc[u] = fmaf(s.X[t & 1][w + 8 * u][l], e, acc[u]);
      }
#pragma unroll
      for (int u = 0; u < kCombineRows / 8; ++u) s.E[cur ^ 1][r0 + w + 8 * u][j] = acc[u];
      __syncthreads();  // buffer t & 1 is free for tile t + 2
    }
    cur ^= 1;
  }
  cuda_util::cp_async_wait_all();
  __syncthreads();
  if (c.ht)
    for (int i = w; i < K; i += 8) c.ht[so + static_cast<i64>(i) * c.V + v0 + j] = s.E[cur][i][j];
}

void* dev_alloc(std::size_t bytes, void* st, const char* what) { return cuda_util::workspace_alloc(bytes, as_stream(st), what); }
void dev_release(void* ptr, void* st, const char* what) { cuda_util::workspace_free(ptr, as_stream(st), what); }
void dev_zero_columns(void* dst, i64 width, i64 col0, i64 rows, i64 cols, std::size_t elem, void* st) {
  if (rows == 0 || cols == 0) return;
  cuda_util::check(cudaMemset2DAsync(static_cast<unsigned char*>(dst) + static_cast<std::size_t>(col0) * elem,
                                     static_cast<std::size_t>(width) * elem, 0, static_cast<std::size_t>(cols) * elem,
                                     static_cast<std::size_t>(rows), as_stream(st)),
                   "sequence split: zero columns");
}
void dev_copy_columns(void* dst, i64 width, i64 col0, const void* src, i64 rows, i64 cols, std::size_t elem, void* st) {
  if (rows == 0) return;
  cuda_util::check(cudaMemcpy2DAsync(static_cast<unsigned char*>(dst) + static_cast<std::size_t>(col0) * elem,
                                     static_cast<std::size_t>(width) * elem, src, static_cast<std::size_t>(cols) * elem,
                                     static_cast<std::size_t>(cols) * elem, static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice,
                                     as_stream(st)),
                   "sequence split: values");
}
void dev_identity(float* states, i64 count, i64 K, i64 width, void* st) {
  const i64 n = count * K;
  if (n == 0) return;
  cuda_util::check(cudaMemsetAsync(states, 0, static_cast<std::size_t>(n * width) * sizeof(float), as_stream(st)),
                   "sequence split: identity states");
  identity_states_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, as_stream(st)>>>(states, count, static_cast<int>(K), width);
  cuda_util::check(cudaGetLastError(), "sequence split: identity states");
}
template <int K>
void launch_combine(const CombineArgs& c, cudaStream_t st) {
  constexpr std::size_t smem = sizeof(CombineSmem<K>);
  if (smem > 48 * 1024) cuda_util::set_max_dynamic_smem(split_combine_kernel<K>, static_cast<int>(smem), "split_combine_kernel");
  const dim3 grid(static_cast<unsigned>(c.N), static_cast<unsigned>(c.HV), static_cast<unsigned>(c.V / kCombineCols));
  split_combine_kernel<K><<<grid, kCombineThreads, smem, st>>>(c);
  cuda_util::check(cudaGetLastError(), "split_combine_kernel");
}
void dev_combine(const CombineArgs& host, void* stream) {
  if (host.N == 0 || host.HV == 0) return;
  const cudaStream_t st = as_stream(stream);
  // the plan's bounds through pinned staging into lina's pool, as the sequence tables
  CombineArgs c = host;
  auto* first = static_cast<i64*>(cuda_util::upload_table(host.first, static_cast<std::size_t>(host.N + 1) * sizeof(i64), st,
                                                           "sequence split bounds"));
  c.first = first;
  try {
    if (c.K == 64) launch_combine<64>(c, st);
    else if (c.K == 128) launch_combine<128>(c, st);
    else launch_combine<256>(c, st);
  } catch (...) {
    cuda_util::workspace_free(first, st, "sequence split bounds");
    throw;
  }
  cuda_util::workspace_free(first, st, "sequence split bounds");
}

const delta::SplitOps kDeviceOps{dev_alloc, dev_release, dev_zero_columns, dev_copy_columns, dev_identity, dev_combine};

delta::SplitPlan device_plan(const Problem& p) { return delta::plan_split(p, delta::split_segment_length(p, cuda_util::sm_count())); }

}  // namespace

int planning_sm_count() {
  try {  // a variant's supports() never throws: without a usable device the split declines
    return cuda_util::sm_count();
  } catch (const Error&) {
    return 0;
  }
}

RunInfo kda_forward_split(const Problem& p, const ChunkKdaArgs& a, const AttentionOutputs& out, const ExecOptions& opts) {
  return delta::run_split(p, a, out, device_plan(p), kDeviceOps, opts.stream,
                          [&](const Problem& pp, const ChunkKdaArgs& aa, const AttentionOutputs& oo) { return kda_forward(pp, aa, oo, opts); });
}

RunInfo gdn_forward_split(const Problem& p, const ChunkGdnArgs& a, const AttentionOutputs& out, const ExecOptions& opts) {
  return delta::run_split(p, a, out, device_plan(p), kDeviceOps, opts.stream, [&](const Problem& pp, const ChunkGdnArgs& aa, const AttentionOutputs& oo) {
    return gdn_forward(pp, aa, oo, opts, GdnPrep::persistent);
  });
}

}  // namespace lina::detail::cuda
