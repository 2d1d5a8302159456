// chunk_gla backward (docs/kernels/chunk_gla_bwd.md), docs/math.md section 4.1. Three kernels, every tile
// 64 x 64 so one code path serves K, V in {64, 128, 256} (no templates):
//   1. states  one CTA per (sequence, head, 64x64 state tile, direction) walks the chunks and
//              writes the state entering each chunk, H_n (forward), or the gradient of the state
//              leaving it, dh[n] (reverse), in bf16 to a workspace; the reverse one writes dh0.
//   2. dqkg    one CTA per (chunk, head, 64-channel K tile): dA, dq, dk, dg for its channels.
//   3. dv      one CTA per (chunk, head, 64-column V tile): A^T and dv.
// Gates are in log2 units (b = chunk-local cumsum of g * log2 e), exponentials via ex2.
//
// Exponent safety (docs/math.md section 5). Inter-chunk factors 2^b, 2^(bL - b), 2^bL are <= 1. The
// intra-chunk factor 2^(b_r - b_j) (r >= j) is split with a per-channel reference
// rho = (b_0 + b_63) / 2 as (x_r 2^(b_r - rho)) . (y_j 2^(rho - b_j)); every factor lies in
// [2^-span/2, 2^span/2], span = b_0 - b_63, so while span <= kMaxSpan (200) operands stay far inside
// the bf16 / fp32 range and the tensor-core path is used. A tile whose channels decay faster
// ("steep") computes the intra terms element by element with the exact exponent. Masking is a
// select, never a multiply. Padded rows (past a sequence's end) load zeros and g = 0.
#include <cuda_bf16.h>

#include <cstdint>
#include <utility>

#include "lina/error.h"
#include "ops/common/backends.h"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/launch_setup.h"
#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/common/cuda/workspace.h"

