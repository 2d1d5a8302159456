// Small fp64 host recurrences for GLA / KDA / GDN, forward and backward (docs/math.md sections 1, 2, 4.4),
// independent of lina::reference, for checking the GPU references and kernels at small shapes.
// Stores every state, so small shapes only. Checked against finite differences by `--selftest`.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace lina_test {

enum class HostOp { gla, kda, gdn };

struct HostCfg {
  HostOp op = HostOp::gla;
  int B = 1, T = 1, H = 1, HV = 1, K = 64, V = 64;
  std::vector<std::int64_t> cu;  // empty: dense
  bool h0 = false, l2 = false, bsig = false, neg = false, gate_in = false, has_lb = false, has_alog = true, has_dtb = false;
  double lb = -5.0;
  double scale = 0.125;
  int N() const { return cu.empty() ? B : static_cast<int>(cu.size()) - 1; }
  std::int64_t rows() const { return static_cast<std::int64_t>(B) * T; }
  std::int64_t g_size() const { return op == HostOp::gla ? rows() * H * K : op == HostOp::kda ? rows() * HV * K : rows() * HV; }
  int dtb_size() const { return op == HostOp::kda ? HV * K : HV; }
};

struct HostData {
  std::vector<double> q, k, v, g, beta, h0, A, dtb, dO, dht;
};

struct HostOut {
  std::vector<double> o, ht, dq, dk, dv, dg, dbeta, dh0, dA, ddt;
};

inline double h_sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double h_softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

