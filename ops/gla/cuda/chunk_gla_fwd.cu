// chunk_gla forward, one fused kernel (docs/kernels/chunk_gla_fwd.md).
// One CTA per (sequence, head, V tile of VT columns) walks its chunks of 64 tokens in order. The fp32
// state tile H [K, VT] lives in the MMA accumulators (warp w owns one 16-row m-tile and SNT n8 tiles).
// Per chunk, everything stays on chip. With b = chunk-local cumsum of g (log2 units) and a per-channel
// reference rho = b at row 31:
//   qe = q 2^(b - rho),  kr = k 2^(rho - b),  ke = k 2^(bL - b)      (bf16, made once per chunk)
//   o  = scale * (qe @ (diag(2^rho) H) + A @ v),  A = causal(qe kr^T)  (A kept as bf16 hi + lo)
//   H  = diag(2^bL) H + ke^T @ v
// qe kr^T = q k 2^(b_r - b_j) exactly in exponent; with |b - rho| <= kLim every operand is a normal
// finite bf16, so this factorisation is safe (spec section 5). A chunk outside that range (steep decay)
// runs the exact token recurrence on the state registers instead. Masking is a select.
// Tensor cores via mma.sync m16n8k16 bf16 -> fp32, operands through ldmatrix.
// Few (sequence, head) pairs: sequences are cut into segments; pass 1 computes each segment's local
// state and decay, pass 2 starts every segment from the combined state (plan_segments).
#include <cuda_bf16.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "lina/error.h"
#include "ops/common/backends.h"
#include "ops/common/variant.h"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/launch_setup.h"
#include "ops/common/cuda/mbarrier.cuh"
#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/common/cuda/wgmma_sm90.cuh"
#include "ops/common/cuda/workspace.h"
#include "ops/gla/cuda/gla_wgmma_glue.cuh"

namespace lina::detail::cuda {
namespace {

using namespace cuda_util;

constexpr int kC = 64;  // chunk
constexpr float kLog2e = 1.4426950408889634f;
// Fast path when |b - rho| <= kLim for the whole chunk: q 2^(b-rho) and k 2^(rho-b) then stay within
// 2^100 of q and k (bf16 range 2^-126 .. 2^127), and A's causal products q k 2^(b_r - b_j) are <= q k.
constexpr float kLim = 100.f;

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
// One 16x16 block (rb, jb) of A from its two m16n8 accumulators: the causal mask by select (the masked
// side may be inf), then A = hi + lo in bf16 at pitch `pitch` (v4 and v5 write A the same way).
__device__ __forceinline__ void store_causal_block_split(__nv_bfloat16* hi_s, __nv_bfloat16* lo_s, int pitch,
                                                         const float (&acc)[2][4], int rb, int jb, int g8, int t4) {
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = rb * 16 + g8 + hh * 8, jc = jb * 16 + t * 8 + 2 * t4;
      const float x0 = jc > r ? 0.f : acc[t][2 * hh];
      const float x1 = jc + 1 > r ? 0.f : acc[t][2 * hh + 1];
      const std::uint32_t hi = pack_bf16(x0, x1);
      const float2 hf = unpack_bf16(hi);
      *reinterpret_cast<std::uint32_t*>(hi_s + r * pitch + jc) = hi;
      *reinterpret_cast<std::uint32_t*>(lo_s + r * pitch + jc) = pack_bf16(x0 - hf.x, x1 - hf.y);
    }
}

__device__ __forceinline__ uint4 pack8(const float (&x)[8]) {
  return make_uint4(pack_bf16(x[0], x[1]), pack_bf16(x[2], x[3]), pack_bf16(x[4], x[5]), pack_bf16(x[6], x[7]));
}

// ---- Pieces shared by v5 (K = 128) and the K = 256 prep / state kernels (one definition each). ----

// Serial gate scan of NR rows (log2 units) for the channel pair cp, cp + 1, from row r0 of a g tile at
// pitch ld: the rows' sum `run` and the lowest / highest running sum (v5 producer pass 1).
template <int NR>
__device__ __forceinline__ void gate_rows_scan(const __nv_bfloat16* sg, int ld, int r0, int cp, float2& run, float2& lo, float2& hi) {
  run = make_float2(0.f, 0.f);
  lo = hi = run;
#pragma unroll
  for (int i = 0; i < NR; ++i) {
    const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sg + (r0 + i) * ld + cp));
    run.x += x.x * kLog2e;
    run.y += x.y * kLog2e;
    lo = i ? make_float2(fminf(lo.x, run.x), fminf(lo.y, run.y)) : run;
    hi = i ? make_float2(fmaxf(hi.x, run.x), fmaxf(hi.y, run.y)) : run;
  }
}
// Steep test of those rows, whose running sums start at `off` relative to rho: |b_r - rho| is largest
// at the lowest or highest running sum; the last sum carries a NaN of any row (fminf / fmaxf drop NaN).
// (v5 keeps the same test written out in place: through this call its SASS changed.)
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
          store_causal_block_split(sAh, sAl, C::kAs, aacc[jj], rb, jb, g8, t4);
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

// ---------------------------------------------------------------------------------------------------
// v5 (K = 128 with VT = 128 and, on this branch, K = 64 with VT = 64; LINA_GLA_FWD_VERSION=4 selects v4;
// docs/kernels/chunk_gla_fwd.md): warp-specialised, chunks overlapped. Producer warps load chunk n+1
// (cp.async), scan its gate, make qe, kr, ke in place and A = causal(qe kr^T) as bf16 hi + lo, while
// consumer warps run the o and state GEMMs of chunk n. K = 128: 8 + 8 warps, three stages of {q/qe, k/ke,
// v, g/kr/A, 2^rho, 2^bL, steep flags}; hand-over through
// mbarriers only (landed: cp.async done, full: operands ready, empty: consumers done), no CTA barrier in
// the chunk loop. The consumers hold the state transposed, H^T [VT][K] (warp w: value columns 16w..16w+15,
// all K channels), so its accumulator layout is the B fragment layout of o = qe @ (2^rho H): no bf16 copy
// of H through shared memory and no barrier between the state and o. Same operands, roundings and steep
// fallback as v4. Registers: launched at 512 threads (128 each); the producer warpgroups give theirs
// down to kProducerRegs and the consumer warpgroups take kConsumerRegs (setmaxnreg), because the H200
// profile of the 4-producer version (384 threads) showed the consumers waiting on `full` for half the
// chunk: one latency-bound producer warp per scheduler was the bound.
// K = 64 (D64): 4 consumer + 4 producer warps (256 threads), two stages, two CTAs per SM, no register
// reallocation; the producers load chunk n+1 after handing chunk n over (see issue_next).
template <int K_, int VT_>
struct WsCfg {
  static constexpr int K = K_, VT = VT_;
  static constexpr int NH = K / 64, LNH = NH == 2 ? 1 : 0;  // 64-channel halves; the scan's warp = (half, quarter)
  static constexpr int NCW = VT / 16, NPW = 4 * NH;         // consumer, producer warps
  static constexpr int NT = (NCW + NPW) * 32;
  static constexpr int MINB = K == 64 ? 2 : 1;              // CTAs per SM
  static constexpr bool kRealloc = K == 128;                // setmaxnreg between the roles
  static constexpr int kConsumerRegs = 160, kProducerRegs = 96;  // K = 128: 256 x (160 + 96) = 65,536
  static constexpr int NCT = NCW * 32, NPT = NPW * 32;
  static constexpr int STAGES = K == 64 ? 2 : 3;
  static constexpr int kQ = K + 8, kVs = VT + 8, kAs = kC + 8;
  static constexpr std::size_t tile = 1ull * kC * kQ * 2;             // q, k, g tiles (kQ == kVs: v too)
  static constexpr std::size_t a_bytes = 1ull * kC * kAs * 2;          // A hi or A lo
  static constexpr std::size_t ga_bytes = tile > 2 * a_bytes ? tile : 2 * a_bytes;  // g, then kr, then A hi + lo
  static constexpr std::size_t off_k = tile, off_v = 2 * tile, off_g = 3 * tile, off_re = off_g + ga_bytes;
  static constexpr std::size_t off_dl = off_re + K * 4, off_flag = off_dl + K * 4;
  static constexpr std::size_t stage_bytes = off_flag + 4 * NPW;      // one int steep flag per producer warp
  static constexpr std::size_t off_tot = STAGES * stage_bytes;        // [4][K] quarter gate sums, producer-private
  static constexpr std::size_t off_bar = off_tot + 4 * K * 4;         // full, empty, landed [STAGES], producer barrier
  static constexpr std::size_t smem = off_bar + (3 * STAGES + 1) * 8;
  static constexpr int kABlocks = (10 + NPW - 1) / NPW;  // causal 16x16 blocks of A per producer warp
  static_assert(kQ == kVs, "v tile shares the q/k tile size");
  static_assert(stage_bytes % 16 == 0 && off_bar % 8 == 0, "alignment");
  static_assert(MINB * (smem + 1024) <= 228ull * 1024, "shared memory per SM");
  static_assert((NH == 1 || NH == 2) && K == 64 * NH && kC == 4 * 16 && NCW * 16 == VT,
                "warp layout: producers NH channel halves (2 per lane) x 4 row quarters; consumers 16 value columns");
  static_assert(NCW % 4 == 0 && NPW % 4 == 0, "setmaxnreg acts per warpgroup: each role is whole warpgroups");
  static_assert(!kRealloc || NCW * 32 * kConsumerRegs + NPW * 32 * kProducerRegs <= 65536, "register file");
};

template <int NPW>
__device__ __forceinline__ bool any_steep(const int* flags) {
  int f = 0;
#pragma unroll
  for (int w = 0; w < NPW; ++w) f |= flags[w];
  return f != 0;
}

