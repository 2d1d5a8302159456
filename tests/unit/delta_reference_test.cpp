// The fp64 KDA / GDN references: forward against hand-computed steps, every gradient of the naive
// backward against central finite differences of the forward, and the identities between the ops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lina/chunk_delta.h"
#include "lina/error.h"
#include "tests/support/random.h"

namespace lina {
namespace {

using testing::Rng;

struct Case {
  bool kda = true;
  std::int64_t B = 1, T = 6, H = 2, HV = 4, K = 5, V = 3;
  std::vector<std::int64_t> cu;  // empty: dense
  bool l2norm = false, beta_sigmoid = false, neg_eigval = false, gate = false;
  bool with_A = true, with_dt = true, dt_2d = false;
  std::optional<double> lower_bound;
  bool safe_gate = false;
  bool with_h0 = true, with_dht = true;
  std::optional<double> scale;
  std::uint64_t seed = 42;
  std::int64_t N() const { return cu.empty() ? B : static_cast<std::int64_t>(cu.size()) - 1; }
};

// Inputs are f32 (the dtypes the public API accepts); the reference computes in fp64 from them.
struct Inputs {
  HostTensor q, k, v, g, beta, h0, A_log, dt_bias, cu, d_o, dht;
};

HostTensor normalized_rows(Rng& r, Shape s, std::int64_t dim) {
  HostTensor t = testing::normal(r, DType::f32, s);
  for (std::int64_t b = 0; b < t.numel(); b += dim) {
    double ss = 0;
    for (std::int64_t c = 0; c < dim; ++c) ss += t.get(b + c) * t.get(b + c);
    for (std::int64_t c = 0; c < dim; ++c) t.set(b + c, t.get(b + c) / std::sqrt(ss));
  }
  return t;
}

Inputs make_inputs(const Case& c) {
  Rng r(c.seed);
  Inputs in;
  const Shape qk{c.B, c.T, c.H, c.K};
  in.q = testing::normal(r, DType::f32, qk);
  // Without the in-kernel l2norm, k is normalised on the host as FLA's tests do (keeps I - b k k^T tame).
  in.k = c.l2norm ? testing::normal(r, DType::f32, qk) : normalized_rows(r, qk, c.K);
  in.v = testing::normal(r, DType::f32, Shape{c.B, c.T, c.HV, c.V});
  const Shape gs = c.kda ? Shape{c.B, c.T, c.HV, c.K} : Shape{c.B, c.T, c.HV};
  if (c.gate) in.g = testing::normal(r, DType::f32, gs);
  else in.g = testing::make(DType::f32, gs, [&] { return testing::logsigmoid(r.normal()); });
  if (c.beta_sigmoid) in.beta = testing::normal(r, DType::f32, Shape{c.B, c.T, c.HV});
  else in.beta = testing::make(DType::f32, Shape{c.B, c.T, c.HV}, [&] { return testing::sigmoid(r.normal()); });
  in.h0 = testing::normal(r, DType::f32, Shape{c.N(), c.HV, c.K, c.V});
  in.A_log = testing::make(DType::f32, Shape{c.HV}, [&] { return 0.5 * r.normal(); });
  const Shape dts = !c.kda ? Shape{c.HV} : c.dt_2d ? Shape{c.HV, c.K} : Shape{c.HV * c.K};
  in.dt_bias = testing::normal(r, DType::f32, dts);
  if (!c.cu.empty()) {
    in.cu = HostTensor(DType::i32, Shape{static_cast<std::int64_t>(c.cu.size())});
    for (std::size_t i = 0; i < c.cu.size(); ++i) in.cu.set(static_cast<std::int64_t>(i), static_cast<double>(c.cu[i]));
  }
  in.d_o = testing::normal(r, DType::f64, Shape{c.B, c.T, c.HV, c.V});
  in.dht = testing::normal(r, DType::f64, Shape{c.N(), c.HV, c.K, c.V});
  return in;
}

void fill_common(const Case& c, Inputs& in, DeltaRuleArgs& a) {
  a.q = in.q.view(); a.k = in.k.view(); a.v = in.v.view(); a.g = in.g.view(); a.beta = in.beta.view();
  a.scale = c.scale;
  if (c.with_h0) a.initial_state = in.h0.view();
  if (!c.cu.empty()) a.cu_seqlens = in.cu.view();
  a.use_qk_l2norm_in_kernel = c.l2norm;
  a.use_beta_sigmoid_in_kernel = c.beta_sigmoid;
  a.allow_neg_eigval = c.neg_eigval;
  a.use_gate_in_kernel = c.gate;
  if (c.gate && c.with_A) a.A_log = in.A_log.view();
  if (c.gate && c.with_dt) a.dt_bias = in.dt_bias.view();
}

struct Outputs {
  HostTensor o, ht;
};

struct Grads {
  HostTensor dq, dk, dv, dg, dbeta, dh0, dA, ddt;
};

Outputs run_forward(const Case& c, Inputs& in, DType out_dtype = DType::f64) {
  Outputs r{HostTensor::filled(out_dtype, in.v.shape(), NAN), HostTensor::filled(out_dtype, in.h0.shape(), NAN)};
  AttentionOutputs out{r.o.view(), r.ht.view()};
  if (c.kda) {
    ChunkKdaArgs a;
    fill_common(c, in, a);
    a.lower_bound = c.lower_bound;
    a.safe_gate = c.safe_gate;
    reference::chunk_kda_forward(a, out);
  } else {
    ChunkGdnArgs a;
    fill_common(c, in, a);
    reference::chunk_gdn_forward(a, out);
  }
  return r;
}

Grads run_backward(const Case& c, Inputs& in) {
  Grads g;
  auto like = [](const HostTensor& t) { return HostTensor::filled(DType::f64, t.shape(), NAN); };
  g.dq = like(in.q); g.dk = like(in.k); g.dv = like(in.v); g.dg = like(in.g); g.dbeta = like(in.beta);
  g.dh0 = like(in.h0); g.dA = like(in.A_log); g.ddt = like(in.dt_bias);
  DeltaRuleGrads gr{g.dq.view(), g.dk.view(), g.dv.view(), g.dg.view(), g.dbeta.view(), g.dh0.view(), std::nullopt, std::nullopt};
  if (c.gate && c.with_A) gr.d_A_log = g.dA.view();
  if (c.gate && c.with_dt) gr.d_dt_bias = g.ddt.view();
  AttentionGradInputs gi{in.d_o.view(), std::nullopt};
  if (c.with_dht) gi.d_final_state = in.dht.view();
  if (c.kda) {
    ChunkKdaArgs a;
    fill_common(c, in, a);
    a.lower_bound = c.lower_bound;
    a.safe_gate = c.safe_gate;
    reference::chunk_kda_backward(a, gi, gr);
  } else {
    ChunkGdnArgs a;
    fill_common(c, in, a);
    reference::chunk_gdn_backward(a, gi, gr);
  }
  return g;
}

double dot(const HostTensor& a, const HostTensor& b) {
  double s = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) s += a.get(i) * b.get(i);
  return s;
}

// FLA's gradient protocol: loss = sum(o * do) + sum(ht * dht).
double loss(const Case& c, Inputs& in) {
  Outputs r = run_forward(c, in);
  return dot(r.o, in.d_o) + (c.with_dht ? dot(r.ht, in.dht) : 0.0);
}

bool all_finite(const HostTensor& t) {
  for (std::int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.get(i))) return false;
  return true;
}

