// chunk_kda / chunk_gdn forward on sm_90a in two kernels per call (docs/kernels/chunk_delta_fwd.md,
// "Thin workspace").
//
// 1. A prep kernel per (chunk, value head) item, fully parallel, persistent grid (as many CTAs as fit;
//    each walks items with the next item's loads in flight): the gate cumsum, the q/k norms, L and
//    Aqk, (I+L)^-1, and only what the state recurrence cannot form from the raw inputs.
//    - GDN (gdn_wg_prep_kernel, gdn_prep_wg.cuh: one warpgroup per CTA, wgmma): T' = (I+A)^-1 diag(beta)
//      and Q' in bf16 and four per-token factor rows: the scalar gate and the norms stay per-token factors.
//    - KDA (kda_prep_kernel, below): the per-channel gate must be applied to q and k here, so it writes
//      the gated tiles q e^b, k e^b, k e^(bL-b), Aqk (bf16), e^bL and T' (hi + lo).
// 2. delta_thin_state_kernel<KDA, K, VW> (chunk_delta_thin_fwd.cuh): one warpgroup per (sequence, value
//    head, 64-column V tile; two splitting the channels at K = 256; VW = 2: two V tiles of a head per CTA
//    sharing the operand tiles) walks the chunks in order with H^T in wgmma accumulators:
//    v_new = T' (v - k1 H), o = q1 H + Aqk v_new, H = e^bL H + k3^T v_new (with GDN's factors).
// Tensor-core products use mma.sync m16n8k16 bf16 -> fp32 in the KDA prep and wgmma in the GDN prep and the state kernel;
// the (I+L)^-1 block merges use mma.sync m16n8k8 tf32 (FLA's precision). Gates are kept as log2
// cumsums and only non-positive differences are exponentiated, except KDA's safe_gate diagonal
// sub-blocks, whose middle reference row bounds the factors by 2^(8*|lower_bound|*log2e) <= e^40
// (spec section 5). Beyond FLA's precision map, T' enters as two bf16 terms (x = hi + lo): its single
// bf16 rounding is what the no-decay (g = 0) cases cannot afford. Aqk and v_new enter o as one bf16 plane
// each, as in FLA (kQPlanes; nineteenth session).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "lina/chunk_delta.h"
#include "lina/error.h"
#include "ops/common/backends.h"
#include "ops/common/fast_div.h"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/launch_setup.h"
#include "ops/common/cuda/mbarrier.cuh"
#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/common/cuda/tensor_map.h"
#include "ops/common/cuda/wgmma_sm90.cuh"
#include "ops/common/cuda/workspace.h"
#include "ops/delta/cuda_launch.h"