template <int K, int VT>
__global__ void __launch_bounds__(WsCfg<K, VT>::NT, WsCfg<K, VT>::MINB) chunk_gla_fwd_ws(Params p) {
  using C = WsCfg<K, VT>;
  constexpr int NCW = C::NCW, NPW = C::NPW, NCT = C::NCT, NPT = C::NPT, STAGES = C::STAGES;
  constexpr int kQ = C::kQ, kVs = C::kVs, kAs = C::kAs, kABlocks = C::kABlocks;
  constexpr std::size_t off_k = C::off_k, off_v = C::off_v, off_g = C::off_g, off_re = C::off_re, off_dl = C::off_dl;
  constexpr std::size_t off_flag = C::off_flag, stage_bytes = C::stage_bytes, off_tot = C::off_tot, off_bar = C::off_bar;
  extern __shared__ __align__(16) unsigned char smem[];
  std::uint64_t* bar = reinterpret_cast<std::uint64_t*>(smem + off_bar);
  std::uint64_t *full = bar, *empty = bar + STAGES, *landed = bar + 2 * STAGES, *pbar = bar + 3 * STAGES;
  float* sTot = reinterpret_cast<float*>(smem + off_tot);
  auto st_ptr = [&](int s, std::size_t off) { return smem + s * stage_bytes + off; };
  auto bf = [&](int s, std::size_t off) { return reinterpret_cast<__nv_bfloat16*>(st_ptr(s, off)); };
  auto fl = [&](int s, std::size_t off) { return reinterpret_cast<float*>(st_ptr(s, off)); };

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g8 = lane >> 2, t4 = lane & 3;
  const int j0 = blockIdx.x * VT, h = blockIdx.y, n = blockIdx.z;
  const WorkItem s = work_item(p, n);
  if (p.mode == 1 && s.seg == s.nseg - 1) return;  // the last segment's local state is not needed
  const std::int64_t state_base = (static_cast<std::int64_t>(s.seq) * p.H + h) * K * p.V;
  const bool want_o = p.mode != 1;
  const int nchunks = (s.length + kC - 1) / kC;
  if (tid == 0) {
    for (int i = 0; i < STAGES; ++i) {
      mbar_init(full + i, NPT);
      mbar_init(empty + i, NCT);
      mbar_init(landed + i, NPT);  // one cp.async completion arrive per producer thread
    }
    mbar_init(pbar, NPT);
  }
  __syncthreads();  // the only CTA-wide barrier: consumers and producers run apart from here on

  if (warp >= NCW) {
    // ================= producer warps: loads, gate scan, operands, A =================
    if constexpr (C::kRealloc) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(C::kProducerRegs));
    const int pw = warp - NCW, ptid = tid - NCT;
    std::uint32_t pphase = 0;
    auto psync = [&]() {  // the producer warps (mbarrier, so consumers are not involved)
      mbar_arrive(pbar);
      mbar_wait(pbar, pphase);
      pphase ^= 1u;
    };
    // Loads: thread ptid copies 16 bytes at column lc of rows lr + 16 j (j < 4) of each tile. The row
    // strides are per-CTA constants, so a copy is a pointer add (the per-copy 64-bit index products
    // were 30 % of the producer time in the H200 profile).
    constexpr int kRowsPerPass = NPT / (K / 8);
    static_assert(K == VT && kC % kRowsPerPass == 0, "q, k, g and v tiles share the copy layout");
    const int lr = ptid / (K / 8), lc = (ptid % (K / 8)) * 8;
    const std::int64_t qk_pass = static_cast<std::int64_t>(kRowsPerPass) * p.H * K;
    const std::int64_t v_pass = static_cast<std::int64_t>(kRowsPerPass) * p.H * p.V;
    auto issue = [&](int ch, int st) {
      const int t0 = ch * kC, cn = min(kC, s.length - t0);
      const std::int64_t row = s.row_begin + t0 + lr;
      std::int64_t qo = (row * p.H + h) * K + lc, vo = (row * p.H + h) * p.V + j0 + lc;
      const std::uint32_t so = (lr * kQ + lc) * 2;  // byte offset in a tile (kQ == kVs)
#pragma unroll
      for (int j = 0; j < kC / kRowsPerPass; ++j) {
        const bool ok = lr + j * kRowsPerPass < cn;
        const std::uint32_t sj = so + j * kRowsPerPass * kQ * 2;
        cp_async16(st_ptr(st, sj), p.q + (ok ? qo : 0), ok);
        cp_async16(st_ptr(st, off_k + sj), p.k + (ok ? qo : 0), ok);
        cp_async16(st_ptr(st, off_g + sj), p.g + (ok ? qo : 0), ok);
        cp_async16(st_ptr(st, off_v + sj), p.v + (ok ? vo : 0), ok);
        qo += qk_pass;
        vo += v_pass;
      }
      mbar_arrive_cp_async(landed + st);
    };
    // Scan layout: warp pw owns channels c, c + 1 (c = 64 (pw mod NH) + 2 lane) over the 16 rows of
    // quarter pw / NH; a thread scans its rows serially and the quarters meet through sTot (the
    // shuffle scan of v4 was half of the producer time in the H200 profile of the 8-producer version).
    const int cp = 64 * (pw & (C::NH - 1)) + 2 * lane, quarter = pw >> C::LNH, qr0 = 16 * quarter;
    float2 segdec = make_float2(1.f, 1.f);  // mode 1, quarter 0: the product of 2^bL of channels cp, cp + 1
    // Chunk m + 1's loads go into the stage of chunk m + 1 - STAGES once the consumers release it. With
    // three stages that is issued before chunk m's work (the consumers are two chunks behind at most);
    // with two it is chunk m - 1's stage, so it is issued after chunk m is handed over - waiting for it
    // first would make the producers idle through the consumers' chunk m - 1.
    auto issue_next = [&](int m) {
      if (m + 1 < nchunks) {
        const int s1 = (m + 1) % STAGES;
        if (m + 1 >= STAGES) mbar_wait(empty + s1, static_cast<std::uint32_t>((m + 1) / STAGES - 1) & 1u);
        issue(m + 1, s1);
      }
    };
    if (nchunks > 0) issue(0, 0);
    for (int m = 0; m < nchunks; ++m) {
      const int st = m % STAGES;
      if constexpr (STAGES > 2) issue_next(m);  // next chunk's loads run during this chunk's work
      mbar_wait(landed + st, static_cast<std::uint32_t>(m / STAGES) & 1u);
      const int cn = min(kC, s.length - m * kC);
      __nv_bfloat16 *sq = bf(st, 0), *sk = bf(st, off_k), *sg = bf(st, off_g);
      float *sRe = fl(st, off_re), *sDl = fl(st, off_dl);
      int* sFlag = reinterpret_cast<int*>(st_ptr(st, off_flag));

      // ---- pass 1: the quarter's gate sums (log2 units) and the range of its running sums.
      float2 run, lo, hi;
      gate_rows_scan<16>(sg, kQ, qr0, cp, run, lo, hi);
      *reinterpret_cast<float2*>(sTot + quarter * K + cp) = run;
      psync();  // every quarter's sum is in sTot
      // ---- rho = b at row 31, bL = b at row 63; this quarter's running sums start at off (relative to rho)
      float2 tq[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) tq[u] = *reinterpret_cast<const float2*>(sTot + u * K + cp);
      const float2 rho = make_float2(tq[0].x + tq[1].x, tq[0].y + tq[1].y);
      const float2 bL = make_float2(rho.x + tq[2].x + tq[3].x, rho.y + tq[2].y + tq[3].y);
      float2 off = make_float2(-rho.x, -rho.y);
#pragma unroll
      for (int u = 0; u < 3; ++u)  // (a runtime bound would put tq in local memory)
        if (u < quarter) {
          off.x += tq[u].x;
          off.y += tq[u].y;
        }
      // |b_r - rho| over the quarter is largest at its lowest or highest running sum; the last sum
      // carries a NaN of any row (fminf / fmaxf drop NaN).
      // (range_bad spelled out: calling it here changed v5's register allocation and schedule.)
      bool bad = !(fabsf(off.x + lo.x) <= kLim) || !(fabsf(off.x + hi.x) <= kLim) || !(fabsf(off.x + run.x) <= kLim) ||
                 !(fabsf(off.y + lo.y) <= kLim) || !(fabsf(off.y + hi.y) <= kLim) || !(fabsf(off.y + run.y) <= kLim);
      const float2 dl = make_float2(ex2(bL.x), ex2(bL.y));
      if (quarter == 0) {
        *reinterpret_cast<float2*>(sRe + cp) = make_float2(ex2(rho.x), ex2(rho.y));
        *reinterpret_cast<float2*>(sDl + cp) = dl;
      }
      bad = __any_sync(0xffffffffu, bad);
      if (lane == 0) sFlag[pw] = bad ? 1 : 0;
      psync();  // flags complete; every sTot read of this chunk is done
      const bool steep = any_steep<NPW>(sFlag);

      if (!steep) {
        // ---- pass 2, operands in place: q -> qe = q 2^(b - rho), g -> kr = k 2^(rho - b), k -> ke = kr 2^(bL - rho).
        const float2 ck = make_float2(ex2(bL.x - rho.x), ex2(bL.y - rho.y));
        float2 d = off;
#pragma unroll 4
        for (int i = 0; i < 16; ++i) {
          const int o = (qr0 + i) * kQ + cp;
          const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sg + o));
          d.x += x.x * kLog2e;
          d.y += x.y * kLog2e;
          const float2 q = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sq + o));
          const float2 k = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sk + o));
          const float krx = k.x * ex2(-d.x), kry = k.y * ex2(-d.y);
          *reinterpret_cast<std::uint32_t*>(sq + o) = pack_bf16(q.x * ex2(d.x), q.y * ex2(d.y));
          *reinterpret_cast<std::uint32_t*>(sg + o) = pack_bf16(krx, kry);
          *reinterpret_cast<std::uint32_t*>(sk + o) = pack_bf16(krx * ck.x, kry * ck.y);
        }
        if (want_o) {
          psync();  // qe and kr complete
          // ---- A = causal(qe kr^T): the 10 causal 16x16 blocks (rb >= jb), block i = pw + NPW bi.
          float aacc[kABlocks][2][4];
#pragma unroll
          for (int bi = 0; bi < kABlocks; ++bi) {
            const int i = pw + NPW * bi;
            const int rb = (i >= 1) + (i >= 3) + (i >= 6), jb = i - rb * (rb + 1) / 2;
#pragma unroll
            for (int t = 0; t < 2; ++t) aacc[bi][t][0] = aacc[bi][t][1] = aacc[bi][t][2] = aacc[bi][t][3] = 0.f;
            if (i < 10) {
#pragma unroll 4
              for (int ks = 0; ks < K / 16; ++ks) {
                std::uint32_t a[4], b[4];
                ldsm_frag_a(a, sq, kQ, rb * 16, ks * 16, lane);
                ldsm_frag_b_nk(b, sg, kQ, jb * 16, ks * 16, lane);
                mma_bf16_16816(aacc[bi][0], a, b[0], b[1]);
                mma_bf16_16816(aacc[bi][1], a, b[2], b[3]);
              }
            }
          }
          psync();  // every warp is done reading kr: A hi + lo overwrite the g / kr tile
          __nv_bfloat16* sAh = sg;
          __nv_bfloat16* sAl = sg + kC * kAs;
#pragma unroll
          for (int bi = 0; bi < kABlocks; ++bi) {
            const int i = pw + NPW * bi;
            if (i >= 10) continue;
            const int rb = (i >= 1) + (i >= 3) + (i >= 6), jb = i - rb * (rb + 1) / 2;
            store_causal_block_split(sAh, sAl, kAs, aacc[bi], rb, jb, g8, t4);
          }
        }
        if (p.mode == 1) {
          segdec.x *= dl.x;
          segdec.y *= dl.y;
        }
      } else if (p.mode == 1 && quarter == 0) {
        // Steep chunk: the consumers run the token recurrence on the raw tiles; the segment decay is
        // the product of the per-token factors, in token order as in v4.
        for (int t = 0; t < cn; ++t) {
          const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sg + t * kQ + cp));
          segdec.x *= ex2(x.x * kLog2e);
          segdec.y *= ex2(x.y * kLog2e);
        }
      }
      mbar_arrive(full + st);  // operands (or the raw tiles of a steep chunk) ready for the consumers
      if constexpr (STAGES == 2) issue_next(m);
    }
    if (p.mode == 1 && quarter == 0) {
      const std::int64_t sb = (static_cast<std::int64_t>(s.slot0 + s.seg) * p.H + h) * K;
      p.seg_decay[sb + cp] = segdec.x;
      p.seg_decay[sb + cp + 1] = segdec.y;
    }
    return;
  }

  // ================= consumer warps: o and the state, value columns vc0 .. vc0 + 15 =================
  if constexpr (C::kRealloc) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(C::kConsumerRegs));
  const int vc0 = warp * 16;
  // ht[nt][e]: H[ch][v] with ch = nt * 8 + 2 t4 + (e & 1), v = vc0 + g8 + (e >= 2 ? 8 : 0) (tile columns).
  float ht[K / 8][4];
#pragma unroll
  for (int nt = 0; nt < K / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int ch = nt * 8 + 2 * t4 + (e & 1), v = vc0 + g8 + (e >= 2 ? 8 : 0);
      ht[nt][e] = p.h0 && p.mode != 1 ? p.h0[state_base + static_cast<std::int64_t>(ch) * p.V + j0 + v] : 0.f;
    }
  if (p.mode == 2) {
    for (int u = 0; u < s.seg; ++u) {
      const std::int64_t sb = (static_cast<std::int64_t>(s.slot0 + u) * p.H + h) * K;
#pragma unroll
      for (int nt = 0; nt < K / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int ch = nt * 8 + 2 * t4 + (e & 1), v = vc0 + g8 + (e >= 2 ? 8 : 0);
          ht[nt][e] = fmaf(p.seg_decay[sb + ch], ht[nt][e], p.seg_state[(sb + ch) * p.V + j0 + v]);
        }
    }
  }
  for (int m = 0; m < nchunks; ++m) {
    const int st = m % STAGES;
    const int t0 = m * kC, cn = min(kC, s.length - t0);
    const std::int64_t row0 = s.row_begin + t0;
    mbar_wait(full + st, static_cast<std::uint32_t>(m / STAGES) & 1u);
    const __nv_bfloat16 *sq = bf(st, 0), *sk = bf(st, off_k), *sv = bf(st, off_v), *sg = bf(st, off_g);
    const float *sRe = fl(st, off_re), *sDl = fl(st, off_dl);
    const int* sFlag = reinterpret_cast<const int*>(st_ptr(st, off_flag));
    const bool steep = any_steep<NPW>(sFlag);
    if (!steep) {
      if (want_o) {
        // ---- o = qe @ (2^rho H): B fragments straight from the state registers (bf16(2^rho H), as v4's H^T).
        float oacc[4][2][4];
#pragma unroll
        for (int rb = 0; rb < 4; ++rb)
#pragma unroll
          for (int j = 0; j < 2; ++j) oacc[rb][j][0] = oacc[rb][j][1] = oacc[rb][j][2] = oacc[rb][j][3] = 0.f;
        o_from_state<K>(oacc, ht, sRe, sq, kQ, lane);
        // ---- o += A_hi @ v + A_lo @ v (blocks kk <= rb).
        o_add_av(oacc, sg, sg + kC * kAs, kAs, sv, kVs, vc0, lane, [](int) { return true; });
#pragma unroll
        for (int rb = 0; rb < 4; ++rb)
#pragma unroll
          for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
              const int r = rb * 16 + g8 + hh * 8;
              if (r < cn) {
                const int col = j0 + vc0 + j * 8 + 2 * t4;
                *reinterpret_cast<std::uint32_t*>(p.o + ((row0 + r) * p.H + h) * p.V + col) =
                    pack_bf16(p.scale * oacc[rb][j][2 * hh], p.scale * oacc[rb][j][2 * hh + 1]);
              }
            }
      }  // want_o
      // ---- H = diag(2^bL) H + ke^T @ v, as H^T = H^T diag(2^bL) + v^T @ ke.
      state_update<K>(ht, sDl, sv, kVs, vc0, sk, kQ, lane);
    } else {
      // ---- Steep chunk: the exact token recurrence (v4's per-element fp32 update); o of this warp's 16
      // columns is reduced over its own channels and quads, so no shared-memory scratch is needed.
      const int c = lane & 3;  // lanes 0..7 store the column pair 2c, 2c + 1 (+ 8 for lanes 4..7)
      for (int t = 0; t < cn; ++t) {
        const float vlo = __bfloat162float(sv[t * kVs + vc0 + g8]), vhi = __bfloat162float(sv[t * kVs + vc0 + g8 + 8]);
        float plo = 0.f, phi = 0.f;
#pragma unroll
        for (int nt = 0; nt < K / 8; ++nt) {
          const int ch = nt * 8 + 2 * t4;
          const float2 gg = load_bf16x2(sg + t * kQ + ch);
          const float2 kk = load_bf16x2(sk + t * kQ + ch);
          const float2 qq = load_bf16x2(sq + t * kQ + ch);
          const float d0 = ex2(gg.x * kLog2e), d1 = ex2(gg.y * kLog2e);
          ht[nt][0] = fmaf(ht[nt][0], d0, kk.x * vlo);
          ht[nt][1] = fmaf(ht[nt][1], d1, kk.y * vlo);
          ht[nt][2] = fmaf(ht[nt][2], d0, kk.x * vhi);
          ht[nt][3] = fmaf(ht[nt][3], d1, kk.y * vhi);
          plo = fmaf(qq.x, ht[nt][0], fmaf(qq.y, ht[nt][1], plo));
          phi = fmaf(qq.x, ht[nt][2], fmaf(qq.y, ht[nt][3], phi));
        }
        if (!want_o) continue;
#pragma unroll
        for (int o = 1; o < 4; o <<= 1) {
          plo += __shfl_xor_sync(0xffffffffu, plo, o);
          phi += __shfl_xor_sync(0xffffffffu, phi, o);
        }
        // Column 2c (+ 8) lives in quad 2c (lanes 8c..), column 2c + 1 (+ 8) in quad 2c + 1 (lanes 8c + 4..).
        const float alo = __shfl_sync(0xffffffffu, plo, 8 * c), blo = __shfl_sync(0xffffffffu, plo, 8 * c + 4);
        const float ahi = __shfl_sync(0xffffffffu, phi, 8 * c), bhi = __shfl_sync(0xffffffffu, phi, 8 * c + 4);
        if (lane < 8) {
          const bool hi = lane >= 4;
          const int col = j0 + vc0 + (hi ? 8 : 0) + 2 * c;
          *reinterpret_cast<std::uint32_t*>(p.o + ((row0 + t) * p.H + h) * p.V + col) =
              pack_bf16(p.scale * (hi ? ahi : alo), p.scale * (hi ? bhi : blo));
        }
      }
    }
    mbar_arrive(empty + st);  // this thread is done with the stage
  }
  if (p.mode == 1) {
    const std::int64_t sb = (static_cast<std::int64_t>(s.slot0 + s.seg) * p.H + h) * K;
#pragma unroll
    for (int nt = 0; nt < K / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ch = nt * 8 + 2 * t4 + (e & 1), v = vc0 + g8 + (e >= 2 ? 8 : 0);
        p.seg_state[(sb + ch) * p.V + j0 + v] = ht[nt][e];
      }
  } else if (p.ht && s.seg == s.nseg - 1) {
#pragma unroll
    for (int nt = 0; nt < K / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ch = nt * 8 + 2 * t4 + (e & 1), v = vc0 + g8 + (e >= 2 ? 8 : 0);
        p.ht[state_base + static_cast<std::int64_t>(ch) * p.V + j0 + v] = ht[nt][e];
      }
  }
}

