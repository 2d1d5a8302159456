#include "ops/common/fault_injection.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "lina/error.h"
#include "ops/common/host_io.h"

#ifdef LINA_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace lina::detail {

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

void apply_fault_injection(const AttentionOutputs& out, RunInfo& info) {
  const double f = fault_perturbation();
  if (f == 0.0) return;
  const TensorView& o = out.o;
  const auto n = static_cast<std::size_t>(o.numel());
  if (o.device == Device::cpu) {
    for (std::size_t i = 0; i < n; ++i)
      store_element(o, static_cast<std::int64_t>(i), load_element(o, static_cast<std::int64_t>(i)) * (1.0 + f));
  } else {
#ifdef LINA_WITH_CUDA
    // Round trip through the host: slow, but this path only exists in toolkit tests.
    std::vector<std::byte> host(n * dtype_size(o.dtype));
    cudaDeviceSynchronize();
    cudaMemcpy(host.data(), o.data, host.size(), cudaMemcpyDeviceToHost);
    const TensorView h = TensorView::contiguous(host.data(), o.dtype, o.shape);
    for (std::size_t i = 0; i < n; ++i)
      store_element(h, static_cast<std::int64_t>(i), load_element(h, static_cast<std::int64_t>(i)) * (1.0 + f));
    cudaMemcpy(o.data, host.data(), host.size(), cudaMemcpyHostToDevice);
#endif
  }
  info.kernels.push_back("fault-injected");
}

}  // namespace lina::detail
