// Stage D2 of the chunk_kda / chunk_gdn backward on tensor cores: grad_k_v2_kernel<K, Tail> (docs/kernels/
// chunk_delta_bwd.md, "grad_v4 and grad_k_v2"); D1's grad_v4 is grad_v4.cuh.
// Part of the backward's one translation unit, chunk_delta_bwd.cu (whose anonymous namespace keeps these
// kernels and helpers internal to it); includes what it uses.
//
// Same math and outputs as the kernels they replaced (mma.sync, fp32 accumulators). grad_k_v2 keeps every operand as
// a bf16 hi + lo pair; grad_v4 takes the state passes' bf16 planes as they are (one plane for H_n, dO and v where the
// inputs are bf16). What differs is latency: the replaced kernels ran one CTA per SM with dependent global round
// trips that left the SM idle.
//  - grad_k_v2: every prologue load in flight at once (q, k, b, dAqk, dTv by cp.async into 16-byte
//    aligned fp32 rows; dw and Tinv through registers into hi + lo planes; the db epilogue's dq_e / dk_e
//    fragments prefetched into registers), instead of ~18 dependent batches. The intra-chunk loop
//    reads 16 rows of dA / dAkk as four float4 broadcasts (row-major for the later-rows loop and the
//    diagonal blocks, from transposed copies for the earlier-keys loop) instead of 16 scalar loads. At K = 256 a
//    cluster of two CTAs over the channel halves (GradKV2Smem::kPair; "the CTA pair" below).
//  - grad_v4 (grad_v4.cuh; it replaced grad_v3): two CTAs per SM over the state passes' bf16
//    planes. The intermediate grad_v2 (one CTA per SM, the six per-tile fills as one load group) and grad_v3 (fp32
//    tiles split into hi + lo planes after loading) were removed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ops/delta/cuda/bwd/params.cuh"
#include "ops/delta/cuda/bwd/qk_rows.cuh"
#include "ops/delta/cuda/bwd/tile_ops.cuh"
#include "ops/common/cuda/cluster_pair.cuh"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/mma_primitives.cuh"