namespace lina::detail::cuda {
namespace {

using namespace cuda_util;
using bf16 = __nv_bfloat16;

constexpr int kC = 64;                 // chunk (tokens) = tile width (channels)
constexpr int kS = 72;                 // bf16 row stride in shared memory (conflict-free ldmatrix)
constexpr int kSf = 68;                // fp32 row stride
constexpr int kThreads = 128;          // 4 warps; warp w owns rows [16 w, 16 w + 16) of its tiles
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kGateFloor = -127.f;   // log2 units: a gate below it decays to 0 anyway (ex2 ftz)
constexpr float kMaxSpan = 200.f;      // log2 units: factors within 2^+-100
constexpr int kTileBytes = kC * kS * 2;
constexpr int kTileFBytes = kC * kSf * 4;

struct Params {
  const bf16 *q, *k, *v, *g, *dO;
  const float *h0, *dht;
  bf16 *dq, *dk, *dv, *dg;
  float* dh0;
  bf16 *Hs, *dHs;            // workspace [total_chunks, H, K, V]
  SeqTable seqs;
  int H, K, V, N;
  float scale;
};

__device__ __forceinline__ float bf(const bf16 x) { return __bfloat162float(x); }

// 64 rows x 64 columns of a token-major tensor [rows, H, width] into a padded tile; rows >= cn
// are zero-filled.
__device__ __forceinline__ void load_tok_tile(bf16* dst, const bf16* src, std::int64_t row0, int cn, int H, int h, int width,
                                              int col0, int tid) {
  for (int i = tid; i < kC * 8; i += kThreads) {
    const int r = i >> 3, c = (i & 7) * 8;
    const bool ok = r < cn;
    const std::int64_t off = ok ? ((row0 + r) * H + h) * width + col0 + c : 0;
    cp_async16(dst + r * kS + c, src + off, ok);
  }
}

// 64 x 64 block of a row-major matrix (leading dimension ld).
__device__ __forceinline__ void load_mat_tile(bf16* dst, const bf16* src, int ld, int tid) {
  for (int i = tid; i < kC * 8; i += kThreads) {
    const int r = i >> 3, c = (i & 7) * 8;
    cp_async16(dst + r * kS + c, src + static_cast<std::int64_t>(r) * ld + c, true);
  }
}

// Chunk-local inclusive cumsum of g in log2 units for the 64 channels of a tile, all 128 threads:
// thread (c = tid & 63, half = tid >> 6) scans rows [32 half, 32 half + 32) in registers, then the
// upper half adds the lower half's total (xchg: 64 floats). Padded rows hold g = 0, so b_63 = bL.
// The caller syncs before reading sb.
__device__ __forceinline__ void cumsum_tile(float* sb, const bf16* sg, float* xchg, int tid) {
  const int c = tid & 63, hf = tid >> 6;
  float v[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const float x = bf(sg[(32 * hf + i) * kS + c]) * kLog2e;
    v[i] = x < kGateFloor ? kGateFloor : x;  // NaN passes through
  }
#pragma unroll
  for (int i = 1; i < 32; ++i) v[i] += v[i - 1];
  if (hf == 0) xchg[c] = v[31];
  __syncthreads();
  const float base = hf ? xchg[c] : 0.f;
#pragma unroll
  for (int i = 0; i < 32; ++i) sb[(32 * hf + i) * kSf + c] = base + v[i];
}

// True when some channel of the tile decays by more than kMaxSpan across the chunk (after a sync).
__device__ __forceinline__ bool tile_is_steep(const float* sb, int tid) {
  return __syncthreads_or(tid < kC && !(sb[tid] - sb[(kC - 1) * kSf + tid] <= kMaxSpan));
}

// Split x into bf16 hi + lo (hi + lo carries ~16 mantissa bits): the intra-chunk dq / dk terms
// cancel in db = q dq - k dk, so their gated operands need more than bf16 (docs/math.md section 5).
__device__ __forceinline__ void split_bf16(float x0, float x1, std::uint32_t& hi, std::uint32_t& lo) {
  hi = pack_bf16(x0, x1);
  const float2 h = unpack_bf16(hi);
  lo = pack_bf16(x0 - h.x, x1 - h.y);
}

// A fragment (16 x 16) from a row-major [m][k] bf16 tile.
__device__ __forceinline__ void ldsm_a(std::uint32_t (&a)[4], const bf16* base, int m0, int k0, int lane) {
  ldsm_x4(a, base + (m0 + (lane & 15)) * kS + k0 + (lane >> 4) * 8);
}
// A fragment (16 x 16) from a tile stored transposed, [k][m] row-major.
__device__ __forceinline__ void ldsm_a_trans(std::uint32_t (&a)[4], const bf16* base, int m0, int k0, int lane) {
  const int mi = lane >> 3, i = lane & 7;
  ldsm_x4_trans(a, base + (k0 + i + (mi >> 1) * 8) * kS + m0 + (mi & 1) * 8);
}
// B fragments of two n8 tiles (n0, n0 + 8) from a tile stored [n][k] row-major: r[0..1] tile n0, r[2..3] tile n0 + 8.
__device__ __forceinline__ void ldsm_b_nk(std::uint32_t (&b)[4], const bf16* base, int n0, int k0, int lane) {
  ldsm_x4(b, base + (n0 + (lane & 7) + ((lane >> 4) << 3)) * kS + k0 + ((lane >> 3) & 1) * 8);
}
// B fragments of two n8 tiles from a tile stored [k][n] row-major.
__device__ __forceinline__ void ldsm_b_kn(std::uint32_t (&b)[4], const bf16* base, int n0, int k0, int lane) {
  const int mi = lane >> 3, i = lane & 7;
  ldsm_x4_trans(b, base + (k0 + i + (mi & 1) * 8) * kS + n0 + (mi >> 1) * 8);
}

// acc (a warp's 16 x 64 row, 8 n8 fragments) += a (16 x 16) @ B[k0 .. k0+16, 0 .. 64], B stored [k][n].
__device__ __forceinline__ void mma_row_kn(float (&acc)[8][4], const std::uint32_t (&a)[4], const bf16* b_kn, int k0, int lane) {
#pragma unroll
  for (int np = 0; np < 4; ++np) {
    std::uint32_t b[4];
    ldsm_b_kn(b, b_kn, np * 16, k0, lane);
    mma_bf16_16816(acc[2 * np], a, b[0], b[1]);
    mma_bf16_16816(acc[2 * np + 1], a, b[2], b[3]);
  }
}
// The same with B as two bf16 terms (hi + lo, for operands one bf16 rounding would spoil).
__device__ __forceinline__ void mma_row_kn_hi_lo(float (&acc)[8][4], const std::uint32_t (&a)[4], const bf16* b_hi, const bf16* b_lo,
                                                 int k0, int lane) {
#pragma unroll
  for (int np = 0; np < 4; ++np) {
    std::uint32_t b[4];
    ldsm_b_kn(b, b_hi, np * 16, k0, lane);
    mma_bf16_16816(acc[2 * np], a, b[0], b[1]);
    mma_bf16_16816(acc[2 * np + 1], a, b[2], b[3]);
    ldsm_b_kn(b, b_lo, np * 16, k0, lane);
    mma_bf16_16816(acc[2 * np], a, b[0], b[1]);
    mma_bf16_16816(acc[2 * np + 1], a, b[2], b[3]);
  }
}

template <int N>
__device__ __forceinline__ void zero(float (&acc)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
}

// ---------------------------------------------------------------------------------------------
// 1. States. blockIdx.x = ((vt * KT) + kt) * 2 + dir; dir 0: H_n forward, dir 1: dh[n] reverse.
//    S[c, v] (64 x 64 tile) in MMA accumulators, warp w rows [16 w, 16 w + 16).
//    forward: S = diag(2^bL) S + (k 2^(bL - b))^T v;  reverse: S = diag(2^bL) S + (scale q 2^b)^T dO.
__global__ void __launch_bounds__(kThreads) gla_bwd_states(Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* stage0 = reinterpret_cast<bf16*>(smem);  // 2 stages x {x, g, y}

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  const int KT = p.K / kC;
  const int dir = blockIdx.x & 1, tile = blockIdx.x >> 1, kt = tile % KT, vt = tile / KT;
  const int h = blockIdx.y, n = blockIdx.z;
  const SeqDesc s = p.seqs.at(n);
  const int nt_chunks = (s.length + kC - 1) / kC;
  const std::int64_t KV = static_cast<std::int64_t>(p.K) * p.V;
  const int r_lo = warp * 16 + g8, r_hi = r_lo + 8;  // state rows within the tile
  const std::int64_t st_off = static_cast<std::int64_t>(kt * kC) * p.V + vt * kC;  // tile corner in [K, V]

  const float* init = dir ? p.dht : p.h0;
  float acc[8][4];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = e >= 2 ? r_hi : r_lo, c = nt * 8 + 2 * t4 + (e & 1);
      acc[nt][e] = init ? init[(static_cast<std::int64_t>(n) * p.H + h) * KV + st_off + static_cast<std::int64_t>(r) * p.V + c] : 0.f;
    }

