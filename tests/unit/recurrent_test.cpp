// The fused_recurrent ops on the host: the fp64 reference against the chunk ops' fp64 references
// (an independent implementation of the same recurrence), the CPU backend against the reference,
// the state-pool semantics (slots, in-place updates, speculative steps, padding) and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lina/error.h"
#include "lina/fused_recurrent.h"
#include "tests/support/random.h"

namespace lina {
namespace {

using testing::Rng;
using i64 = std::int64_t;

enum class Op { gla, kda, gdn };

struct Case {
  Op op = Op::kda;
  i64 B = 2, T = 3, H = 2, HV = 4, K = 8, V = 6;
  bool l2norm = true, beta_sigmoid = false, gate = false, lower_bound = false;
  bool with_h0 = true;
  std::uint64_t seed = 7;
};

struct Inputs {
  HostTensor q, k, v, g, beta, h0, A_log, dt_bias;
};

Inputs make_inputs(const Case& c) {
  Rng r(c.seed);
  Inputs in;
  const i64 HV = c.op == Op::gla ? c.H : c.HV;
  in.q = testing::normal(r, DType::f32, Shape{c.B, c.T, c.H, c.K});
  in.k = testing::make(DType::f32, Shape{c.B, c.T, c.H, c.K}, [&] { return 0.4 * r.normal(); });
  in.v = testing::normal(r, DType::f32, Shape{c.B, c.T, HV, c.V});
  const Shape gs = c.op == Op::gdn ? Shape{c.B, c.T, HV} : Shape{c.B, c.T, HV, c.K};
  if (c.gate) in.g = testing::normal(r, DType::f32, gs);
  else in.g = testing::make(DType::f32, gs, [&] { return testing::logsigmoid(r.normal()); });
  if (c.beta_sigmoid) in.beta = testing::normal(r, DType::f32, Shape{c.B, c.T, HV});
  else in.beta = testing::make(DType::f32, Shape{c.B, c.T, HV}, [&] { return testing::sigmoid(r.normal()); });
  in.h0 = testing::make(DType::f32, Shape{c.B, HV, c.K, c.V}, [&] { return 0.3 * r.normal(); });
  in.A_log = testing::make(DType::f32, Shape{HV}, [&] { return 0.5 * r.normal(); });
  in.dt_bias = testing::normal(r, DType::f32, c.op == Op::gdn ? Shape{HV} : Shape{HV * c.K});
  return in;
}

template <class Args>
void fill_delta(const Case& c, Inputs& in, Args& a) {
  a.q = in.q.view(); a.k = in.k.view(); a.v = in.v.view(); a.g = in.g.view(); a.beta = in.beta.view();
  if (c.with_h0) a.initial_state = in.h0.view();
  a.use_qk_l2norm_in_kernel = c.l2norm;
  a.use_beta_sigmoid_in_kernel = c.beta_sigmoid;
  if (c.gate) {
    a.use_gate_in_kernel = true;
    a.A_log = in.A_log.view();
    a.dt_bias = in.dt_bias.view();
  }
}

// One call of the decode op (reference or CPU backend) with the dense state; returns o and the final state.
struct Result {
  HostTensor o, ht;
};

using DecodeFn = std::function<void(const Case&, Inputs&, const DecodeState&, const AttentionOutputs&)>;

void decode(const Case& c, Inputs& in, const DecodeState& d, const AttentionOutputs& out, bool reference) {
  const ExecOptions cpu{Backend::cpu};
  if (c.op == Op::gla) {
    FusedRecurrentGlaArgs a;
    a.q = in.q.view(); a.k = in.k.view(); a.v = in.v.view(); a.g = in.g.view();
    if (c.with_h0) a.initial_state = in.h0.view();
    a.decode = d;
    if (reference) reference::fused_recurrent_gla_forward(a, out);
    else fused_recurrent_gla_forward(a, out, cpu);
  } else if (c.op == Op::kda) {
    FusedRecurrentKdaArgs a;
    fill_delta(c, in, a);
    if (c.lower_bound) a.lower_bound = -5.0;
    a.decode = d;
    if (reference) reference::fused_recurrent_kda_forward(a, out);
    else fused_recurrent_kda_forward(a, out, cpu);
  } else {
    FusedRecurrentGdnArgs a;
    fill_delta(c, in, a);
    a.decode = d;
    if (reference) reference::fused_recurrent_gdn_forward(a, out);
    else fused_recurrent_gdn_forward(a, out, cpu);
  }
}

i64 hv_of(const Case& c) { return c.op == Op::gla ? c.H : c.HV; }

Result run_dense(const Case& c, Inputs& in, bool reference) {
  const i64 HV = hv_of(c);
  const DType od = reference ? DType::f64 : DType::f32;
  Result r{testing::poisoned(od, Shape{c.B, c.T, HV, c.V}), testing::poisoned(reference ? DType::f64 : DType::f32, Shape{c.B, HV, c.K, c.V})};
  decode(c, in, {}, AttentionOutputs{r.o.view(), r.ht.view()}, reference);
  return r;
}

Result run_chunk_reference(const Case& c, Inputs& in) {
  const i64 HV = hv_of(c);
  Result r{testing::poisoned(DType::f64, Shape{c.B, c.T, HV, c.V}), testing::poisoned(DType::f64, Shape{c.B, HV, c.K, c.V})};
  const AttentionOutputs out{r.o.view(), r.ht.view()};
  if (c.op == Op::gla) {
    ChunkGlaArgs a;
    a.q = in.q.view(); a.k = in.k.view(); a.v = in.v.view(); a.g = in.g.view();
    if (c.with_h0) a.initial_state = in.h0.view();
    reference::chunk_gla_forward(a, out);
  } else if (c.op == Op::kda) {
    ChunkKdaArgs a;
    fill_delta(c, in, a);
    if (c.lower_bound) a.lower_bound = -5.0;
    reference::chunk_kda_forward(a, out);
  } else {
    ChunkGdnArgs a;
    fill_delta(c, in, a);
    reference::chunk_gdn_forward(a, out);
  }
  return r;
}

double max_abs_diff(const HostTensor& a, const HostTensor& b) {
  EXPECT_EQ(a.numel(), b.numel());
  double m = 0;
  for (i64 i = 0; i < a.numel(); ++i) {
    const double d = std::abs(a.get(i) - b.get(i));
    if (!(d <= m)) m = d;  // NaN propagates as the maximum
  }
  return m;
}

std::string name(const Case& c) {
  const char* op = c.op == Op::gla ? "gla" : c.op == Op::kda ? "kda" : "gdn";
  return std::string(op) + (c.gate ? "_gate" : "") + (c.lower_bound ? "_lb" : "") + (c.beta_sigmoid ? "_sig" : "") +
         (c.l2norm ? "_l2" : "") + "_K" + std::to_string(c.K) + "_V" + std::to_string(c.V);
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (Op op : {Op::gla, Op::kda, Op::gdn}) {
    Case c;
    c.op = op;
    out.push_back(c);
    c.l2norm = false;
    c.K = 5; c.V = 7;  // odd sizes: the CPU backend takes any K, V
    out.push_back(c);
    if (op == Op::gla) continue;
    Case g;
    g.op = op;
    g.gate = true;
    g.beta_sigmoid = true;
    out.push_back(g);
    if (op == Op::kda) {
      g.lower_bound = true;
      out.push_back(g);
    }
  }
  return out;
}

TEST(FusedRecurrent, ReferenceMatchesTheChunkReference) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(name(c));
    Inputs in = make_inputs(c);
    const Result dec = run_dense(c, in, true);
    const Result chk = run_chunk_reference(c, in);
    EXPECT_LT(max_abs_diff(dec.o, chk.o), 1e-10);
    EXPECT_LT(max_abs_diff(dec.ht, chk.ht), 1e-10);
  }
}