namespace lina::detail::cuda {
namespace {

// ---------------------------------------------------------------------------------------------
// D2, grad_k_v2: the four C x C x K / C x C x C products of the WY backward on mma.sync with hi + lo
// operands:
//   dT = tril_strict((dw kgb^T + dTv) beta_j), kgb = k e^b;  X = Tinv^T dT;  dAkk = -tril_strict(X Tinv^T);
//   dkgb = Tinv^T dw (kept in the accumulators through the db epilogue).
// Warp tiles: rows m0 = 16 (warp % 4), columns 32 (warp / 4) of [64][64] (dT, X, dAkk) or K/2 (warp / 4)
// of [64][K] (dkgb); k16 steps that only meet zeros of the triangular factors are skipped. Then the
// intra-chunk terms, the bL terms and the reverse cumsum (grad_k_v2_tail). Loads in flight at once, the
// intra loop on float4 broadcasts (the first tensor-core version, grad_k_tc, issued ~18 dependent
// load batches and 16 scalar shared loads per row step; removed).
// How grad_k_v2 forms its intra-chunk terms (dq_i = (dA o G) k, kr = (dAkk o G) k, dk_t = (dA o G)^T q +
// (dAkk o G)^T (beta k) with the decays G_ij = e^(b_i - b_j), j <= i), a compile-time tag (one kernel per form, so
// none carries another's code):
//  - TailSimtExact: SIMT, a thread per (channel, 16-row sub-chunk), one exact exp per pair inside the sub-chunk
//    (any gate: KDA without safe_gate);
//  - TailTcRefRows: mma.sync over 16-row block pairs, the per-channel decay factored through reference rows
//    (every factor e^(<= 0) across blocks; through the block's middle row inside it, which needs safe_gate:
//    g >= -5, every exponent within [-40, 40]): KDA with safe_gate;
//  - TailTcScalarGate: mma.sync with the decay applied to dA / dAkk (a scalar per pair): GDN.
struct TailSimtExact {};
struct TailTcRefRows {};
struct TailTcScalarGate {};

// K = 256, the CTA pair: a [64][K] fp32 tile set is over the 227 KB of shared memory, so a cluster of two CTAs
// shares a (chunk, value head), rank r owning the channels [KS r, KS r + KS) (KS = 128): everything per channel
// there, global tensors at their full K strides. The sums over K go through distributed shared memory (DSMEM):
//  - dT = dw kgb^T: each CTA's partial over its channels; both read the peer's and add P0 + P1 (fp addition
//    commutes: bit-identical dT in both), then X, dAkk, dA^T, dAkk^T are formed redundantly (64 x 64);
//  - the row sums (dbeta, GDN's dg before its reverse cumsum): rank 1 stores its partials into rank 0's shared
//    memory (peer_dbt, peer_red), rank 0 adds them to its own and writes the row outputs.
//  - the fused post_qk (G = 1): each CTA's row dots dq . q_n, dk . k_n over its channels go to the peer (PairRowDots),
//    both add P0 + P1 (the same bits), then each finishes its half of dq / dk.
// With qk_inline the CTA scales its half of the raw q / k rows by chunk_prep's rq / rk (ScaledQkHalf) instead of
// loading prep_qk's rows.
// The cluster primitives: ops/common/cuda/cluster_pair.cuh.
using cuda_util::cluster_arrive;
using cuda_util::cluster_rank;
using cuda_util::cluster_sync;
using cuda_util::cluster_wait;
using cuda_util::ld4_peer;
using cuda_util::peer_smem;
using cuda_util::st_peer;

template <bool Pair>
struct PairRowDots {
  float oq[kC], ok[kC], peer_oq[kC], peer_ok[kC];
};
template <>
struct PairRowDots<false> {};

template <int K>
struct GradKV2Smem {
  static constexpr bool kPair = K > 128;       // a CTA pair per (chunk, value head), above
  static constexpr int KS = kPair ? K / 2 : K;  // channels of the CTA
  static constexpr bool kInlineRows = !kPair;   // InlineQkRows (whole rows); the pair has ScaledQkHalf
  static constexpr int FP = KS + 8;  // fp32 [64][KS] pitch: 16-byte rows (cp.async), (g, t) float2 reads conflict-free
  static constexpr int AP = 68;      // fp32 [64][64] pitch: 16-byte rows (cp.async, float4 reads)
  alignas(16) float q[kC][FP];
  alignas(16) float k[kC][FP];
  alignas(16) float b[kC][FP];  // chunk-local gate cumsum; padded rows = the last valid row
  union alignas(16) R1 {
    bf16 dw[2][kC][FP];  // dw hi / lo, dead after dkgb
    float db[kC][FP];    // then db (the same bytes: 2 x 2 = 4 bytes per element)
  } r1;
  union alignas(16) R2 {
    bf16 kgb[2][kC][FP];  // k e^b, dead after dT
    bf16 dT[2][kC][72];   // then dT, dead after X
    bf16 X[2][kC][72];    // then X = Tinv^T dT, dead after dAkk
    struct {
      float dAt[kC][AP];    // then dA^T
      float dAkkt[kC][AP];  // and dAkk^T for the intra loop's earlier-keys part
    } tr;
    struct {
      bf16 dT[2][kC][72];
      float4 part[kNT / 32][4][32];  // the pair: this CTA's dT partial, [warp][n8 tile][lane] (read by the peer)
    } pair;
  } r2;
  alignas(16) bf16 T[2][kC][72];  // Tinv [r][j]
  alignas(16) float dA[kC][AP];
  alignas(16) float dAkk[kC][AP];  // dTv first, then dAkk
  float beta[kC], dbt[kC], red[kC];
  union {
    float oq[kC];        // fused post_qk: the l2norm backward's row dots dq . q_n (the pair: pair_dots)
    float peer_dbt[kC];  // the pair, rank 0: rank 1's dbeta partials
  };
  union {
    float ok[kC];        // and dk . k_n
    float peer_red[kC];  // the pair, GDN, rank 0: rank 1's row sums of db
  };
  float bL[KS], cs[KS];
  PairRowDots<kPair> pair_dots;  // the pair's fused post_qk row dots (its oq / ok share bytes with peer_dbt / peer_red)
};
// the fused post_qk's row dots dq . q_n / dk . k_n (the pair: this CTA's channels, then the peer's in peer_*)
template <int K>
__device__ __forceinline__ float* row_dots_q(GradKV2Smem<K>& s) {
  if constexpr (GradKV2Smem<K>::kPair) return s.pair_dots.oq;
  else return s.oq;
}
template <int K>
__device__ __forceinline__ float* row_dots_k(GradKV2Smem<K>& s) {
  if constexpr (GradKV2Smem<K>::kPair) return s.pair_dots.ok;
  else return s.ok;
}
static_assert(sizeof(GradKV2Smem<128>) <= 227 * 1024, "grad_k_v2_kernel<128> shared memory over the sm_90 limit");
static_assert(sizeof(GradKV2Smem<256>) <= 227 * 1024, "grad_k_v2_kernel<256>: a CTA of the pair over the sm_90 limit");
static_assert(offsetof(GradKV2Smem<256>::R2, pair.part) >= sizeof(GradKV2Smem<256>::R2::dT) &&
                  offsetof(GradKV2Smem<256>::R2, pair.part) >= sizeof(GradKV2Smem<256>::R2::X) &&
                  sizeof(GradKV2Smem<256>::R2::pair) <= sizeof(GradKV2Smem<256>::R2),
              "grad_k_v2 pair: the dT partial lies past dT and X in r2");

template <int K>
constexpr size_t grad_k_v2_smem() {
  return sizeof(GradKV2Smem<K>);
}
// The tensor-core tails' final dq_e / dk_e rows [64][K] (pitch FP) for the fused post_qk, over what the intra terms
// have consumed by then: dA^T / dAkk^T (r2) and dA / dAkk (adjacent: 2 x 64 x 68 floats = 64 x (K + 8) at K = 128;
// K = 64 needs half of it)
template <int K>
__device__ __forceinline__ float (*fin_dq(GradKV2Smem<K>& s))[GradKV2Smem<K>::FP] {
  return reinterpret_cast<float (*)[GradKV2Smem<K>::FP]>(&s.r2.tr.dAt[0][0]);
}
template <int K>
__device__ __forceinline__ float (*fin_dk(GradKV2Smem<K>& s))[GradKV2Smem<K>::FP] {
  static_assert(offsetof(GradKV2Smem<K>, dAkk) == offsetof(GradKV2Smem<K>, dA) + sizeof(float) * kC * GradKV2Smem<K>::AP &&
                    2 * GradKV2Smem<K>::AP >= GradKV2Smem<K>::FP && sizeof(typename GradKV2Smem<K>::R2) >= sizeof(float) * kC * GradKV2Smem<K>::FP,
                "grad_k_v2: the final dq_e / dk_e rows fit over dA^T / dAkk^T and dA / dAkk");
  return reinterpret_cast<float (*)[GradKV2Smem<K>::FP]>(&s.dA[0][0]);
}

// The sums over a warp's 32 lanes of v[0 .. 15]: the lane pair (2 m, 2 m + 1) returns the sum of v[m],
// m = lane bits 4, 3, 2, 1 (most significant first); 16 shuffles.
__device__ __forceinline__ float warp_reduce_scatter16(const float (&v)[16], int lane) {
  float a[8], b[4], c[2];
  const bool u4 = lane & 16, u3 = lane & 8, u2 = lane & 4, u1 = lane & 2;
#pragma unroll
  for (int j = 0; j < 8; ++j) a[j] = (u4 ? v[j + 8] : v[j]) + __shfl_xor_sync(0xffffffffu, u4 ? v[j] : v[j + 8], 16);
#pragma unroll
  for (int j = 0; j < 4; ++j) b[j] = (u3 ? a[j + 4] : a[j]) + __shfl_xor_sync(0xffffffffu, u3 ? a[j] : a[j + 4], 8);
#pragma unroll
  for (int j = 0; j < 2; ++j) c[j] = (u2 ? b[j + 2] : b[j]) + __shfl_xor_sync(0xffffffffu, u2 ? b[j] : b[j + 2], 4);
  float d = (u1 ? c[1] : c[0]) + __shfl_xor_sync(0xffffffffu, u1 ? c[0] : c[1], 2);
  return d + __shfl_xor_sync(0xffffffffu, d, 1);
}

// TailSimtExact: the intra-chunk terms on SIMT, reading dA / dAkk rows as float4s. Starts after a barrier that
// follows the transposes; adds into dq_e / dk_e (HBM), db, dbt and the fused l2norm's row dots. The CTA's channels
// c are the global channels c0 + c (c0: the pair's rank 1 at K = 256, else 0).
template <int K>
__device__ __forceinline__ void grad_k_intra_simt(const Params& p, const ChunkInfo& ci, int hv, GradKV2Smem<K>& s, int c0) {
  constexpr int KS = GradKV2Smem<K>::KS;
  const int tid = threadIdx.x, Cn = ci.Cn;
  const i64 t0 = ci.t0;
  // thread per (channel c, 16-row sub-chunk x0 .. x0 + 15); a warp covers 32 channels of one x0, so
  // every dA / dAkk read below is a warp-wide broadcast
#pragma unroll 1
  for (int item = tid; item < 4 * KS; item += kNT) {
    const int c = item % KS, x0 = 16 * (item / KS);
    if (x0 >= Cn) continue;  // warp-uniform
    float bq[16], kq[16], qq[16], dq0[16], dk0[16];
    // dq_e / dk_e of row x0 + i, used at the end: issued first (the pair: after the earlier keys; issued first there,
    // ptxas spilled them)
    const auto load_inter = [&](int i) {
      const int x = x0 + i;
      const i64 gx = ((t0 + x) * p.HV + hv) * K + c0 + c;
      dq0[i] = x < Cn ? p.dqe[gx] : 0.f;
      dk0[i] = x < Cn ? p.dke[gx] : 0.f;
    };
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int x = x0 + i;
      if constexpr (!GradKV2Smem<K>::kPair) load_inter(i);
      bq[i] = s.b[x][c];
      kq[i] = s.k[x][c];
      qq[i] = s.q[x][c];
    }
    float dqi[16] = {}, kr[16] = {}, dkt[16] = {};
    {  // earlier keys j < x0, reference row x0: dA[x0 + i][j] = dA^T[j][x0 + i]
      const float bref = bq[0];
#pragma unroll(KS == 64 ? 4 : 2)  // ptxas: 1 spills at both K, 2 spills at K = 64
      for (int j = 0; j < x0; ++j) {
        const float kt = s.k[j][c] * __expf(bref - s.b[j][c]);
        const float4* a4 = reinterpret_cast<const float4*>(&s.r2.tr.dAt[j][x0]);
        const float4* l4 = reinterpret_cast<const float4*>(&s.r2.tr.dAkkt[j][x0]);
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const float4 a = a4[v], l = l4[v];
          dqi[4 * v] += a.x * kt;
          dqi[4 * v + 1] += a.y * kt;
          dqi[4 * v + 2] += a.z * kt;
          dqi[4 * v + 3] += a.w * kt;
          kr[4 * v] += l.x * kt;
          kr[4 * v + 1] += l.y * kt;
          kr[4 * v + 2] += l.z * kt;
          kr[4 * v + 3] += l.w * kt;
        }
      }
#pragma unroll
      for (int i = 1; i < 16; ++i) {
        const float e = __expf(bq[i] - bref);
        dqi[i] *= e;
        kr[i] *= e;
      }
    }
    if constexpr (GradKV2Smem<K>::kPair) {
#pragma unroll
      for (int i = 0; i < 16; ++i) load_inter(i);
    }
    {  // later rows r > x0 + 15, reference row x0 + 15 (padded rows carry the last valid gate)
      const float bref = bq[15];
#pragma unroll(KS == 64 ? 4 : 2)
      for (int r = x0 + 16; r < Cn; ++r) {
        const float e = __expf(s.b[r][c] - bref);
        const float qt = s.q[r][c] * e, kt = s.beta[r] * s.k[r][c] * e;
        const float4* a4 = reinterpret_cast<const float4*>(&s.dA[r][x0]);
        const float4* l4 = reinterpret_cast<const float4*>(&s.dAkk[r][x0]);
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const float4 a = a4[v], l = l4[v];
          dkt[4 * v] += a.x * qt + l.x * kt;
          dkt[4 * v + 1] += a.y * qt + l.y * kt;
          dkt[4 * v + 2] += a.z * qt + l.z * kt;
          dkt[4 * v + 3] += a.w * qt + l.w * kt;
        }
      }
#pragma unroll
      for (int i = 0; i < 15; ++i) dkt[i] *= __expf(bref - bq[i]);
    }
    // pairs inside the sub-chunk (i >= j): row i of dA / dAkk's diagonal block as four float4s
    const auto diag_row = [&](int i, float (&ar)[16], float (&lr)[16]) {
#pragma unroll
      for (int v = 0; v < 4; ++v) {
        if (4 * v > i) break;  // compile-time after unrolling
        const float4 a = reinterpret_cast<const float4*>(&s.dA[x0 + i][x0])[v];
        const float4 l = reinterpret_cast<const float4*>(&s.dAkk[x0 + i][x0])[v];
        ar[4 * v] = a.x, ar[4 * v + 1] = a.y, ar[4 * v + 2] = a.z, ar[4 * v + 3] = a.w;
        lr[4 * v] = l.x, lr[4 * v + 1] = l.y, lr[4 * v + 2] = l.z, lr[4 * v + 3] = l.w;
      }
    };
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const float a_row = qq[i], l_row = s.beta[x0 + i] * kq[i];
      float ar[16], lr[16];
      diag_row(i, ar, lr);
#pragma unroll
      for (int j = 0; j <= i; ++j) {
        const float e = __expf(bq[i] - bq[j]);
        const float a = ar[j], l = lr[j];  // dAkk[i][i] = 0
        dqi[i] += a * kq[j] * e;
        kr[i] += l * kq[j] * e;
        dkt[j] += (a * a_row + l * l_row) * e;
      }
    }
    float bs[16];  // dbeta terms kr k of the 16 rows, summed over the warp's 32 channels below
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int x = x0 + i;
      bs[i] = 0.f;
      if (x < Cn) {  // warp-uniform
        const i64 gx = ((t0 + x) * p.HV + hv) * K + c0 + c;
        const float dkrow = s.beta[x] * kr[i];
        const float dqf = dq0[i] + dqi[i], dkf = dk0[i] + dkrow + dkt[i];
        p.dqe[gx] = dqf;
        p.dke[gx] = dkf;
        s.r1.db[x][c] += qq[i] * dqi[i] + (dkrow - dkt[i]) * kq[i];
        bs[i] = kr[i] * kq[i];
        dq0[i] = dqf * qq[i];  // the fused l2norm backward's row-dot terms (summed below)
        dk0[i] = dkf * kq[i];
      } else {
        dq0[i] = dk0[i] = 0.f;
      }
    }
    // reduce-scatter over the lanes (16 shuffles instead of 16 warp sums of 5): each step halves the rows a
    // lane keeps and adds its partner's share of them; lane pair (2 m, 2 m + 1) ends with row m's sum
    const int lane = tid & 31;
    const float s4 = warp_reduce_scatter16(bs, lane);
    const int m = ((lane >> 4) & 1) * 8 + ((lane >> 3) & 1) * 4 + ((lane >> 2) & 1) * 2 + ((lane >> 1) & 1);
    if (!(lane & 1) && x0 + m < Cn) atomicAdd(&s.dbt[x0 + m], s4);
    if (p.fuse_qk && p.l2norm) {  // the same reduce-scatter for dq . q_n and dk . k_n
      const float q4 = warp_reduce_scatter16(dq0, lane), k4 = warp_reduce_scatter16(dk0, lane);
      if (!(lane & 1) && x0 + m < Cn) {
        atomicAdd(&row_dots_q(s)[x0 + m], q4);
        atomicAdd(&row_dots_k(s)[x0 + m], k4);
      }
    }
  }
}