  const bf16* xs = dir ? p.q : p.k;
  const bf16* ys = dir ? p.dO : p.v;
  auto issue = [&](int it, int st) {
    const int ch = dir ? nt_chunks - 1 - it : it;
    const int t0 = ch * kC, cn = min(kC, s.length - t0);
    bf16* base = stage0 + st * 3 * kC * kS;
    load_tok_tile(base, xs, s.row_begin + t0, cn, p.H, h, p.K, kt * kC, tid);
    load_tok_tile(base + kC * kS, p.g, s.row_begin + t0, cn, p.H, h, p.K, kt * kC, tid);
    load_tok_tile(base + 2 * kC * kS, ys, s.row_begin + t0, cn, p.H, h, p.V, vt * kC, tid);
  };
  if (nt_chunks > 0) issue(0, 0);
  cp_async_commit();

  bf16* out = dir ? p.dHs : p.Hs;
  for (int it = 0; it < nt_chunks; ++it) {
    const int ch = dir ? nt_chunks - 1 - it : it;
    // The state entering (forward) / the gradient leaving (reverse) chunk ch.
    {
      bf16* o = out + (static_cast<std::int64_t>(s.chunk_off + ch) * p.H + h) * KV + st_off;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int c = nt * 8 + 2 * t4;
        *reinterpret_cast<std::uint32_t*>(o + static_cast<std::int64_t>(r_lo) * p.V + c) = pack_bf16(acc[nt][0], acc[nt][1]);
        *reinterpret_cast<std::uint32_t*>(o + static_cast<std::int64_t>(r_hi) * p.V + c) = pack_bf16(acc[nt][2], acc[nt][3]);
      }
    }
    if (it + 1 < nt_chunks) issue(it + 1, (it + 1) & 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const bf16* sx = stage0 + (it & 1) * 3 * kC * kS;
    const bf16* sg = sx + kC * kS;
    const bf16* sy = sg + kC * kS;
    // Gate cumsum without shared memory: the quad of lanes with the same g8 holds all 64 tokens
    // of channels r_lo and r_hi in its A fragments (lane t4: tokens 16 ks + 2 t4 + {0, 1, 8, 9}),
    // so each channel is scanned with quad shuffles. bv[ch][ks][i]: b at the fragment's tokens.
    float bv[2][4][4];
    float bLc[2];
#pragma unroll
    for (int ch2 = 0; ch2 < 2; ++ch2) {
      const int c = ch2 ? r_hi : r_lo;
      float carry = 0.f;
#pragma unroll
      for (int ks = 0; ks < kC / 16; ++ks) {
        const int t = ks * 16 + 2 * t4;
        float gv[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float x = bf(sg[(t + (i & 1) + (i >> 1) * 8) * kS + c]) * kLog2e;
          gv[i] = x < kGateFloor ? kGateFloor : x;  // NaN passes through
        }
        float sA = gv[0] + gv[1], sB = gv[2] + gv[3];
        float iA = sA, iB = sB;  // inclusive scans over the quad (tokens ascending with t4)
#pragma unroll
        for (int d = 1; d < 4; d <<= 1) {
          const float yA = __shfl_up_sync(0xffffffffu, iA, d, 4), yB = __shfl_up_sync(0xffffffffu, iB, d, 4);
          if (t4 >= d) {
            iA += yA;
            iB += yB;
          }
        }
        float eA = __shfl_up_sync(0xffffffffu, iA, 1, 4), eB = __shfl_up_sync(0xffffffffu, iB, 1, 4);
        if (t4 == 0) eA = eB = 0.f;
        const float tA = __shfl_sync(0xffffffffu, iA, 3, 4), tB = __shfl_sync(0xffffffffu, iB, 3, 4);
        const float cA = carry + eA, carry8 = carry + tA, cB = carry8 + eB;
        bv[ch2][ks][0] = cA + gv[0];
        bv[ch2][ks][1] = cA + sA;
        bv[ch2][ks][2] = cB + gv[2];
        bv[ch2][ks][3] = cB + sB;
        carry = carry8 + tB;
      }
      bLc[ch2] = carry;  // padded tokens hold g = 0, so this is bL
    }

    const float d_lo = ex2(bLc[0]), d_hi = ex2(bLc[1]);
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      acc[nt][0] *= d_lo;
      acc[nt][1] *= d_lo;
      acc[nt][2] *= d_hi;
      acc[nt][3] *= d_hi;
    }
    // A operand [channel c][token t] = x[t][c] * (dir ? scale 2^b : 2^(bL - b)).
    auto xe = [&](int t, int ch2, float b) {
      const int c = ch2 ? r_hi : r_lo;
      return dir ? p.scale * bf(sx[t * kS + c]) * ex2(b) : bf(sx[t * kS + c]) * ex2(bLc[ch2] - b);
    };
#pragma unroll
    for (int ks = 0; ks < kC / 16; ++ks) {
      const int t = ks * 16 + 2 * t4;
      std::uint32_t a[4];
      a[0] = pack_bf16(xe(t, 0, bv[0][ks][0]), xe(t + 1, 0, bv[0][ks][1]));
      a[1] = pack_bf16(xe(t, 1, bv[1][ks][0]), xe(t + 1, 1, bv[1][ks][1]));
      a[2] = pack_bf16(xe(t + 8, 0, bv[0][ks][2]), xe(t + 9, 0, bv[0][ks][3]));
      a[3] = pack_bf16(xe(t + 8, 1, bv[1][ks][2]), xe(t + 9, 1, bv[1][ks][3]));
      mma_row_kn(acc, a, sy, ks * 16, lane);
    }
    __syncthreads();  // stage (it & 1) is refilled next
  }
  if (dir && p.dh0) {
    float* o = p.dh0 + (static_cast<std::int64_t>(n) * p.H + h) * KV + st_off;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >= 2 ? r_hi : r_lo, c = nt * 8 + 2 * t4 + (e & 1);
        o[static_cast<std::int64_t>(r) * p.V + c] = acc[nt][e];
      }
  }
}

