// No code here relies on floating-point exception flags; without this GCC refuses to if-convert the
// selects in fast_exp and the exp loops stay scalar.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "ops/delta/cpu_kernels.h"

#include "ops/common/cpu_math.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace lina::detail::delta::cpu {
namespace {

using i64 = std::int64_t;
using Buf = std::vector<float>;

using lina::detail::cpu::dot;
using lina::detail::cpu::fast_exp;

// C[m x n] = beta_c * C + alpha * A[m x p] @ B[p x n]; row-major, dense (leading dim = column count).
void gemm_nn(i64 m, i64 n, i64 p, float alpha, const float* __restrict A, const float* __restrict B, bool accumulate,
             float* __restrict C) {
  if (!accumulate) std::fill(C, C + m * n, 0.0f);
  for (i64 i = 0; i < m; ++i) {
    float* c = C + i * n;
    for (i64 l = 0; l < p; ++l) {
      const float a = alpha * A[i * p + l];
      if (a == 0.0f) continue;  // skips the zero halves of triangular operands
      const float* b = B + l * n;
      for (i64 j = 0; j < n; ++j) c[j] += a * b[j];
    }
  }
}

// C[m x n] (+)= alpha * A^T @ B with A [p x m], B [p x n].
void gemm_tn(i64 m, i64 n, i64 p, float alpha, const float* __restrict A, const float* __restrict B, bool accumulate,
             float* __restrict C) {
  if (!accumulate) std::fill(C, C + m * n, 0.0f);
  for (i64 l = 0; l < p; ++l) {
    const float* b = B + l * n;
    for (i64 i = 0; i < m; ++i) {
      const float a = alpha * A[l * m + i];
      if (a == 0.0f) continue;
      float* c = C + i * n;
      for (i64 j = 0; j < n; ++j) c[j] += a * b[j];
    }
  }
}

void transpose(i64 rows, i64 cols, const float* A, float* At) {
  for (i64 i = 0; i < rows; ++i)
    for (i64 j = 0; j < cols; ++j) At[j * rows + i] = A[i * cols + j];
}

// Everything the backward needs from one chunk's forward.
struct ChunkState {
  i64 t0 = 0, n = 0;
  Buf b;     // n x K chunk-local inclusive cumsum of g
  Buf Aqk;   // n x n, scale * gated q k^T, j <= r
  Buf Tinv;  // n x n, (I + L)^{-1}
  Buf w;     // n x K
  Buf vnew;  // n x V
  Buf H;     // K x V, the state entering the chunk
};

// Aqk (j <= r, scale included) and L (j < r) of one chunk.
void intra_forward(const HeadInputs& in, const float* q, const float* k, const float* beta, const float* b, i64 n,
                   float* Aqk, float* Lm) {
  const i64 K = in.K;
  std::fill(Aqk, Aqk + n * n, 0.0f);
  std::fill(Lm, Lm + n * n, 0.0f);
  if (in.scalar_gate) {
    for (i64 r = 0; r < n; ++r)
      for (i64 j = 0; j <= r; ++j) {
        const float gam = fast_exp(b[r * K] - b[j * K]);
        Aqk[r * n + j] = in.scale * dot(q + r * K, k + j * K, K) * gam;
        if (j < r) Lm[r * n + j] = beta[r] * dot(k + r * K, k + j * K, K) * gam;
      }
    return;
  }
  Buf qe(K), ke(K);
  for (i64 r = 0; r < n; ++r) {
    const float* br = b + r * K;
    const float* qr = q + r * K;
    const float* kr = k + r * K;
    for (i64 j = 0; j <= r; ++j) {
      const float* bj = b + j * K;
      // Only r >= j is ever exponentiated: b_r - b_j <= 0.
      for (i64 c = 0; c < K; ++c) {
        const float e = fast_exp(br[c] - bj[c]);
        qe[c] = qr[c] * e;
        ke[c] = kr[c] * e;
      }
      const float* kj = k + j * K;
      Aqk[r * n + j] = in.scale * dot(qe.data(), kj, K);
      if (j < r) Lm[r * n + j] = beta[r] * dot(ke.data(), kj, K);
    }
  }
}

// X = (I + L)^{-1} by forward substitution: X[i,:] = e_i - sum_{j<i} L[i,j] X[j,:].
void solve_unit_lower(i64 n, const float* Lm, float* X) {
  std::fill(X, X + n * n, 0.0f);
  for (i64 i = 0; i < n; ++i) {
    float* xi = X + i * n;
    xi[i] = 1.0f;
    for (i64 j = 0; j < i; ++j) {
      const float l = Lm[i * n + j];
      if (l == 0.0f) continue;
      const float* xj = X + j * n;
      for (i64 c = 0; c <= j; ++c) xi[c] -= l * xj[c];
    }
  }
}

// One chunk of the forward: fills cs (b, Aqk, Tinv, w, vnew, H on entry), writes o rows if o is given
// and advances `state` to the next chunk.
void chunk_forward(const HeadInputs& in, i64 t0, i64 n, float* state, float* o, ChunkState& cs) {
  const i64 K = in.K, V = in.V;
  const float* q = in.q + t0 * K;
  const float* k = in.k + t0 * K;
  const float* v = in.v + t0 * V;
  const float* g = in.g + t0 * K;
  const float* beta = in.beta + t0;
  cs.t0 = t0;
  cs.n = n;
  cs.b.resize(n * K);
  cs.Aqk.resize(n * n);
  cs.Tinv.resize(n * n);
  cs.w.resize(n * K);
  cs.vnew.resize(n * V);
  cs.H.assign(state, state + K * V);

  float* b = cs.b.data();
  for (i64 c = 0; c < K; ++c) b[c] = g[c];
  for (i64 r = 1; r < n; ++r)
    for (i64 c = 0; c < K; ++c) b[r * K + c] = b[(r - 1) * K + c] + g[r * K + c];
  const float* bL = b + (n - 1) * K;

  Buf Lm(n * n);
  intra_forward(in, q, k, beta, b, n, cs.Aqk.data(), Lm.data());
  solve_unit_lower(n, Lm.data(), cs.Tinv.data());

  // w = Tinv @ (k * exp(b) * beta), u = Tinv @ (v * beta); vnew = u - w @ H.
  Buf kbe(n * K), vb(n * V), qg(n * K), kg(n * K);
  for (i64 r = 0; r < n; ++r) {
    for (i64 c = 0; c < K; ++c) {
      const float eb = fast_exp(b[r * K + c]);
      kbe[r * K + c] = k[r * K + c] * eb * beta[r];
      qg[r * K + c] = q[r * K + c] * eb;
      kg[r * K + c] = k[r * K + c] * fast_exp(bL[c] - b[r * K + c]);
    }
    for (i64 c = 0; c < V; ++c) vb[r * V + c] = v[r * V + c] * beta[r];
  }
  gemm_nn(n, K, n, 1.0f, cs.Tinv.data(), kbe.data(), false, cs.w.data());
  gemm_nn(n, V, n, 1.0f, cs.Tinv.data(), vb.data(), false, cs.vnew.data());
  gemm_nn(n, V, K, -1.0f, cs.w.data(), state, true, cs.vnew.data());

  if (o) {  // o = scale * qg @ H + Aqk @ vnew
    float* orow = o + t0 * V;
    gemm_nn(n, V, K, in.scale, qg.data(), state, false, orow);
    gemm_nn(n, V, n, 1.0f, cs.Aqk.data(), cs.vnew.data(), true, orow);
  }

  // H <- diag(exp(bL)) H + kg^T @ vnew
  for (i64 c = 0; c < K; ++c) {
    const float d = fast_exp(bL[c]);
    for (i64 j = 0; j < V; ++j) state[c * V + j] *= d;
  }
  gemm_tn(K, V, n, 1.0f, kg.data(), cs.vnew.data(), true, state);
}

// dq_r += a k_j e; kr_r += m k_j e; dk_j += (a q_r + mb k_r) e (separate arrays, hence restrict).
void intra_update(i64 K, float a, float mb, float m, const float* __restrict e, const float* __restrict kj,
                  const float* __restrict qr, const float* __restrict kr_in, float* __restrict dqr,
                  float* __restrict krr, float* __restrict dkj) {
  for (i64 c = 0; c < K; ++c) {
    const float ke = kj[c] * e[c];
    dqr[c] += a * ke;
    krr[c] += m * ke;
    dkj[c] += (a * qr[c] + mb * kr_in[c]) * e[c];
  }
}

// Intra-chunk backward (docs/math.md section 4.3, B5) for the gated products behind Aqk and L.
void intra_backward(const HeadInputs& in, const float* q, const float* k, const float* beta, const float* b, i64 n,
                    const float* dAqk, const float* dAkk, float* dq_i, float* kr, float* dkt) {
  const i64 K = in.K;
  if (in.scalar_gate) {
    Buf P1(n * n, 0.0f), P2(n * n, 0.0f), bk(n * K);
    for (i64 r = 0; r < n; ++r)
      for (i64 j = 0; j <= r; ++j) {
        const float gam = fast_exp(b[r * K] - b[j * K]);
        P1[r * n + j] = dAqk[r * n + j] * gam;
        if (j < r) P2[r * n + j] = dAkk[r * n + j] * gam;
      }
    for (i64 r = 0; r < n; ++r)
      for (i64 c = 0; c < K; ++c) bk[r * K + c] = beta[r] * k[r * K + c];
    gemm_nn(n, K, n, 1.0f, P1.data(), k, false, dq_i);
    gemm_nn(n, K, n, 1.0f, P2.data(), k, false, kr);
    gemm_tn(n, K, n, 1.0f, P1.data(), q, false, dkt);
    gemm_tn(n, K, n, 1.0f, P2.data(), bk.data(), true, dkt);
    return;
  }
  std::fill(dq_i, dq_i + n * K, 0.0f);
  std::fill(kr, kr + n * K, 0.0f);
  std::fill(dkt, dkt + n * K, 0.0f);
  Buf e(K);
  for (i64 r = 0; r < n; ++r) {
    const float* br = b + r * K;
    const float* qr = q + r * K;
    const float* kr_in = k + r * K;
    float* dqr = dq_i + r * K;
    float* krr = kr + r * K;
    const float bt = beta[r];
    for (i64 j = 0; j <= r; ++j) {
      const float a = dAqk[r * n + j];
      const float m = j < r ? dAkk[r * n + j] : 0.0f;
      if (a == 0.0f && m == 0.0f) continue;
      const float* bj = b + j * K;
      const float* kj = k + j * K;
      float* dkj = dkt + j * K;
      for (i64 c = 0; c < K; ++c) e[c] = fast_exp(br[c] - bj[c]);
      intra_update(K, a, m * bt, m, e.data(), kj, qr, kr_in, dqr, krr, dkj);
    }
  }
}

// One chunk of the backward. D is dh[n] on entry (gradient w.r.t. the state after the chunk) and the
// gradient w.r.t. the state entering the chunk on return.
void chunk_backward(const HeadInputs& in, const ChunkState& cs, const float* d_o_all, float* D, const HeadGrads& out) {
  const i64 K = in.K, V = in.V, n = cs.n, t0 = cs.t0;
  const float* q = in.q + t0 * K;
  const float* k = in.k + t0 * K;
  const float* v = in.v + t0 * V;
  const float* beta = in.beta + t0;
  const float* dO = d_o_all + t0 * V;
  const float* b = cs.b.data();
  const float* bL = b + (n - 1) * K;
  const float* H = cs.H.data();
  const float scale = in.scale;

  Buf eb(n * K), qg(n * K), kg(n * K), kgb(n * K), ebL(K);
  for (i64 r = 0; r < n; ++r)
    for (i64 c = 0; c < K; ++c) {
      const i64 x = r * K + c;
      eb[x] = fast_exp(b[x]);
      qg[x] = q[x] * eb[x];
      kgb[x] = k[x] * eb[x];
      kg[x] = k[x] * fast_exp(bL[c] - b[x]);
    }
  for (i64 c = 0; c < K; ++c) ebL[c] = fast_exp(bL[c]);

  // dAqk = tril_incl(scale * dO @ vnew^T); dvn = Aqk^T @ dO + kg @ D.
  Buf dAqk(n * n, 0.0f), dvn(n * V);
  for (i64 r = 0; r < n; ++r)
    for (i64 j = 0; j <= r; ++j) dAqk[r * n + j] = scale * dot(dO + r * V, cs.vnew.data() + j * V, V);
  gemm_tn(n, V, n, 1.0f, cs.Aqk.data(), dO, false, dvn.data());
  gemm_nn(n, V, K, 1.0f, kg.data(), D, true, dvn.data());

  Buf Ht(V * K), Dt(V * K);
  transpose(K, V, H, Ht.data());
  transpose(K, V, D, Dt.data());
  Buf dq(n * K), dk_e(n * K), dw(n * K);
  gemm_nn(n, K, V, scale, dO, Ht.data(), false, dq.data());            // scale * dO @ H^T
  gemm_nn(n, K, V, 1.0f, cs.vnew.data(), Dt.data(), false, dk_e.data());  // vnew @ D^T
  gemm_nn(n, K, V, -1.0f, dvn.data(), Ht.data(), false, dw.data());     // -(dvn @ H^T)
  for (i64 x = 0; x < n * K; ++x) {
    dq[x] *= eb[x];
    dk_e[x] *= fast_exp(bL[x % K] - b[x]);
  }

  // dT = tril_strict((dw @ kgb^T + dvn @ v^T) * beta[None, :])
  Buf dT(n * n, 0.0f);
  for (i64 r = 0; r < n; ++r)
    for (i64 j = 0; j < r; ++j)
      dT[r * n + j] = (dot(dw.data() + r * K, kgb.data() + j * K, K) + dot(dvn.data() + r * V, v + j * V, V)) * beta[j];

  Buf dkgb(n * K), dvb(n * V);
  gemm_tn(n, K, n, 1.0f, cs.Tinv.data(), dw.data(), false, dkgb.data());
  gemm_tn(n, V, n, 1.0f, cs.Tinv.data(), dvn.data(), false, dvb.data());

  float* dv = out.dv + t0 * V;
  float* dbeta = out.dbeta + t0;
  float* db = out.dg + t0 * K;  // db first, reverse-cumsummed in place at the end
  float* dk = out.dk + t0 * K;
  for (i64 r = 0; r < n; ++r) {
    for (i64 c = 0; c < V; ++c) dv[r * V + c] = dvb[r * V + c] * beta[r];
    dbeta[r] = dot(dvb.data() + r * V, v + r * V, V) + dot(dkgb.data() + r * K, kgb.data() + r * K, K);
    for (i64 c = 0; c < K; ++c) {
      const i64 x = r * K + c;
      db[x] = q[x] * dq[x] - k[x] * dk_e[x] + kgb[x] * dkgb[x] * beta[r];
      dk[x] = dk_e[x] + dkgb[x] * eb[x] * beta[r];
    }
  }
  // Terms that depend on bL go to the last row.
  for (i64 c = 0; c < K; ++c) {
    float s = 0.0f;
    for (i64 r = 0; r < n; ++r) s += k[r * K + c] * dk_e[r * K + c];
    db[(n - 1) * K + c] += ebL[c] * dot(H + c * V, D + c * V, V) + s;
  }

  // dAkk = tril_strict(-(Tinv^T @ dT @ Tinv^T))
  Buf X(n * n), TinvT(n * n), dAkk(n * n);
  gemm_tn(n, n, n, 1.0f, cs.Tinv.data(), dT.data(), false, X.data());
  transpose(n, n, cs.Tinv.data(), TinvT.data());
  gemm_nn(n, n, n, -1.0f, X.data(), TinvT.data(), false, dAkk.data());
  for (i64 r = 0; r < n; ++r)
    for (i64 j = r; j < n; ++j) dAkk[r * n + j] = 0.0f;

  Buf dq_i(n * K), kr(n * K), dkt(n * K);
  intra_backward(in, q, k, beta, b, n, dAqk.data(), dAkk.data(), dq_i.data(), kr.data(), dkt.data());
  float* dqo = out.dq + t0 * K;
  for (i64 r = 0; r < n; ++r) {
    dbeta[r] += dot(kr.data() + r * K, k + r * K, K);
    for (i64 c = 0; c < K; ++c) {
      const i64 x = r * K + c;
      const float dk_row = beta[r] * kr[x];
      dqo[x] = dq[x] + dq_i[x];
      dk[x] += dk_row + dkt[x];
      db[x] += q[x] * dq_i[x] + (dk_row - dkt[x]) * k[x];
    }
  }
  // dg = reverse chunk-local cumsum of db.
  for (i64 r = n - 2; r >= 0; --r)
    for (i64 c = 0; c < K; ++c) db[r * K + c] += db[(r + 1) * K + c];

  // D <- diag(exp(bL)) D + scale * qg^T @ dO - w^T @ dvn
  for (i64 c = 0; c < K; ++c)
    for (i64 j = 0; j < V; ++j) D[c * V + j] *= ebL[c];
  gemm_tn(K, V, n, scale, qg.data(), dO, true, D);
  gemm_tn(K, V, n, -1.0f, cs.w.data(), dvn.data(), true, D);
}

}  // namespace

void forward_head(const HeadInputs& in, float* state, float* o) {
  ChunkState cs;
  for (i64 t0 = 0; t0 < in.L; t0 += kChunk) chunk_forward(in, t0, std::min(kChunk, in.L - t0), state, o, cs);
}

void backward_head(const HeadInputs& in, const float* h0, const float* d_o, float* dstate, const HeadGrads& out) {
  const i64 NT = (in.L + kChunk - 1) / kChunk;
  std::vector<ChunkState> chunks(static_cast<std::size_t>(NT));
  Buf state(h0, h0 + in.K * in.V);
  for (i64 c = 0; c < NT; ++c)
    chunk_forward(in, c * kChunk, std::min(kChunk, in.L - c * kChunk), state.data(), nullptr,
                  chunks[static_cast<std::size_t>(c)]);
  for (i64 c = NT - 1; c >= 0; --c) chunk_backward(in, chunks[static_cast<std::size_t>(c)], d_o, dstate, out);
}

}  // namespace lina::detail::delta::cpu
