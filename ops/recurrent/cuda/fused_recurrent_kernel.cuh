// The decode kernel of fused_recurrent_{gla,kda,gdn} (docs/kernels/fused_recurrent.md): one CTA per
// (sequence, value head, BV-column tile of V) holds its K x BV slice of the fp32 state in registers for
// all the sequence's tokens. Lanes run along V, four columns each (one float4 per state row), so a warp
// reads RGW rows of 4*BV contiguous bytes per instruction; row groups of lanes and the warps split K.
// Per token: the inputs are staged in shared memory (q, k raw with their squared sums, the decay factor
// of every key channel), then one pass over the state rows decays them and forms both K-reductions
// S'^T k and S'^T q (shuffles over the row lanes, one shared-memory exchange over warps); the update and
// the read follow without another pass:
//   u = beta (v - S'^T k)  (GLA: u = v),   S = S' + k u^T,   o = S^T q = S'^T q + u (k . q).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/recurrent/decode_call.h"

namespace lina::detail::recurrent::cuda {

inline constexpr int kThreads = 128;
inline constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ std::int64_t load_index(const void* p, int bytes, std::int64_t i) {
  return bytes == 8 ? static_cast<const long long*>(p)[i] : static_cast<const int*>(p)[i];
}

__device__ __forceinline__ std::int64_t clamp_index(std::int64_t x, std::int64_t lo, std::int64_t hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}

// Raw bits of element i (f32 or a 16-bit type); converted at use, so a prefetch does not wait on it.
__device__ __forceinline__ std::uint32_t load_bits(const void* p, DType dtype, std::int64_t i) {
  if (dtype == DType::f32) return __ldg(static_cast<const unsigned int*>(p) + i);
  return __ldg(static_cast<const unsigned short*>(p) + i);
}

__device__ __forceinline__ float bits_to_float(std::uint32_t b, DType dtype) {
  if (dtype == DType::f32) return __uint_as_float(b);
  if (dtype == DType::bf16) return __uint_as_float(b << 16);
  return __half2float(__ushort_as_half(static_cast<unsigned short>(b)));
}

// Four consecutive outputs in o's dtype (8- or 16-byte store).
__device__ __forceinline__ void store4(void* o, DType dtype, std::int64_t i, float4 x) {
  if (dtype == DType::f32) {
    *reinterpret_cast<float4*>(static_cast<float*>(o) + i) = x;
  } else if (dtype == DType::bf16) {
    const __nv_bfloat162 a = __floats2bfloat162_rn(x.x, x.y), b = __floats2bfloat162_rn(x.z, x.w);
    uint2 w;
    w.x = *reinterpret_cast<const unsigned int*>(&a);
    w.y = *reinterpret_cast<const unsigned int*>(&b);
    *reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(o) + i) = w;
  } else {
    const __half2 a = __floats2half2_rn(x.x, x.y), b = __floats2half2_rn(x.z, x.w);
    uint2 w;
    w.x = *reinterpret_cast<const unsigned int*>(&a);
    w.y = *reinterpret_cast<const unsigned int*>(&b);
    *reinterpret_cast<uint2*>(static_cast<__half*>(o) + i) = w;
  }
}

__device__ __forceinline__ float warp_sum_all(float x) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

// Sum over the lanes that hold the same four columns (lane bits above log2(LV)).
template <int LV>
__device__ __forceinline__ float4 sum_row_lanes(float4 x) {
#pragma unroll
  for (int off = LV; off < 32; off <<= 1) {
    x.x += __shfl_xor_sync(0xffffffffu, x.x, off);
    x.y += __shfl_xor_sync(0xffffffffu, x.y, off);
    x.z += __shfl_xor_sync(0xffffffffu, x.z, off);
    x.w += __shfl_xor_sync(0xffffffffu, x.w, off);
  }
  return x;
}