// ---------------------------------------------------------------------------------------------
// 2. dq, dk, dg for one (chunk, head, 64-channel tile kt). Warp w: token rows [16 w, 16 w + 16).
//    Over V in slabs of 64: dA += dO v^T, Qe += dO H^T, Ke += v dh^T, rs += rowsum(H * dh).
//    dq = scale 2^b Qe + intra(dA, k);  dk = 2^(bL - b) Ke + intra(dA^T, q);
//    dg = reverse cumsum of (q dq - k dk), seeded with 2^bL rs + colsum(k * 2^(bL - b) Ke).
constexpr int kDqkgSmem = 3 * kTileBytes + kTileFBytes + 4 * kTileBytes + 2 * kTileBytes + 5 * kC * 4;

__global__ void __launch_bounds__(kThreads) gla_bwd_dqkg(Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sq = reinterpret_cast<bf16*>(smem);
  bf16* sk = sq + kC * kS;
  bf16* sg = sk + kC * kS;
  float* sb = reinterpret_cast<float*>(sg + kC * kS);
  bf16* sdo = reinterpret_cast<bf16*>(sb + kC * kSf);  // slab stage: dO, v, H rows, dh rows
  bf16* sv = sdo + kC * kS;
  bf16* sh = sv + kC * kS;
  bf16* sdh = sh + kC * kS;
  bf16* sdA = sdh + kC * kS;
  bf16* sqtl = sdA + kC * kS;                            // q~ low part
  float* sL = reinterpret_cast<float*>(sqtl + kC * kS);  // [64] last-row seed
  float* srs = sL + kC;                                  // [2][64] rowsum(H * dh) halves
  float* xchg = srs + 2 * kC;                            // [64] scan exchange
  float* xchg2 = xchg + kC;                              // [64]
  // After the V loop the slab stage is reused: q~, k~ (bf16 hi parts) and db (fp32); k~ low part in g's tile.
  bf16* sqt = sdo;
  bf16* skt = sqt + kC * kS;
  float* sdb = reinterpret_cast<float*>(skt + kC * kS);
  bf16* sktl = sg;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  const int KT = p.K / kC, kt = blockIdx.x % KT, h = blockIdx.y;
  const int2 cm = p.seqs.chunk(static_cast<int>(blockIdx.x) / KT, p.N);
  const SeqDesc s = p.seqs.at(cm.x);
  const int t0 = cm.y * kC, cn = min(kC, s.length - t0);
  const std::int64_t row0 = s.row_begin + t0;
  const std::int64_t KV = static_cast<std::int64_t>(p.K) * p.V;
  const std::int64_t gchunk = static_cast<std::int64_t>(s.chunk_off + cm.y) * p.H + h;
  const bf16* Hn = p.Hs + gchunk * KV + static_cast<std::int64_t>(kt * kC) * p.V;
  const bf16* dHn = p.dHs + gchunk * KV + static_cast<std::int64_t>(kt * kC) * p.V;
  const int rb = warp, r_lo = rb * 16 + g8, r_hi = r_lo + 8;
  const int VT = p.V / kC;

  load_tok_tile(sq, p.q, row0, cn, p.H, h, p.K, kt * kC, tid);
  load_tok_tile(sk, p.k, row0, cn, p.H, h, p.K, kt * kC, tid);
  load_tok_tile(sg, p.g, row0, cn, p.H, h, p.K, kt * kC, tid);
  cp_async_commit();
  auto issue_slab = [&](int vs) {
    load_tok_tile(sdo, p.dO, row0, cn, p.H, h, p.V, vs * kC, tid);
    load_tok_tile(sv, p.v, row0, cn, p.H, h, p.V, vs * kC, tid);
    load_mat_tile(sh, Hn + vs * kC, p.V, tid);
    load_mat_tile(sdh, dHn + vs * kC, p.V, tid);
  };
  issue_slab(0);
  cp_async_commit();
  if (tid < kC) sL[tid] = 0.f;
  cp_async_wait<1>();
  __syncthreads();
  cumsum_tile(sb, sg, xchg, tid);

  float aA[8][4], aQ[8][4], aK[8][4];
  zero(aA);
  zero(aQ);
  zero(aK);
  float rs = 0.f;
  const int rc = tid & 63, rhalf = tid >> 6;  // rowsum: channel, half of the slab's columns
  for (int vs = 0; vs < VT; ++vs) {
    cp_async_wait<0>();
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < kC / 16; ++ks) {
      std::uint32_t ado[4], avv[4];
      ldsm_a(ado, sdo, rb * 16, ks * 16, lane);
      ldsm_a(avv, sv, rb * 16, ks * 16, lane);
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        std::uint32_t b[4];
        if (np <= rb) {  // dA: only column blocks <= the row block
          ldsm_b_nk(b, sv, np * 16, ks * 16, lane);
          mma_bf16_16816(aA[2 * np], ado, b[0], b[1]);
          mma_bf16_16816(aA[2 * np + 1], ado, b[2], b[3]);
        }
        ldsm_b_nk(b, sh, np * 16, ks * 16, lane);
        mma_bf16_16816(aQ[2 * np], ado, b[0], b[1]);
        mma_bf16_16816(aQ[2 * np + 1], ado, b[2], b[3]);
        ldsm_b_nk(b, sdh, np * 16, ks * 16, lane);
        mma_bf16_16816(aK[2 * np], avv, b[0], b[1]);
        mma_bf16_16816(aK[2 * np + 1], avv, b[2], b[3]);
      }
    }
