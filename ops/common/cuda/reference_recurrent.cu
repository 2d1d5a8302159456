// GPU fp32 naive-recurrence references for chunk_gla, chunk_kda and chunk_gdn (docs/math.md section 2),
// forward and backward. Robust rather than fast: they check every benchmarked CUDA cell at full size.
//
// Layout: one warp per state column j (value channel), lanes own key rows c = lane + 32 i (i < 8,
// so K <= 256). Columns are independent in the forward; in the backward the cross-column sums
// (dq, dk, dg, dbeta) go through shared-memory atomics per step, then one global atomicAdd per
// element per block (GVA group sums come out of the same atomics).
// Backward: a forward pass stores the state entering every 64-step segment (checkpoint); each
// segment is then replayed forward into per-block scratch and walked in reverse.
#include <cmath>

#include "lina/gpu_reference.h"
#include "ops/common/cuda/cuda_common.cuh"

namespace lina::gpu_reference {
namespace {

using detail::Problem;
using detail::cuda_util::check;
using detail::cuda_util::DeviceSeqs;
using detail::cuda_util::load_as_float;
using detail::cuda_util::SeqDesc;
using detail::cuda_util::warp_sum;

constexpr int KR = 8;           // rows per lane: K <= 256
constexpr int kFwdWarps = 8;    // columns per forward block
constexpr int kBwdWarps = 16;   // columns per backward block
constexpr int kSeg = 64;        // checkpoint interval

enum Op : int { kGla = 0, kKda = 1, kGdn = 2 };

struct RefArgs {
  const void *q, *k, *v, *g, *beta;
  int q_t, g_t, b_t;
  const float *h0, *A_log, *dt_bias;
  float *o, *ht;
  float* ckpt;  // [total_chunks][HV][V][K]: state entering each 64-step segment, column-major
  float* seg;   // backward scratch: [block][kSeg][kBwdWarps][K]
  const void* d_o;
  int do_t;
  const void* dht;
  int dht_t;
  float *dq, *dk, *dv, *dg, *dbeta, *dh0;
  detail::cuda_util::SeqTable seqs;
  int H, HV, G, K, V;
  float scale;
  int op;
  int l2norm, beta_sig, gate_in, has_lb, has_alog, has_dtb;
  float beta_mul, lb;
};

__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : log1pf(expf(x)); }
__device__ __forceinline__ float sigmoidf_(float x) { return 1.f / (1.f + expf(-x)); }

// Log decay after the optional in-kernel gate (docs/math.md section 1).
__device__ __forceinline__ float gate_value(const RefArgs& a, float raw, int hv, int c) {
  if (a.op == kGla || !a.gate_in) return raw;
  const float x = raw + (a.has_dtb ? a.dt_bias[a.op == kKda ? hv * a.K + c : hv] : 0.f);
  if (a.op == kKda && a.has_lb) {
    const float e = a.has_alog ? expf(a.A_log[hv]) : 1.f;
    return a.lb * sigmoidf_(e * x);
  }
  return -expf(a.A_log[hv]) * softplus(x);
}

// Everything one step needs for one column: q, k (normalised if asked), decay, beta, v_j, do_j.
struct Tok {
  float q[KR], k[KR], decay[KR];
  float beta, v, dout;
};

__device__ __forceinline__ void load_tok(const RefArgs& a, std::int64_t row, int h, int hv, int j, int lane,
                                         bool need_q, bool need_do, Tok& t) {
  const std::int64_t qk_base = (row * a.H + h) * a.K;
  float gs = 0.f;
  if (a.op == kGdn) gs = gate_value(a, load_as_float(a.g, a.g_t, row * a.HV + hv), hv, 0);
  float sq = 0.f, sk = 0.f;
#pragma unroll
  for (int i = 0; i < KR; ++i) {
    const int c = lane + 32 * i;
    const bool in = c < a.K;
    t.q[i] = (in && need_q) ? load_as_float(a.q, a.q_t, qk_base + c) : 0.f;
    t.k[i] = in ? load_as_float(a.k, a.q_t, qk_base + c) : 0.f;
    float gl = 0.f;
    if (in) {
      if (a.op == kGla) gl = load_as_float(a.g, a.g_t, qk_base + c);
      else if (a.op == kKda) gl = gate_value(a, load_as_float(a.g, a.g_t, (row * a.HV + hv) * a.K + c), hv, c);
      else gl = gs;
    }
    t.decay[i] = in ? expf(gl) : 0.f;
    sq += t.q[i] * t.q[i];
    sk += t.k[i] * t.k[i];
  }
  if (a.op != kGla && a.l2norm) {
    const float rq = 1.f / sqrtf(warp_sum(sq) + 1e-6f);
    const float rk = 1.f / sqrtf(warp_sum(sk) + 1e-6f);
#pragma unroll
    for (int i = 0; i < KR; ++i) {
      t.q[i] *= rq;
      t.k[i] *= rk;
    }
  }
  t.beta = 1.f;
  if (a.op != kGla) {
    const float b = load_as_float(a.beta, a.b_t, row * a.HV + hv);
    t.beta = a.beta_sig ? a.beta_mul * sigmoidf_(b) : b;
  }
  const std::int64_t vo = (row * a.HV + hv) * a.V + j;
  t.v = load_as_float(a.v, a.q_t, vo);
  t.dout = need_do ? load_as_float(a.d_o, a.do_t, vo) : 0.f;
}

// One forward step on column S (decay -> update -> read); returns u (v for GLA), p = S'^T k.
__device__ __forceinline__ void step_fwd(const RefArgs& a, const Tok& t, float (&S)[KR], float& u, float& p) {
  float pp = 0.f;
#pragma unroll
  for (int i = 0; i < KR; ++i) {
    S[i] *= t.decay[i];
    pp += S[i] * t.k[i];
  }
  if (a.op != kGla) {
    p = warp_sum(pp);
    u = t.beta * (t.v - p);
  } else {
    p = 0.f;
    u = t.v;
  }
#pragma unroll
  for (int i = 0; i < KR; ++i) S[i] += t.k[i] * u;
}

__global__ void __launch_bounds__(kFwdWarps * 32) ref_forward(RefArgs a, int store_ckpt) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int j = blockIdx.x * kFwdWarps + warp;
  const int hv = blockIdx.y, n = blockIdx.z, h = hv / a.G;
  if (j >= a.V) return;
  const SeqDesc s = a.seqs.at(n);
  const std::int64_t st = static_cast<std::int64_t>(n * a.HV + hv) * a.K * a.V;
  float S[KR];
#pragma unroll
  for (int i = 0; i < KR; ++i) {
    const int c = lane + 32 * i;
    S[i] = (a.h0 && c < a.K) ? a.h0[st + static_cast<std::int64_t>(c) * a.V + j] : 0.f;
  }
  for (int t = 0; t < s.length; ++t) {
    if (store_ckpt && (t % kSeg) == 0) {
      float* ck = a.ckpt + ((static_cast<std::int64_t>(s.chunk_off + t / kSeg) * a.HV + hv) * a.V + j) * a.K;
#pragma unroll
      for (int i = 0; i < KR; ++i)
        if (lane + 32 * i < a.K) ck[lane + 32 * i] = S[i];
    }
    const std::int64_t row = s.row_begin + t;
    Tok tk;
    load_tok(a, row, h, hv, j, lane, a.o != nullptr, false, tk);
    float u, p;
    step_fwd(a, tk, S, u, p);
    if (a.o) {
      float acc = 0.f;
#pragma unroll
      for (int i = 0; i < KR; ++i) acc += S[i] * tk.q[i];
      acc = warp_sum(acc) * a.scale;
      if (lane == 0) a.o[(row * a.HV + hv) * a.V + j] = acc;
    }
  }
  if (a.ht) {
#pragma unroll
    for (int i = 0; i < KR; ++i) {
      const int c = lane + 32 * i;
      if (c < a.K) a.ht[st + static_cast<std::int64_t>(c) * a.V + j] = S[i];
    }
  }
}

