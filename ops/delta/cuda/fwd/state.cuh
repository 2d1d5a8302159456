// chunk_gdn / chunk_kda forward: the thin-workspace path (docs/kernels/chunk_delta_fwd.md, "Thin
// workspace").
// Part of the forward's one translation unit, chunk_delta_fwd.cu (whose anonymous namespace keeps these
// kernels and helpers internal to it); includes what it uses.
//
// GDN's gate is a scalar per token and the l2 norms are scalars per token, so neither has to be
// applied to q and k before the products. With rq_i = 1 / |q_i|, rk_j = 1 / |k_j| (1 without the
// in-kernel norm), b the chunk's log2 cumsum of the gate, bL its last row and T = (I + A)^-1:
//   A_ij  = beta_i rk_i rk_j 2^(b_i - b_j) k_i . k_j        (j < i)
//   T'    = T diag(beta)
//   Q'_ij = scale rq_i rk_j 2^(b_i - b_j) q_i . k_j          (j <= i)
// the chunk's recurrence with the entering state H [K][V] reads, on the raw bf16 q, k, v:
//   v_new = T' (v - diag(c1) k H)             c1_j = 2^(b_j) rk_j
//   o     = diag(c2) q H + Q' v_new            c2_i = scale 2^(b_i) rq_i
//   H'    = 2^(bL) H + k^T diag(c3) v_new      c3_j = rk_j 2^(bL - b_j)
// 1. gdn_wg_prep_kernel (gdn_prep.cuh: per chunk and value head, persistent, one warpgroup per CTA;
//    it replaced gdn_thin_prep_kernel, 8 warps and mma.sync) writes only T' and Q' (bf16
//    hi + lo, Q' one plane; SW128 rows) and c1, c2, c3, 2^bL: 25 KB per chunk
//    and head instead of the split path's 96.5 KB (w, q e^b, k e^(bL-b), Aqk, u in fp32). No q / k rewrite, no w, no u.
// 2. delta_thin_state_kernel<false, K, VW> (one warpgroup per sequence, value head and 64-column V tile;
//    VW = 2: two such warpgroups of one head per CTA, sharing the chunk's tiles) loads q, k, v itself (cp.async into SW128 tiles) and runs the products above on wgmma, H^T in
//    registers; v_new costs one more product (X T'^T) than the removed split path's u - w H.
// KDA takes the same state kernel (delta_thin_state_kernel<true, K, VW>) after kda_prep_kernel
// (chunk_delta_fwd.cu): its per-channel gate has to be applied to q and k in the prep, so the prep still
// writes q e^b, k e^(bL-b) and Aqk, and k e^b where the split path wrote w = T' k e^b; it writes T'
// instead of u = T' v (no value tiles, no w / u products in the prep; 72.5 KB per chunk and head).
// Numerics: v - diag(c1) k H is rounded to bf16 once (a difference of the chunk's values and the
// state's prediction, so its rounding is relative to the innovation, not to u or w H); T' enters as
// hi + lo; Q' and v_new enter o as one bf16 plane each (kQPlanes, chunk_delta_fwd.cu; FLA's map).
#pragma once
#include <cstddef>
#include <cstdint>

#include "ops/delta/cuda/fwd/params.cuh"
#include "ops/delta/cuda/fwd/tile_ops.cuh"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/mbarrier.cuh"
#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/common/cuda/wgmma_sm90.cuh"

