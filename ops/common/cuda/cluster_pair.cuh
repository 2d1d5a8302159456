// Two CTAs of a cluster (sm_90 thread block clusters, cluster dims (2, 1, 1)) that split one problem's channels and
// swap per-thread partial sums through distributed shared memory. Used where a head dim does not fit one CTA
// (the delta backward at K = 256: each CTA owns 128 channels and the sums over channels meet here).
//
// Protocol of PairExchange<N>: thread t of each CTA's participating group (NT threads) holds N floats; send() stores
// them into the peer's buffer b and arrives there (release at cluster scope, one arrival per thread: the barrier
// completes when all NT peer threads have sent); recv() waits on the own buffer b's barrier (acquire at cluster
// scope) and reads what the peer sent. Buffers alternate by use parity (b = use & 1, phase = (use >> 1) & 1). A buffer
// is written again two uses later, and the writer reaches that use only after receiving the peer's next send, which
// the peer issues after its recv() of this one: so no empty barrier is needed as long as every use alternates send
// and recv in both CTAs.
#pragma once
#include <cooperative_groups.h>
#include <cuda/ptx>

#include <cstdint>

#include "ops/common/cuda/mbarrier.cuh"

namespace lina::detail::cuda_util {

// This CTA's rank in its cluster (0 or 1 for pairs).
__device__ __forceinline__ int cluster_rank() { return static_cast<int>(cooperative_groups::this_cluster().block_rank()); }

// Every thread of both CTAs (exited threads do not hold it up): orders shared-memory accesses (release / acquire) and,
// at the end of a kernel, keeps a CTA's shared memory alive until its peer's last access to it.
__device__ __forceinline__ void cluster_barrier() { cooperative_groups::this_cluster().sync(); }

template <int N, int NT = 128>
struct PairExchange {
  static_assert(N % 4 == 0, "float4 pieces");
  float4 buf[2][N / 4][NT];  // [use parity][piece][thread]: a warp's 16-byte pieces are contiguous
  std::uint64_t full[2];

  // One thread, before the cluster barrier that must follow before the first send.
  __device__ void init() {
    for (int b = 0; b < 2; ++b) mbar_init(&full[b], NT);
    mbar_init_fence();
  }
  __device__ void send(const float (&x)[N], int use, int peer, int t) {
    const int b = use & 1;
    PairExchange* remote = cooperative_groups::this_cluster().map_shared_rank(this, peer);
#pragma unroll
    for (int j = 0; j < N / 4; ++j) remote->buf[b][j][t] = make_float4(x[4 * j], x[4 * j + 1], x[4 * j + 2], x[4 * j + 3]);
    ::cuda::ptx::mbarrier_arrive(::cuda::ptx::sem_release, ::cuda::ptx::scope_cluster, ::cuda::ptx::space_cluster, &remote->full[b]);
  }
  __device__ void recv(float (&x)[N], int use, int t) {
    const int b = use & 1;
    const std::uint32_t parity = static_cast<std::uint32_t>((use >> 1) & 1);
    while (!::cuda::ptx::mbarrier_try_wait_parity(::cuda::ptx::sem_acquire, ::cuda::ptx::scope_cluster, &full[b], parity)) {
    }
#pragma unroll
    for (int j = 0; j < N / 4; ++j) {
      const float4 v = buf[b][j][t];
      x[4 * j] = v.x, x[4 * j + 1] = v.y, x[4 * j + 2] = v.z, x[4 * j + 3] = v.w;
    }
  }
};

}  // namespace lina::detail::cuda_util
