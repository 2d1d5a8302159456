// CUDA build: the backend is compiled in (its counterpart without nvcc is ops/core/cuda_absent.cpp).
// Every op's forward and backward entry points are defined under ops/<op>/cuda/.
#include "ops/common/backends.h"

namespace lina::detail::cuda {

bool compiled() { return true; }

}  // namespace lina::detail::cuda
