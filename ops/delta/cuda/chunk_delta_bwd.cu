// chunk_kda / chunk_gdn backward on sm_90a (docs/kernels/chunk_delta_bwd.md).
//
// The CPU chunked backward (ops/delta/cpu_kernels.cpp, spec 4.2 / 4.3) as a pipeline of kernels with
// fp32 global scratch between them (tensor cores in A-D2; the SIMT grad_v / grad_k stay as fallbacks):
//   P  prep_qk      per (token, q/k head): l2norm (fp32) -> qn, kn, rstd; not launched where A normalises
//                   its bf16 q / k rows itself (Params::qk_inline, InlineQkRows) and D2 does too (K <= 128) or
//                   scales its half of the raw rows by A's rstd (K = 256, ScaledQkHalf)
//   A  chunk_prep   per (chunk, value head): gate activation + chunk cumsum b, beta sigmoid, Aqk, L,
//                   Tinv = (I+L)^-1, w = Tinv (k e^b beta), u = Tinv (v beta); w, kg, qg, Aqk, e^bL as
//                   the state passes' shared-memory images (ChunkImage)
//   B  state_fwd    per (sequence, value head, 64-column V tile), chunks in order: H_n, v_new
//   C  state_bwd    same grid, chunks in reverse: dh[n], dvn = Aqk^T dO + kg dh[n], dh0
//   D1 grad_v       per (chunk, value head), loops over V tiles: dq_e, dk_e, dw, dAqk, dT's v part,
//                   dv (final), rowsum(H*dh), dbeta's v part
//   D2 grad_k       per (chunk, value head): WY backward, dAkk, intra (exact per-channel exps), db
//                   -> reverse chunk cumsum -> dg (w.r.t. the activated gate), dbeta (w.r.t. beta)
//   E1 post_qk      per (token, q/k head): GVA group sum of dq/dk, l2norm backward; not launched where one
//                   value head owns each q/k head (Params::fuse_qk: D2's tail does it, at K = 256 with the CTA
//                   pair's row dots swapped, PairRowDots)
//   E2 post_gate    per (token, value head): beta sigmoid and gate backward (+ parameter partials)
//   F  param_reduce per value head: dA_log, ddt_bias (double sums in a fixed order)
// Gate cumsums are natural-log and only non-positive differences are exponentiated (spec section 5);
// rows past a sequence's end are zero with gate 0, so they contribute nothing and never overflow.
// GDN runs the KDA code with its scalar gate broadcast over K (the sum over K of KDA's dg is GDN's dg).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "lina/chunk_delta.h"
#include "lina/error.h"
#include "ops/common/backends.h"
#include "ops/common/cuda/cluster_pair.cuh"
#include "ops/common/cuda/cuda_common.cuh"
#include "ops/common/cuda/launch_setup.h"
#include "ops/common/cuda/mbarrier.cuh"
#include "ops/common/cuda/mma_primitives.cuh"
#include "ops/common/cuda/wgmma_sm90.cuh"
#include "ops/common/cuda/workspace.h"
#include "ops/delta/cuda_launch.h"

namespace lina::detail::cuda {
namespace {

using cuda_util::load_as_float;
using cuda_util::warp_sum;
using i64 = std::int64_t;
using bf16 = __nv_bfloat16;

constexpr int kC = 64;     // chunk length
constexpr int kVT = 64;    // value columns per tile
constexpr int kNT = 256;   // threads per block of the chunk kernels
constexpr int kP64 = 65;   // fp32 pitch of 64-wide tiles (odd: transposed reads hit distinct banks)

enum GateMode : int { kGateGiven = 0, kGateSoftplus = 1, kGateLowerBound = 2 };


struct Params {
  // inputs
  const void* q;
  const void* k;
  const void* v;
  const void* g;
  const void* beta;
  const float* A_log;    // may be null
  const float* dt_bias;  // may be null
  const float* h0;       // may be null
  const void* d_o;
  const void* dht;  // may be null
  int qk_t, v_t, g_t, beta_t, do_t, dht_t;  // dtype codes (lina::DType order: f64 f32 bf16 f16)
  // outputs
  void* dq;
  void* dk;
  void* dv;
  void* dg;
  void* dbeta;
  float* dh0;     // may be null
  float* dA_log;  // may be null
  float* ddt;     // may be null
  int dq_t, dv_t, dg_t, dbeta_t;
  // problem
  cuda_util::SeqTable seqs;  // dense: derived from T (nothing uploaded); varlen: the device table
  int N, H, HV, G, K, V, Kg, nvt;
  i64 R;  // total token rows
  float scale;
  int kda, gate_mode, has_A_log, beta_sigmoid, l2norm;
  float lower_bound, beta_mult;
  int fuse_gate;  // the given gate (no in-kernel activation): grad_k_v2 writes dg and dbeta; post_gate does not run
  int fuse_qk;  // G == 1: grad_k_v2 applies post_qk (the l2norm backward) itself; post_qk does not run
  int qk_inline;  // bf16 q / k with fuse_qk (K <= 128) or qk_v2 (K = 256): chunk_prep_v2 normalises its q / k
                  // rows itself (InlineQkRows) and writes rq / rk, grad_k_v2 too (K <= 128) or scales its half of the
                  // raw rows by them (ScaledQkHalf); prep_qk does not run and qn / kn are not allocated
  int qk_v2;      // the vectorised prep_qk_v2 / post_qk_v2 run (dq, dk 16-byte aligned; not in the scalar_qk variant)
  int safe;  // KDA safe_gate with lower_bound >= -5: chunk_prep_v2's diagonal blocks through their middle row
  // scratch (fp32, except the bf16 planes below)
  float *qn, *kn, *rq, *rk;   // [R,H,K], [R,H]
  float *b, *bt;              // chunk-local gate cumsum [R,HV,Kg]; beta after the sigmoid [R,HV]
  float* Tinv;                // [R,HV,64]
  float* vn;                  // u [R,HV,V] (chunk_prep -> state_fwd)
  void* img;                  // ChunkImage<K> [chunks,HV]: the state passes' operand tiles
  // The state passes' outputs that only grad_v reads, as bf16 planes (fifteenth session; docs/kernels/chunk_delta_bwd.md,
  // "Fifteenth session"): a hi plane, then (plane_kv / plane_tok elements further) a lo plane with x - hi, so hi + lo
  // carries ~16 bits. H_n has its lo plane only where h_lo (inputs not all bf16): with bf16 inputs one plane costs
  // the gradients little (FLA stores h in the input dtype), while dh, v_new and dvn in one plane would not
  // (KDA's dA_log past FLA's 0.003 in the gate).
  bf16 *Hs, *dHs;             // [planes][chunks,HV,K,V]
  bf16 *vnb, *dvn;            // v_new, dvn [2][R,HV,V]
  i64 plane_kv, plane_tok;    // elements per plane: chunks * HV * K * V, R * HV * V
  int h_lo;                   // H_n's lo plane is written and read
  float *dqe, *dke, *dw;      // [R,HV,K]; reused by D2 for the per-value-head dq, dk
  float *dAqk, *dTv;          // [R,HV,64]
  float* hd;                  // [chunks,HV,K]: rowsum(H_n * dh[n])
  float* dbp;                 // [R,HV]: dbeta partial, then dbeta w.r.t. beta
  float* dgv;                 // [R,HV,K]: dg w.r.t. the activated gate, then w.r.t. the raw gate
  float* dAc;                 // [R,HV]: per-row dA_log contributions
};

__device__ __forceinline__ void store_as(void* p, int dtype, i64 i, float x) {
  switch (dtype) {
    case 0: static_cast<double*>(p)[i] = x; return;
    case 1: static_cast<float*>(p)[i] = x; return;
    case 2: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(x); return;
    default: static_cast<__half*>(p)[i] = __float2half(x); return;
  }
}

__device__ __forceinline__ float sigmoidf_(float x) {
  if (x >= 0.f) return 1.f / (1.f + __expf(-x));
  const float e = __expf(x);
  return e / (1.f + e);
}
__device__ __forceinline__ float softplusf_(float x) { return x > 20.f ? x : log1pf(__expf(x)); }
// The in-kernel l2norm's inverse norm of a row from its sum of squares (1 without the l2norm): prep_qk,
// prep_qk_v2 and InlineQkRows all take it from here, so every q_n / k_n uses the same epsilon.
__device__ __forceinline__ float inv_l2norm(const Params& p, float sumsq) { return p.l2norm ? rsqrtf(sumsq + 1e-6f) : 1.f; }

struct ChunkInfo {
  i64 t0;    // first token row
  int Cn;    // valid rows
  int gidx;  // global chunk index
};

__device__ __forceinline__ ChunkInfo chunk_info(const Params& p, int ci) {
  const int2 cr = p.seqs.chunk(ci, p.N);  // (sequence, chunk within it)
  const cuda_util::SeqDesc sd = p.seqs.at(cr.x);
  ChunkInfo c;
  c.t0 = sd.row_begin + static_cast<i64>(cr.y) * kC;
  c.Cn = min(kC, sd.length - cr.y * kC);
  c.gidx = ci;
  return c;
}

// ---------------------------------------------------------------------------------------------
// P: q/k l2norm, one warp per (token, q/k head)
__global__ void prep_qk_kernel(const Params p) {
  const i64 item = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (item >= p.R * p.H) return;
  const int K = p.K;
  for (int which = 0; which < 2; ++which) {
    const void* src = which ? p.k : p.q;
    float* dst = (which ? p.kn : p.qn) + item * K;
    float x[8];
    float ss = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int c = lane + 32 * e;
      x[e] = c < K ? load_as_float(src, p.qk_t, item * K + c) : 0.f;
      ss += x[e] * x[e];
    }
    ss = warp_sum(ss);
    const float rs = inv_l2norm(p, ss);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int c = lane + 32 * e;
      if (c < K) dst[c] = x[e] * rs;
    }
    if (lane == 0) (which ? p.rk : p.rq)[item] = rs;
  }
}

// Fills a ROWS x COLS fp32 shared tile (row pitch `pitch`) with f(r, c). Each thread issues up to 8
// global loads before its first store: with 8 warps per SM, one load in flight at a time would leave
// every kernel waiting on memory latency.
template <int ROWS, int COLS, class F>
__device__ __forceinline__ void fill_tile(float* dst, int pitch, F f) {
  static_assert((ROWS * COLS) % kNT == 0, "tile must split evenly over the block");
  constexpr int PER = ROWS * COLS / kNT;
  constexpr int BATCH = PER < 8 ? PER : 8;
#pragma unroll 1
  for (int u0 = 0; u0 < PER; u0 += BATCH) {
    float tmp[BATCH];
#pragma unroll
    for (int u = 0; u < BATCH; ++u) {
      const int i = threadIdx.x + (u0 + u) * kNT;
      tmp[u] = f(i / COLS, i % COLS);
    }
#pragma unroll
    for (int u = 0; u < BATCH; ++u) {
      const int i = threadIdx.x + (u0 + u) * kNT;
      dst[(i / COLS) * pitch + i % COLS] = tmp[u];
    }
  }
}

