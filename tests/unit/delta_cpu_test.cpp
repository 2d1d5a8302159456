// chunk_kda / chunk_gdn CPU backend (chunked WY/UT form) against a small fp64 naive-recurrence oracle
// written here (docs/math.md section 2, reverse recurrence for the backward, preprocessing per 1 and 4.4).
// The oracle itself is checked by finite differences. Cases are FLA's test_chunk / test_chunk_varlen
// scaled down in B and H, at FLA's tolerances (docs/math.md section 6).
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "harness/verify/accuracy.h"
#include "lina/chunk_delta.h"
#include "ops/common/cpu_math.h"
#include "ops/delta/cpu_kernels.h"
#include "tests/support/random.h"

namespace lina {
namespace {

using i64 = std::int64_t;
using Vec = std::vector<double>;

// ------------------------------------------------------------------------------------------------
// fp64 oracle (test only): per (sequence, value head) naive recurrence with checkpointed states.
enum class Gate { none, softplus, lower_bound };

struct OracleProblem {
  bool kda = true;
  i64 B = 1, T = 0, H = 1, HV = 1, K = 1, V = 1;
  std::vector<std::pair<i64, i64>> seqs;  // (row_begin, length)
  double scale = 1.0;
  bool l2 = false, beta_sigmoid = false, neg_eig = false;
  Gate gate = Gate::none;
  double lower_bound = 0.0;
  bool has_A = false, has_bias = false;
  i64 Kg() const { return kda ? K : 1; }
};

struct OracleData {
  Vec q, k, v, g, beta, h0, A, dtb, d_o, dht;  // h0, dht may be empty (zeros)
};

struct OracleOut {
  Vec o, ht, dq, dk, dv, dg, dbeta, dh0, dA, ddt;
};

double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double softplus(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }

OracleOut oracle(const OracleProblem& p, const OracleData& d) {
  const i64 K = p.K, V = p.V, H = p.H, HV = p.HV, G = HV / H, Kg = p.Kg(), N = static_cast<i64>(p.seqs.size());
  OracleOut r;
  r.o.assign(p.B * p.T * HV * V, 0);
  r.ht.assign(N * HV * K * V, 0);
  r.dh0.assign(N * HV * K * V, 0);
  r.dq.assign(p.B * p.T * H * K, 0);
  r.dk.assign(p.B * p.T * H * K, 0);
  r.dv.assign(p.B * p.T * HV * V, 0);
  r.dg.assign(p.B * p.T * HV * Kg, 0);
  r.dbeta.assign(p.B * p.T * HV, 0);
  r.dA.assign(HV, 0);
  r.ddt.assign(HV * Kg, 0);
  Vec dqn(r.dq.size(), 0), dkn(r.dk.size(), 0);  // gradients w.r.t. normalised q, k (group-summed)
  auto norm = [&](const Vec& x, i64 off, Vec& y) {
    double ss = 0;
    for (i64 c = 0; c < K; ++c) ss += x[off + c] * x[off + c];
    const double rs = p.l2 ? 1.0 / std::sqrt(ss + 1e-6) : 1.0;
    for (i64 c = 0; c < K; ++c) y[c] = x[off + c] * rs;
  };
  for (i64 s = 0; s < N; ++s) {
    const auto [row0, L] = p.seqs[static_cast<std::size_t>(s)];
    for (i64 hv = 0; hv < HV; ++hv) {
      const i64 h = hv / G;
      std::vector<Vec> q(L, Vec(K)), k(L, Vec(K)), v(L, Vec(V)), g(L, Vec(K));
      Vec beta(L);
      for (i64 t = 0; t < L; ++t) {
        const i64 row = row0 + t;
        norm(d.q, (row * H + h) * K, q[t]);
        norm(d.k, (row * H + h) * K, k[t]);
        for (i64 c = 0; c < V; ++c) v[t][c] = d.v[(row * HV + hv) * V + c];
        for (i64 c = 0; c < K; ++c) {
          const i64 cg = p.kda ? c : 0;
          const double raw = d.g[(row * HV + hv) * Kg + cg];
          const double x = raw + (p.has_bias ? d.dtb[hv * Kg + cg] : 0.0);
          if (p.gate == Gate::none) g[t][c] = raw;
          else if (p.gate == Gate::softplus) g[t][c] = -std::exp(d.A[hv]) * softplus(x);
          else g[t][c] = p.lower_bound * sig((p.has_A ? std::exp(d.A[hv]) : 1.0) * x);
        }
        const double braw = d.beta[row * HV + hv];
        beta[t] = p.beta_sigmoid ? (p.neg_eig ? 2.0 : 1.0) * sig(braw) : braw;
      }
      Vec S(K * V, 0);
      if (!d.h0.empty()) for (i64 x = 0; x < K * V; ++x) S[x] = d.h0[(s * HV + hv) * K * V + x];
      // One step: Sp = diag(exp g) S; u = beta (v - Sp^T k); S = Sp + k u^T.
      auto step = [&](i64 t, Vec& St, Vec* Sp_out, Vec* u_out) {
        Vec u(V);
        for (i64 c = 0; c < K; ++c)
          for (i64 j = 0; j < V; ++j) St[c * V + j] *= std::exp(g[t][c]);
        if (Sp_out) *Sp_out = St;
        for (i64 j = 0; j < V; ++j) {
          double pk = 0;
          for (i64 c = 0; c < K; ++c) pk += St[c * V + j] * k[t][c];
          u[j] = beta[t] * (v[t][j] - pk);
        }
        for (i64 c = 0; c < K; ++c)
          for (i64 j = 0; j < V; ++j) St[c * V + j] += k[t][c] * u[j];
        if (u_out) *u_out = u;
      };
      const i64 seg = 16;
      std::vector<Vec> ckpt;
      for (i64 t = 0; t < L; ++t) {
        if (t % seg == 0) ckpt.push_back(S);
        step(t, S, nullptr, nullptr);
        for (i64 j = 0; j < V; ++j) {
          double o = 0;
          for (i64 c = 0; c < K; ++c) o += S[c * V + j] * p.scale * q[t][c];
          r.o[((row0 + t) * HV + hv) * V + j] = o;
        }
      }
      for (i64 x = 0; x < K * V; ++x) r.ht[(s * HV + hv) * K * V + x] = S[x];
      // Reverse recurrence (docs/math.md section 2), segment by segment from the checkpoints.
      Vec dS(K * V, 0);
      if (!d.dht.empty()) for (i64 x = 0; x < K * V; ++x) dS[x] = d.dht[(s * HV + hv) * K * V + x];
      for (i64 a = ((L - 1) / seg) * seg; L > 0 && a >= 0; a -= seg) {
        const i64 e = std::min(L, a + seg);
        std::vector<Vec> Sps(e - a), Ss(e - a), us(e - a);
        Vec St = ckpt[a / seg];
        for (i64 t = a; t < e; ++t) {
          step(t, St, &Sps[t - a], &us[t - a]);
          Ss[t - a] = St;
        }
        for (i64 t = e - 1; t >= a; --t) {
          const Vec& Sp = Sps[t - a];
          const Vec& St1 = Ss[t - a];
          const Vec& u = us[t - a];
          const i64 row = row0 + t;
          const double* dO = d.d_o.data() + (row * HV + hv) * V;
          for (i64 c = 0; c < K; ++c)
            for (i64 j = 0; j < V; ++j) dS[c * V + j] += p.scale * q[t][c] * dO[j];
          Vec du(V, 0), pk(V, 0), dp(V);
          for (i64 c = 0; c < K; ++c) {
            double dq = 0, dk = 0;
            for (i64 j = 0; j < V; ++j) {
              dq += p.scale * St1[c * V + j] * dO[j];
              dk += dS[c * V + j] * u[j];
              du[j] += dS[c * V + j] * k[t][c];
              pk[j] += Sp[c * V + j] * k[t][c];
            }
            dqn[(row * H + h) * K + c] += dq;
            dkn[(row * H + h) * K + c] += dk;
          }
          double db = 0;
          for (i64 j = 0; j < V; ++j) {
            r.dv[(row * HV + hv) * V + j] = beta[t] * du[j];
            db += du[j] * (v[t][j] - pk[j]);
            dp[j] = -beta[t] * du[j];
          }
          Vec dg(K, 0);
          for (i64 c = 0; c < K; ++c) {
            double dk = 0;
            for (i64 j = 0; j < V; ++j) {
              dk += Sp[c * V + j] * dp[j];
              const double dSp = dS[c * V + j] + k[t][c] * dp[j];
              dg[c] += dSp * Sp[c * V + j];
              dS[c * V + j] = std::exp(g[t][c]) * dSp;
            }
            dkn[(row * H + h) * K + c] += dk;
          }
          // Gate backward (4.4); GDN's scalar gate collects the sum over K.
          for (i64 cg = 0; cg < Kg; ++cg) {
            double dy = 0;
            if (p.kda) dy = dg[cg];
            else for (i64 c = 0; c < K; ++c) dy += dg[c];
            const double raw = d.g[(row * HV + hv) * Kg + cg];
            const double x = raw + (p.has_bias ? d.dtb[hv * Kg + cg] : 0.0);
            double draw = dy;
            if (p.gate == Gate::softplus) {
              const double a_ = std::exp(d.A[hv]);
              draw = -a_ * sig(x) * dy;
              r.dA[hv] += dy * (-a_ * softplus(x));
            } else if (p.gate == Gate::lower_bound) {
              const double ee = p.has_A ? std::exp(d.A[hv]) : 1.0;
              const double sg = sig(ee * x);
              draw = dy * p.lower_bound * sg * (1 - sg) * ee;
              if (p.has_A) r.dA[hv] += draw * x;
            }
            if (p.has_bias) r.ddt[hv * Kg + cg] += draw;
            r.dg[(row * HV + hv) * Kg + cg] = draw;
          }
          const double braw = d.beta[row * HV + hv];
          const double cs = p.neg_eig ? 2.0 : 1.0;
          r.dbeta[row * HV + hv] = p.beta_sigmoid ? db * cs * sig(braw) * (1 - sig(braw)) : db;
        }
      }
      for (i64 x = 0; x < K * V; ++x) r.dh0[(s * HV + hv) * K * V + x] = dS[x];
    }
  }
  // l2norm backward on the group-summed gradients: dx = rstd (dy - (dy.y) y).
  auto l2b = [&](const Vec& x, const Vec& dy, Vec& dx) {
    for (i64 row = 0; row < p.B * p.T * H; ++row) {
      const i64 off = row * K;
      if (!p.l2) {
        for (i64 c = 0; c < K; ++c) dx[off + c] = dy[off + c];
        continue;
      }
      double ss = 0, dot = 0;
      for (i64 c = 0; c < K; ++c) ss += x[off + c] * x[off + c];
      const double rs = 1.0 / std::sqrt(ss + 1e-6);
      for (i64 c = 0; c < K; ++c) dot += dy[off + c] * x[off + c] * rs;
      for (i64 c = 0; c < K; ++c) dx[off + c] = rs * (dy[off + c] - dot * x[off + c] * rs);
    }
  };
  l2b(d.q, dqn, r.dq);
  l2b(d.k, dkn, r.dk);
  return r;
}

double oracle_loss(const OracleProblem& p, const OracleData& d) {
  const OracleOut r = oracle(p, d);
  double l = 0;
  for (std::size_t i = 0; i < r.o.size(); ++i) l += r.o[i] * d.d_o[i];
  for (std::size_t i = 0; i < r.ht.size(); ++i) l += r.ht[i] * d.dht[i];
  return l;
}

// The oracle's backward against central finite differences, every input element, all features on.
void check_oracle_by_fd(OracleProblem p) {
  testing::Rng rng(7);
  const i64 Kg = p.Kg(), N = static_cast<i64>(p.seqs.size());
  auto rnd = [&](i64 n, double lo, double hi) {
    Vec x(n);
    for (auto& e : x) e = lo + (hi - lo) * rng.uniform();
    return x;
  };
  OracleData d;
  d.q = rnd(p.T * p.H * p.K, -1, 1);
  d.k = rnd(p.T * p.H * p.K, -1, 1);
  d.v = rnd(p.T * p.HV * p.V, -1, 1);
  d.g = p.gate == Gate::none ? rnd(p.T * p.HV * Kg, -0.8, -0.05) : rnd(p.T * p.HV * Kg, -1, 1);
  d.beta = p.beta_sigmoid ? rnd(p.T * p.HV, -1, 1) : rnd(p.T * p.HV, 0.2, 0.9);
  d.h0 = rnd(N * p.HV * p.K * p.V, -1, 1);
  d.A = rnd(p.HV, -1, 0.5);
  d.dtb = rnd(p.HV * Kg, -0.5, 0.5);
  d.d_o = rnd(p.T * p.HV * p.V, -1, 1);
  d.dht = rnd(N * p.HV * p.K * p.V, -1, 1);
  const OracleOut r = oracle(p, d);
  struct Item { const char* name; Vec* x; const Vec* grad; };
  std::vector<Item> items = {{"q", &d.q, &r.dq}, {"k", &d.k, &r.dk}, {"v", &d.v, &r.dv}, {"g", &d.g, &r.dg},
                             {"beta", &d.beta, &r.dbeta}, {"h0", &d.h0, &r.dh0}};
  if (p.gate != Gate::none && (p.gate == Gate::softplus || p.has_A)) items.push_back({"A_log", &d.A, &r.dA});
  if (p.has_bias) items.push_back({"dt_bias", &d.dtb, &r.ddt});
  for (auto& it : items) {
    Vec fd(it.x->size());
    for (std::size_t i = 0; i < it.x->size(); ++i) {
      const double x0 = (*it.x)[i], eps = 1e-6;
      (*it.x)[i] = x0 + eps;
      const double lp = oracle_loss(p, d);
      (*it.x)[i] = x0 - eps;
      const double lm = oracle_loss(p, d);
      (*it.x)[i] = x0;
      fd[i] = (lp - lm) / (2 * eps);
    }
    const auto c = harness::assert_close(fd, *it.grad, 1e-6);
    EXPECT_TRUE(c.pass) << it.name << ": " << c.str();
  }
}

TEST(DeltaOracle, KdaBackwardMatchesFiniteDifferences) {
  OracleProblem p;
  p.kda = true; p.T = 7; p.H = 1; p.HV = 2; p.K = 3; p.V = 2; p.seqs = {{0, 3}, {3, 4}}; p.scale = 0.7;
  p.l2 = true; p.beta_sigmoid = true; p.neg_eig = true; p.gate = Gate::softplus; p.has_A = true; p.has_bias = true;
  check_oracle_by_fd(p);
  p.gate = Gate::lower_bound; p.lower_bound = -3.0; p.neg_eig = false;
  check_oracle_by_fd(p);
  p.has_A = false;
  check_oracle_by_fd(p);
  p.gate = Gate::none; p.has_bias = false; p.l2 = false; p.beta_sigmoid = false;
  check_oracle_by_fd(p);
}

TEST(DeltaOracle, GdnBackwardMatchesFiniteDifferences) {
  OracleProblem p;
  p.kda = false; p.T = 6; p.H = 1; p.HV = 2; p.K = 3; p.V = 2; p.seqs = {{0, 6}}; p.scale = 0.9;
  p.l2 = true; p.beta_sigmoid = true; p.gate = Gate::softplus; p.has_A = true; p.has_bias = true;
  check_oracle_by_fd(p);
  p.gate = Gate::none; p.has_bias = false;
  check_oracle_by_fd(p);
}

// ------------------------------------------------------------------------------------------------
// Backend cases.
struct Tol {
  double o, ht, dq, dk, dv, dh0, dg, dbeta, dA, ddt;
};
// FLA's tolerances (docs/math.md section 6).
constexpr Tol kKdaChunk{0.005, 0.005, 0.008, 0.008, 0.008, 0.008, 0.02, 0.02, 0.003, 0.008};
constexpr Tol kKdaVarlen{0.005, 0.005, 0.007, 0.008, 0.007, 0.007, 0.015, 0.015, 0.008, 0.005};
constexpr Tol kGdnChunk{0.005, 0.005, 0.008, 0.008, 0.008, 0.008, 0.02, 0.02, 0.02, 0.02};
constexpr Tol kGdnVarlen{0.005, 0.005, 0.007, 0.008, 0.007, 0.007, 0.015, 0.015, 0.02, 0.02};
// fp32 inputs leave only fp32 rounding between the chunked form and the fp64 recurrence.
constexpr Tol kTight{1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 1e-4};

enum class Dist { fla_chunk, fla_varlen };

struct Case {
  std::string name;
  bool kda = true;
  i64 B = 1, T = 64, H = 1, HV = 1, D = 64;
  i64 Dv = 0;  // V when it differs from K = D
  std::optional<double> scale;
  double norm = 1.0, mask_p = 0.0;
  bool l2in = false, gate_in = false, bias = true, safe = false, lb_no_A = false;
  bool beta_sigmoid = false, neg_eig = false;
  DType dtype = DType::f16;
  std::vector<i64> cu;      // varlen when non-empty
  double neg1000_p = 0.0;   // KDA varlen: each gate element set to -1000 with this probability
  bool h0_zero = false;     // GDN test_chunk uses h0 = 0
  DType h0_dtype = DType::f32;
  bool no_state = false;    // no initial_state, final_state, dht or dh0
  Dist dist = Dist::fla_chunk;
  Tol tol = kKdaChunk;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

HostTensor from_vec(DType dt, Shape s, const Vec& v) {
  HostTensor t(dt, s);
  for (i64 i = 0; i < t.numel(); ++i) t.set(i, v[static_cast<std::size_t>(i)]);
  return t;
}

void run_case(const Case& c) {
  testing::Rng rng(42);
  const bool varlen = !c.cu.empty();
  const i64 B = varlen ? 1 : c.B, T = varlen ? c.cu.back() : c.T, H = c.H, HV = c.HV, K = c.D, V = c.Dv ? c.Dv : c.D;
  const i64 N = varlen ? static_cast<i64>(c.cu.size()) - 1 : B;
  const i64 Kg = c.kda ? K : 1;
  const bool lower = c.kda && c.gate_in && c.safe;  // safe_gate with the in-kernel gate: lower-bound form
  const DType dt = c.dtype;
  auto gen = [&](i64 n, auto&& f) { Vec x(n); for (auto& e : x) e = f(); return x; };
  auto normalize_rows = [&](Vec& x) {
    for (i64 r = 0; r < static_cast<i64>(x.size()) / K; ++r) {
      double ss = 0;
      for (i64 i = 0; i < K; ++i) ss += x[r * K + i] * x[r * K + i];
      const double n = std::max(std::sqrt(ss), 1e-12);
      for (i64 i = 0; i < K; ++i) x[r * K + i] /= n;
    }
  };
  const i64 nqk = B * T * H * K, nv = B * T * HV * V, ng = B * T * HV * Kg, nb = B * T * HV;
  Vec q, k, v, g, beta;
  if (c.dist == Dist::fla_chunk) {
    q = gen(nqk, [&] { return rng.uniform(); });
    k = gen(nqk, [&] { return rng.uniform(); });
    v = gen(nv, [&] { return rng.uniform(); });
  } else {
    q = gen(nqk, [&] { return rng.normal(); });
    k = gen(nqk, [&] { return rng.normal(); });
    v = gen(nv, [&] { return rng.normal(); });
  }
  // FLA normalises q/k outside the op unless the kernel does it (varlen: k only).
  if (!c.l2in) {
    if (c.dist == Dist::fla_chunk) normalize_rows(q);
    normalize_rows(k);
  }
  if (c.gate_in) {
    g = gen(ng, [&] { return rng.normal(); });
  } else {
    g = gen(ng, [&] {
      const double x = c.kda || c.dist == Dist::fla_varlen ? rng.normal() : rng.uniform();
      double y = testing::logsigmoid(c.dist == Dist::fla_chunk && !c.kda ? rng.uniform() : x) / c.norm;
      if (c.safe) y = std::max(y, -5.0);
      return rng.uniform() > c.mask_p ? y : 0.0;
    });
  }
  for (auto& e : g)
    if (c.neg1000_p > 0 && rng.uniform() < c.neg1000_p) e = -1000.0;
  beta = gen(nb, [&] {
    const double x = c.kda ? rng.normal() : rng.uniform();
    return c.beta_sigmoid ? x : testing::sigmoid(x);
  });
  Vec h0 = gen(N * HV * K * V, [&] { return c.h0_zero ? 0.0 : rng.normal(); });
  Vec A = gen(HV, [&] { return c.dist == Dist::fla_varlen ? std::log(1.0 + 15.0 * rng.uniform()) : rng.normal(); });
  Vec dtb = gen(HV * Kg, [&] { return rng.normal(); });
  Vec d_o = gen(nv, [&] { return rng.normal(); });
  Vec dht = gen(N * HV * K * V, [&] { return c.dist == Dist::fla_varlen ? rng.uniform() : rng.normal(); });

  const DType gdt = (c.gate_in || c.dist == Dist::fla_varlen) ? dt : DType::f32;
  HostTensor tq = from_vec(dt, {B, T, H, K}, q), tk = from_vec(dt, {B, T, H, K}, k), tv = from_vec(dt, {B, T, HV, V}, v);
  HostTensor tg = c.kda ? from_vec(gdt, {B, T, HV, K}, g) : from_vec(gdt, {B, T, HV}, g);
  HostTensor tb = from_vec(dt, {B, T, HV}, beta);
  HostTensor th0 = from_vec(c.h0_dtype, {N, HV, K, V}, h0);
  HostTensor tA = from_vec(DType::f32, {HV}, A), tdtb = from_vec(DType::f32, {HV * Kg}, dtb);
  HostTensor tdo = from_vec(dt, {B, T, HV, V}, d_o), tdht = from_vec(DType::f32, {N, HV, K, V}, dht);
  HostTensor tcu(DType::i64, {static_cast<i64>(c.cu.size())});
  for (std::size_t i = 0; i < c.cu.size(); ++i) tcu.set(static_cast<i64>(i), static_cast<double>(c.cu[i]));

  ChunkKdaArgs a;
  a.q = tq.view(); a.k = tk.view(); a.v = tv.view(); a.g = tg.view(); a.beta = tb.view();
  a.scale = c.scale;
  if (!c.no_state) a.initial_state = th0.view();
  if (varlen) a.cu_seqlens = tcu.view();
  a.use_qk_l2norm_in_kernel = c.l2in;
  a.use_beta_sigmoid_in_kernel = c.beta_sigmoid;
  a.allow_neg_eigval = c.neg_eig;
  a.use_gate_in_kernel = c.gate_in;
  const bool has_A = c.gate_in && !c.lb_no_A;
  const bool has_bias = c.gate_in && c.bias;
  if (has_A) a.A_log = tA.view();
  if (has_bias) a.dt_bias = tdtb.view();
  if (c.safe) a.lower_bound = -5.0;
  a.safe_gate = c.safe;

  HostTensor o = testing::poisoned(dt, {B, T, HV, V}), ht = testing::poisoned(DType::f32, {N, HV, K, V});
  HostTensor dq = testing::poisoned(dt, {B, T, H, K}), dk = testing::poisoned(dt, {B, T, H, K});
  HostTensor dv = testing::poisoned(dt, {B, T, HV, V}), dg = testing::poisoned(gdt, tg.shape());
  HostTensor dbeta = testing::poisoned(dt, {B, T, HV}), dh0 = testing::poisoned(DType::f32, {N, HV, K, V});
  HostTensor dA = testing::poisoned(DType::f32, {HV}), ddt = testing::poisoned(DType::f32, {HV * Kg});
  AttentionOutputs out{o.view(), ht.view()};
  AttentionGradInputs gin{tdo.view(), tdht.view()};
  DeltaRuleGrads grads{dq.view(), dk.view(), dv.view(), dg.view(), dbeta.view(), dh0.view(), std::nullopt, std::nullopt};
  if (c.no_state) {
    out.final_state.reset();
    gin.d_final_state.reset();
    grads.d_initial_state.reset();
  }
  if (has_A) grads.d_A_log = dA.view();
  if (has_bias) grads.d_dt_bias = ddt.view();
  ExecOptions opts;
  opts.backend = Backend::cpu;
  opts.num_threads = 2;
  RunInfo fi, bi;
  if (c.kda) {
    fi = chunk_kda_forward(a, out, ForwardMode::training, opts);
    bi = chunk_kda_backward(a, gin, grads, opts);
  } else {
    ChunkGdnArgs ga;
    static_cast<DeltaRuleArgs&>(ga) = static_cast<const DeltaRuleArgs&>(a);
    fi = chunk_gdn_forward(ga, out, ForwardMode::training, opts);
    bi = chunk_gdn_backward(ga, gin, grads, opts);
  }
  EXPECT_EQ(fi.backend, "cpu");
  EXPECT_EQ(bi.backend, "cpu");

  OracleProblem p;
  p.kda = c.kda; p.B = B; p.T = T; p.H = H; p.HV = HV; p.K = K; p.V = V;
  for (i64 s = 0; s < N; ++s) {
    if (varlen) p.seqs.push_back({c.cu[s], c.cu[s + 1] - c.cu[s]});
    else p.seqs.push_back({s * T, T});
  }
  p.scale = c.scale ? *c.scale : 1.0 / std::sqrt(static_cast<double>(K));
  p.l2 = c.l2in; p.beta_sigmoid = c.beta_sigmoid; p.neg_eig = c.neg_eig;
  p.gate = !c.gate_in ? Gate::none : (lower ? Gate::lower_bound : Gate::softplus);
  p.lower_bound = -5.0; p.has_A = has_A; p.has_bias = has_bias;
  OracleData d{tq.to_f64(), tk.to_f64(), tv.to_f64(), tg.to_f64(), tb.to_f64(), th0.to_f64(),
               tA.to_f64(), tdtb.to_f64(), tdo.to_f64(), tdht.to_f64()};
  if (c.no_state) {
    d.h0.clear();
    d.dht.clear();
  }
  const OracleOut r = oracle(p, d);

  auto check = [&](const char* name, const Vec& ref, const HostTensor& got, double tol) {
    const auto cl = harness::assert_close(ref, got.to_f64(), tol);
    EXPECT_TRUE(cl.pass) << c.name << " " << name << ": " << cl.str();
  };
  check("o", r.o, o, c.tol.o);
  if (!c.no_state) check("ht", r.ht, ht, c.tol.ht);
  check("dq", r.dq, dq, c.tol.dq);
  check("dk", r.dk, dk, c.tol.dk);
  check("dv", r.dv, dv, c.tol.dv);
  check("dg", r.dg, dg, c.tol.dg);
  check("dbeta", r.dbeta, dbeta, c.tol.dbeta);
  if (!c.no_state) check("dh0", r.dh0, dh0, c.tol.dh0);
  if (has_A) check("dA_log", r.dA, dA, c.tol.dA);
  if (has_bias) check("ddt_bias", r.ddt, ddt, c.tol.ddt);
}

class DeltaCpu : public ::testing::TestWithParam<Case> {};
TEST_P(DeltaCpu, MatchesFp64Recurrence) { run_case(GetParam()); }

Case kda(std::string name, i64 B, i64 T, i64 H, i64 HV, i64 D, std::optional<double> scale, double norm, double mask_p,
         bool l2in, bool gate_in, DType dt, bool safe) {
  Case c;
  c.name = std::move(name); c.kda = true; c.B = B; c.T = T; c.H = H; c.HV = HV; c.D = D; c.scale = scale;
  c.norm = norm; c.mask_p = mask_p; c.l2in = l2in; c.gate_in = gate_in; c.dtype = dt; c.safe = safe;
  c.tol = kKdaChunk;
  return c;
}

Case kda_varlen(std::string name, i64 H, i64 D, double mask_p, std::vector<i64> cu, bool gate_in) {
  Case c = kda(std::move(name), 1, 0, H, H, D, std::nullopt, 1.0, mask_p, false, gate_in, DType::f16, false);
  c.cu = std::move(cu); c.neg1000_p = mask_p; c.dist = Dist::fla_varlen; c.tol = kKdaVarlen;
  return c;
}

Case gdn(std::string name, i64 B, i64 T, i64 H, i64 HV, i64 D, std::optional<double> scale, double norm, double mask_p,
         bool l2in, DType dt) {
  Case c;
  c.name = std::move(name); c.kda = false; c.B = B; c.T = T; c.H = H; c.HV = HV; c.D = D; c.scale = scale;
  c.norm = norm; c.mask_p = mask_p; c.l2in = l2in; c.dtype = dt; c.h0_zero = true; c.tol = kGdnChunk;
  return c;
}

Case gdn_varlen(std::string name, i64 H, i64 HV, i64 D, double mask_p, std::vector<i64> cu) {
  Case c = gdn(std::move(name), 1, 0, H, HV, D, std::nullopt, 1.0, mask_p, false, DType::f16);
  c.cu = std::move(cu); c.dist = Dist::fla_varlen; c.h0_zero = false; c.h0_dtype = DType::f16; c.tol = kGdnVarlen;
  return c;
}

template <class F>
Case with(Case c, F&& f) { f(c); return c; }

const DType f16 = DType::f16, bf16 = DType::bf16, f32 = DType::f32;

INSTANTIATE_TEST_SUITE_P(
    KdaChunk, DeltaCpu,
    ::testing::Values(
        kda("B1_T63_H1_D64_safe", 1, 63, 1, 1, 64, 1.0, 1, 0, false, false, f16, true),
        kda("B1_T500_H1_D60", 1, 500, 1, 1, 60, 1.0, 1, 0, false, false, f16, true),
        kda("B1_T300_H2_D64_mask05", 1, 300, 2, 2, 64, 0.1, 1, 0.5, false, false, f16, false),
        kda("B2_T200_H1_D100_norm001", 2, 200, 1, 1, 100, 1.0, 0.01, 0, false, false, f16, false),
        kda("B1_T256_H1_D128_l2in", 1, 256, 1, 1, 128, 0.1, 1, 0, true, false, f16, true),
        kda("B1_T300_H1_D128_gatein_norm10", 1, 300, 1, 1, 128, 0.1, 10, 0, false, true, f16, false),
        kda("B2_T200_H1_HV2_D64_gva2", 2, 200, 1, 2, 64, 0.1, 1, 0, false, false, f16, false),
        kda("B1_T150_H1_HV4_D64_gva4_gatein", 1, 150, 1, 4, 64, 0.1, 1, 0, false, true, f16, false),
        kda("B1_T130_H1_HV2_D128_l2in_gatein", 1, 130, 1, 2, 128, 0.1, 1, 0, true, true, f16, false),
        kda("B1_T200_H1_HV2_D64_l2in_lowerbound_bf16", 1, 200, 1, 2, 64, 0.1, 1, 0, true, true, bf16, true),
        kda("B2_T160_H1_HV2_D64_gatein_bf16", 2, 160, 1, 2, 64, 0.1, 1, 0, false, true, bf16, false),
        kda("B2_T75_H2_D64", 2, 75, 2, 2, 64, std::nullopt, 1, 0, false, false, f16, false),
        kda("B3_T1_H2_D64", 3, 1, 2, 2, 64, std::nullopt, 1, 0, false, false, f16, false),
        with(kda("B1_T140_H1_HV2_K64_V40", 1, 140, 1, 2, 64, std::nullopt, 1, 0, true, true, f16, false),
             [](Case& c) { c.Dv = 40; }),
        with(kda("B2_T100_H1_HV2_D64_nostate", 2, 100, 1, 2, 64, std::nullopt, 1, 0, false, false, f16, false),
             [](Case& c) { c.no_state = true; }),
        with(kda("B1_T100_H1_HV2_D64_lowerbound_noA", 1, 100, 1, 2, 64, 0.1, 1, 0, false, true, f16, true),
             [](Case& c) { c.lb_no_A = true; c.bias = false; }),
        with(kda("B1_T90_H1_D64_betasigmoid_negeig", 1, 90, 1, 1, 64, 0.1, 1, 0, true, false, bf16, false),
             [](Case& c) { c.beta_sigmoid = true; c.neg_eig = true; }),
        with(kda("B2_T130_H1_HV2_D48_f32_all", 2, 130, 1, 2, 48, 0.3, 1, 0.2, true, true, f32, false),
             [](Case& c) { c.beta_sigmoid = true; c.tol = kTight; c.dist = Dist::fla_varlen; })),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

INSTANTIATE_TEST_SUITE_P(
    KdaVarlen, DeltaCpu,
    ::testing::Values(
        kda_varlen("H2_D60_cu0_15_gatein", 2, 60, 0.1, {0, 15}, true),
        kda_varlen("H1_D64_cu0_0_16", 1, 64, 0.0, {0, 0, 16}, false),
        kda_varlen("H1_D64_cu0_256_500_1000_mask09_gatein", 1, 64, 0.9, {0, 256, 500, 1000}, true),
        kda_varlen("H1_D128_cu0_256_500_1000_mask05", 1, 128, 0.5, {0, 256, 500, 1000}, false),
        kda_varlen("H1_D100_cu0_15_100_300_1200_2000_gatein", 1, 100, 0.0, {0, 15, 100, 300, 1200, 2000}, true),
        with(kda_varlen("H1_D64_cu0_31_96_160_safe", 1, 64, 0.1, {0, 31, 96, 160}, false),
             [](Case& c) { c.safe = true; })),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

INSTANTIATE_TEST_SUITE_P(
    GdnChunk, DeltaCpu,
    ::testing::Values(
        gdn("B1_T200_H1_D128_mask1", 1, 200, 1, 1, 128, 0.1, 1, 1.0, false, f16),
        gdn("B2_T75_H2_D64_norm001", 2, 75, 2, 2, 64, 1.0, 0.01, 0, false, f16),
        gdn("B1_T500_H1_D60", 1, 500, 1, 1, 60, 1.0, 1, 0, false, f16),
        gdn("B1_T300_H2_D64_mask05", 1, 300, 2, 2, 64, 0.1, 1, 0.5, false, f16),
        gdn("B1_T200_H1_D100_norm01", 1, 200, 1, 1, 100, 1.0, 0.1, 0, false, f16),
        gdn("B1_T256_H1_D128_l2in", 1, 256, 1, 1, 128, 0.1, 1, 0, true, f16),
        gdn("B1_T256_H1_HV2_D64_gva2", 1, 256, 1, 2, 64, 1.0, 1, 0, false, f16),
        gdn("B1_T200_H1_HV4_D64_gva4_l2in_norm01", 1, 200, 1, 4, 64, 1.0, 0.1, 0, true, f16),
        gdn("B2_T1_H2_D64", 2, 1, 2, 2, 64, std::nullopt, 1, 0, false, f16),
        with(gdn("B1_T140_H1_HV2_K48_V80", 1, 140, 1, 2, 48, std::nullopt, 1, 0, true, f16),
             [](Case& c) { c.Dv = 80; c.gate_in = true; }),
        with(gdn("B2_T100_H1_HV2_D64_nostate", 2, 100, 1, 2, 64, std::nullopt, 1, 0, false, f16),
             [](Case& c) { c.no_state = true; }),
        gdn("B1_T150_H1_HV2_D64_bf16", 1, 150, 1, 2, 64, 0.1, 1, 0, false, bf16),
        with(gdn("B2_T75_H2_D64_gatein_bias_l2in", 2, 75, 2, 2, 64, 1.0, 1, 0, true, f16),
             [](Case& c) { c.gate_in = true; }),
        with(gdn("B1_T256_H1_HV2_D64_gatein_gqa", 1, 256, 1, 2, 64, 1.0, 1, 0, false, f16),
             [](Case& c) { c.gate_in = true; }),
        with(gdn("B1_T100_H1_D60_gatein_nobias", 1, 100, 1, 1, 60, 1.0, 1, 0, false, f16),
             [](Case& c) { c.gate_in = true; c.bias = false; }),
        with(gdn("B1_T90_H1_D64_betasigmoid_negeig", 1, 90, 1, 1, 64, 0.1, 1, 0, true, bf16),
             [](Case& c) { c.beta_sigmoid = true; c.neg_eig = true; }),
        with(gdn("B2_T130_H1_HV2_D48_f32_all", 2, 130, 1, 2, 48, 0.3, 1, 0.2, true, f32),
             [](Case& c) { c.gate_in = true; c.beta_sigmoid = true; c.h0_zero = false; c.tol = kTight; })),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

INSTANTIATE_TEST_SUITE_P(
    GdnVarlen, DeltaCpu,
    ::testing::Values(
        gdn_varlen("H2_D60_cu0_15", 2, 2, 60, 0.0, {0, 15}),
        gdn_varlen("H1_D64_cu0_0_16", 1, 1, 64, 0.0, {0, 0, 16}),
        gdn_varlen("H1_D64_cu0_256_500_1000_mask05", 1, 1, 64, 0.5, {0, 256, 500, 1000}),
        gdn_varlen("H1_D100_cu0_15_100_300_1200_2000", 1, 1, 100, 0.0, {0, 15, 100, 300, 1200, 2000}),
        gdn_varlen("H1_HV2_D64_cu0_256_500_1000", 1, 2, 64, 0.0, {0, 256, 500, 1000}),
        gdn_varlen("H1_HV4_D64_cu0_256_500_1000", 1, 4, 64, 0.0, {0, 256, 500, 1000})),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// Work items never share an accumulator, so the thread count cannot change a single bit; inference and
// training forwards agree too.
TEST(DeltaCpuRun, ResultsAreIndependentOfThreadCountAndMode) {
  testing::Rng rng(3);
  const i64 T = 150, H = 2, HV = 4, D = 32;
  HostTensor q = testing::normal(rng, DType::bf16, {1, T, H, D}), k = testing::normal(rng, DType::bf16, {1, T, H, D});
  HostTensor v = testing::normal(rng, DType::bf16, {1, T, HV, D}), dO = testing::normal(rng, DType::bf16, {1, T, HV, D});
  HostTensor g = testing::make(DType::f32, {1, T, HV, D}, [&] { return testing::logsigmoid(rng.normal()); });
  HostTensor beta = testing::make(DType::bf16, {1, T, HV}, [&] { return rng.uniform(); });
  HostTensor cu(DType::i32, {4});
  for (int i = 0; i < 4; ++i) cu.set(i, std::vector<double>{0, 70, 71, 150}[static_cast<std::size_t>(i)]);
  ChunkKdaArgs a;
  a.q = q.view(); a.k = k.view(); a.v = v.view(); a.g = g.view(); a.beta = beta.view(); a.cu_seqlens = cu.view();
  a.use_qk_l2norm_in_kernel = true;
  auto run = [&](int threads, ForwardMode mode) {
    std::vector<HostTensor> t = {HostTensor(DType::bf16, {1, T, HV, D}), HostTensor(DType::bf16, {1, T, H, D}),
                                 HostTensor(DType::bf16, {1, T, H, D}), HostTensor(DType::bf16, {1, T, HV, D}),
                                 HostTensor(DType::f32, {1, T, HV, D}), HostTensor(DType::bf16, {1, T, HV})};
    ExecOptions opts;
    opts.backend = Backend::cpu;
    opts.num_threads = threads;
    chunk_kda_forward(a, {t[0].view(), std::nullopt}, mode, opts);
    chunk_kda_backward(a, {dO.view(), std::nullopt}, {t[1].view(), t[2].view(), t[3].view(), t[4].view(), t[5].view(), std::nullopt, std::nullopt, std::nullopt}, opts);
    std::vector<std::vector<double>> r;
    for (auto& x : t) r.push_back(x.to_f64());
    return r;
  };
  const auto one = run(1, ForwardMode::training);
  EXPECT_EQ(one, run(2, ForwardMode::training));
  EXPECT_EQ(one, run(3, ForwardMode::inference));
}

// ------------------------------------------------------------------------------------------------
TEST(CpuMath, FastExpIsAccurateUnderflowsToZeroAndKeepsNaN) {
  double worst = 0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f * static_cast<float>(i) / 200000.0f;
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(detail::cpu::fast_exp(x) - ref) / ref);
  }
  EXPECT_LT(worst, 1e-6);
  EXPECT_EQ(detail::cpu::fast_exp(0.0f), 1.0f);
  EXPECT_EQ(detail::cpu::fast_exp(-1000.0f), 0.0f);
  EXPECT_EQ(detail::cpu::fast_exp(-64000.0f), 0.0f);
  EXPECT_TRUE(std::isnan(detail::cpu::fast_exp(std::nanf(""))));
  EXPECT_EQ(detail::cpu::fast_exp(-INFINITY), 0.0f);
  EXPECT_NEAR(detail::cpu::fast_exp(5.0f), std::exp(5.0), std::exp(5.0) * 3e-7);
}

}  // namespace
}  // namespace lina