// ---------------------------------------------------------------------------------------------------
// v5 wgmma (K = 128, VT = 128; the default there, LINA_GLA_FWD_VERSION=5 runs chunk_gla_fwd_ws<128,128>;
// docs/kernels/chunk_gla_fwd.md, "v5 wgmma"). The producers are v5's (same loads, scan, operands, A),
// writing 128-byte-swizzled tiles without padding; the consumers are two warpgroups, warpgroup wg owns
// value columns 64 wg .. 64 wg + 63 and holds H^T [64 V][128 ch] as one fp32 m64n128 wgmma accumulator
// (64 registers per thread, element for element where v5's warps held it). Per chunk and warpgroup:
//   o^T  = bf16(2^rho H^T) @ qe^T   8 RS wgmma m64n64k16 (A from the accumulator registers, B = qe)
//        + v^T @ A_hi^T + v^T @ A_lo^T   8 SS wgmma m64n64k16 (A = v^T MN-major, B = A K-major; the
//          producers zero A's non-causal blocks)
//   H^T  = H^T diag(2^bL) + v^T @ ke     4 SS wgmma m64n128k16 (B = ke MN-major)
// o leaves the registers as bf16 pairs (one shuffle per pair) while the state wgmmas run.
namespace wg128 {
constexpr int K = 128, VT = 128;
constexpr int NCW = 8, NPW = 8, NCT = NCW * 32, NPT = NPW * 32, NT = NCT + NPT, STAGES = 3;
constexpr int kConsumerRegs = 160, kProducerRegs = 96;  // 256 x (160 + 96) = 65,536
constexpr std::uint32_t kTile = 64 * 128 * 2;           // [64][128] bf16 = two swizzled [64][64] blocks
constexpr std::uint32_t off_q = 0, off_k = kTile, off_v = 2 * kTile, off_g = 3 * kTile, stage_bytes = 4 * kTile;
constexpr std::uint32_t meta_bytes = 2 * K * 4 + 4 * NPW;  // 2^rho [K], 2^bL [K] f32, one steep flag per producer warp
constexpr std::uint32_t off_meta = STAGES * stage_bytes;
constexpr std::uint32_t off_tot = off_meta + STAGES * meta_bytes;  // [4][K] quarter gate sums, producer-private
constexpr std::uint32_t off_bar = off_tot + 4 * K * 4;             // full, empty, landed [STAGES], producer barrier
constexpr std::size_t smem = off_bar + (3 * STAGES + 1) * 8 + 1024;  // + 1024: the window is aligned up in the kernel
static_assert(stage_bytes % 1024 == 0 && meta_bytes % 16 == 0 && off_bar % 8 == 0, "alignment (swizzle atoms 1024 B)");
static_assert(smem <= 227ull * 1024, "shared memory per CTA");
static_assert(NCT * kConsumerRegs + NPT * kProducerRegs <= 65536, "register file");
}  // namespace wg128

// Serial gate scan of NR rows of the swizzled g tile (gate_rows_scan on wg128's layout).
template <int NR>
__device__ __forceinline__ void gate_rows_scan_swz(const unsigned char* sg, int r0, int cp, float2& run, float2& lo, float2& hi) {
  run = make_float2(0.f, 0.f);
  lo = hi = run;
#pragma unroll
  for (int i = 0; i < NR; ++i) {
    const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sg + gla_wg::swz(r0 + i, cp)));
    run.x += x.x * kLog2e;
    run.y += x.y * kLog2e;
    lo = i ? make_float2(fminf(lo.x, run.x), fminf(lo.y, run.y)) : run;
    hi = i ? make_float2(fmaxf(hi.x, run.x), fmaxf(hi.y, run.y)) : run;
  }
}
// store_causal_block_split into swizzled [64][64] A hi / lo blocks.
__device__ __forceinline__ void store_causal_block_split_swz(unsigned char* hi_s, unsigned char* lo_s, const float (&acc)[2][4], int rb, int jb,
                                                             int g8, int t4) {
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = rb * 16 + g8 + hh * 8, jc = jb * 16 + t * 8 + 2 * t4;
      const float x0 = jc > r ? 0.f : acc[t][2 * hh];
      const float x1 = jc + 1 > r ? 0.f : acc[t][2 * hh + 1];
      const std::uint32_t hi = pack_bf16(x0, x1);
      const float2 hf = unpack_bf16(hi);
      const std::uint32_t o = gla_wg::swz64(r, jc);
      *reinterpret_cast<std::uint32_t*>(hi_s + o) = hi;
      *reinterpret_cast<std::uint32_t*>(lo_s + o) = pack_bf16(x0 - hf.x, x1 - hf.y);
    }
}

// kWgA (the default; LINA_GLA_FWD_VERSION=6 runs kWgA = false): producer warpgroup 0 computes A by wgmma (the whole 64 x 64 tile, the
// mask writes the non-causal blocks' zeros) instead of 8 warps of mma.sync; one producer barrier less.
template <bool kWgA>
__global__ void __launch_bounds__(wg128::NT, 1) chunk_gla_fwd_wg128(Params p) {
  using namespace wg128;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // Swizzled tiles need 1024-byte aligned blocks (the hardware swizzles address bits [4,7) with [7,10)).
  const std::uint32_t raw_s = smem_u32(smem_raw);
  unsigned char* smem = smem_raw + (((raw_s + 1023u) & ~1023u) - raw_s);
  const std::uint32_t sbase = smem_u32(smem);
  std::uint64_t* bar = reinterpret_cast<std::uint64_t*>(smem + off_bar);
  std::uint64_t *full = bar, *empty = bar + STAGES, *landed = bar + 2 * STAGES, *pbar = bar + 3 * STAGES;
  float* sTot = reinterpret_cast<float*>(smem + off_tot);
  auto st_ptr = [&](int s, std::uint32_t off) { return smem + s * stage_bytes + off; };
  auto meta = [&](int s) { return reinterpret_cast<float*>(smem + off_meta + s * meta_bytes); };  // 2^rho, then 2^bL, flags

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g8 = lane >> 2, t4 = lane & 3;
  const int j0 = blockIdx.x * VT, h = blockIdx.y, n = blockIdx.z;
  const WorkItem s = work_item(p, n);
  if (p.mode == 1 && s.seg == s.nseg - 1) return;  // the last segment's local state is not needed
  const std::int64_t state_base = (static_cast<std::int64_t>(s.seq) * p.H + h) * K * p.V;
  const bool want_o = p.mode != 1;
  const int nchunks = (s.length + kC - 1) / kC;
  if (tid == 0) {
    for (int i = 0; i < STAGES; ++i) {
      mbar_init(full + i, NPT);
      mbar_init(empty + i, NCT);
      mbar_init(landed + i, NPT);  // one cp.async completion arrive per producer thread
    }
    mbar_init(pbar, NPT);
  }
  __syncthreads();  // the only CTA-wide barrier

  if (warp >= NCW) {
    // ================= producer warps (v5's, on swizzled tiles) =================
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    const int pw = warp - NCW, ptid = tid - NCT;
    std::uint32_t pphase = 0;
    auto psync = [&]() {
      mbar_arrive(pbar);
      mbar_wait(pbar, pphase);
      pphase ^= 1u;
    };
    // Loads: thread ptid copies the 16-byte unit lu of rows lr + 16 j (j < 4) of each tile; those rows
    // share r & 7, so their swizzled offsets are so + 2048 j.
    const int lr = ptid >> 4, lu = ptid & 15;
    const std::int64_t qk_pass = 16ll * p.H * K, v_pass = 16ll * p.H * p.V;
    const std::uint32_t so = gla_wg::swz(lr, lu * 8);
    auto issue = [&](int ch, int st) {
      const int t0 = ch * kC, cn = min(kC, s.length - t0);
      const std::int64_t row = s.row_begin + t0 + lr;
      std::int64_t qo = (row * p.H + h) * K + lu * 8, vo = (row * p.H + h) * p.V + j0 + lu * 8;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const bool ok = lr + 16 * j < cn;
        const std::uint32_t sj = so + 2048 * j;
        cp_async16(st_ptr(st, off_q + sj), p.q + (ok ? qo : 0), ok);
        cp_async16(st_ptr(st, off_k + sj), p.k + (ok ? qo : 0), ok);
        cp_async16(st_ptr(st, off_g + sj), p.g + (ok ? qo : 0), ok);
        cp_async16(st_ptr(st, off_v + sj), p.v + (ok ? vo : 0), ok);
        qo += qk_pass;
        vo += v_pass;
      }
      mbar_arrive_cp_async(landed + st);
    };
    const int cp = 64 * (pw & 1) + 2 * lane, quarter = pw >> 1, qr0 = 16 * quarter;
    float2 segdec = make_float2(1.f, 1.f);
    if (nchunks > 0) issue(0, 0);
    for (int m = 0; m < nchunks; ++m) {
      const int st = m % STAGES;
      if (m + 1 < nchunks) {  // next chunk's loads run during this chunk's work (consumers <= 2 chunks behind)
        const int s1 = (m + 1) % STAGES;
        if (m + 1 >= STAGES) mbar_wait(empty + s1, static_cast<std::uint32_t>((m + 1) / STAGES - 1) & 1u);
        issue(m + 1, s1);
      }
      mbar_wait(landed + st, static_cast<std::uint32_t>(m / STAGES) & 1u);
      const int cn = min(kC, s.length - m * kC);
      unsigned char *sq = st_ptr(st, off_q), *sk = st_ptr(st, off_k), *sg = st_ptr(st, off_g);
      float* sRe = meta(st);
      float* sDl = sRe + K;
      int* sFlag = reinterpret_cast<int*>(sDl + K);

      float2 run, lo, hi;
      gate_rows_scan_swz<16>(sg, qr0, cp, run, lo, hi);
      *reinterpret_cast<float2*>(sTot + quarter * K + cp) = run;
      psync();  // every quarter's sum is in sTot
      float2 tq[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) tq[u] = *reinterpret_cast<const float2*>(sTot + u * K + cp);
      const float2 rho = make_float2(tq[0].x + tq[1].x, tq[0].y + tq[1].y);
      const float2 bL = make_float2(rho.x + tq[2].x + tq[3].x, rho.y + tq[2].y + tq[3].y);
      float2 off = make_float2(-rho.x, -rho.y);
#pragma unroll
      for (int u = 0; u < 3; ++u)
        if (u < quarter) {
          off.x += tq[u].x;
          off.y += tq[u].y;
        }
      bool bad = range_bad(off, run, lo, hi);
      const float2 dl = make_float2(ex2(bL.x), ex2(bL.y));
      if (quarter == 0) {
        *reinterpret_cast<float2*>(sRe + cp) = make_float2(ex2(rho.x), ex2(rho.y));
        *reinterpret_cast<float2*>(sDl + cp) = dl;
      }
      bad = __any_sync(0xffffffffu, bad);
      if (lane == 0) sFlag[pw] = bad ? 1 : 0;
      psync();  // flags complete; every sTot read of this chunk is done
      const bool steep = any_steep<NPW>(sFlag);

      if (!steep) {
        // ---- operands in place: q -> qe = q 2^(b - rho), g -> kr = k 2^(rho - b), k -> ke = kr 2^(bL - rho).
        const float2 ck = make_float2(ex2(bL.x - rho.x), ex2(bL.y - rho.y));
        float2 d = off;
#pragma unroll 4
        for (int i = 0; i < 16; ++i) {
          const std::uint32_t o = gla_wg::swz(qr0 + i, cp);
          const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sg + o));
          d.x += x.x * kLog2e;
          d.y += x.y * kLog2e;
          const float2 q = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sq + o));
          const float2 k = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sk + o));
          const float krx = k.x * ex2(-d.x), kry = k.y * ex2(-d.y);
          *reinterpret_cast<std::uint32_t*>(sq + o) = pack_bf16(q.x * ex2(d.x), q.y * ex2(d.y));
          *reinterpret_cast<std::uint32_t*>(sg + o) = pack_bf16(krx, kry);
          *reinterpret_cast<std::uint32_t*>(sk + o) = pack_bf16(krx * ck.x, kry * ck.y);
        }
        if (want_o && kWgA) {
          gla_wg::fence_proxy_async_smem();  // qe, kr (generic writes) -> the A wgmmas
          psync();                           // qe and kr complete
          if (pw < 4) {  // producer warpgroup 0: A = qe kr^T, all 64 x 64
            const std::uint32_t sst = sbase + st * stage_bytes;
            float aw[32];
            gla_wg::fence_regs(aw);
            cute::warpgroup_arrive();
            gla_wg::issue_a(aw, sst + off_q, sst + off_g);
            cute::warpgroup_commit_batch();
            cute::warpgroup_wait<0>();
            gla_wg::fence_regs(aw);
            // Each warp's part of a wgmma reads all of kr: the four warps meet before A overwrites it.
            gla_wg::wg_bar(1);
            unsigned char* sAh = sg;
            unsigned char* sAl = sg + 8192;
#pragma unroll
            for (int jb = 0; jb < 4; ++jb) {
              const float acc[2][4] = {{aw[8 * jb], aw[8 * jb + 1], aw[8 * jb + 2], aw[8 * jb + 3]},
                                       {aw[8 * jb + 4], aw[8 * jb + 5], aw[8 * jb + 6], aw[8 * jb + 7]}};
              store_causal_block_split_swz(sAh, sAl, acc, pw, jb, g8, t4);  // row block pw; jb > pw: zeros
            }
          }
        } else if (want_o) {
          psync();  // qe and kr complete
          // ---- A = causal(qe kr^T): the 10 causal 16x16 blocks, block i = pw + NPW bi (ldmatrix on swizzled rows).
          const std::uint32_t sq_s = sbase + st * stage_bytes + off_q, sg_s = sbase + st * stage_bytes + off_g;
          const int mi = lane >> 3, li = lane & 7;
          float aacc[2][2][4];
#pragma unroll
          for (int bi = 0; bi < 2; ++bi) {
            const int i = pw + NPW * bi;
            const int rb = (i >= 1) + (i >= 3) + (i >= 6), jb = i - rb * (rb + 1) / 2;
#pragma unroll
            for (int t = 0; t < 2; ++t) aacc[bi][t][0] = aacc[bi][t][1] = aacc[bi][t][2] = aacc[bi][t][3] = 0.f;
            if (i < 10) {
              const int ra = rb * 16 + li + (mi & 1) * 8, rbb = jb * 16 + li + (mi >> 1) * 8;
#pragma unroll 4
              for (int ks = 0; ks < K / 16; ++ks) {
                std::uint32_t a[4], b[4];
                ldsm_x4_at(a, sq_s + gla_wg::swz(ra, ks * 16 + (mi >> 1) * 8));
                ldsm_x4_at(b, sg_s + gla_wg::swz(rbb, ks * 16 + (mi & 1) * 8));
                mma_bf16_16816(aacc[bi][0], a, b[0], b[1]);
                mma_bf16_16816(aacc[bi][1], a, b[2], b[3]);
              }
            }
          }
          psync();  // every warp is done reading kr: A hi + lo overwrite the g / kr tile
          unsigned char* sAh = sg;
          unsigned char* sAl = sg + 8192;
#pragma unroll
          for (int bi = 0; bi < 2; ++bi) {
            const int i = pw + NPW * bi;
            if (i >= 10) continue;
            const int rb = (i >= 1) + (i >= 3) + (i >= 6), jb = i - rb * (rb + 1) / 2;
            store_causal_block_split_swz(sAh, sAl, aacc[bi], rb, jb, g8, t4);
          }
          // The six non-causal blocks are zero: the consumers' wgmmas read whole 64 x 64 tiles.
#pragma unroll
          for (int i = ptid; i < 2 * 64 * 8; i += NPT) {
            const int r = (i >> 3) & 63, u = i & 7;
            if ((u >> 1) > (r >> 4))
              *reinterpret_cast<uint4*>(sg + (i >> 9) * 8192 + r * 128 + ((u ^ (r & 7)) << 4)) = make_uint4(0u, 0u, 0u, 0u);
          }
        }
        if (p.mode == 1) {
          segdec.x *= dl.x;
          segdec.y *= dl.y;
        }
      } else if (p.mode == 1 && quarter == 0) {
        for (int t = 0; t < cn; ++t) {
          const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sg + gla_wg::swz(t, cp)));
          segdec.x *= ex2(x.x * kLog2e);
          segdec.y *= ex2(x.y * kLog2e);
        }
      }
      gla_wg::fence_proxy_async_smem();  // this thread's tile writes (and the cp.async data it waited for) -> wgmma
      mbar_arrive(full + st);
    }
    if (p.mode == 1 && quarter == 0) {
      const std::int64_t sb = (static_cast<std::int64_t>(s.slot0 + s.seg) * p.H + h) * K;
      p.seg_decay[sb + cp] = segdec.x;
      p.seg_decay[sb + cp + 1] = segdec.y;
    }
    return;
  }

  // ================= consumer warpgroups: o and the state, value columns vc0 .. vc0 + 15 of warpgroup wg =================
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
  const int vc0 = warp * 16, wg = warp >> 2;
  // ht[4 nt + e] = H[ch][v], ch = 8 nt + 2 t4 + (e & 1), v = vc0 + g8 + 8 (e >> 1): the m64n128 accumulator of
  // H^T rows v - 64 wg (the same elements per thread as v5's ht[nt][e]).
  float ht[64];
