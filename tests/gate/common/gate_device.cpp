#include "gate_device.h"

#include <stdexcept>
#include <string>

#ifdef LINA_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace lina::gate {

#ifdef LINA_WITH_CUDA
namespace {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
}  // namespace

DeviceTensor::DeviceTensor(const HostTensor& h) : dtype_(h.dtype()), shape_(h.shape()), bytes_(h.nbytes()) {
  check(cudaMalloc(&ptr_, bytes_ ? bytes_ : 1), "cudaMalloc");
  if (bytes_) check(cudaMemcpy(ptr_, h.data(), bytes_, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}
DeviceTensor::~DeviceTensor() {
  if (ptr_) cudaFree(ptr_);
}
void DeviceTensor::copy_to(HostTensor& h) const {
  if (h.nbytes() != bytes_) throw std::logic_error("DeviceTensor::copy_to: size mismatch");
  if (bytes_) check(cudaMemcpy(h.data(), ptr_, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}
void device_synchronize() { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }
#else
DeviceTensor::DeviceTensor(const HostTensor& h) : dtype_(h.dtype()), shape_(h.shape()), bytes_(h.nbytes()) {
  throw std::runtime_error("this build has no CUDA backend");
}
DeviceTensor::~DeviceTensor() = default;
void DeviceTensor::copy_to(HostTensor&) const { throw std::runtime_error("this build has no CUDA backend"); }
void device_synchronize() {}
#endif

TensorView DeviceTensor::view() const { return TensorView::contiguous(ptr_, dtype_, shape_, Device::cuda, 0); }

}  // namespace lina::gate
