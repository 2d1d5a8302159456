// Scratch allocation for the CUDA kernels from lina's per-device pool (include/lina/workspace.h).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace lina::detail::cuda_util {

// Stream-ordered: the memory is usable by work enqueued on `stream` after this call, and is returned
// by workspace_free on the same stream. `what` names the buffer in error messages. bytes == 0 -> nullptr.
void* workspace_alloc(std::size_t bytes, cudaStream_t stream, const char* what);
void workspace_free(void* p, cudaStream_t stream, const char* what);

template <class T>
T* workspace_alloc_as(std::size_t count, cudaStream_t stream, const char* what) {
  return static_cast<T*>(workspace_alloc(count * sizeof(T), stream, what));
}

}  // namespace lina::detail::cuda_util
