// Pieces every chunk_gla forward kernel family shares: the chunk and range constants, the work item
// and kernel parameters, the gate scan, the causal A store and the mma.sync o / state steps.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "ops/common/cuda/mma_primitives.cuh"

namespace lina::detail::cuda {
namespace {  // one translation unit (chunk_gla_fwd.cu) includes the forward kernels

using namespace cuda_util;

constexpr int kC = 64;  // chunk
constexpr float kLog2e = 1.4426950408889634f;
// Fast path when |b - rho| <= kLim for the whole chunk: q 2^(b-rho) and k 2^(rho-b) then stay within
// 2^100 of q and k (bf16 range 2^-126 .. 2^127), and A's causal products q k 2^(b_r - b_j) are <= q k.
constexpr float kLim = 100.f;

// One CTA row of work: a segment (whole chunks) of one sequence. A sequence is cut into nseg segments
// when there are too few (sequence, head) pairs to fill the GPU (see plan_segments).
struct WorkItem {
  std::int64_t row_begin;  // first token of the segment
  int length;              // tokens in the segment
  int seq;                 // sequence index (h0 / ht)
  int seg, nseg;           // segment index within the sequence, segment count
  int slot0;               // pass-1 slot of the sequence's segment 0 (segment u < nseg - 1 uses slot0 + u)
};

// mode: 0 one pass; 1 split pass 1 (local states of segments 0..nseg-2 from zero, with their decays);
// 2 split pass 2 (initial state of segment s combined from h0 and the pass-1 results of segments < s).
struct Params {
  const __nv_bfloat16 *q, *k, *v;
  const __nv_bfloat16* g;
  const float* h0;
  __nv_bfloat16* o;
  float* ht;
  const WorkItem* items;  // varlen: one per CTA row; nullptr: dense, see work_item
  int dense_T, dense_nseg;  // dense: every sequence has dense_T rows, cut into dense_nseg segments
  float* seg_state;  // [slots, H, K, V] local final state of each segment but the last of its sequence
  float* seg_decay;  // [slots, H, K] product of the segment's decays per channel
  int H, K, V;
  int mode;
  float scale;
};

// A CTA row's work. Dense inputs need no table on the device: their segment plan is arithmetic (the
// same cut for every sequence, as plan_segments makes it), so no upload sits in the call's host path.
__device__ __forceinline__ WorkItem work_item(const Params& p, int z) {
  if (p.items) return p.items[z];
  const int ns = p.dense_nseg, n = z / ns, u = z % ns;
  const std::int64_t nch = (p.dense_T + kC - 1) / kC;
  const int t0 = static_cast<int>(u * nch / ns) * kC, t1 = min(p.dense_T, static_cast<int>((u + 1) * nch / ns) * kC);
  return {static_cast<std::int64_t>(n) * p.dense_T + t0, t1 - t0, n, u, ns, n * (ns - 1)};
}

__device__ __forceinline__ void unpack8(const uint4& u, float (&x)[8]) {
  const std::uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 f = unpack_bf16(w[e]);
    x[2 * e] = f.x;
    x[2 * e + 1] = f.y;
  }
}
// Tile addressing of a padded-rows tile (rows LD elements apart): T is the type a tile is addressed in,
// offset(row, col) the offset of element (row, col) in T units. wg128's swizzled tiles have their own.
template <int LD>
struct PaddedRows {
  using T = __nv_bfloat16;
  static __device__ __forceinline__ int offset(int row, int col) { return row * LD + col; }
};

// One 16x16 block (rb, jb) of A from its two m16n8 accumulators: the causal mask by select (the masked
// side may be inf), then A = hi + lo in bf16, in tiles laid out as Addr (PaddedRows; wg128's
// swizzled blocks). v4 and v5 write A the same way.
template <class Addr>
__device__ __forceinline__ void store_causal_block_split(typename Addr::T* hi_s, typename Addr::T* lo_s, const float (&acc)[2][4], int rb,
                                                         int jb, int g8, int t4) {
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = rb * 16 + g8 + hh * 8, jc = jb * 16 + t * 8 + 2 * t4;
      const float x0 = jc > r ? 0.f : acc[t][2 * hh];
      const float x1 = jc + 1 > r ? 0.f : acc[t][2 * hh + 1];
      const std::uint32_t hi = pack_bf16(x0, x1);
      const float2 hf = unpack_bf16(hi);
      const auto o = Addr::offset(r, jc);
      *reinterpret_cast<std::uint32_t*>(hi_s + o) = hi;
      *reinterpret_cast<std::uint32_t*>(lo_s + o) = pack_bf16(x0 - hf.x, x1 - hf.y);
    }
}