TEST(FusedRecurrent, VarlenMatchesTheChunkReference) {
  for (Op op : {Op::gla, Op::kda, Op::gdn}) {
    Case c;
    c.op = op;
    c.B = 1;
    c.T = 5;
    SCOPED_TRACE(name(c));
    Inputs in = make_inputs(c);
    const i64 HV = hv_of(c);
    HostTensor cu(DType::i64, Shape{4});
    const double offs[] = {0, 2, 2, 5};  // a zero-length sequence in the middle
    for (i64 i = 0; i < 4; ++i) cu.set(i, offs[i]);
    in.h0 = testing::make(DType::f32, Shape{3, HV, c.K, c.V}, [] { return 0.1; });
    HostTensor o1 = testing::poisoned(DType::f64, Shape{1, c.T, HV, c.V}), h1 = testing::poisoned(DType::f64, Shape{3, HV, c.K, c.V});
    HostTensor o2 = o1, h2 = h1;
    const AttentionOutputs dec{o1.view(), h1.view()}, chk{o2.view(), h2.view()};
    if (op == Op::gla) {
      FusedRecurrentGlaArgs a;
      a.q = in.q.view(); a.k = in.k.view(); a.v = in.v.view(); a.g = in.g.view(); a.initial_state = in.h0.view();
      a.cu_seqlens = cu.view();
      reference::fused_recurrent_gla_forward(a, dec);
      reference::chunk_gla_forward(a, chk);
    } else if (op == Op::kda) {
      FusedRecurrentKdaArgs a;
      fill_delta(c, in, a);
      a.cu_seqlens = cu.view();
      reference::fused_recurrent_kda_forward(a, dec);
      reference::chunk_kda_forward(a, chk);
    } else {
      FusedRecurrentGdnArgs a;
      fill_delta(c, in, a);
      a.cu_seqlens = cu.view();
      reference::fused_recurrent_gdn_forward(a, dec);
      reference::chunk_gdn_forward(a, chk);
    }
    EXPECT_LT(max_abs_diff(o1, o2), 1e-10);
    EXPECT_LT(max_abs_diff(h1, h2), 1e-10);
  }
}

