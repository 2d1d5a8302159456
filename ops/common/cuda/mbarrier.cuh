// Shared-memory mbarriers (sm_90) for producer / consumer hand-over inside a CTA: init, arrive, parity
// wait, and the cp.async completion arrive. Used where warps of one CTA work on different chunks at
// once (a __syncthreads would tie them together again).
#pragma once
#include <cstdint>

#include "ops/common/cuda/mma_primitives.cuh"

namespace lina::detail::cuda_util {

// One thread initialises; a __syncthreads must follow before any other thread uses the barrier.
__device__ __forceinline__ void mbar_init(std::uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
// Arrive (release at CTA scope: this thread's earlier shared-memory accesses are ordered before it).
__device__ __forceinline__ void mbar_arrive(std::uint64_t* bar) {
  asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(smem_u32(bar)) : "memory");
}
// Arrive once every cp.async this thread issued so far has landed (counts against the init count).
__device__ __forceinline__ void mbar_arrive_cp_async(std::uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(std::uint64_t* bar, std::uint32_t parity) {
  std::uint32_t done;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(smem_u32(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
// Arrive and add `bytes` to the phase's expected transaction count (the bulk copies that complete it).
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
// Orders the mbarrier.init of this thread before async-proxy (bulk copy) operations on the barrier.
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
// One bulk copy global -> shared (the TMA engine, no tensor map): `bytes` (a multiple of 16, both
// addresses 16-byte aligned) land in dst and complete that many transaction bytes on `bar`.
__device__ __forceinline__ void bulk_copy_g2s(void* dst, const void* src, std::uint32_t bytes, std::uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}
// One TMA box of a 3-D tensor map (coordinates innermost first) into shared memory, completing its bytes on `bar`. The
// map lives in a __grid_constant__ kernel parameter (its generic address is passed).
__device__ __forceinline__ void tma_load_3d(void* dst, const void* tensor_map, int c0, int c1, int c2, std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
          smem_u32(dst)),
      "l"(reinterpret_cast<std::uint64_t>(tensor_map)), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar))
      : "memory");
}
// One bulk copy shared -> global (the TMA engine, no tensor map; `bytes` a multiple of 16, both addresses
// 16-byte aligned), in this thread's bulk async-group. The threads that wrote src fence
// (wgmma::fence_proxy_async_smem / fence.proxy.async) before the barrier behind which one thread issues it.
__device__ __forceinline__ void bulk_copy_s2g(void* dst, const void* src, std::uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(smem_u32(src)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Until this thread's committed bulk copies have read their shared-memory sources (the space may be rewritten).
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
// Until they have completed (their global writes done).
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// Wait (acquire) until the phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(std::uint64_t* bar, std::uint32_t parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

}  // namespace lina::detail::cuda_util