__global__ void __launch_bounds__(kBwdWarps * 32) ref_backward(RefArgs a) {
  __shared__ float red_q[256], red_k[256], red_g[256];
  __shared__ float red_b, red_gs;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, tid = threadIdx.x;
  const int j0 = blockIdx.x * kBwdWarps + warp;
  const bool active = j0 < a.V;
  const int j = active ? j0 : 0;  // idle columns run along with zero contributions (barriers)
  const int hv = blockIdx.y, n = blockIdx.z, h = hv / a.G;
  const SeqDesc s = a.seqs.at(n);
  const std::int64_t st = static_cast<std::int64_t>(n * a.HV + hv) * a.K * a.V;
  const std::int64_t blk = (static_cast<std::int64_t>(n) * a.HV + hv) * gridDim.x + blockIdx.x;
  float* seg = a.seg + blk * kSeg * kBwdWarps * a.K;
  for (int c = tid; c < 256; c += blockDim.x) red_q[c] = red_k[c] = red_g[c] = 0.f;
  if (tid == 0) red_b = red_gs = 0.f;
  float dS[KR];
#pragma unroll
  for (int i = 0; i < KR; ++i) {
    const int c = lane + 32 * i;
    dS[i] = (a.dht && active && c < a.K) ? load_as_float(a.dht, a.dht_t, st + static_cast<std::int64_t>(c) * a.V + j) : 0.f;
  }
  __syncthreads();
  const int nseg = (s.length + kSeg - 1) / kSeg;
  for (int sg = nseg - 1; sg >= 0; --sg) {
    const int t0 = sg * kSeg, t1 = min(s.length, t0 + kSeg);
    float S[KR];
    const float* ck = a.ckpt + ((static_cast<std::int64_t>(s.chunk_off + sg) * a.HV + hv) * a.V + j) * a.K;
#pragma unroll
    for (int i = 0; i < KR; ++i) S[i] = (lane + 32 * i < a.K) ? ck[lane + 32 * i] : 0.f;
    // Replay the segment, keeping S_{t-1} of every step (each lane rereads only what it wrote).
    for (int t = t0; t < t1; ++t) {
      float* sp = seg + static_cast<std::int64_t>((t - t0) * kBwdWarps + warp) * a.K;
#pragma unroll
      for (int i = 0; i < KR; ++i)
        if (lane + 32 * i < a.K) sp[lane + 32 * i] = S[i];
      Tok tk;
      load_tok(a, s.row_begin + t, h, hv, j, lane, false, false, tk);
      float u, p;
      step_fwd(a, tk, S, u, p);
    }
    for (int t = t1 - 1; t >= t0; --t) {
      const std::int64_t row = s.row_begin + t;
      const float* sp = seg + static_cast<std::int64_t>((t - t0) * kBwdWarps + warp) * a.K;
      Tok tk;
      load_tok(a, row, h, hv, j, lane, true, true, tk);
      if (!active) { tk.v = 0.f; tk.dout = 0.f; }
      float Sd[KR], St[KR];
      float pp = 0.f;
#pragma unroll
      for (int i = 0; i < KR; ++i) {
        Sd[i] = ((lane + 32 * i < a.K) ? sp[lane + 32 * i] : 0.f) * tk.decay[i];
        pp += Sd[i] * tk.k[i];
      }
      float p = 0.f, u = tk.v;
      if (a.op != kGla) {
        p = warp_sum(pp);
        u = tk.beta * (tk.v - p);
      }
      if (!active) u = 0.f;
      float du = 0.f;
#pragma unroll
      for (int i = 0; i < KR; ++i) {
        St[i] = Sd[i] + tk.k[i] * u;
        dS[i] += a.scale * tk.q[i] * tk.dout;
        du += dS[i] * tk.k[i];
      }
      du = warp_sum(du);
      float dq_c[KR], dk_c[KR], dg_c[KR];
#pragma unroll
      for (int i = 0; i < KR; ++i) {
        dq_c[i] = a.scale * St[i] * tk.dout;
        dk_c[i] = dS[i] * u;
      }
      float dbeta = 0.f;
      if (a.op != kGla) {
        const float dp = -tk.beta * du;
        dbeta = active ? du * (tk.v - p) : 0.f;
        if (active && lane == 0) a.dv[(row * a.HV + hv) * a.V + j] = tk.beta * du;
#pragma unroll
        for (int i = 0; i < KR; ++i) {
          const float dSd = dS[i] + tk.k[i] * dp;
          dk_c[i] += Sd[i] * dp;
          dg_c[i] = dSd * Sd[i];
          dS[i] = tk.decay[i] * dSd;
        }
      } else {
        if (active && lane == 0) a.dv[(row * a.HV + hv) * a.V + j] = du;
#pragma unroll
        for (int i = 0; i < KR; ++i) {
          dg_c[i] = dS[i] * Sd[i];
          dS[i] *= tk.decay[i];
        }
      }
      if (active) {
        float gsum = 0.f;
#pragma unroll
        for (int i = 0; i < KR; ++i) {
          const int c = lane + 32 * i;
          if (c < a.K) {
            atomicAdd(&red_q[c], dq_c[i]);
            atomicAdd(&red_k[c], dk_c[i]);
            if (a.op == kGdn) gsum += dg_c[i];
            else atomicAdd(&red_g[c], dg_c[i]);
          }
        }
        if (a.op == kGdn) {
          gsum = warp_sum(gsum);
          if (lane == 0) atomicAdd(&red_gs, gsum);
        }
        if (a.op != kGla && lane == 0) atomicAdd(&red_b, dbeta);
      }
      __syncthreads();
      for (int c = tid; c < a.K; c += blockDim.x) {
        const std::int64_t qo = (row * a.H + h) * a.K + c;
        atomicAdd(a.dq + qo, red_q[c]);
        atomicAdd(a.dk + qo, red_k[c]);
        red_q[c] = 0.f;
        red_k[c] = 0.f;
        if (a.op == kGla) atomicAdd(a.dg + qo, red_g[c]);
        else if (a.op == kKda) atomicAdd(a.dg + (row * a.HV + hv) * a.K + c, red_g[c]);
        red_g[c] = 0.f;
      }
      if (tid == 0 && a.op != kGla) {
        atomicAdd(a.dbeta + row * a.HV + hv, red_b);
        red_b = 0.f;
        if (a.op == kGdn) {
          atomicAdd(a.dg + row * a.HV + hv, red_gs);
          red_gs = 0.f;
        }
      }
      __syncthreads();
    }
  }
  if (a.dh0 && active) {
#pragma unroll
    for (int i = 0; i < KR; ++i) {
      const int c = lane + 32 * i;
      if (c < a.K) a.dh0[st + static_cast<std::int64_t>(c) * a.V + j] = dS[i];
    }
  }
}

