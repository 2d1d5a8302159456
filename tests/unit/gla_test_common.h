// Shared pieces of the chunk_gla unit tests: FLA's test_gla inputs, owning buffers, run helpers.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/verify/accuracy.h"
#include "lina/chunk_gla.h"
#include "tests/support/random.h"

namespace lina::gla_test {

struct Case {
  std::int64_t B = 1, T = 1, H = 1, K = 64, V = 64;
  std::vector<std::int64_t> cu;  // empty: dense
  DType dtype = DType::f16;      // q, k, v, g, do
  double normalizer = 1.0;
  bool h0 = true;
  bool dht = true;
  bool dht_uniform = false;      // FLA's varlen tests draw dht from rand, test_chunk from randn
  std::int64_t N() const { return cu.empty() ? B : static_cast<std::int64_t>(cu.size()) - 1; }
};

// Inputs as FLA's test_gla.py makes them: q, k, v = U[0,1) and g = logsigmoid(U[0,1)) / normalizer
// in the dtype; h0 = U[0,1) f32; do = randn in the dtype; dht = randn (or rand) f32.
struct Data {
  Case c;
  HostTensor q, k, v, g, h0, cu, d_o, dht;

  Data(const Case& cs, std::uint64_t seed) : c(cs) {
    testing::Rng rng(seed);
    const Shape qs{c.B, c.T, c.H, c.K}, vs{c.B, c.T, c.H, c.V}, ss{c.N(), c.H, c.K, c.V};
    q = testing::uniform(rng, c.dtype, qs);
    k = testing::uniform(rng, c.dtype, qs);
    v = testing::uniform(rng, c.dtype, vs);
    g = testing::make(c.dtype, qs, [&] { return testing::logsigmoid(rng.uniform()) / c.normalizer; });
    if (c.h0) h0 = testing::uniform(rng, DType::f32, ss);
    d_o = testing::normal(rng, c.dtype, vs);
    if (c.dht) dht = c.dht_uniform ? testing::uniform(rng, DType::f32, ss) : testing::normal(rng, DType::f32, ss);
    if (!c.cu.empty()) {
      cu = HostTensor(DType::i64, Shape{static_cast<std::int64_t>(c.cu.size())});
      for (std::size_t i = 0; i < c.cu.size(); ++i) cu.set(static_cast<std::int64_t>(i), static_cast<double>(c.cu[i]));
    }
  }

  ChunkGlaArgs args() const {
    ChunkGlaArgs a;
    a.q = q.view(); a.k = k.view(); a.v = v.view(); a.g = g.view();
    if (c.h0) a.initial_state = h0.view();
    if (!c.cu.empty()) a.cu_seqlens = cu.view();
    return a;
  }
  AttentionGradInputs grad_inputs() const {
    AttentionGradInputs gi;
    gi.d_o = d_o.view();
    if (c.dht) gi.d_final_state = dht.view();
    return gi;
  }
};

// Forward outputs and gradients, NaN-poisoned so that a partial write fails the comparison.
struct Results {
  HostTensor o, ht, dq, dk, dv, dg, dh0;

  // `exact`: the dtypes a kernel writes (o in v's, grads in their input's, states f32); else all f64.
  Results(const Data& d, bool exact) {
    const Case& c = d.c;
    const DType act = exact ? c.dtype : DType::f64, st = exact ? DType::f32 : DType::f64;
    o = testing::poisoned(act, d.v.shape());
    ht = testing::poisoned(st, Shape{c.N(), c.H, c.K, c.V});
    dq = testing::poisoned(act, d.q.shape());
    dk = testing::poisoned(act, d.k.shape());
    dv = testing::poisoned(act, d.v.shape());
    dg = testing::poisoned(act, d.g.shape());
    dh0 = testing::poisoned(st, Shape{c.N(), c.H, c.K, c.V});
  }
  AttentionOutputs outputs() { return AttentionOutputs{o.view(), ht.view()}; }
  ChunkGlaGrads grads(bool with_dh0) {
    ChunkGlaGrads g{dq.view(), dk.view(), dv.view(), dg.view(), std::nullopt};
    if (with_dh0) g.d_initial_state = dh0.view();
    return g;
  }
};

inline Results run_reference(const Data& d) {
  Results r(d, /*exact=*/false);
  reference::chunk_gla_forward(d.args(), r.outputs());
  reference::chunk_gla_backward(d.args(), d.grad_inputs(), r.grads(d.c.h0));
  return r;
}

inline Results run_cpu(const Data& d, int threads = 0, RunInfo* fwd_info = nullptr, RunInfo* bwd_info = nullptr) {
  Results r(d, /*exact=*/true);
  ExecOptions opts;
  opts.backend = Backend::cpu;
  opts.num_threads = threads;
  const RunInfo fi = chunk_gla_forward(d.args(), r.outputs(), ForwardMode::training, opts);
  const RunInfo bi = chunk_gla_backward(d.args(), d.grad_inputs(), r.grads(d.c.h0), opts);
  if (fwd_info) *fwd_info = fi;
  if (bwd_info) *bwd_info = bi;
  return r;
}

inline std::string dtype_token(DType t) {
  switch (t) {
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f32: return "f32";
    default: return "other";
  }
}

}  // namespace lina::gla_test