namespace lina::detail::cuda {
namespace {

using bf16 = __nv_bfloat16;
using namespace cuda_util;

constexpr int kC = 64;         // chunk length
constexpr int kVT = 64;        // value columns per state CTA
constexpr int kThreads = 256;  // 8 warps in both kernels
constexpr float kLog2e = 1.4426950408889634f;

enum GateMode : int { kGateGiven = 0, kGateSoftplus = 1, kGateLowerBound = 2 };

// bf16 planes of the two C x C operand tiles the preps write for the state kernel. T' = (I + A)^-1 diag(beta)
// as hi + lo: one bf16 rounding of the inverse carries into every later chunk's state and costs the g = 0
// gate cases more than the tolerance allows (H200, nineteenth session, kTPlanes = 1: chunk_gdn
// B1_T1024_H2_D128_gzero o err_ratio 5.78e-3 against 5e-3, forward and backward; 5 % faster GDN forward).
// Q' (scale Aqk) as one plane, and v_new as one plane in the o product, as in FLA's precision map (spec
// section 5: Aqk, v_new in the input dtype): they enter o only, no error is carried across chunks
// (nineteenth session: 12 -> 4 wgmma per chunk and V tile for o, 8 KB less per chunk and head of workspace).
constexpr int kTPlanes = 2;
constexpr int kQPlanes = 1;
static_assert((kQPlanes == 1 || kQPlanes == 2) && (kTPlanes == 1 || kTPlanes == 2), "one plane or hi + lo");

// Per-(chunk, value head) workspace of the KDA prep; ch = global chunk * HV + hv. The bf16 tiles are
// stored in the state kernel's shared-memory layout (K / 64 SW128 tiles [C][64], `tile_off`), so each
// (chunk, head) tile is one contiguous block that the state kernel moves with one bulk copy.
struct Workspace {
  bf16* ke;   // [ch][C][K]  k e^b (normalized k)
  bf16* qg;   // [ch][C][K]  q e^b (normalized q)
  bf16* kg;   // [ch][C][K]  k e^(bL - b)
  bf16* a;    // [ch][kQPlanes][C][C] swizzled  scale * Aqk (lower incl., zero above the diagonal)
  float* el;  // [ch][K]     e^bL
};

// The per-(chunk, value head) outputs both preps share the layout of (chunk_delta_thin_fwd.cuh); GDN
// writes all three, KDA only t.
struct ThinWorkspace {
  bf16* t;    // [ch][kTPlanes][C][C] swizzled  T' = (I+A)^-1 diag(beta) as hi, lo
  bf16* a;    // [ch][kQPlanes][C][C] swizzled  Q' (lower incl., zero above the diagonal)
  float* sc;  // [ch][4][C]    per-token factors c1, c2, c3 and 2^bL (repeated)
};

struct Params {
  const bf16* q;
  const bf16* k;
  const bf16* v;
  const void* g;
  const void* beta;
  const float* A_log;    // may be null
  const float* dt_bias;  // may be null
  const float* h0;       // may be null
  float* ht;             // may be null
  bf16* o;
  SeqTable seqs;  // varlen: the sequence table; dense: computed (a dense call uploads nothing)
  int N;
  int g_f32, beta_f32;
  int H, HV, G, V, nvt;
  float scale;
  int gate_mode;
  float lower_bound;
  int beta_sigmoid;
  float beta_mult;
  int l2norm;
  int safe;  // KDA: diagonal sub-blocks through the middle reference row (needs g >= -5)
  int nitems;  // prep work items: total chunks * HV (the prep grid is persistent and strides over them)
  FastDiv fd_hv;   // item -> (global chunk, value head)
  FastDiv fd_nch;  // dense: global chunk -> (sequence, chunk in it); chunks per sequence
  FastDiv fd_g;    // value head -> q/k head (GVA group G)
  Workspace ws;
  ThinWorkspace tw;
  // GDN prep: q and k as [rows][H][K] tensor maps, boxes of 64 channels x 1 head x 64 rows (one SW128 tile each)
  CUtensorMap tm_q, tm_k;
};

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

// Where a prep work item (global chunk cg, value head hv; item = cg * HV + hv) lies in the input.
struct PrepItem {
  long t0;  // first token row
  int Cn;   // valid rows (<= C)
  int h, hv;
};

__device__ __forceinline__ PrepItem prep_item(const Params& p, int item) {
  const std::uint32_t gc = p.fd_hv.div(static_cast<std::uint32_t>(item));
  const int hv = item - static_cast<int>(gc * p.fd_hv.d);
  int2 sc;  // (sequence, chunk in it) of global chunk gc; dense: one multiply-high, no table
  if (p.seqs.table) {
    sc = p.seqs.chunk(static_cast<int>(gc), p.N);
  } else {
    const std::uint32_t n = p.fd_nch.div(gc);
    sc = make_int2(static_cast<int>(n), static_cast<int>(gc - n * p.fd_nch.d));
  }
  const SeqDesc sd = p.seqs.at(sc.x);
  return PrepItem{sd.row_begin + static_cast<long>(sc.y) * kC, min(kC, sd.length - sc.y * kC),
                  static_cast<int>(p.fd_g.div(static_cast<std::uint32_t>(hv))), hv};
}

// A persistent prep's thread index, read through volatile asm once per item: with a plain threadIdx.x
// the compiler hoists every per-thread shared-memory address of the stages out of the item loop and
// spills them (ptxas still sees a %tid.x read it can rematerialize).
__device__ __forceinline__ int item_tid() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t;
}

// Bytes of one (chunk, head) workspace tile = its shared-memory tile (bulk copy sizes: multiples of 16).
template <int K>
constexpr std::uint32_t kTileBytes = kC * K * sizeof(bf16);
// T' and Q' tiles of one (chunk, head): elements (the workspace stride per ch) and bytes
constexpr int kTTileElems = kTPlanes * kC * kC, kQTileElems = kQPlanes * kC * kC;
constexpr std::uint32_t kTTileBytes = kTTileElems * sizeof(bf16);
constexpr std::uint32_t kQTileBytes = kQTileElems * sizeof(bf16);
static_assert(kTileBytes<64> % 16 == 0 && kTileBytes<128> % 16 == 0 && kTileBytes<256> % 16 == 0 && kTTileBytes % 16 == 0 &&
                  kQTileBytes % 16 == 0,
              "bulk copies: 16-byte sizes");
static_assert(2 * kTileBytes<256> < (1u << 20) && kTileBytes<256> + kTTileBytes + kQTileBytes < (1u << 20),
              "mbarrier tx-count range");

static_assert(sizeof(PrepSmem<128>) <= 113 * 1024, "KDA K=128 prep: two CTAs per SM");
static_assert(sizeof(PrepSmem<256>) <= 227 * 1024, "KDA K=256 prep over the sm_90 limit");

// acc(16x16, two n8 tiles) += A(16x16) @ B(16x16); fp32 row-major in shared memory, pitch 68.
__device__ __forceinline__ void blk_mma_tf32(float acc[2][4], const float* A, const float* B, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) {
    const uint32_t a[4] = {to_tf32(A[g * 68 + ks * 8 + t]), to_tf32(A[(g + 8) * 68 + ks * 8 + t]),
                           to_tf32(A[g * 68 + ks * 8 + t + 4]), to_tf32(A[(g + 8) * 68 + ks * 8 + t + 4])};
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const uint32_t b0 = to_tf32(B[(ks * 8 + t) * 68 + nt * 8 + g]), b1 = to_tf32(B[(ks * 8 + t + 4) * 68 + nt * 8 + g]);
      mma_tf32_1688(acc[nt], a, b0, b1);
    }
  }
}

