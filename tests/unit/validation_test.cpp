// Input validation through the public API (chunk_gla / chunk_kda / chunk_gdn, forward and backward):
// every bad input is refused with a lina::Error that names the argument and says what was seen and
// what was expected, and no output is written (outputs hold a sentinel that must survive the throw).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lina/chunk_delta.h"
#include "lina/chunk_gla.h"
#include "lina/error.h"
#include "tests/support/random.h"

namespace lina {
namespace {

constexpr double kSentinel = 777.0;

HostTensor ints(DType dt, const std::vector<std::int64_t>& v) {
  HostTensor t(dt, Shape{static_cast<std::int64_t>(v.size())});
  for (std::size_t i = 0; i < v.size(); ++i) t.set(static_cast<std::int64_t>(i), static_cast<double>(v[i]));
  return t;
}

// Calls fn with every output pre-filled with a sentinel; fn must throw lina::Error about `arg`
// whose message contains each fragment, and every output must still hold the sentinel.
void expect_refused(const std::function<void()>& fn, const std::string& arg, const std::vector<std::string>& fragments,
                    const std::vector<HostTensor*>& outputs, ErrorCode code = ErrorCode::invalid_argument) {
  std::vector<std::vector<double>> before;
  for (HostTensor* t : outputs) {
    t->fill(kSentinel);
    before.push_back(t->to_f64());
  }
  try {
    fn();
    ADD_FAILURE() << "the call was accepted; expected a refusal naming `" << arg << "`";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.argument(), arg) << msg;
    EXPECT_EQ(e.code(), code) << msg;
    for (const std::string& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "message \"" << msg << "\" lacks \"" << f << "\"";
  }
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    if (outputs[k]->to_f64() != before[k]) ADD_FAILURE() << "output #" << k << " was written during a refused call";
  }
}

// A call that passes validation either runs, or stops in a backend that is not built yet (an Error
// that names no argument). Used to prove each refusal below is caused by the one edit it makes.
void expect_accepted(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_TRUE(e.argument().empty()) << "a valid call was refused: " << e.what();
  }
}

// ------------------------------------------------------------------------------------------------
// KDA / GDN

struct DeltaSetup {
  bool kda;
  std::int64_t B, T, H = 2, HV = 4, K = 8, V = 4, N;
  HostTensor q, k, v, g, beta, h0, A_log, dt_bias, cu;
  HostTensor o, ht, d_o, dht, dq, dk, dv, dg, dbeta, dh0, dA, ddt;
  ChunkKdaArgs a;  // GDN calls take its DeltaRuleArgs part
  AttentionOutputs out;
  AttentionGradInputs gin;
  DeltaRuleGrads grads;

  explicit DeltaSetup(bool kda_, std::int64_t B_ = 2, std::int64_t T_ = 8, std::vector<std::int64_t> cu_values = {})
      : kda(kda_), B(B_), T(T_), N(cu_values.empty() ? B_ : static_cast<std::int64_t>(cu_values.size()) - 1) {
    testing::Rng r(7);
    q = testing::normal(r, DType::f32, {B, T, H, K});
    k = testing::normal(r, DType::f32, {B, T, H, K});
    v = testing::normal(r, DType::f32, {B, T, HV, V});
    g = kda ? HostTensor::filled(DType::f32, {B, T, HV, K}, -0.1) : HostTensor::filled(DType::f32, {B, T, HV}, -0.1);
    beta = HostTensor::filled(DType::f32, {B, T, HV}, 0.5);
    h0 = testing::normal(r, DType::f32, {N, HV, K, V});
    A_log = HostTensor::filled(DType::f32, {HV}, 0.1);
    dt_bias = kda ? HostTensor::filled(DType::f32, {HV * K}, 0.2) : HostTensor::filled(DType::f32, {HV}, 0.2);
    o = HostTensor(DType::f32, {B, T, HV, V});
    ht = HostTensor(DType::f32, {N, HV, K, V});
    d_o = testing::normal(r, DType::f32, {B, T, HV, V});
    dht = testing::normal(r, DType::f32, {N, HV, K, V});
    dq = HostTensor(DType::f32, q.shape()); dk = HostTensor(DType::f32, k.shape()); dv = HostTensor(DType::f32, v.shape());
    dg = HostTensor(DType::f32, g.shape()); dbeta = HostTensor(DType::f32, beta.shape());
    dh0 = HostTensor(DType::f32, h0.shape()); dA = HostTensor(DType::f32, A_log.shape()); ddt = HostTensor(DType::f32, dt_bias.shape());
    a.q = q.view(); a.k = k.view(); a.v = v.view(); a.g = g.view(); a.beta = beta.view();
    a.initial_state = h0.view();
    if (!cu_values.empty()) {
      cu = ints(DType::i32, cu_values);
      a.cu_seqlens = cu.view();
    }
    out = {o.view(), ht.view()};
    gin = {d_o.view(), dht.view()};
    grads = {dq.view(), dk.view(), dv.view(), dg.view(), dbeta.view(), dh0.view(), std::nullopt, std::nullopt};
  }
  DeltaSetup(const DeltaSetup&) = delete;
  DeltaSetup& operator=(const DeltaSetup&) = delete;

