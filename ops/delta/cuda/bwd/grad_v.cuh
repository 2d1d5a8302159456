// Stage D1, the first tensor-core grad_v_kernel<K> (operands through registers as hi + lo planes): the
// backward's D1 where dO or dv is not 16-byte aligned, and the simt variant's.
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
// D1, grad_v (where dO or dv is not 16-byte aligned, and in the simt variant; grad_v4 otherwise): per (chunk,
// value head), products over V on tensor cores (operands as bf16 hi + lo, fp32 accumulators; H_n, dh[n], v_new and
// dvn arrive as the state passes' planes). Warp tiles: rows m0 = 16 (warp % 4) of the chunk; columns nk0 (K/2 of K) for the
// [64][K] products, n64 (32 of 64) for the [64][64] ones.
//   pass 1 over V tiles: dq_e += dO H^T, dw += dvn H^T, dAqk += dO vn^T, dTv += dvn v^T,
//                        dv = beta Tinv^T dvn (final), dbeta += rowsum((Tinv^T dvn) v), hd += rowsum(H dh)
//   pass 2 over V tiles (last tile first: it is still in shared memory): dk_e += v_new dh^T
template <int K>
struct GradVSmem {
  alignas(16) bf16 H[2][K][72];  // [channel][value]
  alignas(16) bf16 D[2][K][72];
  alignas(16) bf16 dO[2][kC][72];
  alignas(16) bf16 vn[2][kC][72];
  alignas(16) bf16 dvn[2][kC][72];
  alignas(16) bf16 v[2][kC][72];
  alignas(16) bf16 T[2][kC][72];  // Tinv [r][j]
  float beta[kC];
  float dbp[kC];
};

template <int K>
__global__ void __launch_bounds__(kNT, 1) grad_v_kernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& s = *reinterpret_cast<GradVSmem<K>*>(smem_raw);
  constexpr int NK = K / 16;  // n8 tiles of a warp's K/2 columns
  const int hv = blockIdx.y, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int m0 = 16 * (warp & 3), nk0 = (K / 2) * (warp >> 2), n64 = 32 * (warp >> 2);
  const ChunkInfo ci = chunk_info(p, blockIdx.x);
  const i64 t0 = ci.t0;
  const int Cn = ci.Cn, V = p.V;
  const bf16* Hg = p.Hs + (static_cast<i64>(ci.gidx) * p.HV + hv) * K * V;
  const bf16* Dg = p.dHs + (static_cast<i64>(ci.gidx) * p.HV + hv) * K * V;
  const i64 hlo = p.h_lo ? p.plane_kv : 0;
  const auto off = [&](int r, int c0, int c) { return ((t0 + r) * p.HV + hv) * V + c0 + c; };
  fill_split<kC, kC, 72>(&s.T[0][0][0], &s.T[1][0][0], [&](int r, int c) {
    return r < Cn ? ld4(p.Tinv + ((t0 + r) * p.HV + hv) * kC + c) : kZero4;
  });
  if (tid < kC) {
    s.beta[tid] = tid < Cn ? p.bt[(t0 + tid) * p.HV + hv] : 0.f;
    s.dbp[tid] = 0.f;
  }
  float aq[NK][4] = {}, aw[NK][4] = {}, aA[4][4] = {}, aT[4][4] = {};
  float hdsum = 0.f;
