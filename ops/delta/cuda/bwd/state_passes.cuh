// wgmma forms of the backward's two sequential state passes (stages B and C of chunk_delta_bwd.cu;
// docs/kernels/chunk_delta_bwd.md, "wgmma state passes").
// Part of the backward's one translation unit, chunk_delta_bwd.cu (whose anonymous namespace keeps these
// kernels and helpers internal to it); includes what it uses.
//
// Structure (both kernels): one CTA of 256 threads per (sequence, value head, 64-column V tile), two
// warpgroups with different jobs:
//   warpgroup 0, the consumer: holds the state transposed, S^T [64 V][K channels], as the fp32
//     accumulator of an m64nK wgmma (thread (warp w, lane g8 = lane / 4, t4 = lane % 4) holds
//     st[4 nt + e] = S^T(v = 16 w + g8 + 8 (e >= 2), ch = 8 nt + 2 t4 + (e & 1))), so every product with
//     the state or a per-chunk [64 V][64 tok] result on the left is RS (A from registers), as in the
//     forward's state kernel. It publishes S_n as bf16 planes (the [K][V] layout grad_v reads), runs the
//     wgmmas and writes v_new / dvn (bf16 hi + lo planes).
//   warpgroup 1, the producer, one chunk ahead: the chunk's operand tiles (w, kg, qg, Aqk, e^bL) are
//     ready-made shared-memory images in HBM (ChunkImage, written by chunk_prep_v2), so thread 0 brings
//     them in by bulk copies (cp.async.bulk, transaction bytes on the full barrier); all 128 threads
//     load the per-V-tile operand (B: u by cp.async; C: dO, split into bf16 hi + lo SW128 tiles).
//     Full / empty mbarriers hand the buffers over (consumer: wgmma reads, wait, arrive on empty).
// Precision: as the backward's mma.sync stages, every operand is a bf16 hi + lo pair (x = hi + lo, ~16 bits) and
// each product is hi*hi + lo*hi + hi*lo with fp32 accumulation, except the w and qg images: one bf16 plane each
// (products ah*w + al*w), the only image planes whose lo term the gradients do not need (CPU emulation over
// eight seeds, docs/kernels/chunk_delta_bwd.md, precision budget).
// Padded rows (past the sequence end) are zero in every tile, so they contribute nothing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ops/delta/cuda/bwd/chunk_image.cuh"
#include "ops/delta/cuda/bwd/params.cuh"
#include "ops/delta/cuda/bwd/tile_ops.cuh"
#include "ops/common/cuda/cluster_pair.cuh"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/mbarrier.cuh"
#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/common/cuda/wgmma_sm90.cuh"