// The log decay of a gate value; never positive for valid gates, so exp() of it cannot overflow.
// Softplus as FLA's: x above 20 is its own softplus.
__device__ __forceinline__ float log_decay(float g, GateForm gate, float bias, float a_mul, float lower_bound) {
  if (gate == GateForm::softplus) {
    const float x = g + bias;
    return -a_mul * (x > 20.f ? x : log1pf(expf(x)));
  }
  if (gate == GateForm::lower_bound) return lower_bound / (1.f + expf(-a_mul * (g + bias)));
  return g;
}

__device__ __forceinline__ float4 fma4(float4 a, float s, float4 b) {  // a * s + b
  return make_float4(fmaf(a.x, s, b.x), fmaf(a.y, s, b.y), fmaf(a.z, s, b.z), fmaf(a.w, s, b.w));
}

// DELTA: KDA / GDN (u = beta (v - S'^T k)); else GLA (u = v). K: key head dim; BV: state columns per CTA.
template <bool DELTA, int K, int BV>
__global__ void __launch_bounds__(kThreads, 5) fused_recurrent_kernel(const DecodeCall c) {
  constexpr int LV = BV / 4;          // lanes along V (four columns each)
  constexpr int RGW = 32 / LV;        // row groups per warp
  constexpr int RG = RGW * kWarps;    // row groups per CTA
  constexpr int ROWS = K / RG;        // state rows per thread
  constexpr int E = (K + kThreads - 1) / kThreads;  // staged key channels per thread
  constexpr int NVEC = DELTA ? 2 : 1;  // K-reductions per token: S'^T q (and S'^T k)
  static_assert(ROWS >= 1 && K % RG == 0, "K must fill the row groups");

  __shared__ float s_q[2][K], s_k[2][K], s_decay[2][K];
  __shared__ float4 s_v[2][LV];
  __shared__ float s_beta[2];
  __shared__ float s_norm[2][kWarps][3];
  __shared__ float4 s_red[2][kWarps][NVEC][LV];

  const int H = static_cast<int>(c.H), HV = static_cast<int>(c.HV), V = static_cast<int>(c.V);
  const std::int64_t L = c.indices_per_seq;  // 0: [N] indices
  const bool scalar_gate = c.op == DecodeOp::gdn, reverse = c.op == DecodeOp::gla && c.reverse;
  // dense: final_state [N,...] or null; per_token: final_state [R,...] or null; pool: the pool itself
  float* const ht = c.state_mode == StateMode::pool ? c.pool_out : static_cast<float*>(c.final_state);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int cv = lane % LV, rl = lane / LV;
  const int first_row = warp * RGW + rl;  // rows first_row + j * RG, j < ROWS
  const int nvt = V / BV;
  const std::int64_t tile = blockIdx.x;
  const int vt = static_cast<int>(tile % nvt);
  const std::int64_t nh = tile / nvt;
  const int hv = static_cast<int>(nh % HV);
  const std::int64_t n = nh / HV;
  const int h = hv / (HV / H);
  const int col = vt * BV + cv * 4;  // this thread's first state / o column

  std::int64_t bos, eos;
  if (c.cu_seqlens) {  // clamped to the token axis: bad offsets never reach outside q / o
    bos = clamp_index(load_index(c.cu_seqlens, c.cu_seqlens_bytes, n), 0, c.R);
    eos = clamp_index(load_index(c.cu_seqlens, c.cu_seqlens_bytes, n + 1), bos, c.R);
  } else {
    bos = n * c.T;
    eos = bos + c.T;
  }
  const int len = static_cast<int>(eos - bos);

  // The slot read, where the state lives in a pool; an invalid one marks padding.
  const float* src = nullptr;
  std::int64_t slot = -1;
  if (c.state_mode == StateMode::dense) {
    if (c.initial_state) src = c.initial_state + (n * HV + hv) * static_cast<std::int64_t>(K) * V;
  } else {
    std::int64_t pos = 0;
    bool ok = true;
    if (c.num_accepted_tokens) {
      const std::int64_t a = load_index(c.num_accepted_tokens, c.num_accepted_bytes, n);
      ok = a >= 1 && a <= L;
      pos = a - 1;
    }
    if (ok) slot = load_index(c.state_indices, c.state_indices_bytes, L ? n * L + pos : n);
    if (!ok || slot < 0 || slot >= c.pool_slots) {  // padding: zero o rows, no state read or write
      for (std::int64_t r = bos; r < eos; ++r)
        for (int group = tid; group < LV; group += kThreads)
          store4(c.o, c.qkv_dtype, (r * HV + hv) * V + vt * BV + group * 4, make_float4(0.f, 0.f, 0.f, 0.f));
      return;
    }
    src = c.initial_state + (slot * HV + hv) * static_cast<std::int64_t>(K) * V;
  }

  // Constants of the gate: A_log's factor (softplus: exp(A_log) or 1; lower bound: exp(A_log) or 1) and dt_bias.
  const float a_mul = c.A_log ? expf(c.A_log[hv]) : 1.f;
  // Scalars in f32 whatever width the call carries them in (the fp64 reference reads them exactly).
  const float scale = static_cast<float>(c.scale), lower_bound = static_cast<float>(c.lower_bound);
  const float beta_scale = static_cast<float>(c.beta_scale);
  float bias[E];
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int i = tid + e * kThreads;
    bias[e] = 0.f;
    if (c.dt_bias && i < K) bias[e] = scalar_gate ? c.dt_bias[hv] : c.dt_bias[hv * K + i];
  }

  // Token inputs in flight (raw bits): the first token's loads are issued before the state's.
  std::uint32_t rq[E], rk[E], rg[E], rv = 0, rb = 0;
  auto load_token = [&](int step) {
    const std::int64_t t = reverse ? eos - 1 - step : bos + step;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int i = tid + e * kThreads;
      if (i < K) {
        rq[e] = load_bits(c.q, c.qkv_dtype, (t * H + h) * K + i);
        rk[e] = load_bits(c.k, c.qkv_dtype, (t * H + h) * K + i);
        rg[e] = load_bits(c.g, c.g_dtype, scalar_gate ? t * HV + hv : (t * HV + hv) * K + i);
      }
    }
    if (tid < BV) rv = load_bits(c.v, c.qkv_dtype, (t * HV + hv) * V + vt * BV + tid);
    if (DELTA && tid == BV) rb = load_bits(c.beta, c.beta_dtype, t * HV + hv);
  };
  if (len > 0) load_token(0);

  float4 S[ROWS];