__device__ __forceinline__ void blk_store(float* D, const float acc[2][4], float sign, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    D[g * 68 + nt * 8 + 2 * t] = sign * acc[nt][0];
    D[g * 68 + nt * 8 + 2 * t + 1] = sign * acc[nt][1];
    D[(g + 8) * 68 + nt * 8 + 2 * t] = sign * acc[nt][2];
    D[(g + 8) * 68 + nt * 8 + 2 * t + 1] = sign * acc[nt][3];
  }
}

__device__ __forceinline__ float load_any(const void* p, long i, int is_f32) {
  return is_f32 ? static_cast<const float*>(p)[i] : __bfloat162float(static_cast<const bf16*>(p)[i]);
}
// load_any in two halves, for loads issued well ahead of their use: the bits now, the float at the use.
__device__ __forceinline__ std::uint32_t load_bits(const void* p, long i, int is_f32) {
  return is_f32 ? __float_as_uint(static_cast<const float*>(p)[i])
                : static_cast<std::uint32_t>(__bfloat16_as_ushort(static_cast<const bf16*>(p)[i]));
}
__device__ __forceinline__ float bits_to_float(std::uint32_t b, int is_f32) { return __uint_as_float(is_f32 ? b : b << 16); }

// Sum of squares of K / 2 consecutive bf16 (16-byte aligned): half a q / k row, for the l2 norms of
// the preps (two threads per row, one shuffle).
template <int K>
__device__ __forceinline__ float half_row_sumsq(const bf16* src) {
  float ss[2] = {0.f, 0.f};
#pragma unroll
  for (int c = 0; c < K / 2; c += 8) {
    const uint4 u = *reinterpret_cast<const uint4*>(src + c);
    const float2 x0 = unpack_bf16_bits(u.x), x1 = unpack_bf16_bits(u.y), x2 = unpack_bf16_bits(u.z), x3 = unpack_bf16_bits(u.w);
    ss[0] += x0.x * x0.x + x0.y * x0.y + x1.x * x1.x + x1.y * x1.y;
    ss[1] += x2.x * x2.x + x2.y * x2.y + x3.x * x3.x + x3.y * x3.y;
  }
  return ss[0] + ss[1];
}

__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : log1pf(__expf(x)); }

__device__ __forceinline__ void st_u32(void* p, uint32_t v) { *reinterpret_cast<uint32_t*>(p) = v; }

// The [C][C] workspace tiles (Aqk / Q', T') are stored with unpadded rows of R elements (R * 2 bytes, a
// multiple of 128) and the 16-byte pieces of row r XOR-permuted by r mod 8 (the pattern of TMA's
// 128-byte swizzle: the state kernel's SW128 K-major B operands): element (r, c) lives at r R + swz(r, c).
template <int R>
__device__ __forceinline__ int swz(int r, int c) {
  static_assert(R % 64 == 0, "swz: rows of whole 128-byte lines");
  return r * R + ((((c >> 3) ^ (r & 7))) << 3) + (c & 7);
}
// Element offset of (r, c) in a q e^b / k e^b / k e^(bL-b) workspace tile: K / 64 consecutive SW128
// tiles [C][64] (wgmma's canonical order: 64-column block, then row), one contiguous block per tile.
template <int K>
__device__ __forceinline__ int tile_off(int r, int c) {
  return wgmma::sw128_blocked<kC>(r, c);
}