double max_abs(const HostTensor& t) {
  double m = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(t.get(i)));
  return m;
}

// Central differences with the perturbation actually stored in f32 (x0 +- 2^-12 is exact for the
// |x| < 8 values used here, and the stored values are used regardless), compared element-wise.
void check_gradient(const Case& c, Inputs& in, HostTensor& x, const HostTensor& grad, const std::string& name) {
  SCOPED_TRACE(name);
  ASSERT_EQ(x.numel(), grad.numel());
  ASSERT_TRUE(all_finite(grad));
  // A vacuous gradient (all zero) would pass any comparison: require some signal.
  EXPECT_GT(max_abs(grad), 1e-3);
  const double h = std::ldexp(1.0, -12);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double x0 = x.get(i);
    x.set(i, x0 + h);
    const double xp = x.get(i);
    const double lp = loss(c, in);
    x.set(i, x0 - h);
    const double xm = x.get(i);
    const double lm = loss(c, in);
    x.set(i, x0);
    const double fd = (lp - lm) / (xp - xm);
    const double an = grad.get(i);
    EXPECT_NEAR(an, fd, 2e-6 * (1.0 + std::abs(fd))) << name << "[" << i << "]";
  }
}

void check_all_gradients(const Case& c) {
  Inputs in = make_inputs(c);
  const Grads g = run_backward(c, in);
  check_gradient(c, in, in.q, g.dq, "dq");
  check_gradient(c, in, in.k, g.dk, "dk");
  check_gradient(c, in, in.v, g.dv, "dv");
  check_gradient(c, in, in.g, g.dg, "dg");
  check_gradient(c, in, in.beta, g.dbeta, "dbeta");
  if (c.with_h0) check_gradient(c, in, in.h0, g.dh0, "dh0");
  if (c.gate && c.with_A) check_gradient(c, in, in.A_log, g.dA, "dA_log");
  if (c.gate && c.with_dt) check_gradient(c, in, in.dt_bias, g.ddt, "ddt_bias");
}