  void enable_gate() {
    a.use_gate_in_kernel = true;
    a.A_log = A_log.view();
    a.dt_bias = dt_bias.view();
    grads.d_A_log = dA.view();
    grads.d_dt_bias = ddt.view();
  }
  ChunkGdnArgs gdn_args() const {
    ChunkGdnArgs ga;
    static_cast<DeltaRuleArgs&>(ga) = a;
    return ga;
  }
  void forward(ExecOptions opts = {}) {
    if (kda) chunk_kda_forward(a, out, ForwardMode::training, opts);
    else chunk_gdn_forward(gdn_args(), out, ForwardMode::training, opts);
  }
  void backward(ExecOptions opts = {}) {
    if (kda) chunk_kda_backward(a, gin, grads, opts);
    else chunk_gdn_backward(gdn_args(), gin, grads, opts);
  }
  void reference_forward() {
    if (kda) reference::chunk_kda_forward(a, out);
    else reference::chunk_gdn_forward(gdn_args(), out);
  }
  void reference_backward() {
    if (kda) reference::chunk_kda_backward(a, gin, grads);
    else reference::chunk_gdn_backward(gdn_args(), gin, grads);
  }
  std::vector<HostTensor*> fwd_outputs() { return {&o, &ht}; }
  std::vector<HostTensor*> bwd_outputs() { return {&dq, &dk, &dv, &dg, &dbeta, &dh0, &dA, &ddt}; }

  // Expects both forward and backward to refuse (both run the same input checks).
  void refused(const std::string& arg, const std::vector<std::string>& fragments, ErrorCode code = ErrorCode::invalid_argument) {
    SCOPED_TRACE(kda ? "chunk_kda" : "chunk_gdn");
    {
      SCOPED_TRACE("forward");
      expect_refused([&] { forward(); }, arg, fragments, fwd_outputs(), code);
    }
    {
      SCOPED_TRACE("backward");
      expect_refused([&] { backward(); }, arg, fragments, bwd_outputs(), code);
    }
  }
  // Backward-only arguments (do, dht, gradients).
  void refused_backward(const std::string& arg, const std::vector<std::string>& fragments) {
    SCOPED_TRACE(kda ? "chunk_kda backward" : "chunk_gdn backward");
    expect_refused([&] { backward(); }, arg, fragments, bwd_outputs());
  }
  void accepted() {
    SCOPED_TRACE(kda ? "chunk_kda" : "chunk_gdn");
    expect_accepted([&] { forward(); });
    expect_accepted([&] { backward(); });
    // The fp64 reference shares the checks and is always implemented: it must run to the end.
    EXPECT_NO_THROW(reference_forward());
    EXPECT_NO_THROW(reference_backward());
  }
};

class DeltaValidation : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Ops, DeltaValidation, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "kda" : "gdn"; });

TEST_P(DeltaValidation, BaselinesAreAccepted) {
  {
    DeltaSetup s(GetParam());
    s.accepted();
  }
  {
    DeltaSetup s(GetParam());
    s.enable_gate();
    s.a.use_qk_l2norm_in_kernel = s.a.use_beta_sigmoid_in_kernel = s.a.allow_neg_eigval = true;
    s.accepted();
  }
  {
    DeltaSetup s(GetParam(), 1, 8, {0, 3, 3, 8});
    s.accepted();
  }
}

