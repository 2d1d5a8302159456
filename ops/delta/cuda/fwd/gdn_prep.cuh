// chunk_gdn forward: the thin GDN prep on one warpgroup (docs/kernels/chunk_delta_fwd.md, "GDN prep on one
// warpgroup"). Part of the forward's one translation unit, chunk_delta_fwd.cu (whose anonymous namespace keeps these
// kernels and helpers internal to it); includes what it uses.
//
// Why one warpgroup: a fused GDN forward (a prep warpgroup one chunk ahead of the state warpgroups, T' / Q'
// in shared memory, no workspace round trip) is the only design whose HBM traffic fits the 0.6 ns per
// token-head bar, and it needs one chunk's prep on one warpgroup within about one state-chain step. This
// kernel is that warpgroup's work with the thin workspace as its output, so the state kernel consumes it:
//   S0  beta, gate cumsum (log2)                      warps 0-1 / warp 2, from registers loaded one item ahead
//   S1  inverse norms, one q or k row per thread       SIMT over SW128 tiles
//   S2  q k^T and k k^T on wgmma (m64n64k16 SS, both operands K-major from the same SW128 tiles the state
//       kernel uses), factors and decay in the epilogue; Q' in bf16 (kQPlanes), the strict-lower A in fp32
//   S3  (I + A)^-1: diagonal 16 x 16 blocks by forward substitution, two tf32 merge levels (merge_inverse_blocks)
//   S4  T' = (I + A)^-1 diag(beta) as bf16 hi + lo; the factor rows c1, c2, c3, 2^bL
// Q', T' and the factor rows are written to shared memory in their workspace layout (4-byte stores without bank
// conflicts) and leave by bulk copies (one thread, cp.async.bulk shared -> global): the scattered 4-byte global
// stores they replace held the epilogue's registers on the long scoreboard (ncu, device call 3).
// SEQ = false (the forward's GDN prep): a persistent grid strides over the (chunk, value head) items,
// three CTAs per SM at K = 128, the next item's q / k in flight during this item's inverse.
// SEQ = true (K = 128, the chunk_gdn.fwd variant prep_per_sequence): one CTA per (sequence, value head)
// walks its chunks in order: a fused kernel's prep warpgroup's timeline without the state warpgroups.
// It replaced gdn_thin_prep_kernel (8 warps, mma.sync q k^T / k k^T over a job table of n8 tiles): the
// same outputs and formats; values differ only in the products' summation order.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ops/delta/cuda/fwd/params.cuh"
#include "ops/delta/cuda/fwd/state.cuh"
#include "ops/delta/cuda/fwd/tile_ops.cuh"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/mbarrier.cuh"
#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/common/cuda/wgmma_sm90.cuh"

