// chunk_kda / chunk_gdn forward on sm_90a: one fused kernel (docs/kernels/chunk_delta_fwd.md).
//
// One CTA per (sequence, value head, 64-column V tile) walks its chunks (C = 64) in order and keeps
// the fp32 state tile H[K, 64] in registers (warp w owns K rows [w*K/4, (w+1)*K/4)). Per chunk,
// everything (gate cumsum, l2norm, L, Aqk, (I+L)^-1, w, u, v_new, o, the state update) stays in
// shared memory / registers; only q, k, v, g, beta are read and o written. Tensor-core products use
// mma.sync m16n8k16 bf16 -> fp32; the (I+L)^-1 block merges use mma.sync m16n8k8 tf32 (FLA's
// precision). Gates are kept as log2 cumsums and only non-positive differences are exponentiated,
// except KDA's safe_gate diagonal sub-blocks, whose middle reference row bounds the factors by
// 2^(8*|lower_bound|*log2e) <= e^40 (spec section 5).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "lina/chunk_delta.h"
#include "lina/error.h"
#include "ops/common/backends.h"
#include "ops/common/cuda/mma_primitives.cuh"

namespace lina::detail::cuda {
namespace {

using bf16 = __nv_bfloat16;
using namespace cuda_util;

constexpr int kC = 64;        // chunk length
constexpr int kVT = 64;       // value columns per CTA
constexpr int kThreads = 256;  // 8 warps: warp w works on token rows [16(w/2), +16), half w%2 of the columns
constexpr float kLog2e = 1.4426950408889634f;

enum GateMode : int { kGateGiven = 0, kGateSoftplus = 1, kGateLowerBound = 2 };

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
  const void* cu;  // null when dense
  int cu_i64;
  int g_f32, beta_f32;
  int T, H, HV, G, V, nvt;
  float scale;
  int gate_mode;
  float lower_bound;
  int beta_sigmoid;
  float beta_mult;
  int l2norm;
  int safe;  // KDA: diagonal sub-blocks through the middle reference row (needs g >= -5)
};

template <bool KDA, int K>
struct Smem {
  // q, k, v are double-buffered: cp.async fills chunk n+1 while chunk n computes.
  alignas(16) bf16 q[2][kC][K + 8];  // normalized q; KDA later q*exp(b)
  alignas(16) bf16 k[2][kC][K + 8];  // normalized k; KDA later k*exp(bL-b)
  alignas(16) float b2[KDA ? kC : 1][K + 4];  // KDA: per-channel log2 cumsum of g
  union alignas(16) {
    float L[kC][68];     // strict-lower L (fp32)
    bf16 kb[kC][K + 8];  // KDA: k*exp(b), built after the solve
  } u1;
  union alignas(16) {
    float X[kC][68];     // (I+L)^-1 in fp32, upper blocks used as merge scratch
    bf16 graw[kC][K + 8];  // KDA: the next chunk's raw bf16 gate, prefetched once X is dead
  } u2;
  alignas(16) bf16 Tu[kC][72];       // Tinv * diag(beta)
  alignas(16) bf16 Tw[kC][72];       // GDN: Tinv * diag(beta*exp(b)); KDA unused (== Tu)
  alignas(16) bf16 Aqk[kC][72];      // scale * gated q k^T, lower incl.
  alignas(16) bf16 v[2][kC][72];     // value tile
  alignas(16) bf16 vn[kC][72];       // v_new
  alignas(16) bf16 vg[kC][72];       // GDN: v_new * exp(bL - b)
  alignas(16) bf16 H[K][72];         // bf16 copy of the state H_n (rows: key channel, cols: value)
  // Low bf16 halves (x - bf16(x)) of Tu and Aqk: u and the intra-chunk o term carry ~16 bits, since one
  // bf16 rounding of each is what costs the no-decay (g = 0) cases their margin. KDA keeps them in
  // its unused Tw / vg; v_new's low half lives in u1 (dead after S5's w product).
  alignas(16) bf16 Tl[KDA ? 1 : kC][72];
  alignas(16) bf16 Al[KDA ? 1 : kC][72];
  alignas(16) float beta[kC];
  alignas(16) float bs[kC];          // GDN: scalar log2 cumsum
  alignas(16) float bL[K];           // KDA: b2 of the chunk's last row
};

static_assert(sizeof(bf16[kC][72]) <= sizeof(float[kC][68]), "v_new low half must fit in u1");
static_assert(sizeof(Smem<true, 128>) <= 227 * 1024, "KDA K=128 shared memory over the sm_90 limit");
static_assert(sizeof(Smem<false, 128>) <= 227 * 1024, "GDN K=128 shared memory over the sm_90 limit");

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

__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : log1pf(__expf(x)); }