// A = causal(qe kr^T) of a 64-row chunk by mma.sync, qe and kr in padded rows (pitch ld, K channels):
// the 10 causal 16x16 blocks (rb >= jb), block i = w + NW bi on warp w; aacc[bi] of a block i >= 10 is zero.
template <int K, int NB, int NW>
__device__ __forceinline__ void causal_a_blocks(float (&aacc)[NB][2][4], const __nv_bfloat16* sq, const __nv_bfloat16* sg, int ld, int w,
                                                int lane) {
#pragma unroll
  for (int bi = 0; bi < NB; ++bi) {
    const int i = w + NW * bi;
    const int rb = (i >= 1) + (i >= 3) + (i >= 6), jb = i - rb * (rb + 1) / 2;
#pragma unroll
    for (int t = 0; t < 2; ++t) aacc[bi][t][0] = aacc[bi][t][1] = aacc[bi][t][2] = aacc[bi][t][3] = 0.f;
    if (i < 10) {
#pragma unroll 4
      for (int ks = 0; ks < K / 16; ++ks) {
        std::uint32_t a[4], b[4];
        ldsm_frag_a(a, sq, ld, rb * 16, ks * 16, lane);
        ldsm_frag_b_nk(b, sg, ld, jb * 16, ks * 16, lane);
        mma_bf16_16816(aacc[bi][0], a, b[0], b[1]);
        mma_bf16_16816(aacc[bi][1], a, b[2], b[3]);
      }
    }
  }
}
// Those blocks of warp w to A hi + lo (tiles laid out as Addr).
template <class Addr, int NB, int NW>
__device__ __forceinline__ void store_causal_a(typename Addr::T* sAh, typename Addr::T* sAl, const float (&aacc)[NB][2][4], int w, int g8,
                                               int t4) {
#pragma unroll
  for (int bi = 0; bi < NB; ++bi) {
    const int i = w + NW * bi;
    if (i >= 10) continue;
    const int rb = (i >= 1) + (i >= 3) + (i >= 6), jb = i - rb * (rb + 1) / 2;
    store_causal_block_split<Addr>(sAh, sAl, aacc[bi], rb, jb, g8, t4);
  }
}

__device__ __forceinline__ uint4 pack8(const float (&x)[8]) {
  return make_uint4(pack_bf16(x[0], x[1]), pack_bf16(x[2], x[3]), pack_bf16(x[4], x[5]), pack_bf16(x[6], x[7]));
}

// ---- Pieces shared by v5 (K = 128) and the K = 256 prep / state kernels (one definition each). ----

// Serial gate scan of NR rows (log2 units) for the channel pair cp, cp + 1, from row r0 of a g tile laid
// out as Addr: the rows' sum `run` and the lowest / highest running sum (v5 producer pass 1).
template <int NR, class Addr>
__device__ __forceinline__ void gate_rows_scan(const typename Addr::T* sg, int r0, int cp, float2& run, float2& lo, float2& hi) {
  run = make_float2(0.f, 0.f);
  lo = hi = run;
#pragma unroll
  for (int i = 0; i < NR; ++i) {
    const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sg + Addr::offset(r0 + i, cp)));
    run.x += x.x * kLog2e;
    run.y += x.y * kLog2e;
    lo = i ? make_float2(fminf(lo.x, run.x), fminf(lo.y, run.y)) : run;
    hi = i ? make_float2(fmaxf(hi.x, run.x), fmaxf(hi.y, run.y)) : run;
  }
}
// Steep test of those rows, whose running sums start at `off` relative to rho: |b_r - rho| is largest
// at the lowest or highest running sum; the last sum carries a NaN of any row (fminf / fmaxf drop NaN).
// (v5's producer keeps the same test written out in place: through this call its SASS changed.)
__device__ __forceinline__ bool range_bad(float2 off, float2 run, float2 lo, float2 hi) {
  return !(fabsf(off.x + lo.x) <= kLim) || !(fabsf(off.x + hi.x) <= kLim) || !(fabsf(off.x + run.x) <= kLim) ||
         !(fabsf(off.y + lo.y) <= kLim) || !(fabsf(off.y + hi.y) <= kLim) || !(fabsf(off.y + run.y) <= kLim);
}