TEST_P(DeltaValidation, WrongRank) {
  DeltaSetup s(GetParam());
  HostTensor q3(DType::f32, {2, 8, 16});
  s.a.q = q3.view();
  s.refused("q", {"rank 3", "rank 4"});
}

TEST_P(DeltaValidation, WrongShapes) {
  {
    DeltaSetup s(GetParam());
    HostTensor k(DType::f32, {2, 8, 2, 9});
    s.a.k = k.view();
    s.refused("k", {"[2, 8, 2, 9]", "[2, 8, 2, 8]"});
  }
  {
    DeltaSetup s(GetParam());
    HostTensor v(DType::f32, {2, 7, 4, 4});
    s.a.v = v.view();
    s.refused("v", {"[2, 7, 4, 4]", "[2, 8]"});
  }
  {
    // KDA's per-channel gate and GDN's scalar gate are not interchangeable.
    DeltaSetup s(GetParam());
    HostTensor g = GetParam() ? HostTensor(DType::f32, {2, 8, 4}) : HostTensor(DType::f32, {2, 8, 4, 8});
    s.a.g = g.view();
    s.refused("g", {GetParam() ? "[2, 8, 4, 8]" : "[2, 8, 4]", "[B, T, HV"});
  }
  {
    DeltaSetup s(GetParam());
    HostTensor beta(DType::f32, {2, 8, 2});
    s.a.beta = beta.view();
    s.refused("beta", {"[2, 8, 2]", "[2, 8, 4]"});
  }
}

TEST_P(DeltaValidation, MismatchedDtypes) {
  {
    DeltaSetup s(GetParam());
    HostTensor k = s.k.cast(DType::f16);
    s.a.k = k.view();
    s.refused("k", {"float16", "float32"});
  }
  {
    DeltaSetup s(GetParam());
    HostTensor v = s.v.cast(DType::bf16);
    s.a.v = v.view();
    s.refused("v", {"bfloat16", "float32"});
  }
  {
    DeltaSetup s(GetParam());
    HostTensor g = s.g.cast(DType::f64);
    s.a.g = g.view();
    s.refused("g", {"got dtype float64", "expected dtype float32"});
    // The allowed list {q's dtype, float32} names float32 once.
    try {
      s.forward();
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find("float32 or float32"), std::string::npos) << e.what();
    }
  }
  {
    DeltaSetup s(GetParam());
    HostTensor q = s.q.cast(DType::f64);
    HostTensor k = s.k.cast(DType::f64);
    s.a.q = q.view();
    s.a.k = k.view();
    s.refused("q", {"float64", "bfloat16"});
  }
}

TEST_P(DeltaValidation, UnsupportedHeadDim) {
  DeltaSetup s(GetParam());
  HostTensor q(DType::f32, {2, 8, 2, 257}), k(DType::f32, {2, 8, 2, 257});
  s.a.q = q.view();
  s.a.k = k.view();
  s.refused("q", {"K = 257", "K <= 256"}, ErrorCode::unsupported);
  DeltaSetup sv(GetParam());
  HostTensor v(DType::f32, {2, 8, 4, 300});
  sv.a.v = v.view();
  sv.refused("v", {"V = 300", "V <= 256"}, ErrorCode::unsupported);
}

TEST_P(DeltaValidation, ValueHeadsNotAMultipleOfQkHeads) {
  DeltaSetup s(GetParam());
  HostTensor v(DType::f32, {2, 8, 3, 4});
  s.a.v = v.view();
  s.refused("v", {"HV = 3", "multiple of H = 2"});
  DeltaSetup fewer(GetParam());
  HostTensor v1(DType::f32, {2, 8, 1, 4});
  fewer.a.v = v1.view();
  fewer.refused("v", {"HV = 1", "multiple of H = 2"});
}

TEST_P(DeltaValidation, VarlenNeedsBatchOne) {
  DeltaSetup s(GetParam(), 2, 8, {0, 4, 8});
  s.refused("q", {"B = 2", "B = 1"});
}