// Rows [0, 64) of a [R, heads, width] fp32 tensor, columns [col0, col0 + NCOLS); rows past Cn are zero.
template <int NCOLS>
__device__ __forceinline__ void load_rows(float* dst, int pitch, const float* src, i64 t0, int Cn, int heads, int head,
                                          int width, int col0) {
  fill_tile<kC, NCOLS>(dst, pitch, [&](int r, int c) {
    return r < Cn ? src[((t0 + r) * heads + head) * width + col0 + c] : 0.f;
  });
}

// Loads the chunk's gate cumsum into b_s[64][K+1] (GDN broadcast; padded rows = the last valid row)
// and returns nothing; bL_s[K] gets the last valid row.
template <int K>
__device__ __forceinline__ void load_gate_rows(const Params& p, float* b_s, float* bL_s, i64 t0, int Cn, int hv) {
  constexpr int KP = K + 1;
  fill_tile<kC, K>(b_s, KP, [&](int r, int c) {
    return p.b[((t0 + min(r, Cn - 1)) * p.HV + hv) * p.Kg + (p.kda ? c : 0)];
  });
  for (int c = threadIdx.x; c < K; c += blockDim.x) bL_s[c] = p.b[((t0 + Cn - 1) * p.HV + hv) * p.Kg + (p.kda ? c : 0)];
}

// ---------------------------------------------------------------------------------------------
// Tensor-core building blocks of the state passes (B, C). Every operand enters as bf16 hi + lo
// planes (x = hi + lo, ~16 significant bits) and each product is hi*hi + lo*hi + hi*lo with fp32
// accumulation: close to the fp32 SIMT products they replace, at a few MMAs per chunk step, which
// is not what bounds these passes (their loads are).

// Fills a ROWS x COLS tile as bf16 hi and lo planes (row pitch P elements) from f(r, c), which
// returns columns c .. c+3 as a float4. Up to BATCH float4 loads in flight per thread.
template <int ROWS, int COLS, int P, int BATCH = 8, class F>
__device__ __forceinline__ void fill_split(bf16* hi, bf16* lo, F f) {
  constexpr int Q = COLS / 4, PER = ROWS * Q / kNT, B = PER < BATCH ? PER : BATCH;
  static_assert((ROWS * Q) % kNT == 0 && PER % B == 0, "tile must split evenly over the block");
#pragma unroll 1
  for (int u0 = 0; u0 < PER; u0 += B) {
    float4 tmp[B];
#pragma unroll
    for (int u = 0; u < B; ++u) {
      const int i = threadIdx.x + (u0 + u) * kNT;
      tmp[u] = f(i / Q, 4 * (i % Q));
    }
#pragma unroll
    for (int u = 0; u < B; ++u) {
      const int i = threadIdx.x + (u0 + u) * kNT, o = (i / Q) * P + 4 * (i % Q);
      std::uint32_t h0, l0, h1, l1;
      cuda_util::pack_bf16_split(tmp[u].x, tmp[u].y, h0, l0);
      cuda_util::pack_bf16_split(tmp[u].z, tmp[u].w, h1, l1);
      *reinterpret_cast<uint2*>(hi + o) = make_uint2(h0, h1);
      *reinterpret_cast<uint2*>(lo + o) = make_uint2(l0, l1);
    }
  }
}

__device__ __forceinline__ float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float2 ld2(const float* p) { return *reinterpret_cast<const float2*>(p); }
// four consecutive values of a bf16 hi plane plus its lo plane lo_off elements further (0: none) as floats
__device__ __forceinline__ float4 ld4_planes(const bf16* p, i64 lo_off) {
  const auto f4 = [](const bf16* x) {
    const uint2 u = *reinterpret_cast<const uint2*>(x);
    const float2 a = cuda_util::unpack_bf16(u.x), b = cuda_util::unpack_bf16(u.y);
    return make_float4(a.x, a.y, b.x, b.y);
  };
  float4 x = f4(p);
  if (lo_off) {
    const float4 l = f4(p + lo_off);
    x.x += l.x, x.y += l.y, x.z += l.z, x.w += l.w;
  }
  return x;
}
__device__ __forceinline__ void st2(float* p, float a, float b) { *reinterpret_cast<float2*>(p) = make_float2(a, b); }
__device__ __forceinline__ void st_u32(bf16* p, std::uint32_t v) { *reinterpret_cast<std::uint32_t*>(p) = v; }
// x as bf16 hi + lo at element offset o of the two planes (4 consecutive elements, o a multiple of 4;
// also a SW128 tile offset, whose 8-element groups stay contiguous): 8 bytes per plane.
__device__ __forceinline__ void st_split4(bf16* hi, bf16* lo, int o, float4 x) {
  std::uint32_t h0, l0, h1, l1;
  cuda_util::pack_bf16_split(x.x, x.y, h0, l0);
  cuda_util::pack_bf16_split(x.z, x.w, h1, l1);
  *reinterpret_cast<uint2*>(hi + o) = make_uint2(h0, h1);
  *reinterpret_cast<uint2*>(lo + o) = make_uint2(l0, l1);
}
constexpr float4 kZero4 = {0.f, 0.f, 0.f, 0.f};

// Dtype-generic row of 4 (dO, v).
__device__ __forceinline__ float4 load4_as_float(const void* src, int dtype, i64 i) {
  return make_float4(load_as_float(src, dtype, i), load_as_float(src, dtype, i + 1), load_as_float(src, dtype, i + 2),
                     load_as_float(src, dtype, i + 3));
}

// N float4s of a float tensor of any dtype: element indices idx(u) (multiples of 4; a negative index
// gives zeros). The dtype switch is taken once, so all N loads are in flight before the first
// conversion (a switch per load had each bf16 load wait for the one before: the state_bwd producer spent
// most of its time there). bf16 as one 8-byte load each where src is 8-byte aligned.
template <int N, class Idx>
__device__ __forceinline__ void load4_batch(float4 (&x)[N], const void* src, int dtype, Idx idx) {
  if (dtype == 2 && (reinterpret_cast<std::uintptr_t>(src) & 7) == 0) {
    uint2 raw[N];
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const i64 i = idx(u);
      raw[u] = i >= 0 ? *reinterpret_cast<const uint2*>(static_cast<const bf16*>(src) + i) : make_uint2(0u, 0u);
    }
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const float2 a = cuda_util::unpack_bf16(raw[u].x), b = cuda_util::unpack_bf16(raw[u].y);
      x[u] = make_float4(a.x, a.y, b.x, b.y);
    }
  } else if (dtype == 1) {
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const i64 i = idx(u);
      x[u] = i >= 0 ? ld4(static_cast<const float*>(src) + i) : kZero4;
    }
  } else {
#pragma unroll
    for (int u = 0; u < N; ++u) {
      const i64 i = idx(u);
      x[u] = i >= 0 ? load4_as_float(src, dtype, i) : kZero4;
    }
  }
}

// Writes a 16-row fp32 warp tile (NT n8 fragments at rows m0.., columns n0..) as hi + lo planes.
template <int NT, int P>
__device__ __forceinline__ void store_split(bf16* hi, bf16* lo, const float (&acc)[NT][4], int m0, int n0, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int o = (m0 + g + 8 * hf) * P + n0 + nt * 8 + 2 * t;
      std::uint32_t h, l;
      cuda_util::pack_bf16_split(acc[nt][2 * hf], acc[nt][2 * hf + 1], h, l);
      st_u32(hi + o, h);
      st_u32(lo + o, l);
    }
}

// acc (NT n8 tiles at n0) += A Y for one k16 step (columns k0 ..): A as hi + lo fragments; Y from the hi + lo
// planes (pitch ldb) of a row-major [k][n] tile, or (TB) Y^T from those of a row-major [n][k] tile; the lo x lo
// term is dropped. AExact / BExact: A / Y is exactly bf16 (a bf16 input), so its lo term is zero and is skipped
// (al / the lo plane unread; the same sums as the three-term form with that lo = 0).
template <int NT, bool TB, bool AExact = false, bool BExact = false>
__device__ __forceinline__ void mma_b_planes(float (&acc)[NT][4], const std::uint32_t (&ah)[4], const std::uint32_t (&al)[4],
                                             const bf16* yh, const bf16* yl, int ldb, int n0, int k0, int lane) {
  static_assert(NT % 2 == 0, "n8 tiles come in pairs");
#pragma unroll
  for (int np = 0; np < NT / 2; ++np) {
    std::uint32_t bh[4], bl[4];
    static_assert(!(AExact && BExact), "one exact operand at most");
    if constexpr (TB) {
      cuda_util::ldsm_frag_b_nk(bh, yh, ldb, n0 + 16 * np, k0, lane);
      if constexpr (!BExact) cuda_util::ldsm_frag_b_nk(bl, yl, ldb, n0 + 16 * np, k0, lane);
    } else {
      cuda_util::ldsm_frag_b_kn(bh, yh, ldb, k0, n0 + 16 * np, lane);
      if constexpr (!BExact) cuda_util::ldsm_frag_b_kn(bl, yl, ldb, k0, n0 + 16 * np, lane);
    }
    if constexpr (BExact) {
      cuda_util::mma_bf16_16816(acc[2 * np], al, bh[0], bh[1]);
      cuda_util::mma_bf16_16816(acc[2 * np], ah, bh[0], bh[1]);
      cuda_util::mma_bf16_16816(acc[2 * np + 1], al, bh[2], bh[3]);
      cuda_util::mma_bf16_16816(acc[2 * np + 1], ah, bh[2], bh[3]);
    } else if constexpr (AExact) {
      cuda_util::mma_bf16_16816(acc[2 * np], ah, bl[0], bl[1]);
      cuda_util::mma_bf16_16816(acc[2 * np], ah, bh[0], bh[1]);
      cuda_util::mma_bf16_16816(acc[2 * np + 1], ah, bl[2], bl[3]);
      cuda_util::mma_bf16_16816(acc[2 * np + 1], ah, bh[2], bh[3]);
    } else {
      cuda_util::mma_bf16_16816_split(acc[2 * np], ah, al, bh[0], bh[1], bl[0], bl[1]);
      cuda_util::mma_bf16_16816_split(acc[2 * np + 1], ah, al, bh[2], bh[3], bl[2], bl[3]);
    }
  }
}