namespace lina::detail::cuda {
namespace {

// The block of a state pass: its 64-column V tile, value head and sequence (bid: the block's index, or its
// cluster's where a cluster of CTAs shares the block: K = 256).
struct StateBlock {
  int vt, hv, n;
  __device__ StateBlock(const Params& p, int bid) {
    vt = bid % p.nvt;
    bid /= p.nvt;
    hv = bid % p.HV;
    n = bid / p.HV;
  }
};

namespace wgb = cuda_util::wgmma;

// The channels one CTA of a state pass owns. Up to K = 128 a CTA holds the whole state; at K = 256 the accumulator
// (m64n256, 128 registers a thread) and the operand tiles do not fit one CTA, so a cluster of two CTAs splits the
// channels in halves (rank r: channels 128 r ..) and swaps the partial sums over channels (the [64 V][64 tok]
// products v_new^T and dvn^T) through distributed shared memory (cluster_pair.cuh); everything per channel stays in
// the CTA that owns it. Both CTAs add the partials in rank order, so they hold bit-identical v_new / dvn.
template <int K>
struct StateSlice {
  static constexpr int KS = K == 256 ? 128 : K;  // channels per CTA
  static constexpr int CL = K / KS;              // CTAs per (sequence, value head, V tile): the cluster size
};
struct NoExchange {};
template <int K>
using StateExchange = std::conditional_t<(StateSlice<K>::CL > 1), cuda_util::PairExchange<32>, NoExchange>;

// Thread 0 of the producer: the image rows of the CTA's channels of an [64 tok][K] image tile into a [64][KS] tile (the
// tiles of 64 columns are 8 KB apart, so a channel half is one contiguous piece per plane), completing on bar.
template <int K, int KS>
__device__ __forceinline__ void copy_plain_slice(PlainTile<KS>& dst, const PlainTile<K>& src, int kc0, std::uint64_t* bar) {
  cuda_util::bulk_copy_g2s(dst.x, src.x + kC * kc0, sizeof(PlainTile<KS>), bar);
}
template <int K, int KS>
__device__ __forceinline__ void copy_split_slice(SplitTile<KS>& dst, const SplitTile<K>& src, int kc0, std::uint64_t* bar) {
  cuda_util::bulk_copy_g2s(dst.hi, src.hi + kC * kc0, sizeof(PlainTile<KS>), bar);
  cuda_util::bulk_copy_g2s(dst.lo, src.lo + kC * kc0, sizeof(PlainTile<KS>), bar);
}

// Consumer, K = 256: acc (a [64 V][64 tok] accumulator's partial over the CTA's channels) becomes the sum over both
// CTAs' channels, rank 0's partial first in both CTAs (use: the exchange's use number, one per chunk).
template <class X>
__device__ __forceinline__ void exchange_partials(X& xc, float (&acc)[32], int use, int rank, int tid) {
  float peer[32];
  xc.send(acc, use, rank ^ 1, tid);
  xc.recv(peer, use, tid);
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] = rank == 0 ? acc[i] + peer[i] : peer[i] + acc[i];
}

constexpr int kWgPadU = 68;  // fp32 pitch of the u tile: the consumer's accumulator-order reads hit 32 banks

// Producer thread pt's positions in a [64][K] tile: columns c .. c + 3 (fixed per thread, since K / 4
// divides 128) of rows r0 + RS u, u = 0 .. PER - 1.
template <int K>
struct WgRows {
  static constexpr int Q = K / 4, RS = 128 / Q, PER = kC / RS;
  int c, r0;
  __device__ explicit WgRows(int pt) : c(4 * (pt % Q)), r0(pt / Q) {}
  __device__ int row(int u) const { return r0 + RS * u; }
};

// Consumer: an accumulator split by wg_split_frags (below) into bf16 words, to HBM rows of [rows][V] bf16 planes.
// Word f[s][j] packs x(r, v) (low half) and x(r + 1, v), r = 8 (2 s + j / 2) + 2 t4, v = vrow + 8 (j & 1); lanes l
// and l ^ 4 hold v and v + 1 of the same rows. One shuffle and one byte permute per word give the even-v lane row r's
// pair (v, v + 1) and the odd-v lane row r + 1's (v - 1, v): 4-byte stores, and the split the wgmma operands need
// anyway is the stored hi / lo (lo plane lo_off elements further; 0: none). flip = 0x80008000 undoes a sign the split
// applied. `base` points at (row 0, column vrow's V tile start); rows at or past nrows are not stored.
template <int NS>
__device__ __forceinline__ void wg_store_frags(bf16* base, i64 lo_off, i64 rs, int nrows, const std::uint32_t (&fh)[NS][4],
                                               const std::uint32_t (&fl)[NS][4], std::uint32_t flip, int vrow, int t4) {
  const int odd = vrow & 1;
  const std::uint32_t sel = odd ? 0x3276u : 0x5410u;  // even: (own lo, other lo); odd: (other hi, own hi)
  bf16* const pt = base + (2 * t4 + odd) * rs + vrow - odd;  // + compile-time multiples of rs below
#pragma unroll
  for (int s = 0; s < NS; ++s)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = 8 * (2 * s + (j >> 1));
      const std::uint32_t h = fh[s][j] ^ flip, hx = __shfl_xor_sync(0xffffffffu, h, 4);
      const bool st = r + 2 * t4 + odd < nrows;
      if (st) *reinterpret_cast<std::uint32_t*>(pt + r * rs + 8 * (j & 1)) = __byte_perm(h, hx, sel);
      if (lo_off) {
        const std::uint32_t l = fl[s][j] ^ flip, lx = __shfl_xor_sync(0xffffffffu, l, 4);
        if (st) *reinterpret_cast<std::uint32_t*>(pt + lo_off + r * rs + 8 * (j & 1)) = __byte_perm(l, lx, sel);
      }
    }
}

// Consumer: padded token rows (r >= Cn) of a per-chunk [64 V][64 tok] accumulator (v_new^T, dvn^T) set to zero (the
// next product reads it).
__device__ __forceinline__ void wg_zero_padded(float (&x)[32], int Cn, int t4) {
#pragma unroll
  for (int i = 0; i < 32; ++i)
    if (8 * (i >> 2) + 2 * t4 + (i & 1) >= Cn) x[i] = 0.f;
}

