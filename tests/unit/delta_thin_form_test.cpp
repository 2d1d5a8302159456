// The algebra behind the CUDA delta forward's thin workspace (docs/kernels/chunk_delta_fwd.md, "Thin
// workspace"; ops/delta/cuda/fwd/state.cuh), checked in fp64 on the host against the naive
// fp64 recurrences: the chunk recurrence written the way the kernels compute it must be the same
// function of the inputs. GDN keeps the l2 norms and the scalar gate as per-token factors on the raw
// q, k (A, T' = (I + A)^-1 diag(beta), Q', c1, c2, c3, 2^bL); KDA applies its per-channel gate to
// q and k and forms v_new = T' (v - (k e^b) H) instead of u - w H. Chunks of 64 with a partial last
// chunk, very negative gates, an initial state, GVA (HV = 2 H).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "lina/chunk_delta.h"
#include "tests/support/random.h"

namespace lina {
namespace {

using testing::Rng;

constexpr std::int64_t kC = 64;

struct Dims {
  std::int64_t T, H, HV, K, V;
};

// One sequence (B = 1), one value head hv: the chunked thin form of the forward in fp64. Inputs are the
// raw f32 tensors the public API takes; l2norm in kernel, beta and g given (log decays).
void thin_forward(bool kda, const Dims& d, const HostTensor& q, const HostTensor& k, const HostTensor& v, const HostTensor& g,
                  const HostTensor& beta, const HostTensor& h0, double scale, std::int64_t hv, std::vector<double>& o,
                  std::vector<double>& ht) {
  const std::int64_t K = d.K, V = d.V, h = hv / (d.HV / d.H);
  std::vector<double> H(K * V);  // H[c][j]
  for (std::int64_t c = 0; c < K; ++c)
    for (std::int64_t j = 0; j < V; ++j) H[c * V + j] = h0.get((hv * K + c) * V + j);
  auto qv = [&](std::int64_t t, std::int64_t c) { return q.get((t * d.H + h) * K + c); };
  auto kv = [&](std::int64_t t, std::int64_t c) { return k.get((t * d.H + h) * K + c); };
  auto gv = [&](std::int64_t t, std::int64_t c) { return kda ? g.get((t * d.HV + hv) * K + c) : g.get(t * d.HV + hv); };
  o.assign(d.T * V, 0.0);
  for (std::int64_t t0 = 0; t0 < d.T; t0 += kC) {
    const std::int64_t n = std::min(kC, d.T - t0);
    // per-token factors: inverse norms, beta; the gate's chunk cumsum b (per channel for KDA)
    std::vector<double> rq(n), rk(n), bt(n), b(n * K);
    for (std::int64_t i = 0; i < n; ++i) {
      double sq = 0, sk = 0;
      for (std::int64_t c = 0; c < K; ++c) sq += qv(t0 + i, c) * qv(t0 + i, c), sk += kv(t0 + i, c) * kv(t0 + i, c);
      rq[i] = 1 / std::sqrt(sq + 1e-6);
      rk[i] = 1 / std::sqrt(sk + 1e-6);
      bt[i] = beta.get((t0 + i) * d.HV + hv);
      for (std::int64_t c = 0; c < K; ++c) b[i * K + c] = (i ? b[(i - 1) * K + c] : 0.0) + gv(t0 + i, c);
    }
    const std::int64_t L = n - 1;
    // A (strict lower), Q' (lower incl.): GDN with the factors outside the raw dot products
    std::vector<double> A(n * n, 0.0), Qp(n * n, 0.0);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j <= i; ++j) {
        double dk = 0, dq = 0;
        for (std::int64_t c = 0; c < K; ++c) {
          const double e = kda ? std::exp(b[i * K + c] - b[j * K + c]) : 1.0;
          dk += kv(t0 + i, c) * kv(t0 + j, c) * e;
          dq += qv(t0 + i, c) * kv(t0 + j, c) * e;
        }
        const double gam = kda ? 1.0 : std::exp(b[i * K] - b[j * K]);
        if (j < i) A[i * n + j] = bt[i] * rk[i] * rk[j] * gam * dk;
        Qp[i * n + j] = scale * rq[i] * rk[j] * gam * dq;
      }
    // T' = (I + A)^-1 diag(beta), column by column by forward substitution
    std::vector<double> Tp(n * n, 0.0);
    for (std::int64_t col = 0; col < n; ++col)
      for (std::int64_t i = 0; i < n; ++i) {
        double x = (i == col) ? 1.0 : 0.0;
        for (std::int64_t j = 0; j < i; ++j) x -= A[i * n + j] * Tp[j * n + col];
        Tp[i * n + col] = x;
      }
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j) Tp[i * n + j] *= bt[j];
    // the rows the state kernel multiplies with H: k1 = c1 k (GDN) or k e^b (KDA); q1 likewise;
    // k3 = c3 k (GDN) or k e^(bL - b) (KDA); the decay 2^bL per channel
    auto k1 = [&](std::int64_t i, std::int64_t c) {
      return kda ? kv(t0 + i, c) * rk[i] * std::exp(b[i * K + c]) : std::exp(b[i * K]) * rk[i] * kv(t0 + i, c);
    };
    auto q1 = [&](std::int64_t i, std::int64_t c) {
      return kda ? scale * qv(t0 + i, c) * rq[i] * std::exp(b[i * K + c]) : scale * std::exp(b[i * K]) * rq[i] * qv(t0 + i, c);
    };
    auto k3 = [&](std::int64_t i, std::int64_t c) {
      return kda ? kv(t0 + i, c) * rk[i] * std::exp(b[L * K + c] - b[i * K + c]) : rk[i] * std::exp(b[L * K] - b[i * K]) * kv(t0 + i, c);
    };
    // X = v - k1 H, v_new = T' X, o = q1 H + Q' v_new, H = e^bL H + k3^T v_new
    std::vector<double> X(n * V), vn(n * V, 0.0);
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < V; ++j) {
        double s = 0;
        for (std::int64_t c = 0; c < K; ++c) s += k1(i, c) * H[c * V + j];
        X[i * V + j] = v.get((t0 + i) * d.HV * V + hv * V + j) - s;
      }
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t m = 0; m <= i; ++m)
        for (std::int64_t j = 0; j < V; ++j) vn[i * V + j] += Tp[i * n + m] * X[m * V + j];
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < V; ++j) {
        double s = 0;
        for (std::int64_t c = 0; c < K; ++c) s += q1(i, c) * H[c * V + j];
        for (std::int64_t m = 0; m <= i; ++m) s += Qp[i * n + m] * vn[m * V + j];
        o[(t0 + i) * V + j] = s;
      }
    for (std::int64_t c = 0; c < K; ++c)
      for (std::int64_t j = 0; j < V; ++j) {
        double s = std::exp(b[L * K + (kda ? c : 0)]) * H[c * V + j];
        for (std::int64_t i = 0; i < n; ++i) s += k3(i, c) * vn[i * V + j];
        H[c * V + j] = s;
      }
  }
  ht = H;
}