// dx = rstd (dy - (dy.y) y) with y = x rstd, in place on dy; one warp per K-vector.
__global__ void l2norm_backward_inplace(const void* x, int x_t, float* dy, std::int64_t nvec, int K) {
  const std::int64_t w = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (w >= nvec) return;
  float xv[KR], d[KR];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < KR; ++i) {
    const int c = lane + 32 * i;
    xv[i] = c < K ? load_as_float(x, x_t, w * K + c) : 0.f;
    d[i] = c < K ? dy[w * K + c] : 0.f;
    ss += xv[i] * xv[i];
  }
  const float rstd = 1.f / sqrtf(warp_sum(ss) + 1e-6f);
  float dot = 0.f;
#pragma unroll
  for (int i = 0; i < KR; ++i) dot += d[i] * xv[i] * rstd;
  dot = warp_sum(dot);
#pragma unroll
  for (int i = 0; i < KR; ++i) {
    const int c = lane + 32 * i;
    if (c < K) dy[w * K + c] = rstd * (d[i] - dot * xv[i] * rstd);
  }
}

__global__ void beta_sigmoid_backward_inplace(const void* b, int b_t, float* db, std::int64_t n, float mul) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float s = sigmoidf_(load_as_float(b, b_t, i));
  db[i] *= mul * s * (1.f - s);
}