#pragma unroll
  for (int j = 0; j < ROWS; ++j) {
    const int off = (first_row + j * RG) * V + col;  // within one head's K x V: below 2^16
    S[j] = src ? __ldcs(reinterpret_cast<const float4*>(src + off)) : make_float4(0.f, 0.f, 0.f, 0.f);
  }

  auto store_state = [&](float* dst) {
#pragma unroll
    for (int j = 0; j < ROWS; ++j)
      __stcs(reinterpret_cast<float4*>(dst + (first_row + j * RG) * V + col), S[j]);
  };
  const std::int64_t head_stride = static_cast<std::int64_t>(K) * V;

  for (int step = 0; step < len; ++step) {
    const int b = step & 1;  // double-buffered staging: one barrier pair per token
    const std::int64_t t = reverse ? eos - 1 - step : bos + step;
    // ---- stage: q, k raw with their sums, the decay factors, v's columns and beta
    float ssq = 0.f, ssk = 0.f, sqk = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int i = tid + e * kThreads;
      if (i < K) {
        const float qf = bits_to_float(rq[e], c.qkv_dtype), kf = bits_to_float(rk[e], c.qkv_dtype);
        const float gf = bits_to_float(rg[e], c.g_dtype);
        s_q[b][i] = qf;
        s_k[b][i] = kf;
        s_decay[b][i] = expf(log_decay(gf, c.gate, bias[e], a_mul, lower_bound));
        ssq = fmaf(qf, qf, ssq);
        ssk = fmaf(kf, kf, ssk);
        sqk = fmaf(qf, kf, sqk);
      }
    }
    if (tid < BV) reinterpret_cast<float*>(s_v[b])[tid] = bits_to_float(rv, c.qkv_dtype);
    if (DELTA && tid == BV) {
      float bt = bits_to_float(rb, c.beta_dtype);
      if (c.beta_sigmoid) bt = beta_scale / (1.f + expf(-bt));
      s_beta[b] = bt;
    }
    ssq = warp_sum_all(ssq);
    ssk = warp_sum_all(ssk);
    sqk = warp_sum_all(sqk);
    if (lane == 0) {
      s_norm[b][warp][0] = ssq;
      s_norm[b][warp][1] = ssk;
      s_norm[b][warp][2] = sqk;
    }
    if (step + 1 < len) load_token(step + 1);  // next token's inputs in flight during this one
    // The write slot of this step ([N,L] indices: slot indices[n][step]), read ahead of its use.
    float* dst = nullptr;
    if (c.state_mode == StateMode::per_token) {
      if (ht) dst = ht + (t * HV + hv) * head_stride;
    } else if (c.state_mode == StateMode::pool && L) {
      if (step < L) {
        const std::int64_t ws = load_index(c.state_indices, c.state_indices_bytes, n * L + step);
        if (ws >= 0 && ws < c.pool_slots) dst = ht + (ws * HV + hv) * head_stride;
      }
    }
    __syncthreads();

    float nq = 0.f, nk = 0.f, dqk = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      nq += s_norm[b][w][0];
      nk += s_norm[b][w][1];
      dqk += s_norm[b][w][2];
    }
    const float q_mul = (c.l2norm ? 1.f / sqrtf(nq + 1e-6f) : 1.f) * scale;
    const float k_mul = c.l2norm ? 1.f / sqrtf(nk + 1e-6f) : 1.f;
    const float qk = dqk * q_mul * k_mul;

    // ---- decay and both K-reductions in one pass over the rows
    float4 pq = make_float4(0.f, 0.f, 0.f, 0.f), pk = pq;