// acc (16 rows at m0, NT n8 tiles at n0) += X Y over the k16 steps [ks0, ks1); X from a row-major
// [m][k] tile, or (TA) X^T from a row-major [k][m] tile; Y from a row-major [k][n] tile, or (TB) Y^T
// from a row-major [n][k] tile; both as hi + lo planes (pitches lda, ldb); the lo x lo term is dropped.
template <int NT, bool TA, bool TB = false>
__device__ __forceinline__ void warp_mma_split(float (&acc)[NT][4], const bf16* xh, const bf16* xl, int lda, int m0,
                                               const bf16* yh, const bf16* yl, int ldb, int n0, int ks0, int ks1, int lane) {
#pragma unroll 1
  for (int ks = ks0; ks < ks1; ++ks) {
    std::uint32_t ah[4], al[4];
    if constexpr (TA) {
      cuda_util::ldsm_frag_a_trans(ah, xh, lda, m0, ks * 16, lane);
      cuda_util::ldsm_frag_a_trans(al, xl, lda, m0, ks * 16, lane);
    } else {
      cuda_util::ldsm_frag_a(ah, xh, lda, m0, ks * 16, lane);
      cuda_util::ldsm_frag_a(al, xl, lda, m0, ks * 16, lane);
    }
    mma_b_planes<NT, TB>(acc, ah, al, yh, yl, ldb, n0, ks * 16, lane);
  }
}

// A [64][W] wgmma operand (W = K or 64) as bf16 hi + lo SW128 tiles (wgmma_sm90.cuh format,
// sw128_blocked<64>): W / 64 tiles of [64 rows][64 cols] per plane.
template <int W>
struct SplitTile {
  bf16 hi[kC * W];
  bf16 lo[kC * W];
};
// The same tile as one bf16 plane (operands whose lo term the gradients do not need: docs/kernels/
// chunk_delta_bwd.md, "Eleventh session", precision budget).
template <int W>
struct PlainTile {
  bf16 x[kC * W];
};
static_assert(sizeof(PlainTile<64>) % 1024 == 0 && sizeof(PlainTile<128>) % 1024 == 0 && sizeof(PlainTile<256>) % 1024 == 0,
              "SW128 tiles 1 KB aligned");

// The state passes' operands of one (chunk, value head) as chunk_prep_v2 writes them to HBM: the exact
// shared-memory images the wgmma state passes read, so that their producers are bulk copies (no fp32
// loads, gate exps or hi / lo splits in the sequential passes). Every row of every tile is written,
// padded rows (past the sequence end) as zeros. B copies {w, kg}, C copies {kg, qg, A} and then w: the
// member order is their shared-memory order.
template <int K>
struct ChunkImage {
  PlainTile<K> w;    // w = Tinv (k e^b beta) [tok][ch], one bf16 plane
  SplitTile<K> kg;   // k e^(bL - b) [tok][ch]
  PlainTile<K> qg;   // scale q e^b [tok][ch], one bf16 plane
  SplitTile<kC> A;   // Aqk [r][j] (scale applied; zero above the diagonal)
  float el[K];       // e^bL
};
static_assert(sizeof(ChunkImage<64>) % 16 == 0 && sizeof(ChunkImage<128>) % 16 == 0 && sizeof(ChunkImage<256>) % 16 == 0,
              "bulk copies need 16-byte sizes");

// Columns c, c + 1 (c even) of row r of a SplitTile as bf16 hi + lo: 4 bytes per plane.
template <int W>
__device__ __forceinline__ void tile_store2(SplitTile<W>& t, int r, int c, float x0, float x1) {
  std::uint32_t hi, lo;
  cuda_util::pack_bf16_split(x0, x1, hi, lo);
  const int o = cuda_util::wgmma::sw128_blocked<kC>(r, c);
  *reinterpret_cast<std::uint32_t*>(t.hi + o) = hi;
  *reinterpret_cast<std::uint32_t*>(t.lo + o) = lo;
}
template <int W>
__device__ __forceinline__ void tile_store2(PlainTile<W>& t, int r, int c, float x0, float x1) {
  *reinterpret_cast<std::uint32_t*>(t.x + cuda_util::wgmma::sw128_blocked<kC>(r, c)) = cuda_util::pack_bf16(x0, x1);
}
// Four consecutive columns at SW128 element offset o.
template <int W>
__device__ __forceinline__ void tile_store4(SplitTile<W>& t, int o, float4 v) {
  st_split4(t.hi, t.lo, o, v);
}
template <int W>
__device__ __forceinline__ void tile_store4(PlainTile<W>& t, int o, float4 v) {
  *reinterpret_cast<uint2*>(t.x + o) = make_uint2(cuda_util::pack_bf16(v.x, v.y), cuda_util::pack_bf16(v.z, v.w));
}

template <int K>
__device__ __forceinline__ ChunkImage<K>& chunk_image(const Params& p, int gidx, int hv) {
  return reinterpret_cast<ChunkImage<K>*>(p.img)[static_cast<i64>(gidx) * p.HV + hv];
}

// Channels c0 .. c0 + KS - 1 of a chunk's bf16 q / k rows (K per row) into a staging [2][64][KS] by cp.async, zero
// past Cn (each thread's own 16-byte pieces: visible to it after its wait): InlineQkRows (whole rows) and
// ScaledQkHalf (grad_k_v2's channel halves at K = 256).
template <int K, int KS>
__device__ __forceinline__ void stage_qk_rows(const Params& p, bf16* stg, i64 t0, int Cn, int h, int c0, int tid) {
  constexpr int PR = KS / 8, NU = kC * PR / kNT;  // 16-byte pieces per row, per thread
#pragma unroll
  for (int u = 0; u < NU; ++u) {
    const int i = tid + u * kNT, r = i / PR, c8 = 8 * (i % PR);
    const i64 src = ((t0 + min(r, Cn - 1)) * p.H + h) * K + c0 + c8;
    cuda_util::cp_async16(stg + r * KS + c8, static_cast<const bf16*>(p.q) + src, r < Cn);
    cuda_util::cp_async16(stg + (kC + r) * KS + c8, static_cast<const bf16*>(p.k) + src, r < Cn);
  }
}

// A on tensor cores: chunk_prep_v2. Its own file, so that stage A and the state passes change
// independently.
// bf16 q / k rows of a chunk as fp32 tiles [64][P], l2-normalised (or copied) as prep_qk_v2 does, for the chunk
// kernels where prep_qk does not run (Params::qk_inline). The thread's 16-byte pieces come into registers
// either by issue() (global loads, in flight with the caller's other loads: chunk_prep_v2, then store()) or by
// stage() (cp.async into a staging area the caller has free: grad_k_v2, whose registers are short, then
// store_staged() by the same thread); each piece's row has its squares summed over the PR threads that hold it
// (shuffles), is scaled and written; padded rows are zeros. Both kernels run this same code on the same
// rows, so their q_n / k_n agree bit for bit; chunk_prep_v2 also writes the inverse norms (rq, rk) for
// grad_k_v2's fused l2norm backward.
template <int K>
struct InlineQkRows {
  static constexpr int PR = K / 8, NU = kC * PR / kNT;  // threads per row, pieces per thread
  static_assert(NU * kNT == kC * PR && 32 % PR == 0, "whole rows per warp");
  uint4 xq[NU], xk[NU];
  __device__ __forceinline__ void issue(const Params& p, i64 t0, int Cn, int h, int tid) {
#pragma unroll
    for (int u = 0; u < NU; ++u) {
      const int i = tid + u * kNT, r = i / PR, c8 = 8 * (i % PR);
      const i64 src = ((t0 + r) * p.H + h) * K + c8;
      xq[u] = r < Cn ? *reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.q) + src) : make_uint4(0u, 0u, 0u, 0u);
      xk[u] = r < Cn ? *reinterpret_cast<const uint4*>(static_cast<const bf16*>(p.k) + src) : make_uint4(0u, 0u, 0u, 0u);
    }
  }
  // staging: [2][64][K] bf16 (q rows, then k rows)
  __device__ __forceinline__ static void stage(const Params& p, bf16* stg, i64 t0, int Cn, int h, int tid) {
    stage_qk_rows<K, K>(p, stg, t0, Cn, h, 0, tid);
  }
  // grad_k_v2: this thread's staged pieces (its own cp.async: visible to it after its wait), one at a time (a
  // rolled loop: that kernel's code is at the instruction cache's size)
  template <int P>
  __device__ __forceinline__ static void store_staged(const Params& p, const bf16* stg, float (*qs)[P], float (*ks)[P], i64 t0,
                                                      int Cn, int h, int tid) {
#pragma unroll 1
    for (int u = 0; u < NU; ++u) {
      const int i = tid + u * kNT, r = i / PR, c8 = 8 * (i % PR);
      store_piece(p, qs, ks, *reinterpret_cast<const uint4*>(stg + r * K + c8),
                  *reinterpret_cast<const uint4*>(stg + (kC + r) * K + c8), t0, Cn, h, r, c8, false);
    }
  }
  // chunk_prep_v2: the pieces issue() loaded
  template <int P>
  __device__ __forceinline__ void store(const Params& p, float (*qs)[P], float (*ks)[P], i64 t0, int Cn, int h, int tid,
                                        bool write_r) const {
#pragma unroll
    for (int u = 0; u < NU; ++u) {
      const int i = tid + u * kNT;
      store_piece(p, qs, ks, xq[u], xk[u], t0, Cn, h, i / PR, 8 * (i % PR), write_r);
    }
  }
  // one 8-element piece of row r of q and of k: the row's sums of squares over its PR threads, the scaled
  // pieces into the tiles
  template <int P>
  __device__ __forceinline__ static void store_piece(const Params& p, float (*qs)[P], float (*ks)[P], uint4 pq, uint4 pk,
                                                     i64 t0, int Cn, int h, int r, int c8, bool write_r) {
    float fq[8], fk[8], sq = 0.f, sk = 0.f;
    cuda_util::unpack_bf16x8(pq, fq);
    cuda_util::unpack_bf16x8(pk, fk);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      sq += fq[e] * fq[e];
      sk += fk[e] * fk[e];
    }
#pragma unroll
    for (int o = PR / 2; o > 0; o >>= 1) {
      sq += __shfl_xor_sync(0xffffffffu, sq, o);
      sk += __shfl_xor_sync(0xffffffffu, sk, o);
    }
    const float rq = inv_l2norm(p, sq), rk = inv_l2norm(p, sk);
    *reinterpret_cast<float4*>(&qs[r][c8]) = make_float4(fq[0] * rq, fq[1] * rq, fq[2] * rq, fq[3] * rq);
    *reinterpret_cast<float4*>(&qs[r][c8 + 4]) = make_float4(fq[4] * rq, fq[5] * rq, fq[6] * rq, fq[7] * rq);
    *reinterpret_cast<float4*>(&ks[r][c8]) = make_float4(fk[0] * rk, fk[1] * rk, fk[2] * rk, fk[3] * rk);
    *reinterpret_cast<float4*>(&ks[r][c8 + 4]) = make_float4(fk[4] * rk, fk[5] * rk, fk[6] * rk, fk[7] * rk);
    if (write_r && c8 == 0 && r < Cn) {
      p.rq[(t0 + r) * p.H + h] = rq;
      p.rk[(t0 + r) * p.H + h] = rk;
    }
  }
};