#pragma unroll 1
  for (int vt = 0; vt < p.nvt; ++vt) {
    const int c0 = vt * kVT;
    __syncthreads();
    fill_split<K, kVT, 72>(&s.H[0][0][0], &s.H[1][0][0], [&](int r, int c) { return ld4_planes(Hg + static_cast<i64>(r) * V + c0 + c, hlo); });
    fill_split<K, kVT, 72>(&s.D[0][0][0], &s.D[1][0][0], [&](int r, int c) { return ld4_planes(Dg + static_cast<i64>(r) * V + c0 + c, p.plane_kv); });
    fill_split<kC, kVT, 72>(&s.dO[0][0][0], &s.dO[1][0][0], [&](int r, int c) {
      return r < Cn ? load4_as_float(p.d_o, p.do_t, off(r, c0, c)) : kZero4;
    });
    fill_split<kC, kVT, 72>(&s.vn[0][0][0], &s.vn[1][0][0], [&](int r, int c) { return r < Cn ? ld4_planes(p.vnb + off(r, c0, c), p.plane_tok) : kZero4; });
    fill_split<kC, kVT, 72>(&s.dvn[0][0][0], &s.dvn[1][0][0], [&](int r, int c) { return r < Cn ? ld4_planes(p.dvn + off(r, c0, c), p.plane_tok) : kZero4; });
    fill_split<kC, kVT, 72>(&s.v[0][0][0], &s.v[1][0][0], [&](int r, int c) {
      return r < Cn ? load4_as_float(p.v, p.v_t, off(r, c0, c)) : kZero4;
    });
    __syncthreads();
    if (tid < K) {  // rowsum(H dh) from the hi + lo copies (~16 significant bits each)
      float sum = 0.f;
#pragma unroll 4
      for (int c = 0; c < kVT; c += 2) {
        const float2 hh = cuda_util::unpack_bf16(*reinterpret_cast<const std::uint32_t*>(&s.H[0][tid][c]));
        const float2 hl = cuda_util::unpack_bf16(*reinterpret_cast<const std::uint32_t*>(&s.H[1][tid][c]));
        const float2 dh = cuda_util::unpack_bf16(*reinterpret_cast<const std::uint32_t*>(&s.D[0][tid][c]));
        const float2 dl = cuda_util::unpack_bf16(*reinterpret_cast<const std::uint32_t*>(&s.D[1][tid][c]));
        sum += (hh.x + hl.x) * (dh.x + dl.x) + (hh.y + hl.y) * (dh.y + dl.y);
      }
      hdsum += sum;
    }
    warp_mma_split<NK, false, true>(aq, &s.dO[0][0][0], &s.dO[1][0][0], 72, m0, &s.H[0][0][0], &s.H[1][0][0], 72, nk0, 0,
                                    kVT / 16, lane);
    warp_mma_split<NK, false, true>(aw, &s.dvn[0][0][0], &s.dvn[1][0][0], 72, m0, &s.H[0][0][0], &s.H[1][0][0], 72, nk0, 0,
                                    kVT / 16, lane);
    warp_mma_split<4, false, true>(aA, &s.dO[0][0][0], &s.dO[1][0][0], 72, m0, &s.vn[0][0][0], &s.vn[1][0][0], 72, n64, 0,
                                   kVT / 16, lane);
    warp_mma_split<4, false, true>(aT, &s.dvn[0][0][0], &s.dvn[1][0][0], 72, m0, &s.v[0][0][0], &s.v[1][0][0], 72, n64, 0,
                                   kVT / 16, lane);
    {  // dvb = Tinv^T dvn (Tinv lower triangular: rows r only meet m >= r); dv = dvb beta; dbeta += rowsum(dvb v)
      float acc[4][4] = {};
      warp_mma_split<4, true>(acc, &s.T[0][0][0], &s.T[1][0][0], 72, m0, &s.dvn[0][0][0], &s.dvn[1][0][0], 72, n64, m0 >> 4,
                              kC / 16, lane);
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int r = m0 + g + 8 * hf;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          const int c = n64 + nt * 8 + 2 * t;
          const float2 vh = cuda_util::unpack_bf16(*reinterpret_cast<const std::uint32_t*>(&s.v[0][r][c]));
          const float2 vl = cuda_util::unpack_bf16(*reinterpret_cast<const std::uint32_t*>(&s.v[1][r][c]));
          const float x0 = acc[nt][2 * hf], x1 = acc[nt][2 * hf + 1];
          sum += x0 * (vh.x + vl.x) + x1 * (vh.y + vl.y);
          if (r < Cn) {
            store_as(p.dv, p.dv_t, off(r, c0, c), x0 * s.beta[r]);
            store_as(p.dv, p.dv_t, off(r, c0, c + 1), x1 * s.beta[r]);
          }
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if (t == 0 && r < Cn) atomicAdd(&s.dbp[r], sum);
      }
    }
  }
  // pass-1 results: gate factors, scratch
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int r = m0 + g + 8 * hf;
    if (r >= Cn) continue;
    const i64 row = (t0 + r) * p.HV + hv;
