// The chunk_kda forward's prep: kda_prep_kernel<K>, per (chunk, value head) on a persistent grid (chunk_delta_fwd.cu
// says what it writes).
// Part of the forward's one translation unit, chunk_delta_fwd.cu (whose anonymous namespace keeps these
// kernels and helpers internal to it); includes what it uses.
#pragma once
#include <cstdint>

#include "ops/delta/cuda/fwd/params.cuh"
#include "ops/delta/cuda/fwd/tile_ops.cuh"
#include "ops/delta/cuda/gate_range.cuh"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/mma_primitives.cuh"

namespace lina::detail::cuda {
namespace {

// The KDA prep's shared memory.
template <int K>
struct PrepSmem {
  union alignas(16) {
    bf16 q[kC][K + 8];  // normalized q, dead once q e^b is written
    float X[kC][68];    // (I+L)^-1 in fp32, upper blocks used as merge scratch
  } u0;
  alignas(16) bf16 k[kC][K + 8];      // normalized k
  alignas(16) float b2[kC][K + 4];    // per-channel log2 cumsum of g; first the raw gate
  alignas(16) float L[kC][68];        // strict-lower L (fp32)
  alignas(16) float beta[kC];
  alignas(16) float bL[K];  // b2 of the chunk's last row
  long nx_t0;  // the next work item (written by thread 0 before the first barrier)
  int nx_Cn, nx_h, nx_hv;
};

static_assert(sizeof(PrepSmem<128>) <= 113 * 1024, "KDA K=128 prep: two CTAs per SM");
static_assert(sizeof(PrepSmem<256>) <= 227 * 1024, "KDA K=256 prep over the sm_90 limit");

// CTAs per SM of the KDA prep: two at K <= 128 (registers: up to 128), one at K = 256.
template <int K>
constexpr int kPrepMinBlocks = K > 128 ? 1 : 2;

template <int K>
__global__ void __launch_bounds__(kThreads, kPrepMinBlocks<K>) kda_prep_kernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& s = *reinterpret_cast<PrepSmem<K>*>(smem_raw);
  const int tid0 = threadIdx.x;
  bf16 (&sq)[kC][K + 8] = s.u0.q;
  bf16 (&sk)[kC][K + 8] = s.k;