template <bool KDA, int K>
__global__ void __launch_bounds__(kThreads, 1) delta_fwd_kernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& s = *reinterpret_cast<Smem<KDA, K>*>(smem_raw);
  constexpr int WR = K / 16;   // warps along the state's K rows (8 or 4)
  constexpr int WC = 8 / WR;   // warps along its 64 columns (1 or 2)
  constexpr int NTS = 8 / WC;  // n8 state tiles per warp
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int wr = warp >> 1, wh = warp & 1;  // token row block, column half
  const int sm0 = 16 * (warp % WR), sc0 = (64 / WC) * (warp / WR);  // this warp's state tile

  int bid = blockIdx.x;
  const int vt = bid % p.nvt;
  bid /= p.nvt;
  const int hv = bid % p.HV;
  const int n = bid / p.HV;
  const int h = hv / p.G;
  long bos, len;
  if (p.cu) {
    if (p.cu_i64) {
      bos = static_cast<const long long*>(p.cu)[n];
      len = static_cast<const long long*>(p.cu)[n + 1] - bos;
    } else {
      bos = static_cast<const int*>(p.cu)[n];
      len = static_cast<const int*>(p.cu)[n + 1] - bos;
    }
  } else {
    bos = static_cast<long>(n) * p.T;
    len = p.T;
  }
  const int V = p.V;
  const int vcol0 = vt * kVT;
  bf16 (*const tlo)[72] = KDA ? s.Tw : s.Tl;  // low half of Tu
  bf16 (*const alo)[72] = KDA ? s.vg : s.Al;  // low half of Aqk
  bf16 (*const vlo)[72] = reinterpret_cast<bf16 (*)[72]>(&s.u1);  // low half of v_new

  // ---- state init (fp32 registers + bf16 shared copy)
  float hacc[NTS][4];
  const long sbase = (static_cast<long>(n) * p.HV + hv) * K * V;