#pragma unroll
  for (int nt = 0; nt < K / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int ch = nt * 8 + 2 * t4 + (e & 1), v = vc0 + g8 + (e >= 2 ? 8 : 0);
      ht[4 * nt + e] = p.h0 && p.mode != 1 ? p.h0[state_base + static_cast<std::int64_t>(ch) * p.V + j0 + v] : 0.f;
    }
  if (p.mode == 2) {
    for (int u = 0; u < s.seg; ++u) {
      const std::int64_t sb = (static_cast<std::int64_t>(s.slot0 + u) * p.H + h) * K;
#pragma unroll
      for (int nt = 0; nt < K / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int ch = nt * 8 + 2 * t4 + (e & 1), v = vc0 + g8 + (e >= 2 ? 8 : 0);
          ht[4 * nt + e] = fmaf(p.seg_decay[sb + ch], ht[4 * nt + e], p.seg_state[(sb + ch) * p.V + j0 + v]);
        }
    }
  }
  for (int m = 0; m < nchunks; ++m) {
    const int st = m % STAGES;
    const int t0 = m * kC, cn = min(kC, s.length - t0);
    const std::int64_t row0 = s.row_begin + t0;
    // (no proxy fence here: the producers fenced their writes before arriving on full, as CUTLASS's
    // cp.async + GMMA pipelines and FA3's P tile do on the writer side)
    mbar_wait(full + st, static_cast<std::uint32_t>(m / STAGES) & 1u);
    const float* sRe = meta(st);
    const float* sDl = sRe + K;
    const bool steep = any_steep<NPW>(reinterpret_cast<const int*>(sDl + K));
    if (!steep) {
      const std::uint32_t sst = sbase + st * stage_bytes, vblk = sst + off_v + wg * 8192;
      // All register work first (A fragments from the old state, then the decay), then the groups are
      // issued back to back: no register of an in-flight wgmma is touched and no branch splits the
      // sequence (either would make ptxas serialise the wgmmas).
      auto decay = [&]() {  // H^T = H^T diag(2^bL), before + v^T @ ke
#pragma unroll
        for (int nt = 0; nt < K / 8; ++nt) {
          const float2 dd = *reinterpret_cast<const float2*>(sDl + nt * 8 + 2 * t4);
          ht[4 * nt] *= dd.x;
          ht[4 * nt + 1] *= dd.y;
          ht[4 * nt + 2] *= dd.x;
          ht[4 * nt + 3] *= dd.y;
        }
        gla_wg::fence_regs(ht);
      };
      if (want_o) {
        float oacc[32];
        std::uint32_t af[8][4];
        gla_wg::state_a_frags(af, ht, sRe, t4);
        decay();
        gla_wg::fence_regs(oacc);
        cute::warpgroup_arrive();
        // o^T = bf16(2^rho H^T) @ qe^T + v^T @ (A_hi + A_lo)^T, then the state update
        gla_wg::issue_o_state(oacc, af, sst + off_q, false);
        gla_wg::issue_o_intra(oacc, vblk, sst + off_g, sst + off_g + 8192, true);
        cute::warpgroup_commit_batch();
        gla_wg::issue_state(ht, vblk, sst + off_k);
        cute::warpgroup_commit_batch();
        cute::warpgroup_wait<1>();  // o done; the state update still runs
        gla_wg::fence_regs(oacc);
        // oacc[4 ni + 2 hh + x] = o[tok = 8 ni + 2 t4 + x][v = vc0 + g8 + 8 hh]: lanes g8, g8 ^ 1 swap one value
        // so that each stores a bf16 pair of adjacent columns (even g8: token 2 t4, odd: 2 t4 + 1).
        const bool odd = (g8 & 1) != 0;
#pragma unroll
        for (int ni = 0; ni < 8; ++ni)
#pragma unroll
          for (int hh = 0; hh < 2; ++hh) {
            const float a = p.scale * oacc[4 * ni + 2 * hh], b = p.scale * oacc[4 * ni + 2 * hh + 1];
            const float r = __shfl_xor_sync(0xffffffffu, odd ? a : b, 4);
            const int tok = 8 * ni + 2 * t4 + (odd ? 1 : 0);
            const int col = j0 + vc0 + g8 + 8 * hh - (odd ? 1 : 0);
            if (tok < cn)
              *reinterpret_cast<std::uint32_t*>(p.o + ((row0 + tok) * p.H + h) * p.V + col) = odd ? pack_bf16(r, b) : pack_bf16(a, r);
          }
      } else {  // split pass 1: the state only
        decay();
        cute::warpgroup_arrive();
        gla_wg::issue_state(ht, vblk, sst + off_k);
        cute::warpgroup_commit_batch();
      }
      cute::warpgroup_wait<0>();
      gla_wg::fence_regs(ht);
    } else {
      // ---- Steep chunk: v5's exact token recurrence on the raw (swizzled) tiles.
      const unsigned char *sq = st_ptr(st, off_q), *sk = st_ptr(st, off_k), *sv = st_ptr(st, off_v), *sg = st_ptr(st, off_g);
      const int c = lane & 3;
      for (int t = 0; t < cn; ++t) {
        const float vlo = __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(sv + gla_wg::swz(t, vc0 + g8)));
        const float vhi = __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(sv + gla_wg::swz(t, vc0 + g8 + 8)));
        float plo = 0.f, phi = 0.f;
#pragma unroll
        for (int nt = 0; nt < K / 8; ++nt) {
          const std::uint32_t o = gla_wg::swz(t, nt * 8 + 2 * t4);
          const float2 gg = load_bf16x2(reinterpret_cast<const __nv_bfloat16*>(sg + o));
          const float2 kk = load_bf16x2(reinterpret_cast<const __nv_bfloat16*>(sk + o));
          const float2 qq = load_bf16x2(reinterpret_cast<const __nv_bfloat16*>(sq + o));
          const float d0 = ex2(gg.x * kLog2e), d1 = ex2(gg.y * kLog2e);
          ht[4 * nt] = fmaf(ht[4 * nt], d0, kk.x * vlo);
          ht[4 * nt + 1] = fmaf(ht[4 * nt + 1], d1, kk.y * vlo);
          ht[4 * nt + 2] = fmaf(ht[4 * nt + 2], d0, kk.x * vhi);
          ht[4 * nt + 3] = fmaf(ht[4 * nt + 3], d1, kk.y * vhi);
          plo = fmaf(qq.x, ht[4 * nt], fmaf(qq.y, ht[4 * nt + 1], plo));
          phi = fmaf(qq.x, ht[4 * nt + 2], fmaf(qq.y, ht[4 * nt + 3], phi));
        }
        if (!want_o) continue;
#pragma unroll
        for (int o = 1; o < 4; o <<= 1) {
          plo += __shfl_xor_sync(0xffffffffu, plo, o);
          phi += __shfl_xor_sync(0xffffffffu, phi, o);
        }
        const float alo = __shfl_sync(0xffffffffu, plo, 8 * c), blo = __shfl_sync(0xffffffffu, plo, 8 * c + 4);
        const float ahi = __shfl_sync(0xffffffffu, phi, 8 * c), bhi = __shfl_sync(0xffffffffu, phi, 8 * c + 4);
        if (lane < 8) {
          const bool hi = lane >= 4;
          const int col = j0 + vc0 + (hi ? 8 : 0) + 2 * c;
          *reinterpret_cast<std::uint32_t*>(p.o + ((row0 + t) * p.H + h) * p.V + col) =
              pack_bf16(p.scale * (hi ? ahi : alo), p.scale * (hi ? bhi : blo));
        }
      }
    }
    mbar_arrive(empty + st);  // this thread is done with the stage (its wgmmas completed)
  }
  if (p.mode == 1) {
    const std::int64_t sb = (static_cast<std::int64_t>(s.slot0 + s.seg) * p.H + h) * K;
#pragma unroll
    for (int nt = 0; nt < K / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ch = nt * 8 + 2 * t4 + (e & 1), v = vc0 + g8 + (e >= 2 ? 8 : 0);
        p.seg_state[(sb + ch) * p.V + j0 + v] = ht[4 * nt + e];
      }
  } else if (p.ht && s.seg == s.nseg - 1) {
#pragma unroll
    for (int nt = 0; nt < K / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ch = nt * 8 + 2 * t4 + (e & 1), v = vc0 + g8 + (e >= 2 ? 8 : 0);
        p.ht[state_base + static_cast<std::int64_t>(ch) * p.V + j0 + v] = ht[4 * nt + e];
      }
  }
}