namespace lina::detail::cuda {
namespace {

// ---- the state kernel (both ops): one warpgroup per (sequence, value head, 64-column V tile); H^T
// [64 V][K] as the fp32 accumulator of an m64nK wgmma (thread layout: ht[4 nt + e] = H^T(v = vrow +
// 8 (e >= 2), ch = 8 nt + 2 t4 + (e & 1)), vrow = 16 warp + lane / 4).
// Per chunk, with GDN's factors (KDA: c1 = c3 = 1, c2 = scale; its per-channel gate is in the tiles):
//   batch 1: S^T = bf16(H^T) k1^T, P^T = bf16(H^T) q1^T (K / 16 m64n64k16 each)
//   X^T = v^T - S^T diag(c1) (bf16; v^T by ldmatrix.trans), then v_new^T = X^T T'^T (T' hi and lo)
//   batch 2: o^T = P^T diag(c2) + v_new^T Q'^T (4 m64n64k16; 12 with hi / lo terms, kQPlanes = 2)
//   batch 3: H^T = diag(2^bL) H^T + (v_new^T diag(c3)) k3 (4 m64nKk16, B = k3 MN-major)
// Operands: GDN q1 = q, k1 = k3 = k (raw, cp.async into SW128 tiles; k double-buffered by chunk
// parity since batch 3 still reads chunk ci's k when ci + 1's arrives). KDA q1 = q e^b, k1 = k e^b,
// k3 = k e^(bL-b), written by the thin KDA prep in the blocked SW128 layout (bulk copies).
// K = 256: two warpgroups split the channels (KH = 128 each): batch 1's
// partial sums meet in shared memory (S^T whole in both, P^T for the warpgroup's 32 tokens of o), both
// compute X and v_new whole, each its 32 o tokens and its channel half of the state update.
// K <= 128 with VW = 2: two warpgroups, each its own 64-column V tile of the same (sequence, value head),
// share the chunk's q / k / T' / Q' (/ k3, 2^bL, factors) tiles: one read of them per head instead of one
// per V tile (the KDA state kernel was DRAM-bound with 16 % L2 hits on the second tile's reads).
// Loads: q1, k1 and v of chunk ci + 1 once batch 1 of ci is done everywhere (v double-buffered);
// T', Q' and the factors (GDN) / k3, T', Q', 2^bL (KDA) of chunk ci at its top (measured for GDN:
// issuing those one chunk ahead, which needs one more CTA barrier per chunk, is 1-2 % slower at the
// large shapes, where two CTAs share an SM).
// Top tiles (T', Q' and GDN's factors / KDA's k3 and 2^bL) in NB buffers: KDA's V-tile pairs (one CTA per SM, no
// second CTA to cover the loads' latency) bring chunk ci + 1's during chunk ci; else each chunk's at its top.
template <bool KDA, int VW>
constexpr int kThinTopBufs = KDA && VW == 2 ? 2 : 1;
template <bool KDA, int K, int VW>
struct ThinStateSmem {
  static constexpr int NB = kThinTopBufs<KDA, VW>;
  bf16 q[kC * K];      // SW128 tiles [K / 64][C][64] (1 KB aligned: the struct sits at a 1 KB boundary)
  bf16 k[2][kC * K];   // GDN: k by chunk parity; KDA: [0] k e^b, [1] k e^(bL-b) (top buffer 0)
  bf16 k3[NB == 2 ? kC * K : 512];  // KDA, two top buffers: k e^(bL-b) of top buffer 1 (else unused, 1 KB)
  bf16 v[VW][2][kC * kC];  // per V tile: [token][64 value columns], SW128, chunk parity
  bf16 t[NB][kTPlanes][kC * kC];  // T' hi, lo
  bf16 a[NB][kQPlanes][kC * kC];  // Q' (hi, lo with two planes)
  float sc[KDA ? 1 : 4][kC];  // GDN: c1, c2, c3, 2^bL
  float el[NB][KDA ? K : 1];  // KDA: 2^bL per channel
  alignas(16) bf16 o[VW][kC][kC + 8];  // per V tile: o [token][value column], padded (16-byte row pieces to HBM)
  // K = 256: batch 1's partials per warpgroup, S^T (8 float4 per thread) then the partner's 32 tokens of
  // P^T (4 float4); [warpgroup][float4 index][thread of the warpgroup]
  float4 x[K == 256 ? 2 : 1][K == 256 ? 12 : 1][128];
  std::uint64_t bar[2];  // [0] T', Q' (+ factors / k3, 2^bL) of top buffer 0, [1] KDA: q e^b, k e^b
  std::uint64_t bar_top1;  // top buffer 1
};
template <bool KDA, int K, int VW>
constexpr std::size_t kThinStateSmemBytes = sizeof(ThinStateSmem<KDA, K, VW>) + 1024;  // + manual 1 KB alignment
static_assert(kThinStateSmemBytes<false, 128, 1> <= 113 * 1024 && kThinStateSmemBytes<true, 128, 1> <= 113 * 1024,
              "thin state K=128: two CTAs per SM");
static_assert(kThinStateSmemBytes<false, 256, 1> <= 227 * 1024 && kThinStateSmemBytes<true, 256, 1> <= 227 * 1024 &&
                  kThinStateSmemBytes<false, 128, 2> <= 227 * 1024 && kThinStateSmemBytes<true, 128, 2> <= 227 * 1024,
              "thin state over the sm_90 limit");
// threads of a state CTA: two warpgroups at K = 256 (channel halves), VW warpgroups below (V tiles)
template <int K, int VW>
constexpr int kThinStateThreads = K == 256 ? 256 : 128 * VW;

template <bool KDA, int K, int VW>
__global__ void __launch_bounds__(kThinStateThreads<K, VW>, 1) delta_thin_state_kernel(const Params p) {
  using wgmma::Major;
  using S = ThinStateSmem<KDA, K, VW>;
  static_assert(VW == 1 || (VW == 2 && K <= 128), "V-tile pairs below K = 256 only");
  constexpr bool KSPLIT = K == 256;  // the warpgroups split the channels (else: one V tile each)
  constexpr int NKS = KSPLIT ? 2 : 1, KH = K / NKS, NO = 64 / NKS, NTH = kThinStateThreads<K, VW>;  // channel halves, their channels, o tokens
  constexpr int VTH = KSPLIT ? NTH : 128;  // threads that load / store one V tile
  static_assert(offsetof(S, q) % 1024 == 0 && offsetof(S, k) % 1024 == 0 && offsetof(S, v) % 1024 == 0 &&
                    offsetof(S, t) % 1024 == 0 && offsetof(S, a) % 1024 == 0 && offsetof(S, k3) % 1024 == 0 && offsetof(S, sc) % 16 == 0 &&
                    offsetof(S, el) % 16 == 0 && offsetof(S, o) % 16 == 0 && offsetof(S, bar) % 8 == 0,
                "SW128 tiles 1 KB aligned; bulk copies 16-byte aligned");
  constexpr std::uint32_t kQkBytes = kC * K * 2;
  static_assert(kQkBytes == kTileBytes<K>, "a q / k tile = a workspace tile");
  extern __shared__ __align__(16) unsigned char thin_state_smem_raw[];
  unsigned char* const sm_base = thin_state_smem_raw + ((1024u - (smem_u32(thin_state_smem_raw) & 1023u)) & 1023u);
  S& s = *reinterpret_cast<S*>(sm_base);
  const int tid = threadIdx.x, lane = tid & 31, warp = (tid >> 5) & 3, g8 = lane >> 2, t4 = lane & 3, tw = tid & 127;
  const int vrow = 16 * warp + g8;  // this thread's value columns: vrow, vrow + 8
  // the warpgroup through a shuffle: warp-uniform for ptxas (no wgmma under a branch on it: that serialises them all)
  const int wg = NTH == 128 ? 0 : __shfl_sync(0xffffffffu, tid >> 7, 0);
  const int kh = KSPLIT ? wg : 0, vw = KSPLIT ? 0 : wg;  // channel half; V tile of the CTA
  const int ch0 = KH * kh;  // the warpgroup's first channel
  const int vi = KSPLIT ? tid : tw;  // index among the threads of the V tile

  int bid = blockIdx.x;
  const int nvc = p.nvt / VW;  // CTAs per (sequence, value head)
  const int vt = VW * (bid % nvc) + vw;
  bid /= nvc;
  const int hv = bid % p.HV;
  const int n = bid / p.HV;
  const int h = hv / p.G;
  const SeqDesc sd = p.seqs.at(n);
  const int V = p.V, vcol0 = vt * kVT;
  const int nchunks = (sd.length + kC - 1) / kC;
  auto chunk_id = [&](int ci) { return (static_cast<long>(sd.chunk_off) + ci) * p.HV + hv; };

  // q1, k1 (GDN: cp.async of the raw rows; KDA: thread 0's bulk copies) and v (cp.async) of chunk ci
  auto load_next = [&](int ci) {
    const long t0 = sd.row_begin + static_cast<long>(ci) * kC;
    const int Cn = min(kC, sd.length - ci * kC);
    if constexpr (KDA) {
      if (tid == 0) {
        const long c = chunk_id(ci);
        mbar_arrive_expect_tx(&s.bar[1], 2 * kQkBytes);
        bulk_copy_g2s(s.q, p.ws.qg + c * kC * K, kQkBytes, &s.bar[1]);
        bulk_copy_g2s(s.k[0], p.ws.ke + c * kC * K, kQkBytes, &s.bar[1]);
      }
    } else {
      constexpr int QV = K / 8;
      bf16* const kb = s.k[ci & 1];
#pragma unroll
      for (int j = 0; j < kC * QV / NTH; ++j) {
        const int i = tid + NTH * j, r = i / QV, c8 = i % QV;
        const long row = (t0 + min(r, Cn - 1)) * p.H + h;
        const int off = wgmma::sw128_blocked<kC>(r, 8 * c8);
        cp_async16(s.q + off, p.q + row * K + 8 * c8, r < Cn);
        cp_async16(kb + off, p.k + row * K + 8 * c8, r < Cn);
      }
    }
    bf16* const vb = s.v[vw][ci & 1];
#pragma unroll
    for (int j = 0; j < kC * 8 / VTH; ++j) {
      const int i = vi + VTH * j, r = i >> 3, c8 = i & 7;
      cp_async16(vb + wgmma::sw128(r, 8 * c8), p.v + ((t0 + min(r, Cn - 1)) * p.HV + hv) * V + vcol0 + 8 * c8, r < Cn);
    }
  };
  constexpr int NB = S::NB;
  const auto top_bar = [&](int bb) { return bb ? &s.bar_top1 : &s.bar[0]; };
  const auto k3_tile = [&](int bb) { return bb ? s.k3 : s.k[1]; };
  auto issue_top = [&](int ci) {  // thread 0 only; top buffer ci % NB
    const long c = chunk_id(ci);
    const int bb = NB == 2 ? (ci & 1) : 0;
    std::uint64_t* const bar = top_bar(bb);
    if constexpr (KDA) {
      mbar_arrive_expect_tx(bar, kTTileBytes + kQTileBytes + kQkBytes + K * 4);
      bulk_copy_g2s(k3_tile(bb), p.ws.kg + c * kC * K, kQkBytes, bar);
      bulk_copy_g2s(s.el[bb], p.ws.el + c * K, K * 4, bar);
    } else {
      mbar_arrive_expect_tx(bar, kTTileBytes + kQTileBytes + 4 * kC * 4);
      bulk_copy_g2s(&s.sc[0][0], p.tw.sc + c * 4 * kC, 4 * kC * 4, bar);
    }
    bulk_copy_g2s(&s.t[bb][0][0], p.tw.t + c * kTTileElems, kTTileBytes, bar);
    bulk_copy_g2s(&s.a[bb][0][0], (KDA ? p.ws.a : p.tw.a) + c * kQTileElems, kQTileBytes, bar);
  };
  if (tid == 0) {
    mbar_init(&s.bar[0], 1);
    mbar_init(&s.bar[1], 1);
    mbar_init(&s.bar_top1, 1);
    mbar_init_fence();
  }
  if (nchunks > 0) load_next(0);
  cp_async_commit();

  float ht[KH / 2];  // H^T accumulator (m64nKH) over the warpgroup's channels
  const long sbase = (static_cast<long>(n) * p.HV + hv) * K * V;
#pragma unroll
  for (int i = 0; i < KH / 2; ++i) {
    const int ch = ch0 + 8 * (i >> 2) + 2 * t4 + (i & 1), v = vrow + ((i & 2) << 2);
    ht[i] = p.h0 ? p.h0[sbase + static_cast<long>(ch) * V + vcol0 + v] : 0.f;
  }

  auto store_o = [&](int cj) {  // after a CTA barrier
    const long t0 = sd.row_begin + static_cast<long>(cj) * kC;
    const int Cn = min(kC, sd.length - cj * kC);
#pragma unroll
    for (int j = 0; j < 512 / VTH; ++j) {
      const int u = vi + VTH * j, r = u >> 3, c8 = u & 7;
      if (r < Cn)
        *reinterpret_cast<uint4*>(p.o + ((t0 + r) * p.HV + hv) * V + vcol0 + 8 * c8) = *reinterpret_cast<const uint4*>(&s.o[vw][r][8 * c8]);
    }
  };

  // the warpgroup's channel tiles (64-channel SW128 tiles of 8 KB; warpgroup kh starts at tile KH / 64 kh)
  const std::uint32_t tile0 = static_cast<std::uint32_t>(kh * (KH / 64) * 8192);
  const std::uint32_t a_q = smem_u32(s.q) + tile0, a_k0 = smem_u32(s.k[0]) + tile0;
  // ldmatrix.trans of v^T's A fragments: matrix m = lane / 8 holds tokens 8 (m >> 1) .., value columns
  // 16 warp + 8 (m & 1) ..; the lane gives row lane % 8 of it (k step ks adds 16 tokens)
  const int vm = lane >> 3;
  const std::uint32_t a_v0 = smem_u32(s.v[vw][0]);
#pragma unroll 1
  for (int ci = 0; ci < nchunks; ++ci) {
    cp_async_wait<0>();               // chunk ci's cp.async pieces of this thread (GDN q, k; v)
    wgmma::fence_proxy_async_smem();  // ... before the wgmma reads them
    __syncthreads();                  // everyone's pieces; chunk ci - 1 finished (o tile complete, T' / Q' read)
    if (tid == 0) {  // two buffers: chunk ci + 1's top tiles into the buffer chunk ci - 1 has released
      if (NB == 1 || ci == 0) issue_top(ci);
      if (NB == 2 && ci + 1 < nchunks) issue_top(ci + 1);
    }
    const int bb = NB == 2 ? (ci & 1) : 0;
    const std::uint32_t a_t = smem_u32(&s.t[bb][0][0]);
    const std::uint32_t a_a = smem_u32(&s.a[bb][0][0]) + static_cast<std::uint32_t>(kh * NO * 128);  // Q' rows NO kh ..
    if (ci > 0) store_o(ci - 1);
    if constexpr (KDA) mbar_wait(&s.bar[1], ci & 1);  // q e^b, k e^b of chunk ci
    // the products with H_n: k1 = k[ci & 1] (GDN) / k[0] (KDA); batch 3's k3 = the same (GDN) / k[1]
    const std::uint32_t a_k1 = a_k0 + (KDA ? 0u : static_cast<std::uint32_t>(ci & 1) * kQkBytes);
    const std::uint32_t a_k3 = KDA ? smem_u32(k3_tile(bb)) + tile0 : a_k1;

    // ---- batch 1: sacc = bf16(H^T) k1^T, pacc = bf16(H^T) q1^T
    std::uint32_t af[KH / 16][4];
#pragma unroll
    for (int ks = 0; ks < KH / 16; ++ks)
#pragma unroll
      for (int j = 0; j < 4; ++j) af[ks][j] = pack_bf16(ht[8 * ks + 2 * j], ht[8 * ks + 2 * j + 1]);
    float sacc[32], pacc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) sacc[i] = pacc[i] = 0.f;
    wgmma::fence_regs<32>(sacc);
    wgmma::fence_regs<32>(pacc);
    wgmma::fence_regs<KH / 4>(&af[0][0]);
    cute::warpgroup_arrive();
#pragma unroll
    for (int ks = 0; ks < KH / 16; ++ks)  // channels 16 ks ..: tile ks / 4, 32 bytes per k-step inside it
      wgmma::mma_rs<wgmma::M64N64_RS<Major::K>, 32>(af[ks], wgmma::desc_k(a_k1 + (ks >> 2) * 8192 + (ks & 3) * 32), sacc);
#pragma unroll
    for (int ks = 0; ks < KH / 16; ++ks)
      wgmma::mma_rs<wgmma::M64N64_RS<Major::K>, 32>(af[ks], wgmma::desc_k(a_q + (ks >> 2) * 8192 + (ks & 3) * 32), pacc);
    cute::warpgroup_commit_batch();
    cute::warpgroup_wait<0>();
    wgmma::fence_regs<32>(sacc);
    wgmma::fence_regs<32>(pacc);
    wgmma::fence_regs<KH / 4>(&af[0][0]);
    // o tokens NO kh .. of P^T: pacc[NO / 2 kh + i] (a select, not an indexed register)
    float oacc[NO / 2];
#pragma unroll
    for (int i = 0; i < NO / 2; ++i) oacc[i] = !KSPLIT ? pacc[i] : (kh ? pacc[16 + (i & 15)] : pacc[i]);
    if constexpr (KSPLIT) {  // partial sums to the partner: S^T whole, P^T of its 32 tokens
      float4* const xo = &s.x[kh][0][tw];
#pragma unroll
      for (int q = 0; q < 8; ++q) xo[128 * q] = make_float4(sacc[4 * q], sacc[4 * q + 1], sacc[4 * q + 2], sacc[4 * q + 3]);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        float y[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) y[e] = kh ? pacc[4 * q + e] : pacc[16 + 4 * q + e];
        xo[128 * (8 + q)] = make_float4(y[0], y[1], y[2], y[3]);
      }
    }

