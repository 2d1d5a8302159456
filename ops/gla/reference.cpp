// chunk_gla fp64 reference: the naive per-token recurrence of docs/math.md section 2, forward and backward.
//   S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T,   o_t = S_t^T (scale q_t)
// It is the ground truth every backend is compared with, so it favours plainness over speed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/common/backends.h"
#include "ops/common/host_io.h"
#include "ops/common/parallel.h"

namespace lina::detail::reference {
namespace {

// The backward recomputes states from checkpoints taken every kCheckpoint tokens, so memory stays
// O(kCheckpoint * K * V) per (sequence, head) instead of O(L * K * V).
constexpr std::int64_t kCheckpoint = 64;

// One (sequence, head) slice of the inputs as doubles: token rows 0..L-1 of the sequence, and its
// [K, V] initial state (zeros when absent). Loading per slice keeps memory proportional to the
// work in flight rather than to the whole problem.
struct Slice {
  std::int64_t L = 0, K = 0, V = 0;
  std::vector<double> q, k, v, g, h0;
  const double* key_row(const std::vector<double>& x, std::int64_t t) const { return x.data() + t * K; }
  const double* val_row(const std::vector<double>& x, std::int64_t t) const { return x.data() + t * V; }
};

// rows x width elements, row r at ((row_begin + r) * heads + head) * width of a contiguous tensor.
std::vector<double> gather(const TensorView& t, std::int64_t row_begin, std::int64_t rows, std::int64_t head,
                           std::int64_t heads, std::int64_t width) {
  std::vector<double> out(static_cast<std::size_t>(rows * width));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t off = ((row_begin + r) * heads + head) * width;
    for (std::int64_t i = 0; i < width; ++i) out[static_cast<std::size_t>(r * width + i)] = load_element(t, off + i);
  }
  return out;
}

Slice load_slice(const Problem& p, const ChunkGlaArgs& a, std::int64_t n, std::int64_t h) {
  const Sequence seq = p.sequences[static_cast<std::size_t>(n)];
  Slice s;
  s.L = seq.length; s.K = p.K; s.V = p.V;
  s.q = gather(a.q, seq.row_begin, s.L, h, p.H, p.K);
  s.k = gather(a.k, seq.row_begin, s.L, h, p.H, p.K);
  s.g = gather(a.g, seq.row_begin, s.L, h, p.H, p.K);
  s.v = gather(a.v, seq.row_begin, s.L, h, p.H, p.V);
  if (a.initial_state) s.h0 = gather(*a.initial_state, n, 1, h, p.H, p.K * p.V);
  else s.h0.assign(static_cast<std::size_t>(p.K * p.V), 0.0);
  return s;
}

// Element offsets into [rows, H, D] token tensors and [N, H, K, V] states.
struct Layout {
  std::int64_t H, K, V;
  std::int64_t key(std::int64_t row, std::int64_t h) const { return (row * H + h) * K; }
  std::int64_t val(std::int64_t row, std::int64_t h) const { return (row * H + h) * V; }
  std::int64_t state(std::int64_t n, std::int64_t h) const { return (n * H + h) * K * V; }
};

// One recurrence step in place: S = diag(exp(g_t)) S + k_t v_t^T.
void step(const Slice& s, std::int64_t t, double* S) {
  const double* k = s.key_row(s.k, t);
  const double* g = s.key_row(s.g, t);
  const double* v = s.val_row(s.v, t);
  for (std::int64_t c = 0; c < s.K; ++c) {
    const double a = std::exp(g[c]);
    double* row = S + c * s.V;
    for (std::int64_t j = 0; j < s.V; ++j) row[j] = a * row[j] + k[c] * v[j];
  }
}

}  // namespace

void chunk_gla_forward(const Problem& p, const ChunkGlaArgs& a, const AttentionOutputs& out) {
  const Layout lay{p.H, p.K, p.V};
  parallel_for(p.N * p.H, 0, [&](std::int64_t item) {
    const std::int64_t n = item / p.H, h = item % p.H;
    const std::int64_t row_begin = p.sequences[static_cast<std::size_t>(n)].row_begin;
    const Slice s = load_slice(p, a, n, h);
    std::vector<double> S = s.h0;
    for (std::int64_t t = 0; t < s.L; ++t) {
      step(s, t, S.data());
      const double* q = s.key_row(s.q, t);
      for (std::int64_t j = 0; j < p.V; ++j) {
        double acc = 0;
        for (std::int64_t c = 0; c < p.K; ++c) acc += S[static_cast<std::size_t>(c * p.V + j)] * q[c];
        store_element(out.o, lay.val(row_begin + t, h) + j, p.scale * acc);
      }
    }
    if (out.final_state) {
      for (std::int64_t e = 0; e < p.K * p.V; ++e) store_element(*out.final_state, lay.state(n, h) + e, S[static_cast<std::size_t>(e)]);
    }
  });
}

