// The fp64 chunk_gla reference: forward against an independent closed form, backward against
// central finite differences of the forward, edge cases (zero-length sequences, g = -1000).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "lina/error.h"
#include "ops/common/backends.h"
#include "tests/unit/gla_test_common.h"

namespace lina {
namespace {

using gla_test::Case;
using gla_test::Data;

// f64 copies of a test's inputs, and the validated Problem of the original (the public front door
// takes bf16/f16/f32 activations only; the reference itself reads any dtype).
struct F64Problem {
  detail::Problem p;
  HostTensor q, k, v, g, h0, d_o, dht;
  const Data& d;

  explicit F64Problem(const Data& data) : d(data) {
    p = detail::validate_gla(d.args());
    q = d.q.cast(DType::f64); k = d.k.cast(DType::f64); v = d.v.cast(DType::f64); g = d.g.cast(DType::f64);
    d_o = d.d_o.cast(DType::f64);
    if (d.c.h0) h0 = d.h0.cast(DType::f64);
    if (d.c.dht) dht = d.dht.cast(DType::f64);
  }
  ChunkGlaArgs args() const {
    ChunkGlaArgs a = d.args();
    a.q = q.view(); a.k = k.view(); a.v = v.view(); a.g = g.view();
    if (d.c.h0) a.initial_state = h0.view();
    return a;
  }
  // loss = sum(o * do) + sum(ht * dht)
  double loss() const {
    HostTensor o(DType::f64, v.shape()), ht(DType::f64, Shape{p.N, p.H, p.K, p.V});
    detail::reference::chunk_gla_forward(p, args(), AttentionOutputs{o.view(), ht.view()});
    double s = 0;
    for (std::int64_t i = 0; i < o.numel(); ++i) s += o.get(i) * d_o.get(i);
    if (d.c.dht)
      for (std::int64_t i = 0; i < ht.numel(); ++i) s += ht.get(i) * dht.get(i);
    return s;
  }
};

void check_gradients_by_finite_differences(const Case& c, std::uint64_t seed) {
  const Data d(c, seed);
  F64Problem f(d);
  HostTensor dq(DType::f64, f.q.shape()), dk(DType::f64, f.k.shape()), dv(DType::f64, f.v.shape()),
      dg(DType::f64, f.g.shape()), dh0(DType::f64, Shape{f.p.N, f.p.H, f.p.K, f.p.V});
  ChunkGlaGrads grads{dq.view(), dk.view(), dv.view(), dg.view(), std::nullopt};
  if (c.h0) grads.d_initial_state = dh0.view();
  AttentionGradInputs gi{f.d_o.view(), std::nullopt};
  if (c.dht) gi.d_final_state = f.dht.view();
  detail::reference::chunk_gla_backward(f.p, f.args(), gi, grads);

  const double eps = 1e-5;
  auto fd = [&](HostTensor& x) {
    std::vector<double> out(static_cast<std::size_t>(x.numel()));
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const double x0 = x.get(i);
      x.set(i, x0 + eps);
      const double up = f.loss();
      x.set(i, x0 - eps);
      const double down = f.loss();
      x.set(i, x0);
      out[static_cast<std::size_t>(i)] = (up - down) / (2 * eps);
    }
    return out;
  };
  struct Item { const char* name; HostTensor* input; const HostTensor* grad; };
  std::vector<Item> items{{"dq", &f.q, &dq}, {"dk", &f.k, &dk}, {"dv", &f.v, &dv}, {"dg", &f.g, &dg}};
  if (c.h0) items.push_back({"dh0", &f.h0, &dh0});
  for (const Item& it : items) {
    const auto cl = harness::assert_close(fd(*it.input), it.grad->to_f64(), 1e-6);
    EXPECT_TRUE(cl.pass) << it.name << ": " << cl.str();
    EXPECT_GT(cl.max_abs, 0.0) << it.name << " matches exactly: the finite differences cannot have run";
  }
}

TEST(GlaReference, BackwardMatchesFiniteDifferencesDense) {
  Case c;
  c.B = 1; c.T = 7; c.H = 2; c.K = 5; c.V = 4; c.dtype = DType::f32;
  check_gradients_by_finite_differences(c, 1);
}

TEST(GlaReference, BackwardMatchesFiniteDifferencesBatchStrongDecay) {
  Case c;
  c.B = 2; c.T = 5; c.H = 1; c.K = 3; c.V = 6; c.dtype = DType::f32; c.normalizer = 0.1;
  check_gradients_by_finite_differences(c, 2);
}

TEST(GlaReference, BackwardMatchesFiniteDifferencesVarlenWithEmptySequence) {
  Case c;
  c.T = 9; c.H = 2; c.K = 4; c.V = 3; c.dtype = DType::f32; c.cu = {0, 0, 4, 9};
  check_gradients_by_finite_differences(c, 3);
}

TEST(GlaReference, BackwardMatchesFiniteDifferencesWithoutStates) {
  Case c;
  c.T = 6; c.H = 1; c.K = 4; c.V = 4; c.dtype = DType::f32; c.h0 = false; c.dht = false;
  check_gradients_by_finite_differences(c, 4);
}

// Longer than one backward checkpoint segment (64 tokens), so the segment recompute is exercised.
TEST(GlaReference, BackwardMatchesFiniteDifferencesAcrossCheckpoints) {
  Case c;
  c.T = 150; c.H = 1; c.K = 2; c.V = 2; c.dtype = DType::f32; c.normalizer = 10;
  check_gradients_by_finite_differences(c, 5);
}

// o_t = scale * [ sum_{s<=t} (q_t * exp(G_t - G_s)) . k_s v_s + (q_t * exp(G_t))^T h0 ],
// with G_t = sum_{u<=t} g_u: the unrolled recurrence, computed independently here.
TEST(GlaReference, ForwardMatchesUnrolledClosedForm) {
  Case c;
  c.T = 20; c.H = 2; c.K = 3; c.V = 5; c.dtype = DType::f32; c.cu = {0, 0, 8, 20};
  const Data d(c, 6);
  gla_test::Results r(d, false);
  reference::chunk_gla_forward(d.args(), r.outputs());
  const double scale = 1.0 / std::sqrt(3.0);
  std::vector<double> ref_o(static_cast<std::size_t>(r.o.numel())), ref_ht(static_cast<std::size_t>(r.ht.numel()));
  auto at = [&](const HostTensor& t, std::int64_t row, std::int64_t h, std::int64_t c2, std::int64_t D) {
    return t.get((row * c.H + h) * D + c2);
  };
  for (std::size_t n = 0; n + 1 < c.cu.size(); ++n) {
    const std::int64_t b = c.cu[n], e = c.cu[n + 1];
    for (std::int64_t h = 0; h < c.H; ++h) {
      // G[t][ch] relative to the sequence start.
      std::vector<std::vector<double>> G(static_cast<std::size_t>(e - b), std::vector<double>(3));
      for (std::int64_t t = b; t < e; ++t)
        for (std::int64_t ch = 0; ch < 3; ++ch)
          G[t - b][ch] = (t > b ? G[t - b - 1][ch] : 0.0) + at(d.g, t, h, ch, 3);
      for (std::int64_t t = b; t < e; ++t)
        for (std::int64_t j = 0; j < 5; ++j) {
          double acc = 0;
          for (std::int64_t ch = 0; ch < 3; ++ch) {
            acc += at(d.q, t, h, ch, 3) * std::exp(G[t - b][ch]) * d.h0.get(((static_cast<std::int64_t>(n) * c.H + h) * 3 + ch) * 5 + j);
            for (std::int64_t s = b; s <= t; ++s)
              acc += at(d.q, t, h, ch, 3) * std::exp(G[t - b][ch] - G[s - b][ch]) * at(d.k, s, h, ch, 3) * at(d.v, s, h, j, 5);
          }
          ref_o[static_cast<std::size_t>((t * c.H + h) * 5 + j)] = scale * acc;
        }
      for (std::int64_t ch = 0; ch < 3; ++ch)
        for (std::int64_t j = 0; j < 5; ++j) {
          const std::int64_t idx = ((static_cast<std::int64_t>(n) * c.H + h) * 3 + ch) * 5 + j;
          const double GL = e > b ? G[e - b - 1][ch] : 0.0;
          double acc = std::exp(GL) * d.h0.get(idx);
          for (std::int64_t s = b; s < e; ++s) acc += std::exp(GL - G[s - b][ch]) * at(d.k, s, h, ch, 3) * at(d.v, s, h, j, 5);
          ref_ht[static_cast<std::size_t>(idx)] = acc;
        }
    }
  }
  const auto co = harness::assert_close(ref_o, r.o.to_f64(), 1e-12);
  const auto ch = harness::assert_close(ref_ht, r.ht.to_f64(), 1e-12);
  EXPECT_TRUE(co.pass) << "o: " << co.str();
  EXPECT_TRUE(ch.pass) << "ht: " << ch.str();
  // The empty first sequence hands its initial state through untouched.
  for (std::int64_t i = 0; i < c.H * 15; ++i) EXPECT_EQ(r.ht.get(i), d.h0.get(i));
}

TEST(GlaReference, EmptySequenceGivesInitialStateAndDht) {
  Case c;
  c.T = 16; c.H = 2; c.K = 4; c.V = 4; c.dtype = DType::f32; c.cu = {0, 0, 16};
  const Data d(c, 7);
  const gla_test::Results r = gla_test::run_reference(d);
  for (std::int64_t i = 0; i < c.H * c.K * c.V; ++i) {
    EXPECT_EQ(r.ht.get(i), d.h0.get(i));
    EXPECT_EQ(r.dh0.get(i), d.dht.get(i));
  }
  // The second sequence really ran: its final state moved away from h0.
  double moved = 0;
  for (std::int64_t i = c.H * c.K * c.V; i < r.ht.numel(); ++i) moved += std::abs(r.ht.get(i) - d.h0.get(i));
  EXPECT_GT(moved, 1e-3);
}

TEST(GlaReference, ResetGateOfMinus1000StaysFinite) {
  Case c;
  c.T = 40; c.H = 1; c.K = 8; c.V = 8; c.dtype = DType::f32;
  Data d(c, 8);
  for (std::int64_t i = 0; i < d.g.numel(); i += 3) d.g.set(i, -1000.0);
  const gla_test::Results r = gla_test::run_reference(d);
  for (const HostTensor* t : {&r.o, &r.ht, &r.dq, &r.dk, &r.dv, &r.dg, &r.dh0})
    for (std::int64_t i = 0; i < t->numel(); ++i) ASSERT_TRUE(std::isfinite(t->get(i))) << i;
}

TEST(GlaReference, RefusesBadOutputDtype) {
  Case c;
  c.T = 4; c.H = 1; c.K = 4; c.V = 4; c.dtype = DType::f32;
  const Data d(c, 9);
  HostTensor o_bad = testing::poisoned(DType::bf16, d.v.shape());
  try {
    reference::chunk_gla_forward(d.args(), AttentionOutputs{o_bad.view(), std::nullopt});
    FAIL() << "a bf16 output was accepted by the fp64 reference";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "o");
  }
  for (std::int64_t i = 0; i < o_bad.numel(); ++i) EXPECT_TRUE(std::isnan(o_bad.get(i)));
}

}  // namespace
}  // namespace lina