    __syncthreads();  // every warp's batch-1 reads of q1, k1 done; chunk ci - 1's o tile stored; partials visible
    if (ci + 1 < nchunks) load_next(ci + 1);
    cp_async_commit();
    if constexpr (KSPLIT) {  // own + partner (the same fp32 sum in both warpgroups)
      const float4* const xp = &s.x[kh ^ 1][0][tw];
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        const float4 y = xp[128 * q];
        sacc[4 * q] += y.x, sacc[4 * q + 1] += y.y, sacc[4 * q + 2] += y.z, sacc[4 * q + 3] += y.w;
      }
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const float4 y = xp[128 * (8 + q)];
        oacc[4 * q] += y.x, oacc[4 * q + 1] += y.y, oacc[4 * q + 2] += y.z, oacc[4 * q + 3] += y.w;
      }
    }
    mbar_wait(top_bar(bb), (NB == 2 ? ci >> 1 : ci) & 1);  // T', Q', factors / k3, 2^bL of chunk ci

    // ---- X^T = v^T - S^T diag(c1) as the A fragments of k-step ks (tokens 16 ks ..)
    std::uint32_t xf[4][4];
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      std::uint32_t vr[4];
      const int tok = 16 * ks + 8 * (vm >> 1) + (lane & 7), vc = 16 * warp + 8 * (vm & 1);
      ldsm_x4_trans_at(vr, a_v0 + static_cast<std::uint32_t>((ci & 1) * kC * kC * 2 + 2 * wgmma::sw128(tok, vc)));
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int i = 4 * ks + q;
        const float2 vv = unpack_bf16_bits(vr[q]);
        float2 c1 = make_float2(1.f, 1.f);
        if constexpr (!KDA) c1 = *reinterpret_cast<const float2*>(&s.sc[0][8 * (i >> 1) + 2 * t4]);
        xf[ks][q] = pack_bf16(vv.x - c1.x * sacc[2 * i], vv.y - c1.y * sacc[2 * i + 1]);
      }
    }
    // ---- v_new^T = X^T (T'_hi + T'_lo)^T
    float nacc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) nacc[i] = 0.f;
    wgmma::fence_regs<32>(nacc);
    wgmma::fence_regs<16>(&xf[0][0]);
    cute::warpgroup_arrive();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      wgmma::mma_rs<wgmma::M64N64_RS<Major::K>, 32>(xf[ks], wgmma::desc_k(a_t + ks * 32), nacc);
      if constexpr (kTPlanes == 2)
        wgmma::mma_rs<wgmma::M64N64_RS<Major::K>, 32>(xf[ks], wgmma::desc_k(a_t + kTTileBytes / 2 + ks * 32), nacc);
    }
    cute::warpgroup_commit_batch();
    cute::warpgroup_wait<0>();
    wgmma::fence_regs<32>(nacc);
    wgmma::fence_regs<16>(&xf[0][0]);

    // o^T starts as P^T diag(c2); H^T decays; v_new^T in bf16 (o) and times c3 (state update)