inline void host_run(const HostCfg& c, const HostData& d, HostOut& r, bool backward) {
  const int K = c.K, V = c.V, H = c.H, HV = c.HV, G = HV / H;
  const std::int64_t rows = c.rows();
  const bool delta = c.op != HostOp::gla;
  const int Kg = c.op == HostOp::gdn ? 1 : K;
  r.o.assign(static_cast<std::size_t>(rows * HV * V), 0.0);
  r.ht.assign(static_cast<std::size_t>(c.N()) * HV * K * V, 0.0);
  if (backward) {
    r.dq.assign(static_cast<std::size_t>(rows * H * K), 0.0);
    r.dk = r.dq;
    r.dv.assign(static_cast<std::size_t>(rows * HV * V), 0.0);
    r.dg.assign(static_cast<std::size_t>(c.g_size()), 0.0);
    r.dbeta.assign(static_cast<std::size_t>(rows * HV), 0.0);
    r.dh0.assign(r.ht.size(), 0.0);
    r.dA.assign(static_cast<std::size_t>(HV), 0.0);
    r.ddt.assign(static_cast<std::size_t>(c.dtb_size()), 0.0);
  }
  for (int n = 0; n < c.N(); ++n) {
    const std::int64_t rb = c.cu.empty() ? static_cast<std::int64_t>(n) * c.T : c.cu[static_cast<std::size_t>(n)];
    const int L = static_cast<int>(c.cu.empty() ? c.T : c.cu[static_cast<std::size_t>(n) + 1] - c.cu[static_cast<std::size_t>(n)]);
    for (int hv = 0; hv < HV; ++hv) {
      const int h = hv / G;
      // Preprocessed per-token values.
      std::vector<double> qn(static_cast<std::size_t>(L) * K), kn(qn.size()), gl(static_cast<std::size_t>(L) * K), rq(L), rk(L), bt(L, 1.0), graw(static_cast<std::size_t>(L) * Kg);
      for (int t = 0; t < L; ++t) {
        const std::int64_t row = rb + t;
        double sq = 0, sk = 0;
        for (int i = 0; i < K; ++i) {
          const double qv = d.q[static_cast<std::size_t>((row * H + h) * K + i)], kv = d.k[static_cast<std::size_t>((row * H + h) * K + i)];
          sq += qv * qv;
          sk += kv * kv;
        }
        rq[t] = (delta && c.l2) ? 1.0 / std::sqrt(sq + 1e-6) : 1.0;
        rk[t] = (delta && c.l2) ? 1.0 / std::sqrt(sk + 1e-6) : 1.0;
        for (int i = 0; i < K; ++i) {
          qn[static_cast<std::size_t>(t) * K + i] = d.q[static_cast<std::size_t>((row * H + h) * K + i)] * rq[t];
          kn[static_cast<std::size_t>(t) * K + i] = d.k[static_cast<std::size_t>((row * H + h) * K + i)] * rk[t];
        }
        if (delta) {
          const double b = d.beta[static_cast<std::size_t>(row * HV + hv)];
          bt[t] = c.bsig ? (c.neg ? 2.0 : 1.0) * h_sig(b) : b;
        }
        for (int i = 0; i < Kg; ++i) {
          double raw;
          if (c.op == HostOp::gla) raw = d.g[static_cast<std::size_t>((row * H + h) * K + i)];
          else if (c.op == HostOp::kda) raw = d.g[static_cast<std::size_t>((row * HV + hv) * K + i)];
          else raw = d.g[static_cast<std::size_t>(row * HV + hv)];
          graw[static_cast<std::size_t>(t) * Kg + i] = raw;
          double y = raw;
          if (delta && c.gate_in) {
            const double x = raw + (c.has_dtb ? d.dtb[static_cast<std::size_t>(c.op == HostOp::kda ? hv * K + i : hv)] : 0.0);
            if (c.op == HostOp::kda && c.has_lb) y = c.lb * h_sig((c.has_alog ? std::exp(d.A[static_cast<std::size_t>(hv)]) : 1.0) * x);
            else y = -std::exp(d.A[static_cast<std::size_t>(hv)]) * h_softplus(x);
          }
          if (c.op == HostOp::gdn) for (int j = 0; j < K; ++j) gl[static_cast<std::size_t>(t) * K + j] = y;
          else gl[static_cast<std::size_t>(t) * K + i] = y;
        }
      }
      const std::size_t KV = static_cast<std::size_t>(K) * V;
      std::vector<double> S(KV, 0.0);
      const std::size_t sbase = (static_cast<std::size_t>(n) * HV + hv) * KV;
      if (c.h0) for (std::size_t e = 0; e < KV; ++e) S[e] = d.h0[sbase + e];
      std::vector<double> Sprev(static_cast<std::size_t>(L) * KV), U(static_cast<std::size_t>(L) * V), P(static_cast<std::size_t>(L) * V);
      for (int t = 0; t < L; ++t) {
        const std::int64_t row = rb + t;
        std::copy(S.begin(), S.end(), Sprev.begin() + static_cast<std::ptrdiff_t>(t * KV));
        for (int i = 0; i < K; ++i)
          for (int j = 0; j < V; ++j) S[static_cast<std::size_t>(i) * V + j] *= std::exp(gl[static_cast<std::size_t>(t) * K + i]);
        for (int j = 0; j < V; ++j) {
          double p = 0;
          for (int i = 0; i < K; ++i) p += S[static_cast<std::size_t>(i) * V + j] * kn[static_cast<std::size_t>(t) * K + i];
          const double vv = d.v[static_cast<std::size_t>((row * HV + hv) * V + j)];
          const double u = delta ? bt[t] * (vv - p) : vv;
          P[static_cast<std::size_t>(t) * V + j] = p;
          U[static_cast<std::size_t>(t) * V + j] = u;
          for (int i = 0; i < K; ++i) S[static_cast<std::size_t>(i) * V + j] += kn[static_cast<std::size_t>(t) * K + i] * u;
          double o = 0;
          for (int i = 0; i < K; ++i) o += S[static_cast<std::size_t>(i) * V + j] * qn[static_cast<std::size_t>(t) * K + i];
          r.o[static_cast<std::size_t>((row * HV + hv) * V + j)] = c.scale * o;
        }
      }
      for (std::size_t e = 0; e < KV; ++e) r.ht[sbase + e] = S[e];
      if (!backward) continue;
      std::vector<double> dS(KV, 0.0);
      if (!d.dht.empty()) for (std::size_t e = 0; e < KV; ++e) dS[e] = d.dht[sbase + e];
      for (int t = L - 1; t >= 0; --t) {
        const std::int64_t row = rb + t;
        const double* Sp = &Sprev[static_cast<std::size_t>(t) * KV];
        std::vector<double> Sd(KV), St(KV);
        for (int i = 0; i < K; ++i)
          for (int j = 0; j < V; ++j) {
            const std::size_t e = static_cast<std::size_t>(i) * V + j;
            Sd[e] = Sp[e] * std::exp(gl[static_cast<std::size_t>(t) * K + i]);
            St[e] = Sd[e] + kn[static_cast<std::size_t>(t) * K + i] * U[static_cast<std::size_t>(t) * V + j];
          }
        std::vector<double> dqn(K, 0.0), dkn(K, 0.0), dgl(K, 0.0);
        double dbeta = 0;
        for (int i = 0; i < K; ++i)
          for (int j = 0; j < V; ++j)
            dS[static_cast<std::size_t>(i) * V + j] += c.scale * qn[static_cast<std::size_t>(t) * K + i] * d.dO[static_cast<std::size_t>((row * HV + hv) * V + j)];
        for (int i = 0; i < K; ++i)
          for (int j = 0; j < V; ++j) {
            const std::size_t e = static_cast<std::size_t>(i) * V + j;
            dqn[i] += c.scale * St[e] * d.dO[static_cast<std::size_t>((row * HV + hv) * V + j)];
            dkn[i] += dS[e] * U[static_cast<std::size_t>(t) * V + j];
          }
        for (int j = 0; j < V; ++j) {
          double du = 0;
          for (int i = 0; i < K; ++i) du += dS[static_cast<std::size_t>(i) * V + j] * kn[static_cast<std::size_t>(t) * K + i];
          const double vv = d.v[static_cast<std::size_t>((row * HV + hv) * V + j)];
          if (!delta) {
            r.dv[static_cast<std::size_t>((row * HV + hv) * V + j)] = du;
            continue;
          }
          r.dv[static_cast<std::size_t>((row * HV + hv) * V + j)] = bt[t] * du;
          dbeta += du * (vv - P[static_cast<std::size_t>(t) * V + j]);
          const double dp = -bt[t] * du;
          for (int i = 0; i < K; ++i) {
            const std::size_t e = static_cast<std::size_t>(i) * V + j;
            dS[e] += kn[static_cast<std::size_t>(t) * K + i] * dp;  // dS' column j
            dkn[i] += Sd[e] * dp;
          }
        }
        for (int i = 0; i < K; ++i)
          for (int j = 0; j < V; ++j) {
            const std::size_t e = static_cast<std::size_t>(i) * V + j;
            dgl[i] += dS[e] * Sd[e];
            dS[e] *= std::exp(gl[static_cast<std::size_t>(t) * K + i]);
          }
        // Preprocessing backward.
        double dotq = 0, dotk = 0;
        for (int i = 0; i < K; ++i) {
          dotq += dqn[i] * qn[static_cast<std::size_t>(t) * K + i];
          dotk += dkn[i] * kn[static_cast<std::size_t>(t) * K + i];
        }
        for (int i = 0; i < K; ++i) {
          double gq = dqn[i], gk = dkn[i];
          if (delta && c.l2) {
            gq = rq[t] * (dqn[i] - dotq * qn[static_cast<std::size_t>(t) * K + i]);
            gk = rk[t] * (dkn[i] - dotk * kn[static_cast<std::size_t>(t) * K + i]);
          }
          r.dq[static_cast<std::size_t>((row * H + h) * K + i)] += gq;
          r.dk[static_cast<std::size_t>((row * H + h) * K + i)] += gk;
        }
        if (delta) {
          const double b = d.beta[static_cast<std::size_t>(row * HV + hv)];
          r.dbeta[static_cast<std::size_t>(row * HV + hv)] = c.bsig ? dbeta * (c.neg ? 2.0 : 1.0) * h_sig(b) * (1 - h_sig(b)) : dbeta;
        }
        for (int i = 0; i < Kg; ++i) {
          double dy = 0;
          if (c.op == HostOp::gdn) for (int j = 0; j < K; ++j) dy += dgl[j];
          else dy = dgl[i];
          double dx = dy;
          if (delta && c.gate_in) {
            const int di = c.op == HostOp::kda ? hv * K + i : hv;
            const double x = graw[static_cast<std::size_t>(t) * Kg + i] + (c.has_dtb ? d.dtb[static_cast<std::size_t>(di)] : 0.0);
            if (c.op == HostOp::kda && c.has_lb) {
              const double e = c.has_alog ? std::exp(d.A[static_cast<std::size_t>(hv)]) : 1.0;
              const double s = h_sig(e * x);
              dx = dy * c.lb * s * (1 - s) * e;
              if (c.has_alog) r.dA[static_cast<std::size_t>(hv)] += dx * x;
            } else {
              const double eA = std::exp(d.A[static_cast<std::size_t>(hv)]);
              dx = -eA * h_sig(x) * dy;
              r.dA[static_cast<std::size_t>(hv)] += dy * (-eA * h_softplus(x));
            }
            if (c.has_dtb) r.ddt[static_cast<std::size_t>(di)] += dx;
          }
          if (c.op == HostOp::gla) r.dg[static_cast<std::size_t>((row * H + h) * K + i)] = dx;
          else if (c.op == HostOp::kda) r.dg[static_cast<std::size_t>((row * HV + hv) * K + i)] = dx;
          else r.dg[static_cast<std::size_t>(row * HV + hv)] = dx;
        }
      }
      for (std::size_t e = 0; e < KV; ++e) r.dh0[sbase + e] = dS[e];
    }
  }
}

}  // namespace lina_test