#pragma unroll
    for (int nt = 0; nt < NK; ++nt) {
      const int c = nk0 + nt * 8 + 2 * t;
      const float2 br = p.kda ? ld2(p.b + row * p.Kg + c) : make_float2(p.b[row], p.b[row]);
      st2(p.dqe + row * K + c, p.scale * __expf(br.x) * aq[nt][2 * hf], p.scale * __expf(br.y) * aq[nt][2 * hf + 1]);
      st2(p.dw + row * K + c, -aw[nt][2 * hf], -aw[nt][2 * hf + 1]);
    }
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int c = n64 + nt * 8 + 2 * t;
      st2(p.dAqk + row * kC + c, c <= r ? p.scale * aA[nt][2 * hf] : 0.f, c + 1 <= r ? p.scale * aA[nt][2 * hf + 1] : 0.f);
      st2(p.dTv + row * kC + c, c < r ? aT[nt][2 * hf] : 0.f, c + 1 < r ? aT[nt][2 * hf + 1] : 0.f);
    }
  }
  // pass 2: dk_e = v_new dh^T
  float ak[NK][4] = {};
#pragma unroll 1
  for (int vt = p.nvt - 1; vt >= 0; --vt) {
    const int c0 = vt * kVT;
    if (vt != p.nvt - 1) {
      __syncthreads();
      fill_split<K, kVT, 72>(&s.D[0][0][0], &s.D[1][0][0], [&](int r, int c) { return ld4_planes(Dg + static_cast<i64>(r) * V + c0 + c, p.plane_kv); });
      fill_split<kC, kVT, 72>(&s.vn[0][0][0], &s.vn[1][0][0], [&](int r, int c) { return r < Cn ? ld4_planes(p.vnb + off(r, c0, c), p.plane_tok) : kZero4; });
      __syncthreads();
    }
    warp_mma_split<NK, false, true>(ak, &s.vn[0][0][0], &s.vn[1][0][0], 72, m0, &s.D[0][0][0], &s.D[1][0][0], 72, nk0, 0,
                                    kVT / 16, lane);
  }
  const i64 bLrow = ((t0 + Cn - 1) * p.HV + hv) * p.Kg;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int r = m0 + g + 8 * hf;
    if (r >= Cn) continue;
    const i64 row = (t0 + r) * p.HV + hv;
#pragma unroll
    for (int nt = 0; nt < NK; ++nt) {
      const int c = nk0 + nt * 8 + 2 * t;
      const float2 br = p.kda ? ld2(p.b + row * p.Kg + c) : make_float2(p.b[row], p.b[row]);
      const float2 bL = p.kda ? ld2(p.b + bLrow + c) : make_float2(p.b[bLrow], p.b[bLrow]);
      st2(p.dke + row * K + c, __expf(fminf(bL.x - br.x, 0.f)) * ak[nt][2 * hf], __expf(fminf(bL.y - br.y, 0.f)) * ak[nt][2 * hf + 1]);
    }
  }
  if (tid < K) p.hd[(static_cast<i64>(ci.gidx) * p.HV + hv) * K + tid] = hdsum;
  __syncthreads();
  if (tid < Cn) p.dbp[(t0 + tid) * p.HV + hv] = s.dbp[tid];
}

}  // namespace
}  // namespace lina::detail::cuda