TEST(FusedRecurrent, CpuBackendMatchesTheReference) {
  for (Case c : cases()) {
    for (bool h0 : {true, false}) {
      c.with_h0 = h0;
      SCOPED_TRACE(name(c) + (h0 ? "_h0" : ""));
      Inputs in = make_inputs(c);
      const Result ref = run_dense(c, in, true);
      const Result cpu = run_dense(c, in, false);
      EXPECT_LT(max_abs_diff(ref.o, cpu.o), 1e-4);
      EXPECT_LT(max_abs_diff(ref.ht, cpu.ht), 1e-4);
    }
  }
}

TEST(FusedRecurrent, GlaReverseIsTheForwardOfTheFlippedSequence) {
  Case c;
  c.op = Op::gla;
  c.T = 5;
  Inputs in = make_inputs(c);
  Inputs flipped = in;
  const i64 row = c.H * c.K, vrow = c.H * c.V;
  for (i64 b = 0; b < c.B; ++b)
    for (i64 t = 0; t < c.T; ++t) {
      const i64 src = b * c.T + t, dst = b * c.T + (c.T - 1 - t);
      for (i64 i = 0; i < row; ++i) {
        flipped.q.set(dst * row + i, in.q.get(src * row + i));
        flipped.k.set(dst * row + i, in.k.get(src * row + i));
        flipped.g.set(dst * row + i, in.g.get(src * row + i));
      }
      for (i64 i = 0; i < vrow; ++i) flipped.v.set(dst * vrow + i, in.v.get(src * vrow + i));
    }
  HostTensor o(DType::f64, Shape{c.B, c.T, c.H, c.V}), ht(DType::f64, Shape{c.B, c.H, c.K, c.V});
  FusedRecurrentGlaArgs a;
  a.q = in.q.view(); a.k = in.k.view(); a.v = in.v.view(); a.g = in.g.view(); a.initial_state = in.h0.view();
  a.reverse = true;
  reference::fused_recurrent_gla_forward(a, AttentionOutputs{o.view(), ht.view()});
  const Result fwd = run_dense(c, flipped, true);
  for (i64 b = 0; b < c.B; ++b)
    for (i64 t = 0; t < c.T; ++t)
      for (i64 i = 0; i < vrow; ++i)
        EXPECT_NEAR(o.get((b * c.T + t) * vrow + i), fwd.o.get((b * c.T + (c.T - 1 - t)) * vrow + i), 1e-12);
  EXPECT_LT(max_abs_diff(ht, fwd.ht), 1e-12);
}