// ---------------------------------------------------------------------------------------------------
// K = 256 (docs/kernels/chunk_gla_fwd.md, "D256 prep + state"): v4's <256,64> redid the gate scan, the
// 32 k exps of qe / kr / ke and A over K = 256 in each of the four V-tile CTAs of a head. Here a
// chunk-parallel prep kernel does that work once per (chunk, head) and writes the operands to a
// workspace; a state kernel per (work item, head, 64-column V tile) walks the chunks and only runs the
// o and state GEMMs (v5's consumer code) on the loaded operands. Same operands, roundings and steep
// decision as v4 / v5.
namespace d256 {
constexpr int K = 256, VT = 64;
constexpr int NT = 256;  // 8 warps, both kernels
constexpr int kQ = K + 8, kAs = kC + 8;  // prep tiles (padded rows), A staging
// Prep: q -> qe, k, g -> kr -> A hi + lo tiles [64][kQ] and the half sums [2][K].
constexpr std::size_t ptile = 1ull * kC * kQ * 2;
constexpr std::size_t prep_smem = 3 * ptile + 2ull * K * 4;
constexpr int kMeta = 2 * K + 4;  // meta 32-bit words: 2^rho [256] f32 | 2^bL [256] f32 | steep flag, 3 pad
static_assert(2ull * kC * kAs * 2 <= ptile, "A hi + lo fit the kr tile");
static_assert(2 * prep_smem + 2048 <= 228ull * 1024, "prep: 2 CTAs / SM");
static_assert(NT == K, "state kernel: thread tid keeps the segment decay of channel tid");

// Workspace record of one (global chunk, head), rows 0..63 of the chunk (rows past a sequence end zero),
// laid out exactly as the state kernel's shared-memory stage so that one bulk copy moves it: qe, ke,
// A hi, A lo as SW128 tiles (ops/common/cuda/wgmma_sm90.cuh: [64 rows][64 bf16], 128-byte rows, 16-byte
// pieces permuted by row % 8), no padding: qe, ke [4 channel tiles][64 tokens][64 ch], A hi / lo
// [64 tok][64 tok'] (non-causal 16x16 blocks zero), then the meta words (2^bL of a steep chunk: the
// product of its per-token decays). Every byte is written. The stage is v (SW128 [64 tok][64 V]) |
// record, 1 KB aligned.
constexpr std::size_t wtile = 64ull * 64 * 2;  // one SW128 tile: 8 KB
constexpr std::size_t wrec_qe = 0, wrec_ke = 4 * wtile, wrec_a = 8 * wtile, wrec_meta = 10 * wtile;
constexpr std::size_t wrec_bytes = wrec_meta + kMeta * 4;
constexpr std::size_t ws_rec = wtile;                                   // record inside the stage
constexpr std::size_t wstage = (ws_rec + wrec_bytes + 1023) / 1024 * 1024;
constexpr std::size_t ws_x = 2 * wstage;                                // o exchange / steep o scratch, 16 KB
constexpr int kOs = VT + 8;                                             // o transpose pitch (conflict-free)
constexpr std::size_t ws_o = ws_x + 16384;                              // o^T -> o [64 tok][kOs] bf16
constexpr std::size_t ws_bar = ws_o + 1ull * kC * kOs * 2;
constexpr std::size_t wstate_smem = ws_bar + 2 * 8 + 1024;               // + slack to align the base to 1 KB
static_assert(wrec_bytes % 16 == 0 && ws_bar % 8 == 0 && ws_o % 16 == 0, "bulk copy / mbarrier / uint4 alignment");
static_assert(wstate_smem <= 227ull * 1024, "wgmma state: shared memory per CTA");
static_assert(2ull * 128 * 16 * 4 == 16384 && 4ull * kC * 16 * 4 <= 16384, "exchange: 2 warpgroups x 128 threads x 16 f32; steep scratch");

// Warp pair (vq, vq + 4) of the state kernel: named barrier 1 + vq over its 64 threads.
__device__ __forceinline__ void pair_sync(int vq) { asm volatile("bar.sync %0, 64;\n" ::"r"(1 + vq) : "memory"); }
}  // namespace d256

struct D256Params {
  Params p;        // inputs, outputs, work items, split (as v4 / v5)
  SeqTable seqs;   // chunk numbering: sequence n's chunks are records seqs.at(n).chunk_off ..
  int nseq;
  unsigned char* ws;  // [total chunks][H] records of d256::wrec_bytes
};

// One CTA per (global chunk, head), record gc H + h = blockIdx.x (heads adjacent: neighbouring CTAs read
// neighbouring q / k / g bytes of the same rows and write neighbouring records). Thread: channel pair cp = 64 (warp & 3) + 2 lane, rows 32 (warp >> 2)
// .. + 31 (v5's producer layout with halves instead of quarters).
__global__ void __launch_bounds__(d256::NT, 2) chunk_gla_fwd_d256_prep(D256Params dp) {
  using namespace d256;
  const Params& p = dp.p;
  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* sq = reinterpret_cast<__nv_bfloat16*>(smem);  // q, then qe
  __nv_bfloat16* sk = sq + kC * kQ;                            // k
  __nv_bfloat16* sg = sk + kC * kQ;                            // g, then kr, then A hi + lo
  float* sTot = reinterpret_cast<float*>(sg + kC * kQ);        // [2][K] half sums
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g8 = lane >> 2, t4 = lane & 3;
  const int gc = static_cast<int>(blockIdx.x / static_cast<unsigned>(p.H)), h = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.H));
  const int2 sc = dp.seqs.chunk(gc, dp.nseq);
  const SeqDesc sd = dp.seqs.at(sc.x);
  const int t0 = sc.y * kC, cn = min(kC, sd.length - t0);
  const std::int64_t row0 = sd.row_begin + t0;
  constexpr std::size_t r_meta = wrec_meta;
  unsigned char* rec = dp.ws + (static_cast<std::int64_t>(gc) * p.H + h) * wrec_bytes;
  __nv_bfloat16* wq = reinterpret_cast<__nv_bfloat16*>(rec + wrec_qe);
  __nv_bfloat16* wk = reinterpret_cast<__nv_bfloat16*>(rec + wrec_ke);
  __nv_bfloat16* wa = reinterpret_cast<__nv_bfloat16*>(rec + wrec_a);
  float* wm = reinterpret_cast<float*>(rec + r_meta);
  // qe / ke element (token r, channel c): SW128 tile c / 64.
  auto qk_at = [](int r, int c) { return (c >> 6) * 4096 + wgmma::sw128(r, c & 63); };

  {  // q, k, g: thread copies 16 bytes at column lc of rows lr + 8 j (rows past the end zero-filled)
    const int lr = tid >> 5, lc = (tid & 31) * 8;
    std::int64_t off = ((row0 + lr) * p.H + h) * K + lc;
    const std::int64_t pass = 8ll * p.H * K;
#pragma unroll
    for (int j = 0; j < kC / 8; ++j) {
      const int r = lr + 8 * j;
      const bool ok = r < cn;
      const int so = r * kQ + lc;
      cp_async16(sq + so, p.q + (ok ? off : 0), ok);
      cp_async16(sk + so, p.k + (ok ? off : 0), ok);
      cp_async16(sg + so, p.g + (ok ? off : 0), ok);
      off += pass;
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
  }

  const int cp = 64 * (warp & 3) + 2 * lane, half = warp >> 2, r0 = 32 * half;
  float2 run, lo, hi;
  gate_rows_scan<32>(sg, kQ, r0, cp, run, lo, hi);
  *reinterpret_cast<float2*>(sTot + half * K + cp) = run;
  __syncthreads();
  const float2 rho = *reinterpret_cast<const float2*>(sTot + cp);  // b at row 31
  const float2 t1 = *reinterpret_cast<const float2*>(sTot + K + cp);
  const float2 bL = make_float2(rho.x + t1.x, rho.y + t1.y);  // b at row 63
  const float2 off = half ? make_float2(0.f, 0.f) : make_float2(-rho.x, -rho.y);
  const bool steep = __syncthreads_or(range_bad(off, run, lo, hi)) != 0;
  if (tid == 0) *reinterpret_cast<int4*>(wm + 2 * K) = make_int4(steep ? 1 : 0, 0, 0, 0);  // flag + pad: every copied byte defined

  if (!steep) {
    if (half == 0) {
      *reinterpret_cast<float2*>(wm + cp) = make_float2(ex2(rho.x), ex2(rho.y));
      *reinterpret_cast<float2*>(wm + K + cp) = make_float2(ex2(bL.x), ex2(bL.y));
    }
    // ---- qe = q 2^(b - rho) (smem for A, workspace), kr = k 2^(rho - b) (over g, for A), ke = kr 2^(bL - rho)
    // (workspace). A warp stores 64 channels = 128 contiguous bytes of a row.
    const float2 ck = make_float2(ex2(bL.x - rho.x), ex2(bL.y - rho.y));
    float2 d = off;
#pragma unroll 4
    for (int i = 0; i < 32; ++i) {
      const int r = r0 + i, o = r * kQ + cp;
      const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sg + o));
      d.x += x.x * kLog2e;
      d.y += x.y * kLog2e;
      const float2 q = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sq + o));
      const float2 k = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sk + o));
      const float krx = k.x * ex2(-d.x), kry = k.y * ex2(-d.y);
      const std::uint32_t qe = pack_bf16(q.x * ex2(d.x), q.y * ex2(d.y));
      *reinterpret_cast<std::uint32_t*>(sq + o) = qe;
      *reinterpret_cast<std::uint32_t*>(sg + o) = pack_bf16(krx, kry);
      *reinterpret_cast<std::uint32_t*>(wq + qk_at(r, cp)) = qe;
      *reinterpret_cast<std::uint32_t*>(wk + qk_at(r, cp)) = pack_bf16(krx * ck.x, kry * ck.y);
    }
    __syncthreads();  // qe and kr complete
    // ---- A = causal(qe kr^T): the 10 causal 16x16 blocks, block i on warp i % 8 (warps 0, 1 take two).
    float aacc[2][2][4];
