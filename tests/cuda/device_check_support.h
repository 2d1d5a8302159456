// Device buffers and CUDA error checks shared by the standalone check programs in tests/cuda/
// (built for the GPU machine, not ctests).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "lina/tensor.h"

namespace lina_test {

// A CUDA error ends the check program (exit 3): nothing after it can be trusted.
inline void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::printf("CUDA error %s: %s\n", what, cudaGetErrorString(e));
    std::exit(3);
  }
}

// Raw device bytes (at least 16, so that empty tensors still have a valid pointer).
struct DevBuf {
  void* p = nullptr;
  std::size_t n = 0;
  DevBuf() = default;
  explicit DevBuf(std::size_t bytes) : n(bytes) { ck(cudaMalloc(&p, bytes ? bytes : 16), "cudaMalloc"); }
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

// A device tensor with its lina view; poison() fills it with NaN bits (bf16 and f32) so that a
// partial write fails the check.
struct DTensor {
  void* p = nullptr;
  lina::TensorView view;
  DTensor() = default;
  DTensor(lina::DType dt, lina::Shape s) {
    const std::size_t bytes = std::max<std::size_t>(1, static_cast<std::size_t>(s.numel()) * lina::dtype_size(dt));
    ck(cudaMalloc(&p, bytes), "cudaMalloc");
    view = lina::TensorView::contiguous(p, dt, s, lina::Device::cuda, 0);
  }
  DTensor(const DTensor&) = delete;
  DTensor& operator=(const DTensor&) = delete;
  DTensor(DTensor&& o) noexcept : p(o.p), view(o.view) { o.p = nullptr; }
  DTensor& operator=(DTensor&& o) noexcept {
    std::swap(p, o.p);
    std::swap(view, o.view);
    return *this;
  }
  ~DTensor() {
    if (p) cudaFree(p);
  }
  std::size_t bytes() const { return static_cast<std::size_t>(view.numel()) * lina::dtype_size(view.dtype); }
  void poison() const { ck(cudaMemset(p, 0xFF, bytes()), "poison"); }
};

}  // namespace lina_test