// Consumer: k-step s of an RS product whose left operand is the m64nN accumulator x (times sign), as
// bf16 hi and lo fragments (wgmma_sm90.cuh: columns 16 s .. pack pairwise into k-step s).
template <int N>
__device__ __forceinline__ void wg_split_frags(const float (&x)[N / 2], float sign, std::uint32_t (&fh)[N / 16][4],
                                               std::uint32_t (&fl)[N / 16][4]) {
#pragma unroll
  for (int s = 0; s < N / 16; ++s)
#pragma unroll
    for (int j = 0; j < 4; ++j) cuda_util::pack_bf16_split(sign * x[8 * s + 2 * j], sign * x[8 * s + 2 * j + 1], fh[s][j], fl[s][j]);
}

// The consumer's barrier waits and the producer's arrivals (phase parity of use number `use`).
__device__ __forceinline__ void wg_wait(std::uint64_t* bar, int use) { cuda_util::mbar_wait(bar, static_cast<std::uint32_t>(use & 1)); }

// ---------------------------------------------------------------------------------------------
// B: forward state pass. Per chunk n, consumer: H_n -> HBM; v_new^T = u^T + (-H^T) w^T (A = -H^T hi / lo
// from the accumulator, B = w [tok][ch] K-major, one plane), v_new -> HBM; H^T = H^T diag(e^bL) + v_new^T kg
// (A = v_new^T hi / lo, B = kg [tok][ch] MN-major, hi + lo). Producer: w, kg, e^bL, u (fp32, cp.async).
template <int K>
struct StateFwdWgSmem {
  static constexpr int KS = StateSlice<K>::KS;
  struct Buf {
    PlainTile<KS> w;
    SplitTile<KS> kg;
  };
  Buf buf[2];                 // SW128 tiles, 1024-byte aligned (the struct sits at a 1 KB boundary)
  float u[2][kC][kWgPadU];    // u [tok][v] (fp32)
  float el[2][KS];            // e^bL
  std::uint64_t full[2], empty[2];
  StateExchange<K> xc;        // K = 256: the peer's v_new^T partials
};
template <int K>
constexpr std::size_t kStateFwdWgSmem = sizeof(StateFwdWgSmem<K>) + 1024;  // + manual 1 KB alignment