// grad_k_v2's CTA pair at K = 256 where chunk_prep_v2 normalised the rows (qk_inline, no prep_qk): the CTA's channel
// half of the bf16 q / k rows by cp.async into a staging [2][64][KS] (zero past Cn), then times chunk_prep's rq / rk
// into the fp32 tiles, each thread its own pieces (visible to it after its cp.async wait). A warp's pieces lie in
// 2 NU rows; their 4 NU scales are loaded at the top, one per lane, and shuffled to the pieces' lanes (a register a
// lane: eight per thread took a stack frame; loaded just before the wait they cost their latency, +0.14 ms at D256).
// LaneScales = false (the SIMT tail, whose top-loaded dq_e / dk_e fragments leave no register: one spilled 44 bytes):
// each piece's scales are loaded where it is scaled.
template <int K, int KS>
struct ScaledQkHalf {
  static constexpr int PR = KS / 8, NU = kC * PR / kNT;  // 16-byte pieces per row, per thread
  float sc;  // lane l < 4 NU: (q: l < 2 NU, else k) of the warp's row 16 u + 2 warp + (l & 1), u = (l >> 1) % NU
  template <bool LaneScales>
  __device__ __forceinline__ void stage(const Params& p, bf16* stg, i64 t0, int Cn, int h, int c0, int tid) {
    static_assert(NU * kNT == kC * PR && PR == 16 && 4 * NU <= 32, "a warp's rows: 2 per piece round, scales in lanes");
    stage_qk_rows<K, KS>(p, stg, t0, Cn, h, c0, tid);
    if constexpr (LaneScales) {
      const int l = tid & 31, r = 16 * ((l >> 1) % NU) + 2 * (tid >> 5) + (l & 1);
      const i64 row = (t0 + min(r, Cn - 1)) * p.H + h;
      sc = (l & (2 * NU)) ? p.rk[row] : p.rq[row];
    }
  }
  template <bool LaneScales, int P>
  __device__ __forceinline__ void store(const Params& p, const bf16* stg, float (*qs)[P], float (*ks)[P], i64 t0, int Cn,
                                        int h, int tid) const {
    const int hr = (tid >> 4) & 1;  // the piece's row within the warp's pair
#pragma unroll
    for (int u = 0; u < NU; ++u) {
      const int i = tid + u * kNT, r = i / PR, c8 = 8 * (i % PR);
      float rq, rk;
      if constexpr (LaneScales) {
        rq = __shfl_sync(0xffffffffu, sc, 2 * u + hr);
        rk = __shfl_sync(0xffffffffu, sc, 2 * NU + 2 * u + hr);
      } else {
        const i64 row = (t0 + min(r, Cn - 1)) * p.H + h;
        rq = p.rq[row];
        rk = p.rk[row];
      }
      scaled_piece(*reinterpret_cast<const uint4*>(stg + r * KS + c8), rq, &qs[r][c8]);
      scaled_piece(*reinterpret_cast<const uint4*>(stg + (kC + r) * KS + c8), rk, &ks[r][c8]);
    }
  }
  __device__ __forceinline__ static void scaled_piece(uint4 x, float sc, float* dst) {
    float f[8];
    cuda_util::unpack_bf16x8(x, f);
    *reinterpret_cast<float4*>(dst) = make_float4(f[0] * sc, f[1] * sc, f[2] * sc, f[3] * sc);
    *reinterpret_cast<float4*>(dst + 4) = make_float4(f[4] * sc, f[5] * sc, f[6] * sc, f[7] * sc);
  }
};

struct NoScaledQkHalf {};  // grad_k_v2 at K <= 128

#include "ops/delta/cuda/chunk_delta_bwd_prep.cuh"

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

// ---------------------------------------------------------------------------------------------
// D1, grad_v (where dO or dv is not 16-byte aligned, and in the simt variant; grad_v4 otherwise): per (chunk,
// value head), products over V on tensor cores (operands as bf16 hi + lo, fp32 accumulators; H_n, dh[n], v_new and
// dvn arrive as the state passes' planes). Warp tiles: rows m0 = 16 (warp % 4) of the chunk; columns nk0 (K/2 of K) for the
// [64][K] products, n64 (32 of 64) for the [64][64] ones.
//   pass 1 over V tiles: dq_e += dO H^T, dw += dvn H^T, dAqk += dO vn^T, dTv += dvn v^T,
//                        dv = beta Tinv^T dvn (final), dbeta += rowsum((Tinv^T dvn) v), hd += rowsum(H dh)
//   pass 2 over V tiles (last tile first: it is still in shared memory): dk_e += v_new dh^T
template <int K>
struct GradVSmem {
  alignas(16) bf16 H[2][K][72];  // [channel][value]
  alignas(16) bf16 D[2][K][72];
  alignas(16) bf16 dO[2][kC][72];
  alignas(16) bf16 vn[2][kC][72];
  alignas(16) bf16 dvn[2][kC][72];
  alignas(16) bf16 v[2][kC][72];
  alignas(16) bf16 T[2][kC][72];  // Tinv [r][j]
  float beta[kC];
  float dbp[kC];
};

template <int K>
__global__ void __launch_bounds__(kNT, 1) grad_v_kernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& s = *reinterpret_cast<GradVSmem<K>*>(smem_raw);
  constexpr int NK = K / 16;  // n8 tiles of a warp's K/2 columns
  const int hv = blockIdx.y, tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int m0 = 16 * (warp & 3), nk0 = (K / 2) * (warp >> 2), n64 = 32 * (warp >> 2);
  const ChunkInfo ci = chunk_info(p, blockIdx.x);
  const i64 t0 = ci.t0;
  const int Cn = ci.Cn, V = p.V;
  const bf16* Hg = p.Hs + (static_cast<i64>(ci.gidx) * p.HV + hv) * K * V;
  const bf16* Dg = p.dHs + (static_cast<i64>(ci.gidx) * p.HV + hv) * K * V;
  const i64 hlo = p.h_lo ? p.plane_kv : 0;
  const auto off = [&](int r, int c0, int c) { return ((t0 + r) * p.HV + hv) * V + c0 + c; };
  fill_split<kC, kC, 72>(&s.T[0][0][0], &s.T[1][0][0], [&](int r, int c) {
    return r < Cn ? ld4(p.Tinv + ((t0 + r) * p.HV + hv) * kC + c) : kZero4;
  });
  if (tid < kC) {
    s.beta[tid] = tid < Cn ? p.bt[(t0 + tid) * p.HV + hv] : 0.f;
    s.dbp[tid] = 0.f;
  }
  float aq[NK][4] = {}, aw[NK][4] = {}, aA[4][4] = {}, aT[4][4] = {};
  float hdsum = 0.f;
#pragma unroll 1
  for (int vt = 0; vt < p.nvt; ++vt) {
    const int c0 = vt * kVT;
    __syncthreads();
    fill_split<K, kVT, 72>(&s.H[0][0][0], &s.H[1][0][0], [&](int r, int c) { return ld4_planes(Hg + static_cast<i64>(r) * V + c0 + c, hlo); });
    fill_split<K, kVT, 72>(&s.D[0][0][0], &s.D[1][0][0], [&](int r, int c) { return ld4_planes(Dg + static_cast<i64>(r) * V + c0 + c, p.plane_kv); });
    fill_split<kC, kVT, 72>(&s.dO[0][0][0], &s.dO[1][0][0], [&](int r, int c) {
      return r < Cn ? load4_as_float(p.d_o, p.do_t, off(r, c0, c)) : kZero4;
    });
    fill_split<kC, kVT, 72>(&s.vn[0][0][0], &s.vn[1][0][0], [&](int r, int c) { return r < Cn ? ld4_planes(p.vnb + off(r, c0, c), p.plane_tok) : kZero4; });
    fill_split<kC, kVT, 72>(&s.dvn[0][0][0], &s.dvn[1][0][0], [&](int r, int c) { return r < Cn ? ld4_planes(p.dvn + off(r, c0, c), p.plane_tok) : kZero4; });
    fill_split<kC, kVT, 72>(&s.v[0][0][0], &s.v[1][0][0], [&](int r, int c) {
      return r < Cn ? load4_as_float(p.v, p.v_t, off(r, c0, c)) : kZero4;
    });
    __syncthreads();
    if (tid < K) {  // rowsum(H dh) from the hi + lo copies (~16 significant bits each)
      float sum = 0.f;
#pragma unroll 4
      for (int c = 0; c < kVT; c += 2) {
        const float2 hh = cuda_util::unpack_bf16(*reinterpret_cast<const std::uint32_t*>(&s.H[0][tid][c]));
        const float2 hl = cuda_util::unpack_bf16(*reinterpret_cast<const std::uint32_t*>(&s.H[1][tid][c]));
        const float2 dh = cuda_util::unpack_bf16(*reinterpret_cast<const std::uint32_t*>(&s.D[0][tid][c]));
        const float2 dl = cuda_util::unpack_bf16(*reinterpret_cast<const std::uint32_t*>(&s.D[1][tid][c]));
        sum += (hh.x + hl.x) * (dh.x + dl.x) + (hh.y + hl.y) * (dh.y + dl.y);
      }
      hdsum += sum;
    }
    warp_mma_split<NK, false, true>(aq, &s.dO[0][0][0], &s.dO[1][0][0], 72, m0, &s.H[0][0][0], &s.H[1][0][0], 72, nk0, 0,
                                    kVT / 16, lane);
    warp_mma_split<NK, false, true>(aw, &s.dvn[0][0][0], &s.dvn[1][0][0], 72, m0, &s.H[0][0][0], &s.H[1][0][0], 72, nk0, 0,
                                    kVT / 16, lane);
    warp_mma_split<4, false, true>(aA, &s.dO[0][0][0], &s.dO[1][0][0], 72, m0, &s.vn[0][0][0], &s.vn[1][0][0], 72, n64, 0,
                                   kVT / 16, lane);
    warp_mma_split<4, false, true>(aT, &s.dvn[0][0][0], &s.dvn[1][0][0], 72, m0, &s.v[0][0][0], &s.v[1][0][0], 72, n64, 0,
                                   kVT / 16, lane);
    {  // dvb = Tinv^T dvn (Tinv lower triangular: rows r only meet m >= r); dv = dvb beta; dbeta += rowsum(dvb v)
      float acc[4][4] = {};
      warp_mma_split<4, true>(acc, &s.T[0][0][0], &s.T[1][0][0], 72, m0, &s.dvn[0][0][0], &s.dvn[1][0][0], 72, n64, m0 >> 4,
                              kC / 16, lane);
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int r = m0 + g + 8 * hf;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          const int c = n64 + nt * 8 + 2 * t;
          const float2 vh = cuda_util::unpack_bf16(*reinterpret_cast<const std::uint32_t*>(&s.v[0][r][c]));
          const float2 vl = cuda_util::unpack_bf16(*reinterpret_cast<const std::uint32_t*>(&s.v[1][r][c]));
          const float x0 = acc[nt][2 * hf], x1 = acc[nt][2 * hf + 1];
          sum += x0 * (vh.x + vl.x) + x1 * (vh.y + vl.y);
          if (r < Cn) {
            store_as(p.dv, p.dv_t, off(r, c0, c), x0 * s.beta[r]);
            store_as(p.dv, p.dv_t, off(r, c0, c + 1), x1 * s.beta[r]);
          }
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if (t == 0 && r < Cn) atomicAdd(&s.dbp[r], sum);
      }
    }
  }
  // pass-1 results: gate factors, scratch
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int r = m0 + g + 8 * hf;
    if (r >= Cn) continue;
    const i64 row = (t0 + r) * p.HV + hv;
