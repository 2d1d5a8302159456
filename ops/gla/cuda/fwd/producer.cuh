// The v5 producer's per-chunk operand work, written once for its two tile layouts (ws: padded rows,
// wg128: 128-byte swizzle): the pipeline's barriers, pass 2 (q -> qe, g -> kr, k -> ke in place), a
// steep chunk's segment decay and the segment decay's store. Pass 1's scan is common.cuh's
// gate_rows_scan; the A product is each kernel's own (ws: common.cuh's causal_a_blocks; wg128: wgmma
// or ldmatrix on swizzled rows). Addr is the tile addressing (common.cuh's PaddedRows, wg128.cuh's
// Swizzled128): Addr::T the type a tile is addressed in, Addr::offset(row, col) the offset of element
// (row, col) in T units. The rest of pass 1 (quarter sums, steep flag) stays written out in each
// kernel: moving it into a function renumbers the loop-carried values, and ptxas then allocates and
// schedules both kernels differently. Keep this arithmetic and its order as it is.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "ops/common/cuda/mbarrier.cuh"
#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/gla/cuda/fwd/common.cuh"

namespace lina::detail::cuda {
namespace {  // one translation unit (chunk_gla_fwd.cu) includes the forward kernels

using namespace cuda_util;

// The v5 pipeline's barriers (one thread initialises them): per stage full (the NPT producer threads
// arrive), empty (the NCT consumer threads) and landed (one cp.async completion arrive per producer
// thread), and the producers' own barrier pbar.
template <int STAGES>
__device__ __forceinline__ void init_pipeline_barriers(std::uint64_t* full, std::uint64_t* empty, std::uint64_t* landed, std::uint64_t* pbar,
                                                       int npt, int nct) {
  for (int i = 0; i < STAGES; ++i) {
    mbar_init(full + i, npt);
    mbar_init(empty + i, nct);
    mbar_init(landed + i, npt);
  }
  mbar_init(pbar, npt);
}

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

// Mode 1: the segment's decay of channels cp, cp + 1 to its pass-1 slot.
__device__ __forceinline__ void store_segment_decay(const Params& p, const WorkItem& s, int h, int K, int cp, float2 segdec) {
  const std::int64_t sb = (static_cast<std::int64_t>(s.slot0 + s.seg) * p.H + h) * K;
  p.seg_decay[sb + cp] = segdec.x;
  p.seg_decay[sb + cp + 1] = segdec.y;
}

}  // namespace
}  // namespace lina::detail::cuda
