// chunk_gla on the CPU: the chunked algorithm of docs/math.md sections 3.1 (forward) and 4.1 (backward),
// chunk C = 64, fp32 accumulation, one (sequence, head) per task.
//
// Numerics (docs/math.md section 5): the gate cumsum b restarts every chunk and only non-positive
// differences are exponentiated: exp(b_r - b_j) with j <= r, exp(bL - b_j) and exp(b_r). Entries
// above the diagonal are never computed (no 0/1 mask ever meets an inf).
// GCC will not if-convert the float selects inside fast_exp while it must preserve FP exception
// flags, which keeps every exp loop scalar. Nothing here reads those flags. The pragma comes before
// any include so that every function in this file shares the option and stays inlinable.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "lina/error.h"
#include "ops/common/backends.h"
#include "ops/common/parallel.h"
#include "ops/common/cpu_math.h"

namespace lina::detail::cpu {
namespace {

constexpr std::int64_t kChunk = 64;
constexpr float kGateFloor = -88.0f;

using Buf = std::vector<float>;

// Copies `rows` rows of `width` elements, row r read at element ((row_begin + r) * heads + head) * width,
// converted to fp32. With rows = 1 and width = K*V it reads one [K, V] state of an [N, H, K, V] tensor.
void gather(const TensorView& t, std::int64_t row_begin, std::int64_t rows, std::int64_t head, std::int64_t heads,
            std::int64_t width, float* dst) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t off = ((row_begin + r) * heads + head) * width;
    float* d = dst + r * width;
    switch (t.dtype) {
      case DType::f32: std::memcpy(d, t.ptr<const float>() + off, static_cast<std::size_t>(width) * 4); break;
      case DType::f64: { const double* s = t.ptr<const double>() + off; for (std::int64_t i = 0; i < width; ++i) d[i] = static_cast<float>(s[i]); break; }
      case DType::bf16: { const auto* s = t.ptr<const std::uint16_t>() + off; for (std::int64_t i = 0; i < width; ++i) d[i] = bf16_bits_to_float(s[i]); break; }
      case DType::f16: { const auto* s = t.ptr<const std::uint16_t>() + off; for (std::int64_t i = 0; i < width; ++i) d[i] = f16_bits_to_float(s[i]); break; }
      default: throw_invalid("tensor", std::string("dtype ") + std::string(dtype_name(t.dtype)), "a floating dtype");
    }
  }
}

// The inverse of gather: rounds fp32 values to the tensor's dtype.
void scatter(const TensorView& t, std::int64_t row_begin, std::int64_t rows, std::int64_t head, std::int64_t heads,
             std::int64_t width, const float* src) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t off = ((row_begin + r) * heads + head) * width;
    const float* s = src + r * width;
    switch (t.dtype) {
      case DType::f32: std::memcpy(t.ptr<float>() + off, s, static_cast<std::size_t>(width) * 4); break;
      case DType::f64: { double* d = t.ptr<double>() + off; for (std::int64_t i = 0; i < width; ++i) d[i] = s[i]; break; }
      case DType::bf16: { auto* d = t.ptr<std::uint16_t>() + off; for (std::int64_t i = 0; i < width; ++i) d[i] = float_to_bf16_bits(s[i]); break; }
      case DType::f16: { auto* d = t.ptr<std::uint16_t>() + off; for (std::int64_t i = 0; i < width; ++i) d[i] = float_to_f16_bits(s[i]); break; }
      default: throw_invalid("tensor", std::string("dtype ") + std::string(dtype_name(t.dtype)), "a floating dtype");
    }
  }
}

// One (sequence, head) slice of the token inputs, in fp32.
struct Slice {
  std::int64_t L = 0, K = 0, V = 0;
  Buf q, k, v, g;
};