#pragma unroll
  for (int nt = 0; nt < NTS; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = sm0 + g + (e >> 1) * 8, c = sc0 + nt * 8 + 2 * t + (e & 1);
      hacc[nt][e] = p.h0 ? p.h0[sbase + static_cast<long>(r) * V + vcol0 + c] : 0.f;
    }
  auto store_state_smem = [&]() {
#pragma unroll
    for (int nt = 0; nt < NTS; ++nt) {
      const int r = sm0 + g, c = sc0 + nt * 8 + 2 * t;
      *reinterpret_cast<uint32_t*>(&s.H[r][c]) = pack_bf16(hacc[nt][0], hacc[nt][1]);
      *reinterpret_cast<uint32_t*>(&s.H[r + 8][c]) = pack_bf16(hacc[nt][2], hacc[nt][3]);
    }
  };
  store_state_smem();

  const float decay_a = (p.gate_mode != kGateGiven && p.A_log) ? __expf(p.A_log[hv]) : 1.f;
  const long nchunks = (len + kC - 1) / kC;

  const bool g_staged = KDA && !p.g_f32;  // bf16 KDA gates go through shared memory
  auto issue_qkv = [&](long cj) {
    const long tj = bos + cj * kC;
    const int Cj = static_cast<int>(min(static_cast<long>(kC), len - cj * kC));
    const int b = static_cast<int>(cj & 1);
    constexpr int QV = K / 8;  // 16-byte pieces per row
    for (int i = tid; i < kC * QV; i += kThreads) {
      const int r = i / QV, c8 = (i % QV) * 8;
      const long off = ((tj + min(r, Cj - 1)) * p.H + h) * K + c8;
      cp_async16(&s.q[b][r][c8], p.q + off, r < Cj);
      cp_async16(&s.k[b][r][c8], p.k + off, r < Cj);
    }
    for (int i = tid; i < kC * (kVT / 8); i += kThreads) {
      const int r = i / (kVT / 8), c8 = (i % (kVT / 8)) * 8;
      cp_async16(&s.v[b][r][c8], p.v + ((tj + min(r, Cj - 1)) * p.HV + hv) * V + vcol0 + c8, r < Cj);
    }
  };
  auto issue_g = [&](long cj) {
    const long tj = bos + cj * kC;
    const int Cj = static_cast<int>(min(static_cast<long>(kC), len - cj * kC));
    constexpr int QV = K / 8;
    const bf16* gp = static_cast<const bf16*>(p.g);
    for (int i = tid; i < kC * QV; i += kThreads) {
      const int r = i / QV, c8 = (i % QV) * 8;
      cp_async16(&s.u2.graw[r][c8], gp + ((tj + min(r, Cj - 1)) * p.HV + hv) * K + c8, r < Cj);
    }
  };
  // beta (and GDN's scalar gate) of the next chunk ride in registers
  auto load_small = [&](long cj, float& bt, float& g0, float& g1) {
    const long tj = bos + cj * kC;
    const int Cj = static_cast<int>(min(static_cast<long>(kC), len - cj * kC));
    bt = (tid < Cj) ? load_any(p.beta, (tj + tid) * p.HV + hv, p.beta_f32) : 0.f;
    if (!KDA && warp == 0) {
      g0 = (2 * lane < Cj) ? load_any(p.g, (tj + 2 * lane) * p.HV + hv, p.g_f32) : 0.f;
      g1 = (2 * lane + 1 < Cj) ? load_any(p.g, (tj + 2 * lane + 1) * p.HV + hv, p.g_f32) : 0.f;
    }
  };
  float beta_nx = 0.f, g_nx0 = 0.f, g_nx1 = 0.f;
  if (nchunks > 0) {
    issue_qkv(0);
    if (g_staged) issue_g(0);
    cp_async_commit();
    load_small(0, beta_nx, g_nx0, g_nx1);
  }

  for (long ci = 0; ci < nchunks; ++ci) {
    const long t0 = bos + ci * kC;
    const int Cn = static_cast<int>(min(static_cast<long>(kC), len - ci * kC));
    const int cur = static_cast<int>(ci & 1);
    bf16 (&sq)[kC][K + 8] = s.q[cur];
    bf16 (&sk)[kC][K + 8] = s.k[cur];
    bf16 (&sv)[kC][72] = s.v[cur];
    cp_async_wait_all();
    __syncthreads();
    if (ci + 1 < nchunks) {  // the other buffer was last read before the previous chunk's final barrier
      issue_qkv(ci + 1);
      cp_async_commit();
    }

    // ---- S0: beta, gate cumsum in log2 units (rows past the sequence end: gate 0, beta 0)
    {
      if (tid < kC) {
        float bt = beta_nx;
        if (p.beta_sigmoid && tid < Cn) bt = p.beta_mult / (1.f + __expf(-bt));
        s.beta[tid] = bt;
      }
      if constexpr (KDA) {
        if (tid < K) {
          const int c = tid;
          const float bias = p.dt_bias ? p.dt_bias[hv * K + c] : 0.f;
          float cum = 0.f;
#pragma unroll 8
          for (int r = 0; r < kC; ++r) {
            float gv = 0.f;
            if (r < Cn) {
              gv = g_staged ? __bfloat162float(s.u2.graw[r][c]) : load_any(p.g, ((t0 + r) * p.HV + hv) * K + c, p.g_f32);
              if (p.gate_mode == kGateSoftplus) {
                gv = -decay_a * softplus(gv + bias);
              } else if (p.gate_mode == kGateLowerBound) {
                gv = p.lower_bound / (1.f + __expf(-decay_a * (gv + bias)));
              }
            }
            cum += gv * kLog2e;
            s.b2[r][c] = cum;
          }
          s.bL[c] = cum;  // padded rows add 0, so this is b2 of row Cn-1
        }
      } else {
        if (warp == 0) {
          const float bias = p.dt_bias ? p.dt_bias[hv] : 0.f;
          float gv[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int r = 2 * lane + e;
            gv[e] = 0.f;
            if (r < Cn) {
              gv[e] = e ? g_nx1 : g_nx0;
              if (p.gate_mode == kGateSoftplus) gv[e] = -decay_a * softplus(gv[e] + bias);
            }
            gv[e] *= kLog2e;
          }
          float x = gv[0] + gv[1];  // inclusive scan over lanes of pair sums
#pragma unroll
          for (int o = 1; o < 32; o <<= 1) {
            const float y = __shfl_up_sync(0xffffffffu, x, o);
            if (lane >= o) x += y;
          }
          s.bs[2 * lane] = x - gv[1];
          s.bs[2 * lane + 1] = x;
        }
      }
    }
    __syncthreads();

    // ---- S1: q/k l2norm in place (fp32 math, bf16 result as FLA)
    if (p.l2norm) {
      constexpr int PER = K / 32;  // elements per lane (2 or 4)
      for (int r4 = 0; r4 < 8; r4 += 4) {  // 8 independent rows in flight per warp
        float x[8][PER], ss[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const bf16* row = (u & 1) ? &sk[warp * 8 + r4 + (u >> 1)][0] : &sq[warp * 8 + r4 + (u >> 1)][0];
          ss[u] = 0.f;
#pragma unroll
          for (int e = 0; e < PER; e += 2) {
            const float2 f = load_bf16x2(row + lane * PER + e);
            x[u][e] = f.x;
            x[u][e + 1] = f.y;
            ss[u] += f.x * f.x + f.y * f.y;
          }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
#pragma unroll
          for (int u = 0; u < 8; ++u) ss[u] += __shfl_xor_sync(0xffffffffu, ss[u], o);
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          bf16* row = (u & 1) ? &sk[warp * 8 + r4 + (u >> 1)][0] : &sq[warp * 8 + r4 + (u >> 1)][0];
          const float rs = rsqrtf(ss[u] + 1e-6f);
#pragma unroll
          for (int e = 0; e < PER; e += 2)
            *reinterpret_cast<uint32_t*>(row + lane * PER + e) = pack_bf16(x[u][e] * rs, x[u][e + 1] * rs);
        }
      }
      __syncthreads();
    }

    // ---- S2: L (strict lower, times beta_r) and Aqk (lower incl., times scale)
    if constexpr (KDA) {
      // Per-channel gates: operands are pre-scaled through a reference row (spec section 5). Jobs:
      // the off-diagonal blocks of row block ib (reference = its first row, all factors <= 1) or its
      // diagonal block (middle row with safe_gate, else exact exps). The job table balances the
      // exps over the 4 SM sub-partitions (warps w and w+4 share one).
      const unsigned code = (0xB987A123u >> (4 * warp)) & 0xFu;
      const bool idle = code == 7u, dia = (code & 8u) != 0u;
      const int ib = static_cast<int>(code & 7u);
      const bool diag_mma = p.safe != 0;
      if (!idle && (!dia || diag_mma)) {
        float accA[6][4], accL[6][4];
#pragma unroll
        for (int i = 0; i < 6; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) accA[i][e] = accL[i][e] = 0.f;
        const int rA = 16 * ib + g, rB = rA + 8;
        const int nRef = dia ? 16 * ib + 8 : 16 * ib;
#pragma unroll 1
        for (int ks = 0; ks < K / 16; ++ks) {
          const int c0 = ks * 16 + 2 * t, c1 = c0 + 8;
          const float2 qa0 = load_bf16x2(&sq[rA][c0]), qa1 = load_bf16x2(&sq[rA][c1]);
          const float2 qb0 = load_bf16x2(&sq[rB][c0]), qb1 = load_bf16x2(&sq[rB][c1]);
          const float2 ka0 = load_bf16x2(&sk[rA][c0]), ka1 = load_bf16x2(&sk[rA][c1]);
          const float2 kb0 = load_bf16x2(&sk[rB][c0]), kb1 = load_bf16x2(&sk[rB][c1]);
          const float2 ba0 = *reinterpret_cast<const float2*>(&s.b2[rA][c0]);
          const float2 ba1 = *reinterpret_cast<const float2*>(&s.b2[rA][c1]);
          const float2 bb0 = *reinterpret_cast<const float2*>(&s.b2[rB][c0]);
          const float2 bb1 = *reinterpret_cast<const float2*>(&s.b2[rB][c1]);
          const float2 n0 = *reinterpret_cast<const float2*>(&s.b2[nRef][c0]);
          const float2 n1 = *reinterpret_cast<const float2*>(&s.b2[nRef][c1]);
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
          for (int i = 0; i < 6; ++i) {
            if (dia ? (i >= 2) : (i >= 2 * ib)) continue;
            const int nt = dia ? 2 * ib + i : i;
            const int j = nt * 8 + g;
            const float2 bj0 = *reinterpret_cast<const float2*>(&s.b2[j][c0]);
            const float2 bj1 = *reinterpret_cast<const float2*>(&s.b2[j][c1]);
            const float2 kj0 = load_bf16x2(&sk[j][c0]), kj1 = load_bf16x2(&sk[j][c1]);
            const uint32_t b0 = pack_bf16(kj0.x * ex2(n0.x - bj0.x), kj0.y * ex2(n0.y - bj0.y));
            const uint32_t b1 = pack_bf16(kj1.x * ex2(n1.x - bj1.x), kj1.y * ex2(n1.y - bj1.y));
            mma_bf16_16816(accA[i], aq, b0, b1);
            mma_bf16_16816(accL[i], ak, b0, b1);
          }
        }
        // epilogue: select (never multiply by a mask); L fp32, Aqk bf16
#pragma unroll
        for (int i = 0; i < 6; ++i) {
          if (dia ? (i >= 2) : (i >= 2 * ib)) continue;
          const int nt = dia ? 2 * ib + i : i;
#pragma unroll
          for (int hf = 0; hf < 2; ++hf) {
            const int r = 16 * ib + g + hf * 8, j = nt * 8 + 2 * t;
            float av[2], lv[2];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              av[e] = (j + e <= r) ? p.scale * accA[i][hf * 2 + e] : 0.f;
              lv[e] = (j + e < r) ? s.beta[r] * accL[i][hf * 2 + e] : 0.f;
            }
            pack_bf16_split(av[0], av[1], *reinterpret_cast<uint32_t*>(&s.Aqk[r][j]),
                            *reinterpret_cast<uint32_t*>(&alo[r][j]));
            s.u1.L[r][j] = lv[0];
            s.u1.L[r][j + 1] = lv[1];
          }
        }
      }
      if (!idle && dia && !diag_mma) {
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
          s.Aqk[r][j] = __float2bfloat16_rn(av);
          alo[r][j] = __float2bfloat16_rn(av - __bfloat162float(s.Aqk[r][j]));
          s.u1.L[r][j] = jj < rr ? s.beta[r] * sl : 0.f;
        }
      }
      if (!idle && dia) {  // Aqk above the diagonal block is zero (o reads all 64 columns)
        for (int e = lane; e < 16 * (kC - 16 * (ib + 1)) / 2; e += 32) {
          const int w2 = (kC - 16 * (ib + 1)) / 2;
          const int r = 16 * ib + e / w2, j = 16 * (ib + 1) + 2 * (e % w2);
          *reinterpret_cast<uint32_t*>(&s.Aqk[r][j]) = 0u;
          *reinterpret_cast<uint32_t*>(&alo[r][j]) = 0u;
        }
      }
    } else {
      // GDN: plain q k^T and k k^T on tensor cores, then the scalar decay exp(b_r - b_j) (selected).
      // Warp (ib, wh): rows 16ib.., the n8 column tiles nt = 2i + wh.
      const int ib = wr;
      float accA[4][4], accL[4][4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) accA[i][e] = accL[i][e] = 0.f;
#pragma unroll
      for (int ks = 0; ks < K / 16; ++ks) {
        uint32_t aq[4], ak[4];
        ldsm_x4(aq, &sq[16 * ib + (lane & 15)][ks * 16 + ((lane >> 4) << 3)]);
        ldsm_x4(ak, &sk[16 * ib + (lane & 15)][ks * 16 + ((lane >> 4) << 3)]);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          if (i > ib) continue;
          uint32_t b[2];
          ldsm_x2(b, &sk[(2 * i + wh) * 8 + (lane & 7)][ks * 16 + (((lane >> 3) & 1) << 3)]);
          mma_bf16_16816(accA[i], aq, b[0], b[1]);
          mma_bf16_16816(accL[i], ak, b[0], b[1]);
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int jb = i, nt = 2 * i + wh;
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int r = 16 * ib + g + hf * 8, j = nt * 8 + 2 * t;
          float av[2], lv[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int jj = j + e;
            const float gam = ex2(fminf(s.bs[r] - s.bs[jj], 0.f));
            av[e] = (jb <= ib && jj <= r) ? p.scale * accA[i][hf * 2 + e] * gam : 0.f;
            lv[e] = (jb <= ib && jj < r) ? s.beta[r] * accL[i][hf * 2 + e] * gam : 0.f;
          }
          pack_bf16_split(av[0], av[1], *reinterpret_cast<uint32_t*>(&s.Aqk[r][j]),
                          *reinterpret_cast<uint32_t*>(&alo[r][j]));
          s.u1.L[r][j] = lv[0];
          s.u1.L[r][j + 1] = lv[1];
        }
      }
    }
    __syncthreads();

    // ---- S3: (I+L)^-1: forward substitution on the diagonal 16x16 blocks, then tf32 block merges
    if (warp < 4 && lane < 16) {
      const int c = lane, o16 = 16 * warp;
      float x[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        float acc = (i == c) ? 1.f : 0.f;
#pragma unroll
        for (int j = 0; j < i; ++j) acc -= s.u1.L[o16 + i][o16 + j] * x[j];
        x[i] = acc;
      }
#pragma unroll
      for (int i = 0; i < 16; ++i) s.u2.X[o16 + i][o16 + c] = x[i];
    }
    __syncthreads();