TEST_P(DeltaValidation, BadCuSeqlens) {
  struct Bad {
    std::vector<std::int64_t> cu;
    std::vector<std::string> fragments;
  };
  const std::vector<Bad> cases = {
      {{1, 4, 8}, {"cu_seqlens[0] = 1", "expected 0"}},
      {{0, 5, 3, 8}, {"decrease at index 2", "5 -> 3", "non-decreasing"}},
      {{0, 4, 7}, {"cu_seqlens[N] = 7", "T = 8"}},
      {{0, 4, 9}, {"cu_seqlens[N] = 9", "T = 8"}},
      {{0}, {"length 1", "N+1 >= 2"}},
  };
  for (const Bad& b : cases) {
    DeltaSetup s(GetParam(), 1, 8, b.cu);
    s.refused("cu_seqlens", b.fragments);
  }
  {
    DeltaSetup s(GetParam(), 1, 8, {0, 4, 8});
    HostTensor cu = ints(DType::f32, {0, 4, 8});
    s.a.cu_seqlens = cu.view();
    s.refused("cu_seqlens", {"float32", "int32 or int64"});
  }
  {
    DeltaSetup s(GetParam(), 1, 8, {0, 4, 8});
    HostTensor cu(DType::i64, {3, 1});
    s.a.cu_seqlens = cu.view();
    s.refused("cu_seqlens", {"rank 2", "rank 1"});
  }
  {
    // The host copy is what gets read when given: it is checked just the same.
    DeltaSetup s(GetParam(), 1, 8, {0, 4, 8});
    HostTensor cpu = ints(DType::i64, {0, 6, 4});
    s.a.cu_seqlens_cpu = cpu.view();
    s.refused("cu_seqlens", {"decrease at index 2", "non-decreasing"});
  }
  {
    DeltaSetup s(GetParam());
    HostTensor cpu = ints(DType::i64, {0, 8, 16});
    s.a.cu_seqlens_cpu = cpu.view();
    s.refused("cu_seqlens_cpu", {"without cu_seqlens", "cu_seqlens to be given"});
  }
  {
    // int64 offsets are fine.
    DeltaSetup s(GetParam(), 1, 8, {0, 4, 8});
    HostTensor cu = ints(DType::i64, {0, 4, 8});
    s.a.cu_seqlens = cu.view();
    s.accepted();
  }
}

TEST_P(DeltaValidation, InitialStateShapeAndDtype) {
  {
    DeltaSetup s(GetParam());
    HostTensor h0(DType::f32, {2, 4, 4, 8});  // [N, HV, V, K]: the transposed layout
    s.a.initial_state = h0.view();
    s.refused("initial_state", {"[2, 4, 4, 8]", "[2, 4, 8, 4]"});
  }
  {
    // N follows cu_seqlens in varlen mode.
    DeltaSetup s(GetParam(), 1, 8, {0, 3, 8});
    HostTensor h0(DType::f32, {1, 4, 8, 4});
    s.a.initial_state = h0.view();
    s.refused("initial_state", {"[1, 4, 8, 4]", "[2, 4, 8, 4]"});
  }
  {
    DeltaSetup s(GetParam());
    HostTensor h0 = s.h0.cast(DType::f64);
    s.a.initial_state = h0.view();
    s.refused("initial_state", {"float64", "float32"});
  }
  if (GetParam()) {
    // KDA asserts an f32 initial state; GDN also takes 16-bit ones (docs/math.md section 1).
    DeltaSetup s(true);
    HostTensor h0 = s.h0.cast(DType::f16);
    s.a.initial_state = h0.view();
    s.refused("initial_state", {"float16", "float32"});
  }
}

TEST_P(DeltaValidation, GateParameters) {
  {
    DeltaSetup s(GetParam());
    s.a.A_log = s.A_log.view();
    s.refused("A_log", {"use_gate_in_kernel = false"});
  }
  {
    DeltaSetup s(GetParam());
    s.a.dt_bias = s.dt_bias.view();
    s.refused("dt_bias", {"use_gate_in_kernel = false"});
  }
  {
    DeltaSetup s(GetParam());
    s.enable_gate();
    s.a.A_log.reset();
    s.grads.d_A_log.reset();
    s.refused("A_log", {"none with use_gate_in_kernel", "A_log [HV]"});
  }
  {
    DeltaSetup s(GetParam());
    s.enable_gate();
    HostTensor A(DType::f32, {2});
    s.a.A_log = A.view();
    s.refused("A_log", {"[2]", "[4]"});
  }
  {
    DeltaSetup s(GetParam());
    s.enable_gate();
    HostTensor A = s.A_log.cast(DType::bf16);
    s.a.A_log = A.view();
    s.refused("A_log", {"bfloat16", "float32"});
  }
  {
    DeltaSetup s(GetParam());
    s.enable_gate();
    HostTensor dt(DType::f32, {GetParam() ? 4 * 8 + 1 : 5});
    s.a.dt_bias = dt.view();
    s.refused("dt_bias", {GetParam() ? "[33]" : "[5]", GetParam() ? "[HV*K] or [HV, K]" : "[HV]"});
  }
}