void chunk_gla_backward(const Problem& p, const ChunkGlaArgs& a, const AttentionGradInputs& gin, const ChunkGlaGrads& gr) {
  const Layout lay{p.H, p.K, p.V};
  const std::int64_t KV = p.K * p.V;
  parallel_for(p.N * p.H, 0, [&](std::int64_t item) {
    const std::int64_t n = item / p.H, h = item % p.H;
    const std::int64_t row_begin = p.sequences[static_cast<std::size_t>(n)].row_begin;
    const Slice s = load_slice(p, a, n, h);
    const std::int64_t L = s.L;
    const std::vector<double> dout = gather(gin.d_o, row_begin, L, h, p.H, p.V);
    const std::int64_t segments = (L + kCheckpoint - 1) / kCheckpoint;

    // Forward sweep: checkpoints[m] is the state entering token m * kCheckpoint.
    std::vector<double> S = s.h0;
    std::vector<double> checkpoints(static_cast<std::size_t>(segments * KV));
    for (std::int64_t t = 0; t < L; ++t) {
      if (t % kCheckpoint == 0) std::copy(S.begin(), S.end(), checkpoints.begin() + (t / kCheckpoint) * KV);
      step(s, t, S.data());
    }

    std::vector<double> dS = gin.d_final_state ? gather(*gin.d_final_state, n, 1, h, p.H, KV)
                                               : std::vector<double>(static_cast<std::size_t>(KV), 0.0);

    // states[i] = S before token t0 + i; states[i + 1] = S after it.
    std::vector<double> states(static_cast<std::size_t>((kCheckpoint + 1) * KV));
    std::vector<double> dk(static_cast<std::size_t>(p.K)), dg(static_cast<std::size_t>(p.K));
    std::vector<double> dq(static_cast<std::size_t>(p.K)), dv(static_cast<std::size_t>(p.V));
    for (std::int64_t m = segments - 1; m >= 0; --m) {
      const std::int64_t t0 = m * kCheckpoint, t1 = std::min(L, t0 + kCheckpoint);
      std::copy(checkpoints.begin() + m * KV, checkpoints.begin() + (m + 1) * KV, states.begin());
      for (std::int64_t t = t0; t < t1; ++t) {
        double* next = states.data() + (t - t0 + 1) * KV;
        std::copy(next - KV, next, next);
        step(s, t, next);
      }
      for (std::int64_t t = t1 - 1; t >= t0; --t) {
        const std::int64_t row = row_begin + t;
        const double* St = states.data() + (t - t0 + 1) * KV;
        const double* Sprev = states.data() + (t - t0) * KV;
        const double* q = s.key_row(s.q, t);
        const double* k = s.key_row(s.k, t);
        const double* g = s.key_row(s.g, t);
        const double* v = s.val_row(s.v, t);
        const double* dO = dout.data() + t * p.V;
        std::fill(dv.begin(), dv.end(), 0.0);
        for (std::int64_t c = 0; c < p.K; ++c) {
          double* ds = dS.data() + c * p.V;
          const double* st = St + c * p.V;
          const double* sp = Sprev + c * p.V;
          const double qs = p.scale * q[c];
          const double decay = std::exp(g[c]);
          double acc_q = 0, acc_k = 0, acc_g = 0;
          for (std::int64_t j = 0; j < p.V; ++j) {
            ds[j] += qs * dO[j];              // dS += qs_t do_t^T
            acc_q += st[j] * dO[j];           // (S_t do_t)[c]
            acc_k += ds[j] * v[j];            // (dS v_t)[c]
            dv[static_cast<std::size_t>(j)] += ds[j] * k[c];  // (dS^T k_t)[j]
            acc_g += ds[j] * decay * sp[j];   // rowsum(dS * diag(exp g) S_{t-1})
          }
          dq[static_cast<std::size_t>(c)] = p.scale * acc_q;
          dk[static_cast<std::size_t>(c)] = acc_k;
          dg[static_cast<std::size_t>(c)] = acc_g;
          for (std::int64_t j = 0; j < p.V; ++j) ds[j] *= decay;  // dS = diag(exp g_t) dS
        }
        for (std::int64_t c = 0; c < p.K; ++c) {
          store_element(gr.dq, lay.key(row, h) + c, dq[static_cast<std::size_t>(c)]);
          store_element(gr.dk, lay.key(row, h) + c, dk[static_cast<std::size_t>(c)]);
          store_element(gr.dg, lay.key(row, h) + c, dg[static_cast<std::size_t>(c)]);
        }
        for (std::int64_t j = 0; j < p.V; ++j) store_element(gr.dv, lay.val(row, h) + j, dv[static_cast<std::size_t>(j)]);
      }
    }
    if (gr.d_initial_state) {
      for (std::int64_t e = 0; e < KV; ++e) store_element(*gr.d_initial_state, lay.state(n, h) + e, dS[static_cast<std::size_t>(e)]);
    }
  });
}

}  // namespace lina::detail::reference
