// Stages P and E1 of the chunk_kda / chunk_gdn backward, the element-wise q / k kernels: P, the in-kernel
// l2norm of q and k (prep_qk_kernel, prep_qk_v2_kernel<K>); E1, the GVA group sum of dq / dk and the
// l2norm backward (post_qk_kernel, post_qk_v2_kernel<K>).
// Part of the backward's one translation unit, chunk_delta_bwd.cu (whose anonymous namespace keeps these
// kernels and helpers internal to it); includes what it uses.
#pragma once
#include <cstdint>

#include "ops/delta/cuda/bwd/params.cuh"
#include "ops/delta/cuda/bwd/tile_ops.cuh"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/mma_primitives.cuh"

namespace lina::detail::cuda {
namespace {

// ---------------------------------------------------------------------------------------------
// P: q/k l2norm, one warp per (token, q/k head)
__global__ void prep_qk_kernel(const Params p) {
  const i64 item = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (item >= p.R * p.H) return;
  const int K = p.K;
  for (int which = 0; which < 2; ++which) {
    const void* src = which ? p.k : p.q;
    float* dst = (which ? p.kn : p.qn) + item * K;
    float x[8];
    float ss = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int c = lane + 32 * e;
      x[e] = c < K ? load_as_float(src, p.qk_t, item * K + c) : 0.f;
      ss += x[e] * x[e];
    }
    ss = warp_sum(ss);
    const float rs = inv_l2norm(p, ss);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int c = lane + 32 * e;
      if (c < K) dst[c] = x[e] * rs;
    }
    if (lane == 0) (which ? p.rk : p.rq)[item] = rs;
  }
}

