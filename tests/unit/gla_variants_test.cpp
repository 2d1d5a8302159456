// Kernel variant selection (ops/common/variant.h) and the chunk_gla.fwd variant table. On CPU: a
// named variant the site lacks is refused by argument "variant", a declining one with its reason, and
// LINA_VARIANT's "site=name" and bare-name entries steer the right sites. On a GPU: the default choice
// per shape, and every variant of chunk_gla.fwd against the fp64 reference at FLA's tolerances (o 0.004,
// final state 0.005); skipped without one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "harness/verify/accuracy.h"
#include "lina/error.h"
#include "lina/lina.h"
#include "ops/common/variant.h"
#include "tests/unit/gla_test_common.h"

#ifdef LINA_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace lina {
namespace {

using detail::Decline;
using detail::Variant;

// A stand-in table: "small" supports n <= 4, "any" every n; launch records n in the kernel name.
struct ToyCall {
  int n = 0;
};
Decline small_only(const ToyCall& c) {
  if (c.n > 4) return "n = " + std::to_string(c.n) + " (small runs n <= 4)";
  return std::nullopt;
}
Decline any(const ToyCall&) { return std::nullopt; }
RunInfo launch_small(const ToyCall&) { return RunInfo{"toy", {"small_kernel"}, ""}; }
RunInfo launch_any(const ToyCall&) { return RunInfo{"toy", {"any_kernel"}, ""}; }
const Variant<ToyCall> kToy[] = {{"small", small_only, launch_small}, {"any", any, launch_any}};

RunInfo run_toy(int n, const std::string& variant = "") {
  ExecOptions o;
  o.variant = variant;
  return detail::run_variant(std::span<const Variant<ToyCall>>(kToy), "toy.fwd", o, ToyCall{n});
}

// Sets LINA_VARIANT for one test and restores what was there.
class ScopedVariantEnv {
 public:
  explicit ScopedVariantEnv(const char* value) {
    if (const char* old = std::getenv("LINA_VARIANT")) old_ = old;
    if (value) setenv("LINA_VARIANT", value, 1);
    else unsetenv("LINA_VARIANT");
  }
  ~ScopedVariantEnv() {
    if (old_) setenv("LINA_VARIANT", old_->c_str(), 1);
    else unsetenv("LINA_VARIANT");
  }

 private:
  std::optional<std::string> old_;
};

TEST(VariantTable, DefaultIsTheFirstThatSupportsTheCall) {
  const ScopedVariantEnv env(nullptr);
  EXPECT_EQ(run_toy(3).variant, "small");
  EXPECT_EQ(run_toy(3).kernels.at(0), "small_kernel");
  EXPECT_EQ(run_toy(9).variant, "any");
  EXPECT_EQ(run_toy(3, "any").variant, "any");
}

TEST(VariantTable, UnknownNameIsRefusedByArgumentVariant) {
  const ScopedVariantEnv env(nullptr);
  try {
    run_toy(3, "fast");
    FAIL() << "an unknown variant was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    EXPECT_EQ(e.argument(), "variant") << e.what();
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'fast'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("small, any"), std::string::npos) << msg;  // lists what the site has
  }
}

TEST(VariantTable, DecliningNamedVariantIsRefusedWithItsReason) {
  const ScopedVariantEnv env(nullptr);
  try {
    run_toy(9, "small");
    FAIL() << "a declining variant was run";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::unsupported) << e.what();
    EXPECT_EQ(e.argument(), "variant") << e.what();
    EXPECT_NE(std::string(e.what()).find("n = 9 (small runs n <= 4)"), std::string::npos) << e.what();
  }
}