// The inverse of the chunk's unit lower-triangular I + L (fp32 [C][68] tiles) in 16 x 16 blocks, in
// stages the preps interleave with their own work (both preps run them the same way).
// Warp w < 4, lanes 0-15: diagonal block w of (I + L)^-1 by forward substitution in fp32 (lane c solves
// column c), written to D; D may be L itself (every lane reads the block before any writes).
__device__ __forceinline__ void invert_diagonal_block(const float (*L)[68], float (*D)[68], int warp, int lane) {
  float xs[16];
  const int c = lane & 15, o16 = 16 * warp;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    float acc = (i == c) ? 1.f : 0.f;
#pragma unroll
    for (int j = 0; j < i; ++j) acc -= L[o16 + i][o16 + j] * xs[j];
    xs[i] = acc;
  }
  __syncwarp();  // every lane has read the block
  if (lane < 16) {
#pragma unroll
    for (int i = 0; i < 16; ++i) D[o16 + i][o16 + c] = xs[i];
  }
}
// Every thread of the CTA (warps 0-3 work; three CTA barriers inside): X's strictly lower blocks from its inverted
// diagonal blocks (tf32 mma.sync) in two levels of the 2 x 2 block inverse: (a) X_10 = -X_11 L_10 X_00 and
// X_32 = -X_33 L_32 X_22 (warps 0, 1); (b) Z = L_[23][01] X_[01][01], block (i, j) on warp 2 (i - 2) + j; (c)
// X_[23][01] = -X_[23][23] Z; X's upper blocks hold the scratch. Six dependent 16 x 16 x 16 products on the longest
// path and all four warps busy in (b) and (c). (Until the sixteenth session: one block diagonal d per round on warps
// d..3, nine on the longest path; the GDN prep on one warpgroup 0.318 -> 0.274 ms at B1_T8192_H96_D128 with this and
// its scalar prefetch, the KDA prep unchanged within noise. Splitting the blocks' n8 halves over eight warps measured
// 1-1.5 % slower in the ninth session: the rounds are bound by dependent shared-memory loads.)
__device__ __forceinline__ void merge_inverse_blocks(const float (*L)[68], float (*X)[68], int warp, int lane) {
  if (warp < 2) {
    const int i = 2 * warp + 1, j = 2 * warp;
    float acc[2][4] = {};
    blk_mma_tf32(acc, &L[16 * i][16 * j], &X[16 * j][16 * j], lane);
    blk_store(&X[16 * j][16 * i], acc, 1.f, lane);  // scratch: the upper block (j, i)
    __syncwarp();
    float acc2[2][4] = {};
    blk_mma_tf32(acc2, &X[16 * i][16 * i], &X[16 * j][16 * i], lane);
    blk_store(&X[16 * i][16 * j], acc2, -1.f, lane);
  }
  __syncthreads();
  const int i = 2 + (warp >> 1), j = warp & 1;
  if (warp < 4) {  // Z_ij = sum_{m = j}^{1} L_im X_mj into the upper block (j, i)
    float acc[2][4] = {};
    for (int m = j; m < 2; ++m) blk_mma_tf32(acc, &L[16 * i][16 * m], &X[16 * m][16 * j], lane);
    blk_store(&X[16 * j][16 * i], acc, 1.f, lane);
  }
  __syncthreads();
  if (warp < 4) {  // X_ij = -sum_{n = 2}^{i} X_in Z_nj
    float acc[2][4] = {};
    for (int n = 2; n <= i; ++n) blk_mma_tf32(acc, &X[16 * i][16 * n], &X[16 * j][16 * n], lane);
    blk_store(&X[16 * i][16 * j], acc, -1.f, lane);
  }
  __syncthreads();
}
// Two consecutive values at element offset off of a [NP][C][C] tile: bf16 (NP = 1) or bf16 hi and lo planes
// (NP = 2, x = hi + lo), 4 bytes per plane.
template <int NP>
__device__ __forceinline__ void st_bf16x2_planes(bf16* tile, int off, float x0, float x1) {
  if constexpr (NP == 2) {
    uint32_t hi, lo;
    pack_bf16_split(x0, x1, hi, lo);
    st_u32(tile + off, hi);
    st_u32(tile + kC * kC + off, lo);
  } else {
    st_u32(tile + off, pack_bf16(x0, x1));
  }
}
// Every thread of the CTA: T' = X diag(beta) (lower incl., zero above) as bf16 hi + lo into the
// swizzled [kTPlanes][C][C] workspace tile Tg. One bf16 rounding of the inverse costs the g = 0 cases more
// than the tolerance allows.
template <int NT = kThreads>
__device__ __forceinline__ void store_t_prime(const float (*X)[68], const float* beta, bf16* Tg, int tid) {
  constexpr int PR = NT / (kC / 2);  // rows per pass (8 with 256 threads)
  const unsigned u = static_cast<unsigned>(tid);
  const int j = static_cast<int>(u % (kC / 2)) * 2, r1 = static_cast<int>(u / (kC / 2));
  const float bj0 = beta[j], bj1 = beta[j + 1];
#pragma unroll
  for (int it = 0; it < kC / PR; ++it) {
    const int r = r1 + it * PR;
    const float2 x = *reinterpret_cast<const float2*>(&X[r][j]);  // j even, rows of 272 bytes: 8-byte aligned
    float tu[2];
    tu[0] = (j <= r) ? x.x * bj0 : 0.f;
    tu[1] = (j + 1 <= r) ? x.y * bj1 : 0.f;
    st_bf16x2_planes<kTPlanes>(Tg, swz<kC>(r, j), tu[0], tu[1]);
  }
}

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
      if (own) {
#pragma unroll
        for (int r = 0; r < R; ++r) s.b2[r0 + r][c] = gv[r] + off;
        if (seg == NS - 1) s.bL[c] = cum + off;  // padded rows add 0, so this is b2 of row Cn-1
      }
      __syncthreads();
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
      // Per-channel gates: operands are pre-scaled through a reference row (spec section 5). Jobs:
      // the off-diagonal blocks of row block ib (reference = its first row, all factors <= 1) or its
      // diagonal block (middle row with safe_gate, else exact exps). The job table balances the
      // exps over the 4 SM sub-partitions (warps w and w+4 share one). Row block 3's six
      // off-diagonal column tiles are split over warps 0 and 4 (3 each), and with safe_gate row block 2's
      // tile 3 goes to its diagonal warp (move3 below), so the longest warp has 3 tiles, not 6. Warp: ib,
      // diagonal?, its n8 column tiles nt = ntb + i, i < nj (contiguous in every job: 0-2, 0-3, 0-1, 4-5,
      // 3-5, 0-1, 2-3, 6-7 for warps 0-7; with safe_gate warp 1 0-2 and warp 3 3-5).
      const int ib = static_cast<int>((0x31032123u >> (4 * warp)) & 0xFu);
      const bool dia = ((0xE8u >> warp) & 1u) != 0u;
      const bool diag_mma = p.safe != 0;
      // With safe_gate, row block 2's tile 3 moves from warp 1 to warp 3 (its diagonal block: middle reference
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

