// wgmma pieces of chunk_gla_fwd's K = 128 kernel (v5 wgmma; docs/kernels/chunk_gla_fwd.md, "v5 wgmma"):
// the [rows][128] stage tiles (two SW128 blocks of 64 columns) and the consumer / producer GEMMs of one
// chunk, on the project's wgmma glue (ops/common/cuda/wgmma_sm90.cuh: tile format, descriptors,
// register-fragment identity, call wrappers).
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <utility>

#include "ops/common/cuda/mma_primitives.cuh"  // pack_bf16
#include "ops/common/cuda/wgmma_sm90.cuh"

namespace lina::detail::gla_wg {

namespace GMMA = cute::SM90::GMMA;

namespace wg = cuda_util::wgmma;
using wg::fence_proxy_async_smem;
template <int N>
__device__ __forceinline__ void fence_regs(float (&r)[N]) {
  wg::fence_regs<N>(r);
}

// Byte offset of element (r, c) in a [rows][128] bf16 tile stored as two SW128 blocks of 64 columns
// (wgmma_sm90.cuh's sw128 on bytes; written out in unsigned arithmetic, which the kernel's address code
// was tuned with).
__host__ __device__ __forceinline__ std::uint32_t swz(int r, int c) {
  return (static_cast<std::uint32_t>(c >> 6) << 13) + (static_cast<std::uint32_t>(r) << 7) +
         (static_cast<std::uint32_t>(((c >> 3) & 7) ^ (r & 7)) << 4) + (static_cast<std::uint32_t>(c & 7) << 1);
}
// Same within one [rows][64] block (c < 64).
__host__ __device__ __forceinline__ std::uint32_t swz64(int r, int c) {
  return (static_cast<std::uint32_t>(r) << 7) + (static_cast<std::uint32_t>((c >> 3) ^ (r & 7)) << 4) +
         (static_cast<std::uint32_t>(c & 7) << 1);
}
__host__ __device__ __forceinline__ std::uint64_t desc_k_sw128(std::uint32_t saddr) { return wg::desc_k(saddr); }
__host__ __device__ __forceinline__ std::uint64_t desc_mn_sw128(std::uint32_t saddr, std::uint32_t atom_stride_bytes) {
  return wg::desc_mn(saddr, atom_stride_bytes);
}

// Warpgroup named barrier (ids 1, 2: the kernel uses no other named barrier).
__device__ __forceinline__ void wg_bar(int id) { asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory"); }

// The atom calls of this kernel, on wgmma_sm90.cuh's wrappers.
// o^T (64 x 64) += A (64 x 16, registers) @ B (16 x 64, K-major in shared memory).
__device__ __forceinline__ void wgmma_rs_64x64_kb(float (&d)[32], const std::uint32_t (&a)[4], std::uint64_t db, bool acc) {
  wg::mma_rs<wg::M64N64_RS<GMMA::Major::K>, 32>(a, db, d, wg::scale_out(acc));
}
// D (64 x 64) += A (64 x 16, MN-major) @ B (16 x 64, K-major), both in shared memory.
__device__ __forceinline__ void wgmma_ss_64x64_amn_bk(float (&d)[32], std::uint64_t da, std::uint64_t db, bool acc) {
  wg::mma_ss<wg::M64N64_SS<GMMA::Major::MN, GMMA::Major::K>, 32>(da, db, d, wg::scale_out(acc));
}
// D (64 x 64) += A (64 x 16, K-major) @ B (16 x 64, K-major), both in shared memory.
__device__ __forceinline__ void wgmma_ss_64x64_ak_bk(float (&d)[32], std::uint64_t da, std::uint64_t db, bool acc) {
  wg::mma_ss<wg::M64N64_SS<GMMA::Major::K, GMMA::Major::K>, 32>(da, db, d, wg::scale_out(acc));
}
// D (64 x 128) += A (64 x 16, MN-major) @ B (16 x 128, MN-major), both in shared memory.
__device__ __forceinline__ void wgmma_ss_64x128_amn_bmn(float (&d)[64], std::uint64_t da, std::uint64_t db, bool acc) {
  wg::mma_ss<wg::M64N128_SS<GMMA::Major::MN, GMMA::Major::MN>, 64>(da, db, d, wg::scale_out(acc));
}

// ---- The consumer GEMMs of one chunk (issue only: the caller fences, arrives, commits and waits).
// Stage tiles (shared-window byte addresses, 1024-aligned): qe, ke [64 tok][128 ch] (two blocks), v block
// of this warpgroup [64 tok][64 V], A hi, A lo [64 tok][64 tok'] (non-causal 16x16 blocks zero).

// af[ks][j]: the RS A fragments of bf16(2^rho H^T) from the fp32 m64n128 accumulator ht (see above):
// column ch of ht scaled by sRe[ch] (the same fp32 products and bf16 roundings as v5's B fragments).
__device__ __forceinline__ void state_a_frags(std::uint32_t (&af)[8][4], const float (&ht)[64], const float* sRe, int t4) {
#pragma unroll
  for (int ks = 0; ks < 8; ++ks)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 r = *reinterpret_cast<const float2*>(sRe + 16 * ks + 8 * (j >> 1) + 2 * t4);
      af[ks][j] = cuda_util::pack_bf16(ht[8 * ks + 2 * j] * r.x, ht[8 * ks + 2 * j + 1] * r.y);
    }
}
// o^T (+)= bf16(2^rho H^T) @ qe^T: 8 RS wgmmas m64n64k16 over the 128 channels (B = qe, K-major).
__device__ __forceinline__ void issue_o_state(float (&o)[32], const std::uint32_t (&af)[8][4], std::uint32_t qe, bool acc) {
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) wgmma_rs_64x64_kb(o, af[ks], desc_k_sw128(qe + (ks >> 2) * 8192 + (ks & 3) * 32), acc || ks > 0);
}
// o^T (+)= v^T @ A_hi^T + v^T @ A_lo^T: 8 SS wgmmas m64n64k16 over the 64 tokens (A = v^T MN-major, B = A K-major).
__device__ __forceinline__ void issue_o_intra(float (&o)[32], std::uint32_t vblk, std::uint32_t ahi, std::uint32_t alo, bool acc) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const std::uint64_t da = desc_mn_sw128(vblk + kk * 2048, 8192);
    wgmma_ss_64x64_amn_bk(o, da, desc_k_sw128(ahi + kk * 32), acc || kk > 0);
    wgmma_ss_64x64_amn_bk(o, da, desc_k_sw128(alo + kk * 32), true);
  }
}
// H^T += v^T @ ke: 4 SS wgmmas m64n128k16 over the 64 tokens (A = v^T MN-major, B = ke MN-major, 2 atoms).
__device__ __forceinline__ void issue_state(float (&ht)[64], std::uint32_t vblk, std::uint32_t ke) {
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) wgmma_ss_64x128_amn_bmn(ht, desc_mn_sw128(vblk + ks * 2048, 8192), desc_mn_sw128(ke + ks * 2048, 8192), true);
}
// Producers (the variant wg128, the default; wg128_mma_a keeps the mma.sync A): A [64 tok][64 tok'] = qe @ kr^T, 8 SS wgmmas m64n64k16 over the 128
// channels (A operand = qe, B operand = kr, both [64][128] tiles K-major). The accumulator d[4 ni + e] of
// warp w is the m16n8 accumulator of row block w, column tile ni (mma.sync's layout).
__device__ __forceinline__ void issue_a(float (&a)[32], std::uint32_t qe, std::uint32_t kr) {
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
    const std::uint32_t o = (ks >> 2) * 8192 + (ks & 3) * 32;
    wgmma_ss_64x64_ak_bk(a, desc_k_sw128(qe + o), desc_k_sw128(kr + o), ks > 0);
  }
}

}  // namespace lina::detail::gla_wg