#pragma unroll 8
    for (int j = 0; j < 32; j += 2) {
      const float2 hv = load_bf16x2(sh + rc * kS + rhalf * 32 + j);
      const float2 dv = load_bf16x2(sdh + rc * kS + rhalf * 32 + j);
      rs = fmaf(hv.x, dv.x, fmaf(hv.y, dv.y, rs));
    }
    __syncthreads();
    if (vs + 1 < VT) issue_slab(vs + 1);
    cp_async_commit();
  }
  const bool steep = tile_is_steep(sb, tid);
  srs[rhalf * kC + rc] = rs;

  // dA (masked, scaled) -> bf16 tile.
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    if (nt <= 2 * rb + 1) {
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = hh ? r_hi : r_lo, j = nt * 8 + 2 * t4;
        const float x0 = j > r ? 0.f : p.scale * aA[nt][2 * hh];
        const float x1 = j + 1 > r ? 0.f : p.scale * aA[nt][2 * hh + 1];
        *reinterpret_cast<std::uint32_t*>(sdA + r * kS + j) = pack_bf16(x0, x1);
      }
    }
  }
  const float* bL = sb + (kC - 1) * kSf;
  if (!steep) {
    for (int i = tid; i < kC * kC / 2; i += kThreads) {
      const int r = i >> 5, c = (i & 31) * 2;
      const float2 b = *reinterpret_cast<const float2*>(sb + r * kSf + c);
      const float rho0 = 0.5f * (sb[c] + bL[c]), rho1 = 0.5f * (sb[c + 1] + bL[c + 1]);
      const float2 qv = load_bf16x2(sq + r * kS + c), kv = load_bf16x2(sk + r * kS + c);
      std::uint32_t hi, lo;
      split_bf16(qv.x * ex2(b.x - rho0), qv.y * ex2(b.y - rho1), hi, lo);
      *reinterpret_cast<std::uint32_t*>(sqt + r * kS + c) = hi;
      *reinterpret_cast<std::uint32_t*>(sqtl + r * kS + c) = lo;
      split_bf16(kv.x * ex2(rho0 - b.x), kv.y * ex2(rho1 - b.y), hi, lo);
      *reinterpret_cast<std::uint32_t*>(skt + r * kS + c) = hi;
      *reinterpret_cast<std::uint32_t*>(sktl + r * kS + c) = lo;
    }
  }
  __syncthreads();

  // ---- dq
  float aI[8][4];
  zero(aI);
  if (!steep) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      if (kk <= rb) {
        std::uint32_t a[4];
        ldsm_a(a, sdA, rb * 16, kk * 16, lane);
        mma_row_kn_hi_lo(aI, a, skt, sktl, kk * 16, lane);
      }
    }
  } else {
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >= 2 ? r_hi : r_lo, c = nt * 8 + 2 * t4 + (e & 1);
        const float br = sb[r * kSf + c];
        float x = 0.f;
        for (int j = 0; j <= r; ++j) x += bf(sdA[r * kS + j]) * bf(sk[j * kS + c]) * ex2(br - sb[j * kSf + c]);
        aI[nt][e] = x;
      }
  }