// ---------------------------------------------------------------------------------------------
// Forward against hand-computed steps (decay -> delta update -> read; the read sees the update).

HostTensor f32(Shape s, std::vector<double> v) {
  HostTensor t(DType::f32, s);
  for (std::size_t i = 0; i < v.size(); ++i) t.set(static_cast<std::int64_t>(i), v[i]);
  return t;
}

TEST(DeltaReference, KdaForwardMatchesHandComputedStep) {
  // K = V = 2, one token. S0 = [[1,2],[3,4]] (rows are key channels), a = (1/2, 1/4) per key row,
  // k = (0.6, 0.8), beta = 0.5, v = (1, -1), q = (1, 2), scale 0.5:
  //   S' = [[.5, 1], [.75, 1]], p = S'^T k = (0.9, 1.4), u = 0.5 (v - p) = (0.05, -1.2),
  //   S  = S' + k u^T = [[.53, .28], [.79, .04]], o = S^T (0.5 q) = (1.055, 0.18).
  HostTensor q = f32({1, 1, 1, 2}, {1, 2}), k = f32({1, 1, 1, 2}, {0.6, 0.8}), v = f32({1, 1, 1, 2}, {1, -1});
  HostTensor g = f32({1, 1, 1, 2}, {std::log(0.5), std::log(0.25)}), beta = f32({1, 1, 1}, {0.5});
  HostTensor h0 = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  HostTensor o = HostTensor::filled(DType::f64, {1, 1, 1, 2}, NAN), ht = HostTensor::filled(DType::f64, {1, 1, 2, 2}, NAN);
  ChunkKdaArgs a;
  a.q = q.view(); a.k = k.view(); a.v = v.view(); a.g = g.view(); a.beta = beta.view();
  a.initial_state = h0.view();
  a.scale = 0.5;
  reference::chunk_kda_forward(a, {o.view(), ht.view()});
  EXPECT_NEAR(o.get(0), 1.055, 1e-6);
  EXPECT_NEAR(o.get(1), 0.18, 1e-6);
  const double want[] = {0.53, 0.28, 0.79, 0.04};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(ht.get(i), want[i], 1e-6) << i;
}

TEST(DeltaReference, GdnForwardMatchesHandComputedTwoSteps) {
  // K = V = 1, scale 1, S0 = 2.
  // t=0: a = 1/2, k = 1, v = 3, beta = 1/2, q = 1: S' = 1, u = 1, S = 2, o = 2.
  // t=1: a = 1, k = 2, v = 1, beta = 1/4, q = 3: S' = 2, p = 4, u = -0.75, S = 0.5, o = 1.5.
  HostTensor q = f32({1, 2, 1, 1}, {1, 3}), k = f32({1, 2, 1, 1}, {1, 2}), v = f32({1, 2, 1, 1}, {3, 1});
  HostTensor g = f32({1, 2, 1}, {std::log(0.5), 0.0}), beta = f32({1, 2, 1}, {0.5, 0.25});
  HostTensor h0 = f32({1, 1, 1, 1}, {2});
  HostTensor o = HostTensor::filled(DType::f64, {1, 2, 1, 1}, NAN), ht = HostTensor::filled(DType::f64, {1, 1, 1, 1}, NAN);
  ChunkGdnArgs a;
  a.q = q.view(); a.k = k.view(); a.v = v.view(); a.g = g.view(); a.beta = beta.view();
  a.initial_state = h0.view();
  a.scale = 1.0;
  reference::chunk_gdn_forward(a, {o.view(), ht.view()});
  EXPECT_NEAR(o.get(0), 2.0, 1e-6);
  EXPECT_NEAR(o.get(1), 1.5, 1e-6);
  EXPECT_NEAR(ht.get(0), 0.5, 1e-6);
}