// Chains dg (gradient of the log decay) through the in-kernel gate, in place; sums dA_log / ddt_bias
// over a tile of 256 tokens per thread before one atomicAdd.
__global__ void gate_backward(RefArgs a, float* dA, float* ddt, std::int64_t rows, int Kg) {
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= a.HV * Kg) return;
  const int hv = idx / Kg, c = idx % Kg;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * 256, r1 = min(rows, r0 + 256);
  const float x0 = a.has_dtb ? a.dt_bias[a.op == kKda ? hv * a.K + c : hv] : 0.f;
  const float eA = a.has_alog ? expf(a.A_log[hv]) : 1.f;
  float sA = 0.f, sdt = 0.f;
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t o = r * a.HV * Kg + idx;
    const float x = load_as_float(a.g, a.g_t, o) + x0;
    const float dy = a.dg[o];
    float dx;
    if (a.op == kKda && a.has_lb) {
      const float s = sigmoidf_(eA * x);
      dx = dy * a.lb * s * (1.f - s) * eA;
      sA += dx * x;
    } else {
      dx = -eA * sigmoidf_(x) * dy;
      sA += dy * (-eA * softplus(x));
    }
    sdt += dx;
    a.dg[o] = dx;
  }
  if (dA && a.has_alog) atomicAdd(dA + hv, sA);
  if (ddt) atomicAdd(ddt + (a.op == kKda ? hv * a.K + c : hv), sdt);
}