Slice load_slice(const Problem& p, const ChunkGlaArgs& a, const Sequence& seq, std::int64_t h) {
  Slice s;
  s.L = seq.length; s.K = p.K; s.V = p.V;
  s.q.resize(static_cast<std::size_t>(s.L * p.K));
  s.k.resize(s.q.size());
  s.g.resize(s.q.size());
  s.v.resize(static_cast<std::size_t>(s.L * p.V));
  gather(a.q, seq.row_begin, s.L, h, p.H, p.K, s.q.data());
  gather(a.k, seq.row_begin, s.L, h, p.H, p.K, s.k.data());
  gather(a.g, seq.row_begin, s.L, h, p.H, p.K, s.g.data());
  gather(a.v, seq.row_begin, s.L, h, p.H, p.V, s.v.data());
  // Any exponent that contains a gate <= kGateFloor is < -87 and fast_exp flushes it to 0, so the
  // floor changes no result; it keeps chunk cumsums small (fp32 differences of b stay precise after
  // a -1000 reset) and turns g = -inf into a clean reset instead of (-inf) - (-inf) = NaN.
  for (float& x : s.g) x = x < kGateFloor ? kGateFloor : x;  // NaN passes through
  return s;
}

// Per-chunk gate factors, all exponents <= 0 for g <= 0:
//   b   = chunk-local inclusive cumsum of g         [Cn, K]
//   qe  = scale * q * exp(b)         (inter-chunk read)
//   ke  = k * exp(bL - b)            (state update)
//   ebL = exp(bL)                    (state decay)  [K]
struct ChunkGates {
  Buf b, qe, ke, ebL;
  explicit ChunkGates(std::int64_t K)
      : b(static_cast<std::size_t>(kChunk * K)), qe(b.size()), ke(b.size()), ebL(static_cast<std::size_t>(K)) {}

  void compute(const Slice& s, std::int64_t t0, std::int64_t Cn, float scale) {
    const std::int64_t K = s.K;
    for (std::int64_t r = 0; r < Cn; ++r) {
      const float* g = s.g.data() + (t0 + r) * K;
      float* br = b.data() + r * K;
      if (r == 0) {
        std::copy(g, g + K, br);
      } else {
        const float* prev = br - K;
        for (std::int64_t c = 0; c < K; ++c) br[c] = prev[c] + g[c];
      }
    }
    const float* bL = b.data() + (Cn - 1) * K;
    for (std::int64_t c = 0; c < K; ++c) ebL[static_cast<std::size_t>(c)] = fast_exp(bL[c]);
    for (std::int64_t r = 0; r < Cn; ++r) {
      const float* br = b.data() + r * K;
      const float* q = s.q.data() + (t0 + r) * K;
      const float* k = s.k.data() + (t0 + r) * K;
      float* qer = qe.data() + r * K;
      float* ker = ke.data() + r * K;
      for (std::int64_t c = 0; c < K; ++c) {
        qer[c] = scale * q[c] * fast_exp(br[c]);
        ker[c] = k[c] * fast_exp(bL[c] - br[c]);
      }
    }
  }
};

// H <- diag(exp(bL)) H + ke^T @ Vc    (H is [K, V], row-major)
void update_state(float* H, const ChunkGates& cg, const float* vc, std::int64_t Cn, std::int64_t K, std::int64_t V) {
  for (std::int64_t c = 0; c < K; ++c) {
    const float d = cg.ebL[static_cast<std::size_t>(c)];
    float* hc = H + c * V;
    for (std::int64_t j = 0; j < V; ++j) hc[j] *= d;
  }
  for (std::int64_t j = 0; j < Cn; ++j) {
    const float* kej = cg.ke.data() + j * K;
    const float* vj = vc + j * V;
    for (std::int64_t c = 0; c < K; ++c) axpy(H + c * V, kej[c], vj, V);
  }
}

void load_state(const std::optional<TensorView>& t, std::int64_t n, std::int64_t h, std::int64_t H, std::int64_t KV, float* dst) {
  if (t) gather(*t, n, 1, h, H, KV, dst);
  else std::fill(dst, dst + KV, 0.0f);
}