#pragma unroll 1
    for (int d = 1; d < 4; ++d) {
      if (warp >= d && warp < 4) {
        const int i = warp, jc = warp - d;
        float acc[2][4] = {};
        for (int m = jc; m < i; ++m) blk_mma_tf32(acc, &s.u1.L[16 * i][16 * m], &s.u2.X[16 * m][16 * jc], lane);
        blk_store(&s.u2.X[16 * jc][16 * i], acc, 1.f, lane);  // scratch: an upper block
        __syncwarp();
        float acc2[2][4] = {};
        blk_mma_tf32(acc2, &s.u2.X[16 * i][16 * i], &s.u2.X[16 * jc][16 * i], lane);
        blk_store(&s.u2.X[16 * i][16 * jc], acc2, -1.f, lane);
      }
      __syncthreads();
    }

    // ---- S4: Tinv -> bf16 with beta (and GDN exp(b)) folded into the columns; KDA gated operands
    for (int i = tid; i < kC * kC / 2; i += kThreads) {
      const int r = i / (kC / 2), j = (i % (kC / 2)) * 2;
      float tu[2], tw[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int jj = j + e;
        const float x = (jj <= r) ? s.u2.X[r][jj] : 0.f;
        tu[e] = x * s.beta[jj];
        tw[e] = KDA ? 0.f : tu[e] * ex2(s.bs[jj]);
      }
      pack_bf16_split(tu[0], tu[1], *reinterpret_cast<uint32_t*>(&s.Tu[r][j]), *reinterpret_cast<uint32_t*>(&tlo[r][j]));
      if (!KDA) *reinterpret_cast<uint32_t*>(&s.Tw[r][j]) = pack_bf16(tw[0], tw[1]);
    }
    if constexpr (KDA) {
      for (int i = tid; i < kC * K / 2; i += kThreads) {
        const int r = i / (K / 2), c = (i % (K / 2)) * 2;
        const float2 b = *reinterpret_cast<const float2*>(&s.b2[r][c]);
        const float2 qv = load_bf16x2(&sq[r][c]), kv = load_bf16x2(&sk[r][c]);
        const float e0 = ex2(b.x), e1 = ex2(b.y);
        const float l0 = ex2(s.bL[c] - b.x), l1 = ex2(s.bL[c + 1] - b.y);
        *reinterpret_cast<uint32_t*>(&sq[r][c]) = pack_bf16(qv.x * e0, qv.y * e1);
        *reinterpret_cast<uint32_t*>(&s.u1.kb[r][c]) = pack_bf16(kv.x * e0, kv.y * e1);
        *reinterpret_cast<uint32_t*>(&sk[r][c]) = pack_bf16(kv.x * l0, kv.y * l1);
      }
    }
    __syncthreads();

    // ---- S5: u = Tu v; w = Tw kb; v_new = u - w H. Warp (ib, wh): rows 16ib.., w and the w H
    // reduction over key channels [wh K/2, (wh+1) K/2); -w stays in registers as A fragments; the
    // wh = 1 partial goes through shared memory (X is dead) and wh = 0 finishes v_new.
    {
      constexpr int KH = K / 2;
      const int r0 = 16 * wr;
      uint32_t wa[KH / 16][4];
      {
        float accW[KH / 8][4];
#pragma unroll
        for (int nt = 0; nt < KH / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) accW[nt][e] = 0.f;
#pragma unroll
        for (int ks = 0; ks < kC / 16; ++ks) {
          uint32_t a[4];
          ldsm_x4(a, KDA ? &s.Tu[r0 + (lane & 15)][ks * 16 + ((lane >> 4) << 3)]
                         : &s.Tw[r0 + (lane & 15)][ks * 16 + ((lane >> 4) << 3)]);
#pragma unroll
          for (int np = 0; np < KH / 16; ++np) {
            uint32_t b[4];
            const int rr = ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
            const int cc = wh * KH + np * 16 + ((lane >> 4) << 3);
            ldsm_x4_trans(b, KDA ? &s.u1.kb[rr][cc] : &sk[rr][cc]);
            mma_bf16_16816(accW[2 * np], a, b[0], b[1]);
            mma_bf16_16816(accW[2 * np + 1], a, b[2], b[3]);
          }
        }
#pragma unroll
        for (int kk = 0; kk < KH / 16; ++kk) {
          wa[kk][0] = pack_bf16(-accW[2 * kk][0], -accW[2 * kk][1]);
          wa[kk][1] = pack_bf16(-accW[2 * kk][2], -accW[2 * kk][3]);
          wa[kk][2] = pack_bf16(-accW[2 * kk + 1][0], -accW[2 * kk + 1][1]);
          wa[kk][3] = pack_bf16(-accW[2 * kk + 1][2], -accW[2 * kk + 1][3]);
        }
      }
      float accU[8][4];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) accU[nt][e] = 0.f;
      {  // u = Tu v: the high half on wh = 0, the low half on wh = 1 (summed with the w H partials)
        bf16 (*const tsrc)[72] = wh ? tlo : s.Tu;
#pragma unroll
        for (int ks = 0; ks < kC / 16; ++ks) {
          uint32_t a[4];
          ldsm_x4(a, &tsrc[r0 + (lane & 15)][ks * 16 + ((lane >> 4) << 3)]);
#pragma unroll
          for (int np = 0; np < 4; ++np) {
            uint32_t b[4];
            ldsm_x4_trans(b, &sv[ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3)][np * 16 + ((lane >> 4) << 3)]);
            mma_bf16_16816(accU[2 * np], a, b[0], b[1]);
            mma_bf16_16816(accU[2 * np + 1], a, b[2], b[3]);
          }
        }
      }