TEST(DeltaReference, PreprocessingMatchesHandComputedValues) {
  // K = V = 1 with every in-kernel transform: q, k l2-normalised (eps inside the sqrt),
  // beta = 2 sigmoid(0) = 1, g = -exp(0) softplus(0 + 0) = -ln 2. S0 = 4, v = 3, k_raw = q_raw = 2.
  //   kn = qn = 2 / sqrt(4 + 1e-6); S' = 2; u = 1 * (3 - 2 kn); S = 2 + kn u; o = S qn (scale 1).
  HostTensor q = f32({1, 1, 1, 1}, {2}), k = f32({1, 1, 1, 1}, {2}), v = f32({1, 1, 1, 1}, {3});
  HostTensor g = f32({1, 1, 1}, {0}), beta = f32({1, 1, 1}, {0}), h0 = f32({1, 1, 1, 1}, {4});
  HostTensor A = f32({1}, {0}), dt = f32({1}, {0});
  HostTensor o = HostTensor::filled(DType::f64, {1, 1, 1, 1}, NAN), ht = HostTensor::filled(DType::f64, {1, 1, 1, 1}, NAN);
  ChunkGdnArgs a;
  a.q = q.view(); a.k = k.view(); a.v = v.view(); a.g = g.view(); a.beta = beta.view();
  a.initial_state = h0.view();
  a.scale = 1.0;
  a.use_qk_l2norm_in_kernel = a.use_beta_sigmoid_in_kernel = a.allow_neg_eigval = a.use_gate_in_kernel = true;
  a.A_log = A.view();
  a.dt_bias = dt.view();
  reference::chunk_gdn_forward(a, {o.view(), ht.view()});
  const double kn = 2.0 / std::sqrt(4.0 + 1e-6);
  const double S = 2.0 + kn * (3.0 - 2.0 * kn);
  EXPECT_NEAR(ht.get(0), S, 1e-12);
  EXPECT_NEAR(o.get(0), S * kn, 1e-12);
}

TEST(DeltaReference, InKernelGateFormsMatchTheSpec) {
  // With beta = 0 there is no delta update, so the final state is exp(g) * h0 channel by channel and
  // exposes the gate itself. K = 2 (per-channel dt_bias), V = 1, one token, x = g_raw + dt_bias.
  struct Form {
    const char* name;
    bool kda;
    std::optional<double> lower_bound;
    bool with_A;
    std::function<double(double x, double A)> gate;
  };
  const auto softplus = [](double x) { return x > 20 ? x : std::log1p(std::exp(x)); };
  const auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  const std::vector<Form> forms = {
      {"kda softplus", true, std::nullopt, true, [&](double x, double A) { return -std::exp(A) * softplus(x); }},
      {"kda lower_bound", true, -4.0, true, [&](double x, double A) { return -4.0 * sig(std::exp(A) * x); }},
      {"kda lower_bound, no A_log", true, -2.5, false, [&](double x, double) { return -2.5 * sig(x); }},
      {"gdn softplus", false, std::nullopt, true, [&](double x, double A) { return -std::exp(A) * softplus(x); }},
  };
  for (const Form& f : forms) {
    SCOPED_TRACE(f.name);
    // Channel 1's x = 21.5 sits above softplus's linear threshold (20).
    HostTensor q = f32({1, 1, 1, 2}, {1, 1}), k = f32({1, 1, 1, 2}, {0.6, 0.8}), v = f32({1, 1, 1, 1}, {1});
    HostTensor g = f.kda ? f32({1, 1, 1, 2}, {0.25, 21.0}) : f32({1, 1, 1}, {0.25});
    HostTensor beta = f32({1, 1, 1}, {0}), h0 = f32({1, 1, 2, 1}, {3, 5});
    HostTensor A = f32({1}, {-0.5}), dt = f.kda ? f32({2}, {-1.0, 0.5}) : f32({1}, {-1.0});
    HostTensor o = HostTensor::filled(DType::f64, {1, 1, 1, 1}, NAN), ht = HostTensor::filled(DType::f64, {1, 1, 2, 1}, NAN);
    DeltaRuleArgs base;
    base.q = q.view(); base.k = k.view(); base.v = v.view(); base.g = g.view(); base.beta = beta.view();
    base.initial_state = h0.view();
    base.use_gate_in_kernel = true;
    if (f.with_A) base.A_log = A.view();
    base.dt_bias = dt.view();
    if (f.kda) {
      ChunkKdaArgs a;
      static_cast<DeltaRuleArgs&>(a) = base;
      a.lower_bound = f.lower_bound;
      reference::chunk_kda_forward(a, {o.view(), ht.view()});
    } else {
      ChunkGdnArgs a;
      static_cast<DeltaRuleArgs&>(a) = base;
      reference::chunk_gdn_forward(a, {o.view(), ht.view()});
    }
    const double g0 = f.gate(0.25 - 1.0, -0.5);
    const double g1 = f.kda ? f.gate(21.0 + 0.5, -0.5) : g0;
    EXPECT_NEAR(ht.get(0), 3 * std::exp(g0), 1e-12);
    EXPECT_NEAR(ht.get(1), 5 * std::exp(g1), 1e-12);
  }
}