TEST(VariantTable, EnvironmentSiteEntryAndBareName) {
  const std::string_view names[] = {"small", "any"};
  const ExecOptions none;
  {
    const ScopedVariantEnv env("other.fwd=small,toy.fwd=any");
    EXPECT_EQ(detail::requested_variant(none, "toy.fwd", names), "any");
    EXPECT_EQ(detail::requested_variant(none, "toy.bwd", names), "");  // no entry for this site
    EXPECT_EQ(run_toy(3).variant, "any");
  }
  {
    const ScopedVariantEnv env("any");  // a bare name: every site that has it
    EXPECT_EQ(detail::requested_variant(none, "toy.fwd", names), "any");
    EXPECT_EQ(detail::requested_variant(none, "toy.bwd", names), "any");
  }
  {
    const ScopedVariantEnv env("wg128,toy.fwd=small");  // a bare name the site lacks does not count
    EXPECT_EQ(detail::requested_variant(none, "toy.fwd", names), "small");
    const std::string_view other[] = {"fused"};
    EXPECT_EQ(detail::requested_variant(none, "toy.fwd", other), "small");  // site entries are taken as named
    EXPECT_EQ(detail::requested_variant(none, "toy.bwd", names), "");
  }
  {
    const ScopedVariantEnv env("toy.fwd=any");
    ExecOptions named;
    named.variant = "small";  // ExecOptions wins over the environment
    EXPECT_EQ(detail::requested_variant(named, "toy.fwd", names), "small");
  }
  {
    const ScopedVariantEnv env("toy.fwd=fast");  // the environment's name is refused like a named one
    try {
      run_toy(3);
      FAIL() << "an unknown variant from LINA_VARIANT was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), "variant") << e.what();
    }
  }
  {
    const ScopedVariantEnv env("");
    EXPECT_EQ(detail::requested_variant(none, "toy.fwd", names), "");
  }
}

#ifdef LINA_WITH_CUDA
// Device copies of a host tensor, freed with the arena.
struct DeviceArena {
  std::vector<void*> blocks;
  ~DeviceArena() {
    for (void* p : blocks) cudaFree(p);
  }
  TensorView copy(const HostTensor& h) {
    const std::size_t bytes = static_cast<std::size_t>(h.view().numel()) * dtype_size(h.view().dtype);
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, bytes + 16), cudaSuccess);
    blocks.push_back(p);
    EXPECT_EQ(cudaMemcpy(p, h.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return TensorView::contiguous(p, h.view().dtype, h.view().shape, Device::cuda, 0);
  }
};