TEST_P(DeltaValidation, AllowNegEigvalNeedsBetaSigmoid) {
  DeltaSetup s(GetParam());
  s.a.allow_neg_eigval = true;
  s.refused("allow_neg_eigval", {"use_beta_sigmoid_in_kernel = false", "use_beta_sigmoid_in_kernel = true"});
}

TEST_P(DeltaValidation, NonContiguousTensors) {
  for (const char* name : {"q", "v", "g", "beta", "initial_state"}) {
    SCOPED_TRACE(name);
    DeltaSetup s(GetParam());
    TensorView* t = std::string(name) == "q" ? &s.a.q : std::string(name) == "v" ? &s.a.v
                  : std::string(name) == "g" ? &s.a.g : std::string(name) == "beta" ? &s.a.beta : &*s.a.initial_state;
    // Swap the strides of dims 1 and 2 (a head-first buffer viewed as seq-first): same shape, not row-major.
    std::swap(t->strides.dims[1], t->strides.dims[2]);
    s.refused(name, {"strides", "contiguous"});
  }
}

TEST_P(DeltaValidation, TensorOnAnotherDevice) {
  DeltaSetup s(GetParam());
  s.a.v.device = Device::cuda;  // never dereferenced: refused first
  s.refused("v", {"device cuda:0", "the device of q (cpu)"});
}

TEST_P(DeltaValidation, NullDataAndBadScale) {
  {
    DeltaSetup s(GetParam());
    s.a.beta.data = nullptr;
    s.refused("beta", {"null data pointer"});
  }
  {
    DeltaSetup s(GetParam());
    s.a.scale = std::nan("");
    s.refused("scale", {"nan", "finite"});
  }
}

TEST_P(DeltaValidation, BadOutputs) {
  {
    DeltaSetup s(GetParam());
    HostTensor o(DType::bf16, {2, 8, 4, 4});
    s.out.o = o.view();
    expect_refused([&] { s.forward(); }, "o", {"bfloat16", "float32"}, {&o, &s.ht});
  }
  {
    DeltaSetup s(GetParam());
    HostTensor o(DType::f32, {2, 8, 2, 4});  // H instead of HV heads
    s.out.o = o.view();
    expect_refused([&] { s.forward(); }, "o", {"[2, 8, 2, 4]", "[2, 8, 4, 4]"}, {&o, &s.ht});
  }
  {
    DeltaSetup s(GetParam());
    HostTensor ht(DType::f64, {2, 4, 8, 4});
    s.out.final_state = ht.view();
    expect_refused([&] { s.forward(); }, "final_state", {"float64", "float32"}, {&s.o, &ht});
  }
  {
    DeltaSetup s(GetParam());
    std::swap(s.out.o.strides.dims[1], s.out.o.strides.dims[2]);
    expect_refused([&] { s.forward(); }, "o", {"strides", "contiguous"}, {&s.o, &s.ht});
  }
}

