// The backward's register and shared-memory building blocks: bf16 hi + lo tile fills and stores, vector
// loads and stores, mma.sync products over hi + lo planes (warp_mma_split), and a lane's vector of
// outputs in the output dtype (store2_as, st_lane, store_lane).
// Part of the backward's one translation unit, chunk_delta_bwd.cu (whose anonymous namespace keeps these
// kernels and helpers internal to it); includes what it uses.
#pragma once
#include <cstdint>

#include "ops/delta/cuda/bwd/params.cuh"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/mma_primitives.cuh"

namespace lina::detail::cuda {
namespace {

// ---------------------------------------------------------------------------------------------
// Tensor-core building blocks of the state passes (B, C). Every operand enters as bf16 hi + lo
// planes (x = hi + lo, ~16 significant bits) and each product is hi*hi + lo*hi + hi*lo with fp32
// accumulation: close to the fp32 SIMT products they replace, at a few MMAs per chunk step, which
// is not what bounds these passes (their loads are).

// Fills a ROWS x COLS tile as bf16 hi and lo planes (row pitch P elements) from f(r, c), which
// returns columns c .. c+3 as a float4. Up to BATCH float4 loads in flight per thread.
template <int ROWS, int COLS, int P, int BATCH = 8, class F>
__device__ __forceinline__ void fill_split(bf16* hi, bf16* lo, F f) {
  constexpr int Q = COLS / 4, PER = ROWS * Q / kNT, B = PER < BATCH ? PER : BATCH;
  static_assert((ROWS * Q) % kNT == 0 && PER % B == 0, "tile must split evenly over the block");
#pragma unroll 1
  for (int u0 = 0; u0 < PER; u0 += B) {
    float4 tmp[B];
#pragma unroll
    for (int u = 0; u < B; ++u) {
      const int i = threadIdx.x + (u0 + u) * kNT;
      tmp[u] = f(i / Q, 4 * (i % Q));
    }
#pragma unroll
    for (int u = 0; u < B; ++u) {
      const int i = threadIdx.x + (u0 + u) * kNT, o = (i / Q) * P + 4 * (i % Q);
      std::uint32_t h0, l0, h1, l1;
      cuda_util::pack_bf16_split(tmp[u].x, tmp[u].y, h0, l0);
      cuda_util::pack_bf16_split(tmp[u].z, tmp[u].w, h1, l1);
      *reinterpret_cast<uint2*>(hi + o) = make_uint2(h0, h1);
      *reinterpret_cast<uint2*>(lo + o) = make_uint2(l0, l1);
    }
  }
}

__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float2 ld2(const float* p) { return *reinterpret_cast<const float2*>(p); }
// four consecutive values of a bf16 hi plane plus its lo plane lo_off elements further (0: none) as floats
__device__ __forceinline__ float4 ld4_planes(const bf16* p, i64 lo_off) {
  const auto f4 = [](const bf16* x) {
    const uint2 u = *reinterpret_cast<const uint2*>(x);
    const float2 a = cuda_util::unpack_bf16(u.x), b = cuda_util::unpack_bf16(u.y);
    return make_float4(a.x, a.y, b.x, b.y);
  };
  float4 x = f4(p);
  if (lo_off) {
    const float4 l = f4(p + lo_off);
    x.x += l.x, x.y += l.y, x.z += l.z, x.w += l.w;
  }
  return x;
}
__device__ __forceinline__ void st2(float* p, float a, float b) { *reinterpret_cast<float2*>(p) = make_float2(a, b); }
__device__ __forceinline__ void st_u32(bf16* p, std::uint32_t v) { *reinterpret_cast<std::uint32_t*>(p) = v; }
// x as bf16 hi + lo at element offset o of the two planes (4 consecutive elements, o a multiple of 4;
// also a SW128 tile offset, whose 8-element groups stay contiguous): 8 bytes per plane.
__device__ __forceinline__ void st_split4(bf16* hi, bf16* lo, int o, float4 x) {
  std::uint32_t h0, l0, h1, l1;
  cuda_util::pack_bf16_split(x.x, x.y, h0, l0);
  cuda_util::pack_bf16_split(x.z, x.w, h1, l1);
  *reinterpret_cast<uint2*>(hi + o) = make_uint2(h0, h1);
  *reinterpret_cast<uint2*>(lo + o) = make_uint2(l0, l1);
}
constexpr float4 kZero4 = {0.f, 0.f, 0.f, 0.f};

// Dtype-generic row of 4 (dO, v).
__device__ __forceinline__ float4 load4_as_float(const void* src, int dtype, i64 i) {
  return make_float4(load_as_float(src, dtype, i), load_as_float(src, dtype, i + 1), load_as_float(src, dtype, i + 2),
                     load_as_float(src, dtype, i + 3));
}

// N float4s of a float tensor of any dtype: element indices idx(u) (multiples of 4; a negative index
// gives zeros). The dtype switch is taken once, so all N loads are in flight before the first
// conversion (a switch per load had each bf16 load wait for the one before: the state_bwd producer spent
// most of its time there). bf16 as one 8-byte load each where src is 8-byte aligned.
template <int N, class Idx>
__device__ __forceinline__ void load4_batch(float4 (&x)[N], const void* src, int dtype, Idx idx) {
  if (dtype == 2 && (reinterpret_cast<std::uintptr_t>(src) & 7) == 0) {
    uint2 raw[N];
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const i64 i = idx(u);
      raw[u] = i >= 0 ? *reinterpret_cast<const uint2*>(static_cast<const bf16*>(src) + i) : make_uint2(0u, 0u);
    }
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const float2 a = cuda_util::unpack_bf16(raw[u].x), b = cuda_util::unpack_bf16(raw[u].y);
      x[u] = make_float4(a.x, a.y, b.x, b.y);
    }
  } else if (dtype == 1) {
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const i64 i = idx(u);
      x[u] = i >= 0 ? ld4(static_cast<const float*>(src) + i) : kZero4;
    }
  } else {
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const i64 i = idx(u);
      x[u] = i >= 0 ? load4_as_float(src, dtype, i) : kZero4;
    }
  }
}

