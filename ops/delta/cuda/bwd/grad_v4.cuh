// Stage D1 of the chunk_kda / chunk_gdn backward over the state passes' bf16 planes: grad_v4_kernel<K, Gen>.
// Part of the backward's one translation unit, chunk_delta_bwd.cu (whose anonymous namespace keeps these
// kernels and helpers internal to it); includes what it uses.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ops/delta/cuda/bwd/params.cuh"
#include "ops/delta/cuda/bwd/tile_ops.cuh"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/mma_primitives.cuh"

namespace lina::detail::cuda {
namespace {

// ---------------------------------------------------------------------------------------------
// D1, grad_v4 (the default where dO and dv are 16-byte aligned; grad_v_kernel otherwise). The state passes write
// dh[n], v_new and dvn as bf16 hi + lo planes and H_n as one plane where the inputs are bf16 (Params),
// so every operand is a ready bf16 plane that cp.async brings straight into ldmatrix tiles: no
// conversions, and each product runs only the terms its planes have (bf16 inputs: dq_e = dO H^T one mma.sync per
// tile, dw and dAqk / dTv two, dk_e three; grad_v3 split fp32 tiles into hi + lo planes and ran three everywhere).
// Gen (inputs not all bf16): H_n has its lo plane, dO and v of any dtype come through registers as hi + lo planes
// (after the sub-tile's barrier, one more barrier: the slow path), every product runs three terms, and two
// buffers take ~142 KB at K = 128 (one CTA per SM). The grid
// splits K in NKP parts of KH columns (blockIdx.x = NKP chunk + kh; the CTAs of a chunk share dO / v_new / dvn / v
// through L2): halves at K = 64 and 128, 64-column quarters at K = 256 (a 128-column half would double the
// accumulators past the 128-register cap of two CTAs per SM). CTA kh owns the columns k0 = kh KH .. of dq_e, dw,
// dk_e, hd, and kh = 0 also dAqk, kh = 1 dTv, dv and dbeta's v part (Tinv); kh >= 2 only the K-column products. One
// pass over V in 32-column sub-tiles, two buffers: sub-tile c + 1's loads fly during c's products.
constexpr int kGvCols = 32;  // V columns per sub-tile
constexpr int kGvP = 40;     // bf16 pitch of the sub-tiles (80-byte rows: ldmatrix and cp.async conflict-free)

// CTAs per (chunk, value head): the host launches grid (grad_v4_parts<K>() * chunks, HV)
template <int K>
constexpr int grad_v4_parts() {
  return K > 128 ? K / 64 : 2;
}

template <int K, bool Gen>
struct GradV4Smem {
  static constexpr int KH = K / grad_v4_parts<K>(), NP = Gen ? 2 : 1;  // planes of H, dO and v
  struct Stage {
    alignas(16) bf16 H[NP][KH][kGvP];  // H_n rows k0 .., sub-tile columns (hi, Gen: lo)
    alignas(16) bf16 D[2][KH][kGvP];   // dh[n] hi, lo
    alignas(16) bf16 dO[NP][kC][kGvP];
    alignas(16) bf16 vn[2][kC][kGvP];  // v_new hi, lo
    alignas(16) bf16 dvn[2][kC][kGvP]; // dvn hi, lo
    alignas(16) bf16 v[NP][kC][kGvP];  // kh = 1
  };
  Stage st[2];
  alignas(16) bf16 T[2][kC][72];  // Tinv hi / lo (kh = 1)
  float bs[kC];                   // GDN: the scalar gate cumsum
  float beta[kC];
  float dbp[kC];
};
static_assert(sizeof(GradV4Smem<128, false>) <= 113 * 1024, "grad_v4<128>: two CTAs per SM");
static_assert(sizeof(GradV4Smem<128, true>) <= 227 * 1024, "grad_v4<128, Gen> over the sm_90 limit");
static_assert(sizeof(GradV4Smem<256, false>) <= 113 * 1024, "grad_v4<256>: two CTAs per SM");
static_assert(sizeof(GradV4Smem<256, true>) <= 227 * 1024, "grad_v4<256, Gen> over the sm_90 limit");

template <int K, bool Gen>
constexpr size_t grad_v4_smem() {
  return sizeof(GradV4Smem<K, Gen>);
}

template <int K, bool Gen>
__global__ void __launch_bounds__(kNT, 2) grad_v4_kernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  using S = GradV4Smem<K, Gen>;
  auto& s = *reinterpret_cast<S*>(smem_raw);
  constexpr int KH = S::KH, NTK = KH / 16, NKP = grad_v4_parts<K>();  // n8 tiles of a warp's KH/2 columns; parts
  static_assert(NKP == 2 || NKP == 4, "K parts: a power of two");
  const int kh = blockIdx.x & (NKP - 1), hv = blockIdx.y, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2,
            t = lane & 3;
  const int k0 = kh * KH;
  const int m0 = 16 * (warp & 3), nk0 = (KH / 2) * (warp >> 2), n64 = 32 * (warp >> 2), nv0 = 16 * (warp >> 2);
  const ChunkInfo ci = chunk_info(p, blockIdx.x / NKP);
  // the 64 x 64 product aX: kh 0 dAqk, kh 1 dTv, none for kh >= 2 (NKP == 2: every CTA has one)
  const bool has_aX = NKP == 2 || kh < 2;
  // KDA: the CTAs without Tinv (kh != 1) stage their gate cumsum columns in T's space
  const auto gate_in_smem = [&] { return NKP == 2 ? kh == 0 : kh != 1; };
  const i64 t0 = ci.t0;
  const int Cn = ci.Cn, V = p.V;
  const bf16* Hg = p.Hs + ((static_cast<i64>(ci.gidx) * p.HV + hv) * K + k0) * V;
  const bf16* Dg = p.dHs + ((static_cast<i64>(ci.gidx) * p.HV + hv) * K + k0) * V;
  const bf16* dO = static_cast<const bf16*>(p.d_o);
  const bf16* vin = static_cast<const bf16*>(p.v);
  const i64 pk = p.plane_kv, pt = p.plane_tok;
  const auto off = [&](int r, int c) { return ((t0 + r) * p.HV + hv) * V + c; };
  // sub-tile c0's tiles into buffer st: 16-byte pieces, token rows past Cn zero-filled
  const auto issue = [&](typename S::Stage& st, int c0) {
    for (int i = tid; i < KH * 4; i += kNT) {
      const int r = i >> 2, c8 = 8 * (i & 3);
      const bf16* h = Hg + static_cast<i64>(r) * V + c0 + c8;
      const bf16* d = Dg + static_cast<i64>(r) * V + c0 + c8;
      cuda_util::cp_async16(&st.H[0][r][c8], h, true);
      if constexpr (Gen) cuda_util::cp_async16(&st.H[1][r][c8], h + pk, true);
      cuda_util::cp_async16(&st.D[0][r][c8], d, true);
      cuda_util::cp_async16(&st.D[1][r][c8], d + pk, true);
    }
#pragma unroll
    for (int u = 0; u < kC * 4 / kNT; ++u) {
      const int i = tid + u * kNT, r = i >> 2, c8 = 8 * (i & 3);
      const i64 o = off(min(r, Cn - 1), c0 + c8);
      const bool ok = r < Cn;
      if constexpr (!Gen) cuda_util::cp_async16(&st.dO[0][r][c8], dO + o, ok);
      cuda_util::cp_async16(&st.vn[0][r][c8], p.vnb + o, ok);
      cuda_util::cp_async16(&st.vn[1][r][c8], p.vnb + pt + o, ok);
      cuda_util::cp_async16(&st.dvn[0][r][c8], p.dvn + o, ok);
      cuda_util::cp_async16(&st.dvn[1][r][c8], p.dvn + pt + o, ok);
      if (!Gen && kh == 1) cuda_util::cp_async16(&st.v[0][r][c8], vin + o, ok);
    }
  };
  // KDA, kh != 1 (no T): the gate cumsum of the CTA's K columns for the epilogue in T's space, in the first load group;
  // pitch KH + 8: (g, t) float2 reads conflict-free. kh 1 reads it from L2 / HBM in the epilogue (staging it after the
  // loop spilled at the 128-register cap)
  float (*const gb)[KH + 8] = reinterpret_cast<float (*)[KH + 8]>(&s.T[0][0][0]);
  static_assert(sizeof(float) * kC * (KH + 8) <= sizeof(S::T), "the gate cumsum fits T's space");
  const auto stage_gate = [&] {
    for (int i = tid; i < kC * (KH / 4); i += kNT) {
      const int r = i / (KH / 4), c4 = 4 * (i % (KH / 4));
      cuda_util::cp_async16(&gb[r][c4], p.b + ((t0 + min(r, Cn - 1)) * p.HV + hv) * K + k0 + c4, r < Cn);
    }
  };
  issue(s.st[0], 0);
  if (p.kda && gate_in_smem()) stage_gate();
  cuda_util::cp_async_commit();
  if (!p.kda && tid < kC) s.bs[tid] = tid < Cn ? p.b[(t0 + tid) * p.HV + hv] : 0.f;
  if (kh == 1) {  // Tinv planes, beta
    constexpr int P6 = kC * 16 / kNT;
    float4 x[P6];
#pragma unroll
    for (int u = 0; u < P6; ++u) {
      const int i = tid + u * kNT, r = i >> 4, c = 4 * (i & 15);
      x[u] = r < Cn ? ld4(p.Tinv + ((t0 + r) * p.HV + hv) * kC + c) : kZero4;
    }
    if (tid < kC) {
      s.beta[tid] = tid < Cn ? p.bt[(t0 + tid) * p.HV + hv] : 0.f;
      s.dbp[tid] = 0.f;
    }
#pragma unroll
    for (int u = 0; u < P6; ++u) {
      const int i = tid + u * kNT, r = i >> 4, c = 4 * (i & 15);
      st_split4(&s.T[0][0][0], &s.T[1][0][0], r * 72 + c, x[u]);
    }
  }

