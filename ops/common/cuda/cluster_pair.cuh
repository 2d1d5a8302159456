// Two CTAs of a cluster (sm_90 thread block clusters, cluster dims (2, 1, 1)) that split one problem's channels and
// swap per-thread partial sums through distributed shared memory. Used where a head dim does not fit one CTA
// (the delta backward at K = 256: each CTA owns 128 channels and the sums over channels meet here).
//
// Protocol of PairExchange<N>: thread t of each CTA's participating group (NT threads) holds N floats; send() writes
// them into the peer's buffer b with st.async, whose bytes complete on the peer's mbarrier b (the mechanism of the TMA
// copies: no memory fence; the release of a remote mbarrier arrival at cluster scope compiled to MEMBAR.ALL.GPU, which
// waited for the H_n stores in flight, every chunk). recv() posts the phase's expected bytes
// (thread 0: the barrier's one arrival) and waits for them. Buffers alternate by use parity (b = use & 1, phase =
// (use >> 1) & 1). A buffer is written again two uses later, and the writer reaches that use only after receiving the
// peer's next send, which the peer issues after its recv() of this one: so no empty barrier is needed as long as every
// use alternates send and recv in both CTAs; and the peer's bytes of use u + 2 cannot land on barrier b before its
// phase of use u completed.
#pragma once
#include <cooperative_groups.h>
#include <cuda/ptx>

#include <cstdint>

#include "ops/common/cuda/mbarrier.cuh"

namespace lina::detail::cuda_util {

// This CTA's rank in its cluster (0 or 1 for pairs).
__device__ __forceinline__ int cluster_rank() {
  std::uint32_t r;
  asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return static_cast<int>(r);
}
// The cluster barrier: every thread of both CTAs arrives once per phase, from converged warps (.aligned; exited threads
// do not hold it up); arrive releases this thread's earlier memory accesses, wait acquires the peer's. At the end of a
// kernel it keeps a CTA's shared memory alive until its peer's last access to it.
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}
// The peer's copy of a shared-memory address (32-bit shared::cluster address), and 16 / 4-byte accesses to it.
__device__ __forceinline__ std::uint32_t peer_smem(const void* local, int rank) {
  std::uint32_t a;
  asm("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(a) : "r"(smem_u32(local)), "r"(rank));
  return a;
}
__device__ __forceinline__ float4 ld4_peer(std::uint32_t a) {
  float4 x;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(x.x), "=f"(x.y), "=f"(x.z), "=f"(x.w) : "r"(a) : "memory");
  return x;
}
__device__ __forceinline__ void st_peer(std::uint32_t a, float x) { asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(a), "f"(x) : "memory"); }

template <int N, int NT = 128>
struct PairExchange {
  static_assert(N % 4 == 0, "float4 pieces");
  static constexpr std::uint32_t kBytes = sizeof(float) * N * NT;  // one use's bytes from the peer
  float4 buf[2][N / 4][NT];  // [use parity][piece][thread]: a warp's 16-byte pieces are contiguous
  std::uint64_t full[2];

  // One thread, before the cluster barrier that must follow before the first send.
  __device__ void init() {
    for (int b = 0; b < 2; ++b) mbar_init(&full[b], 1);
    mbar_init_fence();
  }
  __device__ void send(const float (&x)[N], int use, int peer, int t) {
    const int b = use & 1;
    PairExchange* remote = cooperative_groups::this_cluster().map_shared_rank(this, peer);
#pragma unroll
    for (int j = 0; j < N / 4; ++j) {
      const std::uint32_t v[4] = {__float_as_uint(x[4 * j]), __float_as_uint(x[4 * j + 1]), __float_as_uint(x[4 * j + 2]),
                                  __float_as_uint(x[4 * j + 3])};
      ::cuda::ptx::st_async(reinterpret_cast<std::uint32_t*>(&remote->buf[b][j][t]), v, &remote->full[b]);
    }
  }
  __device__ void recv(float (&x)[N], int use, int t) {
    const int b = use & 1;
    if (t == 0) mbar_arrive_expect_tx(&full[b], kBytes);
    // acquire at cluster scope: the complete_tx that lands the peer's bytes is a release at cluster scope
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