// ---------------------------------------------------------------------------------------------
// Gradients against finite differences.

TEST(DeltaReference, KdaPlainGradientsMatchFiniteDifferences) { check_all_gradients(Case{}); }

TEST(DeltaReference, KdaPreprocessedGradientsMatchFiniteDifferences) {
  Case c;
  c.l2norm = c.beta_sigmoid = c.gate = true;  // softplus gate, dt_bias [HV*K]
  check_all_gradients(c);
}

TEST(DeltaReference, KdaLowerBoundGateGradientsMatchFiniteDifferences) {
  Case c;
  c.gate = true;
  c.lower_bound = -5.0;
  c.safe_gate = true;
  c.dt_2d = true;  // dt_bias [HV, K]
  check_all_gradients(c);
}

TEST(DeltaReference, KdaLowerBoundGateWithoutALogGradientsMatchFiniteDifferences) {
  Case c;
  c.gate = true;
  c.lower_bound = -3.0;
  c.with_A = false;
  c.l2norm = true;
  check_all_gradients(c);
}

TEST(DeltaReference, GdnPlainGradientsMatchFiniteDifferences) {
  Case c;
  c.kda = false;
  c.B = 2;
  c.T = 5;
  check_all_gradients(c);
}

TEST(DeltaReference, GdnPreprocessedGradientsMatchFiniteDifferences) {
  Case c;
  c.kda = false;
  c.l2norm = c.beta_sigmoid = c.neg_eigval = c.gate = true;
  c.scale = 0.7;
  check_all_gradients(c);
}

TEST(DeltaReference, GateWithoutDtBiasAndWiderGroupsMatchFiniteDifferences) {
  Case g;  // GDN's in-kernel gate with dt_bias omitted (FLA's bias=False cases)
  g.kda = false;
  g.gate = true;
  g.with_dt = false;
  check_all_gradients(g);
  Case k;  // KDA, two batches, GVA group of 3
  k.B = 2;
  k.T = 4;
  k.H = 2;
  k.HV = 6;
  k.K = 3;
  k.V = 2;
  k.gate = k.beta_sigmoid = true;
  check_all_gradients(k);
}

TEST(DeltaReference, VarlenWithEmptySequenceGradientsMatchFiniteDifferences) {
  for (bool kda : {true, false}) {
    SCOPED_TRACE(kda ? "kda" : "gdn");
    Case c;
    c.kda = kda;
    c.T = 7;
    c.cu = {0, 3, 3, 7};
    c.gate = c.l2norm = true;
    check_all_gradients(c);
  }
}

// ---------------------------------------------------------------------------------------------
// Structural properties.

TEST(DeltaReference, EmptySequencePassesStateThrough) {
  Case c;
  c.T = 5;
  c.cu = {0, 2, 2, 5};
  Inputs in = make_inputs(c);
  const Outputs out = run_forward(c, in);
  const Grads g = run_backward(c, in);
  const std::int64_t per_seq = c.HV * c.K * c.V;
  for (std::int64_t i = per_seq; i < 2 * per_seq; ++i) {
    EXPECT_EQ(out.ht.get(i), in.h0.get(i));
    EXPECT_EQ(g.dh0.get(i), in.dht.get(i));
  }
  // The other sequences really did change their states.
  EXPECT_GT(std::abs(out.ht.get(0) - in.h0.get(0)), 1e-9);
}