void forward_one(const Problem& p, const ChunkGlaArgs& a, const AttentionOutputs& out, std::int64_t n, std::int64_t h) {
  const Sequence seq = p.sequences[static_cast<std::size_t>(n)];
  const std::int64_t K = p.K, V = p.V, L = seq.length;
  const float scale = static_cast<float>(p.scale);
  const Slice s = load_slice(p, a, seq, h);
  Buf H(static_cast<std::size_t>(K * V));
  load_state(a.initial_state, n, h, p.H, K * V, H.data());
  Buf o(static_cast<std::size_t>(L * V), 0.0f);
  ChunkGates cg(K);
  Buf kx(static_cast<std::size_t>(K));  // k_j * exp(b_r - b_j) for one (r, j)

  for (std::int64_t t0 = 0; t0 < L; t0 += kChunk) {
    const std::int64_t Cn = std::min(kChunk, L - t0);
    cg.compute(s, t0, Cn, scale);
    const float* vc = s.v.data() + t0 * V;
    for (std::int64_t r = 0; r < Cn; ++r) {
      float* orow = o.data() + (t0 + r) * V;
      // Inter-chunk read: o_r = (scale q_r * exp(b_r))^T H_n.
      const float* qer = cg.qe.data() + r * K;
      for (std::int64_t c = 0; c < K; ++c) axpy(orow, qer[c], H.data() + c * V, V);
      // Intra-chunk: o_r += sum_{j<=r} Aqk[r,j] v_j, Aqk[r,j] = scale sum_c q_rc k_jc exp(b_rc - b_jc).
      const float* q = s.q.data() + (t0 + r) * K;
      const float* br = cg.b.data() + r * K;
      for (std::int64_t j = 0; j <= r; ++j) {
        const float* bj = cg.b.data() + j * K;
        const float* kj = s.k.data() + (t0 + j) * K;
        for (std::int64_t c = 0; c < K; ++c) kx[static_cast<std::size_t>(c)] = kj[c] * fast_exp(br[c] - bj[c]);
        const float A = scale * dot(q, kx.data(), K);
        axpy(orow, A, vc + j * V, V);
      }
    }
    update_state(H.data(), cg, vc, Cn, K, V);
  }
  scatter(out.o, seq.row_begin, L, h, p.H, V, o.data());
  if (out.final_state) scatter(*out.final_state, n, 1, h, p.H, K * V, H.data());
}

void transpose(const float* src, std::int64_t rows, std::int64_t cols, float* dst) {
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) dst[j * rows + i] = src[i * cols + j];
}

