// chunk_gla forward, one fused kernel (docs/kernels/chunk_gla_fwd.md).
// One CTA per (sequence, head, V tile of VT columns) walks its chunks of 64 tokens in order. The fp32
// state tile H [K, VT] lives in the MMA accumulators (warp w owns one 16-row m-tile and SNT n8 tiles).
// Per chunk, everything stays on chip. With b = chunk-local cumsum of g (log2 units) and a per-channel
// reference rho = b at row 31:
//   qe = q 2^(b - rho),  kr = k 2^(rho - b),  ke = k 2^(bL - b)      (bf16, made once per chunk)
//   o  = scale * (qe @ (diag(2^rho) H) + A @ v),  A = causal(qe kr^T)  (A kept as bf16 hi + lo)
//   H  = diag(2^bL) H + ke^T @ v
// qe kr^T = q k 2^(b_r - b_j) exactly in exponent; with |b - rho| <= kLim every operand is a normal
// finite bf16, so this factorisation is safe (docs/math.md section 5). A chunk outside that range (steep decay)
// runs the exact token recurrence on the state registers instead. Masking is a select.
// Tensor cores via mma.sync m16n8k16 bf16 -> fp32, operands through ldmatrix.
// (v4: the kernel of K = 128 with 64-column V tiles, and of K = 256 where prep + state cannot run.)
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
struct Cfg {
  static constexpr int NW = K == 64 ? 8 : 16;  // warps
  static constexpr int NT = NW * 32;
  static constexpr int MINB = K == 64 ? 2 : 1;      // CTAs per SM the registers are sized for
  static constexpr int STAGES = K == 256 ? 1 : 2;   // cp.async stages of the raw q, k, g, v tiles
  // K = 256: q and g single (the next chunk's are loaded once qe and kr are dead), k and v double-buffered
  // (the next chunk's are loaded for the whole chunk); the scan's per-channel exps one per lane.
  static constexpr bool KVDB = K == 256;
  static constexpr int kQ = K + 8;                  // bf16 row stride of q, k, g tiles and H^T (padding: no bank conflicts)
  static constexpr int kVs = VT + 8;                // bf16 row stride of v
  static constexpr int kAs = kC + 8;                // bf16 row stride of A
  static constexpr int CGW = K / (8 * NW);          // 8-channel groups per warp in the operand pass
  static constexpr int MTILES = K / 16;             // state m-tiles: one per warp
  static constexpr int SPARTS = NW / MTILES;        // state column parts
  static constexpr int SNT = VT / 8 / SPARTS;       // state n8 tiles per warp
  static constexpr int OPARTS = NW / 4;             // output column parts (4 row blocks of 16 tokens)
  static constexpr int OCOLS = VT / OPARTS;
  static constexpr int ONT = OCOLS / 8;
  static constexpr int NJB = 4 / OPARTS;            // 16x16 blocks of A per warp (column blocks op, op+OPARTS, ..)
  static constexpr std::size_t tile_qk = 1ull * kC * kQ * 2;
  static constexpr std::size_t tile_v = 1ull * kC * kVs * 2;
  static constexpr std::size_t stage_bytes = 3 * tile_qk + tile_v;  // q, k, g, v
  static constexpr std::size_t tiles_bytes = KVDB ? 2 * tile_qk + 2 * (tile_qk + tile_v) : STAGES * stage_bytes;
  static constexpr std::size_t ht_bytes = 1ull * VT * kQ * 2;
  static constexpr std::size_t a_bytes = 1ull * kC * kAs * 2;
  static constexpr std::size_t smem = tiles_bytes + ht_bytes + 2 * a_bytes + 3ull * K * 4;
  static_assert(smem <= 227ull * 1024, "shared memory per CTA");
  static_assert(STAGES == 2 || KVDB, "one-stage q, g needs double-buffered k, v");
  static_assert(CGW >= 1 && SPARTS >= 1 && SNT % 2 == 0 && ONT % 2 == 0 && NJB >= 1, "warp layout");
  static_assert(ht_bytes + 2 * a_bytes >= 4ull * kC * VT, "fallback o accumulators alias H^T and A");
};