namespace lina::detail::cuda {
namespace {

template <int K>
struct WgPrepSmem {
  bf16 q[kC * K];  // SW128 tiles [K / 64][C][64] (1 KB aligned: the struct sits at a 1 KB boundary)
  bf16 k[kC * K];  // (q, then k) from S2's end to S3a's: Q' (8 KB a plane) on its way out by bulk copy
  alignas(16) float L[kC][68];  // strict-lower A, the inverted diagonal blocks; after the merges T' hi + lo (16 KB) on its way out
  alignas(16) float X[kC][68];  // (I + A)^-1, upper blocks as merge scratch
  alignas(16) float beta[kC];
  alignas(16) float bs[kC];  // log2 cumsum of the gate
  alignas(16) float rq[kC];
  alignas(16) float rk[kC];  // 0 past the sequence end
  alignas(16) float sc[4][kC];  // the factor rows c1, c2, c3, 2^bL on their way out
  std::uint64_t bar_qk;  // the item's q, k boxes (TMA)
};
constexpr int kWgThreads = 128;
template <int K>
constexpr std::size_t kWgPrepSmemBytes = sizeof(WgPrepSmem<K>) + 1024;  // + manual 1 KB alignment
template <int K>
constexpr int kWgPrepMinBlocks = K == 64 ? 4 : K == 128 ? 3 : 2;
static_assert(4 * kWgPrepSmemBytes<64> <= 227 * 1024 && 3 * kWgPrepSmemBytes<128> <= 227 * 1024 &&
                  2 * kWgPrepSmemBytes<256> <= 227 * 1024,
              "one-warpgroup GDN prep: four / three / two CTAs per SM at K = 64 / 128 / 256");

template <int K, bool SEQ>
__global__ void __launch_bounds__(kWgThreads, SEQ ? 1 : kWgPrepMinBlocks<K>) gdn_wg_prep_kernel(const __grid_constant__ Params p) {
  using wgmma::Major;
  using S = WgPrepSmem<K>;
  static_assert(offsetof(S, k) % 1024 == 0 && offsetof(S, k) == offsetof(S, q) + kC * K * sizeof(bf16),
                "SW128 tiles 1 KB aligned; q, k contiguous (the Q' staging)");
  static_assert(2 * kC * K * sizeof(bf16) >= kQTileBytes && sizeof(S::L) >= kTTileBytes, "Q' / T' staging space");
  extern __shared__ __align__(16) unsigned char wg_prep_smem_raw[];
  unsigned char* const sm_base = wg_prep_smem_raw + ((1024u - (smem_u32(wg_prep_smem_raw) & 1023u)) & 1023u);
  S& s = *reinterpret_cast<S*>(sm_base);

  // The items this CTA runs: SEQ, chunk ci of (sequence n, value head hv) = blockIdx.x; else item i of the
  // strided list.
  int first = blockIdx.x, count = p.nitems, stride = gridDim.x;
  SeqDesc sd{};
  int seq_hv = 0;
  if constexpr (SEQ) {
    seq_hv = static_cast<int>(blockIdx.x) % p.HV;
    sd = p.seqs.at(static_cast<int>(blockIdx.x) / p.HV);
    first = 0, count = (sd.length + kC - 1) / kC, stride = 1;
  }
  auto item_at = [&](int i, long& ch) {
    if constexpr (SEQ) {
      ch = (static_cast<long>(sd.chunk_off) + i) * p.HV + seq_hv;
      return PrepItem{sd.row_begin + static_cast<long>(i) * kC, min(kC, sd.length - i * kC),
                      static_cast<int>(p.fd_g.div(static_cast<std::uint32_t>(seq_hv))), seq_hv};
    } else {
      ch = i;
      return prep_item(p, i);
    }
  };
  // q and k of an item. K >= 128: K / 64 TMA boxes each (64 channels x 64 rows, SW128), thread 0 only; rows past the
  // sequence end hold the next sequence's rows (past the last row: zeros), and the epilogue's selects keep them out of
  // Q' and A. K = 64: 16-byte cp.async pieces from every thread, zero-filled past the end (one 8 KB box each measured
  // slower there, and the host then encodes no tensor maps).
  constexpr bool kTmaQk = K >= 128;
  auto issue_qk = [&](int tid, const PrepItem& it) {
    if constexpr (kTmaQk) {
      if (tid != 0) return;
      mbar_arrive_expect_tx(&s.bar_qk, 2u * kC * K * sizeof(bf16));
#pragma unroll
      for (int c = 0; c < K / 64; ++c) {
        tma_load_3d(s.q + c * kC * 64, &p.tm_q, 64 * c, it.h, static_cast<int>(it.t0), &s.bar_qk);
        tma_load_3d(s.k + c * kC * 64, &p.tm_k, 64 * c, it.h, static_cast<int>(it.t0), &s.bar_qk);
      }
    } else {
      constexpr int QV = K / 8;  // 16-byte pieces per row
#pragma unroll
      for (int j = 0; j < kC * QV / kWgThreads; ++j) {
        const int i = tid + kWgThreads * j, r = i / QV, c8 = i % QV;
        const long row = (it.t0 + min(r, it.Cn - 1)) * p.H + it.h;
        const int off = wgmma::sw128_blocked<kC>(r, 8 * c8);
        cp_async16(s.q + off, p.q + row * K + 8 * c8, r < it.Cn);
        cp_async16(s.k + off, p.k + row * K + 8 * c8, r < it.Cn);
      }
      cp_async_commit();
    }
  };
  // An item's raw beta (threads 0-63, row = tid) and gate (warp 2, rows 2 lane, 2 lane + 1) as their bits, with the
  // value head's A_log / dt_bias, loaded one item ahead into registers: S0 then waits on no global load, and nothing
  // waits on these loads before S0 (a conversion right after them did: +3,400 cycles per item in the merges). 0 past the end.
  std::uint32_t pre_beta = 0u, pre_g[2] = {0u, 0u};
  float pre_alog = 0.f, pre_bias = 0.f;
  auto prefetch_scalars = [&](int tid, const PrepItem& it) {
    if (tid < kC) {
      pre_beta = tid < it.Cn ? load_bits(p.beta, (it.t0 + tid) * p.HV + it.hv, p.beta_f32) : 0u;
    } else if ((tid >> 5) == 2) {
      const int lane = tid & 31;
#pragma unroll
      for (int e = 0; e < 2; ++e) pre_g[e] = 2 * lane + e < it.Cn ? load_bits(p.g, (it.t0 + 2 * lane + e) * p.HV + it.hv, p.g_f32) : 0u;
      pre_alog = (p.gate_mode != kGateGiven && p.A_log) ? p.A_log[it.hv] : 0.f;
      pre_bias = p.dt_bias ? p.dt_bias[it.hv] : 0.f;
    }
  };
  if (first >= count) return;
  if (threadIdx.x == 0) {
    mbar_init(&s.bar_qk, 1);
    mbar_init_fence();
  }
  __syncthreads();
  {
    long ch0;
    const PrepItem it0 = item_at(first, ch0);
    issue_qk(threadIdx.x, it0);
    prefetch_scalars(threadIdx.x, it0);
  }
  std::uint32_t qk_phase = 0;
  const std::uint32_t a_q = smem_u32(s.q), a_k = smem_u32(s.k);
  bf16* const q_stage = s.q;                          // Q' (kQPlanes planes) on its way out
  bf16* const t_stage = reinterpret_cast<bf16*>(&s.L[0][0]);  // T' hi, lo on their way out
#pragma unroll 1
  for (int i = first; i < count; i += stride) {
    const int tid = item_tid();
    const int warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
    long ch;
    const PrepItem it = item_at(i, ch);
    const int Cn = it.Cn;

    // ---- S0: beta (warps 0-1), gate cumsum in log2 units (warp 2); rows past the end: gate 0, beta 0
    if (tid < kC) {
      float bt = bits_to_float(pre_beta, p.beta_f32);
      if (p.beta_sigmoid && tid < Cn) bt = p.beta_mult / (1.f + __expf(-bt));
      s.beta[tid] = bt;
    } else if (warp == 2) {
      const float decay_a = (p.gate_mode != kGateGiven && p.A_log) ? __expf(pre_alog) : 1.f;
      float gv[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        gv[e] = bits_to_float(pre_g[e], p.g_f32);
        if (p.gate_mode == kGateSoftplus && 2 * lane + e < Cn) gv[e] = -decay_a * softplus(gv[e] + pre_bias);
        gv[e] *= kLog2e;
      }
      float x = gv[0] + gv[1];
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const float y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
      }
      s.bs[2 * lane] = x - gv[1];
      s.bs[2 * lane + 1] = x;
    }
    if constexpr (kTmaQk) {  // this item's q, k
      mbar_wait(&s.bar_qk, qk_phase);
      qk_phase ^= 1u;
    } else {
      cp_async_wait<0>();
      wgmma::fence_proxy_async_smem();  // the cp.async writes before wgmma reads them
    }
    __syncthreads();

    // ---- S2: acc_q = q k^T, acc_k = k k^T (raw rows) on wgmma, issued first: S1 runs while they do
    float acc_q[32], acc_k[32];
#pragma unroll
    for (int e = 0; e < 32; ++e) acc_q[e] = acc_k[e] = 0.f;
    wgmma::fence_regs<32>(acc_q);
    wgmma::fence_regs<32>(acc_k);
    cute::warpgroup_arrive();
#pragma unroll
    for (int ks = 0; ks < K / 16; ++ks) {  // channels 16 ks ..: SW128 tile ks / 4, 32 bytes per k-step in it
      const std::uint32_t off = static_cast<std::uint32_t>((ks >> 2) * 8192 + (ks & 3) * 32);
      wgmma::mma_ss<wgmma::M64N64_SS<Major::K, Major::K>>(wgmma::desc_k(a_q + off), wgmma::desc_k(a_k + off), acc_q);
      wgmma::mma_ss<wgmma::M64N64_SS<Major::K, Major::K>>(wgmma::desc_k(a_k + off), wgmma::desc_k(a_k + off), acc_k);
    }
    cute::warpgroup_commit_batch();
    // ---- S1 (during S2's wgmma): inverse norms, thread = one row (q rows 0-63, k rows 64-127), 16-byte pieces of the
    // SW128 tiles
    {
      const int r = tid & (kC - 1);
      if (p.l2norm) {
        const bf16* const src = tid < kC ? s.q : s.k;
        float ss[2] = {0.f, 0.f};
#pragma unroll
        for (int c8 = 0; c8 < K / 8; ++c8) {
          const uint4 u = *reinterpret_cast<const uint4*>(src + wgmma::sw128_blocked<kC>(r, 8 * c8));
          const float2 x0 = unpack_bf16_bits(u.x), x1 = unpack_bf16_bits(u.y), x2 = unpack_bf16_bits(u.z),
                       x3 = unpack_bf16_bits(u.w);
          ss[c8 & 1] += x0.x * x0.x + x0.y * x0.y + x1.x * x1.x + x1.y * x1.y + x2.x * x2.x + x2.y * x2.y + x3.x * x3.x +
                        x3.y * x3.y;
        }
        (tid < kC ? s.rq : s.rk)[r] = r < Cn ? rsqrtf(ss[0] + ss[1] + 1e-6f) : 0.f;
      } else {
        (tid < kC ? s.rq : s.rk)[r] = r < Cn ? 1.f : 0.f;
      }
    }

    cute::warpgroup_wait<0>();
    wgmma::fence_regs<32>(acc_q);
    wgmma::fence_regs<32>(acc_k);
    if (tid == 0) bulk_wait_read();  // the previous item's T' / factor copies have read L and sc
    __syncthreads();  // rq, rk, beta, bs visible; every read of q, k done; L and sc free

    // Epilogue: element (r, j) of accumulator entry 4 nt + e: r = 16 warp + g8 + 8 (e >= 2), j = 8 nt + 2 t4 + (e & 1).
    //   Q'_rj = scale rq_r rk_j 2^(b_r - b_j) (q k^T)_rj (j <= r),  A_rj = beta_r rk_r rk_j 2^(b_r - b_j) (k k^T)_rj (j < r)
    // Q' goes to the q / k space in its workspace layout (conflict-free 4-byte stores), then out in one bulk copy.
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = 16 * warp + g8 + 8 * hf;
      const float br = s.bs[r], fq = p.scale * s.rq[r], fk = s.beta[r] * s.rk[r];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int j = 8 * nt + 2 * t4;
        const float2 bj = *reinterpret_cast<const float2*>(&s.bs[j]);
        const float2 kj = *reinterpret_cast<const float2*>(&s.rk[j]);
        const float f0 = ex2(fminf(br - bj.x, 0.f)) * kj.x, f1 = ex2(fminf(br - bj.y, 0.f)) * kj.y;
        const float* const aq = &acc_q[4 * nt + 2 * hf];
        const float* const ak = &acc_k[4 * nt + 2 * hf];
        const float q0 = j <= r && r < Cn ? fq * aq[0] * f0 : 0.f, q1 = j + 1 <= r && r < Cn ? fq * aq[1] * f1 : 0.f;
        st_bf16x2_planes<kQPlanes>(q_stage, swz<kC>(r, j), q0, q1);
        *reinterpret_cast<float2*>(&s.L[r][j]) =
            make_float2(j < r && r < Cn ? fk * ak[0] * f0 : 0.f, j + 1 < r && r < Cn ? fk * ak[1] * f1 : 0.f);
      }
    }
    wgmma::fence_proxy_async_smem();  // the Q' stores before the bulk copy reads them
    __syncthreads();  // L, Q' complete
    if (tid == 0) {
      bulk_copy_s2g(p.tw.a + ch * kQTileElems, q_stage, kQTileBytes);
      bulk_commit();
    }