#pragma unroll
      for (int ks = 0; ks < KH / 16; ++ks) {
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          uint32_t b[4];
          ldsm_x4_trans(b, &s.H[wh * KH + ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3)][np * 16 + ((lane >> 4) << 3)]);
          mma_bf16_16816(accU[2 * np], wa[ks], b[0], b[1]);
          mma_bf16_16816(accU[2 * np + 1], wa[ks], b[2], b[3]);
        }
      }
      if (wh == 1) {
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
          for (int hf = 0; hf < 2; ++hf)
            *reinterpret_cast<float2*>(&s.u2.X[r0 + g + 8 * hf][nt * 8 + 2 * t]) =
                make_float2(accU[nt][2 * hf], accU[nt][2 * hf + 1]);
      }
      __syncthreads();
      if (wh == 0) {
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
#pragma unroll
          for (int hf = 0; hf < 2; ++hf) {
            const int r = r0 + g + 8 * hf, c = nt * 8 + 2 * t;
            const float2 part = *reinterpret_cast<const float2*>(&s.u2.X[r][c]);
            const float x0 = accU[nt][2 * hf] + part.x, x1 = accU[nt][2 * hf + 1] + part.y;
            pack_bf16_split(x0, x1, *reinterpret_cast<uint32_t*>(&s.vn[r][c]), *reinterpret_cast<uint32_t*>(&vlo[r][c]));
            if (!KDA) {
              const float f = ex2(fminf(s.bs[kC - 1] - s.bs[r], 0.f));
              *reinterpret_cast<uint32_t*>(&s.vg[r][c]) = pack_bf16(x0 * f, x1 * f);
            }
          }
      }
    }
    __syncthreads();

    // X is dead from here on: prefetch the next chunk's gate into its space, beta into registers
    if (ci + 1 < nchunks) {
      if (g_staged) {
        issue_g(ci + 1);
        cp_async_commit();
      }
      load_small(ci + 1, beta_nx, g_nx0, g_nx1);
    }

    // ---- S6: o = scale * (q exp(b)) H + Aqk v_new; warp (ib, wh): rows 16ib.., columns 32wh..
    {
      const int r0 = 16 * wr, c0 = 32 * wh;
      float accO[4][4];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) accO[nt][e] = 0.f;