#pragma unroll
  for (int nt = 0; nt < 8; ++nt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = hh ? r_hi : r_lo, c = nt * 8 + 2 * t4;
      float d[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float br = sb[r * kSf + c + e];
        const float fi = steep ? 1.f : ex2(br - 0.5f * (sb[c + e] + bL[c + e]));
        d[e] = p.scale * ex2(br) * aQ[nt][2 * hh + e] + fi * aI[nt][2 * hh + e];
      }
      const float2 qv = load_bf16x2(sq + r * kS + c);
      *reinterpret_cast<float2*>(sdb + r * kSf + c) = make_float2(qv.x * d[0], qv.y * d[1]);
      if (r < cn) *reinterpret_cast<std::uint32_t*>(p.dq + (row0 + r) * p.H * p.K + h * p.K + kt * kC + c) = pack_bf16(d[0], d[1]);
    }

  // ---- dk
  zero(aI);
  if (!steep) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      if (kk >= rb) {
        std::uint32_t a[4];
        ldsm_a_trans(a, sdA, rb * 16, kk * 16, lane);
        mma_row_kn_hi_lo(aI, a, sqt, sqtl, kk * 16, lane);
      }
    }
  } else {
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = e >= 2 ? r_hi : r_lo, c = nt * 8 + 2 * t4 + (e & 1);
        const float bj = sb[j * kSf + c];
        float x = 0.f;
        for (int r = j; r < cn; ++r) x += bf(sdA[r * kS + j]) * bf(sq[r * kS + c]) * ex2(sb[r * kSf + c] - bj);
        aI[nt][e] = x;
      }
  }
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const int c = nt * 8 + 2 * t4;
    float col[2] = {0.f, 0.f};
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int j = hh ? r_hi : r_lo;
      const float2 kv = load_bf16x2(sk + j * kS + c);
      const float kx[2] = {kv.x, kv.y};
      float d[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float bj = sb[j * kSf + c + e];
        const float fi = steep ? 1.f : ex2(0.5f * (sb[c + e] + bL[c + e]) - bj);
        const float dke = ex2(bL[c + e] - bj) * aK[nt][2 * hh + e];
        d[e] = dke + fi * aI[nt][2 * hh + e];
        col[e] += kx[e] * dke;
      }
      float2* db = reinterpret_cast<float2*>(sdb + j * kSf + c);
      const float2 prev = *db;
      *db = make_float2(prev.x - kx[0] * d[0], prev.y - kx[1] * d[1]);
      if (j < cn) *reinterpret_cast<std::uint32_t*>(p.dk + (row0 + j) * p.H * p.K + h * p.K + kt * kC + c) = pack_bf16(d[0], d[1]);
    }
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float x = col[e];
      x += __shfl_xor_sync(0xffffffffu, x, 4);
      x += __shfl_xor_sync(0xffffffffu, x, 8);
      x += __shfl_xor_sync(0xffffffffu, x, 16);
      if (g8 == 0) atomicAdd(sL + c + e, x);
    }
  }
  __syncthreads();

  // ---- dg: reverse cumsum over the chunk's valid rows, seeded with the last-row terms.
  // Thread (c, half) scans rows [32 half, 32 half + 32) in registers; the lower half adds the
  // upper half's total.
  {
    const int c = tid & 63, hf = tid >> 6;
    float v[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = 32 * hf + i < cn ? sdb[(32 * hf + i) * kSf + c] : 0.f;
#pragma unroll
    for (int i = 30; i >= 0; --i) v[i] += v[i + 1];
    if (hf == 1) xchg2[c] = v[0];
    __syncthreads();
    const float seed = sL[c] + ex2(bL[c]) * (srs[c] + srs[kC + c]) + (hf == 0 ? xchg2[c] : 0.f);
    bf16* dg = p.dg + (row0 + 32 * hf) * p.H * p.K + h * p.K + kt * kC + c;
#pragma unroll
    for (int i = 0; i < 32; ++i)
      if (32 * hf + i < cn) dg[static_cast<std::int64_t>(i) * p.H * p.K] = __float2bfloat16_rn(v[i] + seed);
  }
}

// ---------------------------------------------------------------------------------------------
// 3. dv for one (chunk, head, 64-column tile vt). Warp w: token rows j in [16 w, 16 w + 16).
//    Over K in slabs of 64: P^T += k~ q~^T (= A^T / scale), Dv += (k 2^(bL - b)) dh.
//    dv = Dv + (scale mask(P^T)) dO.
constexpr int kDvSmem = 4 * kTileBytes + kTileBytes + kTileFBytes + 3 * kTileBytes + kC * 4;