// A fragment (rows m0 + g (+8), columns k0 + 2t (+1) (+8)) of two fp32 [64][68] tiles as hi + lo, each element
// times sc(row, column) where Scale (the scalar gate's pair decay, shared by both tiles).
template <bool Scale, class F>
__device__ __forceinline__ void frag_a2_f32(std::uint32_t (&ah)[4], std::uint32_t (&al)[4], std::uint32_t (&lh)[4],
                                            std::uint32_t (&ll)[4], const float* A, const float* L, int m0, int k0, int lane,
                                            F&& sc) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int r = m0 + g + 8 * (q & 1), c = k0 + 2 * t + 8 * (q >> 1);
    float2 a = ld2(A + r * 68 + c), l = ld2(L + r * 68 + c);
    if constexpr (Scale) {
      const float s0 = sc(r, c), s1 = sc(r, c + 1);
      a.x *= s0, a.y *= s1, l.x *= s0, l.y *= s1;
    }
    cuda_util::pack_bf16_split(a.x, a.y, ah[q], al[q]);
    cuda_util::pack_bf16_split(l.x, l.y, lh[q], ll[q]);
  }
}

// B fragment (k rows j0 + 2t (+1) (+8), n column g) of f(j) as hi + lo: {hi0, hi1, lo0, lo1}.
template <class F>
__device__ __forceinline__ void frag_b_rows(std::uint32_t (&b)[4], int j0, int t, F&& f) {
  cuda_util::pack_bf16_split(f(j0 + 2 * t), f(j0 + 2 * t + 1), b[0], b[2]);
  cuda_util::pack_bf16_split(f(j0 + 2 * t + 8), f(j0 + 2 * t + 9), b[1], b[3]);
}

