// The v5 producer's per-chunk operand work, written once for its two tile layouts (ws: padded rows,
// wg128: 128-byte swizzle): pass 2 (q -> qe, g -> kr, k -> ke in place) and a steep chunk's segment
// decay; pass 1's scan is common.cuh's gate_rows_scan. Addr is the tile addressing (common.cuh's
// PaddedRows, wg128.cuh's Swizzled128): Addr::T the type a tile is addressed in, Addr::offset(row, col)
// the offset of element (row, col) in T units. The A product and the rest of pass 1 stay in each kernel:
// moving pass 1's quarter sums into a function renumbers the loop-carried values, and ptxas then
// allocates and schedules both kernels differently. Keep this arithmetic and its order as it is.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/gla/cuda/fwd/common.cuh"

namespace lina::detail::cuda {
namespace {  // one translation unit (chunk_gla_fwd.cu) includes the forward kernels

using namespace cuda_util;

// Pass 2, operands in place over the thread's 16 rows from qr0, channels cp, cp + 1: q -> qe = q 2^(b - rho),
// g -> kr = k 2^(rho - b), k -> ke = kr 2^(bL - rho); rho, bL and off (where the rows' running sums start,
// relative to rho) in log2 units, from pass 1.
template <class Addr>
__device__ __forceinline__ void producer_operands(typename Addr::T* sq, typename Addr::T* sk, typename Addr::T* sg, int qr0, int cp,
                                                  float2 rho, float2 bL, float2 off) {
  const float2 ck = make_float2(ex2(bL.x - rho.x), ex2(bL.y - rho.y));
  float2 d = off;
#pragma unroll 4
  for (int i = 0; i < 16; ++i) {
    const auto o = Addr::offset(qr0 + i, cp);
    const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sg + o));
    d.x += x.x * kLog2e;
    d.y += x.y * kLog2e;
    const float2 q = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sq + o));
    const float2 k = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sk + o));
    const float krx = k.x * ex2(-d.x), kry = k.y * ex2(-d.y);
    *reinterpret_cast<std::uint32_t*>(sq + o) = pack_bf16(q.x * ex2(d.x), q.y * ex2(d.y));
    *reinterpret_cast<std::uint32_t*>(sg + o) = pack_bf16(krx, kry);
    *reinterpret_cast<std::uint32_t*>(sk + o) = pack_bf16(krx * ck.x, kry * ck.y);
  }
}

// Steep chunk (mode 1): the consumers run the token recurrence on the raw tiles; the segment decay is
// the product of the per-token factors of the chunk's cn rows, in token order as in v4.
template <class Addr>
__device__ __forceinline__ void steep_segment_decay(const typename Addr::T* sg, int cn, int cp, float2& segdec) {
  for (int t = 0; t < cn; ++t) {
    const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sg + Addr::offset(t, cp)));
    segdec.x *= ex2(x.x * kLog2e);
    segdec.y *= ex2(x.y * kLog2e);
  }
}

}  // namespace
}  // namespace lina::detail::cuda
