// Device copies of host tensors for the CUDA gate cases (cudaMalloc / cudaMemcpy). In builds
// without CUDA the constructor throws; the CUDA cases skip before reaching it.
#pragma once
#include "lina/tensor.h"

namespace lina::gate {

class DeviceTensor {
 public:
  explicit DeviceTensor(const HostTensor& h);  // copies h to the device
  ~DeviceTensor();
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  TensorView view() const;
  void copy_to(HostTensor& h) const;  // same dtype and shape

 private:
  void* ptr_ = nullptr;
  DType dtype_;
  Shape shape_;
  std::size_t bytes_ = 0;
};

void device_synchronize();

}  // namespace lina::gate