// TailTcRefRows / TailTcScalarGate: the intra-chunk terms as mma.sync products over 16-row blocks. Warp (R = warp % 4,
// column half) owns rows x0 = 16 R .. of dq_i and kr (keys j <= x: blocks Y <= R) and keys x0 .. of dk_t (rows
// r >= j: blocks X >= R), so every warp runs R + 1 + 4 - R = 5 block steps, and the epilogue combines all three
// at its own accumulator positions (no exchange, no transposed copy of a result).
// KDA (per-channel gate b[r][c]): across blocks the decay factors through a reference row, e^(b_x - b_j) =
// e^(b_x - b_x0) e^(b_x0 - b_j) for j < x0 (dq side) and e^(b_r - b_j) = e^(b_r - b_ref) e^(b_ref - b_j),
// ref = x0 + 15, for r > ref (dk side): every factor e^(<= 0); the B operand carries the key's (row's) factor and
// the accumulator the other. Inside the block, through its middle row m = x0 + 8 (safe_gate: within e^(+-40)).
// The cross sum is rescaled once to the middle row's reference (a per-column e^(<= 0)) before the diagonal
// step adds to it. GDN (scalar gate): dA and dAkk are scaled per pair (exact, e^(<= 0)), q / k enter raw.
// The diagonal step multiplies whole 16 x 16 blocks: it relies on dA (dAqk, from grad_v) being stored zero above
// the diagonal and dAkk zero on and above it, as their producers write them (the SIMT form reads j <= i only).
template <int K, bool ScalarGate>
__device__ __forceinline__ void grad_k_intra_tc(const Params& p, const ChunkInfo& ci, int hv, GradKV2Smem<K>& s,
                                                const float (&dkgb)[GradKV2Smem<K>::KS / 16][4], int c0) {
  using S = GradKV2Smem<K>;
  constexpr int KS = S::KS, NT = KS / 16;  // n8 tiles of the warp's KS / 2 columns
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3, Cn = ci.Cn;
  const int R = warp & 3, x0 = 16 * R, nk0 = (KS / 2) * (warp >> 2), m = x0 + 8;
  const i64 t0 = ci.t0;
  const bool active = x0 < Cn;  // warp-uniform: the block has rows (and keys)
  const auto bg = [&](int r) { return s.b[r][0]; };  // GDN: the row's scalar gate (broadcast over the columns)
  float aq[NT][4] = {}, ak[NT][4] = {}, at[NT][4] = {};  // dq_i, kr, dk_t
  std::uint32_t ah[4], al[4], lh[4], ll[4], b[4], c4[4];
  float2 q0[2][NT], k0[2][NT];
  // KDA: accumulators times e^(b[r1][c] - b[r0][c]) per column c (a cross sum moved to another reference row, <= 1)
  const auto rescale_columns = [&](int r1, int r0, auto&... acc) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = nk0 + 8 * nt + 2 * t + e;
        const float f = __expf(s.b[r1][c] - s.b[r0][c]);
        ((acc[nt][e] *= f, acc[nt][e + 2] *= f), ...);
      }
  };
  if (active) {
    // ---- dq side: rows x0 .., keys of blocks Y < R (reference row x0), then block R (middle row)
#pragma unroll 1
    for (int y = 0; y <= R; ++y) {
      const bool diag = y == R;
      frag_a2_f32<ScalarGate>(ah, al, lh, ll, &s.dA[0][0], &s.dAkk[0][0], x0, 16 * y, lane,
                              [&](int r, int j) { return __expf(fminf(bg(r) - bg(j), 0.f)); });
      if constexpr (!ScalarGate)
        if (diag) rescale_columns(m, x0, aq, ak);  // the cross sums to the middle row's reference
      const int ref = diag ? m : x0;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int c = nk0 + 8 * nt + g;
        const float br = s.b[ref][c];
        frag_b_rows(b, 16 * y, t, [&](int j) { return ScalarGate ? s.k[j][c] : s.k[j][c] * __expf(br - s.b[j][c]); });
        cuda_util::mma_bf16_16816_split(aq[nt], ah, al, b[0], b[1], b[2], b[3]);
        cuda_util::mma_bf16_16816_split(ak[nt], lh, ll, b[0], b[1], b[2], b[3]);
      }
    }
    // the epilogue's dq_e / dk_e (the pure inter part), in flight during the dk side
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = x0 + g + 8 * hf;
      const i64 row = ((t0 + min(r, Cn - 1)) * p.HV + hv) * K;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int c = c0 + nk0 + 8 * nt + 2 * t;
        q0[hf][nt] = ld2(p.dqe + row + c);
        k0[hf][nt] = ld2(p.dke + row + c);
      }
    }
    // ---- dk side: keys x0 .. as the rows of dA^T / dAkk^T; rows of blocks X > R that hold rows (reference row
    // x0 + 15), then block R (middle row)
    const int ncross = min(3, (Cn - 1) >> 4) - R, rl = x0 + 15;
#pragma unroll 1
    for (int i = 0; i <= ncross; ++i) {
      const bool diag = i == ncross;
      const int X = diag ? R : R + 1 + i;
      frag_a2_f32<ScalarGate>(ah, al, lh, ll, &s.r2.tr.dAt[0][0], &s.r2.tr.dAkkt[0][0], x0, 16 * X, lane,
                              [&](int j, int r) { return __expf(fminf(bg(r) - bg(j), 0.f)); });
      if constexpr (!ScalarGate)
        if (diag) rescale_columns(rl, m, at);  // the cross sum to the middle row's reference
      const int ref = diag ? m : rl;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int c = nk0 + 8 * nt + g;
        const float br = s.b[ref][c];
        float e4[4];  // the rows' factors, shared by the q and beta k operands
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int r = 16 * X + 2 * t + (u & 1) + 8 * (u >> 1);
          e4[u] = ScalarGate ? 1.f : __expf(s.b[r][c] - br);
        }
        const auto eu = [&](int r) { return e4[((r >> 3) & 1) * 2 + (r & 1)]; };
        frag_b_rows(b, 16 * X, t, [&](int r) { return s.q[r][c] * eu(r); });
        frag_b_rows(c4, 16 * X, t, [&](int r) { return s.beta[r] * s.k[r][c] * eu(r); });
        cuda_util::mma_bf16_16816_split(at[nt], ah, al, b[0], b[1], b[2], b[3]);
        cuda_util::mma_bf16_16816_split(at[nt], lh, ll, c4[0], c4[1], c4[2], c4[3]);
      }
    }
  }
  // fused post_qk: the final dq_e / dk_e go into dA / dAkk's and their transposes' space (grad_k_v2_finish reads them
  // there, not through L2); every warp's products have read those first
  if (p.fuse_qk) __syncthreads();
  if (!active) return;
  // ---- one epilogue at the accumulator positions (rows x0 + g (+8), columns nk0 + 8 nt + 2 t (+1)), which are
  // dkgb's too: the WY terms (db, the dk partial; the SIMT form's separate db epilogue) and the intra terms with the
  // middle row's factors (KDA): dq_e / dk_e read and written once, db stored once, the row sums of kgb dkgb beta +
  // kr k (dbeta) and of the fused l2norm's dq . q_n, dk . k_n, the column sums of k dk_e (the bL terms)
  float rb[2] = {}, rq[2] = {}, rk[2] = {}, cs[NT][2] = {};
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int r = x0 + g + 8 * hf;
    if (r >= Cn) continue;
    const i64 row = ((t0 + r) * p.HV + hv) * K;
    const float br = s.beta[r];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int c = nk0 + 8 * nt + 2 * t;
      const float2 qv = ld2(&s.q[r][c]), kv = ld2(&s.k[r][c]), bv = ld2(&s.b[r][c]);
      const float q2[2] = {qv.x, qv.y}, k2[2] = {kv.x, kv.y}, b2[2] = {bv.x, bv.y}, dq2[2] = {q0[hf][nt].x, q0[hf][nt].y},
                  dk2[2] = {k0[hf][nt].x, k0[hf][nt].y};
      float oq[2], ok[2], od[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float dqi = aq[nt][2 * hf + e], kr = ak[nt][2 * hf + e], dkt = at[nt][2 * hf + e];
        if constexpr (!ScalarGate) {
          const float bm = s.b[m][c + e];
          const float fq = __expf(b2[e] - bm), fk = __expf(bm - b2[e]);
          dqi *= fq, kr *= fq, dkt *= fk;
        }
        const float d = dkgb[nt][2 * hf + e], eb = __expf(b2[e]), kgb = k2[e] * eb, dkrow = br * kr;
        oq[e] = dq2[e] + dqi;
        ok[e] = dk2[e] + d * eb * br + dkrow + dkt;
        od[e] = q2[e] * dq2[e] - k2[e] * dk2[e] + kgb * d * br + q2[e] * dqi + (dkrow - dkt) * k2[e];
        rb[hf] += d * kgb + kr * k2[e];
        rq[hf] += oq[e] * q2[e];
        rk[hf] += ok[e] * k2[e];
        cs[nt][e] += k2[e] * dk2[e];
      }
      if (p.fuse_qk) {
        st2(&fin_dq(s)[r][c], oq[0], oq[1]);
        st2(&fin_dk(s)[r][c], ok[0], ok[1]);
      } else {
        st2(p.dqe + row + c0 + c, oq[0], oq[1]);
        st2(p.dke + row + c0 + c, ok[0], ok[1]);
      }
      st2(&s.r1.db[r][c], od[0], od[1]);
    }
  }
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float v[3] = {rb[hf], rq[hf], rk[hf]};
#pragma unroll
    for (int u = 0; u < 3; ++u) {
      v[u] += __shfl_xor_sync(0xffffffffu, v[u], 1);
      v[u] += __shfl_xor_sync(0xffffffffu, v[u], 2);
    }
    const int r = x0 + g + 8 * hf;
    if (t == 0 && r < Cn) {
      atomicAdd(&s.dbt[r], v[0]);
      if (p.fuse_qk && p.l2norm) {
        atomicAdd(&row_dots_q(s)[r], v[1]);
        atomicAdd(&row_dots_k(s)[r], v[2]);
      }
    }
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float v = cs[nt][e];
      v += __shfl_xor_sync(0xffffffffu, v, 4);
      v += __shfl_xor_sync(0xffffffffu, v, 8);
      v += __shfl_xor_sync(0xffffffffu, v, 16);
      if (g == 0) atomicAdd(&s.cs[nk0 + 8 * nt + 2 * t + e], v);
    }
}