int code(DType t) { return static_cast<int>(t); }

void require_ref_tensor(const std::string& name, const TensorView& t) {
  if (t.device != Device::cuda) throw_invalid(name, "a host tensor", "a CUDA tensor (GPU reference)");
  if (t.dtype != DType::f32) throw_invalid(name, "dtype " + std::string(dtype_name(t.dtype)), "dtype float32 (GPU reference)");
}

void require_ref_dims(const Problem& p) {
  if (p.device != Device::cuda) throw_invalid("q", "a host tensor", "CUDA tensors (GPU reference)");
  if (p.K > 32 * KR) throw_unsupported("K", std::to_string(p.K), "K <= 256 for the GPU reference");
}

RefArgs base_args(const Problem& p, const TensorView& q, const TensorView& k, const TensorView& v, const TensorView& g,
                  const std::optional<TensorView>& h0) {
  RefArgs a{};
  a.q = q.data; a.k = k.data; a.v = v.data; a.g = g.data;
  a.q_t = code(q.dtype); a.g_t = code(g.dtype); a.b_t = 1;
  a.h0 = h0 ? h0->ptr<const float>() : nullptr;
  a.H = static_cast<int>(p.H); a.HV = static_cast<int>(p.HV); a.G = static_cast<int>(p.group());
  a.K = static_cast<int>(p.K); a.V = static_cast<int>(p.V);
  a.scale = static_cast<float>(p.scale);
  a.beta_mul = 1.f;
  return a;
}

void require_param_f32(const std::optional<TensorView>& t, const char* name) {
  if (t && t->dtype != DType::f32) throw_invalid(name, "dtype " + std::string(dtype_name(t->dtype)), "dtype float32");
}

// The delta-rule kernels' arguments: the common ones plus beta, the preprocessing flags and the
// in-kernel gate parameters (fp32 only).
RefArgs delta_args(const Problem& p, const DeltaRuleArgs& d, int op) {
  require_param_f32(d.A_log, "A_log");
  require_param_f32(d.dt_bias, "dt_bias");
  RefArgs a = base_args(p, d.q, d.k, d.v, d.g, d.initial_state);
  a.op = op;
  a.beta = d.beta.data;
  a.b_t = code(d.beta.dtype);
  a.l2norm = d.use_qk_l2norm_in_kernel;
  a.beta_sig = d.use_beta_sigmoid_in_kernel;
  a.beta_mul = d.allow_neg_eigval ? 2.f : 1.f;
  a.gate_in = d.use_gate_in_kernel;
  a.has_alog = d.A_log.has_value();
  a.A_log = d.A_log ? d.A_log->ptr<const float>() : nullptr;
  a.has_dtb = d.dt_bias.has_value();
  a.dt_bias = d.dt_bias ? d.dt_bias->ptr<const float>() : nullptr;
  return a;
}

RefArgs kda_args(const Problem& p, const ChunkKdaArgs& d) {
  RefArgs a = delta_args(p, d, kKda);
  a.has_lb = d.lower_bound.has_value() && d.use_gate_in_kernel;
  a.lb = static_cast<float>(d.lower_bound.value_or(0.0));
  return a;
}

void run_forward(const Problem& p, RefArgs a, const AttentionOutputs& out, cudaStream_t st) {
  require_ref_dims(p);
  require_ref_tensor("o", out.o);
  if (out.final_state) require_ref_tensor("final_state", *out.final_state);
  a.o = out.o.ptr<float>();
  a.ht = out.final_state ? out.final_state->ptr<float>() : nullptr;
  const DeviceSeqs seqs = detail::cuda_util::upload_sequences(p, st);
  a.seqs = seqs.view;
  if (p.N > 0 && p.V > 0) {
    const dim3 grid(static_cast<unsigned>((p.V + kFwdWarps - 1) / kFwdWarps), static_cast<unsigned>(p.HV), static_cast<unsigned>(p.N));
    ref_forward<<<grid, kFwdWarps * 32, 0, st>>>(a, 0);
    check(cudaGetLastError(), "ref_forward launch");
  }
  detail::cuda_util::workspace_free(seqs.ptr, st, "reference sequence table");
}