template <int K, int VT>
__global__ void __launch_bounds__(Cfg<K, VT>::NT, Cfg<K, VT>::MINB) chunk_gla_fwd_fused(Params p) {
  using C = Cfg<K, VT>;
  extern __shared__ __align__(16) unsigned char smem[];
  // Raw tiles: STAGES x {q, k, g, v}, or (KVDB) q, g, then 2 x {k, v}.
  unsigned char* stage0 = smem;
  __nv_bfloat16* sHT = reinterpret_cast<__nv_bfloat16*>(smem + C::tiles_bytes);  // [VT][kQ] bf16(2^rho H)^T
  __nv_bfloat16* sAh = sHT + VT * C::kQ;                                                       // [64][kAs] A hi
  __nv_bfloat16* sAl = sAh + kC * C::kAs;                                                      // [64][kAs] A lo
  float* sRe = reinterpret_cast<float*>(sAl + kC * C::kAs);                                    // [K] 2^rho
  float* sDl = sRe + K;                                                                        // [K] 2^bL
  float* sCk = sDl + K;                                                                        // [K] 2^(bL - rho)
  float* sOf = reinterpret_cast<float*>(sHT);  // [64][VT] fp32 o of the fallback (aliases H^T and A)
  // Tile of buffer b (stage b; with KVDB q and g have one buffer, k and v two).
  auto tile = [&](int which_tile, int b) -> __nv_bfloat16* {  // 0 q, 1 k, 2 g, 3 v
    if constexpr (C::KVDB) {
      if (which_tile == 0) return reinterpret_cast<__nv_bfloat16*>(stage0);
      if (which_tile == 2) return reinterpret_cast<__nv_bfloat16*>(stage0 + C::tile_qk);
      unsigned char* kv = stage0 + 2 * C::tile_qk + b * (C::tile_qk + C::tile_v);
      return reinterpret_cast<__nv_bfloat16*>(which_tile == 1 ? kv : kv + C::tile_qk);
    } else {
      return reinterpret_cast<__nv_bfloat16*>(stage0 + b * C::stage_bytes + which_tile * C::tile_qk);
    }
  };

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g8 = lane >> 2, t4 = lane & 3;
  const int j0 = blockIdx.x * VT, h = blockIdx.y, n = blockIdx.z;
  const WorkItem s = work_item(p, n);
  if (p.mode == 1 && s.seg == s.nseg - 1) return;  // the last segment's local state is not needed
  const std::int64_t state_base = (static_cast<std::int64_t>(s.seq) * p.H + h) * K * p.V;
  const bool want_o = p.mode != 1;

  // State: warp rows [smt*16, +16), columns [scol0, + SNT*8) of the tile.
  const int smt = warp % C::MTILES, scol0 = (warp / C::MTILES) * C::SNT * 8;
  const int srow = smt * 16 + g8;
  float hacc[C::SNT][4];
  float seg_dec_lo = 1.f, seg_dec_hi = 1.f;  // mode 1: running product of 2^bL for rows srow, srow + 8
#pragma unroll
  for (int nt = 0; nt < C::SNT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = srow + (e >= 2 ? 8 : 0), col = scol0 + nt * 8 + 2 * t4 + (e & 1);
      hacc[nt][e] = p.h0 && p.mode != 1 ? p.h0[state_base + static_cast<std::int64_t>(r) * p.V + j0 + col] : 0.f;
    }
  if (p.mode == 2) {
    // H_in(s) = D(s-1) H_in(s-1) + L(s-1): GLA's transition is diagonal, so segments combine row-wise.
    for (int u = 0; u < s.seg; ++u) {
      const std::int64_t sb = (static_cast<std::int64_t>(s.slot0 + u) * p.H + h) * K;
      const float dlo = p.seg_decay[sb + srow], dhi = p.seg_decay[sb + srow + 8];
#pragma unroll
      for (int nt = 0; nt < C::SNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = srow + (e >= 2 ? 8 : 0), col = scol0 + nt * 8 + 2 * t4 + (e & 1);
          hacc[nt][e] = fmaf(e >= 2 ? dhi : dlo, hacc[nt][e], p.seg_state[(sb + r) * p.V + j0 + col]);
        }
    }
  }

  const int nchunks = (s.length + kC - 1) / kC;
  // Raw tiles of chunk `ch` into stage `st` (16-byte cp.async; rows past the end zero-filled, so g = 0 there).
  // which: 1 = q and g, 2 = k and v, 3 = all. (With one stage, q and g of the next chunk are loaded as
  // soon as qe and kr are dead, i.e. while A @ v and the state update still read ke and v.)
  auto issue = [&](int ch, int st, int which) {
    __nv_bfloat16* q_s = tile(0, st);
    __nv_bfloat16* k_s = tile(1, st);
    __nv_bfloat16* g_s = tile(2, st);
    __nv_bfloat16* v_s = tile(3, st);
    const int t0 = ch * kC, cn = min(kC, s.length - t0);
    const std::int64_t row0 = s.row_begin + t0;
    for (int i = tid; i < kC * K / 8; i += C::NT) {
      const int r = i / (K / 8), c = (i % (K / 8)) * 8;
      const bool ok = r < cn;
      const std::int64_t off = ok ? ((row0 + r) * p.H + h) * K + c : 0;
      if (which & 1) {
        cp_async16(q_s + r * C::kQ + c, p.q + off, ok);
        cp_async16(g_s + r * C::kQ + c, p.g + off, ok);
      }
      if (which & 2) cp_async16(k_s + r * C::kQ + c, p.k + off, ok);
    }
    if (which & 2)
      for (int i = tid; i < kC * VT / 8; i += C::NT) {
        const int r = i / (VT / 8), c = (i % (VT / 8)) * 8;
        const bool ok = r < cn;
        const std::int64_t off = ok ? ((row0 + r) * p.H + h) * p.V + j0 + c : 0;
        cp_async16(v_s + r * C::kVs + c, p.v + off, ok);
      }
  };
  if (nchunks > 0) {
    issue(0, 0, 3);
    cp_async_commit();
  }

  // o / A: row block rb of 16 tokens, column part op; each scheduler (warp % 4) gets every row block,
  // so the causal imbalance of A and A @ v is spread over the four of them.
  const int rb = C::NW == 16 ? warp >> 2 : ((warp & 1) ? ((warp >> 2) ? 2 : 1) : ((warp >> 2) ? 3 : 0));
  const int op = C::NW == 16 ? warp & 3 : (warp >> 1) & 1;
  const int ocol0 = op * C::OCOLS;
  for (int ch = 0; ch < nchunks; ++ch) {
    const int t0 = ch * kC;
    const int cn = min(kC, s.length - t0);
    const std::int64_t row0 = s.row_begin + t0;
    cp_async_wait<0>();
    __syncthreads();  // chunk ch landed for every thread; every warp is done with chunk ch-1
    if (ch + 1 < nchunks) {  // KVDB: k and v only (q and g: prefetch_qg)
      issue(ch + 1, (ch + 1) & 1, C::KVDB ? 2 : 3);
      cp_async_commit();
    }
    // KVDB: q and g of chunk ch+1 go in once this chunk's qe and kr are dead (after the A barrier).
    auto prefetch_qg = [&]() {
      if (C::KVDB && ch + 1 < nchunks) {
        issue(ch + 1, 0, 1);
        cp_async_commit();
      }
    };
    const int buf = ch & 1;
    __nv_bfloat16* sq = tile(0, buf);  // q, then qe
    __nv_bfloat16* sk = tile(1, buf);  // k, then ke
    __nv_bfloat16* sg = tile(2, buf);  // g, then kr
    const __nv_bfloat16* sv = tile(3, buf);

    // ---- cumsum: warp w owns 8-channel groups w, w + NW, ..; lane l rows 2l, 2l+1; scan over lanes.
    // d0, d1 = b - rho at rows 2l, 2l+1 of channels c0..c0+7; rho = b at row 31, bl = b at row 63.
    auto scan = [&](int c0, float (&d0)[8], float (&d1)[8], float (&rho)[8], float (&bl)[8]) {
      const int r0 = 2 * lane;
      float x0[8], x1[8], inc[8];
      unpack8(*reinterpret_cast<const uint4*>(sg + r0 * C::kQ + c0), x0);
      unpack8(*reinterpret_cast<const uint4*>(sg + (r0 + 1) * C::kQ + c0), x1);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        x0[e] *= kLog2e;
        x1[e] *= kLog2e;
        inc[e] = x0[e] + x1[e];
      }
#pragma unroll
      for (int o = 1; o < 32; o <<= 1)
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float y = __shfl_up_sync(0xffffffffu, inc[e], o);
          if (lane >= o) inc[e] += y;
        }
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        rho[e] = __shfl_sync(0xffffffffu, inc[e], 15);
        bl[e] = __shfl_sync(0xffffffffu, inc[e], 31);
        d0[e] = inc[e] - x1[e] - rho[e];
        d1[e] = inc[e] - rho[e];
      }
    };
    float hd0[8], hd1[8];  // kept across the decision barrier when a warp has one channel group
    bool bad = false;