// The pool: S slots of which the sequences name a few; the state of sequence n is the dense h0[n].
struct Pool {
  HostTensor pool, idx;
};

Pool make_pool(const Case& c, const Inputs& in, const std::vector<i64>& slot_of_seq, i64 S) {
  const i64 HV = hv_of(c), kv = c.K * c.V;
  Pool p{testing::make(DType::f32, Shape{S, HV, c.K, c.V}, [] { return 0.25; }), HostTensor(DType::i32, Shape{c.B})};
  for (i64 n = 0; n < c.B; ++n) {
    p.idx.set(n, static_cast<double>(slot_of_seq[static_cast<std::size_t>(n)]));
    const i64 s = slot_of_seq[static_cast<std::size_t>(n)];
    if (s < 0) continue;
    for (i64 i = 0; i < HV * kv; ++i) p.pool.set(s * HV * kv + i, in.h0.get(n * HV * kv + i));
  }
  return p;
}

TEST(FusedRecurrent, PoolInPlaceUpdatesTheNamedSlotsOnly) {
  for (bool reference : {true, false}) {
    for (Op op : {Op::gla, Op::kda, Op::gdn}) {
      Case c;
      c.op = op;
      c.T = 1;
      c.B = 3;
      SCOPED_TRACE(name(c) + (reference ? "_ref" : "_cpu"));
      Inputs in = make_inputs(c);
      const Result dense = run_dense(c, in, reference);
      const i64 HV = hv_of(c), kv = c.K * c.V, S = 5;
      Pool p = make_pool(c, in, {3, 0, -1}, S);  // sequence 2 is padding
      const HostTensor before = p.pool;
      DecodeState d;
      d.state_indices = p.idx.view();
      d.inplace_final_state = true;
      Case cp = c;
      Inputs pin = in;
      pin.h0 = p.pool;
      HostTensor o = testing::poisoned(reference ? DType::f64 : DType::f32, Shape{c.B, c.T, HV, c.V});
      decode(cp, pin, d, AttentionOutputs{o.view(), std::nullopt}, reference);
      const double tol = reference ? 1e-12 : 1e-5;
      const double state_tol = 1e-6;  // the pool stores f32
      for (i64 i = 0; i < HV * kv; ++i) {
        EXPECT_NEAR(pin.h0.get(3 * HV * kv + i), dense.ht.get(0 * HV * kv + i), state_tol);
        EXPECT_NEAR(pin.h0.get(0 * HV * kv + i), dense.ht.get(1 * HV * kv + i), state_tol);
        for (i64 s : {1, 2, 4}) EXPECT_EQ(pin.h0.get(s * HV * kv + i), before.get(s * HV * kv + i));  // untouched
      }
      for (i64 i = 0; i < HV * c.V; ++i) {
        EXPECT_NEAR(o.get(i), dense.o.get(i), tol);
        EXPECT_NEAR(o.get(HV * c.V + i), dense.o.get(HV * c.V + i), tol);
        EXPECT_EQ(o.get(2 * HV * c.V + i), 0.0);  // the padding sequence's o is zero
      }
    }
  }
}