// Writes a 16-row fp32 warp tile (NT n8 fragments at rows m0.., columns n0..) as hi + lo planes.
template <int NT, int P>
__device__ __forceinline__ void store_split(bf16* hi, bf16* lo, const float (&acc)[NT][4], int m0, int n0, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int o = (m0 + g + 8 * hf) * P + n0 + nt * 8 + 2 * t;
      std::uint32_t h, l;
      cuda_util::pack_bf16_split(acc[nt][2 * hf], acc[nt][2 * hf + 1], h, l);
      st_u32(hi + o, h);
      st_u32(lo + o, l);
    }
}

// acc (NT n8 tiles at n0) += A Y for one k16 step (columns k0 ..): A as hi + lo fragments; Y from the hi + lo
// planes (pitch ldb) of a row-major [k][n] tile, or (TB) Y^T from those of a row-major [n][k] tile; the lo x lo
// term is dropped. AExact / BExact: A / Y is exactly bf16 (a bf16 input), so its lo term is zero and is skipped
// (al / the lo plane unread; the same sums as the three-term form with that lo = 0).
template <int NT, bool TB, bool AExact = false, bool BExact = false>
__device__ __forceinline__ void mma_b_planes(float (&acc)[NT][4], const std::uint32_t (&ah)[4], const std::uint32_t (&al)[4],
                                             const bf16* yh, const bf16* yl, int ldb, int n0, int k0, int lane) {
  static_assert(NT % 2 == 0, "n8 tiles come in pairs");
#pragma unroll
  for (int np = 0; np < NT / 2; ++np) {
    std::uint32_t bh[4], bl[4];
    static_assert(!(AExact && BExact), "one exact operand at most");
    if constexpr (TB) {
      cuda_util::ldsm_frag_b_nk(bh, yh, ldb, n0 + 16 * np, k0, lane);
      if constexpr (!BExact) cuda_util::ldsm_frag_b_nk(bl, yl, ldb, n0 + 16 * np, k0, lane);
    } else {
      cuda_util::ldsm_frag_b_kn(bh, yh, ldb, k0, n0 + 16 * np, lane);
      if constexpr (!BExact) cuda_util::ldsm_frag_b_kn(bl, yl, ldb, k0, n0 + 16 * np, lane);
    }
    if constexpr (BExact) {
      cuda_util::mma_bf16_16816(acc[2 * np], al, bh[0], bh[1]);
      cuda_util::mma_bf16_16816(acc[2 * np], ah, bh[0], bh[1]);
      cuda_util::mma_bf16_16816(acc[2 * np + 1], al, bh[2], bh[3]);
      cuda_util::mma_bf16_16816(acc[2 * np + 1], ah, bh[2], bh[3]);
    } else if constexpr (AExact) {
      cuda_util::mma_bf16_16816(acc[2 * np], ah, bl[0], bl[1]);
      cuda_util::mma_bf16_16816(acc[2 * np], ah, bh[0], bh[1]);
      cuda_util::mma_bf16_16816(acc[2 * np + 1], ah, bl[2], bl[3]);
      cuda_util::mma_bf16_16816(acc[2 * np + 1], ah, bh[2], bh[3]);
    } else {
      cuda_util::mma_bf16_16816_split(acc[2 * np], ah, al, bh[0], bh[1], bl[0], bl[1]);
      cuda_util::mma_bf16_16816_split(acc[2 * np + 1], ah, al, bh[2], bh[3], bl[2], bl[3]);
    }
  }
}