#pragma unroll
    for (int nt = 0; nt < NK; ++nt) {
      const int c = nk0 + nt * 8 + 2 * t;
      const float2 br = p.kda ? ld2(p.b + row * p.Kg + c) : make_float2(p.b[row], p.b[row]);
      st2(p.dqe + row * K + c, p.scale * __expf(br.x) * aq[nt][2 * hf], p.scale * __expf(br.y) * aq[nt][2 * hf + 1]);
      st2(p.dw + row * K + c, -aw[nt][2 * hf], -aw[nt][2 * hf + 1]);
    }
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int c = n64 + nt * 8 + 2 * t;
      st2(p.dAqk + row * kC + c, c <= r ? p.scale * aA[nt][2 * hf] : 0.f, c + 1 <= r ? p.scale * aA[nt][2 * hf + 1] : 0.f);
      st2(p.dTv + row * kC + c, c < r ? aT[nt][2 * hf] : 0.f, c + 1 < r ? aT[nt][2 * hf + 1] : 0.f);
    }
  }
  // pass 2: dk_e = v_new dh^T
  float ak[NK][4] = {};
#pragma unroll 1
  for (int vt = p.nvt - 1; vt >= 0; --vt) {
    const int c0 = vt * kVT;
    if (vt != p.nvt - 1) {
      __syncthreads();
      fill_split<K, kVT, 72>(&s.D[0][0][0], &s.D[1][0][0], [&](int r, int c) { return ld4_planes(Dg + static_cast<i64>(r) * V + c0 + c, p.plane_kv); });
      fill_split<kC, kVT, 72>(&s.vn[0][0][0], &s.vn[1][0][0], [&](int r, int c) { return r < Cn ? ld4_planes(p.vnb + off(r, c0, c), p.plane_tok) : kZero4; });
      __syncthreads();
    }
    warp_mma_split<NK, false, true>(ak, &s.vn[0][0][0], &s.vn[1][0][0], 72, m0, &s.D[0][0][0], &s.D[1][0][0], 72, nk0, 0,
                                    kVT / 16, lane);
  }
  const i64 bLrow = ((t0 + Cn - 1) * p.HV + hv) * p.Kg;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int r = m0 + g + 8 * hf;
    if (r >= Cn) continue;
    const i64 row = (t0 + r) * p.HV + hv;
#pragma unroll
    for (int nt = 0; nt < NK; ++nt) {
      const int c = nk0 + nt * 8 + 2 * t;
      const float2 br = p.kda ? ld2(p.b + row * p.Kg + c) : make_float2(p.b[row], p.b[row]);
      const float2 bL = p.kda ? ld2(p.b + bLrow + c) : make_float2(p.b[bLrow], p.b[bLrow]);
      st2(p.dke + row * K + c, __expf(fminf(bL.x - br.x, 0.f)) * ak[nt][2 * hf], __expf(fminf(bL.y - br.y, 0.f)) * ak[nt][2 * hf + 1]);
    }
  }
  if (tid < K) p.hd[(static_cast<i64>(ci.gidx) * p.HV + hv) * K + tid] = hdsum;
  __syncthreads();
  if (tid < Cn) p.dbp[(t0 + tid) * p.HV + hv] = s.dbp[tid];
}

// grad_k's intra-chunk terms, the last row's bL terms and the reverse cumsum -> dg, dbeta (shared by
// grad_k_kernel). q_s, k_s, b_s, dw_s (db on entry): [64][K+1]; dA_s, dT_s (dAkk):
// [64][65]; red_s: 64 floats of scratch. Starts after a barrier.
template <int K>
__device__ __forceinline__ void grad_k_intra_tail(const Params& p, const ChunkInfo& ci, int hv, const float* q_s,
                                                  const float* k_s, const float* b_s, float* dw_s, const float* dA_s,
                                                  const float* dT_s, const float* beta_s, float* dbt_s, const float* bL_s,
                                                  const float* cs_s, float* red_s) {
  constexpr int KP = K + 1;
  const int tid = threadIdx.x, Cn = ci.Cn;
  const i64 t0 = ci.t0;
  // Intra-chunk terms, thread per (channel c, 16-row sub-chunk X of rows x0 + i); a warp covers 32
  // channels of one X (K % 32 == 0). Pairs across sub-chunks factor through a reference row between
  // them (spec section 5): row x0 for the rows of X as queries of earlier keys, row x0 + 15 for them
  // as keys of later rows, so both factors are e^(non-positive) and one exp serves 16 rows. Pairs
  // inside X take the exact e^(b_i - b_j), shared by the query and the key direction.
  //   dqi[x] = sum_{j<=x} dA[x][j] k_j e^(b_x-b_j),  kr[x] = sum_{j<x} dAkk[x][j] k_j e^(b_x-b_j),
  //   dkt[x] = sum_{r>=x} (dA[r][x] q_r + dAkk[r][x] beta_r k_r) e^(b_r-b_x)
#pragma unroll 1
  for (int item = tid; item < 4 * K; item += kNT) {
    const int c = item % K, x0 = 16 * (item / K);
    if (x0 >= Cn) continue;  // warp-uniform
    float bq[16], kq[16], qq[16], dq0[16], dk0[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int x = x0 + i;
      bq[i] = b_s[x * KP + c];
      kq[i] = k_s[x * KP + c];
      qq[i] = q_s[x * KP + c];
      const i64 gx = ((t0 + x) * p.HV + hv) * K + c;
      dq0[i] = x < Cn ? p.dqe[gx] : 0.f;  // issued early, used at the end
      dk0[i] = x < Cn ? p.dke[gx] : 0.f;
    }
    float dqi[16] = {}, kr[16] = {}, dkt[16] = {};
    {  // earlier keys j < x0, reference row x0
      const float bref = bq[0];
#pragma unroll 2
      for (int j = 0; j < x0; ++j) {
        const float kt = k_s[j * KP + c] * __expf(bref - b_s[j * KP + c]);
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          dqi[i] += dA_s[(x0 + i) * kP64 + j] * kt;
          kr[i] += dT_s[(x0 + i) * kP64 + j] * kt;
        }
      }
#pragma unroll
      for (int i = 1; i < 16; ++i) {
        const float e = __expf(bq[i] - bref);
        dqi[i] *= e;
        kr[i] *= e;
      }
    }
    {  // later rows r > x0 + 15, reference row x0 + 15 (padded rows carry the last valid gate)
      const float bref = bq[15];
#pragma unroll 2
      for (int r = x0 + 16; r < Cn; ++r) {
        const float e = __expf(b_s[r * KP + c] - bref);
        const float qt = q_s[r * KP + c] * e, kt = beta_s[r] * k_s[r * KP + c] * e;
#pragma unroll
        for (int i = 0; i < 16; ++i) dkt[i] += dA_s[r * kP64 + x0 + i] * qt + dT_s[r * kP64 + x0 + i] * kt;
      }
#pragma unroll
      for (int i = 0; i < 15; ++i) dkt[i] *= __expf(bref - bq[i]);
    }
    // pairs inside X (i >= j)
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const float a_row = qq[i], l_row = beta_s[x0 + i] * kq[i];
#pragma unroll
      for (int j = 0; j <= i; ++j) {
        const float e = __expf(bq[i] - bq[j]);
        const float a = dA_s[(x0 + i) * kP64 + x0 + j], l = dT_s[(x0 + i) * kP64 + x0 + j];  // dAkk[i][i] = 0
        dqi[i] += a * kq[j] * e;
        kr[i] += l * kq[j] * e;
        dkt[j] += (a * a_row + l * l_row) * e;
      }
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int x = x0 + i;
      if (x < Cn) {  // warp-uniform
        const i64 gx = ((t0 + x) * p.HV + hv) * K + c;
        const float dkrow = beta_s[x] * kr[i];
        p.dqe[gx] = dq0[i] + dqi[i];
        p.dke[gx] = dk0[i] + dkrow + dkt[i];
        dw_s[x * KP + c] += qq[i] * dqi[i] + (dkrow - dkt[i]) * kq[i];
        const float bsum = warp_sum(kr[i] * kq[i]);
        if ((tid & 31) == 0) atomicAdd(&dbt_s[x], bsum);
      }
    }
  }
  __syncthreads();
  // last row: the terms through bL, e^bL rowsum(H dh) + colsum(k dk_e); reverse cumsum -> dg
  if (tid < K) {
    const int c = tid;
    dw_s[(Cn - 1) * KP + c] += __expf(bL_s[c]) * p.hd[(static_cast<i64>(ci.gidx) * p.HV + hv) * K + c] + cs_s[c];
  }
  __syncthreads();
  if (p.kda) {
    if (tid < K) {
      const int c = tid;
      float acc = 0.f;
      for (int r = Cn - 1; r >= 0; --r) {
        acc += dw_s[r * KP + c];
        p.dgv[((t0 + r) * p.HV + hv) * K + c] = acc;
      }
    }
  } else {
    // GDN: row sums, then the reverse cumsum
    for (int r = threadIdx.x >> 5; r < Cn; r += kNT / 32) {
      float s = 0.f;
      for (int c = threadIdx.x & 31; c < K; c += 32) s += dw_s[r * KP + c];
      s = warp_sum(s);
      if ((threadIdx.x & 31) == 0) red_s[r] = s;
    }
    __syncthreads();
    if (tid == 0) {
      float acc = 0.f;
      for (int r = Cn - 1; r >= 0; --r) {
        acc += red_s[r];
        p.dgv[(t0 + r) * p.HV + hv] = acc;
      }
    }
  }
  if (tid < Cn) p.dbp[(t0 + tid) * p.HV + hv] = dbt_s[tid];
}