// Speculative decoding: [N, L] slots, the state read from slot [n][num_accepted - 1] and the state after
// token t written to slot [n][t]; without inplace_final_state the states go to final_state [B*T, ...].
TEST(FusedRecurrent, SpeculativeStepsWritePerTokenStates) {
  for (bool inplace : {true, false}) {
    Case c;
    c.op = Op::gdn;
    c.B = 2;
    c.T = 3;
    SCOPED_TRACE(inplace ? "inplace" : "per_token");
    Inputs in = make_inputs(c);
    const i64 HV = c.HV, kv = c.K * c.V, S = 8, L = 4;
    HostTensor pool = testing::make(DType::f32, Shape{S, HV, c.K, c.V}, [] { return 0.0; });
    // sequence 0 reads slot 6 (num_accepted 2 -> column 1), sequence 1 slot 1 (num_accepted 1 -> column 0)
    HostTensor idx(DType::i64, Shape{c.B, L});
    const std::vector<i64> slots{5, 6, 7, 4, 1, 2, 3, 0};
    for (i64 i = 0; i < c.B * L; ++i) idx.set(i, static_cast<double>(slots[static_cast<std::size_t>(i)]));
    HostTensor na(DType::i32, Shape{c.B});
    na.set(0, 2);
    na.set(1, 1);
    for (i64 i = 0; i < HV * kv; ++i) {
      pool.set(6 * HV * kv + i, in.h0.get(i));
      pool.set(1 * HV * kv + i, in.h0.get(HV * kv + i));
    }
    Inputs pin = in;
    pin.h0 = pool;
    DecodeState d;
    d.state_indices = idx.view();
    d.num_accepted_tokens = na.view();
    d.inplace_final_state = inplace;
    HostTensor o = testing::poisoned(DType::f64, Shape{c.B, c.T, HV, c.V});
    HostTensor per = testing::poisoned(DType::f64, Shape{c.B * c.T, HV, c.K, c.V});
    decode(c, pin, d, AttentionOutputs{o.view(), inplace ? std::nullopt : std::optional<TensorView>(per.view())}, true);
    // The dense run over the first t + 1 tokens gives the state after token t.
    for (i64 t = 0; t < c.T; ++t) {
      Case ct = c;
      ct.T = t + 1;
      Inputs it = make_inputs(ct);  // the same seed draws different values for another T: slice instead
      for (auto [dst, src] : {std::pair<HostTensor*, HostTensor*>{&it.q, &in.q}, {&it.k, &in.k}, {&it.v, &in.v},
                              {&it.g, &in.g}, {&it.beta, &in.beta}}) {
        const i64 row = src->numel() / (c.B * c.T);
        for (i64 b = 0; b < c.B; ++b)
          for (i64 s = 0; s <= t; ++s)
            for (i64 i = 0; i < row; ++i) dst->set((b * ct.T + s) * row + i, src->get((b * c.T + s) * row + i));
      }
      it.h0 = in.h0;
      const Result dense = run_dense(ct, it, true);
      for (i64 b = 0; b < c.B; ++b)
        for (i64 i = 0; i < HV * kv; ++i) {
          const double want = dense.ht.get(b * HV * kv + i);
          const double got = inplace ? pin.h0.get(slots[static_cast<std::size_t>(b * L + t)] * HV * kv + i)
                                     : per.get((b * c.T + t) * HV * kv + i);
          ASSERT_NEAR(got, want, inplace ? 1e-6 : 1e-12) << "sequence " << b << " token " << t;  // the pool is f32
        }
    }
    if (inplace) {  // the fourth column's slots are not written by three tokens
      for (i64 i = 0; i < HV * kv; ++i) {
        EXPECT_EQ(pin.h0.get(4 * HV * kv + i), 0.0);
        EXPECT_EQ(pin.h0.get(0 * HV * kv + i), 0.0);
      }
    }
  }
}

TEST(FusedRecurrent, DenseInPlaceWritesIntoTheInitialState) {
  Case c;
  c.op = Op::kda;
  Inputs in = make_inputs(c);
  const Result dense = run_dense(c, in, true);
  DecodeState d;
  d.inplace_final_state = true;
  HostTensor o = testing::poisoned(DType::f64, Shape{c.B, c.T, c.HV, c.V});
  decode(c, in, d, AttentionOutputs{o.view(), std::nullopt}, true);
  EXPECT_LT(max_abs_diff(in.h0, dense.ht), 1e-6);  // f32 storage of the fp64 state
  EXPECT_LT(max_abs_diff(o, dense.o), 1e-12);
}