TEST_P(DeltaValidation, BadGradients) {
  {
    DeltaSetup s(GetParam());
    HostTensor dq(DType::f32, {2, 8, 4, 8});  // per value head instead of summed over the group
    s.grads.dq = dq.view();
    expect_refused([&] { s.backward(); }, "dq", {"[2, 8, 4, 8]", "[2, 8, 2, 8]"}, {&dq, &s.dk, &s.dv, &s.dg, &s.dbeta, &s.dh0});
  }
  {
    DeltaSetup s(GetParam());
    HostTensor dg(DType::f32, {2, 8, 4, 3});
    s.grads.dg = dg.view();
    expect_refused([&] { s.backward(); }, "dg", {"[2, 8, 4, 3]"}, {&s.dq, &s.dk, &s.dv, &dg, &s.dbeta, &s.dh0});
  }
  {
    DeltaSetup s(GetParam());
    HostTensor db(DType::bf16, {2, 8, 4});
    s.grads.dbeta = db.view();
    expect_refused([&] { s.backward(); }, "dbeta", {"bfloat16", "float32"}, {&s.dq, &s.dk, &s.dv, &s.dg, &db, &s.dh0});
  }
  {
    DeltaSetup s(GetParam());
    HostTensor dh0(DType::f32, {1, 4, 8, 4});
    s.grads.d_initial_state = dh0.view();
    expect_refused([&] { s.backward(); }, "d_initial_state", {"[1, 4, 8, 4]", "[2, 4, 8, 4]"}, {&s.dq, &s.dk, &s.dv, &s.dg, &s.dbeta, &dh0});
  }
  {
    DeltaSetup s(GetParam());
    HostTensor d_o(DType::f32, {2, 8, 4, 5});
    s.gin.d_o = d_o.view();
    s.refused_backward("do", {"[2, 8, 4, 5]", "[2, 8, 4, 4]"});
  }
  {
    DeltaSetup s(GetParam());
    HostTensor dht(DType::f32, {2, 4, 4, 8});
    s.gin.d_final_state = dht.view();
    s.refused_backward("dht", {"[2, 4, 4, 8]", "[2, 4, 8, 4]"});
  }
  {
    DeltaSetup s(GetParam());
    s.grads.d_A_log = s.dA.view();  // no in-kernel gate: A_log is not an input
    s.refused_backward("d_A_log", {"not an input"});
  }
  {
    DeltaSetup s(GetParam());
    s.enable_gate();
    HostTensor ddt(DType::f32, {GetParam() ? 5 : 2});
    s.grads.d_dt_bias = ddt.view();
    s.refused_backward("d_dt_bias", {GetParam() ? "[5]" : "[2]", GetParam() ? "[32]" : "[4]"});
  }
}

TEST_P(DeltaValidation, CudaBackendWithHostTensors) {
  DeltaSetup s(GetParam());
  ExecOptions opts;
  opts.backend = Backend::cuda;
  expect_refused([&] { s.forward(opts); }, "backend", {"cuda", "cpu"}, s.fwd_outputs());
  expect_refused([&] { s.backward(opts); }, "backend", {"cuda", "cpu"}, s.bwd_outputs());
}

// KDA-only gate options.
TEST(KdaValidation, LowerBoundRules) {
  {
    DeltaSetup s(true);
    s.enable_gate();
    s.a.safe_gate = true;
    s.a.lower_bound = -6.0;
    s.refused("lower_bound", {"-6", "with safe_gate", "[-5, 0)"});
  }
  {
    DeltaSetup s(true);
    s.enable_gate();
    s.a.safe_gate = true;
    s.a.lower_bound = 0.0;
    s.refused("lower_bound", {"0", "[-5, 0)"});
  }
  {
    DeltaSetup s(true);
    s.enable_gate();
    s.a.safe_gate = true;
    s.refused("lower_bound", {"none with safe_gate and use_gate_in_kernel", "[-5, 0)"});
  }
  {
    // Without the in-kernel gate, safe_gate's bound is a promise about g; it is still range-checked.
    DeltaSetup s(true);
    s.a.safe_gate = true;
    s.a.lower_bound = -5.5;
    s.refused("lower_bound", {"-5.5", "[-5, 0)"});
  }
  {
    DeltaSetup s(true);
    s.a.lower_bound = -2.0;
    s.refused("lower_bound", {"without use_gate_in_kernel or safe_gate"});
  }
  {
    DeltaSetup s(true);
    s.enable_gate();
    s.a.lower_bound = std::nan("");
    s.refused("lower_bound", {"nan", "finite"});
  }
  {
    // Accepted: the lower-bound gate without A_log, and safe_gate with lower_bound = -5.
    DeltaSetup s(true);
    s.enable_gate();
    s.a.A_log.reset();
    s.grads.d_A_log.reset();
    s.a.lower_bound = -5.0;
    s.a.safe_gate = true;
    s.accepted();
  }
  {
    DeltaSetup s(true);
    s.enable_gate();
    HostTensor dt(DType::f32, {4, 8});  // [HV, K] is accepted too
    HostTensor ddt(DType::f32, {4, 8});
    s.a.dt_bias = dt.view();
    s.grads.d_dt_bias = ddt.view();
    s.accepted();
  }
}

