// A chunk's bf16 q / k rows read by the chunk kernels themselves where prep_qk does not run (qk_inline):
// InlineQkRows (chunk_prep_v2, grad_k_v2 at K <= 128: whole rows, normalised in the kernel) and
// ScaledQkHalf (grad_k_v2 at K = 256: a channel half scaled by chunk_prep_v2's inverse norms).
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

// Channels c0 .. c0 + KS - 1 of a chunk's bf16 q / k rows (K per row) into a staging [2][64][KS] by cp.async, zero
// past Cn (each thread's own 16-byte pieces: visible to it after its wait): InlineQkRows (whole rows) and
// ScaledQkHalf (grad_k_v2's channel halves at K = 256).
template <int K, int KS>
__device__ __forceinline__ void stage_qk_rows(const Params& p, bf16* stg, i64 t0, int Cn, int h, int c0, int tid) {
  constexpr int PR = KS / 8, NU = kC * PR / kNT;  // 16-byte pieces per row, per thread
#pragma unroll
  for (int u = 0; u < NU; ++u) {
    const int i = tid + u * kNT, r = i / PR, c8 = 8 * (i % PR);
    const i64 src = ((t0 + min(r, Cn - 1)) * p.H + h) * K + c0 + c8;
    cuda_util::cp_async16(stg + r * KS + c8, static_cast<const bf16*>(p.q) + src, r < Cn);
    cuda_util::cp_async16(stg + (kC + r) * KS + c8, static_cast<const bf16*>(p.k) + src, r < Cn);
  }
}

// A on tensor cores: chunk_prep_v2. Its own file, so that stage A and the state passes change
// independently.
// bf16 q / k rows of a chunk as fp32 tiles [64][P], l2-normalised (or copied) as prep_qk_v2 does, for the chunk
// kernels where prep_qk does not run (Params::qk_inline). The thread's 16-byte pieces come into registers
// either by issue() (global loads, in flight with the caller's other loads: chunk_prep_v2, then store()) or by
// stage() (cp.async into a staging area the caller has free: grad_k_v2, whose registers are short, then
// store_staged() by the same thread); each piece's row has its squares summed over the PR threads that hold it
// (shuffles), is scaled and written; padded rows are zeros. Both kernels run this same code on the same
// rows, so their q_n / k_n agree bit for bit; chunk_prep_v2 also writes the inverse norms (rq, rk) for
// grad_k_v2's fused l2norm backward.
template <int K>
struct InlineQkRows {
  static constexpr int PR = K / 8, NU = kC * PR / kNT;  // threads per row, pieces per thread
  static_assert(NU * kNT == kC * PR && 32 % PR == 0, "whole rows per warp");
  uint4 xq[NU], xk[NU];
  __device__ __forceinline__ void issue(const Params& p, i64 t0, int Cn, int h, int tid) {
#pragma unroll
    for (int u = 0; u < NU; ++u) {
      const int i = tid + u * kNT, r = i / PR, c8 = 8 * (i % PR);
      const i64 src = ((t0 + r) * p.H + h) * K + c8;
      xq[u] = r < Cn ? *reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.q) + src) : make_uint4(0u, 0u, 0u, 0u);
      xk[u] = r < Cn ? *reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.k) + src) : make_uint4(0u, 0u, 0u, 0u);
    }
  }
  // staging: [2][64][K] bf16 (q rows, then k rows)
  __device__ __forceinline__ static void stage(const Params& p, bf16* stg, i64 t0, int Cn, int h, int tid) {
    stage_qk_rows<K, K>(p, stg, t0, Cn, h, 0, tid);
  }
  // grad_k_v2: this thread's staged pieces (its own cp.async: visible to it after its wait), one at a time (a
  // rolled loop: that kernel's code is at the instruction cache's size)
  template <int P>
  __device__ __forceinline__ static void store_staged(const Params& p, const bf16* stg, float (*qs)[P], float (*ks)[P], i64 t0,
                                                      int Cn, int h, int tid) {
#pragma unroll 1
    for (int u = 0; u < NU; ++u) {
      const int i = tid + u * kNT, r = i / PR, c8 = 8 * (i % PR);
      store_piece(p, qs, ks, *reinterpret_cast<const uint4*>(stg + r * K + c8),
                  *reinterpret_cast<const uint4*>(stg + (kC + r) * K + c8), t0, Cn, h, r, c8, false);
    }
  }
  // chunk_prep_v2: the pieces issue() loaded
  template <int P>
  __device__ __forceinline__ void store(const Params& p, float (*qs)[P], float (*ks)[P], i64 t0, int Cn, int h, int tid,
                                        bool write_r) const {
#pragma unroll
    for (int u = 0; u < NU; ++u) {
      const int i = tid + u * kNT;
      store_piece(p, qs, ks, xq[u], xk[u], t0, Cn, h, i / PR, 8 * (i % PR), write_r);
    }
  }
  // one 8-element piece of row r of q and of k: the row's sums of squares over its PR threads, the scaled
  // pieces into the tiles
  template <int P>
  __device__ __forceinline__ static void store_piece(const Params& p, float (*qs)[P], float (*ks)[P], uint4 pq, uint4 pk,
                                                     i64 t0, int Cn, int h, int r, int c8, bool write_r) {
    float fq[8], fk[8], sq = 0.f, sk = 0.f;
    cuda_util::unpack_bf16x8(pq, fq);
    cuda_util::unpack_bf16x8(pk, fk);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      sq += fq[e] * fq[e];
      sk += fk[e] * fk[e];
    }
