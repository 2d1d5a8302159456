#include "gate_case.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <stdexcept>

#include "gate_device.h"
#include "harness/verify/accuracy.h"
#include "harness/verify/tolerances.h"
#include "tests/support/random.h"

namespace lina::gate {
namespace {

using testing::Rng;

HostTensor fill(DType dt, Shape s, const std::function<double()>& f) {
  HostTensor t(dt, s);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, f());
  return t;
}

// F.normalize over the last dim (x / max(||x||, 1e-12)), computed in double before the cast.
HostTensor normalized(Rng& r, DType dt, Shape s, bool gaussian) {
  const std::int64_t d = s[s.rank - 1];
  std::vector<double> x(static_cast<std::size_t>(s.numel()));
  for (auto& e : x) e = gaussian ? r.normal() : r.uniform();
  HostTensor t(dt, s);
  for (std::int64_t row = 0; row < s.numel() / d; ++row) {
    double n = 0;
    for (std::int64_t j = 0; j < d; ++j) n += x[static_cast<std::size_t>(row * d + j)] * x[static_cast<std::size_t>(row * d + j)];
    n = std::max(std::sqrt(n), 1e-12);
    for (std::int64_t j = 0; j < d; ++j) t.set(row * d + j, x[static_cast<std::size_t>(row * d + j)] / n);
  }
  return t;
}

// The decode ops draw their chunk op's inputs (FLA's fused_recurrent tests use the same distributions).
bool is_op(const GateCase& c, const char* op) {
  const std::string prefix = "fused_recurrent_";
  return c.op == op || (c.op.rfind(prefix, 0) == 0 && "chunk_" + c.op.substr(prefix.size()) == op);
}

}  // namespace

Inputs make_inputs(const GateCase& c, std::uint64_t seed) {
  Rng r(seed);
  Inputs in;
  const std::int64_t T = c.varlen() ? c.cu.back() : c.T, B = c.varlen() ? 1 : c.B;
  const std::int64_t N = c.varlen() ? static_cast<std::int64_t>(c.cu.size()) - 1 : B, HV = c.hv(), D = c.D;
  const Shape qs{B, T, c.H, D}, vs{B, T, HV, D}, st{N, HV, D, D};
  auto U = [&] { return r.uniform(); };
  auto Nrm = [&] { return r.normal(); };
  const bool delta = !is_op(c, "chunk_gla");
  const bool vl = c.varlen();
  if (!delta) {
    // test_gla.py: q, k, v = rand; g = logsigmoid(rand) / normalizer; h0 = rand; dht = randn (rand varlen).
    in.q = fill(c.dtype, qs, U);
    in.k = fill(c.dtype, qs, U);
    in.v = fill(c.dtype, vs, U);
    in.g = fill(c.dtype, qs, [&] { return testing::logsigmoid(r.uniform()) / c.norm; });
    in.h0 = fill(DType::f32, st, U);
  } else {
    // test_gdn.py / test_kda.py. Dense: q, k, v = rand (q/k normalised outside unless l2 in kernel).
    // Varlen: q = randn, k = normalize(randn), v = randn.
    const bool gaussian = vl;
    in.q = c.l2 ? fill(c.dtype, qs, gaussian ? std::function<double()>(Nrm) : U) : normalized(r, c.dtype, qs, gaussian);
    in.k = c.l2 ? fill(c.dtype, qs, gaussian ? std::function<double()>(Nrm) : U) : normalized(r, c.dtype, qs, gaussian);
    in.v = fill(c.dtype, vs, gaussian ? std::function<double()>(Nrm) : U);
    const bool kda = is_op(c, "chunk_kda");
    const Shape gs = kda ? Shape{B, T, HV, D} : Shape{B, T, HV};
    if (c.gate_in) {
      in.g = fill(kda ? c.dtype : DType::f32, gs, Nrm);
      in.A_log = fill(DType::f32, Shape{HV}, [&] { return vl ? std::log(1.0 + 15.0 * r.uniform()) : r.normal(); });
      if (c.bias) in.dt_bias = fill(DType::f32, kda ? Shape{HV * D} : Shape{HV}, Nrm);
    } else {
      in.g = fill(DType::f32, gs, [&] {
        const double x = kda ? r.normal() : r.uniform();
        double g = testing::logsigmoid(x) / c.norm;
        if (r.uniform() <= c.mask_p) g = 0;  // FLA: g * (rand > mask_p)
        if (c.safe) g = std::clamp(g, -5.0, 0.0);
        return g;
      });
    }
    if (c.neg1000_p > 0)
      for (std::int64_t i = 0; i < in.g.numel(); ++i)
        if (r.uniform() < c.neg1000_p) in.g.set(i, -1000.0);
    in.beta = fill(DType::f32, Shape{B, T, HV}, [&] {
      const double x = kda ? r.normal() : r.uniform();
      return c.beta_sigmoid ? x : testing::sigmoid(x);
    });
    // GDN dense starts from zeros (test_gdn.py); every other delta test from randn.
    in.h0 = (!kda && !vl) ? HostTensor::filled(DType::f32, st, 0.0) : fill(DType::f32, st, Nrm);
  }
  if (vl) {
    in.cu = HostTensor(DType::i32, Shape{static_cast<std::int64_t>(c.cu.size())});
    for (std::size_t i = 0; i < c.cu.size(); ++i) in.cu.set(static_cast<std::int64_t>(i), static_cast<double>(c.cu[i]));
  }
  in.d_o = fill(c.dtype, vs, Nrm);
  in.dht = fill(DType::f32, st, vl ? std::function<double()>(U) : Nrm);
  return in;
}