__global__ void __launch_bounds__(kThreads) gla_bwd_dv(Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sq = reinterpret_cast<bf16*>(smem);  // slab stage: q, k, g, dh rows
  bf16* sk = sq + kC * kS;
  bf16* sg = sk + kC * kS;
  bf16* sdh = sg + kC * kS;
  bf16* sdo = sdh + kC * kS;
  float* sb = reinterpret_cast<float*>(sdo + kC * kS);
  bf16* sqt = reinterpret_cast<bf16*>(sb + kC * kSf);
  bf16* skt = sqt + kC * kS;
  bf16* skl = skt + kC * kS;
  float* xchg = reinterpret_cast<float*>(skl + kC * kS);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  const int VT = p.V / kC, vt = blockIdx.x % VT, h = blockIdx.y;
  const int2 cm = p.seqs.chunk(static_cast<int>(blockIdx.x) / VT, p.N);
  const SeqDesc s = p.seqs.at(cm.x);
  const int t0 = cm.y * kC, cn = min(kC, s.length - t0);
  const std::int64_t row0 = s.row_begin + t0;
  const std::int64_t KV = static_cast<std::int64_t>(p.K) * p.V;
  const std::int64_t gchunk = static_cast<std::int64_t>(s.chunk_off + cm.y) * p.H + h;
  const bf16* dHn = p.dHs + gchunk * KV + vt * kC;
  const int rb = warp, j_lo = rb * 16 + g8, j_hi = j_lo + 8;
  const int KT = p.K / kC;

  load_tok_tile(sdo, p.dO, row0, cn, p.H, h, p.V, vt * kC, tid);
  auto issue_slab = [&](int ksl) {
    load_tok_tile(sq, p.q, row0, cn, p.H, h, p.K, ksl * kC, tid);
    load_tok_tile(sk, p.k, row0, cn, p.H, h, p.K, ksl * kC, tid);
    load_tok_tile(sg, p.g, row0, cn, p.H, h, p.K, ksl * kC, tid);
    load_mat_tile(sdh, dHn + static_cast<std::int64_t>(ksl * kC) * p.V, p.V, tid);
  };
  issue_slab(0);
  cp_async_commit();

  float aP[8][4], aV[8][4];
  zero(aP);
  zero(aV);
  for (int ksl = 0; ksl < KT; ++ksl) {
    cp_async_wait<0>();
    __syncthreads();
    cumsum_tile(sb, sg, xchg, tid);
    __syncthreads();
    const bool steep = tile_is_steep(sb, tid);
    const float* bL = sb + (kC - 1) * kSf;
    for (int i = tid; i < kC * kC / 2; i += kThreads) {
      const int r = i >> 5, c = (i & 31) * 2;
      const float2 b = *reinterpret_cast<const float2*>(sb + r * kSf + c);
      const float2 kv = load_bf16x2(sk + r * kS + c);
      *reinterpret_cast<std::uint32_t*>(skl + r * kS + c) = pack_bf16(kv.x * ex2(bL[c] - b.x), kv.y * ex2(bL[c + 1] - b.y));
      if (!steep) {
        const float rho0 = 0.5f * (sb[c] + bL[c]), rho1 = 0.5f * (sb[c + 1] + bL[c + 1]);
        const float2 qv = load_bf16x2(sq + r * kS + c);
        *reinterpret_cast<std::uint32_t*>(sqt + r * kS + c) = pack_bf16(qv.x * ex2(b.x - rho0), qv.y * ex2(b.y - rho1));
        *reinterpret_cast<std::uint32_t*>(skt + r * kS + c) = pack_bf16(kv.x * ex2(rho0 - b.x), kv.y * ex2(rho1 - b.y));
      }
    }
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < kC / 16; ++ks) {
      std::uint32_t a[4];
      if (!steep) {
        ldsm_a(a, skt, rb * 16, ks * 16, lane);
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          if (np >= rb) {  // r blocks >= the j block
            std::uint32_t b[4];
            ldsm_b_nk(b, sqt, np * 16, ks * 16, lane);
            mma_bf16_16816(aP[2 * np], a, b[0], b[1]);
            mma_bf16_16816(aP[2 * np + 1], a, b[2], b[3]);
          }
        }
      }
      ldsm_a(a, skl, rb * 16, ks * 16, lane);
      mma_row_kn(aV, a, sdh, ks * 16, lane);
    }
    if (steep) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = e >= 2 ? j_hi : j_lo, r = nt * 8 + 2 * t4 + (e & 1);
          if (r >= j) {
            float x = 0.f;
            for (int c = 0; c < kC; ++c) x += bf(sk[j * kS + c]) * bf(sq[r * kS + c]) * ex2(sb[r * kSf + c] - sb[j * kSf + c]);
            aP[nt][e] += x;
          }
        }
    }
    __syncthreads();
    if (ksl + 1 < KT) issue_slab(ksl + 1);
    cp_async_commit();
  }
  // dv += (scale mask(P^T)) dO, P^T accumulators reused as A fragments (r blocks >= rb).
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    if (kk >= rb) {
      std::uint32_t a[4];
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int nt = 2 * kk + half;
        const int r = nt * 8 + 2 * t4;
        a[2 * half] = pack_bf16(r >= j_lo ? p.scale * aP[nt][0] : 0.f, r + 1 >= j_lo ? p.scale * aP[nt][1] : 0.f);
        a[2 * half + 1] = pack_bf16(r >= j_hi ? p.scale * aP[nt][2] : 0.f, r + 1 >= j_hi ? p.scale * aP[nt][3] : 0.f);
      }
      mma_row_kn(aV, a, sdo, kk * 16, lane);
    }
  }
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const int c = vt * kC + nt * 8 + 2 * t4;
    if (j_lo < cn) *reinterpret_cast<std::uint32_t*>(p.dv + ((row0 + j_lo) * p.H + h) * p.V + c) = pack_bf16(aV[nt][0], aV[nt][1]);
    if (j_hi < cn) *reinterpret_cast<std::uint32_t*>(p.dv + ((row0 + j_hi) * p.H + h) * p.V + c) = pack_bf16(aV[nt][2], aV[nt][3]);
  }
}

constexpr int kStatesSmem = 2 * 3 * kTileBytes;

// One memory pool per device for the backward's workspace, release threshold "never".
}  // namespace