#include "ops/delta/cuda/chunk_delta_thin_fwd.cuh"
#include "ops/delta/cuda/gdn_prep_wg.cuh"

[[noreturn]] void cuda_fail(const char* what, cudaError_t e) {
  throw Error(ErrorCode::runtime, "", std::string("chunk_delta cuda: ") + what + ": " + cudaGetErrorString(e));
}

size_t align256(size_t x) { return (x + 255) & ~static_cast<size_t>(255); }

// Launches `kern` with `smem` bytes of dynamic shared memory, its attribute set once per device
// (launch_setup) for the kernel that actually runs.
void launch_smem(void (*kern)(Params), std::size_t grid, int threads, std::size_t smem, const Params& prm, cudaStream_t st,
                 const char* name) {
  set_max_dynamic_smem(kern, static_cast<int>(smem), name);
  kern<<<static_cast<unsigned>(grid), threads, smem, st>>>(prm);
}

// A prep launch: a persistent grid of as many CTAs as fit at once, each striding over the (chunk, value
// head) items.
void launch_prep(void (*kern)(Params), std::size_t smem, std::size_t items, int sms, const Params& prm, cudaStream_t st,
                 const char* name, int threads = kThreads) {
  set_max_dynamic_smem(kern, static_cast<int>(smem), name);  // before the occupancy query
  const int per_sm = std::max(1, max_active_blocks(kern, threads, smem, name));
  const std::size_t grid = std::min(items, static_cast<std::size_t>(per_sm) * static_cast<std::size_t>(sms > 0 ? sms : 1));
  launch_smem(kern, grid, threads, smem, prm, st, name);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) cuda_fail("prep kernel launch", e);
}