// post_qk fused (one value head per q/k head): dq = r_q (dq - (dq . q_n) q_n), same for dk, from the rows this CTA left
// in shared memory (FinInSmem) or wrote (L2) and its q_n / k_n tiles, in the output dtype; the pair: its channels
// c0 .. c0 + KS - 1, with the row dots of both CTAs. Last in grad_k_v2_finish, with no barrier before it: the warps the
// serial KDA cumsum leaves idle start their loads while it runs (this kernel has one CTA per SM); loads in batches of
// four pieces.
template <int K, bool FinInSmem>
__device__ __forceinline__ void grad_k_v2_post_qk(const Params& p, const ChunkInfo& ci, int hv, GradKV2Smem<K>& s, int c0) {
  using S = GradKV2Smem<K>;
  const int tid = threadIdx.x, Cn = ci.Cn;
  const i64 t0 = ci.t0;
  if (p.fuse_qk) {
    constexpr int Q4 = S::KS / 4, EU = 4, NB = kC * Q4 / kNT / EU;  // float4 pieces per thread: NB batches of EU
#pragma unroll 1
    for (int nb = 0; nb < NB; ++nb) {
      float4 a[EU], b[EU];
      float2 rn[EU];  // r_q, r_k of the piece's row
#pragma unroll
      for (int u = 0; u < EU; ++u) {
        const int i = tid + (nb * EU + u) * kNT, r = i / Q4, c = 4 * (i % Q4);
        const i64 rh = (t0 + r) * p.HV + hv;  // H == HV: the q/k row is the value head's
        if constexpr (FinInSmem) {
          a[u] = ld4(&fin_dq(s)[r][c]);
          b[u] = ld4(&fin_dk(s)[r][c]);
        } else {
          a[u] = r < Cn ? ld4(p.dqe + rh * K + c0 + c) : kZero4;
          b[u] = r < Cn ? ld4(p.dke + rh * K + c0 + c) : kZero4;
        }
        rn[u] = r < Cn && p.l2norm ? make_float2(p.rq[rh], p.rk[rh]) : make_float2(1.f, 1.f);
      }
#pragma unroll
      for (int u = 0; u < EU; ++u) {
        const int i = tid + (nb * EU + u) * kNT, r = i / Q4, c = 4 * (i % Q4);
        if (r >= Cn) continue;
        const i64 gx = ((t0 + r) * p.HV + hv) * K + c0 + c;
        float xq[4] = {a[u].x, a[u].y, a[u].z, a[u].w}, xk[4] = {b[u].x, b[u].y, b[u].z, b[u].w};
        if (p.l2norm) {
          float oq = row_dots_q(s)[r], ok = row_dots_k(s)[r];
          if constexpr (S::kPair) {  // P0 + P1 in both CTAs: rank 0 adds rank 1's, rank 1 rank 0's (the same bits)
            oq += s.pair_dots.peer_oq[r];
            ok += s.pair_dots.peer_ok[r];
          }
          const float4 yq = ld4(&s.q[r][c]), yk = ld4(&s.k[r][c]);
          const float q4[4] = {yq.x, yq.y, yq.z, yq.w}, k4[4] = {yk.x, yk.y, yk.z, yk.w};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            xq[e] = rn[u].x * (xq[e] - oq * q4[e]);
            xk[e] = rn[u].y * (xk[e] - ok * k4[e]);
          }
        }
        store_lane<4>(p.dq, p.dq_t, gx, xq);
        store_lane<4>(p.dk, p.dq_t, gx, xk);
      }
    }
  }
}

