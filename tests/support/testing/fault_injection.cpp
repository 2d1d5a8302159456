// A planted wrong kernel for the toolkit's own tests: with LINA_FAULT_INJECT=perturb:<fraction>, every
// forward output `o` a gate suite gets back is scaled by (1 + fraction), so that tests can prove the
// gate catches a wrong kernel. The suites are linked with --wrap on the op forwards (CMakeLists.txt
// beside this file): each call reaches the library's own forward (__real_) and then the perturbation,
// so liblina_c.so and the lina CLI carry no hook. A perturbed call lists "fault-injected" among its
// kernels, so no measurement can pass for clean.
#include <cstdlib>
#include <string>
#include <vector>

#include "lina/chunk_delta.h"
#include "lina/chunk_gla.h"
#include "lina/error.h"
#include "lina/fused_recurrent.h"
#include "ops/common/host_io.h"

#ifdef LINA_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace lina::testing {
namespace {

// Read once per process; 0 when the variable is unset.
double fault_perturbation() {
  static const double value = [] {
    const char* env = std::getenv("LINA_FAULT_INJECT");
    if (env == nullptr || *env == '\0') return 0.0;
    const std::string s(env);
    const std::string prefix = "perturb:";
    if (s.rfind(prefix, 0) != 0) throw_invalid("LINA_FAULT_INJECT", "'" + s + "'", "perturb:<fraction>");
    return std::stod(s.substr(prefix.size()));
  }();
  return value;
}

RunInfo perturbed(const AttentionOutputs& out, RunInfo info) {
  const double f = fault_perturbation();
  if (f == 0.0) return info;
  const TensorView& o = out.o;
  const auto n = static_cast<std::size_t>(o.numel());
  if (o.device == Device::cpu) {
    for (std::size_t i = 0; i < n; ++i)
      detail::store_element(o, static_cast<std::int64_t>(i), detail::load_element(o, static_cast<std::int64_t>(i)) * (1.0 + f));
  } else {
#ifdef LINA_WITH_CUDA
    // Round trip through the host: slow, but this path only exists in toolkit tests.
    std::vector<std::byte> host(n * dtype_size(o.dtype));
    cudaDeviceSynchronize();
    cudaMemcpy(host.data(), o.data, host.size(), cudaMemcpyDeviceToHost);
    const TensorView h = TensorView::contiguous(host.data(), o.dtype, o.shape);
    for (std::size_t i = 0; i < n; ++i)
      detail::store_element(h, static_cast<std::int64_t>(i), detail::load_element(h, static_cast<std::int64_t>(i)) * (1.0 + f));
    cudaMemcpy(o.data, host.data(), host.size(), cudaMemcpyHostToDevice);
#endif
  }
  info.kernels.push_back("fault-injected");
  return info;
}

}  // namespace
}  // namespace lina::testing

// The linker's names for the wrapped forwards (-Wl,--wrap=<mangled name of lina::chunk_*_forward>).
#define LINA_WRAP(op, Args, mangled)                                                                        \
  lina::RunInfo real_##op(const lina::Args&, const lina::AttentionOutputs&, lina::ForwardMode,              \
                          const lina::ExecOptions&) asm("__real_" mangled);                                \
  lina::RunInfo wrap_##op(const lina::Args& a, const lina::AttentionOutputs& out, lina::ForwardMode mode,   \
                          const lina::ExecOptions& opts) asm("__wrap_" mangled);                           \
  lina::RunInfo wrap_##op(const lina::Args& a, const lina::AttentionOutputs& out, lina::ForwardMode mode,   \
                          const lina::ExecOptions& opts) {                                                  \
    return lina::testing::perturbed(out, real_##op(a, out, mode, opts));                                    \
  }

LINA_WRAP(chunk_gla, ChunkGlaArgs, "_ZN4lina17chunk_gla_forwardERKNS_12ChunkGlaArgsERKNS_16AttentionOutputsENS_11ForwardModeERKNS_11ExecOptionsE")
LINA_WRAP(chunk_kda, ChunkKdaArgs, "_ZN4lina17chunk_kda_forwardERKNS_12ChunkKdaArgsERKNS_16AttentionOutputsENS_11ForwardModeERKNS_11ExecOptionsE")
LINA_WRAP(chunk_gdn, ChunkGdnArgs, "_ZN4lina17chunk_gdn_forwardERKNS_12ChunkGdnArgsERKNS_16AttentionOutputsENS_11ForwardModeERKNS_11ExecOptionsE")

// The decode forwards (no ForwardMode): the same perturbation of o.
#define LINA_WRAP_DECODE(op, Args, mangled)                                                                           \
  lina::RunInfo real_##op(const lina::Args&, const lina::AttentionOutputs&, const lina::ExecOptions&) asm("__real_" mangled); \
  lina::RunInfo wrap_##op(const lina::Args& a, const lina::AttentionOutputs& out, const lina::ExecOptions& opts)             \
      asm("__wrap_" mangled);                                                                                         \
  lina::RunInfo wrap_##op(const lina::Args& a, const lina::AttentionOutputs& out, const lina::ExecOptions& opts) {           \
    return lina::testing::perturbed(out, real_##op(a, out, opts));                                                    \
  }

LINA_WRAP_DECODE(fused_recurrent_gla, FusedRecurrentGlaArgs, "_ZN4lina27fused_recurrent_gla_forwardERKNS_21FusedRecurrentGlaArgsERKNS_16AttentionOutputsERKNS_11ExecOptionsE")
LINA_WRAP_DECODE(fused_recurrent_kda, FusedRecurrentKdaArgs, "_ZN4lina27fused_recurrent_kda_forwardERKNS_21FusedRecurrentKdaArgsERKNS_16AttentionOutputsERKNS_11ExecOptionsE")
LINA_WRAP_DECODE(fused_recurrent_gdn, FusedRecurrentGdnArgs, "_ZN4lina27fused_recurrent_gdn_forwardERKNS_21FusedRecurrentGdnArgsERKNS_16AttentionOutputsERKNS_11ExecOptionsE")
