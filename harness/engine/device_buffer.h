// RAII device memory for the harness (cudaMalloc / cudaFree), with live and peak byte counters so
// that a run can report what the harness itself holds. Without CUDA every allocation refuses.
#pragma once
#include <cstddef>
#include <functional>

#include "lina/tensor.h"

namespace lina::harness {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  std::size_t size() const { return bytes_; }
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;
  void fill_bytes(int value);
  // Device-to-device copy of `src` (same size), ordered on `stream` (a cudaStream_t); with a null
  // stream the copy has finished on return.
  void copy_from(const DeviceBuffer& src, void* stream);

  static std::size_t live_bytes();

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// A contiguous device tensor: a buffer plus its dtype and shape.
struct DeviceTensor {
  DeviceBuffer buffer;
  DType dtype = DType::f32;
  Shape shape;
  static DeviceTensor like(const HostTensor& h);       // uninitialised, same dtype and shape
  static DeviceTensor from_host(const HostTensor& h);  // copy
  static DeviceTensor empty(DType dtype, const Shape& shape);
  HostTensor to_host() const;
  TensorView view(int device_index = 0) const;
};

// Device memory in use (cudaMemGetInfo: total - free), or 0 without CUDA.
std::size_t device_used_bytes();

}  // namespace lina::harness

namespace lina::harness {
// Runs fn once (synchronised) and returns the device memory it took beyond what was allocated
// before: the larger of the stream-ordered pool's high-water mark (cudaMallocAsync temporaries)
// and the growth of cudaMemGetInfo's used bytes (cudaMalloc kept past the call). Temporaries
// taken with cudaMalloc and freed inside the call are not visible to either.
std::size_t probe_peak_memory(const std::function<void()>& fn, void* stream);
}  // namespace lina::harness
