// chunk_gla fp64 reference: the naive per-token recurrence of spec section 2, forward and backward.
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

// Whole input tensors as doubles, shared read-only by all workers.
struct Inputs {
  std::vector<double> q, k, v, g, h0;
  bool has_h0 = false;
};

Inputs load_inputs(const ChunkGlaArgs& a) {
  Inputs in;
  in.q = load_as<double>(a.q);
  in.k = load_as<double>(a.k);
  in.v = load_as<double>(a.v);
  in.g = load_as<double>(a.g);
  if (a.initial_state) {
    in.h0 = load_as<double>(*a.initial_state);
    in.has_h0 = true;
  }
  return in;
}

// Index helpers for [rows, H, D] token tensors and [N, H, K, V] states.
struct Layout {
  std::int64_t H, K, V;
  std::int64_t key(std::int64_t row, std::int64_t h) const { return (row * H + h) * K; }
  std::int64_t val(std::int64_t row, std::int64_t h) const { return (row * H + h) * V; }
  std::int64_t state(std::int64_t n, std::int64_t h) const { return (n * H + h) * K * V; }
};

void init_state(const Inputs& in, const Layout& lay, std::int64_t n, std::int64_t h, std::vector<double>& S) {
  if (in.has_h0) {
    const double* src = in.h0.data() + lay.state(n, h);
    std::copy(src, src + lay.K * lay.V, S.begin());
  } else {
    std::fill(S.begin(), S.end(), 0.0);
  }
}

// One recurrence step in place: S = diag(exp(g_t)) S + k_t v_t^T.
void step(const Inputs& in, const Layout& lay, std::int64_t row, std::int64_t h, double* S) {
  const double* k = in.k.data() + lay.key(row, h);
  const double* g = in.g.data() + lay.key(row, h);
  const double* v = in.v.data() + lay.val(row, h);
  for (std::int64_t c = 0; c < lay.K; ++c) {
    const double a = std::exp(g[c]);
    double* s = S + c * lay.V;
    for (std::int64_t j = 0; j < lay.V; ++j) s[j] = a * s[j] + k[c] * v[j];
  }
}

}  // namespace

void chunk_gla_forward(const Problem& p, const ChunkGlaArgs& a, const AttentionOutputs& out) {
  const Inputs in = load_inputs(a);
  const Layout lay{p.H, p.K, p.V};
  const std::int64_t items = p.N * p.H;
  parallel_for(items, 0, [&](std::int64_t item) {
    const std::int64_t n = item / p.H, h = item % p.H;
    const Sequence seq = p.sequences[static_cast<std::size_t>(n)];
    std::vector<double> S(static_cast<std::size_t>(p.K * p.V));
    init_state(in, lay, n, h, S);
    for (std::int64_t t = 0; t < seq.length; ++t) {
      const std::int64_t row = seq.row_begin + t;
      step(in, lay, row, h, S.data());
      const double* q = in.q.data() + lay.key(row, h);
      for (std::int64_t j = 0; j < p.V; ++j) {
        double acc = 0;
        for (std::int64_t c = 0; c < p.K; ++c) acc += S[static_cast<std::size_t>(c * p.V + j)] * q[c];
        store_element(out.o, lay.val(row, h) + j, p.scale * acc);
      }
    }
    if (out.final_state) {
      for (std::int64_t e = 0; e < p.K * p.V; ++e) store_element(*out.final_state, lay.state(n, h) + e, S[static_cast<std::size_t>(e)]);
    }
  });
}

void chunk_gla_backward(const Problem& p, const ChunkGlaArgs& a, const AttentionGradInputs& gin, const ChunkGlaGrads& gr) {
  const Inputs in = load_inputs(a);
  const std::vector<double> dout = load_as<double>(gin.d_o);
  std::vector<double> dht;
  if (gin.d_final_state) dht = load_as<double>(*gin.d_final_state);
  const Layout lay{p.H, p.K, p.V};
  const std::int64_t KV = p.K * p.V;
  const std::int64_t items = p.N * p.H;

  parallel_for(items, 0, [&](std::int64_t item) {
    const std::int64_t n = item / p.H, h = item % p.H;
    const Sequence seq = p.sequences[static_cast<std::size_t>(n)];
    const std::int64_t L = seq.length;
    const std::int64_t segments = (L + kCheckpoint - 1) / kCheckpoint;

    // Forward sweep: checkpoints[m] is the state entering token m * kCheckpoint.
    std::vector<double> S(static_cast<std::size_t>(KV));
    init_state(in, lay, n, h, S);
    std::vector<double> checkpoints(static_cast<std::size_t>(segments * KV));
    for (std::int64_t t = 0; t < L; ++t) {
      if (t % kCheckpoint == 0) std::copy(S.begin(), S.end(), checkpoints.begin() + (t / kCheckpoint) * KV);
      step(in, lay, seq.row_begin + t, h, S.data());
    }

    std::vector<double> dS(static_cast<std::size_t>(KV), 0.0);
    if (!dht.empty()) std::copy(dht.begin() + lay.state(n, h), dht.begin() + lay.state(n, h) + KV, dS.begin());

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
        step(in, lay, seq.row_begin + t, h, next);
      }
      for (std::int64_t t = t1 - 1; t >= t0; --t) {
        const std::int64_t row = seq.row_begin + t;
        const double* St = states.data() + (t - t0 + 1) * KV;
        const double* Sprev = states.data() + (t - t0) * KV;
        const double* q = in.q.data() + lay.key(row, h);
        const double* k = in.k.data() + lay.key(row, h);
        const double* g = in.g.data() + lay.key(row, h);
        const double* v = in.v.data() + lay.val(row, h);
        const double* dO = dout.data() + lay.val(row, h);
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
