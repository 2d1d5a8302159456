// Stage D2 on SIMT: grad_k_kernel<K> (the simt variant's D2), with its fp32 tile fills and the intra-chunk
// tail (grad_k_intra_tail).
// Part of the backward's one translation unit, chunk_delta_bwd.cu (whose anonymous namespace keeps these
// kernels and helpers internal to it); includes what it uses.
#pragma once
#include <cstdint>

#include "ops/delta/cuda/bwd/params.cuh"
#include "ops/common/cuda/cuda_common.cuh"

namespace lina::detail::cuda {
namespace {

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
  // them (docs/math.md section 5): row x0 for the rows of X as queries of earlier keys, row x0 + 15 for them
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

}  // namespace
}  // namespace lina::detail::cuda