TEST(DeltaReference, GdnEqualsKdaWithBroadcastGate) {
  for (bool gate : {false, true}) {
    SCOPED_TRACE(gate ? "in-kernel gate" : "plain");
    Case cg;
    cg.kda = false;
    cg.gate = gate;
    cg.l2norm = gate;
    Inputs ig = make_inputs(cg);
    Case ck = cg;
    ck.kda = true;
    ck.dt_2d = true;
    Inputs ik = make_inputs(ck);
    ik.q = ig.q; ik.k = ig.k; ik.v = ig.v; ik.beta = ig.beta; ik.h0 = ig.h0; ik.A_log = ig.A_log;
    ik.d_o = ig.d_o; ik.dht = ig.dht;
    for (std::int64_t r = 0; r < cg.B * cg.T * cg.HV; ++r)
      for (std::int64_t c = 0; c < ck.K; ++c) ik.g.set(r * ck.K + c, ig.g.get(r));
    for (std::int64_t h = 0; h < cg.HV; ++h)
      for (std::int64_t c = 0; c < ck.K; ++c) ik.dt_bias.set(h * ck.K + c, ig.dt_bias.get(h));
    const Outputs og = run_forward(cg, ig), ok = run_forward(ck, ik);
    for (std::int64_t i = 0; i < og.o.numel(); ++i) EXPECT_NEAR(og.o.get(i), ok.o.get(i), 1e-12);
    for (std::int64_t i = 0; i < og.ht.numel(); ++i) EXPECT_NEAR(og.ht.get(i), ok.ht.get(i), 1e-12);
    const Grads gg = run_backward(cg, ig), gk = run_backward(ck, ik);
    auto same = [](const HostTensor& a, const HostTensor& b, const char* name) {
      for (std::int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.get(i), b.get(i), 1e-12) << name << "[" << i << "]";
    };
    same(gg.dq, gk.dq, "dq");
    same(gg.dk, gk.dk, "dk");
    same(gg.dv, gk.dv, "dv");
    same(gg.dbeta, gk.dbeta, "dbeta");
    same(gg.dh0, gk.dh0, "dh0");
    for (std::int64_t r = 0; r < cg.B * cg.T * cg.HV; ++r) {
      double s = 0;
      for (std::int64_t c = 0; c < ck.K; ++c) s += gk.dg.get(r * ck.K + c);
      EXPECT_NEAR(gg.dg.get(r), s, 1e-12) << "dg[" << r << "]";
    }
    if (gate) {
      same(gg.dA, gk.dA, "dA_log");
      for (std::int64_t h = 0; h < cg.HV; ++h) {
        double s = 0;
        for (std::int64_t c = 0; c < ck.K; ++c) s += gk.ddt.get(h * ck.K + c);
        EXPECT_NEAR(gg.ddt.get(h), s, 1e-12) << "ddt_bias[" << h << "]";
      }
    }
  }
}

TEST(DeltaReference, GvaEqualsExplicitlyRepeatedHeads) {
  // HV = 4 value heads on H = 2 q/k heads equals H = HV = 4 with q/k repeated per group; the GVA dq/dk
  // are the group sums of the repeated ones.
  Case c;
  c.l2norm = true;
  Inputs in = make_inputs(c);
  Case cr = c;
  cr.H = c.HV;
  Inputs ir = make_inputs(cr);
  const std::int64_t G = c.HV / c.H;
  ir.v = in.v; ir.g = in.g; ir.beta = in.beta; ir.h0 = in.h0; ir.d_o = in.d_o; ir.dht = in.dht;
  for (std::int64_t row = 0; row < c.B * c.T; ++row)
    for (std::int64_t hv = 0; hv < c.HV; ++hv)
      for (std::int64_t x = 0; x < c.K; ++x) {
        ir.q.set((row * c.HV + hv) * c.K + x, in.q.get((row * c.H + hv / G) * c.K + x));
        ir.k.set((row * c.HV + hv) * c.K + x, in.k.get((row * c.H + hv / G) * c.K + x));
      }
  const Outputs o = run_forward(c, in), orr = run_forward(cr, ir);
  for (std::int64_t i = 0; i < o.o.numel(); ++i) EXPECT_NEAR(o.o.get(i), orr.o.get(i), 1e-12);
  const Grads g = run_backward(c, in), gr = run_backward(cr, ir);
  for (std::int64_t row = 0; row < c.B * c.T; ++row)
    for (std::int64_t h = 0; h < c.H; ++h)
      for (std::int64_t x = 0; x < c.K; ++x) {
        double sq = 0, sk = 0;
        for (std::int64_t gi = 0; gi < G; ++gi) {
          sq += gr.dq.get((row * c.HV + h * G + gi) * c.K + x);
          sk += gr.dk.get((row * c.HV + h * G + gi) * c.K + x);
        }
        EXPECT_NEAR(g.dq.get((row * c.H + h) * c.K + x), sq, 1e-12);
        EXPECT_NEAR(g.dk.get((row * c.H + h) * c.K + x), sk, 1e-12);
      }
}

