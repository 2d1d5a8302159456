// v5 wgmma (K = 128, VT = 128; the variant "wg128", the default there; "ws" runs chunk_gla_fwd_ws<128,128>;
// docs/kernels/chunk_gla_fwd.md, "v5 wgmma"). The producers are v5's (same loads, scan, operands, A),
// writing 128-byte-swizzled tiles without padding; the consumers are two warpgroups, warpgroup wg owns
// value columns 64 wg .. 64 wg + 63 and holds H^T [64 V][128 ch] as one fp32 m64n128 wgmma accumulator
// (64 registers per thread, element for element where v5's warps held it). Per chunk and warpgroup:
//   o^T  = bf16(2^rho H^T) @ qe^T   8 RS wgmma m64n64k16 (A from the accumulator registers, B = qe)
//        + v^T @ A_hi^T + v^T @ A_lo^T   8 SS wgmma m64n64k16 (A = v^T MN-major, B = A K-major; the
//          producers zero A's non-causal blocks)
//   H^T  = H^T diag(2^bL) + v^T @ ke     4 SS wgmma m64n128k16 (B = ke MN-major)
// o leaves the registers as bf16 pairs (one shuffle per pair) while the state wgmmas run.
#pragma once
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "ops/common/cuda/mbarrier.cuh"
#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/common/cuda/wgmma_sm90.cuh"
#include "ops/gla/cuda/fwd/common.cuh"
#include "ops/gla/cuda/fwd/producer.cuh"
#include "ops/gla/cuda/gla_wgmma_glue.cuh"

namespace lina::detail::cuda {
namespace {  // one translation unit (chunk_gla_fwd.cu) includes the forward kernels

using namespace cuda_util;

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

// Addressing of wg128's tiles for producer.cuh and gate_rows_scan: byte offsets in the 128-byte swizzle.
struct Swizzled128 {
  using T = unsigned char;
  static __device__ __forceinline__ std::uint32_t offset(int row, int col) { return gla_wg::swz(row, col); }
};
// The same within one [64][64] block of 128-byte rows (A hi, A lo).
struct Swizzled64 {
  using T = unsigned char;
  static __device__ __forceinline__ std::uint32_t offset(int row, int col) { return gla_wg::swz64(row, col); }
};

// kWgA (the variant wg128, the default; wg128_mma_a runs kWgA = false): producer warpgroup 0 computes A by wgmma (the whole 64 x 64 tile, the
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
  if (tid == 0) init_pipeline_barriers<STAGES>(full, empty, landed, pbar, NPT, NCT);
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
      gate_rows_scan<16, Swizzled128>(sg, qr0, cp, run, lo, hi);
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
        // ---- operands in place: q -> qe, g -> kr, k -> ke.
        producer_operands<Swizzled128>(sq, sk, sg, qr0, cp, rho, bL, off);
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
              store_causal_block_split<Swizzled64>(sAh, sAl, acc, pw, jb, g8, t4);  // row block pw; jb > pw: zeros
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
          store_causal_a<Swizzled64, 2, NPW>(sAh, sAl, aacc, pw, g8, t4);
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
        steep_segment_decay<Swizzled128>(sg, cn, cp, segdec);
      }
      gla_wg::fence_proxy_async_smem();  // this thread's tile writes (and the cp.async data it waited for) -> wgmma
      mbar_arrive(full + st);
    }
    if (p.mode == 1 && quarter == 0) store_segment_decay(p, s, h, K, cp, segdec);
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

}  // namespace
}  // namespace lina::detail::cuda