#pragma unroll
    for (int cgi = 0; cgi < C::CGW; ++cgi) {
      const int c0 = (warp + cgi * C::NW) * 8;
      float d0[8], d1[8], rho[8], bl[8];
      scan(c0, d0, d1, rho, bl);
      if constexpr (C::KVDB) {
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          bad |= !(fabsf(d0[e]) <= kLim) || !(fabsf(d1[e]) <= kLim);
          hd0[e] = d0[e];
          hd1[e] = d1[e];
        }
        // Every lane holds rho and bL of all 8 channels: lane e < 8 exponentiates channel e only (3 ex2 per
        // lane instead of 24; the same ex2 of the same values as the K = 64, 128 branch).
        float rl = rho[0], bll = bl[0];
#pragma unroll
        for (int e = 1; e < 8; ++e)
          if ((lane & 7) == e) {
            rl = rho[e];
            bll = bl[e];
          }
        if (lane < 8) {
          sRe[c0 + lane] = ex2(rl);
          sDl[c0 + lane] = ex2(bll);
          sCk[c0 + lane] = ex2(bll - rl);
        }
      } else {
        float re[8], dl[8], ck[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          bad |= !(fabsf(d0[e]) <= kLim) || !(fabsf(d1[e]) <= kLim);
          re[e] = ex2(rho[e]);
          dl[e] = ex2(bl[e]);
          ck[e] = ex2(bl[e] - rho[e]);
          hd0[e] = d0[e];
          hd1[e] = d1[e];
        }
        if (lane == 0) {
          *reinterpret_cast<float4*>(sRe + c0) = make_float4(re[0], re[1], re[2], re[3]);
          *reinterpret_cast<float4*>(sRe + c0 + 4) = make_float4(re[4], re[5], re[6], re[7]);
          *reinterpret_cast<float4*>(sDl + c0) = make_float4(dl[0], dl[1], dl[2], dl[3]);
          *reinterpret_cast<float4*>(sDl + c0 + 4) = make_float4(dl[4], dl[5], dl[6], dl[7]);
          *reinterpret_cast<float4*>(sCk + c0) = make_float4(ck[0], ck[1], ck[2], ck[3]);
          *reinterpret_cast<float4*>(sCk + c0 + 4) = make_float4(ck[4], ck[5], ck[6], ck[7]);
        }
      }
    }
    const bool fast = !__syncthreads_or(bad);

    if (fast) {
      // ---- operands in place: q -> qe, g -> kr, k -> ke.
#pragma unroll
      for (int cgi = 0; cgi < C::CGW; ++cgi) {
        const int c0 = (warp + cgi * C::NW) * 8;
        float d0[8], d1[8], ckl[8];
        if (C::CGW == 1) {
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            d0[e] = hd0[e];
            d1[e] = hd1[e];
          }
        } else {  // two groups: scan again (g of this group is still raw) rather than hold 32 registers
          float rho[8], bl[8];
          scan(c0, d0, d1, rho, bl);
        }
#pragma unroll
        for (int e = 0; e < 8; ++e) ckl[e] = sCk[c0 + e];
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          const int r = 2 * lane + hr;
          float q[8], k[8], qe[8], kr[8], ke[8];
          unpack8(*reinterpret_cast<const uint4*>(sq + r * C::kQ + c0), q);
          unpack8(*reinterpret_cast<const uint4*>(sk + r * C::kQ + c0), k);
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            const float d = hr ? d1[e] : d0[e];
            qe[e] = q[e] * ex2(d);
            kr[e] = k[e] * ex2(-d);
            ke[e] = kr[e] * ckl[e];
          }
          *reinterpret_cast<uint4*>(sq + r * C::kQ + c0) = pack8(qe);
          *reinterpret_cast<uint4*>(sg + r * C::kQ + c0) = pack8(kr);
          *reinterpret_cast<uint4*>(sk + r * C::kQ + c0) = pack8(ke);
        }
      }
      // ---- H^T in bf16 with the rho rows folded in: qe @ (2^rho H) = (q 2^b) @ H.
      if (want_o) {
        const float re_lo = sRe[srow], re_hi = sRe[srow + 8];
#pragma unroll
        for (int nt = 0; nt < C::SNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = srow + (e >= 2 ? 8 : 0), col = scol0 + nt * 8 + 2 * t4 + (e & 1);
            sHT[col * C::kQ + r] = __float2bfloat16_rn(hacc[nt][e] * (e >= 2 ? re_hi : re_lo));
          }
      }
      __syncthreads();

      // ---- o = qe @ H^T^T (row block rb, columns ocol0..) and A blocks (rb, jb) share qe's fragments.
      float oacc[C::ONT][4], aacc[C::NJB][2][4];
      if (want_o) {
#pragma unroll
        for (int nt = 0; nt < C::ONT; ++nt) oacc[nt][0] = oacc[nt][1] = oacc[nt][2] = oacc[nt][3] = 0.f;
#pragma unroll
        for (int jj = 0; jj < C::NJB; ++jj)
#pragma unroll
          for (int t = 0; t < 2; ++t) aacc[jj][t][0] = aacc[jj][t][1] = aacc[jj][t][2] = aacc[jj][t][3] = 0.f;
#pragma unroll 4
        for (int ks = 0; ks < K / 16; ++ks) {
          std::uint32_t a[4];
          ldsm_frag_a(a, sq, C::kQ, rb * 16, ks * 16, lane);
#pragma unroll
          for (int np = 0; np < C::ONT / 2; ++np) {
            std::uint32_t b[4];
            ldsm_frag_b_nk(b, sHT, C::kQ, ocol0 + np * 16, ks * 16, lane);
            mma_bf16_16816(oacc[2 * np], a, b[0], b[1]);
            mma_bf16_16816(oacc[2 * np + 1], a, b[2], b[3]);
          }
#pragma unroll
          for (int jj = 0; jj < C::NJB; ++jj) {
            const int jb = op + jj * C::OPARTS;
            if (jb <= rb) {
              std::uint32_t b[4];
              ldsm_frag_b_nk(b, sg, C::kQ, jb * 16, ks * 16, lane);
              mma_bf16_16816(aacc[jj][0], a, b[0], b[1]);
              mma_bf16_16816(aacc[jj][1], a, b[2], b[3]);
            }
          }
        }
        // Causal mask (select: the masked side may be inf), A -> hi + lo bf16.
#pragma unroll
        for (int jj = 0; jj < C::NJB; ++jj) {
          const int jb = op + jj * C::OPARTS;
          if (jb > rb) continue;
          store_causal_block_split<PaddedRows<C::kAs>>(sAh, sAl, aacc[jj], rb, jb, g8, t4);
        }
      }  // want_o
      __syncthreads();
      prefetch_qg();

      // ---- o += A @ v (blocks kk <= rb), then store.
      if (want_o) {
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          if (kk <= rb) {
            std::uint32_t ah[4], al[4];
            ldsm_frag_a(ah, sAh, C::kAs, rb * 16, kk * 16, lane);
            ldsm_frag_a(al, sAl, C::kAs, rb * 16, kk * 16, lane);
#pragma unroll
            for (int np = 0; np < C::ONT / 2; ++np) {
              std::uint32_t b[4];
              ldsm_frag_b_kn(b, sv, C::kVs, kk * 16, ocol0 + np * 16, lane);
              mma_bf16_16816(oacc[2 * np], ah, b[0], b[1]);
              mma_bf16_16816(oacc[2 * np + 1], ah, b[2], b[3]);
              mma_bf16_16816(oacc[2 * np], al, b[0], b[1]);
              mma_bf16_16816(oacc[2 * np + 1], al, b[2], b[3]);
            }
          }
        }