namespace {

ChunkKdaArgs kda_args(const Views& v, const GateCase& c) {
  ChunkKdaArgs a;
  fill_delta(a, v, c);
  if (c.safe) {
    a.safe_gate = true;
    a.lower_bound = -5.0;
  }
  return a;
}

// Result tensors for one run: allocation dtypes follow `reference` (f64) or the op's exact dtypes.
Results allocate(const GateCase& c, const Inputs& in, bool backward, bool reference) {
  auto dt = [&](DType exact) { return reference ? DType::f64 : exact; };
  Results r;
  r["o"] = testing::poisoned(dt(in.v.dtype()), in.v.shape());
  r["ht"] = testing::poisoned(dt(DType::f32), in.h0.shape());
  if (!backward) return r;
  r["dq"] = testing::poisoned(dt(in.q.dtype()), in.q.shape());
  r["dk"] = testing::poisoned(dt(in.k.dtype()), in.k.shape());
  r["dv"] = testing::poisoned(dt(in.v.dtype()), in.v.shape());
  r["dg"] = testing::poisoned(dt(in.g.dtype()), in.g.shape());
  r["dh0"] = testing::poisoned(dt(DType::f32), in.h0.shape());
  if (c.op != "chunk_gla") r["dbeta"] = testing::poisoned(dt(in.beta.dtype()), in.beta.shape());
  if (in.A_log) r["dA_log"] = testing::poisoned(dt(DType::f32), in.A_log->shape());
  if (in.dt_bias) r["ddt_bias"] = testing::poisoned(dt(DType::f32), in.dt_bias->shape());
  return r;
}

struct OutViews {
  AttentionOutputs out;
  ChunkGlaGrads gla;
  DeltaRuleGrads delta;
};

OutViews out_views(std::map<std::string, TensorView>& t) {
  OutViews o;
  o.out.o = t["o"];
  o.out.final_state = t["ht"];
  if (t.count("dq")) {
    o.gla = {t["dq"], t["dk"], t["dv"], t["dg"], t["dh0"]};
    o.delta.dq = t["dq"];
    o.delta.dk = t["dk"];
    o.delta.dv = t["dv"];
    o.delta.dg = t["dg"];
    if (t.count("dbeta")) o.delta.dbeta = t["dbeta"];
    o.delta.d_initial_state = t["dh0"];
    if (t.count("dA_log")) o.delta.d_A_log = t["dA_log"];
    if (t.count("ddt_bias")) o.delta.d_dt_bias = t["ddt_bias"];
  }
  return o;
}

// Runs forward (training) and optionally backward, on views already placed on the right device.
void invoke(const GateCase& c, const Views& v, std::map<std::string, TensorView>& t, bool backward, bool reference,
            const ExecOptions& opts) {
  OutViews o = out_views(t);
  const AttentionGradInputs gi{v.d_o, v.dht};
  if (c.op == "chunk_gla") {
    ChunkGlaArgs a;
    fill_common(a, v, c);
    if (reference) {
      reference::chunk_gla_forward(a, o.out);
      if (backward) reference::chunk_gla_backward(a, gi, o.gla);
    } else {
      chunk_gla_forward(a, o.out, ForwardMode::training, opts);
      if (backward) chunk_gla_backward(a, gi, o.gla, opts);
    }
  } else if (c.op == "chunk_kda") {
    const ChunkKdaArgs a = kda_args(v, c);
    if (reference) {
      reference::chunk_kda_forward(a, o.out);
      if (backward) reference::chunk_kda_backward(a, gi, o.delta);
    } else {
      chunk_kda_forward(a, o.out, ForwardMode::training, opts);
      if (backward) chunk_kda_backward(a, gi, o.delta, opts);
    }
  } else if (c.op == "chunk_gdn") {
    ChunkGdnArgs a;
    fill_delta(a, v, c);
    if (reference) {
      reference::chunk_gdn_forward(a, o.out);
      if (backward) reference::chunk_gdn_backward(a, gi, o.delta);
    } else {
      chunk_gdn_forward(a, o.out, ForwardMode::training, opts);
      if (backward) chunk_gdn_backward(a, gi, o.delta, opts);
    }
  } else {
    throw std::invalid_argument("gate case with unknown op " + c.op);
  }
}

Views host_views(const GateCase& c, const Inputs& in) {
  Views v{in.q.view(), in.k.view(), in.v.view(), in.g.view(), TensorView{}, in.h0.view(), TensorView{}, in.d_o.view(), in.dht.view(), {}, {}};
  if (c.op != "chunk_gla") v.beta = in.beta.view();
  if (c.varlen()) v.cu = in.cu.view();
  if (in.A_log) v.A_log = in.A_log->view();
  if (in.dt_bias) v.dt_bias = in.dt_bias->view();
  return v;
}

}  // namespace