// One forward call: the sequence table (varlen only), the workspace from lina's pool (kept mapped
// between calls), the prep over every (chunk, value head), then the state kernel over every (sequence,
// value head, 64-column V tile); also with no chunks at all (ht = h0). Each workspace array starts
// 256-byte aligned, so every tile is 16-byte aligned for the bulk copies.
//   GDN: T' (kTTileBytes), Q' (kQTileBytes) and the four factor rows per chunk and head (25 KB at any K, V).
//   KDA: k e^b, q e^b, k e^(bL-b) (kTileBytes<K> each), Aqk (kQTileBytes), T' (kTTileBytes), e^bL (72.5 KB at K = 128).
// Returns the state kernel's V tiles per CTA (VW).
template <bool KDA, int K>
int run(Params prm, const Problem& p, cudaStream_t st, GdnPrep prep) {
  const int sms = sm_count();
  const DeviceSeqs seqs = upload_sequences(p, st);  // dense: no table
  prm.seqs = seqs.view;
  prm.N = static_cast<int>(p.N);
  prm.fd_nch = FastDiv(static_cast<std::uint32_t>((seqs.view.uniform_len + kC - 1) / kC));
  const size_t nch = static_cast<size_t>(seqs.total_chunks) * p.HV;
  unsigned char* ws = nullptr;
  if (nch > 0) {
    if (nch > static_cast<size_t>(INT32_MAX)) throw_unsupported("q", "more than 2^31 chunk-heads", "fewer chunk-heads");
    prm.nitems = static_cast<int>(nch);
    const size_t b_t = align256(nch * kTTileBytes), b_a = align256(nch * kQTileBytes);
    if constexpr (KDA) {
      const size_t b_ck = align256(nch * kTileBytes<K>), b_el = align256(nch * K * sizeof(float));
      ws = static_cast<unsigned char*>(workspace_alloc(3 * b_ck + b_a + b_el + b_t, st, "delta fwd workspace"));
      prm.ws = {reinterpret_cast<bf16*>(ws), reinterpret_cast<bf16*>(ws + b_ck), reinterpret_cast<bf16*>(ws + 2 * b_ck),
                reinterpret_cast<bf16*>(ws + 3 * b_ck), reinterpret_cast<float*>(ws + 3 * b_ck + b_a)};
      prm.tw = {reinterpret_cast<bf16*>(ws + 3 * b_ck + b_a + b_el), nullptr, nullptr};
      launch_prep(kda_prep_kernel<K>, sizeof(PrepSmem<K>), nch, sms, prm, st, "kda_prep_kernel");
    } else {
      if constexpr (K >= 128) {  // the prep takes q / k by TMA boxes there (gdn_prep_wg.cuh); the maps are encoded before
        // the workspace is taken (a refusal leaves nothing allocated), and a box's row coordinate is an int
        const std::int64_t rows = p.B * p.T;
        if (rows > INT32_MAX)
          throw_unsupported("q", std::to_string(rows) + " token rows on the GDN forward's TMA path", "at most 2^31 - 1 rows");
        prm.tm_q = tensor_map_bf16_rows_heads_cols(prm.q, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(p.H),
                                                   static_cast<std::uint64_t>(K), 64, kC, "q");
        prm.tm_k = tensor_map_bf16_rows_heads_cols(prm.k, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(p.H),
                                                   static_cast<std::uint64_t>(K), 64, kC, "k");
      }
      const size_t b_sc = align256(nch * 4 * kC * sizeof(float));
      ws = static_cast<unsigned char*>(workspace_alloc(b_t + b_a + b_sc, st, "delta fwd workspace"));
      prm.tw = {reinterpret_cast<bf16*>(ws), reinterpret_cast<bf16*>(ws + b_t), reinterpret_cast<float*>(ws + b_t + b_a)};
      // One warpgroup per CTA, wgmma q k^T / k k^T (gdn_prep_wg.cuh; sixteenth session): H200 B1_T8192_H96_D128 prep
      // 0.364 -> 0.318 ms against the 8-warp mma.sync gdn_thin_prep_kernel it replaced, whole forward 0.766 -> 0.720.
      // q / k reach it as TMA boxes (seventeenth session): prep 0.270 -> 0.243 ms at the same shape
      bool sequential = false;
      if constexpr (K == 128) {
        sequential = prep == GdnPrep::per_sequence;
        if (sequential) {
          launch_smem(gdn_wg_prep_kernel<K, true>, static_cast<std::size_t>(p.N * p.HV), kWgThreads, kWgPrepSmemBytes<K>,
                      prm, st, "gdn_wg_prep_kernel seq");
          cudaError_t e = cudaGetLastError();
          if (e != cudaSuccess) cuda_fail("prep kernel launch", e);
        }
      }
      if (!sequential)
        launch_prep(gdn_wg_prep_kernel<K, false>, kWgPrepSmemBytes<K>, nch, sms, prm, st, "gdn_wg_prep_kernel", kWgThreads);
    }
  }
  // KDA: V-tile pairs (one read of the chunk's 72.5 KB of operand tiles per head instead of one per V tile)
  // where the one-tile grid would put two CTAs on an SM anyway; a grid within one SM each keeps one tile per
  // CTA (the pair would halve the SMs that run the latency-bound chains). H200, B1_T8192_H96_D128: KDA
  // forward 1.214 -> 1.179 ms, B4_T4096_H64 1.483 -> 1.467; GDN's pairs (raw q / k and 33 KB per head) were
  // 0.5-2 % slower, so GDN keeps one tile per CTA (docs/kernels/chunk_delta_fwd.md, "Fourteenth session").
  const long tiles = p.N * p.HV * prm.nvt;
  const int vw = KDA && K <= 128 && prm.nvt % 2 == 0 && tiles > sms ? 2 : 1;
  if (tiles > 0) {
    if constexpr (KDA && K <= 128) {
      if (vw == 2)
        launch_smem(delta_thin_state_kernel<KDA, K, 2>, static_cast<std::size_t>(tiles / 2), kThinStateThreads<K, 2>,
                    kThinStateSmemBytes<KDA, K, 2>, prm, st, "delta_thin_state_kernel");
    }
    if (vw == 1)
      launch_smem(delta_thin_state_kernel<KDA, K, 1>, static_cast<std::size_t>(tiles), kThinStateThreads<K, 1>,
                  kThinStateSmemBytes<KDA, K, 1>, prm, st, "delta_thin_state_kernel");
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) cuda_fail("state kernel launch", e);
  }
  workspace_free(ws, st, "delta fwd workspace");
  workspace_free(seqs.ptr, st, "delta fwd sequence table");
  return vw;
}