template <int K>
__global__ void __launch_bounds__(256, 1) state_fwd_wg_kernel(const Params p) {
  using wgb::Major;
  using S = StateFwdWgSmem<K>;
  using Img = ChunkImage<K>;  // one bulk copy fills {w, kg}: same order and spacing as the image (K <= 128)
  constexpr int KS = StateSlice<K>::KS, CL = StateSlice<K>::CL;
  static_assert(CL > 1 || (offsetof(typename S::Buf, kg) - offsetof(typename S::Buf, w) == offsetof(Img, kg) - offsetof(Img, w) &&
                           sizeof(typename S::Buf) == offsetof(Img, qg) - offsetof(Img, w)),
                "StateFwdWgSmem::Buf must mirror ChunkImage's {w, kg}");
  static_assert(sizeof(typename S::Buf) % 1024 == 0 && sizeof(SplitTile<KS>) % 1024 == 0 && offsetof(S, u) % 16 == 0,
                "SW128 tiles 1 KB aligned; cp.async rows 16-byte aligned");
  extern __shared__ __align__(16) unsigned char bwd_wg_smem_raw[];
  S& s = *reinterpret_cast<S*>(bwd_wg_smem_raw + ((1024u - (cuda_util::smem_u32(bwd_wg_smem_raw) & 1023u)) & 1023u));
  const int tid = threadIdx.x, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  const int role = __shfl_sync(0xffffffffu, tid >> 7, 0);  // warp-uniform for ptxas
  const int rank = CL > 1 ? cuda_util::cluster_rank() : 0, kc0 = KS * rank;  // the CTA's channels kc0 .. kc0 + KS
  const StateBlock blk(p, static_cast<int>(blockIdx.x) / CL);
  const int vt = blk.vt, hv = blk.hv, n = blk.n;
  const cuda_util::SeqDesc sd = p.seqs.at(n);
  const int V = p.V, vc0 = vt * kVT;
  const int nch = (sd.length + kC - 1) / kC;
  if (tid == 0) {
    for (int b = 0; b < 2; ++b) {
      cuda_util::mbar_init(&s.full[b], 129);  // 128 cp.async arrivals + the bulk copies' expect_tx
      cuda_util::mbar_init(&s.empty[b], 128);
    }
    if constexpr (CL > 1) s.xc.init();
    cuda_util::mbar_init_fence();
  }
  if constexpr (CL > 1) cuda_util::cluster_sync();  // the peer's exchange barrier is initialised before any send
  else __syncthreads();

  if (role == 1) {  // ---- producer: w, kg, e^bL by bulk copy (thread 0), u by cp.async (all 128)
    const int pt = tid - 128;
#pragma unroll 1
    for (int lc = 0; lc < nch; ++lc) {
      const int b = lc & 1;
      const i64 t0 = sd.row_begin + static_cast<i64>(lc) * kC;
      const int Cn = min(kC, sd.length - lc * kC);
      if (lc >= 2) wg_wait(&s.empty[b], (lc >> 1) - 1);  // buffer b's readers (chunk lc - 2) are done
      if (pt == 0) {
        const ChunkImage<K>& img = chunk_image<K>(p, sd.chunk_off + lc, hv);
        cuda_util::mbar_arrive_expect_tx(&s.full[b], sizeof(typename S::Buf) + KS * 4);
        if constexpr (CL > 1) {
          copy_plain_slice(s.buf[b].w, img.w, kc0, &s.full[b]);
          copy_split_slice(s.buf[b].kg, img.kg, kc0, &s.full[b]);
        } else {
          cuda_util::bulk_copy_g2s(&s.buf[b], &img.w, sizeof(typename S::Buf), &s.full[b]);
        }
        cuda_util::bulk_copy_g2s(s.el[b], img.el + kc0, KS * 4, &s.full[b]);
      }
      // u [tok][64 v]: 16 pieces of 16 bytes per row, no registers; the arrival fires when they land
#pragma unroll
      for (int j = 0; j < kC * 16 / 128; ++j) {
        const int i = pt + 128 * j, r = i >> 4, c = 4 * (i & 15);
        const bool ok = r < Cn;
        cuda_util::cp_async16(&s.u[b][r][c], p.vn + ((t0 + (ok ? r : 0)) * p.HV + hv) * V + vc0 + c, ok);
      }
      cuda_util::mbar_arrive_cp_async(&s.full[b]);
    }
    return;
  }

  // ---- consumer (warpgroup 0)
  const int vrow = 16 * (tid >> 5) + g8;  // this thread's value columns: vrow, vrow + 8
  float ht[KS / 2];                       // H^T accumulator (m64nKS) of the CTA's channels
  const i64 sbase = ((static_cast<i64>(n) * p.HV + hv) * K + kc0) * V + vc0;
#pragma unroll
  for (int i = 0; i < KS / 2; ++i) {
    const int ch = 8 * (i >> 2) + 2 * t4 + (i & 1), v = vrow + ((i & 2) << 2);
    ht[i] = p.h0 ? p.h0[sbase + static_cast<i64>(ch) * V + v] : 0.f;
  }
#pragma unroll 1
  for (int lc = 0; lc < nch; ++lc) {
    const int b = lc & 1;
    const i64 t0 = sd.row_begin + static_cast<i64>(lc) * kC;
    const int Cn = min(kC, sd.length - lc * kC);
    const int gidx = sd.chunk_off + lc;
    wg_wait(&s.full[b], lc >> 1);
    // v_new^T = u^T - H^T w^T (A = -H^T as hi + lo); H_n to HBM from the same split
    std::uint32_t ah[KS / 16][4], al[KS / 16][4];
    wg_split_frags<KS>(ht, -1.f, ah, al);
    wg_store_frags<KS / 16>(p.Hs + ((static_cast<i64>(gidx) * p.HV + hv) * K + kc0) * V + vc0, p.h_lo ? p.plane_kv : 0, V, KS, ah,
                            al, 0x80008000u, vrow, t4);
    float vacc[32];  // K = 256: rank 0 starts from u, rank 1 from zero; the sum of both is v_new^T
#pragma unroll
    for (int i = 0; i < 32; ++i) vacc[i] = rank == 0 ? s.u[b][8 * (i >> 2) + 2 * t4 + (i & 1)][vrow + ((i & 2) << 2)] : 0.f;
    const std::uint32_t aw = cuda_util::smem_u32(s.buf[b].w.x);
    wgb::fence_regs<32>(vacc);
    wgb::fence_regs<KS / 4>(&ah[0][0]);
    wgb::fence_regs<KS / 4>(&al[0][0]);
    cute::warpgroup_arrive();
#pragma unroll
    for (int ks = 0; ks < KS / 16; ++ks) {  // channels 16 ks ..: tile ks / 4, 32 bytes per k-step inside it
      const std::uint32_t o = (ks >> 2) * 8192 + (ks & 3) * 32;
      wgb::mma_rs<wgb::M64N64_RS<Major::K>, 32>(ah[ks], wgb::desc_k(aw + o), vacc);
      wgb::mma_rs<wgb::M64N64_RS<Major::K>, 32>(al[ks], wgb::desc_k(aw + o), vacc);  // w is one plane
    }
    cute::warpgroup_commit_batch();
    cute::warpgroup_wait<0>();
    wgb::fence_regs<32>(vacc);
    wgb::fence_regs<KS / 4>(&ah[0][0]);
    wgb::fence_regs<KS / 4>(&al[0][0]);
    if constexpr (CL > 1) exchange_partials(s.xc, vacc, lc, rank, tid);
    // v_new -> HBM (rows < Cn; K = 256: rank 0); padded rows (zero already: w and u are) set to zero for the state update
    wg_zero_padded(vacc, Cn, t4);
    std::uint32_t vh[4][4], vl[4][4];
    wg_split_frags<64>(vacc, 1.f, vh, vl);
    if (rank == 0)
      wg_store_frags<4>(p.vnb + (t0 * p.HV + hv) * V + vc0, p.plane_tok, static_cast<i64>(p.HV) * V, Cn, vh, vl, 0u, vrow, t4);
#pragma unroll
    for (int i = 0; i < KS / 2; i += 2) {
      const float2 e = *reinterpret_cast<const float2*>(&s.el[b][8 * (i >> 2) + 2 * t4]);
      ht[i] *= e.x;
      ht[i + 1] *= e.y;
    }
    // H^T += v_new^T kg (k-step = 16 tokens = 16 rows = 2048 bytes; 64-channel tiles 8 KB apart)
    const std::uint32_t ak = cuda_util::smem_u32(s.buf[b].kg.hi), akl = cuda_util::smem_u32(s.buf[b].kg.lo);
    wgb::fence_regs<KS / 2>(ht);
    wgb::fence_regs<16>(&vh[0][0]);
    wgb::fence_regs<16>(&vl[0][0]);
    cute::warpgroup_arrive();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      wgb::mma_rs<wgb::M64_RS<KS, Major::MN>, KS / 2>(vh[ks], wgb::desc_mn(ak + ks * 2048, 8192), ht);
      wgb::mma_rs<wgb::M64_RS<KS, Major::MN>, KS / 2>(vl[ks], wgb::desc_mn(ak + ks * 2048, 8192), ht);
      wgb::mma_rs<wgb::M64_RS<KS, Major::MN>, KS / 2>(vh[ks], wgb::desc_mn(akl + ks * 2048, 8192), ht);
    }
    cute::warpgroup_commit_batch();
    cute::warpgroup_wait<0>();
    wgb::fence_regs<KS / 2>(ht);
    wgb::fence_regs<16>(&vh[0][0]);
    wgb::fence_regs<16>(&vl[0][0]);
    cuda_util::mbar_arrive(&s.empty[b]);
  }
  if constexpr (CL > 1) cuda_util::cluster_sync();  // the peer's last exchange is done before this CTA's memory goes
}

