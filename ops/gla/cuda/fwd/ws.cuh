// v5 (K = 128 with VT = 128, and K = 64 with VT = 64; the variant "ws", the default at K = 64;
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
#pragma once
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "ops/common/cuda/mbarrier.cuh"
#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/gla/cuda/fwd/common.cuh"
#include "ops/gla/cuda/fwd/producer.cuh"

namespace lina::detail::cuda {
namespace {  // one translation unit (chunk_gla_fwd.cu) includes the forward kernels

using namespace cuda_util;

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
  if (tid == 0) init_pipeline_barriers<STAGES>(full, empty, landed, pbar, NPT, NCT);
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
      gate_rows_scan<16, PaddedRows<kQ>>(sg, qr0, cp, run, lo, hi);
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
        // ---- pass 2, operands in place: q -> qe, g -> kr, k -> ke.
        producer_operands<PaddedRows<kQ>>(sq, sk, sg, qr0, cp, rho, bL, off);
        if (want_o) {
          psync();  // qe and kr complete
          // ---- A = causal(qe kr^T): the 10 causal 16x16 blocks (rb >= jb), block i = pw + NPW bi.
          float aacc[kABlocks][2][4];
          causal_a_blocks<K, kABlocks, NPW>(aacc, sq, sg, kQ, pw, lane);
          psync();  // every warp is done reading kr: A hi + lo overwrite the g / kr tile
          __nv_bfloat16* sAh = sg;
          __nv_bfloat16* sAl = sg + kC * kAs;
          store_causal_a<PaddedRows<kAs>, kABlocks, NPW>(sAh, sAl, aacc, pw, g8, t4);
        }
        if (p.mode == 1) {
          segdec.x *= dl.x;
          segdec.y *= dl.y;
        }
      } else if (p.mode == 1 && quarter == 0) {
        // Steep chunk: the consumers run the token recurrence on the raw tiles.
        steep_segment_decay<PaddedRows<kQ>>(sg, cn, cp, segdec);
      }
      mbar_arrive(full + st);  // operands (or the raw tiles of a steep chunk) ready for the consumers
      if constexpr (STAGES == 2) issue_next(m);
    }
    if (p.mode == 1 && quarter == 0) store_segment_decay(p, s, h, K, cp, segdec);
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

}  // namespace
}  // namespace lina::detail::cuda