  // dk_e = v_new dh^T, dq_e = dO H^T, dw = dvn H^T; aX: dAqk = dO v_new^T (kh 0) or dTv = dvn v^T (kh 1)
  float ak[NTK][4] = {}, aq[NTK][4] = {}, aw[NTK][4] = {}, aX[4][4] = {};
  float hdsum = 0.f;  // rowsum(H dh) of row k0 + tid (tid < KH)
  const int nsub = V / kGvCols;
#pragma unroll 1
  for (int it = 0; it < nsub; ++it) {
    typename S::Stage& st = s.st[it & 1];
    cuda_util::cp_async_wait_all();
    __syncthreads();  // sub-tile it has landed everywhere; it - 1's products are done (its buffer is free)
    if (it + 1 < nsub) issue(s.st[(it + 1) & 1], (it + 1) * kGvCols);
    cuda_util::cp_async_commit();
    if constexpr (Gen) {  // dO (and kh 1's v) of any dtype as hi + lo planes
      constexpr int PU = kC * 8 / kNT;  // float4 pieces of a [64][32] tile per thread
      const auto at = [&](bool on) {
        return [&, on](int u) {
          const int i = tid + u * kNT, r = i >> 3;
          return on && r < Cn ? off(r, it * kGvCols + 4 * (i & 7)) : i64{-1};
        };
      };
      float4 xo[PU], xv[PU];
      load4_batch<PU>(xo, p.d_o, p.do_t, at(true));
      load4_batch<PU>(xv, p.v, p.v_t, at(kh == 1));
#pragma unroll
      for (int u = 0; u < PU; ++u) {
        const int i = tid + u * kNT, r = i >> 3, c4 = 4 * (i & 7);
        st_split4(&st.dO[0][0][0], &st.dO[1][0][0], r * kGvP + c4, xo[u]);
        if (kh == 1) st_split4(&st.v[0][0][0], &st.v[1][0][0], r * kGvP + c4, xv[u]);
      }
      __syncthreads();
    }
    if (tid < KH) {  // H (dh_hi + dh_lo)
#pragma unroll
      for (int c = 0; c < kGvCols; c += 8) {
        const uint4 a = *reinterpret_cast<const uint4*>(&st.H[0][tid][c]);
        uint4 al = make_uint4(0u, 0u, 0u, 0u);
        if constexpr (Gen) al = *reinterpret_cast<const uint4*>(&st.H[1][tid][c]);
        const uint4 dh = *reinterpret_cast<const uint4*>(&st.D[0][tid][c]), dl = *reinterpret_cast<const uint4*>(&st.D[1][tid][c]);
        const std::uint32_t av[4] = {a.x, a.y, a.z, a.w}, alv[4] = {al.x, al.y, al.z, al.w}, hv4[4] = {dh.x, dh.y, dh.z, dh.w},
                            lv4[4] = {dl.x, dl.y, dl.z, dl.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float2 x = cuda_util::unpack_bf16(av[e]);
          const float2 y = cuda_util::unpack_bf16(hv4[e]), z = cuda_util::unpack_bf16(lv4[e]);
          if constexpr (Gen) {
            const float2 xl = cuda_util::unpack_bf16(alv[e]);
            x.x += xl.x, x.y += xl.y;
          }
          hdsum += x.x * (y.x + z.x) + x.y * (y.y + z.y);
        }
      }
    }
#pragma unroll
    for (int ks = 0; ks < kGvCols / 16; ++ks) {
      // acc[NT] += A B^T over this k-step: A = the 16 rows m0 .. of a [row][k] tile as hi (+ lo), B = NT n8 tiles
      // from row n0 of an [n][k] tile as hi (+ lo); the lo x lo term is left out (below the hi + lo precision)
      const auto products = [&](float (*acc)[4], const bf16* ah_t, const bf16* al_t, const bf16* bh_t, const bf16* bl_t, int n0,
                                auto nt) {
        std::uint32_t ah[4], al[4];
        cuda_util::ldsm_frag_a(ah, ah_t, kGvP, m0, 16 * ks, lane);
        if (al_t) cuda_util::ldsm_frag_a(al, al_t, kGvP, m0, 16 * ks, lane);
#pragma unroll
        for (int np = 0; np < decltype(nt)::value / 2; ++np) {
          std::uint32_t bh[4], bl[4];
          cuda_util::ldsm_frag_b_nk(bh, bh_t, kGvP, n0 + 16 * np, 16 * ks, lane);
          if (bl_t) cuda_util::ldsm_frag_b_nk(bl, bl_t, kGvP, n0 + 16 * np, 16 * ks, lane);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            cuda_util::mma_bf16_16816(acc[2 * np + h], ah, bh[2 * h], bh[2 * h + 1]);
            if (al_t) cuda_util::mma_bf16_16816(acc[2 * np + h], al, bh[2 * h], bh[2 * h + 1]);
            if (bl_t) cuda_util::mma_bf16_16816(acc[2 * np + h], ah, bl[2 * h], bl[2 * h + 1]);
          }
        }
      };
      using NtK = std::integral_constant<int, NTK>;
      using Nt4 = std::integral_constant<int, 4>;
      // the lo planes of H, dO and v (Gen only; else nullptr: the term is not issued)
      const bf16* const Hl = Gen ? &st.H[S::NP - 1][0][0] : nullptr;
      const bf16* const dOl = Gen ? &st.dO[S::NP - 1][0][0] : nullptr;
      const bf16* const vl = Gen ? &st.v[S::NP - 1][0][0] : nullptr;
      products(ak, &st.vn[0][0][0], &st.vn[1][0][0], &st.D[0][0][0], &st.D[1][0][0], nk0, NtK{});  // dk_e += v_new dh^T
      products(aq, &st.dO[0][0][0], dOl, &st.H[0][0][0], Hl, nk0, NtK{});                         // dq_e += dO H^T
      products(aw, &st.dvn[0][0][0], &st.dvn[1][0][0], &st.H[0][0][0], Hl, nk0, NtK{});             // dw += dvn H^T
      if (kh == 0) products(aX, &st.dO[0][0][0], dOl, &st.vn[0][0][0], &st.vn[1][0][0], n64, Nt4{});  // dAqk += dO v_new^T
      else if (has_aX) products(aX, &st.dvn[0][0][0], &st.dvn[1][0][0], &st.v[0][0][0], vl, n64, Nt4{});  // dTv += dvn v^T
    }
    if (kh == 1) {  // dvb = Tinv^T dvn (rows r only meet m >= r); dv = dvb beta; dbeta += rowsum(dvb v)
      float acc[2][4] = {};
#pragma unroll 1
      for (int ks = m0 >> 4; ks < kC / 16; ++ks) {
        std::uint32_t ah[4], al[4], bh[4], bl[4];
        cuda_util::ldsm_frag_a_trans(ah, &s.T[0][0][0], 72, m0, ks * 16, lane);
        cuda_util::ldsm_frag_a_trans(al, &s.T[1][0][0], 72, m0, ks * 16, lane);
        cuda_util::ldsm_frag_b_kn(bh, &st.dvn[0][0][0], kGvP, 16 * ks, nv0, lane);
        cuda_util::ldsm_frag_b_kn(bl, &st.dvn[1][0][0], kGvP, 16 * ks, nv0, lane);
        cuda_util::mma_bf16_16816_split(acc[0], ah, al, bh[0], bh[1], bl[0], bl[1]);
        cuda_util::mma_bf16_16816_split(acc[1], ah, al, bh[2], bh[3], bl[2], bl[3]);
      }
      const int c0 = it * kGvCols;
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int r = m0 + g + 8 * hf;
        const float br = s.beta[r];
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          const int c = nv0 + nt * 8 + 2 * t;
          float2 vv = cuda_util::unpack_bf16(*reinterpret_cast<const std::uint32_t*>(&st.v[0][r][c]));
          if constexpr (Gen) {
            const float2 l = cuda_util::unpack_bf16(*reinterpret_cast<const std::uint32_t*>(&st.v[1][r][c]));
            vv.x += l.x, vv.y += l.y;
          }
          const float x0 = acc[nt][2 * hf], x1 = acc[nt][2 * hf + 1];
          sum += x0 * vv.x + x1 * vv.y;
          if (r < Cn) store2_as(p.dv, p.dv_t, off(r, c0 + c), x0 * br, x1 * br);
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if (t == 0 && r < Cn) atomicAdd(&s.dbp[r], sum);
      }
    }
  }
  if (tid < KH) p.hd[(static_cast<i64>(ci.gidx) * p.HV + hv) * K + k0 + tid] = hdsum;
  if (kh == 1) {
    __syncthreads();  // dbeta's row sums are complete
    if (tid < Cn) p.dbp[(t0 + tid) * p.HV + hv] = s.dbp[tid];
  }
  // the gate cumsum: GDN's scalars and the staged KDA rows (kh != 1) from shared memory, kh 1's KDA rows from L2 / HBM
  const i64 bLrow = (t0 + Cn - 1) * p.HV + hv;
  const auto gate2 = [&](i64 row, int r, int cl) {
    return !p.kda ? make_float2(s.bs[r], s.bs[r]) : gate_in_smem() ? ld2(&gb[r][cl]) : ld2(p.b + row * K + k0 + cl);
  };
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int r = m0 + g + 8 * hf;
    if (r >= Cn) continue;
    const i64 row = (t0 + r) * p.HV + hv;