// ---------------------------------------------------------------------------------------------
// C: reverse state pass. Per chunk n (last to first), consumer, with D^T the accumulator:
//   dh[n] = D -> HBM;
//   batch 1: dvn^T = dO^T Aqk + D^T kg^T  (SS: A = dO [tok][v] MN-major, B = Aqk [r][j] MN-major;
//            RS: A = D^T hi / lo, B = kg [tok][ch] K-major) and D^T = D^T diag(e^bL) + dO^T qg (SS, B = qg
//            [tok][ch] MN-major), qg = scale q e^b;
//   dvn -> HBM; batch 2: D^T += (-dvn^T) w (RS, B = w [tok][ch] MN-major).
// Buffers: group X (kg, qg, Aqk, dO, e^bL; read by batch 1) double-buffered, group W (w; batch 2)
// single (two of everything would not fit in 227 KB at K = 128); each group has its full / empty pair.
template <int K>
struct StateBwdWgSmem {
  static constexpr int KS = StateSlice<K>::KS;
  struct BufX {
    SplitTile<KS> kg;
    PlainTile<KS> qg;
    SplitTile<kC> A;
    SplitTile<kC> dO;
  };
  BufX x[2];
  PlainTile<KS> w;
  float el[2][KS];
  std::uint64_t full_x[2], empty_x[2], full_w, empty_w;
  StateExchange<K> xc;  // K = 256: the peer's dvn^T partials
};
template <int K>
constexpr std::size_t kStateBwdWgSmem = sizeof(StateBwdWgSmem<K>) + 1024;
static_assert(kStateBwdWgSmem<128> <= 227 * 1024 && kStateBwdWgSmem<256> <= 227 * 1024,
              "state_bwd_wg_kernel shared memory over the sm_90 limit");