#pragma unroll
      for (int ks = 0; ks < K / 16; ++ks) {
        uint32_t a[4];
        ldsm_x4(a, &sq[r0 + (lane & 15)][ks * 16 + ((lane >> 4) << 3)]);
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          uint32_t b[4];
          ldsm_x4_trans(b, &s.H[ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3)][c0 + np * 16 + ((lane >> 4) << 3)]);
          mma_bf16_16816(accO[2 * np], a, b[0], b[1]);
          mma_bf16_16816(accO[2 * np + 1], a, b[2], b[3]);
        }
      }
      {
        const float fa = KDA ? p.scale : p.scale * ex2(s.bs[r0 + g]);
        const float fb = KDA ? p.scale : p.scale * ex2(s.bs[r0 + g + 8]);
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          accO[nt][0] *= fa;
          accO[nt][1] *= fa;
          accO[nt][2] *= fb;
          accO[nt][3] *= fb;
        }
      }
#pragma unroll
      for (int ks = 0; ks < kC / 16; ++ks) {
        uint32_t a[4];
        ldsm_x4(a, &s.Aqk[r0 + (lane & 15)][ks * 16 + ((lane >> 4) << 3)]);
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          uint32_t b[4];
          ldsm_x4_trans(b, &s.vn[ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3)][c0 + np * 16 + ((lane >> 4) << 3)]);
          mma_bf16_16816(accO[2 * np], a, b[0], b[1]);
          mma_bf16_16816(accO[2 * np + 1], a, b[2], b[3]);
          uint32_t bl[4];
          ldsm_x4_trans(bl, &vlo[ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3)][c0 + np * 16 + ((lane >> 4) << 3)]);
          mma_bf16_16816(accO[2 * np], a, bl[0], bl[1]);
          mma_bf16_16816(accO[2 * np + 1], a, bl[2], bl[3]);
        }
        ldsm_x4(a, &alo[r0 + (lane & 15)][ks * 16 + ((lane >> 4) << 3)]);
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          uint32_t b[4];
          ldsm_x4_trans(b, &s.vn[ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3)][c0 + np * 16 + ((lane >> 4) << 3)]);
          mma_bf16_16816(accO[2 * np], a, b[0], b[1]);
          mma_bf16_16816(accO[2 * np + 1], a, b[2], b[3]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int r = r0 + g + 8 * hf, c = c0 + nt * 8 + 2 * t;
          if (r < Cn)
            *reinterpret_cast<uint32_t*>(p.o + ((t0 + r) * p.HV + hv) * V + vcol0 + c) =
                pack_bf16(accO[nt][2 * hf], accO[nt][2 * hf + 1]);
        }
    }

    // ---- S7: H = diag(exp(bL)) H + (k exp(bL - b))^T v_new on this warp's state tile
    {
      const float da = KDA ? ex2(s.bL[sm0 + g]) : ex2(s.bs[kC - 1]);
      const float db = KDA ? ex2(s.bL[sm0 + g + 8]) : da;
#pragma unroll
      for (int nt = 0; nt < NTS; ++nt) {
        hacc[nt][0] *= da;
        hacc[nt][1] *= da;
        hacc[nt][2] *= db;
        hacc[nt][3] *= db;
      }
#pragma unroll
      for (int ks = 0; ks < kC / 16; ++ks) {
        uint32_t a[4];
        // A = kg^T: element (m = channel, kk = token) lives at sk[token][channel]
        ldsm_x4_trans(a, &sk[ks * 16 + (lane & 7) + ((lane >> 4) << 3)][sm0 + (((lane >> 3) & 1) << 3)]);
#pragma unroll
        for (int np = 0; np < NTS / 2; ++np) {
          uint32_t b[4];
          const int rr = ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), cc = sc0 + np * 16 + ((lane >> 4) << 3);
          ldsm_x4_trans(b, KDA ? &s.vn[rr][cc] : &s.vg[rr][cc]);
          mma_bf16_16816(hacc[2 * np], a, b[0], b[1]);
          mma_bf16_16816(hacc[2 * np + 1], a, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // everyone is done reading H_n, k, vn
    store_state_smem();
  }

  if (p.ht) {
#pragma unroll
    for (int nt = 0; nt < NTS; ++nt)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int r = sm0 + g + 8 * hf, c = sc0 + nt * 8 + 2 * t;
        *reinterpret_cast<float2*>(p.ht + sbase + static_cast<long>(r) * V + vcol0 + c) =
            make_float2(hacc[nt][2 * hf], hacc[nt][2 * hf + 1]);
      }
  }
}