  // Persistent grid: the CTA strides over work items. The next item's q, raw gate and k are one
  // cp.async group, issued once S4 has read them (q and the gate go into spaces S3 / S4 reuse: X over
  // q, the cumsum over the raw gate), and waited for at the next item's top.
  auto issue_qg = [&](int tid, long t0n, int Cnn, int hn, int hvn) {  // q into u0 (dead after S4), the gate into b2
    constexpr int QV = K / 8;  // 16-byte pieces per row
    for (int i = tid; i < kC * QV; i += kThreads) {
      const int r = i / QV, c8 = (i % QV) * 8;
      cp_async16(&sq[r][c8], p.q + ((t0n + min(r, Cnn - 1)) * p.H + hn) * K + c8, r < Cnn);
    }
    {  // the raw gate, rows of K elements, into b2's space (read out before the cumsum)
      const int esz = p.g_f32 ? 4 : 2, PR = K * esz / 16;
      unsigned char* graw = reinterpret_cast<unsigned char*>(&s.b2[0][0]);
      for (int i = tid; i < kC * PR; i += kThreads) {
        const int r = i / PR, c16 = (i % PR) * 16;
        const unsigned char* src = static_cast<const unsigned char*>(p.g) + ((t0n + min(r, Cnn - 1)) * p.HV + hvn) * K * esz;
        cp_async16(graw + r * K * esz + c16, src + c16, r < Cnn);
      }
    }
  };
  auto issue_k = [&](int tid, long t0n, int Cnn, int hn) {
    constexpr int QV = K / 8;
    for (int i = tid; i < kC * QV; i += kThreads) {
      const int r = i / QV, c8 = (i % QV) * 8;
      cp_async16(&sk[r][c8], p.k + ((t0n + min(r, Cnn - 1)) * p.H + hn) * K + c8, r < Cnn);
    }
  };
  if (static_cast<int>(blockIdx.x) >= p.nitems) return;
  {
    const PrepItem f = prep_item(p, blockIdx.x);
    issue_qg(tid0, f.t0, f.Cn, f.h, f.hv);
    issue_k(tid0, f.t0, f.Cn, f.h);
    cp_async_commit();
  }
#pragma unroll 1
  for (int item = blockIdx.x; item < p.nitems; item += gridDim.x) {
    const int tid = item_tid();
    const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const PrepItem it = prep_item(p, item);
    const long t0 = it.t0;
    const int Cn = it.Cn, hv = it.hv;
    const long ch = item;  // = global chunk * HV + hv
    if (tid == 0) {  // the next item's descriptor, read before S4's closing barrier
      if (item + static_cast<int>(gridDim.x) < p.nitems) {
        const PrepItem nx = prep_item(p, item + gridDim.x);
        s.nx_t0 = nx.t0;
        s.nx_Cn = nx.Cn;
        s.nx_h = nx.h;
        s.nx_hv = nx.hv;
      }
    }

    // ---- S0: beta, gate cumsum in log2 units (rows past the sequence end: gate 0, beta 0)
    const float decay_a = (p.gate_mode != kGateGiven && p.A_log) ? __expf(p.A_log[hv]) : 1.f;
    if (tid < kC) {
      float bt = (tid < Cn) ? load_any(p.beta, (t0 + tid) * p.HV + hv, p.beta_f32) : 0.f;
      if (p.beta_sigmoid && tid < Cn) bt = p.beta_mult / (1.f + __expf(-bt));
      s.beta[tid] = bt;
    }
    cp_async_wait<0>();  // this item's q, k, gate
    __syncthreads();
    // Whether the chunk's gates allow the diagonal blocks on tensor cores without safe_gate's promise (gate_range.cuh)
    bool chunk_in_range;
    {
      // Per-channel cumsum over all 256 threads: column c is cut into NS row segments of R rows held
      // by NS adjacent lanes (R = 32 at K = 128: half the registers and half the serial chain of one
      // thread per column); the segment offsets come from shuffles.
      constexpr int NS = kThreads / K > kC ? kC : (kThreads / K < 1 ? 1 : kThreads / K);  // 4, 2, 1
      constexpr int R = kC / NS;
      static_assert(NS * K == kThreads || (NS == 1 && K >= kThreads), "cumsum thread mapping");
      const int c = tid / NS, seg = tid % NS, r0 = seg * R;
      const bool own = c < K;
      float gv[R];
      if (own) {
#pragma unroll
        for (int r = 0; r < R; ++r)
          gv[r] = p.g_f32 ? reinterpret_cast<const float*>(&s.b2[0][0])[(r0 + r) * K + c]
                          : __bfloat162float(reinterpret_cast<const bf16*>(&s.b2[0][0])[(r0 + r) * K + c]);
      }
      __syncthreads();  // the raw gate is in registers; b2 may be overwritten
      float cum = 0.f;
      if (own && p.gate_mode == kGateGiven) {  // the common case without per-row mode branches (same sums)
#pragma unroll
        for (int r = 0; r < R; ++r) {
          cum += (r0 + r < Cn ? gv[r] : 0.f) * kLog2e;
          gv[r] = cum;
        }
      } else if (own) {
        const float bias = p.dt_bias ? p.dt_bias[hv * K + c] : 0.f;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float x = 0.f;  // padded rows: gate 0
          if (r0 + r < Cn) {
            x = gv[r];
            if (p.gate_mode == kGateSoftplus) x = -decay_a * softplus(x + bias);
            else if (p.gate_mode == kGateLowerBound) x = p.lower_bound / (1.f + __expf(-decay_a * (x + bias)));
          }
          cum += x * kLog2e;
          gv[r] = cum;
        }
      }
      // Offset = the earlier segments' totals summed left to right, so trailing padded rows
      // (segment total exactly 0) reproduce b2 of row Cn-1 bit for bit (bL - b2 <= 0 exactly there).
      float off = 0.f;
#pragma unroll
      for (int q = 0; q < NS - 1; ++q) {
        const float y = __shfl_sync(0xffffffffu, cum, (lane & ~(NS - 1)) + q);
        if (q < seg) off += y;
      }
      const bool in_range = !own || block_sums_at_least(gv, kBlockGateSumFloor * kLog2e);  // gv: log2 units
      if (own) {
#pragma unroll
        for (int r = 0; r < R; ++r) s.b2[r0 + r][c] = gv[r] + off;
        if (seg == NS - 1) s.bL[c] = cum + off;  // padded rows add 0, so this is b2 of row Cn-1
      }
      chunk_in_range = __syncthreads_and(in_range) != 0;
    }