#pragma unroll
    for (int nt = 0; nt < NTK; ++nt) {
      const int cl = nk0 + nt * 8 + 2 * t, c = k0 + cl;
      const float2 br = gate2(row, r, cl), bL = gate2(bLrow, Cn - 1, cl);
      st2(p.dke + row * K + c, __expf(fminf(bL.x - br.x, 0.f)) * ak[nt][2 * hf], __expf(fminf(bL.y - br.y, 0.f)) * ak[nt][2 * hf + 1]);
      st2(p.dqe + row * K + c, p.scale * __expf(br.x) * aq[nt][2 * hf], p.scale * __expf(br.y) * aq[nt][2 * hf + 1]);
      st2(p.dw + row * K + c, -aw[nt][2 * hf], -aw[nt][2 * hf + 1]);
    }
    if (!has_aX) continue;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int c = n64 + nt * 8 + 2 * t;
      if (kh == 0)
        st2(p.dAqk + row * kC + c, c <= r ? p.scale * aX[nt][2 * hf] : 0.f, c + 1 <= r ? p.scale * aX[nt][2 * hf + 1] : 0.f);
      else
        st2(p.dTv + row * kC + c, c < r ? aX[nt][2 * hf] : 0.f, c + 1 < r ? aX[nt][2 * hf + 1] : 0.f);
    }
  }
}

}  // namespace
}  // namespace lina::detail::cuda