void expect_thin_form_matches_reference(bool kda, const Dims& d, double gate_scale, std::uint64_t seed) {
  Rng r(seed);
  HostTensor q = testing::normal(r, DType::f32, Shape{1, d.T, d.H, d.K});
  HostTensor k = testing::normal(r, DType::f32, Shape{1, d.T, d.H, d.K});
  HostTensor v = testing::normal(r, DType::f32, Shape{1, d.T, d.HV, d.V});
  const Shape gs = kda ? Shape{1, d.T, d.HV, d.K} : Shape{1, d.T, d.HV};
  HostTensor g = testing::make(DType::f32, gs, [&] { return gate_scale * testing::logsigmoid(r.normal()); });
  HostTensor beta = testing::make(DType::f32, Shape{1, d.T, d.HV}, [&] { return testing::sigmoid(r.normal()); });
  HostTensor h0 = testing::normal(r, DType::f32, Shape{1, d.HV, d.K, d.V});
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.K));

  HostTensor o_ref = HostTensor::filled(DType::f64, v.shape(), NAN), ht_ref = HostTensor::filled(DType::f64, h0.shape(), NAN);
  AttentionOutputs out{o_ref.view(), ht_ref.view()};
  auto fill = [&](DeltaRuleArgs& a) {
    a.q = q.view(); a.k = k.view(); a.v = v.view(); a.g = g.view(); a.beta = beta.view();
    a.scale = scale;
    a.initial_state = h0.view();
    a.use_qk_l2norm_in_kernel = true;
  };
  if (kda) {
    ChunkKdaArgs a;
    fill(a);
    reference::chunk_kda_forward(a, out);
  } else {
    ChunkGdnArgs a;
    fill(a);
    reference::chunk_gdn_forward(a, out);
  }
  for (std::int64_t hv = 0; hv < d.HV; ++hv) {
    std::vector<double> o, ht;
    thin_forward(kda, d, q, k, v, g, beta, h0, scale, hv, o, ht);
    double omax = 0, oerr = 0, hmax = 0, herr = 0;
    for (std::int64_t t = 0; t < d.T; ++t)
      for (std::int64_t j = 0; j < d.V; ++j) {
        const double ref = o_ref.get((t * d.HV + hv) * d.V + j);
        omax = std::max(omax, std::abs(ref));
        oerr = std::max(oerr, std::abs(ref - o[t * d.V + j]));
      }
    for (std::int64_t i = 0; i < d.K * d.V; ++i) {
      const double ref = ht_ref.get(hv * d.K * d.V + i);
      hmax = std::max(hmax, std::abs(ref));
      herr = std::max(herr, std::abs(ref - ht[i]));
    }
    EXPECT_LE(oerr, 1e-9 * std::max(1.0, omax)) << (kda ? "kda" : "gdn") << " o, hv " << hv;
    EXPECT_LE(herr, 1e-9 * std::max(1.0, hmax)) << (kda ? "kda" : "gdn") << " final state, hv " << hv;
  }
}

TEST(DeltaThinForm, GdnFactorsMatchTheRecurrence) {
  expect_thin_form_matches_reference(false, {150, 1, 2, 16, 8}, 1.0, 7);  // two full chunks and a partial one
}

TEST(DeltaThinForm, GdnFactorsMatchTheRecurrenceWithStrongDecay) {
  expect_thin_form_matches_reference(false, {70, 2, 4, 8, 8}, 40.0, 8);  // factors down to e^-hundreds
}

TEST(DeltaThinForm, KdaGatedTilesMatchTheRecurrence) {
  expect_thin_form_matches_reference(true, {130, 1, 2, 8, 8}, 0.5, 9);
}

}  // namespace
}  // namespace lina
