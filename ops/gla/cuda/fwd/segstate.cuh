// Split pass 1, chunk-parallel (docs/kernels/chunk_gla_fwd.md, "Segment states"). A segment's local
// final state needs no o, A or q: with B_t the cumulative gate (log2 units) within a piece of R rows and
// e_t = B_end - B_t = the gate sum over the rows after t,
//   L_new = diag(2^(B_end - B_begin)) L + sum_t (k_t 2^(e_t))^T v_t
// so a piece is one GEMM over R = 128 tokens instead of two chained chunk steps, and no producer /
// consumer hand-over is on the chain. e_t <= 0 for decaying gates, so kd = k 2^e never overflows; a
// piece with some e_t > kLim (growing gates) or a NaN takes the exact token recurrence instead. Writes
// seg_state / seg_decay exactly as mode 1 of the chunk kernels does; pass 2 (mode 2) is unchanged.
// p.mode: 1, or 3 = every piece by the exact recurrence (kSegstateExact: the variant exact_segment_states).
#pragma once
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/gla/cuda/fwd/common.cuh"

namespace lina::detail::cuda {
namespace {  // one translation unit (chunk_gla_fwd.cu) includes the forward kernels

using namespace cuda_util;

template <int K, int VT>
struct SegCfg {
  static constexpr int R = 128;                       // rows per piece
  static constexpr int NW = VT / 16, NT = NW * 32;    // warp w: value columns 16 w .. (the consumer state layout)
  static constexpr int NGRP = NT / (K / 2);           // scan: thread = (channel pair, row group)
  static constexpr int GR = R / NGRP;                 // rows per scan group
  static constexpr int MINB = K == 64 ? 2 : 1;
  static constexpr int kQ = K + 8, kVs = VT + 8;      // padded rows: conflict-free ldmatrix
  static constexpr std::size_t tile_k = 1ull * R * kQ * 2, tile_v = 1ull * R * kVs * 2;
  static constexpr std::size_t off_g = tile_k, off_v = 2 * tile_k, stage_bytes = 2 * tile_k + tile_v;
  static constexpr std::size_t off_tot = 2 * stage_bytes;           // [NGRP][K] group gate sums
  static constexpr std::size_t off_dec = off_tot + 4ull * NGRP * K;  // [K] 2^(piece gate sum)
  static constexpr std::size_t off_one = off_dec + 4ull * K;         // [K] ones (second half of a piece)
  static constexpr std::size_t smem = off_one + 4ull * K;
  static_assert(NGRP >= 1 && NGRP * (K / 2) == NT && R % NGRP == 0 && R == 2 * kC, "scan layout; a piece is two chunk-sized halves");
  static_assert((R * K / 8) % NT == 0 && (R * VT / 8) % NT == 0, "copy layout");
  static_assert(MINB * (smem + 1024) <= 228ull * 1024, "shared memory per SM");
};

template <int K, int VT>
__global__ void __launch_bounds__(SegCfg<K, VT>::NT, SegCfg<K, VT>::MINB) chunk_gla_fwd_segstate(Params p) {
  using C = SegCfg<K, VT>;
  constexpr int R = C::R, NT = C::NT, GR = C::GR, kQ = C::kQ, kVs = C::kVs;
  extern __shared__ __align__(16) unsigned char smem[];
  float* sTot = reinterpret_cast<float*>(smem + C::off_tot);
  float* sDec = reinterpret_cast<float*>(smem + C::off_dec);
  float* sOne = reinterpret_cast<float*>(smem + C::off_one);
  auto tile = [&](int st, std::size_t off) { return reinterpret_cast<__nv_bfloat16*>(smem + st * C::stage_bytes + off); };

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  const int j0 = blockIdx.x * VT, h = blockIdx.y;
  const WorkItem s = work_item(p, blockIdx.z);
  if (s.seg == s.nseg - 1) return;  // the last segment's local state is not needed
  const int npieces = (s.length + R - 1) / R;
  for (int c = tid; c < K; c += NT) sOne[c] = 1.f;

  auto issue = [&](int u, int st) {  // rows u R .. of the segment: k, g, v; rows past its end zero-filled
    const int rows = min(R, s.length - u * R);
#pragma unroll
    for (int j = 0; j < R * K / 8 / NT; ++j) {
      const int i = tid + j * NT, r = i / (K / 8), c = (i % (K / 8)) * 8;
      const bool ok = r < rows;
      const std::int64_t o = ok ? ((s.row_begin + u * R + r) * p.H + h) * K + c : 0;
      cp_async16(tile(st, 0) + r * kQ + c, p.k + o, ok);
      cp_async16(tile(st, C::off_g) + r * kQ + c, p.g + o, ok);
    }
#pragma unroll
    for (int j = 0; j < R * VT / 8 / NT; ++j) {
      const int i = tid + j * NT, r = i / (VT / 8), c = (i % (VT / 8)) * 8;
      const bool ok = r < rows;
      const std::int64_t o = ok ? ((s.row_begin + u * R + r) * p.H + h) * p.V + j0 + c : 0;
      cp_async16(tile(st, C::off_v) + r * kVs + c, p.v + o, ok);
    }
  };

  // Scan layout: thread = channel pair cp, cp + 1 and row group grp (GR rows); state: v5's consumer layout.
  const int cp = 2 * (tid % (K / 2)), grp = tid / (K / 2), r0 = grp * GR;
  const int vc0 = warp * 16;
  float ht[K / 8][4] = {};
  float2 segdec = make_float2(1.f, 1.f);  // group 0: the segment decay of channels cp, cp + 1
  if (npieces > 0) issue(0, 0);
  cp_async_commit();
  for (int u = 0; u < npieces; ++u) {
    const int st = u & 1;
    if (u + 1 < npieces) issue(u + 1, st ^ 1);  // its stage was last read before the previous loop end barrier
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();  // piece u landed for every thread
    __nv_bfloat16 *sk = tile(st, 0), *sg = tile(st, C::off_g), *sv = tile(st, C::off_v);
    float2 sum = make_float2(0.f, 0.f);
#pragma unroll 8
    for (int i = 0; i < GR; ++i) {
      const float2 x = load_bf16x2(sg + (r0 + i) * kQ + cp);
      sum.x += x.x * kLog2e;
      sum.y += x.y * kLog2e;
    }
    *reinterpret_cast<float2*>(sTot + grp * K + cp) = sum;
    __syncthreads();
    float2 after = make_float2(0.f, 0.f), total = make_float2(0.f, 0.f);
#pragma unroll
    for (int q = 0; q < C::NGRP; ++q) {
      const float2 t = *reinterpret_cast<const float2*>(sTot + q * K + cp);
      total.x += t.x;
      total.y += t.y;
      if (q > grp) {
        after.x += t.x;
        after.y += t.y;
      }
    }
    // kd = k 2^(e), e = the gate sum over the rows after this one, walking the group's rows backwards.
    bool bad = false;
#pragma unroll 8
    for (int i = GR - 1; i >= 0; --i) {
      const int o = (r0 + i) * kQ + cp;
      bad |= !(after.x <= kLim) || !(after.y <= kLim);
      const float2 kk = load_bf16x2(sk + o);
      *reinterpret_cast<std::uint32_t*>(sk + o) = pack_bf16(kk.x * ex2(after.x), kk.y * ex2(after.y));
      const float2 x = load_bf16x2(sg + o);
      after.x += x.x * kLog2e;
      after.y += x.y * kLog2e;
    }
    if (grp == 0) {
      const float2 d = make_float2(ex2(total.x), ex2(total.y));
      *reinterpret_cast<float2*>(sDec + cp) = d;
      segdec.x *= d.x;
      segdec.y *= d.y;
    }
    if (!__syncthreads_or(bad || p.mode == 3)) {  // kd, sDec complete
      state_update<K>(ht, sDec, sv, kVs, vc0, sk, kQ, lane);                    // rows 0..63, then the decay of the piece
      state_update<K>(ht, sOne, sv + kC * kVs, kVs, vc0, sk + kC * kQ, kQ, lane);  // rows 64..127
    } else {
      // Exact token recurrence (v5's steep chunk) with the raw k from global memory (sk holds kd).
      const int rows = min(R, s.length - u * R);
      for (int t = 0; t < rows; ++t) {
        const float vlo = __bfloat162float(sv[t * kVs + vc0 + g8]), vhi = __bfloat162float(sv[t * kVs + vc0 + g8 + 8]);
        const __nv_bfloat16* kr = p.k + ((s.row_begin + u * R + t) * p.H + h) * K;
#pragma unroll
        for (int nt = 0; nt < K / 8; ++nt) {
          const int ch = nt * 8 + 2 * t4;
          const float2 gg = load_bf16x2(sg + t * kQ + ch);
          const float2 kk = load_bf16x2(kr + ch);
          const float d0 = ex2(gg.x * kLog2e), d1 = ex2(gg.y * kLog2e);
          ht[nt][0] = fmaf(ht[nt][0], d0, kk.x * vlo);
          ht[nt][1] = fmaf(ht[nt][1], d1, kk.y * vlo);
          ht[nt][2] = fmaf(ht[nt][2], d0, kk.x * vhi);
          ht[nt][3] = fmaf(ht[nt][3], d1, kk.y * vhi);
        }
      }
    }
    __syncthreads();  // every read of this stage and of sTot / sDec is done
  }
  const std::int64_t sb = (static_cast<std::int64_t>(s.slot0 + s.seg) * p.H + h) * K;
#pragma unroll
  for (int nt = 0; nt < K / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int ch = nt * 8 + 2 * t4 + (e & 1), v = vc0 + g8 + (e >= 2 ? 8 : 0);
      p.seg_state[(sb + ch) * p.V + j0 + v] = ht[nt][e];
    }
  if (grp == 0) {
    p.seg_decay[sb + cp] = segdec.x;
    p.seg_decay[sb + cp + 1] = segdec.y;
  }
}

}  // namespace
}  // namespace lina::detail::cuda