void backward_one(const Problem& p, const ChunkGlaArgs& a, const AttentionGradInputs& gin, const ChunkGlaGrads& gr,
                  std::int64_t n, std::int64_t h) {
  const Sequence seq = p.sequences[static_cast<std::size_t>(n)];
  const std::int64_t K = p.K, V = p.V, L = seq.length, KV = K * V;
  const float scale = static_cast<float>(p.scale);
  const std::int64_t NT = (L + kChunk - 1) / kChunk;
  const Slice s = load_slice(p, a, seq, h);
  Buf dO(static_cast<std::size_t>(L * V));
  gather(gin.d_o, seq.row_begin, L, h, p.H, V, dO.data());

  // B2: recompute the state entering every chunk, in fp32.
  Buf Hs(static_cast<std::size_t>((NT + 1) * KV));
  load_state(a.initial_state, n, h, p.H, KV, Hs.data());
  ChunkGates cg(K);
  for (std::int64_t c = 0; c < NT; ++c) {
    const std::int64_t t0 = c * kChunk, Cn = std::min(kChunk, L - t0);
    std::copy(Hs.begin() + c * KV, Hs.begin() + (c + 1) * KV, Hs.begin() + (c + 1) * KV);
    if (c + 1 < NT) {  // the final state is not needed
      cg.compute(s, t0, Cn, scale);
      update_state(Hs.data() + (c + 1) * KV, cg, s.v.data() + t0 * V, Cn, K, V);
    }
  }

  // D = dL/d(state leaving the current chunk): starts at dht, ends as dh0 (B3).
  Buf D(static_cast<std::size_t>(KV));
  load_state(gin.d_final_state, n, h, p.H, KV, D.data());

  Buf dq(static_cast<std::size_t>(L * K), 0.0f), dk(dq.size(), 0.0f), dg(dq.size()), dv(static_cast<std::size_t>(L * V), 0.0f);
  Buf A(static_cast<std::size_t>(kChunk * kChunk)), dA(A.size());
  Buf HT(static_cast<std::size_t>(KV)), DT(static_cast<std::size_t>(KV));
  Buf kx(static_cast<std::size_t>(K)), tmp(static_cast<std::size_t>(K)), last(static_cast<std::size_t>(K));

  for (std::int64_t c = NT - 1; c >= 0; --c) {
    const std::int64_t t0 = c * kChunk, Cn = std::min(kChunk, L - t0);
    cg.compute(s, t0, Cn, scale);
    const float* Hn = Hs.data() + c * KV;
    const float* qc = s.q.data() + t0 * K;
    const float* kc = s.k.data() + t0 * K;
    const float* vc = s.v.data() + t0 * V;
    const float* doc = dO.data() + t0 * V;
    float* dqc = dq.data() + t0 * K;
    float* dkc = dk.data() + t0 * K;
    float* dvc = dv.data() + t0 * V;
    float* dgc = dg.data() + t0 * K;

    // B5: dA = tril_incl(scale dO V^T).
    for (std::int64_t r = 0; r < Cn; ++r)
      for (std::int64_t j = 0; j <= r; ++j) dA[static_cast<std::size_t>(r * kChunk + j)] = scale * dot(doc + r * V, vc + j * V, V);

    // Recompute Aqk and do B6 (intra dq / dk) with the same exponentials.
    for (std::int64_t r = 0; r < Cn; ++r) {
      const float* qr = qc + r * K;
      const float* br = cg.b.data() + r * K;
      float* dqr = dqc + r * K;
      for (std::int64_t j = 0; j <= r; ++j) {
        const float* kj = kc + j * K;
        const float* bj = cg.b.data() + j * K;
        float* dkj = dkc + j * K;
        const float da = dA[static_cast<std::size_t>(r * kChunk + j)];
        for (std::int64_t i = 0; i < K; ++i) {
          const float e = fast_exp(br[i] - bj[i]);
          const float ke = kj[i] * e;
          kx[static_cast<std::size_t>(i)] = ke;
          dqr[i] += da * ke;
          dkj[i] += da * qr[i] * e;
        }
        A[static_cast<std::size_t>(r * kChunk + j)] = scale * dot(qr, kx.data(), K);
      }
    }

    // B4: dV = Aqk^T dO + ke @ dh[n].
    for (std::int64_t j = 0; j < Cn; ++j) {
      float* dvj = dvc + j * V;
      for (std::int64_t r = j; r < Cn; ++r) axpy(dvj, A[static_cast<std::size_t>(r * kChunk + j)], doc + r * V, V);
      const float* kej = cg.ke.data() + j * K;
      for (std::int64_t i = 0; i < K; ++i) axpy(dvj, kej[i], D.data() + i * V, V);
    }

    // B7: inter-chunk parts of dq and dk, then db and its reverse chunk-local cumsum.
    transpose(Hn, K, V, HT.data());
    transpose(D.data(), K, V, DT.data());
    std::fill(last.begin(), last.end(), 0.0f);
    const float* bL = cg.b.data() + (Cn - 1) * K;
    for (std::int64_t r = 0; r < Cn; ++r) {
      const float* br = cg.b.data() + r * K;
      // dq_e = scale exp(b_r) (dO_r @ H_n^T)
      std::fill(tmp.begin(), tmp.end(), 0.0f);
      for (std::int64_t j = 0; j < V; ++j) axpy(tmp.data(), doc[r * V + j], HT.data() + j * K, K);
      float* dqr = dqc + r * K;
      for (std::int64_t i = 0; i < K; ++i) dqr[i] += scale * fast_exp(br[i]) * tmp[static_cast<std::size_t>(i)];
      // dk_e = exp(bL - b_r) (v_r @ dh[n]^T); its colsum against k joins the last row of db.
      std::fill(tmp.begin(), tmp.end(), 0.0f);
      for (std::int64_t j = 0; j < V; ++j) axpy(tmp.data(), vc[r * V + j], DT.data() + j * K, K);
      float* dkr = dkc + r * K;
      const float* kr = kc + r * K;
      for (std::int64_t i = 0; i < K; ++i) {
        const float dke = fast_exp(bL[i] - br[i]) * tmp[static_cast<std::size_t>(i)];
        dkr[i] += dke;
        last[static_cast<std::size_t>(i)] += kr[i] * dke;
      }
    }
    for (std::int64_t i = 0; i < K; ++i)
      last[static_cast<std::size_t>(i)] += cg.ebL[static_cast<std::size_t>(i)] * dot(Hn + i * V, D.data() + i * V, V);
    // dg_t = sum_{s >= t in chunk} db_s, db = q dq - k dk (+ last-row terms).
    for (std::int64_t i = 0; i < K; ++i) tmp[static_cast<std::size_t>(i)] = last[static_cast<std::size_t>(i)];
    for (std::int64_t r = Cn - 1; r >= 0; --r) {
      const float* qr = qc + r * K;
      const float* kr = kc + r * K;
      const float* dqr = dqc + r * K;
      const float* dkr = dkc + r * K;
      float* dgr = dgc + r * K;
      for (std::int64_t i = 0; i < K; ++i) {
        tmp[static_cast<std::size_t>(i)] += qr[i] * dqr[i] - kr[i] * dkr[i];
        dgr[i] = tmp[static_cast<std::size_t>(i)];
      }
    }

    // B3: D <- diag(exp(bL)) D + (scale q exp(b))^T dO, i.e. dh[n-1].
    for (std::int64_t i = 0; i < K; ++i) {
      const float d = cg.ebL[static_cast<std::size_t>(i)];
      float* Di = D.data() + i * V;
      for (std::int64_t j = 0; j < V; ++j) Di[j] *= d;
    }
    for (std::int64_t r = 0; r < Cn; ++r) {
      const float* qer = cg.qe.data() + r * K;
      for (std::int64_t i = 0; i < K; ++i) axpy(D.data() + i * V, qer[i], doc + r * V, V);
    }
  }

  scatter(gr.dq, seq.row_begin, L, h, p.H, K, dq.data());
  scatter(gr.dk, seq.row_begin, L, h, p.H, K, dk.data());
  scatter(gr.dv, seq.row_begin, L, h, p.H, V, dv.data());
  scatter(gr.dg, seq.row_begin, L, h, p.H, K, dg.data());
  if (gr.d_initial_state) scatter(*gr.d_initial_state, n, 1, h, p.H, KV, D.data());
}

}  // namespace

RunInfo chunk_gla_forward(const Problem& p, const ChunkGlaArgs& a, const AttentionOutputs& out, ForwardMode mode,
                          const ExecOptions& opts) {
  (void)mode;  // nothing is saved for the backward: it recomputes the chunk states
  parallel_for(p.N * p.H, opts.num_threads, [&](std::int64_t item) { forward_one(p, a, out, item / p.H, item % p.H); });
  return RunInfo{"cpu", {"gate_cumsum", "fwd_h", "fwd_intra", "fwd_o"}};
}

RunInfo chunk_gla_backward(const Problem& p, const ChunkGlaArgs& a, const AttentionGradInputs& in, const ChunkGlaGrads& g,
                           const ExecOptions& opts) {
  parallel_for(p.N * p.H, opts.num_threads, [&](std::int64_t item) { backward_one(p, a, in, g, item / p.H, item % p.H); });
  return RunInfo{"cpu", {"gate_cumsum", "fwd_h", "bwd_dh", "bwd_dv", "bwd_dA", "bwd_dqk_intra", "bwd_dqkg"}};
}

}  // namespace lina::detail::cpu