// After the intra-chunk terms (either form): the bL terms, the reverse cumsum -> dg, dbeta, the fused post_qk.
// FinInSmem: the intra terms left the final dq_e / dk_e in shared memory (fin_dq / fin_dk) where post_qk is fused.
// The pair (K = 256, channels c0 ..): rank 0 (c0 = 0) owns the row outputs (dbeta, GDN's dg) and adds rank 1's
// partials, which rank 1 stores into rank 0's shared memory before a cluster barrier. Every DSMEM access of the
// kernel comes before the last cluster barrier (KDA: the one below the bL terms; GDN: the one after the row sums),
// so a CTA that has passed it may exit while its peer still runs.
template <int K, bool FinInSmem>
__device__ __forceinline__ void grad_k_v2_finish(const Params& p, const ChunkInfo& ci, int hv, GradKV2Smem<K>& s, int c0) {
  using S = GradKV2Smem<K>;
  constexpr int KS = S::KS;
  const int tid = threadIdx.x, Cn = ci.Cn;
  const i64 t0 = ci.t0;
  const bool row_owner = !S::kPair || c0 == 0;
  __syncthreads();
  // last row: the terms through bL, e^bL rowsum(H dh) + colsum(k dk_e); reverse cumsum -> dg
  if (tid < KS) {
    const int c = tid;
    s.r1.db[Cn - 1][c] += __expf(s.bL[c]) * p.hd[(static_cast<i64>(ci.gidx) * p.HV + hv) * K + c0 + c] + s.cs[c];
  }
  if constexpr (S::kPair) {
    // rank 1's dbeta partials (complete: the barrier above) into rank 0, by the threads the bL terms leave idle
    static_assert(KS + kC <= kNT, "a thread per row past the bL terms' threads");
    const int r = tid - KS;
    if (!row_owner && r >= 0 && r < Cn) st_peer(peer_smem(&s.peer_dbt[r], 0), s.dbt[r]);
    if (p.fuse_qk && p.l2norm) {  // the fused post_qk's row dots to the peer, by the same threads (q) and the rest (k)
      static_assert(KS + 2 * kC == kNT, "a thread per row dot past the bL terms' threads");
      const int peer = row_owner ? 1 : 0;
      if (r >= 0 && r < kC) st_peer(peer_smem(&s.pair_dots.peer_oq[r], peer), s.pair_dots.oq[r]);
      if (r >= kC) st_peer(peer_smem(&s.pair_dots.peer_ok[r - kC], peer), s.pair_dots.ok[r - kC]);
    }
    cluster_sync();
  } else {
    __syncthreads();
  }
  // the reverse cumsum -> dg: KDA a thread per column, serially over the rows; GDN warp 0 scans the 64 row
  // sums. Where the gate is given, dg is written in the output dtype (post_gate's work, which then does
  // not run; KDA: f32 or bf16 dg), else as the fp32 dgv that post_gate reads. One loop body with a uniform
  // branch (three specialised loops cost grad_k 0.5 ms at B1_T8192_H96: its code is near the i-cache's size).
  if (p.kda) {
    if (tid < KS) {
      const int c = tid;
      void* dst = p.fuse_gate ? p.dg : p.dgv;
      const bool to_bf16 = p.fuse_gate && p.dg_t == 2;
      float acc = 0.f;
      for (int r = Cn - 1; r >= 0; --r) {
        acc += s.r1.db[r][c];
        const i64 gi = ((t0 + r) * p.HV + hv) * K + c0 + c;
        if (to_bf16) static_cast<bf16*>(dst)[gi] = __float2bfloat16(acc);
        else static_cast<float*>(dst)[gi] = acc;
      }
    }
  } else {
    // GDN: row sums, then the reverse cumsum over the 64 rows by warp 0 (lane: rows 2 lane, 2 lane + 1); the pair:
    // rank 1's row sums into rank 0's peer_red, rank 0's total = its sum + rank 1's
    for (int r = threadIdx.x >> 5; r < Cn; r += kNT / 32) {
      float rs = 0.f;
      for (int c = threadIdx.x & 31; c < KS; c += 32) rs += s.r1.db[r][c];
      rs = warp_sum(rs);
      if ((threadIdx.x & 31) == 0) {
        if (row_owner) s.red[r] = rs;
        else st_peer(peer_smem(&s.peer_red[r], 0), rs);
      }
    }
    if constexpr (S::kPair) cluster_sync();
    else __syncthreads();
    const auto row_sum = [&](int r) {
      if constexpr (S::kPair) return s.red[r] + s.peer_red[r];
      else return s.red[r];
    };
    if (row_owner && tid < 32) {
      const auto put_dg = [&](i64 gi, float x) {
        if (!p.fuse_gate) p.dgv[gi] = x;
        else store_as(p.dg, p.dg_t, gi, x);
      };
      const int r = 2 * tid;
      const float v0 = r < Cn ? row_sum(r) : 0.f, v1 = r + 1 < Cn ? row_sum(r + 1) : 0.f;
      float suf = v0 + v1;  // inclusive suffix sum over lanes tid .. 31
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const float y = __shfl_down_sync(0xffffffffu, suf, o);
        if (tid + o < 32) suf += y;
      }
      if (r < Cn) put_dg((t0 + r) * p.HV + hv, suf);
      if (r + 1 < Cn) put_dg((t0 + r + 1) * p.HV + hv, suf - v0);
    }
  }
  if (row_owner && tid < Cn) {
    float db = s.dbt[tid];
    if constexpr (S::kPair) db += s.peer_dbt[tid];
    if (!p.fuse_gate) {
      p.dbp[(t0 + tid) * p.HV + hv] = db;
    } else {  // post_gate's dbeta: s = beta / beta_mult is the sigmoid post_gate recomputes (beta_mult 1 or 2: exact)
      if (p.beta_sigmoid) {
        const float sg = s.beta[tid] / p.beta_mult;
        db *= p.beta_mult * sg * (1.f - sg);
      }
      store_as(p.dbeta, p.dbeta_t, (t0 + tid) * p.HV + hv, db);
    }
  }
  grad_k_v2_post_qk<K, FinInSmem>(p, ci, hv, s, c0);
}

