// K = 256 (docs/kernels/chunk_gla_fwd.md, "D256 prep + state"): v4's <256,64> redid the gate scan, the
// 32 k exps of qe / kr / ke and A over K = 256 in each of the four V-tile CTAs of a head. Here a
// chunk-parallel prep kernel does that work once per (chunk, head) and writes the operands to a
// workspace; a state kernel per (work item, head, 64-column V tile) walks the chunks and only runs the
// o and state GEMMs (v5's consumer code) on the loaded operands. Same operands, roundings and steep
// decision as v4 / v5.
#pragma once
#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>

#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/mbarrier.cuh"
#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/common/cuda/wgmma_sm90.cuh"
#include "ops/gla/cuda/fwd/common.cuh"
#include "ops/gla/cuda/gla_wgmma_glue.cuh"

namespace lina::detail::cuda {
namespace {  // one translation unit (chunk_gla_fwd.cu) includes the forward kernels

using namespace cuda_util;

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
  gate_rows_scan<32, PaddedRows<kQ>>(sg, r0, cp, run, lo, hi);
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
    causal_a_blocks<K, 2, 8>(aacc, sq, sg, kQ, warp, lane);
    __syncthreads();  // kr reads done: A hi + lo overwrite the kr tile
    __nv_bfloat16* sAh = sg;
    __nv_bfloat16* sAl = sg + kC * kAs;
    store_causal_a<PaddedRows<kAs>, 2, 8>(sAh, sAl, aacc, warp, g8, t4);
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

// The K = 256 state kernel (wgmma; the mma.sync kernel it replaced, 1.21 against 0.97 ms
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

}  // namespace
}  // namespace lina::detail::cuda
