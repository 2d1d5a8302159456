// Small host <-> device helpers used by validation; CUDA runtime only when the backend is built.
#include <cstring>

#include "lina/error.h"
#include "lina/version.h"
#include "ops/common/host_io.h"
#include "ops/common/problem.h"

#ifdef LINA_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace lina {

bool cuda_backend_compiled() {
#ifdef LINA_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#ifdef LINA_WITH_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
#else
  return 0;
#endif
}

namespace detail {

std::vector<std::int64_t> read_index_tensor(const TensorView& t) {
  const auto n = static_cast<std::size_t>(t.numel());
  std::vector<std::byte> host(n * dtype_size(t.dtype));
  if (t.device == Device::cpu) {
    if (!host.empty()) std::memcpy(host.data(), t.data, host.size());
  } else {
#ifdef LINA_WITH_CUDA
    if (cudaMemcpy(host.data(), t.data, host.size(), cudaMemcpyDeviceToHost) != cudaSuccess) {
      (void)cudaGetLastError();
      throw Error(ErrorCode::runtime, "cu_seqlens", "argument `cu_seqlens`: could not be read from the device");
    }
#else
    throw_unsupported("cu_seqlens", "a cuda tensor", "a host tensor (no CUDA backend in this build)");
#endif
  }
  const TensorView hv = TensorView::contiguous(host.data(), t.dtype, t.shape);
  std::vector<std::int64_t> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::int64_t>(load_element(hv, static_cast<std::int64_t>(i)));
  return out;
}

}  // namespace detail
}  // namespace lina