// ---------------------------------------------------------------------------------------------
// D2: per (chunk, value head) WY backward, intra-chunk gated products, db -> dg.
// smem: q, k, b, dw(then db) [64][K+1]; Tinv, dAqk, dT(then dAkk), X [64][65]; beta, dbeta [64]
template <int K>
__global__ void __launch_bounds__(kNT, 1) grad_k_kernel(const Params p) {
  extern __shared__ float sm[];
  constexpr int KP = K + 1, TN = K / 16;
  float* q_s = sm;
  float* k_s = q_s + kC * KP;
  float* b_s = k_s + kC * KP;
  float* dw_s = b_s + kC * KP;
  float* T_s = dw_s + kC * KP;
  float* dA_s = T_s + kC * kP64;
  float* dT_s = dA_s + kC * kP64;
  float* X_s = dT_s + kC * kP64;
  float* beta_s = X_s + kC * kP64;
  float* dbt_s = beta_s + kC;
  float* bL_s = dbt_s + kC;
  float* cs_s = bL_s + K;  // colsum(k dk_e)
  const int hv = blockIdx.y, h = hv / p.G, tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  const ChunkInfo ci = chunk_info(p, blockIdx.x);
  const i64 t0 = ci.t0;
  const int Cn = ci.Cn;
  load_rows<K>(q_s, KP, p.qn, t0, Cn, p.H, h, K, 0);
  load_rows<K>(k_s, KP, p.kn, t0, Cn, p.H, h, K, 0);
  load_gate_rows<K>(p, b_s, bL_s, t0, Cn, hv);
  load_rows<K>(dw_s, KP, p.dw, t0, Cn, p.HV, hv, K, 0);
  load_rows<kC>(T_s, kP64, p.Tinv, t0, Cn, p.HV, hv, kC, 0);
  load_rows<kC>(dA_s, kP64, p.dAqk, t0, Cn, p.HV, hv, kC, 0);
  load_rows<kC>(dT_s, kP64, p.dTv, t0, Cn, p.HV, hv, kC, 0);
  if (tid < kC) {
    beta_s[tid] = tid < Cn ? p.bt[(t0 + tid) * p.HV + hv] : 0.f;
    dbt_s[tid] = tid < Cn ? p.dbp[(t0 + tid) * p.HV + hv] : 0.f;
  }
  if (tid < K) cs_s[tid] = 0.f;
  __syncthreads();
  // dT = tril_strict((dw kgb^T + dTv) * beta_j), kgb = k e^b. Thread per key row j (tid % 64) and
  // the 16 rows tid / 64 + 4i: each e^b(j, c) is taken once, dw rows are warp-wide broadcasts.
  {
    const int j = tid & 63, rb = tid >> 6;
    const float* kj = k_s + j * KP;
    const float* bj = b_s + j * KP;
    float acc[kC / 4] = {};
#pragma unroll 2
    for (int c = 0; c < K; ++c) {
      const float kb = p.kda ? kj[c] * __expf(bj[c]) : kj[c];
#pragma unroll
      for (int i = 0; i < kC / 4; ++i) acc[i] += dw_s[(rb + 4 * i) * KP + c] * kb;
    }
    const float ej = p.kda ? 1.f : __expf(bj[0]);
#pragma unroll
    for (int i = 0; i < kC / 4; ++i) {
      const int r = rb + 4 * i;
      float* d = dT_s + r * kP64 + j;
      *d = (j < r && r < Cn) ? (acc[i] * ej + *d) * beta_s[j] : 0.f;
    }
  }
  __syncthreads();
  {  // X = Tinv^T dT
    float acc[4][4] = {};
    for (int m = 0; m < kC; ++m) {
      float a[4], bb[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = T_s[m * kP64 + ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) bb[j] = dT_s[m * kP64 + tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * bb[j];
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) X_s[(ty + 16 * i) * kP64 + tx + 16 * j] = acc[i][j];
  }
  __syncthreads();
  {  // dAkk = tril_strict(-(X Tinv^T)) into dT_s
    float acc[4][4] = {};
    for (int m = 0; m < kC; ++m) {
      float a[4], bb[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = X_s[(ty + 16 * i) * kP64 + m];
#pragma unroll
      for (int j = 0; j < 4; ++j) bb[j] = T_s[(tx + 16 * j) * kP64 + m];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * bb[j];
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int r = ty + 16 * i, c = tx + 16 * j;
        dT_s[r * kP64 + c] = (c < r) ? -acc[i][j] : 0.f;
      }
  }
  // dkgb = Tinv^T dw (64 x K); then db, dk partials
  float dkgb[4][TN] = {};
  for (int m = 0; m < kC; ++m) {
    float a[4], bb[TN];
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = T_s[m * kP64 + ty + 16 * i];
#pragma unroll
    for (int j = 0; j < TN; ++j) bb[j] = dw_s[m * KP + tx + 16 * j];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) dkgb[i][j] += a[i] * bb[j];
  }
  __syncthreads();  // dw_s is free: it becomes db
  {
    float rsum[4] = {}, csum[TN] = {};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = ty + 16 * i;
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const int c = tx + 16 * j;
        float db = 0.f;
        if (r < Cn) {
          const i64 x = ((t0 + r) * p.HV + hv) * K + c;
          const float eb = __expf(b_s[r * KP + c]);
          const float kgb = k_s[r * KP + c] * eb;
          const float dke = p.dke[x];  // still the pure inter part dk_e
          rsum[i] += dkgb[i][j] * kgb;
          csum[j] += k_s[r * KP + c] * dke;
          db = q_s[r * KP + c] * p.dqe[x] - k_s[r * KP + c] * dke + kgb * dkgb[i][j] * beta_s[r];
          p.dke[x] = dke + dkgb[i][j] * eb * beta_s[r];  // dk partial (per value head)
        }
        dw_s[r * KP + c] = db;
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (ty + 16 * i < Cn) atomicAdd(&dbt_s[ty + 16 * i], rsum[i]);
#pragma unroll
    for (int j = 0; j < TN; ++j) atomicAdd(&cs_s[tx + 16 * j], csum[j]);
  }
  __syncthreads();
  grad_k_intra_tail<K>(p, ci, hv, q_s, k_s, b_s, dw_s, dA_s, dT_s, beta_s, dbt_s, bL_s, cs_s, X_s);
}

// ---------------------------------------------------------------------------------------------
// D1 / D2 on tensor cores: grad_v4 / grad_k_v2 (the simt variant runs grad_v_kernel and the SIMT
// grad_k_kernel above). Their own file, so that D1 / D2 and the state passes change independently.
#include "ops/delta/cuda/chunk_delta_bwd_grad.cuh"

// ---------------------------------------------------------------------------------------------
// E1: dq, dk: GVA group sum over the value heads of each q/k head, then the l2norm backward.
__global__ void post_qk_kernel(const Params p) {
  const i64 item = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (item >= p.R * p.H) return;
  const i64 row = item / p.H;
  const int h = static_cast<int>(item % p.H), K = p.K;
  for (int which = 0; which < 2; ++which) {
    const float* src = which ? p.dke : p.dqe;
    const float* y = (which ? p.kn : p.qn) + item * K;
    float d[8], yy[8];
    float dot = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int c = lane + 32 * e;
      d[e] = 0.f;
      yy[e] = 0.f;
      if (c < K) {
        for (int gi = 0; gi < p.G; ++gi) d[e] += src[(row * p.HV + h * p.G + gi) * K + c];
        yy[e] = y[c];
      }
      dot += d[e] * yy[e];
    }
    if (p.l2norm) {
      dot = warp_sum(dot);
      const float rs = (which ? p.rk : p.rq)[item];
#pragma unroll
      for (int e = 0; e < 8; ++e) d[e] = rs * (d[e] - dot * yy[e]);
    }
    void* dst = which ? p.dk : p.dq;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int c = lane + 32 * e;
      if (c < K) store_as(dst, p.dq_t, item * K + c, d[e]);
    }
  }
}

// E2: dbeta through the sigmoid, dg through the in-kernel gate; per-row dA_log contributions.
__global__ void post_gate_kernel(const Params p) {
  const i64 item = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (item >= p.R * p.HV) return;
  const int hv = static_cast<int>(item % p.HV);
  if (lane == 0) {
    float db = p.dbp[item];
    if (p.beta_sigmoid) {
      const float s = sigmoidf_(load_as_float(p.beta, p.beta_t, item));
      db *= p.beta_mult * s * (1.f - s);
    }
    store_as(p.dbeta, p.dbeta_t, item, db);
  }
  const float a = p.has_A_log ? __expf(p.A_log[hv]) : 1.f;
  float dA = 0.f;
  for (int c = lane; c < p.Kg; c += 32) {
    const i64 gi = item * p.Kg + c;
    const float dy = p.dgv[gi];
    float dx = dy;
    if (p.gate_mode != kGateGiven) {
      const float x = load_as_float(p.g, p.g_t, gi) + (p.dt_bias ? p.dt_bias[hv * p.Kg + c] : 0.f);
      if (p.gate_mode == kGateSoftplus) {
        dx = -a * sigmoidf_(x) * dy;
        dA += dy * (-a * softplusf_(x));
      } else {
        const float s = sigmoidf_(a * x);
        dx = dy * p.lower_bound * s * (1.f - s) * a;
        dA += dx * x;
      }
      p.dgv[gi] = dx;
    }
    store_as(p.dg, p.dg_t, gi, dx);
  }
  if (p.dA_log) {
    dA = warp_sum(dA);
    if (lane == 0) p.dAc[item] = dA;
  }
}

// F: parameter gradients, one block per value head, double sums in a fixed order.
__global__ void param_reduce_kernel(const Params p) {
  const int hv = blockIdx.x, tid = threadIdx.x;
  __shared__ double red[256];
  if (p.dA_log) {
    double s = 0.0;
    for (i64 r = tid; r < p.R; r += blockDim.x) s += p.dAc[r * p.HV + hv];
    red[tid] = s;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
      if (tid < o) red[tid] += red[tid + o];
      __syncthreads();
    }
    if (tid == 0) p.dA_log[hv] = static_cast<float>(red[0]);
  }
  if (p.ddt) {
    for (int c = tid; c < p.Kg; c += blockDim.x) {
      double s = 0.0;
      for (i64 r = 0; r < p.R; ++r) s += p.dgv[(r * p.HV + hv) * p.Kg + c];
      p.ddt[hv * p.Kg + c] = static_cast<float>(s);
    }
  }
}

// B and C on wgmma
#include "ops/delta/cuda/delta_bwd_state_wg.cuh"

// ---------------------------------------------------------------------------------------------
// Host side

template <int K>
struct SmemSize {
  static constexpr int KP = K + 1;
  static constexpr size_t D1 = sizeof(GradVSmem<K>);
  static constexpr size_t D2 = sizeof(float) * (4 * kC * KP + 4 * kC * kP64 + 2 * kC + 2 * K);
};
static_assert(SmemSize<128>::D2 <= 227 * 1024, "grad_k_kernel<128> shared memory over the sm_90 limit");