    // ---- S3a: diagonal blocks (warp w: block w); the next item's loads once the Q' copy has read q / k's space
    invert_diagonal_block(s.L, s.X, warp, lane);
    if (tid == 0) bulk_wait_read();
    __syncthreads();
    if (i + stride < count) {
      long chn;
      const PrepItem nx = item_at(i + stride, chn);
      issue_qk(tid, nx);
      prefetch_scalars(tid, nx);
    }

    // ---- S3b: the merges (three CTA barriers inside)
    merge_inverse_blocks(s.L, s.X, warp, lane);

    // ---- S4: T' as bf16 hi + lo over L (dead after the merges) and the factor rows, out in two bulk copies
    store_t_prime<kWgThreads>(s.X, s.beta, t_stage, tid);
    if (tid < kC) {
      const int r = tid;
      const float br = s.bs[r], bl = s.bs[kC - 1], e = ex2(br);
      s.sc[0][r] = e * s.rk[r];
      s.sc[1][r] = p.scale * e * s.rq[r];
      s.sc[2][r] = s.rk[r] * ex2(fminf(bl - br, 0.f));
      s.sc[3][r] = ex2(bl);
    }
    wgmma::fence_proxy_async_smem();
    __syncthreads();  // T', factors complete; beta, bs, X consumed before the next item's S0
    if (tid == 0) {
      bulk_copy_s2g(p.tw.t + ch * kTTileElems, t_stage, kTTileBytes);
      bulk_copy_s2g(p.tw.sc + ch * 4 * kC, &s.sc[0][0], 4 * kC * sizeof(float));
      bulk_commit();
    }
  }
  if (threadIdx.x == 0) bulk_wait();
}

}  // namespace
}  // namespace lina::detail::cuda