// ------------------------------------------------------------------------------------------------
// GLA

struct GlaSetup {
  std::int64_t B, T, H = 2, K = 8, V = 4, N;
  HostTensor q, k, v, g, h0, cu, o, ht, d_o, dht, dq, dk, dv, dg, dh0;
  ChunkGlaArgs a;
  AttentionOutputs out;
  AttentionGradInputs gin;
  ChunkGlaGrads grads;

  explicit GlaSetup(std::int64_t B_ = 2, std::int64_t T_ = 8, std::vector<std::int64_t> cu_values = {})
      : B(B_), T(T_), N(cu_values.empty() ? B_ : static_cast<std::int64_t>(cu_values.size()) - 1) {
    testing::Rng r(11);
    q = testing::normal(r, DType::f32, {B, T, H, K});
    k = testing::normal(r, DType::f32, {B, T, H, K});
    v = testing::normal(r, DType::f32, {B, T, H, V});
    g = HostTensor::filled(DType::f32, {B, T, H, K}, -0.1);
    h0 = testing::normal(r, DType::f32, {N, H, K, V});
    o = HostTensor(DType::f32, {B, T, H, V});
    ht = HostTensor(DType::f32, {N, H, K, V});
    d_o = testing::normal(r, DType::f32, {B, T, H, V});
    dht = testing::normal(r, DType::f32, {N, H, K, V});
    dq = HostTensor(DType::f32, q.shape()); dk = HostTensor(DType::f32, k.shape());
    dv = HostTensor(DType::f32, v.shape()); dg = HostTensor(DType::f32, g.shape()); dh0 = HostTensor(DType::f32, h0.shape());
    a.q = q.view(); a.k = k.view(); a.v = v.view(); a.g = g.view();
    a.initial_state = h0.view();
    if (!cu_values.empty()) {
      cu = ints(DType::i32, cu_values);
      a.cu_seqlens = cu.view();
    }
    out = {o.view(), ht.view()};
    gin = {d_o.view(), dht.view()};
    grads = {dq.view(), dk.view(), dv.view(), dg.view(), dh0.view()};
  }
  GlaSetup(const GlaSetup&) = delete;
  GlaSetup& operator=(const GlaSetup&) = delete;

  void refused(const std::string& arg, const std::vector<std::string>& fragments, ErrorCode code = ErrorCode::invalid_argument) {
    {
      SCOPED_TRACE("chunk_gla forward");
      expect_refused([&] { chunk_gla_forward(a, out); }, arg, fragments, {&o, &ht}, code);
    }
    {
      SCOPED_TRACE("chunk_gla backward");
      expect_refused([&] { chunk_gla_backward(a, gin, grads); }, arg, fragments, {&dq, &dk, &dv, &dg, &dh0}, code);
    }
  }
  void accepted() {
    expect_accepted([&] { chunk_gla_forward(a, out); });
    expect_accepted([&] { chunk_gla_backward(a, gin, grads); });
  }
};

TEST(GlaValidation, BaselinesAreAccepted) {
  GlaSetup dense;
  dense.accepted();
  GlaSetup varlen(1, 8, {0, 0, 5, 8});
  varlen.accepted();
}