// acc (16 rows at m0, NT n8 tiles at n0) += X Y over the k16 steps [ks0, ks1); X from a row-major
// [m][k] tile, or (TA) X^T from a row-major [k][m] tile; Y from a row-major [k][n] tile, or (TB) Y^T
// from a row-major [n][k] tile; both as hi + lo planes (pitches lda, ldb); the lo x lo term is dropped.
template <int NT, bool TA, bool TB = false>
__device__ __forceinline__ void warp_mma_split(float (&acc)[NT][4], const bf16* xh, const bf16* xl, int lda, int m0,
                                               const bf16* yh, const bf16* yl, int ldb, int n0, int ks0, int ks1, int lane) {
#pragma unroll 1
  for (int ks = ks0; ks < ks1; ++ks) {
    std::uint32_t ah[4], al[4];
    if constexpr (TA) {
      cuda_util::ldsm_frag_a_trans(ah, xh, lda, m0, ks * 16, lane);
      cuda_util::ldsm_frag_a_trans(al, xl, lda, m0, ks * 16, lane);
    } else {
      cuda_util::ldsm_frag_a(ah, xh, lda, m0, ks * 16, lane);
      cuda_util::ldsm_frag_a(al, xl, lda, m0, ks * 16, lane);
    }
    mma_b_planes<NT, TB>(acc, ah, al, yh, yl, ldb, n0, ks * 16, lane);
  }
}

// Two consecutive outputs (element index i even) in the output dtype: one 4- or 8-byte store for
// bf16 / f32.
__device__ __forceinline__ void store2_as(void* dst, int dtype, i64 i, float a, float b) {
  if (dtype == 2) {
    *reinterpret_cast<std::uint32_t*>(static_cast<bf16*>(dst) + i) = cuda_util::pack_bf16(a, b);
  } else if (dtype == 1) {
    st2(static_cast<float*>(dst) + i, a, b);
  } else {
    store_as(dst, dtype, i, a);
    store_as(dst, dtype, i + 1, b);
  }
}

// A lane's CPL consecutive values (CPL = 8: K = 256's prep_qk_v2 / post_qk_v2): fp32 to fp32 (st_lane), to the
// output dtype (store_lane; grad_k's fused post_qk and post_qk_v2).
template <int CPL>
__device__ __forceinline__ void st_lane(float* d, const float (&x)[CPL]) {
  if constexpr (CPL == 8) {
    *reinterpret_cast<float4*>(d) = make_float4(x[0], x[1], x[2], x[3]);
    *reinterpret_cast<float4*>(d + 4) = make_float4(x[4], x[5], x[6], x[7]);
  } else if constexpr (CPL == 4) {
    *reinterpret_cast<float4*>(d) = make_float4(x[0], x[1], x[2], x[3]);
  } else {
    st2(d, x[0], x[1]);
  }
}

template <int CPL>
__device__ __forceinline__ void store_lane(void* dst, int dtype, i64 i, const float (&x)[CPL]) {
  if (dtype == 2) {
    bf16* d = static_cast<bf16*>(dst) + i;
    if constexpr (CPL == 8)
      *reinterpret_cast<uint4*>(d) = make_uint4(cuda_util::pack_bf16(x[0], x[1]), cuda_util::pack_bf16(x[2], x[3]),
                                                cuda_util::pack_bf16(x[4], x[5]), cuda_util::pack_bf16(x[6], x[7]));
    else if constexpr (CPL == 4) *reinterpret_cast<uint2*>(d) = make_uint2(cuda_util::pack_bf16(x[0], x[1]), cuda_util::pack_bf16(x[2], x[3]));
    else *reinterpret_cast<std::uint32_t*>(d) = cuda_util::pack_bf16(x[0], x[1]);
  } else if (dtype == 1) {
    st_lane<CPL>(static_cast<float*>(dst) + i, x);
  } else {
#pragma unroll
    for (int e = 0; e < CPL; ++e) store_as(dst, dtype, i + e, x[e]);
  }
}

}  // namespace
}  // namespace lina::detail::cuda