struct GradTargets {
  TensorView dq, dk, dv, dg;
  std::optional<TensorView> dbeta, dh0, dA, ddt;
};

GradTargets delta_targets(const DeltaRuleGrads& g) {
  return {g.dq, g.dk, g.dv, g.dg, g.dbeta, g.d_initial_state, g.d_A_log, g.d_dt_bias};
}

void zero(const TensorView& t, cudaStream_t st) {
  check(cudaMemsetAsync(t.data, 0, static_cast<std::size_t>(t.numel()) * 4, st), "cudaMemsetAsync");
}

void run_backward(const Problem& p, RefArgs a, const AttentionGradInputs& gin, const GradTargets& g, cudaStream_t st,
                  const TensorView& q, const TensorView& k, const TensorView* beta_raw) {
  require_ref_dims(p);
  require_ref_tensor("dq", g.dq);
  require_ref_tensor("dk", g.dk);
  require_ref_tensor("dv", g.dv);
  require_ref_tensor("dg", g.dg);
  if (g.dbeta) require_ref_tensor("dbeta", *g.dbeta);
  if (g.dh0) require_ref_tensor("d_initial_state", *g.dh0);
  if (g.dA) require_ref_tensor("d_A_log", *g.dA);
  if (g.ddt) require_ref_tensor("d_dt_bias", *g.ddt);
  a.d_o = gin.d_o.data;
  a.do_t = code(gin.d_o.dtype);
  a.dht = gin.d_final_state ? gin.d_final_state->data : nullptr;
  a.dht_t = gin.d_final_state ? code(gin.d_final_state->dtype) : 1;
  a.dq = g.dq.ptr<float>(); a.dk = g.dk.ptr<float>(); a.dv = g.dv.ptr<float>(); a.dg = g.dg.ptr<float>();
  a.dbeta = g.dbeta ? g.dbeta->ptr<float>() : nullptr;
  a.dh0 = g.dh0 ? g.dh0->ptr<float>() : nullptr;
  for (const TensorView* t : {&g.dq, &g.dk, &g.dv, &g.dg}) zero(*t, st);
  if (g.dbeta) zero(*g.dbeta, st);
  if (g.dA) zero(*g.dA, st);
  if (g.ddt) zero(*g.ddt, st);
  const DeviceSeqs seqs = detail::cuda_util::upload_sequences(p, st);
  a.seqs = seqs.view;
  if (p.N > 0 && p.V > 0) {
    const std::size_t state = static_cast<std::size_t>(p.K * p.V);
    const unsigned vblocks = static_cast<unsigned>((p.V + kBwdWarps - 1) / kBwdWarps);
    const std::size_t ck_bytes = std::max<std::size_t>(1, static_cast<std::size_t>(seqs.total_chunks) * p.HV * state * 4);
    const std::size_t seg_bytes = static_cast<std::size_t>(p.N) * p.HV * vblocks * kSeg * kBwdWarps * p.K * 4;
    check(cudaMallocAsync(reinterpret_cast<void**>(&a.ckpt), ck_bytes, st), "cudaMallocAsync(checkpoints)");
    check(cudaMallocAsync(reinterpret_cast<void**>(&a.seg), seg_bytes, st), "cudaMallocAsync(segment scratch)");
    const dim3 fgrid(static_cast<unsigned>((p.V + kFwdWarps - 1) / kFwdWarps), static_cast<unsigned>(p.HV), static_cast<unsigned>(p.N));
    RefArgs fa = a;
    fa.o = nullptr;
    fa.ht = nullptr;
    ref_forward<<<fgrid, kFwdWarps * 32, 0, st>>>(fa, 1);
    check(cudaGetLastError(), "ref_forward (checkpoints) launch");
    const dim3 bgrid(vblocks, static_cast<unsigned>(p.HV), static_cast<unsigned>(p.N));
    ref_backward<<<bgrid, kBwdWarps * 32, 0, st>>>(a);
    check(cudaGetLastError(), "ref_backward launch");
    check(cudaFreeAsync(a.ckpt, st), "cudaFreeAsync");
    check(cudaFreeAsync(a.seg, st), "cudaFreeAsync");
  }
  detail::cuda_util::workspace_free(seqs.ptr, st, "reference sequence table");
  const std::int64_t rows = p.B * p.T;
  if (a.op != kGla && a.l2norm && rows > 0) {
    const std::int64_t nvec = rows * p.H;
    const unsigned blocks = static_cast<unsigned>((nvec * 32 + 255) / 256);
    l2norm_backward_inplace<<<blocks, 256, 0, st>>>(q.data, code(q.dtype), a.dq, nvec, a.K);
    l2norm_backward_inplace<<<blocks, 256, 0, st>>>(k.data, code(k.dtype), a.dk, nvec, a.K);
    check(cudaGetLastError(), "l2norm_backward launch");
  }
  if (a.op != kGla && a.beta_sig && rows > 0) {
    const std::int64_t n = rows * p.HV;
    beta_sigmoid_backward_inplace<<<static_cast<unsigned>((n + 255) / 256), 256, 0, st>>>(beta_raw->data, code(beta_raw->dtype), a.dbeta, n, a.beta_mul);
    check(cudaGetLastError(), "beta_sigmoid_backward launch");
  }
  if (a.op != kGla && a.gate_in && rows > 0) {
    const int Kg = a.op == kKda ? a.K : 1;
    const dim3 grid(static_cast<unsigned>((p.HV * Kg + 127) / 128), static_cast<unsigned>((rows + 255) / 256));
    gate_backward<<<grid, 128, 0, st>>>(a, g.dA ? g.dA->ptr<float>() : nullptr, g.ddt ? g.ddt->ptr<float>() : nullptr, rows, Kg);
    check(cudaGetLastError(), "gate_backward launch");
  }
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

void chunk_gla_forward(const ChunkGlaArgs& args, const AttentionOutputs& out, void* stream) {
  const Problem p = detail::validate_gla(args);
  detail::validate_outputs(p, out, DType::f32, detail::OutputDTypes::reference);
  RefArgs a = base_args(p, args.q, args.k, args.v, args.g, args.initial_state);
  a.op = kGla;
  run_forward(p, a, out, as_stream(stream));
}

void chunk_gla_backward(const ChunkGlaArgs& args, const AttentionGradInputs& grad_in, const ChunkGlaGrads& grads, void* stream) {
  const Problem p = detail::validate_gla(args);
  detail::validate_grad_inputs(p, grad_in);
  detail::validate_gla_grads(p, args, grads, detail::OutputDTypes::reference);
  RefArgs a = base_args(p, args.q, args.k, args.v, args.g, args.initial_state);
  a.op = kGla;
  run_backward(p, a, grad_in, {grads.dq, grads.dk, grads.dv, grads.dg, std::nullopt, grads.d_initial_state, std::nullopt, std::nullopt},
               as_stream(stream), args.q, args.k, nullptr);
}

void chunk_kda_forward(const ChunkKdaArgs& args, const AttentionOutputs& out, void* stream) {
  const Problem p = detail::validate_kda(args);
  detail::validate_outputs(p, out, DType::f32, detail::OutputDTypes::reference);
  const RefArgs a = kda_args(p, args);
  run_forward(p, a, out, as_stream(stream));
}

void chunk_kda_backward(const ChunkKdaArgs& args, const AttentionGradInputs& grad_in, const DeltaRuleGrads& grads, void* stream) {
  const Problem p = detail::validate_kda(args);
  detail::validate_grad_inputs(p, grad_in);
  detail::validate_delta_grads(p, args, grads, detail::OutputDTypes::reference);
  const RefArgs a = kda_args(p, args);
  run_backward(p, a, grad_in, delta_targets(grads), as_stream(stream), args.q, args.k, &args.beta);
}

void chunk_gdn_forward(const ChunkGdnArgs& args, const AttentionOutputs& out, void* stream) {
  const Problem p = detail::validate_gdn(args);
  detail::validate_outputs(p, out, DType::f32, detail::OutputDTypes::reference);
  const RefArgs a = delta_args(p, args, kGdn);
  run_forward(p, a, out, as_stream(stream));
}

void chunk_gdn_backward(const ChunkGdnArgs& args, const AttentionGradInputs& grad_in, const DeltaRuleGrads& grads, void* stream) {
  const Problem p = detail::validate_gdn(args);
  detail::validate_grad_inputs(p, grad_in);
  detail::validate_delta_grads(p, args, grads, detail::OutputDTypes::reference);
  const RefArgs a = delta_args(p, args, kGdn);
  run_backward(p, a, grad_in, delta_targets(grads), as_stream(stream), args.q, args.k, &args.beta);
}

}  // namespace lina::gpu_reference