TEST(DeltaReference, GateAtMinus1000ResetsTheState) {
  for (bool kda : {true, false}) {
    SCOPED_TRACE(kda ? "kda" : "gdn");
    Case c;
    c.kda = kda;
    c.T = 7;
    Inputs in = make_inputs(c);
    // Token 3 of every head forgets everything: later outputs equal a fresh start at token 3.
    const std::int64_t t0 = 3, W = kda ? c.K : 1;
    for (std::int64_t hv = 0; hv < c.HV; ++hv)
      for (std::int64_t x = 0; x < W; ++x) in.g.set((t0 * c.HV + hv) * W + x, -1000.0);
    const Outputs full = run_forward(c, in);
    Case cs = c;
    cs.T = c.T - t0;
    cs.with_h0 = false;
    Inputs tail = make_inputs(cs);
    auto copy_tail = [&](const HostTensor& src, HostTensor& dst, std::int64_t per_row) {
      for (std::int64_t i = 0; i < dst.numel(); ++i) dst.set(i, src.get(t0 * per_row + i));
    };
    copy_tail(in.q, tail.q, c.H * c.K);
    copy_tail(in.k, tail.k, c.H * c.K);
    copy_tail(in.v, tail.v, c.HV * c.V);
    copy_tail(in.g, tail.g, c.HV * W);
    copy_tail(in.beta, tail.beta, c.HV);
    const Outputs part = run_forward(cs, tail);
    for (std::int64_t i = 0; i < part.o.numel(); ++i) EXPECT_NEAR(full.o.get(t0 * c.HV * c.V + i), part.o.get(i), 1e-12);
    for (std::int64_t i = 0; i < part.ht.numel(); ++i) EXPECT_NEAR(full.ht.get(i), part.ht.get(i), 1e-12);
    const Grads g = run_backward(c, in);
    for (const HostTensor* t : {&g.dq, &g.dk, &g.dv, &g.dg, &g.dbeta, &g.dh0}) EXPECT_TRUE(all_finite(*t));
    // Nothing flows back past the reset: dh0 is that of the prefix alone, with no dht.
    Case cp = c;
    cp.T = t0;
    cp.with_dht = false;
    Inputs head = make_inputs(cp);
    auto copy_head = [&](const HostTensor& src, HostTensor& dst) {
      for (std::int64_t i = 0; i < dst.numel(); ++i) dst.set(i, src.get(i));
    };
    copy_head(in.q, head.q);
    copy_head(in.k, head.k);
    copy_head(in.v, head.v);
    copy_head(in.g, head.g);
    copy_head(in.beta, head.beta);
    copy_head(in.h0, head.h0);
    copy_head(in.d_o, head.d_o);
    const Grads gh = run_backward(cp, head);
    EXPECT_GT(max_abs(gh.dh0), 1e-3);
    for (std::int64_t i = 0; i < g.dh0.numel(); ++i) EXPECT_NEAR(g.dh0.get(i), gh.dh0.get(i), 1e-12) << "dh0[" << i << "]";
    for (std::int64_t i = 0; i < gh.dv.numel(); ++i) EXPECT_NEAR(g.dv.get(i), gh.dv.get(i), 1e-12) << "dv[" << i << "]";
  }
}