TEST(GlaValidation, ShapesRanksAndDtypes) {
  {
    GlaSetup s;
    HostTensor q(DType::f32, {2, 8, 2, 8, 1});
    s.a.q = q.view();
    s.refused("q", {"rank 5", "rank 4"});
  }
  {
    GlaSetup s;
    HostTensor k(DType::f32, {2, 8, 2, 7});
    s.a.k = k.view();
    s.refused("k", {"[2, 8, 2, 7]", "[2, 8, 2, 8]"});
  }
  {
    GlaSetup s;
    HostTensor g(DType::f32, {2, 8, 2, 4});
    s.a.g = g.view();
    s.refused("g", {"[2, 8, 2, 4]", "[2, 8, 2, 8]"});
  }
  {
    GlaSetup s;
    HostTensor v(DType::f32, {2, 8, 4, 4});  // GLA has no GVA
    s.a.v = v.view();
    s.refused("v", {"H = 4", "H = 2"});
  }
  {
    GlaSetup s;
    HostTensor k = s.k.cast(DType::bf16);
    s.a.k = k.view();
    s.refused("k", {"bfloat16", "float32"});
  }
  {
    GlaSetup s;
    HostTensor q(DType::f32, {2, 8, 2, 1025}), k(DType::f32, {2, 8, 2, 1025}), g(DType::f32, {2, 8, 2, 1025});
    s.a.q = q.view();
    s.a.k = k.view();
    s.a.g = g.view();
    s.refused("q", {"K = 1025", "1024"}, ErrorCode::unsupported);
  }
  {
    GlaSetup s;
    HostTensor h0 = s.h0.cast(DType::bf16);
    s.a.initial_state = h0.view();
    s.refused("initial_state", {"bfloat16", "float32"});
  }
  {
    GlaSetup s;
    HostTensor h0(DType::f32, {2, 2, 4, 8});
    s.a.initial_state = h0.view();
    s.refused("initial_state", {"[2, 2, 4, 8]", "[2, 2, 8, 4]"});
  }
}

TEST(GlaValidation, Varlen) {
  {
    GlaSetup s(2, 8, {0, 8, 16});
    s.refused("q", {"B = 2", "B = 1"});
  }
  {
    GlaSetup s(1, 8, {2, 8});
    s.refused("cu_seqlens", {"cu_seqlens[0] = 2", "expected 0"});
  }
  {
    GlaSetup s(1, 8, {0, 6, 2, 8});
    s.refused("cu_seqlens", {"decrease at index 2", "non-decreasing"});
  }
  {
    GlaSetup s(1, 8, {0, 6});
    s.refused("cu_seqlens", {"cu_seqlens[N] = 6", "T = 8"});
  }
  {
    GlaSetup s(1, 8, {0, 8});
    HostTensor cu = ints(DType::f64, {0, 8});
    s.a.cu_seqlens = cu.view();
    s.refused("cu_seqlens", {"float64", "int32 or int64"});
  }
}

TEST(GlaValidation, LayoutOutputsGradientsAndBackend) {
  {
    GlaSetup s;
    std::swap(s.a.k.strides.dims[1], s.a.k.strides.dims[2]);
    s.refused("k", {"strides", "contiguous"});
  }
  {
    GlaSetup s;
    HostTensor o(DType::f16, {2, 8, 2, 4});
    s.out.o = o.view();
    expect_refused([&] { chunk_gla_forward(s.a, s.out); }, "o", {"float16", "float32"}, {&o, &s.ht});
  }
  {
    GlaSetup s;
    HostTensor dg(DType::f32, {2, 8, 2, 4});
    s.grads.dg = dg.view();
    expect_refused([&] { chunk_gla_backward(s.a, s.gin, s.grads); }, "dg", {"[2, 8, 2, 4]", "[2, 8, 2, 8]"},
                   {&s.dq, &s.dk, &s.dv, &dg, &s.dh0});
  }
  {
    GlaSetup s;
    HostTensor dv(DType::f32, {2, 8, 2, 8});
    s.grads.dv = dv.view();
    expect_refused([&] { chunk_gla_backward(s.a, s.gin, s.grads); }, "dv", {"[2, 8, 2, 8]", "[2, 8, 2, 4]"},
                   {&s.dq, &s.dk, &dv, &s.dg, &s.dh0});
  }
  {
    GlaSetup s;
    ExecOptions opts;
    opts.backend = Backend::cuda;
    expect_refused([&] { chunk_gla_forward(s.a, s.out, ForwardMode::training, opts); }, "backend", {"cuda", "cpu"}, {&s.o, &s.ht});
    expect_refused([&] { chunk_gla_backward(s.a, s.gin, s.grads, opts); }, "backend", {"cuda", "cpu"},
                   {&s.dq, &s.dk, &s.dv, &s.dg, &s.dh0});
  }
}

}  // namespace
}  // namespace lina