[[noreturn]] void cuda_fail(const char* what, cudaError_t e) {
  throw Error(ErrorCode::runtime, "", std::string("chunk_delta cuda: ") + what + ": " + cudaGetErrorString(e));
}

template <bool KDA, int K>
void launch(const Params& prm, long grid, cudaStream_t stream) {
  const size_t smem = sizeof(Smem<KDA, K>);
  static bool configured = false;  // one attribute call per instantiation
  if (!configured) {
    cudaError_t e = cudaFuncSetAttribute(delta_fwd_kernel<KDA, K>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem));
    if (e != cudaSuccess) cuda_fail("cudaFuncSetAttribute", e);
    configured = true;
  }
  if (grid == 0) return;
  delta_fwd_kernel<KDA, K><<<static_cast<unsigned>(grid), kThreads, smem, stream>>>(prm);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) cuda_fail("kernel launch", e);
}

void require_dtype(const char* name, const TensorView& t, std::initializer_list<DType> ok, const char* expected) {
  for (DType d : ok)
    if (t.dtype == d) return;
  throw_unsupported(name, std::string("dtype ") + std::string(dtype_name(t.dtype)) + " on the cuda backend", expected);
}

Params common_params(const Problem& p, const DeltaRuleArgs& a, const AttentionOutputs& out, const char* op) {
  if (p.K != 64 && p.K != 128)
    throw_unsupported("q", std::string("head dim K = ") + std::to_string(p.K) + " for cuda " + op,
                      "K in {64, 128} (K = 256 is not built yet)");
  if (p.V % kVT != 0 || p.V > 256)
    throw_unsupported("v", std::string("head dim V = ") + std::to_string(p.V) + " for cuda " + op, "V in {64, 128, 256}");
  require_dtype("q", a.q, {DType::bf16}, "bfloat16");
  require_dtype("k", a.k, {DType::bf16}, "bfloat16");
  require_dtype("v", a.v, {DType::bf16}, "bfloat16");
  require_dtype("g", a.g, {DType::bf16, DType::f32}, "bfloat16 or float32");
  require_dtype("beta", a.beta, {DType::bf16, DType::f32}, "bfloat16 or float32");
  if (a.A_log) require_dtype("A_log", *a.A_log, {DType::f32}, "float32");
  if (a.dt_bias) require_dtype("dt_bias", *a.dt_bias, {DType::f32}, "float32");
  if (a.initial_state) require_dtype("initial_state", *a.initial_state, {DType::f32}, "float32");
  for (const TensorView* tv : {&a.q, &a.k, &a.v, &a.g, &a.beta, &out.o})
    if (!tv->is_contiguous()) throw_unsupported("q", "non-contiguous tensors", "contiguous tensors");
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
  prm.cu = p.varlen ? a.cu_seqlens->data : nullptr;
  prm.cu_i64 = p.varlen && a.cu_seqlens->dtype == DType::i64;
  prm.T = static_cast<int>(p.T);
  prm.H = static_cast<int>(p.H);
  prm.HV = static_cast<int>(p.HV);
  prm.G = static_cast<int>(p.group());
  prm.V = static_cast<int>(p.V);
  prm.nvt = static_cast<int>(p.V / kVT);
  prm.scale = static_cast<float>(p.scale);
  prm.beta_sigmoid = a.use_beta_sigmoid_in_kernel;
  prm.beta_mult = a.allow_neg_eigval ? 2.f : 1.f;
  prm.l2norm = a.use_qk_l2norm_in_kernel;
  return prm;
}

}  // namespace