#pragma unroll
    for (int i = 0; i < NO / 2; i += 2) {
      float2 c2 = make_float2(p.scale, p.scale);
      if constexpr (!KDA) c2 = *reinterpret_cast<const float2*>(&s.sc[1][NO * kh + 8 * (i >> 2) + 2 * t4]);
      oacc[i] *= c2.x;
      oacc[i + 1] *= c2.y;
    }
    if constexpr (KDA) {
#pragma unroll
      for (int i = 0; i < KH / 2; i += 2) {
        const float2 e = *reinterpret_cast<const float2*>(&s.el[bb][ch0 + 8 * (i >> 2) + 2 * t4]);
        ht[i] *= e.x;
        ht[i + 1] *= e.y;
      }
    } else {
      const float el = s.sc[3][0];
#pragma unroll
      for (int i = 0; i < KH / 2; ++i) ht[i] *= el;
    }
    std::uint32_t vh[4][4], vl[4][4], vs[4][4];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      if constexpr (kQPlanes == 2)
        pack_bf16_split(nacc[2 * i], nacc[2 * i + 1], vh[i >> 2][i & 3], vl[i >> 2][i & 3]);
      else
        vh[i >> 2][i & 3] = pack_bf16(nacc[2 * i], nacc[2 * i + 1]);
      if constexpr (KDA) {
        vs[i >> 2][i & 3] = vh[i >> 2][i & 3];
      } else {
        const float2 c3 = *reinterpret_cast<const float2*>(&s.sc[2][8 * (i >> 1) + 2 * t4]);
        vs[i >> 2][i & 3] = pack_bf16(nacc[2 * i] * c3.x, nacc[2 * i + 1] * c3.y);
      }
    }

    // ---- batch 2 (o) then batch 3 (state)
    wgmma::fence_regs<NO / 2>(oacc);
    wgmma::fence_regs<KH / 2>(ht);
    wgmma::fence_regs<16>(&vh[0][0]);
    if constexpr (kQPlanes == 2) wgmma::fence_regs<16>(&vl[0][0]);
    wgmma::fence_regs<16>(&vs[0][0]);
    cute::warpgroup_arrive();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {  // tokens j = 16 ks ..: 32 bytes per k-step in Q''s rows
      wgmma::mma_rs<wgmma::M64_RS<NO, Major::K>, NO / 2>(vh[ks], wgmma::desc_k(a_a + ks * 32), oacc);
      if constexpr (kQPlanes == 2) {  // Q'_hi v_lo + Q'_lo v_hi
        wgmma::mma_rs<wgmma::M64_RS<NO, Major::K>, NO / 2>(vh[ks], wgmma::desc_k(a_a + kQTileBytes / 2 + ks * 32), oacc);
        wgmma::mma_rs<wgmma::M64_RS<NO, Major::K>, NO / 2>(vl[ks], wgmma::desc_k(a_a + ks * 32), oacc);
      }
    }
    cute::warpgroup_commit_batch();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks)  // tokens 16 ks ..: 16 rows = 2048 bytes; 64-channel tiles 8 KB apart
      wgmma::mma_rs<wgmma::M64_RS<KH, Major::MN>, KH / 2>(vs[ks], wgmma::desc_mn(a_k3 + ks * 2048, 8192), ht);
    cute::warpgroup_commit_batch();
    cute::warpgroup_wait<1>();  // o done (the state batch may still run)
    wgmma::fence_regs<NO / 2>(oacc);
#pragma unroll
    for (int i = 0; i < NO / 2; ++i)
      s.o[vw][NO * kh + 8 * (i >> 2) + 2 * t4 + (i & 1)][vrow + ((i & 2) << 2)] = __float2bfloat16_rn(oacc[i]);
    cute::warpgroup_wait<0>();
    wgmma::fence_regs<KH / 2>(ht);
    wgmma::fence_regs<16>(&vh[0][0]);
    if constexpr (kQPlanes == 2) wgmma::fence_regs<16>(&vl[0][0]);
    wgmma::fence_regs<16>(&vs[0][0]);
  }
  if (nchunks > 0) {
    __syncthreads();
    store_o(nchunks - 1);
  }
  if (p.ht) {
#pragma unroll
    for (int i = 0; i < KH / 2; ++i) {
      const int ch = ch0 + 8 * (i >> 2) + 2 * t4 + (i & 1), v = vrow + ((i & 2) << 2);
      p.ht[sbase + static_cast<long>(ch) * V + vcol0 + v] = ht[i];
    }
  }
}

}  // namespace
}  // namespace lina::detail::cuda