// Consumer state layout (v5, D256 state kernel): a warp holds H^T for 16 value columns vc0.. and NCH
// channels in m16n8 accumulators, ht[nt][e] = H[ch][v], ch = nt * 8 + 2 t4 + (e & 1) (relative to the
// warp's first channel), v = vc0 + g8 + (e >= 2 ? 8 : 0).
// o[rb] += qe[rows 16 rb.., NCH channels] @ bf16(2^rho H): the accumulator layout of H^T is the B
// fragment layout of this product, so the fragments are built in registers. sRe, sq start at the
// warp's first channel.
template <int NCH>
__device__ __forceinline__ void o_from_state(float (&oacc)[4][2][4], const float (&ht)[NCH / 8][4], const float* sRe,
                                             const __nv_bfloat16* sq, int ldq, int lane) {
  const int t4 = lane & 3;
#pragma unroll
  for (int ks = 0; ks < NCH / 16; ++ks) {
    const float2 r0 = *reinterpret_cast<const float2*>(sRe + ks * 16 + 2 * t4);
    const float2 r8 = *reinterpret_cast<const float2*>(sRe + ks * 16 + 8 + 2 * t4);
    const std::uint32_t b00 = pack_bf16(ht[2 * ks][0] * r0.x, ht[2 * ks][1] * r0.y);
    const std::uint32_t b01 = pack_bf16(ht[2 * ks + 1][0] * r8.x, ht[2 * ks + 1][1] * r8.y);
    const std::uint32_t b10 = pack_bf16(ht[2 * ks][2] * r0.x, ht[2 * ks][3] * r0.y);
    const std::uint32_t b11 = pack_bf16(ht[2 * ks + 1][2] * r8.x, ht[2 * ks + 1][3] * r8.y);
#pragma unroll
    for (int rb = 0; rb < 4; ++rb) {
      std::uint32_t a[4];
      ldsm_frag_a(a, sq, ldq, rb * 16, ks * 16, lane);
      mma_bf16_16816(oacc[rb][0], a, b00, b01);
      mma_bf16_16816(oacc[rb][1], a, b10, b11);
    }
  }
}
// o[rb] += A_hi @ v + A_lo @ v over the causal blocks kk <= rb, for the row blocks with own(rb) (per
// accumulator the order of v4).
template <class Own>
__device__ __forceinline__ void o_add_av(float (&oacc)[4][2][4], const __nv_bfloat16* sAh, const __nv_bfloat16* sAl, int lda,
                                         const __nv_bfloat16* sv, int ldv, int vc0, int lane, Own own) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    std::uint32_t b[4];
    ldsm_frag_b_kn(b, sv, ldv, kk * 16, vc0, lane);
#pragma unroll
    for (int rb = 0; rb < 4; ++rb) {
      if (rb < kk || !own(rb)) continue;
      std::uint32_t ah[4], al[4];
      ldsm_frag_a(ah, sAh, lda, rb * 16, kk * 16, lane);
      ldsm_frag_a(al, sAl, lda, rb * 16, kk * 16, lane);
      mma_bf16_16816(oacc[rb][0], ah, b[0], b[1]);
      mma_bf16_16816(oacc[rb][1], ah, b[2], b[3]);
      mma_bf16_16816(oacc[rb][0], al, b[0], b[1]);
      mma_bf16_16816(oacc[rb][1], al, b[2], b[3]);
    }
  }
}
// H = diag(2^bL) H + ke^T @ v, as H^T = H^T diag(2^bL) + v^T @ ke. sDl, sk start at the warp's first channel.
template <int NCH>
__device__ __forceinline__ void state_update(float (&ht)[NCH / 8][4], const float* sDl, const __nv_bfloat16* sv, int ldv, int vc0,
                                             const __nv_bfloat16* sk, int ldk, int lane) {
  const int t4 = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NCH / 8; ++nt) {
    const float2 d = *reinterpret_cast<const float2*>(sDl + nt * 8 + 2 * t4);
    ht[nt][0] *= d.x;
    ht[nt][1] *= d.y;
    ht[nt][2] *= d.x;
    ht[nt][3] *= d.y;
  }
#pragma unroll
  for (int ks = 0; ks < kC / 16; ++ks) {
    std::uint32_t a[4];
    ldsm_frag_a_trans(a, sv, ldv, vc0, ks * 16, lane);
#pragma unroll
    for (int np = 0; np < NCH / 16; ++np) {
      std::uint32_t b[4];
      ldsm_frag_b_kn(b, sk, ldk, ks * 16, np * 16, lane);
      mma_bf16_16816(ht[2 * np], a, b[0], b[1]);
      mma_bf16_16816(ht[2 * np + 1], a, b[2], b[3]);
    }
  }
}

template <int NPW>
__device__ __forceinline__ bool any_steep(const int* flags) {
  int f = 0;
#pragma unroll
  for (int w = 0; w < NPW; ++w) f |= flags[w];
  return f != 0;
}

}  // namespace
}  // namespace lina::detail::cuda