// One (chunk, value head); at K = 256 (GradKV2Smem<K>::kPair) by the CTA pair, a cluster of (2, 1, 1) whose rank
// owns the channels c0 = 128 rank .. (above).
template <int K, class Tail>
__device__ __forceinline__ void grad_k_v2_chunk(const Params& p, int chunk, int hv) {
  // the SIMT kernels' float array: declared through a byte array, the inlined intra loop spilled (seen
  // with the first tensor-core grad_k); the dynamic window starts 16-byte aligned (no static shared memory)
  extern __shared__ float sm[];
  using S = GradKV2Smem<K>;
  auto& s = *reinterpret_cast<S*>(sm);
  constexpr bool kPair = S::kPair;
  constexpr int KS = S::KS, FP = S::FP, NK = KS / 16, QV = KS / 4;
  const int h = hv / p.G, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int wr = warp & 3, m0 = 16 * wr, n0 = 32 * (warp >> 2), nk0 = (KS / 2) * (warp >> 2);
  const int rank = kPair ? cluster_rank() : 0, c0 = KS * rank;  // the CTA's first global channel
  const ChunkInfo ci = chunk_info(p, chunk);
  const i64 t0 = ci.t0;
  const int Cn = ci.Cn;  // >= 1: the chunk table holds only non-empty chunks
  const auto row = [&](int r) { return (t0 + r) * p.HV + hv; };
  const bool kda = p.kda != 0;

  // ---- every load at once. cp.async: q, k (zero past Cn; qk_inline: the bf16 rows into r2's space, free until
  // kgb, normalised into the tiles by the thread that staged them before the first barrier), KDA b (rows past
  // Cn = the last valid row), dAqk and dTv (zero past Cn).
  // (K = 256, qk_inline: the CTA's channel half of the raw rows, scaled by chunk_prep's rq / rk: ScaledQkHalf)
  bf16* const qk_stage = reinterpret_cast<bf16*>(&s.r2);
  std::conditional_t<kPair, ScaledQkHalf<K, KS>, NoScaledQkHalf> qk_half;
  if constexpr (S::kInlineRows) {
    static_assert(sizeof(typename S::R2) >= 2 * kC * K * sizeof(bf16), "grad_k_v2: r2 holds the q / k staging");
    if (p.qk_inline) InlineQkRows<K>::stage(p, qk_stage, t0, Cn, h, tid);
  } else {
    static_assert(sizeof(typename S::R2) >= 2 * kC * KS * sizeof(bf16), "grad_k_v2 pair: r2 holds the q / k staging");
    if (p.qk_inline) qk_half.template stage<!std::is_same_v<Tail, TailSimtExact>>(p, qk_stage, t0, Cn, h, c0, tid);
  }
#pragma unroll 4
  for (int i = tid; i < kC * QV; i += kNT) {
    const int r = i / QV, c4 = 4 * (i % QV), rc = min(r, Cn - 1);
    if (!p.qk_inline) {
      const i64 src = ((t0 + rc) * p.H + h) * K + c0 + c4;
      cuda_util::cp_async16(&s.q[r][c4], p.qn + src, r < Cn);
      cuda_util::cp_async16(&s.k[r][c4], p.kn + src, r < Cn);
    }
    if (kda) cuda_util::cp_async16(&s.b[r][c4], p.b + row(rc) * K + c0 + c4, true);
  }
#pragma unroll 4
  for (int i = tid; i < kC * 16; i += kNT) {
    const int r = i >> 4, c4 = 4 * (i & 15), rc = min(r, Cn - 1);
    cuda_util::cp_async16(&s.dA[r][c4], p.dAqk + row(rc) * kC + c4, r < Cn);
    cuda_util::cp_async16(&s.dAkk[r][c4], p.dTv + row(rc) * kC + c4, r < Cn);
  }
  cuda_util::cp_async_commit();
  // the SIMT form's db epilogue: dq_e / dk_e at its fragment positions (rows m0 + g (+8), columns nk0 + 8 nt + 2 t)
  // (the tensor-core forms do that epilogue with their own, at the same positions)
  constexpr bool kSimt = std::is_same_v<Tail, TailSimtExact>;
  float2 pq[NK][2], pk[NK][2];
  if constexpr (kSimt) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = m0 + g + 8 * hf;
#pragma unroll
      for (int nt = 0; nt < NK; ++nt) {
        const i64 x = row(r) * K + c0 + nk0 + 8 * nt + 2 * t;
        pq[nt][hf] = r < Cn ? ld2(p.dqe + x) : make_float2(0.f, 0.f);
        pk[nt][hf] = r < Cn ? ld2(p.dke + x) : make_float2(0.f, 0.f);  // still the pure inter part dk_e
      }
    }
  }
  {  // dw, Tinv through registers into hi + lo planes; beta, dbeta partial; GDN's broadcast gate
    constexpr int PD = kC * QV / kNT, PT = kC * 16 / kNT;
    float4 wd[PD], td[PT];
#pragma unroll
    for (int u = 0; u < PD; ++u) {
      const int i = tid + u * kNT, r = i / QV, c = 4 * (i % QV);
      wd[u] = r < Cn ? ld4(p.dw + row(r) * K + c0 + c) : kZero4;
    }
#pragma unroll
    for (int u = 0; u < PT; ++u) {
      const int i = tid + u * kNT, r = i >> 4, c = 4 * (i & 15);
      td[u] = r < Cn ? ld4(p.Tinv + row(r) * kC + c) : kZero4;
    }
    float bt = 0.f, dbt = 0.f;
    if (tid < kC && tid < Cn) {
      bt = p.bt[row(tid)];
      if (rank == 0) dbt = p.dbp[row(tid)];  // the pair: grad_v's part counted once, in the row owner's sums
    }
    float bg = 0.f;  // GDN: thread (row tid / 4, columns (tid % 4) KS / 4 ..)
    if (!kda) bg = p.b[row(min(tid >> 2, Cn - 1))];
#pragma unroll
    for (int u = 0; u < PD; ++u) {
      const int i = tid + u * kNT, r = i / QV, c = 4 * (i % QV);
      st_split4(&s.r1.dw[0][0][0], &s.r1.dw[1][0][0], r * FP + c, wd[u]);
    }
#pragma unroll
    for (int u = 0; u < PT; ++u) {
      const int i = tid + u * kNT, r = i >> 4, c = 4 * (i & 15);
      st_split4(&s.T[0][0][0], &s.T[1][0][0], r * 72 + c, td[u]);
    }
    if (tid < kC) {
      s.beta[tid] = bt;
      s.dbt[tid] = dbt;
      row_dots_q(s)[tid] = row_dots_k(s)[tid] = 0.f;
    }
    if (tid < KS) s.cs[tid] = 0.f;
    if (!kda) {
      const float4 b4 = make_float4(bg, bg, bg, bg);
#pragma unroll
      for (int c = 0; c < KS / 4; c += 4) *reinterpret_cast<float4*>(&s.b[tid >> 2][(tid & 3) * (KS / 4) + c]) = b4;
    }
  }
  cuda_util::cp_async_wait_all();
  if constexpr (S::kInlineRows) {
    if (p.qk_inline) InlineQkRows<K>::store_staged(p, qk_stage, s.q, s.k, t0, Cn, h, tid);
  } else {
    if (p.qk_inline) qk_half.template store<!kSimt>(p, qk_stage, s.q, s.k, t0, Cn, h, tid);
  }
  __syncthreads();
  if (tid < KS) s.bL[tid] = s.b[Cn - 1][tid];  // read in the tail, after several barriers
  // kgb = k e^b (GDN: b is the broadcast scalar cumsum)
  for (int i = tid; i < kC * KS / 2; i += kNT) {
    const int r = i / (KS / 2), c = 2 * (i % (KS / 2));
    const float2 kv = ld2(&s.k[r][c]), bv = ld2(&s.b[r][c]);
    std::uint32_t hi, lo;
    cuda_util::pack_bf16_split(kv.x * __expf(bv.x), kv.y * __expf(bv.y), hi, lo);
    st_u32(&s.r2.kgb[0][r][c], hi);
    st_u32(&s.r2.kgb[1][r][c], lo);
  }
  __syncthreads();
  // dT = tril_strict((dw kgb^T + dTv) * beta_j); tiles entirely above the diagonal are zero
  const bool upper = n0 >= m0 + 16;
  float acc[4][4] = {};
  if (!upper)
    warp_mma_split<4, false, true>(acc, &s.r1.dw[0][0][0], &s.r1.dw[1][0][0], FP, m0, &s.r2.kgb[0][0][0], &s.r2.kgb[1][0][0], FP,
                                   n0, 0, KS / 16, lane);
  if constexpr (kPair) {
    // the sum over K: this CTA's partial into r2 (past dT and X) in the warps' fragment order, the peer's (the same
    // warp and lane hold the same elements there) added to it; P0 + P1 in both CTAs (fp addition commutes)
    float4 (*const part)[32] = s.r2.pair.part[warp];
    __syncthreads();  // kgb is consumed
    if (!upper) {
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) part[nt][lane] = make_float4(acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]);
    }
    cluster_sync();  // both partials are written
    if (!upper) {
      const std::uint32_t peer = peer_smem(&part[0][lane], rank ^ 1);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const float4 x = ld4_peer(peer + nt * 32 * sizeof(float4));
        acc[nt][0] += x.x, acc[nt][1] += x.y, acc[nt][2] += x.z, acc[nt][3] += x.w;
      }
    }
    // (a split barrier: no other cluster barrier may come between this arrive and its wait below)
    cluster_arrive();  // done with the peer's partial; waited for before the transposes go over this CTA's
  }
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int r = m0 + g + 8 * hf, j = n0 + 8 * nt + 2 * t + e;
        acc[nt][2 * hf + e] = (j < r && r < Cn) ? (acc[nt][2 * hf + e] + s.dAkk[r][j]) * s.beta[j] : 0.f;
      }
  if constexpr (!kPair) __syncthreads();  // kgb is consumed (the pair: above)
  store_split<4, 72>(&s.r2.dT[0][0][0], &s.r2.dT[1][0][0], acc, m0, n0, lane);
  __syncthreads();
  // X = Tinv^T dT (Tinv^T[r][m] = 0 for m < r: k16 steps from the warp's row block on) and
  // dkgb = Tinv^T dw
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[nt][e] = 0.f;
  warp_mma_split<4, true, false>(acc, &s.T[0][0][0], &s.T[1][0][0], 72, m0, &s.r2.dT[0][0][0], &s.r2.dT[1][0][0], 72, n0, wr, 4,
                                 lane);
  float dkgb[NK][4] = {};
  warp_mma_split<NK, true, false>(dkgb, &s.T[0][0][0], &s.T[1][0][0], 72, m0, &s.r1.dw[0][0][0], &s.r1.dw[1][0][0], FP, nk0, wr,
                                  4, lane);
  __syncthreads();  // dT and dw are consumed
  store_split<4, 72>(&s.r2.X[0][0][0], &s.r2.X[1][0][0], acc, m0, n0, lane);
  if constexpr (kSimt) {  // db (into dw's space) and the dk partial, from dkgb's accumulators and the prefetched dq_e / dk_e
    float rsum[2] = {}, csum[NK][2] = {};
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = m0 + g + 8 * hf;
      const float br = s.beta[r];
#pragma unroll
      for (int nt = 0; nt < NK; ++nt) {
        const int c = nk0 + 8 * nt + 2 * t;
        float db[2] = {0.f, 0.f};
        if (r < Cn) {
          const float2 bb = ld2(&s.b[r][c]), kk = ld2(&s.k[r][c]), qv = ld2(&s.q[r][c]);
          const float dk2[2] = {pk[nt][hf].x, pk[nt][hf].y}, dq2[2] = {pq[nt][hf].x, pq[nt][hf].y};
          const float b2[2] = {bb.x, bb.y}, k2[2] = {kk.x, kk.y}, q2[2] = {qv.x, qv.y};
          float nd[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float d = dkgb[nt][2 * hf + e];
            const float eb = __expf(b2[e]), kv = k2[e], kgb = kv * eb;
            rsum[hf] += d * kgb;
            csum[nt][e] += kv * dk2[e];
            db[e] = q2[e] * dq2[e] - kv * dk2[e] + kgb * d * br;
            nd[e] = dk2[e] + d * eb * br;
          }
          st2(p.dke + row(r) * K + c0 + c, nd[0], nd[1]);  // dk partial (per value head)
        }
        st2(&s.r1.db[r][c], db[0], db[1]);
      }
    }
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      float v = rsum[hf];
      v += __shfl_xor_sync(0xffffffffu, v, 1);
      v += __shfl_xor_sync(0xffffffffu, v, 2);
      const int r = m0 + g + 8 * hf;
      if (t == 0 && r < Cn) atomicAdd(&s.dbt[r], v);
    }