    // ---- S1: q/k l2norm in place (fp32 math, bf16 result as FLA). Two threads per row (rows 0-63 q,
    // 64-127 k), K / 2 elements each as 16-byte loads and stores, one shuffle.
    if (p.l2norm) {
      const int row = tid >> 1;
      bf16* const rp = (row < kC ? &sq[row][0] : &sk[row - kC][0]) + (tid & 1) * (K / 2);
      float sum = half_row_sumsq<K>(rp);
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      const float rs = rsqrtf(sum + 1e-6f);
#pragma unroll
      for (int c = 0; c < K / 2; c += 8) {
        uint4 u = *reinterpret_cast<const uint4*>(rp + c);
        const float2 x0 = unpack_bf16_bits(u.x), x1 = unpack_bf16_bits(u.y), x2 = unpack_bf16_bits(u.z), x3 = unpack_bf16_bits(u.w);
        u = make_uint4(pack_bf16(x0.x * rs, x0.y * rs), pack_bf16(x1.x * rs, x1.y * rs), pack_bf16(x2.x * rs, x2.y * rs),
                       pack_bf16(x3.x * rs, x3.y * rs));
        *reinterpret_cast<uint4*>(rp + c) = u;
      }
      __syncthreads();
    }

    // ---- S2: L (strict lower, times beta_r) and Aqk (lower incl., times scale)
    bf16* const Ag = p.ws.a + ch * kQTileElems;  // hi [C][C] (then lo), swizzled rows
    {
      // Per-channel gates: operands are pre-scaled through a reference row (docs/math.md section 5). Jobs:
      // the off-diagonal blocks of row block ib (reference = its first row, all factors <= 1) or its
      // diagonal block (middle row with safe_gate or where the chunk's gates are in range, else exact exps). The job
      // table balances the exps over the 4 SM sub-partitions (warps w and w+4 share one). Row block 3's six
      // off-diagonal column tiles are split over warps 0 and 4 (3 each), and with the middle row block 2's
      // tile 3 goes to its diagonal warp (move3 below), so the longest warp has 3 tiles, not 6. Warp: ib,
      // diagonal?, its n8 column tiles nt = ntb + i, i < nj (contiguous in every job: 0-2, 0-3, 0-1, 4-5,
      // 3-5, 0-1, 2-3, 6-7 for warps 0-7; with the middle row warp 1 0-2 and warp 3 3-5).
      const int ib = static_cast<int>((0x31032123u >> (4 * warp)) & 0xFu);
      const bool dia = ((0xE8u >> warp) & 1u) != 0u;
      const bool diag_mma = p.safe != 0 || chunk_in_range;  // CTA-uniform
      // With the middle row, row block 2's tile 3 moves from warp 1 to warp 3 (its diagonal block: middle reference
      // row 40, key factors 2^(b_40 - b_j) for j >= 24 within e^80): no warp has more than 3 tiles (warp 1 had 4)
      const bool move3 = diag_mma && (warp == 1 || warp == 3);
      const int ntb = dia ? (move3 ? 3 : 2 * ib) : (warp == 4 ? 3 : 0);
      const int nj = move3 ? 3 : dia ? 2 : (warp == 0 || warp == 4 ? 3 : 2 * ib);
      if (!dia || diag_mma) {
        // Tile i accumulates in slot i (4 slots, not one per possible tile: each tile's mma sequence
        // over ks is unchanged). Every value below is computed by the same expression as before; only
        // the loads and addresses differ:
        // - q / k rows of the A operands and the k rows of the B tiles come by ldmatrix, which hands
        //   each lane the bf16 pairs its fragment slots name (row g / g + 8 of the 8x8 piece, columns
        //   2t, 2t + 1), i.e. the bits the per-pair loads read; they are widened to fp32 exactly
        //   (unpack_bf16_bits) and scaled after the load, as before;
        // - per-lane shared addresses are formed once; k steps and column tiles are constant offsets.
        float accA[4][4], accL[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) accA[i][e] = accL[i][e] = 0.f;
        const int rA = 16 * ib + g;
        const int nRef = dia ? 16 * ib + 8 : 16 * ib;
        constexpr int BP = K + 4;  // b2 pitch (floats)
        // Per-lane shared byte addresses, advanced per k step (loop-carried, so ptxas keeps them in
        // registers instead of recomputing them from the warp and lane indices every step).
        using Smem = PrepSmem<K>;
        constexpr uint32_t kQ2K = static_cast<uint32_t>(offsetof(Smem, k) - offsetof(Smem, u0));
        constexpr uint32_t kTile2 = 16u * (K + 8) * 2u;  // bytes of 16 sk rows
        uint32_t aq_addr = smem_u32(&sq[16 * ib + (lane & 15)][(lane >> 4) << 3]);  // k rows: + kQ2K
        // B tiles, two per ldmatrix.x4: matrices (tile i, columns 0-7 / 8-15), (tile i + 1, ...)
        uint32_t kb_addr = smem_u32(&sk[8 * ntb + ((lane >> 4) << 3) + (lane & 7)][((lane >> 3) & 1) << 3]);
        uint32_t bA = smem_u32(&s.b2[rA][2 * t]);  // b2 at columns 16 ks + 2t (+ 32 bytes: + 8)
        uint32_t bN = smem_u32(&s.b2[nRef][2 * t]);
        uint32_t bJ = smem_u32(&s.b2[8 * ntb + g][2 * t]);
        // One copy of the k loop per tile count (warp-uniform): no per-step tile predicates.
        auto kloop = [&](auto njc) {
          constexpr int NJ = decltype(njc)::value;
#pragma unroll 2
        for (int ks = 0; ks < K / 16; ++ks, aq_addr += 32u, kb_addr += 32u, bA += 64u, bN += 64u, bJ += 64u) {
          constexpr uint32_t c0 = 0u, c1 = 32u;
          uint32_t qr[4], kr[4], kb[4][2];
          ldsm_x4_at(qr, aq_addr);
          ldsm_x4_at(kr, aq_addr + kQ2K);
          {
            uint32_t r4[4];
            ldsm_x4_at(r4, kb_addr);
            kb[0][0] = r4[0], kb[0][1] = r4[1], kb[1][0] = r4[2], kb[1][1] = r4[3];
          }
          if constexpr (NJ > 2) {  // tile 3's rows exist in sk when NJ == 3 (unused then)
            uint32_t r4[4];
            ldsm_x4_at(r4, kb_addr + kTile2);
            kb[2][0] = r4[0], kb[2][1] = r4[1], kb[3][0] = r4[2], kb[3][1] = r4[3];
          }
          const float2 qa0 = unpack_bf16_bits(qr[0]), qa1 = unpack_bf16_bits(qr[2]);
          const float2 qb0 = unpack_bf16_bits(qr[1]), qb1 = unpack_bf16_bits(qr[3]);
          const float2 ka0 = unpack_bf16_bits(kr[0]), ka1 = unpack_bf16_bits(kr[2]);
          const float2 kb0 = unpack_bf16_bits(kr[1]), kb1 = unpack_bf16_bits(kr[3]);
          const float2 ba0 = lds_f32x2_at(bA + c0), ba1 = lds_f32x2_at(bA + c1);
          const float2 bb0 = lds_f32x2_at(bA + 32u * BP + c0), bb1 = lds_f32x2_at(bA + 32u * BP + c1);
          const float2 n0 = lds_f32x2_at(bN + c0), n1 = lds_f32x2_at(bN + c1);
          uint32_t aq[4], ak[4];
          {
            const float f[8] = {ex2(ba0.x - n0.x), ex2(ba0.y - n0.y), ex2(bb0.x - n0.x), ex2(bb0.y - n0.y),
                                ex2(ba1.x - n1.x), ex2(ba1.y - n1.y), ex2(bb1.x - n1.x), ex2(bb1.y - n1.y)};
            aq[0] = pack_bf16(qa0.x * f[0], qa0.y * f[1]);
            aq[1] = pack_bf16(qb0.x * f[2], qb0.y * f[3]);
            aq[2] = pack_bf16(qa1.x * f[4], qa1.y * f[5]);
            aq[3] = pack_bf16(qb1.x * f[6], qb1.y * f[7]);
            ak[0] = pack_bf16(ka0.x * f[0], ka0.y * f[1]);
            ak[1] = pack_bf16(kb0.x * f[2], kb0.y * f[3]);
            ak[2] = pack_bf16(ka1.x * f[4], ka1.y * f[5]);
            ak[3] = pack_bf16(kb1.x * f[6], kb1.y * f[7]);
          }
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            if (i >= NJ || (i == 3 && nj == 3)) continue;
            const float2 bj0 = lds_f32x2_at(bJ + 32u * BP * i + c0), bj1 = lds_f32x2_at(bJ + 32u * BP * i + c1);
            const float2 kj0 = unpack_bf16_bits(kb[i][0]), kj1 = unpack_bf16_bits(kb[i][1]);
            const uint32_t b0 = pack_bf16(kj0.x * ex2(n0.x - bj0.x), kj0.y * ex2(n0.y - bj0.y));
            const uint32_t b1 = pack_bf16(kj1.x * ex2(n1.x - bj1.x), kj1.y * ex2(n1.y - bj1.y));
            mma_bf16_16816(accA[i], aq, b0, b1);
            mma_bf16_16816(accL[i], ak, b0, b1);
          }
        }
        };
        if (nj == 2) kloop(std::integral_constant<int, 2>{});
        else kloop(std::integral_constant<int, 4>{});  // 3 or 4 tiles
        // epilogue: select (never multiply by a mask); L fp32, Aqk bf16
        // Rows r = rA (+ 8) have r mod 8 = g and columns j = 8 nt + 2t, so swz<kC>(r, j) is
        // r kC + ((nt ^ g) << 3) + 2t: one per-lane base, the tile's piece and the half's row offset.
        const float beta_r[2] = {s.beta[rA], s.beta[rA + 8]};
        bf16* const Agr = Ag + rA * kC + 2 * t;
        float* const Lr = &s.L[rA][2 * t];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          if (i >= nj) continue;
          const int nt = ntb + i;
          const int jp = (nt ^ g) << 3;  // swizzled column of the lane's pair minus 2t
#pragma unroll
          for (int hf = 0; hf < 2; ++hf) {
            const int r = 16 * ib + g + hf * 8, j = nt * 8 + 2 * t;
            float av[2], lv[2];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              av[e] = (j + e <= r) ? p.scale * accA[i][hf * 2 + e] : 0.f;
              lv[e] = (j + e < r) ? beta_r[hf] * accL[i][hf * 2 + e] : 0.f;
            }
            uint32_t hi, lo;
            pack_bf16_split_bits(av[0], av[1], hi, lo);
            *reinterpret_cast<uint32_t*>(Agr + hf * 8 * kC + jp) = hi;
            if constexpr (kQPlanes == 2) *reinterpret_cast<uint32_t*>(Agr + kC * kC + hf * 8 * kC + jp) = lo;
            *reinterpret_cast<float2*>(Lr + hf * 8 * 68 + nt * 8) = make_float2(lv[0], lv[1]);
          }
        }
      }
      if (dia && !diag_mma) {
        // exact diagonal 16x16 block: exps of non-positive differences only
        for (int e = lane; e < 256; e += 32) {
          const int rr = e >> 4, jj = e & 15;
          const int r = 16 * ib + rr, j = 16 * ib + jj;
          float sa = 0.f, sl = 0.f;
          if (jj <= rr) {
            for (int c = 0; c < K; c += 2) {
              const float2 qr = load_bf16x2(&sq[r][c]), kr = load_bf16x2(&sk[r][c]), kj = load_bf16x2(&sk[j][c]);
              const float2 br = *reinterpret_cast<const float2*>(&s.b2[r][c]);
              const float2 bj = *reinterpret_cast<const float2*>(&s.b2[j][c]);
              const float f0 = ex2(br.x - bj.x), f1 = ex2(br.y - bj.y);
              sa += qr.x * kj.x * f0 + qr.y * kj.y * f1;
              sl += kr.x * kj.x * f0 + kr.y * kj.y * f1;
            }
          }
          const float av = jj <= rr ? p.scale * sa : 0.f;
          const bf16 hi = __float2bfloat16_rn(av);
          Ag[swz<kC>(r, j)] = hi;
          if constexpr (kQPlanes == 2) Ag[kC * kC + swz<kC>(r, j)] = __float2bfloat16_rn(av - __bfloat162float(hi));
          s.L[r][j] = jj < rr ? s.beta[r] * sl : 0.f;
        }
      }
      if (dia) {  // Aqk above the diagonal block is zero (the state kernel reads all 64 columns):
        // whole 16-byte pieces (8 columns from 16(ib + 1) on) of the swizzled rows; lane: row, every
        // second piece (no index division).
        const int r = 16 * ib + (lane & 15);
        for (int pc = 2 * (ib + 1) + (lane >> 4); pc < kC / 8; pc += 2) {
          uint4* const dst = reinterpret_cast<uint4*>(Ag + swz<kC>(r, 8 * pc));
          dst[0] = make_uint4(0u, 0u, 0u, 0u);                                // hi
          if constexpr (kQPlanes == 2) dst[kC * kC / 8] = make_uint4(0u, 0u, 0u, 0u);  // lo
        }
      }
    }
    __syncthreads();

    // ---- S3a: warps 0-3 (16 lanes each) invert the diagonal 16x16 blocks by forward substitution
    // (fp32) and park them over L's diagonal blocks (no later stage reads those; X shares q's space,
    // and holding the blocks in registers across the barrier costs spills); warps 4-7 write q e^b
    // and the decay.
    if (warp < 4) {
      invert_diagonal_block(s.L, s.L, warp, lane);
    } else {  // q e^b (q's space becomes X after the barrier) and the decay
      bf16* const qg = p.ws.qg + ch * kC * K;
      // element pair c of rows r1, r1 + PR, ...: every address a compile-time offset from the first
      constexpr int PR = 128 / (K / 2);  // rows per pass (4, 2, 1)
      const unsigned u = static_cast<unsigned>(tid - 128);
      const int c = static_cast<int>(u % (K / 2)) * 2, r1 = static_cast<int>(u / (K / 2));
#pragma unroll 8
      for (int it = 0; it < kC / PR; ++it) {
        const int r = r1 + it * PR;
        const float2 qv = load_bf16x2(&sq[r][c]);
        const float2 b = *reinterpret_cast<const float2*>(&s.b2[r][c]);
        st_u32(qg + tile_off<K>(r, c), pack_bf16(qv.x * ex2(b.x), qv.y * ex2(b.y)));
      }
      for (int c = tid - 128; c < K; c += 128) p.ws.el[ch * K + c] = ex2(s.bL[c]);
    }
    __syncthreads();
    if (warp < 4 && lane < 16) {
#pragma unroll
      for (int i = 0; i < 16; ++i) s.u0.X[16 * warp + i][16 * warp + lane] = s.L[16 * warp + i][16 * warp + lane];
    }
    __syncthreads();

    // ---- S3b: block merges (tf32 mma.sync)
    merge_inverse_blocks(s.L, s.u0.X, warp, lane);

    // ---- S4: T' = Tinv diag(beta) as bf16 hi + lo, k e^(bL-b) and k e^b, all to the workspace
    store_t_prime(s.u0.X, s.beta, p.tw.t + ch * kTTileElems, tid);
    {
      bf16* const kg = p.ws.kg + ch * kC * K;
      constexpr int PR = kThreads / (K / 2);  // rows per pass (8, 4, 2)
      const unsigned u = static_cast<unsigned>(tid);
      const int c = static_cast<int>(u % (K / 2)) * 2, r1 = static_cast<int>(u / (K / 2));
      const float2 bl = *reinterpret_cast<const float2*>(&s.bL[c]);
#pragma unroll 8
      for (int it = 0; it < kC / PR; ++it) {
        const int r = r1 + it * PR;
        const float2 kv = load_bf16x2(&sk[r][c]);
        const float2 b = *reinterpret_cast<const float2*>(&s.b2[r][c]);
        const float e0 = ex2(b.x), e1 = ex2(b.y), l0 = ex2(bl.x - b.x), l1 = ex2(bl.y - b.y);
        st_u32(kg + tile_off<K>(r, c), pack_bf16(kv.x * l0, kv.y * l1));
        st_u32(p.ws.ke + ch * kC * K + tile_off<K>(r, c), pack_bf16(kv.x * e0, kv.y * e1));
      }
    }
    // k's last reads were in S4 too: the next item's q, gate and k go as one group (waited at its top).
    // No CTA barrier follows before thread 0 rewrites the next-item descriptor at that top, so it is
    // read before this barrier.
    const long nt0 = s.nx_t0;
    const int nCn = s.nx_Cn, nh = s.nx_h, nhv = s.nx_hv;
    __syncthreads();
    if (item + static_cast<int>(gridDim.x) < p.nitems) {
      issue_qg(tid, nt0, nCn, nh, nhv);
      issue_k(tid, nt0, nCn, nh);
    }
    cp_async_commit();
  }  // work items
  cp_async_wait_all();
}

}  // namespace
}  // namespace lina::detail::cuda