// The kernels that ran, as RunInfo names them: the prep, then the state kernel <op, K, V tiles per CTA>.
template <bool KDA>
std::vector<std::string> dispatch(const Params& prm, const Problem& p, cudaStream_t st, GdnPrep prep) {
  int vw = 1;
  switch (p.K) {
    case 64: vw = run<KDA, 64>(prm, p, st, prep); break;
    case 128: vw = run<KDA, 128>(prm, p, st, prep); break;
    default: vw = run<KDA, 256>(prm, p, st, prep); break;
  }
  const std::string args = std::string(KDA ? "kda," : "gdn,") + std::to_string(p.K);
  return {std::string(KDA ? "lina::kda_prep_kernel<" : "lina::gdn_wg_prep_kernel<") + std::to_string(p.K) + ">",
          "lina::delta_thin_state_kernel<" + args + "," + std::to_string(vw) + ">"};
}

void require_dtype(const char* name, const TensorView& t, std::initializer_list<DType> ok, const char* expected) {
  for (DType d : ok)
    if (t.dtype == d) return;
  throw_unsupported(name, std::string("dtype ") + std::string(dtype_name(t.dtype)) + " on the cuda backend", expected);
}

Params common_params(const Problem& p, const DeltaRuleArgs& a, const AttentionOutputs& out, const char* op) {
  if (p.K != 64 && p.K != 128 && p.K != 256)
    throw_unsupported("q", std::string("head dim K = ") + std::to_string(p.K) + " for cuda " + op, "K in {64, 128, 256}");
  if (p.V % kVT != 0 || p.V > 256)
    throw_unsupported("v", std::string("head dim V = ") + std::to_string(p.V) + " for cuda " + op, "V in {64, 128, 192, 256}");
  require_dtype("q", a.q, {DType::bf16}, "bfloat16");
  require_dtype("k", a.k, {DType::bf16}, "bfloat16");
  require_dtype("v", a.v, {DType::bf16}, "bfloat16");
  require_dtype("g", a.g, {DType::bf16, DType::f32}, "bfloat16 or float32");
  require_dtype("beta", a.beta, {DType::bf16, DType::f32}, "bfloat16 or float32");
  if (a.A_log) require_dtype("A_log", *a.A_log, {DType::f32}, "float32");
  if (a.dt_bias) require_dtype("dt_bias", *a.dt_bias, {DType::f32}, "float32");
  if (a.initial_state) require_dtype("initial_state", *a.initial_state, {DType::f32}, "float32");
  for (const auto& [name, tv] : {NamedTensor{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"g", &a.g}, {"beta", &a.beta}, {"o", &out.o}})
    if (!tv->is_contiguous()) throw_unsupported(name, "a non-contiguous tensor", "contiguous tensors");
  // q, k, v, g by 16-byte cp.async, o by 16-byte stores, the final state by 8-byte stores
  require_aligned16({{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"g", &a.g}, {"o", &out.o},
                     {"final_state", out.final_state ? &*out.final_state : nullptr}},
                    std::string(" (the CUDA ") + op + " forward)");
  Params prm{};
  prm.q = a.q.ptr<const bf16>();
  prm.k = a.k.ptr<const bf16>();
  prm.v = a.v.ptr<const bf16>();
  prm.g = a.g.data;
  prm.g_f32 = a.g.dtype == DType::f32;
  prm.beta = a.beta.data;
  prm.beta_f32 = a.beta.dtype == DType::f32;
  prm.A_log = a.A_log ? a.A_log->ptr<const float>() : nullptr;
  prm.dt_bias = a.dt_bias ? a.dt_bias->ptr<const float>() : nullptr;
  prm.h0 = a.initial_state ? a.initial_state->ptr<const float>() : nullptr;
  prm.ht = out.final_state ? out.final_state->ptr<float>() : nullptr;
  prm.o = out.o.ptr<bf16>();
  prm.H = static_cast<int>(p.H);
  prm.HV = static_cast<int>(p.HV);
  prm.fd_hv = FastDiv(static_cast<std::uint32_t>(p.HV));
  prm.G = static_cast<int>(p.group());
  prm.fd_g = FastDiv(static_cast<std::uint32_t>(p.group()));
  prm.V = static_cast<int>(p.V);
  prm.nvt = static_cast<int>(p.V / kVT);
  prm.scale = static_cast<float>(p.scale);
  prm.beta_sigmoid = a.use_beta_sigmoid_in_kernel;
  prm.beta_mult = a.allow_neg_eigval ? 2.f : 1.f;
  prm.l2norm = a.use_qk_l2norm_in_kernel;
  return prm;
}

}  // namespace

