// The variant tables of chunk_kda and chunk_gdn (ops/delta/variants.h). On any machine: a name a site
// does not have is refused by argument "variant", a variant that declines the call is refused with its
// reason, and the CPU backend refuses any named variant. On a GPU: each variant that is not a table's
// first gives the default variant's results within FLA's chunk tolerances (docs/math.md section 6).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "harness/verify/accuracy.h"
#include "harness/engine/device_buffer.h"
#include "lina/lina.h"
#include "ops/delta/variants.h"
#include "tests/support/random.h"

namespace lina {
namespace {

using detail::delta::BackwardCall;
using detail::delta::ForwardCall;

// One problem's tensors in one place (host or device): inputs, forward outputs and gradients.
struct DeltaTensors {
  std::vector<HostTensor> host;                     // the host copies, in the order below
  std::vector<harness::DeviceTensor> device;        // filled only on_device
  std::vector<TensorView> views;
  bool kda = true;
  TensorView& at(std::size_t i) { return views[i]; }
};
enum Slot : std::size_t { kQ, kK, kV, kG, kBeta, kH0, kO, kHt, kDo, kDht, kDq, kDk, kDv, kDg, kDbeta, kDh0, kSlots };

struct Shape4 {
  std::int64_t B = 1, T = 150, H = 2, HV = 2, K = 64, V = 64;
};

DeltaTensors make_tensors(bool kda, const Shape4& s, bool on_device, std::uint64_t seed) {
  testing::Rng r(seed);
  const DType bf = DType::bf16;
  const Shape qk{s.B, s.T, s.H, s.K}, vv{s.B, s.T, s.HV, s.V}, rows{s.B, s.T, s.HV}, state{s.B, s.HV, s.K, s.V};
  const Shape gate = kda ? Shape{s.B, s.T, s.HV, s.K} : rows;
  DeltaTensors t;
  t.kda = kda;
  t.host.resize(kSlots);
  t.host[kQ] = testing::normal(r, bf, qk);
  t.host[kK] = testing::make(bf, qk, [&] { return r.normal() / std::sqrt(static_cast<double>(s.K)); });
  t.host[kV] = testing::normal(r, bf, vv);
  t.host[kG] = testing::make(bf, gate, [&] { return testing::logsigmoid(r.normal()) / (kda ? 8.0 : 1.0); });
  t.host[kBeta] = testing::make(bf, rows, [&] { return testing::sigmoid(r.normal()); });
  t.host[kH0] = testing::normal(r, DType::f32, state);
  t.host[kO] = testing::poisoned(bf, vv);
  t.host[kHt] = testing::poisoned(DType::f32, state);
  t.host[kDo] = testing::normal(r, bf, vv);
  t.host[kDht] = testing::normal(r, DType::f32, state);
  t.host[kDq] = testing::poisoned(bf, qk);
  t.host[kDk] = testing::poisoned(bf, qk);
  t.host[kDv] = testing::poisoned(bf, vv);
  t.host[kDg] = testing::poisoned(bf, gate);
  t.host[kDbeta] = testing::poisoned(bf, rows);
  t.host[kDh0] = testing::poisoned(DType::f32, state);
  for (HostTensor& h : t.host) {
    if (on_device) {
      t.device.push_back(harness::DeviceTensor::from_host(h));
      t.views.push_back(t.device.back().view());
    } else {
      t.views.push_back(h.view());
    }
  }
  return t;
}

template <class Args>
Args args_of(DeltaTensors& t) {
  Args a;
  a.q = t.at(kQ), a.k = t.at(kK), a.v = t.at(kV), a.g = t.at(kG), a.beta = t.at(kBeta);
  a.initial_state = t.at(kH0);
  return a;
}
AttentionOutputs outputs_of(DeltaTensors& t) { return {t.at(kO), t.at(kHt)}; }
AttentionGradInputs grad_inputs_of(DeltaTensors& t) { return {t.at(kDo), t.at(kDht)}; }
DeltaRuleGrads grads_of(DeltaTensors& t) {
  return DeltaRuleGrads{t.at(kDq), t.at(kDk), t.at(kDv), t.at(kDg), t.at(kDbeta), t.at(kDh0), std::nullopt, std::nullopt};
}

// Runs `call`; expects lina::Error with `code`, argument "variant" and `needle` in its message.
void expect_variant_refused(const std::string& what, ErrorCode code, const std::string& needle, const std::function<void()>& call) {
  try {
    call();
    ADD_FAILURE() << what << ": accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << what << ": " << e.what();
    EXPECT_EQ(e.argument(), "variant") << what << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << what << ": " << e.what() << " (wanted '" << needle << "')";
  }
}

// The CUDA backend's table for each site, called with host tensors: a refusal comes before any launch.
struct Sites {
  DeltaTensors kda_t, gdn_t;
  ChunkKdaArgs kda;
  ChunkGdnArgs gdn;
  AttentionOutputs kda_out, gdn_out;
  AttentionGradInputs kda_gin, gdn_gin;
  DeltaRuleGrads kda_gr, gdn_gr;
  detail::Problem kda_p, gdn_p;
  explicit Sites(std::int64_t K)
      : kda_t(make_tensors(true, Shape4{1, 64, 1, 1, K, 64}, false, 1)),
        gdn_t(make_tensors(false, Shape4{1, 64, 1, 1, K, 64}, false, 2)),
        kda(args_of<ChunkKdaArgs>(kda_t)),
        gdn(args_of<ChunkGdnArgs>(gdn_t)),
        kda_out(outputs_of(kda_t)),
        gdn_out(outputs_of(gdn_t)),
        kda_gin(grad_inputs_of(kda_t)),
        gdn_gin(grad_inputs_of(gdn_t)),
        kda_gr(grads_of(kda_t)),
        gdn_gr(grads_of(gdn_t)),
        kda_p(detail::validate_kda(kda)),
        gdn_p(detail::validate_gdn(gdn)) {}
  // site -> a call of the CUDA table with `opts`
  std::vector<std::pair<std::string, std::function<void(const ExecOptions&)>>> calls() {
    return {
        {"chunk_kda.fwd", [this](const ExecOptions& o) { detail::delta::run_cuda(ForwardCall<ChunkKdaArgs>{kda_p, kda, kda_out, o}); }},
        {"chunk_gdn.fwd", [this](const ExecOptions& o) { detail::delta::run_cuda(ForwardCall<ChunkGdnArgs>{gdn_p, gdn, gdn_out, o}); }},
        {"chunk_kda.bwd",
         [this](const ExecOptions& o) { detail::delta::run_cuda(BackwardCall<ChunkKdaArgs>{kda_p, kda, kda_gin, kda_gr, o}); }},
        {"chunk_gdn.bwd",
         [this](const ExecOptions& o) { detail::delta::run_cuda(BackwardCall<ChunkGdnArgs>{gdn_p, gdn, gdn_gin, gdn_gr, o}); }},
    };
  }
};

TEST(DeltaVariants, ANameTheSiteDoesNotHaveIsRefusedByArgumentVariant) {
  Sites s(64);
  ExecOptions opts;
  opts.variant = "no_such_variant";
  for (auto& [site, call] : s.calls())
    expect_variant_refused(site, ErrorCode::invalid_argument, "'no_such_variant' for " + site, [&] { call(opts); });
  // a name that exists at another site only: the forward has no simt
  opts.variant = "simt";
  expect_variant_refused("chunk_kda.fwd simt", ErrorCode::invalid_argument, "one of sequence_split, thin", [&] { s.calls()[0].second(opts); });
}

TEST(DeltaVariants, AVariantThatDeclinesIsRefusedWithItsReason) {
  ExecOptions opts;
  opts.variant = "prep_per_sequence";
  Sites k64(64);
  expect_variant_refused("chunk_gdn.fwd prep_per_sequence at K = 64", ErrorCode::unsupported,
                         "declines: head dim K = 64 (the per-sequence GDN prep is built for K = 128 only)",
                         [&] { k64.calls()[1].second(opts); });
  Sites k256(256);
  opts.variant = "simt";
  for (std::size_t i : {std::size_t{2}, std::size_t{3}}) {
    const std::string site = k256.calls()[i].first;
    expect_variant_refused(site + " simt at K = 256", ErrorCode::unsupported,
                           "simt for " + site + ", which declines: head dim K = 256", [&] { k256.calls()[i].second(opts); });
  }
}

TEST(DeltaVariants, EachTableHasAVariantForEveryHeadDim) {
  // the forwards' first entry, sequence_split, takes only long sequences of few heads; thin (the next) takes every call
  for (std::int64_t K : {64, 128, 256}) {
    Sites s(K);
    const auto split_kda = detail::delta::kda_forward_variants()[0].supports(ForwardCall<ChunkKdaArgs>{s.kda_p, s.kda, s.kda_out, {}});
    ASSERT_TRUE(split_kda) << K;
    EXPECT_TRUE(split_kda->find("the longest sequence has 64 tokens") != std::string::npos ||
                split_kda->find("no CUDA device") != std::string::npos)
        << *split_kda;
    EXPECT_TRUE(detail::delta::gdn_forward_variants()[0].supports(ForwardCall<ChunkGdnArgs>{s.gdn_p, s.gdn, s.gdn_out, {}})) << K;
    EXPECT_FALSE(detail::delta::kda_forward_variants()[1].supports(ForwardCall<ChunkKdaArgs>{s.kda_p, s.kda, s.kda_out, {}})) << K;
    EXPECT_FALSE(detail::delta::gdn_forward_variants()[1].supports(ForwardCall<ChunkGdnArgs>{s.gdn_p, s.gdn, s.gdn_out, {}})) << K;
    EXPECT_FALSE(detail::delta::kda_backward_variants()[0].supports(
        BackwardCall<ChunkKdaArgs>{s.kda_p, s.kda, s.kda_gin, s.kda_gr, {}}))
        << K;
    EXPECT_FALSE(detail::delta::gdn_backward_variants()[0].supports(
        BackwardCall<ChunkGdnArgs>{s.gdn_p, s.gdn, s.gdn_gin, s.gdn_gr, {}}))
        << K;
  }
  EXPECT_EQ(detail::delta::kda_forward_variants()[0].name, "sequence_split");
  EXPECT_EQ(detail::delta::gdn_forward_variants()[0].name, "sequence_split");
  EXPECT_EQ(detail::delta::kda_forward_variants()[1].name, "thin");
  EXPECT_EQ(detail::delta::gdn_forward_variants()[1].name, "thin");
  EXPECT_EQ(detail::delta::kda_backward_variants()[0].name, "tensor_core");
  EXPECT_EQ(detail::delta::gdn_backward_variants()[0].name, "tensor_core");
}

TEST(DeltaVariants, TheCpuBackendRefusesANamedVariant) {
  DeltaTensors t = make_tensors(true, Shape4{1, 64, 1, 1, 64, 64}, false, 3);
  const ChunkKdaArgs a = args_of<ChunkKdaArgs>(t);
  ExecOptions opts;
  opts.variant = "tensor_core";
  expect_variant_refused("chunk_kda.bwd on the cpu backend", ErrorCode::invalid_argument, "'tensor_core' for chunk_kda.bwd on the cpu backend",
                         [&] { chunk_kda_backward(a, grad_inputs_of(t), grads_of(t), opts); });
  opts.variant = "thin";
  expect_variant_refused("chunk_kda.fwd on the cpu backend", ErrorCode::invalid_argument, "'thin' for chunk_kda.fwd on the cpu backend",
                         [&] { chunk_kda_forward(a, outputs_of(t), ForwardMode::training, opts); });
}

// ---------------------------------------------------------------------------------------------
// GPU: a variant against the default one on the same inputs.

// FLA's chunk tolerances (tests/unit/delta_cpu_test.cpp, kKdaChunk / kGdnChunk: the same for these outputs).
constexpr double kTolO = 0.005, kTolHt = 0.005, kTolDqkv = 0.008, kTolDh0 = 0.008, kTolDgDbeta = 0.02;

void expect_close(const std::string& what, const HostTensor& ref, const HostTensor& got, double tol) {
  const harness::Closeness c = harness::assert_close(ref, got, tol);
  EXPECT_TRUE(c.pass) << what << ": " << c.str();
}

// Forward (or forward + backward) of `variant` and of the default at one shape; compares every output.
// `base`: the variant compared with (default: the default choice).
void compare_with_default(bool kda, const Shape4& s, bool backward, const std::string& variant, const std::string& base = {}) {
  const std::string what = std::string(kda ? "chunk_kda" : "chunk_gdn") + (backward ? ".bwd " : ".fwd ") + variant + " K=" +
                           std::to_string(s.K) + " V=" + std::to_string(s.V) + " HV=" + std::to_string(s.HV) + " T=" + std::to_string(s.T);
  std::vector<std::vector<HostTensor>> results;
  for (const std::string& name : {base, variant}) {
    DeltaTensors t = make_tensors(kda, s, true, 7);
    ExecOptions opts;
    opts.backend = Backend::cuda;
    opts.variant = name;
    RunInfo info;
    if (kda) {
      const ChunkKdaArgs a = args_of<ChunkKdaArgs>(t);
      info = backward ? chunk_kda_backward(a, grad_inputs_of(t), grads_of(t), opts)
                      : chunk_kda_forward(a, outputs_of(t), ForwardMode::training, opts);
    } else {
      const ChunkGdnArgs a = args_of<ChunkGdnArgs>(t);
      info = backward ? chunk_gdn_backward(a, grad_inputs_of(t), grads_of(t), opts)
                      : chunk_gdn_forward(a, outputs_of(t), ForwardMode::training, opts);
    }
    if (!name.empty()) {
      EXPECT_EQ(info.variant, name) << what;
    }
    std::vector<HostTensor> got;
    for (std::size_t slot : backward ? std::vector<std::size_t>{kDq, kDk, kDv, kDg, kDbeta, kDh0} : std::vector<std::size_t>{kO, kHt})
      got.push_back(t.device[slot].to_host());
    results.push_back(std::move(got));
  }
  const std::vector<HostTensor>& ref = results[0];
  const std::vector<HostTensor>& got = results[1];
  if (!backward) {
    expect_close(what + " o", ref[0], got[0], kTolO);
    expect_close(what + " ht", ref[1], got[1], kTolHt);
    return;
  }
  expect_close(what + " dq", ref[0], got[0], kTolDqkv);
  expect_close(what + " dk", ref[1], got[1], kTolDqkv);
  expect_close(what + " dv", ref[2], got[2], kTolDqkv);
  expect_close(what + " dg", ref[3], got[3], kTolDgDbeta);
  expect_close(what + " dbeta", ref[4], got[4], kTolDgDbeta);
  expect_close(what + " dh0", ref[5], got[5], kTolDh0);
}

#define LINA_REQUIRE_GPU()                                           \
  do {                                                               \
    if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU (or no CUDA backend built)"; \
  } while (0)

TEST(DeltaVariantsCuda, GdnPrepPerSequenceMatchesTheDefault) {
  LINA_REQUIRE_GPU();
  compare_with_default(false, Shape4{2, 150, 2, 2, 128, 64}, false, "prep_per_sequence");
  compare_with_default(false, Shape4{1, 200, 2, 4, 128, 128}, false, "prep_per_sequence");  // GVA
}

TEST(DeltaVariantsCuda, BackwardScalarQkMatchesTheDefault) {
  LINA_REQUIRE_GPU();
  for (bool kda : {true, false})
    for (std::int64_t K : {64, 128, 256}) {
      compare_with_default(kda, Shape4{1, 150, 2, 2, K, 64}, true, "scalar_qk");
      compare_with_default(kda, Shape4{1, 150, 1, 2, K, 64}, true, "scalar_qk");  // GVA: post_qk sums the group
    }
}

TEST(DeltaVariantsCuda, BackwardSimtMatchesTheDefault) {
  LINA_REQUIRE_GPU();
  for (bool kda : {true, false})
    for (std::int64_t K : {64, 128}) {
      compare_with_default(kda, Shape4{1, 150, 2, 2, K, 64}, true, "simt");
      compare_with_default(kda, Shape4{1, 150, 1, 2, K, 64}, true, "simt");
    }
}

TEST(DeltaVariantsCuda, TheDefaultChoiceIsTheFirstVariantThatSupportsTheCall) {
  LINA_REQUIRE_GPU();
  DeltaTensors t = make_tensors(true, Shape4{1, 64, 1, 1, 64, 64}, true, 5);
  ExecOptions opts;
  opts.backend = Backend::cuda;
  const ChunkKdaArgs a = args_of<ChunkKdaArgs>(t);
  EXPECT_EQ(chunk_kda_forward(a, outputs_of(t), ForwardMode::training, opts).variant, "thin");
  EXPECT_EQ(chunk_kda_backward(a, grad_inputs_of(t), grads_of(t), opts).variant, "tensor_core");
  // one head over 4096 tokens: the sequence split
  DeltaTensors long_t = make_tensors(false, Shape4{1, 4096, 1, 1, 128, 128}, true, 6);
  const ChunkGdnArgs g = args_of<ChunkGdnArgs>(long_t);
  EXPECT_EQ(chunk_gdn_forward(g, outputs_of(long_t), ForwardMode::inference, opts).variant, "sequence_split");
}

TEST(DeltaVariantsCuda, SequenceSplitMatchesThin) {
  LINA_REQUIRE_GPU();
  for (bool kda : {true, false}) {
    compare_with_default(kda, Shape4{1, 4096, 1, 2, 128, 128}, false, "sequence_split", "thin");  // GVA, one-call maps
    compare_with_default(kda, Shape4{2, 3000, 1, 1, 64, 64}, false, "sequence_split", "thin");
    compare_with_default(kda, Shape4{1, 2500, 1, 1, 256, 128}, false, "sequence_split", "thin");  // two-call maps
  }
}

}  // namespace
}  // namespace lina