Results run_reference(const GateCase& c, const Inputs& in, bool backward) {
  Results r = allocate(c, in, backward, /*reference=*/true);
  std::map<std::string, TensorView> t;
  for (auto& [k, h] : r) t[k] = h.view();
  invoke(c, host_views(c, in), t, backward, /*reference=*/true, {});
  return r;
}

Results run_backend(const GateCase& c, const Inputs& in, bool backward, Backend backend) {
  Results r = allocate(c, in, backward, /*reference=*/false);
  ExecOptions opts;
  opts.backend = backend;
  std::map<std::string, TensorView> t;
  if (backend != Backend::cuda) {
    for (auto& [k, h] : r) t[k] = h.view();
    invoke(c, host_views(c, in), t, backward, false, opts);
    return r;
  }
  // CUDA: inputs and NaN-filled outputs go to the device; results come back for the comparison.
  std::vector<std::unique_ptr<DeviceTensor>> keep;
  auto dev = [&](const HostTensor& h) {
    keep.push_back(std::make_unique<DeviceTensor>(h));
    return keep.back()->view();
  };
  Views v{dev(in.q), dev(in.k), dev(in.v), dev(in.g), TensorView{}, dev(in.h0), TensorView{}, dev(in.d_o), dev(in.dht), {}, {}};
  if (c.op != "chunk_gla") v.beta = dev(in.beta);
  if (c.varlen()) v.cu = dev(in.cu);
  if (in.A_log) v.A_log = dev(*in.A_log);
  if (in.dt_bias) v.dt_bias = dev(*in.dt_bias);
  std::map<std::string, DeviceTensor*> outs;
  for (auto& [k, h] : r) {
    t[k] = dev(h);
    outs[k] = keep.back().get();
  }
  invoke(c, v, t, backward, false, opts);
  device_synchronize();
  for (auto& [k, h] : r) outs[k]->copy_to(h);
  return r;
}