HostTensor to_host(const TensorView& d) {
  HostTensor h(d.dtype, d.shape);
  EXPECT_EQ(cudaMemcpy(h.data(), d.data, static_cast<std::size_t>(d.numel()) * dtype_size(d.dtype), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

struct GpuCase {
  const char* variant;  // "" = the default choice
  gla_test::Case c;
  const char* expect_variant;  // the name RunInfo must report
};

std::string case_name(const GpuCase& g) {
  return std::string(*g.variant ? g.variant : "default") + " K" + std::to_string(g.c.K) + " V" + std::to_string(g.c.V) +
         " T" + std::to_string(g.c.T) + (g.c.cu.empty() ? "" : " varlen");
}

// Runs the CUDA forward with `variant` and checks o and the final state against the fp64 reference.
void expect_matches_reference(const GpuCase& g) {
  SCOPED_TRACE(case_name(g));
  const gla_test::Data d(g.c, 7);
  const gla_test::Results ref = gla_test::run_reference(d);
  DeviceArena m;
  ChunkGlaArgs a;
  a.q = m.copy(d.q), a.k = m.copy(d.k), a.v = m.copy(d.v), a.g = m.copy(d.g);
  if (g.c.h0) a.initial_state = m.copy(d.h0);
  if (!g.c.cu.empty()) a.cu_seqlens = m.copy(d.cu);
  const TensorView o = m.copy(testing::poisoned(DType::bf16, d.v.shape()));
  const TensorView ht = m.copy(testing::poisoned(DType::f32, ref.ht.shape()));
  ExecOptions opts;
  opts.backend = Backend::cuda;
  opts.variant = g.variant;
  const RunInfo info = chunk_gla_forward(a, AttentionOutputs{o, ht}, ForwardMode::training, opts);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(info.variant, g.expect_variant);
  const auto co = harness::assert_close(ref.o, to_host(o), 0.004);
  EXPECT_TRUE(co.pass) << "o: " << co.str();
  const auto ch = harness::assert_close(ref.ht, to_host(ht), 0.005);
  EXPECT_TRUE(ch.pass) << "final state: " << ch.str();
}

gla_test::Case gpu_case(std::int64_t B, std::int64_t T, std::int64_t H, std::int64_t K, std::int64_t V, std::vector<std::int64_t> cu = {}) {
  gla_test::Case c;
  c.B = B, c.T = T, c.H = H, c.K = K, c.V = V;
  c.cu = std::move(cu);
  c.dtype = DType::bf16;
  c.normalizer = 1;  // g = logsigmoid(U[0,1)), as FLA's test_chunk draws it
  return c;
}
#endif

TEST(GlaVariantsCuda, DefaultChoicePerShape) {
#ifndef LINA_WITH_CUDA
  GTEST_SKIP() << "CUDA backend not built";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  const ScopedVariantEnv env(nullptr);
  for (const GpuCase& g : {GpuCase{"", gpu_case(2, 200, 2, 64, 64), "ws"}, GpuCase{"", gpu_case(1, 300, 2, 64, 256), "ws"},
                           GpuCase{"", gpu_case(2, 200, 2, 128, 128), "wg128"}, GpuCase{"", gpu_case(1, 150, 1, 128, 256), "wg128"},
                           GpuCase{"", gpu_case(2, 200, 2, 128, 64), "fused"},
                           GpuCase{"", gpu_case(1, 200, 1, 256, 256), "d256_prep_state"},
                           GpuCase{"", gpu_case(1, 300, 2, 256, 64, {0, 0, 70, 300}), "d256_prep_state"}})
    expect_matches_reference(g);
#endif
}

TEST(GlaVariantsCuda, EveryVariantMatchesReference) {
#ifndef LINA_WITH_CUDA
  GTEST_SKIP() << "CUDA backend not built";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  const ScopedVariantEnv env(nullptr);
  // Few (sequence, head) pairs: every call below splits its sequences, so pass 1 runs too.
  const GpuCase cases[] = {
      {"d256_prep_state", gpu_case(2, 150, 1, 256, 128), "d256_prep_state"},
      {"wg128", gpu_case(1, 300, 2, 128, 128, {0, 15, 100, 300}), "wg128"},
      {"wg128_mma_a", gpu_case(2, 200, 2, 128, 128), "wg128_mma_a"},
      {"wg128_mma_a", gpu_case(1, 300, 2, 128, 128, {0, 15, 100, 300}), "wg128_mma_a"},
      {"ws", gpu_case(2, 200, 2, 64, 64), "ws"},
      {"ws", gpu_case(2, 200, 2, 128, 128), "ws"},
      {"fused", gpu_case(2, 200, 2, 64, 64), "fused"},
      {"fused", gpu_case(2, 200, 2, 128, 128), "fused"},
      {"fused", gpu_case(3, 77, 1, 256, 64), "fused"},
      {"fused_vt128", gpu_case(2, 200, 2, 128, 128), "fused_vt128"},
      {"fused_vt128", gpu_case(1, 300, 2, 128, 256, {0, 15, 100, 300}), "fused_vt128"},
      {"exact_segment_states", gpu_case(2, 200, 2, 64, 64), "exact_segment_states"},
      {"exact_segment_states", gpu_case(2, 200, 2, 128, 64), "exact_segment_states"},
      {"exact_segment_states", gpu_case(1, 300, 2, 128, 128, {0, 15, 100, 300}), "exact_segment_states"},
  };
  for (const GpuCase& g : cases) expect_matches_reference(g);
#endif
}

TEST(GlaVariantsCuda, VariantThatDeclinesTheShapeIsRefused) {
#ifndef LINA_WITH_CUDA
  GTEST_SKIP() << "CUDA backend not built";
#else
  if (cuda_device_count() == 0) GTEST_SKIP() << "no GPU";
  const ScopedVariantEnv env(nullptr);
  for (const auto& [variant, K, V] : {std::tuple{"wg128", 64, 64}, std::tuple{"d256_prep_state", 128, 128}, std::tuple{"ws", 128, 64},
                                      std::tuple{"fused_vt128", 256, 256}, std::tuple{"exact_segment_states", 256, 64},
                                      std::tuple{"no_such_kernel", 64, 64}}) {
    SCOPED_TRACE(variant);
    const gla_test::Data d(gpu_case(1, 64, 1, K, V), 3);
    DeviceArena m;
    ChunkGlaArgs a;
    a.q = m.copy(d.q), a.k = m.copy(d.k), a.v = m.copy(d.v), a.g = m.copy(d.g);
    const TensorView o = m.copy(testing::poisoned(DType::bf16, d.v.shape()));
    ExecOptions opts;
    opts.backend = Backend::cuda;
    opts.variant = variant;
    try {
      chunk_gla_forward(a, AttentionOutputs{o, std::nullopt}, ForwardMode::training, opts);
      ADD_FAILURE() << variant << " ran at K = " << K << ", V = " << V;
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), "variant") << e.what();
      EXPECT_NE(std::string(e.what()).find("chunk_gla.fwd"), std::string::npos) << e.what();
    }
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
#endif
}

}  // namespace
}  // namespace lina