RunInfo kda_forward(const Problem& p, const ChunkKdaArgs& a, const AttentionOutputs& out, const ExecOptions& opts) {
  Params prm = common_params(p, a, out, "chunk_kda");
  prm.gate_mode = kGateGiven;
  if (a.use_gate_in_kernel) prm.gate_mode = a.lower_bound ? kGateLowerBound : kGateSoftplus;
  prm.lower_bound = a.lower_bound ? static_cast<float>(*a.lower_bound) : 0.f;
  // The middle-reference diagonal needs every g >= -5 (exp(8*5) fits fp32 easily); safe_gate promises it.
  prm.safe = a.safe_gate && a.lower_bound && *a.lower_bound >= -5.0;
  return RunInfo{"cuda", dispatch<true>(prm, p, static_cast<cudaStream_t>(opts.stream), GdnPrep::persistent)};
}

RunInfo gdn_forward(const Problem& p, const ChunkGdnArgs& a, const AttentionOutputs& out, const ExecOptions& opts,
                    GdnPrep prep) {
  Params prm = common_params(p, a, out, "chunk_gdn");
  prm.gate_mode = a.use_gate_in_kernel ? kGateSoftplus : kGateGiven;
  prm.lower_bound = 0.f;
  prm.safe = 0;
  return RunInfo{"cuda", dispatch<false>(prm, p, static_cast<cudaStream_t>(opts.stream), prep)};
}

}  // namespace lina::detail::cuda