#pragma unroll
    for (int bi = 0; bi < 2; ++bi) {
      const int i = warp + 8 * bi;
      const int rb = (i >= 1) + (i >= 3) + (i >= 6), jb = i - rb * (rb + 1) / 2;
#pragma unroll
      for (int t = 0; t < 2; ++t) aacc[bi][t][0] = aacc[bi][t][1] = aacc[bi][t][2] = aacc[bi][t][3] = 0.f;
      if (i < 10) {
#pragma unroll 4
        for (int ks = 0; ks < K / 16; ++ks) {
          std::uint32_t a[4], b[4];
          ldsm_frag_a(a, sq, kQ, rb * 16, ks * 16, lane);
          ldsm_frag_b_nk(b, sg, kQ, jb * 16, ks * 16, lane);
          mma_bf16_16816(aacc[bi][0], a, b[0], b[1]);
          mma_bf16_16816(aacc[bi][1], a, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // kr reads done: A hi + lo overwrite the kr tile
    __nv_bfloat16* sAh = sg;
    __nv_bfloat16* sAl = sg + kC * kAs;
#pragma unroll
    for (int bi = 0; bi < 2; ++bi) {
      const int i = warp + 8 * bi;
      if (i >= 10) continue;
      const int rb = (i >= 1) + (i >= 3) + (i >= 6), jb = i - rb * (rb + 1) / 2;
      store_causal_block_split(sAh, sAl, kAs, aacc[bi], rb, jb, g8, t4);
    }
    __syncthreads();
    // Whole rows: the causal 16-byte units (row r: columns < 16 (r / 16 + 1)) from A, the rest zero
    // (SW128 tiles hi, lo).
    constexpr int U = 8;  // 16-byte units per row
    for (int u = tid; u < 2 * kC * U; u += NT) {
      const int hl = u / (kC * U), r = (u / U) % kC, c8 = u % U;
      const int dst = hl * 4096 + r * 64 + (((c8 ^ r) & 7) << 3);
      *reinterpret_cast<uint4*>(wa + dst) =
          c8 < 2 * ((r >> 4) + 1) ? *reinterpret_cast<const uint4*>((hl ? sAl : sAh) + r * kAs + c8 * 8) : make_uint4(0u, 0u, 0u, 0u);
    }
  } else {
    // Steep chunk: the state kernel runs the exact token recurrence on raw q, k, g. Its segment decay
    // (split pass 1) is the product of the per-token decays in token order, as in v4.
    if (half == 0) {
      float2 dec = make_float2(1.f, 1.f);
      for (int t = 0; t < cn; ++t) {
        const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(sg + t * kQ + cp));
        dec.x *= ex2(x.x * kLog2e);
        dec.y *= ex2(x.y * kLog2e);
      }
      *reinterpret_cast<float2*>(wm + cp) = make_float2(1.f, 1.f);
      *reinterpret_cast<float2*>(wm + K + cp) = dec;
    }
    // The operands are not used; zeros keep every copied byte defined (qe, ke and A are contiguous).
    const uint4 z = make_uint4(0u, 0u, 0u, 0u);
    for (std::size_t u = tid; u < r_meta / 16; u += NT) reinterpret_cast<uint4*>(wq)[u] = z;
  }
}

// The K = 256 state kernel (seventh session: wgmma; the mma.sync kernel it replaced, 1.21 against 0.97 ms
// at B8_T2048_H32_D256, is in git history before this comment's commit).
// One CTA per (work item, head, 64-column V tile), two warpgroups: warpgroup kh (warps 4 kh .. 4 kh + 3)
// holds H^T [64 V][channels 128 kh .. + 127] as the fp32 accumulator of an m64n128 wgmma (64 registers;
// thread (warp w, lane l) holds v = 16 (w & 3) + g8 (+ 8), channels 128 kh + 8 nt + 2 t4 (+ 1): the
// mma.sync kernel's layout, so the steep path and the state loads / stores are unchanged). Per chunk:
//   o^T partial [64 V][64 tok] = bf16(2^rho H^T) @ qe^T over the warpgroup's 128 channels: RS wgmma
//     m64n64k16 x 8 (A = the state accumulator scaled and packed in registers, B = qe, K-major)
//   H^T = H^T diag(2^bL) + v^T @ ke: SS wgmma m64n128k16 x 4 (A = v tile, MN-major; B = ke, MN-major)
//   the partner's token blocks of o^T -> shared memory; own blocks (kh = 0: 0, 3; kh = 1: 1, 2):
//     o^T += v^T @ A_hi^T + v^T @ A_lo^T: SS wgmma m64n16k16 over the causal k-blocks (B = A, K-major)
//   + the partner's partial, * scale, bf16, transposed through shared memory, 16-byte stores of o.
// Loads as the mma.sync kernel: two stages, the record as one bulk copy, v by cp.async (to SW128
// positions; a proxy fence makes them visible to wgmma), one CTA barrier per chunk.
__global__ void __launch_bounds__(d256::NT, 1) chunk_gla_fwd_d256_state_wg(D256Params dp) {
  using namespace d256;
  using wgmma::Major;
  const Params& p = dp.p;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);  // SW128 atoms: 1 KB aligned
  const std::uint32_t sbase = smem_u32(smem);
  float* sX = reinterpret_cast<float*>(smem + ws_x);
  __nv_bfloat16* sO = reinterpret_cast<__nv_bfloat16*>(smem + ws_o);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g8 = lane >> 2, t4 = lane & 3;
  // kh through a shuffle: ptxas then knows it is warp-uniform (descriptor math in uniform registers).
  const int vq = warp & 3, kh = __shfl_sync(0xffffffffu, tid >> 7, 0), vc0 = 16 * vq, cb = 128 * kh, tw = tid & 127;
  const int j0 = blockIdx.x * VT, h = blockIdx.y, n = blockIdx.z;
  const WorkItem s = work_item(p, n);
  if (p.mode == 1 && s.seg == s.nseg - 1) return;  // the last segment's local state is not needed
  const std::int64_t state_base = (static_cast<std::int64_t>(s.seq) * p.H + h) * K * p.V;
  const bool want_o = p.mode != 1;
  const int nchunks = (s.length + kC - 1) / kC;
  const SeqDesc sd = dp.seqs.at(s.seq);
  const std::int64_t chunk0 = sd.chunk_off + (s.row_begin - sd.row_begin) / kC;  // the item's first record

  float ht[64];  // ht[4 nt + e] = H^T(v = vc0 + g8 + 8 (e >= 2), ch = cb + 8 nt + 2 t4 + (e & 1))
#pragma unroll
  for (int nt = 0; nt < 16; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int ch = cb + nt * 8 + 2 * t4 + (e & 1), v = vc0 + g8 + (e >= 2 ? 8 : 0);
      ht[4 * nt + e] = p.h0 && p.mode != 1 ? p.h0[state_base + static_cast<std::int64_t>(ch) * p.V + j0 + v] : 0.f;
    }
  if (p.mode == 2) {
    for (int u = 0; u < s.seg; ++u) {
      const std::int64_t sb = (static_cast<std::int64_t>(s.slot0 + u) * p.H + h) * K;
#pragma unroll
      for (int nt = 0; nt < 16; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int ch = cb + nt * 8 + 2 * t4 + (e & 1), v = vc0 + g8 + (e >= 2 ? 8 : 0);
          ht[4 * nt + e] = fmaf(p.seg_decay[sb + ch], ht[4 * nt + e], p.seg_state[(sb + ch) * p.V + j0 + v]);
        }
    }
  }
  float segdec = 1.f;  // mode 1: product of 2^bL of channel tid
  std::uint64_t* bar = reinterpret_cast<std::uint64_t*>(smem + ws_bar);  // [stage]: the record landed
  if (tid == 0) {
    mbar_init(&bar[0], 1);
    mbar_init(&bar[1], 1);
    mbar_init_fence();
  }
  __syncthreads();

  // Chunk m's record and v tile into stage st: the record by one bulk copy (thread 0, completing bar[st]),
  // v by cp.async to its SW128 positions (rows past the end zero-filled).
  auto issue = [&](int m, int st) {
    unsigned char* stg = smem + st * wstage;
    if (tid == 0) {
      mbar_arrive_expect_tx(&bar[st], static_cast<std::uint32_t>(wrec_bytes));
      bulk_copy_g2s(stg + ws_rec, dp.ws + ((chunk0 + m) * p.H + h) * wrec_bytes, static_cast<std::uint32_t>(wrec_bytes), &bar[st]);
    }
    const int cn = min(kC, s.length - m * kC);
    const std::int64_t row0 = s.row_begin + m * kC;
#pragma unroll
    for (int j = 0; j < kC * VT / 8 / NT; ++j) {
      const int u = tid + NT * j, r = u >> 3, c8 = u & 7;
      const bool ok = r < cn;
      cp_async16(stg + wgmma::sw128_piece(r, c8), p.v + (ok ? ((row0 + r) * p.H + h) * p.V + j0 + 8 * c8 : 0), ok);
    }
  };
  if (nchunks > 0) {
    issue(0, 0);
    cp_async_commit();
  }
  // Own token blocks: kh = 0 finishes 0 and 3, kh = 1 finishes 1 and 2 (5 causal k-blocks of A @ v each).
  float4* xmine = reinterpret_cast<float4*>(sX + kh * 2048) + tw;  // [4][128 threads] float4: partner's blocks
  const float4* xpart = reinterpret_cast<const float4*>(sX + (kh ^ 1) * 2048) + tw;
  for (int m = 0; m < nchunks; ++m) {
    cp_async_wait<0>();
    wgmma::fence_proxy_async_smem();  // this thread's v pieces, before the wgmma (async proxy) reads them
    mbar_wait(&bar[m & 1], (m >> 1) & 1);
    __syncthreads();  // chunk m landed; every warp is done with chunk m - 1 (its stage, sX, sO)
    if (m + 1 < nchunks) {
      issue(m + 1, (m + 1) & 1);
      cp_async_commit();
    }
    const unsigned char* stg = smem + (m & 1) * wstage;
    const std::uint32_t a_v = sbase + static_cast<std::uint32_t>((m & 1) * wstage), a_rec = a_v + static_cast<std::uint32_t>(ws_rec);
    const __nv_bfloat16* sv = reinterpret_cast<const __nv_bfloat16*>(stg);
    const float* sRe = reinterpret_cast<const float*>(stg + ws_rec + wrec_meta);
    const float* sDl = sRe + K;
    const bool steep = reinterpret_cast<const int*>(sRe)[2 * K] != 0;
    const int cn = min(kC, s.length - m * kC);
    const std::int64_t row0 = s.row_begin + m * kC;
    if (p.mode == 1) segdec *= sDl[tid];
    if (!steep) {
      // State update H^T = H^T diag(2^bL) + v^T @ ke (2^bL from the record): one batch of 4 SS wgmma.
      auto state_batch = [&] {
#pragma unroll
        for (int nt = 0; nt < 16; ++nt) {
          const float2 d = *reinterpret_cast<const float2*>(sDl + cb + nt * 8 + 2 * t4);
          ht[4 * nt + 0] *= d.x;
          ht[4 * nt + 1] *= d.y;
          ht[4 * nt + 2] *= d.x;
          ht[4 * nt + 3] *= d.y;
        }
        wgmma::fence_regs<64>(ht);
        cute::warpgroup_arrive();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)  // tokens 16 ks ..: 16 rows = 2048 bytes further in v and ke
          wgmma::mma_ss<wgmma::M64N128_SS<Major::MN, Major::MN>, 64>(
              wgmma::desc_mn(a_v + ks * 2048, wtile),
              wgmma::desc_mn(a_rec + static_cast<std::uint32_t>(wrec_ke + 2 * kh * wtile) + ks * 2048, wtile), ht);
        cute::warpgroup_commit_batch();
      };
      // (Every branch below ends with wgmma.wait_group 0: no accumulator is in flight where paths merge,
      // which would make ptxas serialise the wgmma.)
      if (want_o) {
        // A fragments of bf16(2^rho H^T), k-step ks = channels cb + 16 ks .. + 15 (the same bf16 values as
        // the mma.sync kernel's o_from_state).
        std::uint32_t af[8][4];
#pragma unroll
        for (int ks = 0; ks < 8; ++ks) {
          const float2 r0 = *reinterpret_cast<const float2*>(sRe + cb + ks * 16 + 2 * t4);
          const float2 r8 = *reinterpret_cast<const float2*>(sRe + cb + ks * 16 + 8 + 2 * t4);
          af[ks][0] = pack_bf16(ht[8 * ks + 0] * r0.x, ht[8 * ks + 1] * r0.y);
          af[ks][1] = pack_bf16(ht[8 * ks + 2] * r0.x, ht[8 * ks + 3] * r0.y);
          af[ks][2] = pack_bf16(ht[8 * ks + 4] * r8.x, ht[8 * ks + 5] * r8.y);
          af[ks][3] = pack_bf16(ht[8 * ks + 6] * r8.x, ht[8 * ks + 7] * r8.y);
        }
        float oacc[32];  // o^T partial [64 V][64 tok]: oacc[4 j + e] = (v as ht, tok 8 j + 2 t4 + (e & 1))
#pragma unroll
        for (int i = 0; i < 32; ++i) oacc[i] = 0.f;
        wgmma::fence_regs<32>(oacc);
        wgmma::fence_regs<32>(&af[0][0]);
        cute::warpgroup_arrive();
#pragma unroll
        for (int ks = 0; ks < 8; ++ks)  // qe tile 2 kh + ks / 4, columns 16 (ks % 4) ..: +32 bytes per k-step
          wgmma::mma_rs<wgmma::M64N64_RS<Major::K>, 32>(
              af[ks], wgmma::desc_k(a_rec + static_cast<std::uint32_t>(wrec_qe + (2 * kh + ks / 4) * wtile + (ks % 4) * 32)), oacc);
        cute::warpgroup_commit_batch();
        state_batch();
        cute::warpgroup_wait<1>();  // the o batch is done (the state batch may still run)
        wgmma::fence_regs<32>(oacc);
        wgmma::fence_regs<32>(&af[0][0]);
        // Own blocks rbA < rbB (kh = 0: 0, 3; kh = 1: 1, 2), partner blocks pA < pB (the other two). One code
        // path for both warpgroups (ptxas serialises every wgmma of the kernel when they sit in branches
        // on kh): block indices are selects, A @ v runs k-blocks 0, 1 for rbA and 0 .. 3 for rbB (the
        // record's non-causal A blocks are zeros: 12 instead of 10 m64n16k16 per warpgroup).
        const int rbA = kh, rbB = 3 - kh;
        auto blk = [&](int i, bool first) {  // oacc of own (first: rbA, else rbB) or partner block, element i
          return first ? (kh ? oacc[8 + i] : oacc[i]) : (kh ? oacc[16 + i] : oacc[24 + i]);
        };
        auto pblk = [&](int i, bool first) {  // partner blocks: kh = 0: 1, 2; kh = 1: 0, 3
          return first ? (kh ? oacc[i] : oacc[8 + i]) : (kh ? oacc[24 + i] : oacc[16 + i]);
        };
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          xmine[(2 * j) * 128] = make_float4(pblk(0, j == 0), pblk(1, j == 0), pblk(2, j == 0), pblk(3, j == 0));
          xmine[(2 * j + 1) * 128] = make_float4(pblk(4, j == 0), pblk(5, j == 0), pblk(6, j == 0), pblk(7, j == 0));
        }
        // A @ v accumulates in its own registers (ptxas serialises wgmma whose accumulators are a part of
        // another in-flight wgmma's), hi then lo per k-block (the mma.sync kernel's order).
        float oav[2][8];
#pragma unroll
        for (int i = 0; i < 8; ++i) oav[0][i] = oav[1][i] = 0.f;
        wgmma::fence_regs<8>(oav[0]);
        wgmma::fence_regs<8>(oav[1]);
        cute::warpgroup_arrive();
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
          for (int kk = 0; kk < 2 + 2 * j; ++kk) {
            const std::uint64_t dv = wgmma::desc_mn(a_v + kk * 2048, wtile);
            const std::uint32_t ab = a_rec + static_cast<std::uint32_t>(wrec_a + kk * 32) + static_cast<std::uint32_t>((j ? rbB : rbA) * 2048);
            wgmma::mma_ss<wgmma::M64N16_SS<Major::MN, Major::K>, 8>(dv, wgmma::desc_k(ab), oav[j]);
            wgmma::mma_ss<wgmma::M64N16_SS<Major::MN, Major::K>, 8>(dv, wgmma::desc_k(ab + static_cast<std::uint32_t>(wtile)), oav[j]);
          }
        cute::warpgroup_commit_batch();
        asm volatile("bar.sync 7, 256;\n" ::: "memory");  // both warpgroups' partials are in sX
        cute::warpgroup_wait<0>();
        wgmma::fence_regs<8>(oav[0]);
        wgmma::fence_regs<8>(oav[1]);
        wgmma::fence_regs<64>(ht);
        // Own block = (A @ v) + own partial + partner's partial, * scale -> bf16 -> sO[tok][v].
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const float4 a = xpart[(2 * j) * 128], b = xpart[(2 * j + 1) * 128];
          const float px[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
          const int rb = j ? rbB : rbA;
#pragma unroll
          for (int i = 0; i < 8; ++i) {
            const int tok = 16 * rb + 8 * (i >> 2) + 2 * t4 + (i & 1), v = vc0 + g8 + ((i & 2) ? 8 : 0);
            sO[tok * kOs + v] = __float2bfloat16_rn(p.scale * (oav[j][i] + (blk(i, j == 0) + px[i])));
          }
        }
        asm volatile("bar.sync %0, 128;\n" ::"r"(5 + kh) : "memory");  // this warpgroup's o rows are in sO
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int u = tw + 128 * i, lr = u >> 3, c8 = u & 7;
          const int r = (lr < 16 ? rbA * 16 : rbB * 16 - 16) + lr;
          if (r < cn)
            *reinterpret_cast<uint4*>(p.o + ((row0 + r) * p.H + h) * p.V + j0 + 8 * c8) =
                *reinterpret_cast<const uint4*>(sO + r * kOs + 8 * c8);
        }
      } else {
        state_batch();
        cute::warpgroup_wait<0>();
        wgmma::fence_regs<64>(ht);
      }
    } else {
      // ---- Steep chunk: the exact token recurrence (as the mma.sync kernel) on raw q, k, g from global
      // memory; o of the pair's 16 columns summed over its 256 channels with shared-memory atomics.
      float* so = sX + vq * (kC * 16);  // [64 tokens][16 columns], this pair's region
      if (want_o) {
        for (int i = kh * 32 + lane; i < kC * 16; i += 64) so[i] = 0.f;
        pair_sync(vq);
      }
      for (int t = 0; t < cn; ++t) {
        const std::int64_t gro = ((row0 + t) * p.H + h) * K + cb;
        const float vlo = __bfloat162float(sv[wgmma::sw128(t, vc0 + g8)]), vhi = __bfloat162float(sv[wgmma::sw128(t, vc0 + g8 + 8)]);
        float plo = 0.f, phi = 0.f;
#pragma unroll
        for (int nt = 0; nt < 16; ++nt) {
          const int ch = nt * 8 + 2 * t4;
          const float2 gg = load_bf16x2(p.g + gro + ch);
          const float2 kk = load_bf16x2(p.k + gro + ch);
          const float2 qq = load_bf16x2(p.q + gro + ch);
          const float d0 = ex2(gg.x * kLog2e), d1 = ex2(gg.y * kLog2e);
          ht[4 * nt + 0] = fmaf(ht[4 * nt + 0], d0, kk.x * vlo);
          ht[4 * nt + 1] = fmaf(ht[4 * nt + 1], d1, kk.y * vlo);
          ht[4 * nt + 2] = fmaf(ht[4 * nt + 2], d0, kk.x * vhi);
          ht[4 * nt + 3] = fmaf(ht[4 * nt + 3], d1, kk.y * vhi);
          plo = fmaf(qq.x, ht[4 * nt + 0], fmaf(qq.y, ht[4 * nt + 1], plo));
          phi = fmaf(qq.x, ht[4 * nt + 2], fmaf(qq.y, ht[4 * nt + 3], phi));
        }
        if (!want_o) continue;
#pragma unroll
        for (int o = 1; o < 4; o <<= 1) {
          plo += __shfl_xor_sync(0xffffffffu, plo, o);
          phi += __shfl_xor_sync(0xffffffffu, phi, o);
        }
        if (t4 == 0) {
          atomicAdd(so + t * 16 + g8, plo);
          atomicAdd(so + t * 16 + g8 + 8, phi);
        }
      }
      if (want_o) {
        pair_sync(vq);  // both halves of the channels added
        for (int i = kh * 32 + lane; i < cn * 8; i += 64) {
          const int t = i >> 3, c = (i & 7) * 2;
          *reinterpret_cast<std::uint32_t*>(p.o + ((row0 + t) * p.H + h) * p.V + j0 + vc0 + c) =
              pack_bf16(p.scale * so[t * 16 + c], p.scale * so[t * 16 + c + 1]);
        }
      }
    }
  }
  if (p.mode == 1) {
    const std::int64_t sb = (static_cast<std::int64_t>(s.slot0 + s.seg) * p.H + h) * K;
    if (blockIdx.x == 0) p.seg_decay[sb + tid] = segdec;
#pragma unroll
    for (int nt = 0; nt < 16; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ch = cb + nt * 8 + 2 * t4 + (e & 1), v = vc0 + g8 + (e >= 2 ? 8 : 0);
        p.seg_state[(sb + ch) * p.V + j0 + v] = ht[4 * nt + e];
      }
  } else if (p.ht && s.seg == s.nseg - 1) {
#pragma unroll
    for (int nt = 0; nt < 16; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ch = cb + nt * 8 + 2 * t4 + (e & 1), v = vc0 + g8 + (e >= 2 ? 8 : 0);
        p.ht[state_base + static_cast<std::int64_t>(ch) * p.V + j0 + v] = ht[4 * nt + e];
      }
  }
}