// ---------------------------------------------------------------------------------------------
// E1: dq, dk: GVA group sum over the value heads of each q/k head, then the l2norm backward.
__global__ void post_qk_kernel(const Params p) {
  const i64 item = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (item >= p.R * p.H) return;
  const i64 row = item / p.H;
  const int h = static_cast<int>(item % p.H), K = p.K;
  for (int which = 0; which < 2; ++which) {
    const float* src = which ? p.dke : p.dqe;
    const float* y = (which ? p.kn : p.qn) + item * K;
    float d[8], yy[8];
    float dot = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int c = lane + 32 * e;
      d[e] = 0.f;
      yy[e] = 0.f;
      if (c < K) {
        for (int gi = 0; gi < p.G; ++gi) d[e] += src[(row * p.HV + h * p.G + gi) * K + c];
        yy[e] = y[c];
      }
      dot += d[e] * yy[e];
    }
    if (p.l2norm) {
      dot = warp_sum(dot);
      const float rs = (which ? p.rk : p.rq)[item];
#pragma unroll
      for (int e = 0; e < 8; ++e) d[e] = rs * (d[e] - dot * yy[e]);
    }
    void* dst = which ? p.dk : p.dq;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int c = lane + 32 * e;
      if (c < K) store_as(dst, p.dq_t, item * K + c, d[e]);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// P / E1, second versions prep_qk_v2<K> / post_qk_v2<K> (default; the scalar_qk variant runs
// prep_qk_kernel / post_qk_kernel; prep_qk runs where the chunk kernels do not normalise (not qk_inline), post_qk
// where grad_k_v2 does not fuse it (not fuse_qk: GVA groups, misaligned dq / dk, the SIMT kernels)). Same math; lane
// owns the CPL = K / 32 consecutive channels CPL lane .. (one vector load / store per tensor, two fp32 ones at K = 256,
// instead of CPL scalar ones) and q and k (dq_e and
// dk_e) are loaded together, so twice the bytes are in flight per warp. Needs 16-byte aligned q, k,
// dq, dk (q and k are, by the front door's refusal; for dq, dk the old kernels run otherwise).
template <int CPL>
__device__ __forceinline__ void load_lane(float (&x)[CPL], const void* src, int dtype, i64 i) {
  static_assert(CPL == 2 || CPL == 4 || CPL == 8, "K in {64, 128, 256}");
  if (dtype == 2) {
    const bf16* s = static_cast<const bf16*>(src) + i;
    if constexpr (CPL == 8) {
      cuda_util::unpack_bf16x8(*reinterpret_cast<const uint4*>(s), x);
    } else if constexpr (CPL == 4) {
      const uint2 u = *reinterpret_cast<const uint2*>(s);
      const float2 a = cuda_util::unpack_bf16(u.x), b = cuda_util::unpack_bf16(u.y);
      x[0] = a.x, x[1] = a.y, x[2] = b.x, x[3] = b.y;
    } else {
      const float2 a = cuda_util::unpack_bf16(*reinterpret_cast<const std::uint32_t*>(s));
      x[0] = a.x, x[1] = a.y;
    }
  } else if (dtype == 1) {
    const float* s = static_cast<const float*>(src) + i;
    if constexpr (CPL == 8) {
      const float4 a = ld4(s), b = ld4(s + 4);
      x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
    } else if constexpr (CPL == 4) {
      const float4 a = ld4(s);
      x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
    } else {
      const float2 a = ld2(s);
      x[0] = a.x, x[1] = a.y;
    }
  } else {
#pragma unroll
    for (int e = 0; e < CPL; ++e) x[e] = load_as_float(src, dtype, i + e);
  }
}

template <int CPL>
__device__ __forceinline__ void ld_lane(float (&x)[CPL], const float* s) {
  if constexpr (CPL == 8) {
    const float4 a = ld4(s), b = ld4(s + 4);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
  } else if constexpr (CPL == 4) {
    const float4 a = ld4(s);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
  } else {
    const float2 a = ld2(s);
    x[0] = a.x, x[1] = a.y;
  }
}

// P: q/k l2norm (or copy), warp per (token, q/k head)
template <int K>
__global__ void prep_qk_v2_kernel(const Params p) {
  constexpr int CPL = K / 32;
  const i64 item = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (item >= p.R * p.H) return;
  const i64 i = item * K + CPL * lane;
  float xq[CPL], xk[CPL];
  load_lane<CPL>(xq, p.q, p.qk_t, i);
  load_lane<CPL>(xk, p.k, p.qk_t, i);
  float sq = 0.f, sk = 0.f;
#pragma unroll
  for (int e = 0; e < CPL; ++e) {
    sq += xq[e] * xq[e];
    sk += xk[e] * xk[e];
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    sq += __shfl_xor_sync(0xffffffffu, sq, o);
    sk += __shfl_xor_sync(0xffffffffu, sk, o);
  }
  const float rq = inv_l2norm(p, sq), rk = inv_l2norm(p, sk);
#pragma unroll
  for (int e = 0; e < CPL; ++e) {
    xq[e] *= rq;
    xk[e] *= rk;
  }
  st_lane<CPL>(p.qn + i, xq);
  st_lane<CPL>(p.kn + i, xk);
  if (lane == 0) {
    p.rq[item] = rq;
    p.rk[item] = rk;
  }
}

// E1: dq, dk: GVA group sum over the value heads of each q/k head, then the l2norm backward
template <int K>
__global__ void post_qk_v2_kernel(const Params p) {
  constexpr int CPL = K / 32;
  const i64 item = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (item >= p.R * p.H) return;
  const i64 row = item / p.H;
  const int h = static_cast<int>(item % p.H);
  const i64 i = item * K + CPL * lane;
  float dq[CPL] = {}, dk[CPL] = {}, yq[CPL], yk[CPL];
  const bool raw_rows = K == 256 && p.qk_inline;  // no prep_qk rows: q_n = rq q (chunk_prep_v2 wrote rq / rk)
  if (raw_rows) {
    load_lane<CPL>(yq, p.q, p.qk_t, i);
    load_lane<CPL>(yk, p.k, p.qk_t, i);
  } else {
    ld_lane<CPL>(yq, p.qn + i);
    ld_lane<CPL>(yk, p.kn + i);
  }
  const float rq = p.l2norm ? p.rq[item] : 1.f, rk = p.l2norm ? p.rk[item] : 1.f;
  if (raw_rows) {
#pragma unroll
    for (int e = 0; e < CPL; ++e) {
      yq[e] *= rq;
      yk[e] *= rk;
    }
  }
  const i64 src0 = (row * p.HV + static_cast<i64>(h) * p.G) * K + CPL * lane;
#pragma unroll 2
  for (int gi = 0; gi < p.G; ++gi) {
    float a[CPL], b[CPL];
    ld_lane<CPL>(a, p.dqe + src0 + static_cast<i64>(gi) * K);
    ld_lane<CPL>(b, p.dke + src0 + static_cast<i64>(gi) * K);
#pragma unroll
    for (int e = 0; e < CPL; ++e) {
      dq[e] += a[e];
      dk[e] += b[e];
    }
  }
  if (p.l2norm) {
    float oq = 0.f, ok = 0.f;
#pragma unroll
    for (int e = 0; e < CPL; ++e) {
      oq += dq[e] * yq[e];
      ok += dk[e] * yk[e];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      oq += __shfl_xor_sync(0xffffffffu, oq, o);
      ok += __shfl_xor_sync(0xffffffffu, ok, o);
    }
#pragma unroll
    for (int e = 0; e < CPL; ++e) {
      dq[e] = rq * (dq[e] - oq * yq[e]);
      dk[e] = rk * (dk[e] - ok * yk[e]);
    }
  }
  store_lane<CPL>(p.dq, p.dq_t, i, dq);
  store_lane<CPL>(p.dk, p.dq_t, i, dk);
}

}  // namespace
}  // namespace lina::detail::cuda