TEST(DeltaReference, RawGateAtMinus1000StaysFinite) {
  // The in-kernel gate maps a raw -1000 to g ~ 0 (softplus or sigmoid underflow): no NaN anywhere.
  for (bool lb : {false, true}) {
    Case c;
    c.gate = true;
    if (lb) c.lower_bound = -5.0;
    Inputs in = make_inputs(c);
    for (std::int64_t i = 0; i < in.g.numel(); i += 3) in.g.set(i, -1000.0);
    const Outputs o = run_forward(c, in);
    EXPECT_TRUE(all_finite(o.o));
    EXPECT_TRUE(all_finite(o.ht));
    const Grads g = run_backward(c, in);
    for (const HostTensor* t : {&g.dq, &g.dk, &g.dv, &g.dg, &g.dbeta, &g.dh0, &g.dA, &g.ddt}) EXPECT_TRUE(all_finite(*t));
  }
}

TEST(DeltaReference, AbsentStatesActAsZeros) {
  Case c;
  c.kda = false;
  Inputs in = make_inputs(c);
  Case cz = c;
  cz.with_h0 = false;
  cz.with_dht = false;
  const Outputs absent = run_forward(cz, in);
  const Grads gabs = run_backward(cz, in);
  in.h0.fill(0.0);
  in.dht.fill(0.0);
  const Outputs zero = run_forward(c, in);
  const Grads gz = run_backward(c, in);
  for (std::int64_t i = 0; i < zero.o.numel(); ++i) EXPECT_EQ(absent.o.get(i), zero.o.get(i));
  for (std::int64_t i = 0; i < zero.ht.numel(); ++i) EXPECT_EQ(absent.ht.get(i), zero.ht.get(i));
  for (std::int64_t i = 0; i < gz.dq.numel(); ++i) EXPECT_EQ(gabs.dq.get(i), gz.dq.get(i));
  for (std::int64_t i = 0; i < gz.dh0.numel(); ++i) EXPECT_EQ(gabs.dh0.get(i), gz.dh0.get(i));
}

TEST(DeltaReference, F32OutputsAreRoundedF64Outputs) {
  Case c;
  Inputs in = make_inputs(c);
  const Outputs o64 = run_forward(c, in), o32 = run_forward(c, in, DType::f32);
  for (std::int64_t i = 0; i < o64.o.numel(); ++i) EXPECT_EQ(o32.o.get(i), static_cast<double>(static_cast<float>(o64.o.get(i))));
  for (std::int64_t i = 0; i < o64.ht.numel(); ++i) EXPECT_EQ(o32.ht.get(i), static_cast<double>(static_cast<float>(o64.ht.get(i))));
}

TEST(DeltaReference, LongSequenceCrossesCheckpointBlocks) {
  // T = 150 spans three 64-token recompute blocks of the backward: the result must not depend on
  // them. Checked against finite differences of a few h0 / g / q entries (full FD would be slow).
  Case c;
  c.T = 150;
  c.H = 1;
  c.HV = 2;
  c.K = 4;
  c.V = 3;
  c.gate = true;
  c.l2norm = true;
  Inputs in = make_inputs(c);
  const Grads g = run_backward(c, in);
  const double h = std::ldexp(1.0, -12);
  auto fd = [&](HostTensor& x, std::int64_t i) {
    const double x0 = x.get(i);
    x.set(i, x0 + h);
    const double xp = x.get(i), lp = loss(c, in);
    x.set(i, x0 - h);
    const double xm = x.get(i), lm = loss(c, in);
    x.set(i, x0);
    return (lp - lm) / (xp - xm);
  };
  for (std::int64_t i : {0, 5, 23}) {
    const double d = fd(in.h0, i);
    EXPECT_NEAR(g.dh0.get(i), d, 2e-6 * (1 + std::abs(d))) << "dh0[" << i << "]";
  }
  for (std::int64_t t : {0, 63, 64, 130, 149}) {
    const std::int64_t i = (t * c.HV + 1) * c.K + 2;
    const double d = fd(in.g, i);
    EXPECT_NEAR(g.dg.get(i), d, 2e-6 * (1 + std::abs(d))) << "dg at t=" << t;
    const std::int64_t iq = t * c.H * c.K + 1;
    const double dq = fd(in.q, iq);
    EXPECT_NEAR(g.dq.get(iq), dq, 2e-6 * (1 + std::abs(dq))) << "dq at t=" << t;
  }
  for (std::int64_t i = 0; i < c.HV; ++i) {
    const double d = fd(in.A_log, i);
    EXPECT_NEAR(g.dA.get(i), d, 2e-6 * (1 + std::abs(d))) << "dA_log[" << i << "]";
  }
}

}  // namespace
}  // namespace lina