// Refusals name the argument and write nothing.
void expect_refused(const std::string& argument, const std::function<void(DecodeState&, AttentionOutputs&, Inputs&)>& mutate) {
  Case c;
  c.op = Op::gdn;
  c.T = 1;
  Inputs in = make_inputs(c);
  HostTensor pool = testing::make(DType::f32, Shape{4, c.HV, c.K, c.V}, [] { return 1.0; });
  HostTensor idx(DType::i32, Shape{c.B});
  idx.set(0, 1);
  idx.set(1, 3);
  in.h0 = pool;
  DecodeState d;
  d.state_indices = idx.view();
  d.inplace_final_state = true;
  HostTensor o = testing::poisoned(DType::f32, Shape{c.B, c.T, c.HV, c.V});
  AttentionOutputs out{o.view(), std::nullopt};
  mutate(d, out, in);
  const HostTensor pool_before = in.h0;
  try {
    decode(c, in, d, out, false);
    ADD_FAILURE() << "not refused: " << argument;
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
  }
  for (i64 i = 0; i < o.numel(); ++i) EXPECT_TRUE(std::isnan(o.get(i)));
  EXPECT_EQ(max_abs_diff(in.h0, pool_before), 0.0);
}

TEST(FusedRecurrent, BadStateArgumentsAreRefusedByName) {
  HostTensor keep;
  expect_refused("state_indices", [&](DecodeState& d, AttentionOutputs&, Inputs&) {
    keep = HostTensor(DType::i32, Shape{2});
    keep.set(0, 1);
    keep.set(1, 4);  // S = 4
    d.state_indices = keep.view();
  });
  expect_refused("state_indices", [&](DecodeState& d, AttentionOutputs&, Inputs&) {
    keep = HostTensor(DType::f32, Shape{2});
    d.state_indices = keep.view();
  });
  expect_refused("state_indices", [&](DecodeState& d, AttentionOutputs&, Inputs&) {
    keep = HostTensor(DType::i32, Shape{3});
    d.state_indices = keep.view();
  });
  expect_refused("initial_state", [&](DecodeState&, AttentionOutputs&, Inputs& in) {
    in.h0 = testing::make(DType::f32, Shape{4, 3, 8, 6}, [] { return 0.0; });  // HV 3, not 4
  });
  expect_refused("initial_state", [&](DecodeState&, AttentionOutputs&, Inputs& in) {
    in.h0 = testing::make(DType::bf16, Shape{4, 4, 8, 6}, [] { return 0.0; });
  });
  expect_refused("num_accepted_tokens", [&](DecodeState& d, AttentionOutputs&, Inputs&) {
    keep = HostTensor(DType::i32, Shape{2});
    keep.set(0, 1);
    keep.set(1, 1);
    d.num_accepted_tokens = keep.view();  // with [N] indices
  });
  expect_refused("final_state", [&](DecodeState&, AttentionOutputs& out, Inputs&) {
    keep = HostTensor(DType::f32, Shape{2, 4, 8, 6});
    out.final_state = keep.view();  // with inplace_final_state
  });
}

TEST(FusedRecurrent, SpeculativeIndicesMustCoverTheLongestSequence) {
  Case c;
  c.op = Op::kda;
  c.T = 3;
  Inputs in = make_inputs(c);
  HostTensor pool = testing::make(DType::f32, Shape{8, c.HV, c.K, c.V}, [] { return 0.0; });
  HostTensor idx(DType::i32, Shape{c.B, 2});  // L = 2 < T = 3
  for (i64 i = 0; i < idx.numel(); ++i) idx.set(i, static_cast<double>(i));
  in.h0 = pool;
  DecodeState d;
  d.state_indices = idx.view();
  d.inplace_final_state = true;
  HostTensor o = testing::poisoned(DType::f32, Shape{c.B, c.T, c.HV, c.V});
  try {
    decode(c, in, d, AttentionOutputs{o.view(), std::nullopt}, false);
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "state_indices") << e.what();
  }
  HostTensor na(DType::i32, Shape{c.B});
  na.set(0, 1);
  na.set(1, 5);  // > L
  HostTensor idx4(DType::i32, Shape{c.B, 4});
  for (i64 i = 0; i < idx4.numel(); ++i) idx4.set(i, static_cast<double>(i));
  d.state_indices = idx4.view();
  d.num_accepted_tokens = na.view();
  try {
    decode(c, in, d, AttentionOutputs{o.view(), std::nullopt}, false);
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "num_accepted_tokens") << e.what();
  }
}

}  // namespace
}  // namespace lina