// The pass a launch runs, in the parameters every forward kernel reads (v4, v5, the D256 state kernel).
int& pass_mode(Params& p) { return p.mode; }
int& pass_mode(D256Params& d) { return d.p.mode; }

// One launch (mode 0), or with the sequence split pass 1 (segment states, mode 1) then pass 2 (mode 2).
// Returns what the split adds to the kernel's reported name.
// ---------------------------------------------------------------------------------------------------
// Split pass 1, chunk-parallel (docs/kernels/chunk_gla_fwd.md, "Segment states"). A segment's local
// final state needs no o, A or q: with B_t the cumulative gate (log2 units) within a piece of R rows and
// e_t = B_end - B_t = the gate sum over the rows after t,
//   L_new = diag(2^(B_end - B_begin)) L + sum_t (k_t 2^(e_t))^T v_t
// so a piece is one GEMM over R = 128 tokens instead of two chained chunk steps, and no producer /
// consumer hand-over is on the chain. e_t <= 0 for decaying gates, so kd = k 2^e never overflows; a
// piece with some e_t > kLim (growing gates) or a NaN takes the exact token recurrence instead. Writes
// seg_state / seg_decay exactly as mode 1 of the chunk kernels does; pass 2 (mode 2) is unchanged.
// p.mode: 1, or 3 = every piece by the exact recurrence (kSegstateExact: the variant exact_segment_states).
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


// Pass 1 of a split call by chunk_gla_fwd_segstate, in its kernel mode: kSegstateFast takes the
// factorised piece where the gates allow it, kSegstateExact every piece by the exact token recurrence
// (the path pieces with growing gates take; the variant exact_segment_states reaches it with ordinary
// gates, for the tests).
constexpr int kSegstateFast = 1, kSegstateExact = 3;
template <int K, int VT>
void launch_segstate(Params prm, dim3 grid, cudaStream_t st) {
  using C = SegCfg<K, VT>;
  set_max_dynamic_smem(chunk_gla_fwd_segstate<K, VT>, static_cast<int>(C::smem), "chunk_gla_fwd_segstate");
  chunk_gla_fwd_segstate<K, VT><<<grid, C::NT, C::smem, st>>>(prm);
  check(cudaGetLastError(), "chunk_gla_fwd_segstate launch (segment states)");
}
using SegstateLaunch = void (*)(Params, dim3, cudaStream_t);
// The split pass 1 of a chunk kernel's configuration: none at K = 256 (v4 <256,64> keeps its own mode 1).
template <int K, int VT>
constexpr SegstateLaunch segstate_launcher() {
  if constexpr (K == 256) return nullptr;
  else return launch_segstate<K, VT>;
}

// With a segstate launcher, pass 1 runs it in segstate_mode; without one, the chunk kernel's own mode 1.
template <class P>
std::string launch_passes(void (*kernel)(P), P prm, dim3 grid, unsigned threads, std::size_t smem, bool split,
                          cudaStream_t st, const char* what, void (*segstate)(P, dim3, cudaStream_t) = nullptr,
                          int segstate_mode = kSegstateFast) {
  const std::string msg = std::string(what) + " launch";
  if (!split) {
    pass_mode(prm) = 0;
    kernel<<<grid, threads, smem, st>>>(prm);
    check(cudaGetLastError(), msg.c_str());
    return "";
  }
  const int seg_mode = segstate ? segstate_mode : 0;
  if (seg_mode != 0) {
    pass_mode(prm) = seg_mode;
    segstate(prm, grid, st);
  } else {
    pass_mode(prm) = 1;
    kernel<<<grid, threads, smem, st>>>(prm);
    check(cudaGetLastError(), (msg + " (segment states)").c_str());
  }
  pass_mode(prm) = 2;
  kernel<<<grid, threads, smem, st>>>(prm);
  check(cudaGetLastError(), msg.c_str());
  return seg_mode != 0 ? " x2 (sequence split, segment states by chunk_gla_fwd_segstate)" : " x2 (sequence split)";
}

template <int K, int VT>
std::string launch_ws(Params prm, int items, const Problem& p, bool split, int segstate_mode, cudaStream_t st) {
  using C = WsCfg<K, VT>;
  set_max_dynamic_smem(chunk_gla_fwd_ws<K, VT>, static_cast<int>(C::smem), "chunk_gla_fwd_ws");
  const dim3 grid(static_cast<unsigned>(p.V / VT), static_cast<unsigned>(p.H), static_cast<unsigned>(items));
  return "chunk_gla_fwd_ws<" + std::to_string(K) + "," + std::to_string(VT) + ">" +
         launch_passes(chunk_gla_fwd_ws<K, VT>, prm, grid, C::NT, C::smem, split, st, "chunk_gla_fwd_ws", launch_segstate<K, VT>,
                       segstate_mode);
}

// wgmma_a: A by wgmma in the producers (the default), else by mma.sync (wgmma in the consumers only).
std::string launch_wg128(Params prm, int items, const Problem& p, bool split, bool wgmma_a, int segstate_mode, cudaStream_t st) {
  const dim3 grid(static_cast<unsigned>(p.V / wg128::VT), static_cast<unsigned>(p.H), static_cast<unsigned>(items));
  if (wgmma_a) {
    set_max_dynamic_smem(chunk_gla_fwd_wg128<true>, static_cast<int>(wg128::smem), "chunk_gla_fwd_wg128");
    return "chunk_gla_fwd_wg128<128,128,wgmma A>" +
           launch_passes(chunk_gla_fwd_wg128<true>, prm, grid, wg128::NT, wg128::smem, split, st, "chunk_gla_fwd_wg128",
                         launch_segstate<128, 128>, segstate_mode);
  }
  set_max_dynamic_smem(chunk_gla_fwd_wg128<false>, static_cast<int>(wg128::smem), "chunk_gla_fwd_wg128");
  return "chunk_gla_fwd_wg128<128,128>" + launch_passes(chunk_gla_fwd_wg128<false>, prm, grid, wg128::NT, wg128::smem, split, st, "chunk_gla_fwd_wg128",
                                                             launch_segstate<128, 128>, segstate_mode);
}

// K = 256: the prep kernel (operands once per chunk and head) and the state kernel per 64-column V tile.
// The workspace holds one record per (chunk, head): ~0.85x the bytes of q, k and g.
std::vector<std::string> launch_d256(Params prm, int items, const Problem& p, bool split, std::size_t ws_bytes, cudaStream_t st) {
  using namespace d256;
  const DeviceSeqs seqs = upload_sequences(p, st);
  unsigned char* ws = nullptr;
  try {
    ws = workspace_alloc_as<unsigned char>(ws_bytes, st, "chunk_gla fwd D256 operands");
  } catch (const Error&) {  // out of device memory: v4 <256,64> needs no operand workspace (the caller runs it)
    (void)cudaGetLastError();
    workspace_free(seqs.ptr, st, "sequence table");
    return {};
  }
  D256Params dp{prm, seqs.view, static_cast<int>(p.N), ws};
  set_max_dynamic_smem(chunk_gla_fwd_d256_prep, static_cast<int>(prep_smem), "chunk_gla_fwd_d256_prep");
  set_max_dynamic_smem(chunk_gla_fwd_d256_state_wg, static_cast<int>(wstate_smem), "chunk_gla_fwd_d256_state_wg");
  if (seqs.total_chunks > 0) {
    chunk_gla_fwd_d256_prep<<<static_cast<unsigned>(seqs.total_chunks * p.H), NT, prep_smem, st>>>(dp);
    check(cudaGetLastError(), "chunk_gla_fwd_d256_prep launch");
  }
  const dim3 grid(static_cast<unsigned>(p.V / VT), static_cast<unsigned>(p.H), static_cast<unsigned>(items));
  const std::string state = std::string("chunk_gla_fwd_d256_state_wgmma<256,64>") +
                            launch_passes(chunk_gla_fwd_d256_state_wg, dp, grid, NT, wstate_smem, split, st, "chunk_gla_fwd_d256_state_wg");
  workspace_free(ws, st, "chunk_gla fwd D256 operands");
  workspace_free(seqs.ptr, st, "sequence table");
  return {"chunk_gla_fwd_d256_prep", state};
}