RunInfo chunk_gla_backward(const Problem& p, const ChunkGlaArgs& a, const AttentionGradInputs& in, const ChunkGlaGrads& g,
                           const ExecOptions& opts) {
  const std::string kern = " (the CUDA chunk_gla backward)";
  if (a.q.dtype != DType::bf16) throw_unsupported("q", "dtype " + std::string(dtype_name(a.q.dtype)), "bfloat16" + kern);
  if (a.g.dtype != DType::bf16) throw_unsupported("g", "dtype " + std::string(dtype_name(a.g.dtype)), "bfloat16" + kern);
  if (in.d_o.dtype != DType::bf16) throw_unsupported("do", "dtype " + std::string(dtype_name(in.d_o.dtype)), "bfloat16" + kern);
  if (in.d_final_state && in.d_final_state->dtype != DType::f32)
    throw_unsupported("dht", "dtype " + std::string(dtype_name(in.d_final_state->dtype)), "float32" + kern);
  if (!cuda_head_dim_supported(p.K)) throw_unsupported("K", std::to_string(p.K), "64, 128 or 256" + kern);
  if (!cuda_head_dim_supported(p.V)) throw_unsupported("V", std::to_string(p.V), "64, 128 or 256" + kern);
  if (p.N > 65535 || p.H > 65535)  // grid y / z limits of the states kernel
    throw_unsupported(p.N > 65535 ? "cu_seqlens" : "H", std::to_string(p.N > 65535 ? p.N : p.H) + (p.N > 65535 ? " sequences" : " heads"),
                      "at most 65535" + kern);
  require_aligned16({{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"g", &a.g}, {"do", &in.d_o}, {"dq", &g.dq}, {"dk", &g.dk}, {"dv", &g.dv},
                     {"dg", &g.dg}},
                    kern);

  const cudaStream_t st = static_cast<cudaStream_t>(opts.stream);
  RunInfo info{"cuda", {"gla_bwd_states", "gla_bwd_dqkg", "gla_bwd_dv"}};
  if (p.N == 0 || p.H == 0) return info;
  const DeviceSeqs seqs = upload_sequences(p, st);
  const int total = seqs.total_chunks;

  Params prm{};
  prm.q = a.q.ptr<const bf16>();
  prm.k = a.k.ptr<const bf16>();
  prm.v = a.v.ptr<const bf16>();
  prm.g = a.g.ptr<const bf16>();
  prm.dO = in.d_o.ptr<const bf16>();
  prm.h0 = a.initial_state ? a.initial_state->ptr<const float>() : nullptr;
  prm.dht = in.d_final_state ? in.d_final_state->ptr<const float>() : nullptr;
  prm.dq = g.dq.ptr<bf16>();
  prm.dk = g.dk.ptr<bf16>();
  prm.dv = g.dv.ptr<bf16>();
  prm.dg = g.dg.ptr<bf16>();
  prm.dh0 = g.d_initial_state ? g.d_initial_state->ptr<float>() : nullptr;
  prm.seqs = seqs.view;
  prm.H = static_cast<int>(p.H);
  prm.N = static_cast<int>(p.N);
  prm.K = static_cast<int>(p.K);
  prm.V = static_cast<int>(p.V);
  prm.scale = static_cast<float>(p.scale);

  if (total > 0) {
    const std::size_t ws = static_cast<std::size_t>(total) * p.H * p.K * p.V * sizeof(bf16);
    // From lina's pool, which keeps it mapped between calls: the default pool unmapped these
    // ~1.6 GB at every sync and re-mapping cost ~0.9 ms per call at B1_T8192_H96_D128.
    prm.Hs = static_cast<bf16*>(workspace_alloc(ws, st, "chunk_gla bwd chunk states"));
    prm.dHs = static_cast<bf16*>(workspace_alloc(ws, st, "chunk_gla bwd chunk state gradients"));
  }

  const int KT = static_cast<int>(p.K / kC), VT = static_cast<int>(p.V / kC);
  set_max_dynamic_smem(gla_bwd_states, kStatesSmem, "gla_bwd_states");
  gla_bwd_states<<<dim3(static_cast<unsigned>(KT * VT * 2), static_cast<unsigned>(p.H), static_cast<unsigned>(p.N)), kThreads, kStatesSmem,
                   st>>>(prm);
  check(cudaGetLastError(), "gla_bwd_states launch");
  if (total > 0) {
    set_max_dynamic_smem(gla_bwd_dqkg, kDqkgSmem, "gla_bwd_dqkg");
    set_max_dynamic_smem(gla_bwd_dv, kDvSmem, "gla_bwd_dv");
    gla_bwd_dqkg<<<dim3(static_cast<unsigned>(total * KT), static_cast<unsigned>(p.H)), kThreads, kDqkgSmem, st>>>(prm);
    check(cudaGetLastError(), "gla_bwd_dqkg launch");
    gla_bwd_dv<<<dim3(static_cast<unsigned>(total * VT), static_cast<unsigned>(p.H)), kThreads, kDvSmem, st>>>(prm);
    check(cudaGetLastError(), "gla_bwd_dv launch");
    workspace_free(prm.Hs, st, "chunk_gla bwd chunk states");
    workspace_free(prm.dHs, st, "chunk_gla bwd chunk state gradients");
  }
  workspace_free(seqs.ptr, st, "chunk_gla bwd sequence table");
  return info;
}

}  // namespace lina::detail::cuda
