// A failed CUDA runtime call as lina::Error(runtime, "cuda") naming the call; the sticky last error is
// cleared first so that the next call does not report it again.
#pragma once
#ifdef LINA_WITH_CUDA
#include <cuda_runtime_api.h>

#include <string>

#include "lina/error.h"

namespace lina::harness {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(ErrorCode::runtime, "cuda", std::string(what) + ": " + cudaGetErrorString(e));
  }
}

}  // namespace lina::harness
#endif