// Bytes of the K = 256 operand workspace (82 KB per chunk and head, below the 128 KB of FLA's bf16 chunk
// states); past kD256MaxWorkspace v4 <256,64> runs instead (it needs none).
constexpr std::size_t kD256MaxWorkspace = 8ull << 30;
std::size_t d256_workspace_bytes(const Problem& p) {
  std::size_t chunks = 0;
  for (const auto& sq : p.sequences) chunks += static_cast<std::size_t>((sq.length + kC - 1) / kC);
  return chunks * static_cast<std::size_t>(p.H) * d256::wrec_bytes;
}

template <int K, int VT>
std::string launch(Params prm, int items, const Problem& p, bool split, int segstate_mode, cudaStream_t st) {
  using C = Cfg<K, VT>;
  set_max_dynamic_smem(chunk_gla_fwd_fused<K, VT>, static_cast<int>(C::smem), "chunk_gla_fwd_fused");
  const dim3 grid(static_cast<unsigned>(p.V / VT), static_cast<unsigned>(p.H), static_cast<unsigned>(items));
  return "chunk_gla_fwd_fused<" + std::to_string(K) + "," + std::to_string(VT) + ">" +
         launch_passes(chunk_gla_fwd_fused<K, VT>, prm, grid, C::NT, C::smem, split, st, "chunk_gla_fwd_fused",
                       segstate_launcher<K, VT>(), segstate_mode);
}

// Sequence split: when the (sequence, head, V tile) CTAs fill less than half of the GPU's CTA slots,
// each sequence is cut into up to `slots / ctas` segments of whole chunks, at least 2 chunks each. Pass 1
// keeps one fp32 [K, V] state (+ K decays) per segment but the last of each sequence: per sequence at
// most nch/2 - 1 of them, below FLA's per-chunk bf16 states (nch of them). slots_used counts them.
// Dense inputs get the count only (the kernel derives each item, work_item); varlen inputs get the table.
struct SegmentPlan {
  std::vector<WorkItem> items;  // varlen: one per CTA row
  std::int64_t rows = 0;        // CTA rows (grid z)
  std::int64_t slots = 0;       // pass-1 state slots
  int dense_nseg = 0;           // dense: segments per sequence
};

SegmentPlan plan_segments(const Problem& p, std::int64_t vtiles, int ctas_per_sm) {
  std::int64_t seg = 1;
  const std::int64_t ctas = p.N * p.H * vtiles, slots = static_cast<std::int64_t>(sm_count()) * ctas_per_sm;
  if (ctas > 0 && 2 * ctas <= slots) seg = slots / ctas;
  const auto segments = [seg](std::int64_t length) { return std::max<std::int64_t>(1, std::min(seg, (length + kC - 1) / kC / 2)); };
  SegmentPlan plan;
  if (!p.varlen) {
    const std::int64_t ns = segments(p.T);
    plan.dense_nseg = static_cast<int>(ns);
    plan.rows = p.N * ns;
    plan.slots = p.N * (ns - 1);
    return plan;
  }
  for (std::int64_t n = 0; n < p.N; ++n) {
    const auto& sq = p.sequences[static_cast<std::size_t>(n)];
    const std::int64_t nch = (sq.length + kC - 1) / kC, ns = segments(sq.length);
    for (std::int64_t u = 0; u < ns; ++u) {
      const std::int64_t c0 = u * nch / ns, c1 = (u + 1) * nch / ns;
      const std::int64_t t0 = c0 * kC, t1 = std::min<std::int64_t>(sq.length, c1 * kC);
      plan.items.push_back({sq.row_begin + t0, static_cast<int>(t1 - t0), static_cast<int>(n), static_cast<int>(u), static_cast<int>(ns),
                            static_cast<int>(plan.slots)});
    }
    plan.slots += ns - 1;
  }
  plan.rows = static_cast<std::int64_t>(plan.items.size());
  return plan;
}

// What one forward call hands to its variant (arguments validated, kernel-wide limits checked).
struct FwdCall {
  const Problem& p;
  const ChunkGlaArgs& a;
  const AttentionOutputs& out;
  cudaStream_t st;
};

// The kernel families of the forward; a variant is one of them with its V tile width and split pass 1.
enum class Family { fused, ws, wg128_wgmma_a, wg128_mma_a, d256 };
struct Choice {
  Family family;
  int vt;  // V columns per CTA
  int segstate_mode = kSegstateFast;
};

RunInfo run_choice(const FwdCall& c, const Choice ch) {
  const Problem& p = c.p;
  const ChunkGlaArgs& a = c.a;
  const cudaStream_t st = c.st;
  Params prm{};
  prm.q = a.q.ptr<const __nv_bfloat16>();
  prm.k = a.k.ptr<const __nv_bfloat16>();
  prm.v = a.v.ptr<const __nv_bfloat16>();
  prm.g = a.g.ptr<const __nv_bfloat16>();
  prm.h0 = a.initial_state ? a.initial_state->ptr<const float>() : nullptr;
  prm.o = c.out.o.ptr<__nv_bfloat16>();
  prm.ht = c.out.final_state ? c.out.final_state->ptr<float>() : nullptr;
  prm.H = static_cast<int>(p.H);
  prm.K = static_cast<int>(p.K);
  prm.V = static_cast<int>(p.V);
  prm.scale = static_cast<float>(p.scale);
  const SegmentPlan plan = plan_segments(p, p.V / ch.vt, p.K == 64 ? 2 : 1);
  const std::int64_t slots = plan.slots;
  const bool split = slots > 0;
  std::string name = "chunk_gla_fwd_fused";
  if (plan.rows == 0) return RunInfo{"cuda", {name}};
  // Work items and heads are grid dimensions z and y (at most 65535 each).
  if (plan.rows > 65535)
    throw_unsupported(a.cu_seqlens ? "cu_seqlens" : "q", std::to_string(p.N) + " sequences", "at most 65535 sequences (the CUDA chunk_gla kernel)");
  if (p.H > 65535) throw_unsupported("H", std::to_string(p.H), "at most 65535 heads (the CUDA chunk_gla kernel)");
  float* scratch = nullptr;
  WorkItem* d_items = plan.items.empty() ? nullptr
                                         : static_cast<WorkItem*>(upload_table(plan.items.data(), plan.items.size() * sizeof(WorkItem), st,
                                                                               "chunk_gla fwd work items"));
  prm.items = d_items;
  prm.dense_T = static_cast<int>(p.T);
  prm.dense_nseg = plan.dense_nseg;
  if (split) {
    const std::size_t ns = static_cast<std::size_t>(slots), hs = static_cast<std::size_t>(p.H);
    const std::size_t state_elems = ns * hs * static_cast<std::size_t>(p.K * p.V), decay_elems = ns * hs * static_cast<std::size_t>(p.K);
    scratch = workspace_alloc_as<float>(state_elems + decay_elems, st, "chunk_gla fwd segment states");
    prm.seg_state = scratch;
    prm.seg_decay = scratch + state_elems;
  }
  const int ni = static_cast<int>(plan.rows);
  if (ch.family == Family::d256) {
    std::vector<std::string> names = launch_d256(prm, ni, p, split, d256_workspace_bytes(p), st);
    if (!names.empty()) {
      workspace_free(scratch, st, "chunk_gla fwd segment states");
      workspace_free(d_items, st, "chunk_gla fwd work items");
      return RunInfo{"cuda", std::move(names)};
    }
    // (no device memory for the operand workspace: v4 <256,64> below needs none)
  }
  const int sm = ch.segstate_mode;
  switch (ch.family) {
    case Family::ws: name = p.K == 64 ? launch_ws<64, 64>(prm, ni, p, split, sm, st) : launch_ws<128, 128>(prm, ni, p, split, sm, st); break;
    case Family::wg128_wgmma_a: name = launch_wg128(prm, ni, p, split, true, sm, st); break;
    case Family::wg128_mma_a: name = launch_wg128(prm, ni, p, split, false, sm, st); break;
    case Family::fused:
    case Family::d256:
      name = p.K == 64    ? launch<64, 64>(prm, ni, p, split, sm, st)
             : p.K == 256 ? launch<256, 64>(prm, ni, p, split, sm, st)
             : ch.vt == 128 ? launch<128, 128>(prm, ni, p, split, sm, st)
                            : launch<128, 64>(prm, ni, p, split, sm, st);
      break;
  }
  workspace_free(scratch, st, "chunk_gla fwd segment states");
  workspace_free(d_items, st, "chunk_gla fwd work items");
  return RunInfo{"cuda", {name}};
}

std::string kv(const Problem& p) { return "K = " + std::to_string(p.K) + ", V = " + std::to_string(p.V); }
bool wide_k128(const Problem& p) { return p.K == 128 && p.V % 128 == 0; }

// The variants of the forward, in order of preference (docs/kernels/chunk_gla_fwd.md). On the H200:
// K = 256 prep + state 1.46 vs v4's 2.74 ms at B8_T2048_H32_D256; K = 128 wg128 with A by wgmma 0.524
// vs mma.sync v5's 0.642 and v4's 0.891 ms at B1_T8192_H96_D128; K = 64 v5 0.045 vs v4's 0.052 ms
// at B8_T1024_H8_D64. The variants after "fused" run only when named (tests, A/B measurements).
Decline d256_supports(const FwdCall& c) {
  if (c.p.K != 256) return kv(c.p) + " (prep + state runs K = 256)";
  // The prep grid is chunks x heads CTAs in one dimension (at most 2^31 - 1); past kD256MaxWorkspace
  // the fused <256,64> kernel runs instead, which needs no operand workspace.
  const std::size_t ws = d256_workspace_bytes(c.p);
  if (ws > kD256MaxWorkspace) return "an operand workspace of " + std::to_string(ws) + " bytes (at most 8 GiB)";
  if (ws / d256::wrec_bytes >= (1ull << 31)) return std::to_string(ws / d256::wrec_bytes) + " chunks x heads (at most 2^31 - 1)";
  return std::nullopt;
}
Decline wg128_supports(const FwdCall& c) {
  if (!wide_k128(c.p)) return kv(c.p) + " (wg128 runs K = 128 with V a multiple of 128)";
  return std::nullopt;
}
Decline ws_supports(const FwdCall& c) {
  if (c.p.K != 64 && !wide_k128(c.p)) return kv(c.p) + " (ws runs K = 64, or K = 128 with V a multiple of 128)";
  return std::nullopt;
}
Decline any_supports(const FwdCall&) { return std::nullopt; }  // every K and V the front door lets through
Decline fused_vt128_supports(const FwdCall& c) {
  if (!wide_k128(c.p)) return kv(c.p) + " (fused_vt128 runs K = 128 with V a multiple of 128)";
  return std::nullopt;
}
Decline exact_segment_states_supports(const FwdCall& c) {
  if (c.p.K == 256) return kv(c.p) + " (the K = 256 kernels compute segment states in their own pass 1, which has no exact mode)";
  return std::nullopt;
}
// The default kernel below K = 256 (the first of wg128, ws, fused that supports the call).
Choice default_below_k256(const Problem& p) {
  if (wide_k128(p)) return {Family::wg128_wgmma_a, 128};
  if (p.K == 64) return {Family::ws, 64};
  return {Family::fused, 64};
}

const Variant<FwdCall> kForwardVariants[] = {
    {"d256_prep_state", d256_supports, [](const FwdCall& c) { return run_choice(c, {Family::d256, 64}); }},
    {"wg128", wg128_supports, [](const FwdCall& c) { return run_choice(c, {Family::wg128_wgmma_a, 128}); }},
    {"ws", ws_supports, [](const FwdCall& c) { return run_choice(c, {Family::ws, c.p.K == 64 ? 64 : 128}); }},
    {"fused", any_supports, [](const FwdCall& c) { return run_choice(c, {Family::fused, 64}); }},
    // wg128 with A by mma.sync in the producers (wgmma in the consumers only): 0.652 ms at B1_T8192_H96_D128.
    {"wg128_mma_a", wg128_supports, [](const FwdCall& c) { return run_choice(c, {Family::wg128_mma_a, 128}); }},
    {"fused_vt128", fused_vt128_supports, [](const FwdCall& c) { return run_choice(c, {Family::fused, 128}); }},
    // The default kernel with every split piece of pass 1 by the exact token recurrence.
    {"exact_segment_states", exact_segment_states_supports,
     [](const FwdCall& c) {
       Choice ch = default_below_k256(c.p);
       ch.segstate_mode = kSegstateExact;
       return run_choice(c, ch);
     }},
};

}  // namespace

RunInfo chunk_gla_forward(const Problem& p, const ChunkGlaArgs& a, const AttentionOutputs& out, ForwardMode mode,
                          const ExecOptions& opts) {
  (void)mode;  // training and inference run the same kernel: the backward recomputes what it needs
  if (a.q.dtype != DType::bf16)
    throw_unsupported("q", "dtype " + std::string(dtype_name(a.q.dtype)), "bfloat16 (the CUDA chunk_gla kernel)");
  if (a.g.dtype != DType::bf16)
    throw_unsupported("g", "dtype " + std::string(dtype_name(a.g.dtype)), "bfloat16 (the CUDA chunk_gla kernel)");
  if (!cuda_head_dim_supported(p.K)) throw_unsupported("K", std::to_string(p.K), "64, 128 or 256 (the CUDA chunk_gla kernel)");
  if (!cuda_head_dim_supported(p.V)) throw_unsupported("V", std::to_string(p.V), "64, 128 or 256 (the CUDA chunk_gla kernel)");
  // cp.async moves 16-byte vectors of q, k, g, v; o is written as bf16 pairs.
  require_aligned16({{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"g", &a.g}, {"o", &out.o}}, " (the CUDA chunk_gla kernel)");
  const FwdCall call{p, a, out, static_cast<cudaStream_t>(opts.stream)};
  return run_variant(std::span<const Variant<FwdCall>>(kForwardVariants), "chunk_gla.fwd", opts, call);
}

}  // namespace lina::detail::cuda