#pragma unroll
    for (int o = PR / 2; o > 0; o >>= 1) {
      sq += __shfl_xor_sync(0xffffffffu, sq, o);
      sk += __shfl_xor_sync(0xffffffffu, sk, o);
    }
    const float rq = inv_l2norm(p, sq), rk = inv_l2norm(p, sk);
    *reinterpret_cast<float4*>(&qs[r][c8]) = make_float4(fq[0] * rq, fq[1] * rq, fq[2] * rq, fq[3] * rq);
    *reinterpret_cast<float4*>(&qs[r][c8 + 4]) = make_float4(fq[4] * rq, fq[5] * rq, fq[6] * rq, fq[7] * rq);
    *reinterpret_cast<float4*>(&ks[r][c8]) = make_float4(fk[0] * rk, fk[1] * rk, fk[2] * rk, fk[3] * rk);
    *reinterpret_cast<float4*>(&ks[r][c8 + 4]) = make_float4(fk[4] * rk, fk[5] * rk, fk[6] * rk, fk[7] * rk);
    if (write_r && c8 == 0 && r < Cn) {
      p.rq[(t0 + r) * p.H + h] = rq;
      p.rk[(t0 + r) * p.H + h] = rk;
    }
  }
};

// grad_k_v2's CTA pair at K = 256 where chunk_prep_v2 normalised the rows (qk_inline, no prep_qk): the CTA's channel
// half of the bf16 q / k rows by cp.async into a staging [2][64][KS] (zero past Cn), then times chunk_prep's rq / rk
// into the fp32 tiles, each thread its own pieces (visible to it after its cp.async wait). A warp's pieces lie in
// 2 NU rows; their 4 NU scales are loaded at the top, one per lane, and shuffled to the pieces' lanes (a register a
// lane: eight per thread took a stack frame; loaded just before the wait they cost their latency, +0.14 ms at D256).
// LaneScales = false (the SIMT tail, whose top-loaded dq_e / dk_e fragments leave no register: one spilled 44 bytes):
// each piece's scales are loaded where it is scaled.
template <int K, int KS>
struct ScaledQkHalf {
  static constexpr int PR = KS / 8, NU = kC * PR / kNT;  // 16-byte pieces per row, per thread
  float sc;  // lane l < 4 NU: (q: l < 2 NU, else k) of the warp's row 16 u + 2 warp + (l & 1), u = (l >> 1) % NU
  template <bool LaneScales>
  __device__ __forceinline__ void stage(const Params& p, bf16* stg, i64 t0, int Cn, int h, int c0, int tid) {
    static_assert(NU * kNT == kC * PR && PR == 16 && 4 * NU <= 32, "a warp's rows: 2 per piece round, scales in lanes");
    stage_qk_rows<K, KS>(p, stg, t0, Cn, h, c0, tid);
    if constexpr (LaneScales) {
      const int l = tid & 31, r = 16 * ((l >> 1) % NU) + 2 * (tid >> 5) + (l & 1);
      const i64 row = (t0 + min(r, Cn - 1)) * p.H + h;
      sc = (l & (2 * NU)) ? p.rk[row] : p.rq[row];
    }
  }
  template <bool LaneScales, int P>
  __device__ __forceinline__ void store(const Params& p, const bf16* stg, float (*qs)[P], float (*ks)[P], i64 t0, int Cn,
                                        int h, int tid) const {
    const int hr = (tid >> 4) & 1;  // the piece's row within the warp's pair
#pragma unroll
    for (int u = 0; u < NU; ++u) {
      const int i = tid + u * kNT, r = i / PR, c8 = 8 * (i % PR);
      float rq, rk;
      if constexpr (LaneScales) {
        rq = __shfl_sync(0xffffffffu, sc, 2 * u + hr);
        rk = __shfl_sync(0xffffffffu, sc, 2 * NU + 2 * u + hr);
      } else {
        const i64 row = (t0 + min(r, Cn - 1)) * p.H + h;
        rq = p.rq[row];
        rk = p.rk[row];
      }
      scaled_piece(*reinterpret_cast<const uint4*>(stg + r * KS + c8), rq, &qs[r][c8]);
      scaled_piece(*reinterpret_cast<const uint4*>(stg + (kC + r) * KS + c8), rk, &ks[r][c8]);
    }
  }
  __device__ __forceinline__ static void scaled_piece(uint4 x, float sc, float* dst) {
    float f[8];
    cuda_util::unpack_bf16x8(x, f);
    *reinterpret_cast<float4*>(dst) = make_float4(f[0] * sc, f[1] * sc, f[2] * sc, f[3] * sc);
    *reinterpret_cast<float4*>(dst + 4) = make_float4(f[4] * sc, f[5] * sc, f[6] * sc, f[7] * sc);
  }
};

struct NoScaledQkHalf {};  // grad_k_v2 at K <= 128

}  // namespace
}  // namespace lina::detail::cuda