RunInfo chunk_kda_forward(const Problem& p, const ChunkKdaArgs& a, const AttentionOutputs& out, ForwardMode,
                          const ExecOptions& opts) {
  Params prm = common_params(p, a, out, "chunk_kda");
  prm.gate_mode = kGateGiven;
  if (a.use_gate_in_kernel) prm.gate_mode = a.lower_bound ? kGateLowerBound : kGateSoftplus;
  prm.lower_bound = a.lower_bound ? static_cast<float>(*a.lower_bound) : 0.f;
  // The middle-reference diagonal needs every g >= -5 (exp(8*5) fits fp32 easily); safe_gate promises it.
  prm.safe = a.safe_gate && a.lower_bound && *a.lower_bound >= -5.0;
  const long grid = p.N * p.HV * (p.V / kVT);
  auto stream = static_cast<cudaStream_t>(opts.stream);
  if (p.K == 64) launch<true, 64>(prm, grid, stream);
  else launch<true, 128>(prm, grid, stream);
  return RunInfo{"cuda", {std::string("lina::delta_fwd_kernel<kda,") + std::to_string(p.K) + ">"}};
}

RunInfo chunk_gdn_forward(const Problem& p, const ChunkGdnArgs& a, const AttentionOutputs& out, ForwardMode,
                          const ExecOptions& opts) {
  Params prm = common_params(p, a, out, "chunk_gdn");
  prm.gate_mode = a.use_gate_in_kernel ? kGateSoftplus : kGateGiven;
  prm.lower_bound = 0.f;
  prm.safe = 0;
  const long grid = p.N * p.HV * (p.V / kVT);
  auto stream = static_cast<cudaStream_t>(opts.stream);
  if (p.K == 64) launch<false, 64>(prm, grid, stream);
  else launch<false, 128>(prm, grid, stream);
  return RunInfo{"cuda", {std::string("lina::delta_fwd_kernel<gdn,") + std::to_string(p.K) + ">"}};
}

}  // namespace lina::detail::cuda