template <int K>
__global__ void __launch_bounds__(256, 1) state_bwd_wg_kernel(const Params p) {
  using wgb::Major;
  using S = StateBwdWgSmem<K>;
  using Img = ChunkImage<K>;  // one bulk copy fills {kg, qg, A}: same order and spacing as the image (K <= 128)
  constexpr int KS = StateSlice<K>::KS, CL = StateSlice<K>::CL;
  static_assert(CL > 1 ||
                    (offsetof(typename S::BufX, qg) - offsetof(typename S::BufX, kg) == offsetof(Img, qg) - offsetof(Img, kg) &&
                     offsetof(typename S::BufX, A) - offsetof(typename S::BufX, kg) == offsetof(Img, A) - offsetof(Img, kg) &&
                     offsetof(typename S::BufX, dO) - offsetof(typename S::BufX, kg) == offsetof(Img, el) - offsetof(Img, kg)),
                "StateBwdWgSmem::BufX must mirror ChunkImage's {kg, qg, A}");
  static_assert(sizeof(typename S::BufX) % 1024 == 0 && sizeof(SplitTile<KS>) % 1024 == 0 && sizeof(SplitTile<kC>) % 1024 == 0 &&
                    offsetof(S, w) % 1024 == 0,
                "SW128 tiles 1 KB aligned");
  extern __shared__ __align__(16) unsigned char bwd_wg_smem_raw[];
  S& s = *reinterpret_cast<S*>(bwd_wg_smem_raw + ((1024u - (cuda_util::smem_u32(bwd_wg_smem_raw) & 1023u)) & 1023u));
  const int tid = threadIdx.x, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  const int role = __shfl_sync(0xffffffffu, tid >> 7, 0);
  const int rank = CL > 1 ? cuda_util::cluster_rank() : 0, kc0 = KS * rank;  // the CTA's channels kc0 .. kc0 + KS
  const StateBlock blk(p, static_cast<int>(blockIdx.x) / CL);
  const int vt = blk.vt, hv = blk.hv, n = blk.n;
  const cuda_util::SeqDesc sd = p.seqs.at(n);
  const int V = p.V, vc0 = vt * kVT;
  const int nch = (sd.length + kC - 1) / kC;
  if (tid == 0) {
    for (int b = 0; b < 2; ++b) {
      cuda_util::mbar_init(&s.full_x[b], 129);  // 128 dO writers + the bulk copies' expect_tx
      cuda_util::mbar_init(&s.empty_x[b], 128);
    }
    cuda_util::mbar_init(&s.full_w, 1);  // the bulk copy's expect_tx
    cuda_util::mbar_init(&s.empty_w, 128);
    if constexpr (CL > 1) s.xc.init();
    cuda_util::mbar_init_fence();
  }
  if constexpr (CL > 1) cuda_util::cluster_sync();  // the peer's exchange barrier is initialised before any send
  else __syncthreads();

  if (role == 1) {  // ---- producer; use number i = nch - 1 - lc. kg, qg, Aqk, e^bL and w by bulk copy
    const int pt = tid - 128;  // (thread 0), dO as hi + lo by all 128
#pragma unroll 1
    for (int i = 0; i < nch; ++i) {
      const int lc = nch - 1 - i, b = i & 1;
      const i64 t0 = sd.row_begin + static_cast<i64>(lc) * kC;
      const int Cn = min(kC, sd.length - lc * kC);
      const ChunkImage<K>& img = chunk_image<K>(p, sd.chunk_off + lc, hv);
      auto& X = s.x[b];
      const WgRows<kC> pa(pt);
      float4 dv[8];
      load4_batch<8>(dv, p.d_o, p.do_t, [&](int u) {
        const int r = pa.row(u);
        return r < Cn ? ((t0 + r) * p.HV + hv) * V + vc0 + pa.c : i64{-1};
      });
      if (i >= 2) wg_wait(&s.empty_x[b], (i >> 1) - 1);  // buffer b's readers (use i - 2) are done
      if (pt == 0) {
        constexpr std::uint32_t bytes = sizeof(SplitTile<KS>) + sizeof(PlainTile<KS>) + sizeof(SplitTile<kC>);  // kg, qg, A
        cuda_util::mbar_arrive_expect_tx(&s.full_x[b], bytes + KS * 4);
        if constexpr (CL > 1) {
          copy_split_slice(X.kg, img.kg, kc0, &s.full_x[b]);
          copy_plain_slice(X.qg, img.qg, kc0, &s.full_x[b]);
          cuda_util::bulk_copy_g2s(&X.A, &img.A, sizeof(SplitTile<kC>), &s.full_x[b]);
        } else {
          cuda_util::bulk_copy_g2s(&X.kg, &img.kg, bytes, &s.full_x[b]);
        }
        cuda_util::bulk_copy_g2s(s.el[b], img.el + kc0, KS * 4, &s.full_x[b]);
      }
#pragma unroll
      for (int u = 0; u < 8; ++u) st_split4(X.dO.hi, X.dO.lo, wgb::sw128_blocked<kC>(pa.row(u), pa.c), dv[u]);
      wgb::fence_proxy_async_smem();
      cuda_util::mbar_arrive(&s.full_x[b]);
      if (pt == 0) {
        if (i >= 1) wg_wait(&s.empty_w, i - 1);
        cuda_util::mbar_arrive_expect_tx(&s.full_w, sizeof(PlainTile<KS>));
        copy_plain_slice(s.w, img.w, kc0, &s.full_w);
      }
    }
    return;
  }

  // ---- consumer (warpgroup 0)
  const int vrow = 16 * (tid >> 5) + g8;
  float dacc[KS / 2];  // D^T accumulator (m64nKS) of the CTA's channels
  const i64 sbase = ((static_cast<i64>(n) * p.HV + hv) * K + kc0) * V + vc0;
#pragma unroll
  for (int i = 0; i < KS / 2; ++i) {
    const int ch = 8 * (i >> 2) + 2 * t4 + (i & 1), v = vrow + ((i & 2) << 2);
    dacc[i] = p.dht ? load_as_float(p.dht, p.dht_t, sbase + static_cast<i64>(ch) * V + v) : 0.f;
  }
#pragma unroll 1
  for (int i = 0; i < nch; ++i) {
    const int lc = nch - 1 - i, b = i & 1;
    const i64 t0 = sd.row_begin + static_cast<i64>(lc) * kC;
    const int Cn = min(kC, sd.length - lc * kC);
    const int gidx = sd.chunk_off + lc;
    auto& X = s.x[b];
    wg_wait(&s.full_x[b], i >> 1);
    std::uint32_t ah[KS / 16][4], al[KS / 16][4];
    wg_split_frags<KS>(dacc, 1.f, ah, al);
    wg_store_frags<KS / 16>(p.dHs + ((static_cast<i64>(gidx) * p.HV + hv) * K + kc0) * V + vc0, p.plane_kv, V, KS, ah, al, 0u, vrow,
                            t4);  // dh[n]
#pragma unroll
    for (int j = 0; j < KS / 2; j += 2) {
      const float2 e = *reinterpret_cast<const float2*>(&s.el[b][8 * (j >> 2) + 2 * t4]);
      dacc[j] *= e.x;
      dacc[j + 1] *= e.y;
    }
    float vacc[32];
#pragma unroll
    for (int j = 0; j < 32; ++j) vacc[j] = 0.f;
    const std::uint32_t aoh = cuda_util::smem_u32(X.dO.hi), aol = cuda_util::smem_u32(X.dO.lo);
    const bool do_lo = p.do_t != 2;  // bf16 dO is exact in its hi plane: its lo products are zero
    const std::uint32_t aah = cuda_util::smem_u32(X.A.hi), aal = cuda_util::smem_u32(X.A.lo);
    const std::uint32_t akh = cuda_util::smem_u32(X.kg.hi), akl = cuda_util::smem_u32(X.kg.lo);
    const std::uint32_t aq = cuda_util::smem_u32(X.qg.x);  // one plane
    wgb::fence_regs<32>(vacc);
    wgb::fence_regs<KS / 2>(dacc);
    wgb::fence_regs<KS / 4>(&ah[0][0]);
    wgb::fence_regs<KS / 4>(&al[0][0]);
    cute::warpgroup_arrive();
    if (rank == 0) {  // K = 256: the channel-free term once, in rank 0's partial
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {  // dvn^T += dO^T Aqk over tokens r = 16 ks .. (16 rows = 2048 bytes)
        const std::uint32_t o = ks * 2048;
        wgb::mma_ss<wgb::M64N64_SS<Major::MN, Major::MN>, 32>(wgb::desc_mn(aoh + o, 8192), wgb::desc_mn(aah + o, 8192), vacc);
        if (do_lo)
          wgb::mma_ss<wgb::M64N64_SS<Major::MN, Major::MN>, 32>(wgb::desc_mn(aol + o, 8192), wgb::desc_mn(aah + o, 8192), vacc);
        wgb::mma_ss<wgb::M64N64_SS<Major::MN, Major::MN>, 32>(wgb::desc_mn(aoh + o, 8192), wgb::desc_mn(aal + o, 8192), vacc);
      }
    }
#pragma unroll
    for (int ks = 0; ks < KS / 16; ++ks) {  // dvn^T += D^T kg^T over channels 16 ks ..
      const std::uint32_t o = (ks >> 2) * 8192 + (ks & 3) * 32;
      wgb::mma_rs<wgb::M64N64_RS<Major::K>, 32>(ah[ks], wgb::desc_k(akh + o), vacc);
      wgb::mma_rs<wgb::M64N64_RS<Major::K>, 32>(al[ks], wgb::desc_k(akh + o), vacc);
      wgb::mma_rs<wgb::M64N64_RS<Major::K>, 32>(ah[ks], wgb::desc_k(akl + o), vacc);
    }
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {  // D^T += dO^T qg over tokens 16 ks ..
      const std::uint32_t o = ks * 2048;
      wgb::mma_ss<wgb::M64_SS<KS, Major::MN, Major::MN>, KS / 2>(wgb::desc_mn(aoh + o, 8192), wgb::desc_mn(aq + o, 8192), dacc);
      if (do_lo)
        wgb::mma_ss<wgb::M64_SS<KS, Major::MN, Major::MN>, KS / 2>(wgb::desc_mn(aol + o, 8192), wgb::desc_mn(aq + o, 8192), dacc);
    }
    cute::warpgroup_commit_batch();
    cute::warpgroup_wait<0>();
    wgb::fence_regs<32>(vacc);
    wgb::fence_regs<KS / 2>(dacc);
    wgb::fence_regs<KS / 4>(&ah[0][0]);
    wgb::fence_regs<KS / 4>(&al[0][0]);
    cuda_util::mbar_arrive(&s.empty_x[b]);
    if constexpr (CL > 1) exchange_partials(s.xc, vacc, i, rank, tid);
    // dvn -> HBM (rows < Cn); padded rows zeroed for batch 2 (they would be zero
    // only if Aqk were zero above the diagonal of its valid rows; w's padded rows are zero anyway)
    wg_zero_padded(vacc, Cn, t4);
    std::uint32_t vh[4][4], vl[4][4];
    wg_split_frags<64>(vacc, -1.f, vh, vl);  // -dvn^T: the image holds w, not -w
    if (rank == 0)
      wg_store_frags<4>(p.dvn + (t0 * p.HV + hv) * V + vc0, p.plane_tok, static_cast<i64>(p.HV) * V, Cn, vh, vl, 0x80008000u, vrow, t4);
    wg_wait(&s.full_w, i);
    const std::uint32_t aw = cuda_util::smem_u32(s.w.x);  // one plane
    wgb::fence_regs<KS / 2>(dacc);
    wgb::fence_regs<16>(&vh[0][0]);
    wgb::fence_regs<16>(&vl[0][0]);
    cute::warpgroup_arrive();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {  // D^T += (-dvn^T) w over tokens 16 ks ..
      wgb::mma_rs<wgb::M64_RS<KS, Major::MN>, KS / 2>(vh[ks], wgb::desc_mn(aw + ks * 2048, 8192), dacc);
      wgb::mma_rs<wgb::M64_RS<KS, Major::MN>, KS / 2>(vl[ks], wgb::desc_mn(aw + ks * 2048, 8192), dacc);
    }
    cute::warpgroup_commit_batch();
    cute::warpgroup_wait<0>();
    wgb::fence_regs<KS / 2>(dacc);
    wgb::fence_regs<16>(&vh[0][0]);
    wgb::fence_regs<16>(&vl[0][0]);
    cuda_util::mbar_arrive(&s.empty_w);
  }
  if (p.dh0) {
#pragma unroll
    for (int i = 0; i < KS / 2; ++i) {
      const int ch = 8 * (i >> 2) + 2 * t4 + (i & 1), v = vrow + ((i & 2) << 2);
      p.dh0[sbase + static_cast<i64>(ch) * V + v] = dacc[i];
    }
  }
  if constexpr (CL > 1) cuda_util::cluster_sync();  // the peer's last exchange is done before this CTA's memory goes
}

}  // namespace
}  // namespace lina::detail::cuda
