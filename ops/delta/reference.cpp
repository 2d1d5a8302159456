// fp64 naive recurrences for chunk_kda and chunk_gdn (docs/math.md sections 1, 2 and 4.4): the oracle every
// faster backend is checked against. Deliberately simple: one token at a time, in docs/math.md's step
// order decay -> delta update -> read, with the in-kernel preprocessing and its backward in fp64.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "ops/common/backends.h"
#include "ops/common/host_io.h"
#include "ops/common/parallel.h"

namespace lina::detail::reference {
namespace {

using Vec = std::vector<double>;

double sigmoid(double x) {
  // Both branches avoid exp overflow for large |x|.
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}
// FLA's softplus: linear above 20 (its threshold), log1p(exp(x)) below.
double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }
double softplus_grad(double x) { return x > 20.0 ? 1.0 : sigmoid(x); }

// Everything about one call that the per-token code needs, resolved once.
struct Ctx {
  Ctx(const Problem& p_, const DeltaRuleArgs& a_) : p(p_), a(a_) {}
  const Problem& p;
  const DeltaRuleArgs& a;
  bool kda = false;
  std::optional<double> lower_bound;  // KDA only
  Vec A_log;                          // [HV] when given
  Vec dt_bias;                        // KDA [HV*K], GDN [HV] when given
  double beta_mult = 1.0;             // 2 with allow_neg_eigval
  std::int64_t gate_width() const { return kda ? p.K : 1; }
};

// One (token, value head) after preprocessing, plus what the backward of preprocessing needs.
struct Token {
  Vec q, k;         // normalised when use_qk_l2norm_in_kernel
  Vec v;            // [V]
  double beta = 0;  // effective beta
  double beta_s = 0;  // sigmoid(beta_raw) when use_beta_sigmoid_in_kernel
  Vec g;            // effective log decay, [K] (GDN: broadcast of its scalar)
  Vec x;            // gate pre-activation g_raw + dt_bias, [gate_width] (in-kernel gate only)
  Vec graw_g;       // effective gate per gate_width entry (before broadcast)
};

// Loads row `row` of head `head` of a [*, heads, dim] tensor, optionally l2-normalised; returns rstd.
double load_vec(const TensorView& t, std::int64_t row, std::int64_t heads, std::int64_t head, std::int64_t dim,
                bool l2norm, Vec& out) {
  out.resize(static_cast<std::size_t>(dim));
  const std::int64_t base = (row * heads + head) * dim;
  double ss = 0;
  for (std::int64_t c = 0; c < dim; ++c) {
    const double x = load_element(t, base + c);
    out[static_cast<std::size_t>(c)] = x;
    ss += x * x;
  }
  if (!l2norm) return 1.0;
  const double rstd = 1.0 / std::sqrt(ss + 1e-6);  // eps inside the sqrt (FLA's l2norm, not F.normalize)
  for (double& x : out) x *= rstd;
  return rstd;
}

void load_token(const Ctx& cx, std::int64_t row, std::int64_t hv, Token& tk) {
  const Problem& p = cx.p;
  const DeltaRuleArgs& a = cx.a;
  const std::int64_t hq = hv / p.group();
  load_vec(a.q, row, p.H, hq, p.K, a.use_qk_l2norm_in_kernel, tk.q);
  load_vec(a.k, row, p.H, hq, p.K, a.use_qk_l2norm_in_kernel, tk.k);
  load_vec(a.v, row, p.HV, hv, p.V, false, tk.v);
  const double braw = load_element(a.beta, row * p.HV + hv);
  if (a.use_beta_sigmoid_in_kernel) {
    tk.beta_s = sigmoid(braw);
    tk.beta = cx.beta_mult * tk.beta_s;
  } else {
    tk.beta = braw;
  }
  const std::int64_t W = cx.gate_width();
  tk.x.assign(static_cast<std::size_t>(W), 0.0);
  tk.graw_g.assign(static_cast<std::size_t>(W), 0.0);
  for (std::int64_t c = 0; c < W; ++c) {
    const double graw = load_element(a.g, (row * p.HV + hv) * W + c);
    double g = graw;
    if (a.use_gate_in_kernel) {
      double x = graw;
      if (!cx.dt_bias.empty()) x += cx.dt_bias[static_cast<std::size_t>(hv * W + c)];
      tk.x[static_cast<std::size_t>(c)] = x;
      if (cx.lower_bound) {
        const double e = cx.A_log.empty() ? 1.0 : std::exp(cx.A_log[static_cast<std::size_t>(hv)]);
        g = *cx.lower_bound * sigmoid(e * x);
      } else {
        g = -std::exp(cx.A_log[static_cast<std::size_t>(hv)]) * softplus(x);
      }
    }
    tk.graw_g[static_cast<std::size_t>(c)] = g;
  }
  tk.g.resize(static_cast<std::size_t>(p.K));
  for (std::int64_t c = 0; c < p.K; ++c) tk.g[static_cast<std::size_t>(c)] = tk.graw_g[static_cast<std::size_t>(cx.kda ? c : 0)];
}

Ctx make_ctx(const Problem& p, const DeltaRuleArgs& a, bool kda, std::optional<double> lower_bound) {
  Ctx cx(p, a);
  cx.kda = kda;
  cx.lower_bound = kda && a.use_gate_in_kernel ? lower_bound : std::nullopt;
  if (a.use_gate_in_kernel && a.A_log) cx.A_log = load_as<double>(*a.A_log);
  if (a.use_gate_in_kernel && a.dt_bias) cx.dt_bias = load_as<double>(*a.dt_bias);
  cx.beta_mult = a.use_beta_sigmoid_in_kernel && a.allow_neg_eigval ? 2.0 : 1.0;
  return cx;
}

std::int64_t state_base(const Problem& p, std::int64_t n, std::int64_t hv) { return (n * p.HV + hv) * p.K * p.V; }

// S (K x V, row-major: rows are key channels) <- initial_state[n, hv] or 0.
void load_state(const Ctx& cx, std::int64_t n, std::int64_t hv, Vec& S) {
  const Problem& p = cx.p;
  S.assign(static_cast<std::size_t>(p.K * p.V), 0.0);
  if (!cx.a.initial_state) return;
  const std::int64_t base = state_base(p, n, hv);
  for (std::int64_t i = 0; i < p.K * p.V; ++i) S[static_cast<std::size_t>(i)] = load_element(*cx.a.initial_state, base + i);
}

// One step of the recurrence in place: S <- decay(S) (kept in Sp if given), then the delta update.
// Returns u (the delta-rule write) and p = S'^T k.
void step(const Problem& p, const Token& tk, Vec& S, Vec* Sp, Vec& pv, Vec& u) {
  const std::int64_t K = p.K, V = p.V;
  for (std::int64_t i = 0; i < K; ++i) {
    const double a = std::exp(tk.g[static_cast<std::size_t>(i)]);
    for (std::int64_t j = 0; j < V; ++j) S[static_cast<std::size_t>(i * V + j)] *= a;
  }
  if (Sp) *Sp = S;
  pv.assign(static_cast<std::size_t>(V), 0.0);
  for (std::int64_t i = 0; i < K; ++i)
    for (std::int64_t j = 0; j < V; ++j) pv[static_cast<std::size_t>(j)] += S[static_cast<std::size_t>(i * V + j)] * tk.k[static_cast<std::size_t>(i)];
  u.resize(static_cast<std::size_t>(V));
  for (std::int64_t j = 0; j < V; ++j) u[static_cast<std::size_t>(j)] = tk.beta * (tk.v[static_cast<std::size_t>(j)] - pv[static_cast<std::size_t>(j)]);
  for (std::int64_t i = 0; i < K; ++i)
    for (std::int64_t j = 0; j < V; ++j) S[static_cast<std::size_t>(i * V + j)] += tk.k[static_cast<std::size_t>(i)] * u[static_cast<std::size_t>(j)];
}

void forward(const Ctx& cx, const AttentionOutputs& out) {
  const Problem& p = cx.p;
  const std::int64_t tasks = p.N * p.HV;
  parallel_for(tasks, 0, [&](std::int64_t task) {
    const std::int64_t n = task / p.HV, hv = task % p.HV;
    const Sequence& seq = p.sequences[static_cast<std::size_t>(n)];
    Vec S, pv, u;
    Token tk;
    load_state(cx, n, hv, S);
    for (std::int64_t t = 0; t < seq.length; ++t) {
      const std::int64_t row = seq.row_begin + t;
      load_token(cx, row, hv, tk);
      step(p, tk, S, nullptr, pv, u);
      const std::int64_t obase = (row * p.HV + hv) * p.V;
      for (std::int64_t j = 0; j < p.V; ++j) {
        double o = 0;
        for (std::int64_t i = 0; i < p.K; ++i) o += S[static_cast<std::size_t>(i * p.V + j)] * tk.q[static_cast<std::size_t>(i)];
        store_element(out.o, obase + j, p.scale * o);
      }
    }
    if (out.final_state) {
      const std::int64_t base = state_base(p, n, hv);
      for (std::int64_t i = 0; i < p.K * p.V; ++i) store_element(*out.final_state, base + i, S[static_cast<std::size_t>(i)]);
    }
  });
}

// Backward of y = x * rstd with rstd = 1/sqrt(|x|^2 + eps): dx = rstd (dy - (dy.y) y).
void l2norm_backward(const Vec& y, double rstd, Vec& dy) {
  double dot = 0;
  for (std::size_t c = 0; c < y.size(); ++c) dot += dy[c] * y[c];
  for (std::size_t c = 0; c < y.size(); ++c) dy[c] = rstd * (dy[c] - dot * y[c]);
}

// Checkpoint interval of the backward's recompute: states are kept every kBlock tokens and the
// states inside one block are rebuilt from its checkpoint, so memory is O((L/kBlock + kBlock) K V).
constexpr std::int64_t kBlock = 64;

void backward(const Ctx& cx, const AttentionGradInputs& in, const DeltaRuleGrads& gr) {
  const Problem& p = cx.p;
  const DeltaRuleArgs& a = cx.a;
  const std::int64_t K = p.K, V = p.V, G = p.group(), W = cx.gate_width();
  const std::int64_t tasks = p.N * p.H;
  // dA_log / ddt_bias sum over tokens of every sequence: each task keeps its own partial sums (its
  // group's G value heads), reduced in task order afterwards so the result is deterministic.
  const bool want_dA = gr.d_A_log.has_value(), want_ddt = gr.d_dt_bias.has_value();
  std::vector<Vec> part_dA(static_cast<std::size_t>(want_dA ? tasks : 0));
  std::vector<Vec> part_ddt(static_cast<std::size_t>(want_ddt ? tasks : 0));

  parallel_for(tasks, 0, [&](std::int64_t task) {
    const std::int64_t n = task / p.H, h = task % p.H;
    const Sequence& seq = p.sequences[static_cast<std::size_t>(n)];
    const std::int64_t L = seq.length;
    Vec dA(static_cast<std::size_t>(G), 0.0), ddt(static_cast<std::size_t>(G * W), 0.0);
    // Gradients w.r.t. the (normalised) q / k, summed over the GVA group before the l2norm backward.
    Vec dq_acc(static_cast<std::size_t>(L * K), 0.0), dk_acc(static_cast<std::size_t>(L * K), 0.0);
    const std::int64_t nb = (L + kBlock - 1) / kBlock;
    Vec S, pv, u, dS, du, dp;
    Vec do_(static_cast<std::size_t>(V)), dG(static_cast<std::size_t>(K));
    std::vector<Vec> ckpt(static_cast<std::size_t>(nb));
    // Per token of the current block: S' = decay(S_{t-1}), p = S'^T k and u (S_t = S' + k u^T).
    const auto blk = static_cast<std::size_t>(std::min(L, kBlock));
    std::vector<Vec> Sps(blk), ps(blk), us(blk);
    std::vector<Token> toks(static_cast<std::size_t>(std::min(L, kBlock)));

    for (std::int64_t gi = 0; gi < G; ++gi) {
      const std::int64_t hv = h * G + gi;
      load_state(cx, n, hv, S);
      for (std::int64_t t = 0; t < L; ++t) {
        if (t % kBlock == 0) ckpt[static_cast<std::size_t>(t / kBlock)] = S;
        load_token(cx, seq.row_begin + t, hv, toks[0]);
        step(p, toks[0], S, nullptr, pv, u);
      }
      dS.assign(static_cast<std::size_t>(K * V), 0.0);
      if (in.d_final_state) {
        const std::int64_t base = state_base(p, n, hv);
        for (std::int64_t i = 0; i < K * V; ++i) dS[static_cast<std::size_t>(i)] = load_element(*in.d_final_state, base + i);
      }
      for (std::int64_t b = nb - 1; b >= 0; --b) {
        const std::int64_t t0 = b * kBlock, t1 = std::min(L, t0 + kBlock);
        S = ckpt[static_cast<std::size_t>(b)];
        for (std::int64_t t = t0; t < t1; ++t) {
          Token& tk = toks[static_cast<std::size_t>(t - t0)];
          load_token(cx, seq.row_begin + t, hv, tk);
          const auto r = static_cast<std::size_t>(t - t0);
          step(p, tk, S, &Sps[r], ps[r], us[r]);
        }
        for (std::int64_t t = t1 - 1; t >= t0; --t) {
          const Token& tk = toks[static_cast<std::size_t>(t - t0)];
          const std::int64_t row = seq.row_begin + t;
          const auto r = static_cast<std::size_t>(t - t0);
          const Vec& Sp = Sps[r];
          const Vec& pv_t = ps[r];
          const Vec& u_t = us[r];
          const std::int64_t vbase = (row * p.HV + hv) * V;
          for (std::int64_t j = 0; j < V; ++j) do_[static_cast<std::size_t>(j)] = load_element(in.d_o, vbase + j);
          // dS += qs do^T;  dq = scale S_t do, with S_t = S' + k u^T
          double u_do = 0;
          for (std::int64_t j = 0; j < V; ++j) u_do += u_t[static_cast<std::size_t>(j)] * do_[static_cast<std::size_t>(j)];
          for (std::int64_t i = 0; i < K; ++i) {
            const double qs = p.scale * tk.q[static_cast<std::size_t>(i)];
            double dq = tk.k[static_cast<std::size_t>(i)] * u_do;
            for (std::int64_t j = 0; j < V; ++j) {
              dS[static_cast<std::size_t>(i * V + j)] += qs * do_[static_cast<std::size_t>(j)];
              dq += Sp[static_cast<std::size_t>(i * V + j)] * do_[static_cast<std::size_t>(j)];
            }
            dq_acc[static_cast<std::size_t>(t * K + i)] += p.scale * dq;
          }
          // dk = dS u;  du = dS^T k
          du.assign(static_cast<std::size_t>(V), 0.0);
          for (std::int64_t i = 0; i < K; ++i) {
            double dk = 0;
            for (std::int64_t j = 0; j < V; ++j) {
              const double d = dS[static_cast<std::size_t>(i * V + j)];
              dk += d * u_t[static_cast<std::size_t>(j)];
              du[static_cast<std::size_t>(j)] += d * tk.k[static_cast<std::size_t>(i)];
            }
            dk_acc[static_cast<std::size_t>(t * K + i)] += dk;
          }
          // dv = beta du;  dbeta = du . (v - p);  dp = -beta du
          double dbeta = 0;
          dp.resize(static_cast<std::size_t>(V));
          for (std::int64_t j = 0; j < V; ++j) {
            const auto js = static_cast<std::size_t>(j);
            store_element(gr.dv, vbase + j, tk.beta * du[js]);
            dbeta += du[js] * (tk.v[js] - pv_t[js]);
            dp[js] = -tk.beta * du[js];
          }
          // dS' = dS + k dp^T;  dk += S' dp;  dg = rowsum(dS' * S');  dS = diag(exp(g)) dS'
          for (std::int64_t i = 0; i < K; ++i) {
            const double ki = tk.k[static_cast<std::size_t>(i)];
            const double a_i = std::exp(tk.g[static_cast<std::size_t>(i)]);
            double dk = 0, dg = 0;
            for (std::int64_t j = 0; j < V; ++j) {
              const auto ij = static_cast<std::size_t>(i * V + j);
              const double dsp = dS[ij] + ki * dp[static_cast<std::size_t>(j)];
              dk += Sp[ij] * dp[static_cast<std::size_t>(j)];
              dg += dsp * Sp[ij];
              dS[ij] = a_i * dsp;
            }
            dk_acc[static_cast<std::size_t>(t * K + i)] += dk;
            dG[static_cast<std::size_t>(i)] = dg;
          }
          // beta: through the sigmoid (and the factor 2 of allow_neg_eigval).
          if (a.use_beta_sigmoid_in_kernel) dbeta *= cx.beta_mult * tk.beta_s * (1.0 - tk.beta_s);
          store_element(gr.dbeta, row * p.HV + hv, dbeta);
          // g: GDN's scalar gate feeds every key channel, so its gradient is the sum over K.
          for (std::int64_t c = 0; c < W; ++c) {
            double d = 0;
            if (cx.kda) d = dG[static_cast<std::size_t>(c)];
            else for (std::int64_t i = 0; i < K; ++i) d += dG[static_cast<std::size_t>(i)];
            if (a.use_gate_in_kernel) {
              const double x = tk.x[static_cast<std::size_t>(c)];
              const double g = tk.graw_g[static_cast<std::size_t>(c)];
              double dx = 0, dAl = 0;
              if (cx.lower_bound) {
                const bool has_A = !cx.A_log.empty();
                const double e = has_A ? std::exp(cx.A_log[static_cast<std::size_t>(hv)]) : 1.0;
                const double s = sigmoid(e * x);
                const double ds = *cx.lower_bound * s * (1.0 - s);  // d g / d(e x)
                dx = d * ds * e;
                if (has_A) dAl = d * ds * e * x;  // d e / d A_log = e
              } else {
                dx = d * -std::exp(cx.A_log[static_cast<std::size_t>(hv)]) * softplus_grad(x);
                dAl = d * g;  // g is linear in exp(A_log)
              }
              dA[static_cast<std::size_t>(gi)] += dAl;
              ddt[static_cast<std::size_t>(gi * W + c)] += dx;
              d = dx;
            }
            store_element(gr.dg, (row * p.HV + hv) * W + c, d);
          }
        }
      }
      if (gr.d_initial_state) {
        const std::int64_t base = state_base(p, n, hv);
        for (std::int64_t i = 0; i < K * V; ++i) store_element(*gr.d_initial_state, base + i, dS[static_cast<std::size_t>(i)]);
      }
    }
    // dq / dk: one l2norm backward on the group's summed gradient (it is linear in dy).
    Vec y, dy(static_cast<std::size_t>(K));
    for (std::int64_t t = 0; t < L; ++t) {
      const std::int64_t row = seq.row_begin + t;
      const std::int64_t base = (row * p.H + h) * K;
      for (int which = 0; which < 2; ++which) {
        const Vec& acc = which == 0 ? dq_acc : dk_acc;
        std::copy(acc.begin() + t * K, acc.begin() + (t + 1) * K, dy.begin());
        if (a.use_qk_l2norm_in_kernel) {
          const double rstd = load_vec(which == 0 ? a.q : a.k, row, p.H, h, K, true, y);
          l2norm_backward(y, rstd, dy);
        }
        const TensorView& dst = which == 0 ? gr.dq : gr.dk;
        for (std::int64_t c = 0; c < K; ++c) store_element(dst, base + c, dy[static_cast<std::size_t>(c)]);
      }
    }
    if (want_dA) part_dA[static_cast<std::size_t>(task)] = std::move(dA);
    if (want_ddt) part_ddt[static_cast<std::size_t>(task)] = std::move(ddt);
  });

  if (want_dA) {
    Vec total(static_cast<std::size_t>(p.HV), 0.0);
    for (std::int64_t task = 0; task < tasks; ++task) {
      const std::int64_t h = task % p.H;
      for (std::int64_t gi = 0; gi < G; ++gi) total[static_cast<std::size_t>(h * G + gi)] += part_dA[static_cast<std::size_t>(task)][static_cast<std::size_t>(gi)];
    }
    store_from(*gr.d_A_log, total);
  }
  if (want_ddt) {
    Vec total(static_cast<std::size_t>(p.HV * W), 0.0);
    for (std::int64_t task = 0; task < tasks; ++task) {
      const std::int64_t h = task % p.H;
      for (std::int64_t i = 0; i < G * W; ++i) total[static_cast<std::size_t>(h * G * W + i)] += part_ddt[static_cast<std::size_t>(task)][static_cast<std::size_t>(i)];
    }
    store_from(*gr.d_dt_bias, total);
  }
}

}  // namespace

void chunk_kda_forward(const Problem& p, const ChunkKdaArgs& a, const AttentionOutputs& out) {
  forward(make_ctx(p, a, /*kda=*/true, a.lower_bound), out);
}
void chunk_kda_backward(const Problem& p, const ChunkKdaArgs& a, const AttentionGradInputs& in, const DeltaRuleGrads& g) {
  backward(make_ctx(p, a, /*kda=*/true, a.lower_bound), in, g);
}
void chunk_gdn_forward(const Problem& p, const ChunkGdnArgs& a, const AttentionOutputs& out) {
  forward(make_ctx(p, a, /*kda=*/false, std::nullopt), out);
}
void chunk_gdn_backward(const Problem& p, const ChunkGdnArgs& a, const AttentionGradInputs& in, const DeltaRuleGrads& g) {
  backward(make_ctx(p, a, /*kda=*/false, std::nullopt), in, g);
}

}  // namespace lina::detail::reference