#pragma unroll
        for (int nt = 0; nt < C::ONT; ++nt)
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const int r = rb * 16 + g8 + hh * 8;
            if (r < cn) {
              const int col = j0 + ocol0 + nt * 8 + 2 * t4;
              *reinterpret_cast<std::uint32_t*>(p.o + ((row0 + r) * p.H + h) * p.V + col) =
                  pack_bf16(p.scale * oacc[nt][2 * hh], p.scale * oacc[nt][2 * hh + 1]);
            }
          }
      }  // want_o

      // ---- H = diag(2^bL) H + ke^T @ v
      {
        const float d_lo = sDl[srow], d_hi = sDl[srow + 8];
        seg_dec_lo *= d_lo;
        seg_dec_hi *= d_hi;
#pragma unroll
        for (int nt = 0; nt < C::SNT; ++nt) {
          hacc[nt][0] *= d_lo;
          hacc[nt][1] *= d_lo;
          hacc[nt][2] *= d_hi;
          hacc[nt][3] *= d_hi;
        }
#pragma unroll
        for (int ks = 0; ks < kC / 16; ++ks) {
          std::uint32_t a[4];
          ldsm_frag_a_trans(a, sk, C::kQ, smt * 16, ks * 16, lane);
#pragma unroll
          for (int np = 0; np < C::SNT / 2; ++np) {
            std::uint32_t b[4];
            ldsm_frag_b_kn(b, sv, C::kVs, ks * 16, scol0 + np * 16, lane);
            mma_bf16_16816(hacc[2 * np], a, b[0], b[1]);
            mma_bf16_16816(hacc[2 * np + 1], a, b[2], b[3]);
          }
        }
      }
    } else {
      // ---- Steep chunk: the exact token recurrence on the state registers (fp32), o reduced in smem.
      if (want_o)
        for (int i = tid; i < kC * VT / 4; i += C::NT) reinterpret_cast<float4*>(sOf)[i] = make_float4(0.f, 0.f, 0.f, 0.f);
      __syncthreads();
      for (int t = 0; t < cn; ++t) {
        const __nv_bfloat16* qt = sq + t * C::kQ;
        const __nv_bfloat16* kt = sk + t * C::kQ;
        const __nv_bfloat16* gt = sg + t * C::kQ;
        const float dlo = ex2(__bfloat162float(gt[srow]) * kLog2e), dhi = ex2(__bfloat162float(gt[srow + 8]) * kLog2e);
        const float klo = __bfloat162float(kt[srow]), khi = __bfloat162float(kt[srow + 8]);
        const float qlo = __bfloat162float(qt[srow]), qhi = __bfloat162float(qt[srow + 8]);
        seg_dec_lo *= dlo;
        seg_dec_hi *= dhi;
        float part[C::SNT][2];
#pragma unroll
        for (int nt = 0; nt < C::SNT; ++nt) {
          const float2 vv = load_bf16x2(sv + t * C::kVs + scol0 + nt * 8 + 2 * t4);
          hacc[nt][0] = fmaf(hacc[nt][0], dlo, klo * vv.x);
          hacc[nt][1] = fmaf(hacc[nt][1], dlo, klo * vv.y);
          hacc[nt][2] = fmaf(hacc[nt][2], dhi, khi * vv.x);
          hacc[nt][3] = fmaf(hacc[nt][3], dhi, khi * vv.y);
          part[nt][0] = fmaf(qlo, hacc[nt][0], qhi * hacc[nt][2]);
          part[nt][1] = fmaf(qlo, hacc[nt][1], qhi * hacc[nt][3]);
        }
        if (!want_o) continue;
#pragma unroll
        for (int o = 4; o < 32; o <<= 1)
#pragma unroll
          for (int nt = 0; nt < C::SNT; ++nt) {
            part[nt][0] += __shfl_xor_sync(0xffffffffu, part[nt][0], o);
            part[nt][1] += __shfl_xor_sync(0xffffffffu, part[nt][1], o);
          }
        if (g8 == 0) {
#pragma unroll
          for (int nt = 0; nt < C::SNT; ++nt) {
            atomicAdd(sOf + t * VT + scol0 + nt * 8 + 2 * t4, part[nt][0]);
            atomicAdd(sOf + t * VT + scol0 + nt * 8 + 2 * t4 + 1, part[nt][1]);
          }
        }
      }
      __syncthreads();
      prefetch_qg();
      if (want_o) {
        for (int i = tid; i < cn * VT / 2; i += C::NT) {
          const int t = i / (VT / 2), c = (i % (VT / 2)) * 2;
          *reinterpret_cast<std::uint32_t*>(p.o + ((row0 + t) * p.H + h) * p.V + j0 + c) =
              pack_bf16(p.scale * sOf[t * VT + c], p.scale * sOf[t * VT + c + 1]);
        }
      }
    }
  }
  if (p.mode == 1) {
    const std::int64_t sb = (static_cast<std::int64_t>(s.slot0 + s.seg) * p.H + h) * K;
    if (scol0 == 0 && t4 == 0) {
      p.seg_decay[sb + srow] = seg_dec_lo;
      p.seg_decay[sb + srow + 8] = seg_dec_hi;
    }
#pragma unroll
    for (int nt = 0; nt < C::SNT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = srow + (e >= 2 ? 8 : 0), col = scol0 + nt * 8 + 2 * t4 + (e & 1);
        p.seg_state[(sb + r) * p.V + j0 + col] = hacc[nt][e];
      }
  } else if (p.ht && s.seg == s.nseg - 1) {
#pragma unroll
    for (int nt = 0; nt < C::SNT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = srow + (e >= 2 ? 8 : 0), col = scol0 + nt * 8 + 2 * t4 + (e & 1);
        p.ht[state_base + static_cast<std::int64_t>(r) * p.V + j0 + col] = hacc[nt][e];
      }
  }
}

}  // namespace
}  // namespace lina::detail::cuda