template <class Kern>
void launch(Kern kern, dim3 grid, int threads, size_t smem, cudaStream_t st, const Params& prm, const char* name) {
  if (grid.x == 0 || grid.y == 0) return;
  if (smem > 48 * 1024) cuda_util::set_max_dynamic_smem(kern, static_cast<int>(smem), name);  // once per device
  kern<<<grid, threads, smem, st>>>(prm);
  cuda_util::check(cudaGetLastError(), name);
}

// The same as clusters of `cluster` CTAs along x (thread block clusters; grid.x a multiple of it): the K = 256 kernels,
// whose CTA pairs split the channels (StateSlice in delta_bwd_state_wg.cuh, grad_k_v2 in chunk_delta_bwd_grad.cuh).
// cluster = 1 is the plain launch.
template <class Kern>
void launch_clusters(Kern kern, dim3 grid, int threads, size_t smem, cudaStream_t st, const Params& prm, const char* name,
                     unsigned cluster) {
  if (cluster == 1) return launch(kern, grid, threads, smem, st, prm, name);
  if (grid.x == 0 || grid.y == 0) return;
  if (smem > 48 * 1024) cuda_util::set_max_dynamic_smem(kern, static_cast<int>(smem), name);  // once per device
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = cluster;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  cuda_util::check(cudaLaunchKernelEx(&cfg, kern, prm), name);
}

bool aligned16(const void* ptr) { return (reinterpret_cast<std::uintptr_t>(ptr) & 15u) == 0; }

// Which element-wise stages fold into the chunk kernels; decided before the scratch is sized (qk_inline
// leaves qn / kn out of it).
void choose_fusions(Params& prm, DeltaBwdKernels kernels) {
  // the v2 element-wise kernels use vector loads / stores of q, k, dq, dk (K / 32 elements per lane); q, k
  // (and v, g) are 16-byte aligned by the front door's require_aligned16, the outputs may not be
  prm.qk_v2 = kernels != DeltaBwdKernels::scalar_qk && aligned16(prm.dq) && aligned16(prm.dk);
  const bool k256 = prm.K == 256;
  const bool simt = kernels == DeltaBwdKernels::simt && prm.K <= 128;
  // post_qk's work moves into grad_k_v2's tail where one value head owns each q/k head (no GVA sum) and
  // post_qk_v2 would run; not with the SIMT chunk kernels. At K = 256 the CTA pair swaps its row dots (PairRowDots).
  prm.fuse_qk = prm.G == 1 && prm.qk_v2 && !simt;
  // and prep_qk's into chunk_prep_v2 and grad_k_v2 where q and k are bf16 (their 16-byte row pieces). At K = 256
  // chunk_prep_v2 normalises whole rows and writes rq / rk; grad_k_v2's halves and post_qk_v2 scale the raw rows by
  // them (post_qk_v2 only: the old post_qk reads prep_qk's rows)
  prm.qk_inline = (prm.fuse_qk || (k256 && prm.qk_v2)) && prm.qk_t == 2;
  // post_gate's work moves there too when the gate is given (dg is the reverse cumsum itself; dbeta's
  // sigmoid backward from beta after the sigmoid) and no dA_log / ddt_bias partials are wanted
  prm.fuse_gate = prm.gate_mode == kGateGiven && !prm.dA_log && !prm.ddt && !simt &&
                  (!prm.kda || prm.dg_t == 1 || prm.dg_t == 2);
}

template <int K>
void run_pipeline(const Params& prm, int total_chunks, cudaStream_t st, DeltaBwdKernels kernels) {
  using S = SmemSize<K>;
  const dim3 chunk_grid(static_cast<unsigned>(total_chunks), static_cast<unsigned>(prm.HV));
  const dim3 seq_grid(static_cast<unsigned>(static_cast<i64>(prm.N) * prm.HV * prm.nvt));
  const auto warps = [](i64 n) { return dim3(static_cast<unsigned>((n + 7) / 8)); };
  // the simt variant declines K = 256 (variants.cpp), whose chunk kernels exist only as grad_v4 / grad_k_v2
  const bool qk_v2 = prm.qk_v2 != 0, simt = K <= 128 && kernels == DeltaBwdKernels::simt;
  constexpr unsigned kStateCl = StateSlice<K>::CL;  // CTAs per state block (2 at K = 256: the channel halves)
  const dim3 state_grid(seq_grid.x * kStateCl);
  if (!prm.qk_inline) {
    if (qk_v2)
      launch(prep_qk_v2_kernel<K>, warps(prm.R * prm.H), 256, 0, st, prm, "delta_bwd prep_qk");
    else
      launch(prep_qk_kernel, warps(prm.R * prm.H), 256, 0, st, prm, "delta_bwd prep_qk");
  }
  // chunk_prep_v2 (two CTAs per SM, fragments built in registers, 3xTF32 merges): on the H200 2.74 ms
  // against the first tensor-core chunk_prep's 6.98 ms at KDA B1_T8192_H96_D128 and 0.109 against the
  // SIMT kernel's 0.351 ms at B8_T1024_H8_D64 (docs/kernels/chunk_delta_bwd.md).
  // two CTAs per SM need the whole carveout as shared memory (a hint; the default may pick less)
  cuda_util::set_func_attribute(chunk_prep_v2_kernel<K>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                cudaSharedmemCarveoutMaxShared, "delta_bwd chunk_prep carveout");
  launch(chunk_prep_v2_kernel<K>, chunk_grid, kNT, prep_v2_smem<K>(), st, prm, "delta_bwd chunk_prep");
  // The two state passes are independent (C reads chunk_prep's images and dO, not B's H_n or v_new):
  // C on a side stream next to B, so that their CTAs (one per SM, 192 each at B1_T8192_H96_D128: two
  // waves apiece) fill the SMs together. C first: its CTAs run longer.
  const cudaStream_t side = cuda_util::fork_side_stream(st);
  try {
    launch_clusters(state_bwd_wg_kernel<K>, state_grid, 256, kStateBwdWgSmem<K>, side, prm, "delta_bwd state_bwd_wg", kStateCl);
    launch_clusters(state_fwd_wg_kernel<K>, state_grid, 256, kStateFwdWgSmem<K>, st, prm, "delta_bwd state_fwd_wg", kStateCl);
  } catch (...) {
    cuda_util::join_side_stream(st, side);  // the scratch is freed on st: nothing may still use it on side
    throw;
  }
  cuda_util::join_side_stream(st, side);
  // grad_v4 (K halves, bf16 planes by cp.async; two CTAs per SM with bf16 inputs, one with others: Gen) where dO
  // and dv are 16-byte aligned (v is, above); else grad_v (every operand through registers as hi + lo planes).
  // (K = 256: dO and dv are 16-byte aligned, backward() refuses them otherwise)
  if (K <= 128 && (simt || !aligned16(prm.d_o) || !aligned16(prm.dv))) {
    if constexpr (K <= 128) launch(grad_v_kernel<K>, chunk_grid, kNT, S::D1, st, prm, "delta_bwd grad_v");
  } else {
    const auto run = [&](auto kernel, size_t smem) {
      // two CTAs per SM need the whole carveout as shared memory (a hint)
      cuda_util::set_func_attribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared,
                                    "delta_bwd grad_v carveout");
      launch(kernel, dim3(grad_v4_parts<K>() * chunk_grid.x, chunk_grid.y), kNT, smem, st, prm, "delta_bwd grad_v");
    };
    if (prm.h_lo) run(grad_v4_kernel<K, true>, grad_v4_smem<K, true>());
    else run(grad_v4_kernel<K, false>, grad_v4_smem<K, false>());
  }
  constexpr unsigned kGradKCl = GradKV2Smem<K>::kPair ? 2 : 1;  // CTA pairs over the channel halves at K = 256
  const auto run_grad_k = [&](auto kernel) {
    launch_clusters(kernel, dim3(kGradKCl * chunk_grid.x, chunk_grid.y), kNT, grad_k_v2_smem<K>(), st, prm, "delta_bwd grad_k",
                    kGradKCl);
  };
  if (simt) {
    if constexpr (K <= 128) launch(grad_k_kernel<K>, chunk_grid, kNT, S::D2, st, prm, "delta_bwd grad_k");
  } else if (!prm.kda) {
    run_grad_k(grad_k_v2_kernel<K, TailTcScalarGate>);
  } else if (prm.safe) {
    run_grad_k(grad_k_v2_kernel<K, TailTcRefRows>);
  } else {
    run_grad_k(grad_k_v2_kernel<K, TailSimtExact>);
  }
  if (!prm.fuse_qk) {  // else done by grad_k_v2
    if (qk_v2)
      launch(post_qk_v2_kernel<K>, warps(prm.R * prm.H), 256, 0, st, prm, "delta_bwd post_qk");
    else
      launch(post_qk_kernel, warps(prm.R * prm.H), 256, 0, st, prm, "delta_bwd post_qk");
  }
  if (!prm.fuse_gate) launch(post_gate_kernel, warps(prm.R * prm.HV), 256, 0, st, prm, "delta_bwd post_gate");
  if (prm.dA_log || prm.ddt) launch(param_reduce_kernel, dim3(static_cast<unsigned>(prm.HV)), 256, 0, st, prm, "delta_bwd param_reduce");
}

int code(DType d) { return static_cast<int>(d); }

void require_float(const char* name, const TensorView& t) {
  if (!is_floating(t.dtype))
    throw_unsupported(name, std::string("dtype ") + std::string(dtype_name(t.dtype)) + " on the cuda backend",
                      "a floating dtype");
  if (!t.is_contiguous()) throw_unsupported(name, "a non-contiguous tensor on the cuda backend", "contiguous tensors");
}