#pragma unroll
    for (int j = 0; j < ROWS; ++j) {
      const int r = first_row + j * RG;
      const float a = s_decay[b][r];
      S[j] = make_float4(S[j].x * a, S[j].y * a, S[j].z * a, S[j].w * a);
      pq = fma4(S[j], s_q[b][r] * q_mul, pq);
      if constexpr (DELTA) pk = fma4(S[j], s_k[b][r] * k_mul, pk);
    }
    pq = sum_row_lanes<LV>(pq);
    if constexpr (DELTA) pk = sum_row_lanes<LV>(pk);
    if (rl == 0) {
      s_red[b][warp][0][cv] = pq;
      if constexpr (DELTA) s_red[b][warp][NVEC - 1][cv] = pk;
    }
    __syncthreads();

    float4 sq = make_float4(0.f, 0.f, 0.f, 0.f), sk = sq;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float4 x = s_red[b][w][0][cv];
      sq = make_float4(sq.x + x.x, sq.y + x.y, sq.z + x.z, sq.w + x.w);
      if constexpr (DELTA) {
        const float4 y = s_red[b][w][NVEC - 1][cv];
        sk = make_float4(sk.x + y.x, sk.y + y.y, sk.z + y.z, sk.w + y.w);
      }
    }
    float4 u = s_v[b][cv];
    if constexpr (DELTA) {
      const float bt = s_beta[b];
      u = make_float4(bt * (u.x - sk.x), bt * (u.y - sk.y), bt * (u.z - sk.z), bt * (u.w - sk.w));
    }
#pragma unroll
    for (int j = 0; j < ROWS; ++j) {
      const float kr = s_k[b][first_row + j * RG] * k_mul;
      S[j] = fma4(u, kr, S[j]);
    }
    if (warp == 0 && rl == 0) store4(c.o, c.qkv_dtype, (t * HV + hv) * V + col, fma4(u, qk, sq));
    if (dst) store_state(dst);
  }

  // The state after the last token: dense final_state (also for an empty sequence: h0 or zero), or
  // back to the pool slot with [N] indices.
  if (c.state_mode == StateMode::dense) {
    if (ht) store_state(ht + (n * HV + hv) * head_stride);
  } else if (c.state_mode == StateMode::pool && !L && len > 0) {
    store_state(ht + (slot * HV + hv) * head_stride);
  }
}

}  // namespace lina::detail::recurrent::cuda