#pragma unroll
    for (int nt = 0; nt < NK; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float v = csum[nt][e];
        v += __shfl_xor_sync(0xffffffffu, v, 4);
        v += __shfl_xor_sync(0xffffffffu, v, 8);
        v += __shfl_xor_sync(0xffffffffu, v, 16);
        if (g == 0) atomicAdd(&s.cs[nk0 + 8 * nt + 2 * t + e], v);
      }
  }
  __syncthreads();  // X is written
  // dAkk = -tril_strict(X Tinv^T) over dTv (consumed above): columns c < r only meet m <= c < r,
  // i.e. the k16 steps up to the warp's row block
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[nt][e] = 0.f;
  if (!upper)
    warp_mma_split<4, false, true>(acc, &s.r2.X[0][0][0], &s.r2.X[1][0][0], 72, m0, &s.T[0][0][0], &s.T[1][0][0], 72, n0, 0, wr + 1,
                                   lane);
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = m0 + g + 8 * hf, c = n0 + 8 * nt + 2 * t;
      st2(&s.dAkk[r][c], c < r ? -acc[nt][2 * hf] : 0.f, c + 1 < r ? -acc[nt][2 * hf + 1] : 0.f);  // even pitch: 8-byte aligned
    }
  if constexpr (kPair) cluster_wait();  // the peer has read this CTA's dT partial, which dAkk^T goes over
  __syncthreads();  // X is consumed: dA^T and dAkk^T go over it
  // lane x (+32) reads a float4 of row x (conflict-free at pitch 68) and writes four transposed scalars
  // (consecutive x: conflict-free)
#pragma unroll
  for (int u = 0; u < kC * 16 / kNT; ++u) {
    const int i = tid + u * kNT, x = i & 63, j4 = 4 * (i >> 6);
    const float4 a = ld4(&s.dA[x][j4]), l = ld4(&s.dAkk[x][j4]);
    s.r2.tr.dAt[j4][x] = a.x, s.r2.tr.dAt[j4 + 1][x] = a.y, s.r2.tr.dAt[j4 + 2][x] = a.z, s.r2.tr.dAt[j4 + 3][x] = a.w;
    s.r2.tr.dAkkt[j4][x] = l.x, s.r2.tr.dAkkt[j4 + 1][x] = l.y, s.r2.tr.dAkkt[j4 + 2][x] = l.z, s.r2.tr.dAkkt[j4 + 3][x] = l.w;
  }
  __syncthreads();
  if constexpr (kSimt) grad_k_intra_simt<K>(p, ci, hv, s, c0);
  else grad_k_intra_tc<K, std::is_same_v<Tail, TailTcScalarGate>>(p, ci, hv, s, dkgb, c0);
  grad_k_v2_finish<K, !kSimt>(p, ci, hv, s, c0);
}

// Grid (chunks, HV); at K = 256 (2 * chunks, HV) in clusters of (2, 1, 1): blockIdx.x = 2 chunk + rank. Where
// chunk_prep_v2 chose the form per chunk (p.tail_exact: KDA without safe_gate), the chunks of the other form return
// at once (both CTAs of a pair alike, before any cluster barrier); grad_k_v2_exact_kernel does those.
template <int K, class Tail>
__global__ void __launch_bounds__(kNT, 1) grad_k_v2_kernel(const Params p) {
  static_assert(!std::is_same_v<Tail, TailSimtExact>, "the exact tail runs in grad_k_v2_exact_kernel");
  const int chunk = GradKV2Smem<K>::kPair ? blockIdx.x >> 1 : blockIdx.x, hv = blockIdx.y;
  if (p.tail_exact && p.tail_exact[static_cast<i64>(chunk) * p.HV + hv] != 0) return;
  grad_k_v2_chunk<K, Tail>(p, chunk, hv);
}

// The SIMT tail over the chunks chunk_prep_v2 flagged in p.tail_exact (item = chunk HV + hv < p.tail_items), on a
// persistent grid: CTA (pair) u of n takes items u, u + n, u + 2n, ..., 32 at a time, as one warp ballot that every
// warp of the CTA forms alike (the same flags), and runs the flagged ones. Where no chunk is flagged (gates in range)
// the grid costs a flag read per item and no more.
template <int K>
__global__ void __launch_bounds__(kNT, 1) grad_k_v2_exact_kernel(const Params p) {
  constexpr bool kPair = GradKV2Smem<K>::kPair;
  // int indices (items < 2^31: the chunk grid's x times HV) and little carried across the chunk: the K = 64 body
  // is near the register limit (i64 loop state and a 256-item batch spilled there)
  const auto ctas = [] { return static_cast<int>(kPair ? gridDim.x >> 1 : gridDim.x); };
#pragma unroll 1
  for (int first = static_cast<int>(kPair ? blockIdx.x >> 1 : blockIdx.x); first < p.tail_items; first += 32 * ctas()) {
    const int mine = first + ctas() * static_cast<int>(threadIdx.x & 31);
    unsigned w = __ballot_sync(0xffffffffu, mine < p.tail_items && p.tail_exact[mine] != 0);
#pragma unroll 1
    while (w != 0u) {
      const int item = first + ctas() * (__ffs(w) - 1);
      w &= w - 1u;
      grad_k_v2_chunk<K, TailSimtExact>(p, item / p.HV, item % p.HV);
      if constexpr (kPair) cluster_sync();  // neither CTA starts the next chunk while the peer reads its memory
      else __syncthreads();
    }
  }
}

}  // namespace
}  // namespace lina::detail::cuda