void expect_close_all(const GateCase& c, const Results& ref, const Results& out) {
  const auto set = c.varlen() ? harness::ToleranceSet::varlen : harness::ToleranceSet::dense;
  for (const auto& [name, r] : ref) {
    auto it = out.find(name);
    ASSERT_NE(it, out.end()) << "no backend result for " << name;
    const harness::Closeness cl = harness::assert_close(r, it->second, harness::tolerance(c.op, name, set));
    std::printf("  %-9s %s\n", name.c_str(), cl.str().c_str());
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3e", cl.err_ratio);
    ::testing::Test::RecordProperty(name + "_err_ratio", buf);
    EXPECT_TRUE(cl.pass) << c.op << " " << c.name << " " << name << ": " << cl.str();
  }
}

namespace {

class GateTest : public ::testing::Test {
 public:
  GateTest(GateCase c, bool backward, Backend backend) : c_(std::move(c)), backward_(backward), backend_(backend) {}
  void TestBody() override {
    if (backend_ == Backend::cuda && cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (cuda_device_count() == 0)";
    const Inputs in = make_inputs(c_);
    const Results ref = run_reference(c_, in, backward_);
    Results out;
    try {
      out = run_backend(c_, in, backward_, backend_);
    } catch (const Error& e) {
      // A backend states what it supports (docs/architecture.md section 3); a combination it refuses is a skip,
      // which leaves the gate partial (never green), not a pass and not a correctness failure.
      if (e.code() != ErrorCode::unsupported) throw;
      GTEST_SKIP() << "backend refuses this case: " << e.what();
    }
    expect_close_all(c_, ref, out);
  }

 private:
  GateCase c_;
  bool backward_;
  Backend backend_;
};

}  // namespace

void register_gate(const std::string& prefix, const std::vector<GateCase>& cases) {
  std::set<std::string> seen;
  for (const GateCase& cpu_case : cases) {
    if (!seen.insert(cpu_case.name).second) throw std::logic_error("duplicate gate case name " + cpu_case.name);
    for (const bool cuda : {false, true}) {
      // The CUDA backend instantiates head dims 64, 128, 256 only: other dims are CPU-only cases,
      // so that a GPU gate is never partial by construction.
      if (cuda && !(cpu_case.D == 64 || cpu_case.D == 128 || cpu_case.D == 256)) continue;
      // The CUDA kernels take bf16, the dtype lina benchmarks (FLA applies the same tolerances to its
      // bf16 cases): FLA's f16 cases run in bf16 there, and the f32 dtype cases stay CPU-only.
      if (cuda && cpu_case.dtype == DType::f32) continue;
      GateCase c = cpu_case;
      if (cuda) c.dtype = DType::bf16;
      for (const bool bwd : {false, true}) {
        const std::string suite = prefix + (cuda ? "Cuda" : "") + (bwd ? "/Bwd" : "/Fwd");
        const Backend be = cuda ? Backend::cuda : Backend::cpu;
        ::testing::RegisterTest(suite.c_str(), c.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                                [c, bwd, be]() -> ::testing::Test* { return new GateTest(c, bwd, be); });
      }
    }
  }
}

}  // namespace lina::gate