RunInfo backward(const Problem& p, const DeltaRuleArgs& a, const AttentionGradInputs& gin, const DeltaRuleGrads& gr,
                 const ExecOptions& opts, DeltaBwdKernels kernels, bool kda, std::optional<double> lb, bool safe, const char* op) {
  if (p.K != 64 && p.K != 128 && p.K != 256)
    throw_unsupported("q", std::string("head dim K = ") + std::to_string(p.K) + " for the cuda " + op + " backward",
                      "K in {64, 128, 256}");
  if (p.V % kVT != 0 || p.V > 256)
    throw_unsupported("v", std::string("head dim V = ") + std::to_string(p.V) + " for the cuda " + op + " backward",
                      "V in {64, 128, 192, 256}");
  for (const auto& [n, t] : {std::pair<const char*, const TensorView*>{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"g", &a.g},
                             {"beta", &a.beta}, {"do", &gin.d_o}, {"dq", &gr.dq}, {"dk", &gr.dk}, {"dv", &gr.dv},
                             {"dg", &gr.dg}, {"dbeta", &gr.dbeta}})
    require_float(n, *t);
  for (const auto& [n, t] : {std::pair<const char*, const std::optional<TensorView>*>{"initial_state", &a.initial_state},
                             {"dht", &gin.d_final_state}, {"d_initial_state", &gr.d_initial_state}, {"A_log", &a.A_log},
                             {"dt_bias", &a.dt_bias}, {"d_A_log", &gr.d_A_log}, {"d_dt_bias", &gr.d_dt_bias}})
    if (*t) require_float(n, **t);
  for (const auto& [n, t] : {std::pair<const char*, const std::optional<TensorView>*>{"initial_state", &a.initial_state},
                             {"A_log", &a.A_log}, {"dt_bias", &a.dt_bias}})
    if (*t && (*t)->dtype != DType::f32)
      throw_unsupported(n, std::string("dtype ") + std::string(dtype_name((*t)->dtype)) + " on the cuda backend", "float32");
  if (gr.d_initial_state && gr.d_initial_state->dtype != DType::f32)
    throw_unsupported("d_initial_state", "a non-float32 tensor", "float32");
  if (gr.d_A_log && gr.d_A_log->dtype != DType::f32) throw_unsupported("d_A_log", "a non-float32 tensor", "float32");
  if (gr.d_dt_bias && gr.d_dt_bias->dtype != DType::f32) throw_unsupported("d_dt_bias", "a non-float32 tensor", "float32");
  // chunk_prep_v2 loads v as vectors, and the forward took these inputs under the same rule; dO and the
  // gradients have scalar fallbacks (grad_v, prep_qk / post_qk) where they are not aligned.
  require_aligned16({{"q", &a.q}, {"k", &a.k}, {"v", &a.v}, {"g", &a.g}}, std::string(" (the CUDA ") + op + " backward)");
  // K = 256 has no scalar-fallback grad_v: dO and dv by 16-byte pieces (grad_v4)
  if (p.K == 256) require_aligned16({{"do", &gin.d_o}, {"dv", &gr.dv}}, std::string(" (the CUDA ") + op + " backward at K = 256)");

  auto st = static_cast<cudaStream_t>(opts.stream);
  Params prm{};
  prm.q = a.q.data;
  prm.k = a.k.data;
  prm.v = a.v.data;
  prm.g = a.g.data;
  prm.beta = a.beta.data;
  prm.A_log = a.A_log ? a.A_log->ptr<const float>() : nullptr;
  prm.dt_bias = a.dt_bias ? a.dt_bias->ptr<const float>() : nullptr;
  prm.h0 = a.initial_state ? a.initial_state->ptr<const float>() : nullptr;
  prm.d_o = gin.d_o.data;
  prm.dht = gin.d_final_state ? gin.d_final_state->data : nullptr;
  prm.qk_t = code(a.q.dtype);
  if (a.k.dtype != a.q.dtype) throw_unsupported("k", "a dtype different from q's", "the dtype of q");
  prm.v_t = code(a.v.dtype);
  prm.g_t = code(a.g.dtype);
  prm.beta_t = code(a.beta.dtype);
  prm.do_t = code(gin.d_o.dtype);
  prm.dht_t = gin.d_final_state ? code(gin.d_final_state->dtype) : 1;
  prm.dq = gr.dq.data;
  prm.dk = gr.dk.data;
  prm.dv = gr.dv.data;
  prm.dg = gr.dg.data;
  prm.dbeta = gr.dbeta.data;
  prm.dh0 = gr.d_initial_state ? gr.d_initial_state->ptr<float>() : nullptr;
  prm.dA_log = gr.d_A_log ? gr.d_A_log->ptr<float>() : nullptr;
  prm.ddt = gr.d_dt_bias ? gr.d_dt_bias->ptr<float>() : nullptr;
  if (gr.dk.dtype != gr.dq.dtype) throw_unsupported("dk", "a dtype different from dq's", "the dtype of dq");
  prm.dq_t = code(gr.dq.dtype);
  prm.dv_t = code(gr.dv.dtype);
  prm.dg_t = code(gr.dg.dtype);
  prm.dbeta_t = code(gr.dbeta.dtype);
  prm.N = static_cast<int>(p.N);
  prm.H = static_cast<int>(p.H);
  prm.HV = static_cast<int>(p.HV);
  prm.G = static_cast<int>(p.group());
  prm.K = static_cast<int>(p.K);
  prm.V = static_cast<int>(p.V);
  prm.Kg = kda ? prm.K : 1;
  prm.nvt = prm.V / kVT;
  prm.R = p.B * p.T;
  prm.scale = static_cast<float>(p.scale);
  prm.kda = kda;
  prm.gate_mode = a.use_gate_in_kernel ? ((kda && lb) ? kGateLowerBound : kGateSoftplus) : kGateGiven;
  prm.has_A_log = a.A_log.has_value();
  prm.lower_bound = lb ? static_cast<float>(*lb) : 0.f;
  prm.beta_sigmoid = a.use_beta_sigmoid_in_kernel;
  prm.beta_mult = a.allow_neg_eigval ? 2.f : 1.f;
  prm.l2norm = a.use_qk_l2norm_in_kernel;
  prm.safe = kda && safe;

  // sequences: dense inputs upload nothing (the kernels derive each sequence from T, as the forward's);
  // varlen inputs upload their descriptors, and the kernels find a chunk's sequence by binary search
  const cuda_util::DeviceSeqs seqs = cuda_util::upload_sequences(p, st);
  const int total_chunks = seqs.total_chunks;

  // scratch (fp32 slices and the state passes' bf16 planes), carved from one allocation
  const i64 R = prm.R, H = p.H, HV = p.HV, K = p.K, V = p.V, Kg = prm.Kg, NT = total_chunks;
  // H_n as one bf16 plane where every input grad_v4 multiplies is bf16 (q / k, v, dO), else hi + lo. h_lo == 0 also
  // selects grad_v4<K, false>, which reads dO and v as bf16 by cp.async: the two must keep the same rule.
  const i64 h_lo = (prm.qk_t == 2 && prm.v_t == 2 && prm.do_t == 2) ? 0 : 1;
  prm.h_lo = static_cast<int>(h_lo);
  prm.plane_kv = NT * HV * K * V;
  prm.plane_tok = R * HV * V;
  const i64 img_bytes = K == 64 ? sizeof(ChunkImage<64>) : K == 128 ? sizeof(ChunkImage<128>) : sizeof(ChunkImage<256>);
  const i64 img_floats = NT * HV * img_bytes / 4;
  choose_fusions(prm, kernels);
  const i64 qkn = prm.qk_inline ? 0 : R * H * K;
  const i64 sizes[] = {qkn, qkn, R * H, R * H,                   // qn kn rq rk
                       R * HV * Kg, R * HV,                      // b bt
                       R * HV * kC, R * HV * V, img_floats,      // Tinv vn img
                       (1 + h_lo) * NT * HV * K * V / 2, NT * HV * K * V,  // Hs dHs (bf16 planes)
                       R * HV * V, R * HV * V,                   // vnb dvn (bf16 hi + lo)
                       R * HV * K, R * HV * K, R * HV * K,       // dqe dke dw
                       R * HV * kC, R * HV * kC,                 // dAqk dTv
                       NT * HV * K, R * HV, R * HV * Kg, R * HV};  // hd dbp dgv dAc
  float *img = nullptr, *Hs = nullptr, *dHs = nullptr, *vnb = nullptr, *dvn = nullptr;
  float** slots[] = {&prm.qn, &prm.kn, &prm.rq, &prm.rk, &prm.b, &prm.bt, &prm.Tinv, &prm.vn, &img,
                     &Hs, &dHs, &vnb, &dvn, &prm.dqe, &prm.dke, &prm.dw, &prm.dAqk, &prm.dTv, &prm.hd,
                     &prm.dbp, &prm.dgv, &prm.dAc};
  static_assert(sizeof(sizes) / sizeof(sizes[0]) == sizeof(slots) / sizeof(slots[0]));
  i64 total = 0;
  for (i64 s : sizes) total += (s + 63) / 64 * 64;  // 256-byte aligned slices
  // From lina's pool, which keeps it mapped between calls (the default pool would unmap it at every sync).
  float* scratch = cuda_util::workspace_alloc_as<float>(static_cast<size_t>(total), st, "delta bwd scratch");
  i64 off = 0;
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
    *slots[i] = scratch + off;
    off += (sizes[i] + 63) / 64 * 64;
  }
  prm.img = img;  // 256-byte aligned, as the bulk copies need (16)
  prm.Hs = reinterpret_cast<bf16*>(Hs);
  prm.dHs = reinterpret_cast<bf16*>(dHs);
  prm.vnb = reinterpret_cast<bf16*>(vnb);
  prm.dvn = reinterpret_cast<bf16*>(dvn);
  prm.seqs = seqs.view;
  try {
    if (p.K == 64) run_pipeline<64>(prm, total_chunks, st, kernels);
    else if (p.K == 128) run_pipeline<128>(prm, total_chunks, st, kernels);
    else run_pipeline<256>(prm, total_chunks, st, kernels);
  } catch (...) {
    if (scratch) cudaFreeAsync(scratch, st);
    if (seqs.ptr) cudaFreeAsync(seqs.ptr, st);  // best effort on the error path
    throw;
  }
  cuda_util::workspace_free(scratch, st, "delta bwd scratch");
  if (seqs.ptr) cuda_util::check(cudaFreeAsync(seqs.ptr, st), "cudaFreeAsync(seqs)");
  const std::string ks = std::to_string(p.K);
  return RunInfo{"cuda",
                 {"lina::delta_bwd prep_qk", "lina::delta_bwd chunk_prep<" + ks + ">", "lina::delta_bwd state_fwd<" + ks + ">",
                  "lina::delta_bwd state_bwd<" + ks + ">", "lina::delta_bwd grad_v<" + ks + ">",
                  "lina::delta_bwd grad_k<" + ks + ">", "lina::delta_bwd post_qk", "lina::delta_bwd post_gate"}};
}

}  // namespace

RunInfo kda_backward(const Problem& p, const ChunkKdaArgs& a, const AttentionGradInputs& in, const DeltaRuleGrads& g,
                     const ExecOptions& opts, DeltaBwdKernels kernels) {
  // The middle-reference diagonal blocks of chunk_prep_v2 need every g >= -5 (the forward's rule).
  const bool safe = a.safe_gate && a.lower_bound && *a.lower_bound >= -5.0;
  return backward(p, a, in, g, opts, kernels, true, a.use_gate_in_kernel ? a.lower_bound : std::nullopt, safe, "chunk_kda");
}

RunInfo gdn_backward(const Problem& p, const ChunkGdnArgs& a, const AttentionGradInputs& in, const DeltaRuleGrads& g,
                     const ExecOptions& opts, DeltaBwdKernels kernels) {
  return backward(p, a, in, g, opts, kernels, false, std::nullopt, false, "chunk_gdn");
}

}  // namespace lina::detail::cuda
